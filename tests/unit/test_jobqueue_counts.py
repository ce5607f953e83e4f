"""The schedd's per-submitter counts, kept incrementally, always equal a full recount."""
from __future__ import annotations

import random

from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.submit import HELD, IDLE, RUNNING


def recount(q: JobQueue) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for j in q.jobs.values():
        c = out.setdefault(j.submitter, {"idle": 0, "running": 0, "held": 0, "weighted_idle": 0,
                                         "weighted_running": 0})
        cpus = j.int_attr("RequestCpus", 1)
        if j.status == IDLE:
            c["idle"] += 1
            c["weighted_idle"] += cpus
        elif j.status == RUNNING:
            c["running"] += 1
            c["weighted_running"] += cpus
        elif j.status == HELD:
            c["held"] += 1
    return out


def status_recount(q: JobQueue) -> dict[int, int]:
    out: dict[int, int] = {}
    for j in q.jobs.values():
        out[j.status] = out.get(j.status, 0) + 1
    return out


def test_incremental_counts_equal_a_recount_under_random_changes():
    rng = random.Random(7)
    q = JobQueue("example.org")
    live: list[str] = []
    for step in range(3000):
        r = rng.random()
        if r < 0.2 or not live:
            key = f"{step}.0"
            q.apply([txlog.op_new(key), txlog.op_set(key, "Owner", f'"u{rng.randint(1, 5)}"'),
                     txlog.op_set(key, "JobStatus", "1"), txlog.op_set(key, "RequestCpus", str(rng.randint(1, 8)))])
            live.append(key)
        elif r < 0.6:
            q.apply([txlog.op_set(rng.choice(live), "JobStatus", str(rng.choice([1, 2, 3, 4, 5])))])
        elif r < 0.7:
            q.apply([txlog.op_set(rng.choice(live), "RequestCpus", str(rng.randint(1, 8)))])
        elif r < 0.8:
            key = rng.choice(live)
            if rng.random() < 0.5:
                q.apply([txlog.op_set(key, "AccountingGroup", f'"g{rng.randint(1, 3)}.u"')])
            else:
                q.apply([txlog.op_delete_attr(key, "AccountingGroup")])
        else:
            key = live.pop(rng.randrange(len(live)))
            q.apply([txlog.op_destroy(key)])
        if step % 100 == 0:
            assert q.counts_by_submitter() == recount(q)
            assert q.jobs_by_status() == status_recount(q)
            # Every job has an Owner here: the counts kept answer, not a walk.
            assert {k: v for k, v in q.status_counts.items() if v} == status_recount(q)
    assert q.counts_by_submitter() == recount(q)
    assert q.jobs_by_status() == status_recount(q)
    assert {s: sorted(j.id for j in q.jobs_of(s)) for s in q.by_submitter} == \
        {s: sorted(j.id for j in q.jobs.values() if j.submitter == s) for s in {j.submitter for j in q.jobs.values()}}


def test_status_counts_include_a_job_without_a_submitter():
    q = JobQueue("example.org")
    q.apply([txlog.op_new("1.0"), txlog.op_set("1.0", "Owner", '"u"'), txlog.op_set("1.0", "JobStatus", "2")])
    q.apply([txlog.op_new("1.1"), txlog.op_set("1.1", "JobStatus", "1")])   # no Owner: no submitter
    assert q.jobs_by_status() == status_recount(q) == {2: 1, 1: 1}
