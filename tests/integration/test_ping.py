"""`htcpool ping`: what a container healthcheck runs."""
from __future__ import annotations

import json

from .conftest import htcpool


def test_ping_answers_for_the_collector_and_any_daemon(make_pool):
    pool = make_pool("NUM_CPUS = 1\n")
    state = ("--state-dir", str(pool.state_dir))   # where `htcpool up` leaves the user's token
    r = htcpool("ping", "--pool", pool.collector_address, *state)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("collector ") and r.stdout.strip().endswith(f"at {pool.collector_address}: ready")
    schedd = pool.daemons["schedd"].address
    r = htcpool("ping", schedd, "--json", *state)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["role"] == "schedd"


def test_ping_of_nothing_fails_and_of_nonsense_is_a_usage_error(make_pool, tmp_path):
    r = htcpool("ping", "127.0.0.1:1", env={"HTCPOOL_STATE_DIR": str(tmp_path)})
    assert r.returncode == 1 and "the pool did not answer: UNAVAILABLE" in r.stderr
    r = htcpool("ping", "host:notaport")
    assert r.returncode == 2 and "address 'host:notaport': port 'notaport' is not a number" in r.stderr
