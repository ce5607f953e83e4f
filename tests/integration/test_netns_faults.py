"""Network faults on a pool across network namespaces: partitions, resets, loss and
bandwidth made with iptables and tc inside a daemon's namespace, through the CLI."""
from __future__ import annotations

import json

import pytest

from daemons.cli.pool import LocalPool
from daemons.harness import netns

from .conftest import FAST, PSLOT, SLEEP, attr, htcpool, wait_jobs, wait_slots

WHY = netns.faults_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"namespace harness: {WHY}")

HOSTS = ("collector", "negotiator", "schedd", "startd1", "startd2")
POOL = FAST + PSLOT + """\
NETWORK_INTERFACE = *
BIND_ALL_INTERFACES = True
COLLECTOR_HOST = collector:9618
NUM_CPUS = 1
ALIVE_INTERVAL = 20
MAX_CLAIM_ALIVES_MISSED = 3
JOB_DEFAULT_LEASE_DURATION = 60
"""
CONNECT = ("import socket,sys\n"
           "try:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close(); print('open')\n"
           "except ConnectionRefusedError: print('refused')\n"
           "except OSError: print('timeout')\n")


@pytest.fixture
def net():
    with netns.Network(HOSTS) as n:
        yield n


@pytest.fixture
def ns_pool(net, tmp_path):
    cfg = tmp_path / "pool.conf"
    cfg.write_text(POOL)
    env = {h: {"_CONDOR_COLLECTOR_HOST": "collector:9618"} for h in HOSTS}
    pool = LocalPool(tmp_path / "pool", cfg, startds=2, launch_prefix=lambda key: net[key].argv([]),
                     daemon_env=env)
    pool.start()
    yield pool
    pool.stop()


def _connect(net, source: str, target: str, port: int) -> str:
    return net[source].run(["python3", "-c", CONNECT, net[target].ip, str(port)]).stdout.strip()


async def test_a_network_partition_cuts_a_startd_off_and_nothing_is_lost(net, ns_pool):
    state = ["--state-dir", str(ns_pool.state_dir)]
    startd1_port = int(ns_pool.daemons["startd1"].address.rpartition(":")[2])
    async with ns_pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=150, n=4), "four.sub", "alice")
        await wait_jobs(c, "JobStatus == 2", 2)
        assert _connect(net, "schedd", "startd1", startd1_port) == "open"

        r = htcpool("fault", "partition", "startd1", "--from", "schedd", "--for", "300", "--id", "cut", *state)
        assert r.returncode == 0, r.stderr
        assert f"network cut: drop from {net['schedd'].ip}/32, until " in r.stdout
        # Real packets are dropped between those two hosts only.
        assert _connect(net, "schedd", "startd1", startd1_port) == "timeout"
        assert _connect(net, "negotiator", "startd1", startd1_port) == "open"
        listed = json.loads(htcpool("fault", "list", "startd1", "--json", *state).stdout)
        assert [x["network_faults"] for x in listed] == [[f"cut: drop from {net['schedd'].ip}/32, until "
                                                          + r.stdout.split("until ", 1)[1].split("\n")[0]]]

        # The schedd gives up the claims it cannot keep alive; the jobs run again, once.
        history = await wait_jobs(c, "true", 4, history=True, timeout_s=180)
        assert sorted(f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}" for j in history) == \
            ["1.0", "1.1", "1.2", "1.3"]
        assert {attr(j, "JobStatus") for j in history} == {4}
        assert max(attr(j, "NumJobStarts") for j in history) >= 2

        r = htcpool("fault", "clear", "startd1", *state)
        assert r.returncode == 0, r.stderr
        assert _connect(net, "schedd", "startd1", startd1_port) == "open"
        assert "network" not in htcpool("fault", "list", "startd1", *state).stdout


async def test_resets_loss_and_bandwidth_in_a_namespace(net, ns_pool):
    state = ["--state-dir", str(ns_pool.state_dir)]
    port = int(ns_pool.daemons["startd1"].address.rpartition(":")[2])
    async with ns_pool.client() as c:
        await wait_slots(c, 2)
    r = htcpool("fault", "partition", "startd1", "--reset", "--id", "rst", *state)
    assert r.returncode == 0, r.stderr
    # Refused at once, from every peer; the operator's own address (the bridge) is spared.
    assert _connect(net, "schedd", "startd1", port) == "refused"
    assert _connect(net, "collector", "startd1", port) == "refused"
    r = htcpool("fault", "partition", "startd2", "--loss", "30", "--from", "schedd", "--id", "lossy", *state)
    assert r.returncode == 0, r.stderr
    assert f"network lossy: loss from {net['schedd'].ip}/32" in r.stdout
    rules = net["startd2"].run(["iptables", "-w", "-S"]).stdout
    assert "--probability 0.29999" in rules and "htcpool-fault:lossy" in rules
    r = htcpool("fault", "bandwidth", "startd2", "--rate", "1mbit", *state)
    assert r.returncode == 0, r.stderr
    assert "network bandwidth: 1Mbit on eth0" in r.stdout
    assert "rate 1Mbit" in net["startd2"].run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    # Bad input: one line, exit 2, nothing changed.
    for bad, says in ((("fault", "bandwidth", "startd2", "--rate", "fast"), "rate 'fast' is not a tc rate"),
                      (("fault", "partition", "startd2", "--loss", "0"), "--loss 0 must be a percentage"),
                      (("fault", "partition", "startd2", "--loss", "5", "--reset"), "give one")):
        r = htcpool(*bad, *state)
        assert r.returncode in (1, 2) and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
            (bad, r.returncode, r.stderr)
    r = htcpool("fault", "clear", *state)
    assert r.returncode == 0, r.stderr
    assert _connect(net, "schedd", "startd1", port) == "open"
    assert "htcpool-fault" not in net["startd2"].run(["iptables", "-w", "-S"]).stdout
    assert "tbf" not in net["startd2"].run(["tc", "qdisc", "show", "dev", "eth0"]).stdout


def _pool_json(state) -> dict:
    return json.loads((state / "pool.json").read_text())


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


async def test_process_faults_on_a_namespaced_pool(net, ns_pool):
    """kill/pause/resume/restart through pool.json on a pool whose daemons each live in a
    namespace: a restarted daemon comes back in its own host, and nothing is lost."""
    state = ["--state-dir", str(ns_pool.state_dir)]
    async with ns_pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=150, n=4), "four.sub", "alice")
        await wait_jobs(c, "JobStatus == 2", 2)

        r = htcpool("pause", "startd2", *state)
        assert r.returncode == 0, r.stderr
        paused = _pool_json(ns_pool.state_dir)["daemons"]["startd2"]
        assert paused["state"] == "paused" and _proc_state(paused["pid"]) == "T"
        assert htcpool("resume", "startd2", *state).returncode == 0
        assert _proc_state(paused["pid"]) != "T"

        old = _pool_json(ns_pool.state_dir)["daemons"]["startd1"]["pid"]
        r = htcpool("kill", "startd1", "--restart", *state)
        assert r.returncode == 0, r.stderr
        now = _pool_json(ns_pool.state_dir)["daemons"]["startd1"]
        assert now["pid"] != old and now["pid"] in net["startd1"].pids()
        r = htcpool("restart", "schedd", *state)
        assert r.returncode == 0, r.stderr
        assert _pool_json(ns_pool.state_dir)["daemons"]["schedd"]["pid"] in net["schedd"].pids()

        history = await wait_jobs(c, "true", 4, history=True, timeout_s=180)
        assert sorted(f"{attr(j, 'ClusterId')}.{attr(j, 'ProcId')}" for j in history) == \
            ["1.0", "1.1", "1.2", "1.3"]
        assert {attr(j, "JobStatus") for j in history} == {4}
        assert await c.jobs("true") == []


def test_a_campaign_with_real_network_faults(tmp_path):
    """`experiment faults --netns`: partitions, resets, loss and bandwidth limits cut real
    interfaces between namespaces while jobs run; nothing is lost."""
    out = tmp_path / "faults"
    kinds = "partition,reset,loss,bandwidth"
    r = htcpool("experiment", "faults", "--netns", "--jobs", "120", "--faults", "4", "--kinds", kinds, "--seed", "5",
                "--startds", "2", "--machines", "3", "--cpus", "4", "--mean-duration", "100", "--min-fault", "40",
                "--max-fault", "150", "--usage-tolerance", "0.6", "--out", str(out), "--json", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["kinds"] == {k: 1 for k in kinds.split(",")} and result["errors"] == []
    assert (result["lost"], result["duplicated"], result["unfinished"], result["view_mismatches"]) == (0, 0, 0, 0)
    faults = {row.split(",")[1]: row for row in (out / "faults.csv").read_text().splitlines()[1:]}
    assert set(faults) == set(kinds.split(","))
