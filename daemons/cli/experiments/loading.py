"""Slot and pool loading factors under a negotiation cadence (seed 004). Pure.

Seed 004 ("The Impact of Negotiator Cycle Cadence on Slot Loading"): a job of
duration D starts when a negotiation cycle matches its slot; after it ends, the slot
waits for the next cycle. With cycles every C,

    LF(D) = D / (C (q + ceil(r))),   q = floor(D / C),   r = D / C - q,

that is D over the whole number of cycles the slot is held, Z = C ceil(D / C).

The seed leaves the pool with random durations for "future posts". Three figures:

- `approx_pool_lf`: E[D] / (E[D] + C/2), the rule of thumb (the slot waits half a
  cycle on average after each job);
- `pool_lf`: E[D] / E[Z], what a pool's slots achieve over many jobs (busy time over
  held time, summed: the renewal-reward ratio, exact under the seed's model);
- `mean_slot_lf`: E[LF(D)], the seed's per-slot formula averaged over the
  distribution (the mean of per-job loading factors, which weighs a short job as much
  as a long one, so it sits below `pool_lf`).

`replay` runs the seed's model on given durations, with or without claim reuse
(CLAIM_WORKLIFE), so that a measured run can be compared with the model on the very
same draws.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Iterable, Sequence

# D / C closer than this to a whole number counts as whole: 900 / 300 is 3.0 in floats,
# but 0.1 * 3 * 300 / 300 is not.
_WHOLE_EPS = 1e-9


def cycles_held(duration_s: float, cadence_s: float) -> int:
    """q + ceil(r): how many whole cycles a job of `duration_s` keeps its slot from the negotiator.

    A zero-length job still costs one cycle: its slot is matched again only at the next one.
    """
    if cadence_s <= 0:
        raise ValueError(f"the cycle cadence must be positive, got {cadence_s}")
    if duration_s < 0:
        raise ValueError(f"a duration cannot be negative, got {duration_s}")
    x = duration_s / cadence_s
    q = math.floor(x)
    r = x - q
    if r < _WHOLE_EPS or r > 1 - _WHOLE_EPS:   # a whole number of cycles: ceil(r) = 0
        return max(1, round(x))
    return q + 1


def loading_factor(duration_s: float, cadence_s: float) -> float:
    """Seed 004's per-slot loading factor D / (C (q + ceil(r))).

    At most 1: a duration a rounding error above a whole number of cycles counts as whole.
    """
    return min(1.0, duration_s / (cadence_s * cycles_held(duration_s, cadence_s)))


def approx_pool_lf(mean_s: float, cadence_s: float) -> float:
    """The rule of thumb E[D] / (E[D] + C/2)."""
    return mean_s / (mean_s + cadence_s / 2)


# ---- duration distributions -------------------------------------------------------
@dataclass(frozen=True)
class Distribution:
    """A job-duration distribution with its mean in pool seconds.

    kind: "fixed"; "exponential"; "lognormal" (standard deviation = mean, as the
    issue asks: sigma^2 = ln 2); "uniform" (on [0, 2 mean]).
    """
    kind: str
    mean_s: float

    KINDS = ("fixed", "exponential", "lognormal", "uniform")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown distribution {self.kind!r} (known: {', '.join(self.KINDS)})")
        if self.mean_s <= 0:
            raise ValueError(f"a mean duration must be positive, got {self.mean_s}")

    # lognormal with sd = mean: sigma^2 = ln(1 + cv^2) = ln 2, mu = ln(mean) - sigma^2 / 2
    @property
    def _ln_sigma(self) -> float:
        return math.sqrt(math.log(2.0))

    @property
    def _ln_mu(self) -> float:
        return math.log(self.mean_s) - math.log(2.0) / 2

    def sample(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.mean_s
        if self.kind == "exponential":
            return rng.expovariate(1.0 / self.mean_s)
        if self.kind == "lognormal":
            return rng.lognormvariate(self._ln_mu, self._ln_sigma)
        return rng.uniform(0.0, 2.0 * self.mean_s)

    def cdf(self, x: float) -> float:
        if x <= 0:
            return 0.0 if self.kind != "fixed" or self.mean_s > 0 else 1.0
        if self.kind == "fixed":
            return 1.0 if x >= self.mean_s else 0.0
        if self.kind == "exponential":
            return 1.0 - math.exp(-x / self.mean_s)
        if self.kind == "lognormal":
            return _phi((math.log(x) - self._ln_mu) / self._ln_sigma)
        return min(1.0, x / (2.0 * self.mean_s))

    def partial_mean(self, a: float, b: float) -> float:
        """E[D; a < D <= b] = the integral of x f(x) from a to b."""
        return self._partial_to(b) - self._partial_to(a)

    def _partial_to(self, b: float) -> float:
        """E[D; D <= b]."""
        if b <= 0:
            return 0.0
        m = self.mean_s
        if self.kind == "fixed":
            return m if b >= m else 0.0
        if self.kind == "exponential":
            return m - (b + m) * math.exp(-b / m)
        if self.kind == "lognormal":
            s = self._ln_sigma
            return m * _phi((math.log(b) - self._ln_mu - s * s) / s)
        b = min(b, 2.0 * m)
        return b * b / (4.0 * m)


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _cycle_bins(dist: Distribution, cadence_s: float, tail: float = 1e-12) -> Iterable[int]:
    """k = 1, 2, ...: the bins ((k-1)C, kC] until the distribution's tail is negligible."""
    k = 1
    while True:
        yield k
        if 1.0 - dist.cdf(k * cadence_s) < tail or k > 100_000:
            return
        k += 1


def pool_lf(dist: Distribution, cadence_s: float) -> float:
    """E[D] / E[Z] with Z = C ceil(D / C): a pool's busy time over held time in the long run."""
    if dist.kind == "fixed":
        return loading_factor(dist.mean_s, cadence_s)
    # E[ceil(D/C)] = sum over k >= 1 of k P((k-1)C < D <= kC)
    e_cycles = sum(k * (dist.cdf(k * cadence_s) - dist.cdf((k - 1) * cadence_s))
                   for k in _cycle_bins(dist, cadence_s))
    return dist.mean_s / (cadence_s * e_cycles)


def mean_slot_lf(dist: Distribution, cadence_s: float) -> float:
    """E[LF(D)]: seed 004's formula averaged over the distribution."""
    if dist.kind == "fixed":
        return loading_factor(dist.mean_s, cadence_s)
    return sum(dist.partial_mean((k - 1) * cadence_s, k * cadence_s) / (k * cadence_s)
               for k in _cycle_bins(dist, cadence_s))


# ---- the seed's model run on given durations ----------------------------------------
@dataclass(frozen=True)
class Replay:
    busy_s: float       # sum of durations
    held_s: float       # first start to the next match after the last job
    matches: int        # negotiation matches the slot needed

    @property
    def loading(self) -> float:
        return self.busy_s / self.held_s if self.held_s > 0 else 0.0


def replay(durations: Sequence[float], cadence_s: float, worklife_s: float = 0.0) -> Replay:
    """One slot under the seed's model: cycles at 0, C, 2C, ...; the first job starts at 0.

    Without claim reuse (worklife 0) every job needs a match, so it starts on a cycle
    and its slot waits for the next cycle after it ends. With claim reuse the schedd
    starts the next job at once while the claim is younger than `worklife_s`
    (HTCondor's CLAIM_WORKLIFE; negative = forever); an older claim is released and
    the slot is matched again at the next cycle. The held time ends where the slot
    would get its next job (a match, or at once on a claim still young enough).
    """
    t = 0.0
    claim_start = 0.0
    matches = 1
    busy = 0.0
    for i, d in enumerate(durations):
        busy += d
        t += d
        reuse = worklife_s < 0 or (worklife_s > 0 and t - claim_start < worklife_s)
        if reuse:
            continue
        if i < len(durations) - 1:
            matches += 1
        # the first cycle at or after the job's end (at: the seed's D = kC gives 1)
        t = cadence_s * cycles_held(t, cadence_s)
        claim_start = t
    return Replay(busy, t, matches)


def pool_replay(slots: Sequence[Sequence[float]], cadence_s: float, worklife_s: float = 0.0) -> float:
    """Pool loading factor of several slots' job sequences: summed busy over summed held time."""
    rs = [replay(d, cadence_s, worklife_s) for d in slots if d]
    held = sum(r.held_s for r in rs)
    return sum(r.busy_s for r in rs) / held if held > 0 else 0.0


def simulate_pool_lf(dist: Distribution, cadence_s: float, worklife_s: float, rng: random.Random,
                     jobs: int = 20_000) -> float:
    """The seed's model over one long run of `jobs` draws (for claim reuse, which has no closed form)."""
    return replay([dist.sample(rng) for _ in range(jobs)], cadence_s, worklife_s).loading


def queue_replay(durations: Sequence[float], slots: int, cadence_s: float, worklife_s: float = 0.0) -> Replay:
    """The seed's model for `slots` slots taking jobs from one queue, in order.

    Cycles at 0, C, 2C, ...; at a cycle every free slot takes the next job. A job that
    ends on a claim younger than `worklife_s` hands its slot the next job at once
    (claim reuse); otherwise the slot waits for the first cycle at or after the end
    (never the cycle that started the job: a zero-length job waits a whole cycle).
    Held time per slot runs from its first job to the moment it is given a job after
    its last one (the queue's sentinel); busy and held are summed over slots.
    Without claim reuse the sums do not depend on which slot took which job.
    """
    import heapq
    if slots < 1:
        raise ValueError("need at least one slot")
    queue = list(durations)
    # (time the slot can take a job, slot index, start of its claim or None when unclaimed)
    heap: list[tuple[float, int, float | None]] = [(0.0, i, None) for i in range(slots)]
    first: dict[int, float] = {}
    busy = held = 0.0
    matches = 0
    k = 0
    while heap:
        t, i, claim_start = heapq.heappop(heap)
        if k >= len(queue):
            if i in first:
                held += t - first[i]
            continue
        d = queue[k]
        k += 1
        if claim_start is None:
            matches += 1
            claim_start = t
        first.setdefault(i, t)
        end = t + d
        busy += d
        if worklife_s < 0 or (worklife_s > 0 and end - claim_start < worklife_s):
            heapq.heappush(heap, (end, i, claim_start))
            continue
        nxt = cadence_s * cycles_held(end, cadence_s) if end > 0 else cadence_s
        if nxt <= t:
            nxt = t + cadence_s
        heapq.heappush(heap, (nxt, i, None))
    return Replay(busy, held, matches)
