"""Addressing gone wrong: a clear line naming the knob and the address, retries, no crash."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from daemons.core import ads

from .conftest import FAST, PoolSecrets, free_port, stop, wait_slots, wait_until
from .conftest import start_daemon as daemon


async def test_startd_waits_for_a_collector_that_is_not_there_yet(tmp_path):
    port = free_port()
    cfg = tmp_path / "pool.conf"
    # An update interval of 4 wall seconds: the first retries come from the backoff (1 s, 2 s),
    # then the backoff stops at the interval, so the late collector is found within seconds.
    cfg.write_text(FAST + "UPDATE_INTERVAL = 400\nNUM_CPUS = 2\n")
    # The pool's key exists before any daemon starts (the collector is not there to make it).
    secrets = PoolSecrets(tmp_path / "secrets")
    env = {"_CONDOR_COLLECTOR_HOST": f"127.0.0.1:{port}", "_CONDOR_POOL_EPOCH": repr(time.time()),
           "_CONDOR_LOCAL_DIR": str(tmp_path / "state"), **secrets.env}
    startd_out, collector_out = tmp_path / "startd.out", tmp_path / "collector.out"
    startd = daemon("startd", cfg, startd_out, env)
    collector = None
    try:
        where = f"the collector at 127.0.0.1:{port} (COLLECTOR_HOST)"
        wait_until(lambda: f"cannot advertise to {where}" in startd_out.read_text(), timeout_s=60,
                   what="the startd to say it cannot reach the collector")
        text = startd_out.read_text()
        assert f"ad(s) to {where} failed (UNAVAILABLE" in text and "retrying in" in text
        assert startd.poll() is None and "Traceback" not in text
        # The collector comes up late: the startd's next try gets through.
        collector = daemon("collector", cfg, collector_out, env)
        async with secrets.client(f"127.0.0.1:{port}") as c:
            await wait_slots(c, 1, timeout_s=60)
        assert f"advertised to {where} after" in startd_out.read_text()
        assert "Traceback" not in startd_out.read_text()
    finally:
        stop(startd, *([collector] if collector else []))


def test_a_daemon_without_collector_host_says_which_knob_and_exits_2(tmp_path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text(FAST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
    r = subprocess.run([sys.executable, "-m", "daemons.cli.main", "daemon", "startd", "--config", str(cfg)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "COLLECTOR_HOST is not set (nor CONDOR_HOST)" in lines[0]
    assert "_CONDOR_COLLECTOR_HOST=host:port" in lines[0]


async def test_without_pool_epoch_the_collector_sets_it_and_the_others_learn_it(tmp_path):
    """A compose pool started without POOL_EPOCH: the collector's own start is the epoch."""
    port = free_port()
    cfg = tmp_path / "pool.conf"
    cfg.write_text(FAST + f"COLLECTOR_HOST = 127.0.0.1:{port}\nNUM_CPUS = 1\n")
    secrets = PoolSecrets(tmp_path / "secrets")
    env = {"_CONDOR_LOCAL_DIR": str(tmp_path / "state"), **secrets.env}
    col_out, startd_out = tmp_path / "collector.out", tmp_path / "startd.out"
    collector = daemon("collector", cfg, col_out, env)
    startd = daemon("startd", cfg, startd_out, env)
    try:
        async with secrets.client(f"127.0.0.1:{port}") as c:
            await wait_slots(c, 1, timeout_s=60)
            epoch = {ads.get(a, "MyType"): ads.get(a, "PoolEpoch")
                     for t in ("Collector", "StartDaemon") for a in await c.ads(t)}
        assert epoch["Collector"] == epoch["StartDaemon"] and epoch["Collector"] > 0
        assert "pool epoch" in startd_out.read_text() and "learned from the collector" in startd_out.read_text()
        assert collector.poll() is None and "Traceback" not in col_out.read_text() + startd_out.read_text()
    finally:
        stop(startd, collector)
