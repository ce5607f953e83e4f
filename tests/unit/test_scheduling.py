"""daemons/schedd/scheduling.py: job order, picking a job for a slot, claim reuse."""
import classad2

from daemons.core.adpack import AdPacker
from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.scheduling import (ScheddClaim, claim_reusable, idle_jobs, job_lease_s, job_order,
                                       lease_expired, lease_renewed_at, pick_job_for_slot)
from daemons.schedd.submit import SubmitContext, build_jobs, parse_submit

NOW = 2000.0


def queue(*submits):
    """One cluster per submit text, numbered from 1, owner alice."""
    q = JobQueue("example.org")
    for cluster, text in enumerate(submits, 1):
        procs = build_jobs(parse_submit(text), SubmitContext("alice", "example.org", cluster, 1000))
        q.apply(q.submit_lines(procs, cluster))
    return q


def slot_ad(memory=4096, start="true"):
    return classad2.ClassAd(
        f'[ Name = "slot1@h"; Arch = "X86_64"; OpSys = "LINUX"; Cpus = 4; Memory = {memory}; '
        f'Disk = 10000000; HasFileTransfer = true; Start = {start}; Requirements = START ]')


def test_job_order_prio_first_then_submission_order():
    q = queue("cmd = /bin/true\nqueue 2\n", "cmd = /bin/true\npriority = 5\nqueue 2\n", "cmd = /bin/true\nqueue\n")
    ordered = sorted(q.jobs.values(), key=job_order)
    assert [j.id for j in ordered] == ["2.0", "2.1", "1.0", "1.1", "3.0"]


def test_negative_prio_goes_last():
    q = queue("cmd = /bin/true\npriority = -1\nqueue\n", "cmd = /bin/true\nqueue\n")
    assert [j.id for j in sorted(q.jobs.values(), key=job_order)] == ["2.0", "1.0"]


def test_idle_jobs_skip_other_states_and_reserved_jobs():
    q = queue("cmd = /bin/true\nqueue 4\n")
    q.apply([txlog.op_set("1.1", "JobStatus", "2")])
    q.get("1.2").reserved = True
    assert [j.id for j in idle_jobs(q, "alice@example.org")] == ["1.0", "1.3"]
    assert idle_jobs(q, "bob@example.org") == []


def test_pick_first_job_in_priority_order():
    q = queue("cmd = /bin/true\nqueue 2\n", "cmd = /bin/true\npriority = 5\nqueue\n")
    job = pick_job_for_slot(sorted(q.jobs.values(), key=job_order), slot_ad(), NOW)
    assert job.id == "2.0"


def test_pick_skips_jobs_the_slot_cannot_hold():
    q = queue("cmd = /bin/true\nrequest_memory = 8GB\npriority = 5\nqueue\n", "cmd = /bin/true\nqueue\n")
    job = pick_job_for_slot(sorted(q.jobs.values(), key=job_order), slot_ad(memory=4096), NOW)
    assert job.id == "2.0"


def test_pick_honours_the_slot_requirements():
    q = queue("cmd = /bin/true\nqueue\n", "cmd = /bin/true\n+Special = true\nqueue\n")
    job = pick_job_for_slot(sorted(q.jobs.values(), key=job_order), slot_ad(start="TARGET.Special =?= true"), NOW)
    assert job.id == "2.0"


def test_pick_skips_reserved_and_non_idle_jobs():
    q = queue("cmd = /bin/true\nqueue 3\n")
    q.get("1.0").reserved = True
    q.apply([txlog.op_set("1.1", "JobStatus", "5")])
    assert pick_job_for_slot(sorted(q.jobs.values(), key=job_order), slot_ad(), NOW).id == "1.2"


def test_pick_nothing_matches():
    q = queue("cmd = /bin/true\nqueue\n")
    assert pick_job_for_slot(list(q.jobs.values()), slot_ad(start="false"), NOW) is None


def claim(created=1000.0, slot=True):
    return ScheddClaim("cid", "slot1_1@h", "<10.0.0.1:9618>", "alice@example.org", created,
                       AdPacker().packed(repr(slot_ad())) if slot else None)


def test_worklife_zero_is_one_job_per_claim():
    assert claim_reusable(claim(created=NOW), NOW, 0) is False


def test_worklife_1200():
    assert (claim_reusable(claim(), 1000.0 + 1199, 1200), claim_reusable(claim(), 1000.0 + 1200, 1200)) == (
        True, False)


def test_negative_worklife_is_forever():
    assert claim_reusable(claim(), 1_000_000.0, -1) is True


def test_a_running_jobs_claim_waits_on_a_silent_startd_for_the_jobs_lease():
    q = queue("cmd = /bin/true\nqueue\n", "cmd = /bin/true\njob_lease_duration = 90 + RequestCpus\nqueue\n",
              "cmd = /bin/true\njob_lease_duration = \"soon\"\nqueue\n")
    assert [job_lease_s(q.jobs[(c, 0)]) for c in (1, 2, 3)] == [2400.0, 91.0, 0.0]
    c = claim()
    assert c.lease_s(360.0) == 360.0                     # no job: the claim lease
    c.job, c.job_lease = (1, 0), 2400.0
    assert c.lease_s(360.0) == 2400.0
    c.job_lease = 0.0                                    # a job with no lease of its own
    assert c.lease_s(360.0) == 360.0
    c.job, c.job_lease = None, 2400.0                    # the job has left the claim
    assert c.lease_s(360.0) == 360.0


def test_a_restarted_schedd_reads_a_jobs_lease_as_htcondors_jobLeaseIsValid_does():
    q = queue("cmd = /bin/true\nqueue\n", "cmd = /bin/true\n+LastJobLeaseRenewal = 1500\nqueue\n")
    never, started = q.jobs[(1, 0)], q.jobs[(2, 0)]
    assert lease_renewed_at(never, 0) is None             # a queue from before renewals: unknown
    assert lease_renewed_at(never, 1700) == 1700          # the queue's renewal of every running job
    assert lease_renewed_at(started, 0) == 1500           # its own, from its start
    assert lease_renewed_at(started, 1400) == 1500        # a renewal before it started is not its own
    assert lease_renewed_at(started, 1700) == 1700
    # remaining = duration - (now - last renewal); expired when remaining <= 0
    assert (lease_expired(300.0, 1700, 1999.0), lease_expired(300.0, 1700, 2000.0)) == (False, True)
    assert lease_expired(300.0, 1700, 2000.9) is True     # whole seconds, as HTCondor's time_t
    assert (lease_expired(300.0, 1700, 2000.0, 5.0), lease_expired(300.0, 1700, 2005.0, 5.0)) == (False, True)
    assert lease_expired(0.0, 1700, 1_000_000.0) is False  # no lease: reconnected, the startd decides
    assert lease_expired(300.0, None, 1_000_000.0) is False


def test_claim_without_slot_ad_is_not_reused():
    assert claim_reusable(claim(slot=False), 1001.0, -1) is False


def test_a_claims_slot_ad_is_kept_packed_and_parses_back_equal():
    packer = AdPacker()
    first, second = slot_ad(), slot_ad(start="TARGET.Owner == \"bob\"")
    a = ScheddClaim("cid", "slot1_1@h", "<10.0.0.1:9618>", "alice@example.org", NOW, packer.packed(repr(first)))
    b = ScheddClaim("cid2", "slot1_2@h", "<10.0.0.1:9618>", "bob@example.org", NOW, packer.packed(repr(second)))
    assert a.slot_ad == first and b.slot_ad == second
    assert a.slot_ad is not a.slot_ad                       # a fresh parse each time: nothing parsed is kept
    assert b.packed_ad.zdict is a.packed_ad.zdict           # packed against the first, which it resembles
    assert len(b.packed_ad.data) * 4 < len(repr(second))
