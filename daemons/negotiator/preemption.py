"""Whether a request may preempt a claimed slot, as HTCondor's negotiator decides it. Pure.

matchmaker.cpp matchmakingAlgorithm, for a claimed slot that matches the request
(both Requirements, the slot as MY and the request as TARGET):
- startd-rank preemption when the slot strictly prefers the request: MY.Rank > MY.CurrentRank;
- otherwise, if the slot's user is not the submitter, user-priority preemption, allowed
  only if PREEMPTION_REQUIREMENTS holds (refused: "PREEMPTION_REQUIREMENTS == False")
  and the slot likes the request at least as much as its current job
  (MY.Rank >= MY.CurrentRank);
- a slot already running the submitter's own job is never preempted for priority;
- while a submitter is over its limit on the first pie spin, only startd-rank
  preemption is considered (negotiate(): only_consider_startd_rank).
Among matching slots the best is chosen by pre-job rank, job Rank, post-job rank, then
no preemption over rank preemption over priority preemption, then PREEMPTION_RANK.

Slots are usually claimed in their thousands while preemption is usually impossible
(HTCondor's defaults: PREEMPTION_REQUIREMENTS = False, RANK = 0). A claimed slot that
can be neither rank- nor priority-preempted is "passive": it is only looked at when a
request finds nothing else, to give the rejection HTCondor's reason.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import classad2

from daemons.core import ads
from daemons.negotiator.candidates import (NO_PREEMPTION, PRIO_PREEMPTION, RANK_PREEMPTION, Candidate,
                                           rank_value)
from daemons.negotiator.slotads import SlotView, is_literal_text

_RANK_STD = classad2.ExprTree("MY.Rank > MY.CurrentRank")
_RANK_PRIO = classad2.ExprTree("MY.Rank >= MY.CurrentRank")


@dataclass(frozen=True)
class PreemptionConfig:
    consider: bool = True                 # NEGOTIATOR_CONSIDER_PREEMPTION
    consider_early: bool = False          # NEGOTIATOR_CONSIDER_EARLY_PREEMPTION
    requirements: str = "False"           # PREEMPTION_REQUIREMENTS ("" = none: always allowed)
    rank: str = ""                        # PREEMPTION_RANK


@dataclass
class Verdict:
    """What a claimed slot is to one request."""
    state: int                    # PRIO_PREEMPTION / RANK_PREEMPTION, or -1: not preemptable
    policy_refused: bool = False  # PREEMPTION_REQUIREMENTS said no
    rank_refused: bool = False    # the slot likes its current job better


@dataclass
class Preemption:
    cfg: PreemptionConfig = field(default_factory=PreemptionConfig)
    _req: classad2.ExprTree | None = field(default=None, repr=False)
    _rank: classad2.ExprTree | None = field(default=None, repr=False)
    prio_possible: bool = False   # PREEMPTION_REQUIREMENTS is not false whatever the ads

    def __post_init__(self) -> None:
        text = self.cfg.requirements.strip()
        self._req = ads.parse_expr(text, "PREEMPTION_REQUIREMENTS") if text else None
        self._rank = ads.parse_expr(self.cfg.rank, "PREEMPTION_RANK") if self.cfg.rank.strip() else None
        self.prio_possible = self.cfg.consider and not (
            self._req is not None and is_literal_text(text.lower()) and not ads.is_true(ads.evaluate(self._req)))

    @classmethod
    def disabled(cls) -> "Preemption":
        return cls(PreemptionConfig(consider=False, requirements=""))

    def candidate(self, v: SlotView) -> bool:
        """A claimed slot takes part in matching: preemption considered, and (without early
        preemption) its job has no retirement time left (trimStartdAds_PreemptionLogic)."""
        if not self.cfg.consider:
            return False
        if not self.cfg.consider_early:
            left = v.get("RetirementTimeRemaining")
            if isinstance(left, (int, float)) and not isinstance(left, bool) and left > 0:
                return False
        return True

    @staticmethod
    def rank_possible(v: SlotView) -> bool:
        """False when the slot's RANK is a constant no better than its CurrentRank: it can
        never prefer a request to its current job."""
        return _rank_possible(v.shape.values.get("rank"), v.shape.values.get("currentrank"))

    @staticmethod
    def rank_prefers(c: Candidate, request: classad2.ClassAd) -> bool:
        """The slot strictly prefers the request to its current job (MY.Rank > MY.CurrentRank)."""
        return ads.is_true(ads.evaluate(_RANK_STD, c.ad, request))

    def verdict(self, c: Candidate, request: classad2.ClassAd, submitter: str, only_startd_rank: bool) -> Verdict:
        ad = c.ad
        if ads.is_true(ads.evaluate(_RANK_STD, ad, request)):
            return Verdict(RANK_PREEMPTION)
        if only_startd_rank or c.remote_user == submitter:
            return Verdict(-1)
        if self._req is not None and not ads.is_true(ads.evaluate(self._req, ad, request)):
            return Verdict(-1, policy_refused=True)
        if not ads.is_true(ads.evaluate(_RANK_PRIO, ad, request)):
            return Verdict(-1, rank_refused=True)
        return Verdict(PRIO_PREEMPTION)

    def preempt_rank(self, c: Candidate, request: classad2.ClassAd, state: int) -> float:
        """PREEMPTION_RANK for a preempting match (higher preempted first); -FLT_MAX otherwise."""
        if state == NO_PREEMPTION:
            return -3.4e38
        if self._rank is None:
            return -3.4e38
        v = ads.as_float(ads.evaluate(self._rank, c.ad, request))
        return v if v is not None else -1.7976931348623157e308

    @staticmethod
    def ranks_of(c: Candidate, request: classad2.ClassAd) -> tuple[float, float]:
        """(CurrentRank, RANK for the request) of a slot, for the "Preempting" log line."""
        old = rank_value(ads.get(c.ad, "CurrentRank"))
        new = rank_value(ads.evaluate(c.ad.lookup("Rank"), c.ad, request)) if "Rank" in c.ad else 0.0
        return old, new


__all__ = ["NO_PREEMPTION", "PRIO_PREEMPTION", "RANK_PREEMPTION", "Preemption", "PreemptionConfig", "Verdict"]


@functools.lru_cache(maxsize=1024)
def _rank_possible(rank: str | None, current: str | None) -> bool:
    # By the two texts: every claimed slot asks, each cycle, and a pool has few of them.
    if rank is None:
        return False   # no Rank: undefined > CurrentRank is never true
    if current is None or not is_literal_text(rank) or not is_literal_text(current):
        return True
    r, c = ads.as_float(classad2.ExprTree(rank).eval()), ads.as_float(classad2.ExprTree(current).eval())
    return r is None or c is None or r > c
