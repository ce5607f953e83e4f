"""MAX_PENDING_STARTD_CONTACTS: the schedd claims its matches a few at a time, and all of them."""
from __future__ import annotations

from daemons.cli.benchkit import status_page

from .conftest import STATIC, PSLOT, SLEEP, attr, wait_jobs, wait_slots


async def test_one_startd_contact_at_a_time_still_runs_every_match(make_pool):
    # Static slots and a partitionable slot's leftovers both go through the limit.
    pool = make_pool(STATIC + "NUM_CPUS = 4\nMAX_PENDING_STARTD_CONTACTS = 1\n", machines=3)
    async with pool.client() as c:
        await wait_slots(c, 12)
        await c.submit(SLEEP.format(seconds=400, n=10), "ten.sub", "alice")
        running = await wait_jobs(c, "JobStatus == 2", 10)
        assert len({attr(j, "RemoteHost") for j in running}) == 10
        contacts = status_page(pool.daemons["schedd"].info["status_url"])["startd_contacts"]
        assert contacts["most_pending"] == 1 and contacts["pending"] == 0, contacts
    pslots = make_pool("NUM_CPUS = 4\nMAX_PENDING_STARTD_CONTACTS = 1\n" + PSLOT)
    async with pslots.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=400, n=4), "four.sub", "bob")
        running = await wait_jobs(c, "JobStatus == 2", 4)
        assert sorted(attr(j, "RemoteHost") for j in running) == [f"slot1_{i}@testhost" for i in range(1, 5)]
