"""The collector daemon: the AdStore behind gRPC, with expiry on pool time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from daemons.collector.reachability import Prober
from daemons.collector.service import CollectorService
from daemons.collector.store import AdStore
from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.collector_client import UPDATE_CHUNK_ADS
from daemons.core.common import CommonConfig
from daemons.core.config import Param
from daemons.core.daemon import Daemon
from daemons.pb.htcpool import collector_pb2_grpc


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

    async def on_close(self) -> None:
        await self.prober.close()

    async def expire(self) -> None:
        for s in self.store.expire(self.clock.now()):
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
                  "expired_total": self.store.expired_total,
                  "invalidated_total": self.store.invalidated_total,
                  "unreachable_addresses": dict(self.prober.unreachable)})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        m.update({"ads": {(("my_type", t),): float(n) for t, n in self.store.counts().items()},
                  "updates_total": float(self.store.updates_total),
                  "queries_total": float(self.queries_total),
                  "expired_total": float(self.store.expired_total),
                  "unreachable_addresses": float(len(self.prober.unreachable))})
        return m
