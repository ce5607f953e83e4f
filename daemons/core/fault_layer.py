"""Fault injection as a layer of the RPC pipeline: where faults.py's decisions are acted out.

One `FaultInjector` per daemon holds the plan (set at start from <SUBSYS>_FAULT_PLAN or
FAULT_PLAN, and at run time through the Admin service), the seeded random stream, and
the counts. Two layers use it:

- `FaultServerLayer` (server pipeline): on admit, and on each message of a stream,
  delays (sleeping in line, so a stream's messages keep their order), aborts with the
  chosen status, or drops: holds the call unanswered until the caller's deadline, or
  until the fault ends, when the call fails UNAVAILABLE like a reset connection;
- `FaultClientLayer` (client pipeline of the daemon's channels): tags every call
  with the daemon's role and name (so a server fault can pick its peer), and delays,
  aborts or drops calls before they leave. A delay uses up the call's own deadline,
  as a slow network would.

Clock faults move the daemon's PoolClock (its skews) while they are in force. Every
fault that fires is logged in the daemon's log and counted on /metrics.
"""
from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from typing import Any, Sequence

import grpc
# What grpc.aio raises when a status is sent on a call that has already ended (no public name).
from grpc._cython.cygrpc import ExecuteBatchError

from daemons.core import faults as fm
from daemons.core.clock import PoolClock
from daemons.core.interceptors import Call, ClientLayer, OutgoingCall, ServerLayer

# Metadata key naming the calling daemon ("role name"), so server faults can match peers.
DAEMON_HEADER = "x-htcpool-daemon"


class FaultInjector:
    def __init__(self, clock: PoolClock, log: logging.Logger, *, role: str = "", name: str = "",
                 seed: int | str = 0) -> None:
        self.clock = clock
        self.log = log
        self.role = role
        self.name = name
        self.rng = random.Random(f"{seed}:{role}:{name}")
        self.faults: list[fm.Fault] = []
        self.fired: Counter[tuple[str, str, str, str]] = Counter()   # (fault, kind, side, method)
        self.fired_by_fault: Counter[str] = Counter()
        self.active: Counter[str] = Counter()
        self.fired_total = 0         # faults fired on calls, of any kind (a round a fault slowed is no lag)
        self._changed = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._clock_since: dict[str, float] = {}     # clock fault id -> wall time it took effect
        self.layer = FaultServerLayer(self)

    # ---- the plan ---------------------------------------------------------------------
    def set_plan(self, new: Sequence[fm.Fault], replace_all: bool = False) -> None:
        """Add faults (one with an existing id replaces it), or replace the whole plan."""
        checked = [fm.validate(f) for f in new]
        ids = [f.id for f in checked]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise fm.FaultError(f"fault id {dup[0]!r} is used twice")
        kept = [] if replace_all else [f for f in self.faults if f.id not in set(ids)]
        self.faults = kept + checked
        for f in checked:
            self._clock_since.pop(f.id, None)
            self.log.warning("FAULT planned %s", f.describe())
        self._apply()

    def clear(self, ids: Sequence[str] = ()) -> list[str]:
        """Remove the named faults (all when none is named); return the ids removed."""
        gone = [f.id for f in self.faults if not ids or f.id in ids]
        if ids:
            unknown = sorted(set(ids) - {f.id for f in self.faults})
            if unknown:
                raise fm.FaultError(f"no fault {unknown[0]!r} in this daemon's plan "
                                    f"(planned: {', '.join(f.id for f in self.faults) or 'none'})")
        self.faults = [f for f in self.faults if f.id not in gone]
        for i in gone:
            self._clock_since.pop(i, None)
        if gone:
            self.log.warning("FAULT cleared %s", ", ".join(gone))
        self._apply()
        return gone

    def _apply(self) -> None:
        """Bring the clock and the layer's hooks in line with the plan at this moment."""
        now = self.clock.true_now()
        wall = self.clock.wall()
        skews = []
        for f in self.faults:
            if f.is_clock and f.active_at(now):
                since = self._clock_since.setdefault(f.id, wall)
                skews.append((f.clock_offset_s, f.clock_drift, since))
            else:
                self._clock_since.pop(f.id, None)
        before = self.clock.skew_now()
        self.clock.set_skews(skews)
        after = self.clock.skew_now()
        if abs(after - before) > 1e-6 or skews:
            self.log.warning("FAULT clock: this daemon's pool clock is now %+.1f s from the pool's (was %+.1f s)%s",
                             after, before, f", drifting at {self.clock.rate / self.clock.scale - 1:+g}"
                             if any(d for _, d, _ in skews) else "")
        self.layer.enable(any(not f.is_clock for f in self.faults))
        # Wake dropped calls so they see whether their fault still holds.
        self._changed.set()
        self._changed = asyncio.Event()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        nxt = fm.next_change(self.faults, now)
        if nxt is not None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            # Windows are read on the true pool clock.
            self._timer = loop.call_later(max(0.0, (nxt - now) / self.clock.scale) + 0.001, self._apply)

    # ---- deciding and acting ---------------------------------------------------------
    def decide(self, side: str, method: str, peers: tuple[str, ...]) -> fm.Action | None:
        if not self.faults:
            return None
        return fm.decide(self.faults, fm.CallInfo(side, method, peers), self.clock.true_now(), self.rng,
                         self.active)

    def _fired(self, action: fm.Action, side: str, method: str, peer: str, what: str) -> None:
        kinds = {f.id: f.kind for f in self.faults}
        for fid in action.faults:
            self.fired[(fid, kinds.get(fid, "?"), side, method)] += 1
            self.fired_by_fault[fid] += 1
        self.fired_total += 1
        effect = []
        if action.delay_s:
            effect.append(f"delay {action.delay_s:.2f} s")
        if action.drop:
            effect.append("drop")
        elif action.abort:
            effect.append(f"abort {action.abort}")
        self.log.warning("FAULT %s fired on %s %s (%s, peer %s): %s", ",".join(action.faults), what, method, side,
                         peer or "?", " then ".join(effect))

    async def _wait_dropped(self, action: fm.Action, wall_timeout: float | None) -> bool:
        """Hold a dropped call; True when its deadline passed, False when the fault ended first."""
        loop = asyncio.get_running_loop()
        deadline = None if wall_timeout is None else loop.time() + wall_timeout
        while True:
            ids = {f.id for f in self.faults if f.active_at(self.clock.true_now())}
            if not any(fid in ids for fid in action.faults):
                return False
            waits = []
            if deadline is not None:
                waits.append(deadline - loop.time())
            if action.drop_until is not None:
                waits.append((action.drop_until - self.clock.true_now()) / self.clock.scale)
            if deadline is not None and deadline - loop.time() <= 0:
                return True
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), timeout=max(0.0, min(waits)) if waits else None)
            except asyncio.TimeoutError:
                pass

    def _wall(self, pool_seconds: float) -> float:
        # Delays are pool seconds on the pool's true rate: a skewed clock does not slow the network.
        return max(0.0, pool_seconds / self.clock.scale)

    async def act_server(self, action: fm.Action, call: Call, context: grpc.aio.ServicerContext,
                         what: str = "call") -> None:
        peer = _peer_label(call)
        self._fired(action, "server", call.short, peer, what)
        for fid in action.faults:
            self.active[fid] += 1
        try:
            if action.delay_s:
                await asyncio.sleep(self._wall(action.delay_s))
            if action.drop:
                expired = await self._wait_dropped(action, context.time_remaining())
                code = grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.UNAVAILABLE
                await _abort(context, code, f"call dropped by fault {','.join(action.faults)}")
            elif action.abort:
                await _abort(context, getattr(grpc.StatusCode, action.abort),
                             f"fault {','.join(action.faults)} injected {action.abort}")
        finally:
            for fid in action.faults:
                self.active[fid] -= 1

    async def act_client(self, action: fm.Action, call: OutgoingCall) -> None:
        self._fired(action, "client", call.short, call.target, "call")
        for fid in action.faults:
            self.active[fid] += 1
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            if action.delay_s:
                delay = self._wall(action.delay_s)
                if call.timeout is not None and delay >= call.timeout:
                    await asyncio.sleep(call.timeout)
                    raise _rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED,
                                     f"deadline passed while delayed by fault {','.join(action.faults)}")
                await asyncio.sleep(delay)
            if action.drop:
                left = None if call.timeout is None else max(0.0, call.timeout - (loop.time() - t0))
                expired = await self._wait_dropped(action, left)
                raise _rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.UNAVAILABLE,
                                 f"call dropped by fault {','.join(action.faults)}")
            if action.abort:
                raise _rpc_error(getattr(grpc.StatusCode, action.abort),
                                 f"fault {','.join(action.faults)} injected {action.abort}")
            if call.timeout is not None:
                call.timeout = max(0.001, call.timeout - (loop.time() - t0))
        finally:
            for fid in action.faults:
                self.active[fid] -= 1

    # ---- reporting ---------------------------------------------------------------------
    def state(self) -> list[tuple[fm.Fault, int, int]]:
        return [(f, self.fired_by_fault[f.id], self.active[f.id]) for f in self.faults]

    def metrics(self) -> dict[str, Any]:
        return {
            "faults_fired_total": {(("fault", fid), ("kind", kind), ("side", side), ("method", method)): float(n)
                                   for (fid, kind, side, method), n in self.fired.items()},
            "faults_planned": float(len(self.faults)),
            "faults_active_calls": float(sum(self.active.values())),
            "clock_skew_seconds": self.clock.skew_now(),
        }


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def _peer_label(call: Call) -> str:
    return call.metadata.get(DAEMON_HEADER) or call.peer


def server_peers(call: Call) -> tuple[str, ...]:
    """The names a server fault's `peer` may match: the caller's role and daemon name
    (from its tag), its host, and gRPC's peer string."""
    tag = call.metadata.get(DAEMON_HEADER, "")
    return tuple(tag.split(" ", 1)) + (call.peer_host, call.peer)


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, details: str) -> None:
    """End a faulted call with `code`, unless it has ended already: a held call's deadline
    passes in gRPC at the moment the drop lets go of it, or its caller goes away. Then there
    is no one to answer, and the handler just stops (as gRPC stops one whose caller left)."""
    if context.done():
        raise asyncio.CancelledError("the call ended while a fault held it")
    try:
        await context.abort(code, details)
    except ExecuteBatchError:
        raise asyncio.CancelledError("the call ended while a fault held it") from None


class FaultServerLayer(ServerLayer):
    name = "faults"

    def __init__(self, injector: FaultInjector) -> None:
        self.inj = injector
        # Per-message hooks only while a plan has call faults: otherwise a stream pays nothing.
        self.on_request = None
        self.on_response = None

    def enable(self, on: bool) -> None:
        self.on_request = self._message if on else None      # type: ignore[assignment]
        self.on_response = self._message if on else None     # type: ignore[assignment]

    async def admit(self, call: Call, context: grpc.aio.ServicerContext) -> None:
        if not self.inj.faults:
            return
        call.notes["context"] = context
        action = self.inj.decide("server", call.short, server_peers(call))
        if action is not None:
            await self.inj.act_server(action, call, context)

    async def _message(self, call: Call, msg: Any) -> None:
        context = call.notes.get("context")
        if context is None:
            return
        action = self.inj.decide("server", call.short, server_peers(call))
        if action is not None:
            await self.inj.act_server(action, call, context, what="stream message of")

    def metrics(self) -> dict[str, Any]:
        return self.inj.metrics()


class FaultClientLayer(ClientLayer):
    name = "faults"

    def __init__(self, injector: FaultInjector) -> None:
        self.inj = injector

    async def prepare(self, call: OutgoingCall) -> None:
        call.metadata.append((DAEMON_HEADER, f"{self.inj.role} {self.inj.name}"))
        if not self.inj.faults:
            return
        host = call.target.rsplit(":", 1)[0]
        action = self.inj.decide("client", call.short, (call.target, host))
        if action is not None:
            await self.inj.act_client(action, call)
