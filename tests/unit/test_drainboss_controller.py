"""daemons/drainboss/controller.py: the PI arithmetic, with numbers worked by hand."""
import pytest

from daemons.drainboss.controller import (ControllerSettings, ControllerState, ControlOutput, Sample, SettingsError,
                                          forget, integral, output_of, step)

# Full output (10 nodes) at an error of 50 jobs; integral time 1000 s; runs every 300 s.
S = ControllerSettings(setpoint=100, propband=50, reset_s=1000, lookback_s=3600, maxtodrain=10, period_s=300)


def test_proportional_term_is_full_scale_at_an_error_of_one_band():
    # error 50 = propband: P = 10 nodes. The integral of the first sample (one period) is 50 × 300.
    out = output_of(S, error=50, i_sum=0)
    assert out == ControlOutput(error=50, integral=0, p_term=10.0, i_term=0.0, output=10.0, nodes=10)


def test_proportional_term_is_linear_in_the_error():
    assert output_of(S, error=20, i_sum=0).p_term == 4.0
    assert output_of(S, error=-20, i_sum=0).p_term == -4.0


def test_integral_term_is_the_integral_over_the_reset_time_in_bands():
    # ∫e dt = 6000 job-s; / 1000 s = 6 jobs; 6 / 50 × 10 = 1.2 nodes.
    assert output_of(S, error=0, i_sum=6000).i_term == pytest.approx(1.2)


def test_first_run_worked_example():
    # 80 running, setpoint 100: error 20, P = 4; the first sample stands for one period:
    # ∫ = 20 × 300 = 6000, I = 1.2; output 5.2 -> 5 nodes.
    out, state = step(S, ControllerState(), now=1000.0, running_multicore=80)
    assert (out.error, out.integral, out.p_term, round(out.i_term, 6), round(out.output, 6), out.nodes) == (
        20, 6000.0, 4.0, 1.2, 5.2, 5)
    assert (state.samples, round(state.carry, 6)) == ((Sample(1000.0, 20),), 0.2)


def test_integral_accumulates_run_by_run():
    state = ControllerState()
    outs = []
    for i, running in enumerate([80, 90, 100]):
        out, state = step(S, state, now=1000.0 + 300 * i, running_multicore=running)
        outs.append(out.integral)
    assert outs == [6000.0, 9000.0, 9000.0]   # 20×300, +10×300, +0×300


def test_output_is_clamped_to_zero_and_to_maxtodrain():
    assert output_of(S, error=-40, i_sum=0).nodes == 0
    assert output_of(S, error=-40, i_sum=0).output == 0.0
    assert output_of(S, error=-40, i_sum=0, carry=0.5).nodes == 0
    assert output_of(S, error=500, i_sum=0).output == 10.0
    assert output_of(S, error=500, i_sum=0).nodes == 10


def test_negative_integral_holds_the_output_down():
    # A long overshoot (error -10 for the whole hour) outweighs a small positive error now.
    assert output_of(S, error=5, i_sum=-36000).output == 0.0


def test_a_run_drains_the_whole_part_and_carries_the_fraction():
    assert [(o.nodes, o.carry) for o in (output_of(S, error=e, i_sum=0) for e in (12.5, 2.5))] == [
        (2, 0.5), (0, 0.5)]
    assert output_of(S, error=2.5, i_sum=0, carry=0.5).nodes == 1


def test_a_quarter_node_per_run_drains_every_fourth_run():
    quarter = ControllerSettings(setpoint=10, propband=40, reset_s=1e12, lookback_s=3600, maxtodrain=1,
                                 period_s=300)
    state, drained = ControllerState(), []
    for i in range(8):
        out, state = step(quarter, state, now=300.0 * i, running_multicore=0)
        drained.append(out.nodes)
    assert drained == [0, 0, 0, 1, 0, 0, 0, 1]


def test_the_carry_never_makes_more_than_maxtodrain():
    out = output_of(S, error=500, i_sum=0, carry=0.9)
    assert (out.nodes, out.output) == (10, 10.0)
    assert out.carry < 1


def test_integral_over_the_lookback_window_only():
    samples = [Sample(t, 10.0) for t in range(0, 7201, 300)]   # error 10 for two hours
    # the window is the last 3600 s: 10 × 3600
    assert integral(samples, now=7200.0, lookback_s=3600, period_s=300) == 36000.0


def test_a_sample_straddling_the_window_counts_in_part():
    samples = [Sample(0.0, 10.0), Sample(300.0, 20.0)]
    # window [150, 300]: only the second sample's span (0, 300] overlaps, for 150 s
    assert integral(samples, now=300.0, lookback_s=150, period_s=300) == 3000.0


def test_a_gap_counts_for_one_period_at_most():
    # the controller was down for an hour: the sample after the gap stands for 300 s, not 3900
    samples = [Sample(0.0, 10.0), Sample(3900.0, 10.0)]
    assert integral(samples, now=3900.0, lookback_s=86400, period_s=300) == 6000.0


def test_old_samples_are_forgotten_but_the_newest_old_one_bounds_the_next():
    samples = [Sample(0.0, 1.0), Sample(300.0, 2.0), Sample(600.0, 3.0), Sample(900.0, 4.0)]
    assert forget(samples, now=900.0, lookback_s=400) == [Sample(300.0, 2.0), Sample(600.0, 3.0),
                                                           Sample(900.0, 4.0)]


def test_windup_is_bounded_by_the_lookback():
    # However long the error lasts, the integral never exceeds error × lookback.
    state = ControllerState()
    for i in range(100):
        out, state = step(S, state, now=300.0 * i, running_multicore=0)
    assert out.integral == 100 * 3600
    assert len(state.samples) <= 3600 // 300 + 2


def test_restart_resumes_from_the_saved_history():
    state = ControllerState()
    for i in range(3):
        _, state = step(S, state, now=300.0 * i, running_multicore=90)
    saved = ControllerState(tuple(Sample(s.t, s.error) for s in state.samples), state.carry)  # the state file
    resumed, _ = step(S, saved, now=900.0, running_multicore=90)
    fresh, _ = step(S, ControllerState(), now=900.0, running_multicore=90)
    assert (resumed.integral, fresh.integral) == (12000.0, 3000.0)


def test_the_seeds_settings_worked_example():
    # drainBoss.py -s 250 -p 750 -r 43600 --lookback 86400 --maxtodrain 7, every 300 s,
    # with 150 multicore jobs running for the last hour (12 runs):
    seed = ControllerSettings(setpoint=250, propband=750, reset_s=43600, lookback_s=86400, maxtodrain=7)
    state = ControllerState()
    for i in range(12):
        out, state = step(seed, state, now=300.0 * i, running_multicore=150)
    # P = 7 × 100/750 = 0.933; ∫ = 100 × 3600 = 360000; I = 7 × (360000/43600)/750 = 0.077;
    # about one node per run (the fractions add up to a second one now and then)
    assert (round(out.p_term, 3), out.integral, round(out.i_term, 3), out.nodes) == (0.933, 360000.0, 0.077, 1)


@pytest.mark.parametrize("change, message", [
    ({"setpoint": -1}, "--setpoint -1: must be 0 or more"),
    ({"propband": 0}, "--propband 0: must be more than 0"),
    ({"reset_s": 0}, "--reset 0: must be more than 0 seconds"),
    ({"lookback_s": -5}, "--lookback -5: must be more than 0 seconds"),
    ({"maxtodrain": -1}, "--maxtodrain -1: must be 0 or more nodes"),
])
def test_settings_out_of_range_are_refused(change, message):
    with pytest.raises(SettingsError) as e:
        ControllerSettings(**change).validate()
    assert str(e.value).startswith(message)


def test_seed_defaults():
    assert ControllerSettings() == ControllerSettings(setpoint=250, propband=200, reset_s=10000,
                                                      lookback_s=86400, maxtodrain=9, period_s=300)
