"""`htcpool demo`: seed 001's first demonstration on a local pool of real processes.

Fifteen `/bin/sleep 60` jobs against one 10-core partitionable slot with HTCondor's
default p-slot handling: the negotiator matches the whole p-slot, the schedd claims
the leftovers and carves ten 1-cpu dynamic slots; five jobs wait and run when the
first ten finish. The demo prints the daemons' own log lines as they are written
(negotiation cycles in HTCondor's wording, the schedd's claims), the slot table
whenever dynamic slots appear or go, and a summary built from the job history.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from daemons.cli.client import wait_for
from daemons.cli.pool import LocalPool
from daemons.core import ads

DEMO_CONFIG = """\
# Seed 001's machine, with HTCondor's default partitionable-slot handling:
# the negotiator matches the whole p-slot, the schedd claims the leftovers.
NUM_CPUS = 10
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1

# "for simplicity, turn off preemption, caching, worklife" (seed 001)
CLAIM_WORKLIFE = 0
MAXJOBRETIREMENTTIME = 3600
PREEMPT = False
RANK = 0
PREEMPTION_REQUIREMENTS = False
NEGOTIATOR_CONSIDER_PREEMPTION = False

# reduce daemon update latencies
NEGOTIATOR_INTERVAL = 30
SCHEDD_INTERVAL = 15
"""

DEMO_SUBMIT = """\
universe = vanilla
cmd = /bin/sleep
args = 60
should_transfer_files = if_needed
when_to_transfer_output = on_exit
queue 15
"""

NEGOTIATOR_LINES = ("Started Negotiation Cycle", "Finished Negotiation Cycle", "Successfully matched", "Rejected")
SCHEDD_LINES = ("Submitted cluster", "Claimed ", "Started job", "completed on", "Released claim", "Reusing claim")


class LogFollower:
    """Prints the new lines of a daemon log that contain any of `keep`."""

    def __init__(self, path: Path, label: str, keep: tuple[str, ...]) -> None:
        self.path, self.label, self.keep = path, label, keep
        self.offset = 0

    def poll(self, out: list[str]) -> None:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self.offset)
            data = f.read()
        complete, _, _ = data.rpartition("\n")
        if not complete:
            return
        self.offset += len(complete.encode()) + 1
        for line in complete.splitlines():
            if any(k in line for k in self.keep):
                out.append(f"{self.label:<11}{line}")


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at once (an end at t closes before a start at t)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def slot_table(slots: list) -> list[str]:
    rows = sorted(slots, key=lambda a: [int(p) if p.isdigit() else 0 for p in
                                        str(ads.get(a, "Name", "")).split("@")[0].replace("slot", "").split("_")])
    lines = [f"    {'Name':<16}{'TotalSlotCpus':>14}  {'State':<10}{'Activity':<9}JobId"]
    for a in rows:
        lines.append(f"    {str(ads.get(a, 'Name')):<16}{ads.get(a, 'TotalSlotCpus', 0):>14}  "
                     f"{str(ads.get(a, 'State')):<10}{str(ads.get(a, 'Activity')):<9}{ads.get(a, 'JobId') or ''}")
    return lines


async def _follow(pool: LocalPool, time_scale: float, emit) -> dict:
    log_dir = pool.state_dir / "log"
    followers = [LogFollower(log_dir / "NegotiatorLog", "negotiator", NEGOTIATOR_LINES),
                 LogFollower(log_dir / "SchedLog", "schedd", SCHEDD_LINES)]
    async with pool.client() as c:
        await wait_for(lambda: c.ads("Machine"), timeout_s=30, what="the startd's slot ads")
        emit("slot table before submitting:")
        for line in slot_table(await c.ads("Machine")):
            emit(line)
        wall0 = time.monotonic()
        submitted_at = await c.pool_now()
        cluster, count = await c.submit(DEMO_SUBMIT, "seed001.sub", "demo")
        emit(f"submitted {count} jobs (cluster {cluster}): /bin/sleep 60, queue 15")
        seen_dslots: set[str] = set()
        last_slots: tuple = ()
        last_counts: tuple = ()
        done = 0
        deadline = time.monotonic() + max(60.0, 600.0 / time_scale * 2)
        while done < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the demo's jobs did not finish in time ({done} of {count} completed)")
            lines: list[str] = []
            for f in followers:
                f.poll(lines)
            for line in lines:
                emit(line)
            slots = await c.ads("Machine", projection=["Name", "TotalSlotCpus", "State", "Activity", "JobId"])
            names = tuple(sorted(str(ads.get(a, "Name")) for a in slots))
            seen_dslots.update(n for n in names if "_" in n.split("@")[0])
            if names != last_slots:
                last_slots = names
                emit(f"slot table ({len(names)} slots):")
                for line in slot_table(slots):
                    emit(line)
            queue = await c.jobs(projection=["JobStatus"])
            done = len(await c.jobs(f"ClusterId == {cluster}", ["JobStatus"], history=True))
            counts = (sum(ads.get(j, "JobStatus") == 1 for j in queue), sum(ads.get(j, "JobStatus") == 2 for j in queue),
                      done)
            if counts != last_counts:
                last_counts = counts
                emit(f"queue: {counts[0]} idle, {counts[1]} running, {counts[2]} completed")
            await asyncio.sleep(0.05)
        lines = []
        for f in followers:
            f.poll(lines)
        for line in lines:
            emit(line)
        wall = time.monotonic() - wall0
        history = await c.jobs(f"ClusterId == {cluster}",
                               ["ProcId", "JobStatus", "JobCurrentStartDate", "CompletionDate", "LastRemoteHost"],
                               history=True)
        intervals = [(float(ads.get(h, "JobCurrentStartDate")), float(ads.get(h, "CompletionDate"))) for h in history]
        cycles = [r for r in await c.cycles() if r.start >= submitted_at]
        completed = sum(ads.get(h, "JobStatus") == 4 for h in history)
        first = min(s for s, _ in intervals)
        last = max(e for _, e in intervals)
        return {
            "jobs": count,
            "completed": completed,
            "peak_running": peak_overlap(intervals),
            "dynamic_slots": sorted(seen_dslots, key=lambda n: int(n.split("@")[0].split("_")[1])),
            "cycles": len(cycles),
            "matches": sum(r.matches for r in cycles),
            "pool_seconds": round(last - first, 1),
            "wall_seconds": round(wall, 2),
            "time_scale": time_scale,
        }


def run_demo(json_out: bool = False, time_scale: float = 30.0, keep: bool = False) -> int:
    state = Path(tempfile.mkdtemp(prefix="htcpool-demo-"))
    config = state / "condor_config"
    config.write_text(DEMO_CONFIG)

    def emit(line: str) -> None:
        print(line, flush=True)

    emit("htcpool demo: seed 001 on a local pool (collector, negotiator, schedd, startd as separate processes)")
    emit(f"time scale {time_scale:g} pool seconds per wall second; state in {state}")
    pool = LocalPool(state / "pool", config, env={"_CONDOR_TIME_SCALE": repr(float(time_scale))})
    try:
        pool.start()
        for key, d in pool.daemons.items():
            emit(f"  {key:<11} pid {d.pid:<7} {d.address}")
        summary = asyncio.run(_follow(pool, time_scale, emit))
    finally:
        pool.stop()
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    emit("")
    emit(f"summary: {summary['completed']} of {summary['jobs']} jobs completed; at most {summary['peak_running']} "
         f"ran at once on {len(summary['dynamic_slots'])} dynamic slots "
         f"({', '.join(summary['dynamic_slots'])});")
    emit(f"         {summary['matches']} p-slot match(es) in {summary['cycles']} negotiation cycle(s); "
         f"{summary['pool_seconds']:.0f} pool seconds from first start to last completion, "
         f"{summary['wall_seconds']:.1f} s of wall time")
    if json_out:
        print(json.dumps(summary))
    ok = summary["completed"] == summary["jobs"]
    return 0 if ok else 1


# ---- htcpool demo seed001: all three of seed 001's demonstrations -------------------------
SEED001_BASE = """\
# Seed 001's configuration, as published.
# spoof some cores
NUM_CPUS = 10
# The seed's machine had 1903 MB of memory (its second table: TotalSlotMemory 1903).
MEMORY = 1903
NETWORK_HOSTNAME = rorschach

# configure an aggregate resource (p-slot) to consume
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
# declare multiple claims for negotiator to use
# may also use global: NUM_CLAIMS
SLOT_TYPE_1_NUM_CLAIMS = 20
NUM_SLOTS_TYPE_1 = 1

# turn off schedd-side resource splitting since we're demonstrating neg-side alternative
CLAIM_PARTITIONABLE_LEFTOVERS = False

# turn this off to demonstrate that consumption policy will handle this kind of logic
MUST_MODIFY_REQUEST_EXPRS = False

# configure a consumption policy.   This policy is modeled on
# current 'modify-request-exprs' defaults:
# "my" is resource ad, "target" is job ad
STARTD_EXPRS = ConsumptionCpus, ConsumptionMemory, ConsumptionDisk
ConsumptionCpus = quantize(target.RequestCpus, {1})
ConsumptionMemory = quantize(target.RequestMemory, {128})
ConsumptionDisk = quantize(target.RequestDisk, {1024})
# swap doesn't seem to be actually supported in resource accounting

# keep slot weights enabled for match costing
NEGOTIATOR_USE_SLOT_WEIGHTS = True

# weight used to derive match cost: W(before-consumption) - W(after-consumption)
SlotWeight = Cpus

# for simplicity, turn off preemption, caching, worklife
CLAIM_WORKLIFE=0
MAXJOBRETIREMENTTIME = 3600
PREEMPT = False
RANK = 0
PREEMPTION_REQUIREMENTS = False
NEGOTIATOR_CONSIDER_PREEMPTION = False
NEGOTIATOR_MATCHLIST_CACHING = False

# verbose logging
ALL_DEBUG = D_FULLDEBUG

# reduce daemon update latencies
NEGOTIATOR_INTERVAL = 30
SCHEDD_INTERVAL = 15
"""

SEED001_PARTS = (
    ("negotiator-side consumption: ten 1-cpu dynamic slots in one cycle", "", SEED_SUBMIT := """\
universe = vanilla
cmd = /bin/sleep
args = 60
should_transfer_files = if_needed
when_to_transfer_output = on_exit
queue 15
"""),
    ("coarser memory: ConsumptionMemory quantized to 512 MB, memory-centric slot weight", """
ConsumptionMemory = quantize(target.RequestMemory, {512})
SlotWeight = floor(Memory / 512)
""", SEED_SUBMIT),
    ("accounting group a with a quota of 1: one job runs, charged one cpu", """
GROUP_NAMES = a
GROUP_QUOTA_a = 1
GROUP_ACCEPT_SURPLUS = False
GROUP_AUTOREGROUP = False
""", """\
universe = vanilla
cmd = /bin/sleep
args = 60
should_transfer_files = if_needed
when_to_transfer_output = on_exit
+AccountingGroup="a.u"
queue 2
"""),
)


async def _seed001_part(pool: LocalPool, submit: str, emit) -> dict:
    log = LogFollower(pool.state_dir / "log" / "NegotiatorLog", "negotiator",
                      ("Started Negotiation Cycle", "Finished Negotiation Cycle", "Successfully matched", "Rejected",
                       "Group "))
    async with pool.client() as c:
        await wait_for(lambda: c.ads("Machine"), timeout_s=30, what="the startd's slot ads")
        since = await c.pool_now()
        lines: list[str] = []
        log.poll(lines)  # skip what was logged before the submission
        cluster, count = await c.submit(submit, "seed001.sub", "demo")

        async def first_matching_cycle():
            return next((r for r in await c.cycles() if r.start >= since and r.matches), None)
        cycle = await wait_for(first_matching_cycle, timeout_s=60, what="a negotiation cycle with matches")

        async def settled():
            running = await c.jobs(f"ClusterId == {cluster} && JobStatus == 2")
            return running if len(running) >= cycle.matches else None
        running = await wait_for(settled, timeout_s=30, what=f"{cycle.matches} running jobs")

        async def advertised():
            # The schedd marks a job running before the startd's update of its dynamic
            # slot reaches the collector: read the slot table once every one is there.
            found = await c.ads("Machine", projection=["Name", "TotalSlotCpus", "TotalSlotMemory", "Cpus",
                                                       "Memory", "DynamicSlot", "RemoteOwner"])
            dynamic = [a for a in found if ads.get(a, "DynamicSlot") is True]
            return found if len(dynamic) >= len(running) else None
        slots = await wait_for(advertised, timeout_s=30, what=f"{len(running)} dynamic slots in the collector")
        running = await c.jobs(f"ClusterId == {cluster} && JobStatus == 2")
        lines = []
        log.poll(lines)
        for line in lines:
            emit("  " + line)
        emit("  slots (Name | TotalSlotCpus | TotalSlotMemory):")
        for line in sorted((f"    {ads.get(a, 'Name')} | {ads.get(a, 'TotalSlotCpus')} | {ads.get(a, 'TotalSlotMemory')}"
                            for a in slots), key=lambda t: [int(x) if x.isdigit() else 0
                                                             for x in t.split("@")[0].replace("slot", " ").replace("_", " ").split()]):
            emit(line)
        prio = await c.userprio(all_users=True)
        for e in prio.entries:
            if e.weighted_in_use:
                emit(f"  charged: {e.name}{' (group)' if e.is_group else ''} uses {e.weighted_in_use:g} "
                     "(weighted slots)")
        return {
            "matched_first_cycle": cycle.matches,
            "running": len(running),
            "jobs": count,
            "dynamic_slots": {str(ads.get(a, "Name")): {"Cpus": ads.get(a, "Cpus"), "Memory": ads.get(a, "Memory")}
                              for a in slots if ads.get(a, "DynamicSlot") is True},
            "charged": {e.name: e.weighted_in_use for e in prio.entries if e.weighted_in_use},
        }


def run_seed001(json_out: bool = False, time_scale: float = 30.0, keep: bool = False) -> int:
    state = Path(tempfile.mkdtemp(prefix="htcpool-seed001-"))

    def emit(line: str) -> None:
        print(line, flush=True)

    emit("htcpool demo seed001: the three demonstrations of seed 001 (negotiator-side consumption),")
    emit(f"each on a fresh pool at time scale {time_scale:g}; state in {state}")
    parts = []
    try:
        for i, (title, extra, submit) in enumerate(SEED001_PARTS, 1):
            emit(f"\npart {i}: {title}")
            config = state / f"part{i}.conf"
            config.write_text(SEED001_BASE + extra)
            pool = LocalPool(state / f"part{i}", config, env={"_CONDOR_TIME_SCALE": repr(float(time_scale))})
            try:
                pool.start()
                parts.append(asyncio.run(_seed001_part(pool, submit, emit)))
            finally:
                pool.stop()
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    emit("")
    expected = ((10, 10, 1, 128), (3, 3, 1, 512), (1, 1, 1, 128))
    for i, (p, (m, r, cpus, mem)) in enumerate(zip(parts, expected), 1):
        sizes = {(d["Cpus"], d["Memory"]) for d in p["dynamic_slots"].values()}
        emit(f"part {i}: {p['matched_first_cycle']} matched in the first cycle (seed: {m}), {p['running']} running, "
             f"dynamic slots {sorted(sizes)} (seed: {r} of {cpus} cpu / {mem} MB)")
    if json_out:
        print(json.dumps({"parts": [{k: p[k] for k in ("matched_first_cycle", "running", "dynamic_slots")}
                                    for p in parts]}))
    ok = all(p["matched_first_cycle"] == e[0] for p, e in zip(parts, expected))
    return 0 if ok else 1
