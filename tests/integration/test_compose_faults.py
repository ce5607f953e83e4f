"""Process and network faults on a compose pool, through the CLI's --compose.

Needs a Docker engine and the htcpool image (./scripts/build-image); skipped otherwise,
with the reason. CI prepares Docker after the test suite, so there it runs by hand:
`./scripts/docker-engine start; eval "$(./scripts/docker-engine env)";
.venv/bin/python -m pytest -m slow tests/integration/test_compose_faults.py`.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from .conftest import htcpool


def _why_not() -> str | None:
    try:
        if subprocess.run(["docker", "version"], capture_output=True, timeout=20).returncode != 0:
            return "no Docker engine answers"
        if not subprocess.run(["docker", "images", "-q", "htcpool"], capture_output=True, text=True,
                              timeout=20).stdout.strip():
            return "no htcpool image (./scripts/build-image)"
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return "docker is not installed"
    if os.geteuid() != 0:
        return "network faults in a container's namespace need root (nsenter)"
    return None


WHY = _why_not()
# A few minutes of containers: not in the default run (-m slow runs it).
pytestmark = [pytest.mark.skipif(WHY is not None, reason=f"compose pool: {WHY}"), pytest.mark.slow]


@pytest.fixture
def compose_pool():
    from daemons.harness import compose_check as cc
    subnet = cc.free_subnet()
    project = f"htcpfaults{os.getpid()}"
    env = dict(os.environ, POOL_EPOCH=f"{time.time():.3f}", TIME_SCALE=str(cc.TIME_SCALE),
               STARTD_MACHINES="2", COLLECTOR_PORT=str(cc.free_port()), STATUS_PORT_COLLECTOR=str(cc.free_port()),
               STATUS_PORT_NEGOTIATOR=str(cc.free_port()), STATUS_PORT_SCHEDD=str(cc.free_port()),
               POOL_SUBNET=str(subnet), POOL_INTERFACE=str(subnet.network_address).rsplit(".", 1)[0] + ".*")
    # Security on, as the compose file sets it up (its secrets service); the faults act
    # through Docker and the containers' namespaces, the commands in the schedd container
    # carry its token.
    pool = cc.Pool(project, False, env, compose=cc.compose_command())
    try:
        pool.up()
        cc.wait("the pool's slots", lambda: len(cc.rows(pool.schedd(
            "status", "--constraint", "PartitionableSlot", "-af", "Name", check=False))) >= 2 * cc.STARTDS, 240)
        yield pool
    finally:
        pool.down()


def _state(container: str) -> str:
    return subprocess.run(["docker", "inspect", "-f", "{{.State.Status}}", container], capture_output=True,
                          text=True).stdout.strip()


def _connects(pool, source: str, target_ip: str, port: int) -> str:
    """Connect from inside `source`'s container network (the host's python, nsenter'd)."""
    from daemons.harness.compose_faults import ContainerNamespace
    code = ("import socket,sys\n"
            "try:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close(); print('open')\n"
            "except ConnectionRefusedError: print('refused')\n"
            "except OSError: print('timeout')\n")
    ns = ContainerNamespace.of(pool.containers(source)[0])
    return ns.run(["python3", "-c", code, target_ip, str(port)]).strip()


def test_process_and_network_faults_on_containers(compose_pool):
    from daemons.harness import compose_check as cc
    from daemons.harness.compose_faults import addresses, containers
    p = ["--compose", compose_pool.project]
    sub = "universe = vanilla\nexecutable = /bin/sleep\narguments = 600\nrequest_cpus = 1\nqueue 24\n"
    compose_pool.schedd("submit", "-", input=sub)
    found = {c.key: c for c in containers(compose_pool.project)}
    assert {"collector", "negotiator", "schedd", "startd1", "startd2", "startd3"} <= set(found)

    r = htcpool("pause", "startd1", *p)
    assert r.returncode == 0 and "paused" in r.stdout, r.stderr
    assert _state(found["startd1"].id) == "paused"
    assert htcpool("resume", "startd1", *p).returncode == 0
    assert _state(found["startd1"].id) == "running"

    # A startd's status page listens on a fixed port (compose/pool.conf): real packets.
    target = addresses(found["startd2"].id)[0]
    status_port = 9622
    assert _connects(compose_pool, "schedd", target, status_port) == "open"
    r = htcpool("fault", "partition", "startd2", "--from", "schedd", "--id", "cut", *p)
    assert r.returncode == 0, r.stderr
    schedd_ip = addresses(found["schedd"].id)[0]
    assert f"network cut: drop from {schedd_ip}/32" in r.stdout
    assert _connects(compose_pool, "schedd", target, status_port) == "timeout"
    assert _connects(compose_pool, "negotiator", target, status_port) == "open"
    r = htcpool("fault", "partition", "startd1", "--reset", "--id", "rst", *p)
    assert r.returncode == 0 and "network rst: reset" in r.stdout, r.stdout + r.stderr
    assert _connects(compose_pool, "schedd", addresses(found["startd1"].id)[0], status_port) == "refused"
    r = htcpool("fault", "bandwidth", "startd3", "--rate", "1mbit", *p)
    assert r.returncode == 0 and "bandwidth: 1Mbit" in r.stdout, r.stdout + r.stderr
    listed = htcpool("fault", "list", *p).stdout
    assert "network cut" in listed and "network rst" in listed and "network bandwidth" in listed
    bad = htcpool("fault", "bandwidth", "startd3", "--rate", "fast", *p)
    assert bad.returncode == 2 and "rate 'fast' is not a tc rate" in bad.stderr, bad.stderr
    r = htcpool("fault", "clear", *p)
    assert r.returncode == 0, r.stderr
    listed = htcpool("fault", "list", *p).stdout.splitlines()
    assert len(listed) == 6 and all(line.endswith(": no network faults") for line in listed), listed
    assert _connects(compose_pool, "schedd", target, status_port) == "open"

    started = subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", found["startd3"].id],
                             capture_output=True, text=True).stdout
    r = htcpool("kill", "startd3", "--restart", *p)
    assert r.returncode == 0 and "started again" in r.stdout, r.stderr
    assert subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", found["startd3"].id],
                          capture_output=True, text=True).stdout != started
    # A graceful restart of the schedd (docker restart: SIGTERM, then start): its queue is
    # in a volume and its jobs carry on.
    r = htcpool("restart", "schedd", *p)
    assert r.returncode == 0 and "restarted" in r.stdout, r.stderr
    assert _state(found["schedd"].id) == "running"
    bad = htcpool("kill", "startd", *p)
    assert bad.returncode == 2 and "name one of startd1, startd2, startd3" in bad.stderr
    bad = htcpool("pause", "startd1", "nosuchd", *p)
    assert bad.returncode == 2 and "no 'nosuchd' container" in bad.stderr
    assert _state(found["startd1"].id) == "running"      # nothing was done

    # Every job completes, once.
    def done():
        hist = cc.rows(compose_pool.schedd("q", "--history", "-af", "ClusterId", "ProcId", "JobStatus", check=False))
        return len(hist) >= 24 and hist
    hist = cc.wait("24 jobs in the history", done, 600, interval_s=2.0)
    ids = [" ".join(h.split()[:2]) for h in hist]
    assert len(ids) == len(set(ids)) == 24 and {h.split()[2] for h in hist} == {"4"}
    assert cc.rows(compose_pool.schedd("q", "-af", "ClusterId", check=False)) == []
