"""HTCondor's defrag daemon as a pure decision module: slot ads and time in, actions out.

Followed from HTCondor's src/defrag/defrag.cpp (Defrag::config, poll, poll_cancel,
drain_this, queryDrainingCost):

- A machine is known by its partitionable slot: every query adds HTCondor's
  BASE_SLOT_CONSTRAINT `PartitionableSlot && Offline =!= True`, and a slot ad names
  its machine by the part of Name after '@' (slotNameToDaemonName). Machines without
  a partitionable slot are never drained, counted or cancelled.
- "Drained by me": DrainReason is undefined or equals "Defrag <name>"; only such
  machines count as draining or whole, and only their drains are cancelled, so a
  drain started by hand or by another daemon is left alone.
- Whole machines: DEFRAG_WHOLE_MACHINE_EXPR && base && by me.
- Each poll first cancels the drains of draining p-slots that satisfy
  DEFRAG_CANCEL_REQUIREMENTS (default: the whole-machine expression), each machine
  once; then, unless a limit stops it (rate 0, DEFRAG_MAX_CONCURRENT_DRAINING or
  DEFRAG_MAX_WHOLE_MACHINES reached: checked before draining, not per drain, exactly
  as HTCondor does), takes the p-slots that are not draining and satisfy
  DEFRAG_REQUIREMENTS, shuffles them, orders them by DEFRAG_RANK (highest first; a rank
  that does not evaluate to a number counts as 0, as EvalFloat leaves it), skips
  machines cancelled this poll and whole machines, and drains until the poll's count.
- A drain asks the startd to check that its expected completion and badput have not
  grown: `ExpectedMachine<Sched>DrainingCompletion <= completion + 1200 &&
  ExpectedMachine<Sched>DrainingBadput <= 1.25 × badput + 1200`, graceful for the
  graceful schedule, Quick otherwise; resume on completion; start expression
  DEFRAG_DRAINING_START_EXPR; reason "Defrag <name>".
- Drained-machine arrivals (DrainedMachines, MeanDrainedArrival, ...SD) come from the
  machines newly whole plus those no longer draining since the last poll;
  AvgDrainingBadput / AvgDrainingUnclaimed from the startds' TotalMachineDrainingBadput
  / ...UnclaimedTime over their age (LastHeardFrom − DaemonStartTime) per cpu.

Where this differs, and why:
- Drains per poll: HTCondor takes floor(rate × interval / 3600) each poll and pays the
  lost fraction out at hour and day boundaries (prorated); here the fraction is carried
  to the next poll (`drains_this_poll`), which gives the same long-run rate without
  tying drains to wall-clock hours (pool time may run 1000× faster). Only the fraction
  is carried: a poll that a limit stops does not bank its whole drains, as in HTCondor.
- Arrivals are the union of the two sets, not the sum of their sizes (HTCondor counts
  a machine that both became whole and stopped draining twice); the first poll after
  start-up only takes stock (HTCondor would count every whole machine as arrived), and
  DrainedMachines counts every arrival after it; the mean arrival rate, as in HTCondor,
  only counts arrivals after the first one (the first has no interval to measure).
- A candidate's machine is tried once per poll even if it has several p-slots.
- When the slot ad does not advertise the expected completion and badput, no check
  expression is sent (HTCondor would send `... <= 1200`, which a startd that does
  advertise them would refuse).
- Ties in DEFRAG_RANK keep the shuffled order (a stable sort after a seeded shuffle),
  so a run is reproducible from its seed.
"""
from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import classad2

from daemons.core import ads
from daemons.defrag.config import DefragConfig

BASE_SLOT_CONSTRAINT = "PartitionableSlot && Offline =!= True"
# defrag.cpp drain_this(): hard-coded tolerances of the draining check expression.
BADPUT_GROWTH_TOLERANCE = 1.25
NEGLIGIBLE_BADPUT = 1200
NEGLIGIBLE_DEADLINE_SLIPPAGE = 1200
RECENT_LOG_LENGTH = 10   # LOG_LENGTH: entries in RecentDrainsList / RecentCancelsList
# floor(rate + 0.00001) in Defrag::config(): a rate of 0.99999999 per poll is one drain.
_EPSILON = 0.00001


def drains_this_poll(per_poll: float, carry: float) -> tuple[int, float]:
    """(drains allowed this poll, fraction carried to the next) for a fractional rate.

    `per_poll` = DEFRAG_DRAINING_MACHINES_PER_HOUR × DEFRAG_INTERVAL / 3600.
    """
    budget = max(0.0, per_poll) + carry
    n = int(math.floor(budget + _EPSILON))
    return n, max(0.0, budget - n)


def machine_of(slot_name: str) -> str:
    """slotNameToDaemonName: "slot1@host" -> "host"; a name without '@' is the machine."""
    return slot_name.split("@", 1)[1] if "@" in slot_name else slot_name


def drain_reason(defrag_name: str) -> str:
    return f"Defrag {defrag_name}"


@dataclass(frozen=True)
class DrainAction:
    machine: str          # HTCondor's machine name (from the slot's Name)
    slot: str             # the p-slot ad the decision was made on
    target: str           # the ad's Machine: what DrainJobsRequest.machine names
    address: str          # the startd's address, host:port
    how: str
    check_expr: str
    start_expr: str
    reason: str
    rank: float
    expected_completion: int | None
    expected_badput: int | None


@dataclass(frozen=True)
class CancelAction:
    machine: str
    slot: str
    target: str
    address: str


@dataclass(frozen=True)
class PollPlan:
    """What one poll decided. The daemon cancels, then drains candidates in order until
    `num_to_drain` drains have been accepted (a refused drain moves on to the next)."""
    now: float
    num_to_drain: int
    budget: float                      # drains per poll plus the carried fraction, before flooring
    draining: tuple[str, ...]          # machines draining (by me)
    whole: tuple[str, ...]             # whole machines (by me)
    newly_drained: tuple[str, ...]
    cancels: tuple[CancelAction, ...]
    candidates: tuple[DrainAction, ...]
    why_not: str = ""                  # why no drain is attempted, in HTCondor's words; "" if drains may go
    avg_draining_badput: float = 0.0
    avg_draining_unclaimed: float = 0.0


@dataclass(frozen=True)
class RecentEntry:
    when: int
    who: str
    what: str = ""


@dataclass
class DefragState:
    """What the defrag daemon remembers between polls (LastPoll and the carry survive restarts)."""
    last_poll: float = 0.0
    carry: float = 0.0
    polls: int = 0
    prev_whole: frozenset[str] = frozenset()
    prev_draining: frozenset[str] = frozenset()
    machines_draining: int = 0
    machines_draining_peak: int = 0
    whole_machines: int = 0
    whole_machines_peak: int = 0
    drained_machines: int = 0           # every arrival of a drained machine since start-up
    arrivals_counted: int = 0           # arrivals that count towards the mean rate
    last_arrival: float = 0.0
    arrival_sum: float = 0.0            # Σ arrivals × seconds since the previous arrival
    arrival_mean_squared: float = 0.0
    mean_drained_arrival: float = 0.0   # machines per second
    mean_drained_arrival_sd: float = 0.0
    drain_successes: int = 0
    drain_failures: int = 0
    cancelled_drains: int = 0
    cancel_failures: int = 0
    avg_draining_badput: float = 0.0
    avg_draining_unclaimed: float = 0.0
    recent_drains: deque[RecentEntry] = field(default_factory=lambda: deque(maxlen=RECENT_LOG_LENGTH))
    recent_cancels: deque[RecentEntry] = field(default_factory=lambda: deque(maxlen=RECENT_LOG_LENGTH))


def _compile(text: str, what: str) -> classad2.ExprTree:
    return ads.parse_expr(text, what)


def _number(ad: classad2.ClassAd, attr: str) -> int | None:
    v = ads.as_number(ads.get(ad, attr))
    return None if v is None else int(v)


class DefragPolicy:
    """One defrag daemon's decisions. `rng` shuffles candidates (seed it for reproducible runs)."""

    def __init__(self, cfg: DefragConfig, name: str, rng: random.Random,
                 state: DefragState | None = None) -> None:
        self.cfg = cfg
        self.name = name
        self.rng = rng
        self.state = state or DefragState()
        self.reason = drain_reason(name)
        by_me = f"(DrainReason is undefined || DrainReason == {classad2.quote(self.reason)})"
        draining = f"{BASE_SLOT_CONSTRAINT} && Draining && {by_me}"
        self._draining = _compile(draining, "<Machines currently draining>")
        self._whole = _compile(f"({cfg.whole_machine_expr}) && {BASE_SLOT_CONSTRAINT} && {by_me}",
                               "DEFRAG_WHOLE_MACHINE_EXPR")
        self._cancel = (_compile(f"{draining} && ({cfg.cancel_requirements})", "DEFRAG_CANCEL_REQUIREMENTS")
                        if cfg.cancel_requirements else None)
        candidates = f"{BASE_SLOT_CONSTRAINT} && Draining =!= true"
        if cfg.requirements:
            candidates += f" && ({cfg.requirements})"
        self._candidates = _compile(candidates, "DEFRAG_REQUIREMENTS")
        self._rank = _compile(cfg.rank, "DEFRAG_RANK") if cfg.rank else None

    # ---- one poll -------------------------------------------------------------------
    def poll(self, slot_ads: Iterable[classad2.ClassAd], now: float) -> PollPlan:
        cfg, st = self.cfg, self.state
        slot_ads = list(slot_ads)
        st.polls += 1
        st.last_poll = now
        num_to_drain, st.carry = drains_this_poll(cfg.drains_per_poll, st.carry)
        budget = num_to_drain + st.carry

        draining = self._machines(slot_ads, self._draining)
        whole = self._machines(slot_ads, self._whole)
        st.machines_draining, st.whole_machines = len(draining), len(whole)
        st.machines_draining_peak = max(st.machines_draining_peak, len(draining))
        st.whole_machines_peak = max(st.whole_machines_peak, len(whole))
        # The first poll only sees how things are: nothing is "newly" whole yet.
        newly = (whole - st.prev_whole) | (st.prev_draining - draining) if st.polls > 1 else set()
        self._arrivals(len(newly), now)
        st.prev_whole, st.prev_draining = frozenset(whole), frozenset(draining)
        st.avg_draining_badput, st.avg_draining_unclaimed = draining_cost(slot_ads)

        cancels = self._cancels(slot_ads)
        cancelled = {c.machine for c in cancels}
        why_not = self._why_not(num_to_drain, budget, len(draining), len(whole))
        candidates: tuple[DrainAction, ...] = ()
        if not why_not:
            candidates = tuple(self._candidates_in_order(slot_ads, now, cancelled, whole))
        return PollPlan(now, num_to_drain, budget, tuple(sorted(draining)), tuple(sorted(whole)),
                        tuple(sorted(newly)), cancels, candidates, why_not,
                        st.avg_draining_badput, st.avg_draining_unclaimed)

    def _why_not(self, num_to_drain: int, budget: float, num_draining: int, num_whole: int) -> str:
        cfg = self.cfg
        if num_to_drain <= 0:
            return (f"Doing nothing, because number to drain in next {cfg.interval_s}s is calculated to be "
                    f"{budget:.3f}.")
        if math.ceil(cfg.draining_machines_per_hour) <= 0:
            return f"Doing nothing, because DEFRAG_DRAINING_MACHINES_PER_HOUR={cfg.draining_machines_per_hour:f}"
        if cfg.max_concurrent_draining == 0:
            return "Doing nothing, because DEFRAG_MAX_CONCURRENT_DRAINING=0"
        if cfg.max_whole_machines == 0:
            return "Doing nothing, because DEFRAG_MAX_WHOLE_MACHINES=0"
        if 0 <= cfg.max_concurrent_draining <= num_draining:
            return (f"Doing nothing, because DEFRAG_MAX_CONCURRENT_DRAINING={cfg.max_concurrent_draining} and "
                    f"there are {num_draining} draining machines.")
        if 0 <= cfg.max_whole_machines <= num_whole:
            return (f"Doing nothing, because DEFRAG_MAX_WHOLE_MACHINES={cfg.max_whole_machines} and there are "
                    f"{num_whole} whole machines.")
        return ""

    def _machines(self, slot_ads: list[classad2.ClassAd], constraint: classad2.ExprTree) -> set[str]:
        return {machine_of(str(ads.get(a, "Name", ""))) for a in slot_ads
                if ads.is_true(ads.evaluate(constraint, a))}

    def _ordered(self, matching: list[classad2.ClassAd]) -> list[tuple[float, classad2.ClassAd]]:
        """startdAds.Shuffle(); startdAds.Sort(StartdSortFunc): highest DEFRAG_RANK first."""
        self.rng.shuffle(matching)
        ranked = [(self.rank_of(a), a) for a in matching]
        ranked.sort(key=lambda r: -r[0])
        return ranked

    def rank_of(self, ad: classad2.ClassAd) -> float:
        if self._rank is None:
            return 0.0
        v = ads.evaluate(self._rank, ad)
        if isinstance(v, bool):
            return float(v)
        n = ads.as_number(v)
        return 0.0 if n is None else n

    def _cancels(self, slot_ads: list[classad2.ClassAd]) -> tuple[CancelAction, ...]:
        if self._cancel is None:
            return ()
        matching = [a for a in slot_ads if ads.is_true(ads.evaluate(self._cancel, a))]
        out: list[CancelAction] = []
        seen: set[str] = set()
        for _, a in self._ordered(matching):
            name = str(ads.get(a, "Name", ""))
            machine = machine_of(name)
            if machine in seen:
                continue
            seen.add(machine)
            out.append(CancelAction(machine, name, _target(a, machine), _address(a)))
        return tuple(out)

    def _candidates_in_order(self, slot_ads: list[classad2.ClassAd], now: float, cancelled: set[str],
                             whole: set[str]) -> list[DrainAction]:
        matching = [a for a in slot_ads if ads.is_true(ads.evaluate(self._candidates, a))]
        out: list[DrainAction] = []
        seen: set[str] = set()
        for rank, a in self._ordered(matching):
            name = str(ads.get(a, "Name", ""))
            machine = machine_of(name)
            if machine in cancelled or machine in seen or machine in whole:
                continue
            seen.add(machine)
            out.append(self._drain_action(a, name, machine, rank))
        return out

    def _drain_action(self, a: classad2.ClassAd, name: str, machine: str, rank: float) -> DrainAction:
        cfg = self.cfg
        kind = "Graceful" if cfg.draining_schedule == "graceful" else "Quick"
        completion_attr = f"ExpectedMachine{kind}DrainingCompletion"
        badput_attr = f"ExpectedMachine{kind}DrainingBadput"
        completion, badput = _number(a, completion_attr), _number(a, badput_attr)
        check = ""
        if completion is not None and badput is not None:
            check = (f"{completion_attr} <= {completion + NEGLIGIBLE_DEADLINE_SLIPPAGE} && "
                     f"{badput_attr} <= {int(BADPUT_GROWTH_TOLERANCE * badput) + NEGLIGIBLE_BADPUT}")
        return DrainAction(machine, name, _target(a, machine), _address(a), cfg.draining_schedule, check,
                           cfg.draining_start_expr, self.reason, rank, completion, badput)

    # ---- statistics ---------------------------------------------------------------
    def _arrivals(self, newly_drained: int, now: float) -> None:
        """Defrag::poll's arrival rate of drained machines (per second; HTCondor logs per hour)."""
        st = self.state
        if newly_drained <= 0:
            return
        st.drained_machines += newly_drained
        arrival_rate = 0.0
        if st.last_arrival > 0:
            st.arrivals_counted += newly_drained
            arrival_time = max(1.0, now - st.last_arrival)
            st.arrival_sum += newly_drained * arrival_time
            arrival_rate = newly_drained / arrival_time
        st.last_arrival = now
        if st.arrival_sum > 0:
            mean = st.arrivals_counted / st.arrival_sum
            if arrival_rate:
                st.arrival_mean_squared += (arrival_rate - mean) ** 2
            st.mean_drained_arrival = mean
            st.mean_drained_arrival_sd = math.sqrt(st.arrival_mean_squared / st.arrivals_counted)

    def record_drain(self, action: DrainAction, ok: bool, now: float) -> None:
        st = self.state
        if ok:
            st.drain_successes += 1
        else:
            st.drain_failures += 1
        # defrag_log.record_drain happens whether or not the startd accepted.
        st.recent_drains.append(RecentEntry(int(now), action.slot, action.how))

    def record_cancel(self, action: CancelAction, ok: bool, now: float) -> None:
        st = self.state
        if ok:
            st.cancelled_drains += 1
        else:
            st.cancel_failures += 1
        st.recent_cancels.append(RecentEntry(int(now), action.target))

    def ad_attrs(self) -> dict[str, Any]:
        """The defrag daemon's published statistics, by HTCondor's names (defrag_stats.cpp)
        plus htcpool's CancelledDrains, CancelFailures, DefragPolls, DrainRemainder."""
        st = self.state
        return {
            "MachinesDraining": st.machines_draining,
            "MachinesDrainingPeak": st.machines_draining_peak,
            "WholeMachines": st.whole_machines,
            "WholeMachinesPeak": st.whole_machines_peak,
            "DrainedMachines": st.drained_machines,
            "MeanDrainedArrival": st.mean_drained_arrival,
            "MeanDrainedArrivalSD": st.mean_drained_arrival_sd,
            "AvgDrainingBadput": st.avg_draining_badput,
            "AvgDrainingUnclaimed": st.avg_draining_unclaimed,
            "DrainSuccesses": st.drain_successes,
            "DrainFailures": st.drain_failures,
            "CancelledDrains": st.cancelled_drains,
            "CancelFailures": st.cancel_failures,
            "DefragPolls": st.polls,
            "LastPoll": int(st.last_poll),
            "DrainRemainder": st.carry,
            "RecentDrainsList": ads.Expr(_records(st.recent_drains, with_what=True)),
            "RecentCancelsList": ads.Expr(_records(st.recent_cancels, with_what=False)),
        }


def _records(entries: Iterable[RecentEntry], *, with_what: bool) -> str:
    """DefragLog::write_to_ad: newest first, as a ClassAd list of records."""
    items = []
    for e in reversed(list(entries)):
        fields = [f"when = {e.when}", f"who = {classad2.quote(e.who)}"]
        if with_what:
            fields.append(f"what = {classad2.quote(e.what)}")
        items.append("[ " + "; ".join(fields) + " ]")
    return "{ " + ", ".join(items) + " }"


def _target(ad: classad2.ClassAd, machine: str) -> str:
    m = ads.get(ad, "Machine")
    return m if isinstance(m, str) and m else machine


def _address(ad: classad2.ClassAd) -> str:
    for attr in ("StartdIpAddr", "MyAddress"):
        v = ads.get(ad, attr)
        if isinstance(v, str) and v:
            return v.strip().strip("<>").split("?", 1)[0]
    return ""


def draining_cost(slot_ads: Iterable[classad2.ClassAd]) -> tuple[float, float]:
    """Defrag::queryDrainingCost: pool-average fraction of cpu time lost to draining badput
    and left unclaimed by draining, from one ad per machine (SlotID 1)."""
    badput = unclaimed = 0.0
    total_cpus = 0
    for a in slot_ads:
        if ads.get(a, "SlotID") != 1:
            continue
        b, u = _number(a, "TotalMachineDrainingBadput"), _number(a, "TotalMachineDrainingUnclaimedTime")
        if b is None and u is None:
            continue
        start, heard = _number(a, "DaemonStartTime") or 0, _number(a, "LastHeardFrom") or 0
        age = heard - start
        if heard == 0 or start == 0 or age <= 0:
            continue
        badput += (b or 0) / age
        unclaimed += (u or 0) / age
        total_cpus += _number(a, "TotalCpus") or 0
    if total_cpus > 0:
        return badput / total_cpus, unclaimed / total_cpus
    return badput, unclaimed
