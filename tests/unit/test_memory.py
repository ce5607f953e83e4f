"""daemons/core/memory.py: a startd gives back what a burst of large buffers freed."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import ctypes, sys
from daemons.core.memory import fix_mmap_threshold
fixed = len(sys.argv) > 1
if fixed:
    assert fix_mmap_threshold()

def rss_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
# A large buffer freed (glibc then raises its threshold to its size, unless fixed) ...
big = libc.malloc(4 << 20); libc.memset(big, 1, 4 << 20); libc.free(big)
# ... then a burst of 1 MB buffers, smaller long-lived allocations made meanwhile, and the
# buffers freed (the long-lived blocks: 100 KB, too large for the free lists, from the top)
before = rss_kb()
burst, keep = [], []
for _ in range(16):
    b = libc.malloc(1 << 20); libc.memset(b, 1, 1 << 20)
    burst.append(b)
    keep.append(libc.malloc(100 << 10))
for b in burst:
    libc.free(b)
print(rss_kb() - before)
"""


def _growth_kb(*args):
    out = subprocess.run([sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, cwd=ROOT,
                         timeout=60, check=True)
    return int(out.stdout.strip())


def test_freed_large_buffers_are_given_back_with_the_threshold_fixed():
    # Without: the 1 MB buffers come from the heap, pinned by the small blocks after them.
    assert _growth_kb() > 8 * 1024
    assert _growth_kb("fixed") < 2 * 1024
