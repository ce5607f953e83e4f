"""gRPC plumbing shared by every daemon: servers, a channel cache, the one retry layer.

Retries happen here and only here: on UNAVAILABLE and DEADLINE_EXCEEDED, with
exponential backoff, each attempt with its own deadline, and a log line that says
what is being retried and when, so a daemon waiting for a peer says so.
"""
from __future__ import annotations

import logging
from typing import Awaitable, Callable, Sequence, TypeVar

import grpc
from tenacity import (AsyncRetrying, RetryCallState, retry_if_exception, stop_after_delay,
                      stop_never, wait_exponential)

from daemons.core.interceptors import ClientLayer, client_interceptors

log = logging.getLogger("htcpool.rpc")

T = TypeVar("T")

# Ads of 50k slots travel in chunks, but a single large job ad or slot ad list must fit.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    # A peer that restarts on its port must be reachable again at once: gRPC's own
    # reconnect backoff grows to 120 s of wall time (hours of pool time at a fast
    # TIME_SCALE), during which every call fails without trying. Backoff between
    # attempts is call_with_retry's business. gRPC's core also takes the minimum backoff
    # as the time a connection attempt is given (its MIN_CONNECT_TIMEOUT): at 100 ms a
    # loaded peer that took longer to send its HTTP/2 SETTINGS failed the caller's call
    # at once with UNAVAILABLE ("timed out before receiving SETTINGS frame").
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 2000),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def new_server(interceptors: Sequence[grpc.aio.ServerInterceptor] = ()) -> grpc.aio.Server:
    return grpc.aio.server(options=_OPTIONS, interceptors=list(interceptors))


# What every channel this process opens carries: client layers (a token, client-side
# faults) and transport credentials (TLS). Set once at start-up by the process's
# entry point (a daemon, the CLI); a Channels may also be given its own.
_process_layers: list[ClientLayer] = []
_process_credentials: grpc.ChannelCredentials | None = None
# With TLS and SSL_SKIP_HOST_CHECK: the name every htcpool certificate carries, checked
# instead of the host dialled (security/tls.py).
_process_server_name: str | None = None


def configure_client(layers: Sequence[ClientLayer] = (),
                     credentials: grpc.ChannelCredentials | None = None) -> None:
    global _process_layers, _process_credentials
    _process_layers = list(layers)
    _process_credentials = credentials


def add_client_layer(layer: ClientLayer) -> None:
    _process_layers.append(layer)


def set_client_credentials(credentials: grpc.ChannelCredentials | None, server_name: str | None = None) -> None:
    """TLS for every channel this process opens (and the name to check, if not the host's)."""
    global _process_credentials, _process_server_name
    _process_credentials = credentials
    _process_server_name = server_name


class BindError(OSError):
    """A port that cannot be bound; the message says which and why."""


def bind(server: grpc.aio.Server, host: str, port: int, what: str = "port",
         credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind host:port (0 = any free port), with TLS if given credentials; return the port bound."""
    try:
        if credentials is not None:
            bound = server.add_secure_port(f"{host}:{port}", credentials)
        else:
            bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:
        bound = 0
    if bound == 0:
        why = "in use, or the address is not on this host" if port else "the address is not on this host"
        raise BindError(f"cannot bind {what} {host}:{port} ({why})")
    return bound


class Channels:
    """One channel per peer address, reused for every call to that peer.

    Every channel carries the process's client layers and credentials (configure_client)
    unless this Channels was given its own; `extra_layers` (a daemon's or a client's own
    tokens, a daemon's client-side faults) come after the process's layers.
    """

    def __init__(self, layers: Sequence[ClientLayer] | None = None,
                 credentials: grpc.ChannelCredentials | None = None, *,
                 extra_layers: Sequence[ClientLayer] = (), server_name: str | None = None) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._layers = None if layers is None else list(layers)
        self._extra = list(extra_layers)
        self._credentials = credentials
        self._server_name = server_name

    def get(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            layers = (_process_layers if self._layers is None else self._layers) + self._extra
            credentials = self._credentials or _process_credentials
            interceptors = client_interceptors(layers, address)
            if credentials is not None:
                name = self._server_name or _process_server_name
                options = _OPTIONS + ([("grpc.ssl_target_name_override", name)] if name else [])
                ch = grpc.aio.secure_channel(address, credentials, options=options, interceptors=interceptors)
            else:
                ch = grpc.aio.insecure_channel(address, options=_OPTIONS, interceptors=interceptors)
            self._channels[address] = ch
        return ch

    async def drop(self, address: str) -> None:
        ch = self._channels.pop(address, None)
        if ch is not None:
            await ch.close()

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for ch in channels.values():
            await ch.close(grace=None)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() in TRANSIENT


def describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        detail = (exc.details() or "").splitlines()[0] if exc.details() else ""
        return f"{exc.code().name}{': ' + detail if detail else ''}"
    return f"{type(exc).__name__}: {exc}"


async def call_with_retry(what: str, fn: Callable[[], Awaitable[T]], *,
                          give_up_after_s: float | None = 30.0,
                          max_backoff_s: float = 10.0,
                          logger: logging.Logger | None = None) -> T:
    """Call `fn` until it succeeds or a non-transient error; retry transient ones.

    `give_up_after_s=None` retries forever (a daemon waiting for a peer it needs).
    """
    logger = logger or log

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        logger.warning("%s failed (%s); retrying in %.1f s (attempt %d)",
                       what, describe(exc) if exc else "?", wait, state.attempt_number)

    retrying = AsyncRetrying(
        retry=retry_if_exception(is_transient),
        wait=wait_exponential(multiplier=0.1, min=0.05, max=max_backoff_s),
        stop=stop_never if give_up_after_s is None else stop_after_delay(give_up_after_s),
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await fn()
    raise AssertionError("unreachable")


async def abort_invalid(context: grpc.aio.ServicerContext, message: str) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
