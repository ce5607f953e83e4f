"""daemons/negotiator/cycle.py: one negotiation cycle's decisions, driven session by session.

The caller plays the schedds: the cycle yields a session per submitter to negotiate with,
the test feeds it resource requests and sends back how the session ended. HTCondor's
matchmaker.cpp (negotiateWithGroup, negotiate, matchmakingAlgorithm) is the reference.
"""
from __future__ import annotations

import math

import classad2

from daemons.core import ads
from daemons.negotiator import groups as hgq
from daemons.negotiator.accountant import Accountant, AccountantConfig
from daemons.negotiator.cycle import DONE, ERROR, Cycle, CyclePolicy, Outcome, Submitter
from daemons.negotiator.matchmaker import Matchmaker, MatchPolicy
from daemons.negotiator.preemption import Preemption, PreemptionConfig

NOW = 10_000.0


def slot(n: int, owner: str = "", rank: str = "0", current_rank: float = 0.0, start: str = "true") -> str:
    a = {"MyType": "Machine", "Name": f"slot{n}@h", "Machine": "h", "SlotID": n, "Cpus": 1, "Memory": 1024,
         "State": "Claimed" if owner else "Unclaimed", "ClaimId": f"c{n}", "StartdIpAddr": "<h:1>",
         "Start": ads.Expr(start), "Requirements": ads.Expr("START"), "Rank": ads.Expr(rank),
         "CurrentRank": current_rank, "SlotWeight": ads.Expr("Cpus")}
    if owner:
        a.update({"RemoteOwner": owner, "RemoteUser": owner, "JobId": f"{n}.0"})
    return ads.ad_text(a)


def request(owner: str, ac: int = 1, cluster: int = 1) -> classad2.ClassAd:
    return classad2.ClassAd(ads.text_of_exprs({
        "ClusterId": str(cluster), "ProcId": "0", "AutoClusterId": str(ac), "Owner": f'"{owner}"',
        "RequestCpus": "1", "RequestMemory": "1", "Requirements": "TARGET.Cpus >= 1"}))


def cycle(slots: list[str], submitters: list[Submitter], acct: Accountant | None = None, *,
          preemption: PreemptionConfig | None = None, policy: CyclePolicy | None = None) -> Cycle:
    acct = acct or Accountant(AccountantConfig())
    pol = policy or CyclePolicy()
    cyc = Cycle(pol, acct, None, submitters, float(len(slots)), 1.0)
    pre = Preemption(preemption or PreemptionConfig(consider=pol.consider_preemption))
    cyc.mm = Matchmaker.from_ads([classad2.ClassAd(t) for t in slots], MatchPolicy(), NOW, texts=slots,
                                 preemption=pre, remote_attrs=cyc.remote_attrs)
    return cyc


def run(cyc: Cycle, requests: dict[str, list[tuple[classad2.ClassAd, int]]],
        as_text: bool = False) -> list[tuple[str, list[Outcome], str]]:
    """Drive every session: each submitter's schedd offers its requests in order (as the
    text a schedd sends, if `as_text`)."""
    out = []
    gen = cyc.sessions()
    try:
        session = next(gen)
        while True:
            for i, (ad, count) in enumerate(requests.get(session.name, [])):
                if as_text:
                    session.serve_text(f"{session.name}:{i}", ads.one_line(repr(ad)), count, "a request")
                else:
                    session.serve(f"{session.name}:{i}", classad2.ClassAd(repr(ad)), count)
            result = session.result()
            out.append((session.name, session.take_outcomes(), result))
            session = gen.send(result)
    except StopIteration:
        pass
    return out


def summary(sessions) -> list[tuple[str, list[str], str]]:
    return [(name, [o.match.slot_name if o.match else o.reason for o in outcomes], result)
            for name, outcomes, result in sessions]


def test_equal_users_share_the_pool_in_one_spin():
    subs = [Submitter("a@d", "s:1", idle=4), Submitter("b@d", "s:1", idle=4)]
    cyc = cycle([slot(i) for i in range(1, 5)], subs)
    got = summary(run(cyc, {"a@d": [(request("a"), 4)], "b@d": [(request("b"), 4)]}))
    # Shares of 2 each; a submitter over its limit in the first spin is negotiated for
    # startd rank only (negotiate: only_consider_startd_rank), which finds nothing here.
    assert got == [("a@d", ["slot1@h", "slot2@h", "no match found"], "resume"),
                   ("b@d", ["slot3@h", "slot4@h", "no match found"], "resume")]
    assert cyc.last_limits == {"a@d": (0.5, 2.0), "b@d": (0.5, 2.0)}
    assert (cyc.counts.matches, cyc.counts.rejections, cyc.counts.considered) == (4, 2, 6)
    # Each match stays charged until its slot's ad shows it (the accountant's pending matches).
    assert [(p.slot, p.submitter, p.cost, p.at) for p in cyc.accountant.pending] == [
        ("slot1@h", "a@d", 1.0, NOW), ("slot2@h", "a@d", 1.0, NOW), ("slot3@h", "b@d", 1.0, NOW),
        ("slot4@h", "b@d", 1.0, NOW)]


def test_every_submitter_is_negotiated_and_rejected_when_the_pool_is_full():
    # One slot, held by someone; three submitters with idle jobs all get a session and a reason.
    subs = [Submitter(f"{u}@d", "s:1", idle=1) for u in ("a", "b", "c")] + [Submitter("x@d", "s:1", running=1)]
    cyc = cycle([slot(1, owner="x@d")], subs)
    got = summary(run(cyc, {f"{u}@d": [(request(u), 1)] for u in ("a", "b", "c")}))
    assert got == [(f"{u}@d", ["PREEMPTION_REQUIREMENTS == False"], DONE) for u in ("a", "b", "c")]
    assert cyc.counts.order == ["<none>/a@d", "<none>/b@d", "<none>/c@d"]


def test_without_preemption_claimed_slots_are_not_candidates_and_idle_less_submitters_are_left_out():
    subs = [Submitter("a@d", "s:1", idle=1), Submitter("x@d", "s:1", running=1)]
    cyc = cycle([slot(1, owner="x@d")], subs, policy=CyclePolicy(consider_preemption=False))
    assert summary(run(cyc, {"a@d": [(request("a"), 1)]})) == [("a@d", ["no match found"], DONE)]
    assert cyc.last_limits == {"a@d": (1.0, 1.0)}


def test_user_priority_preemption_when_preemption_requirements_hold():
    acct = Accountant(AccountantConfig())
    acct.check_matches([("hog@d", [], 1.0, ""), ("hog@d", [], 1.0, "")])
    acct.set_priority("hog@d", 5.0)
    subs = [Submitter("new@d", "s:1", idle=1), Submitter("hog@d", "s:1", running=2)]
    # Daemons evaluate with HTCondor's old ClassAd semantics (a name MY lacks is TARGET's, once
    # htcondor2's configuration is loaded); a unit test without it says TARGET. itself.
    req = PreemptionConfig(requirements="RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2", rank="-SlotID")
    cyc = cycle([slot(1, owner="hog@d"), slot(2, owner="hog@d")], subs, acct, preemption=req)
    sessions = run(cyc, {"new@d": [(request("new"), 1)]})
    (name, outcomes, result), = sessions
    m = outcomes[0].match
    # PREEMPTION_RANK -SlotID prefers preempting slot1.
    assert (name, m.slot_name, m.preempting, m.remote_prio, result) == ("new@d", "slot1@h", "hog@d", 5000.0, DONE)
    assert (acct.weighted_used("hog@d"), acct.weighted_used("new@d")) == (1.0, 1.0)
    assert cyc.counts.preemptions == 1


def test_the_same_user_is_never_preempted_for_priority():
    subs = [Submitter("hog@d", "s:1", idle=1, running=1)]
    cyc = cycle([slot(1, owner="hog@d")], subs, preemption=PreemptionConfig(requirements=""))
    assert summary(run(cyc, {"hog@d": [(request("hog"), 1)]})) == [("hog@d", ["no match found"], DONE)]


def test_startd_rank_preempts_even_over_the_submitter_limit():
    # b's share is 0 (it holds nothing but a is far better); the slot prefers b's jobs.
    acct = Accountant(AccountantConfig())
    acct.set_factor("b@d", 1e9)
    subs = [Submitter("a@d", "s:1", running=1), Submitter("b@d", "s:1", idle=1)]
    rank = 'TARGET.Owner == "b"'
    cyc = cycle([slot(1, owner="a@d", rank=rank, current_rank=0.0)], subs, acct)
    (name, outcomes, _), = run(cyc, {"b@d": [(request("b"), 1)]})
    m = outcomes[0].match
    assert (m.slot_name, m.preempting, m.old_rank, m.new_rank) == ("slot1@h", "a@d", 0.0, 1.0)


def test_a_failed_session_costs_only_its_submitter():
    subs = [Submitter("bad@d", "s:2", idle=1), Submitter("good@d", "s:1", idle=1)]
    cyc = cycle([slot(1), slot(2)], subs)
    gen = cyc.sessions()
    first = next(gen)
    assert first.name == "bad@d"
    second = gen.send(ERROR)
    assert second.name == "good@d"
    second.serve("r", request("good"), 1)
    assert [o.match.slot_name for o in second.take_outcomes()] == ["slot1@h"]
    assert "  Error: Ignoring submitter for this cycle" in cyc.lines


def _lazy(cyc: Cycle) -> list[int]:
    """`cyc` with its matchmaker built on first use; the list counts the builds."""
    built, eager = [], cyc.mm

    def build() -> Matchmaker:
        built.append(1)
        return eager
    cyc.matchmaker_later(build)
    return built


def test_slots_are_grouped_only_when_a_request_is_served():
    # Every schedd answers with no request (its idle jobs all wait for claims already
    # matched): the cycle ends without grouping the slots.
    subs = [Submitter("a@d", "s:1", idle=3), Submitter("b@d", "s:2", idle=3)]
    cyc = cycle([slot(i) for i in range(1, 4)], subs)
    built = _lazy(cyc)
    got = summary(run(cyc, {}))
    assert got == [("a@d", [], DONE), ("b@d", [], DONE)]
    assert built == [] and cyc.built_mm is None

    # With requests the matchmaker is built once, at the first, and decides as one built before.
    eager = summary(run(cycle([slot(i) for i in range(1, 4)], subs), {"b@d": [(request("b"), 2)],
                                                                      "a@d": [(request("a"), 2)]}))
    cyc = cycle([slot(i) for i in range(1, 4)], subs)
    built = _lazy(cyc)
    assert summary(run(cyc, {"b@d": [(request("b"), 2)], "a@d": [(request("a"), 2)]})) == eager
    assert built == [1] and cyc.built_mm is not None
    assert [m[0] for _, m, _ in eager] == ["slot1@h", "slot2@h"]


def test_an_ended_cycle_is_freed_without_the_cyclic_collector():
    # The `later` function refers to the cycle (as the negotiator's does, for remote_attrs):
    # ended, the cycle and what the function holds go as soon as the last reference does.
    import gc
    import weakref
    subs = [Submitter("a@d", "s:1", idle=1)]
    cyc = cycle([slot(1)], subs)
    eager = cyc.mm

    def later_of(c: Cycle):
        return lambda: (c.remote_attrs, eager)[1]
    cyc.matchmaker_later(later_of(cyc))
    run(cyc, {})
    gone = weakref.ref(cyc)
    collecting = gc.isenabled()
    gc.disable()
    try:
        cyc.end()
        del cyc
        assert gone() is None
    finally:
        if collecting:
            gc.enable()


def test_every_group_is_negotiated_when_the_pool_is_full():
    groups = hgq.GroupsConfig(groups=tuple(hgq.GroupSpec(g, False, 1 / 3, True, False) for g in ("a", "b", "c")))
    subs = [Submitter(f"{g}.u@d", "s:1", idle=1, weighted_idle=1) for g in ("a", "b", "c")]
    cyc = cycle([slot(1)], subs, policy=CyclePolicy(groups=groups))
    got = summary(run(cyc, {f"{g}.u@d": [(request(g), 1)] for g in ("a", "b", "c")}))
    # Round 1: each group in turn; a takes the only slot, b and c are told why not. Round 2
    # (GROUP_QUOTA_MAX_ALLOCATION_ROUNDS) gives a the allocation the others left.
    assert got == [("a.u@d", ["slot1@h"], "resume"), ("b.u@d", ["no match found"], DONE),
                   ("c.u@d", ["no match found"], DONE), ("a.u@d", ["no match found"], "resume")]
    assert [line for line in cyc.lines if "BEGIN NEGOTIATION" in line][:3] == [
        f"Group {g} - BEGIN NEGOTIATION with a quota limit of {1 / 3:g}" for g in ("a", "b", "c")]


def test_shares_come_from_every_submitter_with_preemption_considered():
    # A submitter with nothing idle still holds its share of the pie (no filter_submitters_no_idle).
    subs = [Submitter("a@d", "s:1", idle=4), Submitter("x@d", "s:1", running=0)]
    cyc = cycle([slot(i) for i in range(1, 5)], subs)
    run(cyc, {"a@d": [(request("a"), 4)]})
    assert cyc.last_limits["a@d"] == (0.5, 2.0)
    assert math.isclose(sum(share for share, _ in cyc.last_limits.values()), 1.0)


def test_a_partly_matched_request_counts_its_matches_and_its_rejection():
    # One request for three jobs, two slots: two matches and a rejection, three ads considered
    # (HTCondor's num_jobs_considered counts every job it was asked about).
    cyc = cycle([slot(1), slot(2)], [Submitter("a@d", "s:1", idle=3)])
    got = summary(run(cyc, {"a@d": [(request("a"), 3)]}))
    assert got == [("a@d", ["slot1@h", "slot2@h", "no match found"], "resume")]   # its whole share used
    assert (cyc.counts.requests, cyc.counts.considered, cyc.counts.matches, cyc.counts.rejections) == (1, 3, 2, 1)


def test_a_request_text_served_again_in_a_later_spin_is_read_once_and_decides_alike():
    """The schedd sends an idle job's request again in each spin: the negotiator parses that
    text once per cycle and submitter, and the cycle decides as it does with fresh ads."""
    subs = [Submitter("a@d", "s:1", idle=6), Submitter("b@d", "s:1", idle=1)]
    reqs = {"a@d": [(request("a", ac=1, cluster=1), 3), (request("a", ac=2, cluster=2), 3)],
            "b@d": [(request("b", ac=3, cluster=3), 1)]}
    fresh = run(cycle([slot(i) for i in range(1, 8)], subs), reqs)
    cyc = cycle([slot(i) for i in range(1, 8)], subs)
    read = run(cyc, reqs, as_text=True)
    assert summary(read) == summary(fresh)
    assert [name for name, _, _ in fresh] == ["a@d", "b@d", "a@d"]   # a negotiates again in a second spin
    assert sum(o.match is not None for _, outcomes, _ in read for o in outcomes) == 7
    assert len(cyc.requests_read) == 3 and cyc.counts.requests > 3


def test_a_request_text_that_does_not_parse_fails_naming_it():
    cyc = cycle([slot(1)], [Submitter("a@d", "s:1", idle=1)])
    session = next(cyc.sessions())
    try:
        session.serve_text("r1", "[ Requirements = ( ]", 1, "resource request r1")
    except ads.AdError as e:
        assert "resource request r1" in str(e)
    else:
        raise AssertionError("a malformed request was served")


def test_a_request_of_a_rejected_autocluster_is_skipped_unread():
    """A later request of an autocluster the session already rejected is skipped before its
    ad is parsed (HTCondor's schedd does not send it): one that would not parse is no error
    then, while one of another autocluster is parsed, and refused naming it."""
    cyc = cycle([slot(1)], [Submitter("a@d", "s:1", idle=3)])
    session = next(cyc.sessions())
    session.serve_text("r1", '[ ClusterId = 1; ProcId = 0; AutoClusterId = 7; Owner = "a"; RequestCpus = 1; '
                             'RequestMemory = 1; Requirements = TARGET.Cpus >= 2 ]', 1, "resource request r1")
    session.serve_text("r2", "[ ClusterId = 1; ProcId = 1; AutoClusterId = 7; Requirements = ( ]", 1,
                       "resource request r2")
    assert [(o.request_id, o.match) for o in session.take_outcomes()] == [("r1", None)]
    try:
        session.serve_text("r3", "[ ClusterId = 2; ProcId = 0; AutoClusterId = 8; Requirements = ( ]", 1,
                           "resource request r3")
    except ads.AdError as e:
        assert "resource request r3" in str(e)
    else:
        raise AssertionError("a malformed request of a live autocluster was served")
