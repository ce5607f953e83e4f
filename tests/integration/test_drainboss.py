"""DrainBoss on a real pool: --test changes nothing; it drains for queued multicore work
and puts a node back in use once it has a wide slot; it resumes its integral after a
restart; out-of-range options stop it before it does anything."""
from __future__ import annotations

from pathlib import Path

import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads
from tests.integration.conftest import PSLOT, htcpool

ROLES = ("collector", "negotiator", "schedd", "startd", "drainboss")
BOSS = """\
MAXJOBRETIREMENTTIME = 100000
DRAINBOSS_INTERVAL = 60
"""
JOBS = "universe = vanilla\nexecutable = /bin/sleep\narguments = {seconds}\nrequest_cpus = {cpus}\nqueue {n}\n"


@pytest.fixture
def boss_pool(make_pool):
    def make(config: str, machines: int = 2) -> LocalPool:
        return make_pool(PSLOT + BOSS + config, machines=machines, roles=ROLES)
    return make


async def _boss_ad(c: PoolClient, what: str, check, timeout_s: float = 60):
    async def probe():
        found = await c.ads("DrainBoss")
        return found[0] if found and check(found[0]) else None
    return await wait_for(probe, timeout_s=timeout_s, what=what)


async def _fill(c: PoolClient, machines: int, seconds: int) -> None:
    """Single-core jobs on every core, then multicore jobs that cannot start."""
    await c.submit(JOBS.format(seconds=seconds, cpus=1, n=8 * machines), "sc.sub", "sc")

    async def full():
        return len(await c.ads("Machine", "PartitionableSlot && Cpus == 0")) >= machines
    await wait_for(full, timeout_s=60, what="every core busy")
    await c.submit(JOBS.format(seconds=600, cpus=8, n=2), "mc.sub", "mc")


async def test_test_mode_logs_decisions_and_changes_nothing(boss_pool):
    pool = boss_pool("""\
DRAINBOSS_OPTIONS = --setpoint 4 --propband 2 --maxtodrain 2 --test
""")
    async with pool.client() as c:
        await _fill(c, 2, seconds=100000)
        ad = await _boss_ad(c, "a run that would drain", lambda a: ads.get(a, "QueuedMulticore") == 2
                            and ads.get(a, "ControllerOutput", 0) >= 2)
        assert (ads.get(ad, "TestMode"), ads.get(ad, "LastAction"), ads.get(ad, "DrainsStarted")) == (
            True, "start", 0)
        assert [s for s in await c.ads("Machine") if ads.get(s, "Draining") is True] == []
    log = (pool.state_dir / "log" / "DrainBossLog").read_text()
    assert "TEST: would drain 2 [" in log
    assert "queued mc 2 sc 0" in log
    assert not (pool.state_dir / "spool" / "drainboss_state.json").exists()   # not even its own state


async def test_drains_for_multicore_work_then_puts_the_node_back_in_use(boss_pool):
    pool = boss_pool("""\
# one node to drain per run while one multicore job is missing
DRAINBOSS_OPTIONS = --setpoint 1 --propband 1 --maxtodrain 1 --node-choice fewest
""")
    async with pool.client() as c:
        await _fill(c, 2, seconds=300)
        ad = await _boss_ad(c, "a drain", lambda a: ads.get(a, "DrainsStarted", 0) >= 1)
        assert ads.get(ad, "DrainFailures") == 0
        ad = await _boss_ad(c, "a drain put back in use", lambda a: ads.get(a, "DrainsCancelled", 0) >= 1,
                            timeout_s=120)

        async def multicore_running():
            return await c.jobs("RequestCpus == 8 && JobStatus == 2")
        await wait_for(multicore_running, timeout_s=120, what="a multicore job running")
    log = (pool.state_dir / "log" / "DrainBossLog").read_text()
    assert "cancelled the drain of testhost-" in log and "has a slot of 8 or more cpus" in log


async def test_restart_resumes_the_controller_history(boss_pool):
    pool = boss_pool("DRAINBOSS_SETPOINT = 3\n")
    async with pool.client() as c:
        ad = await _boss_ad(c, "three runs", lambda a: ads.get(a, "ControllerSamples", 0) >= 3)
        before = ads.get(ad, "ControllerSamples")
        pool.kill("drainboss")
        pool.restart("drainboss")
        ad = await _boss_ad(c, "a run after the restart",
                            lambda a: ads.get(a, "DrainBossRuns", 0) >= 1 and ads.get(a, "DaemonStartTime", 0)
                            > ads.get(ad, "DaemonStartTime", 0) and ads.get(a, "ControllerSamples", 0) > 0)
        assert ads.get(ad, "ControllerSamples") >= before + 1
        # an integral of error 3 over more than one run period: more than a fresh start's
        assert ads.get(ad, "IntegralTerm") > 9 * 3 * 60 / 10000 / 200
    log = (pool.state_dir / "log" / "DrainBossLog").read_text()
    assert "resumed" in log and "controller sample(s) from" in log


@pytest.mark.parametrize("setting, message", [
    ("DRAINBOSS_SETPOINT = -5", "DRAINBOSS_SETPOINT: --setpoint -5: must be 0 or more"),
    ("DRAINBOSS_RESET = 0", "DRAINBOSS_RESET: --reset 0: must be more than 0 seconds"),
    ("DRAINBOSS_OPTIONS = -s 250 -r 0", "--reset 0: must be more than 0 seconds"),
    ("DRAINBOSS_NODE_CHOICE = smallest", "is not one of random, largest, fewest"),
])
def test_out_of_range_settings_stop_the_daemon_before_it_starts(tmp_path: Path, setting, message):
    cfg = tmp_path / "bad.conf"
    cfg.write_text(f"COLLECTOR_HOST = 127.0.0.1:1\n{setting}\n")
    r = htcpool("daemon", "drainboss", "--config", str(cfg), timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "line 2" in r.stderr


def test_out_of_range_options_on_the_command_line_stop_the_daemon(tmp_path: Path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text("COLLECTOR_HOST = 127.0.0.1:1\n")
    for options, message in ((["--setpoint", "-5"], "--setpoint -5: must be 0 or more"),
                             (["--reset", "0"], "--reset 0: must be more than 0 seconds"),
                             (["--maxtodrain", "-1"], "--maxtodrain -1: must be 0 or more nodes"),
                             (["--sepoint", "5"], "unrecognized arguments: --sepoint 5")):
        r = htcpool("daemon", "drainboss", "--config", str(cfg), "--", *options, timeout=60)
        assert r.returncode == 2, (options, r.stderr)
        assert message in r.stderr, (options, r.stderr)
