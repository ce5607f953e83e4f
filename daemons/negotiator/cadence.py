"""When negotiation cycles start. Pure.

HTCondor (matchmaker.cpp): after a cycle the timer is reset to
max(NEGOTIATOR_CYCLE_DELAY, NEGOTIATOR_INTERVAL - duration), so the next cycle
starts NEGOTIATOR_INTERVAL after the previous one *started*, but never sooner than
NEGOTIATOR_CYCLE_DELAY after it *ended*. A reschedule fires the timer at once,
subject to the same delay after the last end and to NEGOTIATOR_MIN_INTERVAL after
the last start.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cadence:
    interval_s: float = 60.0      # NEGOTIATOR_INTERVAL
    min_interval_s: float = 5.0   # NEGOTIATOR_MIN_INTERVAL
    cycle_delay_s: float = 20.0   # NEGOTIATOR_CYCLE_DELAY

    def next_scheduled(self, last_start: float, last_end: float) -> float:
        return max(last_start + self.interval_s, last_end + self.cycle_delay_s)

    def earliest_rescheduled(self, now: float, last_start: float | None, last_end: float | None) -> float:
        if last_start is None or last_end is None:
            return now
        return max(now, last_start + self.min_interval_s, last_end + self.cycle_delay_s)
