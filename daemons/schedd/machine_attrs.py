"""job_machine_attrs: the slot attributes a job keeps from the machines it ran on.

Pure. As HTCondor's schedd does (schedd.cpp, InsertMachineAttrs): when a job starts
on a slot, each attribute X named in the job's JobMachineAttrs (submit command
job_machine_attrs) or in SYSTEM_JOB_MACHINE_ATTRS (default Cpus, SlotWeight) is
evaluated in the slot's ad and written to the job as MachineAttrX0 (`error` if the
slot has no X). When the job leaves the slot without finishing (evicted, its claim
lost, held), the history rotates: MachineAttrX<N> takes MachineAttrX<N-1>, for a
history of JobMachineAttrsHistoryLength values (job_machine_attrs_history_length,
default 1), or SYSTEM_JOB_MACHINE_ATTRS_HISTORY_LENGTH if that is longer; 0 keeps
nothing. MachineAttrX0 stays until the next start replaces it.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import classad2

from daemons.core import ads

PREFIX = "MachineAttr"


def _names_and_length(attrs: dict[str, str], system: Sequence[str], system_length: int) -> tuple[list[str], int]:
    own = ads.parse_expr(attrs["JobMachineAttrs"]).eval() if "JobMachineAttrs" in attrs else ""
    names = [n for n in re.split(r"[,\s]+", own) if n] if isinstance(own, str) else []
    lowered = {n.lower() for n in names}
    names += [n for n in system if n.lower() not in lowered]
    length = 1
    text = attrs.get("JobMachineAttrsHistoryLength")
    if text is not None:
        v = ads.parse_expr(text).eval()
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            length = v
    return names, max(length, system_length)


def _literal(value: Any) -> str:
    if isinstance(value, classad2.ClassAd):
        return ads.one_line(str(value))
    if isinstance(value, classad2.Value):
        return "error" if value == classad2.Value.Error else "undefined"
    try:
        return ads.literal(value)
    except TypeError:
        return "error"


def on_start(attrs: dict[str, str], slot_ad: classad2.ClassAd, system: Sequence[str],
             system_length: int) -> dict[str, str]:
    """MachineAttrX0 for each recorded attribute X, from the slot the job starts on."""
    names, length = _names_and_length(attrs, system, system_length)
    if length == 0:
        return {}
    out = {}
    for n in names:
        if n in slot_ad:
            try:
                value = slot_ad.eval(n)
            except Exception:
                value = classad2.Value.Error
        else:
            value = classad2.Value.Error
        out[f"{PREFIX}{n}0"] = _literal(value)
    return out


def on_leave(attrs: dict[str, str], system: Sequence[str], system_length: int) -> dict[str, str]:
    """The history shifted by one (MachineAttrX1 = MachineAttrX0, ...), for a job that
    leaves its slot unfinished."""
    names, length = _names_and_length(attrs, system, system_length)
    if length < 2:
        return {}
    lower = {k.lower(): k for k in attrs}
    out = {}
    for n in names:
        base = f"{PREFIX}{n}"
        if f"{base}0".lower() not in lower:
            continue      # nothing new since the last rotation
        for i in range(length - 1, 0, -1):
            prev = lower.get(f"{base}{i - 1}".lower())
            if prev is not None:
                out[f"{base}{i}"] = attrs[prev]
    return out
