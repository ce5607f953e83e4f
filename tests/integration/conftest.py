"""Pools of real daemon processes for integration tests.

Each test gets its own pool (port 0 everywhere, state in tmp_path) on a fast clock:
TIME_SCALE 100 makes a 20 s negotiation interval 0.2 s of wall time. Tests wait on
conditions with deadlines (`wait_for`), never on fixed sleeps.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads

FAST = """\
NETWORK_HOSTNAME = testhost
TIME_SCALE = 100
NEGOTIATOR_INTERVAL = 20
NEGOTIATOR_CYCLE_DELAY = 5
NEGOTIATOR_MIN_INTERVAL = 1
UPDATE_INTERVAL = 60
SCHEDD_INTERVAL = 60
ALIVE_INTERVAL = 60
HTCPOOL_MIN_TIME_SCALE = 25
"""
# HTCPOOL_MIN_TIME_SCALE: the whole suite on two cores can load the machine enough that the
# lag policy (`slow`, the default) lowers TIME_SCALE 10x at a time; without a floor a job of
# 800 pool seconds, or a 60 s claim lease, could outlast a test's wait (two CI runs failed
# that way). The floor keeps the policy acting, at most 4x slower.

PSLOT = """\
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1
"""

# HTCondor's default slot layout since HTCondor 23 is one partitionable slot with the whole
# machine; tests that want one static slot per cpu say so.
STATIC = "SLOT_TYPE_0_PARTITIONABLE = False\n"

SLEEP = "universe = vanilla\nexecutable = /bin/sleep\narguments = {seconds}\nqueue {n}\n"


def attr(ad, name):
    """An attribute's value, or None."""
    return ads.get(ad, name)


LOG_TAIL_LINES = 40


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test's report ends with the last lines of each of its pools' daemon logs: a
    test that timed out in CI says what its daemons were doing, not only what it waited for."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for pool in getattr(item, "htcpool_pools", ()):
        log_dir = pool.state_dir / "log"
        for f in sorted(log_dir.glob("*")) if log_dir.is_dir() else ():
            try:
                lines = f.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
            except OSError:
                continue
            if lines:
                report.sections.append((f"{pool.state_dir.name}/log/{f.name} (last {len(lines)} lines)",
                                        "\n".join(lines)))


@pytest.fixture
def make_pool(tmp_path: Path, request) -> Callable[..., LocalPool]:
    pools: list[LocalPool] = []
    request.node.htcpool_pools = pools

    def make(config: str = "", *, machines: int = 1, startds: int = 1, start: bool = True,
             roles: tuple[str, ...] = ("collector", "negotiator", "schedd", "startd")) -> LocalPool:
        n = len(pools)
        cfg = tmp_path / f"pool{n}.conf"
        cfg.write_text(FAST + config)
        pool = LocalPool(tmp_path / f"pool{n}", cfg, machines=machines, startds=startds, roles=roles)
        pools.append(pool)
        return pool.start() if start else pool

    yield make
    for p in pools:
        p.stop()


async def wait_slots(client: PoolClient, n: int, constraint: str = "", timeout_s: float = 30.0) -> list:
    async def check():
        found = await client.ads("Machine", constraint)
        return found if len(found) >= n else None
    return await wait_for(check, timeout_s=timeout_s, what=f"{n} slot ad(s) {constraint}".strip())


async def wait_jobs(client: PoolClient, constraint: str, n: int, *, history: bool = False,
                    timeout_s: float = 60.0) -> list:
    async def check():
        found = await client.jobs(constraint, history=history)
        return found if len(found) >= n else None
    where = "history" if history else "queue"
    return await wait_for(check, timeout_s=timeout_s, what=f"{n} job(s) with {constraint} in the {where}")


class PoolSecrets:
    """A pool's signing key made before any daemon starts, as an administrator (or a compose
    pool's `secrets` service) makes it, for tests that start daemons by hand: `env` points a
    daemon at it, `token(user)` mints a user's token, `client(address)` acts as a user."""

    def __init__(self, directory: Path, trust_domain: str = "testpool") -> None:
        from daemons.core.security.keys import POOL_KEY_ID, KeyRing, create_key_file
        self.directory = directory
        self.trust_domain = trust_domain
        self.key_file = directory / "passwords.d" / POOL_KEY_ID
        create_key_file(self.key_file)
        self.keys = KeyRing(self.key_file, self.key_file.parent)
        self.env = {"_CONDOR_SEC_PASSWORD_DIRECTORY": str(self.key_file.parent),
                    "_CONDOR_TRUST_DOMAIN": trust_domain}

    def token(self, user: str = "alice") -> str:
        from daemons.core.security.keys import POOL_KEY_ID
        from daemons.core.security.tokens import mint
        return mint(self.keys.jwt_key(POOL_KEY_ID), identity=f"{user}@{self.trust_domain}",
                    issuer=self.trust_domain)

    def client(self, address: str, user: str = "alice") -> PoolClient:
        return PoolClient(address, tokens=[self.token(user)])


def free_port() -> int:
    """A port free now, for a daemon that must have a known one (a COLLECTOR_HOST)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(role: str, cfg: Path, out: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    """One daemon started by hand, as an administrator starts it on a host (output in `out`)."""
    full = dict(os.environ, HTCPOOL_PARENT_PID=str(os.getpid()), HTCPOOL_LOG_STDERR="1", **env)
    with open(out, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "daemons.cli.main", "daemon", role, "--config", str(cfg),
                                 *args], env=full, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(cfg.parent))


def stop(*procs: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL whatever has not exited 20 s later."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


def htcpool(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter, as a user would."""
    return subprocess.run([sys.executable, "-m", "daemons.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def wait_until(check: Callable[[], object], *, timeout_s: float, what: str, interval_s: float = 0.1):
    """The synchronous twin of wait_for, for tests that drive the CLI."""
    import time
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)
