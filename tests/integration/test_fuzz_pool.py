"""The fuzzer against a running pool, with a small budget (`htcpool bench fuzz --minutes N`
runs the same campaign for longer): for every input a clean refusal or a correct
acceptance, no daemon dying or missing a deadline, a refused input changing nothing,
and afterwards no traceback in any log and no unexpected error counted on /metrics."""
from __future__ import annotations

import json

import pytest

from daemons.cli.client import wait_for
from daemons.fuzz import campaign as C
from daemons.fuzz import targets as T
from daemons.fuzz.pool_targets import FUZZ_POOL_CONFIG, PoolFuzzer

from .conftest import htcpool

# Seconds per class: enough for hundreds of inputs each (the 30-minute campaign is the bench).
BUDGET_S = {"submit": 3.0, "rpc": 4.0, "auth": 2.0, "classad": 3.0, "config": 4.0}


async def test_a_fuzzed_pool_answers_every_input_cleanly(make_pool):
    """The pool runs with security as it is by default (authentication REQUIRED): the
    submit, rpc and classad inputs go with valid tokens (the daemons' own, so they reach
    every handler, and a plain user's), the auth inputs with bad credentials, which only
    the security layer's UNAUTHENTICATED or PERMISSION_DENIED may answer."""
    pool = make_pool(FUZZ_POOL_CONFIG)
    tally = T.Tally()
    async with pool.client("condor") as c:   # the daemons' own identity: every RPC gets past authorization
        await wait_for(lambda: c.ads("Machine"), timeout_s=60, what="the fuzz pool's slot ad")
        fuzzer = PoolFuzzer(pool, c)
        try:
            for turn, (cls, budget) in enumerate(BUDGET_S.items()):
                await C.run_pool(tally, fuzzer, cls, budget, seed=turn, daemon_starts=(cls == "config"))
            C.final_checks(tally, fuzzer)
        finally:
            await fuzzer.close()
    assert tally.failures == [], json.dumps(tally.failures[:3], indent=1)
    for cls in BUDGET_S:
        counts = tally.counts[f"{cls}:pool"]
        assert sum(counts.values()) > 0, cls
        if cls == "auth":        # bad credentials: never accepted
            assert counts["refused"] > 0 and counts["accepted"] == 0, counts
        elif cls != "config":    # (a few configurations only: each accepted one starts a daemon)
            assert counts["refused"] > 0 and counts["accepted"] > 0, (cls, counts)
    # The security layer itself answered them, and counted them on /metrics.
    assert sum(fuzzer.metric_totals("security_refused_total").values()) >= tally.counts["auth:pool"]["refused"]


@pytest.mark.slow
def test_bench_fuzz_runs_a_campaign_and_reports_by_class(tmp_path):
    r = htcpool("bench", "fuzz", "--minutes", "1", "--out", str(tmp_path / "fz"), "--json", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result["classes"]) >= {"submit", "config", "classad", "rpc", "auth"}
    assert (result["crashes"], result["hangs"], result["errors"]) == (0, 0, 0)
