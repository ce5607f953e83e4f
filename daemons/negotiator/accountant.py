"""The negotiator's accountant: user priorities and usage. Pure; time is passed in.

HTCondor's Accountant.cpp, followed closely:
- each cycle priorities age toward the resources in use:
  AgingFactor = 0.5 ** (TimePassed / PRIORITY_HALFLIFE);
  Priority = Priority * AgingFactor + WeightedResourcesUsed * (1 - AgingFactor),
  never below 0.5; WeightedAccumulatedUsage grows by WeightedResourcesUsed * TimePassed;
- the effective priority is the real priority times the priority factor
  (DEFAULT_PRIO_FACTOR, 1000; never below 1; GROUP_PRIO_FACTOR_<group> for a group's
  users);
- usage is rebuilt each cycle from the slots that are Claimed or Preempting, charged to
  the slot's RemoteOwner (the submitter) and to its accounting group and every group
  above it; within a cycle each new match adds its cost;
- concurrency-limit usage comes from the ConcurrencyLimits of the jobs the slots run,
  plus the limits of the cycle's own matches;
- a match stays charged until its slot's ad has been heard from since the match: in
  HTCondor the startd enters the Matched state the moment the negotiator tells it of the
  match, and CheckClaimedOrMatched keeps the record; here the claim reaches the
  collector only once the schedd has claimed the slot and the startd re-advertised it,
  which at an accelerated TIME_SCALE can be after the next cycle has started (the
  submitter would then look idle and get its share again).
State (priorities, factors, accumulated usage) is saved as JSON by the daemon.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

MIN_PRIORITY = 0.5
MIN_PRIORITY_FACTOR = 1.0


@dataclass
class Customer:
    name: str
    priority: float = MIN_PRIORITY            # real priority
    factor: float | None = None               # None: the default for this customer
    resources_used: float = 0.0               # slots in use
    weighted_used: float = 0.0                # slot weight in use
    accumulated_usage: float = 0.0            # weighted slot-seconds
    begin_usage_time: float = 0.0
    last_usage_time: float = 0.0
    is_group: bool = False


@dataclass(slots=True)   # one per match (not frozen, as candidates.Match)
class PendingMatch:
    """A match whose slot ad did not show it yet when it was made."""
    slot: str                   # the matched slot's Name (a partitionable slot's, for a split)
    submitter: str
    groups: tuple[str, ...]
    cost: float
    limits: str
    at: float                   # pool time of the match


@dataclass(frozen=True)
class AccountantConfig:
    halflife_s: float = 86400.0               # PRIORITY_HALFLIFE
    default_factor: float = 1000.0            # DEFAULT_PRIO_FACTOR
    use_slot_weights: bool = True             # NEGOTIATOR_USE_SLOT_WEIGHTS
    group_factors: tuple[tuple[str, float], ...] = ()   # GROUP_PRIO_FACTOR_<group>
    concurrency_default: float = 2308032.0    # CONCURRENCY_LIMIT_DEFAULT
    concurrency_limits: tuple[tuple[str, float], ...] = ()  # <NAME>_LIMIT, lower-cased names
    concurrency_scoped_defaults: tuple[tuple[str, float], ...] = ()  # CONCURRENCY_LIMIT_DEFAULT_<scope>


def parse_limits(text: str) -> list[tuple[str, float]]:
    """'sw_license:2, db' -> [('sw_license', 2.0), ('db', 1.0)] (names lower-cased, as HTCondor)."""
    out = []
    for token in text.replace(" ", ",").split(","):
        token = token.strip().lower()
        if not token:
            continue
        name, _, amount = token.partition(":")
        try:
            inc = float(amount) if amount else 1.0
        except ValueError:
            inc = 1.0
        out.append((name, inc))
    return out


@dataclass
class Accountant:
    cfg: AccountantConfig = field(default_factory=AccountantConfig)
    customers: dict[str, Customer] = field(default_factory=dict)
    last_update: float | None = None
    limit_usage: dict[str, float] = field(default_factory=dict)
    pending: list[PendingMatch] = field(default_factory=list)

    # ---- customers -----------------------------------------------------------
    def customer(self, name: str, is_group: bool = False) -> Customer:
        c = self.customers.get(name)
        if c is None:
            c = Customer(name, is_group=is_group)
            self.customers[name] = c
        return c

    def factor(self, name: str, group: str | None = None) -> float:
        c = self.customers.get(name)
        if c is not None and c.factor is not None:
            return c.factor
        if group:
            for g, f in self.cfg.group_factors:
                if g.lower() == group.lower() and f > 0:
                    return max(MIN_PRIORITY_FACTOR, f)
        return max(MIN_PRIORITY_FACTOR, self.cfg.default_factor)

    def real_priority(self, name: str) -> float:
        c = self.customers.get(name)
        return max(MIN_PRIORITY, c.priority) if c is not None else MIN_PRIORITY

    def effective_priority(self, name: str, group: str | None = None) -> float:
        return self.real_priority(name) * self.factor(name, group)

    def weighted_used(self, name: str) -> float:
        c = self.customers.get(name)
        return c.weighted_used if c is not None else 0.0

    def set_factor(self, name: str, factor: float) -> float:
        f = max(MIN_PRIORITY_FACTOR, factor)
        self.customer(name).factor = f
        return f

    def set_priority(self, name: str, priority: float) -> float:
        p = max(MIN_PRIORITY, priority)
        self.customer(name).priority = p
        return p

    # ---- each cycle ------------------------------------------------------------
    def update_priorities(self, now: float) -> None:
        """Age every priority toward the usage charged since the last update."""
        if self.last_update is None:
            self.last_update = now
            return
        passed = now - self.last_update
        if passed <= 0:
            return
        aging = math.pow(0.5, passed / self.cfg.halflife_s)
        for c in list(self.customers.values()):
            c.priority = max(MIN_PRIORITY, c.priority * aging + c.weighted_used * (1 - aging))
            c.accumulated_usage += c.weighted_used * passed
            if c.accumulated_usage > 0 and c.begin_usage_time == 0:
                c.begin_usage_time = now
            if c.weighted_used > 0:
                c.last_usage_time = now
            # Forget a customer with nothing to remember (HTCondor deletes the record).
            if (c.priority <= MIN_PRIORITY and c.weighted_used == 0 and c.accumulated_usage == 0
                    and c.factor is None):
                del self.customers[c.name]
        self.last_update = now

    def slot_weight(self, weight: float | None) -> float:
        if not self.cfg.use_slot_weights:
            return 1.0
        return weight if weight is not None and weight >= 0 else 1.0

    def check_matches(self, claimed: Iterable[tuple[str, list[str], float, str]],
                      heard: Mapping[str, float] | None = None) -> None:
        """Rebuild usage from claimed slots: (submitter, its groups up to the root, weight,
        limits); then charge again each earlier match whose slot's ad, by `heard` (slot
        Name -> LastHeardFrom), has not been updated since the match. A match whose slot
        has been heard from since, or is gone, is forgotten: its claim, if it was made, is
        among `claimed`."""
        for c in self.customers.values():
            c.resources_used = 0.0
            c.weighted_used = 0.0
        self.limit_usage = {}
        for submitter, groups, weight, limits in claimed:
            self._charge(submitter, groups, self.slot_weight(weight))
            self._add_limits(limits)
        kept = []
        for p in self.pending if heard is not None else ():
            last = heard.get(p.slot)
            # LastHeardFrom is whole seconds: an ad heard in the match's own second counts as
            # newer (at worst a match goes uncharged for a cycle, never charged twice).
            if last is not None and last < math.floor(p.at):
                kept.append(p)
                self._charge(p.submitter, list(p.groups), p.cost)
                self._add_limits(p.limits)
        self.pending = kept

    def _add_limits(self, limits: str) -> None:
        for name, inc in parse_limits(limits):
            self.limit_usage[name] = self.limit_usage.get(name, 0.0) + inc

    def _charge(self, submitter: str, groups: list[str], cost: float, slots: float = 1.0) -> None:
        c = self.customer(submitter)
        c.resources_used += slots
        c.weighted_used += cost
        for g in groups:
            gc = self.customer(g, is_group=True)
            gc.resources_used += slots
            gc.weighted_used += cost

    def add_match(self, submitter: str, groups: list[str], cost: float, limits: str = "",
                  slot: str = "", at: float | None = None) -> None:
        """A match made this cycle: charged at once, so the cycle's limits see it, and (with
        its slot and time) until the slot's ad shows it."""
        self._charge(submitter, groups, cost)
        if limits:
            self._add_limits(limits)
        if slot and at is not None:
            self.pending.append(PendingMatch(slot, submitter, tuple(groups), cost, limits, at))

    def remove_match(self, submitter: str, groups: list[str], cost: float, limits: str = "") -> None:
        """A claim preempted this cycle (Accountant::AddMatch removes the slot's old match):
        its user and groups stop being charged for it at once."""
        self._charge(submitter, groups, -cost, -1.0)
        for c in [self.customers.get(submitter)] + [self.customers.get(g) for g in groups]:
            if c is not None:
                c.weighted_used = max(0.0, c.weighted_used)
                c.resources_used = max(0.0, c.resources_used)
        for name, inc in parse_limits(limits):
            self.limit_usage[name] = max(0.0, self.limit_usage.get(name, 0.0) - inc)

    # ---- concurrency limits -------------------------------------------------------
    def limit_max(self, name: str) -> float:
        """<NAME>_LIMIT, else CONCURRENCY_LIMIT_DEFAULT_<scope> (the part before the last dot), else the default."""
        for n, v in self.cfg.concurrency_limits:
            if n == name:
                return v
        default = self.cfg.concurrency_default
        if "." in name:
            scope = name.rsplit(".", 1)[0]
            for n, v in self.cfg.concurrency_scoped_defaults:
                if n == scope:
                    default = v
        return default

    def limits_exceeded(self, limits: str) -> list[str]:
        """The limits a job with these ConcurrencyLimits would push past their maximum."""
        return [name for name, inc in parse_limits(limits)
                if self.limit_usage.get(name, 0.0) + inc > self.limit_max(name)]

    # ---- persistence ------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {"last_update": self.last_update,
                "customers": [asdict(c) for c in self.customers.values()]}

    @classmethod
    def from_state(cls, cfg: AccountantConfig, state: dict[str, Any]) -> "Accountant":
        a = cls(cfg)
        a.last_update = state.get("last_update")
        for c in state.get("customers", []):
            # Usage as last known: the first update charges the time the negotiator was
            # down with it, as HTCondor's log does; the next cycle's slots then replace it.
            cust = Customer(**{k: v for k, v in c.items() if k in Customer.__dataclass_fields__})
            a.customers[cust.name] = cust
        return a
