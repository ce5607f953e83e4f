"""`htcpool bench NAME`: performance figures of local pools of real processes.

This module holds what the benches share (process figures from /proc, status pages,
log problems, timing) and the table of benches; each bench is a module of its own
(bench_throughput, bench_negotiator, bench_scale, ...), loaded when it runs. Set
HTCPOOL_BENCH_KEEP=1 to keep a bench's state directory (logs, job queue log, history)
for inspection.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from daemons.cli.pool import LocalPool, PoolError  # noqa: F401 (the benches' import)
from daemons.cli.procs import peak_rss_mb  # noqa: F401 (the benches' import)

KEEP_ENV = "HTCPOOL_BENCH_KEEP"


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


# ---- autocluster ------------------------------------------------------------------------
# A significant list like a heterogeneous pool's (what the experiment's pool sends).
AUTOCLUSTER_SIGNIFICANT = ("Department", "ImageSize", "Offline", "Owner", "RequestCpus", "RequestDisk",
                           "RequestMemory", "TotalJobRuntime", "WantGPU")


def bench_autocluster(args: argparse.Namespace) -> int:
    """Schedd-side: ids for N fresh jobs, and the cost of re-clustering after one SetAttribute.

    The jobs are the experiment's workload scaled up (its 12 templates, 85 users), built
    by the schedd's own submit code into a real JobQueue; the clock is perf_counter.
    """
    import random as _random

    from daemons.cli.experiments.autocluster import workload
    from daemons.schedd import txlog
    from daemons.schedd.autocluster import Autoclusterer
    from daemons.schedd.jobqueue import JobQueue
    from daemons.schedd.submit import SubmitContext, build_jobs, parse_submit

    n = args.jobs
    if n < 1:
        print("htcpool bench autocluster: --jobs must be at least 1", file=sys.stderr)
        return 2
    queue = JobQueue("bench.example")
    t0 = time.perf_counter()
    users = workload(args.seed, jobs=n)  # the trace's 85 users and 372 job kinds, more jobs per kind
    cluster = 0
    for u in users:
        cluster += 1
        procs = build_jobs(parse_submit(u.submit, f"{u.user}.sub"),
                           SubmitContext(owner=u.user, uid_domain="bench.example", cluster_id=cluster, now=0))
        queue.apply(queue.submit_lines(procs, cluster))
    build_s = time.perf_counter() - t0
    jobs = list(queue.jobs.values())

    ac = Autoclusterer(canon=queue.canonical)
    ac.update_negotiator_attrs(AUTOCLUSTER_SIGNIFICANT)
    t0 = time.perf_counter()
    ids = [ac.assign(j) for j in jobs]
    assign_s = time.perf_counter() - t0
    autoclusters = len(set(ids))
    cached_t0 = time.perf_counter()
    for j in jobs:
        ac.assign(j)
    cached_s = time.perf_counter() - cached_t0

    # One SetAttribute of a significant attribute, then the job's id again: HTCondor's
    # invalidation path (the id cache is dropped, the signature rebuilt).
    rng = _random.Random(args.seed)
    sample = [rng.choice(jobs) for _ in range(min(20_000, len(jobs)))]
    costs = []
    for j in sample:
        mem = j.attrs.get("RequestMemory", "128")
        t = time.perf_counter()
        queue.apply([txlog.op_set(j.id, "RequestMemory", str(int(mem) + 1) if mem.isdigit() else "256")])
        ac.assign(j)
        costs.append(time.perf_counter() - t)
    recluster_us = statistics.mean(costs) * 1e6
    result = {
        "jobs": len(jobs),
        "autoclusters": autoclusters,
        "jobs_per_s": round(len(jobs) / assign_s),
        "recluster_us": round(recluster_us, 2),
        "recluster_p50_us": round(statistics.median(costs) * 1e6, 2),
        "assign_s": round(assign_s, 3),
        "cached_lookup_ns": round(cached_s / len(jobs) * 1e9, 1),
        "build_queue_s": round(build_s, 2),
        "significant_attributes": len(ac.base_list()),
        "seed000_jobs_per_s": round(5831 / 4.7, 1),
    }
    print(f"autocluster ids for {len(jobs)} fresh jobs ({len(users)} users, {autoclusters} autoclusters, "
          f"{result['significant_attributes']} significant attributes before expansion):")
    print(f"  {'jobs per second':<44}{result['jobs_per_s']:>12,}")
    print(f"  {'  (seed 000: 5,831 jobs in 4.7 s)':<44}{result['seed000_jobs_per_s']:>12,}"
          f"   x{result['jobs_per_s'] / result['seed000_jobs_per_s']:,.0f}")
    print(f"  {'id lookup when cached':<44}{result['cached_lookup_ns']:>12} ns/job")
    print(f"  {'re-cluster after one SetAttribute (mean/p50)':<44}{result['recluster_us']:>12} / "
          f"{result['recluster_p50_us']} us")
    if args.json:
        print(json.dumps(result))
    return 0


def bench_throughput(args: argparse.Namespace) -> int:
    from daemons.cli.bench_throughput import bench_throughput as run
    return run(args)


def bench_negotiator(args: argparse.Namespace) -> int:
    from daemons.cli.bench_negotiator import bench_negotiator as run
    return run(args)


def bench_security(args: argparse.Namespace) -> int:
    from daemons.cli.bench_security import bench_security as run
    return run(args)


def bench_netns(args: argparse.Namespace) -> int:
    from daemons.cli.bench_netns import bench_netns as run
    return run(args)


def bench_fuzz(args: argparse.Namespace) -> int:
    from daemons.cli.bench_fuzz import bench_fuzz as run
    return run(args)


def bench_scale(args: argparse.Namespace) -> int:
    from daemons.cli.bench_scale import bench_scale as run
    return run(args)


def bench_schedd(args: argparse.Namespace) -> int:
    from daemons.cli.bench_schedd import bench_schedd as run
    return run(args)


def bench_startd(args: argparse.Namespace) -> int:
    from daemons.cli.bench_startd import bench_startd as run
    return run(args)


BENCHES: dict[str, Callable[[argparse.Namespace], int]] = {"throughput": bench_throughput,
                                                          "autocluster": bench_autocluster,
                                                          "negotiator": bench_negotiator,
                                                          "security": bench_security,
                                                          "netns": bench_netns,
                                                          "fuzz": bench_fuzz,
                                                          "scale": bench_scale,
                                                          "schedd": bench_schedd,
                                                          "startd": bench_startd}
