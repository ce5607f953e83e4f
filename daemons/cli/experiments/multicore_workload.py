"""The multicore experiment's workload and statistics. Pure: seeded draws, no I/O.

The workload is seed 003's: "typical multicore and singlecore waiting jobs at our
site ... being level controlled by something upstream" — an ARC CE or pilot factory
keeps a number of jobs of each kind waiting, and tops the queue up as jobs start.
Multicore delivery is "sporadic": the seed's plots have multicore droughts ("a short
mc drought occurred, sc jobs still queued"), so delivery of multicore jobs switches
off and on, for seeded exponential stretches. Durations are exponential, clipped to
[10 min, 4 × mean], drawn per job from the seed.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    singlecore_queued: int = 100        # jobs kept waiting (upstream level), single-core
    multicore_queued: int = 20          # jobs kept waiting while multicore jobs are delivered
    singlecore_mean_s: float = 3 * 3600.0
    multicore_mean_s: float = 6 * 3600.0
    multicore_cpus: int = 8
    delivery_mean_s: float = 36 * 3600.0   # multicore delivery on, mean stretch
    drought_mean_s: float = 4 * 3600.0     # multicore delivery off, mean stretch (0: never)
    feed_interval_s: float = 300.0         # how often upstream tops the queues up


def duration(rng: random.Random, mean_s: float) -> int:
    """One job's duration: exponential with mean `mean_s`, clipped to [600 s, 4 × mean]."""
    return int(min(max(rng.expovariate(1.0 / mean_s), 600.0), 4 * mean_s))


def drought_schedule(rng: random.Random, wl: Workload, span_s: float) -> list[tuple[float, float]]:
    """(start, end) offsets of multicore droughts within [0, span_s); delivery comes first."""
    if wl.drought_mean_s <= 0:
        return []
    out = []
    t = rng.expovariate(1.0 / wl.delivery_mean_s)
    while t < span_s:
        end = t + max(600.0, rng.expovariate(1.0 / wl.drought_mean_s))
        out.append((t, min(end, span_s)))
        t = end + rng.expovariate(1.0 / wl.delivery_mean_s)
    return out


def in_drought(droughts: list[tuple[float, float]], offset_s: float) -> bool:
    return any(a <= offset_s < b for a, b in droughts)


def top_up(level: int, idle: int) -> int:
    """Jobs upstream submits now to bring `idle` back to its level."""
    return max(0, level - idle)


def submit_text(kind: str, durations: list[int], cpus: int, grouped: bool = True) -> str:
    """One cluster: each job with its own Duration; `grouped`: single-core and multicore
    jobs in their own accounting groups (the seed's GROUP_SORT_EXPR tells them apart by
    name), else the submitter is the owner (`kind`)."""
    lines = ["universe = vanilla", "executable = /bin/sleep", f"request_cpus = {cpus}",
             f"request_memory = {128 * cpus}"]
    if grouped:
        group = "group_mcore" if kind == "mc" else "group_score"
        lines += [f"accounting_group = {group}", f"accounting_group_user = {kind}"]
    for d in durations:
        lines += [f"+Duration = {d}", f"arguments = {d}", "queue"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Sample:
    t: float                  # pool time
    running_mc: int
    running_sc: int
    queued_mc: int
    queued_sc: int
    draining: int             # machines draining
    idle_cores_draining: int  # free cores on draining machines: left idle by draining
    idle_cores: int           # free cores anywhere
    cores: int                # cores in the pool


@dataclass(frozen=True)
class Summary:
    samples: int
    mc_mean: float
    mc_sd: float
    wastage_pct: float        # core-time left idle on draining machines, % of all core-time
    idle_pct: float           # core-time left idle anywhere, %
    draining_mean: float
    queued_mc_mean: float
    queued_sc_mean: float


def summarize(samples: list[Sample]) -> Summary:
    """Statistics over equally spaced samples: mean and (population) standard deviation of
    running multicore jobs, as the seed reports, and wastage as a share of core-time."""
    n = len(samples)
    if n == 0:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    mc = [s.running_mc for s in samples]
    mean = sum(mc) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in mc) / n)
    cores = sum(s.cores for s in samples) or 1
    return Summary(n, mean, sd, 100.0 * sum(s.idle_cores_draining for s in samples) / cores,
                   100.0 * sum(s.idle_cores for s in samples) / cores,
                   sum(s.draining for s in samples) / n, sum(s.queued_mc for s in samples) / n,
                   sum(s.queued_sc for s in samples) / n)


def steady_start(samples: list[Sample], fraction: float = 0.9) -> int:
    """Where the ramp-up ends: the first sample whose running multicore jobs reach `fraction`
    of the level they settle at (their mean over the second half of the samples). A
    controller that starts from nothing climbs for a day or more (DrainBoss's first drains
    take a drain time to pay off); statistics over the steady state leave that climb out."""
    if not samples:
        return 0
    tail = samples[len(samples) // 2:]
    level = sum(s.running_mc for s in tail) / len(tail)
    if level < 1:
        return 0   # nothing to climb to (no draining: multicore jobs hardly ever run)
    return next((i for i, s in enumerate(samples) if s.running_mc >= fraction * level), 0)


def scaled(value: float, machines: int, reference_machines: int = 784) -> float:
    """A site's setting scaled from its farm (RAL's 784 nodes) to this pool."""
    return value * machines / reference_machines
