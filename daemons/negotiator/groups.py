"""Hierarchical accounting groups and their quotas. Pure.

HTCondor's GroupEntry.cpp:
- GROUP_NAMES lists dotted group names; "<none>" is the root, which accepts surplus;
- a group's quota is static (GROUP_QUOTA_<g>, weighted slots) or dynamic
  (GROUP_QUOTA_DYNAMIC_<g>, a fraction of what its parent has left after static
  children); static quotas are served first and capped by what comes from above;
  the root keeps what its children do not take;
- each allocation round every group is allocated min(requested, quota); the surplus
  (quota not wanted) flows up the tree and is shared among groups with
  GROUP_ACCEPT_SURPLUS[_<g>] in proportion to their quotas, then equally;
- groups negotiate in ascending GROUP_SORT_EXPR (by default usage / quota, "<none>"
  last), each up to its allocation, further limited, for groups that do not accept
  surplus, by their configured quota (strict enforcement);
- a submitter belongs to the longest configured prefix of its accounting group.
Configuration problems are collected as messages: the rest of the pool negotiates.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from daemons.core.config import ConfigError, Param

ROOT = "<none>"
DEFAULT_SORT_EXPR = ('ifThenElse(AccountingGroup=?="<none>",3.4e+38,ifThenElse(GroupQuota>0,'
                     'GroupResourcesInUse/GroupQuota,3.3e+38))')
_GROUP_NAME = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_NOT_GROUPS = {"DYNAMIC", "MAX_ALLOCATION_ROUNDS", "ROUND_ROBIN_RATE"}


@dataclass(frozen=True)
class GroupSpec:
    name: str
    static: bool
    config_quota: float
    accept_surplus: bool
    autoregroup: bool


@dataclass(frozen=True)
class GroupsConfig:
    groups: tuple[GroupSpec, ...] = ()
    sort_expr: str = DEFAULT_SORT_EXPR
    max_rounds: int = 3                       # GROUP_QUOTA_MAX_ALLOCATION_ROUNDS
    rr_rate: float = 1.0e100                  # GROUP_QUOTA_ROUND_ROBIN_RATE
    allow_oversubscription: bool = True       # NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION
    weighted_demand: bool = True              # NEGOTIATOR_USE_WEIGHTED_DEMAND

    @property
    def enabled(self) -> bool:
        return bool(self.groups)


def read_groups(p: Param) -> tuple[GroupsConfig, list[str]]:
    """The group configuration, and the problems found (each names the knob and line)."""
    problems: list[str] = []
    names: list[str] = []
    for n in p.list("GROUP_NAMES"):
        if n == ROOT:
            problems.append(f"{p.where('GROUP_NAMES')}: group name {ROOT!r} is reserved for the root group; ignored")
        elif not _GROUP_NAME.match(n):
            problems.append(f"{p.where('GROUP_NAMES')}: {n!r} is not a group name; ignored")
        elif n.lower() not in {x.lower() for x in names}:
            names.append(n)
    names.sort(key=str.lower)  # parents before children
    known: set[str] = set()
    specs = []
    default_surplus = bool(p.bool("GROUP_ACCEPT_SURPLUS", False))
    default_regroup = bool(p.bool("GROUP_AUTOREGROUP", False))
    for n in names:
        parent = n.rsplit(".", 1)[0] if "." in n else None
        if parent is not None and parent.lower() not in known:
            problems.append(f"{p.where('GROUP_NAMES')}: group {n} has no parent group {parent} in GROUP_NAMES; ignored")
            continue
        known.add(n.lower())
        static, quota = False, 0.0
        try:
            q = p.float(f"GROUP_QUOTA_{n}", maximum=1e15)
            if q is not None:
                if q < 0:
                    raise ConfigError(f"{p.where(f'GROUP_QUOTA_{n}')}: GROUP_QUOTA_{n} = {q:g} is negative")
                static, quota = True, q
            else:
                d = p.float(f"GROUP_QUOTA_DYNAMIC_{n}")
                if d is not None:
                    if not 0 <= d <= 1:
                        raise ConfigError(f"{p.where(f'GROUP_QUOTA_DYNAMIC_{n}')}: GROUP_QUOTA_DYNAMIC_{n} = "
                                          f"{d:g} is not a fraction between 0 and 1")
                    quota = d
                else:
                    problems.append(f"no quota for group {n} (GROUP_QUOTA_{n} or GROUP_QUOTA_DYNAMIC_{n}); "
                                    "it gets none")
        except ConfigError as e:
            problems.append(f"{e}; the group gets no quota")
            static, quota = False, 0.0
        specs.append(GroupSpec(n, static, quota,
                               bool(p.bool(f"GROUP_ACCEPT_SURPLUS_{n}", default_surplus)),
                               bool(p.bool(f"GROUP_AUTOREGROUP_{n}", default_regroup))))
    for knob in p.with_prefix("GROUP_QUOTA_"):
        rest = knob[len("GROUP_QUOTA_"):]
        if rest.upper() in _NOT_GROUPS:
            continue
        g = rest[len("DYNAMIC_"):] if rest.upper().startswith("DYNAMIC_") else rest
        if g.lower() not in known and p.is_set(knob) and g.lower() not in {x.lower() for x in names}:
            problems.append(f"{p.where(knob)}: {knob} names group {g!r}, which GROUP_NAMES does not list; ignored")
    sort_expr = DEFAULT_SORT_EXPR
    try:
        sort_expr = p.expr("GROUP_SORT_EXPR", DEFAULT_SORT_EXPR) or DEFAULT_SORT_EXPR
    except ConfigError as e:
        problems.append(f"{e}; using HTCondor's default")
    cfg = GroupsConfig(
        groups=tuple(specs),
        sort_expr=sort_expr,
        max_rounds=p.int("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS", 3, minimum=1) or 3,
        rr_rate=p.float("GROUP_QUOTA_ROUND_ROBIN_RATE", 1.0e100, minimum=1.0) or 1.0e100,
        allow_oversubscription=bool(p.bool("NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION", True)),
        weighted_demand=bool(p.bool("NEGOTIATOR_USE_WEIGHTED_DEMAND", True)),
    )
    return cfg, problems


@dataclass
class Group:
    name: str
    parent: "Group | None" = None
    children: list["Group"] = field(default_factory=list)
    static: bool = False
    config_quota: float = 0.0
    accept_surplus: bool = False
    autoregroup: bool = False
    quota: float = 0.0
    subtree_quota: float = 0.0
    requested: float = 0.0
    subtree_requested: float = 0.0
    allocated: float = 0.0
    usage: float = 0.0
    sort_key: float = 0.0
    submitters: list[str] = field(default_factory=list)

    def ancestry(self) -> list[str]:
        """This group and those above it, up to (not including) the root."""
        out, g = [], self
        while g is not None and g.name != ROOT:
            out.append(g.name)
            g = g.parent
        return out


def build_tree(cfg: GroupsConfig) -> tuple[Group, list[Group]]:
    """The root and every group, breadth first (root first)."""
    root = Group(ROOT, accept_surplus=True, autoregroup=any(s.autoregroup for s in cfg.groups))
    by_name = {ROOT.lower(): root}
    for s in cfg.groups:
        parent = by_name[s.name.rsplit(".", 1)[0].lower()] if "." in s.name else root
        g = Group(s.name, parent, static=s.static, config_quota=s.config_quota, accept_surplus=s.accept_surplus,
                  autoregroup=s.autoregroup)
        parent.children.append(g)
        by_name[s.name.lower()] = g
    order, queue = [], [root]
    while queue:
        g = queue.pop(0)
        order.append(g)
        queue.extend(g.children)
    return root, order


def group_of(submitter: str, groups: dict[str, Group]) -> Group:
    """The longest configured group the submitter's accounting group falls in (else the root)."""
    principal = submitter.split("@", 1)[0]
    while "." in principal:
        principal = principal.rsplit(".", 1)[0]
        g = groups.get(principal.lower())
        if g is not None:
            return g
    return groups[ROOT.lower()]


def assign_quotas(g: Group, quota: float, allow_oversubscription: bool = True) -> None:
    """Hand `quota` down the tree: static children first, dynamic ones share the rest."""
    if quota <= 0:
        g.subtree_quota = g.quota = 0.0
        for c in g.children:
            assign_quotas(c, 0.0, allow_oversubscription)
        return
    g.subtree_quota = quota
    sqsum = sum(c.config_quota for c in g.children if c.static)
    dqsum = sum(c.config_quota for c in g.children if not c.static)
    sqa = sqsum if allow_oversubscription else min(sqsum, quota)
    dqa = max(0.0, quota - sqa)
    zs = sqsum if sqsum > 0 else 1.0
    zd = max(dqsum, 1.0)  # dynamic fractions summing past 1 are scaled down
    chq = 0.0
    for c in g.children:
        q = c.config_quota * (sqa / zs) if c.static else c.config_quota * (dqa / zd)
        assign_quotas(c, q, allow_oversubscription)
        chq += q
    g.quota = quota if allow_oversubscription and g.name != ROOT else quota - chq
    g.quota = max(0.0, g.quota)


def fairshare(g: Group) -> float:
    """Allocate min(requested, quota) everywhere; share the surplus; return what nobody takes."""
    g.allocated = min(g.requested, g.quota)
    g.requested -= g.allocated
    g.subtree_requested = g.requested
    surplus = g.quota - g.allocated
    for c in g.children:
        surplus += fairshare(c)
        if c.accept_surplus:
            g.subtree_requested += c.subtree_requested
    return _allocate_surplus(g, surplus)


def _allocate_surplus(g: Group, surplus: float) -> float:
    if surplus <= 0:
        return 0.0
    if g.subtree_requested <= 0:
        return surplus
    # The group itself shares on equal footing with its children that accept surplus.
    members: list[tuple[Group | None, float, float]] = [(c, c.subtree_quota, c.subtree_requested)
                                                         for c in g.children if c.accept_surplus]
    members.append((None, g.quota, g.requested))
    want = [r for _, _, r in members]
    given = [0.0] * len(members)
    left = surplus
    if left >= sum(want):
        given = list(want)
        left -= sum(want)
    else:
        for by_quota in (True, False):
            while left > 1e-9:
                active = [i for i, w in enumerate(want) if w - given[i] > 1e-9 and (members[i][1] > 0 or not by_quota)]
                if not active:
                    break
                weights = [members[i][1] if by_quota else 1.0 for i in active]
                z = sum(weights)
                if z <= 0:
                    break
                spent = 0.0
                for i, w in zip(active, weights):
                    a = min(left * w / z, want[i] - given[i])
                    given[i] += a
                    spent += a
                left -= spent
                if spent <= 1e-12:
                    break
    for (c, _, _), a in zip(members, given):
        if c is None:
            g.allocated += a
            g.requested -= a
        else:
            _allocate_surplus(c, a)
    return max(0.0, left)


def strict_enforce(g: Group, slots: float, subtree_usage: dict[str, float]) -> float:
    """Cap a group's target by the configured quota of every non-surplus group from it up."""
    new = slots - g.usage
    node: Group | None = g
    while node is not None:
        if not node.accept_surplus:
            cap = (node.config_quota if node.static else node.subtree_quota) - subtree_usage.get(node.name, 0.0)
            new = min(new, max(0.0, cap))
        node = node.parent
    return new + g.usage


def group_sort_ad(g: Group) -> dict:
    return {"AccountingGroup": g.name, "GroupQuota": float(g.quota), "GroupResourcesAllocated": float(g.allocated),
            "GroupResourcesInUse": float(g.usage)}
