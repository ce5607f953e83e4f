"""Jobs the schedd starts without the negotiator (a p-slot's leftovers, a reused claim) respect
what the negotiator enforces, on real pools."""
from __future__ import annotations

from .conftest import PSLOT, attr, wait_jobs, wait_slots


async def test_claim_recycling_considers_concurrency_limits(make_pool):
    """qmgmt.cpp FindRunnableJob with CLAIM_RECYCLING_CONSIDER_LIMITS (default true): a
    claim is reused only for a job whose ConcurrencyLimits are the ones the negotiator
    counted it against (MatchedConcurrencyLimits), and schedd.cpp drops those from a
    partitionable slot's leftovers, which therefore go only to jobs without limits. With
    SW_LICENSE_LIMIT = 1, four licensed jobs on a four-cpu slot run one at a time (the
    leftovers used to run the other three at once, past the limit), while jobs without
    limits take the leftovers.

    Only the submits' reschedules start cycles (NEGOTIATOR_INTERVAL is long): a cycle that
    ran while a reused claim's next job was being activated would see the slot Claimed
    and Idle, its license not in use, and hand it out again, the race HTCondor's own tests
    note (the negotiator only knows the tokens the collector shows); on a loaded machine
    that window is several pool seconds wide at TIME_SCALE 100. The schedd's side is what
    this test is about."""
    pool = make_pool("NUM_CPUS = 4\n" + PSLOT + "SW_LICENSE_LIMIT = 1\nNEGOTIATOR_INTERVAL = 100000\n")
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit("executable = /bin/sleep\narguments = 200\nconcurrency_limits = sw_license\nqueue 4\n",
                       "licensed.sub", "lia")
        await c.submit("executable = /bin/sleep\narguments = 50\nqueue 2\n", "free.sub", "lia")
        done = await wait_jobs(c, "true", 6, history=True, timeout_s=90)
        licensed = sorted((attr(j, "JobCurrentStartDate"), attr(j, "CompletionDate")) for j in done
                          if attr(j, "ConcurrencyLimits") == "sw_license")
        assert len(licensed) == 4
        for (_, end), (start, _) in zip(licensed, licensed[1:]):
            assert start >= end, licensed   # never two licensed jobs at once
        free = [(attr(j, "JobCurrentStartDate"), attr(j, "CompletionDate")) for j in done
                if attr(j, "ConcurrencyLimits") is None]
        # The unlimited jobs ran beside the first licensed job, on the p-slot's leftovers.
        assert all(s < licensed[0][1] for s, _ in free), (free, licensed)
    log = (pool.state_dir / "log" / "SchedLog").read_text()
    assert "Reusing claim" in log
