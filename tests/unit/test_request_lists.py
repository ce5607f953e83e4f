"""daemons/schedd/requests.py: request lists kept in step with the queue equal a full
rebuild (scheduling.resource_requests over scheduling.idle_jobs), on random queues and
random sequences of queue changes, reservations and grown significant lists."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemons.schedd import requests as request_lists
from daemons.schedd import txlog
from daemons.schedd.autocluster import Autoclusterer
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.requests import RequestLists
from daemons.schedd.scheduling import idle_jobs, resource_requests
from daemons.schedd.submit import SubmitContext, build_cluster, parse_submit

USERS = ["alice", "bob", "carol"]
MEMORY = [128, 256, 512]


def summary(requests):
    return [(r.request_id, r.autocluster, r.count, r.job.key, [j.key for j in r.jobs]) for r in requests]


def submitters(q: JobQueue) -> set[str]:
    return {j.submitter for j in q.jobs.values()} | set(q._idle_keys)


def check(q: JobQueue, lists: RequestLists, ac: Autoclusterer) -> None:
    for s in sorted(submitters(q)):
        assert summary(lists.requests(s)) == summary(resource_requests(idle_jobs(q, s), ac.assign)), s


def submit(q: JobQueue, user: int, count: int, memory: int, prio: int, group: bool) -> None:
    text = (f"cmd = /bin/true\nrequest_memory = {MEMORY[memory]}\npriority = {prio}\n"
            f"{'accounting_group = g' if group else ''}\nqueue {count}\n")
    cluster = q.next_cluster
    q.submit_transaction(build_cluster(parse_submit(text), SubmitContext(USERS[user], "ex.org", cluster, 1000)),
                         cluster)


OP = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 2), st.integers(1, 6), st.integers(0, 2), st.integers(-2, 2),
              st.booleans()),
    st.tuples(st.just("status"), st.integers(0, 40), st.sampled_from([1, 1, 2, 4, 5])),
    st.tuples(st.just("prio"), st.integers(0, 40), st.integers(-3, 3)),
    st.tuples(st.just("memory"), st.integers(0, 40), st.integers(0, 2)),
    st.tuples(st.just("owner"), st.integers(0, 40), st.integers(0, 2)),
    st.tuples(st.just("destroy"), st.integers(0, 40)),
    st.tuples(st.just("reserve"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("cluster_memory"), st.integers(0, 40), st.integers(0, 2)),
    st.tuples(st.just("significant"), st.sampled_from(["RequestMemory", "JobPrio", "Owner", "Foo"])),
    st.tuples(st.just("negotiate"), st.integers(0, 2)),
    # Several attributes at once, as the schedd starts or ends a job (JobQueue.apply_changes).
    st.tuples(st.just("changes"), st.integers(0, 40),
              st.dictionaries(st.sampled_from(["JobStatus", "jobstatus", "JobPrio", "RequestMemory", "RequestCpus",
                                               "RemoteHost", "NumJobStarts", "ProcId", "Foo"]),
                              st.sampled_from(["1", "2", "4", "-1", "512", "", '"slot1@h"', None]), max_size=6)),
    st.tuples(st.just("retire"), st.integers(0, 40), st.sampled_from(["4", "3"])),
)


def act(q: JobQueue, lists: RequestLists, ac: Autoclusterer, op: tuple) -> None:
    kind = op[0]
    if kind == "submit":
        submit(q, *op[1:])
        return
    if kind == "significant":
        ac.update_negotiator_attrs([op[1]])
        return
    if kind == "negotiate":
        # One submitter asks mid-sequence: its list is patched now, the others later.
        s = sorted(submitters(q))
        if s:
            lists.requests(s[op[1] % len(s)])
        return
    if not q.jobs:
        return
    jobs = sorted(q.jobs)
    job = q.jobs[jobs[op[1] % len(jobs)]]
    if kind == "status":
        q.apply(JobQueue.set_lines(job, {"JobStatus": str(op[2])}))
    elif kind == "prio":
        q.apply(JobQueue.set_lines(job, {"JobPrio": str(op[2])}))
    elif kind == "memory":
        q.apply(JobQueue.set_lines(job, {"RequestMemory": str(MEMORY[op[2]])}))
    elif kind == "owner":
        q.apply(JobQueue.set_lines(job, {"Owner": f'"{USERS[op[2]]}"'}))
    elif kind == "destroy":
        q.apply([txlog.op_destroy(job.id)])
    elif kind == "reserve":
        job.reserved = op[2]
    elif kind == "changes":
        q.apply_changes(job, op[2])
    elif kind == "retire":
        q.retire_jobs([(job, {"JobStatus": op[2], "RemoteHost": None, "CompletionDate": "7"})])
    elif kind == "cluster_memory":
        # A change to the cluster ad reaches every job of the cluster that has not its own value.
        q.apply([txlog.op_set(f"{job.cluster}.-1", "RequestMemory", str(MEMORY[op[2]]))])


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(OP, min_size=1, max_size=60), st.integers(1, 8), st.booleans())
def test_incremental_lists_equal_a_rebuild(ops, every, pass_assigner):
    q = JobQueue("ex.org")
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["RequestMemory"])
    lists = RequestLists(q, ac.assign, lambda: ac.generation, ac.assign_all if pass_assigner else None)
    submit(q, 0, 3, 0, 0, False)
    check(q, lists, ac)
    for i, op in enumerate(ops):
        act(q, lists, ac, op)
        if i % every == 0:
            check(q, lists, ac)
    check(q, lists, ac)


def test_changes_are_patched_in_place_not_rebuilt(monkeypatch):
    monkeypatch.setattr(request_lists, "MIN_REBUILD_CHANGES", 1000)
    q = JobQueue("ex.org")
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["RequestMemory"])
    lists = RequestLists(q, ac.assign, lambda: ac.generation)
    for memory in (0, 1, 0):
        submit(q, 0, 50, memory, 0, False)
    check(q, lists, ac)
    built = lists.rebuilds
    first = q.jobs[(1, 10)]
    q.apply(JobQueue.set_lines(first, {"RequestMemory": "512"}))     # splits the first run
    q.jobs[(2, 0)].reserved = True
    q.apply(JobQueue.set_lines(q.jobs[(3, 5)], {"JobStatus": "2"}))
    check(q, lists, ac)
    assert lists.rebuilds == built
    assert lists.patched == 1     # 1.10 moved; 2.0 (reserved) and 3.5 (running) only left
    (alice,) = submitters(q)
    assert [r.count for r in lists.requests(alice)] == [10, 1, 39, 49, 49]


def test_a_large_change_rebuilds(monkeypatch):
    q = JobQueue("ex.org")
    ac = Autoclusterer(canon=q.canonical)
    lists = RequestLists(q, ac.assign, lambda: ac.generation)
    monkeypatch.setattr(request_lists, "MIN_REBUILD_CHANGES", 10)
    submit(q, 0, 5, 0, 0, False)
    check(q, lists, ac)
    built = lists.rebuilds
    submit(q, 0, 50, 1, 0, False)     # more changes than the threshold: the lists are rebuilt
    check(q, lists, ac)
    assert lists.rebuilds == built + 1
    ac.update_negotiator_attrs(["Owner"])   # every id changes: rebuilt too
    check(q, lists, ac)
    assert lists.rebuilds == built + 2


OWN_OP = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 2), st.integers(1, 6), st.integers(0, 2), st.integers(-2, 2),
              st.booleans()),
    st.tuples(st.just("memory"), st.integers(0, 40), st.integers(0, 2)),
    st.tuples(st.just("prio"), st.integers(0, 40), st.integers(-3, 3)),
    st.tuples(st.just("cluster_memory"), st.integers(0, 40), st.integers(0, 2)),
    st.tuples(st.just("significant"), st.sampled_from(["RequestMemory", "JobPrio", "Owner", "Foo"])),
)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(OWN_OP, min_size=1, max_size=40), st.sampled_from(["JobPrio", "Owner", "Bar", "GlobalJobId"]))
def test_a_pass_assigns_what_assign_does(ops, grown):
    """Autoclusterer.assign_all gives every job the id, attribute list and generation that
    assign() gives it worked out afresh: jobs with values of their own among the
    significant attributes, clusters changed under their jobs, a list that grew (by an
    attribute each job makes from its number, too)."""
    q = JobQueue("ex.org")
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["RequestMemory"])
    lists = RequestLists(q, ac.assign, lambda: ac.generation)
    for op in ops:
        act(q, lists, ac, op)
    for job in q.jobs.values():
        ac.assign(job)           # cluster memos of the old list, which the pass must not trust
    ac.update_negotiator_attrs([grown])
    jobs = [job for _, job in sorted(q.jobs.items())]
    ids = ac.assign_all(jobs)
    got = {job.key: (i, job.ac_attrs, job.ac_attrs_lower, job.ac_generation) for i, job in zip(ids, jobs)}
    for job in q.jobs.values():  # forget every cache: assign works each signature out again
        job.ac_generation = -1
        job.cad.ac_memo = None
    want = {key: (ac.assign(job), job.ac_attrs, job.ac_attrs_lower, job.ac_generation)
            for key, job in sorted(q.jobs.items())}
    assert got == want


def state(q: JobQueue) -> dict:
    """Everything a queue holds that a change can move: each job's text and filing, the
    counts and indexes, the history records and their numbers."""
    return {"jobs": {k: (j.text(), j.submitter, j.ac_id, j.status) for k, j in sorted(q.jobs.items())},
            "counts": q.counts_by_submitter(), "status": q.jobs_by_status(), "owners": dict(q.owner_counts),
            "idle": {k: list(v) for k, v in q._idle_keys.items() if v},
            "free": {k: list(v) for k, v in q._free_keys.items() if v},
            "by_submitter": {k: sorted(v) for k, v in q.by_submitter.items()},
            "retired": [(r.seq, r.text) for r in q.retired], "history_seq": q.history_seq}


def by_lines(q: JobQueue, op: tuple) -> tuple | None:
    """`op` done the line-by-line way (apply over set_lines / retire_lines), if it is a
    change of several attributes; None otherwise."""
    if op[0] not in ("changes", "retire") or not q.jobs:
        return None
    job = q.jobs[sorted(q.jobs)[op[1] % len(q.jobs)]]
    if op[0] == "changes":
        lines = JobQueue.set_lines(job, op[2])
    else:
        lines = q.retire_lines([(job, {"JobStatus": op[2], "RemoteHost": None, "CompletionDate": "7"})])
    q.apply(lines)
    return tuple(lines)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(OP, min_size=1, max_size=60))
def test_changes_applied_at_once_leave_the_queue_the_lines_would(ops):
    # Two queues take the same steps; one applies each job's changes and ends line by line
    # (the path a replay takes), the other at once (JobQueue.apply_changes, retire_jobs).
    queues = []
    for _ in range(2):
        q = JobQueue("ex.org")
        ac = Autoclusterer(canon=q.canonical)
        ac.update_negotiator_attrs(["RequestMemory"])
        lists = RequestLists(q, ac.assign, lambda ac=ac: ac.generation)
        submit(q, 0, 3, 0, 0, False)
        queues.append((q, lists, ac))
    (slow, slow_lists, slow_ac), (fast, fast_lists, fast_ac) = queues
    for op in ops:
        if op[0] in ("changes", "retire") and fast.jobs:
            job = fast.jobs[sorted(fast.jobs)[op[1] % len(fast.jobs)]]
            if op[0] == "changes":
                lines = fast.apply_changes(job, op[2])
            else:
                lines = fast.retire_jobs([(job, {"JobStatus": op[2], "RemoteHost": None, "CompletionDate": "7"})])
            assert tuple(lines) == by_lines(slow, op)
        else:
            act(slow, slow_lists, slow_ac, op)
            act(fast, fast_lists, fast_ac, op)
        assert state(fast) == state(slow)
    check(fast, fast_lists, fast_ac)
