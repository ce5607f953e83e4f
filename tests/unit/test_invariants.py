"""The fault experiment's invariant checker (pure): each violation it exists for is detected."""
from __future__ import annotations

from daemons.cli.experiments.invariants import (ClockWindow, JobRecord, Sample, SlotView, Verdict, check_jobs,
                                                check_logs, check_overlaps, check_usage, check_views,
                                                recovery_time, slot_seconds, summarize_recovery)


def _done(job: str, slot: str, start: float, end: float) -> JobRecord:
    return JobRecord(job, 4, slot, start, end, end - start)


CLEAN = [_done("1.0", "slot1_1@a", 0, 100), _done("1.1", "slot1_1@a", 100, 180), _done("1.2", "slot1_2@a", 5, 50)]


def test_a_clean_history_passes_every_check():
    v = Verdict()
    check_jobs(v, ["1.0", "1.1", "1.2"], CLEAN, {})
    check_overlaps(v, CLEAN)
    check_views(v, {"slot1@a": SlotView("Unclaimed")}, {"slot1@a": SlotView("Unclaimed")}, {}, {})
    check_usage(v, 225.0, 230.0, CLEAN, 0.1)
    check_logs(v, {"SchedLog": "all fine\n"})
    assert v.ok and (v.lost, v.duplicated, v.unfinished, v.overlapping, v.view_mismatches, v.tracebacks) == \
        ([], [], [], [], [], [])
    assert v.completed == 3 and v.submitted == 3
    assert all(line.startswith("ok") for line in v.lines())


def test_a_lost_job_is_detected():
    v = Verdict()
    check_jobs(v, ["1.0", "1.1", "1.2", "1.3"], CLEAN, {})
    assert v.lost == ["1.3"] and not v.ok
    # A job removed that nobody removed is as bad.
    v = Verdict()
    check_jobs(v, ["1.0", "1.1", "1.2", "2.0"], CLEAN + [JobRecord("2.0", 3)], {})
    assert v.wrong_end == ["2.0 removed, but no rm was asked"] and not v.ok


def test_a_job_completed_twice_is_detected():
    v = Verdict()
    history = CLEAN + [_done("1.1", "slot1_3@a", 300, 380)]
    check_jobs(v, ["1.0", "1.1", "1.2"], history, {})
    assert v.duplicated == ["1.1"] and v.lost == [] and not v.ok


def test_removed_jobs_end_removed_once_and_never_complete_after_a_confirmed_rm():
    history = CLEAN + [JobRecord("2.0", 3), JobRecord("2.1", 3), _done("2.2", "s@b", 0, 10), JobRecord("2.3", 3)]
    v = Verdict()
    check_jobs(v, ["1.0", "1.1", "1.2", "2.0", "2.1", "2.2", "2.3"], history, {},
               removed={"2.0", "2.2"}, maybe_removed={"2.1"})
    assert v.lost == [] and v.removed == 3 and v.completed == 4
    assert v.wrong_end == ["2.2 completed after its rm was confirmed", "2.3 removed, but no rm was asked"]
    assert not v.ok
    v = Verdict()      # removed and then completed as well: two ends
    check_jobs(v, ["2.0"], [JobRecord("2.0", 3), _done("2.0", "s@b", 0, 10)], {}, maybe_removed={"2.0"})
    assert v.duplicated == ["2.0"]


def test_an_unfinished_job_is_not_lost_but_fails_the_run():
    v = Verdict()
    check_jobs(v, ["1.0", "1.1", "1.2", "1.10"], CLEAN, {"1.10": 2})
    assert v.unfinished == ["1.10"] and v.lost == [] and not v.ok


def test_two_jobs_on_one_slot_at_once_are_detected():
    v = Verdict()
    history = CLEAN + [_done("2.0", "slot1_1@a", 150, 250)]    # inside 1.1's run, and past it
    check_overlaps(v, history)
    assert v.overlapping == [("slot1_1@a", "1.1", "2.0")] and not v.ok


def test_whole_second_stamps_are_not_overlaps():
    v = Verdict()
    check_overlaps(v, [_done("1.0", "s@a", 0.0, 100.0), _done("1.1", "s@a", 99.4, 180.0)])
    assert v.overlapping == []


def test_an_overlap_under_a_clock_fault_on_its_startd_is_not_compared():
    history = CLEAN + [_done("2.0", "slot1_1@a", 150, 250)]
    v = Verdict()
    check_overlaps(v, history, {"slot1_1@a": "startd1"}, [ClockWindow("startd1", 200, 300, 60)])
    assert v.overlapping == [] and v.overlap_unchecked == 1
    v = Verdict()   # a clock fault elsewhere, or long before, changes nothing
    check_overlaps(v, history, {"slot1_1@a": "startd1"},
                   [ClockWindow("startd2", 200, 300, 60), ClockWindow("startd1", 1000, 1100, 60)])
    assert v.overlapping == [("slot1_1@a", "1.1", "2.0")]


def test_views_that_disagree_are_each_named():
    startd = {"s1@a": SlotView("Claimed", "1.0", True), "s2@a": SlotView("Claimed", "", True),
              "s3@a": SlotView("Unclaimed"), "s4@a": SlotView("Claimed", "1.4", True)}
    collector = {"s1@a": SlotView("Claimed", "1.0", True), "s2@a": SlotView("Claimed", "", True),
                 "s3@a": SlotView("Claimed", "1.3", True), "s5@a": SlotView("Unclaimed")}
    claims = {"s1@a": "1.0", "s4@a": "1.4", "s9@a": "1.9"}
    running = {"1.0": "s1@a", "1.9": "s9@a", "1.4": "s1@a"}
    v = Verdict()
    check_views(v, startd, collector, claims, running)
    assert v.view_mismatches == [
        "s3@a: startd says Unclaimed -, collector says Claimed 1.3",
        "s4@a: the startd has it (Claimed) but the collector does not",
        "s5@a: in the collector (Unclaimed) but no startd has it",
        "s9@a: the schedd holds a claim the startd does not",
        "s2@a: the startd holds a claim the schedd does not (a leaked claim)",
        "s4@a: the startd runs job 1.4, the schedd says it runs on s1@a",
        "job 1.4: the schedd says it runs on s1@a, the startd runs 1.0 there",
        "job 1.9: the schedd says it runs on s9@a, the startd has no such slot",
    ]
    assert not v.ok


def test_accountant_usage_against_the_claimed_slot_time_and_the_jobs():
    v = Verdict()
    check_usage(v, 240.0, 250.0, CLEAN, 0.1)       # jobs: 100 + 80 + 45 = 225 s
    assert v.usage_ok and round(v.usage_error, 3) == -0.04 and round(v.usage_over_jobs, 3) == 0.067
    check_usage(v, 300.0, 250.0, CLEAN, 0.1)       # more than the slots were claimed: wrong
    assert not v.usage_ok and not v.ok
    check_usage(v, 190.0, 200.0, CLEAN, 0.1)       # less than the jobs ran: usage lost
    assert not v.usage_ok
    check_usage(v, None, 250.0, CLEAN, 0.1)
    assert v.usage_ok and v.usage_error is None


def test_slot_seconds_integrates_a_sampled_count_holding_values_over_gaps():
    assert slot_seconds([(0, 2), (10, 4), (20, None), (30, 0), (40, 5)]) == 2 * 10 + 4 * 10 + 4 * 10 + 0
    assert slot_seconds([(0, None), (10, 1), (15, 1)]) == 5
    assert slot_seconds([]) == 0.0


def test_tracebacks_in_any_log_are_found_with_their_exception():
    logs = {"SchedLog": "11/25/26 01:00:00 fine\n11/25/26 01:00:01 ERROR: oops\nTraceback (most recent call last):\n"
                        '  File "x.py", line 1, in f\n    boom()\nKeyError: \'ClaimId\'\n11/25/26 01:00:02 more\n',
            "StartLog": "nothing\n"}
    v = Verdict()
    check_logs(v, logs)
    assert v.tracebacks == ["SchedLog: KeyError: 'ClaimId'"] and not v.ok


def test_recovery_is_the_time_from_the_heal_back_to_the_level_before():
    samples = [Sample(0, 100, 500), Sample(10, 100, 500), Sample(20, 40, 560), Sample(30, 50, 550),
               Sample(40, None, None), Sample(50, 95, 505), Sample(60, 100, 500)]
    assert recovery_time(samples, 15, 25) == 25.0        # 95 >= 0.9 * 100 at t = 50
    assert recovery_time(samples, 15, 25, fraction=1.0) == 35.0
    # When less work is left than ran before, all of it running is recovered.
    tail = [Sample(0, 100, 500), Sample(10, 0, 30), Sample(20, 30, 0)]
    assert recovery_time(tail, 5, 10) == 10.0
    assert recovery_time([Sample(20, 100, 0)], 10, 15) is None      # nothing before the fault
    assert recovery_time([Sample(0, 100, 500), Sample(10, 10, 590)], 5, 8) is None   # never back


def test_recovery_summary_by_kind():
    assert summarize_recovery({"kill": [10.0, 30.0, None], "delay": [0.0]}) == {
        "delay": {"n": 1, "recovered": 1, "median": 0.0, "max": 0.0},
        "kill": {"n": 3, "recovered": 2, "median": 20.0, "max": 30.0}}
