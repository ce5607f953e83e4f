"""`htcpool bench schedd`: the schedd's job queue at scale — submit, restart, queries, memory.

A pool of a collector and a schedd only (no negotiator, so every job stays idle). One
`queue N` of zero-length jobs is submitted (the figure is the Submit call's wall time:
the schedd answers once the cluster is on disk); then a query of every job (whole ads),
and one with a projection (what `htcpool q -af` asks for), each read as it streams in,
while the schedd's resident set is sampled; then the schedd is killed (SIGKILL) and
started again, and the figure is the time it reports for replaying its job queue log,
beside the wall time until it serves again. Peak RSS is the schedd's VmHWM before the
kill, divided by the number of jobs for the per-job figure.

Goals (issue 14), printed as ratios: submit and replay of 100,000 jobs in 3 s each, a
query of every job that grows the schedd's RSS by at most 10 %, and 2 KB of peak RSS
per idle job.
"""
from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from daemons.cli.client import wait_for
from daemons.cli.pool import LocalPool, PoolError
from daemons.core.config import ConfigError
from daemons.pb.htcpool import schedd_pb2

KEEP_ENV = "HTCPOOL_BENCH_KEEP"
GOALS = {"submit_s": 3.0, "replay_s": 3.0, "query_rss_growth_pct": 10.0, "peak_rss_kb_per_job": 2.0}

CONFIG = """\
# htcpool bench schedd: a collector and a schedd; nothing runs the jobs
MAX_JOBS_PER_SUBMISSION = {jobs}
MAX_JOBS_PER_OWNER = {jobs}
SCHEDD_QUERY_MAX_WORKTIME = 0
"""

SUBMIT = """\
universe = vanilla
executable = /bin/sleep
arguments = 0
request_memory = 128
queue {jobs}
"""

_REPLAYED = re.compile(r"job queue (.*): (\d+) job\(s\) restored from (\d+) log entries in ([0-9.]+) s"
                       r"(?: \(([0-9.]+) s of CPU\))?")


class BenchFailed(RuntimeError):
    pass


def rss_kb(pid: int, field: str = "VmRSS") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class RssSampler:
    """The highest VmRSS of a process while it runs (a thread sampling /proc every 10 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = rss_kb(pid) or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            v = rss_kb(self.pid)
            if v is not None:
                self.peak_kb = max(self.peak_kb, v)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        v = rss_kb(self.pid)
        if v is not None:
            self.peak_kb = max(self.peak_kb, v)


async def _query(c, pid: int, projection: list[str]) -> dict[str, Any]:
    """Stream every job's ad; count them as they arrive (the client parses nothing)."""
    stub = await c.schedd()
    before = rss_kb(pid) or 0
    n = size = 0
    t0 = time.perf_counter()
    with RssSampler(pid) as rss:
        async for chunk in stub.Query(schedd_pb2.QueryJobsRequest(projection=projection), timeout=600.0):
            n += len(chunk.ads)
            size += sum(len(a.text) for a in chunk.ads)
    wall = time.perf_counter() - t0
    return {"ads": n, "wall_s": round(wall, 3), "rss_before_mb": round(before / 1024, 1),
            "rss_peak_mb": round(rss.peak_kb / 1024, 1),
            "rss_growth_pct": round(100.0 * (rss.peak_kb - before) / before, 1) if before else None,
            "bytes_per_ad": round(size / n) if n else 0}


def _replay_line(log_text: str, jobs_expected: int) -> tuple[int, int, float, float | None] | None:
    found = [f for f in _REPLAYED.findall(log_text) if int(f[1]) == jobs_expected]
    if not found:
        return None
    _, jobs, entries, seconds, cpu = found[-1]
    return int(jobs), int(entries), float(seconds), float(cpu) if cpu else None


def cpu_s(pid: int) -> float:
    """User + system CPU time of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


async def _run(pool: LocalPool, n: int, emit) -> dict[str, Any]:
    r: dict[str, Any] = {"jobs": n}
    schedd = pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_for(lambda: c.ads("Scheduler", projection=["Name"]), timeout_s=60.0,
                       what="the schedd's ad in the collector")
        rss0 = rss_kb(schedd.pid) or 0
        r["rss_empty_mb"] = round(rss0 / 1024, 1)
        t0, cpu0 = time.perf_counter(), cpu_s(schedd.pid)
        with RssSampler(schedd.pid) as during_submit:
            cluster, count = await c.submit(SUBMIT.format(jobs=n), "bench-schedd.sub", getpass.getuser())
        r["submit_s"] = round(time.perf_counter() - t0, 3)
        r["submit_cpu_s"] = round(cpu_s(schedd.pid) - cpu0, 3)
        if count != n:
            raise BenchFailed(f"the schedd accepted {count} job(s), not {n}")
        r["rss_after_submit_mb"] = round((rss_kb(schedd.pid) or 0) / 1024, 1)
        r["rss_peak_submit_mb"] = round(during_submit.peak_kb / 1024, 1)
        emit(f"submitted {n:,} jobs (cluster {cluster}) in {r['submit_s']:.2f} s")
        log = Path(pool.state_dir) / "spool" / "job_queue.log"
        if not log.exists():
            found = list(Path(pool.state_dir).rglob("job_queue.log"))
            log = found[0] if found else log
        r["log_bytes_per_job"] = round(log.stat().st_size / n) if log.exists() else None

        r["query_all"] = await _query(c, schedd.pid, [])
        emit(f"query of every job: {r['query_all']['ads']:,} ads in {r['query_all']['wall_s']:.2f} s, "
             f"schedd RSS {r['query_all']['rss_before_mb']} -> {r['query_all']['rss_peak_mb']} MB")
        r["query_af"] = await _query(c, schedd.pid, ["ClusterId", "ProcId", "JobStatus", "Owner"])
        emit(f"query with a projection (q -af): {r['query_af']['ads']:,} ads in {r['query_af']['wall_s']:.2f} s")
        for q in (r["query_all"], r["query_af"]):
            if q["ads"] != n:
                raise BenchFailed(f"a query returned {q['ads']:,} job(s), not {n:,}")
        r["peak_rss_mb"] = round((rss_kb(schedd.pid, "VmHWM") or 0) / 1024, 1)
        r["peak_rss_kb_per_job"] = round((rss_kb(schedd.pid, "VmHWM") or 0) / n, 2)
        r["rss_kb_per_job_over_empty"] = round(((rss_kb(schedd.pid) or 0) - rss0) / n, 2)

    # ---- a crash and a restart: replay the log -------------------------------------------
    await asyncio.to_thread(pool.kill, "schedd", signal.SIGKILL)
    t0 = time.perf_counter()
    await asyncio.to_thread(pool.restart, "schedd", 600.0)   # (a slow replay is a figure, not a failure)
    r["restart_wall_s"] = round(time.perf_counter() - t0, 3)
    schedd = pool.daemons["schedd"]
    # The restarted schedd serves only after its replay: its log already says how long it took.
    log = Path(pool.state_dir) / "log" / "SchedLog"
    replay = _replay_line(log.read_text(errors="replace") if log.exists() else "", n)
    if replay is None:
        raise BenchFailed(f"the restarted schedd did not log that it restored {n:,} jobs (see {log})")
    _, entries, seconds, cpu = replay
    r["replay_s"] = seconds
    r["replay_cpu_s"] = cpu
    r["replay_log_entries"] = entries
    r["peak_rss_after_restart_mb"] = round((rss_kb(schedd.pid, "VmHWM") or 0) / 1024, 1)
    emit(f"restart after SIGKILL: {n:,} jobs replayed from {entries:,} log entries in {seconds:.2f} s "
         f"({r['restart_wall_s']:.2f} s until it served)")
    async with pool.client() as c:
        after = await _query(c, schedd.pid, ["ProcId"])
    if after["ads"] != n:
        raise BenchFailed(f"after the restart a query returned {after['ads']:,} job(s), not {n:,}")
    r["query_rss_growth_pct"] = r["query_all"]["rss_growth_pct"]
    r["ratios"] = {k: round(r[k] / goal, 2) for k, goal in GOALS.items() if isinstance(r.get(k), (int, float))}
    return r


def _table(r: dict[str, Any]) -> list[str]:
    rows = [("submit (one queue N, durable on return)", f"{r['submit_s']:.2f} s", "submit_s", "3 s"),
            ("  the schedd's CPU time in it", f"{r['submit_cpu_s']:.2f} s", "", ""),
            ("replay after SIGKILL (schedd's own figure)", f"{r['replay_s']:.2f} s", "replay_s", "3 s"),
            ("  its CPU time", f"{r['replay_cpu_s'] or 0:.2f} s", "", ""),
            ("  restart until serving (wall)", f"{r['restart_wall_s']:.2f} s", "", ""),
            ("  peak RSS of the restarted schedd", f"{r['peak_rss_after_restart_mb']:.0f} MB", "", ""),
            ("query of every job (whole ads)", f"{r['query_all']['wall_s']:.2f} s", "", ""),
            ("  schedd RSS growth during it", f"{r['query_all']['rss_growth_pct']} %", "query_rss_growth_pct",
             "10 %"),
            ("query with a projection (q -af)", f"{r['query_af']['wall_s']:.2f} s", "", ""),
            ("schedd peak RSS per job", f"{r['peak_rss_kb_per_job']:.2f} KB", "peak_rss_kb_per_job", "2 KB"),
            ("  peak RSS", f"{r['peak_rss_mb']:.0f} MB", "", ""),
            ("  RSS per job over an empty schedd", f"{r['rss_kb_per_job_over_empty']:.2f} KB", "", ""),
            ("job queue log per job", f"{r['log_bytes_per_job']} B", "", "")]
    out = [f"schedd with {r['jobs']:,} idle jobs:",
           f"  {'figure':<44}{'value':>12}   {'goal':>6}   ratio"]
    for name, value, key, goal in rows:
        ratio = r["ratios"].get(key) if key else None
        out.append(f"  {name:<44}{value:>12}   {goal:>6}   {'' if ratio is None else f'{ratio:.2f}'}")
    return out


def bench_schedd(args: argparse.Namespace) -> int:
    n = args.jobs
    if n < 1:
        print("htcpool bench schedd: --jobs must be at least 1", file=sys.stderr)
        return 2
    keep = os.environ.get(KEEP_ENV, "") not in ("", "0")
    state = Path(tempfile.mkdtemp(prefix="htcpool-bench-schedd-"))
    config = state / "condor_config"
    config.write_text(CONFIG.format(jobs=n))

    def emit(line: str) -> None:
        print(line, flush=True)

    emit(f"htcpool bench schedd: state in {state}{'' if keep else f' (set {KEEP_ENV}=1 to keep it)'}")
    pool = LocalPool(state / "pool", config, machines=0, roles=("collector", "schedd"))
    result: dict[str, Any] | None = None
    failure = ""
    try:
        pool.start()
        result = asyncio.run(_run(pool, n, emit))
    except (BenchFailed, PoolError, ConfigError, TimeoutError) as e:
        failure = str(e)
    except Exception as e:  # an RPC failure, most likely: say what, keep the traceback out of the table
        failure = f"{type(e).__name__}: {e}"
    finally:
        pool.stop()
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    if failure or result is None:
        print(f"htcpool bench schedd: FAILED: {failure or 'no result'}", file=sys.stderr)
        return 1
    emit("")
    for line in _table(result):
        emit(line)
    if args.json:
        print(json.dumps(result))
    return 0
