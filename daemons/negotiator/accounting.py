"""Phase 2 of a negotiation cycle, accounting (matchmaker.cpp negotiationTime): the
pool's slot weights summed into the pie, and usage rebuilt from the slots that are
Claimed or Preempting, charged to their RemoteOwner and its groups. Pure: the slot
views, the accountant and the time come in; the pie comes out.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

from daemons.core import ads
from daemons.negotiator.accountant import Accountant
from daemons.negotiator.slotads import SlotView


def slot_weight(ad, use_slot_weights: bool = True) -> float:
    """SlotWeight evaluated in the slot's ad; its Cpus when it has none (HTCondor's default
    SLOT_WEIGHT); 1 when weights are off or the value is unusable."""
    if not use_slot_weights:
        return 1.0
    w = ads.as_float(ads.evaluate(ad.lookup("SlotWeight"), ad)) if "SlotWeight" in ad else None
    if w is None:
        w = ads.as_number(ads.get(ad, "Cpus"))
    return w if w is not None and w >= 0 else 1.0


def view_weight(v: SlotView, use_slot_weights: bool = True) -> float:
    """A slot's weight, once per shape unless its expressions look at its instance attributes."""
    if not use_slot_weights:
        return 1.0
    if v.depends_on_instance():
        return slot_weight(v.ad)
    w = v.shape.memo.get("weight")
    if w is None:
        w = v.shape.memo["weight"] = slot_weight(v.ad)
    return w


def account(views: Iterable[SlotView], accountant: Accountant, now: float,
            ancestry_of: Callable[[str], list[str]], use_slot_weights: bool = True) -> tuple[float, float]:
    """Age the priorities to `now` and rebuild usage from the claimed slots; return the pie
    (summed slot weights) and the smallest positive slot weight (1 if there is none)."""
    accountant.update_priorities(now)
    pool_weight, min_weight, claimed, heard = 0.0, math.inf, [], {}
    for v in views:
        name, last = v.get("Name"), v.get("LastHeardFrom")
        if isinstance(name, str) and isinstance(last, (int, float)) and not isinstance(last, bool):
            heard[name] = float(last)
        w = view_weight(v, use_slot_weights)
        pool_weight += w
        min_weight = min(min_weight, w) if w > 0 else min_weight
        if v.get("State") in ("Claimed", "Preempting"):
            owner = v.get("RemoteOwner")
            if isinstance(owner, str) and owner:
                limits = v.get("ConcurrencyLimits")
                claimed.append((owner, ancestry_of(owner), w, limits if isinstance(limits, str) else ""))
    accountant.check_matches(claimed, heard)
    return pool_weight, (min_weight if math.isfinite(min_weight) else 1.0)
