"""Jobs through a real pool: submit, match, claim, run, complete."""
from __future__ import annotations

import aiohttp

from daemons.cli.client import wait_for

from .conftest import STATIC, SLEEP, attr, PSLOT, wait_jobs, wait_slots



async def test_partitionable_slot_carves_dynamic_slots_and_jobs_complete(make_pool):
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        cluster, n = await c.submit(SLEEP.format(seconds=300, n=6), "six.sub", "alice")
        assert n == 6

        # Four 1-cpu dynamic slots are carved from the 4-cpu p-slot; two jobs wait.
        dslots = await wait_slots(c, 4, "DynamicSlot =?= true && Activity == \"Busy\"")
        assert sorted(attr(s, "Name") for s in dslots) == sorted(f"slot1_{i}@testhost" for i in range(1, 5))
        assert {attr(s, "TotalSlotCpus") for s in dslots} == {1}
        assert {attr(s, "Memory") for s in dslots} == {128}
        pslot = (await c.ads("Machine", "PartitionableSlot =?= true"))[0]
        assert attr(pslot, "Cpus") == 0 and attr(pslot, "TotalSlotCpus") == 4
        running = await c.jobs("JobStatus == 2")
        assert len(running) == 4
        assert {attr(j, "RemoteHost").split("@")[0] for j in running} == {f"slot1_{i}" for i in range(1, 5)}
        assert len(await c.jobs("JobStatus == 1")) == 2

        done = await wait_jobs(c, f"ClusterId == {cluster}", 6, history=True)
        assert [attr(j, "JobStatus") for j in done] == [4] * 6
        # Each job held its slot for its 300 pool seconds, measured by the startd.
        assert all(abs(attr(j, "RemoteWallClockTime") - 300) < 1.0 for j in done)
        assert await c.jobs() == []


async def test_static_slots_run_one_job_each(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 2\nCLAIM_WORKLIFE = 0\n")
    async with pool.client() as c:
        slots = await wait_slots(c, 2)
        assert sorted(attr(s, "SlotType") for s in slots) == ["Static", "Static"]
        await c.submit(SLEEP.format(seconds=200, n=3), "three.sub", "bob")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        assert sorted(attr(j, "RemoteHost") for j in running) == ["slot1@testhost", "slot2@testhost"]
        assert not await c.ads("Machine", "DynamicSlot =?= true")
        done = await wait_jobs(c, "true", 3, history=True)
        assert {attr(j, "LastRemoteHost") for j in done} <= {"slot1@testhost", "slot2@testhost"}


async def test_claim_reuse_runs_the_next_job_without_negotiating(make_pool):
    # CLAIM_WORKLIFE at HTCondor's default (1200 s): the schedd keeps its claims.
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + "NEGOTIATOR_INTERVAL = 100000\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=100, n=6), "six.sub", "carol")
        done = await wait_jobs(c, "true", 6, history=True)
        assert len(done) == 6
        cycles = await c.cycles()
        # One p-slot match (plus the leftover claimed by the schedd) served all six jobs.
        assert sum(r.matches for r in cycles) == 1
        schedd = pool.daemons["schedd"].info["status_url"]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{schedd}/status") as r:
                status = await r.json()
        assert status["counters"]["claim_reuses"] == 4
        assert status["counters"]["claims"] == 2


async def test_job_rank_picks_the_best_slot_and_requirements_exclude(make_pool):
    # HTCondor's default NEGOTIATOR_PRE_JOB_RANK prefers the smallest slot before the
    # job's Rank is looked at; switch it off so the job's Rank decides.
    pool = make_pool("NUM_CPUS = 2\nSLOT_TYPE_1 = cpus=1, mem=1024\nNUM_SLOTS_TYPE_1 = 1\n"
                     "SLOT_TYPE_2 = cpus=1, mem=4096\nNUM_SLOTS_TYPE_2 = 1\nCLAIM_WORKLIFE = 0\n"
                     "NEGOTIATOR_PRE_JOB_RANK = 0\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit("executable = /bin/sleep\narguments = 1000\nrank = TARGET.Memory\nqueue\n", "rank.sub", "dan")
        await c.submit("executable = /bin/sleep\narguments = 1000\nrequirements = TARGET.Memory < 2000\n"
                       "rank = TARGET.Memory\nqueue\n", "req.sub", "dan")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        where = {attr(j, "ClusterId"): attr(j, "RemoteHost") for j in running}
        assert where == {1: "slot2@testhost", 2: "slot1@testhost"}


async def test_unmatchable_job_stays_idle_with_a_rejection_reason(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 10\nrequest_cpus = 64\nqueue\n", "big.sub", "erin")

        async def rejected():
            jobs = await c.jobs("LastRejMatchReason =!= undefined")
            return jobs
        jobs = await wait_for(rejected, timeout_s=30, what="a rejection reason")
        assert attr(jobs[0], "LastRejMatchReason") == "no match found"
        assert attr(jobs[0], "JobStatus") == 1


async def test_several_machines_in_one_startd_process(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + "CLAIM_WORKLIFE = 0\n", machines=3)
    async with pool.client() as c:
        slots = await wait_slots(c, 3)
        assert len({attr(s, "Machine") for s in slots}) == 3
        await c.submit(SLEEP.format(seconds=500, n=6), "six.sub", "fay")
        running = await wait_jobs(c, "JobStatus == 2", 6)
        hosts = {attr(j, "RemoteHost").split("@")[1] for j in running}
        assert len(hosts) == 3


async def test_zero_length_jobs_all_complete(make_pool):
    # A zero-length job's exit can reach the schedd before the startd's reply to
    # ActivateClaim does; every such job must still be recorded completed.
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT + "NEGOTIATOR_INTERVAL = 5\n", machines=10)
    async with pool.client() as c:
        await wait_slots(c, 10)
        cluster, n = await c.submit(SLEEP.format(seconds=0, n=300), "zero.sub", "gus")
        done = await wait_jobs(c, f"ClusterId == {cluster}", n, history=True, timeout_s=120)
        assert sorted(attr(j, "ProcId") for j in done) == list(range(n))
        assert {attr(j, "JobStatus") for j in done} == {4}
        assert await c.jobs() == []
