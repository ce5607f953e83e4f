"""The slots a negotiation cycle matches against, and the tests one match needs. Pure.

A `Candidate` is one slot in play: unclaimed, or (when the negotiator considers
preemption) claimed by someone else's job. Consumption policies (consumption_policy.cpp)
are evaluated here: what a request consumes of a partitionable slot, whether the slot
has it, and the request's Request<Res> replaced by that while both Requirements are
evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import classad2

from daemons.core import ads
from daemons.negotiator.slotads import References, SlotView

# HTCondor's PreemptState, best last (matchmaker.h): a match that preempts nobody beats a
# startd-rank preemption, which beats a user-priority one.
PRIO_PREEMPTION, RANK_PREEMPTION, NO_PREEMPTION = 0, 1, 2

NO_MATCH = "no match found"
SUBMITTER_LIMIT = "submitter limit exceeded"
PREEMPTION_REQUIREMENTS_FALSE = "PREEMPTION_REQUIREMENTS == False"


@dataclass(frozen=True)
class MatchPolicy:
    pre_job_rank: str = ""    # NEGOTIATOR_PRE_JOB_RANK
    post_job_rank: str = ""   # NEGOTIATOR_POST_JOB_RANK


class Candidate:
    """A slot in play. Its ad is parsed when first evaluated, with the cycle's CurrentTime.

    A slot split by a consumption policy gets its own copy of the ad (the negotiator
    deducts each match from it), so a parsed ad shared across cycles stays as advertised.
    A claimed slot's ad also gets the priority figures of the user it would preempt
    (RemoteUserPrio and friends), the same for every slot of that user.
    """

    __slots__ = ("name", "view", "claim_id", "order", "consumption", "claims_left", "_now", "_ad", "weight",
                 "group_key", "remote_user", "remote_attrs", "match_key")

    def __init__(self, name: str, view: SlotView, claim_id: str, order: int, consumption: tuple[str, ...] = (),
                 claims_left: int = 1, now: float = 0.0, remote_user: str = "",
                 remote_attrs: dict[str, Any] | None = None) -> None:
        self.name = name
        self.view = view
        self.claim_id = claim_id
        self.order = order
        self.consumption = consumption   # resources with a Consumption<Res> policy (negotiator-side split)
        self.claims_left = claims_left   # NumClaims: matches this slot may still take this cycle
        self._now = now
        self._ad: classad2.ClassAd | None = None
        self.weight: float | None = None   # SlotWeight, once evaluated (without a consumption policy)
        self.group_key: tuple = ()         # slots with equal keys match and rank alike
        self.remote_user = remote_user     # a claimed slot's user ("" if unclaimed)
        self.remote_attrs = remote_attrs or {}
        self.match_key: tuple | None = None   # Matchmaker._match_key

    @property
    def claimed(self) -> bool:
        return bool(self.remote_user)

    @property
    def ad(self) -> classad2.ClassAd:
        if self._ad is None:
            ad = classad2.ClassAd(repr(self.view.ad)) if self.consumption else self.view.ad
            ad["CurrentTime"] = int(self._now)
            for k, v in self.remote_attrs.items():
                ad[k] = v
            self._ad = ad
        return self._ad

    @property
    def text(self) -> str:
        return self.view.text


@dataclass
class Group:
    """Slots that match and rank every request alike; members in name order."""
    members: list[Candidate]

    @property
    def first(self) -> Candidate:
        return self.members[0]


NO_ADDRESS = "<0.0.0.0:0>"   # a match's startd_address when the slot ad has no StartdIpAddr string


# Made once per match, tens of thousands in a large cycle: not frozen, whose __init__
# costs 2.2 µs against 0.3 for a plain one with slots. Nothing changes a Match once made.
@dataclass(slots=True)
class Match:
    slot_name: str
    claim_id: str
    slot_ad_text: str
    ranks: tuple[float, float, float]
    startd_address: str = NO_ADDRESS
    cost: float = 1.0                               # what the submitter is charged (slot weight)
    consumed: tuple[tuple[str, int], ...] = ()      # a consumption policy's split, for the startd
    jobs_in_slot: int = 1                           # HTCondor's jobsInSlot (NEGOTIATOR_DEPTH_FIRST)
    preempting: str = ""                            # the user whose claim this match preempts
    preempt_state: int = NO_PREEMPTION
    remote_prio: float = 0.0                        # that user's effective priority
    old_rank: float = 0.0                           # the slot's CurrentRank (the claim it preempts)
    new_rank: float = 0.0                           # the slot's RANK for this request
    preempted_limits: str = ""                      # the preempted job's ConcurrencyLimits


@dataclass(frozen=True)
class Rejection:
    reason: str
    limited: bool = False   # some slot was refused for the submitter limit (the session resumes next spin)


def consumption_resources(ad: classad2.ClassAd) -> tuple[str, ...]:
    """HTCondor's cp_supports_policy: a p-slot with Consumption<Res> for each of its MachineResources."""
    if ads.get(ad, "PartitionableSlot") is not True:
        return ()
    names = ads.get(ad, "MachineResources")
    if not isinstance(names, str):
        return ()
    resources = tuple(r for r in names.split() if r.lower() != "swap")
    if not resources or any(f"Consumption{r}" not in ad for r in resources):
        return ()
    return resources


def _as_match(x: str) -> str:
    """ClassAd text that converts x as classad2's ClassAd.matches does: a boolean as is,
    a number true unless zero, anything else (undefined, error, a string) false."""
    return f"(isBoolean({x}) ? {x} : ((isInteger({x}) || isReal({x})) ? {x} != 0 : false))"


# Both Requirements in one evaluation (the slot as MY, the job as TARGET, each ad's own
# expression in its own scope) instead of classad2's two: every evaluation against a
# TARGET builds a match ad, which costs more than the expressions themselves.
_SYMMETRIC = classad2.ExprTree(f"{_as_match('MY.Requirements')} && {_as_match('TARGET.Requirements')}")


def symmetric_match(request: classad2.ClassAd, slot: classad2.ClassAd) -> bool:
    """request.symmetricMatch(slot), in one evaluation."""
    try:
        return _SYMMETRIC.eval(slot, request) is True
    except Exception:
        return False


def rank_value(value: object) -> float:
    """A rank's value: a boolean counts 1.0 or 0.0 (matchmaker.cpp calculateRanks reads ranks
    with EvalFloat); anything else that is not a number counts 0."""
    n = ads.as_float(value)
    return n if n is not None else 0.0


def job_rank(request: classad2.ClassAd) -> classad2.ExprTree | float:
    """The job's Rank: an expression to evaluate per slot, or its value if it is a literal."""
    try:
        value = request["Rank"]
    except KeyError:
        return 0.0
    if isinstance(value, classad2.ExprTree):
        return request.lookup("Rank")
    return rank_value(value)


def consumed(request: classad2.ClassAd, c: Candidate, errors: dict[str, str]) -> dict[str, int] | None:
    """Consumption<Res> for this request (consumption_policy.cpp cp_compute_consumption), or
    None if a policy does not evaluate to a non-negative number.

    A request that does not set Request<Res> asks for 0 of it while the policy is
    evaluated (a job that never mentions a custom resource still matches)."""
    out: dict[str, int] = {}
    for r in c.consumption:
        attr = f"Request{r}"
        missing = attr not in request
        if missing:
            request[attr] = 0
        try:
            v = ads.as_float(ads.evaluate(c.ad.lookup(f"Consumption{r}"), c.ad, request))
        finally:
            if missing:
                del request[attr]
        if v is None or v < 0:
            errors.setdefault(c.name, f"Consumption{r} = {ads.one_line(str(c.ad.lookup(f'Consumption{r}')))}"
                                      " does not evaluate to a non-negative number")
            return None
        out[r] = int(-(-v // 1))
    return out


def cp_fits(request: classad2.ClassAd, c: Candidate, errors: dict[str, str]) -> dict[str, int] | None:
    """HTCondor's consumption-policy match (cp_sufficient_assets, cp_override_requested,
    IsAMatch): the slot must have what the request consumes and the request must consume
    something; the request's Request<Res> (those it sets) are replaced by the consumption,
    the originals kept as _cp_orig_Request<Res>, while both Requirements are evaluated."""
    amounts = consumed(request, c, errors)
    if amounts is None:
        return None
    if any(amount > (ads.as_number(ads.get(c.ad, r)) or 0) for r, amount in amounts.items()):
        return None
    if not any(amounts.values()):
        errors.setdefault(c.name, "the consumption policy consumes nothing of any resource for some job")
        return None
    saved = {}
    for r, amount in amounts.items():
        attr = f"Request{r}"
        if attr in request:
            saved[attr] = request.lookup(attr)
            request[f"_cp_orig_{attr}"] = saved[attr]
            request[attr] = amount
    try:
        if not request.symmetricMatch(c.ad):
            return None
    finally:
        for attr, tree in saved.items():
            request[attr] = tree
            del request[f"_cp_orig_{attr}"]
    return amounts


def target_names(refs: References, text: str, view: SlotView) -> frozenset[str] | None:
    """The job attributes an expression evaluated with the slot as MY can reach, following
    the slot's own attributes it refers to (a bare name the slot lacks is the job's);
    None if it looks at a scope as such."""
    slot = dict(view.shape.items)
    slot.update((n.lower(), v) for n, v in zip(view.names, view.values))
    slot.setdefault("currenttime", "0")
    needed: set[str] = set()
    seen: set[str] = set()
    stack = [text]
    while stack:
        for qualifier, name in refs.of(stack.pop()):
            low = name.lower()
            if low in _SCOPES:
                return None
            if qualifier == "target":
                needed.add(low)
            elif low in slot:
                if low not in seen:
                    seen.add(low)
                    stack.append(slot[low])
            elif qualifier is None:
                needed.add(low)
    return frozenset(needed)


_SCOPES = frozenset(("target", "my", "other", "parent"))


def claim_policy(v: SlotView) -> tuple[tuple[str, ...], int]:
    """(consumption-policy resources, NumClaims) of a slot: once per shape unless the ad's
    expressions look at its instance attributes."""
    memo = v.shape.memo
    if not v.depends_on_instance() and "claim_policy" in memo:
        return memo["claim_policy"]
    a = v.ad
    cp = consumption_resources(a)
    claims = ads.get(a, "NumClaims")
    claims_left = int(claims) if isinstance(claims, int) and claims > 0 else (
        max(1, int(ads.get(a, "Cpus") or 1)) if cp else 1)
    if not v.depends_on_instance():
        memo["claim_policy"] = (cp, claims_left)
    return cp, claims_left
