"""`htcpool bench schedd` end to end on a small queue: every figure and ratio is there, the
queries and the restart saw every job, and the table names each goal."""
from __future__ import annotations

import json

from .conftest import htcpool


def test_bench_schedd_reports_every_figure_against_its_goal():
    r = htcpool("bench", "schedd", "--jobs", "3000", "--json", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["jobs"] == 3000
    assert out["query_all"]["ads"] == out["query_af"]["ads"] == 3000
    assert out["replay_log_entries"] >= 3 * 3000        # NewClassAd, ProcId and GlobalJobId per job
    assert set(out["ratios"]) == {"submit_s", "replay_s", "query_rss_growth_pct", "peak_rss_kb_per_job"}
    assert all(v >= 0 for v in out["ratios"].values())
    assert 0 < out["log_bytes_per_job"] < 200           # the cluster's attributes are not repeated per job
    assert out["submit_cpu_s"] > 0 and out["replay_cpu_s"] > 0 and out["peak_rss_mb"] > out["rss_empty_mb"] / 2
    for goal in ("submit (one queue N", "replay after SIGKILL", "schedd RSS growth", "peak RSS per job"):
        assert goal in r.stdout
