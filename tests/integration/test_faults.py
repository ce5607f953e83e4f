"""Each fault kind on a small real pool: the fault acts, and every job still completes exactly once.

Leases are short (ALIVE_INTERVAL 20 x MAX_CLAIM_ALIVES_MISSED 3 = 60 pool s, 0.6 s of
wall time at TIME_SCALE 100, and a running job's JobLeaseDuration 60 through
JOB_DEFAULT_LEASE_DURATION, as HTCondor's own tests shorten it) so a fault outlives a
claim within a second or two.
"""
from __future__ import annotations

import signal

import aiohttp

from daemons.cli.client import PoolClient, wait_for
from daemons.core.fault_admin import fault_to_pb
from daemons.core.faults import Fault

from .conftest import PSLOT, SLEEP, attr, htcpool, wait_jobs, wait_slots

SHORT_LEASE = "ALIVE_INTERVAL = 20\nMAX_CLAIM_ALIVES_MISSED = 3\nJOB_DEFAULT_LEASE_DURATION = 60\n"


def _ids(jobs) -> list[str]:
    return sorted(f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}" for j in jobs)


async def _all_once(c: PoolClient, n: int, timeout_s: float = 120.0) -> list:
    """Wait for n jobs in the history; check each is there once, Completed, and the queue is empty."""
    history = await wait_jobs(c, "true", n, history=True, timeout_s=timeout_s)
    assert len(history) == n and len(set(_ids(history))) == n, _ids(history)
    assert {attr(j, "JobStatus") for j in history} == {4}
    assert not await c.jobs("true")
    return history


async def _metric(url: str, name: str) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/metrics") as r:
            return "\n".join(line for line in (await r.text()).splitlines() if name in line)


async def test_a_fault_plan_from_the_config_acts_at_start_and_clears_at_run_time(make_pool):
    pool = make_pool("NUM_CPUS = 1\n" 'SCHEDD_FAULT_PLAN = id=nosubmit method=Submit abort=UNAVAILABLE\n')
    schedd = pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        import grpc
        try:
            await c.submit(SLEEP.format(seconds=5, n=1), "one.sub", "alice")
            raise AssertionError("the submit went through a fault that aborts every Submit")
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE and "fault nosubmit" in e.details()
        listed = await c.list_faults(schedd.address)
        assert [(s.fault.id, s.fault.kind, s.fired) for s in listed.faults] == [("nosubmit", "abort", 1)]
        assert 'fault="nosubmit"' in await _metric(schedd.info["status_url"], "faults_fired_total")
        assert "FAULT nosubmit fired on call Schedd.Submit" in (pool.state_dir / "log" / "SchedLog").read_text()
        # The negotiator's calls are not the Submit method: the pool still negotiates.
        assert not (await c.clear_faults(schedd.address)).faults
        await c.submit(SLEEP.format(seconds=5, n=2), "two.sub", "alice")
        await _all_once(c, 2)


async def test_delayed_negotiation_messages_keep_their_order_and_every_job_runs_once(make_pool):
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT)
    schedd = pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.set_faults(schedd.address, [fault_to_pb(Fault("slow", method="Negotiate", delay_s=5.0,
                                                              jitter_s=5.0, percent=50.0))])
        await c.submit(SLEEP.format(seconds=30, n=12), "twelve.sub", "alice")
        await _all_once(c, 12)
        assert (await c.list_faults(schedd.address)).faults[0].fired > 0


async def test_dropped_keepalives_end_the_claims_and_the_jobs_run_again_once(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + SHORT_LEASE)
    startd = pool.daemons["startd1"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=200, n=2), "two.sub", "bob")
        await wait_jobs(c, "JobStatus == 2", 2)
        now = await c.pool_now()
        # For 300 pool seconds the startd hears no keepalive: its leases (60 s) lapse.
        await c.set_faults(startd.address, [fault_to_pb(Fault("nokeepalive", method="KeepAlive", drop=True,
                                                              peer="schedd", stop=now + 300.0))])
        history = await _all_once(c, 2)
        assert max(attr(j, "NumJobStarts") for j in history) >= 2
        log = (pool.state_dir / "log" / "StartLog").read_text()
        assert "FAULT nokeepalive fired on call Startd.KeepAlive" in log
        assert "lease" in log.lower()


async def test_a_running_jobs_claim_lives_for_its_job_lease_not_for_a_few_keepalives(make_pool):
    """HTCondor's startd takes a running claim's lease from the job (JobLeaseDuration, at
    activation), and the schedd waits as long on a silent startd: with keepalives dropped
    for 300 pool seconds, a job with a 60 s lease loses its claim and runs again, and a job
    with a 1,200 s lease runs on, started once, though the keepalive lease is 60 s."""
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + "ALIVE_INTERVAL = 20\nMAX_CLAIM_ALIVES_MISSED = 3\n")
    startd = pool.daemons["startd1"]
    job = "universe = vanilla\nexecutable = /bin/sleep\narguments = 400\njob_lease_duration = {}\nqueue\n"
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(job.format(60), "short.sub", "bob")
        await c.submit(job.format(1200), "long.sub", "bob")
        await wait_jobs(c, "JobStatus == 2", 2)
        now = await c.pool_now()
        await c.set_faults(startd.address, [fault_to_pb(Fault("nokeepalive", method="KeepAlive", drop=True,
                                                              peer="schedd", stop=now + 300.0))])
        history = await _all_once(c, 2)
        starts = {attr(j, "JobLeaseDuration"): attr(j, "NumJobStarts") for j in history}
        assert starts[1200] == 1 and starts[60] >= 2, starts
        log = (pool.state_dir / "log" / "StartLog").read_text()
        assert "FAULT nokeepalive fired on call Startd.KeepAlive" in log
        assert "not kept alive for 60 s" in log and "not kept alive for 1200 s" not in log


async def test_a_job_lease_shorter_than_the_keepalive_interval_lowers_the_interval(make_pool):
    """A job's lease (150 s) far shorter than ALIVE_INTERVAL (300 s): the schedd keeps
    claims alive every lease / 3, as HTCondor's schedd does, so the job runs once, on one
    claim, though no keepalive would otherwise have reached the startd within its lease."""
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + "ALIVE_INTERVAL = 300\n")
    job = "universe = vanilla\nexecutable = /bin/sleep\narguments = 600\njob_lease_duration = 150\nqueue\n"
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(job, "short-lease.sub", "bob")
        [done] = await _all_once(c, 1)
        assert attr(done, "NumJobStarts") == 1
        assert "keepalive interval lowered to 50 s (job 1.0 has a JobLeaseDuration of 150 s)" in \
            (pool.state_dir / "log" / "SchedLog").read_text()
        assert "claim lease expired" not in (pool.state_dir / "log" / "StartLog").read_text()


async def test_a_startd_clock_jumped_past_the_lease_and_the_jobs_still_complete_once(make_pool):
    """Found by fault injection: the startd dropped news of a job as "older than a lease" by
    its pool-time stamp, so after its clock jumped an hour ahead the exits of jobs that
    were still running (their claims kept alive) were thrown away, and the jobs stayed
    Running at the schedd forever. Whether the jump first makes the running claims look
    expired (and the jobs run again) or a keepalive renews them in time, each job
    completes once."""
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + SHORT_LEASE)
    startd = pool.daemons["startd1"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=300, n=2), "two.sub", "carol")
        await wait_jobs(c, "JobStatus == 2", 2)
        reply = await c.set_faults(startd.address, [fault_to_pb(Fault("jump", clock_offset_s=3600.0))])
        assert reply.pool_time - reply.true_pool_time > 3590.0
        await _all_once(c, 2)
        healed = await c.clear_faults(startd.address)
        assert abs(healed.pool_time - healed.true_pool_time) < 1.0
        # And after the clock is healed (a jump back an hour), the pool still runs jobs.
        await c.submit(SLEEP.format(seconds=100, n=2), "two.sub", "carol")
        await _all_once(c, 4)


async def test_a_job_exit_held_up_longer_than_a_lease_still_completes_the_job(make_pool):
    """Found by fault injection: news of a job's exit that could not reach the schedd for
    longer than a claim lease was dropped, though the schedd kept the claim alive all the
    while (only ClaimEvents failed); the job then stayed Running at the schedd forever."""
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + SHORT_LEASE)
    schedd = pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        now = await c.pool_now()
        # The startd's reports are lost for 400 pool seconds (six leases); keepalives are not.
        await c.set_faults(schedd.address, [fault_to_pb(Fault("noevents", method="ClaimEvents", drop=True,
                                                              stop=now + 400.0))])
        await c.submit(SLEEP.format(seconds=20, n=1), "one.sub", "heidi")
        [job] = await _all_once(c, 1)
        assert attr(job, "NumJobStarts") == 1
        assert (await c.list_faults(schedd.address)).faults[0].fired >= 1


async def test_a_paused_startd_loses_its_claims_and_the_other_startds_keep_theirs(make_pool):
    """Found by fault injection: the schedd's keepalive round waited for every startd, so
    one frozen startd (its calls hang until their 10 s deadline) held up the keepalives of
    all the others, whose claims lapsed again and again while it was frozen."""
    pool = make_pool("NUM_CPUS = 1\n" + SHORT_LEASE, startds=2)
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=150, n=3), "three.sub", "dave")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        frozen = [j for j in running if "exec1" in str(attr(j, "RemoteHost"))]
        healthy = _ids(j for j in running if "exec2" in str(attr(j, "RemoteHost")))
        assert len(frozen) == 1 and len(healthy) == 1
        cluster, proc = attr(frozen[0], "ClusterId"), attr(frozen[0], "ProcId")
        pool.pause("startd1")
        try:
            # The schedd gives up on the frozen startd's claim once its lease has passed.
            async def given_up():
                j = await c.jobs(f"ClusterId == {cluster} && ProcId == {proc}")
                return j and attr(j[0], "JobStatus") == 1
            await wait_for(given_up, timeout_s=60, what=f"job {cluster}.{proc} to leave the frozen startd")
        finally:
            pool.resume("startd1")
        history = await _all_once(c, 3)
        starts = {f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}": attr(j, "NumJobStarts") for j in history}
        assert starts[f"{cluster}.{proc}"] >= 2
        # The job on the healthy startd ran once, undisturbed.
        assert starts[healthy[0]] == 1
        assert "has not answered a keepalive" in (pool.state_dir / "log" / "SchedLog").read_text()


async def test_a_partitioned_startd_comes_back_and_nothing_runs_twice(make_pool):
    pool = make_pool("NUM_CPUS = 1\n" + SHORT_LEASE, startds=2)
    startd1, schedd = pool.daemons["startd1"], pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=150, n=3), "three.sub", "erin")
        await wait_jobs(c, "JobStatus == 2", 2)
        now = await c.pool_now()
        # Both directions between startd1 and the schedd, in startd1's own layers.
        await c.set_faults(startd1.address, [
            fault_to_pb(Fault("in", drop=True, peer="schedd", stop=now + 400.0)),
            fault_to_pb(Fault("out", side="client", drop=True, peer=schedd.address, stop=now + 400.0))])
        history = await _all_once(c, 3)
        assert max(attr(j, "NumJobStarts") for j in history) >= 2
        fired = {s.fault.id: s.fired for s in (await c.list_faults(startd1.address)).faults}
        assert fired["in"] > 0 and fired["out"] > 0


async def test_a_negotiator_killed_in_the_middle_of_a_cycle(make_pool):
    pool = make_pool("NUM_CPUS = 8\n" + PSLOT)
    schedd = pool.daemons["schedd"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        # Hold every negotiation message at the schedd, so a cycle is under way for a while.
        await c.set_faults(schedd.address, [fault_to_pb(Fault("hold", method="Negotiate", delay_s=300.0))])
        await c.submit(SLEEP.format(seconds=20, n=8), "eight.sub", "frank")

        async def mid_cycle():
            return any(s.active for s in (await c.list_faults(schedd.address)).faults)
        await wait_for(mid_cycle, timeout_s=30, what="a negotiation cycle to reach the schedd")
        pool.kill("negotiator", signal.SIGKILL)
        await c.clear_faults(schedd.address)
        pool.restart("negotiator")
        history = await _all_once(c, 8)
        assert all(attr(j, "NumJobStarts") == 1 for j in history)


async def test_graceful_restarts_and_kills_of_every_daemon_lose_nothing(make_pool):
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT + SHORT_LEASE)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=100, n=10), "ten.sub", "grace")
        await wait_jobs(c, "JobStatus == 2", 2)
        for key, sig in (("schedd", signal.SIGTERM), ("collector", signal.SIGKILL), ("startd1", signal.SIGTERM),
                         ("schedd", signal.SIGKILL), ("negotiator", signal.SIGTERM)):
            pool.kill(key, sig)
            pool.restart(key)
        await _all_once(c, 10, timeout_s=180)


async def test_a_schedd_down_longer_than_a_lease_still_hears_its_job_finished(make_pool):
    """Found by fault injection: a startd dropped the news of a job's exit once the claim's
    lease had lapsed while the schedd was down, and a restarted schedd first heard from the
    startd's KeepAlive that the claim was gone: it ran the finished job again. A startd now
    keeps exit news and delivers it before it answers that schedd's KeepAlive."""
    # The job must exit after the kill and before the lease lapses: a 400 s job and a 600 s
    # lease. (A 20 s job, 0.2 s of wall time, had sometimes ended before the kill landed on a
    # loaded machine; its schedd then released the claim, and no lease ever lapsed.)
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + "ALIVE_INTERVAL = 200\nMAX_CLAIM_ALIVES_MISSED = 3\n")
    log = pool.state_dir / "log" / "StartLog"
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=400, n=1), "one.sub", "ivan")
        await wait_jobs(c, "JobStatus == 2", 1)
        pool.kill("schedd", signal.SIGKILL)
        assert "job 1.0 exited" not in log.read_text(), "the job ended before its schedd was killed"

        async def exited_and_lapsed():
            text = log.read_text()
            return "job 1.0 exited" in text and "claim lease expired" in text
        await wait_for(exited_and_lapsed, timeout_s=60, what="the job to end and its claim to lapse")
        lapsed = await c.pool_now()

        async def another_lease():
            return await c.pool_now() > lapsed + 600.0
        await wait_for(another_lease, timeout_s=60, what="another claim lease of pool time")
        pool.restart("schedd")
        [job] = await _all_once(c, 1)
        assert attr(job, "NumJobStarts") == 1


async def test_a_job_evicted_while_its_schedd_is_down_is_recorded_as_evicted_then(make_pool):
    """A running job's claim outlives a schedd outage (its JobLeaseDuration). A job evicted
    meanwhile (a quick drain) is recorded, once the schedd is back, as evicted when it was:
    the startd keeps news of a job past a claim lease (it dropped an eviction's after one,
    and the restarted schedd, finding the claim gone, counted the run until then)."""
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + "MachineMaxVacateTime = 0\n")
    log = pool.state_dir / "log" / "StartLog"
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=100000, n=1), "long.sub", "ivan")
        [job] = await wait_jobs(c, "JobStatus == 2", 1)
        pool.kill("schedd", signal.SIGKILL)
        host = attr(job, "RemoteHost").split("@")[1]
        r = htcpool("drain", host, "--how", "quick", "--state-dir", str(pool.state_dir))
        assert r.returncode == 0, r.stderr
        async def gone():
            return "evicted (quick drain)" in log.read_text()
        await wait_for(gone, timeout_s=30, what="the eviction")
        evicted = await c.pool_now()

        async def past_a_claim_lease():            # 6 x ALIVE_INTERVAL 60, and more
            return await c.pool_now() > evicted + 600.0
        await wait_for(past_a_claim_lease, timeout_s=60, what="600 pool seconds")
        pool.restart("schedd")
        [back] = await wait_jobs(c, "JobStatus == 1 && LastVacateTime =!= undefined", 1, timeout_s=60)
        assert "quick drain" in attr(back, "VacateReason")
        assert attr(back, "LastVacateTime") <= evicted + 1
        assert attr(back, "RemoteWallClockTime") <= evicted + 1 - attr(job, "JobCurrentStartDate")


async def test_a_job_whose_lease_ran_out_while_its_schedd_was_down_is_idle_at_restart(make_pool):
    """HTCondor's schedd renews its running jobs' leases every alive interval
    (LastJobLeaseRenewal) and, at start-up, does not reconnect a job whose lease ran out
    since (jobLeaseIsValid): the job is idle again at once, its run counted until the lease
    lapsed. Before, the restarted schedd reconnected it, learned from the startd that the
    claim was gone, and counted the run until the restart."""
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + SHORT_LEASE)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=100000, n=1), "long.sub", "ivan")
        [job] = await wait_jobs(c, "JobStatus == 2", 1)
        started = attr(job, "JobCurrentStartDate")
        assert attr(job, "LastJobLeaseRenewal") >= started      # set when it started, renewed since

        async def renewed_since_start():   # keepalives every 20 s (a third of the 60 s lease)
            [j] = await c.jobs("true")
            return j if attr(j, "LastJobLeaseRenewal") > started else None
        running = await wait_for(renewed_since_start, timeout_s=30, what="a lease renewal after the start")
        pool.kill("schedd", signal.SIGKILL)
        killed = await c.pool_now()

        async def past_the_lease():
            return await c.pool_now() > killed + 300.0
        await wait_for(past_the_lease, timeout_s=30, what="300 pool seconds")
        pool.restart("schedd")
        [back] = await c.jobs("true")         # its first answer (it answers none before its queue is read)
        # Idle, or (on a loaded machine, where this answer can come after the next cycle)
        # already started again: not reconnected, which would have kept it at one start.
        assert attr(back, "JobStatus") == 1 or (attr(back, "JobStatus") == 2 and attr(back, "NumJobStarts") == 2), \
            "the restarted schedd took the job for running"
        assert "job lease (60 s) expired" in attr(back, "VacateReason")
        assert attr(back, "LastJobLeaseRenewal") >= attr(running, "LastJobLeaseRenewal")
        # Counted until the last renewal (after the start, before the kill) plus the lease.
        assert 60 < attr(back, "RemoteWallClockTime") <= killed + 60 - started + 1
        assert "returned to the queue: their job lease expired" in (pool.state_dir / "log" / "SchedLog").read_text()
        again = await wait_jobs(c, "JobStatus == 2 && NumJobStarts == 2", 1, timeout_s=60)
        # Renewed from its new start on (a keepalive round may have come since).
        assert attr(again[0], "LastJobLeaseRenewal") >= attr(again[0], "JobCurrentStartDate")


async def test_the_job_queue_log_is_compacted_while_the_schedd_runs(make_pool):
    """Found by fault injection: the job queue log was compacted only at start-up, so a
    schedd killed late in a long run replayed every change since (100,817 log entries for
    2,000 jobs: four wall seconds of start-up). QUEUE_CLEAN_INTERVAL now compacts it as
    HTCondor's schedd does, and a restart after a compaction restores the same queue."""
    from daemons.pb.htcpool import schedd_pb2
    pool = make_pool("NUM_CPUS = 1\nSTART = False\nQUEUE_CLEAN_INTERVAL = 60\n")
    log = pool.state_dir / "spool" / "job_queue.log"
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=10, n=5), "five.sub", "judy")
        for i in range(40):
            await c.act(schedd_pb2.EDIT, ["1.3"], edits={"Tries": str(i)})
        edited = len(log.read_text().splitlines())

        async def compacted():
            return "rewritten" in (pool.state_dir / "log" / "SchedLog").read_text() \
                and len(log.read_text().splitlines()) < edited
        await wait_for(compacted, timeout_s=30, what="the job queue log to be rewritten")
        pool.kill("schedd", signal.SIGKILL)
        pool.restart("schedd")
        jobs = await wait_jobs(c, "true", 5)
        assert sorted(_ids(jobs)) == ["1.0", "1.1", "1.2", "1.3", "1.4"]
        assert [attr(j, "Tries") for j in jobs if attr(j, "ProcId") == 3] == [39]


async def test_a_negotiate_stream_that_fails_before_it_starts_costs_only_its_session(make_pool):
    """Found by fault injection: when the negotiator's Negotiate call to a schedd failed
    before its first message (here a client fault; a connection refused does the same), the
    write raised InvalidStateError ("RPC already finished"), which aborted the whole
    negotiation cycle with a traceback, cycle after cycle, instead of failing that session."""
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    negotiator = pool.daemons["negotiator"]
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.set_faults(negotiator.address, [fault_to_pb(Fault("nostream", side="client", method="Negotiate",
                                                                  abort="UNAVAILABLE"))])
        await c.submit(SLEEP.format(seconds=10, n=2), "two.sub", "kim")
        log = pool.state_dir / "log" / "NegotiatorLog"

        async def failed_sessions():
            return log.read_text().count("Negotiation with kim@testhost") >= 2
        await wait_for(failed_sessions, timeout_s=30, what="two failed negotiation sessions")
        text = log.read_text()
        assert "Traceback" not in text and "Aborting negotiation cycle" not in text
        assert "failed: UNAVAILABLE" in text
        await c.clear_faults(negotiator.address)
        await _all_once(c, 2)


async def test_batched_claim_calls_that_fail_fail_only_their_claims_and_every_job_runs_once(make_pool):
    """The schedd claims and activates in batches (Startd.RequestClaims / ActivateClaims):
    a batch that is aborted fails each claim it carried, as single calls would have failed;
    those jobs are matched again, and each job completes once."""
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT, machines=2)
    startd = pool.daemons["startd1"]
    async with pool.client() as c:
        await wait_slots(c, 2)
        now = await c.pool_now()
        await c.set_faults(startd.address, [
            fault_to_pb(Fault("noclaims", method="RequestClaims", abort="UNAVAILABLE", percent=50.0,
                              stop=now + 300.0)),
            fault_to_pb(Fault("noactivations", method="Startd.ActivateClaims", abort="UNAVAILABLE", percent=50.0,
                              stop=now + 300.0))])
        await c.submit(SLEEP.format(seconds=50, n=12), "twelve.sub", "ivan")
        await _all_once(c, 12)
        fired = {s.fault.id: s.fired for s in (await c.list_faults(startd.address)).faults}
        assert fired["noclaims"] + fired["noactivations"] > 0, fired
        log = (pool.state_dir / "log" / "StartLog").read_text()
        assert "on call Startd.RequestClaims" in log or "on call Startd.ActivateClaims" in log
