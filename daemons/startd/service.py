"""gRPC adapter of the startd."""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import grpc

from daemons.core import ads
from daemons.startd.drain import DrainError
from daemons.pb.htcpool import common_pb2
from daemons.pb.htcpool import startd_pb2 as pb
from daemons.pb.htcpool import startd_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from daemons.startd.daemon import StartdDaemon

# The most claims (or activations) one batched call may carry: a larger batch is refused
# whole, so no call holds the startd for long (nor outlives its deadline).
MAX_BATCH = 1000
# Between this many claims of a batch the handler lets the event loop run: a keepalive
# that arrives meanwhile is answered, not queued behind the whole batch.
YIELD_EVERY = 25
# A claim's job ad comes again with its activation, as the same text: the schedd sends the
# job as it stands both times, and nothing changes it in between. So the parse made for a
# claim is kept, by its text, and serves the activation that brings that text: it is the ad
# a fresh parse would give, since the startd changes nothing in it but CurrentTime, which
# activation sets again (a preempting claim's ad is held by the claim, and not kept here).
# Each kept ad serves once; at most CLAIMED_ADS_KEEP wait (a burst's claims in flight).
CLAIMED_ADS_KEEP = 512


async def _paced(items):
    """`items` in order, letting the event loop run between every YIELD_EVERY of them."""
    for i, item in enumerate(items):
        if i and i % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        yield item


class StartdService(pb_grpc.StartdServicer):
    def __init__(self, daemon: "StartdDaemon") -> None:
        self.d = daemon
        self._claimed_ads: OrderedDict[str, Any] = OrderedDict()   # job ad text -> its parse

    async def _job_ad(self, text: str, context: grpc.aio.ServicerContext):
        try:
            return ads.parse_ad(text, "job ad")
        except ads.AdError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))

    async def _job_ads(self, texts: list[str], what: str, context: grpc.aio.ServicerContext,
                       claimed: bool = False) -> list:
        """Every job ad of a batch, parsed before any claim changes: one that does not parse
        refuses the whole call (INVALID_ARGUMENT naming it), so a bad request changes nothing.
        `claimed`: an activation's, which may be the parse kept from its claim."""
        if len(texts) > MAX_BATCH:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(texts)} {what} in one call; at most {MAX_BATCH}")
        out = []
        for i, text in enumerate(texts):
            kept = self._kept(text) if claimed else None
            if kept is not None:
                out.append(kept)
                continue
            try:
                out.append(ads.parse_ad(text, f"{what}[{i}].job_ad"))
            except ads.AdError as e:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return out

    def _kept(self, text: str) -> Any:
        """The parse kept from the claim that brought `text` (taken: it serves once), or None."""
        kept = self._claimed_ads.pop(text, None)
        if kept is not None:
            self.d.job_ads_reused += 1
        return kept

    def _keep(self, text: str, job_ad: Any, out: Any) -> None:
        if out.ok and not out.pending:
            kept = self._claimed_ads
            kept[text] = job_ad
            if len(kept) > CLAIMED_ADS_KEEP:
                kept.popitem(last=False)

    async def RequestClaim(self, request: pb.RequestClaimRequest,
                           context: grpc.aio.ServicerContext) -> pb.RequestClaimReply:
        job_ad = await self._job_ad(request.job_ad.text, context)
        return self._claim(request, job_ad)

    async def RequestClaims(self, request: pb.RequestClaimsRequest,
                            context: grpc.aio.ServicerContext) -> pb.RequestClaimsReply:
        job_ads = await self._job_ads([r.job_ad.text for r in request.claims], "claims", context)
        reply = pb.RequestClaimsReply()
        async for r, job_ad in _paced(zip(request.claims, job_ads)):
            reply.replies.append(self._claim(r, job_ad))
        return reply

    def _claim(self, request: pb.RequestClaimRequest, job_ad) -> pb.RequestClaimReply:
        out = self.d.request_claim(request.claim_id, job_ad, request.schedd_name,
                                   request.schedd_address, request.submitter, dict(request.resources))
        self._keep(request.job_ad.text, job_ad, out)
        reply = pb.RequestClaimReply(ok=out.ok, reason=out.reason, claim_id=out.claim_id, pending=out.pending)
        if out.slot_ad is not None:
            reply.slot_ad.CopyFrom(common_pb2.ClassAd(text=out.slot_ad_text or ads.ad_text(out.slot_ad)))
        if out.leftover_ad is not None:
            reply.leftover_ad.CopyFrom(common_pb2.ClassAd(text=out.leftover_ad_text or ads.ad_text(out.leftover_ad)))
            reply.leftover_claim_id = out.leftover_claim_id
        return reply

    async def ActivateClaim(self, request: pb.ActivateClaimRequest,
                            context: grpc.aio.ServicerContext) -> pb.ActivateClaimReply:
        job_ad = self._kept(request.job_ad.text)
        if job_ad is None:
            job_ad = await self._job_ad(request.job_ad.text, context)
        ok, reason, start = self.d.activate(request.claim_id, job_ad)
        return pb.ActivateClaimReply(ok=ok, reason=reason, start_time=start)

    async def ActivateClaims(self, request: pb.ActivateClaimsRequest,
                             context: grpc.aio.ServicerContext) -> pb.ActivateClaimsReply:
        job_ads = await self._job_ads([r.job_ad.text for r in request.activations], "activations", context,
                                      claimed=True)
        reply = pb.ActivateClaimsReply()
        async for r, job_ad in _paced(zip(request.activations, job_ads)):
            ok, reason, start = self.d.activate(r.claim_id, job_ad)
            reply.replies.append(pb.ActivateClaimReply(ok=ok, reason=reason, start_time=start))
        return reply

    async def ReleaseClaim(self, request: pb.ReleaseClaimRequest,
                           context: grpc.aio.ServicerContext) -> pb.ReleaseClaimReply:
        n = self.d.release(list(request.claim_ids), request.reason or "released by the schedd")
        return pb.ReleaseClaimReply(released=n)

    async def KeepAlive(self, request: pb.KeepAliveRequest,
                        context: grpc.aio.ServicerContext) -> pb.KeepAliveReply:
        # The ids read one at a time from the request: a schedd's keepalive names every claim it
        # holds here, tens of thousands of them, which as a list would be megabytes at once.
        idle: list[str] = []
        unknown = await self.d.keepalive(request.claim_ids, request.schedd_address, request.round_trip, idle)
        return pb.KeepAliveReply(unknown_claim_ids=unknown, idle_claim_ids=idle)

    async def DrainJobs(self, request: pb.DrainJobsRequest, context: grpc.aio.ServicerContext) -> pb.DrainJobsReply:
        how = {pb.DRAIN_HOW_UNSPECIFIED: "graceful", pb.GRACEFUL: "graceful", pb.QUICK: "quick",
               pb.FAST: "fast"}.get(request.how)
        if how is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown drain schedule {request.how}")
        try:
            request_id = self.d.drain(request.machine, how, request.resume_on_completion, request.check_expr,
                                      request.start_expr, request.reason, request.request_id)
        except DrainError as e:
            await context.abort(_DRAIN_STATUS[e.code], str(e))
        return pb.DrainJobsReply(ok=True, request_id=request_id)

    async def CancelDrainJobs(self, request: pb.CancelDrainJobsRequest,
                              context: grpc.aio.ServicerContext) -> pb.CancelDrainJobsReply:
        try:
            self.d.cancel_drain(request.machine, request.request_id)
        except DrainError as e:
            await context.abort(_DRAIN_STATUS[e.code], str(e))
        return pb.CancelDrainJobsReply(ok=True)


_DRAIN_STATUS = {
    "not_found": grpc.StatusCode.NOT_FOUND,
    "already": grpc.StatusCode.FAILED_PRECONDITION,
    "not_draining": grpc.StatusCode.FAILED_PRECONDITION,
    "check_failed": grpc.StatusCode.FAILED_PRECONDITION,
    "bad_expression": grpc.StatusCode.INVALID_ARGUMENT,
}
