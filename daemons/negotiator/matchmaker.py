"""Matchmaking within one negotiation cycle. Pure: ads and time in, matches out.

For each resource request the matchmaker considers the slots still in play, keeps
those whose Requirements and the request's Requirements both hold (a symmetric
match), and picks the best by HTCondor's order: NEGOTIATOR_PRE_JOB_RANK, then the
job's Rank, then NEGOTIATOR_POST_JOB_RANK (each evaluated with the slot as MY and the
job as TARGET, except the job's Rank, which is the job's own). Ties go to the slot
first by name. Without a consumption policy a matched slot, partitionable or not,
leaves the cycle whole. Claimed slots are not candidates: htcpool does not preempt.

Beyond HTCondor (seed 000, "Future Work": cluster machine ads as jobs are clustered):
candidate slots that differ only in per-instance attributes (Name, SlotID, addresses,
timestamps: `INSTANCE_ATTRS`) are one group, and a request is evaluated once per group
instead of once per slot. An instance attribute that any slot expression or policy
expression refers to stops being ignored for the cycle; a request that refers to one
(TARGET.Machine == "x") is evaluated slot by slot. The result is the same slot the
slot-by-slot search picks. Slots are read through `slotads` views: a slot's ad is
parsed only when it is evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import classad2

from daemons.core import ads
from daemons.negotiator.slotads import INSTANCE_ATTRS, References, SlotCache, SlotView, referenced_positions

__all__ = ["INSTANCE_ATTRS", "Candidate", "Group", "Match", "MatchPolicy", "Matchmaker", "NO_MATCH", "References",
           "Rejection", "SUBMITTER_LIMIT", "SlotCache", "consumption_resources"]


@dataclass(frozen=True)
class MatchPolicy:
    pre_job_rank: str = ""    # NEGOTIATOR_PRE_JOB_RANK
    post_job_rank: str = ""   # NEGOTIATOR_POST_JOB_RANK


class Candidate:
    """A slot in play. Its ad is parsed when first evaluated, with the cycle's CurrentTime.

    A slot split by a consumption policy gets its own copy of the ad (the negotiator
    deducts each match from it), so a parsed ad shared across cycles stays as advertised.
    """

    __slots__ = ("name", "view", "claim_id", "order", "consumption", "claims_left", "_now", "_ad", "weight",
                 "group_key")

    def __init__(self, name: str, view: SlotView, claim_id: str, order: int, consumption: tuple[str, ...] = (),
                 claims_left: int = 1, now: float = 0.0) -> None:
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

    @property
    def ad(self) -> classad2.ClassAd:
        if self._ad is None:
            ad = classad2.ClassAd(repr(self.view.ad)) if self.consumption else self.view.ad
            ad["CurrentTime"] = int(self._now)
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


@dataclass(frozen=True)
class Match:
    slot_name: str
    claim_id: str
    slot_ad_text: str
    ranks: tuple[float, float, float]
    startd_address: str = "<0.0.0.0:0>"
    cost: float = 1.0                               # what the submitter is charged (slot weight)
    consumed: tuple[tuple[str, int], ...] = ()      # a consumption policy's split, for the startd
    jobs_in_slot: int = 1                           # HTCondor's jobsInSlot (NEGOTIATOR_DEPTH_FIRST)


@dataclass(frozen=True)
class Rejection:
    reason: str


NO_MATCH = "no match found"
SUBMITTER_LIMIT = "submitter limit exceeded"


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


def _rank(value: object) -> float:
    n = ads.as_number(value)
    return n if n is not None else 0.0


@dataclass
class Matchmaker:
    policy: MatchPolicy
    now: float
    groups: list[Group] = field(default_factory=list)
    considered: int = 0
    evaluations: int = 0          # symmetric matches evaluated (the work grouping saves)
    ignored: dict[str, int] = field(default_factory=dict)
    use_slot_weights: bool = True                           # NEGOTIATOR_USE_SLOT_WEIGHTS
    errors: dict[str, str] = field(default_factory=dict)    # slot -> a problem with its policy
    instance_attrs: frozenset[str] = INSTANCE_ATTRS
    refs: References = field(default_factory=References)
    _pre: classad2.ExprTree | None = field(default=None, repr=False)
    _post: classad2.ExprTree | None = field(default=None, repr=False)
    _slow_requests: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)
    _cache: "SlotCache | None" = field(default=None, repr=False)
    _positions: Callable[[tuple[str, ...]], tuple[int, ...]] = field(default=lambda names: (), repr=False)
    # Match.jobs_in_slot costs evaluations per match; only NEGOTIATOR_DEPTH_FIRST uses it.
    count_jobs_in_slot: bool = True
    # (pre/post, slot group) -> [job attributes the policy can reach (None: any), its value]
    _policy_cache: dict[tuple, list] = field(default_factory=dict, repr=False)
    _request_names: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def from_ads(cls, slot_ads: list[classad2.ClassAd], policy: MatchPolicy, now: float,
                 texts: list[str] | None = None, cache: "SlotCache | None" = None,
                 use_slot_weights: bool = True) -> "Matchmaker":
        """`texts` are the ads' texts; a `cache` kept across cycles spares re-analysing unchanged ads."""
        cache = cache if cache is not None else SlotCache()
        views = [cache.view(texts[i] if texts else repr(ad), ad) for i, ad in enumerate(slot_ads)]
        return cls.from_views(views, policy, now, cache, use_slot_weights=use_slot_weights)

    @classmethod
    def from_views(cls, views: Sequence[SlotView], policy: MatchPolicy, now: float, cache: SlotCache,
                   use_slot_weights: bool = True) -> "Matchmaker":
        mm = cls(policy, now, refs=cache.refs, use_slot_weights=use_slot_weights)
        mm._cache = cache
        mm._pre = ads.parse_expr(policy.pre_job_rank) if policy.pre_job_rank else None
        mm._post = ads.parse_expr(policy.post_job_rank) if policy.post_job_rank else None
        named = []
        for v in views:
            name = v.string("Name")
            if not isinstance(name, str):
                mm._ignore("no Name")
                continue
            if v.get("State") != "Unclaimed":
                mm._ignore("claimed")
                continue
            claim_id = v.string("ClaimId") or v.string("Capability")
            if not isinstance(claim_id, str) or not claim_id:
                mm._ignore("no claim id")
                continue
            named.append((name, v, claim_id))
        named.sort(key=lambda t: t[0])
        candidates = []
        for i, (n, v, c) in enumerate(named):
            cp, claims_left = _claim_policy(v)
            candidates.append(Candidate(n, v, c, i, cp, claims_left if cp else 1, now))
        # Instance attributes some slot or policy expression looks at must count this cycle.
        referenced: set[str] = set()
        for text in (policy.pre_job_rank, policy.post_job_rank):
            if text:
                referenced |= mm.refs.machine_side(text)
        for machine_refs in {c.view.machine_refs for c in candidates}:
            referenced |= machine_refs
        mm.instance_attrs = frozenset(INSTANCE_ATTRS - referenced)
        mm._positions = referenced_positions(mm.instance_attrs)
        by_key: dict[tuple, Group] = {}
        for c in candidates:
            key = c.group_key = c.view.key(mm._positions)
            g = by_key.get(key)
            if g is None:
                by_key[key] = Group([c])
            else:
                g.members.append(c)
        mm.groups = sorted(by_key.values(), key=lambda g: g.first.order)
        cache.trim(views)
        return mm

    def _ignore(self, why: str) -> None:
        self.ignored[why] = self.ignored.get(why, 0) + 1

    @property
    def available(self) -> int:
        return sum(len(g.members) for g in self.groups)

    @property
    def candidates(self) -> list[Candidate]:
        """Every slot still in play, in name order."""
        return sorted((c for g in self.groups for c in g.members), key=lambda c: c.order)

    def _request_is_slow(self, request: classad2.ClassAd) -> bool:
        """True if the request looks at an instance attribute of the slot (TARGET.Name, ...)."""
        texts = tuple(str(request.lookup(a)) if a in request else "" for a in ("Requirements", "Rank"))
        key = (texts[0], texts[1])
        slow = self._slow_requests.get(key)
        if slow is None:
            seen: set[str] = set()
            for t in texts:
                if t:
                    seen |= self.refs.target_side(t)
            slow = bool(seen & self.instance_attrs)
            self._slow_requests[key] = slow
        return slow

    # ---- slot weights and consumption -----------------------------------------------
    def slot_weight(self, c: Candidate) -> float:
        """SlotWeight of a slot as it stands (1 each without NEGOTIATOR_USE_SLOT_WEIGHTS).

        A SlotWeight that does not evaluate falls back to Cpus, HTCondor's default
        SLOT_WEIGHT, as the pool's summed weight does, and is reported.
        """
        if not self.use_slot_weights:
            return 1.0
        if not c.consumption and c.weight is not None:
            return c.weight   # a slot without a consumption policy does not change within the cycle
        w = ads.as_number(ads.evaluate(c.ad.lookup("SlotWeight"), c.ad)) if "SlotWeight" in c.ad else None
        if w is None or w < 0:
            self.errors.setdefault(c.name, "SlotWeight is undefined or not a number; using Cpus")
            cpus = ads.as_number(ads.get(c.ad, "Cpus"))
            w = cpus if cpus is not None and cpus >= 0 else 1.0
        if not c.consumption:
            c.weight = w
        return w

    def _consumed(self, request: classad2.ClassAd, c: Candidate) -> dict[str, int] | None:
        """Consumption<Res> for this request, or None if a policy does not evaluate to a number."""
        out: dict[str, int] = {}
        for r in c.consumption:
            v = ads.as_number(ads.evaluate(c.ad.lookup(f"Consumption{r}"), c.ad, request))
            if v is None:
                self.errors.setdefault(c.name, f"Consumption{r} = {ads.one_line(str(c.ad.lookup(f'Consumption{r}')))}"
                                               " does not evaluate to a number")
                return None
            out[r] = int(-(-v // 1))
        return out

    def _cp_match(self, request: classad2.ClassAd, c: Candidate) -> tuple[dict[str, int], float] | None:
        """HTCondor's consumption-policy test: the request's Request<Res> become the
        consumption while both Requirements are evaluated; the cost is W(S) - W(S')."""
        consumed = self._consumed(request, c)
        if consumed is None:
            return None
        if any(amount > (ads.as_number(ads.get(c.ad, r)) or 0) for r, amount in consumed.items()):
            return None
        saved = {}
        for r, amount in consumed.items():
            attr = f"Request{r}"
            saved[attr] = request.lookup(attr) if attr in request else None
            request[attr] = amount
        try:
            if not request.symmetricMatch(c.ad):
                return None
        finally:
            for attr, tree in saved.items():
                if tree is None:
                    del request[attr]
                else:
                    request[attr] = tree
        if not self.use_slot_weights:
            return consumed, 1.0  # weights off: every match is one (dynamic) slot
        before = self.slot_weight(c)
        original = {r: c.ad.lookup(r) for r in consumed}
        for r, amount in consumed.items():
            c.ad[r] = (ads.as_number(ads.get(c.ad, r)) or 0) - amount
        after = self.slot_weight(c)
        for r, tree in original.items():
            c.ad[r] = tree
        return consumed, before - after

    def _score(self, request: classad2.ClassAd, job_rank, c: Candidate):
        """(ranks, cost, consumed) if the slot matches the request, else None."""
        self.evaluations += 1
        consumed: dict[str, int] = {}
        if c.consumption:
            found = self._cp_match(request, c)
            if found is None:
                return None
            consumed, cost = found
        else:
            if not symmetric_match(request, c.ad):
                return None
            cost = self.slot_weight(c)
        pre = self._policy_rank(0, c, request) if self._pre is not None else 0.0
        rank = _rank(ads.evaluate(job_rank, request, c.ad)) if isinstance(job_rank, classad2.ExprTree) else \
            job_rank
        post = self._policy_rank(1, c, request) if self._post is not None else 0.0
        return (pre, rank, post), cost, consumed

    def _policy_rank(self, which: int, c: Candidate, request: classad2.ClassAd) -> float:
        """NEGOTIATOR_PRE_JOB_RANK (0) or _POST_JOB_RANK (1) of a slot for a request.

        Such a policy usually looks only at the slot (HTCondor's default post-job rank:
        KFlops and SlotID; its pre-job rank: the slot's Rank, Cpus, Memory, and a
        RemoteOwner that jobs do not have). Its value is then the same for every
        request that defines none of the job attributes it can reach, and is evaluated
        once per slot group, not once per request.
        """
        tree = self._pre if which == 0 else self._post
        if c.consumption:
            return _rank(ads.evaluate(tree, c.ad, request))
        key = (which, c.group_key)
        entry = self._policy_cache.get(key)
        if entry is None:
            text = self.policy.pre_job_rank if which == 0 else self.policy.post_job_rank
            entry = self._policy_cache[key] = [_target_names(self.refs, text, c.view), None]
        needed, value = entry
        if needed is None or not needed.isdisjoint(self._request_names):
            return _rank(ads.evaluate(tree, c.ad, request))
        if value is None:
            value = entry[1] = _rank(ads.evaluate(tree, c.ad, request))
        return value

    def _begin_request(self, request: classad2.ClassAd) -> None:
        request["CurrentTime"] = int(self.now)
        if self._pre is not None or self._post is not None:
            self._request_names = frozenset(k.lower() for k in request.keys())

    # ---- matching ----------------------------------------------------------------------
    def match(self, request: classad2.ClassAd, used: float = 0.0, allowed: float = float("inf")) -> Match | Rejection:
        """The best slot for one request; `used`/`allowed` are the submitter's limit this spin."""
        found, rejection = self.match_many(request, 1, used, allowed)
        return found[0] if found else (rejection or Rejection(NO_MATCH))

    def match_many(self, request: classad2.ClassAd, count: int, used: float = 0.0,
                   allowed: float = float("inf")) -> tuple[list[Match], Rejection | None]:
        """Up to `count` matches for one request, the same slots `count` calls of match() pick.

        One evaluation of the groups serves many matches: members of the best group are
        taken in name order for as long as they still beat the best other group (equal
        members rank alike; only their order differs). Slots with a consumption policy
        change with each match, so they are taken one at a time.
        """
        from daemons.negotiator.fairshare import permits

        out: list[Match] = []
        self._begin_request(request)
        job_rank = _job_rank(request)
        slow = self._request_is_slow(request)
        # Members of a group score alike, and taking slots changes no one's score: each
        # group is evaluated once per call (a consumption policy's slot changes: each time).
        scores: dict[tuple, tuple | None] = {}
        while len(out) < count:
            self.considered += 1
            best = second = None   # (key, group, candidate, cost, consumed)
            limited = 0
            for g in self.groups:
                for c in (g.members if slow else g.members[:1]):
                    if slow or c.consumption:
                        scored = self._score(request, job_rank, c)
                    else:
                        scored = scores.get(c.group_key, _UNSCORED)
                        if scored is _UNSCORED:
                            scored = scores[c.group_key] = self._score(request, job_rank, c)
                    if scored is None:
                        continue
                    ranks, cost, consumed = scored
                    if not permits(used, cost, allowed):
                        limited += 1
                        continue
                    entry = (ranks + (-c.order,), g, c, cost, consumed)
                    if best is None or entry[0] > best[0]:
                        second, best = best, entry
                    elif second is None or entry[0] > second[0]:
                        second = entry
            if best is None:
                return out, Rejection(SUBMITTER_LIMIT if limited else NO_MATCH)
            key, group, c, cost, consumed = best
            ranks = key[:3]
            takers = [c] if (c.consumption or slow) else list(group.members)
            for m in takers:
                if len(out) >= count or not permits(used, cost, allowed):
                    break
                if m is not c and second is not None and (ranks + (-m.order,)) <= second[0]:
                    break  # another group's slot comes first now: evaluate again
                out.append(self._emit(request, group, m, ranks, cost, consumed))
                used += cost
                if m is not c:
                    self.considered += 1
            if len(out) < count and not self.groups:
                return out, Rejection(NO_MATCH)
        return out, None

    def _emit(self, request: classad2.ClassAd, group: Group, c: Candidate, ranks: tuple, cost: float,
              consumed: dict[str, int]) -> Match:
        jobs_in_slot = self._jobs_in_slot(request, c) if self.count_jobs_in_slot else 1
        # The slot as matched: a consumption policy's copy before this match's deduction.
        text = repr(c.ad) if c.consumption else c.text
        self._take(group, c, consumed)
        addr = c.view.string("StartdIpAddr")
        return Match(c.name, c.claim_id, text, ranks, addr if isinstance(addr, str) else "<0.0.0.0:0>", cost,
                     tuple(sorted(consumed.items())), jobs_in_slot)

    def _jobs_in_slot(self, request: classad2.ClassAd, c: Candidate) -> int:
        """How many jobs like this one the slot could hold (matchmaker.cpp jobsInSlot)."""
        cpus = ads.as_number(ads.get(c.ad, "Cpus")) or 0
        memory = ads.as_number(ads.get(c.ad, "Memory")) or 0
        want_cpus = max(1, int(ads.as_number(ads.evaluate(request.lookup("RequestCpus"), request, c.ad)) or 1)) \
            if "RequestCpus" in request else 1
        want_mem = max(1, int(ads.as_number(ads.evaluate(request.lookup("RequestMemory"), request, c.ad)) or 1)) \
            if "RequestMemory" in request else 1
        return max(1, int(min(cpus // want_cpus, memory // want_mem)))

    def _take(self, group: Group, c: Candidate, consumed: dict[str, int]) -> None:
        """The match is made: a slot leaves the cycle, or with a consumption policy gives up what
        the match consumes and stays in play while it has claims and resources left."""
        group.members.remove(c)
        if not group.members:
            self.groups.remove(group)
        if not c.consumption:
            return
        for r, amount in consumed.items():
            c.ad[r] = int((ads.as_number(ads.get(c.ad, r)) or 0) - amount)
        c.claims_left -= 1
        if c.claims_left <= 0 or (ads.as_number(ads.get(c.ad, "Cpus")) or 0) <= 0:
            return
        assert self._cache is not None
        c.view = self._cache.view(repr(c.ad), c.ad)
        key = c.view.key(self._positions)
        for g in self.groups:
            if g.first.view.key(self._positions) == key:
                g.members.append(c)
                g.members.sort(key=lambda m: m.order)
                break
        else:
            self.groups.append(Group([c]))
        self.groups.sort(key=lambda g: g.first.order)

    def groups_summary(self) -> dict[str, int]:
        return {"slots": self.available, "groups": len(self.groups)}


_UNSCORED = object()
_SCOPES = frozenset(("target", "my", "other", "parent"))


def _target_names(refs: References, text: str, view: SlotView) -> frozenset[str] | None:
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


def _job_rank(request: classad2.ClassAd) -> classad2.ExprTree | float:
    """The job's Rank: an expression to evaluate per slot, or its value if it is a literal."""
    try:
        value = request["Rank"]
    except KeyError:
        return 0.0
    if isinstance(value, classad2.ExprTree):
        return request.lookup("Rank")
    return _rank(value)


def _claim_policy(v: SlotView) -> tuple[tuple[str, ...], int]:
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
