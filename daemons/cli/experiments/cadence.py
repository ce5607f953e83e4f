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
import math
import random
import shutil
import sys
import tempfile
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from daemons.cli.experiments import loading
from daemons.cli.experiments.common import json_line, out_dir, print_table, pyplot, write_csv

# Fixed-duration sweep, in cycles: for each whole number of cycles the bottom of a
# tooth (just past a boundary: 1.02 C waits almost a whole cycle), its middle and
# near its top (0.8 C: the slot waits a fifth of a cycle). A job that ends just before
# a cycle can miss it: its slot is free in the collector only after the job's exit has
# reached the schedd, the claim has been released and the slot re-advertised, and the
# job itself started a little after its match. That takes tens to hundreds of
# milliseconds of wall time, which is TIME_SCALE times as many pool seconds: at 240,
# 10 to 90 pool seconds on a loaded 2-core machine. Values closer than GUARD cycles
# below a boundary are flagged.
DEFAULT_RATIOS = (0.2, 0.5, 0.8, 1.02, 1.5, 1.8, 2.02, 2.5, 2.8, 3.02, 3.5, 3.8, 4.02, 4.5, 4.8, 5.02, 5.5,
                  5.8, 6.02)
GUARD = 0.2
DEFAULT_MEANS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
DEFAULT_WORKLIFE_S = 1200.0  # HTCondor's CLAIM_WORKLIFE default
SENTINEL_S = 1e9             # a sentinel job never ends during a run

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
@dataclass(frozen=True)
class Workload:
    """The jobs one machine's slots take from their queue, in order."""
    kind: str                   # "fixed" or a distribution name
    ratio: float                # D / C for fixed, E[D] / C for a distribution
    durations: tuple[float, ...]


def sweep_ratios(points: int, lo: float = 0.2, hi: float = 6.02, guard: float | None = None) -> list[float]:
    """`points` values of D / C spread evenly over [lo, hi], none within `guard` cycles below a boundary.

    A value in the guard band moves just past the boundary (the bottom of the next
    tooth), where the formula is unambiguous.
    """
    guard = GUARD if guard is None else guard
    if points < 1:
        raise ValueError("--points must be at least 1")
    xs = [lo] if points == 1 else [lo + (hi - lo) * i / (points - 1) for i in range(points)]
    out = []
    for x in xs:
        frac = round(x - math.floor(x), 9)
        if frac == 0 or frac > 1 - guard:
            x = math.floor(x) + 1.02 if frac else x + 0.02
        out.append(round(x, 4))
    return out


def guard_violations(ratios: Sequence[float], guard: float) -> list[float]:
    """Ratios within `guard` cycles below (or exactly on) a cycle boundary."""
    out = []
    for x in ratios:
        frac = round(x - math.floor(x), 9)
        if frac == 0 or frac > 1 - guard:
            out.append(x)
    return out


def fixed_workloads(ratios: Sequence[float], interval_s: float, slots: int, jobs_per_slot: int) -> list[Workload]:
    """One workload per D / C, in negotiation order: jobs that end closest before a boundary first.

    A cycle matches its requests one after another, so the last machine matched in a
    cycle starts its jobs later than the first; a job that ends just before the next
    cycle is the one that cannot afford that.
    """
    order = sorted(ratios, key=lambda r: -round(r - math.floor(r), 6))
    return [Workload("fixed", r, tuple([round(r * interval_s, 3)] * (slots * jobs_per_slot))) for r in order]


def random_workloads(kinds: Sequence[str], means: Sequence[float], interval_s: float, slots: int,
                     horizon_cycles: float, seed: int) -> list[Workload]:
    """Per (distribution, mean): enough jobs to hold `slots` slots for about
    `horizon_cycles` cycles under the seed's model (a job holds its slot for E[Z] =
    E[D] / pool_lf on average); the last ones may run longer. Seeded per workload, so a
    workload's draws do not depend on which others run."""
    out = []
    for kind in kinds:
        for m in means:
            dist = loading.Distribution(kind, m * interval_s)
            mean_held = dist.mean_s / loading.pool_lf(dist, interval_s)
            n = max(slots, math.ceil(slots * horizon_cycles * interval_s / mean_held))
            rng = random.Random(f"{seed}:{kind}:{m:g}")
            out.append(Workload(kind, m, tuple(round(dist.sample(rng), 3) for _ in range(n))))
    return out


def submit_description(assignment: Sequence[tuple[str, Workload]], slots: int) -> str:
    """One cluster: per machine its jobs in order, then one sentinel per slot."""
    lines = ["universe = vanilla", "executable = /bin/sleep"]
    for machine, w in assignment:
        lines += [f'+CadenceMachine = "{machine}"', f'+CadenceKind = "{w.kind}"', f"+CadenceRatio = {w.ratio!r}",
                  '+CadenceRole = "job"']
        for d in w.durations:
            lines += [f"+Duration = {d!r}", f"arguments = {d!r}", "queue"]
        lines += ['+CadenceRole = "sentinel"', f"+Duration = {SENTINEL_S:.0f}", f"arguments = {SENTINEL_S:.0f}",
                  f"queue {slots}"]
    return "\n".join(lines) + "\n"


# ---- measurement (pure) ------------------------------------------------------------------
@dataclass(frozen=True)
class JobRecord:
    """What the schedd says about one job: a finished real job, or a running sentinel."""
    machine: str          # CadenceMachine
    proc: int             # ProcId: a slot takes its workload's jobs in this order
    slot: str             # LastRemoteHost (RemoteHost for a running sentinel)
    start_date: int       # JobCurrentStartDate (pool s, whole)
    completion_date: int  # CompletionDate (pool s, whole); 0 for a sentinel
    wall_clock: float     # RemoteWallClockTime (pool s, exact); 0 for a sentinel
    duration: float       # the Duration it asked for
    sentinel: bool = False


@dataclass(frozen=True)
class JobTiming:
    proc: int
    duration: float       # what it asked for
    start: float          # estimated to within half a pool second
    run: float            # RemoteWallClockTime: exact
    origin: float         # when the slot was given this job: its match cycle's start, or its start on reuse
    reused: bool          # ran on the previous job's claim, no match needed
    next_origin: float    # when the slot was given its next job

    @property
    def end(self) -> float:
        return self.start + self.run

    @property
    def held(self) -> float:
        return self.next_origin - self.origin

    @property
    def loading(self) -> float:
        return self.run / self.held if self.held > 0 else 0.0


@dataclass
class SlotMeasure:
    """One slot's real jobs, from its first match to the match (or reuse) that gave it its sentinel."""
    slot: str
    jobs: list[JobTiming] = field(default_factory=list)
    matches: int = 0          # real jobs that needed a match
    start_latency: list[float] = field(default_factory=list)  # match cycle start -> job start, matched jobs

    @property
    def busy(self) -> float:
        return sum(j.run for j in self.jobs)

    @property
    def held(self) -> float:
        return self.jobs[-1].next_origin - self.jobs[0].origin if self.jobs else 0.0

    @property
    def held_from_start(self) -> float:
        """The literal variant: from the first job's start rather than its match (shorter by
        the pipeline's match-to-start latency, which then counts as neither busy nor held)."""
        return self.jobs[-1].next_origin - self.jobs[0].start if self.jobs else 0.0

    @property
    def loading(self) -> float:
        return self.busy / self.held if self.held > 0 else 0.0


class MeasureError(RuntimeError):
    pass


def _start_estimate(j: JobRecord, cycle_starts: Sequence[float]) -> tuple[float, float]:
    """(start, start of the latest cycle before it) in pool seconds.

    The startd's end time is CompletionDate + [0, 1) and RemoteWallClockTime is exact,
    so a finished job started in [CD - RWCT, CD + 1 - RWCT); the schedd stamped
    JobCurrentStartDate (whole seconds) just before asking the startd to start it.
    The midpoint of what is left is within half a second.
    """
    if j.sentinel:
        lo, hi = float(j.start_date), j.start_date + 1.0
    else:
        hi = j.completion_date + 1.0 - j.wall_clock
        lo = max(j.completion_date - j.wall_clock, float(j.start_date))
    hi = min(hi, j.start_date + 1.0)
    i = bisect_right(cycle_starts, hi) - 1
    if i < 0:
        raise MeasureError(f"no negotiation cycle before job {j.proc} of {j.machine} started")
    cycle = cycle_starts[i]
    lo = min(max(lo, cycle), hi)
    return (lo + hi) / 2.0, cycle


def measure_slot(slot: str, records: Sequence[JobRecord], cycle_starts: Sequence[float]) -> SlotMeasure:
    """Busy and held time of one slot: its real jobs, then its sentinel."""
    recs = sorted(records, key=lambda r: r.proc)
    if not recs or not recs[-1].sentinel or any(r.sentinel for r in recs[:-1]):
        raise MeasureError(f"{slot}: expected its jobs and then one sentinel")
    starts = sorted(cycle_starts)
    est = [_start_estimate(r, starts) for r in recs]
    m = SlotMeasure(slot)
    origins: list[float] = []
    reused_flags: list[bool] = []
    prev_end: float | None = None
    for r, (start, cycle) in zip(recs, est):
        if prev_end is not None and start < prev_end - 1.0:
            raise MeasureError(f"{slot}: job {r.proc} started before the job before it ended")
        # No cycle started between the previous job's end and this start: same claim.
        reused = prev_end is not None and cycle < prev_end
        reused_flags.append(reused)
        origins.append(start if reused else cycle)
        if not reused:
            m.matches += 0 if r.sentinel else 1
            m.start_latency.append(start - cycle)
        prev_end = start + r.wall_clock
    for k, r in enumerate(recs[:-1]):
        m.jobs.append(JobTiming(r.proc, r.duration, est[k][0], r.wall_clock, origins[k], reused_flags[k],
                                origins[k + 1]))
    return m


def measure(records: Sequence[JobRecord], cycle_starts: Sequence[float]) -> dict[str, SlotMeasure]:
    """Per slot (slots that ran only their sentinel are left out)."""
    by_slot: dict[str, list[JobRecord]] = {}
    for r in records:
        by_slot.setdefault(r.slot, []).append(r)
    out = {s: measure_slot(s, rs, cycle_starts) for s, rs in by_slot.items()}
    return {s: m for s, m in out.items() if m.jobs}


def pooled(measures: Sequence[SlotMeasure], from_start: bool = False) -> float:
    """Summed busy over summed held time."""
    held = sum(m.held_from_start if from_start else m.held for m in measures)
    return sum(m.busy for m in measures) / held if held > 0 else 0.0


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


def model_pool_lf(w: Workload, slots: int, interval_s: float, worklife_s: float) -> float:
    """The seed's model on the workload's own draws."""
    return loading.queue_replay(w.durations, slots, interval_s, worklife_s).loading


async def run_pool(label: str, workloads: Sequence[Workload], *, slots: int, interval_s: float, time_scale: float,
                   worklife_s: float, state: Path, emit) -> RunResult:
    """Start a pool with one machine per workload, run the workloads side by side, measure every slot."""
    from daemons.cli.client import PoolClient, wait_for
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
        async with PoolClient(pool.collector_address) as c:
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


def _queue_span(w: Workload, slots: int, interval_s: float) -> float:
    """Under the seed's model without claim reuse (the longer case), when the last slot
    of the workload is given its sentinel."""
    import heapq
    heap = [0.0] * slots
    for d in w.durations:
        t = heapq.heappop(heap)
        nxt = interval_s * loading.cycles_held(t + d, interval_s)
        heapq.heappush(heap, nxt if nxt > t else t + interval_s)
    return max(heap)


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


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _write_cycles(runs: Sequence[RunResult], path: Path) -> Path:
    rows = []
    for r in runs:
        prev = None
        for c in r.cycles:
            rows.append([r.label, r.time_scale, c.cycle, round(c.start, 3), round(c.end, 3),
                         round(c.start - prev.start, 3) if prev is not None else "", c.matches, c.rejections,
                         c.rescheduled, round(c.wall_duration, 4)])
            prev = c
    return write_csv(path, ["run", "time_scale", "cycle", "start", "end", "spacing", "matches", "rejections",
                            "rescheduled", "wall_duration_s"], rows)


def _write_jobs(runs: Sequence[RunResult], interval_s: float, path: Path) -> Path:
    """Every real job: when its slot was given it and its successor; without claim reuse,
    how many more cycles than the seed's model its slot waited (a job that ended too
    close before a cycle to be matched in it)."""
    rows = []
    for r in runs:
        for machine, slots in sorted(r.measures.items()):
            w = r.workloads[machine]
            for slot, m in sorted(slots.items()):
                for j in m.jobs:
                    model = interval_s * loading.cycles_held(j.duration, interval_s)
                    rows.append([r.label, r.time_scale, machine, slot, w.kind, w.ratio, j.proc, j.duration,
                                 round(j.origin, 3), round(j.start, 3), round(j.end, 3), j.reused,
                                 round(j.next_origin, 3), round(j.held, 3), round(j.loading, 5), model,
                                 round((j.held - model) / interval_s) if r.worklife_s == 0 else ""])
    return write_csv(path, ["run", "time_scale", "machine", "slot", "kind", "ratio", "proc", "duration", "origin",
                            "start", "end", "reused", "next_origin", "held", "loading", "model_held",
                            "extra_cycles"], rows)


def _report_fixed(fixed: dict[float, RunResult], s: Settings, out: Path, written: list[Path], emit) -> list[dict]:
    C = s.interval_s
    rows: list[dict[str, Any]] = []
    per_scale = []
    for scale, r in fixed.items():
        worst: dict[str, Any] | None = None
        for machine, w in sorted(r.workloads.items(), key=lambda kv: kv[1].ratio):
            ms = list(r.measures[machine].values())
            f = loading.loading_factor(w.ratio * C, C)
            meas = pooled(ms)
            row = {"time_scale": scale, "d_over_c": w.ratio, "duration_s": w.durations[0], "slots": len(ms),
                   "jobs": sum(len(m.jobs) for m in ms), "busy_s": round(sum(m.busy for m in ms), 3),
                   "held_s": round(sum(m.held for m in ms), 3), "formula": round(f, 5), "measured": round(meas, 5),
                   "error": round(meas - f, 5), "max_abs_slot_error": round(max(abs(m.loading - f) for m in ms), 5),
                   "measured_from_first_start": round(pooled(ms, from_start=True), 5),
                   "match_to_start_s": round(_mean([x for m in ms for x in m.start_latency]), 2)}
            rows.append(row)
            if worst is None or abs(row["error"]) > abs(worst["error"]):
                worst = row
        mine = [rw for rw in rows if rw["time_scale"] == scale]
        per_scale.append({"time_scale": scale, "max_abs_error": abs(worst["error"]) if worst else None,
                          "worst_d_over_c": worst["d_over_c"] if worst else None,
                          "max_abs_slot_error": max(rw["max_abs_slot_error"] for rw in mine),
                          "max_abs_error_from_first_start": round(max(abs(rw["measured_from_first_start"]
                                                                         - rw["formula"]) for rw in mine), 5),
                          "points": len(mine), "wall_s": round(r.wall_s, 1)})
    header = list(rows[0])
    written.append(write_csv(out / "fixed.csv", header, [[rw[k] for k in header] for rw in rows]))
    written.append(_plot_fixed(rows, s, out / "cadence_fixed.png"))
    emit("")
    emit(f"fixed durations, C = {C:g} s, CLAIM_WORKLIFE = 0: measured loading factor (busy / held) against seed "
         f"004's D / (C (q + ceil(r)))")
    scales = list(fixed)
    header = ["D/C", "formula"]
    for scale in scales:
        header += [f"measured x{scale:g}", f"error x{scale:g}"]
    table = []
    for ratio in sorted({rw["d_over_c"] for rw in rows}):
        line: list[Any] = [f"{ratio:g}", round(loading.loading_factor(ratio * C, C), 4)]
        for scale in scales:
            rw = next(x for x in rows if x["time_scale"] == scale and x["d_over_c"] == ratio)
            line += [round(rw["measured"], 4), f"{rw['error']:+.4f}"]
        table.append(line)
    print_table(header, table)
    for t in per_scale:
        emit(f"TIME_SCALE {t['time_scale']:g}: max |error| {t['max_abs_error']:.4f} (at D/C = "
             f"{t['worst_d_over_c']:g}), worst single slot {t['max_abs_slot_error']:.4f}: "
             f"{'within' if t['max_abs_error'] <= 0.02 else 'OUTSIDE'} the 2% target")
    return per_scale


def _report_random(rand: dict[str, RunResult], s: Settings, out: Path, written: list[Path], emit) -> dict:
    C = s.interval_s
    rows: list[dict[str, Any]] = []
    for part, r in rand.items():
        for machine, w in sorted(r.workloads.items(), key=lambda kv: (s.kinds.index(kv[1].kind), kv[1].ratio)):
            dist = loading.Distribution(w.kind, w.ratio * C)
            ms = list(r.measures[machine].values())
            jobs = [j for m in ms for j in m.jobs]
            meas = pooled(ms)
            model = model_pool_lf(w, r.slots, C, r.worklife_s)
            row = {"mode": "reuse off" if part == "random" else "reuse on", "worklife_s": r.worklife_s,
                   "distribution": w.kind, "mean_over_c": w.ratio, "slots": len(ms), "jobs": len(jobs),
                   "sample_mean_over_c": round(_mean(w.durations) / C, 4),
                   "measured": round(meas, 5), "model_same_draws": round(model, 5),
                   "error_vs_model": round(meas - model, 5),
                   "pool_lf_theory": round(loading.pool_lf(dist, C), 5),
                   "mean_slot_lf_theory": round(loading.mean_slot_lf(dist, C), 5),
                   "approx": round(loading.approx_pool_lf(w.ratio * C, C), 5),
                   "measured_mean_job_lf": round(_mean([j.loading for j in jobs]), 5),
                   "matches": sum(m.matches for m in ms),
                   # without reuse: jobs whose slot waited a cycle more than the model (ended too close before a cycle)
                   "late_jobs": sum(1 for j in jobs if j.held > C * loading.cycles_held(j.duration, C) + C / 2)
                   if r.worklife_s == 0 else "",
                   "model_matches": loading.queue_replay(w.durations, r.slots, C, r.worklife_s).matches}
            if part == "reuse":
                row["model_long_run"] = round(loading.simulate_pool_lf(
                    dist, C, r.worklife_s, random.Random(f"long:{w.kind}:{w.ratio}")), 5)
            rows.append(row)
    header = list(dict.fromkeys(k for rw in rows for k in rw))
    written.append(write_csv(out / "random.csv", header, [[rw.get(k, "") for k in header] for rw in rows]))
    off = [rw for rw in rows if rw["mode"] == "reuse off"]
    on = [rw for rw in rows if rw["mode"] == "reuse on"]
    if off:
        written.append(_plot_random(off, s, out / "cadence_random.png"))
    if on:
        written.append(_plot_reuse(off, on, s, out / "cadence_reuse.png"))
    result: dict[str, Any] = {}
    if off:
        emit("")
        emit(f"random durations, C = {C:g} s, CLAIM_WORKLIFE = 0, TIME_SCALE {s.random_time_scale:g}: pool loading "
             f"factor (summed busy / summed held)")
        print_table(["dist", "E[D]/C", "jobs", "measured", "model, same draws", "error", "late", "E[D]/E[Z]",
                     "E[LF(D)]", "E[D]/(E[D]+C/2)", "mean job LF"],
                    [[rw["distribution"], f"{rw['mean_over_c']:g}", rw["jobs"], round(rw["measured"], 4),
                      round(rw["model_same_draws"], 4), f"{rw['error_vs_model']:+.4f}", rw["late_jobs"],
                      round(rw["pool_lf_theory"], 4), round(rw["mean_slot_lf_theory"], 4), round(rw["approx"], 4),
                      round(rw["measured_mean_job_lf"], 4)] for rw in off])
        emit("(late: jobs that ended so shortly before a cycle that their slot was not free in it, and waited "
             "one more; model: the seed's model run on the same durations)")
        result["random"] = _summary(off, s)
    if on:
        by_key = {(rw["distribution"], rw["mean_over_c"]): rw for rw in off}
        emit("")
        emit(f"the same draws with claim reuse, CLAIM_WORKLIFE = {s.worklife_s:g}, TIME_SCALE "
             f"{s.random_time_scale:g}: pool loading factor")
        print_table(["dist", "E[D]/C", "reuse off", "reuse on", "gain", "model on, same draws", "error",
                     "model on, long run", "matches off", "matches on"],
                    [[rw["distribution"], f"{rw['mean_over_c']:g}",
                      round(by_key[k]["measured"], 4) if (k := (rw["distribution"], rw["mean_over_c"])) in by_key
                      else "", round(rw["measured"], 4),
                      f"{rw['measured'] - by_key[k]['measured']:+.4f}" if k in by_key else "",
                      round(rw["model_same_draws"], 4), f"{rw['error_vs_model']:+.4f}", round(rw["model_long_run"], 4),
                      by_key[k]["matches"] if k in by_key else "", rw["matches"]] for rw in on])
        result["reuse"] = _summary(on, s)
        if off:
            gains = [rw["measured"] - by_key[(rw["distribution"], rw["mean_over_c"])]["measured"]
                     for rw in on if (rw["distribution"], rw["mean_over_c"]) in by_key]
            result["reuse"]["mean_gain"] = round(_mean(gains), 4)
    return result


def _summary(rows: list[dict[str, Any]], s: Settings) -> dict[str, Any]:
    errs = [abs(rw["error_vs_model"]) for rw in rows]
    out: dict[str, Any] = {
        "time_scale": s.random_time_scale, "max_abs_error_vs_model": round(max(errs), 5),
        "mean_abs_error_vs_model": round(_mean(errs), 5),
        "measured": {f"{rw['distribution']}:{rw['mean_over_c']:g}": rw["measured"] for rw in rows}}
    if rows and rows[0]["late_jobs"] != "":
        out["late_jobs"] = sum(rw["late_jobs"] for rw in rows)
        out["jobs"] = sum(rw["jobs"] for rw in rows)
    return out


# ---- plots ---------------------------------------------------------------------------------
_STYLES = ("o", "s", "^", "D", "v")


def _plot_fixed(rows: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    hi = max(6.2, max(s.ratios) + 0.2)
    xs = [i / 3000 * hi for i in range(1, 3001)]
    ax.plot(xs, [loading.loading_factor(x * C, C) for x in xs], color="0.55", lw=1,
            label="seed 004: D / (C (q + ceil(r)))")
    scales = list(dict.fromkeys(rw["time_scale"] for rw in rows))
    for k, scale in enumerate(scales):
        pts = [rw for rw in rows if rw["time_scale"] == scale]
        ax.plot([rw["d_over_c"] for rw in pts], [rw["measured"] for rw in pts], _STYLES[k % 5], ms=7 - 2 * k,
                mfc="none" if k else None, label=f"measured, TIME_SCALE {scale:g}")
        ax2.plot([rw["d_over_c"] for rw in pts], [rw["error"] for rw in pts], _STYLES[k % 5] + "-", ms=4, lw=0.8,
                 mfc="none" if k else None, label=f"TIME_SCALE {scale:g}")
    ax.set_ylabel("slot loading factor (busy / held)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"fixed job durations: NEGOTIATOR_INTERVAL C = {C:g} s, CLAIM_WORKLIFE = 0")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    ax2.axhspan(-0.02, 0.02, color="tab:green", alpha=0.12, label="±0.02 target")
    ax2.axhline(0, color="0.5", lw=0.8)
    ax2.set_ylabel("measured − formula")
    lim = max(0.03, max(abs(rw["error"]) for rw in rows) * 1.2)
    ax2.set_ylim(-lim, lim)
    ax2.set_xlabel("job duration D / C (negotiation cycles)")
    ax2.legend(loc="upper right", fontsize=7, ncol=3)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _curve_xs(means: Sequence[float]) -> list[float]:
    lo, hi = min(0.1, min(means)), max(means) * 1.05
    return [lo + (hi - lo) * i / 240 for i in range(241)]


def _plot_random(rows: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    kinds = list(dict.fromkeys(rw["distribution"] for rw in rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.4), sharey=True, squeeze=False)
    xs = _curve_xs(s.means)
    for ax, kind in zip(axes[0], kinds):
        pts = [rw for rw in rows if rw["distribution"] == kind]
        ax.plot(xs, [loading.approx_pool_lf(x * C, C) for x in xs], "--", color="tab:orange", lw=1.2,
                label="E[D] / (E[D] + C/2)")
        ax.plot(xs, [loading.mean_slot_lf(loading.Distribution(kind, x * C), C) for x in xs], ":",
                color="tab:purple", lw=1.5, label="E[LF(D)]: seed's formula, averaged")
        ax.plot(xs, [loading.pool_lf(loading.Distribution(kind, x * C), C) for x in xs], "-", color="0.45", lw=1,
                label="E[D] / E[Z]: seed's model, pool")
        ax.plot([rw["mean_over_c"] for rw in pts], [rw["model_same_draws"] for rw in pts], "x", color="0.2", ms=6,
                label="seed's model on the same draws")
        ax.plot([rw["mean_over_c"] for rw in pts], [rw["measured"] for rw in pts], "o", color="tab:blue", mfc="none",
                ms=8, label="measured pool loading")
        ax.set_title(f"{kind} durations")
        ax.set_xlabel("mean job duration E[D] / C")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("pool loading factor (summed busy / summed held)")
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.suptitle(f"random job durations: C = {C:g} s, CLAIM_WORKLIFE = 0, TIME_SCALE {s.random_time_scale:g}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_reuse(off: list[dict[str, Any]], on: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    kinds = list(dict.fromkeys(rw["distribution"] for rw in on))
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.4), sharey=True, squeeze=False)
    xs = _curve_xs(s.means)
    for ax, kind in zip(axes[0], kinds):
        o = [rw for rw in off if rw["distribution"] == kind]
        n = [rw for rw in on if rw["distribution"] == kind]
        ax.plot(xs, [loading.pool_lf(loading.Distribution(kind, x * C), C) for x in xs], "-", color="0.55", lw=1,
                label="off: E[D] / E[Z]")
        if o:
            ax.plot([rw["mean_over_c"] for rw in o], [rw["measured"] for rw in o], "o", color="tab:blue", mfc="none",
                    ms=8, label="off (CLAIM_WORKLIFE 0): measured")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["model_long_run"] for rw in n], "--", color="tab:green", lw=1,
                label="on: seed's model, long run")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["model_same_draws"] for rw in n], "x", color="tab:green", ms=6,
                label="on: seed's model, same draws")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["measured"] for rw in n], "s", color="tab:green", mfc="none",
                ms=8, label=f"on (CLAIM_WORKLIFE {s.worklife_s:g}): measured")
        ax.set_title(f"{kind} durations")
        ax.set_xlabel("mean job duration E[D] / C")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("pool loading factor (summed busy / summed held)")
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.suptitle(f"what claim reuse buys: C = {C:g} s, TIME_SCALE {s.random_time_scale:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
