"""Slots, claims and emulated jobs of the machines one startd process emulates.

Pure: no asyncio, no gRPC. Time is passed in; claim ids are numbers printed with a
secret (daemons/startd/claimids.py). Operations return what happened (outcomes, job events) and the daemon
wiring turns that into replies, timers, collector updates and schedd notifications.

HTCondor behaviour followed here:
- slots are numbered across slot types in order (slot1, slot2, ...); a dynamic slot
  carved from slotN is slotN_K with K the lowest free sub-id;
- a partitionable slot stays Unclaimed/Idle and advertises what is left; its
  Requirements is START && (WithinResourceLimits), a static slot's is START;
- an unclaimed slot whose IS_OWNER is true is in the Owner state and takes no claim;
- a dynamic slot's size is, in order of precedence: what the negotiator decided
  (negotiator-side splitting with a consumption policy, seed 001), the slot's
  Consumption<Res> expressions, or the job's request after MODIFY_REQUEST_EXPR_*
  (cpus to 1, memory to 128 MB, disk to 1024 KB by default); unless fractional cpus
  are allowed it gets at least 1 cpu and 1 MB (Resource.cpp create_dslot), taken
  from the partitionable slot like the rest;
- with CLAIM_PARTITIONABLE_LEFTOVERS the claim reply carries the leftover p-slot ad
  and a claim id the schedd may use at once for another job;
- custom machine resources (MACHINE_RESOURCE_<name>) are advertised as <name>,
  TotalSlot<name>, Total<name> and Detected<name>, requested as Request<name>, and
  checked by WithinResourceLimits;
- a claimed slot offers a claim id for a preempting claim; preemption (by the
  negotiator's match or by PREEMPT) is in daemons/startd/preemption.py.
Draining is in daemons/startd/drain.py; the slot ad in daemons/startd/slotad.py; a dynamic
slot's size in daemons/startd/sizing.py; the index of a process's machines and claims in
daemons/startd/machines.py.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import classad2

from daemons.core import adpack, ads
from daemons.startd import policy, sizing
from daemons.startd.claimids import IX_MASK, IX_STEP, ClaimIds, SlotIndex
from daemons.startd.config import STANDARD, Resources, SlotTypeSpec, StartdConfig
from daemons.startd.evalads import EvalAds
from daemons.startd.slotad import eval_parts, slot_ad, slot_ad_and_text, slot_ad_text, within_resource_limits

if TYPE_CHECKING:
    from daemons.startd.drain import DrainState

# Slot states and activities, as HTCondor names them (condor_state.cpp).
OWNER, UNCLAIMED, MATCHED, CLAIMED, PREEMPTING, DRAINED = (
    "Owner", "Unclaimed", "Matched", "Claimed", "Preempting", "Drained")
IDLE, BUSY, RETIRING, VACATING, KILLING = "Idle", "Busy", "Retiring", "Vacating", "Killing"


class SlotKind(Enum):
    STATIC = "Static"
    PARTITIONABLE = "Partitionable"
    DYNAMIC = "Dynamic"


# A running job's attributes its slot's ad repeats (Resource.cpp publishes them from the job).
JOB_ATTRS_ADVERTISED = ("AccountingGroup", "ConcurrencyLimits")


@dataclass(slots=True)
class Claim:
    ids: ClaimIds
    seq: int                    # its claim id's number (claimids.py): `id` prints it
    schedd_name: str
    schedd_address: str
    submitter: str
    created: float
    last_alive: float
    # The running job's id ("" none) as `job_id` reads and sets it: an int of its cluster and
    # proc (32 bytes, where the text took 56), or the text when they are not both small numbers.
    job: int | str = 0
    job_start: float = 0.0
    job_end: float = 0.0
    rank: float = 0.0           # the slot's RANK for the claim's job: CurrentRank (PreemptingRank while waiting)
    # The running job's ad, packed (core/adpack.py: 60 - 110 bytes, where a parsed classad2 ad
    # costs 5 KB), parsed again only when a policy expression needs it as TARGET. What
    # every slot ad needs from it is taken out once.
    job_zdict: bytes = b""     # the dictionary it was packed against (shared by many claims)
    job_packed: bytes = b""
    job_advertised: tuple[tuple[str, str], ...] = ()   # JOB_ATTRS_ADVERTISED the job sets to a string
    job_has_mjrt: bool = False                         # the job sets its own MaxJobRetirementTime
    # The running job's JobLeaseDuration (0.0: none). HTCondor's startd takes the claim's
    # lease from the job ad at activation (Claim::cacheJobInfo), so a running job outlives a
    # silent schedd for its job's lease (2400 s by default), not for a few keepalives.
    job_lease: float = 0.0

    def __post_init__(self) -> None:
        # A few schedds and submitters hold thousands of claims, and each RPC brings its own
        # copy of their names: one string each for all the claims (about 200 bytes a claim).
        self.schedd_name = sys.intern(self.schedd_name)
        self.schedd_address = sys.intern(self.schedd_address)
        self.submitter = sys.intern(self.submitter)

    @property
    def id(self) -> str:
        return self.ids.text(self.seq)

    @property
    def job_id(self) -> str:
        j = self.job
        if j.__class__ is str:
            return j    # type: ignore[return-value]
        return f"{j >> 32}.{j & 0xFFFFFFFF}" if j else ""

    @job_id.setter
    def job_id(self, text: str) -> None:
        cluster, dot, proc = text.partition(".")
        # Only what prints back the same: ASCII digits, no leading zeros, under 2**32 each.
        if (dot and text.isascii() and cluster.isdigit() and proc.isdigit() and len(cluster) < 10
                and len(proc) < 10 and cluster[0] != "0" and (proc == "0" or proc[0] != "0")):
            self.job = (int(cluster) << 32) | int(proc)
        else:
            self.job = text   # anything else, as it came ("" for none)

    @property
    def job_ad(self) -> classad2.ClassAd | None:
        """The running job's ad (a fresh parse: changes to it are not kept)."""
        return adpack.unpack(self.job_zdict, self.job_packed) if self.job_packed else None

    def hold_job(self, ad: classad2.ClassAd, packer: adpack.AdPacker) -> None:
        self.job_zdict, self.job_packed = packer.pack(ad)
        self.job_advertised = tuple((attr, v) for attr in JOB_ATTRS_ADVERTISED
                                    if isinstance(v := ads.get(ad, attr), str))
        self.job_has_mjrt = "MaxJobRetirementTime" in ad
        self.job_lease = ads.as_lease(ads.get(ad, "JobLeaseDuration"))

    def drop_job(self) -> None:
        self.job_zdict = self.job_packed = b""
        self.job_advertised, self.job_has_mjrt, self.job_lease = (), False, 0.0

    def lease_s(self, claim_lease_s: float) -> float:
        """How long the claim lives without a keepalive: its job's lease while a job runs,
        else the startd's claim lease. (HTCondor's startd keeps the job's lease after the
        job; its alives to the schedd then find out soon whether the claim is still wanted.
        This startd sends none, so an idle claim goes back to the keepalive lease.)"""
        return self.job_lease or claim_lease_s

    def parsed_job(self) -> classad2.ClassAd | None:
        """job_ad, for an evaluation that may not need it (policy.evaluate calls it only then)."""
        return self.job_ad


# Static and dynamic slots have no children; one empty set, never added to, serves them all.
NO_CHILDREN: frozenset[int] = frozenset()
# A machine with no slot touched since its last update (most of them, most of the time):
# one empty tuple for all, a list of its own only while it holds names (a list: a set of a
# machine's eight slot names takes 728 bytes, and a burst of claims touches every machine).
NOTHING_TOUCHED: tuple[str, ...] = ()
# Slot.offer's value for "the number after the claim's" (ClaimIds.next_pair): a claimed
# slot's offer for a preempting claim, without an int of its own (32 bytes a busy slot).
OFFER_AFTER_CLAIM = -1


@dataclass(slots=True)
class Slot:
    # Sixteen fields: 160 bytes an object (pymalloc rounds to 16), where nineteen took 192.
    # What follows from other fields is a property: its kind (from its type and sub id), its
    # index in the startd's SlotIndex (from the ids it holds).
    slot_id: int
    sub_id: int            # 0 unless dynamic
    spec: SlotTypeSpec
    size: Resources        # what the slot was given
    free: Resources        # a p-slot's remainder; otherwise equal to size
    state: str
    activity: str
    entered_state: float
    entered_activity: float
    offer: int = 0         # `cap` as stored: a number, 0 (none) or OFFER_AFTER_CLAIM
    claim: Claim | None = None
    children: set[int] | frozenset[int] = NO_CHILDREN   # a p-slot's dynamic slots (sub ids): its own set
    pre: Claim | None = None          # a preempting claim waiting for the current one to end (HTCondor's r_pre)
    # A preemption's current phase ends then: retirement (Retiring) until the claim is
    # vacated, the vacate (Vacating) until the job is evicted. 0.0: none.
    preempt_until: float = 0.0
    preempt_reason: str = ""          # why the current claim is being preempted ("" if it is not)
    # The machine the slot belongs to, so that the claim id index can hold the slot itself
    # (a (machine, name) tuple for every id cost 56 bytes; a busy slot has two ids).
    machine: "Machine | None" = field(default=None, repr=False, compare=False)

    @property
    def cap(self) -> int:
        """The number of the claim id a match carries: an unclaimed slot's capability, a
        claimed slot's offer for a preempting claim; 0: none. `capability` prints it."""
        n = self.offer
        if n == OFFER_AFTER_CLAIM:
            c = self.claim
            return c.seq + IX_STEP if c is not None else 0
        return n

    @cap.setter
    def cap(self, n: int) -> None:
        self.offer = n

    @property
    def kind(self) -> SlotKind:
        if self.sub_id:
            return SlotKind.DYNAMIC
        return SlotKind.PARTITIONABLE if self.spec.partitionable else SlotKind.STATIC

    @property
    def ix(self) -> int:
        """Its place in the startd's SlotIndex, which every id it holds carries: a live slot
        always holds one (an unclaimed slot its capability, a claimed one its claim)."""
        n = self.cap or (self.claim.seq if self.claim is not None else 0) or (
            self.pre.seq if self.pre is not None else 0)
        assert n, "a slot that holds no claim id has no index"
        return n & IX_MASK

    @property
    def type_id(self) -> int:
        return self.spec.type_id

    @property
    def capability(self) -> str:
        return self.machine.ids.text(self.cap) if self.cap and self.machine is not None else ""

    @property
    def short_name(self) -> str:
        # Interned: the dictionaries that hold it (a machine's slots, its touched names) share
        # one string per name, and every machine's slotN is the same name.
        return sys.intern(f"slot{self.slot_id}_{self.sub_id}" if self.kind is SlotKind.DYNAMIC
                          else f"slot{self.slot_id}")

    def set_state(self, state: str, activity: str, now: float) -> None:
        state_changed = state != self.state
        if state_changed:
            self.state = state
            self.entered_state = now
        if state_changed or activity != self.activity:
            self.activity = activity
            self.entered_activity = now


@dataclass(frozen=True)
class JobEvent:
    """Something the schedd that holds the claim must hear about."""
    kind: str              # "exited" | "evicted" | "claim_lost" | "claim_ready" (a preempting claim took the slot)
    claim_id: str
    job_id: str
    slot_name: str
    schedd_address: str
    pool_time: float
    reason: str = ""
    job_start: float = 0.0
    slot_ad: dict[str, Any] | None = None   # claim_ready: the slot as now claimed


@dataclass
class ClaimOutcome:
    ok: bool
    reason: str = ""
    claim_id: str = ""
    slot_name: str = ""
    slot_ad: dict[str, Any] | None = None
    leftover_ad: dict[str, Any] | None = None
    leftover_claim_id: str = ""
    slot_ad_text: str = ""       # the two ads printed (the reply's), from the same build
    leftover_ad_text: str = ""
    pending: bool = False      # a preempting claim: the slot is the schedd's once its claim_ready event comes


_SLEEP_ARG = re.compile(r"^\s*(\d+(?:\.\d+)?)([smhd]?)\b")
_SLEEP_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def job_duration(job_ad: classad2.ClassAd) -> float:
    """How long an emulated job holds its slot, in pool seconds.

    A job's `Duration` attribute wins; otherwise `/bin/sleep N` runs N seconds
    (with sleep's s/m/h/d suffixes); anything else takes no time.
    """
    d = ads.as_number(ads.get(job_ad, "Duration"))
    if d is not None:
        return max(0.0, d)
    cmd = ads.get(job_ad, "Cmd", "")
    if isinstance(cmd, str) and cmd.rsplit("/", 1)[-1] == "sleep":
        args = ads.get(job_ad, "Args")
        if not isinstance(args, str):
            args = ads.get(job_ad, "Arguments", "")
        m = _SLEEP_ARG.match(args if isinstance(args, str) else "")
        if m:
            return float(m.group(1)) * _SLEEP_UNITS[m.group(2)]
    return 0.0


@dataclass
class Shared:
    outbox: list[JobEvent] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    preempting: set = field(default_factory=set)
    packer: adpack.AdPacker = field(default_factory=adpack.AdPacker)
    eval_ads: EvalAds = field(default_factory=EvalAds)


class Machine:
    """One emulated execute machine and its slots."""

    # A startd holds one per 8 or so slots: no instance dictionary.
    __slots__ = ("host", "cfg", "address", "ids", "index", "slots", "deleted", "dirty", "touched", "started",
                 "drain", "total_drains", "wrl", "outbox", "notes", "preempting", "packer", "eval_ads")

    def __init__(self, host: str, cfg: StartdConfig, address: str, now: float, ids: ClaimIds,
                 index: "SlotIndex[Slot] | None" = None,
                 shared: "Shared | None" = None) -> None:
        self.host = host
        self.cfg = cfg
        self.address = address
        self.ids = ids
        # the slots by the index their claim ids' numbers carry, shared by a startd's machines
        self.index: SlotIndex[Slot] = index if index is not None else SlotIndex()
        self.slots: dict[str, Slot] = {}
        self.deleted: list[str] = []   # names of deleted dynamic slots not yet invalidated
        # What the collector has not seen: every slot's ad (`dirty`: a change of the machine,
        # a drain, a preemption) or only these slots' (`touched`: a claim, an activation, a
        # job's end change that slot and, for a dynamic slot made or deleted, its parent;
        # HTCondor's startd too updates only the resource that changed).
        self.dirty = True
        self.touched: list[str] | tuple[str, ...] = NOTHING_TOUCHED
        self.started = now
        self.drain: DrainState | None = None
        self.total_drains = 0
        self.wrl = within_resource_limits(cfg.custom_resources)
        # Shared by a startd's machines, so the daemon looks at one place whatever their number:
        # events that state changes produced for schedds (preemption), StartLog lines of
        # state changes the daemon did not ask for itself, and the slots being preempted.
        shared = shared if shared is not None else Shared()
        self.outbox: list[JobEvent] = shared.outbox
        self.notes: list[str] = shared.notes
        self.preempting: set[tuple["Machine", str]] = shared.preempting
        self.packer = shared.packer       # running jobs' ads, packed against one dictionary
        self.eval_ads = shared.eval_ads   # parsed ads of the slots evaluated last (evalads.py)
        slot_id = 0
        for t in cfg.slot_types:
            for _ in range(t.count):
                slot_id += 1
                s = Slot(slot_id, 0, t, t.size, t.size, UNCLAIMED, IDLE, now, now,
                         children=set() if t.partitionable else NO_CHILDREN, machine=self)
                s.cap = ids.next(self.index.add(s))
                self.slots[s.short_name] = s
        self.refresh_owner(now)

    def name_of(self, slot: Slot) -> str:
        return f"{slot.short_name}@{self.host}"

    # ---- ads ---------------------------------------------------------------
    def slot_ad(self, s: Slot, now: float, *, for_eval: bool = False) -> dict[str, Any]:
        return slot_ad(self, s, now, for_eval=for_eval)

    def classad(self, s: Slot, now: float) -> classad2.ClassAd:
        """The slot's ad as policy expressions see it (MY), parsed: not to be changed, nor
        held across the evaluation of another slot, which brings it up to date for that
        slot if they share a shape (evalads.py)."""
        return self.eval_ads.slot_ad(id(s), *eval_parts(self, s, now))

    def evaluate(self, expr: str, s: Slot, job_ad: classad2.ClassAd | None, now: float) -> Any:
        """An expression with the slot as MY and the job as TARGET."""
        slot_ad = self.classad(s, now)
        return ads.evaluate(ads.parse_expr(expr), slot_ad, job_ad) if job_ad is not None else \
            ads.evaluate(ads.parse_expr(expr), slot_ad)

    def refresh_owner(self, now: float) -> bool:
        """Unclaimed slots whose IS_OWNER is true go to Owner/Idle, and back when it is false
        (ResState.cpp: "IS_OWNER is TRUE"). True if a state changed."""
        changed = False
        for s in self.slots.values():
            if s.state not in (UNCLAIMED, OWNER) or s.kind is SlotKind.DYNAMIC or self.drain is not None:
                continue
            if policy.never(self.cfg.policy(s.spec).is_owner) and s.state == UNCLAIMED:
                continue
            want = OWNER if policy.is_owner(self, s, now) else UNCLAIMED
            if want != s.state:
                s.set_state(want, IDLE, now)
                changed = True
        if changed:
            self.dirty = True
        return changed

    # ---- claims ------------------------------------------------------------
    def request_claim(self, slot: Slot, job_ad: classad2.ClassAd, schedd_name: str, schedd_address: str,
                      submitter: str, now: float, decided: dict[str, int] | None = None,
                      preempting: bool = False) -> ClaimOutcome:
        """Claim `slot` for a job; `decided` is what a negotiator-side split consumes;
        `preempting`: the id was the claimed slot's offer for a preempting claim."""
        if self.drain is not None:
            return ClaimOutcome(False, f"{self.host} is draining ({self.drain.reason})")
        if preempting and slot.state == CLAIMED:
            from daemons.startd.preemption import request_preempting_claim
            return request_preempting_claim(self, slot, job_ad, schedd_name, schedd_address, submitter, now)
        if slot.kind is SlotKind.DYNAMIC:
            return ClaimOutcome(False, f"{self.name_of(slot)} is a dynamic slot and is already claimed")
        if slot.state != UNCLAIMED:
            return ClaimOutcome(False, f"{self.name_of(slot)} is {slot.state}/{slot.activity}, not Unclaimed")
        job_ad["CurrentTime"] = int(now)
        slot_ad = self.classad(slot, now)
        if decided:
            # The negotiator already fitted the split to its copy of the slot; the sizes are
            # checked against what is free below. START must still accept the job.
            accepted = ads.is_true(ads.evaluate(slot_ad.lookup("Start"), slot_ad, job_ad))
        elif slot.spec.consumption_policy:
            accepted = sizing.cp_accepts(job_ad, slot_ad, slot.spec.consumption)
        else:
            # classad2's a.matches(b) evaluates b's Requirements against a: this asks whether
            # the slot's Requirements (START, WithinResourceLimits) accept the job.
            accepted = job_ad.matches(slot_ad)
        if not accepted:
            return ClaimOutcome(False, f"{self.name_of(slot)}: the slot's Requirements (START) reject the job")
        rank = policy.rank(self, slot, job_ad, now)
        if slot.kind is SlotKind.STATIC:
            claim = Claim(self.ids, self.ids.next_pair(slot.ix), schedd_name, schedd_address, submitter, now, now,
                          rank=rank)
            slot.claim = claim
            slot.cap = OFFER_AFTER_CLAIM
            slot.set_state(CLAIMED, IDLE, now)
            self.touch(slot)
            a, text = slot_ad_and_text(self, slot, now)
            return ClaimOutcome(True, claim_id=claim.id, slot_name=self.name_of(slot), slot_ad=a, slot_ad_text=text)
        if decided:
            size = sizing.decided_size(self.cfg, decided)
        elif slot.spec.consumption_policy:
            size = sizing.consumed(slot, job_ad, slot_ad)
        else:
            size = sizing.dynamic_size(self.cfg, slot, job_ad, slot_ad)
        if isinstance(size, str):
            return ClaimOutcome(False, f"{self.name_of(slot)}: {size}")
        size = sizing.with_floors(size)
        if not size.fits(slot.free):
            want = f"{size.cpus} cpus/{size.memory} MB/{size.disk} KB" + "".join(f"/{v} {k}" for k, v in size.custom)
            left = f"{slot.free.cpus}/{slot.free.memory}/{slot.free.disk}" + "".join(
                f"/{v}" for _, v in slot.free.custom)
            return ClaimOutcome(False, f"{self.name_of(slot)}: insufficient resources (want {want}, {left} left)")
        sub_id = 1
        while sub_id in slot.children:
            sub_id += 1
        d = Slot(slot.slot_id, sub_id, slot.spec, size, size, CLAIMED, IDLE, now, now, machine=self)
        ix = self.index.add(d)
        claim = Claim(self.ids, self.ids.next_pair(ix), schedd_name, schedd_address, submitter, now, now, rank=rank)
        d.claim = claim
        d.cap = OFFER_AFTER_CLAIM
        slot.children.add(sub_id)
        slot.free = slot.free - size
        self.slots[d.short_name] = d
        if self.name_of(d) in self.deleted:
            self.deleted.remove(self.name_of(d))
        self.touch(slot, d)
        a, text = slot_ad_and_text(self, d, now)
        out = ClaimOutcome(True, claim_id=claim.id, slot_name=self.name_of(d), slot_ad=a, slot_ad_text=text)
        if self.cfg.claim_partitionable_leftovers and slot.free.cpus > 0 and slot.free.memory > 0:
            out.leftover_ad, out.leftover_ad_text = slot_ad_and_text(self, slot, now)
            out.leftover_claim_id = slot.capability
        return out

    def _offer(self, slot: Slot) -> int:
        """A fresh claim id (its number) that a claimed slot offers for a preempting claim."""
        return self.ids.next(slot.ix)

    def activate(self, slot: Slot, job_ad: classad2.ClassAd, now: float) -> tuple[bool, str, float]:
        c = slot.claim
        if c is None:
            return False, f"{self.name_of(slot)} has no claim", 0.0
        if self.drain is not None:
            return False, f"{self.host} is draining ({self.drain.reason}): no new jobs", 0.0
        if slot.activity == BUSY:
            return False, f"{self.name_of(slot)} is already running job {c.job_id}", 0.0
        if slot.pre is not None or slot.state != CLAIMED:
            return False, f"{self.name_of(slot)} is being preempted ({slot.state}/{slot.activity}): no new jobs", 0.0
        # command.cpp activate_claim: the slot's Requirements (START, WithinResourceLimits)
        # must accept this job too; a claim reused for another job is checked again here.
        job_ad["CurrentTime"] = int(now)
        slot_ad = self.classad(slot, now)
        if slot.spec.consumption_policy and slot.kind is SlotKind.DYNAMIC:
            # A dynamic slot of a consumption policy: what the policy consumes for this job
            # (a Request<Res> it does not set counting 0) must fit the slot
            # (cp_sufficient_assets), and START must accept the job.
            size = sizing.consumed(slot, job_ad, slot_ad)
            fits = size.fits(slot.size) if isinstance(size, Resources) else size == sizing.CONSUMES_NOTHING
            accepted = fits and ads.is_true(ads.evaluate(slot_ad.lookup("Start"), slot_ad, job_ad))
        else:
            accepted = job_ad.matches(slot_ad)
        if not accepted:
            return False, f"{self.name_of(slot)}: Slot does not match job (the slot's Requirements reject it)", 0.0
        cluster = ads.get(job_ad, "ClusterId")
        proc = ads.get(job_ad, "ProcId")
        c.job_id = f"{cluster}.{proc}"
        c.hold_job(job_ad, self.packer)
        c.job_start = now
        c.job_end = now + job_duration(job_ad)
        c.last_alive = now
        c.rank = policy.rank(self, slot, job_ad, now)
        slot.set_state(CLAIMED, BUSY, now)
        self.touch(slot)
        return True, "", c.job_end

    def finish_job(self, slot: Slot, now: float) -> JobEvent | None:
        """The job on `slot` reached its end: the claim stays, the slot goes idle."""
        c = slot.claim
        if c is None or slot.activity not in (BUSY, RETIRING):
            return None
        # The job exited at its declared end; a timer that fired late on a busy host only
        # delays the news, not the exit (RemoteWallClockTime stays the declared duration).
        exit_time = c.job_end if 0 < c.job_end <= now else now
        ev = JobEvent("exited", c.id, c.job_id, self.name_of(slot), c.schedd_address, exit_time,
                      job_start=c.job_start)
        self._clear_job(slot, now)
        return ev

    def _clear_job(self, slot: Slot, now: float) -> None:
        c = slot.claim
        if c is not None:
            c.job_id = ""
            c.drop_job()
            c.job_start = c.job_end = 0.0
        slot.set_state(CLAIMED, IDLE, now)
        self.touch(slot)

    def release(self, slot: Slot, now: float, reason: str, *, lost: bool = False) -> JobEvent | None:
        """End the claim on `slot`; a running job is evicted. Returns the event to report, if any.
        A preempting claim waiting for the slot takes it (preemption.take_over reports that)."""
        c = slot.claim
        if c is None:
            return None
        ix = slot.ix      # (read while the slot still holds its ids)
        event = None
        if lost:
            event = JobEvent("claim_lost", c.id, c.job_id, self.name_of(slot), c.schedd_address, now, reason,
                             c.job_start)
        elif slot.activity in (BUSY, RETIRING, VACATING, KILLING):
            event = JobEvent("evicted", c.id, c.job_id, self.name_of(slot), c.schedd_address, now, reason,
                             c.job_start)
        slot.claim = None
        slot.preempt_until = 0.0
        slot.preempt_reason = ""
        if slot.pre is not None:
            self.dirty = True
            return event   # the slot stays; preemption.take_over gives it to the preempting claim
        slot.cap = 0
        if slot.kind is SlotKind.DYNAMIC:
            parent = self.slots[f"slot{slot.slot_id}"]
            parent.free = parent.free + slot.size
            parent.children.discard(slot.sub_id)
            del self.slots[slot.short_name]
            self.index.remove(ix)
            self.deleted.append(self.name_of(slot))
            self.touch(parent)
        else:
            self.touch(slot)
            slot.cap = self.ids.next(ix)
            slot.set_state(DRAINED if self.drain is not None else UNCLAIMED,
                           RETIRING if self.drain is not None else IDLE, now)
            self.refresh_owner(now)
        return event

    def running(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.claim is not None and s.claim.job_id]

    def all_ads(self, now: float, *, as_text: bool = False) -> list[Any]:
        """Every slot's ad: attribute dicts, or (`as_text`) their texts."""
        return self._ads(list(self.slots.values()), now, as_text)

    def _ads(self, slots: list[Slot], now: float, as_text: bool = False) -> list[Any]:
        # The machine's drain forecast is the same in each of its slots' ads: made once.
        from daemons.startd.drain import expected_draining
        forecast = expected_draining(self, now) if slots else None
        build = slot_ad_text if as_text else slot_ad
        return [build(self, s, now, forecast=forecast) for s in slots]

    def touch(self, *slots: Slot) -> None:
        if self.touched is NOTHING_TOUCHED:
            self.touched = []
        for s in slots:
            if s.short_name not in self.touched:
                self.touched.append(s.short_name)   # type: ignore[union-attr]

    def sent(self) -> None:
        """Its ads have been built for the collector: no slot is due any more."""
        self.dirty = False
        self.touched = NOTHING_TOUCHED

    @property
    def due(self) -> bool:
        """Has an ad the collector has not seen."""
        return self.dirty or bool(self.touched) or bool(self.deleted)

    def due_ads(self, now: float, *, as_text: bool = False) -> list[Any]:
        """The ads of what changed since the last update (every slot's if the machine is dirty)."""
        if self.dirty:
            return self.all_ads(now, as_text=as_text)
        return self._ads([self.slots[n] for n in sorted(self.touched) if n in self.slots], now, as_text)


__all__ = ["Machine", "Slot", "SlotKind", "Claim", "ClaimOutcome", "JobEvent", "job_duration",
           "STANDARD"]
