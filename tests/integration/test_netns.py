"""A pool across hosts: every daemon in its own network namespace, on one bridge.

The daemons bind all interfaces (BIND_ALL_INTERFACES) and advertise their host's
routable address (NETWORK_INTERFACE = *), find the collector by host name
(COLLECTOR_HOST = collector:9618, resolved through the namespace's /etc/hosts), and
talk over real veth interfaces. Security is on, as everywhere: every daemon shares the
pool's key and TRUST_DOMAIN (LocalPool's state directory, reached from every namespace),
and each client carries a token. The CLI runs in the root namespace, as on another
host, and reaches the pool by --pool IP:PORT with a token.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from daemons.cli.client import strip_addr, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads
from daemons.harness import netns

from .conftest import FAST, PSLOT, SLEEP, PoolSecrets, htcpool, wait_jobs, wait_slots, wait_until

WHY = netns.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"namespace harness: {WHY}")

HOSTS = ("collector", "negotiator", "schedd", "startd1", "startd2")

POOL = FAST + PSLOT + """\
NETWORK_INTERFACE = *
BIND_ALL_INTERFACES = True
COLLECTOR_HOST = collector:9618
NUM_CPUS = 4
"""


@pytest.fixture
def net():
    with netns.Network(HOSTS) as n:
        yield n


@pytest.fixture
def ns_pool(net, tmp_path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text(POOL)
    # Every daemon finds the collector by name, as on real hosts (LocalPool would
    # otherwise hand it the collector's address).
    env = {h: {"_CONDOR_COLLECTOR_HOST": "collector:9618"} for h in HOSTS}
    pool = LocalPool(tmp_path / "pool", cfg, machines=2, startds=2,
                     launch_prefix=lambda key: net[key].argv([]), daemon_env=env)
    pool.start()
    yield pool
    pool.stop()


async def test_pool_in_five_namespaces_runs_100_jobs(net, ns_pool, tmp_path):
    collector = f"{net['collector'].ip}:9618"
    assert ns_pool.collector_address == collector
    async with ns_pool.client() as c:
        slots = await wait_slots(c, 4)   # 2 startds x 2 machines, one p-slot each
        assert {strip_addr(str(ads.get(s, "MyAddress"))).rpartition(":")[0] for s in slots} == {
            net["startd1"].ip, net["startd2"].ip}
        await c.submit(SLEEP.format(seconds=30, n=100), "sleep.sub", "alice")
        # Claim ids carry the startd's advertised address too (sinful string first).
        claimed = await wait_slots(c, 1, "PublicClaimId =!= undefined")
        for ad in claimed:
            own = strip_addr(str(ads.get(ad, "MyAddress"))).rpartition(":")[0]
            assert own in (net["startd1"].ip, net["startd2"].ip)
            assert str(ads.get(ad, "PublicClaimId")).startswith(f"<{own}:")
        done = await wait_jobs(c, "JobStatus == 4", 100, history=True, timeout_s=240)
        assert len(done) == 100
        assert await c.jobs() == []
        # Each job ran on a startd at its own namespace's address.
        hosts = {strip_addr(str(ads.get(j, "StartdIpAddr"))).rpartition(":")[0] for j in done}
        assert hosts <= {net["startd1"].ip, net["startd2"].ip} and hosts


async def test_daemons_bound_to_all_interfaces_advertise_reachable_addresses(net, ns_pool):
    async with ns_pool.client() as c:
        await wait_slots(c, 4)
        daemons = {}
        for my_type in ("Collector", "Negotiator", "Scheduler", "StartDaemon"):
            for ad in await c.ads(my_type):
                daemons[f"{my_type}/{ads.get(ad, 'Name')}"] = ad
        assert len(daemons) == 5, sorted(daemons)
        expected = {"Collector": "collector", "Negotiator": "negotiator", "Scheduler": "schedd"}
        for key, ad in daemons.items():
            my_type = key.split("/")[0]
            host, port = strip_addr(str(ads.get(ad, "MyAddress"))).rsplit(":", 1)
            # Never the bound 0.0.0.0 nor loopback: the host's own address on the bridge.
            if my_type in expected:
                assert host == net[expected[my_type]].ip, key
            else:
                assert host in (net["startd1"].ip, net["startd2"].ip), key
            # Reachable from another host (the root namespace here): Admin.Ping answers
            # with the same daemon, and the status page URL carries the same address.
            reply = await c.ping(f"{host}:{port}")
            assert reply.ready
            url = str(ads.get(ad, "HtcpoolStatusUrl"))
            assert url.startswith(f"http://{host}:")
            with urllib.request.urlopen(url + "/status", timeout=10) as r:
                assert json.load(r)["address"] == f"{host}:{port}"
        # Bound to all interfaces: the daemon also answers on its host's loopback,
        # which only a process inside that namespace can reach.
        col_port = 9618
        probe = ("import socket,sys; s=socket.create_connection(('127.0.0.1', %d), 5); s.close()" % col_port)
        net["collector"].run(["python3", "-c", probe])
        # ...and not on the root namespace's loopback: the ports really are per host.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", col_port), 1).close()


def test_cli_from_the_root_namespace_reaches_the_pool_by_ip(net, ns_pool, tmp_path):
    pool = f"{net['collector'].ip}:9618"
    sub = tmp_path / "one.sub"
    sub.write_text(SLEEP.format(seconds=600, n=3))
    # A token comes with --pool in one of two ways: the state directory of the pool
    # (its tokens go only to the collector it records)...
    state = ["--pool", pool, "--state-dir", str(ns_pool.state_dir)]
    r = htcpool("submit", str(sub), *state)
    assert r.returncode == 0, r.stderr
    r = htcpool("status", "--json", *state)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert {row["Machine"] for row in rows} == {"exec1-001", "exec1-002", "exec2-001", "exec2-002"}
    # ...or HTCondor's token directory, as on a host that has only the pool's address.
    tokens = {"_CONDOR_SEC_TOKEN_DIRECTORY": str(ns_pool.tokens_dir)}
    r = htcpool("q", "-af", "ProcId", "Owner", "--pool", pool, env=tokens)   # the schedd, at its own host's address
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"{p} {ns_pool.user}" for p in range(3)]
    # Without a token the pool refuses, from this host as from any other.
    (tmp_path / "none").mkdir()
    r = htcpool("status", "--pool", pool, env={"_CONDOR_SEC_TOKEN_DIRECTORY": str(tmp_path / "none")})
    assert r.returncode == 2 and "AUTHENTICATE:1003" in r.stderr


async def test_unreachable_advertised_addresses_are_named_by_both_ends(tmp_path):
    """A startd that advertises loopback, and one whose TCP_FORWARDING_HOST leads nowhere:
    each still runs, and the collector (and the loopback one itself) says what is wrong."""
    with netns.Network(["collector", "loop", "nat"]) as n:
        nowhere = str(list(n.subnet.hosts())[200])     # on the bridge's subnet, but no host has it
        cfg = tmp_path / "pool.conf"
        cfg.write_text(FAST + "COLLECTOR_HOST = collector:9618\nBIND_ALL_INTERFACES = True\n")
        secrets = PoolSecrets(tmp_path / "secrets")    # every host's daemon shares the key and trust domain
        base = dict(os.environ, HTCPOOL_PARENT_PID=str(os.getpid()), HTCPOOL_LOG_STDERR="1",
                    _CONDOR_POOL_EPOCH=repr(time.time()), _CONDOR_LOCAL_DIR=str(tmp_path / "state"), **secrets.env)
        outs = {}
        for host, extra in (("collector", {"_CONDOR_NETWORK_INTERFACE": "*"}),
                            ("loop", {"_CONDOR_NETWORK_INTERFACE": "127.0.0.1",
                                      "_CONDOR_BIND_ALL_INTERFACES": "False"}),
                            ("nat", {"_CONDOR_NETWORK_INTERFACE": "*", "_CONDOR_TCP_FORWARDING_HOST": nowhere})):
            role = "collector" if host == "collector" else "startd"
            outs[host] = tmp_path / f"{host}.out"
            with open(outs[host], "wb") as f:
                n[host].popen([sys.executable, "-m", "daemons.cli.main", "daemon", role, "--config", str(cfg),
                               "--name", host], env=dict(base, **extra), stdout=f, stderr=subprocess.STDOUT,
                              cwd=str(tmp_path))
        async with secrets.client(f"{n['collector'].ip}:9618") as c:
            # Both are in the pool... (by their daemon ads: both emulate a machine named
            # testhost, whose one partitionable slot, HTCondor's default layout, has one name)
            async def both_startds():
                found = await c.ads("StartDaemon")
                return found if len(found) >= 2 else None
            await wait_for(both_startds, timeout_s=60, what="both startds' ads")
        col = lambda: outs["collector"].read_text()   # noqa: E731
        # ...but nobody can call them, and the collector says so, naming the knobs.
        wait_until(lambda: f"127.0.0.1 is a loopback address and the update came from {n['loop'].ip}" in col(),
                   timeout_s=30, what="the collector's warning about the loopback startd")
        # No host answers for `nowhere`: the connection times out or the host is unreachable.
        wait_until(lambda: re.search(rf'StartDaemon "nat" advertises MyAddress <{re.escape(nowhere)}:\d+>, but '
                                     r"(a connection to it timed out|the collector cannot connect to it)", col()),
                   timeout_s=30, what="the collector's warning about the NATed startd")
        assert col().count("no peer will reach it; check NETWORK_INTERFACE, BIND_ALL_INTERFACES or "
                           "TCP_FORWARDING_HOST on that host") == 2   # once per address, however many updates
        loop = outs["loop"].read_text()
        assert ("advertising the loopback address 127.0.0.1:" in loop
                and "but the collector at collector:9618 (COLLECTOR_HOST) is on another host" in loop)
        assert "Traceback" not in col() + loop + outs["nat"].read_text()
