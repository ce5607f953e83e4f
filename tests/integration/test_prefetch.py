"""NEGOTIATOR_PREFETCH_REQUESTS: every submitter's first resource requests fetched before the
cycle's sessions give the same requests, and the same later batches, as sessions without it."""
from __future__ import annotations

import grpc

from daemons.cli.client import wait_for
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc

from .conftest import SLEEP, STATIC, attr, wait_jobs, wait_slots

USERS = ("ann", "bob", "cid")
# Three autoclusters per user (different RequestMemory), so a batch of two leaves a second batch.
JOBS = "".join(f"executable = /bin/sleep\narguments = 100000\nrequest_memory = {m}\nqueue {n}\n"
               for m, n in ((64, 2), (96, 1), (128, 3)))


def _start(user: str, **kw) -> schedd_pb2.NegotiatorMessage:
    return schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(
        submitter=f"{user}@testhost", cycle=7, significant_attrs=["RequestMemory"], **kw))


ASK = schedd_pb2.NegotiatorMessage(send_requests=schedd_pb2.SendRequests(max_requests=2))


def _batch(reply) -> tuple:
    assert reply is not grpc.aio.EOF and reply.WhichOneof("msg") == "requests"
    r = reply.requests
    return tuple((q.request_id, q.count, q.ad.text) for q in r.requests), r.no_more


async def _end(call) -> None:
    await call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
    await call.done_writing()
    while await call.read() is not grpc.aio.EOF:
        pass


async def test_prefetched_requests_and_resumed_sessions_equal_plain_sessions(make_pool):
    """Against a real schedd, as the negotiator: plain sessions (start, then one batch at a
    time) against a prefetch (every start and send-requests written before any answer is
    read), resumed later on the same stream, and resumed on a new stream that never saw
    the prefetch (the schedd then leaves out the requests the negotiator holds)."""
    pool = make_pool("NUM_CPUS = 1\nSTART = False\n", roles=("collector", "schedd"))
    async with pool.client("condor") as c:
        for u in USERS:
            await c.submit(JOBS, f"{u}.sub", u)
        await wait_jobs(c, "JobStatus == 1", 6 * len(USERS))
        stub = schedd_pb2_grpc.ScheddStub(c.channels.get(pool.daemons["schedd"].address))

        plain: dict[str, list[tuple]] = {}
        call = stub.Negotiate(timeout=30)
        for u in USERS:
            await call.write(_start(u))
            plain[u] = []
            while True:
                await call.write(ASK)
                batch = _batch(await call.read())
                plain[u].append(batch)
                if batch[1]:
                    break
        await _end(call)
        assert all(len(b) == 2 and len(b[0][0]) == 2 and not b[0][1] and len(b[1][0]) == 1 for b in plain.values())
        assert [q[1] for q in plain["ann"][0][0] + plain["ann"][1][0]] == [2, 1, 3]

        # The prefetch: everything written first, the answers read after.
        call = stub.Negotiate(timeout=30)
        for u in USERS:
            await call.write(_start(u, prefetch=True))
            await call.write(ASK)
        first = {u: _batch(await call.read()) for u in USERS}
        assert first == {u: plain[u][0] for u in USERS}
        # Resumed (in another order than prefetched): the next batch is the plain session's.
        for u in reversed(USERS[1:]):
            await call.write(_start(u, prefetched=2))
            await call.write(ASK)
            assert _batch(await call.read()) == plain[u][1]
        await _end(call)

        # A new stream never saw ann's prefetch: her session leaves out the two she holds.
        call = stub.Negotiate(timeout=30)
        await call.write(_start("ann", prefetched=2))
        await call.write(ASK)
        assert _batch(await call.read()) == plain["ann"][1]
        await _end(call)


async def test_a_pool_with_and_without_prefetch_runs_every_job_once(make_pool):
    """End to end: each cycle that matches says how many submitters were prefetched (none with
    the knob off), and every job of every submitter runs on its own slot either way."""
    for prefetch in (True, False):
        pool = make_pool(STATIC + f"NUM_CPUS = 9\nNEGOTIATOR_PREFETCH_REQUESTS = {prefetch}\n")
        async with pool.client() as c:
            await wait_slots(c, 9)
            for u in USERS:
                await c.submit(SLEEP.format(seconds=100000, n=3), f"{u}.sub", u)
            running = await wait_jobs(c, "JobStatus == 2", 9)
            assert len({str(attr(j, "RemoteHost")) for j in running}) == 9

            # The records of the cycles that matched the nine: at least nine matches. A job can
            # run before the record of the cycle that matched it is written (the schedd claims
            # its matches while the cycle runs), so the records are waited for too. More than
            # nine: a cycle that runs before a matched slot's claim reaches the collector may
            # match its stale Unclaimed ad again (the startd then refuses the spent claim id;
            # the 9 jobs above still run on 9 slots). So may HTCondor's with
            # NEGOTIATOR_INFORM_STARTD false, its default: no startd goes to Matched.
            async def matching():
                found = [r for r in await c.cycles() if r.matches]
                return found if sum(r.matches for r in found) >= 9 else None
            cycles = await wait_for(matching, timeout_s=30, what="the records of cycles that matched 9 jobs")
            assert not any(r.failed for r in cycles)
            # Submitted one after the other, the users can meet different cycles.
            assert all((r.prefetched >= 1) if prefetch else (r.prefetched == 0) for r in cycles)
        pool.stop()
    log = (pool.state_dir.parent / "pool0" / "log" / "NegotiatorLog").read_text()
    assert "Starting prefetch round" in log


async def test_a_resumed_submitter_finds_its_next_requests_asked_for(make_pool):
    """Pie spins: ann wants 1 of 9 slots, bob and cid 6 each. In the first spin bob and cid stop
    at their limit of 3; with the prefetch on, their next requests are asked for behind their
    outcomes, and their second-spin sessions begin with them. Either way the same jobs run,
    each on its own slot."""
    shares = {}
    for prefetch in (True, False):
        pool = make_pool(STATIC + f"NUM_CPUS = 9\nNEGOTIATOR_PREFETCH_REQUESTS = {prefetch}\n"
                         "NEGOTIATOR_INTERVAL = 100000\n")
        async with pool.client() as c:
            await wait_slots(c, 9)
            since = await c.pool_now()
            # Held, then released together, so that one cycle sees every user's demand.
            for u, n in (("ann", 1), ("bob", 6), ("cid", 6)):
                await c.submit(f"executable = /bin/sleep\narguments = 100000\nhold = true\nqueue {n}\n",
                               f"{u}.sub", u)
            await c.act(schedd_pb2.RELEASE, constraint="true")

            async def matched():
                return next((r for r in await c.cycles() if r.start >= since and r.matches), None)
            cycle = await wait_for(matched, timeout_s=30, what="a cycle with matches")
            assert cycle.matches == 9 and not cycle.failed
            assert (cycle.prefetched_resumed >= 1) if prefetch else (cycle.prefetched_resumed == 0)
            running = await wait_jobs(c, "JobStatus == 2", 9)
            assert len({str(attr(j, "RemoteHost")) for j in running}) == 9
            owners = [str(attr(j, "Owner")) for j in running]
            shares[prefetch] = sorted((u, owners.count(u)) for u in set(owners))
        pool.stop()
    assert shares[True] == shares[False] and dict(shares[True])["ann"] == 1
