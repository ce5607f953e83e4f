"""daemons/schedd/scheduling.py: resource requests from autoclusters (HTCondor's request lists)."""
from daemons.schedd import txlog
from daemons.schedd.autocluster import Autoclusterer
from daemons.schedd.jobqueue import Job, JobQueue
from daemons.schedd.scheduling import Request, idle_jobs, resource_requests


def jobs_with_acs(acs):
    """Jobs 1.0, 1.1, ... whose autocluster is given by position."""
    jobs = [Job(1, p, attrs={"JobStatus": "1"}) for p in range(len(acs))]
    by_key = {j.key: ac for j, ac in zip(jobs, acs)}
    return jobs, (lambda j: by_key[j.key])


def summary(requests):
    return [(r.request_id, r.autocluster, r.count, r.job.id, [j.id for j in r.jobs]) for r in requests]


def test_no_jobs_no_requests():
    assert resource_requests([], lambda j: 1) == []


def test_consecutive_jobs_of_one_autocluster_are_one_request():
    jobs, of = jobs_with_acs([7, 7, 7])
    assert summary(resource_requests(jobs, of)) == [("7:0", 7, 3, "1.0", ["1.0", "1.1", "1.2"])]


def test_a_later_non_consecutive_run_is_a_new_request():
    jobs, of = jobs_with_acs([1, 1, 2, 1, 3, 3])
    assert summary(resource_requests(jobs, of)) == [
        ("1:0", 1, 2, "1.0", ["1.0", "1.1"]),
        ("2:1", 2, 1, "1.2", ["1.2"]),
        ("1:2", 1, 1, "1.3", ["1.3"]),
        ("3:3", 3, 2, "1.4", ["1.4", "1.5"]),
    ]


def test_the_first_job_represents_the_request_and_count_matches_jobs():
    jobs, of = jobs_with_acs([4, 4, 5])
    for r in resource_requests(jobs, of):
        assert r.job is r.jobs[0]
        assert r.count == len(r.jobs)


def test_request_order_follows_the_job_order_given():
    jobs, of = jobs_with_acs([1, 2, 1])
    reordered = [jobs[0], jobs[2], jobs[1]]
    assert summary(resource_requests(reordered, of)) == [
        ("1:0", 1, 2, "1.0", ["1.0", "1.2"]), ("2:1", 2, 1, "1.1", ["1.1"])]


def test_requests_from_the_autoclusterer_and_priority_order():
    q = JobQueue("example.org")
    lines = []
    for p, (mem, prio) in enumerate([(1, 0), (1, 0), (2, 0), (1, 5), (1, 0)]):
        key = f"1.{p}"
        lines += [txlog.op_new(key), txlog.op_set(key, "Owner", '"alice"'), txlog.op_set(key, "JobStatus", "1"),
                  txlog.op_set(key, "RequestMemory", str(mem)), txlog.op_set(key, "JobPrio", str(prio))]
    q.apply(lines)
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["RequestMemory"])
    jobs = idle_jobs(q, "alice@example.org")
    assert [j.id for j in jobs] == ["1.3", "1.0", "1.1", "1.2", "1.4"]
    # JobPrio is not significant: 1.3 shares 1.0's autocluster, and so heads the first request.
    assert summary(resource_requests(jobs, ac.assign)) == [
        ("1:0", 1, 3, "1.3", ["1.3", "1.0", "1.1"]),
        ("2:1", 2, 1, "1.2", ["1.2"]),
        ("1:2", 1, 1, "1.4", ["1.4"]),
    ]


def test_next_job_skips_reserved_and_non_idle_jobs():
    jobs, of = jobs_with_acs([1, 1, 1, 1])
    (r,) = resource_requests(jobs, of)
    assert r.next_job() is jobs[0]
    jobs[0].reserved = True
    assert r.next_job() is jobs[1]
    jobs[1].attrs["JobStatus"] = "2"
    assert r.next_job() is jobs[2]
    jobs[2].attrs["JobStatus"] = "5"
    assert r.next_job() is jobs[3]
    jobs[3].reserved = True
    assert r.next_job() is None


def test_next_job_returns_a_job_again_once_released():
    jobs, of = jobs_with_acs([1, 1])
    (r,) = resource_requests(jobs, of)
    jobs[0].reserved = True
    assert r.next_job() is jobs[1]
    jobs[0].reserved = False
    assert r.next_job() is jobs[0]


def test_next_job_of_an_empty_request():
    job = Job(1, 0, attrs={"JobStatus": "1"})
    assert Request("1:0", job, 0, 1, []).next_job() is None


def test_next_job_in_a_queue_walks_past_taken_jobs_once_and_sees_a_freed_one():
    """In a queue, a request remembers how far its jobs are taken, and starts again from
    its first job only once the queue has freed one (a claim refused gives its job back)."""
    from daemons.schedd.jobqueue import JobQueue
    from daemons.schedd.submit import SubmitContext, build_cluster, parse_submit
    q = JobQueue("example.org")
    q.submit_transaction(build_cluster(parse_submit("cmd = /bin/true\nqueue 6\n"),
                                       SubmitContext("alice", "example.org", 1, 1000, schedd_name="s")), 1)
    jobs = [q.jobs[(1, i)] for i in range(6)]
    r = Request("1:0", jobs[0], 6, 1, list(jobs))
    taken = []
    for _ in range(4):
        j = r.next_job()
        j.reserved = True
        taken.append(j)
    assert taken == jobs[:4] and r.taken == 3
    assert r.next_job() is jobs[4]
    jobs[1].reserved = False        # given back: the first waiting job again
    assert r.next_job() is jobs[1]
    jobs[1].reserved = True
    assert r.next_job() is jobs[4]
