"""The pool clock's changes of scale, the loop-lag figures and the lag policy (pure)."""
from __future__ import annotations

import asyncio

import pytest

from daemons.core import lagpolicy
from daemons.core.clock import PoolClock, Segment
from daemons.core.lag import LagWindow
from daemons.core.lagpolicy import DaemonLag, LagPolicy


class Wall:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_clock_without_changes_is_epoch_plus_scaled_wall():
    w = Wall(1000.0)
    c = PoolClock(scale=10.0, epoch=900.0, wall=w)
    assert c.now() == 900.0 + 100.0 * 10
    assert c.wall_at(c.now() + 50) == 1005.0
    assert c.changes == 0


def test_retime_is_continuous_and_applies_at_the_announced_instant():
    w = Wall(1000.0)
    c = PoolClock(scale=100.0, epoch=1000.0, wall=w)
    seg = c.retime(1002.0, 10.0)
    assert seg == Segment(1002.0, 1000.0 + 200.0, 10.0)
    w.t = 1001.0
    assert c.now() == 1100.0 and c.scale == 100.0        # not yet
    assert c.wall_at(1300.0) == 1002.0 + 100.0 / 10.0    # beyond the switch: at the new scale
    assert c.wall_at(1150.0) == 1001.5                   # before it: at the old
    w.t = 1002.0
    assert c.now() == 1200.0
    w.t = 1003.0
    assert c.now() == 1210.0 and c.scale == 10.0 and c.changes == 1


def test_one_announced_change_at_a_time():
    w = Wall(0.0)
    c = PoolClock(scale=1000.0, epoch=0.0, wall=w)
    first = c.retime(10.0, 100.0)
    with pytest.raises(ValueError, match="already announced"):
        c.retime(20.0, 10.0)
    w.t = 10.0
    assert c.latest() == first
    second = c.retime(20.0, 10.0)
    assert second == Segment(20.0, first.pool_at(20.0), 10.0) == Segment(20.0, 11000.0, 10.0)
    w.t = 25.0
    assert c.now() == 11050.0 and c.scale == 10.0


def test_two_processes_that_follow_one_segment_agree():
    w = Wall(5000.0)
    collector = PoolClock(scale=1000.0, epoch=4000.0, wall=w)
    schedd = PoolClock(scale=1000.0, epoch=4000.0, wall=w)
    seg = collector.retime(5001.0, 250.0)
    schedd.follow(seg)
    for t in (5000.5, 5001.0, 5001.7, 5030.0):
        w.t = t
        assert schedd.now() == collector.now()


def test_a_late_follower_holds_still_rather_than_going_back():
    w = Wall(100.0)
    c = PoolClock(scale=100.0, epoch=0.0, wall=w)
    before = c.now()                                  # 10,000
    # Heard of a change of scale at wall 99 only now: by the new segment it is earlier.
    c.follow(Segment(99.0, 9900.0, 1.0))
    assert c.now() == before
    w.t = 150.0
    assert c.now() == before                          # 9,951 by the segment: still held
    w.t = 200.0
    assert c.now() == 9900.0 + 101.0                  # caught up: runs on at the new scale


def test_a_clock_started_after_a_change_adopts_it_at_once():
    """A daemon restarted in a slowed pool read its clock from the epoch at the configured
    scale before it asked the collector: adopting the pool's segment moves it back."""
    w = Wall(1000.0)
    pool = PoolClock(scale=100.0, epoch=0.0, wall=w)
    pool.retime(500.0, 25.0)                 # decided long ago
    restarted = PoolClock(scale=100.0, epoch=0.0, wall=w)
    assert restarted.now() == 100_000.0      # the epoch's reading, far ahead of the pool's
    assert restarted.is_newer(pool.latest())
    restarted.adopt(pool.latest())
    assert restarted.now() == pool.now() == 50_000.0 + 500.0 * 25
    assert restarted.scale == 25.0 and restarted.changes == 1
    w.t = 1010.0
    assert restarted.now() == pool.now()


def test_a_clock_does_not_follow_an_older_segment():
    """A collector restarted without the pool's changes announces the epoch's segment: the
    daemons keep the newer one they follow."""
    w = Wall(1000.0)
    c = PoolClock(scale=100.0, epoch=0.0, wall=w)
    seg = c.retime(1001.0, 25.0)
    w.t = 1002.0
    restarted_collector = PoolClock(scale=100.0, epoch=0.0, wall=w)
    assert not c.is_newer(restarted_collector.latest())
    assert not c.is_newer(seg)
    assert restarted_collector.is_newer(seg)
    # The epoch's segment read back from an ad, its wall time rounded up in print.
    fresh = PoolClock(scale=100.0, epoch=1795877692.1234567, wall=w)
    printed = Segment(float("%.15g" % fresh.epoch), float("%.15g" % fresh.epoch), 100.0)
    assert printed.wall > fresh.epoch and not fresh.is_newer(printed)


def test_timers_and_sleeps_wait_for_pool_time_after_the_scale_falls():
    async def main() -> list[float]:
        c = PoolClock(scale=1000.0, epoch=0.0)
        fired: list[float] = []
        due = c.now() + 100.0                          # 0.1 s of wall time at 1000
        c.call_at(due, lambda: fired.append(c.now()))
        c.retime(c.wall() + 0.02, 100.0)               # 20 ms from now, 10x slower
        await c.sleep_until(due)
        assert c.now() >= due
        for _ in range(200):
            if fired:
                break
            await asyncio.sleep(0.01)
        return fired + [due]
    got = asyncio.run(main())
    assert len(got) == 2 and got[0] >= got[1]


def test_lag_window_figures():
    lw = LagWindow(window_s=1.0)
    lw.add(10.0, 0.002, 100.0)
    lw.add(10.5, 0.010, 100.0)
    lw.add(10.9, 0.004, 100.0)
    f = lw.figures()
    assert (f.last_s, f.recent_max_s, f.sustained_s, f.max_s) == (0.004, 0.010, 0.004, 0.010)
    assert f.recent_max_pool_s == pytest.approx(1.0) and f.sustained_pool_s == pytest.approx(0.4)
    lw.add(11.8, 0.003, 100.0)                         # 10.0 and 10.5 leave the window
    f = lw.figures()
    assert (f.recent_max_s, f.sustained_s, f.max_s, f.samples) == (0.004, 0.003, 0.010, 4)
    # Asked while the timer is overdue: that counts as lag too.
    f = lw.figures(now_wall=13.0, scale=100.0, period_s=0.1)
    assert f.last_s == pytest.approx(1.1) and f.last_pool_s == pytest.approx(110.0)


def test_sustained_is_the_median_over_most_of_the_window():
    lw = LagWindow(window_s=2.0)
    lw.add(0.0, 0.5, 1.0)
    assert lw.figures().sustained_s == 0.0                # one sample is no window
    for i in range(1, 11):
        lw.add(i * 0.1, 0.001, 1.0)
    lw.add(1.2, 1.0, 1.0)                                  # one long pause
    f = lw.figures()
    assert f.sustained_s == 0.001 and f.recent_max_s == 1.0
    for i in range(8):                                     # then every turn of the loop is long
        lw.add(1.5 + i * 0.5, 0.4, 1.0)
    assert lw.figures().sustained_s == 0.4


def test_a_negative_lateness_is_none():
    lw = LagWindow()
    lw.add(1.0, -0.001, 10.0)
    assert lw.figures().last_s == 0.0


P = LagPolicy(policy="slow", max_lag_s=60.0, min_time_scale=10.0)


def test_policy_no_lag_no_action():
    assert lagpolicy.decide(P, [], 1000.0, 0.0, None) is None
    assert lagpolicy.decide(P, [DaemonLag("schedd s", 0.05)], 1000.0, 0.0, None) is None   # 50 pool s


def test_policy_slow_to_half_the_threshold_by_at_most_ten_times():
    # 0.2 s behind at 1000: 200 pool s; to get under 30 pool s the scale must be 150.
    a = lagpolicy.decide(P, [DaemonLag("startd a", 0.01), DaemonLag("schedd s", 0.2)], 1000.0, 0.0, None)
    assert isinstance(a, lagpolicy.Slow) and a.scale == 150.0 and "schedd s" in a.reason
    a = lagpolicy.decide(P, [DaemonLag("schedd s", 10.0)], 1000.0, 0.0, None)
    assert a == lagpolicy.Slow(100.0, a.reason)                # at most 10x at a time
    a = lagpolicy.decide(P, [DaemonLag("schedd s", 0.075)], 1000.0, 0.0, None)
    assert a == lagpolicy.Slow(400.0, a.reason)                # 75 pool s behind: 0.075 s x 400 = 30
    a = lagpolicy.decide(P, [DaemonLag("schedd s", 10.0)], 50.0, 0.0, None)
    assert a == lagpolicy.Slow(10.0, a.reason)                 # never below the floor


def test_policy_waits_after_a_change_and_says_when_at_the_floor():
    lags = [DaemonLag("schedd s", 10.0)]
    assert lagpolicy.decide(P, lags, 100.0, 3.0, 0.0) is None
    assert isinstance(lagpolicy.decide(P, lags, 100.0, 3.0 + lagpolicy.HOLDOFF_S, 3.0), lagpolicy.Slow)
    assert isinstance(lagpolicy.decide(P, lags, 10.0, 100.0, None), lagpolicy.Floor)


def test_policy_stop_and_warn_name_the_daemon_and_the_knob():
    lags = [DaemonLag("schedd s@h", 1.0)]
    stop = lagpolicy.decide(LagPolicy(policy="stop"), lags, 100.0, 0.0, None)
    assert isinstance(stop, lagpolicy.Stop)
    assert "schedd s@h" in stop.reason and "HTCPOOL_MAX_LAG" in stop.reason and "100 pool s" in stop.reason
    assert isinstance(lagpolicy.decide(LagPolicy(policy="warn"), lags, 100.0, 0.0, None), lagpolicy.Warn)


def test_a_change_is_announced_further_ahead_when_loops_turn_slowly():
    assert lagpolicy.notice_s(0.01) == lagpolicy.NOTICE_S
    assert lagpolicy.notice_s(1.5) == 6.0
    assert lagpolicy.notice_s(60.0) == lagpolicy.MAX_NOTICE_S


def test_recent_max_is_the_most_of_a_peers_samples_within_the_window():
    from daemons.core.lag import RecentMax
    r = RecentMax(window_s=100.0)
    assert r.get("a", 0.0) == 0.0 and r.most(0.0) == 0.0
    r.add("a", 0.0, 50.0)
    r.add("a", 10.0, 20.0)          # smaller, later: the most once the 50 has gone
    r.add("b", 20.0, 70.0)
    assert (r.get("a", 20.0), r.get("b", 20.0), r.most(20.0)) == (50.0, 70.0, 70.0)
    assert r.get("a", 105.0) == 20.0            # the 50 (at 0) is older than the window
    r.add("a", 106.0, 30.0)                     # a larger one drops the smaller before it
    assert list(r._by_key["a"]) == [(106.0, 30.0)]
    assert r.most(500.0) == 0.0 and r._by_key == {}    # every sample gone: the peers too


def test_late_ad_updates_are_named_as_such_and_slowed_for_like_a_late_loop():
    lags = [DaemonLag("schedd s@h", 0.1), DaemonLag("machine startd@h", 2.0, "ad updates", 300.0)]
    warn = lagpolicy.decide(LagPolicy(policy="warn"), lags, 100.0, 0.0, None)
    assert isinstance(warn, lagpolicy.Warn)
    assert warn.reason.startswith("the machine startd@h's ad updates run 200 pool s (2.00 s) behind at TIME_SCALE 100")
    # Rounds of 2 + 300 / 100 = 5 s of wall time: at 66 they end (5 x 66 - 300) = 30 pool s late,
    # half of HTCPOOL_MAX_LAG.
    slow = lagpolicy.decide(LagPolicy(), lags, 100.0, 0.0, None)
    assert isinstance(slow, lagpolicy.Slow) and slow.scale == 66.0


def test_round_lateness_counts_when_two_of_the_last_three_rounds_ran_late():
    from daemons.core.lag import RoundLateness
    r = RoundLateness()
    r.add(500.0, 100.0)
    r.add(-20.0, 100.0)                         # ended before the next round was due: on time
    assert r.sustained() == (0.0, 0.0)          # fewer than three rounds: nothing sustained yet
    r.add(0.0, 100.0)
    assert r.sustained() == (0.0, 0.0)          # one slow round of three (a pause, a burst) is not lag
    assert r.max_pool_s == 500.0 and r.recent_max_wall() == 5.0
    r.add(300.0, 100.0)
    r.add(400.0, 100.0)
    assert r.sustained() == (3.0, 300.0)        # the lower median: two of three at least this late
    r.add(200.0, 50.0)                          # the scale changed: rounds at 100 no longer count
    assert r.sustained() == (0.0, 0.0) and r.recent_max_wall() == 4.0
    r.add(100.0, 50.0)
    r.add(0.0, 50.0)
    assert r.sustained() == (2.0, 100.0)
    r.skip()                                    # a round a fault slowed: the window starts again
    assert r.sustained() == (0.0, 0.0) and r.recent_max_wall() == 0.0
