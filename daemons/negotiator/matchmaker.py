"""Matchmaking within one negotiation cycle. Pure: ads and time in, matches out.

For each resource request the matchmaker considers the slots still in play, keeps
those whose Requirements and the request's Requirements both hold (a symmetric
match), and picks the best by HTCondor's order: NEGOTIATOR_PRE_JOB_RANK, then the
job's Rank, then NEGOTIATOR_POST_JOB_RANK (each evaluated with the slot as MY and the
job as TARGET, except the job's Rank, which is the job's own). Without a consumption
policy a matched slot, partitionable or not, leaves the cycle whole.
Claimed slots are not candidates: htcpool does not preempt.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import classad2

from daemons.core import ads


@dataclass(frozen=True)
class MatchPolicy:
    pre_job_rank: str = ""    # NEGOTIATOR_PRE_JOB_RANK
    post_job_rank: str = ""   # NEGOTIATOR_POST_JOB_RANK


@dataclass
class Candidate:
    name: str
    ad: classad2.ClassAd
    claim_id: str
    order: int

    @property
    def text(self) -> str:
        return repr(self.ad)


@dataclass(frozen=True)
class Match:
    slot_name: str
    claim_id: str
    slot_ad_text: str
    ranks: tuple[float, float, float]
    startd_address: str = "<0.0.0.0:0>"


@dataclass(frozen=True)
class Rejection:
    reason: str


NO_MATCH = "no match found"


def _rank(value: object) -> float:
    n = ads.as_number(value)
    return n if n is not None else 0.0


@dataclass
class Matchmaker:
    policy: MatchPolicy
    now: float
    candidates: list[Candidate] = field(default_factory=list)
    considered: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    _pre: classad2.ExprTree | None = field(default=None, repr=False)
    _post: classad2.ExprTree | None = field(default=None, repr=False)

    @classmethod
    def from_ads(cls, slot_ads: list[classad2.ClassAd], policy: MatchPolicy, now: float) -> "Matchmaker":
        mm = cls(policy, now)
        named = []
        for ad in slot_ads:
            name = ads.get(ad, "Name")
            if not isinstance(name, str):
                mm._ignore("no Name")
                continue
            if ads.get(ad, "State") != "Unclaimed":
                mm._ignore("claimed")
                continue
            claim_id = ads.get(ad, "ClaimId") or ads.get(ad, "Capability")
            if not isinstance(claim_id, str) or not claim_id:
                mm._ignore("no claim id")
                continue
            ad["CurrentTime"] = int(now)
            named.append((name, ad, claim_id))
        named.sort(key=lambda t: t[0])
        mm.candidates = [Candidate(n, a, c, i) for i, (n, a, c) in enumerate(named)]
        mm._pre = ads.parse_expr(policy.pre_job_rank) if policy.pre_job_rank else None
        mm._post = ads.parse_expr(policy.post_job_rank) if policy.post_job_rank else None
        return mm

    def _ignore(self, why: str) -> None:
        self.ignored[why] = self.ignored.get(why, 0) + 1

    @property
    def available(self) -> int:
        return len(self.candidates)

    def match(self, request: classad2.ClassAd) -> Match | Rejection:
        self.considered += 1
        request["CurrentTime"] = int(self.now)
        job_rank = request.lookup("Rank") if "Rank" in request else None
        best: Candidate | None = None
        best_key: tuple[float, float, float, int] | None = None
        for c in self.candidates:
            if not request.symmetricMatch(c.ad):
                continue
            pre = _rank(ads.evaluate(self._pre, c.ad, request)) if self._pre is not None else 0.0
            rank = _rank(ads.evaluate(job_rank, request, c.ad)) if job_rank is not None else 0.0
            post = _rank(ads.evaluate(self._post, c.ad, request)) if self._post is not None else 0.0
            key = (pre, rank, post, -c.order)
            if best_key is None or key > best_key:
                best, best_key = c, key
        if best is None or best_key is None:
            return Rejection(NO_MATCH)
        self.candidates.remove(best)
        addr = ads.get(best.ad, "StartdIpAddr")
        return Match(best.name, best.claim_id, best.text, best_key[:3],
                     addr if isinstance(addr, str) else "<0.0.0.0:0>")
