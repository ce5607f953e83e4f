"""The schedd's claim calls to startds, batched per startd.

A negotiation hands the schedd hundreds of matches at once, most of them on slots of
the same few startd processes (one process emulates many machines); claiming each
with its own RequestClaim and ActivateClaim round trip made the calls, not the work,
the schedd's cost. Here every claim (or activation) asked for within one turn of the
event loop, and every one asked for while earlier batches to that startd are still on
their way, goes to the startd in one RequestClaims (ActivateClaims) call. Each claim
keeps HTCondor's semantics: its own claim id, lease and activation, and its own answer
(the caller awaits exactly the reply a single call would have given, or its error).
Releases for the same reason share one ReleaseClaim, which has always taken a list.

A startd that does not know the batched calls (an older peer answers UNIMPLEMENTED) is
remembered and gets single calls from then on.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import grpc

from daemons.core.lag import RecentMax
from daemons.pb.htcpool import startd_pb2, startd_pb2_grpc

MAX_BATCH = 200          # claims (activations) in one call; the startd refuses more than 1000
# A burst is cut finer than MAX_BATCH while it is small: the startd answers the first
# claims while the schedd is still sending the rest, and the schedd activates those while
# the startd claims the next ones, so the schedd's and the startd's work on a cycle's
# matches overlap instead of taking turns (a burst of 100 claims in one call: the first
# activations 170 - 300 ms after the first match at 10x; in calls of 16, 70 - 140 ms). A large
# burst still goes in large calls, where the cost of each call matters more.
PIPELINE_BATCH = 16
MAX_IN_FLIGHT = 2        # batched calls of one kind to one startd at a time; the rest wait and join
ANSWER_CHUNK = 4         # answers of a batch handed to their callers at a time (_send)
RPC_TIMEOUT_S = 10.0     # wall seconds for one call, single or batched ...
PER_ITEM_TIMEOUT_S = 0.02   # ... plus this much per claim in a batch


def batch_timeout_s(n: int) -> float:
    return RPC_TIMEOUT_S + PER_ITEM_TIMEOUT_S * n


def batch_size(waiting: int) -> int:
    """How many of `waiting` queued claims (activations) the next call takes."""
    return min(MAX_BATCH, max(PIPELINE_BATCH, waiting // 8))


@dataclass
class _Queue:
    waiting: list[tuple[Any, asyncio.Future]] = field(default_factory=list)
    in_flight: int = 0
    scheduled: bool = False


@dataclass(frozen=True)
class _Kind:
    name: str                 # "claims" | "activations" | "releases": what the log calls them
    single: str               # the single-claim method of the stub ("" when the batched one is old)
    batched: str              # the batched method
    build: Callable[[list, str], Any]          # (items, reason) -> the batched request
    answers: Callable[[Any, int], list]        # (reply, n) -> one answer per item


def _per_item(reply_type: type, what: str) -> Callable[[Any, int], list]:
    def answers(reply: Any, n: int) -> list:
        got = list(reply.replies)
        short = reply_type(ok=False, reason=f"the startd answered {len(got)} of the {n} {what} of a batch")
        return got[:n] + [short] * (n - len(got))
    return answers


CLAIMS = _Kind("claims", "RequestClaim", "RequestClaims",
               lambda items, _: startd_pb2.RequestClaimsRequest(claims=items),
               _per_item(startd_pb2.RequestClaimReply, "claims"))
ACTIVATIONS = _Kind("activations", "ActivateClaim", "ActivateClaims",
                    lambda items, _: startd_pb2.ActivateClaimsRequest(activations=items),
                    _per_item(startd_pb2.ActivateClaimReply, "activations"))
# ReleaseClaim has always taken a list of claim ids with one reason: claims released for the
# same reason share a call, and each caller gets the call's reply.
RELEASES = _Kind("releases", "", "ReleaseClaim",
                 lambda items, reason: startd_pb2.ReleaseClaimRequest(claim_ids=items, reason=reason),
                 lambda reply, n: [reply] * n)


class StartdCalls:
    """RequestClaim, ActivateClaim and ReleaseClaim to any startd, batched per startd address."""

    def __init__(self, stub_for: Callable[[str], startd_pb2_grpc.StartdStub], log: logging.Logger,
                 batching: bool = True, clock: Callable[[], float] | None = None,
                 round_trips: RecentMax | None = None) -> None:
        self.stub_for = stub_for
        self.log = log
        self.batching = batching
        # Each call's round trip (pool seconds from sending it to its last answer handed
        # over), per startd: what the schedd's keepalives tell the startd (ClaimsMixin).
        self.clock = clock
        self.round_trips = round_trips
        self._out: dict[str, dict[int, float]] = {}   # startd address -> calls out there: sent at
        self._seq = 0
        self._queues: dict[tuple[str, str, str], _Queue] = {}   # (kind, startd address, reason)
        self._single_only: set[str] = set()      # startds that answered UNIMPLEMENTED to a batch
        self._tasks: set[asyncio.Task] = set()
        self.calls = {"single": 0, "batched": 0, "batched_items": 0}

    async def request_claim(self, address: str, request: startd_pb2.RequestClaimRequest
                            ) -> startd_pb2.RequestClaimReply:
        return await self._call(CLAIMS, address, request)

    async def activate_claim(self, address: str, request: startd_pb2.ActivateClaimRequest
                             ) -> startd_pb2.ActivateClaimReply:
        return await self._call(ACTIVATIONS, address, request)

    async def release_claim(self, address: str, claim_id: str, reason: str) -> startd_pb2.ReleaseClaimReply:
        """Release one claim; those released for the same reason meanwhile share the call."""
        if not self.batching:
            self.calls["single"] += 1
            return await self.stub_for(address).ReleaseClaim(
                startd_pb2.ReleaseClaimRequest(claim_ids=[claim_id], reason=reason), timeout=RPC_TIMEOUT_S)
        return await self._call(RELEASES, address, claim_id, reason)

    def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()

    # ---- inside -----------------------------------------------------------------------
    async def _single(self, kind: _Kind, address: str, request: Any) -> Any:
        self.calls["single"] += 1
        token = self._going(address)
        try:
            reply = await getattr(self.stub_for(address), kind.single)(request, timeout=RPC_TIMEOUT_S)
        finally:
            sent = self._back(address, token)
        self._round_trip(address, sent)
        return reply

    def _now(self) -> float:
        return self.clock() if self.clock is not None else 0.0

    def _round_trip(self, address: str, sent: float) -> None:
        if self.round_trips is not None:
            now = self._now()
            self.round_trips.add(address, now, now - sent)

    def _going(self, address: str) -> int:
        """A call to `address` is sent now: its token for _back."""
        self._seq += 1
        self._out.setdefault(address, {})[self._seq] = self._now()
        return self._seq

    def _back(self, address: str, token: int) -> float:
        """The call `token` is answered (or failed): when it was sent."""
        out = self._out[address]
        sent = out.pop(token)
        if not out:
            del self._out[address]
        return sent

    def oldest_out_s(self, address: str, now: float) -> float:
        """How long the oldest call still unanswered at `address` has been out (pool s): a
        round trip at least that long, before it is over and measured."""
        out = self._out.get(address)
        return max(0.0, now - min(out.values())) if out else 0.0

    async def _call(self, kind: _Kind, address: str, request: Any, reason: str = "") -> Any:
        if not self.batching or (kind.single and address in self._single_only):
            return await self._single(kind, address, request)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        key = (kind.name, address, reason)
        q = self._queues.setdefault(key, _Queue())
        q.waiting.append((request, fut))
        if not q.scheduled:
            # Sent once the loop has run what is ready now: the other claims of this
            # negotiation's batch of matches join the call.
            q.scheduled = True
            loop.call_soon(self._flush, kind, key)
        return await fut

    def _flush(self, kind: _Kind, key: tuple[str, str, str]) -> None:
        q = self._queues.get(key)
        if q is None:
            return
        q.scheduled = False
        while q.waiting and q.in_flight < MAX_IN_FLIGHT:
            n = batch_size(len(q.waiting))
            items = [(r, f) for r, f in q.waiting[:n] if not f.done()]
            del q.waiting[:n]
            if not items:
                continue
            q.in_flight += 1
            task = asyncio.get_running_loop().create_task(self._send(kind, key, q, items))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if not q.waiting and not q.in_flight:
            del self._queues[key]

    async def _send(self, kind: _Kind, key: tuple[str, str, str], q: _Queue,
                    items: list[tuple[Any, asyncio.Future]]) -> None:
        _, address, reason = key
        released = False
        try:
            request = kind.build([r for r, _ in items], reason)
            try:
                self.calls["batched"] += 1
                self.calls["batched_items"] += len(items)
                token = self._going(address)
                try:
                    reply = await getattr(self.stub_for(address), kind.batched)(
                        request, timeout=batch_timeout_s(len(items)))
                finally:
                    sent = self._back(address, token)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED or not kind.single:
                    for _, fut in items:
                        if not fut.done():
                            fut.set_exception(e)
                    return
                self.log.info("the startd at %s does not take batched claim calls; sending them one by one",
                              address)
                self._single_only.add(address)
                await asyncio.gather(*(self._relay(kind, address, r, f) for r, f in items))
                return
            # The next batch goes out before this one's answers are handed over, and they
            # are handed over a few at a time: each few callers' next calls (a claim's
            # activation) are sent while the rest of the answers wait, instead of after
            # every caller of the batch has run. The startd works on the next calls while
            # the schedd digests the answers.
            self._release(kind, key, q)
            released = True
            answers = list(zip(items, kind.answers(reply, len(items))))
            for i in range(0, len(answers), ANSWER_CHUNK):
                if i:
                    await asyncio.sleep(0)
                for (_, fut), answer in answers[i:i + ANSWER_CHUNK]:
                    if not fut.done():
                        fut.set_result(answer)
            self._round_trip(address, sent)
        except BaseException as e:
            for _, fut in items:
                if not fut.done():
                    if isinstance(e, asyncio.CancelledError):
                        fut.cancel()
                    else:
                        fut.set_exception(e)
            raise
        finally:
            if not released:
                self._release(kind, key, q)

    def _release(self, kind: _Kind, key: tuple[str, str, str], q: _Queue) -> None:
        """A call of `q` is over: the next waiting ones are sent (now, not after what the
        loop has ready), or the queue goes if nothing is left."""
        q.in_flight -= 1
        if q.waiting:
            self._flush(kind, key)
        elif not q.in_flight and self._queues.get(key) is q:
            del self._queues[key]

    async def _relay(self, kind: _Kind, address: str, request: Any, fut: asyncio.Future) -> None:
        try:
            result = await self._single(kind, address, request)
        except Exception as e:
            if not fut.done():
                fut.set_exception(e)
            return
        if not fut.done():
            fut.set_result(result)
