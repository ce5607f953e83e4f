"""Cluster ads: the jobs of one cluster share what they have in common, in memory and in
the job queue log, and every job still reads, changes and replays as a whole ad."""
from daemons.schedd import txlog
from daemons.schedd.jobqueue import JobQueue
from daemons.schedd.submit import SubmitContext, build_cluster, build_jobs, parse_submit

CTX = SubmitContext("alice", "example.org", 7, 1000, schedd_name="sched")


def queue_of(text: str) -> tuple[JobQueue, list[str]]:
    """A queue with the cluster submitted as the schedd does it, and the transaction's lines."""
    q = JobQueue("example.org")
    q.next_cluster = 7
    written = "".join(q.submit_transaction(build_cluster(parse_submit(text), CTX), 7)).split("\n")
    assert written[0] == "105 " and written[-2:] == ["106 ", ""]
    return q, written[1:-2]


def replayed(lines: list[str]) -> JobQueue:
    fresh = JobQueue("example.org")
    fresh.apply(lines)
    return fresh


def whole(q: JobQueue) -> dict:
    return {k: dict(j.attrs.items()) for k, j in q.jobs.items()}


def test_build_cluster_is_build_jobs_split_into_common_and_own():
    for text in ("cmd = /bin/sleep\nargs = 60\nqueue 5\n",
                 "cmd = /bin/sleep\nargs = $(Process)\nqueue 4\n",
                 "cmd = /bin/sleep\nrequest_memory = 100\nqueue 2\nrequest_memory = 200\nqueue 2\n",
                 "cmd = /bin/sleep\nqueue 2 x in (a, b)\n",
                 "cmd = /bin/sleep\narguments = $(Step) $(Item)\nqueue 3 in (a, b)\n"):
        desc = parse_submit(text)
        built = build_cluster(desc, CTX)
        procs = list(built.procs())
        assert [{**built.common, **own} for own in procs] == build_jobs(desc, CTX), text
        assert all("ProcId" in own and "GlobalJobId" in own for own in procs)
        assert "ProcId" not in built.common
        assert list(built.numbers()) == list(range(len(procs)))
        # The same cluster through the queue, written line by line or as a list of lines.
        q1, q2 = JobQueue("example.org"), JobQueue("example.org")
        q1.submit_transaction(built, 7)
        q2.apply(q2.submit_lines(build_jobs(desc, CTX), 7))
        assert whole(q1) == whole(q2) and q1.clusters[7].attrs == q2.clusters[7].attrs


def test_a_queue_n_is_one_cluster_ad_and_a_few_lines_per_job():
    q, lines = queue_of("cmd = /bin/sleep\nargs = 60\nqueue 1000\n")
    per_job = [line for line in lines if line.split(" ")[1].startswith("7.") and not line.split(" ")[1] == "7.-1"]
    assert len(per_job) == 3 * 1000        # NewClassAd, ProcId, GlobalJobId
    assert len(q.clusters[7].attrs) > 25
    j = q.get("7.999")
    # Not even ProcId and GlobalJobId are kept per job: the cluster makes them from the number.
    assert dict(j.own) == {} and set(q.clusters[7].derived) == {"ProcId", "GlobalJobId"}
    assert (j.attrs["ProcId"], j.attrs["Args"], j.attrs["GlobalJobId"]) == ("999", '"60"', '"sched#7.999#1000"')
    built = build_jobs(parse_submit("cmd = /bin/sleep\nargs = 60\nqueue 1000\n"), CTX)[999]
    assert {k: v for k, v in j.attrs.items() if not k.endswith("_RAW")} == built


def test_a_change_to_one_job_leaves_its_siblings_and_the_cluster_ad_alone():
    q, _ = queue_of("cmd = /bin/sleep\nqueue 3\n")
    shared = dict(q.clusters[7].attrs)
    q.apply(JobQueue.set_lines(q.get("7.1"), {"JobStatus": "2", "Cmd": None, "Foo": "1"}))
    assert q.clusters[7].attrs == shared
    assert (q.get("7.1").status, "Cmd" in q.get("7.1").attrs, q.get("7.1").attrs["Foo"]) == (2, False, "1")
    assert (q.get("7.0").status, q.get("7.0").attrs["Cmd"], "Foo" in q.get("7.0").attrs) == (1, '"/bin/sleep"', False)
    assert q.counts_by_submitter()["alice@example.org"]["idle"] == 2


def test_compacted_and_replayed_queues_are_the_same_queue():
    q, lines = queue_of("cmd = /bin/sleep\nimage_size = 101\nqueue 4\n")
    for change in (JobQueue.set_lines(q.get("7.0"), {"Cmd": None, "JobPrio": "5"}),   # hides a cluster attribute
                   JobQueue.set_lines(q.get("7.1"), {"ImageSize": "501"}),             # rounded, with its _RAW
                   [txlog.op_destroy("7.3")]):
        q.apply(change)
        lines += change
    assert q.get("7.1").attrs["ImageSize"] == "750" and q.get("7.1").attrs["ImageSize_RAW"] == "501"
    assert q.get("7.2").attrs["ImageSize"] == "125" and q.get("7.2").attrs["ImageSize_RAW"] == "101"
    for fresh in (replayed(lines), replayed(q.state_lines())):
        assert whole(fresh) == whole(q)
        assert fresh.counts_by_submitter() == q.counts_by_submitter()
        assert [j.key for j in fresh.idle_in_order("alice@example.org")] == [(7, 0), (7, 1), (7, 2)]
        assert "Cmd" not in fresh.get("7.0").attrs


def test_the_cluster_ad_goes_with_its_last_job():
    q, _ = queue_of("cmd = /bin/sleep\nqueue 2\n")
    q.apply([txlog.op_destroy("7.0")])
    assert 7 in q.clusters
    q.apply([txlog.op_destroy("7.1")])
    assert q.clusters == {} and q.jobs == {}
    assert not any(line.startswith("101 7.-1") for line in q.state_lines())


def test_a_change_to_the_cluster_ad_reaches_every_job_and_the_indexes():
    q, _ = queue_of("cmd = /bin/sleep\nqueue 3\n")
    q.apply(JobQueue.set_lines(q.get("7.2"), {"JobStatus": "5"}))    # its own status stays
    q.apply([txlog.op_set("7.-1", "JobStatus", "2")])
    assert [q.get(f"7.{p}").status for p in range(3)] == [2, 2, 5]
    assert q.counts_by_submitter()["alice@example.org"] == {
        "idle": 0, "running": 2, "held": 1, "weighted_idle": 0, "weighted_running": 2}
    assert list(q.idle_in_order("alice@example.org")) == []


def test_a_log_written_before_cluster_ads_still_replays():
    q = JobQueue("example.org")
    q.apply([txlog.op_new("3.0"), txlog.op_set("3.0", "Owner", '"bob"'), txlog.op_set("3.0", "JobStatus", "1"),
             txlog.op_delete_attr("3.0", "JobStatus")])
    j = q.get("3.0")
    assert (j.cad, dict(j.attrs.items()), j.submitter) == (None, {"Owner": '"bob"'}, "bob@example.org")
    assert whole(replayed(q.state_lines())) == whole(q)


def test_a_job_whose_number_is_not_its_cluster_s_pattern_keeps_its_own():
    q = JobQueue("example.org")
    q.apply([txlog.op_new("4.-1"), txlog.op_set("4.-1", "Owner", '"al"'),
             txlog.op_new("4.0"), txlog.op_set("4.0", "ProcId", "0"),
             txlog.op_set("4.0", "GlobalJobId", '"s#4.0#9"'),
             txlog.op_new("4.1"), txlog.op_set("4.1", "ProcId", "1"),
             txlog.op_set("4.1", "GlobalJobId", '"elsewhere"'),
             txlog.op_new("4.2"), txlog.op_set("4.2", "ProcId", "2"), txlog.op_set("4.2", "GlobalJobId", '"s#4.2#9"')])
    assert [dict(q.get(f"4.{p}").own) for p in range(3)] == [{}, {"GlobalJobId": '"elsewhere"'}, {}]
    assert [q.get(f"4.{p}").attrs["GlobalJobId"] for p in range(3)] == ['"s#4.0#9"', '"elsewhere"', '"s#4.2#9"']
    q.apply(JobQueue.set_lines(q.get("4.2"), {"GlobalJobId": None}))     # deleted: hidden, not made again
    assert "GlobalJobId" not in q.get("4.2").attrs and q.get("4.2").attrs["ProcId"] == "2"
    assert whole(replayed(q.state_lines())) == whole(q)


# ---- autocluster ids worked out once per cluster --------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from daemons.schedd.autocluster import Autoclusterer  # noqa: E402

_SUBMITS = ("cmd = /bin/sleep\nrequest_memory = 100\nqueue 4\n",
            "cmd = /bin/sleep\nrequest_memory = $(Process)\nqueue 3\n",
            "cmd = /bin/sleep\nrequest_memory = 100\nqueue 2\nrequest_memory = 200\nqueue 2\n",
            "cmd = /bin/sleep\n+Department = \"physics\"\nrequirements = TARGET.Department =?= MY.Department\n"
            "queue 3\n")
# (job or cluster, attribute, value): edits after the submit, significant or not.
_EDITS = st.lists(st.tuples(st.sampled_from(["7.0", "7.1", "7.-1", "8.0", "8.2", "8.-1"]),
                            st.sampled_from(["RequestMemory", "Department", "Args", "ProcId", "Foo"]),
                            st.sampled_from(["100", "200", '"physics"', '"x"', "MY.Foo + 1"])),
                  max_size=6)


def _partition(q: JobQueue, ids: dict) -> set[frozenset]:
    groups: dict[int, set] = {}
    for key, ac in ids.items():
        groups.setdefault(ac, set()).add(key)
    return {frozenset(g) for g in groups.values()}


@given(st.lists(st.sampled_from(_SUBMITS), min_size=1, max_size=3), _EDITS,
       st.sampled_from([[], ["Department"], ["Foo", "Department"]]))
@settings(max_examples=200, deadline=None)
def test_a_clusters_shared_autocluster_equals_each_jobs_own(submits, edits, negotiator_attrs):
    """Jobs that take every significant attribute from their cluster share one worked-out
    id (ClusterAd.ac_memo); the grouping is the one each job's own signature gives."""
    q = JobQueue("example.org")
    for i, text in enumerate(submits):
        q.submit_transaction(build_cluster(parse_submit(text), CTX), 7 + i)
    q.apply([txlog.op_set(k, a, v) for k, a, v in edits
             if k.split(".")[0] in {str(c) for c in q.clusters} and (k.endswith("-1") or q.get(k))])
    memo = Autoclusterer(canon=q.canonical)
    memo.update_negotiator_attrs(negotiator_attrs)
    plain = Autoclusterer(canon=q.canonical)
    plain.update_negotiator_attrs(negotiator_attrs)
    with_memo, without = {}, {}
    for key, job in q.jobs.items():
        with_memo[key] = memo.assign(job)
    for key, job in q.jobs.items():
        job.forget_autocluster()
        if job.cad is not None:
            job.cad.ac_memo = None
        without[key] = plain.assign(job)
        if job.cad is not None:
            job.cad.ac_memo = None
    assert _partition(q, with_memo) == _partition(q, without)


def test_a_jobs_text_is_the_text_of_its_view_whatever_it_changed():
    """Job.text() prints the cluster's items once and puts a job's own values in their
    places: the same text as printing view(), for jobs with any mix of changed, deleted,
    derived, new and autocluster attributes."""
    import random
    from daemons.core import ads
    rng = random.Random(2)
    q, _ = queue_of("cmd = /bin/sleep\nargs = 60\nrequest_memory = 100\nqueue 40\n")
    jobs = list(q.jobs.values())
    names = ["JobStatus", "Args", "ProcId", "GlobalJobId", "RemoteHost", "ClaimId", "Cmd", "NewOne",
             "AutoClusterId", "RequestMemory"]
    for step in range(400):
        job = rng.choice(jobs)
        name = rng.choice(names)
        r = rng.random()
        if r < 0.5:
            job.writable()[name] = rng.choice(['"x"', "2", "undefined"])
        elif r < 0.7 and name in job.attrs:
            job.delete(name)
        elif r < 0.8:
            job.ac_id, job.ac_attrs = rng.choice([(None, ()), (3, ("Cmd", "Args"))])
        elif r < 0.85:
            job.cad.attrs[rng.choice(["Extra", "Args"])] = '"c"'
            job.cad.changed()
        for j in (job, rng.choice(jobs)):
            assert j.text() == ads.text_of_exprs(j.view()), (step, j.id)
