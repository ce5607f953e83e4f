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
slot-by-slot search picks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import classad2

from daemons.core import ads


@dataclass(frozen=True)
class MatchPolicy:
    pre_job_rank: str = ""    # NEGOTIATOR_PRE_JOB_RANK
    post_job_rank: str = ""   # NEGOTIATOR_POST_JOB_RANK


# Attributes that tell otherwise identical slots apart without making them match differently.
INSTANCE_ATTRS = frozenset(a.lower() for a in (
    "Name", "Machine", "SlotID", "MyAddress", "StartdIpAddr", "ClaimId", "Capability", "PublicClaimId",
    "LastHeardFrom", "DaemonStartTime", "EnteredCurrentState", "EnteredCurrentActivity",
    "UpdateSequenceNumber", "KeyboardIdle", "CurrentTime", "MyCurrentTime", "NumDynamicSlots", "ChildCpus",
    "UidDomain", "FileSystemDomain", "StartdName",
))


@dataclass
class Candidate:
    name: str
    ad: classad2.ClassAd
    claim_id: str
    order: int
    text: str = ""
    consumption: tuple[str, ...] = ()   # resources with a Consumption<Res> policy (negotiator-side split)
    claims_left: int = 1                # NumClaims: matches this slot may still take this cycle

    def __post_init__(self) -> None:
        if not self.text:
            self.text = repr(self.ad)


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


def _rank(value: object) -> float:
    n = ads.as_number(value)
    return n if n is not None else 0.0


class References:
    """What expressions refer to, cached by text: (qualifier, name) pairs, qualifier None/'my'/'target'."""

    _EMPTY = classad2.ClassAd()

    def __init__(self) -> None:
        self._by_text: dict[str, tuple[tuple[str | None, str], ...]] = {}

    def of(self, text: str) -> tuple[tuple[str | None, str], ...]:
        refs = self._by_text.get(text)
        if refs is None:
            try:
                raw = self._EMPTY.externalRefs(classad2.ExprTree(text + "\n"))
            except Exception:
                raw = []
            out = []
            for r in raw:
                if not r:
                    continue
                head, dot, rest = r.partition(".")
                if dot and head.lower() in ("my", "target", "other"):
                    out.append(("my" if head.lower() == "my" else "target", rest.split(".")[0].split("[")[0]))
                else:
                    out.append((None, r.split(".")[0].split("[")[0]))
            refs = tuple(out)
            self._by_text[text] = refs
        return refs

    def machine_side(self, text: str) -> set[str]:
        """Names that may be slot attributes when the slot is MY (MY.x and bare x)."""
        return {n.lower() for q, n in self.of(text) if q != "target"}

    def target_side(self, text: str) -> set[str]:
        """Names that may be slot attributes when the slot is TARGET (TARGET.x and bare x)."""
        return {n.lower() for q, n in self.of(text) if q != "my"}


class SlotCache:
    """Per slot-ad text: the slot attributes its expressions refer to, and its attributes' texts."""

    def __init__(self) -> None:
        self.refs = References()
        self._by_text: dict[str, tuple[frozenset[str], tuple[tuple[str, str], ...]]] = {}

    def analyse(self, text: str, ad: classad2.ClassAd) -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
        found = self._by_text.get(text)
        if found is None:
            machine_refs: set[str] = set()
            items = []
            for k in ad.keys():
                if k == "CurrentTime":
                    continue
                expr = ads.one_line(str(ad.lookup(k)))
                items.append((k.lower(), expr))
                if isinstance(ad[k], classad2.ExprTree):
                    machine_refs |= self.refs.machine_side(expr)
            found = (frozenset(machine_refs), tuple(sorted(items)))
            self._by_text[text] = found
        return found

    def trim(self, live: int) -> None:
        if len(self._by_text) > 4 * max(1, live) + 1000:
            self._by_text.clear()  # bounded: slots that changed leave stale entries behind


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

    @classmethod
    def from_ads(cls, slot_ads: list[classad2.ClassAd], policy: MatchPolicy, now: float,
                 texts: list[str] | None = None, cache: "SlotCache | None" = None,
                 use_slot_weights: bool = True) -> "Matchmaker":
        """`texts` are the ads' texts; a `cache` kept across cycles spares re-analysing unchanged ads."""
        cache = cache if cache is not None else SlotCache()
        mm = cls(policy, now, refs=cache.refs, use_slot_weights=use_slot_weights)
        mm._cache = cache
        mm._pre = ads.parse_expr(policy.pre_job_rank) if policy.pre_job_rank else None
        mm._post = ads.parse_expr(policy.post_job_rank) if policy.post_job_rank else None
        named = []
        for i, ad in enumerate(slot_ads):
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
            named.append((name, ad, claim_id, texts[i] if texts else repr(ad)))
        named.sort(key=lambda t: t[0])
        candidates = []
        for i, (n, a, c, t) in enumerate(named):
            cp = consumption_resources(a)
            claims = ads.get(a, "NumClaims")
            claims_left = int(claims) if isinstance(claims, int) and claims > 0 else (
                max(1, int(ads.get(a, "Cpus") or 1)) if cp else 1)
            candidates.append(Candidate(n, a, c, i, t, cp, claims_left if cp else 1))
        # Instance attributes some slot or policy expression looks at must count this cycle.
        referenced: set[str] = set()
        for text in (policy.pre_job_rank, policy.post_job_rank):
            if text:
                referenced |= mm.refs.machine_side(text)
        analysed = [cache.analyse(c.text, c.ad) for c in candidates]
        for machine_refs in {a[0] for a in analysed}:
            referenced |= machine_refs
        mm.instance_attrs = frozenset(INSTANCE_ATTRS - referenced)
        by_key: dict[tuple, Group] = {}
        for c, (_, items) in zip(candidates, analysed):
            key = tuple(item for item in items if item[0] not in mm.instance_attrs)
            g = by_key.get(key)
            if g is None:
                by_key[key] = Group([c])
            else:
                g.members.append(c)
            c.ad["CurrentTime"] = int(now)
        mm.groups = sorted(by_key.values(), key=lambda g: g.first.order)
        cache.trim(len(candidates))
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
        w = ads.as_number(ads.evaluate(c.ad.lookup("SlotWeight"), c.ad)) if "SlotWeight" in c.ad else None
        if w is None or w < 0:
            self.errors.setdefault(c.name, "SlotWeight is undefined or not a number; using Cpus")
            cpus = ads.as_number(ads.get(c.ad, "Cpus"))
            return cpus if cpus is not None and cpus >= 0 else 1.0
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
            if not request.symmetricMatch(c.ad):
                return None
            cost = self.slot_weight(c)
        pre = _rank(ads.evaluate(self._pre, c.ad, request)) if self._pre is not None else 0.0
        rank = _rank(ads.evaluate(job_rank, request, c.ad)) if job_rank is not None else 0.0
        post = _rank(ads.evaluate(self._post, c.ad, request)) if self._post is not None else 0.0
        return (pre, rank, post), cost, consumed

    # ---- matching ----------------------------------------------------------------------
    def match(self, request: classad2.ClassAd, used: float = 0.0, allowed: float = float("inf")) -> Match | Rejection:
        """The best slot for one request; `used`/`allowed` are the submitter's limit this spin."""
        from daemons.negotiator.fairshare import permits

        self.considered += 1
        request["CurrentTime"] = int(self.now)
        job_rank = request.lookup("Rank") if "Rank" in request else None
        best_group: Group | None = None
        best: Candidate | None = None
        best_key: tuple | None = None
        best_cost, best_consumed = 0.0, {}
        limited = 0
        slow = self._request_is_slow(request)
        for g in self.groups:
            for c in (g.members if slow else g.members[:1]):
                scored = self._score(request, job_rank, c)
                if scored is None:
                    continue
                ranks, cost, consumed = scored
                if not permits(used, cost, allowed):
                    limited += 1
                    continue
                key = ranks + (-c.order,)
                if best_key is None or key > best_key:
                    best_group, best, best_key, best_cost, best_consumed = g, c, key, cost, consumed
        if best is None or best_group is None or best_key is None:
            return Rejection(SUBMITTER_LIMIT if limited else NO_MATCH)
        jobs_in_slot = self._jobs_in_slot(request, best)
        text = repr(best.ad)
        self._take(best_group, best, best_consumed)
        addr = ads.get(best.ad, "StartdIpAddr")
        return Match(best.name, best.claim_id, text, best_key[:3], addr if isinstance(addr, str) else "<0.0.0.0:0>",
                     best_cost, tuple(sorted(best_consumed.items())), jobs_in_slot)

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
        while len(out) < count:
            self.considered += 1
            request["CurrentTime"] = int(self.now)
            job_rank = request.lookup("Rank") if "Rank" in request else None
            slow = self._request_is_slow(request)
            best = second = None   # (key, group, candidate, cost, consumed)
            limited = 0
            for g in self.groups:
                for c in (g.members if slow else g.members[:1]):
                    scored = self._score(request, job_rank, c)
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
        jobs_in_slot = self._jobs_in_slot(request, c)
        text = repr(c.ad)
        self._take(group, c, consumed)
        addr = ads.get(c.ad, "StartdIpAddr")
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
        c.text = repr(c.ad)
        _, items = self._cache.analyse(c.text, c.ad)
        key = tuple(item for item in items if item[0] not in self.instance_attrs)
        for g in self.groups:
            if tuple(item for item in self._cache.analyse(g.first.text, g.first.ad)[1]
                     if item[0] not in self.instance_attrs) == key:
                g.members.append(c)
                g.members.sort(key=lambda m: m.order)
                break
        else:
            self.groups.append(Group([c]))
        self.groups.sort(key=lambda g: g.first.order)

    def groups_summary(self) -> dict[str, int]:
        return {"slots": self.available, "groups": len(self.groups)}
