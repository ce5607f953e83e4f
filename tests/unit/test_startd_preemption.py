"""daemons/startd/preemption.py and the slot policy: a preempting claim, retirement, vacating,
the waiting claim taking the slot; PREEMPT; IS_OWNER; dynamic-slot floors. HTCondor's
ResState.cpp, command.cpp request_claim and Resource.cpp are the reference."""
import classad2

from daemons.startd import preemption
from daemons.startd.config import Resources, SlotPolicy, SlotTypeSpec, StartdConfig
from daemons.startd.machines import Startd

NOW = 1000.0
SCHEDD = "127.0.0.1:4000"
OTHER = "127.0.0.1:5000"


def job(owner="alice", proc=0, duration=10_000, **extra):
    attrs = {"ClusterId": "1", "ProcId": str(proc), "Owner": f'"{owner}"', "RequestCpus": "1",
             "RequestMemory": "100", "RequestDisk": "1000", "Requirements": "true", "Duration": str(duration)}
    attrs.update(extra)
    return classad2.ClassAd("[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]")


def machine(**policy):
    one = Resources(cpus=1, memory=1024, disk=10000)
    spec = SlotTypeSpec(1, 1, False, one, policy=SlotPolicy(**policy))
    return Startd(["host"], StartdConfig(machine=one, slot_types=(spec,)), "127.0.0.1:9618", NOW).machines["host"]


def running(m, owner="alice", now=NOW, duration=10_000):
    s = m.slots["slot1"]
    out = m.request_claim(s, job(owner, duration=duration), "schedd@sub", SCHEDD, f"{owner}@d", now)
    assert out.ok
    m.activate(s, job(owner, duration=duration), now)
    return s, out.claim_id


def preempt(m, s, owner="bob", now=NOW + 100):
    return m.request_claim(s, job(owner, proc=1), "schedd@other", OTHER, f"{owner}@d", now, preempting=True)


def kinds(m):
    out = [(e.kind, e.job_id, e.schedd_address) for e in m.outbox]
    m.outbox.clear()
    return out


def test_a_preempting_claim_waits_for_retirement_then_vacate():
    m = machine(max_job_retirement_time="500", machine_max_vacate_time="60")
    s, old = running(m)
    out = preempt(m, s)
    assert (out.ok, out.pending) == (True, True)
    assert (s.state, s.activity, s.preempt_until) == ("Claimed", "Retiring", NOW + 500)
    assert s.capability == ""   # no further offer while a preemption is under way
    assert preemption.tick(m, s, NOW + 499) == NOW + 500
    assert preemption.tick(m, s, NOW + 500) == NOW + 560
    assert (s.state, s.activity) == ("Preempting", "Vacating")
    assert preemption.tick(m, s, NOW + 560) is None
    assert kinds(m) == [("evicted", "1.0", SCHEDD), ("claim_ready", "", OTHER)]
    assert (s.state, s.activity, s.claim.id, s.claim.submitter) == ("Claimed", "Idle", out.claim_id, "bob@d")
    assert s.capability not in ("", old, out.claim_id)


def test_a_job_that_ends_while_retiring_hands_the_slot_over_at_once():
    m = machine(max_job_retirement_time="5000")
    s, _ = running(m, duration=300)
    preempt(m, s)
    ev = m.finish_job(s, NOW + 300)
    preemption.after_job(m, s, NOW + 300)
    assert ev.kind == "exited"
    assert kinds(m) == [("claim_lost", "", SCHEDD), ("claim_ready", "", OTHER)]
    assert s.claim.submitter == "bob@d"


def test_without_want_vacate_the_job_is_killed_at_once():
    m = machine(want_vacate="False")
    s, _ = running(m)
    preempt(m, s)
    assert kinds(m) == [("evicted", "1.0", SCHEDD), ("claim_ready", "", OTHER)]
    assert m.notes[-1] == "slot1@host: Changing state and activity: Preempting/Killing -> Claimed/Idle"


def test_a_lower_rank_cannot_preempt():
    m = machine(rank='TARGET.Owner == "alice"')
    s, _ = running(m)
    assert s.claim.rank == 1.0   # a boolean RANK counts 1.0
    out = preempt(m, s)
    assert (out.ok, s.pre) == (False, None)
    assert "doesn't have sufficient rank" in out.reason


def test_a_withdrawn_preempting_claim_lets_the_job_unretire():
    m = machine(max_job_retirement_time="500")
    s, _ = running(m)
    out = preempt(m, s)
    preemption.withdraw(m, s, NOW + 200)
    assert (s.state, s.activity, s.pre, s.preempt_reason) == ("Claimed", "Busy", None, "")
    assert s.capability != ""
    n = m.ids.number(out.claim_id)
    assert n and n not in (s.cap, s.claim.seq)                 # the withdrawn id names nothing


def test_preempt_expression_ends_the_claim_without_a_successor():
    m = machine(preempt="TotalJobRunTime > 50")
    s, _ = running(m)
    assert preemption.check_preempt(m, NOW + 10) == []
    assert preemption.check_preempt(m, NOW + 60) == [s]
    assert (s.state, s.activity) == ("Preempting", "Vacating")
    preemption.tick(m, s, s.preempt_until)
    assert [(e.kind, e.reason) for e in m.outbox] == [("evicted", "PREEMPT expression evaluated to True")]
    assert (s.state, s.activity, s.claim) == ("Unclaimed", "Idle", None)


def test_is_owner_keeps_an_unclaimed_slot_in_the_owner_state():
    m = machine(is_owner="CurrentTime < 2000")
    s = m.slots["slot1"]
    assert s.state == "Owner"
    assert m.request_claim(s, job(), "schedd@sub", SCHEDD, "alice@d", NOW).ok is False
    assert m.refresh_owner(2000.0) is True
    assert s.state == "Unclaimed"


def test_a_dynamic_slot_gets_at_least_one_cpu_and_one_megabyte():
    machine_ = Resources(cpus=4, memory=1000, disk=100000, custom=(("tokens", 2),))
    spec = SlotTypeSpec(1, 1, True, machine_, consumption_policy=True, num_claims=4,
                        consumption=(("Cpus", "0"), ("Memory", "0"), ("Disk", "0"), ("tokens", "1")))
    m = Startd(["host"], StartdConfig(machine=machine_, slot_types=(spec,)), "127.0.0.1:9618", NOW).machines["host"]
    p = m.slots["slot1"]
    out = m.request_claim(p, job(), "schedd@sub", SCHEDD, "alice@d", NOW)
    assert out.ok, out.reason
    d = m.slots["slot1_1"]
    assert (d.size.cpus, d.size.memory, d.size.get("tokens")) == (1, 1, 1)
    assert (p.free.cpus, p.free.memory, p.free.get("tokens")) == (3, 999, 1)


def test_constant_policies_are_known_without_a_slot():
    from daemons.startd import policy
    assert [policy.never(t) for t in ("false", "False", "0", "10 > 20", "true", "TotalJobRunTime > 5")] == [
        True, True, True, True, False, False]


def test_an_expression_of_currenttime_is_never_a_constant():
    """With HTCondor's configuration loaded (every daemon loads it) the ClassAd library
    uses old semantics, where CurrentTime is built in and no longer a reference: IS_OWNER
    = CurrentTime < 2000 must still follow the slot's time, not be frozen at its first value."""
    import htcondor2

    from daemons.startd import policy
    htcondor2.param.get("NUM_CPUS")
    assert policy._constant("CurrentTime < 2001") is policy._UNKNOWN
    assert policy._constant("currenttime >= 5") is policy._UNKNOWN
    assert policy._constant("10 * 60") == 600
    m = machine(is_owner="CurrentTime < 2000")
    assert m.slots["slot1"].state == "Owner"
    assert m.refresh_owner(2000.0) is True and m.slots["slot1"].state == "Unclaimed"
