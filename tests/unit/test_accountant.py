"""daemons/negotiator/accountant.py: priorities, usage, factors, concurrency limits, persistence.

Expected values follow HTCondor's Accountant.cpp (see the module docstring):
Priority = Priority * 0.5 ** (t / halflife) + WeightedResourcesUsed * (1 - 0.5 ** (t / halflife)),
never below 0.5; effective priority = real priority * priority factor (never below 1).
"""
import json

import pytest

from daemons.negotiator.accountant import (
    MIN_PRIORITY,
    MIN_PRIORITY_FACTOR,
    Accountant,
    AccountantConfig,
    parse_limits,
)

HALF = 100.0  # a short PRIORITY_HALFLIFE keeps the numbers readable


def acct(**cfg) -> Accountant:
    cfg.setdefault("halflife_s", HALF)
    return Accountant(AccountantConfig(**cfg))


def using(a: Accountant, who: str, weight: float, groups=()) -> None:
    a.check_matches([(who, list(groups), weight, "")])


# ---- priority decay ------------------------------------------------------------------


def test_constants_are_htcondors():
    assert (MIN_PRIORITY, MIN_PRIORITY_FACTOR) == (0.5, 1.0)
    cfg = AccountantConfig()
    assert (cfg.halflife_s, cfg.default_factor, cfg.concurrency_default) == (86400.0, 1000.0, 2308032.0)


def test_first_update_only_records_the_time():
    a = acct()
    a.set_priority("alice@d", 10.0)
    a.update_priorities(1000.0)
    assert a.last_update == 1000.0
    assert a.real_priority("alice@d") == 10.0


def test_one_half_life_with_constant_usage():
    a = acct()
    a.update_priorities(0.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(HALF)
    # 0.5 * 0.5 + 4 * (1 - 0.5)
    assert a.real_priority("alice@d") == pytest.approx(2.25)


def test_one_half_life_with_the_default_halflife():
    a = Accountant(AccountantConfig())
    a.update_priorities(0.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(86400.0)
    assert a.real_priority("alice@d") == pytest.approx(2.25)


def test_two_half_lives_in_one_step():
    a = acct()
    a.update_priorities(0.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(2 * HALF)
    # 0.5 * 0.25 + 4 * 0.75
    assert a.real_priority("alice@d") == pytest.approx(3.125)


def test_two_half_lives_in_two_steps_equal_one_step():
    a = acct()
    a.update_priorities(0.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(HALF)
    using(a, "alice@d", 4.0)
    a.update_priorities(2 * HALF)
    # 2.25 * 0.5 + 4 * 0.5
    assert a.real_priority("alice@d") == pytest.approx(3.125)


def test_priority_decays_toward_zero_usage():
    a = acct()
    a.update_priorities(0.0)
    a.set_priority("alice@d", 10.0)
    a.update_priorities(HALF)
    assert a.real_priority("alice@d") == pytest.approx(5.0)


def test_priority_never_falls_below_half():
    a = acct()
    a.update_priorities(0.0)
    a.set_priority("alice@d", 10.0)
    a.set_factor("alice@d", 1.0)  # kept as a record: it has a factor to remember
    a.update_priorities(50 * HALF)
    assert a.customers["alice@d"].priority == MIN_PRIORITY
    assert a.real_priority("alice@d") == 0.5


def test_time_not_passing_changes_nothing():
    a = acct()
    a.update_priorities(100.0)
    a.set_priority("alice@d", 8.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(100.0)
    a.update_priorities(50.0)  # a clock going backwards does not age anything either
    assert a.real_priority("alice@d") == 8.0
    assert a.customers["alice@d"].accumulated_usage == 0.0
    assert a.last_update == 100.0


def test_unknown_customer_has_the_minimum_priority():
    a = acct()
    assert a.real_priority("nobody@d") == 0.5
    assert a.effective_priority("nobody@d") == 500.0
    assert a.weighted_used("nobody@d") == 0.0


# ---- accumulated usage -----------------------------------------------------------------


def test_accumulated_usage_grows_by_weighted_usage_times_time():
    a = acct()
    a.update_priorities(1000.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(1100.0)
    assert a.customers["alice@d"].accumulated_usage == pytest.approx(400.0)
    using(a, "alice@d", 2.0)
    a.update_priorities(1150.0)
    assert a.customers["alice@d"].accumulated_usage == pytest.approx(500.0)


def test_usage_times_are_recorded():
    a = acct()
    a.update_priorities(1000.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(1100.0)
    using(a, "alice@d", 4.0)
    a.update_priorities(1200.0)
    c = a.customers["alice@d"]
    assert (c.begin_usage_time, c.last_usage_time) == (1100.0, 1200.0)
    a.check_matches([])
    a.update_priorities(1300.0)
    assert (c.begin_usage_time, c.last_usage_time) == (1100.0, 1200.0)


# ---- factors and effective priority ------------------------------------------------------


def test_effective_priority_is_real_times_default_factor():
    a = acct()
    a.set_priority("alice@d", 2.0)
    assert a.factor("alice@d") == 1000.0
    assert a.effective_priority("alice@d") == pytest.approx(2000.0)


def test_default_prio_factor_is_configurable():
    a = acct(default_factor=10.0)
    a.set_priority("alice@d", 3.0)
    assert a.effective_priority("alice@d") == pytest.approx(30.0)
    assert a.effective_priority("bob@d") == pytest.approx(5.0)


def test_group_prio_factor_applies_to_the_groups_users():
    a = acct(group_factors=(("physics", 5.0),))
    assert a.factor("physics.alice@d", "physics") == 5.0
    assert a.effective_priority("physics.alice@d", "physics") == pytest.approx(2.5)
    assert a.factor("physics.alice@d", "PHYSICS") == 5.0      # group names are case-insensitive
    assert a.factor("bob@d") == 1000.0                        # not in the group: the default
    assert a.factor("chem.carol@d", "chem") == 1000.0         # a group without a factor: the default


def test_set_factor_overrides_group_and_default():
    a = acct(group_factors=(("physics", 5.0),))
    assert a.set_factor("physics.alice@d", 20.0) == 20.0
    assert a.factor("physics.alice@d", "physics") == 20.0
    a.set_priority("physics.alice@d", 4.0)
    assert a.effective_priority("physics.alice@d", "physics") == pytest.approx(80.0)


def test_factors_below_one_are_raised_to_one():
    a = acct(default_factor=0.5, group_factors=(("g", 0.25),))
    assert a.set_factor("alice@d", 0.1) == 1.0
    assert a.factor("alice@d") == 1.0
    assert a.factor("bob@d") == 1.0
    assert a.factor("g.carol@d", "g") == 1.0


def test_set_priority_never_below_half():
    a = acct()
    assert a.set_priority("alice@d", 0.1) == 0.5
    assert a.real_priority("alice@d") == 0.5
    assert a.set_priority("alice@d", 7.0) == 7.0
    assert a.real_priority("alice@d") == 7.0


# ---- usage from claimed slots and this cycle's matches ---------------------------------------


def test_check_matches_rebuilds_usage_and_charges_every_group_above():
    a = acct()
    a.check_matches([
        ("a.x.alice@d", ["a.x", "a"], 2.0, ""),
        ("a.x.alice@d", ["a.x", "a"], 3.0, ""),
        ("b.bob@d", ["b"], 4.0, ""),
    ])
    alice = a.customers["a.x.alice@d"]
    assert (alice.resources_used, alice.weighted_used, alice.is_group) == (2.0, 5.0, False)
    assert (a.weighted_used("a.x"), a.weighted_used("a"), a.weighted_used("b")) == (5.0, 5.0, 4.0)
    assert (a.customers["a.x"].resources_used, a.customers["a"].resources_used) == (2.0, 2.0)
    assert a.customers["a"].is_group and a.customers["a.x"].is_group and a.customers["b"].is_group
    # The next cycle's slots replace, not add to, the last cycle's.
    a.check_matches([("b.bob@d", ["b"], 1.0, "")])
    assert (a.weighted_used("a.x.alice@d"), a.weighted_used("a"), a.weighted_used("b.bob@d"),
            a.weighted_used("b")) == (0.0, 0.0, 1.0, 1.0)
    assert a.customers["a.x.alice@d"].resources_used == 0.0


def test_add_match_charges_within_the_cycle():
    a = acct()
    a.check_matches([("g.alice@d", ["g"], 2.0, "")])
    a.add_match("g.alice@d", ["g"], 3.0)
    a.add_match("bob@d", [], 1.5)
    assert (a.weighted_used("g.alice@d"), a.weighted_used("g"), a.weighted_used("bob@d")) == (5.0, 5.0, 1.5)
    assert a.customers["g.alice@d"].resources_used == 2.0


def test_a_match_stays_charged_until_its_slot_ad_is_heard_from_since():
    # Matched at 100.5 on slot1 (a split of a p-slot) and slot2; the next cycle's ads:
    # slot1 last heard at 90 (before the match: still charged, with its limit), slot2 at 100
    # (the match's own second: its claim is in the ads, so not charged twice).
    a = acct()
    a.check_matches([], {})
    a.add_match("g.alice@d", ["g"], 2.0, "db", slot="slot1@h", at=100.5)
    a.add_match("bob@d", [], 1.0, "", slot="slot2@h", at=100.5)
    a.check_matches([("bob@d", [], 1.0, "")], {"slot1@h": 90.0, "slot2@h": 100.0})
    assert (a.weighted_used("g.alice@d"), a.weighted_used("g"), a.weighted_used("bob@d")) == (2.0, 2.0, 1.0)
    assert a.limit_usage == {"db": 1.0}
    assert [p.slot for p in a.pending] == ["slot1@h"]
    # Heard from after the match without a claim (the claim failed), or gone: forgotten.
    a.check_matches([], {"slot1@h": 130.0})
    assert (a.weighted_used("g.alice@d"), a.limit_usage, a.pending) == (0.0, {}, [])
    a.add_match("bob@d", [], 1.0, "", slot="slot3@h", at=200.0)
    a.check_matches([], {})
    assert (a.weighted_used("bob@d"), a.pending) == (0.0, [])


def test_in_cycle_usage_is_what_the_next_update_charges():
    a = acct()
    a.update_priorities(0.0)
    a.check_matches([])
    a.add_match("alice@d", [], 4.0)
    a.update_priorities(HALF)
    assert a.real_priority("alice@d") == pytest.approx(2.25)
    assert a.customers["alice@d"].accumulated_usage == pytest.approx(400.0)


def test_slot_weights_off_count_one_per_slot():
    a = acct(use_slot_weights=False)
    a.check_matches([("alice@d", ["g"], 8.0, ""), ("alice@d", ["g"], 0.5, "")])
    assert (a.weighted_used("alice@d"), a.weighted_used("g")) == (2.0, 2.0)
    assert a.slot_weight(8.0) == 1.0


def test_slot_weight_missing_or_negative_is_one():
    a = acct()
    assert (a.slot_weight(8.0), a.slot_weight(None), a.slot_weight(-2.0), a.slot_weight(0.0)) == (8.0, 1.0, 1.0, 0.0)
    a.check_matches([("alice@d", [], None, ""), ("alice@d", [], -3.0, "")])
    assert a.weighted_used("alice@d") == 2.0


# ---- concurrency limits ------------------------------------------------------------------------


def test_parse_limits():
    assert parse_limits("sw_license:2, DB") == [("sw_license", 2.0), ("db", 1.0)]
    assert parse_limits("") == []
    assert parse_limits("a.b:0.5,c") == [("a.b", 0.5), ("c", 1.0)]
    assert parse_limits("X Y") == [("x", 1.0), ("y", 1.0)]


def test_limit_max_named_limit():
    a = acct(concurrency_limits=(("sw_license", 3.0),))
    assert a.limit_max("sw_license") == 3.0


def test_limit_max_scoped_default():
    a = acct(concurrency_default=100.0, concurrency_scoped_defaults=(("scope", 5.0), ("a.b", 7.0)),
             concurrency_limits=(("scope.special", 9.0),))
    assert a.limit_max("scope.name") == 5.0
    assert a.limit_max("scope.special") == 9.0       # <NAME>_LIMIT beats the scoped default
    assert a.limit_max("a.b.c") == 7.0               # the scope is what comes before the last dot
    assert a.limit_max("other.name") == 100.0        # no default for this scope: the global one
    assert a.limit_max("scope") == 100.0             # no dot, no scope


def test_limit_max_global_default():
    assert acct().limit_max("anything") == 2308032.0
    assert acct(concurrency_default=4.0).limit_max("anything") == 4.0


def test_limit_usage_counts_running_jobs_and_this_cycles_matches():
    a = acct(concurrency_limits=(("sw_license", 3.0), ("none_left", 0.0)))
    a.check_matches([("alice@d", [], 1.0, "sw_license:2, DB"), ("bob@d", [], 1.0, "db")])
    assert a.limit_usage == {"sw_license": 2.0, "db": 2.0}
    assert a.limits_exceeded("sw_license") == []
    assert a.limits_exceeded("sw_license:2") == ["sw_license"]
    assert a.limits_exceeded("db") == []
    assert a.limits_exceeded("none_left") == ["none_left"]
    assert a.limits_exceeded("") == []
    a.add_match("carol@d", [], 1.0, "SW_LICENSE")
    assert a.limit_usage["sw_license"] == 3.0
    assert a.limits_exceeded("sw_license, db") == ["sw_license"]
    # Rebuilt each cycle from the slots: matches that did not start are forgotten.
    a.check_matches([])
    assert a.limit_usage == {}
    assert a.limits_exceeded("sw_license:3") == []


# ---- persistence and forgetting ------------------------------------------------------------------


def test_state_round_trip_keeps_priorities_factors_and_usage():
    a = acct()
    a.update_priorities(0.0)
    using(a, "alice@d", 4.0, groups=["g"])
    a.set_factor("bob@d", 50.0)
    a.set_priority("bob@d", 3.0)
    a.update_priorities(HALF)
    state = json.loads(json.dumps(a.to_state()))
    b = Accountant.from_state(AccountantConfig(halflife_s=HALF), state)
    assert b.last_update == HALF
    assert set(b.customers) == {"alice@d", "g", "bob@d"}
    assert b.real_priority("alice@d") == pytest.approx(2.25)
    assert b.customers["alice@d"].accumulated_usage == pytest.approx(400.0)
    assert b.customers["g"].accumulated_usage == pytest.approx(400.0)
    assert b.customers["g"].is_group is True
    assert b.factor("bob@d") == 50.0
    assert b.effective_priority("bob@d") == pytest.approx(a.effective_priority("bob@d"))
    assert b.factor("alice@d") == 1000.0  # the default stays a default, not a stored factor
    assert b.customers["alice@d"].factor is None


def test_from_state_ignores_unknown_fields():
    state = {"last_update": 5.0, "customers": [{"name": "alice@d", "priority": 4.0, "future_field": 1}]}
    b = Accountant.from_state(AccountantConfig(), state)
    assert b.real_priority("alice@d") == 4.0
    assert b.last_update == 5.0


def test_customers_with_nothing_to_remember_are_forgotten():
    a = acct()
    a.update_priorities(0.0)
    a.customer("ghost@d")                        # never used anything
    a.set_priority("fading@d", 0.6)              # decays to the minimum this update
    a.set_factor("factored@d", 5.0)              # a set factor is kept
    a.set_priority("high@d", 10.0)               # still above the minimum
    using(a, "user@d", 1.0)                      # has usage
    a.update_priorities(2 * HALF)
    assert set(a.customers) == {"factored@d", "high@d", "user@d"}
    # Usage accumulated once is remembered even after the slots are released.
    a.check_matches([])
    a.update_priorities(200 * HALF)
    assert set(a.customers) == {"factored@d", "user@d"}
