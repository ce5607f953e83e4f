"""What values submit files and qedit may give the attributes htcpool computes with.

Pure. A request (RequestCpus, RequestMemory, Request<resource>) that is a constant must
be a finite, non-negative number within 64 bits: ClassAd would otherwise carry a
string, a boolean, NaN or an overflowed 0 into matchmaking. JobPrio is a 32-bit
integer, as condor_submit's `priority` is. condor_submit's default Requirements
clauses are built here too.
"""
from __future__ import annotations

import math
import re

import classad2

from daemons.core import ads

INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1

MEM_UNITS = {"": 1, "k": 1 / 1024, "kb": 1 / 1024, "m": 1, "mb": 1, "g": 1024, "gb": 1024, "t": 1024 ** 2,
              "tb": 1024 ** 2}
DISK_UNITS = {"": 1, "k": 1, "kb": 1, "m": 1024, "mb": 1024, "g": 1024 ** 2, "gb": 1024 ** 2,
               "t": 1024 ** 3, "tb": 1024 ** 3}
SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def request_problem(what: str, expr: str) -> str | None:
    """Why a request's value (expression text) cannot be used, or None.

    A constant must be a finite, non-negative number in range, not a string or a
    boolean; an expression of job or slot attributes is evaluated at match time.
    """
    shown = expr if len(expr) <= 60 else expr[:60] + "..."
    try:
        v = ads.evaluate(ads.parse_expr(expr, what))
    except ads.AdError as e:
        # A number printed back beyond a double's range (1.7976931348623155e+308 prints
        # as 1.797693134862316E+308), or another text the ad's bounds refuse.
        return str(e)
    if isinstance(v, classad2.Value):     # (an IntEnum: test it before numbers)
        return f"{what} = {shown!r} evaluates to an error" if v == classad2.Value.Error else None
    if isinstance(v, bool):
        return f"{what} = {shown!r} is a boolean, not a number"
    if isinstance(v, str):
        return f"{what} = {shown!r} is a string, not a number"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return f"{what} = {shown!r} is not a finite number"
        if v < 0:
            return f"{what} = {shown!r}: a request must not be negative"
        if v > INT64_MAX:
            return f"{what} = {shown!r} is out of range"
        return None
    if isinstance(v, (classad2.ClassAd, list)):
        return f"{what} = {shown!r} is not a number"
    return None


def attribute_value_problem(attr: str, expr: str, what: str = "") -> str | None:
    """Why a user's value for job attribute `attr` would be wrong, or None (the
    attributes whose values the schedd and negotiator compute with)."""
    low = attr.lower()
    what = what or attr
    if low.startswith("request") and len(attr) >= 9:
        return request_problem(what, expr)
    if low == "jobprio":
        v = integer_value(expr)
        if v is None or not INT_MIN <= v < INT_MAX:
            return f"{what} = {expr[:60]!r} must be an integer from {INT_MIN} to {INT_MAX - 1}"
    return None


def integer_value(text: str) -> int | None:
    """An integer written as one, or a constant ClassAd expression with an integer value."""
    t = text.strip()
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    try:
        v = ads.evaluate(ads.parse_expr(t))
    except ads.AdError:
        return None
    if isinstance(v, (bool, classad2.Value)) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            return None
        return int(v)
    return v


def custom_requests(ad: dict[str, str]) -> list[str]:
    """Request<tag> attributes for machine resources other than cpus, memory and disk
    that ask for some (condor_submit: a tag of at least two characters, not starting
    with '_'; no clause for a request of a literal 0 or less)."""
    out = []
    for k, v in ad.items():
        low = k.lower()
        if not low.startswith("request") or len(k) < 9 or k[7] == "_":
            continue
        if low in ("requestcpus", "requestmemory", "requestdisk"):
            continue
        if re.fullmatch(r"-?\d+(?:\.\d*)?", v) and float(v) <= 0:
            continue
        out.append(k)
    return sorted(out, key=str.lower)


def default_requirements(user: str, arch: str, opsys: str, has_cpus: bool = True,
                         custom: list[str] | None = None) -> str:
    """condor_submit's Requirements: the user's expression, then the default clauses.

    For each custom resource request (Request<tag>) the user's expression does not
    already mention, `(TARGET.<tag> >= Request<tag>)`, unless it asks for none (a
    literal 0), as condor_submit does.
    """
    clauses = []
    if user:
        clauses.append(f"({user})")
    lowered = user.lower()
    if "arch" not in lowered:
        clauses.append(f'(TARGET.Arch == "{arch}")')
    if "opsys" not in lowered:
        clauses.append(f'(TARGET.OpSys == "{opsys}")')
    clauses.append("(TARGET.Disk >= RequestDisk)")
    clauses.append("(TARGET.Memory >= RequestMemory)")
    if has_cpus:
        clauses.append("(TARGET.Cpus >= RequestCpus)")
    for attr in custom or ():
        tag = attr[len("Request"):]
        if re.search(rf"(?i)\b{re.escape(tag)}\b", user):
            continue
        clauses.append(f"(TARGET.{tag} >= {attr})")
    clauses.append("(TARGET.HasFileTransfer)")
    return " && ".join(clauses)
