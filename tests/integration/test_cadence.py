"""Seed 004's loading factor, measured on a real pool: a short fixed-duration sweep."""
from __future__ import annotations

import csv
import json

from daemons.cli.experiments.loading import loading_factor

from .conftest import STATIC, htcpool

# Three durations: the middle of the first tooth, the bottom of the second (the job ends
# just after a cycle and waits almost a whole one), near the top of the third. C = 60 pool
# seconds at TIME_SCALE 30 is a 2 s cycle; the job at 2.8 C ends 12 pool seconds (0.4 s of
# wall time) before its cycle, ten times what the pool needs to free and re-advertise a slot.
RATIOS = (0.5, 1.02, 2.8)
INTERVAL = 60


def test_short_fixed_sweep_matches_the_formula(tmp_path):
    out = tmp_path / "cadence"
    r = htcpool("experiment", "cadence", "--parts", "fixed", "--ratios", ",".join(map(str, RATIOS)),
                "--interval", str(INTERVAL), "--time-scales", "30", "--slots-per-point", "2",
                "--jobs-per-slot", "1", "--out", str(out), "--json", timeout=240)
    assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads(r.stdout.strip().splitlines()[-1])
    (scale,) = result["time_scales"]
    assert scale["time_scale"] == 30 and scale["points"] == 3
    assert scale["max_abs_error"] <= 0.02, r.stdout
    rows = list(csv.DictReader(open(out / "fixed.csv")))
    assert sorted(float(row["d_over_c"]) for row in rows) == list(RATIOS)
    for row in rows:
        d = float(row["d_over_c"]) * INTERVAL
        assert float(row["formula"]) == round(loading_factor(d, INTERVAL), 5)
        assert abs(float(row["measured"]) - loading_factor(d, INTERVAL)) <= 0.02, row
        assert int(row["jobs"]) == 2
    # Cycles ran on their cadence: start to start, NEGOTIATOR_INTERVAL apart.
    spacing = result["runs"]["fixed-x30"]
    assert INTERVAL <= spacing["cycle_spacing_min_s"] and spacing["cycle_spacing_max_s"] < INTERVAL + 3
    assert (out / "cadence_fixed.png").stat().st_size > 10_000
    assert "D/C" in r.stdout and "formula" in r.stdout


def test_bad_options_are_refused(tmp_path):
    r = htcpool("experiment", "cadence", "--distributions", "pareto", "--out", str(tmp_path))
    assert r.returncode == 2 and "unknown distribution 'pareto'" in r.stderr
    r = htcpool("experiment", "cadence", "--time-scales", "60,x", "--out", str(tmp_path))
    assert r.returncode == 2 and "--time-scales" in r.stderr


async def test_cycles_start_an_interval_after_the_previous_start(make_pool):
    """The status page and CycleHistory show cycles NEGOTIATOR_INTERVAL apart, start to start."""
    import aiohttp

    from daemons.cli.client import wait_for

    pool = make_pool(STATIC + "NUM_CPUS = 1\nNEGOTIATOR_CYCLE_DELAY = 0\nNEGOTIATOR_INTERVAL = 20\n")
    async with pool.client() as c:
        async def five_cycles():
            found = await c.cycles()
            return found if len(found) >= 5 else None
        cycles = await wait_for(five_cycles, timeout_s=30, what="five negotiation cycles")
        async with aiohttp.ClientSession() as http:
            async with http.get(pool.daemons["negotiator"].info["status_url"] + "/status") as r:
                status = await r.json()
    page = status["cycle_history"]
    assert status["interval_s"] == 20 and status["cycle_delay_s"] == 0
    assert [round(p["start"], 6) for p in page][:5] == [round(x.start, 6) for x in cycles][:5]
    gaps = [b.start - a.start for a, b in zip(cycles, cycles[1:]) if not b.rescheduled]
    # Never early; late only by the timer's wall-clock slack (x TIME_SCALE 100).
    assert gaps and all(g >= 20 - 1e-6 for g in gaps), gaps
    assert sorted(gaps)[len(gaps) // 2] < 21, gaps
