"""The queue's idle-job index (kept by every change) gives the same jobs, in the same
order, as scanning and sorting the queue: on random queues and random changes."""
import random

from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.scheduling import job_order
from daemons.schedd.submit import IDLE, SubmitContext, build_jobs, parse_submit

USERS = ["alice", "bob", "carol"]


def rebuilt(q: JobQueue, submitter: str) -> list[tuple[int, int]]:
    jobs = [j for j in q.jobs_of(submitter) if j.status == IDLE]
    jobs.sort(key=job_order)
    return [j.key for j in jobs]


def indexed(q: JobQueue, submitter: str) -> list[tuple[int, int]]:
    return [j.key for j in q.idle_in_order(submitter)]


def check(q: JobQueue) -> None:
    """The index gives the idle jobs that are not reserved (what a claim may take)."""
    submitters = {j.submitter for j in q.jobs.values()} | set(q._idle_keys) | set(q._free_keys)
    for s in submitters:
        assert indexed(q, s) == [k for k in rebuilt(q, s) if not q.jobs[k].reserved], s
    assert len(q._idle_jobs) == sum(len(k) for k in q._idle_keys.values())


def submit(q: JobQueue, rng: random.Random) -> None:
    user = rng.choice(USERS)
    text = f"cmd = /bin/true\npriority = {rng.randint(-2, 2)}\nqueue {rng.randint(1, 6)}\n"
    if rng.random() < 0.3:
        text = "accounting_group = g\n" + text
    cluster = q.next_cluster
    q.apply(q.submit_lines(build_jobs(parse_submit(text), SubmitContext(user, "ex.org", cluster, 1000)), cluster))


def change(q: JobQueue, rng: random.Random) -> None:
    job = rng.choice(list(q.jobs.values()))
    what = rng.randrange(6)
    if what == 5:
        job.reserved = not job.reserved    # a match on its way to a claim, or given up
        return
    if what == 0:
        q.apply(JobQueue.set_lines(job, {"JobStatus": str(rng.choice([1, 1, 2, 4, 5]))}))
    elif what == 1:
        q.apply(JobQueue.set_lines(job, {"JobPrio": str(rng.randint(-3, 3))}))
    elif what == 2:
        q.apply(JobQueue.set_lines(job, {"Owner": f'"{rng.choice(USERS)}"'}))
    elif what == 3:
        q.apply([txlog.op_destroy(job.id)])
    else:
        q.apply(JobQueue.set_lines(job, {"JobPrio": None, "JobStatus": "1"}))


def test_idle_index_equals_a_rebuild_on_random_queues():
    for seed in range(40):
        rng = random.Random(seed)
        q = JobQueue("ex.org")
        for _ in range(rng.randint(1, 6)):
            submit(q, rng)
        check(q)
        for _ in range(150):
            if not q.jobs or rng.random() < 0.1:
                submit(q, rng)
            else:
                change(q, rng)
            check(q)


def test_idle_index_after_replaying_a_compacted_queue():
    rng = random.Random(7)
    q = JobQueue("ex.org")
    for _ in range(5):
        submit(q, rng)
    for _ in range(60):
        change(q, rng) if q.jobs else submit(q, rng)
    fresh = JobQueue("ex.org")
    fresh.apply(q.state_lines())
    check(fresh)
    for s in {j.submitter for j in q.jobs.values()}:
        assert indexed(fresh, s) == rebuilt(q, s)   # reservations are not persisted
