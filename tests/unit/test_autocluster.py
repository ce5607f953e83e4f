"""daemons/schedd/autocluster.py: rounding, references, signatures and ids, statistics."""
import math

import pytest

from daemons.schedd.autocluster import (
    FIXED_SIGNIFICANT, AutoclusterConfig, Autoclusterer, AutoclusterStats, Rounding, check_names,
    job_references, parse_rounding, round_text)
from daemons.schedd.jobqueue import Job

PCT25 = Rounding("ImageSize", percent=25.0)
DIGITS2 = Rounding("NumCkpts", digits=2)


# ---- Rounding.apply ---------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    (101, 125), (501, 750), (12345, 12500), (125, 125), (100, 100), (1000, 1000), (0.1, 0.25)])
def test_percent_rounding_rounds_up_to_a_fraction_of_the_magnitude(value, expected):
    assert PCT25.apply(value) == expected


def test_zero_is_not_rounded():
    assert PCT25.apply(0) == 0
    assert DIGITS2.apply(0) == 0


@pytest.mark.parametrize("value, expected", [(12345, 12400), (12345.7, 12400), (12300, 12300), (1, 100)])
def test_digit_rounding_truncates_a_real_then_rounds_up_to_a_power_of_ten(value, expected):
    assert DIGITS2.apply(value) == expected


# ---- parse_rounding ---------------------------------------------------------------------
def test_parse_percent():
    assert parse_rounding("ImageSize", "25%") == Rounding("ImageSize", percent=25.0)
    assert parse_rounding("ImageSize", " 100% ") == Rounding("ImageSize", percent=100.0)


def test_parse_digits():
    assert parse_rounding("NumCkpts", "2") == Rounding("NumCkpts", digits=2)
    assert parse_rounding("NumCkpts", "9") == Rounding("NumCkpts", digits=9)


def test_parse_zero_means_no_rounding():
    assert parse_rounding("ImageSize", "0") is None


@pytest.mark.parametrize("text", ["abc", "150%", "0%", "10", "-1", "x%"])
def test_parse_rejects_bad_texts_naming_them(text):
    with pytest.raises(ValueError) as e:
        parse_rounding("ImageSize", text)
    assert repr(text) in str(e.value)


# ---- round_text -------------------------------------------------------------------------
def test_round_text_integer_stays_an_integer():
    assert round_text(PCT25, "101") == "125"
    assert round_text(PCT25, "125") == "125"
    assert round_text(DIGITS2, "12345") == "12400"


def test_round_text_real_stays_a_real():
    assert round_text(DIGITS2, "12345.7") == "12400.0"
    assert float(round_text(PCT25, "12345.7")) == 12500.0
    assert "." in round_text(PCT25, "12345.7")


@pytest.mark.parametrize("text", ["ImageSize + 1", '"101"', "undefined", "RequestMemory", "{ 1, 2 }"])
def test_round_text_leaves_non_literals_alone(text):
    assert round_text(PCT25, text) is None


# ---- check_names ------------------------------------------------------------------------
def test_check_names_accepts_identifiers():
    assert check_names("ADD_SIGNIFICANT_ATTRIBUTES", ["Foo", "_bar", "x1"]) == ("Foo", "_bar", "x1")


def test_check_names_rejects_non_identifiers_naming_them():
    with pytest.raises(ValueError) as e:
        check_names("ADD_SIGNIFICANT_ATTRIBUTES", ["Good", "1abc", "a-b"])
    msg = str(e.value)
    assert "ADD_SIGNIFICANT_ATTRIBUTES" in msg
    assert "'1abc'" in msg
    assert "'a-b'" in msg
    assert "'Good'" not in msg


# ---- job_references ---------------------------------------------------------------------
def test_job_references_keep_job_names_only():
    refs = job_references("(TARGET.Disk >= RequestDisk) && MY.Foo > 1 && TARGET.x.y")
    assert sorted(refs) == ["Foo", "RequestDisk"]


def test_job_references_of_a_literal_are_empty():
    assert job_references("5") == ()
    assert job_references('"text"') == ()


def test_job_references_skip_nested_references():
    assert job_references("SomeAd.Attr > 1 && Bar") == ("Bar",)


# ---- Autoclusterer ----------------------------------------------------------------------
def job(proc, cluster=1, **attrs):
    return Job(cluster, proc, attrs=dict(attrs))


def clusterer(neg=("RequestMemory", "Owner", "diskUsage"), cfg=None):
    a = Autoclusterer(cfg or AutoclusterConfig())
    if neg:
        a.update_negotiator_attrs(list(neg))
    return a


BASE = dict(Owner='"alice"', RequestMemory="1024", Requirements="TARGET.Memory >= RequestMemory",
            Rank="0", Args='"1"')


def test_base_list_is_negotiator_attrs_sorted_then_the_fixed_ones():
    assert clusterer().base_list() == ("diskUsage", "Owner", "RequestMemory", "Requirements", "Rank",
                                       "ConcurrencyLimits")
    assert FIXED_SIGNIFICANT == ("Requirements", "Rank", "ConcurrencyLimits")


def test_base_list_without_negotiator_attrs():
    assert Autoclusterer().base_list() == ("Requirements", "Rank", "ConcurrencyLimits")


def test_equal_jobs_share_an_id():
    a = clusterer()
    j1, j2 = job(0, **BASE), job(1, **BASE)
    assert a.assign(j1) == a.assign(j2)
    assert a.known_signatures == 1


def test_a_non_significant_difference_does_not_split():
    a = clusterer()
    j1, j2 = job(0, **BASE), job(1, **{**BASE, "Args": '"2"'})
    assert a.assign(j1) == a.assign(j2)


def test_a_significant_difference_splits():
    a = clusterer()
    j1, j2 = job(0, **BASE), job(1, **{**BASE, "RequestMemory": "2048"})
    assert a.assign(j1) != a.assign(j2)


def test_a_significant_difference_in_a_fixed_attribute_splits():
    a = clusterer()
    j1, j2 = job(0, **BASE), job(1, **{**BASE, "ConcurrencyLimits": '"db"'})
    assert a.assign(j1) != a.assign(j2)


@pytest.mark.parametrize("present", ['""', "undefined", "0", "false"])
def test_a_missing_attribute_differs_from_any_present_value(present):
    a = clusterer()
    missing = job(0, **BASE)
    there = job(1, **{**BASE, "diskUsage": present})
    assert a.assign(missing) != a.assign(there)


def test_empty_expression_text_differs_from_missing():
    a = clusterer()
    assert a.assign(job(0, **BASE)) != a.assign(job(1, **{**BASE, "diskUsage": ""}))


def test_first_ids_count_from_one():
    a = clusterer()
    assert [a.assign(job(p, **{**BASE, "RequestMemory": str(m)})) for p, m in enumerate((1, 2, 1, 3))] == [
        1, 2, 1, 3]


def test_referenced_attributes_are_appended_in_case_insensitive_order():
    a = clusterer()
    j = job(0, **{**BASE, "Rank": "MY.Foo * TARGET.Memory", "Requirements":
                  "TARGET.Memory >= RequestMemory && TARGET.Disk >= requestDisk && bar =?= true && Zed",
                  "Foo": "1", "requestDisk": "10", "bar": "true"})
    a.assign(j)
    assert j.ac_attrs == ("diskUsage", "Owner", "RequestMemory", "Requirements", "Rank", "ConcurrencyLimits",
                          "bar", "Foo", "requestDisk", "Zed")
    assert j.ac_attrs_lower == frozenset(x.lower() for x in j.ac_attrs)


def test_rank_and_requirements_references_without_negotiator_attrs():
    a = Autoclusterer()
    j = job(0, Rank="MY.Foo * TARGET.Memory", Requirements="TARGET.Memory >= RequestMemory", Foo="2",
            RequestMemory="5")
    a.assign(j)
    assert j.ac_attrs == ("Requirements", "Rank", "ConcurrencyLimits", "Foo", "RequestMemory")


def test_expansion_is_one_level_deep():
    a = Autoclusterer()
    j = job(0, Requirements="TARGET.Memory >= RequestMemory", RequestMemory="Base * 2", Base="512")
    a.assign(j)
    assert j.ac_attrs == ("Requirements", "Rank", "ConcurrencyLimits", "RequestMemory")
    # So a difference only in the transitively referenced attribute does not split.
    other = job(1, Requirements="TARGET.Memory >= RequestMemory", RequestMemory="Base * 2", Base="4096")
    assert a.assign(other) == a.assign(j)


def test_a_difference_in_an_appended_attribute_splits():
    a = Autoclusterer()
    j1 = job(0, Requirements="TARGET.Memory >= RequestMemory", RequestMemory="512")
    j2 = job(1, Requirements="TARGET.Memory >= RequestMemory", RequestMemory="1024")
    assert a.assign(j1) != a.assign(j2)


def test_rank_over_a_custom_attribute_five_values_five_ids():
    a = clusterer()
    jobs = [job(p, **{**BASE, "Rank": "TARGET.Mips * MY.Weight", "Weight": str(p)}) for p in range(5)]
    ids = [a.assign(j) for j in jobs]
    assert len(set(ids)) == 5
    assert all("Weight" in j.ac_attrs for j in jobs)


def test_rank_over_a_custom_attribute_same_values_one_id():
    a = clusterer()
    jobs = [job(p, **{**BASE, "Rank": "TARGET.Mips * MY.Weight", "Weight": "3", "Args": f'"{p}"'})
            for p in range(5)]
    assert [a.assign(j) for j in jobs] == [1, 1, 1, 1, 1]


def test_significant_attributes_override_groups_by_cluster():
    a = Autoclusterer(AutoclusterConfig(significant=("ClusterId",)))
    a.update_negotiator_attrs(["RequestMemory"])
    jobs = [Job(c, p, attrs={"ClusterId": str(c), "ProcId": str(p), "RequestMemory": str(100 * p)})
            for c in (1, 2) for p in range(3)]
    ids = [a.assign(j) for j in jobs]
    assert ids[0] == ids[1] == ids[2]
    assert ids[3] == ids[4] == ids[5]
    assert ids[0] != ids[3]
    assert a.base_list() == ("ClusterId",)
    assert jobs[0].ac_attrs == ("ClusterId",)


def test_add_significant_attributes_are_appended():
    a = clusterer(neg=("Owner",), cfg=AutoclusterConfig(add=("Site", "RequestGPUs")))
    assert a.base_list() == ("Owner", "Requirements", "Rank", "ConcurrencyLimits", "Site", "RequestGPUs")


def test_remove_significant_attributes_are_dropped_case_insensitively():
    a = clusterer(neg=("Owner", "RequestMemory"), cfg=AutoclusterConfig(remove=("requestmemory", "RANK")))
    assert a.base_list() == ("Owner", "Requirements", "ConcurrencyLimits")


def test_removed_attribute_no_longer_splits():
    a = clusterer(neg=("Owner", "RequestMemory"), cfg=AutoclusterConfig(remove=("RequestMemory",)))
    j1 = job(0, Owner='"alice"', RequestMemory="1")
    j2 = job(1, Owner='"alice"', RequestMemory="2")
    assert a.assign(j1) == a.assign(j2)


def test_update_negotiator_attrs_is_true_only_when_the_list_grows():
    a = Autoclusterer()
    assert a.update_negotiator_attrs(["Owner", "RequestMemory"]) is True
    assert a.update_negotiator_attrs(["Owner", "RequestMemory"]) is False
    assert a.update_negotiator_attrs(["owner"]) is False
    assert a.update_negotiator_attrs([]) is False
    assert a.negotiator_attrs == ["Owner", "RequestMemory"]
    assert a.update_negotiator_attrs(["requestmemory", "Disk"]) is True
    # The union is kept: names the negotiator stops sending stay.
    assert a.negotiator_attrs == ["Disk", "Owner", "RequestMemory"]


def test_growth_invalidates_cached_ids():
    a = clusterer(neg=("Owner",))
    j1 = job(0, Owner='"alice"', RequestMemory="1")
    j2 = job(1, Owner='"alice"', RequestMemory="2")
    assert a.assign(j1) == a.assign(j2)
    gen = a.generation
    assert a.update_negotiator_attrs(["RequestMemory"]) is True
    assert a.generation == gen + 1
    assert j1.ac_generation == gen
    i1, i2 = a.assign(j1), a.assign(j2)
    assert i1 != i2
    assert j1.ac_generation == a.generation
    assert "RequestMemory" in j1.ac_attrs


def test_no_growth_keeps_cached_ids():
    a = clusterer(neg=("Owner",))
    j = job(0, Owner='"alice"')
    first = a.assign(j)
    before = a.ids_assigned
    assert a.update_negotiator_attrs(["Owner"]) is False
    assert a.assign(j) == first
    assert a.ids_assigned == before  # served from the job's cache


def test_a_cleared_job_cache_is_recomputed():
    a = clusterer(neg=("Owner",))
    j = job(0, Owner='"alice"')
    a.assign(j)
    j.attrs["Owner"] = '"bob"'
    j.forget_autocluster()
    assert a.assign(j) == 2


def test_disabled_every_job_is_its_own_autocluster():
    a = Autoclusterer(AutoclusterConfig(enabled=False))
    jobs = [job(p, **BASE) for p in range(4)]
    ids = [a.assign(j) for j in jobs]
    assert len(set(ids)) == 4
    assert jobs[0].ac_attrs == ("ClusterId", "ProcId")
    # The same job keeps its id.
    jobs[0].forget_autocluster()
    assert a.assign(jobs[0]) == ids[0]


def test_ids_are_never_reused_for_a_different_signature():
    a = clusterer(neg=("Owner",))
    seen: dict[int, str] = {}
    owners = ["a", "b", "a", "c"]
    for p, o in enumerate(owners):
        j = job(p, Owner=f'"{o}"')
        seen.setdefault(a.assign(j), o)
        assert seen[j.ac_id] == o
    # After the list grows, numbering continues: no old id names a new signature.
    old_ids = set(seen)
    a.update_negotiator_attrs(["RequestMemory"])
    new_ids = {a.assign(job(10 + p, Owner=f'"{o}"', RequestMemory="1")) for p, o in enumerate(owners)}
    assert len(new_ids) == 3
    assert not (new_ids & old_ids)


def test_canon_maps_negotiator_names_to_job_spelling():
    spell = {"requestmemory": "RequestMemory"}
    a = Autoclusterer(canon=lambda n: spell.get(n.lower(), n))
    a.update_negotiator_attrs(["requestmemory"])
    assert a.base_list()[0] == "RequestMemory"
    assert a.assign(job(0, RequestMemory="1")) != a.assign(job(1, RequestMemory="2"))


# ---- AutoclusterStats -------------------------------------------------------------------
def test_stats_means_and_standard_deviations():
    s = AutoclusterStats()
    s.record(10.0, 2, 10, 4, 4e-6)     # 1 us per id, 5 jobs per autocluster
    s.record(20.0, 4, 4, 2, 6e-6)      # 3 us per id, 1 job per autocluster
    out = s.summary()
    assert out["active_autoclusters"] == 4
    assert out["idle_jobs"] == 4
    assert out["active_autoclusters_mean"] == 3.0
    assert out["active_autoclusters_sd"] == 1.0
    assert out["jobs_per_autocluster_mean"] == 3.0
    assert out["jobs_per_autocluster_sd"] == 2.0
    assert math.isclose(out["id_cost_us_mean"], 2.0)
    assert math.isclose(out["id_cost_us_sd"], 1.0)
    assert out["samples"] == [{"time": 10.0, "autoclusters": 2, "idle_jobs": 10},
                              {"time": 20.0, "autoclusters": 4, "idle_jobs": 4}]


def test_stats_histogram_counts_ids_per_bucket():
    s = AutoclusterStats()
    s.record(1.0, 1, 1, 10, 5e-6)       # 0.5 us -> <=1, 10 ids
    s.record(2.0, 1, 1, 3, 9e-6)        # 3 us -> <=5, 3 ids
    s.record(3.0, 1, 1, 1, 5e-3)        # 5000 us -> >1000, 1 id
    s.record(4.0, 1, 1, 0, 0.0)         # nothing assigned: no cost sample
    h = s.summary()["id_cost_histogram_us"]
    assert h == {"<=1": 10, "<=2": 0, "<=5": 3, "<=10": 0, "<=20": 0, "<=50": 0, "<=100": 0, "<=200": 0,
                 "<=500": 0, "<=1000": 0, ">1000": 1}
    assert len(s.cost_us) == 3


def test_stats_empty_summary():
    out = AutoclusterStats().summary()
    assert (out["active_autoclusters"], out["idle_jobs"], out["active_autoclusters_mean"],
            out["jobs_per_autocluster_sd"], out["id_cost_us_mean"], out["samples"]) == (0, 0, 0.0, 0.0, 0.0, [])


def test_stats_keep_only_the_last_samples():
    s = AutoclusterStats(keep=3)
    for t in range(5):
        s.record(float(t), t + 1, 2 * (t + 1), 1, 1e-6)
    assert [x[0] for x in s.samples] == [2.0, 3.0, 4.0]
    assert len(s.cost_us) == 3
    assert s.summary()["active_autoclusters_mean"] == 4.0
    # The histogram counts everything ever assigned.
    assert sum(s.histogram) == 5


def test_stats_zero_autoclusters_skip_jobs_per_autocluster():
    s = AutoclusterStats()
    s.record(1.0, 0, 0, 0, 0.0)
    s.record(2.0, 2, 6, 0, 0.0)
    out = s.summary()
    assert out["jobs_per_autocluster_mean"] == 3.0
    assert out["active_autoclusters_mean"] == 1.0
