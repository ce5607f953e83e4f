"""Draining only helps if the negotiator then prefers multicore work (seed 003: "no
matter how much we drain, if the system prefers singlecore over multicore, the
multicore will not get scheduled"). The two routes the seed used, each with a
controller on a real pool, while single-core jobs wait:
- GROUP_SORT_EXPR: DrainBoss drains, and the seed's expression negotiates the
  multicore group first, so the drained machine goes to the multicore job;
- the priority factor: the defrag daemon drains, and the multicore submitter's factor
  decides who gets the drained machine (with HTCondor's default factor, fair share
  gives it to the single-core submitter, whose priority is better).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.experiments.multicore import GROUP_SORT_EXPR
from daemons.cli.pool import LocalPool
from daemons.core import ads
from tests.integration.conftest import FAST, PSLOT

# Jobs retire gracefully for as long as they like: a graceful drain lets them finish.
COMMON = FAST + PSLOT + "MAXJOBRETIREMENTTIME = 100000\n"
GROUPS = f"""\
GROUP_NAMES = group_mcore, group_score
GROUP_QUOTA_DYNAMIC_group_mcore = 0.5
GROUP_QUOTA_DYNAMIC_group_score = 0.5
GROUP_ACCEPT_SURPLUS = True
GROUP_SORT_EXPR = {GROUP_SORT_EXPR}
"""
JOBS = "universe = vanilla\nexecutable = /bin/sleep\narguments = {seconds}\nrequest_cpus = {cpus}\n{extra}queue {n}\n"


@pytest.fixture
def pool_with(tmp_path: Path):
    pools: list[LocalPool] = []

    def make(role: str, config: str, machines: int = 2) -> LocalPool:
        cfg = tmp_path / f"pool{len(pools)}.conf"
        cfg.write_text(COMMON + config)
        pool = LocalPool(tmp_path / f"pool{len(pools)}", cfg, machines=machines,
                         roles=("collector", "negotiator", "schedd", "startd", role))
        pools.append(pool)
        return pool.start()

    yield make
    for p in pools:
        p.stop()


def _group(kind: str, grouped: bool) -> str:
    if not grouped:
        return ""
    return f"accounting_group = group_{'mcore' if kind == 'mc' else 'score'}\naccounting_group_user = {kind}\n"


async def _fill_then_queue(c: PoolClient, machines: int, grouped: bool) -> None:
    """Every core busy with single-core jobs that end soon (cluster 1); behind them
    single-core jobs that never end (cluster 2), and one 8-core job (cluster 3)."""
    await c.submit(JOBS.format(seconds=600, cpus=1, n=8 * machines, extra=_group("sc", grouped)), "fill.sub", "sc")

    async def full():
        return len(await c.ads("Machine", "PartitionableSlot && Cpus == 0")) >= machines
    await wait_for(full, timeout_s=60, what="every core busy")
    await c.submit(JOBS.format(seconds=100000, cpus=1, n=8 * machines + 4, extra=_group("sc", grouped)),
                   "more.sub", "sc")
    await c.submit(JOBS.format(seconds=100000, cpus=8, n=1, extra=_group("mc", grouped)), "mc.sub", "mc")


def _host(ad) -> str:
    return str(ads.get(ad, "Name") or ads.get(ad, "RemoteHost")).split("@")[-1]


async def _first_use_of(c: PoolClient, host_of_drain) -> tuple[str, str, list]:
    """Wait until the first drained machine runs new work, as the startds see it (the
    schedd marks a job Running just before activating it, and a claim that the drain
    ended refuses the activation): (its name, "mc", [slot]) if the 8-core job runs (on
    any machine), (its name, "sc", slots) if never-ending single-core jobs run there."""
    async def outcome():
        host = await host_of_drain()
        if host is None:
            return None
        busy = await c.ads("Machine", "DynamicSlot && JobId =!= undefined", ["Name", "JobId"])
        mc = [s for s in busy if str(ads.get(s, "JobId")).startswith("3.")]
        sc = [s for s in busy if str(ads.get(s, "JobId")).startswith("2.") and _host(s) == host]
        if mc:
            return host, "mc", mc
        if sc:
            return host, "sc", sc
        return None
    return await wait_for(outcome, timeout_s=180, what="a drained machine to run new work")


async def test_drainboss_with_group_sort_expr_gives_the_drained_machine_to_the_multicore_job(pool_with):
    pool = pool_with("drainboss", GROUPS + """\
DRAINBOSS_INTERVAL = 60
DRAINBOSS_OPTIONS = --setpoint 1 --propband 1 --maxtodrain 1 --keepgoing
""")
    async with pool.client() as c:
        await _fill_then_queue(c, 2, grouped=True)

        def drained() -> list[str]:
            # Every machine drained so far: with --keepgoing a later run drains another while
            # the first one's jobs still retire, and either may free up first.
            log = (pool.state_dir / "log" / "DrainBossLog").read_text()
            return [line.split("drained 1 [", 1)[1].split("]", 1)[0] for line in log.splitlines()
                    if "drained 1 [" in line]

        async def first_drained() -> str | None:
            return next(iter(drained()), None)
        host, who, jobs = await _first_use_of(c, first_drained)
        assert who == "mc", f"single-core jobs took {host}, which DrainBoss drained for the multicore job"
        idle_sc = await c.jobs("JobStatus == 1 && ClusterId == 2")
        assert idle_sc, "single-core jobs were waiting all along"
        # The multicore job runs on a machine DrainBoss drained, and no waiting single-core
        # job ever started there.
        assert _host(jobs[0]) in drained()
        busy = await c.ads("Machine", f'DynamicSlot && Machine == "{_host(jobs[0])}"', ["JobId"])
        assert [ads.get(s, "JobId") for s in busy] == ["3.0"]


@pytest.mark.parametrize("mc_factor, winner", [(None, "sc"), (10.0, "mc")])
async def test_defrag_and_the_priority_factor_decide_who_gets_the_drained_machine(pool_with, mc_factor, winner):
    pool = pool_with("defrag", """\
DEFRAG_INTERVAL = 60
DEFRAG_DRAINING_MACHINES_PER_HOUR = 60
DEFRAG_MAX_CONCURRENT_DRAINING = 1
DEFRAG_WHOLE_MACHINE_EXPR = Cpus >= 8
# Only a full machine is drained: a poll during the fill (on a loaded machine the fill can
# outlast a poll) would otherwise drain a half-filled one and the fill would never finish.
DEFRAG_REQUIREMENTS = Cpus == 0
""")
    async with pool.client() as c:
        # The multicore submitter's recent use of the pool (8 cores a job) has made its
        # real priority worse than the single-core one's: fair share alone puts it last.
        await c.set_userprio("mc@testhost", priority=5.0)
        if mc_factor is not None:
            await c.set_userprio("mc@testhost", factor=mc_factor)   # condor_userprio -setfactor
        await _fill_then_queue(c, 2, grouped=False)

        drained: list[str] = []

        async def first_drained() -> str | None:
            # Seen while it drains (a drain takes the fill jobs' 600 s); remembered after.
            if not drained:
                slots = await c.ads("Machine", 'PartitionableSlot && Draining && regexp("^Defrag ", DrainReason)',
                                    ["Machine"])
                drained.extend(sorted(str(ads.get(s, "Machine")) for s in slots)[:1])
            return drained[0] if drained else None
        host, who, jobs = await _first_use_of(c, first_drained)
        assert who == winner, (host, who)
        if winner == "mc":
            assert _host(jobs[0]) == host
            assert await c.jobs("JobStatus == 1 && ClusterId == 2"), "single-core jobs were waiting all along"
        else:
            busy = await c.ads("Machine", "DynamicSlot && JobId =!= undefined", ["JobId"])
            assert "3.0" not in [ads.get(s, "JobId") for s in busy]
