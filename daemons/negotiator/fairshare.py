"""Fair share among the submitters of one group. Pure.

HTCondor's matchmaker.cpp (calculateNormalizationFactor, calculateSubmitterLimit,
calculatePieLeft, submitterLessThan):
- a submitter's share is inversely proportional to its effective priority:
  share = maxPrio / (prio * normalFactor), normalFactor = sum(maxPrio / prio_j);
- its limit this spin is share * slotWeightTotal - what it already uses, never
  below 0, where slotWeightTotal is the pool's summed slot weight capped by the
  group's quota; in a group, its limit for slots nobody holds is also capped by what
  is left of the group's quota, and so is its limit for preempting matches unless
  preemption is considered (submitterLimit / submitterLimitUnclaimed);
- the pie left is the sum of the limits; submitters negotiate in ascending effective
  priority, then by starvation (usage / (usage + limit)).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SubmitterShare:
    name: str
    priority: float      # effective
    usage: float         # weighted resources in use
    share: float
    limit: float             # for preempting matches (submitterLimit)
    starvation: float
    limit_unclaimed: float = -1.0   # for slots nobody holds (submitterLimitUnclaimed); -1: same as limit

    def __post_init__(self) -> None:
        if self.limit_unclaimed < 0:
            object.__setattr__(self, "limit_unclaimed", self.limit)


def shares(prios: dict[str, float]) -> dict[str, float]:
    """name -> share of the pie (they sum to 1)."""
    if not prios:
        return {}
    max_prio = max(prios.values())
    normal = sum(max_prio / p for p in prios.values())
    return {n: max_prio / (p * normal) for n, p in prios.items()}


def starvation(usage: float, limit: float) -> float:
    allocated = usage + limit
    return usage / allocated if allocated > 0 else float("inf")


def submitter_limits(prios: dict[str, float], usage: dict[str, float], slot_weight_total: float,
                     group_quota: float | None = None, group_usage: float = 0.0,
                     consider_preemption: bool = False) -> list[SubmitterShare]:
    """Each submitter's share and limits, in negotiation order."""
    out = []
    for name, share in shares(prios).items():
        used = usage.get(name, 0.0)
        limit = max(0.0, share * slot_weight_total - used)
        unclaimed = limit
        if group_quota is not None:
            unclaimed = min(limit, max(0.0, group_quota - group_usage))
        if not consider_preemption:
            limit = unclaimed
        out.append(SubmitterShare(name, prios[name], used, share, limit, starvation(used, limit), unclaimed))
    out.sort(key=lambda s: (s.priority, s.starvation, s.name))
    return out


def permits(used: float, cost: float, allowed: float) -> bool:
    """SubmitterLimitPermits: within the limit, or the first match of a spin (no 'crumbs')."""
    return used + cost <= allowed + 1e-9 or (used <= 0 and allowed > 0)
