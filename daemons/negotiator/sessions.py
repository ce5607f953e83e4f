"""The negotiator's sessions with schedds: the cycle's streams, the prefetch round, and one
submitter's session carried over its schedd's stream (NegotiatorDaemon's methods, kept
apart so each part reads in one sitting; the decisions are cycle.py's, the stream
mechanics streams.py's)."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import grpc

from daemons.core import ads
from daemons.core.rpc import describe
from daemons.negotiator.cycle import ERROR, RESUME, Cycle, Session
from daemons.negotiator.streams import (Outgoing, ScheddError, ScheddStream, ask_prefetch, collect_prefetch,
                                        requests_of)
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc

if TYPE_CHECKING:
    from daemons.negotiator.daemon import CycleRecord


class SessionsMixin:
    """NegotiatorDaemon's session methods."""

    def init_sessions(self) -> None:
        self._streams: dict[str, ScheddStream] = {}     # this cycle's Negotiate streams, by schedd address
        self._rec: CycleRecord | None = None             # the cycle under way, for failures reported late
        self._closing: list[asyncio.Future] = []
        # (submitter, schedd address) -> the future of its next ResourceRequests, asked for ahead
        # of its session: in the cycle's prefetch round, or as its last session stopped at its
        # limit (then also in _resumed)
        self._prefetched: dict[tuple[str, str], asyncio.Future] = {}
        self._resumed: set[tuple[str, str]] = set()

    def _stream(self, address: str) -> ScheddStream:
        """The cycle's Negotiate stream to a schedd: every submitter of that schedd negotiates
        over it in turn (HTCondor keeps its sockets to schedds in a cache the same way). A
        stream is reused while less than a quarter of NEGOTIATOR_TIMEOUT has passed since it
        opened, so a session always has most of the timeout ahead of it."""
        s = self._streams.get(address)
        if s is not None and s.failed is None and time.monotonic() - s.opened < self.cfg.timeout_s / 4:
            return s
        if s is not None:
            self._streams.pop(address)
            if s.failed is not None:
                s.abort()
            else:
                self._closing.append(asyncio.ensure_future(s.close()))
        stub = schedd_pb2_grpc.ScheddStub(self.channels.get(address))
        s = self._streams[address] = ScheddStream(
            stub.Negotiate(timeout=self.cfg.timeout_s), time.monotonic(),
            on_write_failed=lambda st, owner, e: self._write_failed(address, st, owner, e),
            on_written=self._written)
        return s

    def _written(self, messages: int) -> None:
        if self._rec is not None:
            self._rec.stream_messages += messages
            self._rec.stream_writes += 1

    def _write_failed(self, address: str, stream: ScheddStream, owner: str, e: BaseException) -> None:
        """A session's message could not be written after the session had ended (its last
        outcomes go out while the next session is served): that session failed, and the
        stream is no one's next."""
        if self._streams.get(address) is stream:
            self._streams.pop(address)
        if self._rec is not None:
            self._report_failure(owner, address, self._rec, e)

    async def _close_streams(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Shutting down: no goodbyes to schedds that may not answer.
            for f in self._closing:
                f.cancel()
            for st in streams:
                st.abort()
            self._closing = []
            return
        closing, self._closing = self._closing + [asyncio.ensure_future(st.close()) for st in streams], []
        if closing:
            await asyncio.gather(*closing, return_exceptions=True)

    def _start(self, name: str, rec: CycleRecord, prefetch: bool = False,
               prefetched: int = 0) -> schedd_pb2.NegotiatorMessage:
        return schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(
            submitter=name, cycle=rec.cycle, pool_time=rec.start, significant_attrs=self.significant_attrs,
            job_constraint=self.cfg.job_constraint, prefetch=prefetch, prefetched=prefetched))

    def _prefetch(self, cycle: Cycle, rec: CycleRecord) -> list[asyncio.Future]:
        """HTCondor's NEGOTIATOR_PREFETCH_REQUESTS: every submitter's first resource requests
        asked for from all schedds at once, before the first session; a session then starts
        with its batch in hand instead of a round trip to the schedd. HTCondor's negotiator
        waits for the whole round before its first session; here a session waits only for
        its own batch, so the first sessions are served while the schedd builds the later
        lists. Returns a watcher per schedd: it bounds the round by NEGOTIATOR_PREFETCH_
        REQUESTS_MAX_TIME, counts what arrived, and drops the stream of a failed round (its
        submitters then negotiate without)."""
        by_address: dict[str, list[str]] = {}
        for sub in cycle.submitters:
            if sub.idle > 0:
                by_address.setdefault(sub.address, []).append(sub.name)

        async def watch(address: str, stream: ScheddStream, starts: list, answers: list) -> None:
            got, err = await collect_prefetch(starts, answers, self.cfg.prefetch_max_time_s)
            rec.prefetched += len(got)
            if err is not None:
                why = describe(err) if isinstance(err, grpc.aio.AioRpcError) else f"{type(err).__name__}: {err}"
                self.log.warning("Error when prefetching from <%s> (%d of %d submitters): %s; the others "
                                 "negotiate without", address, len(got), len(starts), why)
                if self._streams.get(address) is stream:
                    self._streams.pop(address)
                stream.abort()

        self.log.info("Starting prefetch round; %d potential prefetches to do.",
                      sum(len(n) for n in by_address.values()))
        watchers = []
        for address, names in by_address.items():
            try:
                stream = self._stream(address)
            except Exception:   # a malformed address: its sessions fail as they always have
                continue
            # Asked for in the order the first spin is likely to negotiate (the best priority
            # first), so the first session's batch is the first the schedd builds.
            names.sort(key=lambda n: (self.accountant.effective_priority(n), n))
            starts = [self._start(n, rec, prefetch=True) for n in names]
            answers = ask_prefetch(stream, starts, self.cfg.request_list_size)
            for name, answer in zip(names, answers):
                self._prefetched[(name, address)] = answer
            watchers.append(asyncio.ensure_future(watch(address, stream, starts, answers)))
        return watchers

    async def _negotiate_with(self, session: Session, rec: CycleRecord) -> str:
        """DONE (it has nothing more), RESUME (stopped at its limit) or ERROR (the session
        failed: the schedd broke the stream, sent something malformed, or serving one of its
        requests raised). A failure costs only this submitter's session."""
        try:
            stream = self._stream(session.address)
        except Exception as e:   # a malformed address
            return self._failed(session, rec, e)
        out = Outgoing(self.log)
        owner = session.name
        batch = self._prefetched.pop((session.name, session.address), None)
        # Where the session's wall time goes (the cycle record's "session_*" figures): writing
        # to the stream, waiting for the schedd's requests, and matching them.
        spent = rec.phases
        clock = time.perf_counter
        try:
            t = clock()
            if isinstance(batch, asyncio.Future):
                # Prefetched (_prefetch), or asked for as this submitter's last session ended
                # (below): usually here already. If that stream broke meanwhile, or the prefetch
                # round ran out of time, the session starts afresh on another.
                resumed = (session.name, session.address) in self._resumed
                self._resumed.discard((session.name, session.address))
                try:
                    batch = requests_of(await asyncio.shield(batch), "")
                    rec.prefetched_resumed += int(resumed)
                except Exception:
                    batch = None
                    stream = self._stream(session.address)
                t1 = clock()
                spent["session_read"] = spent.get("session_read", 0.0) + t1 - t
                t = t1
            if batch is not None and not batch.requests:
                session.no_more()    # the prefetch found no idle job: nothing to ask the schedd
                return session.result()
            stream.send(self._start(session.name, rec, prefetched=len(batch.requests) if batch else 0), owner)
            while not session.stopped:
                if batch is None:
                    # What the last batch decided goes first: the schedd then leaves the
                    # rejected autoclusters out of the next batch.
                    out.flush(stream, session)
                    answer = stream.ask(schedd_pb2.NegotiatorMessage(
                        send_requests=schedd_pb2.SendRequests(max_requests=self.cfg.request_list_size)), owner)
                    t1 = clock()
                    spent["session_write"] = spent.get("session_write", 0.0) + t1 - t
                    batch = requests_of(await answer, "the schedd ended the negotiation without sending its requests")
                    t = clock()
                    spent["session_read"] = spent.get("session_read", 0.0) + t - t1
                else:
                    t1 = clock()
                    spent["session_write"] = spent.get("session_write", 0.0) + t1 - t
                    t = t1
                if batch.requests and session.cycle.built_mm is None:
                    session.cycle.mm     # the first request: the slots are grouped now ("group", not serving)
                    t = clock()
                for req in batch.requests:
                    if session.stopped:
                        break
                    session.serve_text(req.request_id, req.ad.text, req.count, f"resource request {req.request_id}")
                t1 = clock()
                spent["session_serve"] = spent.get("session_serve", 0.0) + t1 - t
                t = t1
                # Each batch's outcomes go as they are decided; past MAX_UNWRITTEN_BYTES not yet
                # written, the session waits for the stream (a large pool makes them faster).
                out.flush(stream, session)
                await stream.make_room()
                if batch.no_more or not batch.requests:
                    if not batch.requests:
                        session.no_more()
                    break
                batch = None
            out.flush(stream, session)
            result = session.result()
            if result == RESUME and self.cfg.prefetch_requests and stream.failed is None:
                # The submitter stopped at its limit and may be offered more in the next spin
                # of the pie: its next requests are asked for now, behind this session's
                # outcomes, so that session finds them here instead of waiting a round trip.
                stream.send(self._start(session.name, rec, prefetch=True), owner)
                self._prefetched[(session.name, session.address)] = stream.ask(schedd_pb2.NegotiatorMessage(
                    send_requests=schedd_pb2.SendRequests(max_requests=self.cfg.request_list_size)), owner)
                self._resumed.add((session.name, session.address))
            spent["session_write"] = spent.get("session_write", 0.0) + clock() - t
            return result
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # A broken stream is no one's next session: the next submitter of that schedd opens another.
            if self._streams.get(session.address) is stream:
                self._streams.pop(session.address)
            if stream.failed is None:
                # Serving a request failed, not the stream: the matches decided before it
                # still reach the schedd.
                try:
                    out.flush(stream, session)
                except Exception:
                    pass
                await stream.drain()
            out.log_lines(session.take_lines())
            stream.abort()
            return self._failed(session, rec, e)

    def _failed(self, session: Session, rec: CycleRecord, e: BaseException) -> str:
        self._report_failure(session.name, session.address, rec, e)
        return ERROR

    def _report_failure(self, name: str, address: str, rec: CycleRecord, e: BaseException) -> None:
        expected = isinstance(e, (grpc.aio.AioRpcError, ads.AdError, ScheddError, asyncio.InvalidStateError))
        why = describe(e) if isinstance(e, grpc.aio.AioRpcError) else f"{type(e).__name__}: {e}"
        self.log.warning("  Negotiation with %s at <%s> failed: %s", name, address, why,
                         exc_info=None if expected else e)
        rec.failed.append(f"{name}: {why}")

