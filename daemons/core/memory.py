"""Giving the C allocator's freed memory back to the system (glibc's mmap threshold).

glibc serves a large allocation (128 KB and more) with a mapping of its own, returned to
the system when freed, but each such block freed raises the threshold to its size (up to
32 MB): after the first large transient buffer (a gRPC message, a protobuf arena), later
ones come from the heap, long-lived small allocations made meanwhile pin the heap's top,
and the freed space stays resident. A startd that had answered keepalives naming 48,000
claims held 20 MB of it free (mallinfo2). A fixed threshold keeps large blocks mapped,
each given back when freed; it costs a mapping per large block, which a startd (small
messages, a few large ones) does not notice.
"""
from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3            # mallopt's parameter (malloc.h)
MMAP_THRESHOLD_BYTES = 128 * 1024   # glibc's own initial threshold, kept


def fix_mmap_threshold(size: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, size))
