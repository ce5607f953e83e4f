"""`htcpool bench scale`: whether one (pool size, TIME_SCALE) step stayed faithful. Pure.

A step runs a steady workload and measures, over a window of pool time after a
warm-up, four things the emulator must get right whatever the scale:

- cadence: each negotiation cycle starts NEGOTIATOR_INTERVAL after the one before,
  within 1 %;
- run time: each job's recorded run time (RemoteWallClockTime) is its declared
  duration, within 1 % (the startd records the declared end even when its timer fires
  late, so this catches evictions and re-runs: lost claims);
- activation: each claim made for a negotiator's match is activated (the job runs)
  within 1 pool second of the match arriving at the schedd (the schedd's histogram,
  two snapshots subtracted);
- loading: seed 004's loading factor, measured per slot as the cadence experiment
  does (busy time over the time from a job's match cycle to the slot's next match),
  within 2 % of the seed's formula D / (C ceil(D / C)) on the very same jobs.

A step is faithful when all four hold (for the `quantile` of the observations: 1.0 =
every one), each was measured at all, the lag policy saw no daemon over
HTCPOOL_MAX_LAG in the window, and the queue never ran dry.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from daemons.cli.experiments import loading
from daemons.cli.experiments.cadence_measure import JobRecord, MeasureError, measure_slot


@dataclass(frozen=True)
class Criteria:
    cycle_tolerance: float = 0.01      # of NEGOTIATOR_INTERVAL
    runtime_tolerance: float = 0.01    # of the declared duration (at least 1 pool s of it)
    activation_s: float = 1.0          # pool seconds from match to running job
    loading_tolerance: float = 0.02    # relative to the seed's formula
    quantile: float = 1.0              # the share of observations that must pass


def upper_quantile(values: Sequence[float], q: float) -> float:
    """The smallest value at least a share `q` of `values` do not exceed (nearest rank)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def allowed_failures(n: int, q: float) -> int:
    """How many of `n` observations may fail when a share `q` must pass."""
    return n - max(0, math.ceil(q * n)) if n else 0


# ---- cadence ----------------------------------------------------------------------------
def cycle_check(starts: Iterable[float], interval_s: float, t0: float, t1: float, crit: Criteria) -> dict[str, Any]:
    """Start-to-start gaps of the cycles that started in [t0, t1]."""
    inside = sorted(s for s in starts if t0 <= s <= t1)
    errors = [abs((b - a) - interval_s) / interval_s for a, b in zip(inside, inside[1:])]
    bad = sum(1 for e in errors if e > crit.cycle_tolerance)
    return {"cycles": len(inside), "gaps": len(errors),
            "gap_error_max": round(max(errors), 6) if errors else None,
            "gap_error_q": round(upper_quantile(errors, crit.quantile), 6) if errors else None,
            "gaps_off": bad,
            "ok": bool(errors) and bad <= allowed_failures(len(errors), crit.quantile)}


# ---- run time -----------------------------------------------------------------------------
def runtime_check(jobs: Iterable[tuple[float, float]], crit: Criteria) -> dict[str, Any]:
    """(declared duration, recorded run time) of the jobs that completed in the window.
    A duration under 1 pool second is held to 1 % of a second."""
    errors = [abs(ran - d) / max(d, 1.0) for d, ran in jobs]
    bad = sum(1 for e in errors if e > crit.runtime_tolerance)
    return {"jobs": len(errors), "error_max": round(max(errors), 6) if errors else None,
            "error_q": round(upper_quantile(errors, crit.quantile), 6) if errors else None,
            "jobs_off": bad, "ok": bool(errors) and bad <= allowed_failures(len(errors), crit.quantile)}


# ---- activation ---------------------------------------------------------------------------
def histogram_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The observations between two snapshots of the schedd's DelayHistogram."""
    if not after or list(before.get("bounds", after["bounds"])) != list(after["bounds"]):
        raise ValueError("histogram snapshots with different bounds")
    b_counts = before.get("counts") or [0] * len(after["counts"])
    counts = [a - b for a, b in zip(after["counts"], b_counts)]
    return {"bounds": list(after["bounds"]), "counts": counts, "count": sum(counts),
            "sum_s": after.get("sum_s", 0.0) - before.get("sum_s", 0.0)}


def bucket_quantile(delta: dict[str, Any], q: float) -> float:
    """An upper bound of the q-quantile: the bound of the bucket it falls in (inf past the last)."""
    n = delta["count"]
    if n == 0:
        return math.nan
    need = max(1, math.ceil(q * n))
    running = 0
    for bound, c in zip([*delta["bounds"], math.inf], delta["counts"]):
        running += c
        if running >= need:
            return float(bound)
    return math.inf


def activation_check(delta: dict[str, Any], crit: Criteria) -> dict[str, Any]:
    bounds = delta["bounds"]
    within = sum(c for b, c in zip(bounds, delta["counts"]) if b <= crit.activation_s)
    if crit.activation_s not in bounds:
        raise ValueError(f"the histogram has no bucket bound at {crit.activation_s:g} s")
    n = delta["count"]
    late = n - within
    def finite(q: float) -> float | None:   # past the last bound: None (the late count says how many)
        v = bucket_quantile(delta, q) if n else math.inf
        return None if math.isinf(v) else v
    return {"activations": n, "late": late,
            "mean_s": round(delta["sum_s"] / n, 4) if n else None,
            "p50_le_s": finite(0.5), "p99_le_s": finite(0.99),
            "ok": n > 0 and late <= allowed_failures(n, crit.quantile)}


# ---- loading factor -----------------------------------------------------------------------
def slot_records(completed: Sequence[JobRecord], running: Sequence[JobRecord]) -> dict[str, list[JobRecord]]:
    """Per slot: its completed jobs in the order they started, then the job it runs now (the
    'sentinel' that closes the last completed job's held time). A slot idle right now closes
    with its last completed job, whose own held time is not known yet. Each record's `proc`
    becomes its place on the slot: a job that went back to the queue (a failed claim) can
    run after jobs submitted later than it."""
    by_slot: dict[str, list[JobRecord]] = defaultdict(list)
    for r in completed:
        by_slot[r.slot].append(r)
    now_running = {r.slot: r for r in running}
    out = {}
    for slot in set(by_slot) | set(now_running):
        recs = sorted(by_slot.get(slot, []), key=lambda r: (r.start_date, r.proc))
        if slot in now_running:
            recs.append(now_running[slot])
        elif recs:
            last = recs[-1]
            recs[-1] = JobRecord(last.machine, last.proc, last.slot, last.start_date, 0, 0.0, last.duration,
                                 sentinel=True)
        out[slot] = [replace(r, proc=i) for i, r in enumerate(recs)]
    return out


def loading_check(completed: Sequence[JobRecord], running: Sequence[JobRecord], cycle_starts: Sequence[float],
                  interval_s: float, t0: float, t1: float, crit: Criteria) -> dict[str, Any]:
    """Seed 004's loading factor of the jobs matched in [t0, t1) whose slot has had its next
    match: measured (busy over held, as `htcpool experiment cadence` measures a slot) against
    the seed's formula on the same jobs."""
    busy = held = model_held = 0.0
    jobs = 0
    inconsistent: list[str] = []
    for slot, recs in sorted(slot_records(completed, running).items()):
        if len(recs) < 2:
            continue
        try:
            m = measure_slot(slot, recs, cycle_starts)
        except MeasureError as e:
            inconsistent.append(str(e))
            continue
        for j in m.jobs:
            if not t0 <= j.origin < t1:
                continue
            jobs += 1
            busy += j.run
            held += j.held
            model_held += interval_s * loading.cycles_held(j.duration, interval_s)
    measured = busy / held if held > 0 else None
    model = busy / model_held if model_held > 0 else None
    error = (measured / model - 1.0) if measured is not None and model else None
    return {"jobs": jobs, "measured": round(measured, 5) if measured is not None else None,
            "model": round(model, 5) if model is not None else None,
            "error": round(error, 5) if error is not None else None,
            "inconsistent_slots": len(inconsistent), "first_inconsistency": inconsistent[0] if inconsistent else "",
            "ok": error is not None and abs(error) <= crit.loading_tolerance and not inconsistent}


# ---- the verdict --------------------------------------------------------------------------
def lag_over(lag_events: int, sustained_pool_s: dict[str, float], max_lag_s: float | None) -> list[str]:
    """The lag that makes a window unfaithful: the collector counted lag events in it, or a
    daemon's sustained lag, sampled in it, passed HTCPOOL_MAX_LAG (the collector's policy
    is silent for its first seconds, which a fast step's window can fall in)."""
    out = [f"{lag_events} lag event(s)"] if lag_events > 0 else []
    if max_lag_s is not None:
        out += [f"{k} {v:g} pool s" for k, v in sorted(sustained_pool_s.items()) if v > max_lag_s]
    return out


def verdict(checks: dict[str, dict[str, Any]], *, lagged: Sequence[str], queue_left: int) -> list[str]:
    """Why the step is not faithful (empty: it is)."""
    why = []
    names = {"cycles": "cycle starts", "runtime": "recorded run times", "activation": "claim activation",
             "loading": "loading factor"}
    for key, label in names.items():
        c = checks.get(key)
        if c is None or not c.get("ok"):
            why.append(label)
    if lagged:
        why.append(f"lagged ({', '.join(lagged)})")
    if queue_left <= 0:
        why.append("the queue ran dry")
    return why


def bracket(steps: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(the highest faithful scale below the lowest unfaithful one, that unfaithful scale),
    from steps in any order; None for a side with no step."""
    lo = hi = None
    for scale, ok in sorted(steps):
        if not ok:
            hi = scale
            break
        lo = scale
    return lo, hi


def highest_faithful(steps: Sequence[tuple[float, bool]]) -> float | None:
    """The last faithful scale before the first unfaithful one, in order of scale (a
    refinement step runs after the step above it)."""
    return bracket(steps)[0]


def between(lo: float, hi: float) -> float | None:
    """The next scale to try between a faithful `lo` and an unfaithful `hi`: their geometric
    mean to two significant figures (14 between 10 and 20, 1700 between 1000 and 3000), or
    None when that is not strictly between them (the bracket is as fine as it gets)."""
    if not (0 < lo < hi):
        return None
    mid = math.sqrt(lo * hi)
    digits = 1 - math.floor(math.log10(mid))
    mid = round(mid, digits)
    return mid if lo < mid < hi else None


def jobs_needed(slots: int, pool_s: float, dist: loading.Distribution, interval_s: float,
                margin: float = 1.1) -> int:
    """Jobs that keep `slots` slots busy for `pool_s` after the first fill, with a margin
    (and three standard deviations, for a small pool): each slot needs a job per
    E[Z] = E[D] / pool_lf, the seed's model."""
    mean_held = dist.mean_s / loading.pool_lf(dist, interval_s)
    expected = slots * pool_s / mean_held
    return slots + math.ceil(margin * expected) + 3 * math.ceil(math.sqrt(expected + slots)) + 10


def parse_scales(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(not (math.isfinite(x) and x > 0) for x in out):
        raise ValueError(f"--scales {text!r}: give positive time scales such as 100,300,1000")
    return sorted(set(out))
