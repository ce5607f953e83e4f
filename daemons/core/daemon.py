"""One lifecycle for every daemon.

start() and close() are idempotent. A daemon serves its own gRPC services plus the
common Admin service, runs a status page, runs named periodic tasks on pool time,
publishes its own ad(s) to the collector every update interval (and on demand) and
withdraws them on shutdown. Subclasses fill in `add_services`, `on_start`,
`on_close`, `own_ads`, `status` and `metrics`.

No exception goes unseen: handler errors are logged and counted by the RPC pipeline,
periodic tasks' failures by the periodic runner, tasks started with `spawn` when they
end, and anything else that reaches the event loop by its exception handler; each
with its traceback in the daemon's log and a counter on /metrics.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine

import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.collector_client import CollectorClient
from daemons.core.clocklag import ClockAndLag
from daemons.core.common import CommonConfig
from daemons.core.fault_layer import FaultClientLayer, FaultInjector
from daemons.core.interceptors import ServerPipeline, StartingGate
from daemons.core.lag import LagMonitor, RoundLateness
from daemons.core.network import resolve_host
from daemons.core.rpc import Channels, bind, describe, new_server
from daemons.core.security.config import SecurityConfig
from daemons.core.security.setup import DaemonSecurity
from daemons.core.status import StatusPage
from daemons.pb.htcpool import admin_pb2, admin_pb2_grpc, common_pb2

VERSION = "0.1.0"


@dataclass
class Periodic:
    name: str
    interval_s: float                  # pool seconds
    fn: Callable[[], Awaitable[Any]]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    min_interval_s: float = 0.0        # pool seconds between runs, even when triggered
    task: asyncio.Task | None = None
    runs: int = 0
    failures: int = 0
    last_error: str = ""
    last_run: float = 0.0              # pool time of the last start


class Daemon(ClockAndLag):
    role = "daemon"
    my_type = "Generic"

    def __init__(self, common: CommonConfig, clock: PoolClock | None = None) -> None:
        self.common = common
        if clock is None:
            clock = PoolClock(scale=common.time_scale,
                              epoch=common.pool_epoch if common.pool_epoch is not None else time.time())
        self.clock = clock
        self.epoch_known = common.pool_epoch is not None or common.time_scale == 1.0
        self.log = logging.getLogger(f"htcpool.{self.role}")
        # Who may call us and what we show when we call others (tokens, TLS).
        security = common.security
        if security == SecurityConfig():
            # Built in code (not read from a configuration): its relative key paths live under
            # LOCAL_DIR, never in whatever directory the daemon happens to run from.
            security = security.anchored(common.local_dir)
        self.security = DaemonSecurity(security, self.role, self.log)
        self.name = common.name or self.default_name()
        # Faults act on calls into the daemon (a layer of its server pipeline) and on the
        # calls it makes (a layer of its channels); clock faults skew self.clock.
        self.faults = FaultInjector(self.clock, logging.getLogger(f"htcpool.{self.role}.faults"),
                                    role=self.role, name=self.name, seed=common.fault_seed)
        self.channels = Channels(extra_layers=[*self.security.client_layers(), FaultClientLayer(self.faults)],
                                 credentials=self.security.channel_credentials(),
                                 server_name=self.security.server_name())
        self.address = ""
        self.status_url = ""
        self.ready = False
        self.started_at = 0.0
        self.shutdown_requested = asyncio.Event()
        self.fast_shutdown = False
        self._server: grpc.aio.Server | None = None
        self._page: StatusPage | None = None
        self._periodics: dict[str, Periodic] = {}
        self._started = False
        self._closed = False
        self._update_seq = 0
        self._advertise_failures = 0         # in a row, for the backoff
        self._advertise_failures_total = 0
        self._background: set[asyncio.Task] = set()
        # Unexpected exceptions outside RPC handlers, by where they happened.
        self.errors: Counter[str] = Counter()
        self.collector = (CollectorClient(self.channels, common.collector_host, self.log)
                          if common.collector_host else None)
        # Every incoming call passes this pipeline: refused while starting, then security (a
        # refused call meets no fault), then faults; handler errors and call counts live here.
        self._starting = StartingGate(f"the {self.role}")
        self.rpc = ServerPipeline([self._starting, self.security.layer, self.faults.layer],
                                  log=logging.getLogger(f"htcpool.{self.role}.rpc"))
        # How late this process's event loop runs (the lag policy acts on it, pool-wide).
        self.lag = LagMonitor(lambda: self.clock.scale)
        # How far its ad updates run past UPDATE_INTERVAL (counts as lag too).
        self.update_lag = RoundLateness()
        self._follow_task: asyncio.Task | None = None
        self.lag_stop_reason = ""
        # The worst recent lag (loop or ad updates) of any daemon of the pool (wall s), as the collector last said.
        self.pool_lag_wall = 0.0

    # ---- for subclasses -------------------------------------------------
    def default_name(self) -> str:
        return self.common.full_hostname

    def add_services(self, server: grpc.aio.Server) -> None:
        """Register the daemon's own gRPC services."""

    async def on_start(self) -> None:
        """Restore state: the servers are up, but refuse calls until this returns."""

    async def on_close(self) -> None:
        """Work before the daemon's ads are withdrawn and its servers stop."""

    def own_ads(self) -> list[dict[str, Any]]:
        return [self.base_ad()]

    def advertise_min_interval_s(self) -> float:
        """Least time between two advertisements when something triggers one early."""
        return 0.0

    def withdraw_keys(self) -> list[tuple[str, list[str]]]:
        """(MyType, names) to invalidate on shutdown."""
        return [(self.my_type, [self.name])]

    def status(self) -> dict[str, Any]:
        return self.base_status()

    def status_detail(self, name: str) -> Any | None:
        """A detailed view for /status/NAME, or None when the daemon has no such view."""
        return None

    def metrics(self) -> dict[str, Any]:
        lag = self.lag.figures()
        update_wall, update_pool = self.update_lag.sustained()
        return {
            "up": 1.0,
            "pool_time_seconds": self.clock.now(),
            "time_scale": float(self.clock.scale),
            "time_scale_changes_total": float(self.clock.changes),
            # The event loop's lateness: last sample, worst and least over the recent window,
            # worst since the start; in wall seconds and in pool seconds.
            "loop_lag_seconds": lag.last_s,
            "loop_lag_recent_max_seconds": lag.recent_max_s,
            "loop_lag_sustained_seconds": lag.sustained_s,
            "loop_lag_max_seconds": lag.max_s,
            "loop_lag_pool_seconds": lag.last_pool_s,
            "loop_lag_recent_max_pool_seconds": lag.recent_max_pool_s,
            "loop_lag_sustained_pool_seconds": lag.sustained_pool_s,
            "loop_lag_max_pool_seconds": lag.max_pool_s,
            # How far the ad updates run past UPDATE_INTERVAL: sustained over the last rounds, worst.
            "update_lag_sustained_seconds": update_wall,
            "update_lag_sustained_pool_seconds": update_pool,
            "update_lag_max_pool_seconds": self.update_lag.max_pool_s,
            "periodic_failures_total": float(sum(p.failures for p in self._periodics.values())),
            "advertise_failures_total": float(self._advertise_failures_total),
            "unexpected_errors_total": {(("where", w),): float(n) for w, n in self.errors.items()},
            **self.rpc.metrics(),
        }

    # ---- unexpected errors ----------------------------------------------------
    def note_error(self, where: str, exc: BaseException | None, message: str = "") -> None:
        """Log an unexpected exception with its traceback and count it on /metrics."""
        self.errors[where] += 1
        self.log.error("unexpected error in %s: %s", where, message or (describe(exc) if exc else "?"),
                       exc_info=exc)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run `coro` in the background; cancelled at close, its failure logged and counted."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # Label by kind ("schedd:after"), not by instance, to keep /metrics small.
            self.note_error(":".join(task.get_name().split(":")[:2]), exc,
                            f"background task {task.get_name()} failed: {describe(exc)}")

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.note_error("event loop", context.get("exception"), str(context.get("message", "")))

    # ---- lifecycle --------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.security.prepare()
        asyncio.get_running_loop().set_exception_handler(self._loop_exception)
        self._server = new_server([self.rpc])
        self.add_services(self._server)
        admin_pb2_grpc.add_AdminServicer_to_server(_AdminService(self), self._server)
        port = bind(self._server, self.common.bind_host, self.common.grpc_port, what=f"the {self.role}'s command port",
                    credentials=self.security.server_credentials())
        await self._server.start()
        self.lag.start()
        # Peers get the advertised address, never the bound one (which may be 0.0.0.0).
        self.address = f"{self.common.public_host}:{port}"
        self._page = StatusPage(self)
        self.status_url = await self._page.start(self.common.bind_host, self.common.status_port,
                                                 advertise_host=self.common.public_host,
                                                 tls=self.common.security.tls)
        if self.collector is not None and self.role != "collector":
            await self._learn_clock()
            self._follow_task = asyncio.create_task(self._follow_clock(), name=f"{self.role}:follow-clock")
        if self.common.fault_plan:
            from daemons.core.faults import parse_plan
            # Windows (after=, for=) count from now, on the pool's clock.
            self.faults.set_plan(parse_plan(self.common.fault_plan, self.clock.true_now()))
        self.started_at = self.clock.now()
        self.log.info("**** %s %s (htcpool %s) starting at %s (bound to %s), pid %d, time scale %g",
                      self.role, self.name, VERSION, self.address, self.common.bind_host, os.getpid(),
                      self.clock.scale)
        await self._check_advertised_address()
        await self.on_start()
        self.rpc.drop(self._starting)
        # Ready means advertised: once start() returns, the collector has our ads
        # (unless it cannot be reached, in which case we retry with backoff until it can).
        first_delay = self.common.update_interval_s
        try:
            await self.advertise()
        except Exception as e:
            self._advertise_failed(e)
            first_delay = self._advertise_backoff_s() * self.clock.scale
        self.add_periodic("advertise", self.common.update_interval_s, self._advertise_or_retry,
                          first_delay_s=first_delay, min_interval_s=self.advertise_min_interval_s())
        self.ready = True
        self.log.info("%s ready; status page %s", self.role, self.status_url)

    async def close(self) -> None:
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        self.ready = False
        for p in self._periodics.values():
            if p.task is not None:
                await cancel_and_wait(p.task)
        if self._follow_task is not None:
            await cancel_and_wait(self._follow_task)
        self.lag.stop()
        for t in list(self._background):
            await cancel_and_wait(t)
        try:
            await self.on_close()
        except Exception:
            self.log.exception("error while closing")
        # A daemon that never served (a missing key, a port in use) or never got as far as
        # advertising has no ads to withdraw.
        if not self.fast_shutdown and self.address and self.started_at:
            await self.withdraw()
        if self._page is not None:
            await self._page.stop()
        if self._server is not None:
            await self._server.stop(grace=0.5)
        await self.channels.close()
        self.log.info("**** %s %s exiting", self.role, self.name)

    def request_shutdown(self, fast: bool = False) -> None:
        self.fast_shutdown = self.fast_shutdown or fast
        self.shutdown_requested.set()

    # ---- periodic tasks ---------------------------------------------------
    def add_periodic(self, name: str, interval_s: float, fn: Callable[[], Awaitable[Any]],
                     *, first_delay_s: float = 0.0, min_interval_s: float = 0.0) -> Periodic:
        """Run `fn` every `interval_s` pool seconds, on a schedule anchored to its first run.

        Runs are counted from start to start, as HTCondor counts its intervals, so a
        slow run does not push the whole schedule back. `trigger(name)` runs it early.
        """
        if name in self._periodics:
            raise ValueError(f"periodic task {name!r} already exists")
        p = Periodic(name, max(interval_s, 1e-6), fn, min_interval_s=min_interval_s)
        self._periodics[name] = p
        p.task = asyncio.create_task(self._run_periodic(p, first_delay_s), name=f"{self.role}:{name}")
        return p

    def set_interval(self, name: str, interval_s: float) -> None:
        """Change a periodic task's interval: it runs now, then every `interval_s` (as
        HTCondor resets a timer)."""
        p = self._periodics[name]
        p.interval_s = max(interval_s, 1e-6)
        p.wake.set()

    def trigger(self, name: str) -> None:
        p = self._periodics.get(name)
        if p is not None:
            p.wake.set()

    async def _run_periodic(self, p: Periodic, first_delay_s: float) -> None:
        next_run = self.clock.now() + first_delay_s
        while True:
            await self._wait_until(p, next_run)
            if p.runs and p.min_interval_s:
                # Triggered early: still keep the minimum spacing (e.g. SCHEDD_MIN_INTERVAL).
                await self.clock.sleep_until(p.last_run + p.min_interval_s)
            p.wake.clear()
            p.last_run = self.clock.now()
            try:
                await p.fn()
                p.runs += 1
            except asyncio.CancelledError:
                raise
            except Exception as e:
                p.failures += 1
                p.last_error = describe(e)
                if isinstance(e, grpc.aio.AioRpcError):
                    # A peer that is down or slow: expected, retried at the next run.
                    self.log.warning("periodic task %s failed: %s", p.name, p.last_error)
                else:
                    self.note_error(f"periodic {p.name}", e, f"periodic task {p.name} failed: {p.last_error}")
            next_run = p.last_run + p.interval_s
            if next_run < self.clock.now():
                # Overran a whole interval: start again from now rather than bunching.
                next_run = self.clock.now()

    async def _wait_until(self, p: Periodic, pool_time: float) -> None:
        # Until the pool clock says so: a wall delay worked out before the scale fell is too short.
        while not p.wake.is_set() and self.clock.now() < pool_time:
            delay = self.clock.wall_at(pool_time) - self.clock.wall()
            if delay <= 0:
                return
            try:
                await asyncio.wait_for(p.wake.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass

    # ---- own ad -------------------------------------------------------------
    def base_ad(self) -> dict[str, Any]:
        self._update_seq += 1
        return {
            "MyType": self.my_type,
            "Name": self.name,
            "Machine": self.common.full_hostname,
            "MyAddress": f"<{self.address}>",  # HTCondor's sinful-string form
            "CondorVersion": f"$CondorVersion: htcpool {VERSION} $",
            "DaemonStartTime": int(self.started_at),
            "UpdateSequenceNumber": self._update_seq,
            "UpdateInterval": int(self.common.update_interval_s),
            "HtcpoolStatusUrl": self.status_url,
            "TimeScale": float(self.clock.scale),
            "PoolEpoch": float(self.clock.epoch),
            "MyCurrentTime": int(self.clock.now()),
            **self.lag_attrs(),
        }

    async def advertise(self) -> None:
        if self.collector is None:
            return
        texts = [ads.ad_text(a) for a in self.own_ads()]
        await self.collector.update(texts)

    # A collector that cannot be reached (not up yet, a name that does not resolve, a
    # partition): say where we tried and which knob named it, and try again sooner
    # than the update interval, backing off from 1 s of wall time to the interval.
    def _advertise_backoff_s(self) -> float:
        interval_wall = self.common.update_interval_s / self.clock.scale
        return min(interval_wall, 2.0 ** min(self._advertise_failures - 1, 10))

    def _advertise_failed(self, e: Exception) -> None:
        self._advertise_failures += 1
        self._advertise_failures_total += 1
        where = self.collector.where if self.collector is not None else "the collector"
        self.log.warning("cannot advertise to %s: %s; retrying in %.0f s (attempt %d)", where, describe(e),
                         self._advertise_backoff_s(), self._advertise_failures)

    async def _advertise_or_retry(self) -> None:
        fired = self.faults.fired_total
        try:
            await self.advertise()
        except Exception as e:
            self._advertise_failed(e)
            asyncio.get_running_loop().call_later(self._advertise_backoff_s(), self.trigger, "advertise")
            return
        p = self._periodics.get("advertise")
        if p is not None:
            if self.faults.fired_total != fired:
                # An injected delay is pool time, which no slower clock shortens: not lag.
                self.update_lag.skip()
            else:
                self.update_lag.add(self.clock.now() - (p.last_run + p.interval_s), self.clock.scale)
        if self._advertise_failures:
            self.log.info("advertised to %s after %d failed attempt(s)",
                          self.collector.where if self.collector is not None else "the collector",
                          self._advertise_failures)
            self._advertise_failures = 0

    async def _check_advertised_address(self) -> None:
        """Warn when we advertise loopback but the collector is elsewhere: no peer could call us."""
        if self.collector is None:
            return
        host = self.address.rpartition(":")[0]
        collector_host = self.collector.address.rpartition(":")[0]
        try:
            ours = ipaddress.ip_address(host)
            # A name lookup may be slow where DNS is: off the event loop.
            theirs = ipaddress.ip_address(await asyncio.to_thread(resolve_host, collector_host))
        except ValueError:
            return
        if ours.is_loopback and not theirs.is_loopback:
            self.log.warning("advertising the loopback address %s, but %s is on another host: no peer can reach "
                             "this %s; set NETWORK_INTERFACE (* for this host's routable address) or "
                             "TCP_FORWARDING_HOST", self.address, self.collector.where, self.role)

    async def withdraw(self) -> None:
        if self.collector is None:
            return
        # Best effort, as HTCondor's daemons invalidate their ads once on the way out: a
        # collector that is gone too does not hold up the shutdown (the ads expire anyway).
        for my_type, names in self.withdraw_keys():
            try:
                await self.collector.invalidate(my_type, names, give_up_after_s=0.5)
            except Exception as e:
                self.log.warning("could not withdraw %s ads from the collector: %s", my_type, describe(e))

    def base_status(self) -> dict[str, Any]:
        now = self.clock.now()
        return {
            "role": self.role,
            "name": self.name,
            "address": self.address,
            "pid": os.getpid(),
            "ready": self.ready,
            "pool_time": now,
            "uptime_pool_s": now - self.started_at if self.started_at else 0.0,
            "time_scale": self.clock.scale,
            "time_scale_changes": self.clock.changes,
            "pool_epoch": self.clock.epoch,
            "loop_lag": {k: round(v, 4) for k, v in vars(self.lag.figures()).items()},
            "update_lag": dict(zip(("sustained_s", "sustained_pool_s"), self.update_lag.sustained()),
                               max_pool_s=self.update_lag.max_pool_s, rounds=self.update_lag.rounds),
            "collector": self.common.collector_host,
            "periodic": {
                p.name: {"interval_s": p.interval_s, "runs": p.runs, "failures": p.failures,
                         "last_error": p.last_error, "last_run": p.last_run}
                for p in self._periodics.values()
            },
        }


async def cancel_and_wait(task: asyncio.Task, repeat_s: float = 1.0) -> None:
    """Cancel `task` and wait for it to end, cancelling again while it runs on: on Python
    3.11 asyncio.wait_for can swallow a cancellation that arrives as the awaited event
    fires, and a periodic task would then run on (and its daemon never exit)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=repeat_s)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


class _AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    async def Ping(self, request: common_pb2.Empty, context: grpc.aio.ServicerContext) -> admin_pb2.PingReply:
        d = self.daemon
        return admin_pb2.PingReply(role=d.role, name=d.name, ready=d.ready, pool_time=d.clock.now(),
                                   status_url=d.status_url, pid=os.getpid())

    async def Shutdown(self, request: admin_pb2.ShutdownRequest,
                       context: grpc.aio.ServicerContext) -> common_pb2.Empty:
        self.daemon.log.info("shutdown requested over RPC%s", " (fast)" if request.fast else "")
        self.daemon.request_shutdown(fast=request.fast)
        return common_pb2.Empty()

    async def SetFaultPlan(self, request: admin_pb2.FaultPlan,
                           context: grpc.aio.ServicerContext) -> admin_pb2.FaultList:
        from daemons.core import fault_admin
        return await fault_admin.set_plan(self.daemon, request, context)

    async def ClearFaults(self, request: admin_pb2.ClearFaultsRequest,
                          context: grpc.aio.ServicerContext) -> admin_pb2.FaultList:
        from daemons.core import fault_admin
        return await fault_admin.clear(self.daemon, request, context)

    async def ListFaults(self, request: common_pb2.Empty, context: grpc.aio.ServicerContext) -> admin_pb2.FaultList:
        from daemons.core import fault_admin
        return fault_admin.listing(self.daemon)
