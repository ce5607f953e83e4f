"""Sampling profiles of a pool's daemons with py-spy, for the benches' `--profile DIR`.

py-spy attaches to a running interpreter by its pid (root, or ptrace allowed), so the
daemons run unchanged. Each daemon gets one `py-spy record --format raw` (collapsed
stacks: `frame;frame;frame count` per line) for the measured part of a bench; the
summary is pure: which functions the samples were in (self) and under (inclusive).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RATE_HZ = 50            # samples per second: low enough not to load a busy 2-core machine
RATE_ENV = "HTCPOOL_PROFILE_HZ"   # another rate, for a short run that needs more samples


def rate_hz() -> int:
    """RATE_HZ, or HTCPOOL_PROFILE_HZ when set to a whole number from 1 to 1000."""
    text = os.environ.get(RATE_ENV, "")
    return int(text) if text.isdigit() and 1 <= int(text) <= 1000 else RATE_HZ
ATTACH_TIMEOUT_S = 15.0   # py-spy says "Sampling process" once attached; a loaded machine is slow
STOP_TIMEOUT_S = 30.0   # py-spy writes its file after SIGINT; a large profile takes a while


OTHER_THREAD = "Thread._bootstrap ("   # a stack that starts there is not the main thread's


class ProfilerMissing(RuntimeError):
    pass


def py_spy_path() -> str:
    """The py-spy next to this interpreter (a venv's), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    if here.exists():
        return str(here)
    found = shutil.which("py-spy")
    if found is None:
        raise ProfilerMissing("--profile needs py-spy: pip install py-spy (into the venv that runs htcpool)")
    return found


@dataclass(frozen=True)
class Row:
    function: str
    self_pct: float
    total_pct: float


def top_functions(folded: str, n: int = 15) -> tuple[int, list[Row]]:
    """(samples, the `n` functions with the most samples in them themselves), from py-spy's raw output.

    A frame reads `function (file:line)`; lines are dropped so one function is one row.
    Only the main thread counts (the event loop's; the others are gRPC's poller and
    executor threads, idle nearly always). Idle time is kept: an event loop waiting in
    `select` shows as such, which is the point when a daemon is said to be busy.
    """
    total = 0
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    for line in folded.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        if stack.startswith(OTHER_THREAD):
            continue
        count = int(count_text)
        total += count
        frames = [_function(f) for f in stack.split(";") if f]
        if not frames:
            continue
        self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
        for f in set(frames):
            incl_counts[f] = incl_counts.get(f, 0) + count
    if total == 0:
        return 0, []
    ranked = sorted(self_counts, key=lambda f: (-self_counts[f], f))[:n]
    return total, [Row(f, 100.0 * self_counts[f] / total, 100.0 * incl_counts[f] / total) for f in ranked]


def top_inclusive(folded: str, n: int = 15, skip: tuple[str, ...] = ()) -> list[Row]:
    """The `n` functions most often on the stack (inclusive), without the ever-present ones in `skip`."""
    total, rows = top_functions(folded, n=10**9)
    rows = [r for r in rows if not any(s in r.function for s in skip)]
    return sorted(rows, key=lambda r: (-r.total_pct, r.function))[:n]


def _function(frame: str) -> str:
    # "run_once (asyncio/base_events.py:1922)" -> "run_once (asyncio/base_events.py)"
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame.strip()
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    return f"{name} ({_short(path)})"


def _short(path: str) -> str:
    """A frame's file relative to what a reader knows: daemons/..., a package, or the stdlib."""
    for marker, keep in (("/daemons/", "daemons/"), ("/site-packages/", "")):
        i = path.rfind(marker)
        if i >= 0:
            return keep + path[i + len(marker):]
    i = path.find("/lib/python3")
    if i >= 0:
        return path[i + 1:].split("/", 2)[-1]    # lib/python3.11/asyncio/x.py -> asyncio/x.py
    return path


def format_top(key: str, folded: str, n: int = 12, hz: int = RATE_HZ) -> list[str]:
    total, rows = top_functions(folded, n)
    lines = [f"{key}: {total} samples at {hz} Hz (self % / inclusive %)"]
    for r in rows:
        lines.append(f"  {r.self_pct:5.1f} {r.total_pct:5.1f}  {r.function}")
    return lines


class Profiler:
    """One py-spy recorder per daemon, from start() until stop(); bounded either way."""

    def __init__(self, out_dir: Path, pids: dict[str, int], *, duration_s: int = 3600) -> None:
        self.out_dir = Path(out_dir)
        self.pids = pids
        self.duration_s = duration_s   # py-spy stops by itself then, should we never stop it
        self.procs: dict[str, subprocess.Popen] = {}
        self.files: dict[str, Path] = {}
        self.hz = rate_hz()

    def start(self) -> None:
        exe = py_spy_path()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for key, pid in self.pids.items():
            out = self.out_dir / f"{key}.folded"
            self.files[key] = out
            log = open(self.out_dir / f"{key}.py-spy.log", "w")
            self.procs[key] = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(self.hz),
                 "--duration", str(self.duration_s), "--nonblocking", "--idle", "-o", str(out)],
                stdout=log, stderr=subprocess.STDOUT)
            log.close()
        self._wait_sampling()

    def _wait_sampling(self) -> None:
        """Until every recorder says it samples: one stopped before it attached writes nothing."""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        waiting = set(self.procs)
        while waiting and time.monotonic() < deadline:
            for key in list(waiting):
                log = self.out_dir / f"{key}.py-spy.log"
                if self.procs[key].poll() is not None or "Sampling process" in log.read_text(errors="replace"):
                    waiting.discard(key)
            if waiting:
                time.sleep(0.05)

    def stop(self) -> dict[str, str]:
        """Stop every recorder; the collapsed stacks of each daemon that produced a file."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        out: dict[str, str] = {}
        for key, path in self.files.items():
            if path.exists() and os.path.getsize(path) > 0:
                out[key] = path.read_text()
        return out

    def report(self, emit, n: int = 12) -> dict[str, str]:
        stacks = self.stop()
        for key in self.pids:
            if key not in stacks:
                emit(f"{key}: no profile (see {self.out_dir / (key + '.py-spy.log')})")
                continue
            lines = format_top(key, stacks[key], n, self.hz)
            (self.out_dir / f"{key}.top.txt").write_text("\n".join(lines) + "\n")
            for line in lines:
                emit(line)
        return stacks
