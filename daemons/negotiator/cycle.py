"""One negotiation cycle's decisions. Pure: the pool's views in, sessions, matches,
rejections and preemptions out; no asyncio, no gRPC.

HTCondor's matchmaker.cpp, followed closely:
- negotiationTime: with GROUP_NAMES, allocation rounds over the group tree (groups.py)
  with each group negotiated in GROUP_SORT_EXPR order up to its allocation
  (GroupEntry::hgq_negotiate_with_all_groups); without groups, one group of everybody;
- negotiateWithGroup: "pie spins". Every submitter's share and limits come from the
  spin's pie; submitters negotiate in the first spin's order (ascending effective
  priority, then starvation); a spin is repeated while it made progress. With
  NEGOTIATOR_CONSIDER_PREEMPTION (the default), submitters without idle jobs keep
  their place in the shares, groups at their quota and submitters over their limit
  still negotiate on the first spin (for startd-rank preemption), and nothing stops
  because the pool is full: every group and submitter is negotiated in order, and
  every request gets a match or a rejection with its reason;
- negotiate: one submitter's session with its schedd, request by request, until its
  requests run out ("done") or its limit is reached ("resume": the next spin).

A `Cycle` is driven by its generator `sessions()`: it yields a `Session` for each
submitter to negotiate with, and is sent back how the session ended ("done", "resume"
or "error"). The caller feeds the session the schedd's resource requests
(`Session.serve`) and sends its outcomes (matches, rejections) to the schedd. Log
lines, in HTCondor's NegotiatorLog wording, collect in `Cycle.lines` and `Session.lines`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Generator

import classad2

from daemons.core import ads
from daemons.negotiator import groups as hgq
from daemons.negotiator.accountant import Accountant
from daemons.negotiator.candidates import NO_PREEMPTION, SUBMITTER_LIMIT, Match, Rejection
from daemons.negotiator.fairshare import submitter_limits
from daemons.negotiator.matchmaker import Matchmaker, SpinLimits
from daemons.negotiator.slotads import EVALUATE, literal_value

DONE, RESUME, ERROR = "done", "resume", "error"


@dataclass(frozen=True)
class CyclePolicy:
    groups: hgq.GroupsConfig = field(default_factory=hgq.GroupsConfig)
    use_slot_weights: bool = True          # NEGOTIATOR_USE_SLOT_WEIGHTS
    depth_first: bool = False              # NEGOTIATOR_DEPTH_FIRST
    consider_preemption: bool = True       # NEGOTIATOR_CONSIDER_PREEMPTION


@dataclass(frozen=True)
class Submitter:
    """What a cycle needs of a submitter ad."""
    name: str
    address: str                # the schedd's, without <>
    idle: float = 0.0
    running: float = 0.0
    weighted_idle: float = 0.0
    weighted_running: float = 0.0


@dataclass(slots=True)   # one per match or rejection (not frozen, as Match)
class Outcome:
    request_id: str
    match: Match | None = None
    reason: str = ""            # a rejection's


@dataclass
class Counts:
    """What the cycle record counts."""
    matches: int = 0
    rejections: int = 0
    requests: int = 0
    considered: int = 0
    preemptions: int = 0
    autoclusters: set = field(default_factory=set)
    order: list[str] = field(default_factory=list)    # "group/submitter" in negotiation order


class Session:
    """One submitter's negotiation in one spin (matchmaker.cpp negotiate)."""

    def __init__(self, cycle: "Cycle", name: str, address: str, group: hgq.Group | None, ancestry: list[str],
                 limits: SpinLimits, ignore_limit: bool, prio: float) -> None:
        self.cycle = cycle
        self.name = name
        self.address = address
        self.group = group
        self.ancestry = ancestry
        self.limits = limits
        self.ignore_limit = ignore_limit     # first spin with preemption: over the limit, only startd rank
        self.prio = prio
        self.lines: list[str] = []
        self.outcomes: list[Outcome] = []
        self.matches = 0
        self.stopped = False                 # stop asking the schedd for requests
        self.limited = False                 # some slot was refused for the submitter limit
        self.rejected: set[int] = set()      # autoclusters rejected in this session: skip the rest of them

    @property
    def limit(self) -> float:
        return self.limits.limit

    @property
    def used(self) -> float:
        return self.limits.used

    def result(self) -> str:
        return RESUME if (self.limits.used >= self.limits.limit or self.limited) else DONE

    def take_outcomes(self) -> list[Outcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def take_lines(self) -> list[str]:
        out, self.lines = self.lines, []
        return out

    def request_attrs(self) -> dict[str, object]:
        """The submitter's figures HTCondor puts in each request ad before matching it."""
        acct = self.cycle.accountant
        group = self.group.name if self.group is not None else hgq.ROOT
        out: dict[str, object] = {
            "SubmitterNegotiatingGroup": group, "SubmitterAutoregroup": bool(
                self.group is not None and self.group.name == hgq.ROOT and self.group.autoregroup),
            "SubmittorPrio": self.prio, "SubmitterUserPrio": self.prio,
            "SubmitterUserResourcesInUse": acct.weighted_used(self.name)}
        g = self.cycle.group_of(self.name)
        if g is not None:
            out.update({"SubmitterGroup": g.name, "SubmitterGroupResourcesInUse": acct.weighted_used(g.name),
                        "SubmitterGroupQuota": g.quota})
        return out

    def serve_text(self, request_id: str, text: str, count: int, what: str) -> None:
        """serve() a request as the schedd sent it (ads.AdError naming `what` if it does not
        parse). A text this submitter sent before in the cycle (its job asked for again in a
        later spin, still idle) is not parsed again: serving sets the negotiator's attributes
        in it afresh, and nothing else of a request is changed by serving it."""
        key = (self.name, text)
        known = self.cycle.requests_read.get(key)
        if known is None:
            known = self.cycle.requests_read[key] = _Request.of_text(text, what)
        self._serve(request_id, known, count)

    def serve(self, request_id: str, ad: classad2.ClassAd, count: int, text: str | None = None) -> None:
        """Match one resource request as often as it asks; outcomes and log lines collect in order.
        `text`: the ad's text, if it was parsed from one (its attributes are read from it)."""
        self._serve(request_id, _Request(ad, _items_of(text) if text is not None else None), count)

    def _serve(self, request_id: str, req: "_Request", count: int) -> None:
        if self.stopped:
            return
        cyc, counts, lim = self.cycle, self.cycle.counts, self.limits
        counts.requests += 1
        cluster, proc, ac = req.cluster, req.proc, req.autocluster
        counts.autoclusters.add(ac)
        if ac in self.rejected:
            return  # a later request of an autocluster that already failed this session
        if self._stopped_at_limit():
            # Before the ad is parsed: HTCondor's negotiate() stops before it asks the schedd
            # for the next request, and its schedd does not send a request of an autocluster
            # rejected in the cycle (above).
            return
        ad, base = req.ad, req.items
        added = self.request_attrs()
        for k, v in added.items():
            ad[k] = v
        items = None
        if base is not None:
            items = dict(base)
            items.update((k.lower(), ads.literal(v)) for k, v in added.items())
        limits = req.limits
        count = max(1, count)
        job = f"{int(cluster):05d}.{int(proc):05d}"
        who = f"{cluster}.{proc} {self.name} <{self.address}>"
        i = 0
        while i < count:
            # The top of negotiate()'s loop, before each job.
            if self._stopped_at_limit():
                return
            only_rank = lim.used >= lim.limit   # over it on the first spin: for startd rank only
            counts.considered += 1
            exceeded = cyc.accountant.limits_exceeded(limits) if limits else []
            found: list[Match] = []
            rejection: Rejection | None = None
            if exceeded:
                rejection = Rejection(f"concurrency limit {', '.join(exceeded)} reached")
            elif limits or cyc.policy.depth_first:
                # Each match moves a limit counter or the depth-first count: one at a time.
                result = cyc.mm.match(ad, limits=lim, submitter=self.name, only_startd_rank=only_rank, items=items)
                if isinstance(result, Match):
                    found = [result]
                else:
                    rejection = result
            else:
                # One evaluation of the slot groups serves the rest of the request.
                found, rejection = cyc.mm.match_many(ad, count - i, limits=lim, submitter=self.name,
                                                     only_startd_rank=only_rank, items=items)
                counts.considered += max(0, len(found) - 1)
            for m in found:
                self.lines.append(f"    Request {job}:  autocluster {ac} (request count {i + 1} of {count})")
                counts.matches += 1
                self.matches += 1
                cyc.charge(self, m, limits)
                if m.preempting:
                    counts.preemptions += 1
                    self.lines.append(f"      Preempting {m.preempting} (user prio={m.remote_prio:.2f}, startd rank="
                                      f"{m.old_rank:.2f}) on {m.slot_name} for {self.name} (user prio="
                                      f"{self.prio:.2f}, startd rank={m.new_rank:.2f})")
                self.lines.append(f"      Matched {who} preempting {m.preempting or 'none'} {m.startd_address} "
                                  f"{m.slot_name}")
                self.lines.append(f"      Successfully matched with {m.slot_name}")
                self.outcomes.append(Outcome(request_id, m))
                i += 1
                if cyc.policy.depth_first and not m.consumed and m.jobs_in_slot > 1:
                    # The schedd packs this many more of the autocluster into the p-slot's leftovers.
                    i += m.jobs_in_slot - 1
            if rejection is None:
                continue
            if rejection.limited and not only_rank and self.ignore_limit and lim.used >= lim.limit:
                continue   # the next job is negotiated for startd rank only, as negotiate() would
            if found:
                counts.considered += 1
            self.lines.append(f"    Request {job}:  autocluster {ac} (request count {i + 1} of {count})")
            counts.rejections += 1
            if rejection.limited:
                self.limited = True
            self.lines.append(f"      Rejected {who}: {rejection.reason}")
            self.outcomes.append(Outcome(request_id, reason=rejection.reason))
            if isinstance(ac, int) and ac >= 0:
                self.rejected.add(ac)
            if rejection.limited and not cyc.policy.consider_preemption and not cyc.policy.use_slot_weights:
                self.lines.append("    Hit submitter limit: done negotiating")
                self.stopped = True
            return

    def _stopped_at_limit(self) -> bool:
        """negotiate()'s check before each job: at its limit, the submitter stops (True),
        unless it may go on for startd-rank preemption only (ignore_limit)."""
        lim = self.limits
        if lim.used < lim.limit or self.ignore_limit:
            return False
        self.lines.append(f"    Reached submitter resource limit: {lim.used:f} ... stopping")
        self.stopped = True
        return True

    def no_more(self) -> None:
        self.lines.append("  Got NO_MORE_JOBS;  schedd has no more requests")


class _Request:
    """A resource request as serving reads it: the ad, its attribute texts (None if its text
    was not one simple line), and the job attributes a session reads of it, from those texts
    where they are plain literals (a look-up in the parsed ad costs an evaluation).

    Made from a simple one-line text (of_text), the ad is parsed when first wanted: a
    request skipped before it is matched (its autocluster rejected, its submitter at its
    limit), which HTCondor's negotiator would not have been sent, is never parsed."""

    __slots__ = ("_ad", "_text", "_what", "items", "cluster", "proc", "autocluster", "limits")

    def __init__(self, ad: classad2.ClassAd | None, items: dict[str, str] | None, text: str = "",
                 what: str = "") -> None:
        self._ad, self.items, self._text, self._what = ad, items, text, what
        self.cluster = self._value("ClusterId", 0)
        self.proc = self._value("ProcId", 0)
        self.autocluster = self._value("AutoClusterId", -1)
        limits = self._value("ConcurrencyLimits", None)
        self.limits = limits if isinstance(limits, str) else ""

    @classmethod
    def of_text(cls, text: str, what: str) -> "_Request":
        """The request as the schedd sent it; ads.AdError naming `what` if it does not parse
        (now, or when its ad is first wanted)."""
        items = _items_of(text)
        if items is None:
            return cls(ads.parse_ad(text, what), None)
        return cls(None, items, text, what)

    @property
    def ad(self) -> classad2.ClassAd:
        if self._ad is None:
            self._ad = ads.parse_ad(self._text, self._what)
        return self._ad

    def _value(self, name: str, default: object) -> object:
        items = self.items
        if items is not None:
            text = items.get(name.lower())
            if text is None:
                return default
            value = literal_value(text)
            if value is not EVALUATE:
                return value
        return ads.get(self.ad, name, default)


def _items_of(text: str) -> dict[str, str] | None:
    """A request's attributes as {lower-case name: value text} from its one-line text
    (CurrentTime left out: the negotiator sets its own), or None if the text is not that simple."""
    split = ads.split_ad_text(text)
    if split is None:
        return None
    items = {k.lower(): v for k, v in split}
    items.pop("currenttime", None)
    return items


class Cycle:
    def __init__(self, policy: CyclePolicy, accountant: Accountant, mm: Matchmaker | None,
                 submitters: list[Submitter], pool_weight: float, min_weight: float) -> None:
        self.policy = policy
        self.accountant = accountant
        self._mm = mm                 # set after the accounting, or built when first wanted
        self._build_mm: Callable[[], Matchmaker] | None = None
        self.submitters = submitters
        self.pool_weight = pool_weight
        self.min_weight = min_weight if math.isfinite(min_weight) and min_weight > 0 else 1.0
        self.counts = Counts()
        self.lines: list[str] = []
        # (submitter, request text) -> the request parsed and its attribute texts (Session.serve_text)
        self.requests_read: dict[tuple[str, str], _Request] = {}
        self.last_limits: dict[str, tuple[float, float]] = {}   # submitter -> (share, limit), first spin
        self.last_quotas: dict[str, float] = {}
        self.tree = hgq.build_tree(policy.groups) if policy.groups.enabled else None
        self.groups_by_name = {g.name.lower(): g for g in self.tree[1]} if self.tree else {}

    @property
    def mm(self) -> Matchmaker:
        """The cycle's matchmaker, built by the `later` function the first time it is wanted."""
        if self._mm is None and self._build_mm is not None:
            self._mm = self._build_mm()
            self._build_mm = None
        return self._mm  # type: ignore[return-value]

    @mm.setter
    def mm(self, mm: Matchmaker) -> None:
        self._mm, self._build_mm = mm, None

    def matchmaker_later(self, build: Callable[[], Matchmaker]) -> None:
        """Group the slots (build the matchmaker) only when a request is to be matched: a
        cycle in which every schedd answers that it has no request (its idle jobs all wait
        for claims already matched: a pool of short jobs between cycles) never needs it,
        and grouping thousands of claimed slots was a third of such a cycle's work."""
        self._mm, self._build_mm = None, build

    @property
    def built_mm(self) -> Matchmaker | None:
        """The matchmaker if it was built (None if no request ever wanted one)."""
        return self._mm

    def end(self) -> None:
        """The cycle is over: drop the `later` function, which holds the cycle's slot views
        and the cycle itself (a reference cycle: unbroken, every unmatched cycle's views
        waited for the cyclic collector, and the negotiator's peak RSS in `bench throughput`
        grew from about 120 MB to 190 - 270 MB)."""
        self._build_mm = None

    # ---- accounting ----------------------------------------------------------------------
    def group_of(self, submitter: str) -> hgq.Group | None:
        if not self.groups_by_name:
            return None
        g = hgq.group_of(submitter, self.groups_by_name)
        return None if g.name == hgq.ROOT else g

    def ancestry_of(self, submitter: str) -> list[str]:
        """The accounting groups a submitter's usage counts against (its group and those above)."""
        if not self.groups_by_name:
            return []
        g = hgq.group_of(submitter, self.groups_by_name)
        return [hgq.ROOT] if g.name == hgq.ROOT else g.ancestry()

    def charge(self, session: Session, m: Match, limits: str) -> None:
        """A match is made: the submitter pays its cost now; a preempted user stops paying."""
        if m.preempting:
            self.accountant.remove_match(m.preempting, self.ancestry_of(m.preempting), m.cost, m.preempted_limits)
        self.accountant.add_match(session.name, session.ancestry, m.cost, limits, slot=m.slot_name,
                                  at=self._mm.now if self._mm is not None else None)

    def remote_attrs(self, user: str) -> dict[str, object]:
        """RemoteUserPrio and friends for the slots a user holds (addRemoteUserPrios)."""
        out: dict[str, object] = {"RemoteUserPrio": self.accountant.effective_priority(user),
                                  "RemoteUserResourcesInUse": self.accountant.weighted_used(user)}
        g = self.group_of(user)
        if g is not None:
            out.update({"RemoteGroup": g.name, "RemoteGroupResourcesInUse": self.accountant.weighted_used(g.name),
                        "RemoteGroupQuota": g.quota})
        return out

    # ---- the cycle -------------------------------------------------------------------------
    def sessions(self) -> Generator[Session, str, None]:
        if self.tree is None:
            yield from self._group(None, self.submitters, math.inf)
        else:
            yield from self._groups()

    def _groups(self) -> Generator[Session, str, None]:
        """HTCondor's hierarchical group quotas (GroupEntry::hgq_negotiate_with_all_groups)."""
        assert self.tree is not None
        lines, gcfg, acct = self.lines, self.policy.groups, self.accountant
        root, order = self.tree
        members: dict[str, list[Submitter]] = {g.name: [] for g in order}
        lines.append(f"group quotas: assigning {len(self.submitters)} submitters to accounting groups")
        for s in self.submitters:
            g = hgq.group_of(s.name, self.groups_by_name)
            members[g.name].append(s)
            g.requested += (s.weighted_idle + s.weighted_running) if gcfg.weighted_demand else (s.idle + s.running)
        if root.autoregroup:
            for g in order[1:]:
                if g.autoregroup and members[g.name]:
                    members[root.name].extend(members[g.name])
                    lines.append(f"group quotas: autoregroup mode: appended {len(members[g.name])} submitters to "
                                 f"group {root.name} negotiation")
        lines.append(f"group quotas: assigning group quotas from {self.pool_weight:g} available"
                     f"{' weighted' if self.policy.use_slot_weights else ''} slots")
        hgq.assign_quotas(root, self.pool_weight, gcfg.allow_oversubscription)
        for g in order:
            g.usage = acct.weighted_used(g.name)
            self.last_quotas[g.name] = g.quota
            lines.append(f"group quotas: group= {g.name}  cquota= {g.config_quota:g}  static= {int(g.static)}  "
                         f"accept= {int(g.accept_surplus)}  quota= {g.quota:g}  req= {g.requested:g}  "
                         f"usage= {g.usage:g}")
        sort_expr = ads.parse_expr(gcfg.sort_expr, "GROUP_SORT_EXPR")
        preempting = self.policy.consider_preemption
        for round_ in range(1, gcfg.max_rounds + 1):
            lines.append(f"group quotas: allocation round {round_}")
            for g in order:
                g.allocated = 0.0
            surplus = hgq.fairshare(root)
            if root.autoregroup:
                root.quota = root.allocated = self.pool_weight
            accept_any = any(g.accept_surplus for g in order[1:])
            maxdelta = max((max(0.0, (g.allocated if accept_any else g.quota) - g.usage) for g in order),
                           default=0.0)
            lines.append(f"group quotas: groups= {len(order)}  requesting= "
                         f"{sum(1 for g in order if g.requested + g.allocated > 0)}  allocated= "
                         f"{sum(g.allocated for g in order):g}  surplus= {surplus:g}  maxdelta= {maxdelta:g}")
            for g in order:
                g.usage = acct.weighted_used(g.name)
                v = ads.as_float(ads.evaluate(sort_expr, classad2.ClassAd(ads.ad_text(hgq.group_sort_ad(g)))))
                g.sort_key = v if v is not None else 3.4e38
            ranked = sorted(order, key=lambda g: (g is root and root.autoregroup, g.sort_key))
            n = 0.0
            while True:
                n = min(n + gcfg.rr_rate, maxdelta) if maxdelta > 0 else 0.0
                for g in ranked:
                    if g.allocated <= 0:
                        lines.append(f"Group {g.name} - skipping, zero slots allocated")
                        continue
                    if g.usage >= g.allocated and not preempting:
                        lines.append(f"Group {g.name} - skipping, at or over quota (quota={g.quota:g}) "
                                     f"(usage={g.usage:g}) (allocation={g.allocated:g})")
                        continue
                    if not members[g.name]:
                        lines.append(f"Group {g.name} - skipping, no submitters (usage={g.usage:g})")
                        continue
                    target = max(g.allocated, g.quota)
                    delta = max(0.0, target - g.usage)
                    slots = g.usage + delta * (n / maxdelta) if delta > 0 and maxdelta > 0 else target
                    slots = min(slots, target)
                    if not self.policy.use_slot_weights:
                        slots = math.floor(slots)
                    slots = hgq.strict_enforce(g, slots, {x.name: acct.weighted_used(x.name) for x in order})
                    lines.append(f"Group {g.name} - BEGIN NEGOTIATION with a quota limit of {slots:g}")
                    yield from self._group(g, members[g.name], slots)
                    for x in order:
                        x.usage = acct.weighted_used(x.name)
                if n >= maxdelta:
                    break
            usage_total = sum(min(g.usage, g.allocated) for g in order)
            allocated_total = sum(g.allocated for g in order)
            lines.append(f"Round {round_} totals: allocated= {allocated_total:g}  usage= {usage_total:g}")
            if usage_total >= allocated_total:
                break
            for g in order:
                g.requested = g.usage if g.usage < g.allocated else g.requested + g.allocated

    def _group(self, group: hgq.Group | None, submitters: list[Submitter],
               group_quota: float) -> Generator[Session, str, None]:
        """Pie spins within one group (negotiateWithGroup)."""
        lines, acct, preempting = self.lines, self.accountant, self.policy.consider_preemption
        group_name = group.name if group is not None else None
        remaining = list(submitters)
        order: list[str] | None = None
        spin = 0
        while True:
            spin += 1
            ignore_limit = spin == 1 and preempting
            group_usage = acct.weighted_used(group_name) if group_name else 0.0
            if not ignore_limit and group_name is not None and group_usage >= group_quota:
                lines.append(f"Group {group_name} is using its quota {group_quota:g} - halting negotiation")
                break
            if not preempting:
                remaining = [s for s in remaining if s.idle > 0]   # filter_submitters_no_idle
            if not remaining:
                break
            slot_weight_total = min(self.pool_weight, group_quota)
            by_name = {s.name: s for s in remaining}
            prios = {n: acct.effective_priority(n, group_name) for n in by_name}
            usage = {n: acct.weighted_used(n) for n in by_name}
            shares = {s.name: s for s in submitter_limits(prios, usage, slot_weight_total,
                                                          group_quota if group_name is not None else None,
                                                          group_usage, preempting)}
            pie_left = sum(s.limit for s in shares.values())
            if not preempting and pie_left <= 0:
                lines.append(f"Halting negotiation: no slots available to match (preemption disabled,"
                             f"{self.mm.available} trimmed slots,pieLeft={pie_left:.3f})")
                break
            if order is None:
                lines.append("Phase 3:  Sorting submitter ads by priority ...")
                order = list(shares)   # submitter_limits gives them in negotiation order
                for s in shares.values():
                    self.last_limits[s.name] = (s.share, s.limit)
            lines.append(f"Phase 4.{spin}:  Negotiating with schedds ...")
            pie_before, count_before = pie_left, len(remaining)
            done: list[str] = []
            for name in [n for n in order if n in by_name]:
                if not ignore_limit and group_name is not None and acct.weighted_used(group_name) >= group_quota:
                    break
                sub, share = by_name[name], shares[name]
                limit = min(share.limit, pie_left)     # starved: someone took more than its share
                if sub.idle <= 0:
                    done.append(name)   # "skipped because no idle jobs"
                    continue
                lines.append(f"  Negotiating with {name} at <{sub.address}>\n    SubmitterPrio       = "
                             f"{share.priority:f}\n    submitterShare      = {share.share:f}\n"
                             f"    submitterLimit    = {limit:f}\n    submitterUsage    = {share.usage:f}")
                if spin > 1 and (limit < self.min_weight or pie_left < self.min_weight):
                    lines.append(f"  Negotiation with {name} skipped as pieLeft < minSlotWeight")
                    continue
                self.counts.order.append(f"{group_name or '<none>'}/{name}")
                ancestry = ([hgq.ROOT] if group is not None and group.name == hgq.ROOT else
                            group.ancestry() if group is not None else [])
                if group is not None and group.name == hgq.ROOT and self.groups_by_name:
                    ancestry = self.ancestry_of(name)   # an autoregrouped submitter still charges its own group
                session = Session(self, name, sub.address, group, ancestry,
                                  SpinLimits(limit, share.limit_unclaimed), ignore_limit, share.priority)
                result = yield session
                pie_left -= session.limits.used
                if result == RESUME:
                    lines.append("  This submitter hit its submitterLimit.")
                elif result == ERROR:
                    lines.append("  Error: Ignoring submitter for this cycle")
                    done.append(name)
                else:
                    lines.append(f"  Submitter {name} got all it wants; removing it.")
                    done.append(name)
            remaining = [s for s in remaining if s.name not in done]
            if not ((pie_left < pie_before - 1e-9 or len(remaining) < count_before) and remaining
                    and self.mm.available > 0):
                break


__all__ = ["Counts", "Cycle", "CyclePolicy", "DONE", "ERROR", "NO_PREEMPTION", "Outcome", "RESUME", "Session",
           "SUBMITTER_LIMIT", "Submitter"]
