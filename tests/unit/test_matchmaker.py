"""daemons/negotiator/matchmaker.py: candidates, two-way matching, rank order."""
import classad2

from daemons.negotiator.matchmaker import NO_MATCH, Match, Matchmaker, MatchPolicy, Rejection

NOW = 5000.0


def slot(name, memory, state="Unclaimed", claim_id="cid-", requirements="true", **extra):
    attrs = {"MyType": '"Machine"', "Name": f'"{name}"', "State": f'"{state}"', "Cpus": "1",
             "Memory": str(memory), "Requirements": requirements, "StartdIpAddr": '"<10.0.0.1:9618>"'}
    if claim_id is not None:
        attrs["ClaimId"] = f'"{claim_id}{name}"'
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def request(requirements="TARGET.Memory >= RequestMemory", rank=None, memory=100, **extra):
    attrs = {"MyType": '"Job"', "Owner": '"alice"', "RequestMemory": str(memory), "Requirements": requirements}
    if rank is not None:
        attrs["Rank"] = rank
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def mm(slots, **policy):
    return Matchmaker.from_ads(slots, MatchPolicy(**policy), NOW)


def test_only_unclaimed_slots_with_a_claim_id_are_candidates():
    m = mm([slot("s1@a", 1000), slot("s2@a", 1000, state="Claimed"), slot("s3@a", 1000, claim_id=None),
            slot("s4@a", 1000, claim_id=None, Capability='"cap-s4"')])
    assert [(c.name, c.claim_id) for c in m.candidates] == [("s1@a", "cid-s1@a"), ("s4@a", "cap-s4")]
    assert m.ignored == {"claimed": 1, "no claim id": 1}


def test_match_carries_claim_id_slot_and_address():
    result = mm([slot("s1@a", 1000)]).match(request())
    assert isinstance(result, Match)
    assert (result.slot_name, result.claim_id, result.startd_address) == ("s1@a", "cid-s1@a", "<10.0.0.1:9618>")
    assert classad2.ClassAd(result.slot_ad_text).eval("Memory") == 1000


def test_job_requirements_are_enforced():
    m = mm([slot("s1@a", 100), slot("s2@a", 4000)])
    assert mm([slot("s1@a", 100)]).match(request(memory=2000)) == Rejection(NO_MATCH)
    assert m.match(request(memory=2000)).slot_name == "s2@a"


def test_slot_requirements_are_enforced():
    m = mm([slot("s1@a", 1000, requirements='TARGET.Owner == "bob"'), slot("s2@a", 1000)])
    assert m.match(request()).slot_name == "s2@a"
    assert m.match(request()) == Rejection(NO_MATCH)


def test_job_rank_picks_the_biggest_slot():
    m = mm([slot("s1@a", 1000), slot("s2@a", 8000), slot("s3@a", 2000)])
    result = m.match(request(rank="TARGET.Memory"))
    assert (result.slot_name, result.ranks) == ("s2@a", (0.0, 8000.0, 0.0))


def test_without_rank_the_first_slot_by_name_wins():
    m = mm([slot("s3@a", 1000), slot("s1@a", 1000), slot("s2@a", 1000)])
    assert [m.match(request()).slot_name for _ in range(3)] == ["s1@a", "s2@a", "s3@a"]


def test_pre_job_rank_outranks_job_rank():
    m = mm([slot("s1@a", 1000), slot("s2@a", 8000)], pre_job_rank="-MY.Memory")
    result = m.match(request(rank="TARGET.Memory"))
    assert (result.slot_name, result.ranks) == ("s1@a", (-1000.0, 1000.0, 0.0))


def test_post_job_rank_breaks_job_rank_ties():
    m = mm([slot("s1@a", 1000, Mips="10"), slot("s2@a", 1000, Mips="50")], post_job_rank="MY.Mips")
    assert m.match(request(rank="1")).slot_name == "s2@a"


def test_a_matched_slot_leaves_the_cycle():
    m = mm([slot("s1@a", 1000)])
    assert m.match(request()).slot_name == "s1@a"
    assert m.match(request()) == Rejection(NO_MATCH)
    assert (m.available, m.considered) == (0, 2)


def test_current_time_is_the_cycle_time():
    m = mm([slot("s1@a", 1000, requirements=f"CurrentTime == {int(NOW)}")])
    assert m.match(request()).slot_name == "s1@a"


def test_boolean_ranks_count_as_one_and_zero():
    """matchmaker.cpp calculateRanks reads every rank with EvalFloat, which takes a boolean
    as 1.0 or 0.0: the job's Rank, NEGOTIATOR_PRE_JOB_RANK and NEGOTIATOR_POST_JOB_RANK."""
    slots = [slot("s1@a", 1000, DataSet='"A"'), slot("s2@a", 1000, DataSet='"B"')]
    r = mm(slots, pre_job_rank='MY.DataSet == "B"').match(request())
    assert (r.slot_name, r.ranks) == ("s2@a", (1.0, 0.0, 0.0))
    r = mm(slots).match(request(rank='TARGET.DataSet == "B"'))
    assert (r.slot_name, r.ranks) == ("s2@a", (0.0, 1.0, 0.0))
    r = mm(slots, post_job_rank='MY.DataSet == "B"').match(request())
    assert (r.slot_name, r.ranks) == ("s2@a", (0.0, 0.0, 1.0))
