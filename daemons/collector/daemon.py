"""The collector daemon: the AdStore behind gRPC, with expiry on pool time."""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

import grpc

from daemons.collector.reachability import Prober
from daemons.collector.service import CollectorService
from daemons.collector.store import AdStore
from daemons.core import ads
from daemons.core.clock import PoolClock, segment_from
from daemons.core.collector_client import UPDATE_CHUNK_ADS
from daemons.core.common import CommonConfig
from daemons.core.config import Param
from daemons.core import lagpolicy
from daemons.core.daemon import Daemon, cancel_and_wait
from daemons.core.lagpolicy import DaemonLag
from daemons.pb.htcpool import collector_pb2_grpc


LAG_DECIDE_S = 0.5            # wall seconds between two looks at the pool's lag
LAG_REPORT_LIFETIME_S = 10.0  # wall seconds a daemon's reported lag counts without a newer one
STOP_GRACE_S = 3.0            # wall seconds between the order to stop and the collector's own exit


@dataclass(frozen=True)
class CollectorConfig:
    classad_lifetime_s: float = 900.0   # CLASSAD_LIFETIME
    collector_name: str = ""            # COLLECTOR_NAME
    # What one update may carry, so no peer can fill the collector's memory in one call.
    # Daemons send their ads in chunks of UPDATE_CHUNK_ADS (core/collector_client.py).
    max_ad_size: int = 1_048_576        # COLLECTOR_MAX_AD_SIZE: characters of one ad
    max_ads_per_update: int = 1_000     # COLLECTOR_MAX_ADS_PER_UPDATE: ads (and invalidated names) per call
    # HTCondor's knob; its default (0) sets no limit, htcpool's keeps one costly constraint
    # from holding the collector for minutes.
    query_max_worktime_s: float = 10.0  # COLLECTOR_QUERY_MAX_WORKTIME

    @classmethod
    def from_param(cls, p: Param) -> "CollectorConfig":
        return cls(classad_lifetime_s=float(p.int("CLASSAD_LIFETIME", 900, minimum=1) or 900),
                   collector_name=p.str("COLLECTOR_NAME", "") or "",
                   max_ad_size=p.int("COLLECTOR_MAX_AD_SIZE", cls.max_ad_size, minimum=1024,
                                     maximum=64 * 1024 * 1024) or cls.max_ad_size,
                   max_ads_per_update=p.int("COLLECTOR_MAX_ADS_PER_UPDATE", cls.max_ads_per_update,
                                            minimum=UPDATE_CHUNK_ADS) or cls.max_ads_per_update,
                   query_max_worktime_s=float(p.int("COLLECTOR_QUERY_MAX_WORKTIME", 10, minimum=0) or 0))


class CollectorDaemon(Daemon):
    role = "collector"
    my_type = "Collector"

    def __init__(self, common: CommonConfig, cfg: CollectorConfig, clock: PoolClock | None = None) -> None:
        super().__init__(common, clock)
        # The collector is where the others learn the pool's epoch: without POOL_EPOCH,
        # its own start is the epoch (there is nobody to ask; its store is still empty).
        self.epoch_known = True
        self.cfg = cfg
        self.store = AdStore(cfg.classad_lifetime_s)
        self.queries_total = 0
        # Says, once per address, when an advertised address cannot be reached.
        self.prober = Prober(self.log)
        # The pool's lag: each daemon's sustained and recent worst loop lag (wall s) as its last ad
        # said, and when it said it.
        self.lags: dict[str, tuple[float, float, float]] = {}
        # ... and how far its ad updates run past UPDATE_INTERVAL: sustained, recent worst, when said.
        self.update_lags: dict[str, tuple[float, float, float]] = {}
        self.update_intervals: dict[str, float] = {}     # its UpdateInterval (pool s)
        self._faults_seen = 0            # our fault layer's count of fired faults, last looked at
        self._fault_wall = -math.inf     # when one last fired (wall)
        self.lag_events = {"slowed": 0, "warned": 0, "at_floor": 0, "stopped": 0}
        self.lag_last_change: float | None = None
        self.lag_last_said = 0.0
        self.lag_since = time.time()
        self._lag_task: asyncio.Task | None = None

    def default_name(self) -> str:
        return self.common.full_hostname

    def query_budget(self):
        """COLLECTOR_QUERY_MAX_WORKTIME for one query (wall time, as HTCondor measures it)."""
        return ads.work_budget(self.cfg.query_max_worktime_s, "COLLECTOR_QUERY_MAX_WORKTIME")

    def add_services(self, server: grpc.aio.Server) -> None:
        collector_pb2_grpc.add_CollectorServicer_to_server(CollectorService(self), server)

    async def on_start(self) -> None:
        # Sweep often enough that an ad is gone within a tenth of its lifetime of expiring.
        self.add_periodic("expire", max(1.0, self.cfg.classad_lifetime_s / 10), self.expire)
        # On wall time: a pool-time period would stretch as the policy slows the clock.
        self.lag_since = time.time()
        self._lag_task = asyncio.create_task(self._lag_loop(), name="collector:lag-policy")

    async def on_close(self) -> None:
        if self._lag_task is not None:
            await cancel_and_wait(self._lag_task)
        await self.prober.close()

    # ---- the pool's lag policy ---------------------------------------------------------------
    def note_lag(self, ad) -> None:
        """A daemon's ad arrived: remember its sustained loop lag and update lag."""
        who = f'{str(ads.get(ad, "MyType")).lower()} {ads.get(ad, "Name")}'
        for attr, worst_attr, into in (("HtcpoolLoopLagSustainedWall", "HtcpoolLoopLagWall", self.lags),
                                       ("HtcpoolUpdateLagWall", "HtcpoolUpdateLagRecentWall", self.update_lags)):
            lag, worst = ads.as_number(ads.get(ad, attr)), ads.as_number(ads.get(ad, worst_attr))
            if lag is not None:
                into[who] = (lag, lag if worst is None else worst, time.time())
        interval = ads.as_number(ads.get(ad, "UpdateInterval"))
        if interval is not None and interval > 0:
            self.update_intervals[who] = interval

    def _heard_lags(self, now_wall: float) -> list[tuple[str, str, float, float]]:
        """(who, what, sustained, recent worst) of every daemon heard from lately (wall s):
        its loop, and its ad updates unless a fault fired here lately. A delay injected
        into our Update calls is pool time and no slower clock shortens it, so for three
        update intervals after one (the rounds a daemon's figure spans) the daemons'
        update lag may be the fault's, and is not counted."""
        if self.faults.fired_total != self._faults_seen:
            self._faults_seen, self._fault_wall = self.faults.fired_total, now_wall
        blind = now_wall - self._fault_wall < 3 * self.common.update_interval_s / self.clock.scale + \
            LAG_REPORT_LIFETIME_S
        horizon = now_wall - LAG_REPORT_LIFETIME_S
        out = []
        for what, lags in (("", self.lags), ("ad updates", self.update_lags)):
            for who, (lag, worst, heard) in list(lags.items()):
                if heard < horizon:
                    del lags[who]  # gone quiet (or gone): its old figure no longer describes the pool
                    if what:
                        self.update_intervals.pop(who, None)
                elif not (what and blind):
                    out.append((who, what, lag, worst))
        return out

    def note_clock(self, ad) -> None:
        """A daemon's ad arrived: if it follows a newer clock segment than ours, this collector
        restarted since the lag policy changed the pool's scale (or started after it, in a
        pool restarted piece by piece). The pool's clock is the daemons' and goes on: take it
        back rather than announce the epoch's, which would move every clock far ahead."""
        seg = segment_from(lambda a: ads.get(ad, a))
        if seg is None or not self.clock.is_newer(seg):
            return
        self.log.warning("pool clock: TIME_SCALE %g from pool time %.0f, taken from the ad of %s %s "
                         "(the lag policy changed it before this collector started)",
                         seg.scale, seg.pool, ads.get(ad, "MyType"), ads.get(ad, "Name"))
        if self.lag_last_change is None:
            self.clock.adopt(seg)     # our own reading since start-up was never the pool's
        else:
            self.clock.follow(seg)
        self.lag_last_change = seg.wall

    def worst_recent_lag_wall(self, now_wall: float, updates: bool = True) -> float:
        """The worst recent lag of any daemon heard from lately (wall s), ours included: of its
        loop, and with `updates` of its ad updates."""
        return max([self.lag.figures().recent_max_s, self.update_lag.recent_max_wall() if updates else 0.0] +
                   [worst for _, what, _, worst in self._heard_lags(now_wall) if updates or not what])

    def current_lags(self, now_wall: float) -> list[DaemonLag]:
        out = [DaemonLag(f"collector {self.name}", self.lag.figures().sustained_s)]
        return out + [DaemonLag(who, lag, what, self.update_intervals.get(who, 0.0) if what else 0.0)
                      for who, what, lag, _ in self._heard_lags(now_wall)]

    async def _lag_loop(self) -> None:
        while True:
            await asyncio.sleep(LAG_DECIDE_S)
            try:
                await self.apply_lag_policy(time.time())
                # Our own ad carries the pool's clock and lag to every daemon: keep it fresh
                # (it goes to our own store, no RPC).
                await self.advertise()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("lag policy")

    async def apply_lag_policy(self, now_wall: float) -> lagpolicy.Action:
        policy = self.common.lag_policy
        if now_wall - self.lag_since < policy.grace_s:
            return None  # a pool starting up is busy in ways that say nothing about its steady lag
        latest = self.clock.latest()   # a change announced and not yet in force counts
        action = lagpolicy.decide(policy, self.current_lags(now_wall), latest.scale, now_wall,
                                  self.lag_last_change)
        if isinstance(action, lagpolicy.Slow):
            # Loops only: how long a daemon takes to hear, not how late its updates are.
            notice = lagpolicy.notice_s(self.worst_recent_lag_wall(now_wall, updates=False))
            seg = self.clock.retime(now_wall + notice, action.scale)
            self.lag_last_change = seg.wall   # the holdoff counts from the switch itself
            self.lag_events["slowed"] += 1
            self.log.warning("lag: %s; HTCPOOL_LAG_POLICY = slow: TIME_SCALE %g -> %g from pool time %.0f "
                             "(every daemon follows the collector's clock)", action.reason,
                             latest.scale, action.scale, seg.pool)
            await self.advertise()
        elif isinstance(action, lagpolicy.Stop) and not self.lag_stop_reason:
            self.lag_stop_reason = action.reason
            self.lag_events["stopped"] += 1
            self.log.error("lag: %s; HTCPOOL_LAG_POLICY = stop: stopping the pool", action.reason)
            await self.advertise()
            # Long enough for every daemon to read the order from our ad before we go.
            asyncio.get_running_loop().call_later(STOP_GRACE_S, self.request_shutdown)
        elif isinstance(action, (lagpolicy.Warn, lagpolicy.Floor)):
            key = "warned" if isinstance(action, lagpolicy.Warn) else "at_floor"
            self.lag_events[key] += 1
            if now_wall - self.lag_last_said >= lagpolicy.HOLDOFF_S:
                self.lag_last_said = now_wall
                self.log.warning("lag: %s; results from this stretch of the run are not faithful to TIME_SCALE "
                                 "(HTCPOOL_LAG_POLICY = %s)", action.reason, policy.policy)
        return action

    def expiry_now(self) -> float:
        """The pool time ads expire by: now, less the pool's own lag (an ad late because its
        daemon, or we, ran behind is not the ad of a daemon that is gone)."""
        self.pool_lag_wall = self.worst_recent_lag_wall(time.time())
        return self.clock.now() - self.lag_allowance_s()

    async def expire(self) -> None:
        for s in self.store.expire(self.expiry_now()):
            self.log.info('**** Removing stale ad: "%s" (%s, not heard from for %.0f s)',
                          s.name, s.my_type, self.clock.now() - s.last_heard)

    def own_ads(self) -> list[dict[str, Any]]:
        ad = self.base_ad()
        ad.update({"CollectorName": self.cfg.collector_name or self.name,
                   # Refreshed in-process every COLLECTOR_UPDATE_INTERVAL; never let it lapse between.
                   "ClassAdLifetime": int(3 * self.common.update_interval_s),
                   "CurrentJobsRunningAll": 0,
                   "ClassAdLifetimeDefault": int(self.cfg.classad_lifetime_s),
                   "NumAds": len(self.store)})
        # The pool's clock, for every daemon to follow (a change of scale is announced ahead).
        seg = self.clock.latest()
        ad.update({"HtcpoolClockWall": seg.wall, "HtcpoolClockPool": seg.pool, "HtcpoolClockScale": seg.scale,
                   "HtcpoolConfiguredTimeScale": float(self.common.time_scale),
                   "HtcpoolLagPolicy": self.common.lag_policy.policy,
                   "HtcpoolMaxLag": float(self.common.lag_policy.max_lag_s),
                   "HtcpoolLagEvents": sum(self.lag_events.values()),
                   "HtcpoolPoolLagWall": round(self.worst_recent_lag_wall(time.time()), 4)})
        if self.lag_stop_reason:
            ad["HtcpoolLagStop"] = self.lag_stop_reason
        return [ad]

    async def advertise(self) -> None:
        # The collector's own ad goes straight into its own store.
        now = self.clock.now()
        for a in self.own_ads():
            self.store.update(ads.parse_ad(ads.ad_text(a)), now)

    async def withdraw(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        s = self.base_status()
        s.update({"ads": self.store.counts(), "classad_lifetime_s": self.cfg.classad_lifetime_s,
                  "updates_total": self.store.updates_total, "queries_total": self.queries_total,
                  "prepared_updates_total": self.store.prepared_total,
                  "refreshed_ads_total": self.store.refreshed_total,
                  "expired_total": self.store.expired_total,
                  "invalidated_total": self.store.invalidated_total,
                  "unreachable_addresses": dict(self.prober.unreachable)})
        s["lag_policy"] = {"policy": self.common.lag_policy.policy, "max_lag_s": self.common.lag_policy.max_lag_s,
                           "configured_time_scale": self.common.time_scale, "events": dict(self.lag_events),
                           "stop": self.lag_stop_reason,
                           "lags_wall_s": {who: {"sustained": lag, "recent_max": worst}
                                           for who, (lag, worst, _) in self.lags.items()},
                           "update_lags_wall_s": {who: {"sustained": lag, "recent_max": worst}
                                                  for who, (lag, worst, _) in self.update_lags.items()}}
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        m.update({"ads": {(("my_type", t),): float(n) for t, n in self.store.counts().items()},
                  "updates_total": float(self.store.updates_total),
                  "prepared_updates_total": float(self.store.prepared_total),
                  "refreshed_ads_total": float(self.store.refreshed_total),
                  "queries_total": float(self.queries_total),
                  "expired_total": float(self.store.expired_total),
                  "unreachable_addresses": float(len(self.prober.unreachable)),
                  "lag_policy_events_total": {(("event", k),): float(v) for k, v in self.lag_events.items()}})
        return m
