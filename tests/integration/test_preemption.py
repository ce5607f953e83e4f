"""Preemption on real pools: by user priority, by startd RANK, by PREEMPT; the startd's
Claimed/Retiring and Preempting states; a preempted job goes back to Idle, is never lost
and completes once."""
from __future__ import annotations

import re

from daemons.cli.client import PoolClient, wait_for

from .conftest import STATIC, attr, wait_jobs, wait_slots

LONG = "executable = /bin/sleep\narguments = {seconds}\n{extra}queue {n}\n"


async def _slot_states(c: PoolClient) -> dict[str, tuple[str, str]]:
    return {attr(s, "Name").split("@")[0]: (attr(s, "State"), attr(s, "Activity")) for s in await c.ads("Machine")}


async def test_a_user_with_better_priority_preempts(make_pool):
    """matchmaker.cpp matchmakingAlgorithm: a claimed slot of another user matches when
    PREEMPTION_REQUIREMENTS holds (here HTCondor's classic RemoteUserPrio >
    SubmitterUserPrio * 1.2) and the slot ranks the request at least as well as its job;
    the NegotiatorLog says "Preempting <user> (user prio=..., startd rank=...) on <slot>
    for <submitter> ..." and "Matched ... preempting <user>". The startd (ResState.cpp)
    lets the job retire, Claimed/Retiring, until its MaxJobRetirementTime runs out,
    vacates it, Preempting/Vacating, for MachineMaxVacateTime, then gives the slot to
    the preempting claim; the preempted job goes back to Idle in its schedd's queue.
    NEGOTIATOR_CONSIDER_EARLY_PREEMPTION lets the negotiator consider a slot whose job
    still has retirement time left."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nPREEMPTION_REQUIREMENTS = RemoteUserPrio > SubmitterUserPrio * 1.2\n"
                     "PRIORITY_HALFLIFE = 100\nNEGOTIATOR_CONSIDER_EARLY_PREEMPTION = True\n"
                     "MAXJOBRETIREMENTTIME = 500\nMachineMaxVacateTime = 200\nCLAIM_WORKLIFE = 0\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(LONG.format(seconds=100000, extra="", n=2), "hog.sub", "hog")
        await wait_jobs(c, "JobStatus == 2", 2)

        async def hog_is_worse():
            prio = {e.name: e.effective_priority for e in (await c.userprio()).entries}
            return prio.get("hog@testhost", 0) > 500 * 1.5
        await wait_for(hog_is_worse, timeout_s=30, what="hog's priority to grow worse")
        await c.submit(LONG.format(seconds=100000, extra="", n=1), "newbie.sub", "newbie")

        seen: set[tuple[str, str]] = set()

        async def newbie_runs():
            seen.update((await _slot_states(c)).values())
            return await c.jobs('Owner == "newbie" && JobStatus == 2')
        running = await wait_for(newbie_runs, timeout_s=60, what="newbie's job to run on a preempted slot")
        assert ("Claimed", "Retiring") in seen and ("Preempting", "Vacating") in seen
        slot = attr(running[0], "RemoteHost")
        hog = await c.jobs('Owner == "hog"')
        assert sorted(attr(j, "JobStatus") for j in hog) == [1, 2]
        preempted = next(j for j in hog if attr(j, "JobStatus") == 1)
        assert attr(preempted, "LastRemoteHost") == slot
        assert "preempted by newbie@testhost" in attr(preempted, "VacateReason")
        assert attr(preempted, "NumJobStarts") == 1
        assert await c.jobs("true", history=True) == []
        async def preempting_cycle():
            return next((r for r in await c.cycles() if r.preemptions), None)
        cycle = await wait_for(preempting_cycle, timeout_s=30, what="the preempting cycle's record")
        assert cycle.preemptions == 1
    log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
    assert "Preempting hog@testhost (user prio=" in log
    assert f"on {slot} for newbie@testhost (user prio=500.00, startd rank=0.00)" in log
    assert "newbie@testhost <" in log and "preempting hog@testhost <" in log


async def test_startd_rank_preempts_for_a_job_it_prefers(make_pool):
    """matchmaker.cpp: a claimed slot whose RANK strictly prefers the request
    (MY.Rank > MY.CurrentRank) is preempted for startd rank, whatever
    PREEMPTION_REQUIREMENTS says (False by default) and whatever the users' priorities;
    a boolean RANK counts 1.0 (EvalFloat). WANT_VACATE = False kills the job at once
    (Preempting/Killing) instead of vacating it. The preempted job goes back to Idle,
    runs again when the slot is free, and each job completes once."""
    pool = make_pool(STATIC + 'NUM_CPUS = 1\nRANK = TARGET.Owner == "vip"\nWANT_VACATE = False\n'
                     "CLAIM_WORKLIFE = 0\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(LONG.format(seconds=400, extra="", n=1), "joe.sub", "joe")
        await wait_jobs(c, 'Owner == "joe" && JobStatus == 2', 1)
        await c.submit(LONG.format(seconds=100, extra="", n=1), "vip.sub", "vip")
        running = await wait_jobs(c, 'Owner == "vip" && JobStatus == 2', 1)
        assert attr(running[0], "RemoteHost") == "slot1@testhost"
        joe = (await c.jobs('Owner == "joe"'))[0]
        assert attr(joe, "JobStatus") == 1
        assert "machine rank 1 beats 0" in attr(joe, "VacateReason")
        # The startd's update of the slot may trail the schedd's view by a moment.
        vip_slot = await wait_slots(c, 1, 'RemoteOwner == "vip@testhost"')
        assert attr(vip_slot[0], "CurrentRank") == 1.0
        # vip's job ends; joe's runs again and completes: each job completes once.
        done = await wait_jobs(c, "true", 2, history=True, timeout_s=60)
        assert sorted((attr(j, "Owner"), attr(j, "NumJobStarts")) for j in done) == [("joe", 2), ("vip", 1)]
        assert await c.jobs() == []
    log = (pool.state_dir / "log" / "NegotiatorLog").read_text()
    assert re.search(r"Preempting joe@testhost \(user prio=50\d\.\d\d, startd rank=0\.00\) on slot1@testhost for "
                     r"vip@testhost \(user prio=500\.00, startd rank=1\.00\)", log)
    assert "preempting joe@testhost <" in log
    start_log = (pool.state_dir / "log" / "StartLog").read_text()
    assert "Preempting/Killing" in start_log


async def test_preempt_expression_evicts_the_running_job(make_pool):
    """ResState.cpp: PREEMPT true for a running job preempts its claim ("PREEMPT is
    TRUE"): after its retirement time (0 here) it is vacated for MachineMaxVacateTime,
    Preempting/Vacating, and goes back to its schedd's queue; the slot is free again."""
    pool = make_pool(STATIC + "NUM_CPUS = 1\nPREEMPT = TotalJobRunTime > 100\nMachineMaxVacateTime = 200\n"
                     "POLLING_INTERVAL = 5\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(LONG.format(seconds=100000, extra="", n=1), "long.sub", "kim")
        await wait_jobs(c, "JobStatus == 2", 1)

        async def vacating():
            return (await _slot_states(c)).get("slot1") == ("Preempting", "Vacating")
        await wait_for(vacating, timeout_s=30, what="the slot to vacate the job")

        async def evicted():
            jobs = await c.jobs("NumJobStarts >= 1 && VacateReason =!= undefined")
            return jobs
        jobs = await wait_for(evicted, timeout_s=30, what="the job to be evicted")
        assert attr(jobs[0], "VacateReason") == "PREEMPT expression evaluated to True"
        assert await c.jobs("true", history=True) == []
