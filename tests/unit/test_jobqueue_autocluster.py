"""daemons/schedd/jobqueue.py with autoclustering: cache invalidation, names, SCHEDD_ROUND_ATTR."""
from daemons.schedd import txlog
from daemons.schedd.autocluster import Autoclusterer, Rounding
from daemons.schedd.jobqueue import JobQueue


def queue_with(attrs_by_proc, cluster=1, **kw):
    q = JobQueue("example.org", **kw)
    lines = []
    for proc, attrs in enumerate(attrs_by_proc):
        key = f"{cluster}.{proc}"
        lines.append(txlog.op_new(key))
        lines.extend(txlog.op_set(key, k, v) for k, v in attrs.items())
    q.apply(lines)
    return q


JOB = {"Owner": '"alice"', "Requirements": "TARGET.Memory >= RequestMemory", "Rank": "MY.Foo",
       "RequestMemory": "1024", "Foo": "1", "Args": '"x"', "JobStatus": "1"}


def clustered(attrs=JOB, n=1):
    q = queue_with([dict(attrs) for _ in range(n)])
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["Owner"])
    for j in q.jobs.values():
        ac.assign(j)
    return q, ac


def test_jobs_get_ids_and_attrs():
    q, ac = clustered(n=2)
    j = q.get("1.0")
    assert (j.ac_id, q.get("1.1").ac_id) == (1, 1)
    assert j.ac_attrs == ("Owner", "Requirements", "Rank", "ConcurrencyLimits", "Foo", "RequestMemory")


def test_setting_a_significant_attribute_clears_the_id():
    q, ac = clustered()
    q.apply([txlog.op_set("1.0", "RequestMemory", "2048")])
    assert q.get("1.0").ac_id is None


def test_setting_a_significant_attribute_in_other_case_clears_the_id():
    q, ac = clustered()
    q.apply([txlog.op_set("1.0", "foo", "2")])
    j = q.get("1.0")
    assert j.ac_id is None
    assert j.attrs["Foo"] == "2"
    assert "foo" not in j.attrs


def test_setting_a_non_significant_attribute_keeps_the_id():
    q, ac = clustered()
    q.apply([txlog.op_set("1.0", "Args", '"y"'), txlog.op_set("1.0", "NewAttr", "3")])
    assert q.get("1.0").ac_id == 1


def test_deleting_a_significant_attribute_clears_the_id():
    q, ac = clustered()
    q.apply([txlog.op_delete_attr("1.0", "FOO")])
    j = q.get("1.0")
    assert j.ac_id is None
    assert "Foo" not in j.attrs


def test_setting_clears_only_that_job():
    q, ac = clustered(n=2)
    q.apply([txlog.op_set("1.0", "Owner", '"bob"')])
    assert (q.get("1.0").ac_id, q.get("1.1").ac_id) == (None, 1)
    assert ac.assign(q.get("1.0")) == 2


def test_reassigned_after_a_change_back_gets_the_old_id():
    q, ac = clustered(n=2)
    q.apply([txlog.op_set("1.0", "Foo", "7")])
    assert ac.assign(q.get("1.0")) == 2
    q.apply([txlog.op_set("1.0", "Foo", "1")])
    assert ac.assign(q.get("1.0")) == 1


def test_view_shows_the_autocluster_cache():
    q, ac = clustered()
    v = q.get("1.0").view()
    assert v["AutoClusterId"] == "1"
    assert v["AutoClusterAttrs"] == '"Owner,Requirements,Rank,ConcurrencyLimits,Foo,RequestMemory"'
    q.apply([txlog.op_set("1.0", "Foo", "2")])
    assert "AutoClusterId" not in q.get("1.0").view()


def test_names_are_canonicalized_to_the_first_spelling():
    q = queue_with([{"RequestMemory": "1"}, {"requestmemory": "2", "REQUESTMEMORY": "3"}])
    assert q.get("1.0").attrs == {"RequestMemory": "1"}
    assert q.get("1.1").attrs == {"RequestMemory": "3"}
    assert q.canonical("REQUESTMEMORY") == "RequestMemory"


def test_canonical_spelling_is_shared_with_the_clusterer():
    q = queue_with([{"RequestMemory": "1"}, {"RequestMemory": "2"}])
    ac = Autoclusterer(canon=q.canonical)
    ac.update_negotiator_attrs(["requestMEMORY"])
    assert ac.base_list()[0] == "RequestMemory"
    assert ac.assign(q.get("1.0")) != ac.assign(q.get("1.1"))


# ---- SCHEDD_ROUND_ATTR ------------------------------------------------------------------
def test_default_rule_rounds_image_size_and_keeps_the_raw_value():
    q = queue_with([{"ImageSize": "101"}])
    assert q.get("1.0").attrs == {"ImageSize": "125", "ImageSize_RAW": "101"}


def test_rounding_applies_on_later_sets_too():
    q = queue_with([{"ImageSize": "101"}])
    q.apply([txlog.op_set("1.0", "imagesize", "12345"), txlog.op_set("1.0", "DiskUsage", "501")])
    assert q.get("1.0").attrs == {"ImageSize": "12500", "ImageSize_RAW": "12345", "DiskUsage": "750",
                                  "DiskUsage_RAW": "501"}


def test_non_literal_values_are_not_rounded():
    q = queue_with([{"ImageSize": "RequestMemory * 1024"}])
    assert q.get("1.0").attrs == {"ImageSize": "RequestMemory * 1024"}


def test_unrounded_attributes_are_stored_as_given():
    q = queue_with([{"RequestMemory": "101"}])
    assert q.get("1.0").attrs == {"RequestMemory": "101"}


def test_custom_rules_replace_the_defaults():
    q = queue_with([{"ImageSize": "101", "NumCkpts": "12345"}], rounding=[Rounding("NumCkpts", digits=2)])
    assert q.get("1.0").attrs == {"ImageSize": "101", "NumCkpts": "12400", "NumCkpts_RAW": "12345"}


def test_rounded_attribute_change_clears_the_autocluster():
    q = queue_with([{"Requirements": "TARGET.Memory >= ImageSize", "ImageSize": "101"}])
    ac = Autoclusterer(canon=q.canonical)
    ac.assign(q.get("1.0"))
    q.apply([txlog.op_set("1.0", "ImageSize", "110")])
    j = q.get("1.0")
    assert j.ac_id is None
    # 110 rounds to the same 125: the autocluster is the same.
    assert ac.assign(j) == 1


def test_state_lines_round_trip_rounded_attributes():
    q = queue_with([{"ImageSize": "101", "Owner": '"alice"', "DiskUsage": "12345"}, {"ImageSize": "7"}])
    fresh = JobQueue("example.org")
    fresh.apply(q.state_lines())
    assert {k: j.attrs for k, j in fresh.jobs.items()} == {k: j.attrs for k, j in q.jobs.items()}
    assert fresh.get("1.0").attrs["ImageSize"] == "125"
    assert fresh.get("1.0").attrs["ImageSize_RAW"] == "101"
    assert fresh.get("1.0").attrs["DiskUsage"] == "12500"


def test_state_lines_write_the_raw_value():
    q = queue_with([{"ImageSize": "101"}])
    assert [line for line in q.state_lines() if line.startswith("103 1.0")] == ["103 1.0 ImageSize 101"]


def test_state_lines_round_trip_after_a_rounded_value_becomes_an_expression():
    # ImageSize was a rounded literal, then became an expression: the queue holds the expression
    # (and the stale ImageSize_RAW), and a compacted log must replay to exactly that.
    q = queue_with([{"ImageSize": "101", "RequestMemory": "2"}])
    q.apply([txlog.op_set("1.0", "ImageSize", "RequestMemory * 1024")])
    assert q.get("1.0").attrs["ImageSize"] == "RequestMemory * 1024"
    fresh = JobQueue("example.org")
    fresh.apply(q.state_lines())
    assert fresh.get("1.0").attrs == q.get("1.0").attrs


def test_state_lines_round_trip_when_another_job_has_an_unrounded_expression():
    q = queue_with([{"ImageSize": "101"}, {"ImageSize": "RequestMemory"}])
    fresh = JobQueue("example.org")
    fresh.apply(q.state_lines())
    assert {k: j.attrs for k, j in fresh.jobs.items()} == {k: j.attrs for k, j in q.jobs.items()}


def test_state_lines_round_trip_after_a_rounded_attribute_is_deleted():
    q = queue_with([{"ImageSize": "101", "Owner": '"alice"'}])
    q.apply([txlog.op_delete_attr("1.0", "ImageSize")])
    assert "ImageSize" not in q.get("1.0").attrs
    fresh = JobQueue("example.org")
    fresh.apply(q.state_lines())
    assert fresh.get("1.0").attrs == q.get("1.0").attrs
