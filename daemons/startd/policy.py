"""A slot's policy expressions, evaluated as HTCondor's startd evaluates them. Pure.

Each slot type has its own policy (SLOT_TYPE_<N>_START, _RANK, _IS_OWNER, _PREEMPT,
_WANT_VACATE, _KILL, _MAXJOBRETIREMENTTIME, _MachineMaxVacateTime, ...; config.SlotPolicy).
Expressions are evaluated with the slot as MY and the job, if any, as TARGET:
- IS_OWNER without a job: true puts an unclaimed slot in the Owner state (ResState.cpp);
- RANK with the job: the claim's rank, advertised as CurrentRank; a boolean rank counts
  1.0 or 0.0 (EvalFloat);
- MaxJobRetirementTime with the job: how long a job may run on after its claim is
  preempted, counted from its start; the job's own MaxJobRetirementTime wins when it is
  smaller (Resource.cpp evalRetirementRemaining);
- PREEMPT with the job: true preempts the claim (after retirement); WANT_VACATE decides
  between vacating (MachineMaxVacateTime) and killing; KILL ends a vacate early.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable

import classad2

from daemons.core import ads
from daemons.startd.config import SlotPolicy

if TYPE_CHECKING:
    from daemons.startd.slots import Machine, Slot

_CONSTANTS: dict[str, Any] = {}
_UNKNOWN = object()


def policy_of(machine: "Machine", slot: "Slot") -> SlotPolicy:
    return machine.cfg.policy(slot.spec)


# Once HTCondor's configuration is loaded (as every daemon loads it) the ClassAd library
# uses old ClassAd semantics, where CurrentTime is built in: it is no longer among an
# expression's references, yet its value changes.
_CURRENT_TIME = re.compile(r"\bCurrentTime\b", re.IGNORECASE)


def _constant(text: str) -> Any:
    """The value of an expression that refers to nothing ("0", "10 * 60", "False"), else _UNKNOWN."""
    v = _CONSTANTS.get(text, None)
    if v is None and text not in _CONSTANTS:
        tree = ads.parse_expr(text)
        # classad2 reports [''] for an expression that refers to nothing.
        refs = [r for r in classad2.ClassAd().externalRefs(tree) if r]
        # A function call may depend on the time (time()) even without references.
        v = ads.evaluate(tree) if not refs and "(" not in text and not _CURRENT_TIME.search(text) else _UNKNOWN
        _CONSTANTS[text] = v
    return v


# The job as TARGET: its ad, or a function that parses it (a running job's ad is kept as
# text, and a constant expression never needs it).
JobAd = classad2.ClassAd | Callable[[], classad2.ClassAd | None] | None


def evaluate(machine: "Machine", text: str, slot: "Slot", job_ad: JobAd, now: float) -> Any:
    """An expression with the slot as MY and the job (if any) as TARGET; a constant costs a look-up."""
    v = _constant(text.strip())
    if v is not _UNKNOWN:
        return v
    if job_ad is not None and not isinstance(job_ad, classad2.ClassAd):
        job_ad = job_ad()
    return machine.evaluate(text, slot, job_ad, now)


def number(machine: "Machine", text: str, slot: "Slot", job_ad: JobAd, now: float) -> float:
    """A non-negative number of seconds; anything else counts 0."""
    v = ads.as_float(evaluate(machine, text, slot, job_ad, now))
    return max(0.0, v) if v is not None else 0.0


def truth(machine: "Machine", text: str, slot: "Slot", job_ad: JobAd, now: float) -> bool:
    return ads.is_true(evaluate(machine, text, slot, job_ad, now))


def is_owner(machine: "Machine", slot: "Slot", now: float) -> bool:
    """IS_OWNER, evaluated against the slot alone (there is no job to look at)."""
    return truth(machine, policy_of(machine, slot).is_owner, slot, None, now)


def rank(machine: "Machine", slot: "Slot", job_ad: classad2.ClassAd, now: float) -> float:
    """RANK of the slot for a job; undefined counts 0."""
    v = ads.as_float(evaluate(machine, policy_of(machine, slot).rank, slot, job_ad, now))
    # Every claim keeps its rank: the usual 0 is this module's one float, not a new one each.
    return v if v is not None and (v != 0.0 or math.copysign(1.0, v) < 0) else 0.0


def retirement_time(machine: "Machine", slot: "Slot", now: float) -> float:
    """MaxJobRetirementTime for the job on the slot: the machine's, or the job's if smaller."""
    c = slot.claim
    if c is None or not c.job_id:
        return 0.0
    mjrt = number(machine, policy_of(machine, slot).max_job_retirement_time, slot, c.parsed_job, now)
    job_ad = c.job_ad if c.job_has_mjrt else None
    if job_ad is not None:
        own = ads.as_float(ads.evaluate(job_ad.lookup("MaxJobRetirementTime"), job_ad,
                                        machine.classad(slot, now)))
        if own is not None and own < mjrt:
            mjrt = max(0.0, own)
    return mjrt


def retirement_deadline(machine: "Machine", slot: "Slot", now: float) -> float:
    """When the job on the slot must stop if its claim is preempted (job start + retirement time)."""
    c = slot.claim
    assert c is not None
    return c.job_start + retirement_time(machine, slot, now)


def vacate_time(machine: "Machine", slot: "Slot", now: float) -> float:
    c = slot.claim
    return number(machine, policy_of(machine, slot).machine_max_vacate_time, slot, c.parsed_job if c else None,
                  now)


def wants_vacate(machine: "Machine", slot: "Slot", now: float) -> bool:
    """WANT_VACATE; without a job it is true (Resource.cpp wants_vacate)."""
    c = slot.claim
    if c is None or not c.job_id:
        return True
    return truth(machine, policy_of(machine, slot).want_vacate, slot, c.parsed_job, now)


def kill_now(machine: "Machine", slot: "Slot", now: float) -> bool:
    c = slot.claim
    return truth(machine, policy_of(machine, slot).kill, slot, c.parsed_job if c else None, now)


def preempt_now(machine: "Machine", slot: "Slot", now: float) -> bool:
    """PREEMPT for the running job."""
    c = slot.claim
    if c is None or not c.job_id:
        return False
    return truth(machine, policy_of(machine, slot).preempt, slot, c.parsed_job, now)


def never(text: str) -> bool:
    """True for an expression that is false whatever the slot and job (the default PREEMPT and IS_OWNER)."""
    v = _constant(text.strip())
    return v is not _UNKNOWN and not ads.is_true(v)
