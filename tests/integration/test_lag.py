"""Lag across real processes: every daemon publishes its event loop's lag; the collector's
policy slows the whole pool's clock (every daemon switching at one instant) or stops it.

A pool is made to "lag" by a threshold no event loop can meet (HTCPOOL_MAX_LAG of a
ten-thousandth of a pool second): timers are always some microseconds late.
"""
from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request

import pytest

from daemons.cli.client import wait_for
from daemons.cli.pool import LocalPool
from daemons.core.clock import PoolClock, Segment
from daemons.core.fault_admin import fault_to_pb
from daemons.core.faults import Fault

from .conftest import FAST, SLEEP, attr, wait_jobs, wait_slots

DAEMON_TYPES = ("Collector", "Negotiator", "Scheduler", "StartDaemon")
LAGS = ("HtcpoolLoopLag", "HtcpoolLoopLagSustained", "HtcpoolLoopLagMax", "HtcpoolLoopLagWall",
        "HtcpoolLoopLagSustainedWall")


async def _daemon_ads(c) -> dict[str, object]:
    out = {}
    for t in DAEMON_TYPES:
        found = await c.ads(t)
        if found:
            out[t] = found[0]
    return out


def test_every_daemon_publishes_its_loop_lag(make_pool):
    pool = make_pool()

    async def main():
        async with pool.client() as c:
            async def all_there():
                found = await _daemon_ads(c)
                if len(found) < len(DAEMON_TYPES):
                    return None
                ok = all(isinstance(attr(a, k), (int, float)) for a in found.values() for k in LAGS)
                return found if ok else None
            found = await wait_for(all_there, timeout_s=30, what="every daemon's ad with its loop lag")
            for t, a in found.items():
                assert all(attr(a, k) >= 0 for k in LAGS), t
                assert attr(a, "HtcpoolLoopLagMax") >= attr(a, "HtcpoolLoopLagSustained")
            collector = found["Collector"]
            assert attr(collector, "HtcpoolLagPolicy") == "slow"
            assert attr(collector, "HtcpoolClockScale") == 100.0
            assert attr(collector, "HtcpoolConfiguredTimeScale") == 100.0
            assert attr(collector, "HtcpoolPoolLagWall") >= 0
    asyncio.run(main())
    url = pool.daemons["schedd"].info["status_url"].rstrip("/") + "/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    for name in ("loop_lag_seconds", "loop_lag_pool_seconds", "loop_lag_sustained_pool_seconds",
                 "loop_lag_max_pool_seconds", "time_scale"):
        assert f"htcpool_schedd_{name} " in text, name


def test_slow_policy_slows_every_daemon_at_one_instant_and_jobs_keep_their_duration(make_pool):
    # Scale 100 -> 25 (the floor) as soon as the collector's start-up grace is over.
    pool = make_pool("HTCPOOL_MAX_LAG = 0.0001\nHTCPOOL_MIN_TIME_SCALE = 25\n")

    async def main():
        async with pool.client() as c:
            # A clock kept outside the pool (an experiment's sampler) that follows the collector.
            mine = PoolClock(scale=100.0, epoch=pool.epoch)
            follower = asyncio.create_task(c.keep_following(mine))
            # A job that runs across the change: its run time must be its duration in pool seconds.
            await c.submit(SLEEP.format(seconds=1200, n=1), "lag.sub")

            async def slowed():
                found = await _daemon_ads(c)
                scales = {t: attr(a, "TimeScale") for t, a in found.items()}
                return found if len(found) == len(DAEMON_TYPES) and set(scales.values()) == {25.0} else None
            found = await wait_for(slowed, timeout_s=60, interval_s=0.2,
                                   what="every daemon's ad at TIME_SCALE 25")
            collector = found["Collector"]
            seg = Segment(attr(collector, "HtcpoolClockWall"), attr(collector, "HtcpoolClockPool"),
                          attr(collector, "HtcpoolClockScale"))
            assert seg.scale == 25.0
            for t, a in found.items():
                assert attr(a, "HtcpoolTimeScaleChanges") == 1, t
            # Every daemon's clock is the collector's: a ping's pool time lies between the
            # segment's readings just before and just after the call.
            for key, d in pool.daemons.items():
                before = time.time()
                reply = await c.ping(d.address)
                after = time.time()
                assert seg.pool_at(before) - 0.01 <= reply.pool_time <= seg.pool_at(after) + 0.01, key

            async def followed():
                return mine.current().scale == 25.0 and mine.changes == 1
            await wait_for(followed, timeout_s=30, interval_s=0.1, what="the client's clock at TIME_SCALE 25")
            assert abs(mine.now() - seg.pool_at(time.time())) < 1.0
            follower.cancel()

            done = await wait_jobs(c, "JobStatus == 4", 1, history=True, timeout_s=120)
            ran = attr(done[0], "RemoteWallClockTime")
            assert ran >= 1200 - 1, f"the job ran {ran} pool s of its 1200"
    asyncio.run(main())
    log = (pool.state_dir / "log" / "CollectorLog").read_text()
    assert "HTCPOOL_LAG_POLICY = slow: TIME_SCALE 100 -> 25" in log
    assert "pool clock: TIME_SCALE 100 -> 25" in (pool.state_dir / "log" / "SchedLog").read_text()


def test_stop_policy_stops_the_pool_saying_why(tmp_path):
    cfg = tmp_path / "pool.conf"
    # The policy acts 1 s after the collector starts (HTCPOOL_LAG_GRACE; 10 s by default).
    cfg.write_text(FAST + "HTCPOOL_LAG_POLICY = stop\nHTCPOOL_MAX_LAG = 0.0001\nHTCPOOL_LAG_GRACE = 1\n")
    pool = LocalPool(tmp_path / "pool", cfg).start()
    try:
        deadline = time.monotonic() + 60
        while any(d.alive() for d in pool.daemons.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(d.alive() for d in pool.daemons.values()), "the pool is still running"
        codes = {k: d.proc.returncode for k, d in pool.daemons.items()}
        assert codes == {k: 3 for k in pool.daemons}, codes
        out = (pool.state_dir / "log" / "schedd.out").read_text()
        assert "stopped: the pool cannot keep up with its time scale" in out
        assert "HTCPOOL_MAX_LAG = 0.0001" in out
        assert "HTCPOOL_LAG_POLICY = stop: stopping the pool" in (pool.state_dir / "log" / "CollectorLog").read_text()
    finally:
        pool.stop()


def test_daemons_restarted_after_a_slowdown_keep_the_pools_clock(make_pool):
    """A restarted daemon starts on the configured TIME_SCALE counted from POOL_EPOCH: far ahead
    of a pool that has been slowed. It must take the collector's clock before its clock runs,
    not hold still until the slowed pool catches up (which stalled every timer of a schedd
    restarted in a loaded test run). A restarted collector has lost the change: it takes the
    pool's clock back from the daemons' ads."""
    pool = make_pool("HTCPOOL_MAX_LAG = 0.0001\nHTCPOOL_MIN_TIME_SCALE = 25\n")

    async def agree(c, what, wait=True):
        async def check():
            found = await c.ads("Collector")
            if not found or attr(found[0], "HtcpoolClockScale") != 25.0:
                return None
            a = found[0]
            seg = Segment(attr(a, "HtcpoolClockWall"), attr(a, "HtcpoolClockPool"), 25.0)
            for d in pool.daemons.values():
                before = time.time()
                reply = await c.ping(d.address)
                after = time.time()
                if not seg.pool_at(before) - 0.01 <= reply.pool_time <= seg.pool_at(after) + 0.01:
                    return None
            return seg
        if not wait:
            seg = await check()
            assert seg is not None, what
            return seg
        return await wait_for(check, timeout_s=60, interval_s=0.2, what=what)

    async def main():
        async with pool.client() as c:
            first = await agree(c, "every daemon on the slowed clock")
            # Long enough slowed that a clock counted from the epoch at 100 is far ahead.
            async def slowed_a_while():
                return time.time() > first.wall + 3.0
            await wait_for(slowed_a_while, timeout_s=30, what="3 s at the slowed scale")
            pool.kill("schedd", signal.SIGKILL)
            pool.restart("schedd")
            # Once it is up (it has reported its address), at once: no catching up.
            await agree(c, "the restarted schedd on the pool's clock", wait=False)
            pool.kill("collector", signal.SIGKILL)
            pool.restart("collector")
            seg = await agree(c, "the restarted collector on the pool's clock")
            assert seg.pool_at(time.time()) == pytest.approx(first.pool_at(time.time()), abs=1.0)
    asyncio.run(main())


def test_a_startd_whose_ad_updates_overrun_update_interval_lags_though_its_loop_keeps_time(make_pool):
    # Rounds due every pool second (a millisecond of wall time at TIME_SCALE 1000), each of
    # which refreshes 300 slot ads: every round ends several pool seconds after the next was
    # due, while no callback keeps the event loop waiting that long.
    pool = make_pool("TIME_SCALE = 1000\nUPDATE_INTERVAL = 1\nHTCPOOL_LAG_POLICY = warn\nHTCPOOL_MAX_LAG = 5\n"
                     "HTCPOOL_LAG_GRACE = 1\n", machines=300)
    startd = pool.daemons["startd1"].info["status_url"].rstrip("/")
    collector = pool.daemons["collector"].info["status_url"].rstrip("/")

    def page(url: str) -> str:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def gauge(text: str, name: str) -> float:
        return float(next(line.rpartition(" ")[2] for line in text.splitlines() if line.startswith(name + " ")))

    async def main():
        async def named():
            log = (pool.state_dir / "log" / "CollectorLog").read_text()
            return "'s ad updates run" in log or None
        await wait_for(named, timeout_s=60, interval_s=0.5, what="the collector's warning about late ad updates")
    asyncio.run(main())
    log = (pool.state_dir / "log" / "CollectorLog").read_text()
    line = next(line for line in log.splitlines() if "'s ad updates run" in line)
    assert "the startdaemon startd@" in line and "more than HTCPOOL_MAX_LAG = 5" in line
    assert "results from this stretch of the run are not faithful to TIME_SCALE" in line
    metrics = page(startd + "/metrics")
    assert gauge(metrics, "htcpool_startd_update_lag_max_pool_seconds") > 5
    status = json.loads(page(collector + "/status"))
    assert any(k.startswith("startdaemon startd@") for k in status["lag_policy"]["update_lags_wall_s"])


@pytest.mark.parametrize("side", ["client", "server"])
def test_ad_updates_a_fault_delays_are_not_lag(make_pool, side):
    """An injected delay is pool time, which no slower clock would shorten: the startd leaves
    out a round its own fault slowed, and the collector, which alone knows of a delay it
    injected, leaves out the pool's update lag for a while after one. One machine's round
    takes a few ms of wall time, well inside the 20 ms of UPDATE_INTERVAL even on a busy
    machine; each delayed one ends about 80 pool s late."""
    pool = make_pool("TIME_SCALE = 1000\nUPDATE_INTERVAL = 20\nHTCPOOL_LAG_POLICY = warn\nHTCPOOL_MAX_LAG = 30\n"
                     "HTCPOOL_LAG_GRACE = 1\n")
    startd, collector = pool.daemons["startd1"], pool.daemons["collector"]
    where = startd if side == "client" else collector
    fault = Fault("slowads", side=side, method="UpdateAds", peer="*" if side == "client" else "startd",
                  delay_s=100.0)

    async def main():
        async with pool.client() as c:
            await wait_slots(c, 1)
            await c.set_faults(where.address, [fault_to_pb(fault)])

            async def fired():
                return (await c.list_faults(where.address)).faults[0].fired >= 10 or None
            await wait_for(fired, timeout_s=60, interval_s=0.2, what="ten ad updates delayed by 100 pool s")
    asyncio.run(main())
    url = startd.info["status_url"].rstrip("/") + "/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        metrics = r.read().decode()
    sustained = float(next(line.rpartition(" ")[2] for line in metrics.splitlines()
                           if line.startswith("htcpool_startd_update_lag_sustained_pool_seconds ")))
    if side == "client":
        assert sustained == 0.0          # its own fault: the rounds are not counted
    else:
        assert sustained > 30.0          # late, and the startd cannot tell why
    assert "'s ad updates run" not in (pool.state_dir / "log" / "CollectorLog").read_text()
