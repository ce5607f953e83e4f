"""Matchmaking within one negotiation cycle. Pure: ads and time in, matches out.

For each resource request the matchmaker considers the slots still in play, keeps
those whose Requirements and the request's Requirements both hold (a symmetric
match), and picks the best by HTCondor's order (matchmaker.cpp matchmakingAlgorithm):
NEGOTIATOR_PRE_JOB_RANK, then the job's Rank, then NEGOTIATOR_POST_JOB_RANK (each
evaluated with the slot as MY and the job as TARGET, except the job's Rank, which is
the job's own), then no preemption over startd-rank over user-priority preemption,
then PREEMPTION_RANK. Ties go to the slot first by name. A boolean rank counts 1.0
or 0.0. Without a consumption policy a matched slot, partitionable or not, leaves
the cycle whole. With NEGOTIATOR_CONSIDER_PREEMPTION, claimed slots are candidates
too (preemption.py decides whether a request may preempt one); a slot in the Owner
state never is.

Beyond HTCondor (seed 000, "Future Work": cluster machine ads as jobs are clustered):
candidate slots that differ only in per-instance attributes (Name, SlotID, addresses,
timestamps, the running job's ids: `INSTANCE_ATTRS`) are one group, and a request is
evaluated once per group instead of once per slot; claimed slots group by their user
too. An instance attribute that any slot expression or policy expression refers to
stops being ignored for the cycle; a request that refers to one (TARGET.Machine == "x")
is evaluated slot by slot. The result is the same slot the slot-by-slot search picks.
Slots are read through `slotads` views: a slot's ad is parsed only when it is evaluated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import classad2

from daemons.core import ads
from daemons.negotiator.candidates import (NO_ADDRESS, NO_MATCH, NO_PREEMPTION, PREEMPTION_REQUIREMENTS_FALSE,
                                           PRIO_PREEMPTION, SUBMITTER_LIMIT, Candidate, Group, Match, MatchPolicy,
                                           Rejection, claim_policy, consumption_resources, cp_fits, job_rank,
                                           rank_value, symmetric_match, target_names)
from daemons.negotiator.fairshare import permits
from daemons.negotiator.preemption import Preemption
from daemons.negotiator.significant import REMOVED
from daemons.negotiator.slotads import INSTANCE_ATTRS, References, SlotCache, SlotView, referenced_positions

__all__ = ["INSTANCE_ATTRS", "Candidate", "Group", "Match", "MatchPolicy", "Matchmaker", "NO_MATCH", "References",
           "Rejection", "SUBMITTER_LIMIT", "SlotCache", "SpinLimits", "consumption_resources", "symmetric_match"]


@dataclass
class SpinLimits:
    """A submitter's limits in one pie spin (calculateSubmitterLimit): `limit` for
    preempting matches and `limit_unclaimed` (also capped by its group's quota) for slots
    nobody holds; what it has used of each. A startd-rank preemption is not limited."""
    limit: float = math.inf
    limit_unclaimed: float = math.inf
    used: float = 0.0
    used_unclaimed: float = 0.0

    def permits(self, state: int, cost: float) -> bool:
        if state == NO_PREEMPTION:
            return permits(self.used_unclaimed, cost, self.limit_unclaimed)
        if state == PRIO_PREEMPTION:
            return permits(self.used, cost, self.limit)
        return True

    def charge(self, state: int, cost: float) -> None:
        self.used += cost
        if state == NO_PREEMPTION:
            self.used_unclaimed += cost


@dataclass
class _Passive:
    """Claimed slots of one shape that no request can preempt: only a rejection's reason."""
    first: Candidate
    users: set[str]
    count: int = 1


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
    preemption: Preemption = field(default_factory=lambda: Preemption())
    passive: list[_Passive] = field(default_factory=list)
    _pre: classad2.ExprTree | None = field(default=None, repr=False)
    _post: classad2.ExprTree | None = field(default=None, repr=False)
    _slow_requests: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)
    _cache: "SlotCache | None" = field(default=None, repr=False)
    _positions: Callable[[tuple[str, ...]], tuple[int, ...]] = field(default=lambda names: (), repr=False)
    _match_positions: Callable[[tuple[str, ...]], tuple[int, ...]] = field(default=lambda names: (), repr=False)
    # Match.jobs_in_slot costs evaluations per match; only NEGOTIATOR_DEPTH_FIRST uses it.
    count_jobs_in_slot: bool = True
    # (pre/post, slot group) -> [job attributes the policy can reach (None: any), its value]
    _policy_cache: dict[tuple, list] = field(default_factory=dict, repr=False)
    _request_names: frozenset[str] = field(default=frozenset(), repr=False)
    # Requests that agree on every attribute a slot or policy can look at are evaluated
    # alike (HTCondor's autocluster signature, worked out by the negotiator too): their
    # results are shared for the cycle, even from schedds that do not autocluster.
    significant: frozenset[str] | None = None
    # What of a request the signature reads: the significant attributes, Requirements, Rank,
    # ConcurrencyLimits, and those of the negotiator's own figures (Submitter*) that a slot
    # or a policy refers to. Unknown which (None): every one of them, and a submitter's
    # requests never share results with another's, nor across its matches (its usage changes).
    inserted_refs: frozenset[str] | None = None
    _visible: frozenset[str] = field(default=frozenset(), repr=False)
    _by_signature: dict[tuple, tuple[dict, dict, dict]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_ads(cls, slot_ads: list[classad2.ClassAd], policy: MatchPolicy, now: float,
                 texts: list[str] | None = None, cache: "SlotCache | None" = None,
                 use_slot_weights: bool = True, preemption: Preemption | None = None,
                 remote_attrs: Callable[[str], dict[str, Any]] | None = None) -> "Matchmaker":
        """`texts` are the ads' texts; a `cache` kept across cycles spares re-analysing unchanged ads."""
        cache = cache if cache is not None else SlotCache()
        views = [cache.view(texts[i] if texts else repr(ad), ad) for i, ad in enumerate(slot_ads)]
        return cls.from_views(views, policy, now, cache, use_slot_weights=use_slot_weights, preemption=preemption,
                              remote_attrs=remote_attrs)

    @classmethod
    def from_views(cls, views: Sequence[SlotView], policy: MatchPolicy, now: float, cache: SlotCache,
                   use_slot_weights: bool = True, preemption: Preemption | None = None,
                   remote_attrs: Callable[[str], dict[str, Any]] | None = None,
                   significant: Sequence[str] | None = None,
                   inserted_refs: Iterable[str] | None = None) -> "Matchmaker":
        """`preemption` None: claimed slots are not candidates (as NEGOTIATOR_CONSIDER_PREEMPTION =
        False); `remote_attrs(user)`: RemoteUserPrio and friends for a claimed slot's ad;
        `significant`: the cycle's significant attributes (requests are then told apart by them);
        `inserted_refs`: the attributes the negotiator puts in requests that some slot or policy
        refers to (SignificantAttributes.inserted_refs; None: assume all)."""
        pre = preemption if preemption is not None else Preemption.disabled()
        mm = cls(policy, now, refs=cache.refs, use_slot_weights=use_slot_weights, preemption=pre,
                 significant=frozenset(a.lower() for a in significant) if significant is not None else None,
                 inserted_refs=frozenset(a.lower() for a in inserted_refs) if inserted_refs is not None else None)
        if mm.significant is not None:
            mm._visible = mm.significant | _ALWAYS_SIGNIFICANT | (
                mm.inserted_refs if mm.inserted_refs is not None else REMOVED)
        mm._cache = cache
        mm._pre = ads.parse_expr(policy.pre_job_rank) if policy.pre_job_rank else None
        mm._post = ads.parse_expr(policy.post_job_rank) if policy.post_job_rank else None
        named = []
        for v in views:
            name = v.string("Name")
            if not isinstance(name, str):
                mm._ignore("no Name")
                continue
            state = v.get("State")
            user = ""
            if state == "Claimed":
                owner = v.string("RemoteOwner")
                if not isinstance(owner, str) or not owner or v.get("PartitionableSlot") is True \
                        or not pre.candidate(v):
                    mm._ignore("claimed")
                    continue
                user = owner
            elif state != "Unclaimed":
                mm._ignore(str(state).lower() if isinstance(state, str) else "no State")
                continue
            claim_id = v.string("ClaimId") or v.string("Capability")
            if not isinstance(claim_id, str) or not claim_id:
                mm._ignore("no claim id")
                continue
            named.append((name, v, claim_id, user))
        named.sort(key=lambda t: t[0])
        # Instance attributes some slot or policy expression looks at must count this cycle.
        referenced: set[str] = set()
        for text in (policy.pre_job_rank, policy.post_job_rank, pre.cfg.requirements, pre.cfg.rank):
            if text:
                referenced |= mm.refs.machine_side(text)
        slot_refs: set[str] = set()
        for machine_refs in {v.machine_refs for _, v, _, _ in named}:
            slot_refs |= machine_refs
        referenced |= slot_refs
        mm.instance_attrs = frozenset(INSTANCE_ATTRS - referenced)
        mm._positions = referenced_positions(mm.instance_attrs)
        mm._match_positions = referenced_positions(frozenset(INSTANCE_ATTRS - slot_refs))
        attrs_of: dict[str, dict[str, Any]] = {}

        def candidate(i: int, n: str, v: SlotView, c: str, user: str) -> Candidate:
            cp, claims_left = claim_policy(v) if not user else ((), 1)
            extra = None
            if user and remote_attrs is not None:
                extra = attrs_of.get(user)
                if extra is None:
                    extra = attrs_of[user] = remote_attrs(user)
            return Candidate(n, v, c, i, cp, claims_left if cp else 1, now, user, extra)

        by_key: dict[tuple, Group] = {}
        passive: dict[tuple, _Passive] = {}
        for i, (n, v, claim_id, user) in enumerate(named):
            key = v.key(mm._positions)
            if user and not (pre.prio_possible or pre.rank_possible(v)):
                # Most of a busy pool: only the first of a kind is looked at, for a rejection's reason.
                p = passive.get(key)
                if p is None:
                    passive[key] = _Passive(candidate(i, n, v, claim_id, user), {user})
                else:
                    p.users.add(user)
                    p.count += 1
                continue
            c = candidate(i, n, v, claim_id, user)
            key = c.group_key = key + (("claimed", user),) if user else key
            g = by_key.get(key)
            if g is None:
                by_key[key] = Group([c])
            else:
                g.members.append(c)
        mm.groups = sorted(by_key.values(), key=lambda g: g.first.order)
        mm.passive = sorted(passive.values(), key=lambda p: p.first.order)
        cache.trim(views)
        return mm

    def _ignore(self, why: str) -> None:
        self.ignored[why] = self.ignored.get(why, 0) + 1

    @property
    def available(self) -> int:
        """Slots in play: HTCondor's startdAds after trimming (claimed ones included when
        preemption is considered)."""
        return sum(len(g.members) for g in self.groups) + sum(p.count for p in self.passive)

    @property
    def unclaimed(self) -> int:
        return sum(len(g.members) for g in self.groups if not g.first.claimed)

    @property
    def candidates(self) -> list[Candidate]:
        """Every slot still in play that could be matched, in name order."""
        return sorted((c for g in self.groups for c in g.members), key=lambda c: c.order)

    def _request_is_slow(self, request: classad2.ClassAd, items: dict[str, str] | None = None) -> bool:
        """True if the request looks at an instance attribute of the slot (TARGET.Name, ...)."""
        if items is not None:
            texts = (items.get("requirements", ""), items.get("rank", ""))
        else:
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
        w = ads.as_float(ads.evaluate(c.ad.lookup("SlotWeight"), c.ad)) if "SlotWeight" in c.ad else None
        if w is None or w < 0:
            self.errors.setdefault(c.name, "SlotWeight is undefined or not a number; using Cpus")
            cpus = ads.as_number(ads.get(c.ad, "Cpus"))
            w = cpus if cpus is not None and cpus >= 0 else 1.0
        if not c.consumption:
            c.weight = w
        return w

    def _cp_match(self, request: classad2.ClassAd, c: Candidate) -> tuple[dict[str, int], float] | None:
        """A consumption policy's match and its cost, W(S) - W(S') (cp_deduct_assets)."""
        amounts = cp_fits(request, c, self.errors)
        if amounts is None:
            return None
        if not self.use_slot_weights:
            return amounts, 1.0  # weights off: every match is one (dynamic) slot
        before = self.slot_weight(c)
        original = {r: c.ad.lookup(r) for r in amounts}
        for r, amount in amounts.items():
            c.ad[r] = (ads.as_number(ads.get(c.ad, r)) or 0) - amount
        after = self.slot_weight(c)
        for r, tree in original.items():
            c.ad[r] = tree
        return amounts, before - after

    def _score(self, request: classad2.ClassAd, rank_of_job, c: Candidate, matched: dict[tuple, bool] | None = None):
        """(ranks, cost, consumed) if the slot matches the request, else None. `matched`: the
        symmetric matches of this request's signature by the slot's match key, for a
        request that looks at no instance attribute of a slot: slots of one match key
        differ only in what no Requirements can see (the SlotID that a rank policy looks
        at splits the bench's three kinds of machine into 24 groups, but not their matches)."""
        consumed: dict[str, int] = {}
        if c.consumption:
            self.evaluations += 1
            found = self._cp_match(request, c)
            if found is None:
                return None
            consumed, cost = found
        else:
            if matched is None:
                self.evaluations += 1
                ok = symmetric_match(request, c.ad)
            else:
                key = self._match_key(c)
                ok = matched.get(key)
                if ok is None:
                    self.evaluations += 1
                    ok = matched[key] = symmetric_match(request, c.ad)
            if not ok:
                return None
            cost = self.slot_weight(c)
        pre = self._policy_rank(0, c, request) if self._pre is not None else 0.0
        rank = rank_value(ads.evaluate(rank_of_job, request, c.ad)) if isinstance(rank_of_job, classad2.ExprTree) \
            else rank_of_job
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
            return rank_value(ads.evaluate(tree, c.ad, request))
        key = (which, c.group_key)
        entry = self._policy_cache.get(key)
        if entry is None:
            text = self.policy.pre_job_rank if which == 0 else self.policy.post_job_rank
            entry = self._policy_cache[key] = [target_names(self.refs, text, c.view), None]
        needed, value = entry
        if needed is None or not needed.isdisjoint(self._request_names):
            return rank_value(ads.evaluate(tree, c.ad, request))
        if value is None:
            value = entry[1] = rank_value(ads.evaluate(tree, c.ad, request))
        return value

    def _begin_request(self, request: classad2.ClassAd, items: dict[str, str] | None) -> None:
        request["CurrentTime"] = int(self.now)
        if self._pre is not None or self._post is not None:
            self._request_names = frozenset(items).union(("currenttime",)) if items is not None \
                else frozenset(k.lower() for k in request.keys())

    # ---- matching ----------------------------------------------------------------------
    def match(self, request: classad2.ClassAd, used: float = 0.0, allowed: float = float("inf"), *,
              limits: SpinLimits | None = None, submitter: str = "",
              only_startd_rank: bool = False, items: dict[str, str] | None = None) -> Match | Rejection:
        """The best slot for one request; `used`/`allowed` are the submitter's limit this spin."""
        found, rejection = self.match_many(request, 1, used, allowed, limits=limits, submitter=submitter,
                                           only_startd_rank=only_startd_rank, items=items)
        return found[0] if found else (rejection or Rejection(NO_MATCH))

    def match_many(self, request: classad2.ClassAd, count: int, used: float = 0.0,
                   allowed: float = float("inf"), *, limits: SpinLimits | None = None, submitter: str = "",
                   only_startd_rank: bool = False, items: dict[str, str] | None = None
                   ) -> tuple[list[Match], Rejection | None]:
        """Up to `count` matches for one request, the same slots `count` calls of match() pick.

        `items`: the request's attributes as {lower-case name: expression text}, every one
        of them (CurrentTime aside), when the caller has them from the ad's text: reading
        names and texts back from the parsed ad costs more than matching it.

        `limits` (or `used`/`allowed` for both of its limits) is charged for each match.
        `only_startd_rank`: the submitter is over its limit on the first spin, so only a
        slot whose RANK strictly prefers the request may be taken (by preemption).

        One evaluation of the groups serves many matches: members of the best group are
        taken in name order for as long as they still beat the best other group (equal
        members rank alike; only their order differs). Slots with a consumption policy
        change with each match, so they are taken one at a time.
        """
        lim = limits if limits is not None else SpinLimits(allowed, allowed, used, used)
        out: list[Match] = []
        self._begin_request(request, items)
        rank_of_job = job_rank(request)
        slow = self._request_is_slow(request, items)
        pre = self.preemption
        # Members of a group score alike, and taking slots changes no one's score: each
        # group is evaluated once per call (a consumption policy's slot changes: each time).
        verdicts: dict[tuple, Any] = {}
        sig = self._signature(request, items) if not slow else None
        shared = self._by_signature.get(sig) if sig is not None else None
        if shared is None:
            shared = ({}, {}, {})
            if sig is not None:
                self._by_signature[sig] = shared
        scores: dict[tuple, Any] = shared[0]
        rank_prefers: dict[tuple, bool] = shared[1]   # by match key: the slot's RANK strictly prefers this request
        matched: dict[tuple, bool] = shared[2]        # by match key: both Requirements hold
        while len(out) < count:
            self.considered += 1
            best = second = None   # (key, group, candidate, cost, consumed, state)
            limited = policy_refused = False
            deferred: list[Group] = []
            for g in self.groups:
                claimed = g.first.claimed
                if only_startd_rank and not claimed:
                    continue   # matchmakingAlgorithm: unclaimed slots are ignored in this mode
                if claimed and not slow:
                    # Most claimed slots cannot be preempted by this request: the slot does not
                    # prefer it and priority preemption is off (PREEMPTION_REQUIREMENTS = False,
                    # HTCondor's default). They only matter for a rejection's reason.
                    c0 = g.first
                    mk = self._match_key(c0)
                    prefers = rank_prefers.get(mk)
                    if prefers is None:
                        prefers = rank_prefers[mk] = pre.rank_prefers(c0, request)
                    if not prefers:
                        if only_startd_rank:
                            continue
                        if c0.remote_user == submitter:
                            continue   # the submitter's own slot, and the slot does not prefer this job
                        if not pre.prio_possible:
                            deferred.append(g)
                            continue
                for c in (g.members if slow else g.members[:1]):
                    if slow or c.consumption:
                        scored = self._score(request, rank_of_job, c)
                    else:
                        scored = scores.get(c.group_key, _UNSCORED)
                        if scored is _UNSCORED:
                            scored = scores[c.group_key] = self._score(request, rank_of_job, c, matched)
                    if scored is None:
                        continue
                    ranks, cost, consumed = scored
                    state = NO_PREEMPTION
                    prank = -3.4e38
                    if claimed:
                        vkey = (c.group_key, c.order if slow else 0)
                        verdict = verdicts.get(vkey)
                        if verdict is None:
                            v = pre.verdict(c, request, submitter, only_startd_rank)
                            verdict = verdicts[vkey] = (v, pre.preempt_rank(c, request, v.state)
                                                        if v.state >= 0 else 0.0)
                        v, prank = verdict
                        policy_refused |= v.policy_refused
                        if v.state < 0:
                            continue
                        state = v.state
                    if not lim.permits(state, cost):
                        limited = True
                        continue
                    entry = (ranks + (state, prank, -c.order), g, c, cost, consumed, state)
                    if best is None or entry[0] > best[0]:
                        second, best = best, entry
                    elif second is None or entry[0] > second[0]:
                        second = entry
            if best is None:
                if not policy_refused and not only_startd_rank:
                    policy_refused = self._refused_by_policy(request, submitter, deferred, matched)
                reason = PREEMPTION_REQUIREMENTS_FALSE if policy_refused else SUBMITTER_LIMIT if limited \
                    else NO_MATCH
                return out, Rejection(reason, limited)
            key, group, c, cost, consumed, state = best
            ranks = key[:3]
            takers = [c] if (c.consumption or slow) else list(group.members)
            for m in takers:
                if len(out) >= count or not lim.permits(state, cost):
                    break
                if m is not c and second is not None and (key[:5] + (-m.order,)) <= second[0]:
                    break  # another group's slot comes first now: evaluate again
                out.append(self._emit(request, group, m, ranks, cost, consumed, state))
                lim.charge(state, cost)
                if m is not c:
                    self.considered += 1
            if len(out) < count and not self.groups:
                return out, Rejection(NO_MATCH)
        return out, None

    def _signature(self, request: classad2.ClassAd, items: dict[str, str] | None = None) -> tuple | None:
        """What a slot or a policy can see of a request: the texts of its significant
        attributes, of its Requirements, Rank and ConcurrencyLimits, of what the negotiator
        added (Submitter*) that a slot or a policy refers to, and of every attribute of its
        own these refer to. (Texts as written or as classad2 prints them: a key of a cache,
        where a different spelling of one expression costs only a miss.)"""
        if self.significant is None:
            return None
        if items is not None:
            present = items
            text_of = items.__getitem__
        else:
            present = {k.lower(): k for k in request.keys()}

            def text_of(n: str) -> str:
                return str(request.lookup(present[n]))
        if self.inserted_refs is not None:
            wanted = [n for n in self._visible if n in present]
        else:
            visible = self._visible
            wanted = [n for n in present if n in visible or n.startswith(("submitter", "submittor"))]
        seen: dict[str, str] = {}
        own_side = self.refs.own_side
        while wanted:
            n = wanted.pop()
            if n in seen:
                continue
            text = text_of(n)
            seen[n] = text
            for low in own_side(text):
                if low in present and low not in seen:
                    wanted.append(low)
        seen.pop("currenttime", None)
        return tuple(sorted(seen.items()))

    def _match_key(self, c: Candidate) -> tuple:
        """Slots with equal match keys match (and rank) a request alike: their shape and the
        instance attributes the slots' own expressions look at; the user holding them, and
        what only the negotiator's policies look at, left out."""
        key = c.match_key
        if key is None:
            key = c.match_key = c.view.key(self._match_positions)
        return key

    def _refused_by_policy(self, request: classad2.ClassAd, submitter: str, deferred: list[Group],
                           matched: dict[tuple, bool]) -> bool:
        """Would a claimed slot of another user have matched, had PREEMPTION_REQUIREMENTS
        allowed it? Then the rejection says so ("PREEMPTION_REQUIREMENTS == False")."""
        if not self.preemption.cfg.consider:
            return False
        for first in [g.first for g in deferred] + [p.first for p in self.passive if p.users != {submitter}]:
            key = self._match_key(first)
            ok = matched.get(key)
            if ok is None:
                self.evaluations += 1
                ok = matched[key] = symmetric_match(request, first.ad)
            if ok:
                return True
        return False

    def _emit(self, request: classad2.ClassAd, group: Group, c: Candidate, ranks: tuple, cost: float,
              consumed: dict[str, int], state: int) -> Match:
        jobs_in_slot = self._jobs_in_slot(request, c) if self.count_jobs_in_slot else 1
        # The slot as matched: a consumption policy's copy before this match's deduction.
        text = repr(c.ad) if c.consumption else c.text
        preempting, prio, old, new, limits = "", 0.0, 0.0, 0.0, ""
        if c.claimed:
            preempting = c.remote_user
            prio = float(c.remote_attrs.get("RemoteUserPrio", 0.0))
            old, new = self.preemption.ranks_of(c, request)
            lim = c.view.get("ConcurrencyLimits")
            limits = lim if isinstance(lim, str) else ""
        self._take(group, c, consumed)
        addr = c.view.string("StartdIpAddr")
        return Match(c.name, c.claim_id, text, ranks, addr if isinstance(addr, str) else NO_ADDRESS, cost,
                     tuple(sorted(consumed.items())), jobs_in_slot, preempting, state, prio, old, new, limits)

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
_ALWAYS_SIGNIFICANT = frozenset(("requirements", "rank", "concurrencylimits"))
