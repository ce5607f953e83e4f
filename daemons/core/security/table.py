"""The one table: every RPC of every service and the authorization level it needs.

Levels are HTCondor's for the command each RPC stands for (the daemon and command in
each entry's note; the registrations are in each daemon's *_main.cpp / collector.cpp /
matchmaker.cpp / schedd.cpp). An RPC missing from the table is refused (fail closed),
and tests/unit/test_security_table.py checks that every method of every generated
service descriptor has an entry here.

Some requests need more than their RPC's level, decided from the request itself:
- Collector.UpdateAds / InvalidateAds: the level of each ad type, as the collector's
  UPDATE_*_AD / INVALIDATE_*_ADS commands have it (ADVERTISE_STARTD for slot and startd
  ads, ADVERTISE_SCHEDD for schedd and submitter ads, ADVERTISE_MASTER for master ads,
  NEGOTIATOR for negotiator and accounting ads, DAEMON for any other type);
- Collector.QueryAds with include_private (claim ids): NEGOTIATOR, as
  QUERY_STARTD_PVT_ADS.
What a level cannot express (only a job's owner or a queue super user may act on a
job; claim operations need the claim's secret id) is the services' own check.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from daemons.core.security.levels import (ADMINISTRATOR, ADVERTISE_MASTER, ADVERTISE_SCHEDD, ADVERTISE_STARTD,
                                          DAEMON, NEGOTIATOR, READ, WRITE)

PACKAGE = "htcpool.v1"


@dataclass(frozen=True)
class Need:
    """A further level a request needs, and for what (named in a refusal)."""
    what: str
    level: str


@dataclass(frozen=True)
class Rule:
    level: str                                           # every call needs this
    htcondor: str                                        # the HTCondor command it mirrors
    needs: Callable[[Any], list[Need]] | None = None     # request -> further needs


# MyType -> the level HTCondor's collector requires to advertise (or invalidate) it.
_AD_LEVEL = {
    "machine": ADVERTISE_STARTD, "startdaemon": ADVERTISE_STARTD, "startd": ADVERTISE_STARTD,
    "scheduler": ADVERTISE_SCHEDD, "submitter": ADVERTISE_SCHEDD,
    "daemonmaster": ADVERTISE_MASTER, "master": ADVERTISE_MASTER,
    "negotiator": NEGOTIATOR, "accounting": NEGOTIATOR,
}


# Every level a request's own needs can name: a caller holding them all (a daemon) skips
# working them out (parsing each ad of an update).
REQUEST_LEVELS = frozenset({ADVERTISE_STARTD, ADVERTISE_SCHEDD, ADVERTISE_MASTER, NEGOTIATOR, DAEMON})


def advertise_level(my_type: str) -> str:
    """The level needed to advertise or invalidate ads of `my_type` (UPDATE_AD_GENERIC: DAEMON)."""
    return _AD_LEVEL.get(my_type.lower(), DAEMON)


def _update_needs(request: Any) -> list[Need]:
    from daemons.core import ads
    types: dict[str, None] = {}
    for a in request.ads:
        try:
            my_type = ads.get(ads.parse_ad(a.text), "MyType")
        except ads.AdError:
            continue  # the collector refuses the whole update as malformed
        if isinstance(my_type, str) and my_type:
            types.setdefault(my_type)
    if request.invalidate_names:
        types.setdefault(request.invalidate_type or "Machine")
    if request.refreshes:
        types.setdefault(request.refresh_type or "Machine")
    return [Need(f"{t} ads", advertise_level(t)) for t in types]


def _invalidate_needs(request: Any) -> list[Need]:
    my_type = request.my_type
    if my_type.lower() in ("", "any"):
        # Invalidating every type at once needs every type's level: DAEMON and all ADVERTISE_*.
        return [Need("ads of any type", lv) for lv in (ADVERTISE_STARTD, ADVERTISE_SCHEDD, ADVERTISE_MASTER,
                                                       NEGOTIATOR, DAEMON)]
    return [Need(f"{my_type} ads", advertise_level(my_type))]


def _query_needs(request: Any) -> list[Need]:
    return [Need("private attributes (claim ids)", NEGOTIATOR)] if request.include_private else []


def _m(service: str, method: str) -> str:
    return f"/{PACKAGE}.{service}/{method}"


TABLE: dict[str, Rule] = {
    # Every daemon's Admin service (DaemonCore's own commands).
    _m("Admin", "Ping"): Rule(READ, "DC_NOP_READ (condor_ping)"),
    _m("Admin", "Shutdown"): Rule(ADMINISTRATOR, "DC_OFF_GRACEFUL / DC_OFF_FAST (condor_off)"),
    # Fault injection has no HTCondor command; breaking a daemon on purpose is an
    # administrator's act, and so is looking at what is planned.
    _m("Admin", "SetFaultPlan"): Rule(ADMINISTRATOR, "fault injection (htcpool's own)"),
    _m("Admin", "ClearFaults"): Rule(ADMINISTRATOR, "fault injection (htcpool's own)"),
    _m("Admin", "ListFaults"): Rule(ADMINISTRATOR, "fault injection (htcpool's own)"),
    # Collector (collector.cpp).
    _m("Collector", "UpdateAds"): Rule(READ, "UPDATE_*_AD: ADVERTISE_STARTD/SCHEDD/MASTER, NEGOTIATOR, DAEMON "
                                             "by ad type", _update_needs),
    _m("Collector", "InvalidateAds"): Rule(READ, "INVALIDATE_*_ADS: the ad type's level", _invalidate_needs),
    _m("Collector", "QueryAds"): Rule(READ, "QUERY_*_ADS (READ); QUERY_STARTD_PVT_ADS (NEGOTIATOR)", _query_needs),
    # Negotiator (matchmaker.cpp). Reschedule: the negotiator's own RESCHEDULE is DAEMON,
    # but users reach it through the schedd's RESCHEDULE, which is WRITE; htcpool's
    # command goes straight to the negotiator, so it keeps condor_reschedule's WRITE.
    _m("Negotiator", "Reschedule"): Rule(WRITE, "RESCHEDULE (condor_reschedule, via the schedd: WRITE)"),
    _m("Negotiator", "CycleHistory"): Rule(READ, "GET_PRIORITY-like query"),
    _m("Negotiator", "UserPrio"): Rule(READ, "GET_PRIORITY / GET_PRIORITY_ROLLUP"),
    _m("Negotiator", "SetUserPrio"): Rule(ADMINISTRATOR, "SET_PRIORITY / SET_PRIORITYFACTOR (administrator)"),
    # Schedd (schedd.cpp, qmgmt).
    _m("Schedd", "Submit"): Rule(WRITE, "QMGMT_WRITE_CMD (condor_submit)"),
    _m("Schedd", "Query"): Rule(READ, "QUERY_JOB_ADS (condor_q, condor_history)"),
    _m("Schedd", "Act"): Rule(WRITE, "ACT_ON_JOBS (condor_rm, condor_hold, condor_release) and qmgmt "
                                     "SetAttribute (condor_qedit)"),
    _m("Schedd", "Negotiate"): Rule(NEGOTIATOR, "NEGOTIATE"),
    _m("Schedd", "ClaimEvents"): Rule(DAEMON, "job exits and evictions from the execute side (DAEMON)"),
    # Startd (startd_main.cpp): claim commands are DAEMON, and need the claim's id.
    _m("Startd", "RequestClaim"): Rule(DAEMON, "REQUEST_CLAIM"),
    _m("Startd", "ActivateClaim"): Rule(DAEMON, "ACTIVATE_CLAIM"),
    # Batches of the two above (htcpool's own; HTCondor sends one command per claim):
    # each claim in a batch is the command it stands for, at that command's level.
    _m("Startd", "RequestClaims"): Rule(DAEMON, "REQUEST_CLAIM, one per claim in the batch"),
    _m("Startd", "ActivateClaims"): Rule(DAEMON, "ACTIVATE_CLAIM, one per claim in the batch"),
    _m("Startd", "ReleaseClaim"): Rule(DAEMON, "RELEASE_CLAIM"),
    _m("Startd", "KeepAlive"): Rule(DAEMON, "ALIVE"),
    _m("Startd", "DrainJobs"): Rule(ADMINISTRATOR, "DRAIN_JOBS (condor_drain)"),
    _m("Startd", "CancelDrainJobs"): Rule(ADMINISTRATOR, "CANCEL_DRAIN_JOBS (condor_drain -cancel)"),
}


def rule_for(method: str) -> Rule | None:
    return TABLE.get(method)


def short(method: str) -> str:
    """'/htcpool.v1.Schedd/Submit' -> 'Schedd.Submit'."""
    parts = method.rsplit("/", 2)
    return f"{parts[-2].rsplit('.', 1)[-1]}.{parts[-1]}" if len(parts) >= 2 else method
