"""`htcpool experiment faults` end to end on a small pool: the faults act, the verdict holds."""
from __future__ import annotations

import csv
import json

from .conftest import htcpool

KEYS = {"jobs", "faults", "kinds", "lost", "duplicated", "overlapping", "view_mismatches", "tracebacks",
        "recovery_s", "wall_s"}


def test_a_small_campaign_of_six_kinds(tmp_path):
    out = tmp_path / "faults"
    kinds = "kill,pause,partition,delay,drop,clock"
    r = htcpool("experiment", "faults", "--jobs", "150", "--faults", "6", "--kinds", kinds, "--seed", "3",
                "--startds", "2", "--machines", "3", "--cpus", "4", "--mean-duration", "100",
                "--min-fault", "40", "--max-fault", "150", "--act-fraction", "0.1", "--out", str(out), "--json",
                # A pool this small and short charges noisily: the usage check is the big run's.
                "--usage-tolerance", "0.6",
                timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result)
    assert result["jobs"] == 150 and result["faults"] == 6
    assert result["kinds"] == {k: 1 for k in kinds.split(",")}
    assert (result["lost"], result["duplicated"], result["overlapping"], result["view_mismatches"],
            result["tracebacks"], result["unfinished"], result["wrong_end"]) == (0, 0, 0, 0, 0, 0, 0)
    assert result["completed"] + result["removed"] == 150 and result["removed"] >= 1
    assert set(result["recovery_s"]) == set(kinds.split(","))
    assert result["ok"] is True and result["errors"] == []
    faults = list(csv.DictReader(open(out / "faults.csv")))
    assert sorted(f["kind"] for f in faults) == sorted(kinds.split(","))
    assert all(f["start_s"] and f["stop_s"] for f in faults)
    timeline = list(csv.DictReader(open(out / "timeline.csv")))
    assert any(row["faults_in_force"] for row in timeline)
    assert max(int(row["running"] or 0) for row in timeline) > 0
    assert (out / "faults.png").stat().st_size > 10_000
    assert "FAIL" not in (out / "verdict.txt").read_text()
    # The daemons' logs are kept, and show the faults where they fired.
    assert "FAULT" in "".join(p.read_text() for p in (out / "logs").glob("*Log"))


def test_bad_options_are_refused_by_name(tmp_path):
    for args, says in ((("--kinds", "kill,nap"), "--kinds: unknown fault kind 'nap'"),
                       (("--jobs", "0"), "--jobs 0 must be at least 1"),
                       (("--min-fault", "100", "--max-fault", "50"), "--max-fault 50 is shorter than --min-fault 100"),
                       (("--jobs", "10", "--faults", "5"), "less than one fault's longest length")):
        r = htcpool("experiment", "faults", *args, "--out", str(tmp_path / "x"))
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
