"""The fault experiment's nemesis schedule (pure)."""
from __future__ import annotations

from collections import Counter

import pytest

from daemons.cli.experiments.nemesis import KINDS, FaultEvent, Settings, check, in_force, schedule

TARGETS = {"collector": "collector", "negotiator": "negotiator", "schedd": "schedd",
           "startd1": "startd", "startd2": "startd", "startd3": "startd"}


def _settings(**kw) -> Settings:
    base = dict(faults=120, kinds=KINDS, targets=TARGETS, span_s=20_000.0, warmup_s=500.0, tail_s=1000.0,
                min_length_s=60.0, max_length_s=400.0, max_concurrent=2, lease_s=300.0,
                exclude={"clock": ("negotiator",)})
    base.update(kw)
    return Settings(**base)


def test_the_schedule_replays_from_its_seed_and_changes_with_it():
    s = _settings()
    assert schedule(s, 7) == schedule(s, 7)
    assert schedule(s, 7) != schedule(s, 8)


def test_every_fault_is_placed_in_equal_shares_of_the_kinds():
    events = schedule(_settings(faults=121), 7)
    assert len(events) == 121
    assert Counter(e.kind for e in events) == {k: 11 for k in KINDS}
    assert [e.index for e in events] == list(range(1, 122))
    assert [e.start for e in events] == sorted(e.start for e in events)


def test_faults_start_after_the_warmup_and_heal_before_the_tail():
    s = _settings()
    for e in schedule(s, 3):
        assert s.warmup_s <= e.start < e.stop <= s.span_s - s.tail_s
        assert s.min_length_s <= e.stop - e.start <= s.max_length_s + 1e-6


def test_at_most_two_at_once_and_never_two_on_one_daemon():
    events = schedule(_settings(), 11)
    edges = sorted({e.start for e in events} | {e.stop for e in events})
    for t in edges:
        now = in_force(events, t)
        assert len(now) <= 2
        assert len({e.target for e in now}) == len(now)


def test_targets_respect_exclusions_and_parameters_fit_the_kind():
    events = schedule(_settings(), 5)
    assert not [e for e in events if e.kind == "clock" and e.target == "negotiator"]
    assert {e.target for e in events} == set(TARGETS)
    for e in events:
        if e.kind == "delay":
            assert 15.0 <= e.param("delay_s") <= 150.0 and 20.0 <= e.param("percent") <= 100.0
        if e.kind == "abort":
            assert e.param("code") in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED",
                                       "CANCELLED")
        if e.kind == "clock":
            assert (e.param("offset_s") is None) != (e.param("drift") is None)
        if e.kind in ("partition", "reset", "loss"):
            assert e.param("peer") == "*" or e.param("peer") in TARGETS and e.param("peer") != e.target
        if e.kind == "loss":
            assert 10.0 <= e.param("percent") <= 60.0
        if e.kind == "bandwidth":
            assert e.param("rate") in ("64kbit", "256kbit", "1mbit")
        if e.kind in ("kill", "pause", "restart"):
            assert e.params == ()


def test_a_crowded_campaign_places_what_fits_and_no_more():
    s = _settings(faults=50, span_s=2000.0, warmup_s=0.0, tail_s=0.0, min_length_s=100.0, max_length_s=100.0,
                  max_concurrent=1)
    events = schedule(s, 1)
    # 2000 s of room, 100 s each, one at a time: at most 20 fit (random starts leave gaps).
    assert 10 <= len(events) <= 20
    assert all(b.start >= a.stop for a, b in zip(events, events[1:]))


def test_one_kind_only():
    events = schedule(_settings(faults=10, kinds=("kill",)), 2)
    assert {e.kind for e in events} == {"kill"} and len(events) == 10


@pytest.mark.parametrize("kw, message", [
    (dict(kinds=("kill", "nap")), "unknown fault kind 'nap'"),
    (dict(kinds=()), "no fault kinds"),
    (dict(max_concurrent=0), "at least one fault"),
    (dict(min_length_s=500.0, max_length_s=100.0), "not a range"),
    (dict(span_s=1000.0), "less than one fault's longest length"),
    (dict(kinds=("clock",), targets={"negotiator": "negotiator"}), "no daemon a clock fault may target"),
])
def test_bad_settings_are_refused_by_name(kw, message):
    with pytest.raises(ValueError, match=message):
        check(_settings(**kw))


def test_describe_and_in_force():
    e = FaultEvent(3, "delay", "schedd", 100.0, 250.0, (("method", "Negotiate"), ("delay_s", 20.0)))
    assert e.describe() == "#3 delay schedd [100, 250) method=Negotiate delay_s=20.0"
    assert in_force([e], 99.0) == [] and in_force([e], 100.0) == [e] and in_force([e], 250.0) == []
