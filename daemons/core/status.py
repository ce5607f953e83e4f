"""Each daemon's status page: /status (JSON), /metrics (Prometheus text), / (HTML).

Read-only (GET) data only, bound to the same address as the daemon's gRPC port, over
HTTPS with the daemon's certificate when the pool uses TLS. Nothing secret is on it
(no claim ids, tokens or keys).

/status/NAME serves a daemon's detailed view NAME (Daemon.status_detail), too large
for every /status: a startd's slots, a schedd's claims. Fault experiments compare them.
"""
from __future__ import annotations

import html
import json
import math
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from daemons.core.daemon import Daemon


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


class StatusPage:
    def __init__(self, daemon: "Daemon") -> None:
        self.daemon = daemon
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, host: str, port: int, advertise_host: str | None = None, tls=None) -> str:
        app = web.Application()
        app.router.add_get("/status", self._status)
        app.router.add_get("/status/{detail}", self._detail)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/", self._index)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        ssl_context = None
        if tls is not None:
            from daemons.core.security.tls import status_page_context
            ssl_context = status_page_context(tls)
        site = web.TCPSite(self.runner, host, port, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as e:
            from daemons.core.rpc import BindError
            raise BindError(f"cannot bind the status page {host}:{port} ({e.strerror or e})") from None
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if tls is not None else 'http'}://{advertise_host or host}:{bound}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def _status(self, request: web.Request) -> web.Response:
        return web.Response(text=json.dumps(self.daemon.status(), default=str, indent=1),
                            content_type="application/json")

    async def _detail(self, request: web.Request) -> web.Response:
        detail = self.daemon.status_detail(request.match_info["detail"])
        if detail is None:
            raise web.HTTPNotFound(text=f"the {self.daemon.role} has no view {request.match_info['detail']!r}\n")
        return web.Response(text=json.dumps(detail, default=str), content_type="application/json")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=prometheus_text(self.daemon.role, self.daemon.metrics()),
                            content_type="text/plain")

    async def _index(self, request: web.Request) -> web.Response:
        status = self.daemon.status()
        rows = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td><pre>{html.escape(json.dumps(v, default=str, indent=1))}</pre></td></tr>"
            for k, v in status.items())
        body = (f"<!doctype html><title>htcpool {self.daemon.role}</title>"
                f"<h1>{html.escape(self.daemon.role)} {html.escape(self.daemon.name)}</h1>"
                f"<p><a href='/status'>/status</a> · <a href='/metrics'>/metrics</a></p>"
                f"<table>{rows}</table>")
        return web.Response(text=body, content_type="text/html")
