"""gRPC adapter of the negotiator."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import grpc

from daemons.core.config import LARGE
from daemons.pb.htcpool import common_pb2, negotiator_pb2, negotiator_pb2_grpc

if TYPE_CHECKING:
    from daemons.negotiator.daemon import NegotiatorDaemon


class NegotiatorService(negotiator_pb2_grpc.NegotiatorServicer):
    def __init__(self, daemon: "NegotiatorDaemon") -> None:
        self.d = daemon

    async def Reschedule(self, request: common_pb2.Empty, context) -> negotiator_pb2.RescheduleReply:
        return negotiator_pb2.RescheduleReply(next_cycle=self.d.reschedule())

    async def CycleHistory(self, request: negotiator_pb2.CycleHistoryRequest,
                           context) -> negotiator_pb2.CycleHistoryReply:
        records = list(self.d.history)
        if request.last > 0:
            records = records[-request.last:]
        return negotiator_pb2.CycleHistoryReply(cycles=[
            negotiator_pb2.CycleRecord(cycle=r.cycle, start=r.start, end=r.end, matches=r.matches,
                                       rejections=r.rejections, duration=r.duration,
                                       wall_duration=r.wall_duration, slots=r.slots,
                                       submitters=r.submitters, rescheduled=r.rescheduled,
                                       requests=r.requests, considered=r.considered, significant=r.significant,
                                       pool_weight=r.pool_weight, cpu_duration=r.cpu_duration,
                                       slot_groups=r.slot_groups, autoclusters=r.autoclusters, phases=r.phases,
                                       evaluations=r.evaluations, preemptions=r.preemptions, order=r.order,
                                       failed=r.failed, error=r.error, prefetched=r.prefetched,
                                       reschedule_wait=r.reschedule_wait,
                                       prefetched_resumed=r.prefetched_resumed,
                                       stream_messages=r.stream_messages, stream_writes=r.stream_writes)
            for r in records])

    async def UserPrio(self, request: negotiator_pb2.UserPrioRequest, context) -> negotiator_pb2.UserPrioReply:
        last, entries = self.d.userprio(request.all_users)
        return negotiator_pb2.UserPrioReply(last_update=last,
                                            entries=[negotiator_pb2.UserPrioEntry(**e) for e in entries])

    async def SetUserPrio(self, request: negotiator_pb2.SetUserPrioRequest, context) -> negotiator_pb2.UserPrioEntry:
        if not request.name.strip() or len(request.name) > 256 or not request.name.isprintable():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name a submitter (user@domain) or a group")
        if not (math.isfinite(request.factor) and math.isfinite(request.priority)) or \
                max(request.factor, request.priority) > LARGE:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a priority or factor must be a finite number")
        if request.factor < 0 or request.priority < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a priority or factor must not be negative")
        if 0 < request.factor < 1:
            # condor_userprio: "Priority factors must be greater than or equal to 1".
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "priority factors must be greater than or equal to 1")
        if not request.factor and not request.priority:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "give a factor or a priority to set")
        entry = self.d.set_userprio(request.name, request.factor, request.priority)
        await self.d._save_accountant()
        return negotiator_pb2.UserPrioEntry(**entry)
