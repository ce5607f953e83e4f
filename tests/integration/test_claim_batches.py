"""Batched claims (Startd.RequestClaims / ActivateClaims) on real daemons: each claim in a
batch is what a single RequestClaim / ActivateClaim would have made it.
"""
from __future__ import annotations

import json
import urllib.request

import grpc
import pytest

from daemons.core import ads
from daemons.pb.htcpool import common_pb2, startd_pb2, startd_pb2_grpc

from .conftest import PSLOT, SLEEP, attr, wait_jobs, wait_slots

# What a reply's slot ads must agree on, machine for machine (not the host's name or times).
SHAPE = ("SlotID", "SlotType", "Cpus", "Memory", "Disk", "State", "Activity", "DynamicSlot", "ParentSlotId",
         "NumDynamicSlots", "ChildCpus", "RemoteOwner", "PartitionableSlot")


def _job(i: int) -> common_pb2.ClassAd:
    return common_pb2.ClassAd(text=f'[ ClusterId = 1; ProcId = {i}; Owner = "alice"; RequestCpus = 1; '
                                   f'RequestMemory = 128; RequestDisk = 1024; Requirements = true; Duration = 100000 ]')


def _claim(cap: str, i: int) -> startd_pb2.RequestClaimRequest:
    return startd_pb2.RequestClaimRequest(claim_id=cap, job_ad=_job(i), schedd_name="test-schedd",
                                          schedd_address="127.0.0.1:1", submitter="alice@testhost")


def _shape(text: str, host: str) -> dict:
    ad = ads.parse_ad(text)
    out = {k: ads.get(ad, k) for k in SHAPE}
    out["Name"] = str(ads.get(ad, "Name")).replace(host, "HOST")
    return out


def _outcome(reply: startd_pb2.RequestClaimReply, host: str) -> tuple:
    return (reply.ok, reply.reason, reply.pending,
            _shape(reply.slot_ad.text, host) if reply.HasField("slot_ad") else None,
            _shape(reply.leftover_ad.text, host) if reply.HasField("leftover_ad") else None,
            bool(reply.leftover_claim_id))


async def test_batched_claims_give_the_same_slots_and_claims_as_single_claims(make_pool):
    """Two machines claimed to the last core with single calls, two with batches (one
    claim per machine in each batch, the leftover's id from the last reply, as the schedd
    does): the same dynamic slots and leftovers, in the same order; every claim id its own,
    each held, kept alive and activated like any other."""
    # Leases of 1,800 pool s (18 s of wall time): nothing here keeps the claims alive but the test.
    pool = make_pool("NUM_CPUS = 4\nALIVE_INTERVAL = 300\n" + PSLOT, machines=4, roles=("collector", "startd"))
    async with pool.client("condor") as c:
        await wait_slots(c, 4)
        texts = await c.collector.query("Machine", "PartitionableSlot", ["Machine", "ClaimId"], include_private=True)
        caps = {str(ads.get(a, "Machine")): str(ads.get(a, "ClaimId")) for a in map(ads.parse_ad, texts)}
        single_hosts, batch_hosts = sorted(caps)[:2], sorted(caps)[2:]
        startd = startd_pb2_grpc.StartdStub(c.channels.get(pool.daemons["startd1"].address))

        # A batch with a job ad that does not parse is refused whole and claims nothing.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await startd.RequestClaims(startd_pb2.RequestClaimsRequest(claims=[
                _claim(caps[batch_hosts[0]], 0),
                startd_pb2.RequestClaimRequest(claim_id=caps[batch_hosts[1]],
                                               job_ad=common_pb2.ClassAd(text="[ broken"))]), timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "claims[1].job_ad" in e.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await startd.RequestClaims(startd_pb2.RequestClaimsRequest(claims=[_claim("x", 0)] * 1001), timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "at most 1000" in e.value.details()

        single: dict[str, list] = {h: [] for h in single_hosts}
        batched: dict[str, list] = {h: [] for h in batch_hosts}
        granted: list[str] = []
        for host in single_hosts:
            cap = caps[host]
            for i in range(5):   # the fifth finds no leftover offered
                if not cap:
                    break
                reply = await startd.RequestClaim(_claim(cap, i), timeout=10)
                single[host].append(_outcome(reply, host))
                granted += [reply.claim_id] if reply.ok else []
                cap = reply.leftover_claim_id
        batch_caps = dict((h, caps[h]) for h in batch_hosts)
        for i in range(5):
            hosts = [h for h in batch_hosts if batch_caps[h]]
            if not hosts:
                break
            # A claim id that names no slot fails alone.
            reply = await startd.RequestClaims(startd_pb2.RequestClaimsRequest(
                claims=[_claim(batch_caps[h], i) for h in hosts] + [_claim(f"{caps[hosts[0]]}-guess", i)]),
                timeout=10)
            assert len(reply.replies) == len(hosts) + 1
            assert not reply.replies[-1].ok and reply.replies[-1].reason.startswith("unknown claim id")
            for h, r in zip(hosts, reply.replies):
                batched[h].append(_outcome(r, h))
                granted += [r.claim_id] if r.ok else []
                batch_caps[h] = r.leftover_claim_id

        assert len(single[single_hosts[0]]) == 4 and all(o[0] for o in single[single_hosts[0]])
        assert single[single_hosts[0]] == single[single_hosts[1]] == batched[batch_hosts[0]] == batched[batch_hosts[1]]
        assert [o[3]["Name"] for o in batched[batch_hosts[0]]] == [f"slot1_{k}@HOST" for k in range(1, 5)]

        # Every claim its own id, in HTCondor's shape, held by the startd.
        assert len(granted) == 16 and len(set(granted)) == 16
        assert all(g.startswith(f"<{pool.daemons['startd1'].address}>#") and g.count("#") == 3 for g in granted)
        kept = await startd.KeepAlive(startd_pb2.KeepAliveRequest(claim_ids=granted + ["<x>#1#1#guess"]), timeout=10)
        assert list(kept.unknown_claim_ids) == ["<x>#1#1#guess"]

        # Activations: a batch answers each claim; a wrong id fails alone; the rest start.
        half = len(granted) // 2
        for g in granted[:half]:
            assert (await startd.ActivateClaim(startd_pb2.ActivateClaimRequest(claim_id=g, job_ad=_job(0)),
                                               timeout=10)).ok
        act = await startd.ActivateClaims(startd_pb2.ActivateClaimsRequest(activations=[
            startd_pb2.ActivateClaimRequest(claim_id=g, job_ad=_job(0)) for g in granted[half:] + ["nope"]]),
            timeout=10)
        assert [r.ok for r in act.replies] == [True] * (len(granted) - half) + [False]
        assert act.replies[-1].reason == "unknown claim id"
        again = await startd.ActivateClaims(startd_pb2.ActivateClaimsRequest(activations=[
            startd_pb2.ActivateClaimRequest(claim_id=granted[-1], job_ad=_job(0))]), timeout=10)
        assert not again.replies[0].ok and "already running" in again.replies[0].reason
        busy = await wait_slots(c, 16, "State == \"Claimed\" && Activity == \"Busy\"")
        assert len(busy) == 16


def _status(pool) -> dict:
    with urllib.request.urlopen(pool.daemons["schedd"].info["status_url"] + "/status", timeout=10) as r:
        return json.load(r)


async def _run(make_pool, extra: str) -> tuple[list, dict]:
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT + extra, machines=2)
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=150, n=8), "eight.sub", "alice")
        history = await wait_jobs(c, "true", 8, history=True, timeout_s=120)
    return history, _status(pool)


async def test_a_schedd_batching_its_claims_runs_the_jobs_as_one_claiming_singly(make_pool):
    """The same eight jobs on two 4-core machines, claimed in batches and one by one: the
    same slots, each job started once, the same record of it."""
    batched, b_status = await _run(make_pool, "")
    single, s_status = await _run(make_pool, "HTCPOOL_BATCH_CLAIMS = false\n")
    assert b_status["startd_claim_calls"]["batched"] > 0 and b_status["startd_claim_calls"]["single"] == 0
    assert s_status["startd_claim_calls"]["batched"] == 0 and s_status["startd_claim_calls"]["single"] >= 16
    for history in (batched, single):
        assert sorted(attr(j, "ProcId") for j in history) == list(range(8))
        assert {attr(j, "JobStatus") for j in history} == {4}
        assert {attr(j, "NumJobStarts") for j in history} == {1}
    assert sorted(attr(j, "LastRemoteHost") for j in batched) == sorted(attr(j, "LastRemoteHost") for j in single)
    assert len({attr(j, "LastRemoteHost") for j in batched}) == 8
    assert {k.lower() for j in batched for k in j.keys()} == {k.lower() for j in single for k in j.keys()}
    for key in ("jobs_started", "jobs_completed"):
        assert b_status["counters"][key] == s_status["counters"][key] == 8, key


def _metric(pool, key: str, name: str) -> float:
    with urllib.request.urlopen(pool.daemons[key].info["status_url"] + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on {key}'s /metrics")


async def test_an_activation_bringing_its_claims_job_ad_runs_on_the_claims_parse_and_any_other_on_its_own(make_pool):
    """The startd keeps a claim's parsed job ad for the activation that brings the same text;
    an activation with another text runs that text's job, and each kept parse serves once."""
    pool = make_pool("NUM_CPUS = 3\nSLOT_TYPE_1 = cpus=1\nNUM_SLOTS_TYPE_1 = 3\nALIVE_INTERVAL = 300\n", machines=1,
                     roles=("collector", "startd"))
    name = "htcpool_startd_activation_job_ads_reused_total"
    async with pool.client("condor") as c:
        found = await wait_slots(c, 3)
        host = str(attr(found[0], "Machine"))
        texts = await c.collector.query("Machine", "true", ["Name", "ClaimId"], include_private=True)
        caps = sorted((str(ads.get(a, "Name")), str(ads.get(a, "ClaimId"))) for a in map(ads.parse_ad, texts))
        startd = startd_pb2_grpc.StartdStub(c.channels.get(pool.daemons["startd1"].address))
        claims = await startd.RequestClaims(startd_pb2.RequestClaimsRequest(
            claims=[_claim(cap, i) for i, (_, cap) in enumerate(caps)]), timeout=10)
        ids = [r.claim_id for r in claims.replies]
        assert all(r.ok for r in claims.replies) and _metric(pool, "startd1", name) == 0
        # slot1: the claim's own text; slot2: another job's; slot3: its own text, twice (the
        # second finds the slot busy, as it would with a fresh parse).
        act = await startd.ActivateClaims(startd_pb2.ActivateClaimsRequest(activations=[
            startd_pb2.ActivateClaimRequest(claim_id=ids[0], job_ad=_job(0)),
            startd_pb2.ActivateClaimRequest(claim_id=ids[1], job_ad=_job(7)),
            startd_pb2.ActivateClaimRequest(claim_id=ids[2], job_ad=_job(2)),
            startd_pb2.ActivateClaimRequest(claim_id=ids[2], job_ad=_job(2))]), timeout=10)
        assert [r.ok for r in act.replies] == [True, True, True, False]
        assert _metric(pool, "startd1", name) == 2
        busy = await wait_slots(c, 3, 'Activity == "Busy"')
        assert {str(attr(a, "Name")): str(attr(a, "JobId")) for a in busy} == {
            f"slot1@{host}": "1.0", f"slot2@{host}": "1.7", f"slot3@{host}": "1.2"}
