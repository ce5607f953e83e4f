"""Every RPC of every daemon against every kind of caller, on one real pool.

Columns: no token; alice's token limited to READ; alice's limited to WRITE; an
administrator's (admin@, ALLOW_ADMINISTRATOR) limited to ADMINISTRATOR; a daemon's
(condor@, which also holds NEGOTIATOR); another user's (bob@, no limits); alice's
expired token; and a token forged with another key. Outcomes: U (UNAUTHENTICATED),
D (PERMISSION_DENIED), A (the call got past authorization; it may still be refused
for what it asks, e.g. NOT_FOUND). The expected table is HTCondor's (levels from the
daemons' command registrations; see daemons/core/security/table.py), written out here
by hand rather than computed, and each row then checks that a refused call changed
nothing (and an allowed one did what it asked).
"""
from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads
from daemons.core.security.keys import derive_jwt_key
from daemons.core.security.table import TABLE, short
from daemons.core.security.tokens import mint
from daemons.pb.htcpool import (admin_pb2, admin_pb2_grpc, collector_pb2, collector_pb2_grpc, common_pb2,
                                negotiator_pb2, negotiator_pb2_grpc, schedd_pb2, schedd_pb2_grpc, startd_pb2,
                                startd_pb2_grpc)

from .conftest import FAST, PSLOT

COLUMNS = ("none", "READ", "WRITE", "ADMIN", "DAEMON", "other", "expired", "forged")
OWNER = {"WRITE": "alice", "ADMIN": "admin", "DAEMON": "condor", "other": "bob"}

# RPC                               none READ WRITE ADMIN DAEMON other expired forged
EXPECTED = {
    "Admin.Ping":                    "U A A A A A U U",
    "Admin.Shutdown":                "U D D A A D U U",
    "Admin.SetFaultPlan":            "U D D A A D U U",
    "Admin.ClearFaults":             "U D D A A D U U",
    "Admin.ListFaults":              "U D D A A D U U",
    "Collector.UpdateAds":           "U D D D A D U U",
    "Collector.InvalidateAds":       "U D D D A D U U",
    "Collector.QueryAds":            "U A A A A A U U",
    "Collector.QueryAds(private)":   "U D D D A D U U",
    "Negotiator.Reschedule":         "U D A A A A U U",
    "Negotiator.CycleHistory":       "U A A A A A U U",
    "Negotiator.UserPrio":           "U A A A A A U U",
    "Negotiator.SetUserPrio":        "U D D A A D U U",
    "Schedd.Submit":                 "U D A A A A U U",
    "Schedd.Query":                  "U A A A A A U U",
    # WRITE, and only the job's owner (alice) or a queue super user (condor) may edit it.
    "Schedd.Act":                    "U D A D A D U U",
    "Schedd.Negotiate":              "U D D D A D U U",
    "Schedd.ClaimEvents":            "U D D D A D U U",
    "Startd.RequestClaim":           "U D D D A D U U",
    "Startd.ActivateClaim":          "U D D D A D U U",
    "Startd.RequestClaims":          "U D D D A D U U",
    "Startd.ActivateClaims":         "U D D D A D U U",
    "Startd.ReleaseClaim":           "U D D D A D U U",
    "Startd.KeepAlive":              "U D D D A D U U",
    "Startd.DrainJobs":              "U D D A A D U U",
    "Startd.CancelDrainJobs":        "U D D A A D U U",
}

CONFIG = FAST + PSLOT + """
NUM_CPUS = 4
ALLOW_ADMINISTRATOR = condor@* admin@*
QUEUE_SUPER_USERS = condor
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("secpool")
    cfg = d / "pool.conf"
    cfg.write_text(CONFIG)
    p = LocalPool(d / "pool", cfg).start()
    yield p
    p.stop()


@pytest.fixture(scope="module")
def tokens(pool) -> dict[str, str]:
    domain = pool.security["trust_domain"]
    now = time.time()
    return {
        "none": "",
        "READ": pool.token("alice", ["READ"]),
        "WRITE": pool.token("alice", ["WRITE"]),
        "ADMIN": pool.token("admin", ["ADMINISTRATOR"]),
        "DAEMON": pool.token("condor"),
        "other": pool.token("bob"),
        "expired": mint(pool._keys().jwt_key("POOL"), identity=f"alice@{domain}", issuer=domain, now=now - 100,
                        lifetime_s=10),
        "forged": mint(derive_jwt_key(b"not this pool's key"), identity=f"condor@{domain}", issuer=domain),
    }


class Caller:
    """Stubs straight to each daemon's address (no collector lookups, which would be
    refused first), carrying one column's token."""

    def __init__(self, pool: LocalPool, token: str) -> None:
        self.client = PoolClient(pool.collector_address, tokens=[token] if token else [])
        self.token = token
        self.addr = {k: d.address for k, d in pool.daemons.items()}

    def stub(self, cls, key: str):
        return cls(self.client.channels.get(self.addr[key]))

    async def close(self) -> None:
        await self.client.close()


def _negotiate_sync(address: str, token: str) -> grpc.StatusCode:
    messages = [schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(submitter="nobody@testhost", cycle=1)),
                schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd())]
    with grpc.insecure_channel(address) as channel:
        call = schedd_pb2_grpc.ScheddStub(channel).Negotiate(
            iter(messages), timeout=10, metadata=[("authorization", f"Bearer {token}")] if token else None)
        try:
            for _ in call:
                pass
        except grpc.RpcError:
            pass
        return call.code()


def outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "A"
    assert isinstance(exc, grpc.aio.AioRpcError), exc
    return {grpc.StatusCode.UNAUTHENTICATED: "U", grpc.StatusCode.PERMISSION_DENIED: "D"}.get(exc.code(), "A")


async def attempt(fn) -> tuple[str, BaseException | None]:
    try:
        await fn()
        return "A", None
    except grpc.aio.AioRpcError as e:
        return outcome(e), e


@pytest.fixture(scope="module")
def alice_job(pool) -> str:
    """A long job of alice's, running (so there is a claim), submitted with her own token."""
    async def go():
        async with pool.client("alice") as c:
            cluster, _ = await c.submit("executable = /bin/sleep\narguments = 100000\nqueue\n", "a.sub")
            await wait_for(lambda: c.jobs(f"ClusterId == {cluster} && JobStatus == 2"), timeout_s=60,
                           what="alice's job running")
            return f"{cluster}.0"
    return asyncio.run(go())


async def admin_client(pool) -> PoolClient:
    return PoolClient(pool.collector_address, tokens=[pool.token("condor")])


# ---- the probes: one per row, each (call, check) for one column -----------------------
async def probe(row: str, col: str, c: Caller, pool: LocalPool, job: str) -> str:
    collector = c.stub(collector_pb2_grpc.CollectorStub, "collector")
    negotiator = c.stub(negotiator_pb2_grpc.NegotiatorStub, "negotiator")
    schedd = c.stub(schedd_pb2_grpc.ScheddStub, "schedd")
    startd = c.stub(startd_pb2_grpc.StartdStub, "startd1")
    async with await admin_client(pool) as boss:
        if row == "Admin.Ping":
            results = set()
            for key in pool.daemons:
                r, _ = await attempt(lambda key=key: c.stub(admin_pb2_grpc.AdminStub, key).Ping(
                    common_pb2.Empty(), timeout=10))
                results.add(r)
            assert len(results) == 1, f"daemons disagree on Ping for {col}: {results}"
            return results.pop()
        if row in ("Admin.SetFaultPlan", "Admin.ClearFaults", "Admin.ListFaults"):
            # On the negotiator, faults whose window opens in a million seconds: they never act.
            admin = c.stub(admin_pb2_grpc.AdminStub, "negotiator")
            address = pool.daemons["negotiator"].address
            later = time.time() + 1e6

            def fault(fid: str) -> admin_pb2.Fault:
                return admin_pb2.Fault(id=fid, method="UserPrio", delay_s=1.0, start=later, stop=later + 1)

            def planned() -> set[str]:
                return {s.fault.id for s in faults.faults}
            if row == "Admin.ListFaults":
                return (await attempt(lambda: admin.ListFaults(common_pb2.Empty(), timeout=10)))[0]
            if row == "Admin.SetFaultPlan":
                r, _ = await attempt(lambda: admin.SetFaultPlan(admin_pb2.FaultPlan(faults=[fault(f"p-{col}")]),
                                                                timeout=10))
                faults = await boss.list_faults(address)
                assert (f"p-{col}" in planned()) == (r == "A"), f"{row}/{col}: planned {planned()}, outcome {r}"
                await boss.clear_faults(address)
                return r
            await boss.set_faults(address, [fault(f"v-{col}")])
            r, _ = await attempt(lambda: admin.ClearFaults(admin_pb2.ClearFaultsRequest(ids=[f"v-{col}"]), timeout=10))
            faults = await boss.list_faults(address)
            assert (f"v-{col}" in planned()) == (r != "A"), f"{row}/{col}: planned {planned()}, outcome {r}"
            await boss.clear_faults(address)
            return r
        if row == "Collector.QueryAds":
            return (await attempt(lambda: _drain(collector.QueryAds(
                collector_pb2.QueryAdsRequest(my_type="Machine"), timeout=10))))[0]
        if row == "Collector.QueryAds(private)":
            r, _ = await attempt(lambda: _drain(collector.QueryAds(
                collector_pb2.QueryAdsRequest(my_type="Machine", include_private=True), timeout=10)))
            return r
        if row == "Collector.UpdateAds":
            name = f"fake-{col}@evil"
            text = ads.ad_text({"MyType": "Machine", "Name": name, "Machine": "evil", "Rank": 100,
                                "StartdIpAddr": "<127.0.0.1:1>"})
            r, _ = await attempt(lambda: collector.UpdateAds(collector_pb2.UpdateAdsRequest(
                ads=[common_pb2.ClassAd(text=text)]), timeout=10))
            present = await boss.ads("Machine", f"Name == {ads.literal(name)}")
            assert bool(present) == (r == "A"), f"{row}/{col}: ad present {bool(present)}, outcome {r}"
            if present:
                await boss.collector.invalidate("Machine", [name])
            return r
        if row == "Collector.InvalidateAds":
            name = f"victim-{col}@x"
            await boss.collector.update([ads.ad_text({"MyType": "Machine", "Name": name, "Machine": "x"})])
            r, _ = await attempt(lambda: collector.InvalidateAds(collector_pb2.InvalidateAdsRequest(
                my_type="Machine", names=[name]), timeout=10))
            present = await boss.ads("Machine", f"Name == {ads.literal(name)}")
            assert bool(present) == (r != "A"), f"{row}/{col}: ad present {bool(present)}, outcome {r}"
            await boss.collector.invalidate("Machine", [name])
            return r
        if row == "Negotiator.Reschedule":
            return (await attempt(lambda: negotiator.Reschedule(common_pb2.Empty(), timeout=10)))[0]
        if row == "Negotiator.CycleHistory":
            return (await attempt(lambda: negotiator.CycleHistory(negotiator_pb2.CycleHistoryRequest(),
                                                                  timeout=10)))[0]
        if row == "Negotiator.UserPrio":
            return (await attempt(lambda: negotiator.UserPrio(negotiator_pb2.UserPrioRequest(), timeout=10)))[0]
        if row == "Negotiator.SetUserPrio":
            name = f"probe-{col}@testhost"
            r, _ = await attempt(lambda: negotiator.SetUserPrio(negotiator_pb2.SetUserPrioRequest(
                name=name, factor=7.0), timeout=10))
            entries = {e.name: e.priority_factor for e in (await boss.userprio(all_users=True)).entries}
            assert (entries.get(name) == 7.0) == (r == "A"), f"{row}/{col}: {entries.get(name)}, outcome {r}"
            return r
        if row == "Schedd.Submit":
            before = len(await boss.jobs("true"))
            r, e = await attempt(lambda: schedd.Submit(schedd_pb2.SubmitRequest(
                submit_description="executable = /bin/sleep\narguments = 5\nhold = true\nqueue\n",
                submit_file=f"{col}.sub"), timeout=30))
            after = await boss.jobs("true")
            assert len(after) == before + (1 if r == "A" else 0), f"{row}/{col}: {len(after)} jobs after {before}"
            if r == "A":
                # The job is the caller's, whatever the request could have said.
                newest = max(after, key=lambda j: ads.get(j, "ClusterId"))
                assert ads.get(newest, "Owner") == OWNER[col]
            return r
        if row == "Schedd.Query":
            return (await attempt(lambda: _drain(schedd.Query(schedd_pb2.QueryJobsRequest(), timeout=10))))[0]
        if row == "Schedd.Act":
            attr = f"Probe{COLUMNS.index(col)}"
            r, _ = await attempt(lambda: schedd.Act(schedd_pb2.ActRequest(
                action=schedd_pb2.EDIT, job_ids=[job], edits={attr: "1"}), timeout=10))
            [ad] = await boss.jobs(f"ClusterId == {job.split('.')[0]}")
            assert (ads.get(ad, attr) == 1) == (r == "A"), f"{row}/{col}: {attr} = {ads.get(ad, attr)}, outcome {r}"
            return r
        if row == "Schedd.Negotiate":
            # A stream the schedd may refuse while the client still writes: grpc.aio's client
            # then may report INTERNAL instead of the schedd's status (grpc/grpc#36066), so this
            # one call goes through gRPC's synchronous client, which reports the status sent.
            code = await asyncio.to_thread(_negotiate_sync, c.addr["schedd"], c.token)
            return {grpc.StatusCode.UNAUTHENTICATED: "U", grpc.StatusCode.PERMISSION_DENIED: "D"}.get(code, "A")
        if row == "Schedd.ClaimEvents":
            r, _ = await attempt(lambda: schedd.ClaimEvents(schedd_pb2.ClaimEventsRequest(events=[
                schedd_pb2.ClaimEvent(claim_id="<127.0.0.1:1>#1#1#guess", job_id=job, kind=schedd_pb2.JOB_EXITED,
                                      pool_time=time.time())]), timeout=10))
            [ad] = await boss.jobs(f"ClusterId == {job.split('.')[0]}")
            assert ads.get(ad, "JobStatus") == 2, f"{row}/{col}: a guessed claim id ended alice's job"
            return r
        if row == "Startd.RequestClaim":
            return (await attempt(lambda: startd.RequestClaim(startd_pb2.RequestClaimRequest(
                claim_id="<127.0.0.1:1>#1#1#guess", job_ad=common_pb2.ClassAd(text="[]")), timeout=10)))[0]
        if row == "Startd.ActivateClaim":
            return (await attempt(lambda: startd.ActivateClaim(startd_pb2.ActivateClaimRequest(
                claim_id="<127.0.0.1:1>#1#1#guess", job_ad=common_pb2.ClassAd(text="[]")), timeout=10)))[0]
        if row in ("Startd.RequestClaims", "Startd.ActivateClaims"):
            # Allowed, a batch still answers each claim by its secret id: a guessed one is refused.
            replies = []

            async def batch():
                if row == "Startd.RequestClaims":
                    reply = await startd.RequestClaims(startd_pb2.RequestClaimsRequest(claims=[
                        startd_pb2.RequestClaimRequest(claim_id="<127.0.0.1:1>#1#1#guess",
                                                       job_ad=common_pb2.ClassAd(text="[]"))]), timeout=10)
                else:
                    reply = await startd.ActivateClaims(startd_pb2.ActivateClaimsRequest(activations=[
                        startd_pb2.ActivateClaimRequest(claim_id="<127.0.0.1:1>#1#1#guess",
                                                        job_ad=common_pb2.ClassAd(text="[]"))]), timeout=10)
                replies.extend(reply.replies)
            r, _ = await attempt(batch)
            if r == "A":
                assert [(x.ok, x.reason) for x in replies] == [(False, "unknown claim id" + (
                    ": the slot was claimed or changed since the match" if row == "Startd.RequestClaims" else ""))]
            return r
        if row == "Startd.ReleaseClaim":
            return (await attempt(lambda: startd.ReleaseClaim(startd_pb2.ReleaseClaimRequest(
                claim_ids=["<127.0.0.1:1>#1#1#guess"]), timeout=10)))[0]
        if row == "Startd.KeepAlive":
            return (await attempt(lambda: startd.KeepAlive(startd_pb2.KeepAliveRequest(
                claim_ids=["<127.0.0.1:1>#1#1#guess"]), timeout=10)))[0]
        if row == "Startd.DrainJobs":
            r, e = await attempt(lambda: startd.DrainJobs(startd_pb2.DrainJobsRequest(
                machine="testhost", check_expr="false"), timeout=10))
            if r == "A":
                assert e is not None and e.code() == grpc.StatusCode.FAILED_PRECONDITION
            slots = await boss.ads("Machine", "Draining")
            assert slots == [], f"{row}/{col}: the machine is draining"
            return r
        if row == "Startd.CancelDrainJobs":
            r, e = await attempt(lambda: startd.CancelDrainJobs(startd_pb2.CancelDrainJobsRequest(
                machine="testhost"), timeout=10))
            if r == "A":
                assert e is not None and e.code() == grpc.StatusCode.FAILED_PRECONDITION
            return r
    raise AssertionError(f"no probe for {row}")


async def _drain(call) -> None:
    async for _ in call:
        pass


def test_the_matrix_covers_every_rpc():
    rows = {r.split("(")[0] for r in EXPECTED}
    assert sorted(rows) == sorted(short(m) for m in TABLE)
    assert all(len(v.split()) == len(COLUMNS) for v in EXPECTED.values())


@pytest.mark.parametrize("row", [r for r in EXPECTED if r != "Admin.Shutdown"])
async def test_each_rpc_against_each_kind_of_caller(pool, tokens, alice_job, row):
    got = []
    for col in COLUMNS:
        c = Caller(pool, tokens[col])
        try:
            got.append(await probe(row, col, c, pool, alice_job))
        finally:
            await c.close()
    assert " ".join(got) == EXPECTED[row], f"{row}: got {' '.join(got)}, want {EXPECTED[row]} ({' '.join(COLUMNS)})"


async def test_owner_is_the_callers_and_claim_ids_reach_only_daemons(pool, tokens, alice_job):
    async with PoolClient(pool.collector_address, tokens=[tokens["DAEMON"]]) as daemon:
        running = await daemon.jobs(f"ClusterId == {alice_job.split('.')[0]}")
        assert isinstance(ads.get(running[0], "ClaimId"), str) and "#" in ads.get(running[0], "ClaimId")
        assert await daemon.ads("Machine", "isString(ClaimId)") == []            # not without include_private
    for col in ("WRITE", "ADMIN", "other"):
        async with PoolClient(pool.collector_address, tokens=[tokens[col]]) as c:
            [ad] = await c.jobs(f"ClusterId == {alice_job.split('.')[0]}")
            assert ads.get(ad, "Owner") == "alice" and ads.get(ad, "ClaimId") is None
            assert ads.get((await c.jobs(f"ClusterId == {alice_job.split('.')[0]}", projection=["ClaimId"]))[0],
                           "ClaimId") is None


async def test_claims_answer_only_their_secret_id_and_a_daemon(pool, tokens, alice_job):
    cluster = alice_job.split(".")[0]
    async with PoolClient(pool.collector_address, tokens=[tokens["DAEMON"]]) as daemon:
        [ad] = await daemon.jobs(f"ClusterId == {cluster}")
        claim = ads.get(ad, "ClaimId")
        startd = startd_pb2_grpc.StartdStub(daemon.channels.get(pool.daemons["startd1"].address))
        kept = await startd.KeepAlive(startd_pb2.KeepAliveRequest(claim_ids=[claim, claim + "x"]), timeout=10)
        assert list(kept.unknown_claim_ids) == [claim + "x"]
    # Alice owns the job and knows nothing of the claim; even with its id she may not touch it.
    async with PoolClient(pool.collector_address, tokens=[pool.token("alice")]) as alice:
        stub = startd_pb2_grpc.StartdStub(alice.channels.get(pool.daemons["startd1"].address))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.ReleaseClaim(startd_pb2.ReleaseClaimRequest(claim_ids=[claim]), timeout=10)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "access level DAEMON" in e.value.details()
        schedd = schedd_pb2_grpc.ScheddStub(alice.channels.get(pool.daemons["schedd"].address))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await schedd.ClaimEvents(schedd_pb2.ClaimEventsRequest(events=[schedd_pb2.ClaimEvent(
                claim_id=claim, job_id=alice_job, kind=schedd_pb2.JOB_EXITED, pool_time=time.time())]), timeout=10)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        [ad] = await alice.jobs(f"ClusterId == {cluster}")
        assert ads.get(ad, "JobStatus") == 2


async def test_refusals_are_logged_in_htcondors_words(pool, tokens, alice_job):
    # Refusals of its own: the matrix's rows may have run against another test worker's pool.
    alice, expired = Caller(pool, pool.token("alice")), Caller(pool, tokens["expired"])
    try:
        refused, _ = await attempt(lambda: alice.stub(startd_pb2_grpc.StartdStub, "startd1").DrainJobs(
            startd_pb2.DrainJobsRequest(machine="testhost", check_expr="false"), timeout=10))
        assert refused == "D"
        refused, _ = await attempt(lambda: _drain(expired.stub(schedd_pb2_grpc.ScheddStub, "schedd").Query(
            schedd_pb2.QueryJobsRequest(), timeout=10)))
        assert refused == "U"
    finally:
        await alice.close()
        await expired.close()
    log_dir = pool.state_dir / "log"

    async def logged() -> bool:
        return "PERMISSION DENIED to alice@testhost from host 127.0.0.1 for Startd.DrainJobs, access level " \
               "ADMINISTRATOR: reason:" in (log_dir / "StartLog").read_text() and \
               "AUTHENTICATE: token refused from host 127.0.0.1" in (log_dir / "SchedLog").read_text()
    await wait_for(logged, timeout_s=10, what="both refusals in the daemons' logs")


async def test_shutdown_refused_changes_nothing_and_allowed_shuts_down(pool, tokens, alice_job):
    """Last in the module: the allowed columns shut the startd and the negotiator down."""
    expected = EXPECTED["Admin.Shutdown"].split()
    target = {"ADMIN": "startd1", "DAEMON": "negotiator"}
    got = []
    for col, want in zip(COLUMNS, expected):
        key = target.get(col, "schedd")
        c = Caller(pool, tokens[col])
        try:
            r, _ = await attempt(lambda: c.stub(admin_pb2_grpc.AdminStub, key).Shutdown(
                admin_pb2.ShutdownRequest(), timeout=10))
        finally:
            await c.close()
        got.append(r)
        if r != "A":
            assert pool.daemons[key].alive(), f"{key} went down after a refused Shutdown ({col})"
    assert " ".join(got) == EXPECTED["Admin.Shutdown"]
    for key in target.values():
        pool.daemons[key].proc.wait(timeout=30)
    assert pool.daemons["schedd"].alive() and pool.daemons["collector"].alive()
