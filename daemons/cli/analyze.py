"""`htcpool q --analyze JOB`: why a job does or does not run, in condor_q's words. Pure.

The summary counts slots the way condor_q -better-analyze does (ignoring user
priority): rejected by the job's Requirements, rejecting the job by their own
Requirements (START), matching but busy, matching and willing. The match history
uses condor_q's lines (Last successful match / Last failed match / Reason for last
match failure). A job never considered gets HTCondor's older line "Request has not
yet been considered by the matchmaker."; with htcpool's shared rejection reasons a
job skipped because its autocluster failed always has a reason instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import classad2

from daemons.core import ads

STATUS_TEXT = {2: "Job is running.", 3: "Job is removed.", 4: "Job is completed.", 5: "Job is held."}


@dataclass(frozen=True)
class SlotCounts:
    slots: int
    machines: int
    rejected_by_job: int
    rejecting_job: int
    running_your_jobs: int
    serving_others: int
    willing: int


def count_slots(job: classad2.ClassAd, slots: list[classad2.ClassAd], now: float) -> SlotCounts:
    job["CurrentTime"] = int(now)
    # The negotiation principal, as the slot's RemoteOwner names it: group.user@domain or user@domain.
    user = str(ads.get(job, "User") or ads.get(job, "Owner") or "")
    group = ads.get(job, "AccountingGroup")
    owner = f"{group}@{user.partition('@')[2]}" if isinstance(group, str) and group else user
    machines: set[str] = set()
    by_job = by_slot = mine = others = willing = 0
    for slot in slots:
        slot["CurrentTime"] = int(now)
        machines.add(str(ads.get(slot, "Machine", "")))
        # a.matches(b) evaluates b's Requirements against a (classad2's convention).
        if not slot.matches(job):
            by_job += 1
            continue
        if not job.matches(slot):
            by_slot += 1
            continue
        if ads.get(slot, "State") == "Claimed":
            remote = str(ads.get(slot, "RemoteOwner", "") or "")
            if owner and remote == owner:
                mine += 1
            else:
                others += 1
            continue
        willing += 1
    return SlotCounts(len(slots), len(machines), by_job, by_slot, mine, others, willing)


def _when(t: object) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(float(t))) if isinstance(t, (int, float)) else "?"


def analyze(job: classad2.ClassAd, slots: list[classad2.ClassAd], now: float) -> str:
    cluster, proc = ads.get(job, "ClusterId", 0), ads.get(job, "ProcId", 0)
    head = f"\n{int(cluster):03d}.{int(proc):03d}:  "
    out: list[str] = []
    status = ads.get(job, "JobStatus", 1)
    if status in STATUS_TEXT:
        text = STATUS_TEXT[status]
        if status == 5 and ads.get(job, "HoldReason"):
            text += f"\n\nHold reason: {ads.get(job, 'HoldReason')}"
        out.append(head + text + "\n")
    last_match = ads.get(job, "LastMatchTime") or 0
    last_rej = ads.get(job, "LastRejMatchTime") or 0
    if last_match:
        out.append(f"Last successful match: {_when(last_match)}")
    elif last_rej:
        out.append("No successful match recorded.")
    if last_rej and last_rej > last_match:
        out.append(f"Last failed match: {_when(last_rej)}")
        reason = ads.get(job, "LastRejMatchReason")
        if reason:
            out.append(f"Reason for last match failure: {reason}")
    elif not last_match and status == 1:
        out.append("Request has not yet been considered by the matchmaker.")
    ac = ads.get(job, "AutoClusterId")
    if ac is not None:
        attrs = ads.get(job, "AutoClusterAttrs", "")
        out.append(f"Autocluster {ac} (significant attributes: {attrs})")
    c = count_slots(job, slots, now)
    out.append(f"{head}Run analysis summary ignoring user priority.  Of {c.slots} slots on {c.machines} machines,")
    out.append(f"  {c.rejected_by_job:5d} slots are rejected by your job's requirements")
    out.append(f"  {c.rejecting_job:5d} slots reject your job because of their own requirements")
    if c.running_your_jobs:
        out.append(f"  {c.running_your_jobs:5d} slots match and are already running your jobs")
    if c.serving_others:
        out.append(f"  {c.serving_others:5d} slots match but are serving other users")
    out.append(f"  {c.willing:5d} slots match and are willing to run your job")
    if c.rejected_by_job == c.slots and c.slots:
        out.append("\nWARNING:  Be advised:\n   No machines matched the jobs's constraints")
    elif c.willing + c.running_your_jobs + c.serving_others == 0 and c.slots:
        out.append("\nWARNING:  Be advised:\n   Job did not match any machines's constraints")
    return "\n".join(out) + "\n"
