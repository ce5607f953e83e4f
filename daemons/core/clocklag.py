"""The pool's one clock and this daemon's lag, as every daemon keeps them (a Daemon mixin).

A daemon takes the pool's clock from the collector before it runs (its epoch, and any
change of scale the lag policy made), follows the collector's announced changes while
it runs, and stops when the collector orders it to. Its ad says how late its event loop
and its ad updates run (lag.py), which is what the collector's lag policy decides on.
"""
from __future__ import annotations

import asyncio
from typing import Any

from daemons.core import ads
from daemons.core.clock import CLOCK_SEGMENT_ATTRS, segment_from
from daemons.core.rpc import call_with_retry, describe

# Wall seconds between two looks at the collector's clock: well inside the notice the
# collector gives of a change of scale, so that every daemon switches at the same instant.
FOLLOW_CLOCK_S = 0.3
FOLLOW_GIVE_UP_S = 10.0
CLOCK_ATTRS = [*CLOCK_SEGMENT_ATTRS, "HtcpoolLagStop", "HtcpoolPoolLagWall"]


class ClockAndLag:
    """Needs the Daemon's clock, collector, log, lag, update_lag, epoch_known,
    pool_lag_wall, lag_stop_reason and request_shutdown."""

    def lag_attrs(self) -> dict[str, Any]:
        """How far this daemon's event loop runs behind, for its ad (pool seconds unless Wall)."""
        lag = self.lag.figures()
        update_wall, update_pool = self.update_lag.sustained()
        return {
            "HtcpoolLoopLag": round(lag.recent_max_pool_s, 3),
            "HtcpoolLoopLagSustained": round(lag.sustained_pool_s, 3),
            "HtcpoolLoopLagMax": round(lag.max_pool_s, 3),
            "HtcpoolLoopLagWall": round(lag.recent_max_s, 4),
            "HtcpoolLoopLagSustainedWall": round(lag.sustained_s, 4),
            # An update round that ends after the next was due (lag.RoundLateness).
            "HtcpoolUpdateLag": round(update_pool, 3),
            "HtcpoolUpdateLagWall": round(update_wall, 4),
            "HtcpoolUpdateLagRecentWall": round(self.update_lag.recent_max_wall(), 4),
            "HtcpoolUpdateLagMax": round(self.update_lag.max_pool_s, 3),
            "HtcpoolTimeScaleChanges": self.clock.changes,
            **self.clock_attrs(),
        }

    def clock_attrs(self) -> dict[str, float]:
        """The clock segment this daemon follows once the pool's scale has changed, for its ad:
        a collector that restarted and lost the change takes the pool's clock back from these.
        (Before any change there is nothing to take back; a daemon configured with another
        POOL_EPOCH than the collector's must not impose it on the pool.)"""
        if not self.clock.changes and self.clock.pending is None:
            return {}
        seg = self.clock.latest()
        return dict(zip(CLOCK_SEGMENT_ATTRS, (seg.wall, seg.pool, seg.scale)))

    async def _learn_clock(self) -> None:
        """Take the pool's clock from the collector before this daemon's runs: its epoch, unless
        POOL_EPOCH is configured, and the lag policy's latest change of scale. A daemon
        restarted in a slowed pool would otherwise count from the epoch at the configured
        scale, and hold every timer still until the pool caught up with it."""
        assert self.collector is not None
        where = self.collector.where

        async def ask() -> list[str]:
            return await self.collector.query("Collector", projection=["PoolEpoch", "TimeScale", *CLOCK_SEGMENT_ATTRS],
                                              give_up_after_s=1.0)
        if self.epoch_known:
            try:
                texts = await ask()
            except Exception as e:
                # A pool with a configured epoch may start before its collector: keep the
                # configured clock; _follow_clock takes any change once the collector answers.
                self.log.info("pool clock not learned from %s (%s): TIME_SCALE %g from POOL_EPOCH",
                              where, describe(e), self.clock.scale)
                return
        else:
            self.log.info("POOL_EPOCH not configured; asking %s", where)
            texts = await call_with_retry(f"learning the pool epoch from {where}", ask,
                                          give_up_after_s=None, logger=self.log)
        for t in texts:
            ad = ads.parse_ad(t)
            if not self.epoch_known:
                epoch = ads.get(ad, "PoolEpoch")
                if not isinstance(epoch, (int, float)):
                    continue
                self.clock.epoch = float(epoch)
                self.epoch_known = True
                self.log.info("pool epoch %.3f learned from the collector", epoch)
            seg = segment_from(lambda a: ads.get(ad, a))
            if seg is not None and self.clock.is_newer(seg):
                self.log.warning("pool clock: TIME_SCALE %g from pool time %.0f, as the collector says (the lag "
                                 "policy changed it before this daemon started, or the collector counts from "
                                 "another epoch)", seg.scale, seg.pool)
                self.clock.adopt(seg)
            # A lag stop ordered meanwhile is heard by _follow_clock once this daemon is up
            # (its starter sees it start, then stop saying why).
            return
        if not self.epoch_known:
            raise RuntimeError("the collector's ad has no PoolEpoch")

    def lag_allowance_s(self) -> float:
        """Pool seconds a deadline set by a peer's action (a claim's lease) is stretched by, so
        that the pool's own lag never passes for a peer's absence: the worst recent lag (loop
        or updates) of the pool (as the collector says) or of this daemon, whichever is more, at the
        current scale. A peer that is gone stops advertising; its lag then no longer counts."""
        return max(self.pool_lag_wall, self.lag.figures().recent_max_s,
                   self.update_lag.recent_max_wall()) * self.clock.scale

    # ---- one clock for the pool ----------------------------------------------------------
    async def _follow_clock(self) -> None:
        """Keep to the collector's clock: a change of scale (the lag policy) or the order to stop."""
        assert self.collector is not None
        while True:
            await asyncio.sleep(FOLLOW_CLOCK_S)
            try:
                # Generous: the daemon that lags most is the one that most needs to hear.
                texts = await self.collector.query("Collector", projection=CLOCK_ATTRS,
                                                   give_up_after_s=FOLLOW_GIVE_UP_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                continue  # an unreachable collector is said by the advertising; keep the clock we have
            for t in texts:
                try:
                    self._adopt_clock(ads.parse_ad(t))
                except ads.AdError:
                    continue

    def _adopt_clock(self, ad) -> None:
        seg = segment_from(lambda a: ads.get(ad, a))
        if seg is not None:
            if self.clock.is_newer(seg):
                self.log.warning("pool clock: TIME_SCALE %g -> %g from pool time %.0f (the collector's lag policy)",
                                 self.clock.latest().scale, seg.scale, seg.pool)
                self.clock.follow(seg)
        pool_lag = ads.get(ad, "HtcpoolPoolLagWall")
        if isinstance(pool_lag, (int, float)) and not isinstance(pool_lag, bool):
            self.pool_lag_wall = max(0.0, float(pool_lag))
        stop = ads.get(ad, "HtcpoolLagStop")
        if isinstance(stop, str) and stop and not self.lag_stop_reason:
            self.lag_stop_reason = stop
            self.log.error("stopping: the pool cannot keep up with its time scale (HTCPOOL_LAG_POLICY = stop): %s",
                           stop)
            self.request_shutdown()
