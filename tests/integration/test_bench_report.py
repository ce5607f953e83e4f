"""Every bench reports peak RSS, ratios to issue 14's goals, and to --baseline (no timing asserted)."""
from __future__ import annotations

import json

from .conftest import htcpool


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_baseline_ratios_and_the_bench_processs_own_peak(tmp_path):
    r = htcpool("bench", "autocluster", "--jobs", "2000", "--json", timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    first = last_json(r.stdout)
    assert first["bench"] == "autocluster" and first["peak_rss_mb"]["bench (this process)"] > 0
    assert "baseline_ratios" not in first
    base = tmp_path / "base.txt"
    base.write_text(r.stdout)      # the whole output: its last line is the JSON
    r = htcpool("bench", "autocluster", "--jobs", "2000", "--baseline", str(base), "--json", timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    second = last_json(r.stdout)
    assert f"against the baseline {base}" in r.stdout
    assert second["baseline_unchanged"] >= 3          # jobs, autoclusters, significant attributes
    figures = {x["figure"] for x in second["baseline_ratios"]}
    assert "jobs_per_s" in figures or second["jobs_per_s"] == first["jobs_per_s"]
    for x in second["baseline_ratios"]:
        assert x["ratio"] is None or abs(x["ratio"] - x["now"] / x["baseline"]) < 0.01


def test_a_bad_baseline_is_refused_before_the_bench_runs(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json\n")
    r = htcpool("bench", "autocluster", "--jobs", "2000", "--baseline", str(bad))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"htcpool bench: --baseline {bad}, line 1: not a JSON object "
                                "(give the output of a run with --json)")
    assert r.stdout == ""


def test_a_pool_bench_reports_every_daemons_peak_rss():
    r = htcpool("bench", "security", "--calls", "20", "--modes", "off", "--json", timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    result = last_json(r.stdout)
    assert result["peak_rss_mb"]["off/collector"] > 10
    assert "peak RSS (VmHWM) of every daemon" in r.stdout
