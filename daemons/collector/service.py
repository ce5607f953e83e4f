"""gRPC adapter of the collector: protobuf in, AdStore calls, protobuf out."""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

import classad2
import grpc

from daemons.core import ads
from daemons.collector.compact import Prepared
from daemons.collector.store import LAG_ATTR, StoreError
from daemons.pb.htcpool import collector_pb2 as pb
from daemons.pb.htcpool import collector_pb2_grpc as pb_grpc
from daemons.pb.htcpool import common_pb2

if TYPE_CHECKING:
    from daemons.collector.daemon import CollectorDaemon

QUERY_CHUNK = 1000
MAX_PROJECTION = 1000                 # attributes named in one query's projection


class CollectorService(pb_grpc.CollectorServicer):
    def __init__(self, daemon: "CollectorDaemon") -> None:
        self.d = daemon

    async def UpdateAds(self, request: pb.UpdateAdsRequest, context: grpc.aio.ServicerContext) -> pb.UpdateAdsReply:
        cfg = self.d.cfg
        n = max(len(request.ads), len(request.invalidate_names), sum(len(r.names) for r in request.refreshes))
        if n > cfg.max_ads_per_update:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.ads):,} ads and {len(request.invalidate_names):,} names in one update; "
                                f"COLLECTOR_MAX_ADS_PER_UPDATE is {cfg.max_ads_per_update:,}")
        for i, a in enumerate(request.ads):
            if len(a.text) > cfg.max_ad_size:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"ad {i + 1} of {len(request.ads)}: {len(a.text):,} characters, more than "
                                    f"COLLECTOR_MAX_AD_SIZE ({cfg.max_ad_size:,})")
        # Check every ad before storing any: one bad ad stores nothing. An ad in the plain
        # one-line form daemons send is read item by item (store.prepare); others are parsed.
        store = self.d.store
        steps: list[Prepared | classad2.ClassAd] = []
        for i, a in enumerate(request.ads):
            prepared = store.prepare(a.text)
            if prepared is not None:
                steps.append(prepared)
                continue
            what = f"ad {i + 1} of {len(request.ads)}"
            try:
                ad = ads.parse_ad(a.text, what)
                store.check(ad, what)
            except (ads.AdError, StoreError) as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            steps.append(ad)
        now = self.d.clock.now()
        addresses: dict[str, str] = {}
        for step in steps:
            if isinstance(step, Prepared):
                store.update_prepared(step, now)
                addr, who = step.my_address, f'{step.my_type} "{step.name}"'
            else:
                store.update(step, now)
                if LAG_ATTR in step:
                    self.d.note_lag(step)
                    self.d.note_clock(step)
                addr, who = ads.get(step, "MyAddress"), f'{ads.get(step, "MyType")} "{ads.get(step, "Name")}"'
            if isinstance(addr, str) and addr not in addresses:
                addresses[addr] = who
        for addr, who in addresses.items():
            self.d.prober.check(who, addr, context.peer() or "")
        refreshed, missed = self._refresh(request, now)
        invalidated = 0
        if request.invalidate_names:
            invalidated = self.d.store.invalidate(request.invalidate_type or "Machine", request.invalidate_names)
        return pb.UpdateAdsReply(updated=len(steps), invalidated=invalidated, refreshed=refreshed,
                                 refresh_missed=missed)

    def _refresh(self, request: pb.UpdateAdsRequest, now: float) -> tuple[int, list[str]]:
        """Each refresh's items set in each named ad; an ad that cannot take them (unknown,
        expired, an item that does not read or is not its attribute) is named back, changed
        in nothing, for its daemon to send whole."""
        store = self.d.store
        my_type = request.refresh_type or "Machine"
        refreshed, missed = 0, []
        for r in request.refreshes:
            common = store.refresh_items(r.items)
            if common is None or (r.own_items and len(r.own_items) != len(r.names)):
                missed.extend(r.names)
                continue
            for i, name in enumerate(r.names):
                new = common
                if r.own_items and r.own_items[i]:
                    own = store.refresh_items(r.own_items[i])
                    new = None if own is None else common + own
                    if new is not None and len({x[1].lower() for x in new}) != len(new):
                        new = None       # an attribute named twice: as a whole update, refused
                if new is not None and store.refresh(my_type, name, new, now):
                    refreshed += 1
                else:
                    missed.append(name)
        return refreshed, missed

    async def InvalidateAds(self, request: pb.InvalidateAdsRequest,
                            context: grpc.aio.ServicerContext) -> pb.InvalidateAdsReply:
        constraint = None
        if request.constraint.strip():
            try:
                constraint = ads.parse_expr(request.constraint, "constraint")
            except ads.AdError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if not request.my_type:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "my_type is required")
        if len(request.names) > self.d.cfg.max_ads_per_update:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.names):,} names in one invalidation; COLLECTOR_MAX_ADS_PER_UPDATE is "
                                f"{self.d.cfg.max_ads_per_update:,}")
        try:
            n = self.d.store.invalidate(request.my_type, request.names, constraint, check=self.d.query_budget())
        except ads.WorkLimitError as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        if n:
            self.d.log.info("invalidated %d %s ad(s)", n, request.my_type)
        return pb.InvalidateAdsReply(invalidated=n)

    async def QueryAds(self, request: pb.QueryAdsRequest,
                       context: grpc.aio.ServicerContext) -> AsyncIterator[pb.QueryAdsReply]:
        if len(request.projection) > MAX_PROJECTION:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.projection):,} attributes in a projection; at most {MAX_PROJECTION}")
        constraint = None
        if request.constraint.strip():
            try:
                constraint = ads.parse_expr(request.constraint, "constraint")
            except ads.AdError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        self.d.queries_total += 1
        try:
            selected = self.d.store.select(request.my_type or "Any", self.d.expiry_now(), constraint,
                                           check=self.d.query_budget())
        except ads.WorkLimitError as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        # Printed a chunk at a time: the whole answer is never in memory at once.
        texts = self.d.store.render(selected, list(request.projection), request.include_private)
        for i in range(0, len(selected), QUERY_CHUNK):
            yield pb.QueryAdsReply(ads=[common_pb2.ClassAd(text=next(texts))
                                        for _ in range(min(QUERY_CHUNK, len(selected) - i))])
        if not selected:
            yield pb.QueryAdsReply()
