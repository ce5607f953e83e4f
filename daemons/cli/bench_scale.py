"""`htcpool bench scale`: the highest TIME_SCALE at which a pool of each size stays faithful.

For each pool size (slots) the bench tries rising time scales, one fresh pool per
(size, scale) step, and stops at the first scale that is not faithful (or at the
last one given); with `--refine N` it then tries up to N scales between the highest
faithful one and that first unfaithful one, each halving the bracket. A step:

1. starts a collector, negotiator and schedd; submits a steady workload (one
   submitter, durations drawn from `--distribution` with mean `--mean`, seeded by
   the size, so every scale of a size runs the same jobs) large enough that the queue
   never empties during the step; then starts the startds (machines of 8 static 1-cpu
   slots, at most 10,000 slots per startd process);
2. waits for the first cycle that matches (the pool fills), then `--warmup-hours` of
   pool time, then measures a window of `--window-hours` of pool time: the schedd's
   claim-activation histogram and every daemon's CPU time at both ends, each daemon's
   event-loop lag from its /metrics every half second of wall time, the
   collector's count of lag events;
3. reads the negotiator's cycle records, the schedd's history and running jobs, and
   judges the window (`scale_criteria`).

The pool runs with HTCPOOL_LAG_POLICY = warn: the clock keeps the scale under test
(slowing it, the default policy, would measure some other scale), and a daemon whose
sustained lag passes HTCPOOL_MAX_LAG in the window makes the step unfaithful. The
seed's model assumes no claim reuse and cycles a fixed interval apart, so the pool
has CLAIM_WORKLIFE = 0, NEGOTIATOR_CYCLE_DELAY = 0 and NEGOTIATOR_MIN_INTERVAL =
NEGOTIATOR_INTERVAL, as in `htcpool experiment cadence`.

Each step is bounded: its pool time is warm-up + window, and its wall time is capped
(`--max-step-wall`, by default the window's wall time plus generous set-up time that
grows with the size); a step over its cap is stopped and counts as unfaithful.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from daemons.cli import lagreport
from daemons.cli import scale_criteria as sc
from daemons.cli.benchkit import BenchFailed, KEEP_ENV, cpu_seconds, log_problems, status_page
from daemons.cli.bench_negotiator import _parse_sizes
from daemons.cli.client import PoolClient, wait_for
from daemons.cli.experiments import loading
from daemons.cli.experiments.cadence_measure import JobRecord
from daemons.cli.pool import LocalPool, PoolError, StartdSpec
from daemons.cli.procs import peak_rss_mb
from daemons.core import ads
from daemons.core.config import ConfigError

SLOTS_PER_MACHINE = 8
SLOTS_PER_STARTD = 10_000
SUBMIT_CHUNK = 5_000          # jobs per Submit call
SUBMITS_IN_FLIGHT = 2
SAMPLE_S = 0.5                # wall seconds between lag samples (each daemon's window is 2 s)
PROC_KEY = 10_000_000         # order of jobs: ClusterId * PROC_KEY + ProcId

POOL_CONFIG = """\
# htcpool bench scale: {slots} slots at TIME_SCALE {scale:g}
NETWORK_HOSTNAME = scalehost
TIME_SCALE = {scale:g}
# The clock keeps the scale under test; lag is reported and makes the step unfaithful.
HTCPOOL_LAG_POLICY = warn
# Seed 004's model: cycles every C from the previous start, none off the cadence, no claim reuse.
NEGOTIATOR_INTERVAL = {interval:g}
NEGOTIATOR_CYCLE_DELAY = 0
NEGOTIATOR_MIN_INTERVAL = {interval:g}
NEGOTIATOR_CYCLE_HISTORY = 100000
CLAIM_WORKLIFE = 0
# One submitter's queue holds several jobs per slot (300,000 at 50,000 slots).
MAX_JOBS_PER_OWNER = 1000000000
"""
MACHINE_CONFIG = """\
SLOT_TYPE_0_PARTITIONABLE = False
NUM_CPUS = {slots}
MEMORY = {memory}
"""


@dataclass(frozen=True)
class Plan:
    interval_s: float
    warmup_s: float
    window_s: float
    dist: loading.Distribution
    seed: int
    crit: sc.Criteria
    max_step_wall_s: float = 0.0    # 0: worked out per step

    def step_wall_cap(self, slots: int, scale: float) -> float:
        if self.max_step_wall_s > 0:
            return self.max_step_wall_s
        # Set-up (start, submit, advertise, fill) grows with the size; the rest is pool time.
        return 120.0 + slots / 100.0 + 2.0 * (self.warmup_s + self.window_s + 2 * self.interval_s) / scale


def startd_layout(slots: int) -> list[int]:
    """Machines per startd process."""
    machines = max(1, math.ceil(slots / SLOTS_PER_MACHINE))
    startds = max(1, math.ceil(machines * SLOTS_PER_MACHINE / SLOTS_PER_STARTD))
    return [machines // startds + (1 if j < machines % startds else 0) for j in range(startds)]


def durations(plan: Plan, slots: int, n: int) -> list[float]:
    """The workload of a size: the same draws at every scale."""
    rng = random.Random(f"scale:{plan.seed}:{slots}")
    return [round(plan.dist.sample(rng), 3) for _ in range(n)]


def submit_chunk(ds: list[float]) -> str:
    lines = ["universe = vanilla", "executable = /bin/sleep", "arguments = $(D)", "+Duration = $(D)",
             "+ScaleBench = true", "queue D from ("]
    lines += [f"{d!r}" for d in ds]
    lines.append(")")
    return "\n".join(lines) + "\n"


# ---- one step --------------------------------------------------------------------------
_LAG_GAUGES = (("_loop_lag_recent_max_pool_seconds", "recent_max_pool_s"),
               ("_loop_lag_sustained_pool_seconds", "sustained_pool_s"),
               ("_update_lag_sustained_pool_seconds", "update_sustained_pool_s"))


def loop_lag_from_metrics(text: str) -> dict[str, float]:
    """A daemon's lag gauges read from its /metrics text (recent_max_pool_s,
    sustained_pool_s, update_sustained_pool_s): the page is a few KB where /status is the
    daemon's whole state (a negotiator's cycle history, encoded twice a second, was a
    fifth of its busy time)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        for suffix, key in _LAG_GAUGES:
            if name.endswith(suffix):
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
    return out


def _metrics_lag(url: str) -> dict[str, float]:
    return status_page(url, "/metrics", lambda b: loop_lag_from_metrics(b.decode("utf-8", "replace")))


@dataclass
class Sampler:
    """Each daemon's worst recent loop lag and worst sustained lag, of its loop or its ad
    updates (pool s), seen on its /metrics in the window."""
    urls: dict[str, str]
    worst: dict[str, float] = field(default_factory=dict)
    sustained: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    async def sample(self) -> None:
        pages = await asyncio.gather(*(asyncio.to_thread(_metrics_lag, u) for u in self.urls.values()))
        for key, lag in zip(self.urls, pages):
            if "recent_max_pool_s" in lag:
                self.worst[key] = max(self.worst.get(key, 0.0), float(lag["recent_max_pool_s"]))
                self.sustained[key] = max(self.sustained.get(key, 0.0), float(lag.get("sustained_pool_s", 0.0)),
                                          float(lag.get("update_sustained_pool_s", 0.0)))
        self.samples += 1


async def _schedd_status(url: str, tries: int = 3) -> dict[str, Any]:
    """The schedd's /status, which must carry its activation histogram (a busy schedd may
    miss one 5 s page request; an empty page would count the whole run as the window)."""
    for _ in range(tries):
        page = await asyncio.to_thread(status_page, url)
        if page.get("claim_activation_delay"):
            return page
    raise BenchFailed(f"the schedd's status page ({url}) did not answer with its activation histogram")


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {k: t for k, p in pids.items() if (t := cpu_seconds(p)) is not None}


async def _sleep_until_pool(c: PoolClient, target: float, scale: float, deadline: float) -> None:
    while True:
        left = (target - await c.pool_now()) / scale
        if left <= 0:
            return
        if time.monotonic() + left > deadline:
            raise BenchFailed(f"the step would pass its wall-time cap waiting for pool time {target:.0f}")
        await asyncio.sleep(min(left, 5.0))


def _record(a, running: bool) -> JobRecord:
    key = int(ads.get(a, "ClusterId")) * PROC_KEY + int(ads.get(a, "ProcId"))
    slot = str(ads.get(a, "RemoteHost" if running else "LastRemoteHost", ""))
    return JobRecord(slot.split("@")[-1], key, slot, int(ads.get(a, "JobCurrentStartDate") or 0),
                     0 if running else int(ads.get(a, "CompletionDate") or 0),
                     0.0 if running else float(ads.get(a, "RemoteWallClockTime") or 0.0),
                     float(ads.get(a, "Duration") or 0.0), sentinel=running)


async def run_step(slots: int, scale: float, plan: Plan, state: Path, emit: Callable[[str], None]) -> dict[str, Any]:
    t_start = time.monotonic()
    deadline = t_start + plan.step_wall_cap(slots, scale)
    layout = startd_layout(slots)
    real = sum(layout) * SLOTS_PER_MACHINE
    pool_s = plan.warmup_s + plan.window_s + 2 * plan.interval_s
    n_jobs = sc.jobs_needed(real, pool_s, plan.dist, plan.interval_s)
    config = state / "condor_config"
    config.write_text(POOL_CONFIG.format(slots=real, scale=scale, interval=plan.interval_s))
    specs = []
    for j, machines in enumerate(layout, 1):
        path = state / f"startd{j}.conf"
        path.write_text(POOL_CONFIG.format(slots=real, scale=scale, interval=plan.interval_s)
                        + MACHINE_CONFIG.format(slots=SLOTS_PER_MACHINE, memory=512 * SLOTS_PER_MACHINE))
        specs.append(StartdSpec(path, machines, f"m{j}-"))
    core = LocalPool(state / "pool", config, roles=("collector", "negotiator", "schedd"))
    startds = LocalPool(state / "startds", None, roles=("startd",), startd_specs=specs)
    out: dict[str, Any] = {"slots": real, "time_scale": scale, "jobs_submitted": n_jobs, "startds": len(layout)}
    try:
        core.start()
        startds.join(core)
        async with core.client() as c:
            await wait_for(lambda: c.ads("Negotiator", projection=["Name"]), timeout_s=60,
                           what="the negotiator's ad in the collector")
            ds = durations(plan, real, n_jobs)
            sem = asyncio.Semaphore(SUBMITS_IN_FLIGHT)

            async def one(chunk: list[float], i: int) -> int:
                async with sem:
                    _, count = await c.submit(submit_chunk(chunk), f"scale-{i}.sub")
                if count != len(chunk):
                    raise BenchFailed(f"the schedd accepted {count} of {len(chunk)} jobs")
                return count

            t0w = time.monotonic()
            await asyncio.gather(*(one(ds[i:i + SUBMIT_CHUNK], i // SUBMIT_CHUNK)
                                   for i in range(0, len(ds), SUBMIT_CHUNK)))
            out["submit_s"] = round(time.monotonic() - t0w, 2)
            await asyncio.to_thread(startds.start, max(30.0, deadline - time.monotonic()))

            async def slot_ads() -> int:
                n = len(await c.collector.query("Machine", projection=["Name"], give_up_after_s=5.0))
                return n if n >= real else 0
            await wait_for(slot_ads, timeout_s=max(1.0, deadline - time.monotonic()), interval_s=0.5,
                           what=f"{real} slot ads in the collector")

            async def first_match():
                return next((r for r in await c.cycles() if r.matches > 0), None)
            fill = await wait_for(first_match, timeout_s=max(1.0, deadline - time.monotonic()), interval_s=0.2,
                                  what="the first negotiation cycle that matches")
            t0 = fill.start + plan.warmup_s
            now = await c.pool_now()
            out["late_start_pool_s"] = round(max(0.0, now - t0), 1)
            t0 = max(t0, now)
            t1 = t0 + plan.window_s
            out["setup_wall_s"] = round(time.monotonic() - t_start, 1)
            emit(f"    {real} slots, {n_jobs} jobs submitted in {out['submit_s']:.1f} s; pool filled from pool "
                 f"time {fill.start:.0f}; measuring {plan.window_s:.0f} pool s from {t0:.0f} "
                 f"({plan.window_s / scale:.1f} s of wall time)")

            await _sleep_until_pool(c, t0, scale, deadline)
            daemons = {**core.daemons, **startds.daemons}
            pids = {k: d.pid for k, d in daemons.items()}
            schedd_url = core.daemons["schedd"].info.get("status_url", "")
            sampler = Sampler({k: d.info.get("status_url", "") for k, d in daemons.items()
                               if d.info.get("status_url")})
            hist0 = (await _schedd_status(schedd_url))["claim_activation_delay"]
            lag0 = await lagreport.take(c)
            cpu0, wall0 = _cpu(pids), time.monotonic()
            while True:
                await sampler.sample()
                left = (t1 - await c.pool_now()) / scale
                if left <= 0:
                    break
                if time.monotonic() > deadline:
                    raise BenchFailed("the step passed its wall-time cap during the window")
                await asyncio.sleep(min(SAMPLE_S, left))
            cpu1, wall1 = _cpu(pids), time.monotonic()
            schedd1 = await _schedd_status(schedd_url)
            hist1 = schedd1["claim_activation_delay"]
            lag1 = await lagreport.take(c)

            cycles = await c.cycles()
            proj = ["ClusterId", "ProcId", "LastRemoteHost", "JobCurrentStartDate", "CompletionDate",
                    "RemoteWallClockTime", "Duration", "JobStatus"]
            history = await c.jobs("ScaleBench =?= true && JobStatus == 4", proj, history=True)
            running = await c.jobs("JobStatus == 2", ["ClusterId", "ProcId", "RemoteHost", "JobCurrentStartDate",
                                                      "Duration"])
            out["peak_rss_mb"] = {k: round(v, 1) for k, d in daemons.items() if (v := peak_rss_mb(d.pid)) is not None}
            dead = [k for k, d in daemons.items() if not d.alive()]
            if dead:
                raise BenchFailed(f"daemon(s) exited during the step: {', '.join(dead)}")
        out["_problems"] = log_problems(state / "pool") | {f"startds/{k}": v for k, v in
                                                          log_problems(state / "startds").items()}
    finally:
        startds.stop()
        core.stop()

    starts = [r.start for r in cycles]
    completed = [_record(h, False) for h in history]
    now_running = [_record(r, True) for r in running]
    checks = {
        "cycles": sc.cycle_check(starts, plan.interval_s, t0, t1, plan.crit),
        "runtime": sc.runtime_check([(r.duration, r.wall_clock) for r in completed if t0 <= r.completion_date <= t1],
                                    plan.crit),
        "activation": sc.activation_check(sc.histogram_delta(hist0, hist1), plan.crit),
        "loading": sc.loading_check(completed, now_running, starts, plan.interval_s, t0, t1, plan.crit),
    }
    lag = lagreport.report(lag0, lag1)
    idle_left = sum(int(v.get("idle", 0)) for v in (schedd1.get("submitters") or {}).values())
    lagged = sc.lag_over(lag["lag_events"], sampler.sustained, lag["max_lag_pool_s"])
    why = sc.verdict(checks, lagged=lagged, queue_left=idle_left)
    hours = (t1 - t0) / 3600.0
    out.update({
        "faithful": not why, "why_not": why, "window_pool_s": round(t1 - t0, 1),
        "window_wall_s": round(wall1 - wall0, 2), "checks": checks, "lagged": bool(lagged),
        "lag_events": lag["lag_events"], "idle_jobs_left": idle_left,
        "loop_lag_pool_s": {k: round(v, 3) for k, v in sorted(sampler.worst.items())},
        "loop_lag_sustained_pool_s": {k: round(v, 3) for k, v in sorted(sampler.sustained.items())},
        "lag_samples": sampler.samples,
        "cpu_s_per_pool_hour": {k: round((cpu1[k] - cpu0.get(k, 0.0)) / hours, 2) for k in cpu1} if hours > 0 else {},
        "cores_busy": round(sum(cpu1[k] - cpu0.get(k, 0.0) for k in cpu1) / max(1e-9, wall1 - wall0), 3),
        "wall_s": round(time.monotonic() - t_start, 1),
    })
    return out


def _one_step(slots: int, scale: float, plan: Plan, root: Path, emit: Callable[[str], None]) -> dict:
    state = root / f"slots{slots}-x{scale:g}"
    state.mkdir(parents=True)
    emit(f"  {slots} slots at TIME_SCALE {scale:g}:")
    try:
        row = asyncio.run(run_step(slots, scale, plan, state, emit))
    except (BenchFailed, PoolError, ConfigError, TimeoutError) as e:
        row = {"slots": slots, "time_scale": scale, "faithful": False, "why_not": [f"failed: {e}"],
               "error": str(e)}
    except Exception as e:  # an RPC failure, most likely: the step failed, the search goes on
        row = {"slots": slots, "time_scale": scale, "faithful": False,
               "why_not": [f"failed: {type(e).__name__}: {e}"], "error": f"{type(e).__name__}: {e}"}
    row["requested_slots"] = slots
    problems = row.pop("_problems", None)
    if problems is None:
        problems = log_problems(state / "pool")
    row["log_problems"] = {name: n for name, (n, _) in problems.items()}
    emit("    " + ("FAITHFUL" if row["faithful"] else "NOT FAITHFUL: " + "; ".join(row["why_not"])))
    return row


def run_size(slots: int, scales: list[float], plan: Plan, root: Path, emit: Callable[[str], None],
             refine: int = 0) -> list[dict]:
    """Rising scales until the first unfaithful step (or the last scale); then up to `refine`
    steps between the highest faithful scale and the first unfaithful one, each at their
    geometric mean (a bisection: each step halves the bracket's ratio in log terms)."""
    rows = []
    for scale in scales:
        rows.append(_one_step(slots, scale, plan, root, emit))
        if not rows[-1]["faithful"]:
            break
    for _ in range(refine):
        lo, hi = sc.bracket([(r["time_scale"], r["faithful"]) for r in rows])
        mid = sc.between(lo, hi) if lo is not None and hi is not None else None
        if mid is None:
            break
        emit(f"  refining: faithful at {lo:g}, not at {hi:g}")
        rows.append(_one_step(slots, mid, plan, root, emit))
    return rows


# ---- the command ----------------------------------------------------------------------------
# (mean job s, NEGOTIATOR_INTERVAL s, warm-up s, window s): the default, and --quick (a test's).
DEFAULTS = (3600.0, 300.0, 3600.0, 10800.0)
QUICK = (600.0, 60.0, 600.0, 1800.0)


def plan_from(args: argparse.Namespace) -> Plan:
    base = QUICK if args.quick else DEFAULTS
    given = (args.mean, args.interval, None if args.warmup_hours is None else args.warmup_hours * 3600.0,
             None if args.window_hours is None else args.window_hours * 3600.0)
    mean, interval, warmup_s, window_s = (base[i] if v is None else v for i, v in enumerate(given))
    for name, v in (("--mean", mean), ("--interval", interval), ("--window-hours", window_s)):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive number")
    if not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise ValueError("--warmup-hours must be zero or more")
    if not 0 < args.quantile <= 1:
        raise ValueError("--quantile must be in (0, 1]")
    if args.max_step_wall < 0:
        raise ValueError("--max-step-wall must be zero (automatic) or more")
    if args.refine < 0:
        raise ValueError("--refine must be zero or more")
    kind = args.distribution
    if kind not in loading.Distribution.KINDS:
        raise ValueError(f"--distribution {kind!r}: one of {', '.join(loading.Distribution.KINDS)}")
    return Plan(interval, warmup_s, window_s, loading.Distribution(kind, mean), args.seed,
                sc.Criteria(quantile=args.quantile), args.max_step_wall)


def bench_scale(args: argparse.Namespace) -> int:
    from daemons.cli import bench_scale_report as report
    try:
        sizes = _parse_sizes(args.sizes)
        scales = sc.parse_scales(args.scales)
        plan = plan_from(args)
    except ValueError as e:
        print(f"htcpool bench scale: {e}", file=sys.stderr)
        return 2
    keep = os.environ.get(KEEP_ENV, "") not in ("", "0")
    root = Path(tempfile.mkdtemp(prefix="htcpool-bench-scale-"))
    out = Path(args.out) if args.out else Path("results") / "scale"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"htcpool bench scale: --out {out}: {e.strerror or e}", file=sys.stderr)
        return 2

    def emit(line: str) -> None:
        print(line, flush=True)

    emit(f"htcpool bench scale: sizes {', '.join(str(s) for s in sizes)} slots; TIME_SCALE "
         f"{', '.join(f'{s:g}' for s in scales)}; {plan.dist.kind} jobs of mean {plan.dist.mean_s:g} s; "
         f"NEGOTIATOR_INTERVAL {plan.interval_s:g}; warm-up {plan.warmup_s:g} + window {plan.window_s:g} pool s "
         f"per step; state in {root}{'' if keep else f' (set {KEEP_ENV}=1 to keep it)'}")
    rows: list[dict[str, Any]] = []
    try:
        for slots in sizes:
            rows.extend(run_size(slots, scales, plan, root, emit, args.refine))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    summary = report.summarize(rows, sizes, scales, plan)
    written = report.write(rows, summary, out)
    emit("")
    for line in report.table(rows, summary):
        emit(line)
    emit(f"wrote {', '.join(str(p) for p in written)}")
    if args.json:
        report.json_result(rows, summary, written)
    return 0
