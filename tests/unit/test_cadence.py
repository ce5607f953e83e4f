"""daemons/negotiator/cadence.py: when negotiation cycles start."""
from daemons.negotiator.cadence import Cadence

C = Cadence(interval_s=60.0, min_interval_s=5.0, cycle_delay_s=20.0)


def test_next_cycle_is_an_interval_after_the_last_start():
    assert C.next_scheduled(last_start=100.0, last_end=110.0) == 160.0


def test_next_cycle_waits_the_cycle_delay_after_a_long_cycle():
    assert C.next_scheduled(last_start=100.0, last_end=150.0) == 170.0


def test_reschedule_before_any_cycle_is_immediate():
    assert C.earliest_rescheduled(now=42.0, last_start=None, last_end=None) == 42.0


def test_reschedule_waits_the_cycle_delay_after_the_last_end():
    assert C.earliest_rescheduled(now=112.0, last_start=100.0, last_end=110.0) == 130.0


def test_reschedule_waits_the_min_interval_after_the_last_start():
    c = Cadence(interval_s=60.0, min_interval_s=30.0, cycle_delay_s=0.0)
    assert c.earliest_rescheduled(now=112.0, last_start=100.0, last_end=110.0) == 130.0


def test_reschedule_long_after_is_now():
    assert C.earliest_rescheduled(now=500.0, last_start=100.0, last_end=110.0) == 500.0


def test_htcondor_defaults():
    assert Cadence() == Cadence(interval_s=60.0, min_interval_s=5.0, cycle_delay_s=20.0)
