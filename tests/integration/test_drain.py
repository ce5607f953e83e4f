"""Draining machines at the startd, through `htcpool drain` and the DrainJobs RPC."""
from __future__ import annotations

from daemons.cli.client import PoolClient, wait_for

from .conftest import PSLOT, attr, htcpool, wait_jobs, wait_slots

TWO = "NUM_CPUS = 2\n" + PSLOT + "CLAIM_WORKLIFE = 0\n"


async def _machine(c: PoolClient, host: str):
    return (await c.ads("Machine", f'Machine == "{host}" && PartitionableSlot =?= true'))[0]


async def test_graceful_drain_lets_the_job_finish_blocks_new_ones_and_cancel_restores(make_pool):
    pool = make_pool(TWO + "MAXJOBRETIREMENTTIME = 100000\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 400\nqueue\n", "one.sub", "alice")
        await wait_jobs(c, "JobStatus == 2", 1)

        # The ad sent at the claim is made the instant the job starts (no badput yet);
        # the next periodic update carries the work a quick drain would lose.
        async def running_for_a_while():
            m = await _machine(c, "testhost")
            return m if attr(m, "ExpectedMachineQuickDrainingBadput") > 0 else None
        before = await wait_for(running_for_a_while, timeout_s=20, what="the machine ad to count the job's work")
        assert attr(before, "Draining") is False
        assert attr(before, "ExpectedMachineGracefulDrainingBadput") == 0  # the job would finish in time
        r = htcpool("drain", "testhost", "--reason", "defrag test", "--state-dir", str(pool.state_dir))
        assert r.returncode == 0, r.stderr
        await c.submit("executable = /bin/sleep\narguments = 10\nqueue\n", "late.sub", "alice")

        async def draining():
            m = await _machine(c, "testhost")
            return m if attr(m, "Draining") is True else None
        m = await wait_for(draining, timeout_s=20, what="the machine to advertise its drain")
        assert attr(m, "DrainReason") == "defrag test"
        assert attr(m, "State") == "Drained"
        # The running job finishes; the new one does not start while the machine drains.
        done = await wait_jobs(c, "ClusterId == 1", 1, history=True)
        assert attr(done[0], "JobStatus") == 4

        async def drained():
            m = await _machine(c, "testhost")
            return (attr(m, "State"), attr(m, "Activity")) == ("Drained", "Idle")
        await wait_for(drained, timeout_s=20, what="the machine to be drained")
        assert [attr(j, "JobStatus") for j in await c.jobs("ClusterId == 2")] == [1]
        again = htcpool("drain", "testhost", "--how", "fast", "--reason", "again", "--state-dir", str(pool.state_dir))
        assert again.returncode == 2 and "already draining" in again.stderr
        m = await _machine(c, "testhost")   # the first drain stands, unchanged
        assert (attr(m, "DrainReason"), attr(m, "DrainHow"), attr(m, "State")) == ("defrag test", "graceful", "Drained")
        cancel = htcpool("drain", "testhost", "--cancel", "--state-dir", str(pool.state_dir))
        assert cancel.returncode == 0, cancel.stderr
        await wait_jobs(c, "ClusterId == 2", 1, history=True, timeout_s=30)


async def test_quick_drain_evicts_and_the_job_runs_again_elsewhere(make_pool):
    pool = make_pool(TWO + "MachineMaxVacateTime = 30\n", machines=2)
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit("executable = /bin/sleep\narguments = 600\nqueue\n", "one.sub", "bob")
        first = (await wait_jobs(c, "JobStatus == 2", 1))[0]
        host = attr(first, "RemoteHost").split("@")[1]
        other = "testhost-002" if host == "testhost-001" else "testhost-001"
        r = htcpool("drain", host, "--how", "quick", "--state-dir", str(pool.state_dir))
        assert r.returncode == 0, r.stderr

        async def moved():
            jobs = await c.jobs("JobStatus == 2 && NumJobStarts == 2")
            return jobs or None
        job = (await wait_for(moved, timeout_s=30, what="the evicted job to run again"))[0]
        assert attr(job, "RemoteHost").split("@")[1] == other
        assert attr(job, "LastRemoteHost").split("@")[1] == host
        assert "quick drain" in attr(job, "VacateReason")
        done = await wait_jobs(c, "true", 1, history=True, timeout_s=30)
        assert attr(done[0], "JobStatus") == 4


async def test_resume_on_completion_puts_the_machine_back(make_pool):
    pool = make_pool(TWO + "MAXJOBRETIREMENTTIME = 100000\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 200\nqueue\n", "one.sub", "carol")
        await wait_jobs(c, "JobStatus == 2", 1)
        await c.drain("testhost", resume_on_completion=True)

        async def draining():
            m = await _machine(c, "testhost")
            return m if attr(m, "Draining") is True else None
        m = await wait_for(draining, timeout_s=20, what="the machine to advertise its drain")
        assert (attr(m, "State"), attr(m, "Activity")) == ("Drained", "Retiring")
        done = await wait_jobs(c, "true", 1, history=True)
        # The drain was graceful: the job finished, once, where it was.
        assert [(attr(j, "JobStatus"), attr(j, "NumJobStarts")) for j in done] == [(4, 1)]

        async def resumed():
            m = await _machine(c, "testhost")
            return attr(m, "Draining") is False and attr(m, "State") == "Unclaimed"
        await wait_for(resumed, timeout_s=20, what="the machine back in service")
    log = (pool.state_dir / "log" / "StartLog").read_text()
    drained = log.index("testhost: drained after")
    assert log.index("testhost: back in service (resume on completion)") > drained


async def test_bad_drains_are_refused_and_change_nothing(make_pool):
    pool = make_pool(TWO)
    async with pool.client() as c:
        await wait_slots(c, 1)
    for args, message in ((["nosuchhost"], "no machine 'nosuchhost' in the pool"),
                          (["testhost", "--check", "Cpus >"], "check expression: cannot parse 'Cpus >'"),
                          (["testhost", "--check", "Cpus > 100"], "check expression 'Cpus > 100' is not true"),
                          (["testhost", "--start", "(("], "start expression: cannot parse"),
                          (["testhost", "--cancel"], "testhost is not draining")):
        r = htcpool("drain", *args, "--state-dir", str(pool.state_dir))
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert message in r.stderr, (args, r.stderr)
    async with pool.client() as c:
        m = await _machine(c, "testhost")
        assert (attr(m, "Draining"), attr(m, "State")) == (False, "Unclaimed")
