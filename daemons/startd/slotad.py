"""The ad a slot advertises. Pure: the machine's state and time in, attributes out.

As HTCondor's startd publishes them (Resource.cpp, claim.cpp): the slot's own policy
(its slot type's START, RANK, SLOT_WEIGHT, MaxJobRetirementTime), STARTD_ATTRS as this
slot resolves them (SLOT<N>_<attr>, SLOT_TYPE_<N>_<attr>, <attr>), resources, the
claim (RemoteOwner, CurrentRank, JobStart, TotalJobRunTime, RetirementTimeRemaining),
a preempting claim (PreemptingUser, PreemptingRank) and the drain forecast. A dynamic
slot has its partitionable slot's SlotTypeID. A claimed slot advertises a claim id for
a preempting claim, which the negotiator hands out when it preempts.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from daemons.core import ads
from daemons.core.ads import Expr
from daemons.startd import policy

if TYPE_CHECKING:
    from daemons.startd.slots import Machine, Slot

# Reqexp.cpp, STARTD_JOB_HAS_REQUEST_ATTRS (the default).
WITHIN_RESOURCE_LIMITS = (
    "(MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && "
    "TARGET.RequestMemory <= MY.Memory && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk)")


@functools.lru_cache(maxsize=64)   # one text for all the machines of a startd
def within_resource_limits(custom: tuple[str, ...]) -> str:
    clauses = "".join(f" && (TARGET.Request{r} is undefined || MY.{r} >= TARGET.Request{r})" for r in custom)
    return WITHIN_RESOURCE_LIMITS[:-1] + clauses + ")"


def consumption_limits(resources: tuple[str, ...]) -> str:
    """WithinResourceLimits of a slot with a consumption policy (ResAttributes.cpp
    consumptionLimitsExpression): while the negotiator or startd has put the consumption
    in place of a request's Request<Res> (marking the original as _cp_orig_Request<Res>),
    the request must fit; otherwise what the policy would consume must."""
    names = sorted(resources, key=str.lower)
    return "(" + " && ".join(
        f"ifThenElse(TARGET._cp_orig_Request{r} isnt undefined, TARGET.Request{r} <= MY.{r}, "
        f"MY.Consumption{r} <= MY.{r})" for r in names) + ")"


# A slot ad's items that follow only from the configuration and the slot's place and size
# (its type, policy, totals, STARTD_ATTRS...), printed once: a startd prints its slots' ads
# several times per job (the claim's reply, each collector update), and these are most of
# an ad. Kept per configuration, by slot shape; bounded, though a pool has few shapes.
STATIC_PARTS_KEEP = 1024   # at most a few MB: an entry is its dicts and about 1.5 KB of text


class _StaticPart:
    __slots__ = ("base", "startd_attrs", "keys", "text")

    def __init__(self, base: dict[str, Any], startd_attrs: dict[str, Any]) -> None:
        self.base = base
        self.startd_attrs = startd_attrs
        self.keys = frozenset(base) | frozenset(startd_attrs)
        # The printed items, when no STARTD_ATTRS entry overrides a base item (then the
        # parts are merged in precedence order instead).
        self.text = ads.items_text({**base, **startd_attrs}) if base.keys().isdisjoint(startd_attrs) else None


def _static_part(machine: "Machine", s: "Slot", start: str) -> _StaticPart:
    from daemons.startd.slots import SlotKind

    cfg = machine.cfg
    cache = cfg.static_slot_parts
    key = (id(s.spec), s.kind, s.slot_id, s.size, start)
    part = cache.get(key)
    if part is not None:
        return part
    pol = cfg.policy(s.spec)
    partitioned = s.kind is not SlotKind.STATIC
    cp = s.spec.consumption_policy
    wrl = pol.within_resource_limits or (consumption_limits(tuple(n for n, _ in s.spec.consumption)) if cp
                                         else machine.wrl)
    a: dict[str, Any] = {
        "MyType": "Machine",
        "SlotID": s.slot_id,
        "SlotTypeID": s.type_id,
        "SlotType": s.kind.value,
        "Start": Expr(start),
        "Rank": Expr(pol.rank),
        "SlotWeight": Expr(pol.slot_weight),
        "WithinResourceLimits": Expr(wrl),
        "Requirements": Expr("START && (WithinResourceLimits)" if partitioned else "START"),
        "Arch": cfg.arch,
        "OpSys": cfg.opsys,
        "OpSysAndVer": cfg.opsys_and_ver,
        "UidDomain": cfg.uid_domain,
        "FileSystemDomain": cfg.filesystem_domain,
        "HasFileTransfer": True,
        "MachineResources": " ".join(("Cpus", "Memory", "Disk", "Swap") + cfg.custom_resources),
        # An emulated machine has no console user: its keyboard has been idle for a week.
        "KeyboardIdle": 7 * 86400,
        # What a real startd's benchmarks would advertise (policy expressions use them).
        "KFlops": 1_000_000,
        "Mips": 10_000,
        "MaxJobRetirementTime": Expr(pol.max_job_retirement_time),
        "MachineMaxVacateTime": Expr(pol.machine_max_vacate_time),
    }
    for name, amount in s.size.as_dict().items():
        a[f"TotalSlot{name}"] = amount
    for name, amount in cfg.machine.as_dict().items():
        a[f"Total{name}"] = amount
        a[f"Detected{name}"] = amount
    if s.kind is SlotKind.PARTITIONABLE:
        a["PartitionableSlot"] = True
    if cp:
        # A p-slot with a consumption policy, and its dynamic slots, carry the policy
        # (Resource.cpp publish_static: CONSUMPTION_<Res> for every MachineResources entry).
        for res, expr in s.spec.consumption:
            a[f"Consumption{res}"] = Expr(expr)
        if s.kind is SlotKind.PARTITIONABLE:
            a["ConsumptionPolicy"] = True
            a["NumClaims"] = s.spec.num_claims
    if s.kind is SlotKind.DYNAMIC:
        a["DynamicSlot"] = True
        a["ParentSlotId"] = s.slot_id
    part = _StaticPart(a, {name: Expr(expr) for name, expr in cfg.attrs_of(s.slot_id)})
    if len(cache) >= STATIC_PARTS_KEEP:
        cache.clear()
    cache[key] = part
    return part


# A slot's own values, different in every slot ad: printed afresh (ads.items_text).
UNIQUE_ATTRS = frozenset(("Name", "Capability", "ClaimId", "PublicClaimId", "JobId", "GlobalJobId"))


def _parts(machine: "Machine", s: "Slot", now: float, for_eval: bool,
           forecast: dict[str, int] | None) -> tuple[_StaticPart, dict[str, Any], dict[str, Any]]:
    """The slot's static part, what changes with its state (before STARTD_ATTRS in
    precedence) and what comes after STARTD_ATTRS (draining, the forecast)."""
    from daemons.startd.slots import BUSY, RETIRING, SlotKind

    # A draining machine starts nothing new, unless the drain's start expression says so.
    start = machine.cfg.policy(s.spec).start if machine.drain is None else (machine.drain.start_expr or "False")
    static = _static_part(machine, s, start)
    address = f"<{machine.address}>"
    load = float(s.size.cpus) if s.activity in (BUSY, RETIRING) and s.claim else 0.0
    a: dict[str, Any] = {
        "Name": machine.name_of(s),
        "Machine": machine.host,
        "State": s.state,
        "Activity": s.activity,
        "EnteredCurrentState": int(s.entered_state),
        "EnteredCurrentActivity": int(s.entered_activity),
        "StartdIpAddr": address,
        "MyAddress": address,
        "LoadAvg": load,
        "CondorLoadAvg": load,
        "CurrentRank": s.claim.rank if s.claim is not None else 0.0,
        "DaemonStartTime": int(machine.started),
    }
    for name, amount in s.free.as_dict().items():
        a[name] = amount
    if s.kind is SlotKind.PARTITIONABLE:
        a["NumDynamicSlots"] = len(s.children)
        a["ChildCpus"] = [machine.slots[f"slot{s.slot_id}_{c}"].size.cpus for c in sorted(s.children)]
    if s.cap:
        a["Capability"] = a["ClaimId"] = s.capability
    c = s.claim
    if c is not None:
        a["RemoteOwner"] = c.submitter
        a["RemoteScheddName"] = c.schedd_name
        a["ClientMachine"] = c.schedd_name
        a["PublicClaimId"] = f"{c.ids.prefix}{c.seq}"   # the id without its secret
        a["TotalClaimRunTime"] = int(max(0.0, now - c.created))
        if c.job_id:
            a["RemoteUser"] = c.submitter
            a["JobId"] = c.job_id
            a["GlobalJobId"] = f"{c.schedd_name}#{c.job_id}"
            a["JobStart"] = int(c.job_start)
            a["TotalJobRunTime"] = int(max(0.0, now - c.job_start))
            if not for_eval:
                a["RetirementTimeRemaining"] = int(max(0.0, policy.retirement_deadline(machine, s, now) - now))
            for attr, v in c.job_advertised:
                a[attr] = v
    pre = s.pre
    if pre is not None:
        a["PreemptingUser"] = pre.submitter
        a["PreemptingRank"] = pre.rank
        if pre.job_ad is not None:
            group = ads.get(pre.job_ad, "AccountingGroup")
            if isinstance(group, str):
                a["PreemptingAccountingGroup"] = group
    if machine.drain is not None:
        from daemons.startd.drain import drain_attrs
        late = drain_attrs(machine, now)
    else:
        late = {"Draining": False}
    if for_eval:
        # Ads built to evaluate a policy leave out the drain forecast, which itself
        # evaluates policy expressions against the slot.
        late["CurrentTime"] = int(now)
    else:
        from daemons.startd.drain import expected_draining
        late.update(forecast if forecast is not None else expected_draining(machine, now))
    return static, a, late


def _disjoint(static: _StaticPart, a: dict[str, Any], late: dict[str, Any]) -> bool:
    return static.keys.isdisjoint(a) and static.keys.isdisjoint(late) and a.keys().isdisjoint(late)


def _merged(static: _StaticPart, a: dict[str, Any], late: dict[str, Any]) -> dict[str, Any]:
    # HTCondor's precedence: the job's advertised attributes over the slot's own, STARTD_ATTRS
    # over both, the drain's over everything.
    return {**static.base, **a, **static.startd_attrs, **late}


def slot_ad(machine: "Machine", s: "Slot", now: float, *, for_eval: bool = False,
            forecast: dict[str, int] | None = None) -> dict[str, Any]:
    """`forecast`: the machine's drain forecast at `now`, when the caller builds several of
    its slots' ads at once (it evaluates every running job's policy: once, not per slot)."""
    return _merged(*_parts(machine, s, now, for_eval, forecast))


def eval_parts(machine: "Machine", s: "Slot", now: float) -> tuple[_StaticPart | None, dict[str, Any], dict[str, Any]]:
    """The slot's ad for policy evaluation as parts whose keys are apart (static, changing,
    late); or, when STARTD_ATTRS override one of its items, (None, the merged ad, {})."""
    static, a, late = _parts(machine, s, now, True, None)
    if static.text is None or not _disjoint(static, a, late):
        return None, _merged(static, a, late), {}
    return static, a, late


def slot_ad_text(machine: "Machine", s: "Slot", now: float, forecast: dict[str, int] | None = None, *,
                 for_eval: bool = False) -> str:
    """ads.ad_text(slot_ad(...)), with the static part's items printed once for its shape."""
    return _text(*_parts(machine, s, now, for_eval, forecast))


def slot_ad_and_text(machine: "Machine", s: "Slot", now: float) -> tuple[dict[str, Any], str]:
    """slot_ad and slot_ad_text from one build."""
    static, a, late = _parts(machine, s, now, False, None)
    return _merged(static, a, late), _text(static, a, late)


def _text(static: _StaticPart, a: dict[str, Any], late: dict[str, Any]) -> str:
    if static.text is None or not _disjoint(static, a, late):
        return ads.ad_text(_merged(static, a, late))
    return "[ " + static.text + "; " + ads.items_text(a, UNIQUE_ATTRS) + "; " + ads.items_text(late) + " ]"


def clock_attrs(machine: "Machine", s: "Slot", now: float) -> dict[str, int]:
    """The attributes of the slot's advertised ad that change with the clock alone, as
    slot_ad prints them (the machine's drain forecast is expected_draining's): what a
    periodic refresh of an otherwise unchanged ad sends (tests/unit/test_refresh.py
    checks that nothing else in an ad follows the clock)."""
    a: dict[str, int] = {}
    c = s.claim
    if c is not None:
        a["TotalClaimRunTime"] = int(max(0.0, now - c.created))
        if c.job_id:
            a["TotalJobRunTime"] = int(max(0.0, now - c.job_start))
            a["RetirementTimeRemaining"] = int(max(0.0, policy.retirement_deadline(machine, s, now) - now))
    return a
