"""`htcpool bench throughput` end to end on a small pool: its JSON says whether the run
lagged and each daemon's worst loop lag; `--profile` leaves a py-spy profile per daemon."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from .conftest import htcpool


def _py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def test_bench_throughput_reports_lag_and_profiles_every_daemon(tmp_path):
    if _py_spy() is None:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    prof = tmp_path / "prof"
    r = htcpool("bench", "throughput", "--jobs", "20", "--machines", "2", "--profile", str(prof), "--json",
                timeout=300)
    logs = {p.name: p.read_text() for p in prof.glob("*.py-spy.log")} if prof.exists() else {}
    if r.returncode != 0 and any("ermission" in t or "ptrace" in t.lower() for t in logs.values()):
        pytest.skip(f"py-spy may not attach to processes here: {logs}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["jobs"] == 20 and out["schedd_counters"]["jobs_completed"] == 20
    assert isinstance(out["lagged"], bool) and out["lag"]["lagged"] == out["lagged"]
    assert out["lag"]["lag_policy"] == "slow" and out["lag"]["time_scale_configured"] == 1000.0
    worst = out["lag"]["loop_lag_max_pool_s"]
    assert {k.split()[0] for k in worst} == {"collector", "negotiator", "scheduler", "startdaemon"}, worst
    assert all(v >= 0 for v in worst.values())
    assert ("LAGGED:" in r.stdout) == out["lagged"]
    # The collector's count of ads it dropped as stale during the run, read from its status page.
    assert isinstance(out["collector_expired"], int) and out["collector_expired"] >= 0
    assert "ads the collector dropped as stale meanwhile" in r.stdout
    for key in ("collector", "negotiator", "schedd", "startd1"):
        top = (prof / f"{key}.top.txt").read_text()
        assert top.startswith(f"{key}: ") and " samples at " in top, top
        assert (prof / f"{key}.folded").stat().st_size > 0


def test_bench_throughput_repeat_reports_the_median_run():
    """--repeat 2: two runs on fresh pools, every job of each completed once; the result is
    the slower run (the median of two), with every run listed."""
    r = htcpool("bench", "throughput", "--jobs", "20", "--machines", "2", "--repeat", "2", "--json", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out["runs"]) == 2 and all(run["schedd_counters"]["jobs_completed"] == 20 for run in out["runs"])
    rates = sorted(run["jobs_per_s"] for run in out["runs"])
    assert out["repeats"]["runs"] == 2 and out["repeats"]["jobs_per_s"] == rates
    assert out["jobs_per_s"] == rates[0]
    (slower,) = [run for run in out["runs"] if run["jobs_per_s"] == rates[0]][:1]
    assert all(out[k] == slower[k] for k in ("wall_s", "cycles", "matches", "schedd_counters", "cpu_s"))
    assert "the median of 2 runs" in r.stdout
    bad = htcpool("bench", "throughput", "--repeat", "21")
    assert bad.returncode == 2 and "--repeat" in bad.stderr


def test_bench_throughput_runs_the_pool_at_the_time_scale_asked_for():
    r = htcpool("bench", "throughput", "--jobs", "20", "--machines", "2", "--time-scale", "200", "--json",
                timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["schedd_counters"]["jobs_completed"] == 20
    assert out["time_scale"] == 200.0 and out["lag"]["time_scale_configured"] == 200.0
    assert "TIME_SCALE 200" in r.stdout
    bad = htcpool("bench", "throughput", "--time-scale", "0")
    assert bad.returncode == 2 and "--time-scale must be from 1" in bad.stderr
