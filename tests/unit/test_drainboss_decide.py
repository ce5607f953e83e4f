"""daemons/drainboss/decide.py and config.py: truth table, keepgoing, candidates, node choice, options."""
import random

import pytest

from daemons.core import ads
from daemons.core.config import ConfigError, Param
from daemons.drainboss.config import DrainBossConfig, with_options
from daemons.drainboss.controller import ControllerSettings, SettingsError
from daemons.drainboss.decide import (CANCEL_ALL, NOTHING, START, JobCounts, Node, choose, count_jobs, decide,
                                      nodes_from_ads, queue_action)

ME = "DrainBoss boss@test"


def ad(**attrs):
    return ads.parse_ad(ads.ad_text(attrs))


def machine(host, free, busy=(), total=8, draining=False, reason=None):
    """A p-slot with `free` cpus and dynamic slots of the sizes in `busy`."""
    extra = {"Draining": draining}
    if reason is not None:
        extra["DrainReason"] = reason
    out = [ad(Name=f"slot1@{host}", Machine=host, PartitionableSlot=True, Cpus=free, TotalSlotCpus=total,
              TotalCpus=total, StartdIpAddr="<127.0.0.1:9>", **extra)]
    out += [ad(Name=f"slot1_{i}@{host}", Machine=host, DynamicSlot=True, Cpus=c, TotalSlotCpus=c,
               TotalCpus=total, StartdIpAddr="<127.0.0.1:9>", **extra) for i, c in enumerate(busy, 1)]
    return out


# ---- the truth table --------------------------------------------------------------------
@pytest.mark.parametrize("mc, sc, keepgoing, action", [
    (0, 0, False, NOTHING),
    (3, 0, False, START),
    (0, 5, False, CANCEL_ALL),
    (3, 5, False, START),
    (0, 0, True, NOTHING),
    (3, 0, True, START),
    (0, 5, True, NOTHING),     # --keepgoing: drains run on through a multicore drought
    (3, 5, True, START),
])
def test_truth_table(mc, sc, keepgoing, action):
    assert queue_action(mc, sc, keepgoing) == action


def nodes():
    return nodes_from_ads(
        machine("a", free=2, busy=[1] * 6)                               # fragmented: a candidate
        + machine("b", free=5, busy=[1] * 3)                             # 3 to free: a candidate
        + machine("c", free=0, busy=[8])                                 # runs a multicore job: has a wide slot
        + machine("d", free=8)                                           # idle whole: has a wide slot
        + machine("e", free=3, busy=[1] * 5, draining=True, reason=ME)   # my drain, under way
        + machine("f", free=8, draining=True, reason=ME)                 # my drain, done
        + machine("g", free=1, busy=[1] * 7, draining=True, reason="by command")  # someone else's
        + machine("h", free=1, busy=[1] * 3, total=4), wide=8)            # too small to ever be wide


def by_name(ns):
    return [n.name for n in ns]


def test_nodes_from_slot_ads():
    n = {x.name: x for x in nodes()}
    assert n["a"] == Node("a", "127.0.0.1:9", 8, 2, 8, False, False, "")
    assert (n["c"].has_wide, n["d"].has_wide, n["f"].has_wide, n["f"].drain_reason) == (True, True, True, ME)
    assert (n["b"].to_free(8), n["a"].to_free(8)) == (3, 6)


def test_multicore_queued_starts_drains_on_candidates_and_ends_finished_ones():
    d = decide(JobCounts(queued_multicore=4, queued_singlecore=10), nodes(), 5, keepgoing=False, wide=8,
               policy="random", my_reason=ME, rng=random.Random(1))
    assert (d.action, d.candidates) == (START, 2)
    assert sorted(by_name(d.drain)) == ["a", "b"]          # only two candidates although 5 wanted
    assert [(n.name, why) for n, why in d.cancel] == [("f", "has a slot of 8 or more cpus")]


def test_controller_output_limits_the_drains():
    d = decide(JobCounts(queued_multicore=4), nodes(), 1, keepgoing=False, wide=8, policy="fewest",
               my_reason=ME, rng=random.Random(1))
    assert by_name(d.drain) == ["b"]


def test_only_single_core_queued_cancels_my_drains_unless_keepgoing():
    d = decide(JobCounts(queued_singlecore=10), nodes(), 5, keepgoing=False, wide=8, policy="random",
               my_reason=ME, rng=random.Random(1))
    assert (d.action, d.drain) == (CANCEL_ALL, ())
    assert sorted(n.name for n, _ in d.cancel) == ["e", "f"]    # not g: a drain by hand
    kept = decide(JobCounts(queued_singlecore=10), nodes(), 5, keepgoing=True, wide=8, policy="random",
                  my_reason=ME, rng=random.Random(1))
    assert (kept.action, kept.drain, [n.name for n, _ in kept.cancel]) == (NOTHING, (), ["f"])


def test_nothing_queued_starts_and_cancels_nothing_but_finished_drains():
    d = decide(JobCounts(), nodes(), 5, keepgoing=False, wide=8, policy="random", my_reason=ME,
               rng=random.Random(1))
    assert (d.action, d.drain, [n.name for n, _ in d.cancel]) == (NOTHING, (), ["f"])


def test_zero_output_drains_nothing():
    d = decide(JobCounts(queued_multicore=4), nodes(), 0, keepgoing=False, wide=8, policy="random",
               my_reason=ME, rng=random.Random(1))
    assert d.drain == ()


# ---- node choice -------------------------------------------------------------------------
CANDS = [Node("small", "x", 8, 1, 8, False, False), Node("big", "x", 32, 2, 32, False, False),
         Node("nearly", "x", 8, 6, 8, False, False), Node("mid", "x", 16, 4, 16, False, False)]


def test_largest_first():
    assert by_name(choose(CANDS, 2, "largest", 8, random.Random(0))) == ["big", "mid"]


def test_fewest_cores_to_free_first():
    assert by_name(choose(CANDS, 3, "fewest", 8, random.Random(0))) == ["nearly", "mid", "big"]


def test_random_is_a_seeded_shuffle():
    first = by_name(choose(CANDS, 4, "random", 8, random.Random(3)))
    assert first == by_name(choose(CANDS, 4, "random", 8, random.Random(3)))
    assert sorted(first) == sorted(by_name(CANDS))


def test_unknown_choice_is_refused():
    with pytest.raises(ValueError):
        choose(CANDS, 1, "smallest", 8, random.Random(0))


# ---- counting jobs -----------------------------------------------------------------------
def test_count_jobs_by_status_and_width():
    jobs = [ad(JobStatus=1, RequestCpus=8), ad(JobStatus=1, RequestCpus=1), ad(JobStatus=2, RequestCpus=8),
            ad(JobStatus=2, RequestCpus=12), ad(JobStatus=2, RequestCpus=1), ad(JobStatus=5, RequestCpus=8),
            ad(JobStatus=1)]
    assert count_jobs(jobs, 8) == JobCounts(running_multicore=2, queued_multicore=1, running_singlecore=1,
                                            queued_singlecore=2)
    assert count_jobs(jobs, 12) == JobCounts(1, 0, 2, 3)


# ---- configuration and options -------------------------------------------------------------
def test_defaults_are_the_seeds():
    cfg = DrainBossConfig.from_param(Param.from_dict({}))
    assert cfg == DrainBossConfig()
    assert (cfg.controller, cfg.interval_s, cfg.multicore_cpus, cfg.wide_cpus, cfg.node_choice) == (
        ControllerSettings(250, 200, 10000, 86400, 9, 300), 300.0, 8, 8, "random")


def test_knobs():
    cfg = DrainBossConfig.from_param(Param.from_dict({
        "DRAINBOSS_SETPOINT": "30", "DRAINBOSS_PROPBAND": "40", "DRAINBOSS_RESET": "7200",
        "DRAINBOSS_LOOKBACK": "3600 * 12", "DRAINBOSS_MAXTODRAIN": "3", "DRAINBOSS_KEEPGOING": "true",
        "DRAINBOSS_INTERVAL": "120", "DRAINBOSS_NODE_CHOICE": "Fewest", "DRAINBOSS_WIDE_CPUS": "4"}))
    assert (cfg.controller, cfg.keepgoing, cfg.node_choice, cfg.wide_cpus) == (
        ControllerSettings(30, 40, 7200, 43200, 3, 120), True, "fewest", 4)


def test_the_seeds_command_line_in_drainboss_options():
    cfg = DrainBossConfig.from_param(Param.from_dict({
        "DRAINBOSS_OPTIONS": "-s 250 -p 750 -r 43600 --lookback 86400 --maxtodrain 7 --keepgoing"}))
    assert (cfg.controller, cfg.keepgoing, cfg.test) == (ControllerSettings(250, 750, 43600, 86400, 7, 300),
                                                         True, False)


def test_options_win_over_knobs():
    cfg = DrainBossConfig.from_param(Param.from_dict({"DRAINBOSS_SETPOINT": "10", "DRAINBOSS_OPTIONS": "-s 20 -t"}))
    assert (cfg.controller.setpoint, cfg.test) == (20, True)


@pytest.mark.parametrize("values, message", [
    ({"DRAINBOSS_SETPOINT": "-5"}, "DRAINBOSS_SETPOINT: --setpoint -5: must be 0 or more"),
    ({"DRAINBOSS_RESET": "0"}, "DRAINBOSS_RESET: --reset 0: must be more than 0 seconds"),
    ({"DRAINBOSS_PROPBAND": "0"}, "DRAINBOSS_PROPBAND: --propband 0: must be more than 0"),
    ({"DRAINBOSS_MAXTODRAIN": "2.5"}, "DRAINBOSS_MAXTODRAIN = '2.5' is not an integer"),
    ({"DRAINBOSS_NODE_CHOICE": "smallest"}, "DRAINBOSS_NODE_CHOICE = 'smallest' is not one of random, largest, fewest"),
    ({"DRAINBOSS_OPTIONS": "-s -5"}, "DRAINBOSS_OPTIONS = '-s -5': --setpoint -5: must be 0 or more"),
    ({"DRAINBOSS_OPTIONS": "--reset 0"}, "--reset 0: must be more than 0 seconds"),
    ({"DRAINBOSS_OPTIONS": "--frobnicate"}, "unrecognized arguments: --frobnicate"),
    ({"DRAINBOSS_OPTIONS": "-s lots"}, "invalid float value: 'lots'"),
    ({"DRAINBOSS_INTERVAL": "0"}, "DRAINBOSS_INTERVAL = 0 must be positive"),
])
def test_bad_settings_are_refused_by_name(values, message):
    with pytest.raises(ConfigError) as e:
        DrainBossConfig.from_param(Param.from_dict(values))
    assert message in str(e.value)


def test_bad_options_change_nothing():
    cfg = DrainBossConfig()
    with pytest.raises(SettingsError):
        with_options(cfg, "-s 10 --reset 0")
    assert cfg == DrainBossConfig()
