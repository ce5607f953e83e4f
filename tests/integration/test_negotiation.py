"""The negotiation cycle on real pools: every group and submitter negotiated in order, and a bad
schedd costing only its own session."""
from __future__ import annotations

from typing import AsyncIterator

import grpc

from daemons.cli.client import wait_for
from daemons.core import ads
from daemons.pb.htcpool import common_pb2, schedd_pb2, schedd_pb2_grpc
from daemons.schedd.service import unbundled

from .conftest import STATIC, attr, wait_jobs, wait_slots

LONG = "executable = /bin/sleep\narguments = 100000\n{extra}queue {n}\n"


async def test_every_group_and_submitter_is_negotiated_when_the_pool_is_full(make_pool):
    """matchmaker.cpp negotiateWithGroup / negotiate and GroupEntry.cpp
    hgq_negotiate_with_all_groups: shares come from the cycle's pie, and every group and
    submitter is negotiated in order whether or not slots are left (with
    NEGOTIATOR_CONSIDER_PREEMPTION, HTCondor's default, a group at its quota too), so
    each gets its "Negotiating with" line and each of its jobs a rejection reason. Here
    group a fills the pool before b and c submit; a's user holds the slots, so b's and
    c's jobs are refused by HTCondor's default PREEMPTION_REQUIREMENTS (False)."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nGROUP_NAMES = a, b, c\nGROUP_QUOTA_DYNAMIC_a = 0.4\n"
                     "GROUP_QUOTA_DYNAMIC_b = 0.3\nGROUP_QUOTA_DYNAMIC_c = 0.3\nGROUP_ACCEPT_SURPLUS = True\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(LONG.format(extra="accounting_group = a\n", n=2), "a.sub", "ann")
        await wait_jobs(c, "JobStatus == 2", 2)
        since = await c.pool_now()
        await c.submit(LONG.format(extra="accounting_group = b\n", n=1), "b.sub", "ben")
        await c.submit(LONG.format(extra="accounting_group = c\n", n=1), "c.sub", "cid")

        async def both_rejected():
            idle = await c.jobs("JobStatus == 1 && LastRejMatchTime =!= undefined && LastRejMatchTime >= "
                                f"{int(since)}")
            return idle if len(idle) == 2 else None
        idle = await wait_for(both_rejected, timeout_s=30, what="b's and c's jobs rejected with a reason")
        assert {attr(j, "LastRejMatchReason") for j in idle} == {"PREEMPTION_REQUIREMENTS == False"}
        # The schedd records a rejection during the cycle; the cycle's record comes at its end.
        async def rejecting_cycle():
            return next((r for r in await c.cycles() if r.start >= since and r.rejections >= 2), None)
        cycle = await wait_for(rejecting_cycle, timeout_s=30, what="a cycle record with both rejections")
        assert {o.split("/")[1] for o in cycle.order} >= {"b.ben@testhost", "c.cid@testhost"}
    log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
    assert "Group b - BEGIN NEGOTIATION" in log and "Group c - BEGIN NEGOTIATION" in log
    assert "Negotiating with b.ben@testhost" in log and "Negotiating with c.cid@testhost" in log


async def test_without_preemption_a_full_pool_still_gives_every_submitter_its_reason(make_pool):
    """negotiate(): a submitter's requests are taken one by one until its schedd has no
    more, whatever is left of the pool; without NEGOTIATOR_CONSIDER_PREEMPTION a slot held
    by someone is not a candidate, so the reason is "no match found"."""
    pool = make_pool(STATIC + "NUM_CPUS = 1\nNEGOTIATOR_CONSIDER_PREEMPTION = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(LONG.format(extra="", n=1), "first.sub", "amy")
        await wait_jobs(c, "JobStatus == 2", 1)
        since = await c.pool_now()
        await c.submit(LONG.format(extra="", n=1), "b.sub", "bea")
        await c.submit(LONG.format(extra="", n=1), "c.sub", "cal")

        async def rejected():
            idle = await c.jobs(f"JobStatus == 1 && LastRejMatchTime >= {int(since)}")
            return idle if len(idle) == 2 else None
        idle = await wait_for(rejected, timeout_s=30, what="both newcomers rejected")
        assert {attr(j, "LastRejMatchReason") for j in idle} == {"no match found"}


# ---- a schedd that misbehaves ------------------------------------------------------------------------

class _BadSchedd(schedd_pb2_grpc.ScheddServicer):
    """Answers the negotiator as a broken or malicious schedd would."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.sessions = 0

    async def Negotiate(self, request_iterator: AsyncIterator[schedd_pb2.NegotiatorMessage],
                        context) -> AsyncIterator[schedd_pb2.ScheddMessage]:
        async for msg in unbundled(request_iterator):    # as the schedd reads the negotiator's bundles
            kind = msg.WhichOneof("msg")
            if kind == "start":
                self.sessions += 1
                if self.how == "hangup":
                    return   # ends the RPC under the negotiator's feet
                continue
            if kind == "send_requests":
                text = {"malformed": "[ ClusterId = 1; Requirements = ",
                        "overflow": "[ ClusterId = 1e400; ProcId = 0; AutoClusterId = 1; Requirements = true; "
                                    "RequestCpus = 1; RequestMemory = 1; RequestDisk = 1 ]"}[self.how]
                yield schedd_pb2.ScheddMessage(requests=schedd_pb2.ResourceRequests(
                    requests=[schedd_pb2.ResourceRequest(request_id="1:0", count=1,
                                                         ad=common_pb2.ClassAd(text=text))], no_more=True))
            elif kind == "end":
                return


async def _with_bad_schedd(make_pool, how: str) -> None:
    pool = make_pool(STATIC + "NUM_CPUS = 2\n")
    server = grpc.aio.server()
    bad = _BadSchedd(how)
    schedd_pb2_grpc.add_ScheddServicer_to_server(bad, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        # Submitter ads are advertised at ADVERTISE_SCHEDD: act as the pool's daemons.
        async with pool.client("condor") as c:
            await wait_slots(c, 2)
            # A submitter ad for the bad schedd, named so that it negotiates first.
            bad_ad = ads.ad_text({"MyType": "Submitter", "Name": "aaa-bad@testhost", "ScheddName": "bad@testhost",
                                  "ScheddIpAddr": f"<127.0.0.1:{port}>", "MyAddress": f"<127.0.0.1:{port}>",
                                  "IdleJobs": 1, "RunningJobs": 0, "WeightedIdleJobs": 1})
            await c.collector.update([bad_ad])
            await c.submit(LONG.format(extra="", n=2), "good.sub", "zed")
            await wait_jobs(c, "JobStatus == 2", 2)
            # The jobs can start before the cycle that matched them has recorded itself.
            async def matching_cycles():
                return [r for r in await c.cycles() if r.matches] or None
            cycles = await wait_for(matching_cycles, timeout_s=30, what="the matching cycle's record")
            assert cycles[0].error == ""
            assert [f.split(":")[0] for f in cycles[0].failed] == ["aaa-bad@testhost"]
            assert cycles[0].order[:2] == ["<none>/aaa-bad@testhost", "<none>/zed@testhost"]
            assert bad.sessions >= 1
    finally:
        await server.stop(None)
    log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
    assert "Aborting negotiation cycle" not in log
    assert "Negotiation with aaa-bad@testhost at <127.0.0.1:" in log
    assert "Error: Ignoring submitter for this cycle" in log
    return log


async def test_a_malformed_request_costs_only_its_submitter(make_pool):
    """matchmaker.cpp negotiateWithGroup: a session that fails (MM_ERROR) is "Error:
    Ignoring submitter for this cycle" and the next submitter negotiates. A request ad
    that does not parse used to abort the whole cycle ("Aborting negotiation cycle: AdError")."""
    log = await _with_bad_schedd(make_pool, "malformed")
    assert "AdError" in log


async def test_an_exception_serving_one_request_costs_only_its_submitter(make_pool):
    """As above, for a request the negotiator cannot serve (a ClusterId of 1e400): it
    used to raise OverflowError while it was logged and abort every cycle; the ad bounds
    now refuse the number when the request is read, and only its submitter's session fails."""
    log = await _with_bad_schedd(make_pool, "overflow")
    assert "LimitError: resource request 1:0: the number 1e400 is out of range" in log


async def test_a_schedd_that_hangs_up_costs_only_its_submitter(make_pool):
    """As above, for a schedd that ends the negotiation under the negotiator's feet
    (writing to it raised InvalidStateError: RPC already finished, and aborted the cycle)."""
    await _with_bad_schedd(make_pool, "hangup")
