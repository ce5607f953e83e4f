"""`htcpool bench throughput`: a pool of `--machines` emulated machines (one startd
process, one `--cpus`-core partitionable slot each) runs `--jobs` zero-length jobs of
one cluster; the figure is wall time from submit until the schedd has counted every job
completed (its history must then hold each job, completed, exactly once). Then, on the
same live pool, the wall cost of one collector update of one ad and of one query that
returns 1,000 slot ads, and each daemon's peak RSS.

The pool runs at a high TIME_SCALE (`--time-scale`, 1000 by default) so that pool-time
waits (negotiation interval, update intervals) cost little wall time and the figures
measure the daemons' own work. A scale the pool cannot keep up with shows as a LAGGED
run or as ads the collector dropped as stale (`collector_expired`); at 1,000 machines,
1000 is such a scale on two cores. Set HTCPOOL_BENCH_KEEP=1 to keep the state directory (logs, job queue log,
history) for inspection; its path is printed. `--repeat N` runs N times on fresh pools
and reports the median run (benchkit.median_of_runs): one run on a small shared machine
moves by more than most changes.
"""
from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from daemons.cli import lagreport
from daemons.cli.benchkit import (KEEP_ENV, MAX_REPEAT, BenchFailed, daemon_cpu, log_problem_lines, log_problems,
                                  median_of_runs, pool_time, repeats_of, status_page, time_calls)
from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool, PoolError
from daemons.cli.procs import peak_rss_mb
from daemons.cli.profiling import Profiler, ProfilerMissing
from daemons.core import ads
from daemons.core.config import ConfigError

TIME_SCALE = 1000.0                  # the default of --time-scale
NEGOTIATOR_INTERVAL_S = 60           # pool seconds: 60 ms of wall time at TIME_SCALE 1000
STARTUP_TIMEOUT_S = 120.0            # wall seconds for every machine's ads to reach the collector
JOBS_TIMEOUT_MIN_S = 300.0           # wall seconds for all jobs to complete (at least)
POLL_INTERVAL_S = 0.25               # polls of the schedd's completed-job counter
STALL_TIMEOUT_S = 60.0               # wall seconds without a new completion: the run is stuck
HISTORY_WAIT_S = 30.0                # wall seconds for the last counted completions to reach the history
AD_UPDATES = 300
QUERY_ADS = 1000
QUERY_REPEATS = 20
SYNTHETIC_HOST = "benchhost"
# Synthetic ads must outlive the benchmark: CLASSAD_LIFETIME (900 pool s) is 0.9 s of
# wall time at this scale.
SYNTHETIC_LIFETIME_S = 10 * 365 * 86400

THROUGHPUT_CONFIG = """\
# htcpool bench throughput: {machines} machines of {cpus} cores, one partitionable slot each
NUM_CPUS = {cpus}
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1

TIME_SCALE = {time_scale:g}
NEGOTIATOR_INTERVAL = {interval}
"""

THROUGHPUT_SUBMIT = """\
universe = vanilla
executable = /bin/sleep
arguments = 0
queue {jobs}
"""


def synthetic_slot_ad(index: int, *, my_type: str = "Machine", host: str = SYNTHETIC_HOST,
                      now: int = 0) -> dict[str, Any]:
    """A 40-attribute ad shaped like a startd's static slot ad, which no job can match.

    State "Owner" keeps the negotiator from ever considering it; START is false too.
    """
    name = f"bench-slot{index}@{host}"
    addr = "<127.0.0.1:1>"
    return {
        "MyType": my_type, "TargetType": "Job", "Name": name, "Machine": host,
        "SlotID": index, "SlotTypeID": 1, "SlotType": "Static",
        "Cpus": 1, "Memory": 2048, "Disk": 10485760,
        "TotalSlotCpus": 1, "TotalSlotMemory": 2048, "TotalSlotDisk": 10485760,
        "TotalCpus": 64, "TotalMemory": 131072, "TotalDisk": 671088640,
        "DetectedCpus": 64, "DetectedMemory": 131072,
        "State": "Owner", "Activity": "Idle",
        "EnteredCurrentState": now, "EnteredCurrentActivity": now,
        "Start": False, "Rank": 0.0, "SlotWeight": ads.Expr("Cpus"),
        "Requirements": ads.Expr("START"),
        "Arch": "X86_64", "OpSys": "LINUX", "OpSysAndVer": "AlmaLinux9",
        "UidDomain": host, "FileSystemDomain": host, "HasFileTransfer": True,
        "StartdIpAddr": addr, "MyAddress": addr,
        "MachineResources": "Cpus Memory Disk Swap",
        "LoadAvg": 0.0, "CondorLoadAvg": 0.0, "KeyboardIdle": 900,
        "CurrentRank": 0.0, "DaemonStartTime": now,
        "ClassAdLifetime": SYNTHETIC_LIFETIME_S,
    }



STATUS_NAMES = {1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held", 6: "transferring", 7: "suspended"}


def _expired_ads(status_url: str) -> int | None:
    """The collector's count of ads it has dropped as stale (its status page), if it says."""
    n = status_page(status_url).get("expired_total") if status_url else None
    return n if isinstance(n, int) else None


async def _left_over(c: PoolClient, cluster: int, show: int = 10) -> str:
    """What the schedd's queue still holds of the cluster, for a failure message."""
    try:
        left = await c.jobs(f"ClusterId == {cluster}", ["ProcId", "JobStatus", "RemoteHost"])
    except Exception as e:  # the message is about the jobs; a failed look must not hide it
        return f"the queue could not be read ({type(e).__name__})"
    parts = []
    for j in left[:show]:
        status = ads.get(j, "JobStatus")
        host = ads.get(j, "RemoteHost")
        parts.append(f"{cluster}.{ads.get(j, 'ProcId')} {STATUS_NAMES.get(status, status)}"
                     + (f" on {host}" if host else ""))
    more = f" and {len(left) - show} more" if len(left) > show else ""
    return f"still in the queue: {', '.join(parts) or 'nothing'}{more}"


async def _completed_history(c: PoolClient, cluster: int, n_jobs: int) -> list:
    """The cluster's history records once it holds all `n_jobs` (a completion is counted
    just before its record is committed); BenchFailed unless each job is there exactly
    once, completed."""
    fields = ["ProcId", "JobStatus", "JobCurrentStartDate", "CompletionDate", "LastRemoteHost"]
    deadline = time.monotonic() + HISTORY_WAIT_S
    while True:
        history = await c.jobs(f"ClusterId == {cluster}", fields, history=True)
        if len(history) >= n_jobs or time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_INTERVAL_S)
    procs = [ads.get(h, "ProcId") for h in history]
    if len(history) != n_jobs or len(set(procs)) != n_jobs or any(ads.get(h, "JobStatus") != 4 for h in history):
        twice = sorted({p for p in procs if procs.count(p) > 1})[:10]
        raise BenchFailed(f"the history holds {len(history)} record(s) of {len(set(procs))} job(s) for "
                          f"{n_jobs} jobs" + (f"; completed more than once: {twice}" if twice else ""))
    return history


# ---- throughput ----------------------------------------------------------------------------
async def _throughput(pool: LocalPool, args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, Any]:
    n_machines = args.machines
    result: dict[str, Any] = {}
    async with pool.client() as c:
        async def machines_seen() -> int:
            hosts = {str(ads.get(a, "Machine")) for a in await c.ads("Machine", projection=["Machine"])}
            return len(hosts) if len(hosts) >= n_machines else 0

        t0 = time.monotonic()
        await wait_for(machines_seen, timeout_s=STARTUP_TIMEOUT_S, interval_s=0.1,
                       what=f"{n_machines} machines' slot ads in the collector")
        await wait_for(lambda: c.ads("Scheduler", projection=["Name"]), timeout_s=STARTUP_TIMEOUT_S,
                       what="the schedd's ad in the collector")
        await wait_for(lambda: c.ads("Negotiator", projection=["Name"]), timeout_s=STARTUP_TIMEOUT_S,
                       what="the negotiator's ad in the collector")
        emit(f"pool ready: {n_machines} machines seen by the collector after {time.monotonic() - t0:.2f} s")

        # ---- jobs -------------------------------------------------------------------
        profiler = None
        if getattr(args, "profile", None):
            profiler = Profiler(Path(args.profile), {k: d.pid for k, d in pool.daemons.items()})
            await asyncio.to_thread(profiler.start)
            emit(f"profiling every daemon with py-spy into {args.profile}")
        try:
            await _throughput_jobs(pool, c, args, emit, result)
        finally:
            if profiler is not None:
                emit("")
                await asyncio.to_thread(profiler.report, emit)
                emit("")
        await _collector_figures(pool, c, result, time_scale_of(args))
    return result


async def _throughput_jobs(pool: LocalPool, c: PoolClient, args: argparse.Namespace,
                           emit: Callable[[str], None], result: dict[str, Any]) -> None:
    n_jobs, n_machines = args.jobs, args.machines
    scale = time_scale_of(args)
    cpu0 = daemon_cpu(pool)
    lag0 = await lagreport.take(c)
    collector_url = pool.daemons["collector"].info.get("status_url", "") if "collector" in pool.daemons else ""
    expired0 = _expired_ads(collector_url)
    submit_text = THROUGHPUT_SUBMIT.format(jobs=n_jobs)
    wall0 = time.monotonic()
    pool0 = pool_time(pool, scale)
    cluster, count = await c.submit(submit_text, "bench-throughput.sub", getpass.getuser())
    submit_s = time.monotonic() - wall0
    if count != n_jobs:
        raise BenchFailed(f"the schedd accepted {count} job(s), not {n_jobs}")
    emit(f"submitted {count} jobs (cluster {cluster}) in {submit_s * 1000:.0f} ms; waiting for completion")

    progress: dict[str, Any] = {"completed": 0, "polls": 0, "poll_ms": [], "changed": time.monotonic()}
    last_report = [time.monotonic()]

    schedd_url = pool.daemons["schedd"].info.get("status_url", "")

    async def completed_count() -> int:
        """How many of the run's jobs have completed, by the schedd's /status counter (the
        pool is the bench's own, so it counts only these jobs). Reading the schedd's
        history instead made the schedd spend a good part of the run answering the bench:
        the history is read once, after the clock has stopped, and must then hold every
        job completed exactly once."""
        counters = (await asyncio.to_thread(status_page, schedd_url)).get("counters", {}) if schedd_url else {}
        done = counters.get("jobs_completed")
        if isinstance(done, int):
            return done
        hist = await c.jobs(f"ClusterId == {cluster}", ["ProcId", "JobStatus"], history=True)
        return sum(1 for h in hist if ads.get(h, "JobStatus") == 4)

    async def all_completed() -> bool:
        q0 = time.perf_counter()
        done = await completed_count()
        progress["poll_ms"].append((time.perf_counter() - q0) * 1000.0)
        progress["polls"] += 1
        if done != progress["completed"]:
            progress["completed"], progress["changed"] = done, time.monotonic()
        elif time.monotonic() - progress["changed"] > STALL_TIMEOUT_S:
            # Fail early: a job that has not moved for this long (tens of pool hours) never will.
            raise BenchFailed(f"no job completed for {STALL_TIMEOUT_S:.0f} s of wall time; {done} of "
                              f"{n_jobs} completed; {await _left_over(c, cluster)}")
        if time.monotonic() - last_report[0] >= 5.0:
            last_report[0] = time.monotonic()
            emit(f"  {time.monotonic() - wall0:6.1f} s: {done} of {n_jobs} completed")
        return done >= n_jobs

    deadline_s = max(JOBS_TIMEOUT_MIN_S, n_jobs * 0.3)
    try:
        await wait_for(all_completed, timeout_s=deadline_s, interval_s=POLL_INTERVAL_S,
                       what=f"{n_jobs} jobs to complete")
    except TimeoutError:
        raise BenchFailed(f"only {progress['completed']} of {n_jobs} jobs completed within "
                          f"{deadline_s:.0f} s of wall time; {await _left_over(c, cluster)}") from None
    wall_s = time.monotonic() - wall0
    pool1 = pool_time(pool, scale)
    cpu1 = daemon_cpu(pool)
    expired1 = _expired_ads(collector_url)

    history = await _completed_history(c, cluster, n_jobs)
    completions = [float(ads.get(h, "CompletionDate") or 0) for h in history]
    starts = [float(ads.get(h, "JobCurrentStartDate") or 0) for h in history]
    hosts_used = {str(ads.get(h, "LastRemoteHost", "")).split("@")[-1] for h in history}
    dslots_used = {str(ads.get(h, "LastRemoteHost", "")) for h in history}
    result["lag"] = lagreport.report(lag0, await lagreport.take(c))
    result["lagged"] = result["lag"]["lagged"]
    records = await c.cycles()
    window = [r for r in records if r.end >= pool0 and r.start <= pool1]
    truncated = bool(records) and records[0].start > pool0
    matching = [r for r in window if r.matches > 0]
    result.update({
        "jobs": n_jobs, "machines": n_machines, "cpus": args.cpus,
        "wall_s": round(wall_s, 3),
        "jobs_per_s": round(n_jobs / wall_s, 2),
        "cycles": len(window),
        "cycles_with_matches": len(matching),
        "matches": sum(r.matches for r in window),
        "rejections": sum(r.rejections for r in window),
        "submit_ms": round(submit_s * 1000.0, 1),
        "first_start_wall_s": round((min(starts) - pool0) / scale, 3) if starts else None,
        "last_completion_wall_s": round((max(completions) - pool0) / scale, 3) if completions else None,
        "hosts_used": len(hosts_used),
        "slots_used": len(dslots_used),
        "progress_polls": progress["polls"],
        "progress_poll_ms": round(statistics.mean(progress["poll_ms"]), 1) if progress["poll_ms"] else None,
        "cycle_wall_ms_max": round(max((r.wall_duration for r in window), default=0.0) * 1000.0, 1),
        "matching_cycle_wall_ms": [round(r.wall_duration * 1000.0, 1) for r in matching][:10],
        "cycle_history_truncated": truncated,
        "cpu_s": {k: round(cpu1[k] - cpu0.get(k, 0.0), 2) for k in cpu1},
        # Ads the collector dropped as stale while the jobs ran: every daemon was up, so each
        # is an update that came later than its lifetime (an overloaded startd).
        "collector_expired": expired1 - expired0 if expired0 is not None and expired1 is not None else None,
    })

    schedd_status = status_page(pool.daemons["schedd"].info.get("status_url", "")) \
        if "schedd" in pool.daemons else {}
    counters = schedd_status.get("counters", {})
    result["schedd_counters"] = {k: counters.get(k, 0) for k in
                                 ("matches", "claims", "claim_reuses", "claims_refused", "jobs_started",
                                  "jobs_completed", "jobs_evicted")}
    result["schedd_fsyncs"] = schedd_status.get("fsyncs")
    # Claim, activation and release calls to startds: single, batched, claims in batches.
    result["startd_claim_calls"] = schedd_status.get("startd_claim_calls", {})
    result["schedd_commits"] = schedd_status.get("commits")



async def _collector_figures(pool: LocalPool, c: PoolClient, result: dict[str, Any], scale: float) -> None:
    # ---- one ad update (as a daemon does it: its own token, the DAEMON level) -------------
    d = pool.client("condor")
    now = int(pool_time(pool, scale))
    update_ad = synthetic_slot_ad(0, my_type="Generic", now=now)
    update_ad["Name"] = f"bench-update@{SYNTHETIC_HOST}"
    update_text = [ads.ad_text(update_ad)]

    def one_updated(n: int) -> None:
        if n != 1:
            raise BenchFailed(f"the collector reported {n} ads updated, not 1")

    await time_calls(10, lambda: d.collector.update(update_text), one_updated)  # warm-up
    upd = await time_calls(AD_UPDATES, lambda: d.collector.update(update_text), one_updated)
    result["ad_update_ms"] = round(statistics.mean(upd), 3)
    result["ad_update_p50_ms"] = round(statistics.median(upd), 3)
    result["ad_update_p90_ms"] = round(statistics.quantiles(upd, n=10)[-1], 3)
    result["ad_attrs"] = len(update_ad)

    # ---- one query of 1,000 slot ads ------------------------------------------------
    synthetic = [ads.ad_text(synthetic_slot_ad(i, now=now)) for i in range(1, QUERY_ADS + 1)]
    t0 = time.perf_counter()
    stored = await d.collector.update(synthetic)
    result["insert_1000_ms"] = round((time.perf_counter() - t0) * 1000.0, 1)
    if stored != QUERY_ADS:
        raise BenchFailed(f"the collector stored {stored} of {QUERY_ADS} synthetic slot ads")
    constraint = f"Machine == {ads.literal(SYNTHETIC_HOST)}"

    def thousand(texts: list[str]) -> None:
        if len(texts) != QUERY_ADS:
            raise BenchFailed(f"the query returned {len(texts)} ads, not {QUERY_ADS}")

    await time_calls(2, lambda: c.collector.query("Machine", constraint), thousand)  # warm-up
    qry = await time_calls(QUERY_REPEATS, lambda: c.collector.query("Machine", constraint), thousand)
    result["query_1000_ms"] = round(statistics.mean(qry), 2)
    result["query_1000_p50_ms"] = round(statistics.median(qry), 2)
    result["time_scale"] = scale

    await d.collector.invalidate("Machine", [f"bench-slot{i}@{SYNTHETIC_HOST}" for i in range(1, QUERY_ADS + 1)])
    await d.collector.invalidate("Generic", [update_ad["Name"]])
    await d.close()


def _table(r: dict[str, Any]) -> list[str]:
    lines = [
        f"throughput: {r['jobs']} zero-length jobs, {r['machines']} machines x {r['cpus']} cpus "
        f"(one p-slot each), TIME_SCALE {r['time_scale']:g}",
        f"  {'wall time, submit to all completed':<44}{r['wall_s']:>10.2f} s",
        f"  {'jobs per second':<44}{r['jobs_per_s']:>10.1f}",
        f"  {'submit RPC':<44}{r['submit_ms']:>10.0f} ms",
        f"  {'first job start after submit':<44}{r['first_start_wall_s'] or 0:>10.3f} s",
        f"  {'last completion after submit (pool clock)':<44}{r['last_completion_wall_s'] or 0:>10.3f} s",
        f"  {'negotiation cycles in the run':<44}{r['cycles']:>10d}"
        + (" (history truncated)" if r["cycle_history_truncated"] else ""),
        f"  {'  cycles with matches':<44}{r['cycles_with_matches']:>10d}",
        f"  {'  matches / rejections':<44}{r['matches']:>5d} / {r['rejections']}",
        f"  {'  longest cycle (wall)':<44}{r['cycle_wall_ms_max']:>10.1f} ms",
        f"  {'machines / slots used':<44}{r['hosts_used']:>5d} / {r['slots_used']}",
        f"  {'schedd progress polls (mean wall)':<44}{r['progress_polls']:>5d} ({r['progress_poll_ms']} ms)",
        "  schedd: " + ", ".join(f"{k} {v}" for k, v in r["schedd_counters"].items())
        + f", commits {r['schedd_commits']}, fsyncs {r['schedd_fsyncs']}",
        "  schedd's claim calls to startds: "
        + ", ".join(f"{k} {v}" for k, v in r.get("startd_claim_calls", {}).items()),
        f"  {'ads the collector dropped as stale meanwhile':<44}{_count(r.get('collector_expired')):>10}"
        + (" (a startd's updates came later than CLASSAD_LIFETIME: overloaded)"
           if r.get("collector_expired") else ""),
        f"collector, from this process (one ad of {r['ad_attrs']} attributes):",
        f"  {'UpdateAds of one ad, mean / p50 / p90':<44}{r['ad_update_ms']:>10.3f} / {r['ad_update_p50_ms']:.3f} / "
        f"{r['ad_update_p90_ms']:.3f} ms ({AD_UPDATES} calls)",
        f"  {'UpdateAds of 1,000 slot ads (once)':<44}{r['insert_1000_ms']:>10.1f} ms",
        f"  {'QueryAds returning 1,000 slot ads, mean/p50':<44}{r['query_1000_ms']:>10.2f} / "
        f"{r['query_1000_p50_ms']:.2f} ms ({QUERY_REPEATS} calls)",
        *lagreport.lines(r["lag"]),
        f"  {'daemon':<12}{'peak RSS MB':>12}{'CPU s in run':>14}",
    ]
    for key in r["peak_rss_mb"]:
        cpu = r["cpu_s"].get(key)
        lines.append(f"  {key:<12}{r['peak_rss_mb'][key]:>12.1f}{cpu if cpu is not None else float('nan'):>14.2f}")
    return lines


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _one_run(args: argparse.Namespace, emit: Callable[[str], None], label: str = "") -> dict[str, Any] | None:
    """One run on a fresh pool: its result, or None if it failed (said on stderr)."""
    keep = os.environ.get(KEEP_ENV, "") not in ("", "0")
    state = Path(tempfile.mkdtemp(prefix="htcpool-bench-"))
    config = state / "condor_config"
    config.write_text(THROUGHPUT_CONFIG.format(machines=args.machines, cpus=args.cpus, time_scale=time_scale_of(args),
                                               interval=NEGOTIATOR_INTERVAL_S))
    emit(f"htcpool bench throughput{label}: state in {state}{'' if keep else f' (set {KEEP_ENV}=1 to keep it)'}")
    pool = LocalPool(state / "pool", config, machines=args.machines)
    result: dict[str, Any] | None = None
    failure = ""
    problems: dict[str, tuple[int, list[str]]] = {}
    try:
        pool.start()
        result = asyncio.run(_throughput(pool, args, emit))
        result["peak_rss_mb"] = {k: round(v, 1) for k, d in pool.daemons.items()
                                 if (v := peak_rss_mb(d.pid)) is not None}
        dead = [k for k, d in pool.daemons.items() if not d.alive()]
        if dead:
            failure = f"daemon(s) exited during the benchmark: {', '.join(dead)}"
    except (BenchFailed, PoolError, ConfigError, TimeoutError, ProfilerMissing) as e:
        failure = str(e)
    except Exception as e:  # an RPC failure, most likely: say what, keep the traceback out of the table
        failure = f"{type(e).__name__}: {e}"
    finally:
        pool.stop()
        problems = log_problems(state / "pool")
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    if problems:
        emit("warnings and errors in the daemons' logs:")
        for line in log_problem_lines(problems):
            emit(line)
    if failure or result is None:
        print(f"htcpool bench throughput: FAILED: {failure or 'no result'}", file=sys.stderr)
        if not keep:
            print(f"  (set {KEEP_ENV}=1 to keep the state directory and the daemons' logs)", file=sys.stderr)
        return None
    result["log_problems"] = {name: n for name, (n, _) in problems.items()}
    return result


def time_scale_of(args: argparse.Namespace) -> float:
    return float(getattr(args, "time_scale", None) or TIME_SCALE)


def bench_throughput(args: argparse.Namespace) -> int:
    for name in ("jobs", "machines", "cpus"):
        if getattr(args, name) < 1:
            print(f"htcpool bench throughput: --{name} must be at least 1", file=sys.stderr)
            return 2
    scale = getattr(args, "time_scale", TIME_SCALE)
    if scale is not None and not (math.isfinite(scale) and 1.0 <= scale <= 1e6):
        print(f"htcpool bench throughput: --time-scale must be from 1 to 1,000,000, not {scale:g}", file=sys.stderr)
        return 2
    repeat = getattr(args, "repeat", 1)
    if not 1 <= repeat <= MAX_REPEAT:
        print(f"htcpool bench throughput: --repeat must be from 1 to {MAX_REPEAT}", file=sys.stderr)
        return 2

    def emit(line: str) -> None:
        print(line, flush=True)

    runs: list[dict[str, Any]] = []
    for k in range(1, repeat + 1):
        run_args = args
        if repeat > 1 and getattr(args, "profile", None):
            run_args = argparse.Namespace(**{**vars(args), "profile": str(Path(args.profile) / f"run{k}")})
        result = _one_run(run_args, emit, f" (run {k} of {repeat})" if repeat > 1 else "")
        if result is None:
            return 1
        if repeat > 1:
            emit(f"run {k} of {repeat}: {result['jobs_per_s']:.1f} jobs/s, {result['wall_s']:.2f} s"
                 f"{' (LAGGED)' if result.get('lagged') else ''}")
        runs.append(result)
    result = median_of_runs(runs, "jobs_per_s", higher_is_better=True)
    emit("")
    for line in _table(result):
        emit(line)
    repeats = {**repeats_of(runs, ("jobs_per_s", "wall_s")), "lagged": sum(bool(r.get("lagged")) for r in runs)}
    if repeat > 1:
        rates = repeats["jobs_per_s"]
        emit(f"the median of {repeat} runs (the run above): {result['jobs_per_s']:.1f} jobs/s "
             f"(min {rates[0]:.1f}, max {rates[-1]:.1f}); {repeats['lagged']} lagged")
    if args.json:
        keys = ("jobs", "machines", "cpus", "wall_s", "jobs_per_s", "cycles", "matches", "peak_rss_mb",
                "ad_update_ms", "ad_update_p50_ms", "query_1000_ms", "time_scale")
        out = {k: result[k] for k in keys}
        out.update({k: v for k, v in result.items() if k not in out})
        if repeat > 1:
            out["repeats"] = repeats
            out["runs"] = runs
        print(json.dumps(out))
    return 0
