"""Seed 004's loading factor (daemons/cli/experiments/loading.py) and the cadence experiment's
measurement (daemons/cli/experiments/cadence.py), against hand-computed values."""
import math
import random

import pytest

from daemons.cli.experiments import cadence, loading
from daemons.cli.experiments.loading import Distribution, cycles_held, loading_factor

C = 300.0


# ---- the seed's per-slot formula ------------------------------------------------------------
def test_one_second_past_a_cycle_wastes_almost_a_whole_cycle():
    # D = 301 s, C = 300 s: q = 1, r = 1/300, the slot is held 2 cycles: 301 / 600
    assert round(loading_factor(301, C), 3) == 0.502
    assert loading_factor(301, C) == pytest.approx(301 / 600)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 10])
def test_a_whole_number_of_cycles_loads_the_slot_fully(k):
    assert loading_factor(k * C, C) == 1.0


def test_a_whole_number_of_cycles_survives_float_rounding():
    d = 0.1 * 3 * 1000          # 300.00000000000006
    assert loading_factor(d, 1000 * 0.3) == 1.0
    assert cycles_held(3 * 0.1 * 3000, 300) == 3


@pytest.mark.parametrize("d, expected", [
    (150, 0.5),                 # half a cycle
    (60, 0.2),
    (270, 0.9),                 # near the top of the first tooth
    (450, 450 / 600),           # 1.5 cycles in 2
    (870, 870 / 900),           # 2.9 cycles in 3
    (906, 906 / 1200),          # 3.02 cycles in 4: the bottom of a tooth
    (1806, 1806 / 2100),        # 6.02 cycles in 7
])
def test_saw_tooth_values(d, expected):
    assert loading_factor(d, C) == pytest.approx(expected)


def test_the_bottom_of_each_tooth_rises_toward_one():
    bottoms = [loading_factor(k * C + 1, C) for k in range(1, 8)]
    assert bottoms == sorted(bottoms)
    assert bottoms[0] == pytest.approx(301 / 600) and bottoms[-1] == pytest.approx(2101 / 2400)


def test_a_zero_length_job_still_costs_a_cycle():
    assert cycles_held(0, C) == 1 and loading_factor(0, C) == 0.0


def test_bad_arguments():
    with pytest.raises(ValueError):
        loading_factor(10, 0)
    with pytest.raises(ValueError):
        loading_factor(-1, C)


# ---- random durations ------------------------------------------------------------------------
def test_rule_of_thumb():
    assert loading.approx_pool_lf(300, 300) == pytest.approx(2 / 3)
    assert loading.approx_pool_lf(1500, 300) == pytest.approx(1500 / 1650)


def test_fixed_distribution_is_the_formula():
    for d in (60, 301, 870, 1806):
        dist = Distribution("fixed", d)
        assert loading.pool_lf(dist, C) == loading.mean_slot_lf(dist, C) == loading_factor(d, C)


def test_exponential_pool_lf_closed_form():
    # E[ceil(D/C)] = 1 / (1 - exp(-C/m)), so E[D]/E[Z] = m (1 - exp(-C/m)) / C
    for m in (75, 300, 900, 1800):
        assert loading.pool_lf(Distribution("exponential", m), C) == pytest.approx(m * (1 - math.exp(-C / m)) / C)


def test_uniform_by_hand():
    # uniform on [0, 2C]: half the jobs fit in one cycle, half need two: E[Z] = 1.5 C
    u = Distribution("uniform", C)
    assert loading.pool_lf(u, C) == pytest.approx(2 / 3)
    # E[D/Z] = (1/(2C)) (integral_0^C x/C dx + integral_C^2C x/(2C) dx) = 1/4 + 3/8
    assert loading.mean_slot_lf(u, C) == pytest.approx(0.625)
    # uniform on [0, C]: every job fits in one cycle
    assert loading.pool_lf(Distribution("uniform", C / 2), C) == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["exponential", "lognormal", "uniform"])
@pytest.mark.parametrize("mean", [75.0, 300.0, 1200.0])
def test_pool_and_mean_slot_lf_agree_with_monte_carlo(kind, mean):
    dist = Distribution(kind, mean)
    rng = random.Random(f"{kind}{mean}")
    xs = [dist.sample(rng) for _ in range(60_000)]
    pool = sum(xs) / sum(C * cycles_held(x, C) for x in xs)
    per_job = sum(loading_factor(x, C) for x in xs) / len(xs)
    assert loading.pool_lf(dist, C) == pytest.approx(pool, abs=0.006)
    assert loading.mean_slot_lf(dist, C) == pytest.approx(per_job, abs=0.006)
    # averaging per-job factors weighs short jobs as much as long ones: never above the pool's
    assert loading.mean_slot_lf(dist, C) <= loading.pool_lf(dist, C) + 1e-12


def test_lognormal_has_sd_equal_to_mean():
    dist = Distribution("lognormal", 500)
    rng = random.Random(7)
    xs = [dist.sample(rng) for _ in range(100_000)]
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    assert m == pytest.approx(500, rel=0.02) and sd == pytest.approx(500, rel=0.05)


def test_unknown_distribution():
    with pytest.raises(ValueError):
        Distribution("pareto", 10)
    with pytest.raises(ValueError):
        Distribution("uniform", 0)


# ---- the model run on given draws ------------------------------------------------------------
def test_replay_without_reuse_is_the_formula():
    assert loading.replay([301], C).loading == pytest.approx(loading_factor(301, C))
    r = loading.replay([100, 400, 300], C)
    assert (r.busy_s, r.held_s, r.matches) == (800, 300 + 600 + 300, 3)


def test_replay_with_claim_reuse():
    # 250 s jobs on a claim that may be reused for 1200 s: four more jobs follow the first at
    # once (claim ages 250 .. 1000); after the fifth (age 1250) the claim goes, the slot waits
    # for the cycle at 1500, and the sixth job runs on a new claim.
    r = loading.replay([250] * 6, C, worklife_s=1200)
    assert (r.busy_s, r.held_s, r.matches) == (1500, 1750, 2)
    assert loading.replay([250] * 6, C, worklife_s=-1).held_s == 1500   # reuse forever


def test_queue_replay():
    # without reuse the sums do not depend on who took which job
    rng = random.Random(1)
    xs = [rng.expovariate(1 / 400) for _ in range(500)]
    q = loading.queue_replay(xs, 4, C)
    assert q.busy_s == pytest.approx(sum(xs))
    assert q.held_s == pytest.approx(sum(C * cycles_held(x, C) for x in xs))
    # one slot with reuse is `replay`
    assert loading.queue_replay(xs[:30], 1, C, 1200).loading == pytest.approx(loading.replay(xs[:30], C, 1200).loading)
    # two slots, 150 s jobs: each slot runs two, one per cycle
    r = loading.queue_replay([150] * 4, 2, C)
    assert (r.busy_s, r.held_s, r.matches) == (600, 1200, 4)


# ---- the experiment's measurement ------------------------------------------------------------
def _job(proc, start, run, slot="slot1@m", sentinel=False):
    """A record as the schedd writes it: whole-second dates, exact wall clock."""
    end = start + run
    return cadence.JobRecord("m", proc, slot, int(start - 0.004), 0 if sentinel else int(end),
                             0.0 if sentinel else run, run, sentinel)


def test_measure_slot_counts_from_match_to_match():
    cycles = [0.0, 300.02, 600.05, 900.1, 1200.1]
    recs = [_job(0, 302.4, 150.01),            # matched at 300.02, ends 452
            _job(1, 605.3, 301.0),             # matched at 600.05, ends 906.3: misses 900.1
            _job(2, 1201.6, 1e9, sentinel=True)]
    m = cadence.measure_slot("slot1@m", recs, cycles)
    assert [j.origin for j in m.jobs] == [300.02, 600.05]
    assert [j.next_origin for j in m.jobs] == [600.05, 1200.1]
    assert m.busy == pytest.approx(451.01)
    assert m.held == pytest.approx(900.08)
    assert m.matches == 2 and not any(j.reused for j in m.jobs)
    assert m.start_latency == pytest.approx([2.4, 5.25, 1.5], abs=0.5)
    assert m.jobs[0].start == pytest.approx(302.4, abs=0.5)


def test_measure_slot_sees_claim_reuse():
    cycles = [0.0, 300.0, 600.0]
    recs = [_job(0, 301.0, 100.0), _job(1, 401.02, 100.0), _job(2, 501.05, 1e9, sentinel=True)]
    m = cadence.measure_slot("slot1@m", recs, cycles)
    assert [j.reused for j in m.jobs] == [False, True]
    assert m.matches == 1
    assert m.jobs[0].next_origin == pytest.approx(401.02, abs=0.5)   # the next job's start, not a cycle
    assert m.held == pytest.approx(501.05 - 300.0, abs=0.5)


def test_measure_slot_wants_a_sentinel_last():
    with pytest.raises(cadence.MeasureError):
        cadence.measure_slot("slot1@m", [_job(0, 301.0, 100.0)], [0.0, 300.0])


def test_sweep_points_avoid_the_edge_before_a_boundary():
    pts = cadence.sweep_ratios(24)
    assert len(pts) == 24 and pts[0] == 0.2 and max(pts) >= 6
    assert cadence.guard_violations(pts, cadence.GUARD) == []
    assert cadence.guard_violations(cadence.DEFAULT_RATIOS, cadence.GUARD) == []
    assert min(cadence.DEFAULT_RATIOS) <= 0.2 and max(cadence.DEFAULT_RATIOS) >= 6
    assert cadence.guard_violations([0.5, 0.95, 2.0], 0.1) == [0.95, 2.0]


def test_fixed_workloads_put_the_fragile_points_first():
    ws = cadence.fixed_workloads([0.2, 1.02, 0.8, 2.5], C, slots=2, jobs_per_slot=3)
    assert [w.ratio for w in ws] == [0.8, 2.5, 0.2, 1.02]
    assert ws[0].durations == (240.0,) * 6


def test_random_workloads_are_seeded_and_sized():
    a = cadence.random_workloads(["exponential"], [1.0], C, slots=4, horizon_cycles=10, seed=3)
    b = cadence.random_workloads(["exponential", "uniform"], [0.5, 1.0], C, slots=4, horizon_cycles=10, seed=3)
    assert a[0] == next(w for w in b if (w.kind, w.ratio) == ("exponential", 1.0))
    # about 4 slots x 10 cycles of held time, E[Z] = E[D] / pool_lf each
    expected = 4 * 10 * C * loading.pool_lf(Distribution("exponential", C), C) / C
    assert len(a[0].durations) == math.ceil(expected)
