"""Seed 004's loading factor measured: the workloads of `htcpool experiment cadence` and the
measurement of each slot from the jobs' records and the negotiator's cycles. Pure."""
from __future__ import annotations

import math
import random
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Sequence

from daemons.cli.experiments import loading

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


def model_pool_lf(w: Workload, slots: int, interval_s: float, worklife_s: float) -> float:
    """The seed's model on the workload's own draws."""
    return loading.queue_replay(w.durations, slots, interval_s, worklife_s).loading


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
