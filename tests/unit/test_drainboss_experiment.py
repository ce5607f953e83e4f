"""The multicore experiment's pure parts: workload draws, statistics, settings; and the
SIMC tuning of DrainBoss's PI terms (daemons/drainboss/tuning.py)."""
import argparse
import random

import pytest

from daemons.cli.experiments.multicore_args import add_arguments
from daemons.cli.experiments.multicore_workload import (Sample, Workload, drought_schedule, duration, in_drought,
                                                        scaled, submit_text, summarize, top_up)
from daemons.drainboss.tuning import expected_drain_time_s, harmonic, simc


def sample(mc, draining_idle=0, idle=0, t=0.0, cores=80):
    return Sample(t, mc, 0, 0, 0, 1 if draining_idle else 0, draining_idle, idle, cores)


def test_summary_mean_sd_and_wastage():
    s = summarize([sample(2, draining_idle=8, idle=8), sample(4, idle=4), sample(6), sample(8, idle=4)])
    assert (s.samples, s.mc_mean, s.mc_sd) == (4, 5.0, 5 ** 0.5)
    assert (s.wastage_pct, s.idle_pct, s.draining_mean) == (2.5, 5.0, 0.25)


def test_summary_of_nothing():
    assert summarize([]).samples == 0


def test_top_up_to_the_level():
    assert [top_up(20, idle) for idle in (0, 5, 20, 25)] == [20, 15, 0, 0]


def test_durations_are_clipped_and_seeded():
    a = [duration(random.Random(4), 3600.0) for _ in range(3)]
    rng = random.Random(4)
    draws = [duration(rng, 3600.0) for _ in range(2000)]
    assert a == [a[0]] * 3
    assert min(draws) == 600 and max(draws) <= 4 * 3600


def test_droughts_are_seeded_and_inside_the_span():
    wl = Workload(delivery_mean_s=36 * 3600, drought_mean_s=4 * 3600)
    d1 = drought_schedule(random.Random(1), wl, 30 * 86400)
    assert d1 == drought_schedule(random.Random(1), wl, 30 * 86400)
    assert all(0 < a < b <= 30 * 86400 for a, b in d1)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(d1, d1[1:]))
    assert drought_schedule(random.Random(1), Workload(drought_mean_s=0), 86400) == []
    assert (in_drought([(10.0, 20.0)], 15.0), in_drought([(10.0, 20.0)], 20.0)) == (True, False)


def test_submit_text_puts_each_kind_in_its_group():
    text = submit_text("mc", [3600, 7200], 8)
    assert "request_cpus = 8\n" in text and "accounting_group = group_mcore\n" in text
    assert text.count("\nqueue") == 2 and "+Duration = 7200\n" in text
    assert "accounting_group = group_score\n" in submit_text("sc", [60], 1)
    assert "accounting_group" not in submit_text("mc", [60], 8, grouped=False)


def test_rals_settings_scaled_to_100_machines():
    assert (round(scaled(30, 100), 2), round(scaled(60, 100)), round(scaled(300, 100))) == (3.83, 8, 38)


def test_experiment_options_and_bad_ones():
    from daemons.cli.experiments.multicore import settings_from

    p = argparse.ArgumentParser()
    add_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    s = settings_from(p.parse_args([]))
    assert (s.machines, s.cpus, s.setpoint, s.maxtodrain, s.keepgoing) == (100, 8, 30, 1, True)
    assert (s.propband, s.reset) == (196, 234823)   # SIMC for 3 h jobs on 8 cores, runs every 300 s
    assert s.defrag == {"per_hour": 30 * 100 / 784, "max_concurrent": 8, "max_whole": 38, "interval": 600}
    assert s.priority == "group"
    with pytest.raises(ValueError, match="--setpoint -1"):
        settings_from(p.parse_args(["--setpoint", "-1"]))
    with pytest.raises(ValueError, match="--reset 0"):
        settings_from(p.parse_args(["--reset", "0"]))


def test_priority_routes_in_the_pool_configuration():
    from daemons.cli.experiments.multicore import pool_config, settings_from

    p = argparse.ArgumentParser()
    add_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    grouped = pool_config(settings_from(p.parse_args([])))
    assert "GROUP_NAMES = group_mcore, group_score\n" in grouped
    assert 'GROUP_SORT_EXPR = ifThenElse(AccountingGroup =?= "<none>", 3.4e+38, ifThenElse(regexp("mcore"' in grouped
    for route in ("factor", "none"):
        config = pool_config(settings_from(p.parse_args(["--priority", route])))
        assert "GROUP_NAMES" not in config and "GROUP_SORT_EXPR" not in config
    with pytest.raises(SystemExit):
        p.parse_args(["--priority", "sc-first"])


# ---- tuning ------------------------------------------------------------------------------------
def test_drain_time_is_the_expected_longest_of_the_remaining_jobs():
    assert harmonic(1) == 1.0 and round(harmonic(8), 4) == 2.7179
    assert round(expected_drain_time_s(3 * 3600, 8)) == 29353


def test_simc_worked_example():
    # θ = 29353 s (8.15 h), runs every 300 s: 98 runs per drain; maxtodrain 1.
    t = simc(expected_drain_time_s(3 * 3600, 8), 300, 1)
    assert (round(t.runs_per_drain, 1), round(t.propband), round(t.reset_s)) == (97.8, 196, 234823)
    # a full-scale output of 7 nodes per run needs a band 7 times as wide for the same gain
    assert round(simc(t.drain_time_s, 300, 7).propband) == 1370


def test_simc_refuses_nonsense():
    with pytest.raises(ValueError):
        simc(0, 300, 1)


def test_steady_state_starts_where_the_climb_reaches_its_level():
    from daemons.cli.experiments.multicore_workload import steady_start
    climb = [sample(mc, t=float(i)) for i, mc in enumerate([0, 5, 10, 20, 28, 30, 31, 29, 30, 30, 31, 29])]
    # The second half settles at 30; 90% of it (27) is first reached at sample 4.
    assert steady_start(climb) == 4
    assert steady_start([sample(0), sample(0)]) == 0 and steady_start([]) == 0
    assert steady_start([sample(0)] * 10 + [sample(1)] + [sample(0)] * 9) == 0   # a level below one job
