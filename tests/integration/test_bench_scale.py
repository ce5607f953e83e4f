"""`htcpool bench scale` end to end at a tiny size (slow), its refusals, and the schedd's
match-to-activation histogram that the bench reads (no timing asserted)."""
from __future__ import annotations

import csv
import json
import urllib.request

import pytest

from daemons.cli.bench_scale_report import STEP_COLUMNS
from daemons.core.fault_admin import fault_to_pb
from daemons.core.faults import Fault

from .conftest import SLEEP, STATIC, htcpool, wait_jobs, wait_slots


async def test_schedd_counts_each_matched_job_from_match_to_activation(make_pool):
    pool = make_pool(STATIC + "NUM_CPUS = 2\nCLAIM_WORKLIFE = 0\n")
    async with pool.client() as c:
        await wait_slots(c, 2)
        await c.submit(SLEEP.format(seconds=50, n=3), "three.sub", "alice")
        await wait_jobs(c, "true", 3, history=True)
    url = pool.daemons["schedd"].info["status_url"]
    with urllib.request.urlopen(f"{url}/status", timeout=10) as r:
        hist = json.loads(r.read())["claim_activation_delay"]
    # Each job needed its own match (no claim reuse), so each start was counted once.
    assert hist["count"] == 3 and sum(hist["counts"]) == 3
    assert hist["max_s"] >= 0 and hist["sum_s"] <= 3 * hist["max_s"]
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert 'htcpool_schedd_claim_activation_delay_pool_seconds_bucket{le="+Inf"} 3' in text
    assert "htcpool_schedd_claim_activation_delay_pool_seconds_count 3" in text


async def test_the_wait_ends_at_the_start_the_startd_reports(make_pool):
    """The histogram takes the startd's start time from its reply, not the reply's arrival.
    With the startd's clock set an hour back, every start it reports is before its match
    reached the schedd, so each wait is counted as 0; from the arrival of the reply it
    would be more."""
    pool = make_pool(STATIC + "NUM_CPUS = 2\nCLAIM_WORKLIFE = 0\n")
    startd = pool.daemons["startd1"]
    async with pool.client() as c:
        await wait_slots(c, 2)
        reply = await c.set_faults(startd.address, [fault_to_pb(Fault("back", clock_offset_s=-3600.0))])
        assert reply.true_pool_time - reply.pool_time > 3590.0
        await c.submit(SLEEP.format(seconds=50, n=3), "three.sub", "alice")
        await wait_jobs(c, "true", 3, history=True)
    url = pool.daemons["schedd"].info["status_url"]
    with urllib.request.urlopen(f"{url}/status", timeout=10) as r:
        hist = json.loads(r.read())["claim_activation_delay"]
    assert hist["count"] == 3 and hist["counts"][0] == 3
    assert hist["sum_s"] == 0 and hist["max_s"] == 0


def test_bench_scale_refuses_bad_options(tmp_path):
    # (each option's checks are unit-tested; here: the command's exit code and one-line message)
    for args, what in ((["--scales", "0"], "--scales"), (["--distribution", "pareto"], "--distribution")):
        r = htcpool("bench", "scale", *args, "--out", str(tmp_path / "out"))
        assert r.returncode == 2, r.stdout + r.stderr
        assert what in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_bench_scale_tiny_pool_reports_its_criteria(tmp_path):
    out = tmp_path / "out"
    r = htcpool("bench", "scale", "--sizes", "16", "--scales", "500,2000", "--quick", "--out", str(out), "--json",
                timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    (size,) = result["sizes"]
    assert size["slots"] == 16
    steps = result["steps"]
    assert 1 <= len(steps) <= 2 and [s["time_scale"] for s in steps] == [500.0, 2000.0][:len(steps)]
    # The search stops at the first unfaithful scale; the best is the last faithful one before it.
    assert all(s["faithful"] for s in steps[:-1])
    assert size["highest_faithful_scale"] == (steps[-1]["time_scale"] if steps[-1]["faithful"] else
                                              (steps[-2]["time_scale"] if len(steps) == 2 else None))
    for s in steps:
        assert "error" not in s, s.get("error")
        ck = s["checks"]
        # Every criterion was measured on the pool's own records.
        assert ck["cycles"]["cycles"] >= 2 and ck["cycles"]["gap_error_max"] is not None
        assert ck["runtime"]["jobs"] > 0 and ck["activation"]["activations"] > 0
        assert ck["loading"]["jobs"] > 0 and 0 < ck["loading"]["model"] <= 1
        assert s["faithful"] == (not s["why_not"])
        assert s["idle_jobs_left"] > 0
        assert {k.rstrip("0123456789") for k in s["loop_lag_pool_s"]} == {"collector", "negotiator", "schedd",
                                                                          "startd"}
        assert set(s["cpu_s_per_pool_hour"]) == {"collector", "negotiator", "schedd", "startd1"}
    with open(out / "scale_steps.csv") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0][:len(STEP_COLUMNS)]) == STEP_COLUMNS and len(rows) == 1 + len(steps)
    with open(out / "scale_cost.csv") as f:
        assert len(list(csv.reader(f))) == 2
    assert (out / "scale.png").stat().st_size > 0
    assert "highest faithful TIME_SCALE" in r.stdout
