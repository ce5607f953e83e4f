"""Orderings a real pool produces only under load, forced with a scripted startd.

The schedd and a collector run in-process over real gRPC; the "startd" is a gRPC
server whose answers this test scripts, and the "negotiator" is this test driving
the schedd's Negotiate stream.
"""
from __future__ import annotations

from pathlib import Path

import grpc

from daemons.cli.client import PoolClient, wait_for
from daemons.collector.daemon import CollectorConfig, CollectorDaemon
from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.rpc import new_server
from daemons.pb.htcpool import common_pb2, schedd_pb2, schedd_pb2_grpc, startd_pb2, startd_pb2_grpc
from daemons.schedd.daemon import ScheddConfig, ScheddDaemon


def _common(tmp_path: Path, role: str, collector: str | None) -> CommonConfig:
    return CommonConfig(role=role, collector_host=collector, bind_host="127.0.0.1", grpc_port=0, status_port=0,
                        time_scale=1.0, pool_epoch=0.0, local_dir=tmp_path / role, log_dir=tmp_path / role / "log",
                        spool_dir=tmp_path / role / "spool", full_hostname="sub", uid_domain="sub",
                        update_interval_s=300.0)


class ExitBeforeReplyStartd(startd_pb2_grpc.StartdServicer):
    """Grants every claim; on ActivateClaim reports the job's exit *before* replying."""

    def __init__(self, clock: PoolClock) -> None:
        self.clock = clock
        self.address = ""
        self.schedd_address = ""
        self.activations = 0

    def slot_ad(self) -> str:
        return ads.ad_text({"MyType": "Machine", "Name": "slot1_1@fake", "Machine": "fake", "Cpus": 1,
                            "Memory": 1024, "Disk": 10 ** 7, "State": "Claimed", "Activity": "Idle",
                            "Requirements": True, "Arch": "X86_64", "OpSys": "LINUX", "HasFileTransfer": True,
                            "StartdIpAddr": f"<{self.address}>"})

    async def RequestClaim(self, request, context):
        self.schedd_address = request.schedd_address
        return startd_pb2.RequestClaimReply(ok=True, claim_id="claim-1",
                                            slot_ad=common_pb2.ClassAd(text=self.slot_ad()))

    async def ActivateClaim(self, request, context):
        self.activations += 1
        job = ads.parse_ad(request.job_ad.text)
        now = self.clock.now()
        async with grpc.aio.insecure_channel(self.schedd_address) as ch:
            await schedd_pb2_grpc.ScheddStub(ch).ClaimEvents(schedd_pb2.ClaimEventsRequest(events=[
                schedd_pb2.ClaimEvent(claim_id=request.claim_id, kind=schedd_pb2.JOB_EXITED, pool_time=now,
                                      job_start=now, slot_name="slot1_1@fake",
                                      job_id=f"{ads.get(job, 'ClusterId')}.{ads.get(job, 'ProcId')}")]))
        return startd_pb2.ActivateClaimReply(ok=True, start_time=now)

    async def ReleaseClaim(self, request, context):
        return startd_pb2.ReleaseClaimReply(released=len(request.claim_ids))

    async def KeepAlive(self, request, context):
        return startd_pb2.KeepAliveReply()


async def test_an_exit_reported_before_the_activation_reply_completes_the_job(tmp_path):
    clock = PoolClock()
    collector = CollectorDaemon(_common(tmp_path, "collector", None), CollectorConfig(), clock)
    await collector.start()
    schedd = ScheddDaemon(_common(tmp_path, "schedd", collector.address),
                          ScheddConfig(claim_worklife_s=0, job_queue_log=tmp_path / "q.log",
                                       history_file=tmp_path / "history"), clock)
    startd = ExitBeforeReplyStartd(clock)
    server = new_server()
    startd_pb2_grpc.add_StartdServicer_to_server(startd, server)
    startd.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    try:
        await schedd.start()
        async with PoolClient(collector.address) as c:
            await c.submit("executable = /bin/sleep\narguments = 0\nqueue\n", "zero.sub", "alice")
            # Play the negotiator: one request, one match on the scripted startd's slot.
            stub = schedd_pb2_grpc.ScheddStub(c.channels.get(schedd.address))
            call = stub.Negotiate()
            await call.write(schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter="alice@sub")))
            await call.write(schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=10)))
            reply = await call.read()
            [request] = reply.requests.requests
            await call.write(schedd_pb2.NegotiatorMessage(match=schedd_pb2.MatchFound(
                request_id=request.request_id, claim_id="cap-1",
                slot_ad=common_pb2.ClassAd(text=startd.slot_ad()))))
            await call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
            await call.done_writing()

            done = await wait_for(lambda: c.jobs("true", history=True), timeout_s=20,
                                  what="the job in the history")
            assert [ads.get(j, "JobStatus") for j in done] == [4]
            assert await c.jobs() == []
            assert startd.activations == 1
    finally:
        await schedd.close()
        await server.stop(0)
        await collector.close()
