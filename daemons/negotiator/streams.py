"""The negotiator's side of a Negotiate stream to a schedd: what a session sends, the stream,
and the prefetch of every submitter's first resource requests before the cycle's sessions."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc

from daemons.core.log import EACH_LINE_STAMPED
from daemons.core.log import lines as joined_lines
from daemons.negotiator.cycle import Outcome, Session
from daemons.pb.htcpool import schedd_pb2


class ScheddError(Exception):
    """A schedd broke the negotiation protocol."""


class Outgoing:
    """What a session has decided and not yet sent: matches and rejections, and log lines.

    They travel as one message and one log record per batch of requests (the lines
    still read as HTCondor's, each stamped): a message per match would cost more
    than the matching itself.
    """

    def __init__(self, log) -> None:
        self.log = log
        self.msg = schedd_pb2.NegotiatorMessage()

    def add(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            if o.match is not None:
                m = self.msg.outcomes.outcomes.add().match
                m.request_id = o.request_id
                m.claim_id = o.match.claim_id
                m.slot_ad.text = o.match.slot_ad_text
                m.preempting = o.match.preempting
                if o.match.consumed:
                    m.consumed.update(dict(o.match.consumed))
            else:
                r = self.msg.outcomes.outcomes.add().reject
                r.request_id = o.request_id
                r.reason = o.reason

    def log_lines(self, lines: list[str]) -> None:
        if lines:
            self.log.info("%s", joined_lines(lines), extra=EACH_LINE_STAMPED)

    async def flush(self, call, session: Session) -> None:
        self.add(session.take_outcomes())
        self.log_lines(session.take_lines())
        if self.msg.HasField("outcomes"):
            msg, self.msg = self.msg, schedd_pb2.NegotiatorMessage()
            await call.write(msg)


@dataclass
class ScheddStream:
    call: Any          # the Negotiate stream-stream call
    opened: float      # time.monotonic() when it opened

    async def close(self) -> None:
        try:
            if not self.call.done():
                await self.call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
                await self.call.done_writing()
                while await self.call.read() is not grpc.aio.EOF:
                    pass
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass


async def ended_call_error(call) -> grpc.aio.AioRpcError:
    """The status a finished call ended with, as the error its reads and writes stand for."""
    try:
        code, details = await call.code(), await call.details()
    except Exception:
        code, details = grpc.StatusCode.UNKNOWN, ""
    if code == grpc.StatusCode.OK:
        code, details = grpc.StatusCode.CANCELLED, "the stream ended"
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details or "RPC already finished")


async def prefetch(call, starts: list, max_requests: int,
                   max_time_s: float | None) -> tuple[dict[str, Any], BaseException | None]:
    """NEGOTIATOR_PREFETCH_REQUESTS over one schedd's stream: each start (a prefetch) with its
    send-requests, all written before the first answer is read, so the schedd builds every
    submitter's list back to back instead of one round trip per session. Returns each
    submitter's first ResourceRequests and the error that cut the prefetch short, if one did
    (what arrived before it is good: the schedd keeps those sessions). NEGOTIATOR_PREFETCH_
    REQUESTS_MAX_TIME bounds it (None: no bound); the submitters it did not reach negotiate as
    without it."""
    got: dict[str, Any] = {}
    ask = schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=max_requests))

    async def write_all() -> None:
        for m in starts:
            await call.write(m)
            await call.write(ask)

    writer = asyncio.ensure_future(write_all())
    try:
        async with asyncio.timeout(max_time_s):
            for m in starts:
                reply = await call.read()
                if reply is grpc.aio.EOF or reply.WhichOneof("msg") != "requests":
                    raise ScheddError("the schedd ended the prefetch without sending its requests")
                got[m.start.submitter] = reply.requests
            await writer
        return got, None
    except asyncio.CancelledError:
        raise
    except Exception as e:
        if isinstance(e, asyncio.InvalidStateError):
            e = await ended_call_error(call)
        elif isinstance(e, TimeoutError):
            e = ScheddError(f"NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME ({max_time_s:g} s) ran out "
                            f"after {len(got)} of {len(starts)} submitters")
        return got, e
    finally:
        if not writer.done():
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        elif not writer.cancelled():
            writer.exception()   # retrieved: a failed write already ended the reads
