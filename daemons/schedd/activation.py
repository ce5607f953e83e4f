"""How long a matched job waits for its claim to be activated (pool seconds). Pure.

The schedd notes the pool time a match arrives from the negotiator; when the startd
has accepted the activation, the wait from match to running job goes into a histogram
with fixed bounds. The wait ends at the pool time the startd started the job (its
reply says when), not when the reply gets back: a batched reply answers its first
activation only after the last, and its way back is not part of the activation.
Bucket counts only grow, so a bench can take two snapshots and subtract them to get
the figures of any stretch of a run; the maximum is since start.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Upper bounds of the buckets, pool seconds (a last bucket holds the rest).
BOUNDS_S: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


def activation_delay(matched_at: float, started: float, now: float) -> float:
    """From the match's arrival (`matched_at`, the schedd's clock) to the start the startd
    reports (`started`, its clock; 0 from a startd that does not say). Each daemon follows
    the pool clock on its own, so the startd's figure is kept within [matched_at, now]:
    the job cannot have started before its match arrived or after the schedd heard."""
    end = now if started <= 0.0 else min(now, started)
    return max(0.0, end - matched_at)


@dataclass
class DelayHistogram:
    bounds: tuple[float, ...] = BOUNDS_S
    counts: list[int] = field(default_factory=list)   # per bucket, not cumulative; len(bounds) + 1
    total: int = 0
    sum_s: float = 0.0
    max_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, delay_s: float) -> None:
        d = max(0.0, delay_s)
        # A value equal to a bound belongs to that bound's bucket ("le", as Prometheus counts).
        self.counts[bisect.bisect_left(self.bounds, d)] += 1
        self.total += 1
        self.sum_s += d
        self.max_s = max(self.max_s, d)

    def snapshot(self) -> dict:
        """JSON-able: bounds, counts per bucket, count, sum and max."""
        return {"bounds": list(self.bounds), "counts": list(self.counts), "count": self.total,
                "sum_s": round(self.sum_s, 6), "max_s": round(self.max_s, 6)}

    def cumulative(self) -> dict[str, float]:
        """Prometheus-style cumulative counts by upper bound ("+Inf" last)."""
        out: dict[str, float] = {}
        running = 0
        for bound, n in zip([*(f"{b:g}" for b in self.bounds), "+Inf"], self.counts):
            running += n
            out[bound] = float(running)
        return out
