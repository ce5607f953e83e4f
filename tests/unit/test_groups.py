"""daemons/negotiator/groups.py: GROUP_* configuration, the group tree, quotas, surplus, order.

Expected values follow HTCondor's GroupEntry.cpp (hgq_construct_tree, hgq_assign_quotas,
hgq_fairshare / hgq_allocate_surplus, strict_enforce_quota, GetAssignedGroup) and the param
table (GROUP_SORT_EXPR, NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION = True).
"""
import classad2
import pytest

from daemons.core.config import Param
from daemons.negotiator.groups import (
    DEFAULT_SORT_EXPR,
    ROOT,
    GroupsConfig,
    GroupSpec,
    assign_quotas,
    build_tree,
    fairshare,
    group_of,
    group_sort_ad,
    read_groups,
    strict_enforce,
)


def read(knobs=None, **more):
    """Knob names with dots (GROUP_QUOTA_a.x) go in `knobs`."""
    values = dict(knobs or {}, **more)
    return read_groups(Param.from_dict({k: str(v) for k, v in values.items()}))


def spec(name, quota=0.0, static=True, accept=False, regroup=False):
    return GroupSpec(name, static, float(quota), accept, regroup)


def tree(*specs, pool=None, oversub=True):
    root, order = build_tree(GroupsConfig(groups=tuple(specs)))
    if pool is not None:
        assign_quotas(root, pool, oversub)
    return root, {g.name: g for g in order}


def problems_naming(problems, word):
    return [p for p in problems if word in p]


# ---- read_groups ------------------------------------------------------------------------------


def test_no_group_names_no_groups():
    cfg, problems = read()
    assert (cfg.groups, cfg.enabled, problems) == ((), False, [])
    assert cfg.sort_expr == DEFAULT_SORT_EXPR
    assert (cfg.max_rounds, cfg.allow_oversubscription, cfg.weighted_demand) == (3, True, True)


def test_static_and_dynamic_quotas_and_surplus_flags():
    cfg, problems = read({"GROUP_QUOTA_DYNAMIC_a.x": "0.5"}, GROUP_NAMES="b, a, a.x", GROUP_QUOTA_a="10",
                         GROUP_QUOTA_DYNAMIC_b="0.25", GROUP_ACCEPT_SURPLUS="true",
                         GROUP_ACCEPT_SURPLUS_b="false", GROUP_AUTOREGROUP_a="true")
    assert problems == []
    assert cfg.enabled is True
    assert cfg.groups == (
        GroupSpec("a", True, 10.0, True, True),
        GroupSpec("a.x", False, 0.5, True, False),   # parents before children
        GroupSpec("b", False, 0.25, False, False),
    )


def test_static_quota_wins_over_dynamic():
    cfg, problems = read(GROUP_NAMES="a", GROUP_QUOTA_a="7", GROUP_QUOTA_DYNAMIC_a="0.5")
    assert problems == []
    assert cfg.groups == (GroupSpec("a", True, 7.0, False, False),)


def test_negative_static_quota_is_a_problem_not_an_exception():
    cfg, problems = read(GROUP_NAMES="a, b", GROUP_QUOTA_a="-5", GROUP_QUOTA_b="10")
    assert len(problems) == 1
    assert "GROUP_QUOTA_a" in problems[0]
    assert cfg.groups == (GroupSpec("a", False, 0.0, False, False), GroupSpec("b", True, 10.0, False, False))


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_dynamic_quota_outside_zero_to_one_is_a_problem(value):
    cfg, problems = read(GROUP_NAMES="a", GROUP_QUOTA_DYNAMIC_a=value)
    assert len(problems_naming(problems, "GROUP_QUOTA_DYNAMIC_a")) == 1
    assert cfg.groups == (GroupSpec("a", False, 0.0, False, False),)


def test_quota_for_a_group_not_in_group_names_is_reported():
    cfg, problems = read(GROUP_NAMES="a", GROUP_QUOTA_a="1", GROUP_QUOTA_zzz="5",
                         GROUP_QUOTA_DYNAMIC_yyy="0.5", GROUP_QUOTA_MAX_ALLOCATION_ROUNDS="4",
                         GROUP_QUOTA_ROUND_ROBIN_RATE="2")
    assert len(problems_naming(problems, "GROUP_QUOTA_zzz")) == 1
    assert len(problems_naming(problems, "GROUP_QUOTA_DYNAMIC_yyy")) == 1
    assert problems_naming(problems, "MAX_ALLOCATION_ROUNDS") == []
    assert problems_naming(problems, "ROUND_ROBIN_RATE") == []
    assert [s.name for s in cfg.groups] == ["a"]
    assert (cfg.max_rounds, cfg.rr_rate) == (4, 2.0)


def test_child_without_parent_is_reported_and_ignored():
    cfg, problems = read({"GROUP_QUOTA_a.x": "1"}, GROUP_NAMES="a.x, b", GROUP_QUOTA_b="1")
    assert len(problems) == 1
    assert "a.x" in problems[0]
    assert [s.name for s in cfg.groups] == ["b"]


def test_root_name_is_reserved():
    cfg, problems = read(GROUP_NAMES="<none>, a", GROUP_QUOTA_a="1")
    assert len(problems_naming(problems, "<none>")) == 1
    assert [s.name for s in cfg.groups] == ["a"]


def test_group_without_quota_gets_none_and_is_reported():
    cfg, problems = read(GROUP_NAMES="a")
    assert len(problems_naming(problems, "GROUP_QUOTA_a")) == 1
    assert cfg.groups == (GroupSpec("a", False, 0.0, False, False),)


def test_bad_group_sort_expr_is_reported_and_the_default_used():
    cfg, problems = read(GROUP_NAMES="a", GROUP_QUOTA_a="1", GROUP_SORT_EXPR="(((")
    assert len(problems_naming(problems, "GROUP_SORT_EXPR")) == 1
    assert cfg.sort_expr == DEFAULT_SORT_EXPR


# ---- the tree and quotas ---------------------------------------------------------------------


def test_build_tree_is_breadth_first_from_the_root():
    root, order = build_tree(GroupsConfig(groups=(spec("a", 1), spec("a.x", 1), spec("b", 1))))
    assert [g.name for g in order] == [ROOT, "a", "b", "a.x"]
    assert (root.name, root.accept_surplus, root.parent) == (ROOT, True, None)
    by = {g.name: g for g in order}
    assert by["a.x"].parent is by["a"]
    assert [c.name for c in root.children] == ["a", "b"]
    assert by["a.x"].ancestry() == ["a.x", "a"]


def test_static_quotas_and_root_keeps_the_rest():
    root, g = tree(spec("a", 10), spec("b", 5), pool=100.0)
    assert (g["a"].quota, g["b"].quota, root.quota, root.subtree_quota) == (10.0, 5.0, 85.0, 100.0)


def test_dynamic_quota_is_a_fraction_of_what_static_children_leave():
    root, g = tree(spec("a", 20), spec("b", 0.5, static=False), pool=100.0)
    assert (g["a"].quota, g["b"].quota, root.quota) == (20.0, pytest.approx(40.0), pytest.approx(40.0))


def test_dynamic_fractions_summing_past_one_are_scaled_down():
    root, g = tree(spec("a", 0.75, static=False), spec("b", 0.75, static=False), pool=100.0)
    assert (g["a"].quota, g["b"].quota, root.quota) == (pytest.approx(50.0), pytest.approx(50.0),
                                                        pytest.approx(0.0))


def test_nested_groups_divide_their_parents_quota():
    root, g = tree(spec("a", 40), spec("a.x", 10), spec("a.y", 0.5, static=False), pool=100.0)
    assert (g["a"].subtree_quota, g["a.x"].quota, g["a.y"].quota, root.quota) == (
        40.0, 10.0, pytest.approx(15.0), pytest.approx(60.0))
    # With oversubscription allowed (HTCondor's default) a parent keeps its whole quota ...
    assert g["a"].quota == 40.0
    # ... without, it keeps what its children leave.
    root, g = tree(spec("a", 40), spec("a.x", 10), spec("a.y", 0.5, static=False), pool=100.0, oversub=False)
    assert (g["a"].quota, g["a.x"].quota, g["a.y"].quota) == (pytest.approx(15.0), 10.0, pytest.approx(15.0))


def test_oversubscribed_static_quotas():
    root, g = tree(spec("a", 80), spec("b", 40), pool=100.0)
    assert (g["a"].quota, g["b"].quota, root.quota) == (80.0, 40.0, 0.0)
    root, g = tree(spec("a", 80), spec("b", 40), pool=100.0, oversub=False)
    assert (g["a"].quota, g["b"].quota, root.quota) == (pytest.approx(200 / 3), pytest.approx(100 / 3),
                                                        pytest.approx(0.0))


def test_empty_pool_gives_no_quota():
    root, g = tree(spec("a", 10), pool=0.0)
    assert (g["a"].quota, root.quota) == (0.0, 0.0)


# ---- fair share and surplus -------------------------------------------------------------------


def test_group_gets_min_of_request_and_quota_without_surplus():
    root, g = tree(spec("a", 10), spec("b", 50), pool=100.0)
    g["a"].requested, g["b"].requested = 30.0, 0.0
    left = fairshare(root)
    assert (g["a"].allocated, g["b"].allocated, root.allocated) == (10.0, 0.0, 0.0)
    assert g["a"].requested == 20.0
    assert left == pytest.approx(90.0)


def test_group_accepting_surplus_gets_its_request_from_the_surplus():
    root, g = tree(spec("a", 10, accept=True), spec("b", 50), pool=100.0)
    g["a"].requested, g["b"].requested = 30.0, 0.0
    left = fairshare(root)
    assert (g["a"].allocated, g["b"].allocated, root.allocated) == (pytest.approx(30.0), 0.0, 0.0)
    assert left == pytest.approx(70.0)


def test_surplus_is_shared_in_proportion_to_quota():
    # b's unused 60 goes to a and c (both want more than they can get) as 10 : 30.
    root, g = tree(spec("a", 10, accept=True), spec("b", 60), spec("c", 30, accept=True), pool=100.0)
    g["a"].requested, g["b"].requested, g["c"].requested = 100.0, 0.0, 100.0
    left = fairshare(root)
    assert (g["a"].allocated, g["c"].allocated, g["b"].allocated) == (pytest.approx(25.0), pytest.approx(75.0),
                                                                      0.0)
    assert left == pytest.approx(0.0)


def test_surplus_share_is_capped_at_the_request_and_the_rest_passed_on():
    root, g = tree(spec("a", 10, accept=True), spec("b", 60), spec("c", 30, accept=True), pool=100.0)
    g["a"].requested, g["b"].requested, g["c"].requested = 12.0, 0.0, 100.0
    fairshare(root)
    assert (g["a"].allocated, g["c"].allocated) == (pytest.approx(12.0), pytest.approx(88.0))


def test_zero_quota_groups_share_surplus_equally():
    root, g = tree(spec("a", 0, static=False, accept=True), spec("b", 50), spec("c", 0, static=False, accept=True),
                   pool=50.0)
    g["a"].requested, g["b"].requested, g["c"].requested = 100.0, 0.0, 100.0
    fairshare(root)
    assert (g["a"].allocated, g["c"].allocated) == (pytest.approx(25.0), pytest.approx(25.0))


def test_root_takes_surplus_for_its_own_submitters():
    root, g = tree(spec("a", 60), pool=100.0)
    g["a"].requested, root.requested = 0.0, 70.0
    left = fairshare(root)
    assert root.allocated == pytest.approx(70.0)
    assert left == pytest.approx(30.0)


# ---- submitters to groups ---------------------------------------------------------------------


def test_group_of_longest_configured_prefix():
    _, g = tree(spec("a", 1), spec("a.x", 1))
    groups = {n.lower(): grp for n, grp in g.items()}
    assert group_of("a.x.alice@dom", groups).name == "a.x"
    assert group_of("a.x.y.alice@dom", groups).name == "a.x"
    assert group_of("a.alice@dom", groups).name == "a"
    assert group_of("A.X.alice@dom", groups).name == "a.x"     # case-insensitive
    assert group_of("alice@dom.org", groups).name == ROOT
    assert group_of("b.alice@dom", groups).name == ROOT


def test_group_of_falls_back_to_the_parent_then_the_root():
    _, g = tree(spec("a", 1))
    assert group_of("a.x.alice@dom", {n.lower(): grp for n, grp in g.items()}).name == "a"
    _, g = tree(spec("b", 1))
    assert group_of("a.x.alice@dom", {n.lower(): grp for n, grp in g.items()}).name == ROOT


# ---- strict quota enforcement -------------------------------------------------------------------


def test_strict_enforce_caps_a_non_surplus_group_at_its_configured_quota():
    root, g = tree(spec("a", 10), pool=100.0)
    g["a"].usage = 4.0
    assert strict_enforce(g["a"], 30.0, {"a": 4.0}) == pytest.approx(10.0)
    assert strict_enforce(g["a"], 8.0, {"a": 4.0}) == pytest.approx(8.0)        # below the cap: unchanged


def test_strict_enforce_leaves_a_surplus_group_alone():
    root, g = tree(spec("a", 10, accept=True), pool=100.0)
    g["a"].usage = 4.0
    assert strict_enforce(g["a"], 30.0, {"a": 4.0}) == pytest.approx(30.0)


def test_strict_enforce_applies_every_non_surplus_ancestor():
    root, g = tree(spec("a", 10), spec("a.x", 0.5, static=False, accept=True), pool=100.0)
    g["a.x"].usage = 2.0
    # a's subtree uses 6 of its 10: a.x may grow by 4 whatever it was allotted.
    assert strict_enforce(g["a.x"], 50.0, {"a": 6.0, "a.x": 2.0}) == pytest.approx(6.0)


def test_strict_enforce_dynamic_group_uses_its_subtree_quota():
    root, g = tree(spec("a", 0.2, static=False), pool=100.0)
    g["a"].usage = 5.0
    assert g["a"].subtree_quota == pytest.approx(20.0)
    assert strict_enforce(g["a"], 40.0, {"a": 5.0}) == pytest.approx(20.0)


# ---- GROUP_SORT_EXPR ------------------------------------------------------------------------------


def sort_key(expr, g):
    return classad2.ExprTree(expr).eval(classad2.ClassAd(group_sort_ad(g)))


def test_group_sort_ad():
    root, g = tree(spec("a", 10), pool=100.0)
    g["a"].usage, g["a"].allocated = 3.0, 7.0
    assert group_sort_ad(g["a"]) == {"AccountingGroup": "a", "GroupQuota": 10.0, "GroupResourcesAllocated": 7.0,
                                     "GroupResourcesInUse": 3.0}


def test_default_sort_expr_orders_by_usage_over_quota_with_root_last():
    root, g = tree(spec("a", 10), spec("b", 20), spec("z", 0, static=False), pool=100.0)
    g["a"].usage, g["b"].usage, g["z"].usage, root.usage = 5.0, 2.0, 1.0, 0.0
    keys = {n: sort_key(DEFAULT_SORT_EXPR, grp) for n, grp in g.items()}
    assert keys == {"a": pytest.approx(0.5), "b": pytest.approx(0.1), "z": pytest.approx(3.3e38),
                    ROOT: pytest.approx(3.4e38)}
    assert sorted(g, key=keys.get) == ["b", "a", "z", ROOT]
