"""The RPC edge of draining: DrainJobs / CancelDrainJobs on a startd (shared with DrainBoss).

Protobuf stays here. A startd refuses a drain with a gRPC status (FAILED_PRECONDITION
when the machine is already draining or the check expression is false, NOT_FOUND for
an unknown machine, INVALID_ARGUMENT for an expression that does not parse) or with
`ok = false`; both become a DrainResult that says why, so callers log and count the
refusal instead of failing the whole poll. Transient failures are retried by the one
retry layer, for a short while only: a poll must not hang on one dead startd.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from daemons.core.rpc import Channels, call_with_retry, describe
from daemons.pb.htcpool import startd_pb2 as pb
from daemons.pb.htcpool import startd_pb2_grpc as pb_grpc

HOW = {"graceful": pb.GRACEFUL, "quick": pb.QUICK, "fast": pb.FAST}
CALL_TIMEOUT_S = 10.0
GIVE_UP_AFTER_S = 5.0


@dataclass(frozen=True)
class DrainResult:
    ok: bool
    reason: str = ""        # why not, when not ok
    request_id: str = ""
    code: str = ""          # the gRPC status name of a refusal ("" when ok or refused with ok=false)


class DrainClient:
    def __init__(self, channels: Channels, logger: logging.Logger | None = None) -> None:
        self.channels = channels
        self.log = logger or logging.getLogger("htcpool.drain_client")

    def _stub(self, address: str) -> pb_grpc.StartdStub:
        return pb_grpc.StartdStub(self.channels.get(address))

    async def drain(self, address: str, machine: str, how: str = "graceful", *, resume_on_completion: bool = False,
                    check_expr: str = "", start_expr: str = "", reason: str = "",
                    request_id: str = "") -> DrainResult:
        if how not in HOW:
            return DrainResult(False, f"unknown draining schedule {how!r}", code="INVALID_ARGUMENT")
        req = pb.DrainJobsRequest(machine=machine, how=HOW[how], resume_on_completion=resume_on_completion,
                                  check_expr=check_expr, start_expr=start_expr, reason=reason,
                                  request_id=request_id)
        try:
            reply = await call_with_retry(f"drain of {machine} at {address}",
                                          lambda: self._stub(address).DrainJobs(req, timeout=CALL_TIMEOUT_S),
                                          give_up_after_s=GIVE_UP_AFTER_S, logger=self.log)
        except grpc.aio.AioRpcError as e:
            return DrainResult(False, describe(e), code=e.code().name)
        if not reply.ok:
            return DrainResult(False, reply.reason or "refused", reply.request_id)
        return DrainResult(True, request_id=reply.request_id)

    async def cancel(self, address: str, machine: str, request_id: str = "") -> DrainResult:
        req = pb.CancelDrainJobsRequest(machine=machine, request_id=request_id)
        try:
            reply = await call_with_retry(f"cancel of the drain of {machine} at {address}",
                                          lambda: self._stub(address).CancelDrainJobs(req, timeout=CALL_TIMEOUT_S),
                                          give_up_after_s=GIVE_UP_AFTER_S, logger=self.log)
        except grpc.aio.AioRpcError as e:
            return DrainResult(False, describe(e), code=e.code().name)
        if not reply.ok:
            return DrainResult(False, reply.reason or "refused")
        return DrainResult(True)
