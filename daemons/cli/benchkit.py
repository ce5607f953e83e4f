"""What the benches share: process figures from /proc, daemons' status pages, the
warnings and errors in a pool's logs, timing. Each bench is a module of its own
(bench_throughput, bench_negotiator, bench_scale, ...); daemons/cli/bench.py is their
table. Set HTCPOOL_BENCH_KEEP=1 to keep a bench's state directory (logs, job queue log,
history) for inspection.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from daemons.cli.pool import LocalPool

KEEP_ENV = "HTCPOOL_BENCH_KEEP"
MAX_REPEAT = 20          # --repeat N: at most this many runs of a bench's measurement


# ---- process figures from /proc ------------------------------------------------------
def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def daemon_cpu(pool: LocalPool) -> dict[str, float]:
    out = {}
    for key, d in pool.daemons.items():
        t = cpu_seconds(d.pid)
        if t is not None:
            out[key] = t
    return out


def status_page(url: str, path: str = "/status", read: Callable[[bytes], Any] = json.loads) -> Any:
    """A daemon's status page (`path` of its status server) read by `read`; {} if it
    cannot be had."""
    if not url:
        return {}
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=5.0) as r:
            return read(r.read())
    except (OSError, ValueError):
        return {}


def log_problems(state_dir: Path, show: int = 3) -> dict[str, tuple[int, list[str]]]:
    """file -> (count, first few) of warning, error and traceback lines in the daemons' logs."""
    out: dict[str, tuple[int, list[str]]] = {}
    log_dir = state_dir / "log"
    if not log_dir.is_dir():
        return out
    for path in sorted(log_dir.iterdir()):
        if not path.is_file():
            continue
        found = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "WARNING:" in line or "ERROR:" in line or "CRITICAL:" in line or line.startswith("Traceback"):
                    found.append(line.rstrip())
        if found:
            out[path.name] = (len(found), found[:show])
    return out


def log_problem_lines(problems: dict[str, tuple[int, list[str]]], indent: str = "  ") -> list[str]:
    """log_problems' findings as lines to print: each log's count, then its first lines."""
    out = []
    for name, (n, first) in problems.items():
        out.append(f"{indent}{name}: {n} line(s)")
        out.extend(f"{indent}  {line[:200]}" for line in first)
    return out


# ---- timing helpers ---------------------------------------------------------------------
async def time_calls(n: int, fn: Callable[[], Any], check: Callable[[Any], None] | None = None) -> list[float]:
    """Wall milliseconds of `n` sequential awaits of fn()."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await fn()
        out.append((time.perf_counter() - t0) * 1000.0)
        if check is not None:
            check(result)
    return out


def pool_time(pool: LocalPool, scale: float, wall: float | None = None) -> float:
    """The pool clock, as every daemon derives it (daemons/core/clock.py)."""
    w = time.time() if wall is None else wall
    return pool.epoch + (w - pool.epoch) * scale


class BenchFailed(RuntimeError):
    pass


def median_of_runs(runs: list[dict[str, Any]], figure: str, *, higher_is_better: bool = False) -> dict[str, Any]:
    """The run whose `figure` is the median of the runs' (--repeat); of an even number of
    runs, the worse of the middle two, so that repeating never flatters a figure."""
    ordered = sorted(runs, key=lambda r: r[figure])
    return ordered[(len(ordered) - 1) // 2 if higher_is_better else len(ordered) // 2]


def repeats_of(runs: list[dict[str, Any]], figures: tuple[str, ...]) -> dict[str, Any]:
    """A --repeat result's `repeats`: how many runs, and each named figure of every run, sorted."""
    return {"runs": len(runs), **{k: sorted(r[k] for r in runs) for k in figures}}
