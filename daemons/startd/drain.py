"""Draining an emulated machine, like condor_drain. Pure: machine state and time in, actions out.

- graceful: running jobs may run until MaxJobRetirementTime (counted from the job's
  start, evaluated with the slot as MY and the job as TARGET); a job that would run
  longer is then vacated, which takes MachineMaxVacateTime. No new jobs start.
- quick: every job is vacated now (MachineMaxVacateTime, then gone).
- fast: every job is killed now.
While draining, the slots' START is the drain's start expression (default False);
unclaimed slots are Drained/Retiring, claimed ones Claimed/Retiring. Once no claim is
left the machine is drained (Drained/Idle), and with resume_on_completion it goes
back into service by itself. Cancelling a drain restores START and lets retiring
jobs run on.

Every slot ad advertises what a drain started now would cost, as HTCondor's startd
does: ExpectedMachineGracefulDrainingCompletion / ...Badput and the Quick pair.
Badput is the work a drain throws away: the cpu-seconds already run by jobs that
would be evicted (the defrag daemon's default DEFRAG_RANK drains the cheapest first).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemons.core import ads
from daemons.startd import policy

if TYPE_CHECKING:
    from daemons.startd.slots import Machine, Slot

HOWS = ("graceful", "quick", "fast")
_ids = itertools.count(1)


class DrainError(Exception):
    """A drain that cannot be started or cancelled; `code` says why (for the RPC status)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code   # "not_found" | "already" | "not_draining" | "bad_expression" | "check_failed"


@dataclass
class DrainState:
    request_id: str
    how: str
    resume_on_completion: bool
    reason: str
    start_expr: str
    started: float
    drained_at: float | None = None


@dataclass(frozen=True)
class Eviction:
    """Evict the job on a slot at a pool time (the daemon sets the timer)."""
    slot: str
    at: float


def retirement_deadline(machine: "Machine", slot: "Slot", now: float) -> float:
    """When the job on `slot` must stop under a graceful drain (job start + MaxJobRetirementTime)."""
    return policy.retirement_deadline(machine, slot, now)


def vacate_time(machine: "Machine", slot: "Slot", now: float) -> float:
    return policy.vacate_time(machine, slot, now)


def expected_draining(machine: "Machine", now: float) -> dict[str, int]:
    """ExpectedMachine{Graceful,Quick}Draining{Completion,Badput} for the machine's slot ads."""
    graceful_done = quick_done = now
    graceful_bad = quick_bad = 0.0
    for s in machine.running():
        c = s.claim
        assert c is not None
        cpus = s.size.cpus
        vacate = vacate_time(machine, s, now)
        deadline = retirement_deadline(machine, s, now)
        if c.job_end <= deadline:
            graceful_done = max(graceful_done, c.job_end)
        else:
            evict = max(now, deadline)
            graceful_done = max(graceful_done, evict + vacate)
            graceful_bad += cpus * (evict - c.job_start)
        quick_done = max(quick_done, now + vacate)
        quick_bad += cpus * (now - c.job_start)
    return {"ExpectedMachineGracefulDrainingCompletion": int(graceful_done),
            "ExpectedMachineGracefulDrainingBadput": int(graceful_bad),
            "ExpectedMachineQuickDrainingCompletion": int(quick_done),
            "ExpectedMachineQuickDrainingBadput": int(quick_bad)}


def drain_attrs(machine: "Machine", now: float) -> dict:
    d = machine.drain
    assert d is not None
    out = {"Draining": True, "DrainReason": d.reason, "DrainingRequestId": d.request_id,
           "LastDrainStartTime": int(d.started), "DrainHow": d.how}
    if d.drained_at is not None:
        out["LastDrainCompletionTime"] = int(d.drained_at)
    return out


def start_drain(machine: "Machine", how: str, resume_on_completion: bool, check_expr: str, start_expr: str,
                reason: str, request_id: str, now: float) -> tuple[DrainState, list[Eviction]]:
    """Begin draining; refuse (DrainError, nothing changed) when already draining or the check fails."""
    from daemons.startd.slots import CLAIMED, DRAINED, PREEMPTING, RETIRING, VACATING

    if how not in HOWS:
        raise DrainError("bad_expression", f"how = {how!r}: one of {', '.join(HOWS)}")
    if machine.drain is not None:
        raise DrainError("already", f"{machine.host} is already draining (request {machine.drain.request_id}, "
                                    f"{machine.drain.reason})")
    if start_expr.strip():
        try:
            start_expr = ads.expr_text(start_expr, "start expression")
        except ads.AdError as e:
            raise DrainError("bad_expression", str(e)) from None
    if check_expr.strip():
        try:
            check = ads.parse_expr(check_expr, "check expression")
        except ads.AdError as e:
            raise DrainError("bad_expression", str(e)) from None
        for s in machine.slots.values():
            # The check sees each slot's advertised ad, drain forecast included (the
            # defrag daemon's check bounds ExpectedMachineGracefulDraining*).
            advertised = ads.parse_ad(ads.ad_text(machine.slot_ad(s, now)), machine.name_of(s))
            if not ads.is_true(ads.evaluate(check, advertised)):
                raise DrainError("check_failed", f"check expression {check_expr.strip()!r} is not true for "
                                                 f"{machine.name_of(s)}")
    state = DrainState(request_id or f"{machine.host}#{int(now)}#{next(_ids)}", how, resume_on_completion,
                       reason or "by command", start_expr, now)
    from daemons.startd.preemption import withdraw
    from daemons.startd.slots import JobEvent
    for s in list(machine.slots.values()):
        if s.pre is not None:
            # A claim waiting to preempt will not get the slot: its schedd gets its job back.
            pre = s.pre
            withdraw(machine, s, now)
            machine.outbox.append(JobEvent("claim_lost", pre.id, "", machine.name_of(s), pre.schedd_address, now,
                                           f"{machine.host} is draining"))
    machine.drain = state
    machine.total_drains += 1
    machine.dirty = True
    evictions: list[Eviction] = []
    for s in list(machine.slots.values()):
        c = s.claim
        if c is None:
            s.set_state(DRAINED, RETIRING, now)
            continue
        if not c.job_id:
            continue  # an idle claim: the daemon releases it (it may start nothing now)
        if how == "fast":
            evictions.append(Eviction(s.short_name, now))
        elif how == "quick":
            s.set_state(PREEMPTING, VACATING, now)
            evictions.append(Eviction(s.short_name, now + vacate_time(machine, s, now)))
        else:
            s.set_state(CLAIMED, RETIRING, now)
            deadline = retirement_deadline(machine, s, now)
            if c.job_end > deadline:
                evictions.append(Eviction(s.short_name, max(now, deadline) + vacate_time(machine, s, now)))
    return state, evictions


def idle_claims(machine: "Machine") -> list["Slot"]:
    """Claims without a job on a draining machine: they may start nothing, so they go."""
    return [s for s in machine.slots.values() if s.claim is not None and not s.claim.job_id]


def check_drained(machine: "Machine", now: float) -> bool:
    """Mark the machine drained once no claim is left; True if it just became drained."""
    from daemons.startd.slots import DRAINED, IDLE

    d = machine.drain
    if d is None or d.drained_at is not None:
        return False
    if any(s.claim is not None for s in machine.slots.values()):
        return False
    d.drained_at = now
    for s in machine.slots.values():
        s.set_state(DRAINED, IDLE, now)
    machine.dirty = True
    return True


def cancel_drain(machine: "Machine", request_id: str, now: float) -> DrainState:
    """End the drain: START is restored and retiring jobs run on."""
    from daemons.startd.slots import BUSY, CLAIMED, IDLE, UNCLAIMED

    d = machine.drain
    if d is None:
        raise DrainError("not_draining", f"{machine.host} is not draining")
    if request_id and request_id != d.request_id:
        raise DrainError("not_draining", f"{machine.host} is draining for request {d.request_id}, not {request_id}")
    machine.drain = None
    machine.dirty = True
    for s in machine.slots.values():
        c = s.claim
        if c is None:
            s.set_state(UNCLAIMED, IDLE, now)
        elif c.job_id and s.activity != "Vacating":
            s.set_state(CLAIMED, BUSY, now)
    return d
