"""Periodic refreshes of slot ads the collector already holds. Pure.

Every UPDATE_INTERVAL a startd sends the collector every slot ad (HTCondor's periodic
update). Between two, a slot ad changes either because the slot changed (a claim, an
activation, a job's end, a drain: the machine then marks it, `touched` or `dirty`, and
sends it whole within milliseconds) or because the clock moved: TotalClaimRunTime,
TotalJobRunTime, RetirementTimeRemaining and the machine's drain forecast
(ExpectedMachine*Draining*). So the periodic update sends the marked slots whole, as
before, and for every other slot only those attributes (slotad.clock_attrs,
drain.expected_draining), which the collector sets in the ad it holds as a whole update
would. A thousand 8-core machines at TIME_SCALE 1000 are 30,000 slot ads a second of
wall time; printing and reading each whole was more than two cores' work. An ad the
collector no longer holds (a restart, an expiry) is named back, and then sent whole.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Container, Iterable, Iterator

from daemons.core import ads
from daemons.startd.drain import expected_draining
from daemons.startd.slotad import clock_attrs

if TYPE_CHECKING:
    from daemons.startd.slots import Machine


@dataclass(frozen=True)
class Refresh:
    """One machine's slots to refresh: `items` for all of them, `own` for each."""
    names: tuple[str, ...]
    items: str
    own: tuple[str, ...]


def items_text(attrs: dict) -> str:
    """ "A = 1; B = 2": an ad's items without its brackets, as ads.ad_text prints them."""
    return ads.ad_text(attrs)[2:-2] if attrs else ""


def whole(machines: Iterable["Machine"]) -> dict[str, frozenset[str] | None]:
    """What an update of the marked slots is about to send whole: by host, the slots
    (None: every slot of a machine marked dirty)."""
    return {m.host: None if m.dirty else frozenset(m.touched) for m in machines if m.due}


def plan(machines: Iterable["Machine"], clock: Callable[[], float],
         sent: dict[str, frozenset[str] | None], sending: Container[str] = ()) -> Iterator[Refresh]:
    """The refreshes of every slot not just `sent` whole (whole()), nor marked for its
    own update since (a change goes whole), made one machine at a time as they are sent,
    each at the time then. Machines with changed ads on their way (`sending`, by host)
    wait for the next: a refresh must not stamp an ad the collector has not caught up
    with."""
    for m in machines:
        if m.dirty or m.host in sending:
            continue
        done = sent.get(m.host, frozenset())
        if done is None:
            continue
        slots = [s for name, s in m.slots.items() if name not in m.touched and name not in done]
        if not slots:
            continue
        now = clock()
        common = items_text(expected_draining(m, now))
        own = tuple(items_text(clock_attrs(m, s, now)) for s in slots)
        yield Refresh(tuple(m.name_of(s) for s in slots), common, own if any(own) else ())
