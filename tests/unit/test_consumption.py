"""daemons/negotiator/matchmaker.py: consumption policies on partitionable slots.

HTCondor's consumption_policy.cpp / matchmaker.cpp: a p-slot with Consumption<Res> for every
MachineResources entry (Swap aside) is split by the negotiator; while the Requirements are
evaluated the request's Request<Res> are replaced by the consumption; the match costs
SlotWeight before minus SlotWeight after the deduction; the slot stays in play for further
matches this cycle, up to its NumClaims.
"""
import classad2
import pytest

from daemons.negotiator.matchmaker import NO_MATCH, SUBMITTER_LIMIT, Match, Matchmaker, MatchPolicy, Rejection

NOW = 1000.0

WITHIN = ("(MY.ConsumptionCpus <= MY.Cpus && MY.ConsumptionMemory <= MY.Memory "
          "&& MY.ConsumptionDisk <= MY.Disk)")
REQUEST = ("[RequestCpus = 1; RequestMemory = 2; RequestDisk = 3; "
           "Requirements = TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory]")


def pslot(name="slot1@host", **attrs):
    """The issue's p-slot; keyword arguments replace (or, as None, remove) attributes."""
    base = {
        "Name": f'"{name}"', "State": '"Unclaimed"', "ClaimId": f'"cid-{name}"', "PartitionableSlot": "true",
        "MachineResources": '"Cpus Memory Disk Swap"', "Cpus": "3", "Memory": "200", "Disk": "2000",
        "ConsumptionCpus": "quantize(target.RequestCpus, {2})",
        "ConsumptionMemory": "quantize(target.RequestMemory, {128})",
        "ConsumptionDisk": "quantize(target.RequestDisk, {1024})",
        "SlotWeight": "Cpus", "NumClaims": "10",
        "Requirements": "START && (WithinResourceLimits)", "Start": "true",
        "WithinResourceLimits": WITHIN,
    }
    for k, v in attrs.items():
        if v is None:
            base.pop(k, None)
        else:
            base[k] = v
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in base.items()) + "]")


def request(text=REQUEST):
    return classad2.ClassAd(text)


def mm(*slots, use_slot_weights=True):
    return Matchmaker.from_ads(list(slots), MatchPolicy(), NOW, use_slot_weights=use_slot_weights)


def left(m, name="slot1@host"):
    c = next(c for c in m.candidates if c.name == name)
    return (c.ad.eval("Cpus"), c.ad.eval("Memory"), c.ad.eval("Disk"))


# ---- the issue's vector ------------------------------------------------------------------------


def test_issue_vector_first_match_consumes_quantized_resources():
    m = mm(pslot())
    result = m.match(request())
    assert isinstance(result, Match)
    assert result.slot_name == "slot1@host"
    assert result.claim_id == "cid-slot1@host"
    assert result.consumed == (("Cpus", 2), ("Disk", 1024), ("Memory", 128))
    assert result.cost == 2


def test_issue_vector_pslot_stays_in_play_with_the_rest():
    m = mm(pslot())
    m.match(request())
    assert [c.name for c in m.candidates] == ["slot1@host"]
    assert left(m) == (1, 72, 976)


def test_issue_vector_second_request_does_not_fit():
    m = mm(pslot())
    assert isinstance(m.match(request()), Match)
    assert m.match(request()) == Rejection(NO_MATCH)
    assert left(m) == (1, 72, 976)


def test_request_is_restored_after_matching():
    m = mm(pslot())
    r = request()
    m.match(r)
    assert (r.eval("RequestCpus"), r.eval("RequestMemory"), r.eval("RequestDisk")) == (1, 2, 3)


def test_consumption_policy_is_what_must_fit_not_the_request():
    # RequestCpus = 1 would fit a 1-cpu slot, but the policy rounds it up to 2.
    m = mm(pslot(Cpus="1"))
    assert m.match(request()) == Rejection(NO_MATCH)


# ---- cost: SlotWeight before minus after ------------------------------------------------------


def test_memory_centric_slot_weight():
    slot = pslot(Cpus="8", Memory="4096", Disk="100000", SlotWeight="floor(Memory / 512)",
                 ConsumptionCpus="quantize(target.RequestCpus, {1})")
    m = mm(slot)
    result = m.match(request("[RequestCpus = 1; RequestMemory = 1000; RequestDisk = 3; "
                             "Requirements = TARGET.Memory >= RequestMemory]"))
    # 1000 MB quantized to 1024: floor(4096 / 512) - floor(3072 / 512) = 8 - 6
    assert result.consumed == (("Cpus", 1), ("Disk", 1024), ("Memory", 1024))
    assert result.cost == 2
    assert left(m) == (7, 3072, 98976)


def test_slot_weights_off_cost_one_per_match_on_a_plain_slot():
    slot = pslot(PartitionableSlot="false", Cpus="8", SlotWeight="Cpus")
    result = mm(slot, use_slot_weights=False).match(request())
    assert (result.cost, result.consumed) == (1.0, ())


def test_slot_weights_off_cost_one_per_match_on_a_consumption_slot():
    m = mm(pslot(Cpus="8", Memory="4096", Disk="100000"), use_slot_weights=False)
    costs = [m.match(request()).cost for _ in range(2)]
    assert costs == [1.0, 1.0]


# ---- NumClaims ------------------------------------------------------------------------------------


def test_num_claims_limits_matches_per_cycle():
    m = mm(pslot(Cpus="64", Memory="65536", Disk="1000000", NumClaims="2"))
    assert [type(m.match(request())) for _ in range(2)] == [Match, Match]
    assert m.match(request()) == Rejection(NO_MATCH)
    assert m.candidates == []


def test_plenty_of_claims_match_until_resources_run_out():
    m = mm(pslot(Cpus="6", Memory="65536", Disk="1000000", NumClaims="10"))
    assert [type(m.match(request())) for _ in range(3)] == [Match, Match, Match]
    assert m.match(request()) == Rejection(NO_MATCH)


# ---- what is and is not a consumption slot ------------------------------------------------------


def test_slot_without_consumption_for_every_resource_is_not_split():
    slot = pslot(ConsumptionDisk=None, Requirements="START")
    m = mm(slot)
    result = m.match(request())
    assert isinstance(result, Match)
    assert result.consumed == ()
    assert result.cost == 3          # the whole slot's SlotWeight (Cpus)
    assert m.candidates == []        # it leaves the cycle whole
    assert m.match(request()) == Rejection(NO_MATCH)


def test_swap_needs_no_consumption_policy():
    m = mm(pslot(MachineResources='"Cpus Memory Disk Swap"', Swap="1000"))
    assert m.match(request()).consumed == (("Cpus", 2), ("Disk", 1024), ("Memory", 128))


def test_static_slot_with_consumption_attributes_is_not_split():
    m = mm(pslot(PartitionableSlot="false", Requirements="START"))
    result = m.match(request())
    assert (result.consumed, result.cost) == ((), 3)
    assert m.candidates == []


def test_custom_resource_needs_its_own_consumption_policy():
    slot = pslot(MachineResources='"Cpus Memory Disk Swap GPUs"', GPUs="2", Requirements="START")
    m = mm(slot)
    assert m.match(request()).consumed == ()
    with_gpus = pslot(MachineResources='"Cpus Memory Disk Swap GPUs"', GPUs="2",
                      ConsumptionGPUs="quantize(target.RequestGPUs ?: 0, {1})")
    m = mm(with_gpus)
    result = m.match(request("[RequestCpus = 1; RequestMemory = 2; RequestDisk = 3; RequestGPUs = 1; "
                             "Requirements = TARGET.Cpus >= RequestCpus]"))
    assert result.consumed == (("Cpus", 2), ("Disk", 1024), ("GPUs", 1), ("Memory", 128))
    assert left(m)[0] == 1
    assert next(c for c in m.candidates).ad.eval("GPUs") == 1


# ---- policy errors ---------------------------------------------------------------------------------


def test_consumption_that_is_not_a_number_fails_that_slot_only():
    bad = pslot("slot1@bad", ConsumptionCpus='"lots"')
    good = pslot("slot1@good")
    m = mm(bad, good)
    result = m.match(request())
    assert result.slot_name == "slot1@good"
    assert list(m.errors) == ["slot1@bad"]
    assert "ConsumptionCpus" in m.errors["slot1@bad"]


def test_consumption_that_is_undefined_fails_the_slot():
    m = mm(pslot(ConsumptionMemory="target.NoSuchAttribute"))
    assert m.match(request()) == Rejection(NO_MATCH)
    assert "ConsumptionMemory" in m.errors["slot1@host"]


def test_undefined_slot_weight_costs_its_cpus_and_is_reported():
    # The fallback is HTCondor's default SLOT_WEIGHT, Cpus (3 here), as in the pool's total.
    slot = pslot(PartitionableSlot="false", SlotWeight="NoSuchAttribute", Requirements="START")
    m = mm(slot)
    result = m.match(request())
    assert result.cost == 3.0
    assert list(m.errors) == ["slot1@host"]
    assert "SlotWeight" in m.errors["slot1@host"]


# ---- submitter limit ---------------------------------------------------------------------------------


def test_submitter_limit_rejects_a_match_costing_more_than_is_allowed():
    m = mm(pslot())
    assert m.match(request(), used=1.0, allowed=2.0) == Rejection(SUBMITTER_LIMIT, limited=True)
    assert left(m) == (3, 200, 2000)      # nothing was taken


def test_submitter_limit_allows_the_first_match_of_a_spin():
    m = mm(pslot())
    result = m.match(request(), used=0.0, allowed=1.0)
    assert isinstance(result, Match)
    assert result.cost == 2


def test_submitter_limit_allows_a_match_within_the_limit():
    m = mm(pslot())
    assert isinstance(m.match(request(), used=1.0, allowed=3.0), Match)


def test_submitter_with_no_pie_gets_nothing():
    assert mm(pslot()).match(request(), used=0.0, allowed=0.0) == Rejection(SUBMITTER_LIMIT, limited=True)


def test_no_matching_slot_is_no_match_not_a_limit():
    assert mm(pslot(Cpus="1")).match(request(), used=5.0, allowed=1.0) == Rejection(NO_MATCH)


def test_cheaper_slot_within_the_limit_is_taken_over_a_better_one():
    # Both match; by name slot1@a would win, but its cost of 2 is over the limit while slot1@b's 1 is not.
    expensive = pslot("slot1@a")
    cheap = pslot("slot1@b", ConsumptionCpus="quantize(target.RequestCpus, {1})")
    result = mm(expensive, cheap).match(request(), used=1.0, allowed=2.0)
    assert (result.slot_name, result.cost) == ("slot1@b", pytest.approx(1.0))


def test_undefined_slot_weight_on_a_consumption_slot_falls_back_to_cpus_and_is_reported():
    # HTCondor's default SLOT_WEIGHT is Cpus: the match costs the 2 cpus it consumes.
    m = mm(pslot(SlotWeight="NoSuchAttribute"))
    result = m.match(request())
    assert result.consumed == (("Cpus", 2), ("Disk", 1024), ("Memory", 128))
    assert result.cost == 2.0
    assert "SlotWeight" in m.errors["slot1@host"]
