"""Which job attributes the schedd owns, and what a job attribute's name may be.

HTCondor's schedd refuses to let a user set the attributes in
SYSTEM_IMMUTABLE_JOB_ATTRS (Owner, ClusterId, ProcId, JobUniverse, MyType,
TargetType, User, OsUser) once a job exists, and any of SYSTEM_SECURE_JOB_ATTRS at
all; it checks ClusterId and ProcId against the real ids and only lets a new job
start Idle or Held (qmgmt.cpp, SetAttribute). htcpool's schedd also keeps the job's
life cycle in attributes (JobStatus, ClaimId, RemoteHost, the start and completion
times and counts): a value written by a user would describe a claim or a run that
does not exist. So neither a submit file (`+Attr`, `MY.Attr`) nor qedit may set any
of them; `hold = true` is how a job starts Held, and rm/hold/release change status.

Names follow ClassAd's grammar for attribute names (a letter or underscore, then
letters, digits and underscores), minus the words ClassAd reserves.
"""
from __future__ import annotations

import re

# HTCondor's SYSTEM_IMMUTABLE_JOB_ATTRS and SYSTEM_SECURE_JOB_ATTRS (param_info.in).
IMMUTABLE = ("Owner", "ClusterId", "JobUniverse", "ProcId", "MyType", "TargetType", "User", "OsUser")
SECURE = ("x509userProxySubject", "x509UserProxyEmail", "x509UserProxyVOName", "x509UserProxyFirstFQAN",
          "x509UserProxyFQAN", "TotalSubmitProcs", "AuthTokenSubject", "AuthTokenIssuer", "AuthTokenGroups",
          "AuthTokenId", "AuthTokenScopes", "AuthTokenProject")
# What the schedd writes as a job is submitted, matched, started, stopped and finished.
SCHEDD_OWNED = ("JobStatus", "LastJobStatus", "EnteredCurrentStatus", "QDate", "GlobalJobId", "ClaimId",
                "Capability", "RemoteHost", "LastRemoteHost", "StartdIpAddr", "RemoteSlotID", "NumJobStarts",
                "NumJobMatches", "JobRunCount", "NumRestarts", "JobStartDate", "JobCurrentStartDate",
                "LastMatchTime", "CompletionDate", "RemoteWallClockTime", "CumulativeSlotTime", "ExitCode",
                "ExitBySignal", "JobFinishedHookDone", "LastVacateTime", "VacateReason", "HoldReason",
                "HoldReasonCode", "RemoveReason", "ReleaseReason", "AutoClusterId", "AutoClusterAttrs",
                "LastRejMatchReason", "LastRejMatchTime", "HtcpoolHistorySeq", "JobMachineAttrs",
                "JobMachineAttrsHistoryLength")
# MachineAttr<X><N>: copies of the slot's attributes the schedd records at each start.
OWNED_PREFIXES = ("MachineAttr",)

PROTECTED = frozenset(a.lower() for a in IMMUTABLE + SECURE + SCHEDD_OWNED)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words the ClassAd language keeps for itself, and the scopes every expression can name.
RESERVED = frozenset({"true", "false", "undefined", "error", "is", "isnt", "parent", "my", "target"})


def name_problem(name: str) -> str | None:
    """Why `name` is not a job attribute name, or None."""
    if not _NAME.fullmatch(name):
        shown = name if len(name) <= 60 else name[:60] + "..."
        return (f"{shown!r} is not an attribute name (a letter or '_', then letters, digits and '_')")
    if name.lower() in RESERVED:
        return f"{name!r} is a word ClassAd reserves, not an attribute name"
    return None


def owned_by_schedd(name: str) -> bool:
    low = name.lower()
    return low in PROTECTED or any(low.startswith(p.lower()) for p in OWNED_PREFIXES)


def settable_problem(name: str) -> str | None:
    """Why a user may not set attribute `name` (submit file or qedit), or None."""
    problem = name_problem(name)
    if problem is not None:
        return problem
    if owned_by_schedd(name):
        return f"{name} is set by the schedd and cannot be set by a user"
    return None
