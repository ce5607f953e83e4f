"""The defrag daemon on a real pool: it drains the best-ranked machine, skips those its
requirements exclude, cancels by DEFRAG_CANCEL_REQUIREMENTS, leaves other drains alone,
and refuses a bad configuration."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads
from daemons.core.rpc import Channels
from daemons.core.security.layer import TokenLayer
from daemons.defrag.drain_client import DrainClient
from tests.integration.conftest import PSLOT, htcpool

ROLES = ("collector", "negotiator", "schedd", "startd", "defrag")
# Jobs retire gracefully for as long as they like: a graceful drain lets them finish.
DRAIN = """\
MAXJOBRETIREMENTTIME = 100000
DEFRAG_INTERVAL = 60
DEFRAG_DRAINING_MACHINES_PER_HOUR = 60
"""
FILL = "universe = vanilla\nexecutable = /bin/sleep\narguments = 100000\nqueue {n}\n"


@pytest.fixture
def defrag_pool(make_pool):
    def make(config: str, machines: int = 3) -> LocalPool:
        return make_pool(PSLOT + DRAIN + config, machines=machines, roles=ROLES)
    return make


async def _busy_everywhere(c: PoolClient, machines: int) -> None:
    """Every machine runs at least one job, so none is whole (Cpus == TotalSlotCpus)."""
    await c.submit(FILL.format(n=machines * 8), "fill.sub", "u")

    async def busy():
        pslots = await c.ads("Machine", "PartitionableSlot && Cpus < TotalSlotCpus")
        return len(pslots) >= machines
    await wait_for(busy, timeout_s=60, what=f"jobs on all {machines} machines")


def _draining(slots) -> dict[str, str]:
    return {str(ads.get(s, "Machine")): str(ads.get(s, "DrainReason")) for s in slots
            if ads.get(s, "Draining") is True}


async def test_defrag_drains_the_best_ranked_machine_and_skips_excluded_ones(defrag_pool):
    pool = defrag_pool("""\
# testhost-003 ranks best but DEFRAG_REQUIREMENTS excludes it; testhost-002 ranks next.
DEFRAG_RANK = ifThenElse(Machine == "testhost-003", 100, ifThenElse(Machine == "testhost-002", 10, 0))
DEFRAG_REQUIREMENTS = Machine != "testhost-003"
""")
    async with pool.client() as c:
        await _busy_everywhere(c, 3)

        async def first_drain():
            d = _draining(await c.ads("Machine", "PartitionableSlot"))
            return d or None
        draining = await wait_for(first_drain, timeout_s=60, what="a drain by the defrag daemon")
        assert list(draining) == ["testhost-002"]
        assert draining["testhost-002"].startswith("Defrag ")

        async def two_drains():
            d = _draining(await c.ads("Machine", "PartitionableSlot"))
            return d if len(d) >= 2 else None
        draining = await wait_for(two_drains, timeout_s=60, what="a second drain")
        assert sorted(draining) == ["testhost-001", "testhost-002"]
        async def counted():
            (d,) = await c.ads("Defrag")
            return d if ads.get(d, "DrainSuccesses", 0) >= 2 else None
        ad = await wait_for(counted, timeout_s=30, what="the defrag ad to count two drains")
        assert ads.get(ad, "DrainSuccesses") == 2
        recent = [r.eval("who") for r in ad.eval("RecentDrainsList")]
        assert recent == ["slot1@testhost-001", "slot1@testhost-002"]   # newest first

        # once both are draining, 003 stays excluded poll after poll
        async def more_polls():
            (d,) = await c.ads("Defrag")
            return d if ads.get(d, "DefragPolls", 0) >= ads.get(ad, "DefragPolls", 0) + 2 else None
        await wait_for(more_polls, timeout_s=60, what="two more polls")
        assert "testhost-003" not in _draining(await c.ads("Machine", "PartitionableSlot"))
    log = (pool.state_dir / "log" / "DefragLog").read_text()
    assert "Initiating graceful draining of slot1@testhost-002." in log
    assert "testhost-003." not in log


async def test_defrag_cancels_by_its_cancel_requirements_and_leaves_other_drains_alone(defrag_pool):
    pool = defrag_pool("""\
DEFRAG_RANK = ifThenElse(Machine == "testhost-002", 10, 0)
DEFRAG_REQUIREMENTS = Machine == "testhost-002"
# cancel as soon as seen draining: each drain of 002 is cancelled at the next poll
DEFRAG_CANCEL_REQUIREMENTS = true
""", machines=2)
    async with pool.client() as c:
        await _busy_everywhere(c, 2)
        (slot,) = await c.ads("Machine", 'PartitionableSlot && Machine == "testhost-001"')
        address = str(ads.get(slot, "StartdIpAddr")).strip("<>")
        # A drain by hand, by the pool's administrator (the user who started it).
        channels = Channels(extra_layers=[TokenLayer([pool.user_token()])])
        try:
            by_hand = await DrainClient(channels).drain(address, "testhost-001", "graceful", reason="by hand")
        finally:
            await channels.close()
        assert by_hand.ok, by_hand.reason

        async def cancelled():
            (d,) = await c.ads("Defrag")
            return d if ads.get(d, "CancelledDrains", 0) >= 1 else None
        ad = await wait_for(cancelled, timeout_s=60, what="the defrag daemon to cancel a drain")
        assert [r.eval("who") for r in ad.eval("RecentCancelsList")] == ["testhost-002"] * len(
            ad.eval("RecentCancelsList"))
        assert _draining(await c.ads("Machine", 'PartitionableSlot && Machine == "testhost-001"')) == {
            "testhost-001": "by hand"}
    log = (pool.state_dir / "log" / "DefragLog").read_text()
    assert re.search(r"Cancel draining of slot1@testhost-002\.", log)


def test_defrag_refuses_a_bad_rank(tmp_path: Path):
    cfg = tmp_path / "bad.conf"
    cfg.write_text("COLLECTOR_HOST = 127.0.0.1:1\nDEFRAG_RANK = Cpus +\n")
    r = htcpool("daemon", "defrag", "--config", str(cfg), timeout=60)
    assert r.returncode == 2
    assert "DEFRAG_RANK = 'Cpus +' is not a valid ClassAd expression" in r.stderr
    assert f"config file {cfg.resolve()}, line 2" in r.stderr
