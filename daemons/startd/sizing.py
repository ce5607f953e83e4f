"""How big a dynamic slot is: the negotiator's split, a consumption policy's, or the
job's requests rounded by MODIFY_REQUEST_EXPR_*, with the startd's floors. Pure
functions of the slot's configuration and the two ads.

HTCondor behaviour followed here:
- consumption_policy.cpp cp_compute_consumption: Consumption<Res> is evaluated with the
  slot as MY and the job as TARGET, a Request<Res> the job does not set counting 0;
  cp_override_requested: while the slot's Requirements are evaluated, the job's
  Request<Res> (those it sets) are replaced by what the policy consumes;
- Resource.cpp create_dslot: at least 1 cpu and 1 MB of memory, and RequestCpus 1 when
  the job's does not evaluate.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import classad2

from daemons.core import ads
from daemons.startd.config import Resources, StartdConfig

if TYPE_CHECKING:
    from daemons.startd.slots import Slot


def decided_size(cfg: StartdConfig, decided: dict[str, int]) -> Resources | str:
    """The negotiator's split (a consumption policy applied on its side), checked."""
    lower = {k.lower(): v for k, v in decided.items()}
    unknown = [k for k in lower if k not in {n.lower() for n in cfg.machine.names}]
    if unknown:
        return f"the negotiator's split names unknown resources: {', '.join(unknown)}"
    if any(v < 0 for v in lower.values()):
        return "the negotiator's split has a negative amount"
    return Resources.of({n: lower.get(n.lower(), 0) for n in cfg.machine.names})


CONSUMES_NOTHING = "the consumption policy consumes nothing for this job"


def consumed(slot: "Slot", job_ad: classad2.ClassAd, slot_ad: classad2.ClassAd) -> Resources | str:
    """A consumption policy's split: Consumption<Res> with the slot as MY and the job as
    TARGET, a Request<Res> the job does not set counting 0."""
    amounts: dict[str, int] = {}
    for res, expr in slot.spec.consumption:
        attr = f"Request{res}"
        missing = attr not in job_ad
        if missing:
            job_ad[attr] = 0
        try:
            v = ads.as_float(ads.evaluate(ads.parse_expr(expr), slot_ad, job_ad))
        finally:
            if missing:
                del job_ad[attr]
        if v is None or v < 0:
            return f"Consumption{res} = {expr} does not evaluate to a non-negative number for this job"
        amounts[res] = int(-(-v // 1))
    if not any(amounts.values()):
        return CONSUMES_NOTHING
    return Resources.of(amounts)


@functools.lru_cache(maxsize=256)
def _tree(expr: str) -> classad2.ExprTree:
    """A configured expression, parsed once (evaluating a tree leaves it as it was)."""
    return classad2.ExprTree(expr)


def dynamic_size(cfg: StartdConfig, slot: "Slot", job_ad: classad2.ClassAd,
                 slot_ad: classad2.ClassAd) -> Resources | str:
    """The job's requests, rounded by the slot type's MODIFY_REQUEST_EXPR_*."""
    values: dict[str, int] = {}
    exprs = cfg.policy(slot.spec).modify_request_exprs + tuple(
        e for e in cfg.modify_request_exprs if e[0] not in ("RequestCpus", "RequestMemory", "RequestDisk"))
    for attr, expr in exprs:
        v = ads.as_number(ads.evaluate(_tree(expr), job_ad, slot_ad))
        if v is None:
            v = ads.as_number(ads.get(job_ad, attr))
        if v is None and attr == "RequestCpus":
            v = 1.0  # Resource.cpp create_dslot: "reasonable default, for sure"
        if v is None:
            return f"the job's {attr} does not evaluate to a number"
        values[attr[len("Request"):]] = int(-(-v // 1))
    for r in cfg.custom_resources:
        if r not in values:
            v = ads.as_number(ads.get(job_ad, f"Request{r}"))
            values[r] = int(-(-v // 1)) if v is not None else 0
    return Resources.of({"Cpus": values["Cpus"], "Memory": values["Memory"], "Disk": max(0, values["Disk"]),
                         **{r: max(0, values[r]) for r in cfg.custom_resources}})


def with_floors(size: Resources) -> Resources:
    """A dynamic slot gets at least 1 cpu and 1 MB of memory (Resource.cpp create_dslot,
    without fractional cpus), taken from the partitionable slot like the rest."""
    if size.cpus >= 1 and size.memory >= 1:
        return size
    amounts = size.as_dict()
    amounts["Cpus"] = max(1, size.cpus)
    amounts["Memory"] = max(1, size.memory)
    return Resources.of(amounts)


def cp_accepts(job_ad: classad2.ClassAd, slot_ad: classad2.ClassAd, consumption: tuple[tuple[str, str], ...]) -> bool:
    """The slot's Requirements for a job on a p-slot with a consumption policy, with the
    job's Request<Res> (those it sets) replaced by what the policy consumes, the originals
    kept as _cp_orig_Request<Res> (consumption_policy.cpp cp_override_requested)."""
    saved: dict[str, Any] = {}
    for res, expr in consumption:
        attr = f"Request{res}"
        if attr not in job_ad:
            continue
        v = ads.as_float(ads.evaluate(ads.parse_expr(expr), slot_ad, job_ad))
        if v is None:
            continue
        saved[attr] = job_ad.lookup(attr)
        job_ad[f"_cp_orig_{attr}"] = saved[attr]
        job_ad[attr] = int(-(-v // 1))
    try:
        return job_ad.matches(slot_ad)
    finally:
        for attr, tree in saved.items():
            job_ad[attr] = tree
            del job_ad[f"_cp_orig_{attr}"]
