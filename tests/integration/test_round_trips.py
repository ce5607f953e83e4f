"""A claim is not lost to a slow path between its schedd and its startd (issue 14).

Under load a claim's grant can take longer to reach the schedd than the claim's lease
(measured in `bench throughput`: 2,200 pool s against 1,800), while every event loop's
lag read far less. The schedd measures each call's round trip to a startd and says the
longest recent one in its keepalives; the startd stretches that schedd's claims' leases
by it, and only that schedd's.
"""
from __future__ import annotations

import asyncio
import json
import urllib.request

from daemons.cli.client import wait_for
from daemons.core import ads
from daemons.pb.htcpool import common_pb2, startd_pb2, startd_pb2_grpc

from .conftest import SLEEP, wait_jobs, wait_slots

SLOW, FAST = "127.0.0.1:1", "127.0.0.1:2"     # two schedds that are never there


def _get(pool, key: str, path: str) -> str:
    with urllib.request.urlopen(pool.daemons[key].info["status_url"].rstrip("/") + path, timeout=10) as r:
        return r.read().decode()


def _metric(pool, key: str, name: str) -> float:
    for line in _get(pool, key, "/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on {key}'s /metrics")


def _claim(cap: str, schedd: str) -> startd_pb2.RequestClaimRequest:
    job = '[ ClusterId = 1; ProcId = 0; Owner = "alice"; RequestCpus = 1; RequestMemory = 128; ' \
          'RequestDisk = 1024; Requirements = true ]'
    return startd_pb2.RequestClaimRequest(claim_id=cap, job_ad=common_pb2.ClassAd(text=job), schedd_name=schedd,
                                          schedd_address=schedd, submitter="alice@testhost")


async def test_a_reported_round_trip_keeps_that_schedds_claims_past_their_lease(make_pool):
    # Leases of 6 x 10 = 60 pool s (0.6 s of wall time); the slow schedd says its round
    # trip is 600 pool s, which the startd bounds to two leases. Neither claim is ever kept
    # alive again.
    pool = make_pool("NUM_CPUS = 2\nSLOT_TYPE_1 = cpus=1\nNUM_SLOTS_TYPE_1 = 2\nALIVE_INTERVAL = 10\n",
                     machines=1, roles=("collector", "startd"))
    async with pool.client("condor") as c:
        await wait_slots(c, 2)
        texts = await c.collector.query("Machine", "true", ["Name", "ClaimId"], include_private=True)
        caps = sorted((str(ads.get(a, "Name")), str(ads.get(a, "ClaimId"))) for a in map(ads.parse_ad, texts))
        (slow_slot, slow_cap), (fast_slot, fast_cap) = caps
        startd = startd_pb2_grpc.StartdStub(c.channels.get(pool.daemons["startd1"].address))
        reply = await startd.RequestClaims(startd_pb2.RequestClaimsRequest(
            claims=[_claim(slow_cap, SLOW), _claim(fast_cap, FAST)]), timeout=10)
        assert all(r.ok for r in reply.replies)
        kept = await startd.KeepAlive(startd_pb2.KeepAliveRequest(schedd_address=SLOW, round_trip=600.0), timeout=10)
        assert list(kept.unknown_claim_ids) == []
        assert _metric(pool, "startd1", "htcpool_startd_schedd_round_trip_max_pool_seconds") == 120.0

        def claimed() -> dict[str, bool]:
            return {name: s["claimed"] for name, s in json.loads(_get(pool, "startd1", "/status/slots")).items()}

        async def fast_gone():
            now = await asyncio.to_thread(claimed)
            return now if not now[fast_slot] else None
        at_fast_gone = await wait_for(fast_gone, timeout_s=60, what="the fast schedd's claim to lapse")
        assert at_fast_gone[slow_slot], "the slow schedd's claim lapsed with the other"

        async def slow_gone():
            return not (await asyncio.to_thread(claimed))[slow_slot] or None
        await wait_for(slow_gone, timeout_s=60, what="the slow schedd's claim to lapse after its round trip")


async def test_a_schedd_tells_its_startds_its_round_trip(make_pool):
    """Across a real schedd and startd: the schedd measures its calls to the startd and its
    keepalives carry the longest recent one, which the startd shows on its /metrics."""
    pool = make_pool("ALIVE_INTERVAL = 20\n", machines=1)
    async with pool.client() as c:
        await c.submit(SLEEP.format(seconds=100000, n=2), "rt.sub")
        await wait_jobs(c, "JobStatus == 2", 2)

        async def reported():
            schedd = await asyncio.to_thread(_metric, pool, "schedd", "htcpool_schedd_startd_round_trip_max_pool_seconds")
            startd = await asyncio.to_thread(_metric, pool, "startd1",
                                             "htcpool_startd_schedd_round_trip_max_pool_seconds")
            return (schedd, startd) if schedd > 0 and startd > 0 else None
        schedd_rt, startd_rt = await wait_for(reported, timeout_s=60, what="a round trip told to the startd")
        # What the startd holds is a value the schedd measured (a window's most, so not
        # necessarily today's figure, but of the same path and order).
        assert startd_rt <= 2 * 1800
