"""Fault plans (pure): matching, the seeded decision, windows, clock skews, the text form."""
from __future__ import annotations

import random

import pytest

from daemons.core.clock import ManualClock, PoolClock
from daemons.core.faults import (Action, CallInfo, ClockSkew, Fault, FaultError, clock_skew, decide, duration,
                                 matches, method_matches, next_change, parse_plan, validate)

NEG = CallInfo("server", "Schedd.Negotiate", ("negotiator", "negotiator@testhost", "127.0.0.1"))


def test_method_patterns_take_short_qualified_and_full_names():
    assert method_matches("*", "Schedd.Negotiate")
    assert method_matches("Negotiate", "Schedd.Negotiate")
    assert method_matches("negotiate", "Schedd.Negotiate")
    assert method_matches("Schedd.*", "Schedd.Negotiate")
    assert method_matches("/htcpool.v1.Schedd/Negotiate", "Schedd.Negotiate")
    assert not method_matches("Startd.*", "Schedd.Negotiate")
    assert not method_matches("Submit", "Schedd.Negotiate")


def test_matching_by_side_peer_and_never_the_admin_service():
    f = Fault("a", delay_s=1, peer="negotiator")
    assert matches(f, NEG)
    assert not matches(Fault("a", delay_s=1, peer="schedd*"), NEG)
    assert matches(Fault("a", delay_s=1, peer="127.0.0.*"), NEG)
    assert matches(Fault("a", delay_s=1, peer="schedd, negotiator@*"), NEG)
    assert not matches(Fault("a", delay_s=1, side="client"), NEG)
    assert not matches(f, CallInfo("server", "Admin.ListFaults", NEG.peers))
    assert not matches(Fault("c", clock_offset_s=5), NEG)


def test_a_fault_at_100_percent_always_fires_and_delays_add_up_in_plan_order():
    plan = [Fault("d1", delay_s=2.0), Fault("d2", delay_s=3.0), Fault("x", abort="UNAVAILABLE"),
            Fault("y", drop=True, stop=500.0)]
    a = decide(plan, NEG, 100.0, random.Random(1))
    # The first abort-or-drop in plan order ends the call; every delay that fired adds up.
    assert a == Action(("d1", "d2", "x", "y"), 5.0, "UNAVAILABLE", False, None)
    b = decide([Fault("d1", delay_s=2.0), Fault("y", drop=True, stop=500.0)], NEG, 100.0, random.Random(1))
    assert b == Action(("d1", "y"), 2.0, "", True, 500.0)


def test_no_matching_fault_means_no_action():
    assert decide([Fault("a", delay_s=1, method="Submit")], NEG, 0.0, random.Random(0)) is None
    assert decide([], NEG, 0.0, random.Random(0)) is None


def test_the_percentage_is_a_seeded_draw_that_replays():
    plan = [Fault("p", abort="UNAVAILABLE", percent=30.0)]

    def run(seed: int) -> list[bool]:
        rng = random.Random(seed)
        return [decide(plan, NEG, 0.0, rng) is not None for _ in range(2000)]
    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert 0.25 < sum(first) / len(first) < 0.35


def test_jitter_spreads_the_delay_around_its_mean_and_never_below_zero():
    rng = random.Random(3)
    plan = [Fault("j", delay_s=1.0, jitter_s=2.0)]
    delays = [decide(plan, NEG, 0.0, rng).delay_s for _ in range(2000)]
    assert min(delays) == 0.0 and max(delays) <= 3.0
    assert any(0.0 < d < 1.0 for d in delays) and any(d > 2.0 for d in delays)


def test_a_window_in_pool_time_and_the_next_change():
    f = Fault("w", delay_s=1, start=100.0, stop=200.0)
    assert [f.active_at(t) for t in (99.9, 100.0, 199.9, 200.0)] == [False, True, True, False]
    assert decide([f], NEG, 50.0, random.Random(0)) is None
    assert decide([f], NEG, 150.0, random.Random(0)) == Action(("w",), 1.0)
    assert next_change([f], 50.0) == 100.0
    assert next_change([f], 150.0) == 200.0
    assert next_change([f], 250.0) is None


def test_max_active_stops_a_fault_from_firing_on_more_calls():
    f = Fault("m", delay_s=1, max_active=2)
    assert decide([f], NEG, 0.0, random.Random(0), {"m": 1}) == Action(("m",), 1.0)
    assert decide([f], NEG, 0.0, random.Random(0), {"m": 2}) is None


def test_clock_skews_sum_the_clock_faults_in_force():
    plan = [Fault("o", clock_offset_s=600.0), Fault("d", clock_drift=0.05, start=10.0, stop=20.0),
            Fault("x", delay_s=1)]
    assert clock_skew(plan, 5.0) == ClockSkew(600.0, 0.0)
    assert clock_skew(plan, 15.0) == ClockSkew(600.0, 0.05)


def test_kinds():
    assert [Fault("a", delay_s=1).kind, Fault("a", abort="INTERNAL").kind, Fault("a", drop=True).kind,
            Fault("a", clock_drift=0.1).kind] == ["delay", "abort", "drop", "clock"]


@pytest.mark.parametrize("fault, message", [
    (Fault("", delay_s=1), "id ''"),
    (Fault("a b", delay_s=1), "id 'a b'"),
    (Fault("a", side="middle", delay_s=1), "side 'middle'"),
    (Fault("a", delay_s=-1), "delay -1"),
    (Fault("a", delay_s=1, percent=0), "percent 0"),
    (Fault("a", delay_s=1, percent=101), "percent 101"),
    (Fault("a", abort="OOPS"), "abort code 'OOPS' is not a gRPC status code"),
    (Fault("a", abort="UNAVAILABLE", drop=True), "not both"),
    (Fault("a", delay_s=1, start=10, stop=5), "ends (5) before it starts (10)"),
    (Fault("a", clock_drift=1.5), "clock drift 1.5"),
    (Fault("a", clock_offset_s=5, delay_s=1), "a clock fault cannot also"),
    (Fault("a"), "nothing to do"),
    (Fault("a", delay_s=1, method=" "), "method is empty"),
    (Fault("a", delay_s=1, max_active=-1), "max_active -1"),
])
def test_validation_names_the_fault_and_the_field(fault, message):
    with pytest.raises(FaultError) as e:
        validate(fault)
    assert message in str(e.value)
    assert str(e.value).startswith(f"fault {fault.id or '?'}: ")


def test_validation_canonicalises_the_abort_code():
    assert validate(Fault("a", abort="unavailable")).abort == "UNAVAILABLE"


def test_durations():
    assert [duration(t, "x") for t in ("2", "2s", "500ms", "5m", "1h", "1.5d")] == [2.0, 2.0, 0.5, 300.0, 3600.0,
                                                                                   129600.0]
    with pytest.raises(FaultError, match="'2 weeks' is not a duration"):
        duration("2 weeks", "x")


def test_the_text_form():
    plan = parse_plan("method=Negotiate delay=2s jitter=500ms percent=30 for=10m ;"
                      " id=sub method=Submit abort=unavailable after=60 for=60; drop side=client peer=*:9618;"
                      " clock_offset=-5m", 1000.0)
    assert plan == [
        Fault("f1", method="Negotiate", delay_s=2.0, jitter_s=0.5, percent=30.0, stop=1600.0),
        Fault("sub", method="Submit", abort="UNAVAILABLE", start=1060.0, stop=1120.0),
        Fault("f3", side="client", peer="*:9618", drop=True),
        Fault("f4", clock_offset_s=-300.0),
    ]


@pytest.mark.parametrize("text, message", [
    ("delay=1 dealy=2", "fault 1 ('delay=1 dealy=2'): unknown key 'dealy'"),
    ("delay=1; percent=50", "fault 2 ('percent=50'): nothing to do"),
    ("delay=fast", "fault 1 ('delay=fast'): delay 'fast' is not a duration"),
    ("delay=1 percent=lots", "fault 1 ('delay=1 percent=lots'): percent 'lots' is not a number"),
    ("method", "fault 1 ('method'): method needs a value"),
    ("id=a delay=1; id=a abort=INTERNAL", "fault id 'a' is used twice"),
    ("drop=maybe", "drop 'maybe' is not true or false"),
])
def test_the_text_form_refuses_bad_input_by_position_and_key(text, message):
    with pytest.raises(FaultError) as e:
        parse_plan(text, 0.0)
    assert message in str(e.value)


def test_a_skewed_clock_jumps_drifts_and_inverts():
    clock = ManualClock(1000.0)
    clock.set_skews([(600.0, 0.0, None)])
    assert clock.now() == 1600.0 and clock.true_now() == 1000.0
    clock.advance(100.0)
    assert clock.now() == 1700.0
    clock.set_skews([(0.0, 0.5, None)])   # from now on, 50% fast
    assert clock.now() == 1100.0
    clock.advance(100.0)
    assert clock.now() == 1250.0 and clock.skew_now() == 50.0
    assert clock.wall_at(1400.0) == 1300.0   # 100 more wall seconds at rate 1.5
    assert clock.wall_delay(150.0) == 100.0
    clock.set_skews([])
    assert clock.now() == 1200.0 and clock.skew_now() == 0.0


def test_a_scaled_clock_with_an_offset_inverts_exactly():
    t = [5000.0]
    clock = PoolClock(scale=60.0, epoch=4000.0, wall=lambda: t[0])
    clock.set_skews([(-120.0, 0.1, 4500.0)])
    for pool in (60000.0, 70000.0):
        w = clock.wall_at(pool)
        t[0] = w
        assert abs(clock.now() - pool) < 1e-6
