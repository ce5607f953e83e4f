"""Client of the collector used by every daemon and the CLI."""
from __future__ import annotations

import logging
from typing import Iterable, Sequence

from daemons.core.rpc import Channels, call_with_retry
from daemons.pb.htcpool import collector_pb2 as pb
from daemons.pb.htcpool import collector_pb2_grpc as pb_grpc
from daemons.pb.htcpool import common_pb2

QUERY_TIMEOUT_S = 60.0
UPDATE_TIMEOUT_S = 30.0


class CollectorClient:
    def __init__(self, channels: Channels, address: str, logger: logging.Logger | None = None,
                 named_by: str = "COLLECTOR_HOST") -> None:
        self.channels = channels
        self.address = address
        self.log = logger or logging.getLogger("htcpool.collector_client")
        # Every retry and failure line names the address tried and what set it.
        self.where = f"the collector at {address} ({named_by})"

    def _stub(self) -> pb_grpc.CollectorStub:
        return pb_grpc.CollectorStub(self.channels.get(self.address))

    async def update(self, ad_texts: Sequence[str], *, invalidate_type: str = "",
                     invalidate_names: Iterable[str] = (), give_up_after_s: float | None = 10.0) -> int:
        req = pb.UpdateAdsRequest(
            ads=[common_pb2.ClassAd(text=t) for t in ad_texts],
            invalidate_type=invalidate_type, invalidate_names=list(invalidate_names))
        reply = await call_with_retry(
            f"update of {len(ad_texts)} ad(s) to {self.where}",
            lambda: self._stub().UpdateAds(req, timeout=UPDATE_TIMEOUT_S),
            give_up_after_s=give_up_after_s, logger=self.log)
        return reply.updated

    async def invalidate(self, my_type: str, names: Iterable[str] = (), constraint: str = "",
                         give_up_after_s: float | None = 5.0) -> int:
        req = pb.InvalidateAdsRequest(my_type=my_type, names=list(names), constraint=constraint)
        reply = await call_with_retry(
            f"invalidation of {my_type} ads at {self.where}",
            lambda: self._stub().InvalidateAds(req, timeout=UPDATE_TIMEOUT_S),
            give_up_after_s=give_up_after_s, logger=self.log)
        return reply.invalidated

    async def query(self, my_type: str, constraint: str = "", projection: Sequence[str] = (),
                    include_private: bool = False, give_up_after_s: float | None = 10.0) -> list[str]:
        """Texts of the matching ads."""
        req = pb.QueryAdsRequest(my_type=my_type, constraint=constraint,
                                 projection=list(projection), include_private=include_private)

        async def run() -> list[str]:
            out: list[str] = []
            async for chunk in self._stub().QueryAds(req, timeout=QUERY_TIMEOUT_S):
                out.extend(a.text for a in chunk.ads)
            return out

        return await call_with_retry(f"query of {my_type} ads at {self.where}",
                                     run, give_up_after_s=give_up_after_s, logger=self.log)
