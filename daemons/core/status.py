"""Each daemon's status page: /status (JSON), /metrics (Prometheus text), / (HTML).

Read-only (GET) data only, bound to the same address as the daemon's gRPC port, over
HTTPS with the daemon's certificate when the pool uses TLS. Nothing secret is on it
(no claim ids, tokens or keys).

/status/NAME serves a daemon's detailed view NAME (Daemon.status_detail), too large
for every /status: a startd's slots, a schedd's claims. Fault experiments compare them.

The port is bound when the daemon starts, but aiohttp (with what it imports, some 12 MB
of a process of 60) is loaded only when the first connection arrives, in a thread so
that the event loop keeps running meanwhile: most daemons of a large pool (a startd
among many) are never asked. Connections that arrive before it is loaded wait, not
read, and are handed to aiohttp's server once it exists.
"""
from __future__ import annotations

import asyncio
import html
import importlib
import json
import math
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from daemons.core.daemon import Daemon

# How long closing waits for requests being answered (aiohttp's AppRunner default).
SHUTDOWN_TIMEOUT_S = 60.0


def prometheus_text(role: str, metrics: dict[str, float | dict[tuple[tuple[str, str], ...], float]]) -> str:
    """Render `name -> value` (or `name -> {labels: value}`) as Prometheus exposition text."""
    lines: list[str] = []
    for name, value in sorted(metrics.items()):
        full = f"htcpool_{role}_{name}"
        lines.append(f"# TYPE {full} gauge")
        if isinstance(value, dict):
            for labels, v in value.items():
                label_text = ",".join(f'{k}="{_escape(val)}"' for k, val in labels)
                lines.append(f"{full}{{{label_text}}} {_num(v)}")
        else:
            lines.append(f"{full} {_num(value)}")
    return "\n".join(lines) + "\n"


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v) if v != int(v) else str(int(v))


async def _import_in_thread(name: str) -> None:
    # A thread of its own, not the loop's executor, whose workers may all be busy.
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            done.set_result(None) if error is None else done.set_exception(error)

    def run() -> None:
        error = None
        try:
            importlib.import_module(name)
        except BaseException as e:   # raised in the loop, by the await below
            error = e
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:
            pass   # the loop has closed: nobody waits any more

    threading.Thread(target=run, name=f"import {name}", daemon=True).start()
    await done


class _Waiting(asyncio.Protocol):
    """A connection that came before aiohttp was loaded: not read until the page's server
    exists, then given to it (the transport's protocol replaced, as if it had been its own)."""

    def __init__(self, page: "StatusPage") -> None:
        self.page = page
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.pause_reading()
        self.page._waiting.add(self)
        self.page._load()

    def connection_lost(self, exc: Exception | None) -> None:
        self.page._waiting.discard(self)
        self.transport = None

    def hand_over(self, server: "web.Server | None") -> None:
        t, self.transport = self.transport, None
        if t is None or t.is_closing():
            return
        if server is None:
            t.close()
            return
        handler = server()
        t.set_protocol(handler)
        handler.connection_made(t)
        t.resume_reading()


class StatusPage:
    def __init__(self, daemon: "Daemon") -> None:
        self.daemon = daemon
        self.url = ""
        self._listener: asyncio.base_events.Server | None = None
        self._server: "web.Server | None" = None
        self._loading: asyncio.Task | None = None
        self._waiting: set[_Waiting] = set()

    async def start(self, host: str, port: int, advertise_host: str | None = None, tls=None) -> str:
        ssl_context = None
        if tls is not None:
            from daemons.core.security.tls import status_page_context
            ssl_context = status_page_context(tls)
        try:
            self._listener = await asyncio.get_running_loop().create_server(self._protocol, host, port,
                                                                            ssl=ssl_context)
        except OSError as e:
            from daemons.core.rpc import BindError
            raise BindError(f"cannot bind the status page {host}:{port} ({e.strerror or e})") from None
        bound = self._listener.sockets[0].getsockname()[1]
        self.url = f"{'https' if tls is not None else 'http'}://{advertise_host or host}:{bound}"
        return self.url

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        for w in list(self._waiting):
            w.hand_over(None)
        self._waiting.clear()
        if self._server is not None:
            self._server.pre_shutdown()
            await self._server.shutdown(SHUTDOWN_TIMEOUT_S)
            self._server = None

    def _protocol(self) -> asyncio.Protocol:
        return self._server() if self._server is not None else _Waiting(self)

    def _load(self) -> None:
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load_server(), name="status-page:load")

    async def _load_server(self) -> None:
        server = None
        try:
            await _import_in_thread("aiohttp.web")
            from aiohttp import web
            server = self._server = web.Server(self._handle, access_log=None)
        except Exception as e:
            self.daemon.log.error("the status page cannot serve: loading aiohttp failed: %s", e)
            self._loading = None   # the next connection tries again
        finally:
            for w in list(self._waiting):
                w.hand_over(server)
            self._waiting.clear()

    async def _handle(self, request: "web.BaseRequest") -> "web.StreamResponse":
        from aiohttp import web
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        path = request.path
        if path == "/status":
            return self._status()
        if path.startswith("/status/") and "/" not in path[len("/status/"):] and len(path) > len("/status/"):
            return self._detail(path[len("/status/"):])
        if path == "/metrics":
            return self._metrics()
        if path == "/":
            return self._index()
        raise web.HTTPNotFound()

    def _status(self) -> "web.Response":
        from aiohttp import web
        return web.Response(text=json.dumps(self.daemon.status(), default=str, indent=1),
                            content_type="application/json")

    def _detail(self, name: str) -> "web.Response":
        from aiohttp import web
        detail = self.daemon.status_detail(name)
        if detail is None:
            raise web.HTTPNotFound(text=f"the {self.daemon.role} has no view {name!r}\n")
        return web.Response(text=json.dumps(detail, default=str), content_type="application/json")

    def _metrics(self) -> "web.Response":
        from aiohttp import web
        return web.Response(text=prometheus_text(self.daemon.role, self.daemon.metrics()),
                            content_type="text/plain")

    def _index(self) -> "web.Response":
        from aiohttp import web
        status = self.daemon.status()
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td><pre>{html.escape(json.dumps(v, default=str, indent=1))}</pre></td></tr>"
            for k, v in status.items())
        body = (f"<!doctype html><title>htcpool {self.daemon.role}</title>"
                f"<h1>{html.escape(self.daemon.role)} {html.escape(self.daemon.name)}</h1>"
                f"<p><a href='/status'>/status</a> · <a href='/metrics'>/metrics</a></p>"
                f"<table>{rows}</table>")
        return web.Response(text=body, content_type="text/html")
