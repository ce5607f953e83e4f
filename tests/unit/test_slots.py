"""daemons/startd/slots.py: claims, dynamic slots, emulated jobs, leases, slot ads."""
import classad2
import pytest

from daemons.core import ads
from daemons.core.config import Param
from daemons.startd.config import Resources, SlotTypeSpec, StartdConfig, read_startd_config
from daemons.startd.machines import Startd
from daemons.startd.slots import job_duration

NOW = 1000.0
SCHEDD = "127.0.0.1:4000"
TEN = Resources(cpus=10, memory=16384, disk=1048576)


def job(**extra):
    attrs = {"ClusterId": "1", "ProcId": "0", "RequestCpus": "1", "RequestMemory": "100",
             "RequestDisk": "1000", "Requirements": "true", "Cmd": '"/bin/sleep"', "Args": '"60"'}
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def pslot_startd(**cfg):
    c = StartdConfig(machine=TEN, slot_types=(SlotTypeSpec(1, 1, True, TEN),), **cfg)
    return Startd(["host"], c, "127.0.0.1:9618", NOW)


def static_startd(**cfg):
    machine = Resources(cpus=2, memory=2048, disk=20000)
    c = StartdConfig(machine=machine, slot_types=(SlotTypeSpec(1, 2, False, Resources(1, 1024, 10000)),), **cfg)
    return Startd(["host"], c, "127.0.0.1:9618", NOW)


def claim(m, slot, j=None, now=NOW):
    return m.request_claim(slot, j if j is not None else job(), "schedd@sub", SCHEDD, "alice@example.org", now)


def test_claim_carves_a_rounded_dynamic_slot():
    m = pslot_startd().machines["host"]
    out = claim(m, m.slots["slot1"])
    assert out.ok is True
    assert out.slot_name == "slot1_1@host"
    d = m.slots["slot1_1"]
    assert (d.size.cpus, d.size.memory, d.size.disk) == (1, 128, 1024)
    assert (out.slot_ad["Cpus"], out.slot_ad["Memory"], out.slot_ad["Disk"]) == (1, 128, 1024)
    assert out.slot_ad["State"] == "Claimed"


def test_claim_returns_the_leftover_pslot():
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    out = claim(m, p)
    assert out.leftover_ad["Name"] == "slot1@host"
    assert (out.leftover_ad["Cpus"], out.leftover_ad["Memory"], out.leftover_ad["Disk"]) == (9, 16256, 1047552)
    assert out.leftover_claim_id == p.capability
    assert out.leftover_claim_id != ""


def test_no_leftover_without_claim_partitionable_leftovers():
    m = pslot_startd(claim_partitionable_leftovers=False).machines["host"]
    out = claim(m, m.slots["slot1"])
    assert (out.ok, out.leftover_ad, out.leftover_claim_id) == (True, None, "")


def test_ten_claims_fill_ten_cpus_and_the_eleventh_is_refused():
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    names = [claim(m, p).slot_name for _ in range(10)]
    assert names == [f"slot1_{i}@host" for i in range(1, 11)]
    out = claim(m, p)
    assert (out.ok, out.claim_id) == (False, "")
    assert p.free.cpus == 0
    assert sorted(p.children) == list(range(1, 11))


def test_request_that_rounds_past_the_leftover_is_refused_as_insufficient():
    small = Resources(cpus=2, memory=1000, disk=100000)
    c = StartdConfig(machine=small, slot_types=(SlotTypeSpec(1, 1, True, small),))
    m = Startd(["host"], c, "127.0.0.1:9618", NOW).machines["host"]
    # 1000 MB fits WithinResourceLimits but rounds up to 1024 MB.
    out = claim(m, m.slots["slot1"], job(RequestMemory="1000"))
    assert out.ok is False
    assert out.reason == ("slot1@host: insufficient resources "
                          "(want 1 cpus/1024 MB/1024 KB, 2/1000/100000 left)")


def test_released_sub_id_is_reused_lowest_first():
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    for _ in range(5):
        claim(m, p)
    m.release(m.slots["slot1_3"], NOW + 1, "done")
    assert "slot1_3" not in m.slots
    assert claim(m, p).slot_name == "slot1_3@host"
    assert claim(m, p).slot_name == "slot1_6@host"


def test_static_slot_claim_and_refusal_when_claimed():
    m = static_startd().machines["host"]
    assert sorted(m.slots) == ["slot1", "slot2"]
    s = m.slots["slot1"]
    out = claim(m, s)
    assert (out.ok, out.slot_name) == (True, "slot1@host")
    assert (s.state, s.activity) == ("Claimed", "Idle")
    again = claim(m, s)
    assert again.ok is False
    assert again.reason == "slot1@host is Claimed/Idle, not Unclaimed"


def test_start_false_refuses_a_static_slot():
    m = static_startd(start="False").machines["host"]
    s = m.slots["slot1"]
    out = claim(m, s)
    assert out.ok is False
    assert (s.state, s.claim) == ("Unclaimed", None)


def test_start_false_refuses_a_partitionable_slot():
    m = pslot_startd(start="False").machines["host"]
    out = claim(m, m.slots["slot1"])
    assert out.ok is False
    assert sorted(m.slots) == ["slot1"]


def test_start_expression_sees_the_job():
    m = static_startd(start='TARGET.Owner == "bob"').machines["host"]
    assert claim(m, m.slots["slot1"], job(Owner='"alice"')).ok is False
    assert claim(m, m.slots["slot2"], job(Owner='"bob"')).ok is True


def test_activate_runs_the_job_for_its_duration():
    m = pslot_startd().machines["host"]
    claim(m, m.slots["slot1"])
    d = m.slots["slot1_1"]
    assert m.activate(d, job(), NOW + 5) == (True, "", NOW + 65)
    assert (d.state, d.activity) == ("Claimed", "Busy")
    assert d.claim.job_id == "1.0"
    assert m.activate(d, job(), NOW + 6)[0] is False


def test_job_duration_attribute_wins():
    assert job_duration(job(Duration="30")) == 30.0


def test_job_duration_of_sleep_seconds():
    assert job_duration(job()) == 60.0


def test_job_duration_of_sleep_with_suffix():
    assert job_duration(job(Cmd='"sleep"', Args='"2m"')) == 120.0


def test_job_duration_of_sleep_arguments_attribute():
    ad = classad2.ClassAd('[Cmd = "/usr/bin/sleep"; Arguments = "1h"]')
    assert job_duration(ad) == 3600.0


def test_job_duration_of_other_commands_is_zero():
    assert job_duration(job(Cmd='"/bin/echo"')) == 0.0


def test_finish_job_reports_exited_and_keeps_the_claim():
    m = pslot_startd().machines["host"]
    out = claim(m, m.slots["slot1"])
    d = m.slots["slot1_1"]
    m.activate(d, job(), NOW + 5)
    ev = m.finish_job(d, NOW + 65)
    assert (ev.kind, ev.claim_id, ev.job_id, ev.slot_name, ev.schedd_address, ev.pool_time, ev.job_start) == (
        "exited", out.claim_id, "1.0", "slot1_1@host", SCHEDD, NOW + 65, NOW + 5)
    assert (d.state, d.activity, d.claim.id) == ("Claimed", "Idle", out.claim_id)
    assert m.finish_job(d, NOW + 66) is None


def test_release_of_a_busy_dynamic_slot_evicts_and_returns_resources():
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    out = claim(m, p)
    d = m.slots["slot1_1"]
    m.activate(d, job(), NOW + 5)
    ev = m.release(d, NOW + 10, "schedd asked")
    assert (ev.kind, ev.claim_id, ev.job_id, ev.reason, ev.job_start) == (
        "evicted", out.claim_id, "1.0", "schedd asked", NOW + 5)
    assert p.free == TEN
    assert p.children == set()
    assert m.deleted == ["slot1_1@host"]
    assert sorted(m.slots) == ["slot1"]


def test_release_of_an_idle_claim_reports_nothing():
    m = pslot_startd().machines["host"]
    claim(m, m.slots["slot1"])
    assert m.release(m.slots["slot1_1"], NOW + 1, "done") is None


def test_released_static_slot_is_claimable_again_with_a_new_capability():
    sd = static_startd()
    m = sd.machines["host"]
    s = m.slots["slot1"]
    old = s.capability
    out = claim(m, s)
    m.release(s, NOW + 1, "done")
    assert (s.state, s.activity) == ("Unclaimed", "Idle")
    assert s.capability not in ("", old, out.claim_id)
    assert sd.find_capability(s.capability) == (m, s)
    assert sd.find_claim(out.claim_id) is None


def test_keepalive_returns_unknown_ids():
    sd = pslot_startd()
    m = sd.machines["host"]
    out = claim(m, m.slots["slot1"])
    assert sd.keepalive([out.claim_id, "<1.2.3.4:5>#1#1#0"], SCHEDD, NOW + 10) == ["<1.2.3.4:5>#1#1#0"]
    assert m.slots["slot1_1"].claim.last_alive == NOW + 10


def test_keepalive_names_the_claims_that_run_no_job():
    sd = pslot_startd()
    m = sd.machines["host"]
    idle = claim(m, m.slots["slot1"])
    busy = claim(m, m.slots["slot1"])
    m.activate(m.slots["slot1_2"], job(ProcId="1"), NOW)
    found: list[str] = []
    assert sd.keepalive([idle.claim_id, busy.claim_id], SCHEDD, NOW + 10, idle=found) == []
    assert found == [idle.claim_id]


def test_expire_leases_drops_a_claim_not_kept_alive():
    sd = pslot_startd(alive_interval_s=300.0, max_claim_alives_missed=6)
    m = sd.machines["host"]
    kept = claim(m, m.slots["slot1"])
    lost = claim(m, m.slots["slot1"])
    m.activate(m.slots["slot1_2"], job(ProcId="1"), NOW)
    sd.keepalive([kept.claim_id], SCHEDD, NOW + 1000)
    assert sd.expire_leases(NOW + 1800) == []
    events = sd.expire_leases(NOW + 1801)
    assert [(e.kind, e.claim_id, e.job_id, e.slot_name) for e in events] == [
        ("claim_lost", lost.claim_id, "1.1", "slot1_2@host")]
    assert sorted(m.slots) == ["slot1", "slot1_1"]
    assert sd.find_claim(lost.claim_id) is None


def test_a_running_job_keeps_its_claim_for_its_job_lease():
    # HTCondor's startd sets a claim's lease from the job's JobLeaseDuration at activation;
    # once the job is done the claim is back on the keepalive lease (6 x 300 s here).
    sd = pslot_startd(alive_interval_s=300.0, max_claim_alives_missed=6)
    m = sd.machines["host"]
    long = claim(m, m.slots["slot1"])
    short = claim(m, m.slots["slot1"])
    m.activate(m.slots["slot1_1"], job(ProcId="1", JobLeaseDuration="2400", Args='"100000"'), NOW)
    m.activate(m.slots["slot1_2"], job(ProcId="2", JobLeaseDuration="600.9", Args='"100000"'), NOW)
    assert [e.claim_id for e in sd.expire_leases(NOW + 601)] == [short.claim_id]
    assert sd.expire_leases(NOW + 2400) == []
    assert [e.claim_id for e in sd.expire_leases(NOW + 2401)] == [long.claim_id]
    # A job done, its claim idle: the keepalive lease again.
    done = claim(m, m.slots["slot1"])
    s = sd.find_claim(done.claim_id)[1]
    m.activate(s, job(ProcId="3", JobLeaseDuration="2400", Args='"10"'), NOW)
    m.finish_job(s, NOW + 10)
    assert sd.expire_leases(NOW + 1800) == []
    assert [e.claim_id for e in sd.expire_leases(NOW + 1801)] == [done.claim_id]


@pytest.mark.parametrize("value, lease", [("60", 60.0), ("60.7", 60.0), ("2 * 30", 60.0), ("0", 0.0),
                                          ("-5", 0.0), ('"60"', 0.0), ("undefined", 0.0), ("Missing", 0.0)])
def test_a_job_lease_is_read_as_htcondor_reads_it(value, lease):
    assert ads.as_lease(ads.get(job(JobLeaseDuration=value), "JobLeaseDuration")) == lease


def test_the_pools_lag_stretches_a_lease():
    sd = pslot_startd(alive_interval_s=300.0, max_claim_alives_missed=6)
    m = sd.machines["host"]
    c = claim(m, m.slots["slot1"])
    assert sd.expire_leases(NOW + 1801, allowance_s=500.0) == []
    assert sd.find_claim(c.claim_id) is not None
    assert sd.expire_leases(NOW + 2300, allowance_s=500.0) == []
    assert [e.claim_id for e in sd.expire_leases(NOW + 2301, allowance_s=500.0)] == [c.claim_id]


def test_a_schedds_round_trip_stretches_its_claims_leases():
    # A claim granted while the path to its schedd is slow (a long queue of claim answers)
    # is named in a keepalive only a round trip later: the schedd's keepalives say how long
    # that is, and only its own claims get the extra time, never more than two leases.
    sd = pslot_startd(alive_interval_s=300.0, max_claim_alives_missed=6)
    m = sd.machines["host"]
    slow = claim(m, m.slots["slot1"])               # claimed by SCHEDD (the helper's)
    other = m.request_claim(m.slots["slot1"], job(), "s2", "127.0.0.1:5000", "u", NOW)
    sd.keepalive([], SCHEDD, NOW, round_trip=700.0)
    assert sd.round_trips == {SCHEDD: 700.0}
    assert [e.claim_id for e in sd.expire_leases(NOW + 1801)] == [other.claim_id]
    assert sd.expire_leases(NOW + 2500) == []
    assert [e.claim_id for e in sd.expire_leases(NOW + 2501)] == [slow.claim_id]
    # The latest report counts (a path that is fast again), bounded, and garbage is no time.
    for reported, kept in [(0.0, 0.0), (1e9, 3600.0), (float("inf"), 3600.0), (float("nan"), 0.0), (-5.0, 0.0)]:
        sd.keepalive([], SCHEDD, NOW, round_trip=reported)
        assert sd.round_trips[SCHEDD] == kept
    # A schedd that is gone (no keepalive for three leases: its claims have lapsed) is forgotten.
    sd.keepalive([], SCHEDD, NOW + 100, round_trip=700.0)
    sd.expire_leases(NOW + 100 + 3 * 1800)
    assert sd.round_trips == {SCHEDD: 700.0}
    sd.expire_leases(NOW + 101 + 3 * 1800)
    assert sd.round_trips == {}


def test_pslot_ad_attributes():
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    claim(m, p)
    a = m.slot_ad(p, NOW)
    assert (a["Name"], a["SlotType"], a["TotalSlotCpus"], a["Cpus"]) == ("slot1@host", "Partitionable", 10, 9)
    assert a["Requirements"] == "START && (WithinResourceLimits)"
    assert a["Capability"] == p.capability
    assert (a["PartitionableSlot"], a["NumDynamicSlots"], a["ChildCpus"]) == (True, 1, [1])


def test_dynamic_slot_ad_has_its_parents_slot_type_and_offers_a_preempting_claim():
    # Resource.cpp: a dynamic slot's CpuAttributes carry the p-slot's type id.
    m = pslot_startd().machines["host"]
    out = claim(m, m.slots["slot1"])
    d = m.slots["slot1_1"]
    a = m.slot_ad(d, NOW)
    assert (a["Name"], a["SlotType"], a["TotalSlotCpus"], a["SlotTypeID"]) == ("slot1_1@host", "Dynamic", 1, 1)
    assert a["ClaimId"] == d.capability
    assert d.capability not in ("", out.claim_id)


def test_static_slot_ad_offers_a_new_claim_id_once_claimed():
    m = static_startd().machines["host"]
    s = m.slots["slot2"]
    a = m.slot_ad(s, NOW)
    assert (a["Name"], a["SlotType"], a["Requirements"], a["SlotID"]) == ("slot2@host", "Static", "START", 2)
    assert a["Capability"] == s.capability
    before = s.capability
    out = claim(m, s)
    after = m.slot_ad(s, NOW)["Capability"]
    assert after not in (before, out.claim_id)


def _due(m, now=NOW):
    names = [a["Name"] for a in m.due_ads(now)]
    m.sent()
    return names


def test_an_update_carries_only_the_slots_that_changed():
    """As HTCondor's startd updates only the resource that changed: a claim sends the p-slot
    (its free resources) and the new dynamic slot, an activation and a job's end only that
    dynamic slot, a release the p-slot and the dynamic slot's name to invalidate; a machine
    marked dirty (a drain, a preemption) sends every slot."""
    m = pslot_startd().machines["host"]
    p = m.slots["slot1"]
    assert _due(m) == ["slot1@host"] and not m.due
    claim(m, p)
    claim(m, p)
    assert m.due and _due(m) == ["slot1@host", "slot1_1@host", "slot1_2@host"]
    d = m.slots["slot1_2"]
    m.activate(d, job(), NOW + 5)
    assert _due(m) == ["slot1_2@host"]
    m.finish_job(d, NOW + 65)
    assert _due(m) == ["slot1_2@host"]
    m.release(d, NOW + 70, "done")
    assert m.due and m.deleted == ["slot1_2@host"]
    assert _due(m) == ["slot1@host"]
    m.dirty = True
    assert _due(m) == ["slot1@host", "slot1_1@host"]


def test_a_static_slots_claim_touches_only_that_slot():
    m = static_startd().machines["host"]
    _due(m)
    out = claim(m, m.slots["slot1"])
    assert out.ok and _due(m) == ["slot1@host"]
    m.release(m.slots["slot1"], NOW + 1, "done")
    assert _due(m) == ["slot1@host"]


def test_a_slot_ad_printed_from_its_static_part_has_the_attributes_of_the_built_ad():
    # STARTD_ATTRS that override the slot's own attributes (State, Rank) and are overridden
    # by the drain's (Draining), and a job whose advertised attributes are in the ad: the
    # printed ad gives each attribute the value of its highest-precedence source.
    from daemons.core import ads as core_ads
    from daemons.startd.drain import start_drain
    from daemons.startd.slotad import slot_ad_text

    sd = Startd(["h1"], read_startd_config(Param.from_dict({
        "NUM_CPUS": "4", "SLOT_TYPE_1": "100%", "SLOT_TYPE_1_PARTITIONABLE": "True", "NUM_SLOTS_TYPE_1": "1",
        "STARTD_ATTRS": "State, Rank, Draining, Site", "State": '"Mine"', "Rank": "7", "Draining": '"no"',
        "Site": '"here"'})), "127.0.0.1:9618", NOW)
    m = sd.machines["h1"]
    out = m.request_claim(m.slots["slot1"], job(AccountingGroup='"grp.a"'), "schedd@sub", "127.0.0.1:1", "a@d", NOW)
    assert out.ok, out.reason
    d = m.slots[out.slot_name.split("@")[0]]
    assert m.activate(d, job(AccountingGroup='"grp.a"'), NOW)[0]
    for when in (NOW + 10, NOW + 20):
        for s in m.slots.values():
            printed = classad2.ClassAd(slot_ad_text(m, s, when))
            built = m.slot_ad(s, when)
            assert core_ads.exprs_of(printed) == core_ads.exprs_of(classad2.ClassAd(core_ads.ad_text(built)))
            assert [str(built[k]) for k in ("State", "Rank", "Site")] == ['"Mine"', "7", '"here"']
            assert built["Draining"] is (m.drain is not None)   # the drain's own attributes come last
        if m.drain is None:
            start_drain(m, "graceful", False, "", "", "test", "r1", NOW + 15)
    assert m.slot_ad(d, NOW)["AccountingGroup"] == "grp.a"
