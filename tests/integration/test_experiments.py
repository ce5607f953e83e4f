"""Experiments run end to end on small pools and write what they promise."""
from __future__ import annotations

import csv
import json

from .conftest import htcpool


def test_autocluster_experiment_small(tmp_path):
    out = tmp_path / "ac"
    r = htcpool("experiment", "autocluster", "--users", "6", "--jobs", "300", "--kinds", "20",
                "--machine-scale", "0.1", "--cycles", "2", "--time-scale", "100", "--out", str(out), "--json",
                timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result) == {"on", "off"}
    assert (result["on"]["jobs"], result["off"]["jobs"]) == (300, 300)
    assert result["on"]["autoclusters"] == 20 and result["off"]["autoclusters"] == 300
    for mode in ("on", "off"):
        m = result[mode]
        assert 0 < m["matched"] <= m["considered"]
        assert m["match_fraction"] == round(m["matched"] / m["considered"], 4)
    # Without autoclustering the negotiator considers more ads for the same pool.
    assert result["off"]["considered_per_cycle"] > result["on"]["considered_per_cycle"]
    rows = list(csv.DictReader(open(out / "cycles.csv")))
    assert {r["mode"] for r in rows} == {"on", "off"} and len(rows) == 4
    assert (out / "autocluster.png").stat().st_size > 10_000
    bad = htcpool("experiment", "autocluster", "--users", "10", "--kinds", "5", "--out", str(out))
    assert bad.returncode == 2 and "cannot draw 5 job kinds for 10 users" in bad.stderr
