"""`htcpool bench scale`'s verdict on a step (pure) and the schedd's activation histogram."""
from __future__ import annotations

import argparse
import math

import pytest

from daemons.cli import scale_criteria as sc
from daemons.cli.bench_scale import DEFAULTS, QUICK, plan_from, startd_layout, submit_chunk
from daemons.cli.bench_scale_report import cost_by_role, summarize
from daemons.cli.experiments import loading
from daemons.cli.experiments.cadence_measure import JobRecord
from daemons.schedd.activation import DelayHistogram, activation_delay

CRIT = sc.Criteria()


def test_quantiles_and_allowed_failures():
    assert sc.upper_quantile([3.0, 1.0, 2.0, 4.0], 1.0) == 4.0
    assert sc.upper_quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert math.isnan(sc.upper_quantile([], 0.5))
    assert [sc.allowed_failures(n, 1.0) for n in (0, 1, 100)] == [0, 0, 0]
    assert [sc.allowed_failures(n, 0.99) for n in (0, 50, 100, 250)] == [0, 0, 1, 2]


def test_cycle_starts_within_one_percent_of_the_interval():
    starts = [-300.0, 0.0, 300.0, 600.0, 903.0, 1200.0, 1500.0]
    c = sc.cycle_check(starts, 300.0, 0.0, 1200.0, CRIT)
    assert (c["cycles"], c["gaps"], c["gap_error_max"], c["gaps_off"], c["ok"]) == (5, 4, 0.01, 0, True)
    late = sc.cycle_check([0.0, 300.0, 606.0, 900.0], 300.0, 0.0, 1200.0, CRIT)
    assert (late["gaps_off"], late["ok"]) == (2, False)
    # With a quantile, some gaps may be off.
    assert sc.cycle_check([0.0, 300.0, 606.0, 900.0], 300.0, 0.0, 1200.0, sc.Criteria(quantile=0.3))["ok"]
    # One cycle in the window says nothing about the cadence.
    assert sc.cycle_check([0.0], 300.0, 0.0, 1200.0, CRIT)["ok"] is False


def test_recorded_run_times():
    c = sc.runtime_check([(3600.0, 3600.0), (100.0, 100.5), (0.2, 0.205)], CRIT)
    assert (c["jobs"], c["jobs_off"], c["ok"], c["error_max"]) == (3, 0, True, 0.005)
    rerun = sc.runtime_check([(3600.0, 3600.0), (1000.0, 1500.0)], CRIT)
    assert (rerun["jobs_off"], rerun["ok"], rerun["error_max"]) == (1, False, 0.5)
    assert sc.runtime_check([], CRIT)["ok"] is False


def test_delay_histogram_counts_by_upper_bound():
    h = DelayHistogram()
    for d in (0.05, 1.0, 1.5, 5000.0, -1.0):
        h.observe(d)
    snap = h.snapshot()
    assert snap["count"] == 5 and snap["max_s"] == 5000.0 and snap["sum_s"] == 5002.55
    assert snap["counts"][0] == 2                          # 0.05 and -1 (as 0)
    assert snap["counts"][h.bounds.index(1.0)] == 1        # a value on a bound is in that bound's bucket
    assert snap["counts"][h.bounds.index(2.0)] == 1
    assert snap["counts"][-1] == 1
    cum = h.cumulative()
    assert (cum["0.1"], cum["1"], cum["2"], cum["1800"], cum["+Inf"]) == (2.0, 3.0, 4.0, 4.0, 5.0)


def test_the_wait_ends_at_the_startds_start_kept_within_match_and_reply():
    assert activation_delay(100.0, 100.4, 100.9) == pytest.approx(0.4)   # the startd's start, not the reply
    assert activation_delay(100.0, 0.0, 100.9) == pytest.approx(0.9)     # a startd that does not say
    assert activation_delay(100.0, 99.0, 100.9) == 0.0                   # its clock behind the schedd's
    assert activation_delay(100.0, 250.0, 100.9) == pytest.approx(0.9)   # ahead: no later than the reply


def test_activation_within_one_pool_second_between_two_snapshots():
    h = DelayHistogram()
    h.observe(30.0)                      # before the window
    before = h.snapshot()
    for d in (0.2, 0.4, 0.9, 1.0):
        h.observe(d)
    delta = sc.histogram_delta(before, h.snapshot())
    assert delta["count"] == 4 and delta["sum_s"] == pytest.approx(2.5)
    a = sc.activation_check(delta, CRIT)
    assert (a["activations"], a["late"], a["ok"], a["p50_le_s"], a["p99_le_s"]) == (4, 0, True, 0.5, 1.0)
    h.observe(2.5)
    a = sc.activation_check(sc.histogram_delta(before, h.snapshot()), CRIT)
    assert (a["late"], a["ok"], a["p99_le_s"]) == (1, False, 5.0)
    h.observe(1e6)
    assert sc.activation_check(sc.histogram_delta({}, h.snapshot()), CRIT)["p99_le_s"] is None
    none = sc.activation_check(sc.histogram_delta(h.snapshot(), h.snapshot()), CRIT)
    assert (none["activations"], none["ok"]) == (0, False)


def _done(proc: int, slot: str, start: int, duration: float) -> JobRecord:
    end = start + duration
    return JobRecord("m", proc, slot, start, int(end), duration, duration)


def _running(proc: int, slot: str, start: int) -> JobRecord:
    return JobRecord("m", proc, slot, start, 0, 0.0, 3600.0, sentinel=True)


CYCLES = [float(t) for t in range(0, 3001, 300)]


def test_loading_factor_against_the_seed_formula_on_the_same_jobs():
    # A: matched at 0, 400 s -> its slot's next match is at 600; B: 100 s -> next at 900.
    faithful = [_done(1, "s1", 1, 400.0), _done(2, "s1", 601, 100.0)]
    c = sc.loading_check(faithful, [_running(3, "s1", 901)], CYCLES, 300.0, 0.0, 1000.0, CRIT)
    assert (c["jobs"], c["measured"], c["model"], c["error"], c["ok"]) == (2, 0.55556, 0.55556, 0.0, True)
    # B starts a cycle late (its slot was freed too late for the cycle at 600).
    late = [_done(1, "s1", 1, 400.0), _done(2, "s1", 901, 100.0)]
    c = sc.loading_check(late, [_running(3, "s1", 1201)], CYCLES, 300.0, 0.0, 1000.0, CRIT)
    assert (c["measured"], c["model"], c["error"], c["ok"]) == (0.41667, 0.55556, -0.25, False)
    # Only jobs matched in the window count.
    c = sc.loading_check(faithful, [_running(3, "s1", 901)], CYCLES, 300.0, 500.0, 1000.0, CRIT)
    assert (c["jobs"], c["measured"]) == (1, 0.33333)


def test_an_idle_slot_closes_with_its_last_completed_job():
    recs = sc.slot_records([_done(2, "s1", 601, 100.0), _done(1, "s1", 1, 400.0)], [])
    assert [r.start_date for r in recs["s1"]] == [1, 601] and [r.sentinel for r in recs["s1"]] == [False, True]
    # In the order they ran, whatever their job ids (a job back from a failed claim runs later).
    recs = sc.slot_records([_done(9, "s1", 1, 400.0), _done(2, "s1", 601, 100.0)], [_running(1, "s1", 901)])
    assert [(r.proc, r.start_date) for r in recs["s1"]] == [(0, 1), (1, 601), (2, 901)]
    c = sc.loading_check([_done(1, "s1", 1, 400.0), _done(2, "s1", 601, 100.0)], [], CYCLES, 300.0, 0.0,
                         1000.0, CRIT)
    assert (c["jobs"], c["measured"], c["error"]) == (1, 0.66667, 0.0)


def test_inconsistent_slot_records_are_not_faithful():
    overlapping = [_done(1, "s1", 1, 400.0), _done(2, "s1", 100, 100.0)]
    c = sc.loading_check(overlapping, [_running(3, "s1", 901)], CYCLES, 300.0, 0.0, 1000.0, CRIT)
    assert c["inconsistent_slots"] == 1 and c["ok"] is False


def test_verdict_lag_and_search():
    ok = {k: {"ok": True} for k in ("cycles", "runtime", "activation", "loading")}
    assert sc.verdict(ok, lagged=[], queue_left=5) == []
    assert sc.verdict({**ok, "activation": {"ok": False}}, lagged=["2 lag event(s)"], queue_left=0) == [
        "claim activation", "lagged (2 lag event(s))", "the queue ran dry"]
    assert sc.lag_over(0, {"schedd": 80.0, "collector": 3.0}, 60.0) == ["schedd 80 pool s"]
    assert sc.lag_over(1, {}, None) == ["1 lag event(s)"]
    assert sc.highest_faithful([(100, True), (300, True), (1000, False)]) == 300
    assert sc.highest_faithful([(100, False)]) is None
    assert sc.highest_faithful([(100, True), (300, True)]) == 300
    # Refinement steps run after the step above them: the order of scale counts, not of running.
    assert sc.highest_faithful([(10, True), (20, False), (14, True), (17, False)]) == 14
    assert sc.highest_faithful([(10, True), (20, False), (14, False)]) == 10
    assert sc.bracket([(10, True), (20, False), (14, True)]) == (14, 20)
    assert sc.bracket([(100, False)]) == (None, 100) and sc.bracket([(100, True)]) == (100, None)


def test_refinement_halves_the_bracket_to_two_significant_figures():
    assert [sc.between(*b) for b in ((10, 20), (10, 14), (14, 20), (100, 300), (1000, 3000))] == [
        14.0, 12.0, 17.0, 170.0, 1700.0]
    assert sc.between(3, 5) == 3.9 and sc.between(0.5, 1) == 0.71
    assert sc.between(16, 17) is None and sc.between(20, 10) is None and sc.between(0, 10) is None


def test_the_search_refines_between_the_last_faithful_and_the_first_unfaithful_scale(monkeypatch, tmp_path):
    """run_size with steps that are faithful up to 13x: the ladder stops at 100, then each
    refinement step bisects the bracket."""
    from daemons.cli import bench_scale

    ran = []

    def step(slots, scale, plan, root, emit):
        ran.append(scale)
        return {"slots": slots, "time_scale": scale, "faithful": scale <= 13, "requested_slots": slots}

    monkeypatch.setattr(bench_scale, "_one_step", step)
    rows = bench_scale.run_size(1000, [10.0, 100.0, 1000.0], None, tmp_path, lambda line: None, refine=3)
    assert ran == [10.0, 100.0, 32.0, 18.0, 13.0]
    assert sc.highest_faithful([(r["time_scale"], r["faithful"]) for r in rows]) == 13.0
    ran.clear()
    bench_scale.run_size(1000, [10.0, 100.0], None, tmp_path, lambda line: None, refine=0)
    assert ran == [10.0, 100.0]
    ran.clear()
    bench_scale.run_size(1000, [100.0], None, tmp_path, lambda line: None, refine=5)   # nothing faithful
    assert ran == [100.0]


def test_plan_inputs():
    assert sc.parse_scales("1000, 100,300,100") == [100.0, 300.0, 1000.0]
    for bad in ("", "x", "0", "-5", "inf"):
        with pytest.raises(ValueError, match="--scales"):
            sc.parse_scales(bad)
    exp = loading.Distribution("exponential", 3600.0)
    small, big = sc.jobs_needed(16, 3600.0, exp, 300.0), sc.jobs_needed(10_000, 3600.0, exp, 300.0)
    assert 16 + 16 < small and 20_000 < big < 25_000
    assert startd_layout(16) == [2] and startd_layout(1000) == [125]
    assert startd_layout(50_000) == [1250] * 5 and sum(startd_layout(10_001)) == 1251
    text = submit_chunk([1.5, 20.0])
    assert text.endswith("queue D from (\n1.5\n20.0\n)\n") and "+Duration = $(D)" in text


def _args(**kw) -> argparse.Namespace:
    base = dict(mean=None, interval=None, warmup_hours=None, window_hours=None, quick=False, quantile=1.0,
                max_step_wall=0.0, distribution="exponential", seed=0, refine=0)
    return argparse.Namespace(**{**base, **kw})


def test_plan_defaults_quick_mode_and_bad_options():
    p = plan_from(_args())
    assert (p.dist.mean_s, p.interval_s, p.warmup_s, p.window_s) == DEFAULTS
    q = plan_from(_args(quick=True, interval=30.0))
    assert (q.dist.mean_s, q.interval_s, q.warmup_s, q.window_s) == (QUICK[0], 30.0, QUICK[2], QUICK[3])
    for kw, what in ((dict(mean=0.0), "--mean"), (dict(window_hours=-1.0), "--window-hours"),
                     (dict(quantile=1.5), "--quantile"), (dict(distribution="pareto"), "--distribution"),
                     (dict(warmup_hours=math.nan), "--warmup-hours"), (dict(max_step_wall=-1.0), "--max-step-wall"),
                     (dict(refine=-1), "--refine")):
        with pytest.raises(ValueError, match=what):
            plan_from(_args(**kw))


def test_summary_highest_faithful_scale_and_cost():
    plan = plan_from(_args())
    rows = [
        {"requested_slots": 1000, "slots": 1000, "time_scale": 100.0, "faithful": True,
         "cpu_s_per_pool_hour": {"collector": 1.0, "schedd": 2.0, "startd1": 3.0, "startd2": 1.0}},
        {"requested_slots": 1000, "slots": 1000, "time_scale": 300.0, "faithful": False,
         "cpu_s_per_pool_hour": {"collector": 9.0}},
        {"requested_slots": 10000, "slots": 10000, "time_scale": 100.0, "faithful": False, "error": "x"},
    ]
    s = summarize(rows, [1000, 10000], [100.0, 300.0], plan)
    one, ten = s["sizes"]
    assert (one["highest_faithful_scale"], one["cost_scale"], one["capped"]) == (100.0, 100.0, False)
    assert one["cpu_s_per_pool_hour"] == {"collector": 1.0, "schedd": 2.0, "startd": 4.0}
    assert one["cpu_s_per_pool_hour_total"] == 7.0
    assert (ten["highest_faithful_scale"], ten["cost_scale"], ten["cpu_s_per_pool_hour"]) == (None, None, {})
    assert s["aim_10k_met"] is False
    assert cost_by_role({}) == {}


def test_the_lag_sampler_reads_a_daemons_metrics_page():
    """bench scale samples each daemon's lag from /metrics as the status page renders it
    (not the whole /status): the three gauges it needs, nothing else."""
    from daemons.cli.bench_scale import loop_lag_from_metrics
    from daemons.core.status import prometheus_text
    text = prometheus_text("negotiator", {
        "loop_lag_pool_seconds": 0.5, "loop_lag_recent_max_pool_seconds": 2.25,
        "loop_lag_sustained_pool_seconds": 1.0, "loop_lag_max_pool_seconds": 9.0,
        "update_lag_sustained_pool_seconds": 80.0, "update_lag_max_pool_seconds": 120.0,
        "rpc_calls_total": {(("method", "x_loop_lag_sustained_pool_seconds"),): 7.0}})
    assert loop_lag_from_metrics(text) == {"recent_max_pool_s": 2.25, "sustained_pool_s": 1.0,
                                           "update_sustained_pool_s": 80.0}
    assert loop_lag_from_metrics("") == {} and loop_lag_from_metrics("garbage\n# x 1\n") == {}
