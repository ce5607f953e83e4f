"""The negotiator's side of a Negotiate stream to a schedd: what a session sends, the stream,
and the prefetch of every submitter's first resource requests before the cycle's sessions."""
from __future__ import annotations

import asyncio
import itertools
from collections import deque
from typing import Any

import grpc

from daemons.core.log import EACH_LINE_STAMPED
from daemons.core.log import lines as joined_lines
from daemons.negotiator.candidates import NO_ADDRESS
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
                if o.match.startd_address != NO_ADDRESS:
                    m.slot_name = o.match.slot_name
                    m.startd_address = o.match.startd_address
                if o.match.consumed:
                    m.consumed.update(dict(o.match.consumed))
            else:
                r = self.msg.outcomes.outcomes.add().reject
                r.request_id = o.request_id
                r.reason = o.reason

    def log_lines(self, lines: list[str]) -> None:
        if lines:
            self.log.info("%s", joined_lines(lines), extra=EACH_LINE_STAMPED)

    def flush(self, stream: "ScheddStream", session: Session) -> None:
        """Send what the session decided since the last flush (not waited for: see ScheddStream)."""
        self.add(session.take_outcomes())
        self.log_lines(session.take_lines())
        if self.msg.HasField("outcomes"):
            msg, self.msg = self.msg, schedd_pb2.NegotiatorMessage()
            stream.send(msg, session.name)


# Bytes of messages a stream may hold unwritten before a session waits for its writer: the
# outcomes of a large pool's cycle (a slot ad per match) can be made faster than written.
MAX_UNWRITTEN_BYTES = 4 << 20
# The most one write bundles (a message larger than this goes alone).
BUNDLE_MAX_BYTES = 1 << 20


class ScheddStream:
    """The cycle's Negotiate stream to one schedd, written and read without waiting in line.

    Messages go out in order from one writer task, so a session does not wait for its
    last message (its outcomes) to be written before the next session is served; what
    waits when the writer comes round goes in one write, as a Bundle. Every
    send-requests is answered by exactly one message, in order, so `ask` hands back a
    future that one reader task resolves in the order the asks were written. The first
    failure of either task fails every answer still awaited, and a failed write that no
    awaited answer will report goes to `on_write_failed(stream, owner, error)`: each session
    whose message it held is reported failed, as if it had waited for the write itself.
    """

    def __init__(self, call, opened: float, on_write_failed=None, on_written=None) -> None:
        self.call = call
        self.opened = opened              # time.monotonic() when it opened
        self.failed: BaseException | None = None
        self._on_write_failed = on_write_failed
        self._on_written = on_written      # called with the number of messages each write carried
        self._out: deque[tuple[Any, str, int]] = deque()      # (message, owner, size) not yet written
        self.unwritten = 0                                     # their bytes
        self._replies: deque[tuple[asyncio.Future, str]] = deque()   # (answer, owner) not yet read
        self._writer: asyncio.Task | None = None
        self._reader: asyncio.Task | None = None
        self.writes = 0                                        # writes made (a bundle is one)

    def send(self, msg, owner: str = "") -> None:
        if self.failed is not None:
            return          # a broken stream: the session learns it from its next answer, or has
        size = msg.ByteSize()
        self._out.append((msg, owner, size))
        self.unwritten += size
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write_all())

    def ask(self, msg, owner: str = "") -> asyncio.Future:
        """Write `msg` (a send-requests) and return the future of the schedd's answer to it:
        the message itself, or grpc.aio.EOF if the stream ended first."""
        fut = asyncio.get_running_loop().create_future()
        # An answer nobody awaits any more (a prefetch the cycle never used) must not
        # be reported as an unretrieved exception.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        if self.failed is not None:
            fut.set_exception(self.failed)
            return fut
        self.send(msg, owner)
        self._replies.append((fut, owner))
        if self._reader is None or self._reader.done():
            self._reader = asyncio.ensure_future(self._read_all())
        return fut

    async def _write_all(self) -> None:
        # The loop's test and its return happen in one step: a `send` after it starts a new writer.
        while self._out:
            # Everything waiting goes in one write (up to BUNDLE_MAX_BYTES): the sessions, which
            # do not wait for their writes, queue messages faster than one write per loop
            # turn takes them (at 1,000 slots most writes found nine or more waiting).
            n, size = 1, self._out[0][2]
            while n < len(self._out) and size + self._out[n][2] <= BUNDLE_MAX_BYTES:
                size += self._out[n][2]
                n += 1
            taken = list(itertools.islice(self._out, n))
            msg = taken[0][0] if n == 1 else schedd_pb2.NegotiatorMessage(
                bundle=schedd_pb2.Bundle(messages=[m for m, _, _ in taken]))
            try:
                await self.call.write(msg)
            except asyncio.CancelledError:
                self._fail(ScheddError("the stream was abandoned"))
                raise
            except Exception as e:
                if isinstance(e, asyncio.InvalidStateError):
                    e = await ended_call_error(self.call)
                awaiting = {o for _, o in self._replies}
                self._fail(e)
                if self._on_write_failed is not None:
                    for owner in dict.fromkeys(o for _, o, _ in taken):
                        if owner and owner not in awaiting:
                            self._on_write_failed(self, owner, e)
                return
            for _ in range(n):
                self._out.popleft()
            self.unwritten -= size
            self.writes += 1
            if self._on_written is not None:
                self._on_written(n)

    async def _read_all(self) -> None:
        while self._replies:
            try:
                reply = await self.call.read()
            except asyncio.CancelledError:
                self._fail(ScheddError("the stream was abandoned"))
                raise
            except Exception as e:
                self._fail(await ended_call_error(self.call) if isinstance(e, asyncio.InvalidStateError) else e)
                return
            if not self._replies:     # failed meanwhile (a write): every answer has its error
                return
            fut, _ = self._replies.popleft()
            if not fut.done():        # an asker that gave up (a prefetch's time ran out) left it
                fut.set_result(reply)
            if reply is grpc.aio.EOF:
                while self._replies:
                    fut, _ = self._replies.popleft()
                    if not fut.done():
                        fut.set_result(reply)

    def _fail(self, e: BaseException) -> None:
        if self.failed is None:
            self.failed = e
        self._out.clear()
        self.unwritten = 0
        while self._replies:
            fut, _ = self._replies.popleft()
            if not fut.done():
                fut.set_exception(e)

    async def make_room(self) -> None:
        """Wait for the writer if more than MAX_UNWRITTEN_BYTES wait to be written."""
        if self.unwritten > MAX_UNWRITTEN_BYTES:
            await self.drain()

    async def drain(self) -> None:
        """Until every message sent so far is written (or the stream failed)."""
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    def abort(self) -> None:
        self._fail(ScheddError("the stream was abandoned"))
        self.call.cancel()
        for t in (self._writer, self._reader):
            if t is not None and not t.done():
                t.cancel()

    async def close(self) -> None:
        try:
            await self.drain()
            if self.failed is not None:
                self.abort()
                return
            if self._reader is not None:
                await asyncio.gather(self._reader, return_exceptions=True)
            if self.failed is None and not self.call.done():
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


def ask_prefetch(stream: ScheddStream, starts: list, max_requests: int) -> list[asyncio.Future]:
    """NEGOTIATOR_PREFETCH_REQUESTS over one schedd's stream: each start (a prefetch) with its
    send-requests, all written before any answer is read, so the schedd builds every
    submitter's list back to back instead of one round trip per session. The answers'
    futures, in the order of `starts`; the schedd keeps those sessions for the negotiator
    to resume."""
    ask = schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=max_requests))
    answers = []
    for m in starts:
        stream.send(m, m.start.submitter)
        answers.append(stream.ask(ask, m.start.submitter))
    return answers


async def collect_prefetch(starts: list, answers: list[asyncio.Future],
                           max_time_s: float | None) -> tuple[dict[str, Any], BaseException | None]:
    """Each submitter's first ResourceRequests, and the error that cut the prefetch short, if
    one did (what arrived before it is good). NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME bounds it
    (None: no bound); the submitters it did not reach negotiate as without it. The answers
    are shielded: a session may be awaiting the same future."""
    got: dict[str, Any] = {}
    try:
        async with asyncio.timeout(max_time_s):
            for m, answer in zip(starts, answers):
                reply = await asyncio.shield(answer)
                got[m.start.submitter] = requests_of(reply, "the schedd ended the prefetch without sending "
                                                            "its requests")
        return got, None
    except asyncio.CancelledError:
        raise
    except Exception as e:
        if isinstance(e, TimeoutError):
            e = ScheddError(f"NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME ({max_time_s:g} s) ran out "
                            f"after {len(got)} of {len(starts)} submitters")
        return got, e


async def prefetch(stream: ScheddStream, starts: list, max_requests: int,
                   max_time_s: float | None) -> tuple[dict[str, Any], BaseException | None]:
    """ask_prefetch, then collect_prefetch."""
    return await collect_prefetch(starts, ask_prefetch(stream, starts, max_requests), max_time_s)


def requests_of(reply, why: str):
    """The ResourceRequests a schedd's answer carries, or ScheddError(why)."""
    if reply is grpc.aio.EOF or reply.WhichOneof("msg") != "requests":
        raise ScheddError(why)
    return reply.requests
