"""Crashes and lost peers: the pool recovers without losing committed work."""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import grpc
import pytest

from daemons.cli.client import wait_for
from daemons.cli.pool import PoolError
from daemons.core.security.keys import create_key_file
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc

from .conftest import STATIC, SLEEP, attr, FAST, PSLOT, wait_jobs, wait_slots



async def test_schedd_kill9_mid_run_keeps_the_queue_and_reconnects(make_pool):
    # The running jobs' claims outlive the restart on their JobLeaseDuration (2400 pool s by
    # default: 24 s of wall time at TIME_SCALE 100), as HTCondor's do. On the keepalive lease
    # alone (6 x 60 s, 3.6 s of wall time) a restart slowed by a loaded machine (4.3 s from
    # the kill to the new schedd's first line, in a failing run of the whole suite) let the
    # startd end both claims.
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=800, n=3), "three.sub", "alice")
        running = await wait_jobs(c, "JobStatus == 2", 2)
        before = {f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}": attr(j, "RemoteHost") for j in running}

        pool.kill("schedd", signal.SIGKILL)
        pool.restart("schedd")

        # Every committed job is back, the running ones still running on the same slots.
        jobs = await wait_jobs(c, "true", 3)
        assert sorted(attr(j, "ProcId") for j in jobs) == [0, 1, 2]
        now_running = {f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}": attr(j, "RemoteHost")
                       for j in jobs if attr(j, "JobStatus") == 2}
        assert now_running == before
        # The startd reports the running jobs' exits to the new schedd; the rest run after
        # (three 800 pool s jobs in two rounds: over a minute of wall time if the lag policy
        # slows the pool to its floor of 25 on a loaded machine).
        done = await wait_jobs(c, "true", 3, history=True, timeout_s=240)
        assert sorted(attr(j, "ProcId") for j in done) == [0, 1, 2]
        assert {attr(j, "JobStatus") for j in done} == {4}
        assert all(attr(j, "NumJobStarts") == 1 for j in done)


async def test_a_restarting_schedd_answers_nothing_until_its_queue_is_restored(make_pool):
    """Found in CI: a restarted schedd served its old port before it had read its job queue
    (while it learned the pool's clock from the collector), and a startd's news of a job's
    exit that arrived then was dropped against the empty queue, so the job ran forever. A
    paused collector holds the restart in that window for a wall second; every answer the
    schedd gives must come from the restored queue."""
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=5, n=3), "three.sub", "alice")
        await wait_jobs(c, "true", 3)
        address = pool.daemons["schedd"].address
        pool.kill("schedd", signal.SIGKILL)
        pool.pause("collector")
        restart = asyncio.create_task(asyncio.to_thread(pool.restart, "schedd"))
        try:
            async def answer() -> list[int] | None:
                stub = schedd_pb2_grpc.ScheddStub(c.channels.get(address))
                n = 0
                try:
                    async for chunk in stub.Query(schedd_pb2.QueryJobsRequest(constraint="true"), timeout=5.0):
                        n += len(chunk.ads)
                except grpc.aio.AioRpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    await c.channels.drop(address)   # try a new connection next time
                    return None
                return [n]
            first = await wait_for(answer, timeout_s=30, what="the restarted schedd to answer")
            assert first == [3], f"the restarted schedd answered with {first[0]} job(s) before its queue was read"
        finally:
            pool.resume("collector")
            await restart


@pytest.mark.parametrize("damage, said", [
    (b"103 0.0 NextClusterNum 12abc\n", "line {n}: 0.0 NextClusterNum = '12abc' is not an integer"),
    (b"103 1.0 JobStatus \xff\xfe\n", "not UTF-8 text"),
    (b"hello\n", "line {n}: not a log entry: 'hello'"),
])
async def test_a_damaged_job_queue_log_stops_the_schedd_with_one_line_and_is_kept(make_pool, damage, said):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=5, n=2), "two.sub", "alice")
        await wait_jobs(c, "true", 2)
    pool.kill("schedd", signal.SIGKILL)
    log = pool.state_dir / "spool" / "job_queue.log"
    n = len(log.read_bytes().splitlines()) + 1
    damaged = log.read_bytes() + damage
    log.write_bytes(damaged)
    with pytest.raises(PoolError) as e:
        pool.restart("schedd")
    out = (pool.state_dir / "log" / "schedd.out").read_text(errors="replace")
    assert f"htcpool daemon schedd: cannot start: {log}" in out and said.format(n=n) in out, out
    assert "Traceback" not in out and pool.daemons["schedd"].proc.returncode == 2
    assert log.read_bytes() == damaged          # nothing rewritten, nothing lost


async def test_submit_is_durable_across_kill9(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 1\nSTART = False\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        cluster, n = await c.submit(SLEEP.format(seconds=10, n=25), "many.sub", "bob")
        # The reply came after fsync: a crash right now loses nothing.
        pool.kill("schedd", signal.SIGKILL)
        pool.restart("schedd")
        jobs = await wait_jobs(c, f"ClusterId == {cluster}", n)
        assert sorted(attr(j, "ProcId") for j in jobs) == list(range(25))
        assert {attr(j, "JobStatus") for j in jobs} == {1}
        cluster2, _ = await c.submit(SLEEP.format(seconds=10, n=1), "one.sub", "bob")
        assert cluster2 == cluster + 1


async def test_collector_expires_ads_of_a_dead_startd(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT + "CLASSAD_LIFETIME = 60\nUPDATE_INTERVAL = 30\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        # A live startd keeps its ads fresh past several lifetimes...
        await wait_for(lambda: c.pool_now(), timeout_s=5, what="pool time")
        start = await c.pool_now()

        async def three_lifetimes_passed():
            return await c.pool_now() > start + 180
        await wait_for(three_lifetimes_passed, timeout_s=30, what="180 pool seconds")
        assert len(await c.ads("Machine")) == 1
        # ...a dead one (no withdrawal after kill -9) loses them once the lifetime passes.
        pool.kill("startd1", signal.SIGKILL)
        assert len(await c.ads("Machine")) == 1

        async def gone():
            return not await c.ads("Machine") and not await c.ads("StartDaemon")
        await wait_for(gone, timeout_s=30, what="the dead startd's ads to expire")


async def test_dead_startd_returns_its_jobs_to_idle(make_pool):
    pool = make_pool("NUM_CPUS = 1\n" + PSLOT + "ALIVE_INTERVAL = 20\nMAX_CLAIM_ALIVES_MISSED = 3\n"
                     "JOB_DEFAULT_LEASE_DURATION = 60\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=100000, n=1), "long.sub", "carol")
        await wait_jobs(c, "JobStatus == 2", 1)
        pool.kill("startd1", signal.SIGKILL)
        # After the running job's lease (60 s) without keepalives the schedd gives the job back.
        jobs = await wait_jobs(c, "JobStatus == 1 && LastRemoteHost =!= undefined", 1, timeout_s=60)
        assert "unreachable" in attr(jobs[0], "VacateReason")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_daemon_waits_for_an_unreachable_collector_and_says_so(make_pool, tmp_path):
    port = _free_port()
    # A daemon started on its own needs the pool's signing key from the start (a real
    # pool copies it to every host; here the collector later finds it in place).
    key = tmp_path / "passwords.d" / "POOL"
    create_key_file(key)
    cfg = tmp_path / "late.conf"
    cfg.write_text(FAST + f"COLLECTOR_HOST = 127.0.0.1:{port}\nNUM_CPUS = 1\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {key}\n")
    out = tmp_path / "startd.out"
    env_cmd = [sys.executable, "-m", "daemons.cli.main", "daemon", "startd", "--config", str(cfg)]
    env = dict(os.environ, _CONDOR_LOCAL_DIR=str(tmp_path / "startd"), _CONDOR_POOL_EPOCH="0",
               HTCPOOL_PARENT_PID=str(os.getpid()))
    with open(out, "w") as f:
        startd = subprocess.Popen(env_cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        async def says_retrying():
            text = out.read_text()
            return "retrying in" in text and f"127.0.0.1:{port}" in text
        await wait_for(says_retrying, timeout_s=30, what="the startd to report that it retries")
        assert startd.poll() is None

        # The collector arrives on the configured port; the startd's ads follow.
        pool = make_pool(f"COLLECTOR_HOST = 127.0.0.1:{port}\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {key}\n", start=False)
        pool.roles = ("collector",)
        pool.epoch = 0.0
        pool.start()
        assert pool.collector_address == f"127.0.0.1:{port}"
        async with pool.client() as c:
            await wait_slots(c, 1, timeout_s=60)
    finally:
        startd.terminate()
        startd.wait(timeout=30)
