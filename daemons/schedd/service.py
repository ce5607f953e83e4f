"""gRPC adapter of the schedd."""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, AsyncIterator

import grpc

from daemons.core import ads
from daemons.core.interceptors import current_call
from daemons.core.security.levels import DAEMON
from daemons.pb.htcpool import common_pb2
from daemons.pb.htcpool import schedd_pb2 as pb
from daemons.pb.htcpool import schedd_pb2_grpc as pb_grpc
from daemons.schedd.owners import OwnerError, caller_of
from daemons.schedd.queue_ops import ActDenied
from daemons.schedd.submit import SubmitError

if TYPE_CHECKING:
    from daemons.schedd.daemon import ScheddDaemon

QUERY_CHUNK = 1000
MAX_PROJECTION = 1000                 # attributes named in one query's projection
MAX_POOL_TIME = 1e11                  # beyond any pool time (year 5138 at most)
_OWNER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def owner_problem(owner: str) -> str | None:
    """Why `owner` cannot be a job's Owner (a user name), or None; empty means 'nobody'."""
    if owner and not _OWNER.fullmatch(owner):
        return f"owner {owner[:64]!r} is not a user name (letters, digits, '_', '.', '-'; at most 64)"
    return None


def file_name_problem(name: str) -> str | None:
    if len(name) > 4096 or _CONTROL.search(name):
        return f"submit_file {name[:64]!r}...: not a file name (control characters, or too long)"
    return None


class ScheddService(pb_grpc.ScheddServicer):
    def __init__(self, daemon: "ScheddDaemon") -> None:
        self.d = daemon

    async def Submit(self, request: pb.SubmitRequest, context: grpc.aio.ServicerContext) -> pb.SubmitReply:
        if not request.submit_description.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty submit description")
        problem = owner_problem(request.owner) or file_name_problem(request.submit_file)
        if problem:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        items: dict[int, list[str]] = {}
        for q in request.queue_items:
            items.setdefault(q.line, []).extend(q.items)
        caller = caller_of(current_call())
        try:
            cluster, count = await self.d.submit(request.submit_description, request.submit_file, request.owner,
                                                 caller, items)
        except SubmitError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except OwnerError as e:
            self.d.log.warning("submit refused: %s", e)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(e))
        return pb.SubmitReply(cluster_id=cluster, count=count)

    async def Query(self, request: pb.QueryJobsRequest,
                    context: grpc.aio.ServicerContext) -> AsyncIterator[pb.QueryJobsReply]:
        if len(request.projection) > MAX_PROJECTION:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.projection):,} attributes in a projection; at most {MAX_PROJECTION}")
        try:
            if request.autoclusters:
                texts = self.d.autocluster_ads(request.constraint)
                chunks = iter([texts[i:i + QUERY_CHUNK] for i in range(0, len(texts), QUERY_CHUNK)])
            else:
                # Claim ids stay with the daemons: only DAEMON callers see private attributes.
                call = current_call()
                private = call is not None and DAEMON in call.levels and not call.notes.get("open")
                chunks = self.d.query_chunks(request.constraint, list(request.projection), request.history,
                                             request.limit, private=private, chunk=QUERY_CHUNK)
        except ads.WorkLimitError as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        except ads.AdError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        # Each chunk is made when the previous one has been sent, so the answer to a query of
        # every job never sits whole in the schedd's memory.
        sent = 0
        while True:
            try:
                texts = next(chunks, None)
            except ads.WorkLimitError as e:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
            if texts is None:
                break
            sent += 1
            yield pb.QueryJobsReply(ads=[common_pb2.ClassAd(text=t) for t in texts])
        if not sent:
            yield pb.QueryJobsReply()

    async def Act(self, request: pb.ActRequest, context: grpc.aio.ServicerContext) -> pb.ActReply:
        from daemons.schedd.daemon import ActError
        if request.action not in (pb.REMOVE, pb.HOLD, pb.RELEASE, pb.EDIT):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "no action given" if request.action == pb.ACTION_UNSPECIFIED else
                                f"unknown action {request.action}")
        try:
            ids, denied = await self.d.act(request.action, list(request.job_ids), request.constraint,
                                           request.reason, dict(request.edits), caller_of(current_call()))
        except ads.WorkLimitError as e:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        except (ActError, ads.AdError) as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except ActDenied as e:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(e))
        return pb.ActReply(affected=len(ids), job_ids=ids, denied_job_ids=denied)

    async def Negotiate(self, request_iterator: AsyncIterator[pb.NegotiatorMessage],
                        context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ScheddMessage]:
        session = None
        kept: dict[str, object] = {}   # prefetched sessions of this stream, by submitter, until resumed
        request_iterator = unbundled(request_iterator)
        async for msg in request_iterator:
            kind = msg.WhichOneof("msg")
            if kind == "bundle":
                async for _ in request_iterator:
                    pass
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a bundle of negotiation messages holds "
                                                                      "another bundle")
            if kind == "start":
                bad = next((a for a in msg.start.significant_attrs if not ads.is_attr_name(a)), None)
                if bad is not None:
                    # It would become part of every job's AutoClusterAttrs: one bad name and
                    # no job ad could be printed again. Refused before anything changes.
                    async for _ in request_iterator:
                        pass
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                        f"significant attribute {bad[:80]!r} is not a ClassAd attribute name")
                st = msg.start
                session = kept.pop(st.submitter, None) if st.prefetched > 0 else None
                if session is not None and session.cycle != st.cycle:
                    session = None
                if session is None:
                    session = self.d.begin_negotiation(st.submitter, st.cycle, list(st.significant_attrs),
                                                       st.job_constraint, skip=max(0, st.prefetched))
                if st.prefetch:
                    kept[st.submitter] = session
                continue
            if session is None:
                # Read what the client still sends before refusing: a bidirectional call ended
                # while the client writes reaches it as INTERNAL, not as this refusal.
                async for _ in request_iterator:
                    pass
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "negotiation must begin with start")
            if kind == "send_requests":
                batch, no_more = self.d.next_requests(session, msg.send_requests.max_requests)
                yield pb.ScheddMessage(requests=pb.ResourceRequests(
                    requests=[pb.ResourceRequest(request_id=r.request_id, count=r.count,
                                                 ad=common_pb2.ClassAd(text=r.job.text())) for r in batch],
                    no_more=no_more))
            elif kind == "match":
                m = msg.match
                self.d.on_match(session, m.request_id, m.claim_id, m.slot_ad.text, dict(m.consumed),
                                (m.slot_name, m.startd_address))
            elif kind == "outcomes":
                now = self.d.clock.now()   # they arrived together: one reading of the clock
                for o in msg.outcomes.outcomes:
                    if o.WhichOneof("outcome") == "match":
                        m = o.match
                        self.d.on_match(session, m.request_id, m.claim_id, m.slot_ad.text, dict(m.consumed),
                                        (m.slot_name, m.startd_address), now)
                    else:
                        self.d.on_reject(session, o.reject.request_id, o.reject.reason, now)
            elif kind == "reject":
                self.d.on_reject(session, msg.reject.request_id, msg.reject.reason)
            elif kind == "end":
                # Read anything the client still sends (the negotiator half-closes right after
                # `end`): ending a bidirectional call while the client writes reaches it as INTERNAL.
                async for _ in request_iterator:
                    pass
                return

    async def ClaimEvents(self, request: pb.ClaimEventsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ClaimEventsReply:
        for i, ev in enumerate(request.events):
            if not all(math.isfinite(t) and 0 <= t < MAX_POOL_TIME for t in (ev.pool_time, ev.job_start)):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"event {i + 1}: pool_time and job_start must be times (seconds since 1970)")
        n = await self.d.on_claim_events(request.events)
        return pb.ClaimEventsReply(accepted=n)


async def unbundled(messages: AsyncIterator[pb.NegotiatorMessage]) -> AsyncIterator[pb.NegotiatorMessage]:
    """A negotiator's messages one by one, each bundle's in its order (a bundle inside a
    bundle is passed on whole: the caller refuses it)."""
    async for msg in messages:
        if msg.WhichOneof("msg") == "bundle":
            for inner in msg.bundle.messages:
                yield inner
        else:
            yield msg
