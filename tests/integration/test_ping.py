"""`htcpool ping`: what a container healthcheck runs. Admin.Ping needs READ, so a ping
carries the user's token like every command, and one without a token is refused."""
from __future__ import annotations

import json

from .conftest import htcpool


def test_ping_answers_for_the_collector_and_any_daemon(make_pool, tmp_path):
    pool = make_pool("NUM_CPUS = 1\n")
    state = str(pool.state_dir)
    r = htcpool("ping", "--pool", pool.collector_address, "--state-dir", state)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("collector ") and r.stdout.strip().endswith(f"at {pool.collector_address}: ready")
    schedd = pool.daemons["schedd"].address
    r = htcpool("ping", schedd, "--json", "--state-dir", state)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["role"] == "schedd"
    # By address alone, the token from HTCondor's token directory variable (a container's
    # healthcheck: the secrets volume's tokens.d).
    r = htcpool("ping", "--pool", pool.collector_address, env={"_CONDOR_SEC_TOKEN_DIRECTORY": str(pool.tokens_dir)})
    assert r.returncode == 0, r.stderr
    # Without a token the daemon refuses: a healthcheck that fails rather than a false "ready".
    (tmp_path / "none").mkdir()
    r = htcpool("ping", "--pool", pool.collector_address, env={"_CONDOR_SEC_TOKEN_DIRECTORY": str(tmp_path / "none")})
    assert r.returncode == 2 and "AUTHENTICATE:1003:Failed to authenticate" in r.stderr
    assert "no usable token found" in r.stderr


def test_ping_of_nothing_fails_and_of_nonsense_is_a_usage_error(make_pool, tmp_path):
    r = htcpool("ping", "127.0.0.1:1", env={"HTCPOOL_STATE_DIR": str(tmp_path)})
    assert r.returncode == 1 and "the pool did not answer: UNAVAILABLE" in r.stderr
    r = htcpool("ping", "host:notaport")
    assert r.returncode == 2 and "address 'host:notaport': port 'notaport' is not a number" in r.stderr
