"""daemons/schedd/jobqueue.py: applying log lines, compaction round trip, queries."""
from pathlib import Path

from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue, parse_job_id
from daemons.schedd.submit import SubmitContext, build_jobs, parse_submit

SUBMIT = "cmd = /bin/sleep\nargs = 60\naccounting_group = physics\nqueue 3\n"


def queue_with_jobs():
    q = JobQueue("example.org")
    procs = build_jobs(parse_submit(SUBMIT), SubmitContext("alice", "example.org", 7, 1000))
    q.apply(q.submit_lines(procs, 7))
    return q


def test_submit_lines_create_jobs_and_advance_the_cluster():
    q = queue_with_jobs()
    assert sorted(q.jobs) == [(7, 0), (7, 1), (7, 2)]
    assert q.next_cluster == 8
    j = q.get("7.1")
    assert (j.id, j.status, j.attrs["Args"], j.submitter) == ("7.1", 1, '"60"', "physics.alice@example.org")


def test_state_lines_round_trip():
    q = queue_with_jobs()
    q.apply(JobQueue.set_lines(q.get("7.2"), {"JobStatus": "5", "HoldReason": '"x"'}))
    fresh = JobQueue("example.org")
    fresh.apply(q.state_lines())
    assert fresh.next_cluster == q.next_cluster
    assert {k: j.attrs for k, j in fresh.jobs.items()} == {k: j.attrs for k, j in q.jobs.items()}
    assert {k: j.submitter for k, j in fresh.jobs.items()} == {k: j.submitter for k, j in q.jobs.items()}


def test_state_lines_survive_the_log_format(tmp_path):
    q = queue_with_jobs()
    log = txlog.TxLog(tmp_path / "job_queue.log")
    log.rewrite(q.state_lines(), seq=1)
    log.close()
    ops, _, _ = txlog.read_log(tmp_path / "job_queue.log")
    fresh = JobQueue("example.org")
    for op in ops:
        fresh.apply_op(op)
    assert {k: j.attrs for k, j in fresh.jobs.items()} == {k: j.attrs for k, j in q.jobs.items()}
    assert fresh.next_cluster == 8


def test_set_lines_delete_only_present_attributes():
    q = queue_with_jobs()
    j = q.get("7.0")
    assert JobQueue.set_lines(j, {"Args": None, "Missing": None, "JobPrio": "3"}) == [
        "104 7.0 Args", "103 7.0 JobPrio 3"]


def test_destroy_removes_the_job():
    q = queue_with_jobs()
    q.apply([txlog.op_destroy("7.1")])
    assert sorted(q.jobs) == [(7, 0), (7, 2)]


def test_changing_the_group_changes_the_submitter():
    q = queue_with_jobs()
    q.apply([txlog.op_set("7.0", "AccountingGroup", '"bio.alice"')])
    assert q.get("7.0").submitter == "bio.alice@example.org"


def test_deleting_the_group_makes_the_owner_the_submitter():
    q = queue_with_jobs()
    q.apply([txlog.op_delete_attr("7.0", "AccountingGroup")])
    assert q.get("7.0").submitter == "alice@example.org"


def test_select_jobs_and_clusters():
    q = queue_with_jobs()
    assert [j.id for j in q.select(["7.1", "7", "8", "x"])] == ["7.1", "7.0", "7.1", "7.2"]


def test_counts_by_submitter():
    q = queue_with_jobs()
    q.apply([txlog.op_set("7.0", "JobStatus", "2"), txlog.op_set("7.1", "JobStatus", "5")])
    assert q.counts_by_submitter() == {"physics.alice@example.org": {
        "idle": 1, "running": 1, "held": 1, "weighted_idle": 1, "weighted_running": 1}}


def test_classad_cache_drops_on_change():
    q = queue_with_jobs()
    j = q.get("7.0")
    assert j.classad().eval("JobPrio") == 0
    q.apply([txlog.op_set("7.0", "JobPrio", "9")])
    assert j.classad().eval("JobPrio") == 9


def test_parse_job_id():
    assert (parse_job_id("12.3"), parse_job_id(" 12 ")) == ((12, 3), (12, None))


def test_the_queues_lease_renewal_survives_a_compaction():
    q = JobQueue("example.org")
    q.apply_op(txlog.Op(txlog.SET, "0.0", "LastJobLeaseRenewal", "1234"))
    assert q.lease_renewal == 1234
    again = JobQueue("example.org")
    for i, line in enumerate(q.iter_state_lines(), 1):
        again.apply_op(txlog.parse_op(line, i, Path("job_queue.log")))
    assert again.lease_renewal == 1234
