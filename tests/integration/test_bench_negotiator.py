"""htcpool bench negotiator runs end to end at a tiny size and reports what it promises (no timing asserted)."""
from __future__ import annotations

import json

from .conftest import htcpool


def test_bench_negotiator_tiny(tmp_path):
    prof = tmp_path / "prof"
    r = htcpool("bench", "negotiator", "--sizes", "50", "--jobs", "500", "--submitters", "20",
                "--autoclusters", "40", "--profile", str(prof), "--repeat", "2", "--json", timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert (result["jobs"], result["submitters"], result["autoclusters"]) == (500, 20, 40)
    (row,) = result["rows"]
    # --repeat 2: two runs on fresh pools; the size's row is the slower (the median of two).
    assert len(result["runs"]) == 2 and row["repeats"]["runs"] == 2
    times = sorted(run["reschedule_to_record_s"] for run in result["runs"])
    assert row["repeats"]["reschedule_to_record_s"] == times and row["reschedule_to_record_s"] == times[1]
    assert {k: v for k, v in row.items() if k != "repeats"} in result["runs"]
    assert "the median of 2 runs per size" in r.stdout
    assert row["slots"] == 56   # 50 rounded up to whole machines of 8 slots
    assert row["matches"] > 0 and row["cycle_s"] > 0 and row["matches_per_s"] > 0
    assert row["negotiator_cpu_s"] > 0
    # Every job kind is its own autocluster, and the cycle sees every slot and submitter.
    assert 0 < row["autoclusters"] <= 40 and row["requests"] >= row["autoclusters"]
    assert row["submitters"] == 20
    assert row["jobs"] == 500 and row["job_kinds"] == 40
    # The cycle's phases, and how the negotiate phase splits between the session's sides.
    assert {"query", "parse", "accounting", "significant", "group", "prefetch", "negotiate",
            "session_write", "session_serve"} <= set(row["phases_s"]) <= {
        "query", "parse", "accounting", "significant", "group", "prefetch", "negotiate",
        "session_write", "session_read", "session_serve"}
    assert "slots  cycle_s  matches/s" in r.stdout
    # What the cycle wrote to the schedd: twenty submitters' sessions, several messages each,
    # and what waited for the stream went in one write (a bundle).
    assert row["stream_messages"] >= 3 * 20 and 0 < row["stream_writes"] < row["stream_messages"]
    assert f"{row['stream_messages']:,} messages to schedds in {row['stream_writes']:,} writes" in r.stdout
    # Every daemon's peak RSS, and issue 14's memory figures per slot ad, idle job and slot.
    # (one startd process emulates the three groups of machines, one per class)
    assert set(row["peak_rss_mb"]) == {"collector", "negotiator", "schedd", "startd1"}
    assert row["collector_bytes_per_slot_ad"] > 0 and row["schedd_bytes_per_idle_job"] > 0
    assert row["startd_bytes_per_slot"] > 0
    # The startds' peaks are read once the matched jobs run on them; their PSS beside.
    assert 0 < row["jobs_running"] <= row["matches"]
    assert set(row["startd_pss_mb"]) == {"startd1"}
    assert "matched jobs running on the startds" in r.stdout
    assert "B per slot ad" in r.stdout and result["bench"] == "negotiator"
    # --profile: py-spy sampled every daemon through the measured cycle.
    assert "profiles of the cycle" in r.stdout
    for run in ("run1", "run2"):
        assert {p.name for p in (prof / "56" / run).glob("*.top.txt")} >= {"negotiator.top.txt", "schedd.top.txt"}


def test_bench_negotiator_refuses_bad_sizes():
    r = htcpool("bench", "negotiator", "--sizes", "10,x")
    assert r.returncode == 2 and "--sizes" in r.stderr
    r = htcpool("bench", "negotiator", "--jobs", "10", "--autoclusters", "50")
    assert r.returncode == 2 and "--jobs >= --autoclusters" in r.stderr
    r = htcpool("bench", "negotiator", "--repeat", "0")
    assert r.returncode == 2 and "--repeat" in r.stderr
