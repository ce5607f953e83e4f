"""Security across real processes: keys, tokens through the command, owners, TLS, NEVER."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from pathlib import Path

import aiohttp
import grpc
import pytest

from daemons.cli.client import PoolClient, wait_for
from daemons.core import ads
from daemons.core.security.keys import create_key_file
from daemons.core.security.tls import channel_credentials
from daemons.pb.htcpool import schedd_pb2

from .conftest import FAST, PSLOT, SLEEP, free_port, htcpool, start_daemon, stop, wait_jobs, wait_slots, wait_until


def _daemon(role: str, cfg, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daemons.cli.main", "daemon", role, "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))


def test_a_daemon_refuses_to_start_with_an_unsafe_or_missing_key(tmp_path):
    key = tmp_path / "passwords.d" / "POOL"
    create_key_file(key)
    os.chmod(key, 0o644)
    cfg = tmp_path / "c.conf"
    cfg.write_text(FAST + f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {key}\nCOLLECTOR_HOST = 127.0.0.1:1\n")
    env = {"_CONDOR_LOCAL_DIR": str(tmp_path / "state"), "HTCPOOL_LOG_STDERR": "0"}
    r = _daemon("collector", cfg, env)
    assert r.returncode == 2
    assert f"signing key file {key}: must not be readable or writable by group or others (mode 0644; chmod 600" \
        in r.stderr and "Traceback" not in r.stderr
    cfg.write_text(FAST + f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {tmp_path / 'nope' / 'POOL'}\n"
                          "COLLECTOR_HOST = 127.0.0.1:1\n")
    r = _daemon("schedd", cfg, env)
    assert r.returncode == 2 and "no such file" in r.stderr and "every daemon needs the pool's signing key" in r.stderr
    # A collector that cannot make the missing key (a read-only secrets volume; here a
    # file where its directory should be) says so in one line too.
    (tmp_path / "afile").write_text("")
    cfg.write_text(FAST + f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {tmp_path / 'afile' / 'POOL'}\n"
                          "COLLECTOR_HOST = 127.0.0.1:1\n")
    r = _daemon("collector", cfg, env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"signing key file {tmp_path / 'afile' / 'POOL'}: no such file, and the collector cannot create it" \
        in r.stderr


def test_token_init_makes_the_secrets_a_pool_of_separate_daemons_shares(tmp_path):
    """What a compose pool's `secrets` service does (or an administrator, for hosts that
    share a copied directory): the key and a user's token, once; daemons started by hand
    with only that directory and TRUST_DOMAIN serve, and the command finds the token in
    SEC_TOKEN_SYSTEM_DIRECTORY and acts as its user."""
    secrets, home = tmp_path / "secrets", tmp_path / "home"
    key, token = secrets / "passwords.d" / "POOL", secrets / "tokens.d" / "alice"
    init = ("token", "init", "--dir", str(secrets), "--trust-domain", "cpool", "--identity", "alice")
    r = htcpool(*init, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert f"created the pool signing key {key}" in r.stdout and "wrote the token for alice@cpool" in r.stdout
    assert [os.stat(p).st_mode & 0o777 for p in (key, key.parent, token, token.parent)] == [0o600, 0o700] * 2
    made = (key.read_bytes(), token.read_text())
    r = htcpool(*init, env={"HOME": str(home)})       # again (every `up`): nothing changes
    assert r.returncode == 0 and "kept the pool signing key" in r.stdout and "kept the token" in r.stdout
    assert (key.read_bytes(), token.read_text()) == made
    # Bad input: one line, exit 2, nothing made.
    r = htcpool("token", "init", "--dir", str(tmp_path / "other"), env={"HOME": str(home), "_CONDOR_TRUST_DOMAIN": ""})
    assert r.returncode == 2 and "no trust domain" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "other").exists()
    (tmp_path / "afile").write_text("")
    r = htcpool("token", "init", "--dir", str(tmp_path / "afile"), "--trust-domain", "cpool", env={"HOME": str(home)})
    assert r.returncode == 2 and str(tmp_path / "afile") in r.stderr and "Traceback" not in r.stderr

    port = free_port()
    cfg = tmp_path / "pool.conf"
    cfg.write_text(FAST + f"COLLECTOR_HOST = 127.0.0.1:{port}\n")
    env = {"_CONDOR_SEC_PASSWORD_DIRECTORY": str(key.parent), "_CONDOR_TRUST_DOMAIN": "cpool",
           "_CONDOR_LOCAL_DIR": str(tmp_path / "state")}
    procs = [start_daemon(role, cfg, tmp_path / f"{role}.out", env) for role in ("collector", "schedd")]
    cli = {"HOME": str(home), "_CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY": str(token.parent)}
    pool = ("--pool", f"127.0.0.1:{port}")
    try:
        wait_until(lambda: htcpool("ping", *pool, env=cli).returncode == 0, timeout_s=60, what="the collector")
        wait_until(lambda: htcpool("status", "--schedd", "-af", "Name", *pool, env=cli).stdout.strip(),
                   timeout_s=60, what="the schedd's ad, read with alice's token")
        sub = tmp_path / "two.sub"
        sub.write_text(SLEEP.format(seconds=60, n=2))
        r = htcpool("submit", str(sub), *pool, env=cli)
        assert r.returncode == 0, r.stderr
        r = htcpool("q", "-af", "Owner", *pool, env=cli)
        assert (r.returncode, r.stdout.split()) == (0, ["alice", "alice"]), r.stderr
        assert key.read_bytes() == made[0]          # the collector used the key it found
    finally:
        stop(*procs)
    assert "Traceback" not in "".join((tmp_path / f"{role}.out").read_text() for role in ("collector", "schedd"))


def test_the_command_with_other_users_tokens(make_pool, tmp_path):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    state = str(pool.state_dir)
    sub = tmp_path / "long.sub"
    sub.write_text("executable = /bin/sleep\narguments = 100000\nqueue\n")
    assert htcpool("submit", str(sub), "--state-dir", state).returncode == 0    # the pool's user: job 1.0

    alice_dir = tmp_path / "alice"
    made = htcpool("token", "create", "--identity", "alice@pool", "--authz", "READ", "--authz", "WRITE",
                   "--lifetime", "1d", "--file", str(alice_dir / "alice"), "--state-dir", state)
    assert made.returncode == 0, made.stderr
    listed = htcpool("token", "list", "--dir", str(alice_dir))
    assert '"sub":"alice@pool"' in listed.stdout and "authz READ WRITE" in listed.stdout
    as_alice = {"_CONDOR_SEC_TOKEN_DIRECTORY": str(alice_dir)}

    r = htcpool("submit", str(sub), "--state-dir", state, env=as_alice)
    assert r.returncode == 0, r.stderr
    r = htcpool("q", "-af", "ClusterId", "Owner", "--state-dir", state, env=as_alice)
    assert r.stdout.splitlines() == [f"1 {pool.user}", "2 alice"]
    r = htcpool("rm", "1", "--state-dir", state, env=as_alice)
    assert r.returncode == 2 and "Permission denied to remove job 1.0" in r.stderr
    r = htcpool("drain", "testhost", "--state-dir", state, env=as_alice)
    assert r.returncode == 2
    assert r.stderr.startswith('htcpool drain: SECMAN:2010:Received "DENIED" from server for user alice@pool '
                               'using method IDTOKENS.')
    r = htcpool("rm", "2", "--state-dir", state, env=as_alice)
    assert r.returncode == 0, r.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    r = htcpool("q", "--state-dir", state, env={"_CONDOR_SEC_TOKEN_DIRECTORY": str(empty)})
    assert r.returncode == 2 and "AUTHENTICATE:1003:Failed to authenticate with any method" in r.stderr
    assert "no usable token found" in r.stderr
    r = htcpool("q", "-af", "ClusterId", "JobStatus", "--state-dir", state)
    assert r.stdout.splitlines() == ["1 2"]                   # alice's refused rm changed nothing

    for bad, message in ((["--authz", "ROOT"], "is not an authorization level"),
                         (["--lifetime", "soon"], "--lifetime 'soon'")):
        r = htcpool("token", "create", "--identity", "x@pool", *bad, "--state-dir", state)
        assert r.returncode == 2 and message in r.stderr


async def test_fair_share_sees_the_submitters_of_the_tokens(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client("alice") as alice, pool.client("bob") as bob:
        await wait_slots(alice, 1)
        await alice.submit(SLEEP.format(seconds=100000, n=1), "a.sub")
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await bob.submit(SLEEP.format(seconds=100000, n=1), "b.sub", "alice")   # the request may not choose
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "bob@testhost may not submit jobs owned by 'alice'" in e.value.details()
        await bob.submit(SLEEP.format(seconds=100000, n=1), "b.sub")
        running = await wait_jobs(alice, "JobStatus == 2", 2)
        assert sorted(ads.get(j, "Owner") for j in running) == ["alice", "bob"]

        async def both_charged():
            entries = {e.name for e in (await alice.userprio()).entries if e.weighted_in_use > 0}
            return entries if {"alice@testhost", "bob@testhost"} <= entries else None
        await wait_for(both_charged, timeout_s=60, what="the accountant to charge alice and bob")
        names = {ads.get(a, "Name") for a in await alice.ads("Submitter")}
        assert names == {"alice@testhost", "bob@testhost"}


async def test_status_pages_hold_no_secrets(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT)
    async with pool.client("condor") as daemon:
        await wait_slots(daemon, 1)
        await daemon.submit(SLEEP.format(seconds=100000, n=1), "a.sub")
        [job] = await wait_jobs(daemon, "JobStatus == 2", 1)
        secret = ads.get(job, "ClaimId").rsplit("#", 1)[1]
        assert re.fullmatch(r"[0-9a-f]{32}", secret)
        key = (pool.state_dir / "passwords.d" / "POOL").read_bytes()
        async with aiohttp.ClientSession() as http:
            for d in pool.daemons.values():
                for page in ("/status", "/metrics", "/"):
                    async with http.get(d.info["status_url"] + page) as r:
                        text = await r.text()
                    assert secret not in text and pool.user_token() not in text
                    assert key.hex() not in text
                async with http.post(d.info["status_url"] + "/status") as r:
                    assert r.status == 405                     # read-only


async def test_a_tls_pool_runs_jobs_and_refuses_plain_callers(make_pool):
    pool = make_pool("NUM_CPUS = 2\n" + PSLOT, start=False)
    pool.tls = True
    pool.start()
    assert all(d.info["status_url"].startswith("https://") for d in pool.daemons.values())
    async with pool.client() as c:
        await wait_slots(c, 1)
        await c.submit(SLEEP.format(seconds=5, n=2), "two.sub")
        await wait_jobs(c, "true", 2, history=True)
    plain = PoolClient(pool.collector_address, tokens=[pool.user_token()])
    try:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await plain.ads("Machine")
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await plain.close()
    r = htcpool("status", "--state-dir", str(pool.state_dir), "-af", "Name")
    assert r.returncode == 0 and r.stdout.split() == ["slot1@testhost"]


async def test_mutual_tls_refuses_a_client_without_a_certificate(make_pool):
    pool = make_pool("NUM_CPUS = 1\n", start=False)
    pool.tls = "mutual"
    pool.start()
    async with pool.client() as c:
        assert len(await wait_slots(c, 1)) == 1
    tls = pool.tls_state()
    no_cert = PoolClient(pool.collector_address, tokens=[pool.user_token()],
                         credentials=channel_credentials(Path(tls["ca"])))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await no_cert.ads("Machine")
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await no_cert.close()


async def test_never_keeps_the_open_pool_and_says_so(make_pool):
    pool = make_pool("NUM_CPUS = 1\nSEC_DEFAULT_AUTHENTICATION = NEVER\n")
    async with PoolClient(pool.collector_address) as anyone:       # no token at all
        await wait_slots(anyone, 1)
        await anyone.submit(SLEEP.format(seconds=100000, n=1), "a.sub", "whoever")
        [job] = await anyone.jobs()
        assert ads.get(job, "Owner") == "whoever"                    # the request is trusted, as before
        assert await anyone.act(schedd_pb2.REMOVE, ["1.0"]) == ["1.0"]
    for name in ("CollectorLog", "SchedLog", "StartLog", "NegotiatorLog"):
        assert "SECURITY IS OFF: SEC_DEFAULT_AUTHENTICATION = NEVER" in (pool.state_dir / "log" / name).read_text()
    r = htcpool("status", "--pool", pool.collector_address, "-af", "Name",
                env={"_CONDOR_SEC_TOKEN_DIRECTORY": str(pool.state_dir / "nothing")})
    assert r.returncode == 0 and r.stdout.split() == ["slot1@testhost"]


async def test_tls_from_configuration_knobs_with_the_host_check_skipped(make_pool, tmp_path):
    """A certificate that names none of the addresses dialled (a container's, say): with
    SSL_SKIP_HOST_CHECK the pool's CA and the name `htcpool` are what is checked."""
    from daemons.core.security.tls import issue, make_ca
    pki = tmp_path / "pki"
    make_ca(pki)
    issue(pki, pki, "pool", ["collector.example"])
    pool = make_pool("NUM_CPUS = 1\nSEC_DEFAULT_ENCRYPTION = REQUIRED\nSSL_SKIP_HOST_CHECK = True\n"
                     f"AUTH_SSL_SERVER_CERTFILE = {pki / 'pool.crt'}\nAUTH_SSL_SERVER_KEYFILE = {pki / 'pool.key'}\n"
                     f"AUTH_SSL_SERVER_CAFILE = {pki / 'ca.crt'}\n")
    env = {"_CONDOR_SEC_DEFAULT_ENCRYPTION": "REQUIRED", "_CONDOR_AUTH_SSL_SERVER_CAFILE": str(pki / "ca.crt"),
           "_CONDOR_SSL_SKIP_HOST_CHECK": "True", "_CONDOR_SEC_TOKEN_DIRECTORY": str(pool.tokens_dir)}
    r = htcpool("status", "--pool", pool.collector_address, "-af", "Name", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["slot1@testhost"]
    r = htcpool("status", "--pool", pool.collector_address, "-af", "Name",
                env=dict(env, _CONDOR_SSL_SKIP_HOST_CHECK="False"))
    assert r.returncode == 1 and "the pool did not answer: UNAVAILABLE" in r.stderr
