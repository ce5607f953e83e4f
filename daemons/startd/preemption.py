"""Preemption on the startd's side. Pure: machine state and time in, state changes and events out.

HTCondor's startd state machine (ResState.cpp, command.cpp request_claim, Resource.cpp):
- a claimed slot offers a claim id for a preempting claim; a schedd that the
  negotiator gave that id requests the claim for its job. It is refused unless the
  slot's START (and, for a dynamic slot, WithinResourceLimits) accept the job and its
  RANK for the job is at least the current claim's (CurrentRank). Then the slot holds
  it as the preempting claim and the schedd waits for the slot;
- the current claim retires: a running job keeps running, Claimed/Retiring, until it
  ends or its MaxJobRetirementTime (counted from its start; the job's own value if
  smaller) runs out; an idle claim has nothing to retire;
- then it is vacated: Preempting/Vacating for MachineMaxVacateTime if WANT_VACATE is
  true (and KILL false), else Preempting/Killing at once; the job is evicted and goes
  back to its schedd's queue;
- the preempting claim then takes the slot (Claimed/Idle) and its schedd starts its job;
- PREEMPT true for a running job preempts its claim the same way, with no claim waiting:
  the slot is then free again;
- a preempting claim that goes away while the current one only retires lets the job
  carry on (it "unretires"), unless PREEMPT made the retirement irreversible.
Events for schedds are put in the machine's outbox: "evicted" for the preempted job,
"claim_lost" for a preempted claim that had no job, "claim_ready" when a preempting
claim has the slot.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import classad2

from daemons.core import ads
from daemons.startd import policy

if TYPE_CHECKING:
    from daemons.startd.slots import ClaimOutcome, Machine, Slot

PREEMPT_REASON = "PREEMPT expression evaluated to True"


def _change(machine: "Machine", slot: "Slot", state: str, activity: str, now: float) -> None:
    """A state change, noted in the StartLog's words."""
    if (state, activity) != (slot.state, slot.activity):
        machine.notes.append(f"{machine.name_of(slot)}: Changing state and activity: {slot.state}/{slot.activity} "
                             f"-> {state}/{activity}")
    slot.set_state(state, activity, now)


def request_preempting_claim(machine: "Machine", slot: "Slot", job_ad: classad2.ClassAd, schedd_name: str,
                             schedd_address: str, submitter: str, now: float) -> "ClaimOutcome":
    from daemons.startd.slots import Claim, ClaimOutcome

    name = machine.name_of(slot)
    current = slot.claim
    assert current is not None
    if slot.pre is not None or slot.preempt_reason:
        return ClaimOutcome(False, f"{name} is already being preempted ({slot.state}/{slot.activity})")
    job_ad["CurrentTime"] = int(now)
    if not job_ad.matches(machine.classad(slot, now)):
        return ClaimOutcome(False, f"{name}: the slot's Requirements (START) reject the job")
    rank = policy.rank(machine, slot, job_ad, now)
    if rank < current.rank:
        return ClaimOutcome(False, f"{name}: preempting claim doesn't have sufficient rank "
                                   f"({rank:g} < current {current.rank:g}), refusing")
    pre = Claim(machine.ids, machine.ids.next(slot.ix), schedd_name, schedd_address, submitter, now, now, rank=rank)
    slot.pre = pre
    slot.cap = 0
    why = (f"preempted by {submitter}: machine rank {rank:g} beats {current.rank:g}" if rank > current.rank
           else f"preempted by {submitter} for user priority")
    machine.notes.append(f"{name}: Preempting claim has correct ClaimId; State change: preempting claim based on "
                         f"{'machine rank' if rank > current.rank else 'user priority'} ({current.submitter} for "
                         f"{submitter})")
    begin(machine, slot, now, why)
    return ClaimOutcome(True, claim_id=pre.id, slot_name=name, pending=True)


def begin(machine: "Machine", slot: "Slot", now: float, reason: str) -> None:
    """The current claim on `slot` is preempted: retire, vacate, evict."""
    from daemons.startd.slots import CLAIMED, RETIRING

    c = slot.claim
    assert c is not None
    slot.preempt_reason = reason
    machine.dirty = True
    machine.preempting.add((machine, slot.short_name))
    if not c.job_id:
        end_claim(machine, slot, now)
        return
    deadline = policy.retirement_deadline(machine, slot, now)
    if deadline > now:
        slot.preempt_until = deadline
        _change(machine, slot, CLAIMED, RETIRING, now)
    else:
        vacate(machine, slot, now)


def vacate(machine: "Machine", slot: "Slot", now: float) -> None:
    from daemons.startd.slots import KILLING, PREEMPTING, VACATING

    slot.preempt_until = 0.0
    if policy.wants_vacate(machine, slot, now) and not policy.kill_now(machine, slot, now):
        t = policy.vacate_time(machine, slot, now)
        if t > 0:
            _change(machine, slot, PREEMPTING, VACATING, now)
            slot.preempt_until = now + t
            machine.dirty = True
            return
    _change(machine, slot, PREEMPTING, KILLING, now)
    end_claim(machine, slot, now)


def end_claim(machine: "Machine", slot: "Slot", now: float) -> None:
    """The preempted claim ends (its job, if any, is evicted); a waiting claim takes the slot."""
    from daemons.startd.slots import JobEvent

    c = slot.claim
    assert c is not None
    reason = slot.preempt_reason or "claim preempted"
    if c.job_id:
        machine.notes.append(f"{machine.name_of(slot)}: job {c.job_id} evicted ({reason})")
    ev = machine.release(slot, now, reason)
    if ev is None:
        # A claim without a job: its schedd must still learn that the claim is gone.
        ev = JobEvent("claim_lost", c.id, "", machine.name_of(slot), c.schedd_address, now, reason)
    machine.outbox.append(ev)
    machine.preempting.discard((machine, slot.short_name))
    take_over(machine, slot, now)


def take_over(machine: "Machine", slot: "Slot", now: float) -> None:
    """A preempting claim gets the slot once the current claim is gone."""
    from daemons.startd.slots import CLAIMED, IDLE, JobEvent

    pre = slot.pre
    if slot.claim is not None or pre is None:
        return
    slot.pre = None
    pre.last_alive = now
    slot.claim = pre
    machine.notes.append(f"{machine.name_of(slot)}: the preempting claim of {pre.submitter} now holds the slot")
    _change(machine, slot, CLAIMED, IDLE, now)
    slot.cap = machine._offer(slot)
    machine.dirty = True
    machine.outbox.append(JobEvent("claim_ready", pre.id, "", machine.name_of(slot), pre.schedd_address, now,
                                   "", slot_ad=machine.slot_ad(slot, now)))


def tick(machine: "Machine", slot: "Slot", now: float) -> float | None:
    """Move a preemption on at its deadline; the next deadline, if any."""
    from daemons.startd.slots import RETIRING, VACATING

    if slot.claim is None:
        return None
    if slot.activity == RETIRING and slot.preempt_until and now >= slot.preempt_until:
        vacate(machine, slot, now)
    if slot.activity == VACATING and slot.preempt_until and now >= slot.preempt_until:
        end_claim(machine, slot, now)
    return deadline(slot)


def deadline(slot: "Slot") -> float | None:
    from daemons.startd.slots import RETIRING, VACATING

    if slot.claim is None:
        return None
    if slot.activity in (RETIRING, VACATING) and slot.preempt_until:
        return slot.preempt_until
    return None


def after_job(machine: "Machine", slot: "Slot", now: float) -> None:
    """The job of a claim being preempted ended by itself: the claim ends now."""
    if slot.claim is not None and slot.preempt_reason:
        end_claim(machine, slot, now)


def withdraw(machine: "Machine", slot: "Slot", now: float) -> None:
    """The preempting claim went away (released, lease lost, a drain): a retiring job
    carries on unless PREEMPT made its retirement irreversible."""
    from daemons.startd.slots import BUSY, CLAIMED, RETIRING

    pre = slot.pre
    if pre is None:
        return
    slot.pre = None
    machine.dirty = True
    if slot.claim is None:
        return
    if slot.activity == RETIRING and slot.preempt_reason != PREEMPT_REASON:
        slot.preempt_until = 0.0
        slot.preempt_reason = ""
        machine.preempting.discard((machine, slot.short_name))
        _change(machine, slot, CLAIMED, BUSY, now)
    if not slot.cap and not slot.preempt_reason:
        slot.cap = machine._offer(slot)


def check_preempt(machine: "Machine", now: float) -> list["Slot"]:
    """PREEMPT for every running job not already being preempted; the slots that begin retiring."""
    from daemons.startd.slots import BUSY

    out = []
    for slot in list(machine.slots.values()):
        c = slot.claim
        if c is None or not c.job_id or slot.activity != BUSY or slot.preempt_reason:
            continue
        if policy.never(machine.cfg.policy(slot.spec).preempt):
            continue
        if policy.preempt_now(machine, slot, now):
            slot.cap = 0
            begin(machine, slot, now, PREEMPT_REASON)
            out.append(slot)
    return out


def pending_for(slot: "Slot") -> str:
    """Who waits for the slot, for the log."""
    pre = slot.pre
    return "" if pre is None else f"{pre.submitter} ({ads.literal(pre.rank)})"
