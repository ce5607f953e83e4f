"""Client of the collector used by every daemon and the CLI."""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Iterator, Sequence

from daemons.core.rpc import Channels, call_with_retry
from daemons.pb.htcpool import collector_pb2 as pb
from daemons.pb.htcpool import collector_pb2_grpc as pb_grpc
from daemons.pb.htcpool import common_pb2

QUERY_TIMEOUT_S = 60.0
UPDATE_TIMEOUT_S = 30.0
# One UpdateAds carries at most this many ads (and invalidated names) and about this
# many bytes; the collector refuses more than COLLECTOR_MAX_ADS_PER_UPDATE, whose
# minimum is this chunk.
UPDATE_CHUNK_ADS = 500
UPDATE_CHUNK_BYTES = 16 * 1024 * 1024


def iter_update_chunks(ad_texts: Iterable[str], names: Iterable[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(ads, names) per request: the ads in order, then the invalidations (with the last ads).

    Lazy: an ad text is taken only when its chunk is next, so a generator of thousands of
    ads never has more than one chunk's texts alive. `names` is read once every ad has
    been taken, so the generator may still add to it (a machine's deleted slots, taken
    at the instant its ads are built)."""
    ads_now: list[str] = []
    size = 0
    for t in ad_texts:
        if ads_now and (len(ads_now) >= UPDATE_CHUNK_ADS or size + len(t) > UPDATE_CHUNK_BYTES):
            yield ads_now, []
            ads_now, size = [], 0
        ads_now.append(t)
        size += len(t)
    names = list(names)
    if not names:
        yield ads_now, []
        return
    for i in range(0, len(names), UPDATE_CHUNK_ADS):
        yield (ads_now if i == 0 else []), names[i:i + UPDATE_CHUNK_ADS]


def update_chunks(ad_texts: Sequence[str], names: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """iter_update_chunks, all at once."""
    return list(iter_update_chunks(ad_texts, names))


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

    async def update(self, ad_texts: Iterable[str], *, invalidate_type: str = "",
                     invalidate_names: Iterable[str] = (), give_up_after_s: float | None = 2.0) -> int:
        """Advertise `ad_texts`, then invalidate `invalidate_names` (read after the last ad).
        Any iterable of texts will do: a generator's are built one chunk at a time, as they
        go. Transient failures are retried for `give_up_after_s` only: the daemons'
        advertising has a backoff of its own (from 1 s to the update interval) that then
        says, in one line, which collector it cannot reach and which knob named it."""
        updated = 0
        for ads_part, names_part in iter_update_chunks(ad_texts, invalidate_names):
            req = pb.UpdateAdsRequest(
                ads=[common_pb2.ClassAd(text=t) for t in ads_part],
                invalidate_type=invalidate_type, invalidate_names=names_part)
            reply = await call_with_retry(
                f"update of {len(ads_part)} ad(s) to {self.where}",
                lambda req=req: self._stub().UpdateAds(req, timeout=UPDATE_TIMEOUT_S),
                give_up_after_s=give_up_after_s, logger=self.log)
            updated += reply.updated
        return updated

    async def refresh(self, my_type: str, refreshes: Iterable[tuple[Sequence[str], str, Sequence[str]]],
                      give_up_after_s: float | None = 2.0) -> list[str]:
        """Refresh ads the collector holds: (names, items for all, items for each) per group,
        at most UPDATE_CHUNK_ADS names a call. Returns the names it did not refresh (unknown
        to it, or not taking an item), which must be sent whole."""
        missed: list[str] = []
        part: list[pb.AdRefresh] = []
        size = 0

        async def send() -> None:
            req = pb.UpdateAdsRequest(refresh_type=my_type, refreshes=part)
            reply = await call_with_retry(
                f"refresh of {size} ad(s) at {self.where}",
                lambda: self._stub().UpdateAds(req, timeout=UPDATE_TIMEOUT_S),
                give_up_after_s=give_up_after_s, logger=self.log)
            missed.extend(reply.refresh_missed)

        for names, items, own in refreshes:
            if part and size + len(names) > UPDATE_CHUNK_ADS:
                await send()
                part, size = [], 0
            part.append(pb.AdRefresh(names=names, items=items, own_items=own))
            size += len(names)
        if part:
            await send()
        return missed

    async def invalidate(self, my_type: str, names: Iterable[str] = (), constraint: str = "",
                         give_up_after_s: float | None = 5.0) -> int:
        names = list(names)
        parts = [names[i:i + UPDATE_CHUNK_ADS] for i in range(0, len(names), UPDATE_CHUNK_ADS)] or [[]]
        invalidated = 0
        for k, part in enumerate(parts):
            req = pb.InvalidateAdsRequest(my_type=my_type, names=part, constraint=constraint if k == 0 else "")
            reply = await call_with_retry(
                f"invalidation of {my_type} ads at {self.where}",
                lambda req=req: self._stub().InvalidateAds(req, timeout=UPDATE_TIMEOUT_S),
                give_up_after_s=give_up_after_s, logger=self.log)
            invalidated += reply.invalidated
        return invalidated

    async def query(self, my_type: str, constraint: str = "", projection: Sequence[str] = (),
                    include_private: bool = False, give_up_after_s: float | None = 10.0,
                    each: Callable[[str], Any] | None = None) -> list:
        """Texts of the matching ads; with `each`, what it makes of each text, made as each
        chunk of the answer arrives: the caller's work on one chunk overlaps the collector's
        printing of the next (a negotiator's 50,000 slot ads: the query and their reading
        no longer one after the other). A query that is retried starts its list afresh."""
        req = pb.QueryAdsRequest(my_type=my_type, constraint=constraint,
                                 projection=list(projection), include_private=include_private)

        async def run() -> list:
            out: list = []
            async for chunk in self._stub().QueryAds(req, timeout=QUERY_TIMEOUT_S):
                if each is None:
                    out.extend(a.text for a in chunk.ads)
                else:
                    out.extend([each(a.text) for a in chunk.ads])
            return out

        return await call_with_retry(f"query of {my_type} ads at {self.where}",
                                     run, give_up_after_s=give_up_after_s, logger=self.log)
