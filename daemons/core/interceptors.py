"""Cross-cutting RPC behaviour, in one place: every call into and out of a daemon passes here.

Services stay free of authentication, authorization, fault injection and RPC metrics;
those are *layers* of one server pipeline (a grpc.aio server interceptor) and one
client pipeline (grpc.aio client interceptors on every channel a process opens).

Server side, for each call, in order:
1. a `Call` is built (method, peer, metadata) and made visible to the service through
   `current_call()` (the schedd reads the authenticated identity there, for Owner);
2. each layer's `admit(call, context)` runs; a layer refuses by aborting the call
   (`context.abort`) and may also wait (a fault's delay);
3. for a call with one request message, each layer that defines `on_unary_request`
   sees it before the handler (authorization that depends on the request: the ad
   types of a collector update);
4. for streams, each layer that defines `on_request` / `on_response` sees every message,
   one at a time and in order, so a delay keeps the stream's order;
5. the handler runs; an exception it did not turn into a status is logged with its
   traceback, counted, and returned as INTERNAL naming the method (never a bare UNKNOWN)
   — except gRPC's own refusal to send on a call whose client has already gone, which
   is counted as CANCELLED.
Every call is counted by method and status code for /metrics.

Client side, each layer's `prepare(call)` sees an `OutgoingCall` (the address called,
the method, the metadata, the time left before its deadline) and may add metadata (a
token), delay it (shortening what is left of its deadline) or fail it (client-side
faults) before it leaves. A layer that needs only the method and metadata overrides
`outgoing(method, metadata)` instead.
"""
from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import grpc

UNAUTHENTICATED_IDENTITY = "unauthenticated@unmapped"


@dataclass
class Call:
    """One incoming RPC, as the layers and the service see it."""
    method: str                    # "/htcpool.v1.Schedd/Submit"
    peer: str                      # gRPC's peer string, e.g. "ipv4:127.0.0.1:50512"
    metadata: dict[str, str]
    identity: str = UNAUTHENTICATED_IDENTITY
    authenticated: bool = False
    # Authorization levels the caller holds (filled by the security layer, if any).
    levels: frozenset[str] = frozenset()
    started: float = field(default_factory=time.monotonic)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def service(self) -> str:
        return self.method.rsplit("/", 2)[-2].rsplit(".", 1)[-1] if "/" in self.method else ""

    @property
    def name(self) -> str:
        return self.method.rsplit("/", 1)[-1]

    @property
    def short(self) -> str:
        """'Schedd.Submit'."""
        return f"{self.service}.{self.name}"

    @property
    def peer_host(self) -> str:
        """The caller's IP address (or 'unix' / '' when not over TCP)."""
        p = self.peer
        if p.startswith("ipv4:"):
            return p[5:].rsplit(":", 1)[0]
        if p.startswith("ipv6:"):
            return p[5:].rsplit(":", 1)[0].strip("[]")
        return p.split(":", 1)[0]


_current: contextvars.ContextVar[Call | None] = contextvars.ContextVar("htcpool_call", default=None)


def current_call() -> Call | None:
    """The RPC being served by this task, if any."""
    return _current.get()


class ServerLayer:
    """One concern of the server pipeline. Override what you need."""
    name = "layer"

    async def admit(self, call: Call, context: grpc.aio.ServicerContext) -> None:
        """Runs before the handler; abort the call to refuse it."""

    # Stream hooks (None: not called, so a layer without them costs nothing per message).
    on_request: Callable[[Call, Any], Awaitable[None]] | None = None
    on_response: Callable[[Call, Any], Awaitable[None]] | None = None
    # The single request of a unary-request call, before the handler; abort to refuse.
    on_unary_request: Callable[[Call, Any, grpc.aio.ServicerContext], Awaitable[None]] | None = None

    def metrics(self) -> dict[str, Any]:
        return {}


class StartingGate(ServerLayer):
    """Refuses every call with UNAVAILABLE until the daemon has restored its state.

    A daemon serves its port before its start-up is over (it learns the pool's clock from
    the collector first), and a restarted one keeps its old port, where peers are already
    calling: a schedd that answered then would read a startd's news of a job's exit
    against a queue not yet restored and drop it, or tell condor_q it has no jobs. As an
    HTCondor daemon reads its state before it handles commands, calls are refused until
    the daemon drops it from the pipeline (`ServerPipeline.drop`); callers retry
    UNAVAILABLE as they retry a daemon that is down. Dropped, it costs nothing per call."""
    name = "starting"

    def __init__(self, what: str) -> None:
        self.what = what

    async def admit(self, call: Call, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.what} is starting (its state is not restored yet)")


@dataclass
class OutgoingCall:
    """One call this process is about to make, as the client layers see it."""
    target: str                         # the address called, "host:port"
    method: str                         # "/htcpool.v1.Startd/KeepAlive"
    metadata: list[tuple[str, str]]
    timeout: float | None               # wall seconds left before the deadline; None = none

    @property
    def short(self) -> str:
        """'Startd.KeepAlive'."""
        parts = self.method.rsplit("/", 2)
        return f"{parts[-2].rsplit('.', 1)[-1]}.{parts[-1]}" if len(parts) >= 2 else self.method


class ClientLayer:
    """One concern of the client pipeline."""
    name = "layer"

    async def prepare(self, call: OutgoingCall) -> None:
        """Runs before a call leaves: add to its metadata, wait, or raise to fail the call."""
        await self.outgoing(call.method, call.metadata)

    async def outgoing(self, method: str, metadata: list[tuple[str, str]]) -> None:
        """The simple form of `prepare`: add to `metadata`, wait, or raise to fail the call."""


class ServerPipeline(grpc.aio.ServerInterceptor):
    def __init__(self, layers: Sequence[ServerLayer] = (), log: logging.Logger | None = None) -> None:
        self.layers: list[ServerLayer] = list(layers)
        self.log = log or logging.getLogger("htcpool.rpc")
        self.calls: Counter[tuple[str, str]] = Counter()      # (method, code) -> count
        self.handler_errors: Counter[str] = Counter()         # method -> unexpected exceptions
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def add(self, layer: ServerLayer) -> None:
        self.layers.append(layer)

    def drop(self, layer: ServerLayer) -> None:
        # A new list, not an edit of the old: a call between two awaits of its admission
        # goes on through the list it started with.
        self.layers = [other for other in self.layers if other is not layer]

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        method = details.method
        cached = self._wrapped.get(method)
        if cached is not None:
            return cached
        handler = await continuation(details)
        if handler is None:
            return None
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = wrapped
        return wrapped

    # ---- per call --------------------------------------------------------------------
    async def _enter(self, method: str, context: grpc.aio.ServicerContext) -> Call:
        md = {}
        for k, v in context.invocation_metadata() or ():
            if isinstance(v, str):
                md[k] = v
        call = Call(method=method, peer=context.peer() or "", metadata=md)
        _current.set(call)
        for layer in self.layers:
            await layer.admit(call, context)
        return call

    def _finish(self, call: Call | None, method: str, code: grpc.StatusCode | None) -> None:
        self.calls[(method, (code or grpc.StatusCode.OK).name)] += 1

    def _client_gone(self, method: str, context: grpc.aio.ServicerContext, exc: BaseException) -> bool:
        """gRPC could not send on a call whose client has already gone (it cancelled, or its
        deadline passed, while a layer or the handler was answering): nothing failed here and
        nobody is left to answer, so it is counted as CANCELLED, not as a handler error. Seen
        when the security layer refuses a client stream its client abandons at the same moment."""
        if not isinstance(exc, grpc.aio.InternalError):
            return False
        try:
            gone = context.cancelled() or context.done() or not context.peer()
        except Exception:
            gone = False
        if gone:
            self.calls[(method, grpc.StatusCode.CANCELLED.name)] += 1
            self.log.info("%s: the client went away before its answer could be sent (%s)",
                          method.rsplit("/", 1)[-1], type(exc).__name__)
        return gone

    async def _failed(self, method: str, context: grpc.aio.ServicerContext, exc: BaseException) -> None:
        short = method.rsplit("/", 2)
        where = f"{short[-2].rsplit('.', 1)[-1]}.{short[-1]}" if len(short) >= 2 else method
        self.handler_errors[method] += 1
        self.log.error("unexpected error in %s from %s: %s: %s", where, context.peer(), type(exc).__name__, exc,
                       exc_info=exc)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {where}: {type(exc).__name__}")

    def _code_of(self, context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
        try:
            return context.code()
        except Exception:
            return None

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        pipeline = self
        request_hooks = lambda: [l for l in pipeline.layers if l.on_request is not None]  # noqa: E731
        response_hooks = lambda: [l for l in pipeline.layers if l.on_response is not None]  # noqa: E731

        async def requests_through(call: Call, it: AsyncIterator[Any]) -> AsyncIterator[Any]:
            hooks = request_hooks()
            async for msg in it:
                for layer in hooks:
                    await layer.on_request(call, msg)  # type: ignore[misc]
                yield msg

        async def unary_request(call: Call, request: Any, context) -> None:
            for layer in pipeline.layers:
                if layer.on_unary_request is not None:
                    await layer.on_unary_request(call, request, context)

        async def unary_response(behavior, request_or_iterator, context, streaming_in: bool):
            call = None
            gone = False
            try:
                call = await pipeline._enter(method, context)
                if streaming_in and request_hooks():
                    request_or_iterator = requests_through(call, request_or_iterator)
                elif not streaming_in:
                    await unary_request(call, request_or_iterator, context)
                result = behavior(request_or_iterator, context)
                return await result if inspect.isawaitable(result) else result
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except NotImplementedError:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented")
            except Exception as e:
                if pipeline._client_gone(method, context, e):
                    gone = True
                    return
                await pipeline._failed(method, context, e)
            finally:
                if not gone:
                    pipeline._finish(call, method, pipeline._code_of(context))

        async def stream_response(behavior, request_or_iterator, context, streaming_in: bool):
            call = None
            gone = False
            try:
                call = await pipeline._enter(method, context)
                if streaming_in and request_hooks():
                    request_or_iterator = requests_through(call, request_or_iterator)
                elif not streaming_in:
                    await unary_request(call, request_or_iterator, context)
                hooks = response_hooks()
                if inspect.isasyncgenfunction(behavior):
                    async for msg in behavior(request_or_iterator, context):
                        for layer in hooks:
                            await layer.on_response(call, msg)  # type: ignore[misc]
                        yield msg
                else:
                    # A handler that writes with context.write() and returns nothing.
                    result = behavior(request_or_iterator, context)
                    if inspect.isawaitable(result):
                        await result
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except NotImplementedError:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented")
            except Exception as e:
                if pipeline._client_gone(method, context, e):
                    gone = True
                    return
                await pipeline._failed(method, context, e)
            finally:
                if not gone:
                    pipeline._finish(call, method, pipeline._code_of(context))

        # grpc.aio tells the call kinds apart by the behaviour's type (a coroutine function
        # or an async generator function), so each wrapper must be a real `async def`.
        if handler.unary_unary is not None:
            b_uu = handler.unary_unary

            async def uu(request, context):
                return await unary_response(b_uu, request, context, False)
            return grpc.unary_unary_rpc_method_handler(
                uu, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.stream_unary is not None:
            b_su = handler.stream_unary

            async def su(request_iterator, context):
                return await unary_response(b_su, request_iterator, context, True)
            return grpc.stream_unary_rpc_method_handler(
                su, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            b_us = handler.unary_stream

            async def us(request, context):
                async for msg in stream_response(b_us, request, context, False):
                    yield msg
            return grpc.unary_stream_rpc_method_handler(
                us, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        b_ss = handler.stream_stream

        async def ss(request_iterator, context):
            async for msg in stream_response(b_ss, request_iterator, context, True):
                yield msg
        return grpc.stream_stream_rpc_method_handler(
            ss, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)

    def metrics(self) -> dict[str, Any]:
        m: dict[str, Any] = {
            "rpc_calls_total": {(("method", meth.rsplit("/", 1)[-1]), ("service", meth.rsplit("/", 2)[-2]),
                                 ("code", code)): float(n)
                                for (meth, code), n in self.calls.items()},
            "rpc_handler_errors_total": float(sum(self.handler_errors.values())),
        }
        for layer in self.layers:
            m.update(layer.metrics())
        return m


# ---- client side ------------------------------------------------------------------------
class _ClientBase:
    def __init__(self, layers: list[ClientLayer], target: str = "") -> None:
        self.layers = layers
        self.target = target

    async def _prepare(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        if not self.layers:
            return details
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        call = OutgoingCall(self.target, method, list(details.metadata or []), details.timeout)
        for layer in self.layers:
            await layer.prepare(call)
        return grpc.aio.ClientCallDetails(method=details.method, timeout=call.timeout,
                                          metadata=grpc.aio.Metadata(*call.metadata), credentials=details.credentials,
                                          wait_for_ready=details.wait_for_ready)


class _UnaryUnary(_ClientBase, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, details, request):
        return await continuation(await self._prepare(details), request)


class _UnaryStream(_ClientBase, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation, details, request):
        return await continuation(await self._prepare(details), request)


class _StreamUnary(_ClientBase, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation, details, request_iterator):
        return await continuation(await self._prepare(details), request_iterator)


class _StreamStream(_ClientBase, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation, details, request_iterator):
        return await continuation(await self._prepare(details), request_iterator)


def client_interceptors(layers: Sequence[ClientLayer], target: str = "") -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for a channel to `target`; none at all when there are no layers (no per-call cost)."""
    if not layers:
        return []
    shared = list(layers)
    return [_UnaryUnary(shared, target), _UnaryStream(shared, target), _StreamUnary(shared, target),
            _StreamStream(shared, target)]
