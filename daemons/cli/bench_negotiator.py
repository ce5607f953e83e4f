"""`htcpool bench negotiator`: one negotiation cycle's wall and CPU time against pool size.

For each size a fresh pool of processes: collector, negotiator, schedd, and startd
processes (one per 50,000 slots), each emulating many 8-core machines of static 1-core
slots. The machines come in three classes, in groups of at most 10,000 slots of one
class (a startd's --machine-group), so the negotiator has both a START to evaluate
against the job and slots that only some jobs fit:

- std:    8 slots of 2 GB, START = True
- bigmem: 8 slots of 8 GB, START = True
- dept:   8 slots of 4 GB, START = TARGET.Department =?= MY.Department ("physics")

The jobs (default 100,000 from 100 submitters, 500 autoclusters): each submitter
submits `autoclusters / submitters` clusters, one per job kind; kinds differ in
request_memory (a value no other kind uses, so every kind is its own autocluster),
the last kind of each submitter asks for more than a std or dept slot has, one
submitter in ten is in the physics department, and one in 25 has a last kind no
machine can hold (a rejection each cycle). Jobs run for a day, so a matched slot
stays busy.

Order of events, so that the measured cycle is only matchmaking: the jobs are
submitted while the pool has no slot (the reschedules that submissions send find
nothing to match), then the startds start and advertise; once the collector holds
every slot ad and every submitter ad counts its idle jobs, one Reschedule starts the
measured cycle. NEGOTIATOR_INTERVAL is long, so no other cycle interferes.
The figures come from the negotiator's own cycle record: wall time, the process's
CPU time during the cycle (every thread), matches, request ads and autoclusters
considered, and the wall time of each phase. The schedd starts claiming its
matches while the cycle is still running, as HTCondor's does, so on a small
machine the cycle's wall time includes waiting for a busy schedd; the CPU time is
the negotiator's own.

Memory: each daemon's peak RSS (VmHWM), read after the cycle (the schedd's again once it
holds the running jobs' claims, `schedd_peak_with_claims_mb`); the startds' once the
matched jobs run on them (the schedd is still claiming when the cycle ends, and what a
startd holds per slot is largest when the slot is busy). `startd_bytes_per_slot` is the
startd processes' peaks summed, over the slot count; `startd_pss_mb` adds each startd's
proportional set size then (the pages of the interpreter and libraries that the
processes share counted once between them), for information.

`--repeat N`: each size is measured N times, each time on a fresh pool, because a small
shared machine's speed moves from run to run by more than most changes to the code;
the size's row is the median run (median_run) and every run is listed too.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import grpc

from daemons.cli.benchkit import (MAX_REPEAT, BenchFailed, KEEP_ENV, cpu_seconds, log_problem_lines, log_problems,
                                   median_of_runs, repeats_of, status_page)
from daemons.cli.client import PoolClient, wait_for
from daemons.cli.pool import LocalPool, PoolError, StartdSpec
from daemons.cli.procs import peak_rss_mb, pss_mb
from daemons.cli.profiling import Profiler
from daemons.core import ads
from daemons.core.config import ConfigError

SLOTS_PER_MACHINE = 8
SLOTS_PER_GROUP = 10_000             # at most this many slots in a group of machines of one class
MIN_GROUPS = 3                       # one per machine class
SLOTS_PER_STARTD = 50_000            # at most this many slots (whole groups) in one startd process
JOB_DURATION_S = 86400               # a matched slot stays busy for the rest of the run
SUBMITS_IN_FLIGHT = 4
CYCLE_TIMEOUT_MIN_S = 120.0
CLAIMS_STALL_S = 15.0                # no more busy slots for this long: the claims are done
CLAIMS_POLL_S = 5.0                  # (each poll is a query of every slot ad at the collector)
CLAIMS_TIMEOUT_S = 600.0             # at least; longer for more matches:
CLAIMS_MIN_PER_S = 50.0              # (the schedd claims about 150 a second on 2 cores)
REPEAT_FIGURES = ("reschedule_to_record_s", "cycle_s", "negotiator_cpu_s")   # listed per run with --repeat
PHASES = ("query", "parse", "accounting", "significant", "group", "prefetch", "negotiate",
          "session_write", "session_read", "session_serve")   # the cycle record's

POOL_CONFIG = """\
# htcpool bench negotiator
NETWORK_HOSTNAME = benchhost
TIME_SCALE = 1
# Only the Reschedule the benchmark sends starts the measured cycle.
NEGOTIATOR_INTERVAL = 1000000
NEGOTIATOR_MIN_INTERVAL = 0
NEGOTIATOR_CYCLE_DELAY = 0
NEGOTIATOR_TIMEOUT = 600
# Full re-advertisements of tens of thousands of slots stay out of the measurement.
UPDATE_INTERVAL = 3600
CLASSAD_LIFETIME = 14400
# The schedd claims its matches while the cycle runs; a few at a time, so that it keeps
# answering the negotiator (HTCondor's knob; its default, 0, sets no limit).
MAX_PENDING_STARTD_CONTACTS = 16
"""

MACHINE_CLASSES: tuple[tuple[str, str], ...] = (
    ("std", "MEMORY = 16384\n"),
    ("bigmem", "MEMORY = 65536\n"),
    ("dept", 'MEMORY = 32768\nDepartment = "physics"\nSTARTD_ATTRS = Department\n'
             "START = TARGET.Department =?= MY.Department\n"),
)
MACHINE_CONFIG = """\
NUM_CPUS = {slots}
SLOT_TYPE_1 = cpus=1
NUM_SLOTS_TYPE_1 = {slots}
"""


@dataclass(frozen=True)
class JobKind:
    owner: str
    memory_mb: int
    department: str
    jobs: int

    def submit_text(self) -> str:
        lines = ["universe = vanilla", "executable = /bin/sleep", f"arguments = {JOB_DURATION_S}",
                 "request_cpus = 1", f"request_memory = {self.memory_mb}"]
        if self.department:
            lines.append(f'+Department = "{self.department}"')
        lines.append(f"queue {self.jobs}")
        return "\n".join(lines) + "\n"


def job_kinds(jobs: int, submitters: int, autoclusters: int) -> list[JobKind]:
    """The workload: `autoclusters` kinds, `autoclusters / submitters` per submitter, in submit order."""
    per = autoclusters // submitters
    out = []
    n = submitters * per
    for i in range(submitters):
        dept = "physics" if i % 10 == 0 else ""
        for k in range(per):
            if k == per - 1 and per > 1:
                # the last kind: bigger than a std or dept slot; one submitter in 25: bigger than any
                memory = (100_000 if i % 25 == 24 else 4096) + i + 1
            else:
                memory = 128 * (k + 1) + i   # distinct for every (i, k) while i < 128 and k < 31
            index = i * per + k
            count = jobs // n + (1 if index < jobs % n else 0)
            out.append(JobKind(f"u{i + 1:03d}", memory, dept, count))
    return [k for k in out if k.jobs > 0]


def startd_layout(slots: int) -> list[tuple[str, int]]:
    """(machine class, machines) per group of machines for a pool of about `slots` slots.

    Groups, not processes: the pool's machines (their classes, numbers and names) do not
    depend on how many startd processes emulate them (startd_processes)."""
    machines = max(1, math.ceil(slots / SLOTS_PER_MACHINE))
    groups = max(MIN_GROUPS, math.ceil(slots / SLOTS_PER_GROUP))
    groups = min(groups, machines)
    out = []
    for j in range(groups):
        n = machines // groups + (1 if j < machines % groups else 0)
        out.append((MACHINE_CLASSES[j % len(MACHINE_CLASSES)][0], n))
    return out


def startd_processes(layout: list[tuple[str, int]]) -> list[list[int]]:
    """The groups (their indexes in `layout`) each startd process emulates: consecutive
    groups, at most SLOTS_PER_STARTD slots in a process (a group is never split).

    One process emulates many machines of several classes (--machine-group): each startd
    process costs its interpreter and libraries (some 60 MB) before its first slot."""
    out: list[list[int]] = []
    slots = 0
    for j, (_, machines) in enumerate(layout):
        n = machines * SLOTS_PER_MACHINE
        if not out or slots + n > SLOTS_PER_STARTD:
            out.append([])
            slots = 0
        out[-1].append(j)
        slots += n
    return out


def machine_config_text(cls: str) -> str:
    """The configuration of one class of this bench's machines (8 static 1-core slots)."""
    return POOL_CONFIG + MACHINE_CONFIG.format(slots=SLOTS_PER_MACHINE) + dict(MACHINE_CLASSES)[cls]


def job_ad_text(cls: str) -> str:
    """The ad text of one of this bench's jobs as the schedd prints it, for the startd
    benches; a dept machine's jobs carry the Department its START asks for."""
    from daemons.schedd.submit import SubmitContext, build_jobs, parse_submit

    sub = job_kinds(1, 1, 1)[0].submit_text().replace("queue 1\n", "")
    if cls == "dept":
        sub += '+Department = "physics"\n'
    attrs = build_jobs(parse_submit(sub + "queue 1\n"), SubmitContext("u001", "benchhost", 1, 1000, "schedd@benchhost"))[0]
    attrs.update({"ClusterId": "1", "JobStatus": "1", "QDate": "1000"})
    return "[" + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + "]"


# ---- one size -------------------------------------------------------------------------
async def _submit_all(c: PoolClient, kinds: list[JobKind], emit: Callable[[str], None]) -> int:
    sem = asyncio.Semaphore(SUBMITS_IN_FLIGHT)
    done = [0, time.monotonic()]

    async def one(k: JobKind, index: int) -> int:
        async with sem:
            _, count = await c.submit(k.submit_text(), f"bench-{k.owner}-{index}.sub", k.owner)
        if count != k.jobs:
            raise BenchFailed(f"the schedd accepted {count} of {k.jobs} jobs of {k.owner}")
        done[0] += count
        if time.monotonic() - done[1] >= 10.0:
            done[1] = time.monotonic()
            emit(f"    {done[0]} jobs submitted")
        return count

    counts = await asyncio.gather(*(one(k, i) for i, k in enumerate(kinds)))
    return sum(counts)


async def _idle_jobs_advertised(c: PoolClient) -> int:
    return int(sum(ads.as_number(ads.get(a, "IdleJobs")) or 0
                   for a in await c.ads("Submitter", projection=["Name", "IdleJobs"])))


async def _slots_advertised(c: PoolClient) -> int:
    return len(await c.collector.query("Machine", projection=["Name"], give_up_after_s=5.0))


async def _negotiator_idle(url: str) -> dict[str, Any] | None:
    """The negotiator's status once no cycle is running (the last one started has ended)."""
    s = await asyncio.to_thread(status_page, url)
    hist = s.get("cycle_history") or []
    if s and (s.get("cycles", 0) == 0 or (hist and hist[-1]["cycle"] == s.get("cycles"))):
        return s
    return None


async def _run_size(slots: int, args: argparse.Namespace, state: Path, emit: Callable[[str], None]) -> dict[str, Any]:
    kinds = job_kinds(args.jobs, args.submitters, args.autoclusters)
    layout = startd_layout(slots)
    real_slots = sum(n for _, n in layout) * SLOTS_PER_MACHINE
    config = state / "condor_config"
    config.write_text(POOL_CONFIG)
    groups = []
    for cls, _ in MACHINE_CLASSES:
        (state / f"{cls}.conf").write_text(machine_config_text(cls))
    for j, (cls, machines) in enumerate(layout, 1):
        groups.append(StartdSpec(state / f"{cls}.conf", machines, f"{cls}{j}-"))
    processes = startd_processes(layout)
    specs = [dataclasses.replace(groups[p[0]], also=tuple(groups[j] for j in p[1:])) for p in processes]
    emit(f"  {real_slots} slots: {len(specs)} startd process(es) emulating "
         f"{', '.join(f'{n} {cls} machines' for cls, n in layout)}, {SLOTS_PER_MACHINE} static slots each")

    core = LocalPool(state / "pool", config, roles=("collector", "negotiator", "schedd"))
    startds = LocalPool(state / "startds", None, roles=("startd",), startd_specs=specs)
    out: dict[str, Any] = {"slots": real_slots}
    try:
        t_all = time.monotonic()
        core.start()
        # The startds join the same pool later: same collector, pool clock and signing key.
        startds.join(core)
        async with core.client() as c:
            await wait_for(lambda: c.ads("Negotiator", projection=["Name"]), timeout_s=60,
                           what="the negotiator's ad in the collector")
            t0 = time.monotonic()
            n = await _submit_all(c, kinds, emit)
            await wait_for(lambda: _idle_equals(c, n),
                           timeout_s=120, what=f"submitter ads counting {n} idle jobs")
            out["submit_s"] = round(time.monotonic() - t0, 2)
            emit(f"    {n} jobs of {len(kinds)} kinds from {len({k.owner for k in kinds})} submitters queued "
                 f"in {out['submit_s']:.1f} s")

            t0 = time.monotonic()
            await asyncio.to_thread(startds.start, 600.0)
            await wait_for(lambda: _at_least(_slots_advertised(c), real_slots), timeout_s=600, interval_s=0.5,
                           what=f"{real_slots} slot ads in the collector")
            out["advertise_s"] = round(time.monotonic() - t0, 2)
            emit(f"    {real_slots} slot ads in the collector after {out['advertise_s']:.1f} s")

            neg = core.daemons["negotiator"]
            url = neg.info.get("status_url", "")
            await wait_for(lambda: _negotiator_idle(url), timeout_s=120, what="the negotiator to finish its cycle")
            pids = {k: d.pid for k, d in {**core.daemons, **startds.daemons}.items()}
            profiler = None
            if getattr(args, "profile", None):
                prof_dir = Path(args.profile) / str(real_slots)
                if getattr(args, "run", 0):
                    prof_dir = prof_dir / f"run{args.run}"
                profiler = Profiler(prof_dir, pids)
                await asyncio.to_thread(profiler.start)
            cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
            cycle = await c.reschedule()

            async def measured():
                recs = await c.cycles(last=5)
                return next((r for r in recs if r.cycle >= cycle), None)

            # Polled gently: each poll is work for the negotiator while it is being measured.
            rec = await wait_for(measured, timeout_s=max(CYCLE_TIMEOUT_MIN_S, slots / 100), interval_s=0.5,
                                 what=f"negotiation cycle {cycle}")
            # From the negotiator's own clock: the Reschedule's arrival to the cycle's start,
            # and the cycle. The bench's polling (every 0.5 s) would add up to half a second.
            waited = rec.reschedule_wait + rec.wall_duration
            cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
            if profiler is not None:
                emit(f"    profiles of the cycle (py-spy, {profiler.out_dir}):")
                await asyncio.to_thread(profiler.report, lambda line: emit("      " + line))
            if rec.slots < real_slots:
                raise BenchFailed(f"cycle {rec.cycle} saw {rec.slots} slot ads, not {real_slots}")
            out.update({
                "cycle": rec.cycle,
                "cycle_s": round(rec.wall_duration, 3),
                "matches": rec.matches,
                "matches_per_s": round(rec.matches / rec.wall_duration, 1) if rec.wall_duration > 0 else None,
                "negotiator_cpu_s": round(rec.cpu_duration, 3),
                "rejections": rec.rejections,
                "requests": rec.requests,
                "considered": rec.considered,
                "autoclusters": rec.autoclusters,
                "submitters": rec.submitters,
                "slot_groups": rec.slot_groups,
                "significant": rec.significant,
                "evaluations": rec.evaluations,
                "phases_s": {k: round(rec.phases[k], 3) for k in PHASES if k in rec.phases},
                "stream_messages": rec.stream_messages,
                "stream_writes": rec.stream_writes,
                "reschedule_to_record_s": round(waited, 3),
                "cpu_during_cycle_s": {k: round(cpu1[k] - cpu0[k], 2) for k in pids
                                       if cpu0.get(k) is not None and cpu1.get(k) is not None},
                "jobs": n,
                "job_kinds": len(kinds),
            })
            peaks = {k: round(v, 1) for k, d in core.daemons.items() if (v := peak_rss_mb(d.pid)) is not None}
            # The startds' peaks once the matched jobs run: the schedd is still claiming when
            # the cycle ends, and a startd's peak counts its busy slots.
            t0 = time.monotonic()
            cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
            out["jobs_running"] = await _claims_settled(c, rec.matches)
            out["claims_settle_s"] = round(time.monotonic() - t0, 1)
            cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
            # Who does the claiming's work: the schedd, or the startds (do they keep up?).
            out["cpu_during_claims_s"] = {k: round(cpu1[k] - cpu0[k], 2) for k in pids
                                          if cpu0.get(k) is not None and cpu1.get(k) is not None}
            emit(f"    {out['jobs_running']} of {rec.matches} matched jobs running on the startds "
                 f"{out['claims_settle_s']:.1f} s after the cycle (CPU s meanwhile: "
                 + ", ".join(f"{k} {v:.1f}" for k, v in out["cpu_during_claims_s"].items()) + ")")
            peaks.update({k: round(v, 1) for k, d in startds.daemons.items() if (v := peak_rss_mb(d.pid)) is not None})
            # The schedd's peak once it holds the claims (the figure per idle job is read before).
            schedd = core.daemons.get("schedd")
            if schedd is not None and (v := peak_rss_mb(schedd.pid)) is not None:
                out["schedd_peak_with_claims_mb"] = round(v, 1)
            out["startd_pss_mb"] = {k: round(v, 1) for k, d in startds.daemons.items()
                                    if (v := pss_mb(d.pid)) is not None}
            out["peak_rss_mb"] = peaks
            out.update(_bytes_per_item(out["peak_rss_mb"], real_slots, n))
            dead = [k for k, d in {**core.daemons, **startds.daemons}.items() if not d.alive()]
            if dead:
                raise BenchFailed(f"daemon(s) exited during the benchmark: {', '.join(dead)}")
            # Read before the pool stops: claims still in flight then fail, which is no news.
            out["_problems"] = _problems(state)
        out["total_s"] = round(time.monotonic() - t_all, 1)
    finally:
        startds.stop()
        core.stop()
    return out


def _bytes_per_item(peaks: dict[str, float], slots: int, jobs: int) -> dict[str, int]:
    """Issue 14's memory figures: peak RSS over what each daemon holds (whole process, baseline included)."""
    mib = 1024 * 1024
    out = {}
    if "collector" in peaks:
        out["collector_bytes_per_slot_ad"] = round(peaks["collector"] * mib / slots)
    if "schedd" in peaks and jobs:
        out["schedd_bytes_per_idle_job"] = round(peaks["schedd"] * mib / jobs)
    startd = [v for k, v in peaks.items() if k.startswith("startd")]
    if startd:
        out["startd_bytes_per_slot"] = round(sum(startd) * mib / slots)
    return out


async def _claims_settled(c: PoolClient, matches: int) -> int:
    """The number of busy slots in the collector, once it reaches `matches` or stops growing
    (a match whose claim failed never runs), or at the time limit: whatever runs then."""
    deadline = time.monotonic() + max(CLAIMS_TIMEOUT_S, matches / CLAIMS_MIN_PER_S)
    best, grew = -1, time.monotonic()
    while True:
        try:
            busy = len(await c.collector.query("Machine", constraint='Activity == "Busy"', projection=["Name"],
                                               give_up_after_s=5.0))
        except grpc.aio.AioRpcError:
            busy = best
        if busy > best:
            best, grew = busy, time.monotonic()
        if best >= matches or time.monotonic() - grew >= CLAIMS_STALL_S or time.monotonic() >= deadline:
            return max(best, 0)
        await asyncio.sleep(CLAIMS_POLL_S)


async def _at_least(count, n: int) -> int:
    got = await count
    return got if got >= n else 0


async def _idle_equals(c: PoolClient, n: int) -> int:
    got = await _idle_jobs_advertised(c)
    return got if got >= n else 0


def _problems(state: Path) -> dict[str, tuple[int, list[str]]]:
    return log_problems(state / "pool") | {f"startds/{k}": v for k, v in log_problems(state / "startds").items()}


# ---- the command ------------------------------------------------------------------------
def _parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        mult = 1000 if part.endswith("k") else 1
        try:
            sizes.append(int(float(part.rstrip("k")) * mult))
        except ValueError:
            sizes = []
            break
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError(f"--sizes {text!r}: give slot counts such as 1000,10000 or 1k,10k")
    return sizes


def _table(rows: list[dict[str, Any]]) -> list[str]:
    head = (f"  {'slots':>7} {'cycle_s':>8} {'matches/s':>10} {'neg. CPU s':>10} {'matches':>8} "
            f"{'requests':>8} {'autoclusters':>12} {'slot groups':>11}")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"  {r['slots']:>7} FAILED: {r['error']}")
            continue
        lines.append(f"  {r['slots']:>7} {r['cycle_s']:>8.3f} {r['matches_per_s'] or 0:>10.0f} "
                     f"{r['negotiator_cpu_s']:>10.3f} {r['matches']:>8} {r['requests']:>8} "
                     f"{r['autoclusters']:>12} {r['slot_groups']:>11}")
    lines.append("  phases of the cycle (wall s):")
    for r in rows:
        if "phases_s" in r:
            lines.append(f"  {r['slots']:>7} " + ", ".join(f"{k} {v:.3f}" for k, v in r["phases_s"].items())
                         + f"; {r.get('stream_messages', 0):,} messages to schedds in "
                         f"{r.get('stream_writes', 0):,} writes")
    lines.append("  peak RSS (MB) of every daemon; bytes per slot ad (collector), per idle job (schedd), "
                 "per slot (startds):")
    for r in rows:
        if "peak_rss_mb" in r:
            lines.append(f"  {r['slots']:>7} " + ", ".join(f"{k} {v:.0f}" for k, v in r["peak_rss_mb"].items()))
            lines.append(f"  {'':>7} {r.get('collector_bytes_per_slot_ad', 0):,} B per slot ad, "
                         f"{r.get('schedd_bytes_per_idle_job', 0):,} B per idle job, "
                         f"{r.get('startd_bytes_per_slot', 0):,} B per slot (startds read with "
                         f"{r.get('jobs_running', 0):,} jobs running; their PSS "
                         f"{sum((r.get('startd_pss_mb') or {}).values()):.0f} MB)")
            if "schedd_peak_with_claims_mb" in r:
                lines.append(f"  {'':>7} schedd's peak once it holds the {r.get('jobs_running', 0):,} running "
                             f"jobs' claims: {r['schedd_peak_with_claims_mb']:.0f} MB")
    lines.append("  set-up per size (wall s): submit / advertise / whole run:")
    for r in rows:
        if "submit_s" in r:
            lines.append(f"  {r['slots']:>7} {r['submit_s']:.1f} / {r.get('advertise_s', 0):.1f} / "
                         f"{r.get('total_s', 0):.1f}")
    return lines


def _one_run(slots: int, args: argparse.Namespace, state: Path, emit: Callable[[str], None]) -> dict[str, Any]:
    """One measured cycle on a fresh pool of `slots` slots: its row, or {"slots", "error"}."""
    try:
        row = asyncio.run(_run_size(slots, args, state, emit))
    except (BenchFailed, PoolError, ConfigError, TimeoutError) as e:
        row = {"slots": slots, "error": str(e)}
    except Exception as e:  # an RPC failure, most likely: say what, keep the traceback out of the table
        row = {"slots": slots, "error": f"{type(e).__name__}: {e}"}
    problems = row.pop("_problems", None)
    if problems is None:
        problems = _problems(state)
    if problems:
        emit("    warnings and errors in the daemons' logs:")
        for line in log_problem_lines(problems, indent="      "):
            emit(line)
        row["log_problems"] = {name: n for name, (n, _) in problems.items()}
    if "error" not in row:
        emit(f"    cycle {row['cycle']}: {row['cycle_s']:.3f} s wall, {row['negotiator_cpu_s']:.3f} s negotiator "
             f"CPU, {row['matches']} matches")
    return row


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A size's row from its runs: the run whose Reschedule to record is the median (of an even
    number, the slower of the middle two), every figure its own, plus `repeats`: how many
    runs, and every run's cycle times and negotiator CPU, sorted. A failed run makes the
    size's row that failure. One run is its own row."""
    if len(runs) == 1:
        return runs[0]
    failed = next((r for r in runs if "error" in r), None)
    if failed is not None:
        return failed
    row = dict(median_of_runs(runs, "reschedule_to_record_s"))
    row["repeats"] = repeats_of(runs, REPEAT_FIGURES)
    return row


def bench_negotiator(args: argparse.Namespace) -> int:
    try:
        sizes = _parse_sizes(args.sizes)
    except ValueError as e:
        print(f"htcpool bench negotiator: {e}", file=sys.stderr)
        return 2
    if not (1 <= args.submitters <= 128 and args.submitters <= args.autoclusters <= 32 * args.submitters
            and args.jobs >= args.autoclusters):
        # (so that every job kind's request_memory is its own: see job_kinds)
        print("htcpool bench negotiator: need 1 <= --submitters <= 128, --submitters <= --autoclusters <= "
              "32 x --submitters and --jobs >= --autoclusters", file=sys.stderr)
        return 2
    repeat = getattr(args, "repeat", 1)
    if not 1 <= repeat <= MAX_REPEAT:
        print(f"htcpool bench negotiator: --repeat must be from 1 to {MAX_REPEAT}", file=sys.stderr)
        return 2
    keep = os.environ.get(KEEP_ENV, "") not in ("", "0")
    root = Path(tempfile.mkdtemp(prefix="htcpool-bench-negotiator-"))

    def emit(line: str) -> None:
        print(line, flush=True)

    kinds = job_kinds(args.jobs, args.submitters, args.autoclusters)
    emit(f"htcpool bench negotiator: {args.jobs} idle jobs from {args.submitters} submitters in "
         f"{len(kinds)} autoclusters; pools of {', '.join(str(s) for s in sizes)} slots"
         f"{f', {repeat} runs each' if repeat > 1 else ''}; state in {root}"
         f"{'' if keep else f' (set {KEEP_ENV}=1 to keep it)'}")
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    failed = False
    for i, slots in enumerate(sizes, 1):
        size_runs = []
        for k in range(1, repeat + 1):
            state = root / (f"{i}-slots{slots}" + (f"-run{k}" if repeat > 1 else ""))
            state.mkdir(parents=True)
            if repeat > 1:
                emit(f"  run {k} of {repeat}:")
            row = _one_run(slots, argparse.Namespace(**{**vars(args), "run": k if repeat > 1 else 0}), state, emit)
            failed = failed or "error" in row
            size_runs.append(row)
        runs.extend(size_runs)
        rows.append(median_run(size_runs))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    emit("")
    emit(f"negotiation cycle against pool size ({args.jobs} idle jobs, {args.submitters} submitters, "
         f"{len(kinds)} autoclusters; {os.cpu_count()} cores):")
    for line in _table(runs):
        emit(line)
    if repeat > 1:
        emit(f"  the median of {repeat} runs per size (Reschedule to record, s; the run `--json` gives as the "
             f"size's row):")
        for r in rows:
            if "repeats" in r:
                t = r["repeats"]["reschedule_to_record_s"]
                emit(f"  {r['slots']:>7} median {r['reschedule_to_record_s']:.3f} (min {t[0]:.3f}, max {t[-1]:.3f})")
    if args.json:
        result = {"jobs": args.jobs, "submitters": args.submitters, "autoclusters": len(kinds), "rows": rows}
        if repeat > 1:
            result["runs"] = runs
        print(json.dumps(result))
    if failed:
        print("htcpool bench negotiator: FAILED for some sizes (see the table)", file=sys.stderr)
        return 1
    return 0
