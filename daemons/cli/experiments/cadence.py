"""`htcpool experiment cadence`: seed 004's slot loading, measured on a pool of processes.

Seed 004 ("The Impact of Negotiator Cycle Cadence on Slot Loading") derives the
loading factor of a slot running jobs of duration D under negotiation cycles every C:
LF = D / (C (q + ceil(r))), a saw-tooth in D / C (see `loading`). It leaves the pool
with random durations for later. This experiment measures both on real daemons:

1. fixed durations: D / C swept from 0.2 to 6.02, at two time scales;
2. random durations (exponential, log-normal with sd = mean, uniform on [0, 2 mean];
   seeded): the pool's loading factor against the mean duration, with the rule of
   thumb E[D] / (E[D] + C/2), the seed's formula averaged over the distribution, and
   E[D] / E[Z] (the pool's long-run ratio under the seed's model);
3. the same draws again with claim reuse on (CLAIM_WORKLIFE at HTCondor's 1200 s).

The pool: one startd process emulating one machine per workload (a D / C value, or a
distribution and mean), each with a few static 1-cpu slots (HTCondor's default layout);
a machine STARTs only its own workload's jobs (`START = TARGET.CadenceMachine =?=
MY.Machine`), so workloads run side by side without touching each other's timing, and
the negotiator evaluates a request once per machine rather than once per slot.
NEGOTIATOR_CYCLE_DELAY = 0: a cycle starts every NEGOTIATOR_INTERVAL counted from the
previous start (HTCondor's default, 20 s after the previous end, only matters for
cycles longer than C - 20 s). NEGOTIATOR_MIN_INTERVAL = C: the reschedule that
submitting sends cannot add a cycle off the cadence. CLAIM_WORKLIFE = 0 as the seed
assumes: every job needs a match.

A workload's jobs wait in one queue; at each cycle its free slots take the next ones.
Behind them wait as many sentinel jobs as the machine has slots, each too long to
end: a slot takes exactly one, after its last real job, and the match that gives it
the sentinel ends that job's wait. The run stops when every slot holds its sentinel.

Measured per slot, from the schedd's history and the negotiator's cycle records:
busy time = the sum of its jobs' RemoteWallClockTime (exact: the startd's job start to
end); held time = from the start of the cycle that matched its first job to the start
of the cycle that gave it its sentinel, so a whole number of cycles in the seed's
model. Each job's share runs from its own match to the slot's next match (with claim
reuse, to the next job's start when it ran on the same claim). A job starts a little
after its match (the claim and activation, and its place in the cycle's order: the
pipeline's wall time times TIME_SCALE); that time is idle time of a claimed slot, and
counted as such. Counting from the first job's start instead would leave out the first
of those gaps only and overstate the factor by gap / held; that variant is reported
too (`measured_from_first_start`). A workload's loading factor is its summed busy time
over its summed held time.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from daemons.cli.experiments import loading
from daemons.cli.experiments.cadence_measure import (DEFAULT_MEANS, DEFAULT_RATIOS, DEFAULT_WORKLIFE_S, GUARD,
                                                     SENTINEL_S, JobRecord, JobTiming, MeasureError, SlotMeasure,
                                                     Workload, _queue_span, fixed_workloads, guard_violations,
                                                     measure, measure_slot, model_pool_lf, pooled, random_workloads,
                                                     submit_description, sweep_ratios)
from daemons.cli.experiments.cadence_report import (_mean, _report_fixed, _report_random, _write_cycles,
                                                    _write_jobs)
from daemons.cli.experiments.common import json_line, out_dir

__all__ = ["DEFAULT_MEANS", "DEFAULT_RATIOS", "GUARD", "JobRecord", "JobTiming", "MeasureError", "RunResult",
           "SlotMeasure", "Workload", "fixed_workloads", "guard_violations", "measure", "measure_slot",
           "model_pool_lf", "pooled", "random_workloads", "run", "submit_description", "sweep_ratios"]

POOL_CONFIG = """\
NETWORK_HOSTNAME = cadence
TIME_SCALE = {time_scale:g}
NEGOTIATOR_INTERVAL = {interval:g}
# Cycles start every NEGOTIATOR_INTERVAL from the previous start; HTCondor's default
# NEGOTIATOR_CYCLE_DELAY (20 s after the previous end) would only add to it.
NEGOTIATOR_CYCLE_DELAY = 0
# The reschedule that a submit sends may not add a cycle off the cadence (the seed's
# model has one cadence): no cycle sooner than C after the last start.
NEGOTIATOR_MIN_INTERVAL = {interval:g}
NEGOTIATOR_CYCLE_HISTORY = 100000
# Static 1-cpu slots, one per cpu (HTCondor 23+ defaults to one partitionable slot); one workload per machine.
SLOT_TYPE_0_PARTITIONABLE = False
NUM_CPUS = {slots}
MEMORY = {memory}
START = TARGET.CadenceMachine =?= MY.Machine
UPDATE_INTERVAL = 300
SCHEDD_INTERVAL = 300
{worklife}"""


# ---- plans ------------------------------------------------------------------------------

# ---- running a pool ----------------------------------------------------------------------
@dataclass
class RunResult:
    label: str
    time_scale: float
    worklife_s: float
    slots: int                              # per machine
    workloads: dict[str, Workload]          # machine -> workload
    measures: dict[str, dict[str, SlotMeasure]]   # machine -> slot -> measure
    cycles: list[Any]                       # the negotiator's CycleRecords
    wall_s: float
    first_cycle: float = 0.0

    def cycle_spacing(self) -> list[float]:
        """Start-to-start gaps of the cycles since the first that matched this run's jobs."""
        cs = [c for c in self.cycles if c.start >= self.first_cycle]
        return [b.start - a.start for a, b in zip(cs, cs[1:])]

    def start_latencies(self) -> list[float]:
        return [x for ms in self.measures.values() for m in ms.values() for x in m.start_latency]


async def run_pool(label: str, workloads: Sequence[Workload], *, slots: int, interval_s: float, time_scale: float,
                   worklife_s: float, state: Path, emit) -> RunResult:
    """Start a pool with one machine per workload, run the workloads side by side, measure every slot."""
    from daemons.cli.client import wait_for
    from daemons.cli.pool import LocalPool
    from daemons.core import ads
    from daemons.pb.htcpool import schedd_pb2

    machines = len(workloads)
    cfg = state / f"{label}.conf"
    cfg.write_text(POOL_CONFIG.format(time_scale=time_scale, interval=interval_s, slots=slots, memory=512 * slots,
                                      worklife=f"CLAIM_WORKLIFE = {worklife_s:g}\n"))
    pool = LocalPool(state / label, cfg, machines=machines, host_prefix="cad-")
    t0 = time.monotonic()
    try:
        pool.start(timeout_s=120)
        async with pool.client() as c:
            async def all_slots():
                found = await c.ads("Machine", projection=["Machine"])
                return found if len(found) >= machines * slots else None
            slot_ads = await wait_for(all_slots, timeout_s=120, what=f"{machines * slots} slots")
            names = sorted({str(ads.get(a, "Machine")) for a in slot_ads})
            assignment = list(zip(names, workloads))
            n_jobs = sum(len(w.durations) for w in workloads)
            submitted_at = await c.pool_now()
            await c.submit(submit_description(assignment, slots), f"{label}.sub", "cadence")
            # The model's run, plus up to a cycle before the first match and a margin.
            longest = max(_queue_span(w, slots, interval_s) for w in workloads)
            expect_pool = longest + 2 * interval_s
            emit(f"  [{label}] {machines} machines x {slots} slots, {n_jobs} jobs; about "
                 f"{expect_pool / time_scale:.0f} s of wall time")
            # Completed jobs leave the queue, so polling it gets cheap near the end; until then, wait.
            await asyncio.sleep(max(0.0, 0.8 * expect_pool / time_scale))

            async def sentinels_running():
                found = await c.jobs('CadenceRole == "sentinel" && JobStatus == 2',
                                     ["CadenceMachine", "ProcId", "RemoteHost", "JobCurrentStartDate"])
                return found if len(found) >= machines * slots else None
            running = await wait_for(sentinels_running, timeout_s=60.0 + expect_pool / time_scale,
                                     interval_s=0.5, what=f"every slot of {label} to take its sentinel")
            await c.act(schedd_pb2.REMOVE, constraint="true", reason="run over")
            hist = await c.jobs('CadenceRole == "job"',
                                ["CadenceMachine", "ProcId", "LastRemoteHost", "JobCurrentStartDate",
                                 "CompletionDate", "RemoteWallClockTime", "Duration", "JobStatus"], history=True)
            cycles = list(await c.cycles())
    finally:
        pool.stop()
    wall = time.monotonic() - t0
    records = [JobRecord(str(ads.get(h, "CadenceMachine")), int(ads.get(h, "ProcId")),
                         str(ads.get(h, "LastRemoteHost")),
                         int(ads.get(h, "JobCurrentStartDate")), int(ads.get(h, "CompletionDate")),
                         float(ads.get(h, "RemoteWallClockTime")), float(ads.get(h, "Duration")))
               for h in hist if ads.get(h, "JobStatus") == 4]
    if len(records) != n_jobs:
        raise MeasureError(f"{label}: {len(records)} of {n_jobs} jobs completed")
    records += [JobRecord(str(ads.get(r, "CadenceMachine")), int(ads.get(r, "ProcId")), str(ads.get(r, "RemoteHost")),
                          int(ads.get(r, "JobCurrentStartDate")), 0, 0.0, SENTINEL_S, sentinel=True)
                for r in running]
    starts = [cy.start for cy in cycles]
    by_machine: dict[str, list[JobRecord]] = {}
    for r in records:
        by_machine.setdefault(r.machine, []).append(r)
    measures = {m: measure(rs, starts) for m, rs in by_machine.items()}
    first = min((cy.start for cy in cycles if cy.start >= submitted_at and cy.matches), default=starts[0])
    return RunResult(label, time_scale, worklife_s, slots, dict(assignment), measures, cycles, wall, first)


# ---- the experiment ---------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser):
    """The experiment's options (registered in daemons/cli/experiments/__init__.py); returns its runner."""
    p.add_argument("--interval", type=int, default=300,
                   help="NEGOTIATOR_INTERVAL C, whole pool seconds (default 300, as seed 004)")
    p.add_argument("--time-scales", default="60,240",
                   help="TIME_SCALEs of the fixed-duration sweep, comma-separated (default 60,240)")
    p.add_argument("--ratios", default="",
                   help="D/C values of the fixed sweep, comma-separated (default: 0.2 .. 6.02, the bottom, middle "
                        "and near the top of each tooth of the saw-tooth)")
    p.add_argument("--points", type=int, default=0,
                   help="instead of --ratios: this many D/C values spread evenly over 0.2 .. 6.02")
    p.add_argument("--slots-per-point", type=int, default=2, help="slots per fixed D/C value (default 2)")
    p.add_argument("--jobs-per-slot", type=int, default=1, help="jobs per slot in the fixed sweep (default 1)")
    p.add_argument("--distributions", default="exponential,lognormal,uniform",
                   help="random duration distributions (default exponential,lognormal,uniform)")
    p.add_argument("--means", default=",".join(f"{m:g}" for m in DEFAULT_MEANS),
                   help="mean durations E[D]/C of the random-duration runs (default %(default)s)")
    p.add_argument("--random-slots", type=int, default=4,
                   help="slots per (distribution, mean) workload (default 4)")
    p.add_argument("--horizon", type=float, default=12.0,
                   help="cycles of work per slot in a random-duration workload, under the seed's model "
                        "(default 12)")
    p.add_argument("--random-time-scale", type=float, default=0.0,
                   help="TIME_SCALE of the random-duration runs (default: the first of --time-scales)")
    p.add_argument("--worklife", type=float, default=DEFAULT_WORKLIFE_S,
                   help="CLAIM_WORKLIFE of the claim-reuse run (default 1200, HTCondor's)")
    p.add_argument("--parts", default="fixed,random,reuse",
                   help="which parts to run: fixed, random, reuse (default all three)")
    p.add_argument("--keep", action="store_true", help="keep the pools' state directories and logs")
    return run


def _floats(text: str, what: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what}: expected comma-separated numbers, got {text!r}") from None
    if not out or any(not x > 0 for x in out):
        raise ValueError(f"{what}: expected positive numbers, got {text!r}")
    return out


@dataclass
class Settings:
    interval_s: float
    time_scales: list[float]
    ratios: list[float]
    slots_per_point: int
    jobs_per_slot: int
    kinds: list[str]
    means: list[float]
    random_slots: int
    horizon_cycles: float
    random_time_scale: float
    worklife_s: float
    parts: set[str]


def settings(args: argparse.Namespace) -> Settings:
    scales = _floats(args.time_scales, "--time-scales")
    if args.ratios:
        ratios = _floats(args.ratios, "--ratios")
    elif args.points:
        ratios = sweep_ratios(args.points)
    else:
        ratios = list(DEFAULT_RATIOS)
    if len(set(ratios)) != len(ratios):
        raise ValueError("--ratios: each D/C value once")
    kinds = [k.strip() for k in args.distributions.split(",") if k.strip()]
    for k in kinds:
        if k not in loading.Distribution.KINDS or k == "fixed":
            raise ValueError(f"--distributions: unknown distribution {k!r} (known: exponential, lognormal, uniform)")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"fixed", "random", "reuse"}:
        raise ValueError(f"--parts: choose from fixed, random, reuse; got {args.parts!r}")
    for name in ("slots_per_point", "jobs_per_slot", "random_slots"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    if not args.interval > 0 or not args.horizon > 0:
        raise ValueError("--interval and --horizon must be positive")
    if args.worklife == 0:
        raise ValueError("--worklife 0 turns claim reuse off; give the CLAIM_WORKLIFE to compare with")
    return Settings(float(args.interval), scales, ratios, args.slots_per_point, args.jobs_per_slot, kinds,
                    _floats(args.means, "--means"), args.random_slots, float(args.horizon),
                    float(args.random_time_scale or scales[0]), float(args.worklife), parts)


def run(args: argparse.Namespace) -> int:
    from daemons.cli.pool import PoolError
    try:
        s = settings(args)
    except ValueError as e:
        print(f"htcpool experiment cadence: {e}", file=sys.stderr)
        return 2
    out = out_dir(args.out, "cadence")
    state = Path(tempfile.mkdtemp(prefix="htcpool-exp-cadence-"))
    wall0 = time.monotonic()

    def emit(line: str) -> None:
        print(line, flush=True)

    C = s.interval_s
    emit(f"experiment cadence: NEGOTIATOR_INTERVAL {C:g} s, NEGOTIATOR_CYCLE_DELAY 0, static 1-cpu slots, "
         f"one machine per workload; parts: {', '.join(p for p in ('fixed', 'random', 'reuse') if p in s.parts)}")
    close = guard_violations(s.ratios, GUARD)
    if close and "fixed" in s.parts:
        emit(f"  note: D/C = {', '.join(f'{x:g}' for x in close)}: job(s) ending less than {GUARD:g} cycle before a "
             f"cycle; the time the pool needs to free and re-advertise a slot may make them miss it")
    fixed: dict[float, RunResult] = {}
    rand: dict[str, RunResult] = {}
    try:
        if "fixed" in s.parts:
            fw = fixed_workloads(s.ratios, C, s.slots_per_point, s.jobs_per_slot)
            for scale in s.time_scales:
                emit(f"fixed durations at TIME_SCALE {scale:g}, CLAIM_WORKLIFE = 0: {len(s.ratios)} values of D/C, "
                     f"{s.slots_per_point} slot(s) each, {s.jobs_per_slot} job(s) per slot")
                fixed[scale] = asyncio.run(run_pool(f"fixed-x{scale:g}", fw, slots=s.slots_per_point, interval_s=C,
                                                    time_scale=scale, worklife_s=0.0, state=state, emit=emit))
        rw = random_workloads(s.kinds, s.means, C, s.random_slots, s.horizon_cycles, args.seed)
        for part, worklife in (("random", 0.0), ("reuse", s.worklife_s)):
            if part not in s.parts:
                continue
            emit(f"random durations at TIME_SCALE {s.random_time_scale:g}, CLAIM_WORKLIFE = {worklife:g}: "
                 f"{', '.join(s.kinds)}; E[D]/C = {', '.join(f'{m:g}' for m in s.means)}; {s.random_slots} slots "
                 f"per workload, about {s.horizon_cycles:g} cycles of work per slot; seed {args.seed}")
            rand[part] = asyncio.run(run_pool(part, rw, slots=s.random_slots, interval_s=C,
                                              time_scale=s.random_time_scale, worklife_s=worklife, state=state,
                                              emit=emit))
    except (MeasureError, TimeoutError, PoolError) as e:
        print(f"htcpool experiment cadence: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            emit(f"pool state and logs kept in {state}")
        else:
            shutil.rmtree(state, ignore_errors=True)

    summary: dict[str, Any] = {"interval_s": C}
    written: list[Path] = []
    if fixed:
        summary["time_scales"] = _report_fixed(fixed, s, out, written, emit)
    if rand:
        summary.update(_report_random(rand, s, out, written, emit))
    runs = list(fixed.values()) + list(rand.values())
    written.append(_write_cycles(runs, out / "cycles.csv"))
    written.append(_write_jobs(runs, C, out / "jobs.csv"))
    emit("")
    summary["runs"] = {}
    for r in runs:
        gaps = r.cycle_spacing()
        lat = r.start_latencies()
        info = {"time_scale": r.time_scale, "wall_s": round(r.wall_s, 1), "cycles": len(gaps) + 1,
                "cycle_spacing_min_s": round(min(gaps), 3) if gaps else None,
                "cycle_spacing_max_s": round(max(gaps), 3) if gaps else None,
                "match_to_start_mean_s": round(_mean(lat), 2), "match_to_start_max_s": round(max(lat, default=0), 2)}
        summary["runs"][r.label] = info
        if gaps:
            emit(f"[{r.label}] {len(gaps) + 1} cycles {min(gaps):.2f} .. {max(gaps):.2f} pool s apart "
                 f"(NEGOTIATOR_INTERVAL {C:g}); a job started {_mean(lat):.1f} pool s after its match on average, "
                 f"{max(lat, default=0):.1f} at most; {r.wall_s:.0f} s of wall time")
    summary["wall_s"] = round(time.monotonic() - wall0, 1)
    emit(f"wrote {', '.join(str(p) for p in written)}")
    emit(f"total wall time {summary['wall_s']:.0f} s")
    if args.json:
        json_line(summary)
    if "time_scales" in summary and any(t["max_abs_error"] > 0.02 for t in summary["time_scales"]):
        return 1
    return 0


