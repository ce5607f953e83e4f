"""A finished job is recorded in the history exactly once, whatever crashes when.

The schedd's completion path is: commit {final status, history record number, destroy}
to the job queue log; append the record to the history file; answer the startd. A crash
(SIGKILL, or os._exit at a named crash point) between any two of these steps must leave
exactly one history record per job after the schedd restarts, however often it restarts.
"""
from __future__ import annotations

import signal

import pytest

from daemons.cli.client import wait_for
from daemons.schedd.history import SEQ_ATTR

from .conftest import STATIC, PSLOT, SLEEP, attr, wait_jobs, wait_slots


def _ids(history) -> list[str]:
    return sorted(f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}" for j in history)


async def _restart_schedd(pool, client, times: int) -> None:
    for _ in range(times):
        pool.kill("schedd", signal.SIGKILL)
        pool.restart("schedd")
        await wait_for(lambda: client.jobs("true", history=True), timeout_s=30, what="the schedd to answer")


async def test_an_idle_schedd_killed_after_its_jobs_finished_keeps_one_record_each(make_pool):
    """Found by fault injection: the destroy of finished jobs was never committed by an
    idle schedd, so each restart moved them to the history again (3 jobs: 4, then 5 records)."""
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=5, n=3), "three.sub", "alice")
        done = await wait_jobs(c, "true", 3, history=True)
        assert not await c.jobs("true")
        await _restart_schedd(pool, c, 2)
        history = await c.jobs("true", history=True)
        assert _ids(history) == _ids(done) and len(history) == 3
        assert sorted(attr(j, SEQ_ATTR) for j in history) == [1, 2, 3]
        assert all(attr(j, "NumJobStarts") == 1 for j in history)


def _crashing_pool(make_pool, cpus: int, point: str):
    """A started pool whose schedd dies at crash point `point`. Claims outlive the schedd's
    restart (a 2,000 pool-second lease: 20 s of wall time, far beyond even a heavily loaded
    machine's process start)."""
    pool = make_pool(f"NUM_CPUS = {cpus}\n" + PSLOT + "ALIVE_INTERVAL = 20\nMAX_CLAIM_ALIVES_MISSED = 100\n",
                     start=False)
    pool.extra_env["HTCPOOL_CRASHPOINTS"] = point
    pool.start()
    return pool


async def _submit_crash_and_restart(pool, c, submit: str, point: str) -> None:
    """Submit, wait for the schedd to die at `point`, and start it again without it."""
    await wait_slots(c, 1)
    await c.submit(submit, "jobs.sub", "bob")
    schedd = pool.daemons["schedd"]

    async def crashed():
        return schedd.proc.poll() is not None
    await wait_for(crashed, timeout_s=60, what=f"the schedd to crash at {point}")
    del pool.extra_env["HTCPOOL_CRASHPOINTS"]
    pool.restart("schedd")


@pytest.mark.parametrize("point", ["schedd.completion.before_commit", "schedd.completion.after_commit",
                                   "schedd.completion.after_history"])
async def test_a_crash_at_each_point_of_the_completion_path_records_the_job_once(make_pool, point):
    # Claims outlive the schedd's restart (_crashing_pool), so each job runs exactly once.
    pool = _crashing_pool(make_pool, 2, point)
    async with pool.client() as c:
        # The first completion reaches the crash point and the schedd dies there.
        await _submit_crash_and_restart(pool, c, SLEEP.format(seconds=30, n=2), point)
        history = await wait_jobs(c, "true", 2, history=True, timeout_s=90)
        assert not await c.jobs("true")
        await _restart_schedd(pool, c, 2)
        history = await c.jobs("true", history=True)
        assert len(history) == 2 and len(set(_ids(history))) == 2
        assert {attr(j, "JobStatus") for j in history} == {4}
        starts = {f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}": attr(j, "NumJobStarts") for j in history}
        assert set(starts.values()) == {1}, (starts, (pool.state_dir / "log" / "SchedLog").read_text()[-3000:])


async def test_removing_jobs_records_them_once_across_restarts(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        cluster, _ = await c.submit(SLEEP.format(seconds=5, n=4), "four.sub", "carol")
        from daemons.pb.htcpool import schedd_pb2
        await c.act(schedd_pb2.REMOVE, [str(cluster)])
        await _restart_schedd(pool, c, 2)
        history = await c.jobs("true", history=True)
        assert len(history) == 4 and {attr(j, "JobStatus") for j in history} == {3}


@pytest.mark.parametrize("action", ["hold", "remove"])
async def test_hold_or_remove_while_the_claim_is_being_made_stops_the_job(make_pool, action):
    """Found by fault injection: with the startd frozen (SIGSTOP) a job was matched; `hold`
    (or `rm`) was accepted while its claim request waited, and once the startd resumed the
    job ran anyway (held: it ran with HoldReason set and ended Completed; removed: it ran
    after being recorded Removed, and its slot stayed Claimed forever)."""
    import os

    from daemons.pb.htcpool import schedd_pb2
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT)
    startd = pool.daemons["startd1"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        os.kill(startd.pid, signal.SIGSTOP)
        try:
            await c.submit(SLEEP.format(seconds=100000, n=1), "one.sub", "dave")

            async def matched():
                return any(r.matches for r in await c.cycles())
            await wait_for(matched, timeout_s=30, what="a match for the job")
            kind = schedd_pb2.HOLD if action == "hold" else schedd_pb2.REMOVE
            assert await c.act(kind, ["1.0"]) == ["1.0"]
        finally:
            os.kill(startd.pid, signal.SIGCONT)

        # The claim request completes now; the schedd must give the slot back, not run the job.
        log = pool.state_dir / "log" / "SchedLog"

        async def claimed():
            return "for job 1.0" in log.read_text() and "Claimed " in log.read_text()
        await wait_for(claimed, timeout_s=60, what="the delayed claim to complete")
        async def slot_free_again():
            slots = await c.ads("Machine", projection=["Name", "State", "Activity"])
            return slots if slots and all(attr(s, "State") == "Unclaimed" for s in slots) else None
        await wait_for(slot_free_again, timeout_s=60, what="the slot to be released")
        if action == "hold":
            [job] = await c.jobs("true")
            assert attr(job, "JobStatus") == 5 and not attr(job, "NumJobStarts")
        else:
            assert not await c.jobs("true")
            [job] = await c.jobs("true", history=True)
            assert attr(job, "JobStatus") == 3 and not attr(job, "NumJobStarts")
        assert "Started job 1.0" not in log.read_text()


async def test_a_job_marked_running_whose_activation_never_left_runs_once_after_the_restart(make_pool):
    # The schedd marks a job running (on disk) before it asks the startd to start it, as
    # HTCondor's does when it spawns the shadow. Killed in between, it finds the job running
    # on a claim whose startd runs nothing: the job goes back to the queue and runs once.
    point = "schedd.start.before_activate"
    pool = _crashing_pool(make_pool, 1, point)
    async with pool.client() as c:
        await _submit_crash_and_restart(pool, c, SLEEP.format(seconds=30, n=1), point)
        history = await wait_jobs(c, "true", 1, history=True, timeout_s=90)
        assert not await c.jobs("true")
        assert [attr(j, "JobStatus") for j in history] == [4]
        log = (pool.state_dir / "log" / "SchedLog").read_text()
        assert "returned to the queue: its claim was found running no job" in log, log[-3000:]
        started = (pool.state_dir / "log" / "StartLog").read_text().count("starting job 1.0 ")
        assert started == 1, (pool.state_dir / "log" / "StartLog").read_text()[-3000:]
