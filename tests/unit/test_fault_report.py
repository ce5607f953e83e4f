"""What `experiment faults` reports: the JSON's keys, and a non-zero exit on any violation."""
from __future__ import annotations

import argparse
import json

from daemons.cli.experiments.faults import Run
from daemons.cli.experiments.faults_args import config
from daemons.cli.experiments.faults_report import report, summary
from daemons.cli.experiments.nemesis import FaultEvent


def _run(tmp_path) -> Run:
    ns = argparse.Namespace(jobs=4, faults=1, kinds="kill", seed=1, netns=False, startds=1, machines=1, cpus=4,
                            mean_duration=100.0, time_scale=60.0, batches=1, act_fraction=0.0, min_fault=60.0,
                            max_fault=60.0, concurrent=1, sample_interval=30.0, max_wall=0.0, usage_tolerance=0.15,
                            out=str(tmp_path), json=True)
    r = Run(config(ns), events=[FaultEvent(1, "kill", "schedd", 60.0, 120.0)])
    r.applied = {1: (60.0, 125.0)}
    r.recovery = {1: 30.0}
    r.submitted = {"1.0", "1.1", "1.2", "1.3"}
    r.samples = [{"t": t, "running": n, "idle": 4 - n, "held": 0, "queued": 4, "done": 0, "busy": n, "claimed": n,
                  "unclaimed": 4 - n, "faults": ""} for t, n in ((0, 0), (30, 4), (90, 0), (150, 4))]
    r.verdict.submitted, r.verdict.completed = 4, 4
    return r


def test_a_clean_run_passes_and_says_so_in_its_json(tmp_path, capsys):
    assert report(_run(tmp_path), tmp_path) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ok"] is True and result["faults"] == 1 and result["kinds"] == {"kill": 1}
    assert result["recovery_s"] == {"kill": {"n": 1, "recovered": 1, "median": 30.0, "max": 30.0}}
    for name in ("timeline.csv", "faults.csv", "verdict.txt", "faults.png"):
        assert (tmp_path / name).exists()


def test_a_lost_job_or_an_experiment_error_fails_the_run(tmp_path, capsys):
    r = _run(tmp_path)
    r.verdict.lost = ["1.3"]
    assert report(r, tmp_path) == 1
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["lost"] == 1
    assert "FAIL every job completed" in (tmp_path / "verdict.txt").read_text()
    r = _run(tmp_path)
    r.errors.append("#1 kill schedd: stop: PoolError: schedd exited during start-up")
    assert report(r, tmp_path) == 1
    assert summary(r)["errors"] == ["#1 kill schedd: stop: PoolError: schedd exited during start-up"]
