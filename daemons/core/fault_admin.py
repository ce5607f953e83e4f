"""The Admin service's fault RPCs: protobuf in and out, the daemon's FaultInjector in between."""
from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from daemons.core import faults as fm
from daemons.pb.htcpool import admin_pb2

if TYPE_CHECKING:
    from daemons.core.daemon import Daemon


def fault_from_pb(p: admin_pb2.Fault, now: float) -> fm.Fault:
    """A Fault from its message; 0 means unset for the window (start 0 = now, stop 0 = never)."""
    return fm.Fault(
        id=p.id, side=p.side or "server", method=p.method or "*", peer=p.peer or "*",
        delay_s=p.delay_s, jitter_s=p.jitter_s, abort=p.abort_code, drop=p.drop,
        percent=p.percent if p.HasField("percent") else 100.0,
        start=p.start if p.start > 0 else None, stop=p.stop if p.stop > 0 else None,
        max_active=p.max_active, clock_offset_s=p.clock_offset_s, clock_drift=p.clock_drift)


def fault_to_pb(f: fm.Fault, now: float | None = None) -> admin_pb2.Fault:
    return admin_pb2.Fault(
        id=f.id, side=f.side, method=f.method, peer=f.peer, delay_s=f.delay_s, jitter_s=f.jitter_s,
        abort_code=f.abort, drop=f.drop, percent=f.percent, start=f.start or 0.0, stop=f.stop or 0.0,
        max_active=f.max_active, clock_offset_s=f.clock_offset_s, clock_drift=f.clock_drift,
        kind=f.kind, text=f.describe(now))


def listing(d: "Daemon") -> admin_pb2.FaultList:
    inj = d.faults
    now = d.clock.true_now()
    return admin_pb2.FaultList(
        role=d.role, name=d.name, pool_time=d.clock.now(), true_pool_time=d.clock.true_now(),
        fired_total=sum(inj.fired_by_fault.values()),
        faults=[admin_pb2.FaultState(fault=fault_to_pb(f, now), fired=fired, active=active)
                for f, fired, active in inj.state()])


async def set_plan(d: "Daemon", request: admin_pb2.FaultPlan,
                   context: grpc.aio.ServicerContext) -> admin_pb2.FaultList:
    now = d.clock.true_now()
    taken = set() if request.replace else {f.id for f in d.faults.faults}
    new = []
    for i, p in enumerate(request.faults, 1):
        if not p.id:
            # Fresh ids for faults that come without one.
            n = len(taken) + 1
            while f"f{n}" in taken:
                n += 1
            p.id = f"f{n}"
        taken.add(p.id)
        new.append(fault_from_pb(p, now))
    try:
        d.faults.set_plan(new, replace_all=request.replace)
    except fm.FaultError as e:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{d.role} {d.name}: {e}")
    return listing(d)


async def clear(d: "Daemon", request: admin_pb2.ClearFaultsRequest,
                context: grpc.aio.ServicerContext) -> admin_pb2.FaultList:
    try:
        d.faults.clear(list(request.ids))
    except fm.FaultError as e:
        await context.abort(grpc.StatusCode.NOT_FOUND, f"{d.role} {d.name}: {e}")
    return listing(d)
