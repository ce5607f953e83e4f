"""daemons/defrag/policy.py: HTCondor's defrag decisions, on hand-made slot ads."""
import random

import pytest

from daemons.core import ads
from daemons.core.config import ConfigError, Param
from daemons.defrag.config import DefragConfig
from daemons.defrag.policy import DefragPolicy, drains_this_poll, machine_of

NOW = 1_000_000.0


def pslot(host: str, cpus: int = 2, total: int = 8, badput: int = 0, draining: bool = False,
          reason: str | None = None, **extra):
    attrs = {"MyType": "Machine", "Name": f"slot1@{host}", "Machine": host, "SlotID": 1,
             "PartitionableSlot": True, "Cpus": cpus, "TotalSlotCpus": total, "TotalCpus": total,
             "StartdIpAddr": "<127.0.0.1:4000>", "Draining": draining,
             "ExpectedMachineGracefulDrainingCompletion": int(NOW) + 3600,
             "ExpectedMachineGracefulDrainingBadput": badput,
             "ExpectedMachineQuickDrainingCompletion": int(NOW) + 10,
             "ExpectedMachineQuickDrainingBadput": 5 * badput}
    if reason is not None:
        attrs["DrainReason"] = reason
    attrs.update(extra)
    return ads.parse_ad(ads.ad_text(attrs))


def dslot(host: str, sub: int, cpus: int = 1):
    return ads.parse_ad(ads.ad_text({"MyType": "Machine", "Name": f"slot1_{sub}@{host}", "Machine": host,
                                     "SlotID": 1, "DynamicSlot": True, "Cpus": cpus, "TotalSlotCpus": cpus,
                                     "StartdIpAddr": "<127.0.0.1:4000>", "Draining": False}))


def policy(seed: int = 0, **cfg) -> DefragPolicy:
    base = {"draining_machines_per_hour": 60.0, "interval_s": 600}   # 10 per poll
    base.update(cfg)
    return DefragPolicy(DefragConfig(**base), "defrag@test", random.Random(seed))


# ---- drains per poll, with the fraction carried --------------------------------------------
def test_whole_drains_per_poll():
    assert drains_this_poll(30 * 600 / 3600, 0.0) == (5, 0.0)


def test_half_a_drain_per_poll_alternates():
    counts, carry = [], 0.0
    for _ in range(6):
        n, carry = drains_this_poll(3 * 600 / 3600, carry)
        counts.append(n)
    assert counts == [0, 1, 0, 1, 0, 1]


def test_a_sixth_per_poll_drains_once_in_six():
    counts, carry = [], 0.0
    for _ in range(12):
        n, carry = drains_this_poll(1 * 600 / 3600, carry)
        counts.append(n)
    assert counts == [0, 0, 0, 0, 0, 1] * 2


def test_rals_rate_scaled_to_100_machines_keeps_its_long_run_rate():
    per_poll = (30 * 100 / 784) * 600 / 3600
    total, carry = 0, 0.0
    for _ in range(6 * 24):   # one day of 600 s polls
        n, carry = drains_this_poll(per_poll, carry)
        total += n
    assert total == 91   # 30 × 100 / 784 × 24 = 91.8: the fraction waits in the carry
    assert round(carry, 3) == 0.837


def test_the_poll_carries_the_fraction_in_its_state():
    p = policy(draining_machines_per_hour=3.0)
    plans = [p.poll([pslot("m1")], NOW + 600 * i) for i in range(4)]
    assert [pl.num_to_drain for pl in plans] == [0, 1, 0, 1]
    assert [pl.budget for pl in plans] == [0.5, 1.0, 0.5, 1.0]
    assert plans[0].why_not == "Doing nothing, because number to drain in next 600s is calculated to be 0.500."


def test_zero_rate_never_drains():
    p = policy(draining_machines_per_hour=0.0)
    plan = p.poll([pslot("m1")], NOW)
    assert (plan.num_to_drain, plan.candidates) == (0, ())


# ---- candidates --------------------------------------------------------------------------
def test_candidates_are_ordered_by_defrag_rank_cheapest_badput_first():
    slots = [pslot("m1", badput=100), pslot("m2", badput=300), pslot("m3", badput=10), pslot("m4", badput=200)]
    plan = policy().poll(slots, NOW)
    assert [c.machine for c in plan.candidates] == ["m3", "m1", "m4", "m2"]
    assert [c.rank for c in plan.candidates] == [-10.0, -100.0, -200.0, -300.0]


def test_ties_keep_the_seeded_shuffle_and_the_seed_reproduces_it():
    slots = [pslot(f"m{i}") for i in range(8)]
    first = [c.machine for c in policy(seed=7).poll(slots, NOW).candidates]
    again = [c.machine for c in policy(seed=7).poll(slots, NOW).candidates]
    other = [c.machine for c in policy(seed=8).poll(slots, NOW).candidates]
    assert first == again
    assert sorted(first) == [f"m{i}" for i in range(8)]
    assert first != other


def test_a_rank_that_does_not_evaluate_counts_as_zero():
    slots = [pslot("m1", badput=5), ads.parse_ad(ads.ad_text(
        {"MyType": "Machine", "Name": "slot1@m2", "Machine": "m2", "PartitionableSlot": True, "Cpus": 1,
         "TotalSlotCpus": 8, "StartdIpAddr": "<127.0.0.1:4000>"}))]
    plan = policy().poll(slots, NOW)
    assert [(c.machine, c.rank) for c in plan.candidates] == [("m2", 0.0), ("m1", -5.0)]


def test_requirements_exclude_machines():
    slots = [pslot("m1", badput=1), pslot("m2", badput=2), pslot("m3", badput=3)]
    plan = policy(requirements='Machine != "m1"').poll(slots, NOW)
    assert [c.machine for c in plan.candidates] == ["m2", "m3"]


def test_only_partitionable_slots_not_draining_and_not_whole_are_candidates():
    slots = [pslot("busy", cpus=1), dslot("busy", 1), dslot("dyn-only", 1),
             pslot("whole", cpus=8), pslot("draining", cpus=3, draining=True, reason="Defrag defrag@test"),
             pslot("offline", cpus=1, Offline=True),
             pslot("drained-by-hand", cpus=2, draining=True, reason="by command")]
    plan = policy().poll(slots, NOW)
    assert [c.machine for c in plan.candidates] == ["busy"]
    assert plan.whole == ("whole",)
    assert plan.draining == ("draining",)   # a drain by hand is not ours to count


def test_a_machine_is_a_candidate_once_even_with_two_pslots():
    slots = [pslot("m1"), ads.parse_ad(ads.ad_text({"MyType": "Machine", "Name": "slot2@m1", "Machine": "m1",
                                                    "SlotID": 2, "PartitionableSlot": True, "Cpus": 1,
                                                    "TotalSlotCpus": 4, "StartdIpAddr": "<127.0.0.1:4000>"}))]
    plan = policy().poll(slots, NOW)
    assert [c.machine for c in plan.candidates] == ["m1"]


def test_drain_action_carries_htcondors_check_expression_and_reason():
    plan = policy().poll([pslot("m1", badput=1000)], NOW)
    (d,) = plan.candidates
    assert (d.target, d.address, d.how, d.reason, d.start_expr) == (
        "m1", "127.0.0.1:4000", "graceful", "Defrag defrag@test", "FALSE")
    assert d.check_expr == ("ExpectedMachineGracefulDrainingCompletion <= 1004800 && "
                            "ExpectedMachineGracefulDrainingBadput <= 2450")


def test_quick_schedule_checks_the_quick_figures():
    plan = policy(draining_schedule="quick").poll([pslot("m1", badput=1000)], NOW)
    assert plan.candidates[0].check_expr == ("ExpectedMachineQuickDrainingCompletion <= 1001210 && "
                                             "ExpectedMachineQuickDrainingBadput <= 7450")


# ---- limits ----------------------------------------------------------------------------------
def test_max_concurrent_draining_stops_the_poll():
    slots = [pslot("d1", draining=True), pslot("d2", draining=True), pslot("m1")]
    plan = policy(max_concurrent_draining=2).poll(slots, NOW)
    assert plan.candidates == ()
    assert plan.why_not == ("Doing nothing, because DEFRAG_MAX_CONCURRENT_DRAINING=2 and there are 2 "
                            "draining machines.")


def test_max_concurrent_draining_is_checked_before_draining_not_per_drain():
    # HTCondor: 1 of 2 draining, so this poll may drain its whole count (10 here).
    slots = [pslot("d1", draining=True)] + [pslot(f"m{i}") for i in range(5)]
    plan = policy(max_concurrent_draining=2).poll(slots, NOW)
    assert (plan.num_to_drain, len(plan.candidates), plan.why_not) == (10, 5, "")


def test_max_whole_machines_stops_the_poll():
    slots = [pslot("w1", cpus=8), pslot("m1")]
    plan = policy(max_whole_machines=1).poll(slots, NOW)
    assert plan.why_not == "Doing nothing, because DEFRAG_MAX_WHOLE_MACHINES=1 and there are 1 whole machines."


def test_whole_machine_expression_of_a_site():
    slots = [pslot("w", cpus=8, total=16), pslot("m", cpus=2, total=16)]
    plan = policy(whole_machine_expr="Cpus >= 8").poll(slots, NOW)
    assert (plan.whole, [c.machine for c in plan.candidates]) == (("w",), ["m"])


# ---- cancellation ------------------------------------------------------------------------
def test_draining_machines_that_are_whole_are_cancelled_and_not_drained_again():
    slots = [pslot("done", cpus=8, draining=True), pslot("going", cpus=3, draining=True),
             pslot("hand", cpus=8, draining=True, reason="by command"), pslot("m1")]
    plan = policy().poll(slots, NOW)
    assert [(c.machine, c.target, c.address) for c in plan.cancels] == [("done", "done", "127.0.0.1:4000")]
    assert [c.machine for c in plan.candidates] == ["m1"]


def test_cancel_requirements_can_be_turned_off():
    plan = policy(cancel_requirements="").poll([pslot("done", cpus=8, draining=True)], NOW)
    assert plan.cancels == ()


def test_cancellation_happens_even_when_the_rate_is_zero():
    plan = policy(draining_machines_per_hour=0.0).poll([pslot("done", cpus=8, draining=True)], NOW)
    assert [c.machine for c in plan.cancels] == ["done"]


# ---- statistics -------------------------------------------------------------------------------
def test_the_first_poll_takes_stock_and_counts_no_arrivals():
    plan = policy().poll([pslot("a", cpus=8), pslot("b", cpus=8)], NOW)
    assert (plan.whole, plan.newly_drained) == (("a", "b"), ())


def test_arrivals_are_machines_newly_whole_or_no_longer_draining():
    p = policy()
    p.poll([pslot("a", draining=True), pslot("b", draining=True), pslot("c")], NOW)
    plan = p.poll([pslot("a", cpus=8), pslot("b", draining=True), pslot("c")], NOW + 600)
    assert plan.newly_drained == ("a",)           # whole now and no longer draining: counted once
    p.poll([pslot("a", cpus=1), pslot("b"), pslot("c")], NOW + 1200)
    st = p.state
    assert (st.drained_machines, st.arrivals_counted, st.arrival_sum) == (2, 1, 600.0)
    assert st.mean_drained_arrival == 1 / 600


def test_recorded_outcomes_are_published():
    p = policy()
    plan = p.poll([pslot("m1"), pslot("done", cpus=8, draining=True)], NOW)
    p.record_drain(plan.candidates[0], True, NOW)
    p.record_cancel(plan.cancels[0], True, NOW)
    a = p.ad_attrs()
    assert (a["DrainSuccesses"], a["DrainFailures"], a["CancelledDrains"], a["MachinesDraining"]) == (1, 0, 1, 1)
    assert str(a["RecentDrainsList"]) == '{ [ when = 1000000; who = "slot1@m1"; what = "graceful" ] }'
    assert str(a["RecentCancelsList"]) == '{ [ when = 1000000; who = "done" ] }'


def test_average_draining_badput_from_the_startds_totals():
    a = pslot("m1", TotalMachineDrainingBadput=800, TotalMachineDrainingUnclaimedTime=1600,
              DaemonStartTime=int(NOW) - 1000, LastHeardFrom=int(NOW))
    plan = policy().poll([a], NOW)
    assert (plan.avg_draining_badput, plan.avg_draining_unclaimed) == (0.1, 0.2)


def test_machine_of_a_slot_name():
    assert (machine_of("slot1_3@exec-001"), machine_of("exec-002")) == ("exec-001", "exec-002")


# ---- configuration ----------------------------------------------------------------------------
def test_config_defaults_are_htcondors():
    assert DefragConfig.from_param(Param.from_dict({})) == DefragConfig()
    assert DefragConfig() == DefragConfig(
        interval_s=600, draining_machines_per_hour=0.0, max_concurrent_draining=-1, max_whole_machines=-1,
        whole_machine_expr="Cpus == TotalSlotCpus", cancel_requirements="Cpus == TotalSlotCpus",
        requirements="", rank="-ExpectedMachineGracefulDrainingBadput", draining_schedule="graceful",
        draining_start_expr="FALSE")


def test_config_of_a_site():
    cfg = DefragConfig.from_param(Param.from_dict({
        "DEFRAG_INTERVAL": "600", "DEFRAG_DRAINING_MACHINES_PER_HOUR": "30",
        "DEFRAG_MAX_CONCURRENT_DRAINING": "60", "DEFRAG_MAX_WHOLE_MACHINES": "300",
        "DEFRAG_WHOLE_MACHINE_EXPR": "Cpus >= 8", "DEFRAG_DRAINING_SCHEDULE": "Quick"}))
    assert (cfg.draining_machines_per_hour, cfg.max_concurrent_draining, cfg.max_whole_machines,
            cfg.whole_machine_expr, cfg.cancel_requirements, cfg.draining_schedule, cfg.drains_per_poll) == (
        30.0, 60, 300, "Cpus >= 8", "Cpus >= 8", "quick", 5.0)


@pytest.mark.parametrize("knob, value, message", [
    ("DEFRAG_DRAINING_SCHEDULE", "slowly", "DEFRAG_DRAINING_SCHEDULE = 'slowly' is not one of graceful, quick, fast"),
    ("DEFRAG_RANK", "Cpus +", "DEFRAG_RANK = 'Cpus +' is not a valid ClassAd expression"),
    ("DEFRAG_MAX_CONCURRENT_DRAINING", "-2", "DEFRAG_MAX_CONCURRENT_DRAINING = -2 is below the minimum -1"),
    ("DEFRAG_DRAINING_MACHINES_PER_HOUR", "-1", "DEFRAG_DRAINING_MACHINES_PER_HOUR = -1 is below the minimum 0"),
])
def test_bad_knobs_are_refused_by_name(knob, value, message):
    with pytest.raises(ConfigError) as e:
        DefragConfig.from_param(Param.from_dict({knob: value}))
    assert message in str(e.value)
