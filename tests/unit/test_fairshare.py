"""daemons/negotiator/fairshare.py: shares, submitter limits, negotiation order, permits().

HTCondor's matchmaker.cpp: share_i = maxPrio / (prio_i * sum_j(maxPrio / prio_j)), i.e. inversely
proportional to effective priority; limit = share * slotWeightTotal - usage (>= 0), in a group
no more than groupQuota - groupUsage; submitters go in ascending priority, then starvation.
"""
import math

import pytest

from daemons.negotiator.fairshare import permits, shares, starvation, submitter_limits


def test_shares_are_inversely_proportional_to_priority():
    s = shares({"a@d": 500.0, "b@d": 1000.0})
    assert s == {"a@d": pytest.approx(2 / 3), "b@d": pytest.approx(1 / 3)}


def test_shares_sum_to_one():
    s = shares({"a@d": 500.0, "b@d": 1500.0, "c@d": 3000.0})
    assert sum(s.values()) == pytest.approx(1.0)
    # 1/500 : 1/1500 : 1/3000 = 6 : 2 : 1
    assert (s["a@d"], s["b@d"], s["c@d"]) == (pytest.approx(6 / 9), pytest.approx(2 / 9), pytest.approx(1 / 9))


def test_equal_priorities_share_equally_and_one_submitter_gets_everything():
    assert shares({"a@d": 700.0, "b@d": 700.0}) == {"a@d": pytest.approx(0.5), "b@d": pytest.approx(0.5)}
    assert shares({"a@d": 123.0}) == {"a@d": pytest.approx(1.0)}
    assert shares({}) == {}


def test_limits_are_share_of_the_pie_minus_usage():
    out = {s.name: s for s in submitter_limits({"a@d": 500.0, "b@d": 1000.0}, {"a@d": 10.0}, 90.0)}
    assert (out["a@d"].share, out["a@d"].usage, out["a@d"].limit) == (
        pytest.approx(2 / 3), 10.0, pytest.approx(50.0))
    assert (out["b@d"].share, out["b@d"].usage, out["b@d"].limit) == (
        pytest.approx(1 / 3), 0.0, pytest.approx(30.0))


def test_limits_are_floored_at_zero():
    out = {s.name: s for s in submitter_limits({"a@d": 500.0, "b@d": 1000.0}, {"a@d": 70.0}, 90.0)}
    assert out["a@d"].limit == 0.0
    assert out["b@d"].limit == pytest.approx(30.0)


def test_limits_are_capped_by_what_is_left_of_the_group_quota():
    out = {s.name: s for s in submitter_limits({"a@d": 500.0, "b@d": 1000.0}, {}, 90.0,
                                               group_quota=20.0, group_usage=15.0)}
    assert (out["a@d"].limit, out["b@d"].limit) == (pytest.approx(5.0), pytest.approx(5.0))
    # A group at or over its quota leaves nothing.
    over = submitter_limits({"a@d": 500.0}, {}, 90.0, group_quota=10.0, group_usage=12.0)
    assert [s.limit for s in over] == [0.0]
    # A cap above the share does not raise the limit.
    roomy = submitter_limits({"a@d": 500.0, "b@d": 1000.0}, {}, 90.0, group_quota=1000.0, group_usage=0.0)
    assert [(s.name, s.limit) for s in roomy] == [("a@d", pytest.approx(60.0)), ("b@d", pytest.approx(30.0))]


def test_order_is_ascending_priority():
    out = submitter_limits({"worse@d": 2000.0, "best@d": 500.0, "mid@d": 1000.0}, {}, 70.0)
    assert [s.name for s in out] == ["best@d", "mid@d", "worse@d"]


def test_equal_priorities_order_by_starvation():
    # Both shares 0.5 of 100: a uses 30 (limit 20, starvation 30/50), b uses 0 (limit 50, starvation 0).
    out = submitter_limits({"a@d": 500.0, "b@d": 500.0}, {"a@d": 30.0}, 100.0)
    assert [(s.name, s.starvation) for s in out] == [("b@d", 0.0), ("a@d", pytest.approx(0.6))]


def test_starvation():
    assert starvation(30.0, 20.0) == pytest.approx(0.6)
    assert starvation(0.0, 5.0) == 0.0
    assert math.isinf(starvation(0.0, 0.0))


def test_permits_within_the_limit():
    assert permits(used=2.0, cost=3.0, allowed=5.0) is True
    assert permits(used=0.0, cost=1.0, allowed=1.0) is True


def test_permits_the_first_match_of_a_spin_even_over_the_limit():
    assert permits(used=0.0, cost=8.0, allowed=1.0) is True
    assert permits(used=-1.0, cost=8.0, allowed=0.5) is True


def test_permits_nothing_else_over_the_limit():
    assert permits(used=1.0, cost=8.0, allowed=4.0) is False
    assert permits(used=2.0, cost=3.0, allowed=4.9) is False
    assert permits(used=0.0, cost=8.0, allowed=0.0) is False   # no pie at all: not even a first match
