"""`htcpool experiment multicore`: seed 003's comparison of drain controllers on our pool.

Multicore jobs starve on a pool full of single-core jobs unless nodes are drained.
The experiment runs a pool of 8-core machines (one partitionable slot each) fed by a
steady, level-controlled stream of single-core and 8-core jobs (multicore_workload.py)
for a long stretch of pool time, with one of three controllers:

- none: nothing drains; multicore jobs run only where a whole machine happens to free up;
- defrag: HTCondor's defrag daemon configured as a site would, RAL's settings for its
  784-node farm (DEFRAG_DRAINING_MACHINES_PER_HOUR 30, DEFRAG_MAX_CONCURRENT_DRAINING
  60, DEFRAG_MAX_WHOLE_MACHINES 300, DEFRAG_INTERVAL 600, whole = Cpus >= 8) scaled to
  the pool's size;
- drainboss: the PI controller with a setpoint of running multicore jobs.

Both controllers rely on the negotiator preferring multicore work, or a drained
machine goes back to single-core jobs. `--priority` picks how, as the seed tried:
- group (default): the jobs carry accounting groups group_mcore / group_score and the
  configuration has the seed's GROUP_SORT_EXPR, which negotiates the multicore group
  first in every allocation round;
- factor: no groups; the multicore submitter's priority factor is set to 250 against
  HTCondor's default 1000 (the seed's "condor_userprio -setfactor 250" cron job);
- none: neither; fair share alone (which favours whoever uses less of the pool).

Every sample interval the experiment counts running and queued jobs of each kind at
the schedd and the draining machines and free cores in the collector; it writes the
series as CSV, plots them, and prints per controller the mean and standard deviation
of running multicore jobs and the wastage: the core-time left idle on draining
machines as a percentage of all core-time (the seed's "wastage").
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from daemons.cli.client import ClientError, PoolClient, wait_for
from daemons.cli.experiments.common import json_line, out_dir, print_table, pyplot, write_csv
from daemons.cli.experiments.multicore_workload import (Sample, Summary, Workload, drought_schedule, duration,
                                                        in_drought, scaled, steady_start, submit_text, summarize,
                                                        top_up)
from daemons.cli.pool import LocalPool
from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.drainboss.tuning import Tuning, expected_drain_time_s, simc

CONTROLLERS = ("none", "defrag", "drainboss")
# Seed 003: the defrag daemon over 2.5 weeks, and DrainBoss at setpoint 250.
SEED_FIGURES = {"defrag": {"mc_mean": 121.8, "mc_sd": 63.1, "wastage_pct": 5.21, "setpoint": 250},
                "drainboss": {"mc_mean": 298.6, "mc_sd": 71.4, "wastage_pct": 2.43, "setpoint": 250}}
# RAL's defrag settings for its 784-node farm.
RAL = {"machines": 784, "per_hour": 30, "max_concurrent": 60, "max_whole": 300, "interval": 600}

# The seed's GROUP_SORT_EXPR (smaller sorts first), with this pool's two groups.
GROUP_SORT_EXPR = ('ifThenElse(AccountingGroup =?= "<none>", 3.4e+38, '
                   'ifThenElse(regexp("mcore", AccountingGroup), '
                   'ifThenElse(GroupQuota > 0 && GroupResourcesInUse > 0, (-1 * GroupQuota) / GroupResourcesInUse, '
                   '-1), ifThenElse(GroupQuota > 0, GroupResourcesInUse / GroupQuota, 3.2e+38)))')

POOL_CONFIG = """\
NETWORK_HOSTNAME = farm
UID_DOMAIN = farm
TIME_SCALE = {time_scale:g}
# Lag shorter than a sample interval does not show in hour-long figures; longer, the pool
# slows its clock (the sampler follows it).
HTCPOOL_MAX_LAG = {max_lag:g}
NUM_CPUS = {cpus}
MEMORY = {memory}
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1
NEGOTIATOR_INTERVAL = {negotiator_interval}
NEGOTIATOR_CYCLE_DELAY = 0
# Every cycle of the run is kept, to report how long cycles took in pool time.
NEGOTIATOR_CYCLE_HISTORY = {cycle_history}
UPDATE_INTERVAL = 300
SCHEDD_INTERVAL = 300
# Sites that drain gracefully let jobs run to their end.
MAXJOBRETIREMENTTIME = 4 * 86400
{priority_config}
# defrag: RAL's settings for 784 nodes, scaled to {machines}
DEFRAG_INTERVAL = {defrag_interval}
DEFRAG_DRAINING_MACHINES_PER_HOUR = {defrag_per_hour:.4f}
DEFRAG_MAX_CONCURRENT_DRAINING = {defrag_max_concurrent}
DEFRAG_MAX_WHOLE_MACHINES = {defrag_max_whole}
DEFRAG_WHOLE_MACHINE_EXPR = Cpus >= {mc_cpus}
DEFRAG_DRAINING_SCHEDULE = graceful
# DrainBoss
DRAINBOSS_INTERVAL = {drainboss_interval}
DRAINBOSS_SETPOINT = {setpoint:g}
DRAINBOSS_PROPBAND = {propband:g}
DRAINBOSS_RESET = {reset:g}
DRAINBOSS_LOOKBACK = {lookback:g}
DRAINBOSS_MAXTODRAIN = {maxtodrain}
DRAINBOSS_KEEPGOING = {keepgoing}
DRAINBOSS_NODE_CHOICE = {node_choice}
DRAINBOSS_MULTICORE_CPUS = {mc_cpus}
DRAINBOSS_WIDE_CPUS = {mc_cpus}
"""
GROUPS_CONFIG = """\
# Multicore work first (seed 003): accounting groups and the seed's GROUP_SORT_EXPR.
GROUP_NAMES = group_mcore, group_score
GROUP_QUOTA_DYNAMIC_group_mcore = 0.5
GROUP_QUOTA_DYNAMIC_group_score = 0.5
GROUP_ACCEPT_SURPLUS = True
GROUP_SORT_EXPR = {group_sort_expr}"""
# The seed's other route: "condor_userprio -setfactor 250" for the multicore submitter.
MULTICORE_FACTOR = 250.0
PRIORITIES = ("group", "factor", "none")


@dataclasses.dataclass(frozen=True)
class Settings:
    machines: int
    cpus: int
    hours: float
    warmup_hours: float
    time_scale: float
    sample_s: float
    max_lag_s: float
    negotiator_interval: int
    setpoint: float
    propband: float
    reset: float
    lookback: float
    maxtodrain: int
    keepgoing: bool
    node_choice: str
    drainboss_interval: int
    priority: str
    workload: Workload
    seed: int
    tuning: Tuning

    @property
    def defrag(self) -> dict[str, Any]:
        return {"per_hour": scaled(RAL["per_hour"], self.machines),
                "max_concurrent": max(1, round(scaled(RAL["max_concurrent"], self.machines))),
                "max_whole": max(1, round(scaled(RAL["max_whole"], self.machines))),
                "interval": RAL["interval"]}


def _g(v) -> str:
    """A number as the user would have typed it (3, not 3.0)."""
    return format(v, "g") if isinstance(v, (int, float)) else str(v)


def settings_from(args: argparse.Namespace) -> Settings:
    """Check the options; ValueError names the bad one."""
    machines = args.machines
    checks = [(machines >= 1, f"--machines {_g(machines)}: at least 1"),
              (args.cpus >= 1, f"--cpus {_g(args.cpus)}: at least 1"),
              (args.hours > 0, f"--hours {_g(args.hours)}: must be more than 0"),
              (args.warmup_hours >= 0, f"--warmup-hours {_g(args.warmup_hours)}: must be 0 or more"),
              (args.time_scale > 0, f"--time-scale {_g(args.time_scale)}: must be more than 0"),
              (args.sample_interval > 0, f"--sample-interval {_g(args.sample_interval)}: must be more than 0"),
              (args.max_lag is None or args.max_lag > 0, f"--max-lag {_g(args.max_lag)}: must be more than 0"),
              (args.sc_queued >= 0 and args.mc_queued >= 0, "queue levels must be 0 or more"),
              (args.sc_hours > 0 and args.mc_hours > 0, "mean job durations must be more than 0"),
              (args.setpoint is None or args.setpoint >= 0, f"--setpoint {_g(args.setpoint)}: must be 0 or more"),
              (args.propband is None or args.propband > 0, f"--propband {_g(args.propband)}: must be more than 0"),
              (args.reset is None or args.reset > 0, f"--reset {_g(args.reset)}: must be more than 0 seconds"),
              (args.lookback > 0, f"--lookback {_g(args.lookback)}: must be more than 0 seconds"),
              (args.maxtodrain >= 1, f"--maxtodrain {_g(args.maxtodrain)}: 1 or more"),
              (args.drainboss_interval > 0, f"--drainboss-interval {_g(args.drainboss_interval)}: more than 0")]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    setpoint = args.setpoint if args.setpoint is not None else round(0.3 * machines)
    # Unless given, the PI terms follow the SIMC rule from the expected drain time (tuning.py).
    tuning = simc(expected_drain_time_s(args.sc_hours * 3600, args.cpus), args.drainboss_interval, args.maxtodrain)
    propband = args.propband if args.propband is not None else round(tuning.propband)
    reset = args.reset if args.reset is not None else round(tuning.reset_s)
    wl = Workload(singlecore_queued=args.sc_queued, multicore_queued=args.mc_queued,
                  singlecore_mean_s=args.sc_hours * 3600, multicore_mean_s=args.mc_hours * 3600,
                  multicore_cpus=args.cpus, delivery_mean_s=args.delivery_hours * 3600,
                  drought_mean_s=args.drought_hours * 3600, feed_interval_s=args.sample_interval)
    max_lag = args.max_lag if args.max_lag is not None else args.sample_interval
    return Settings(machines, args.cpus, args.hours, args.warmup_hours, args.time_scale, args.sample_interval, max_lag,
                    args.negotiator_interval, setpoint, propband, reset, args.lookback, args.maxtodrain,
                    args.keepgoing, args.node_choice, args.drainboss_interval,
                    args.priority, wl, args.seed, tuning)


def pool_config(s: Settings) -> str:
    d = s.defrag
    return POOL_CONFIG.format(
        time_scale=s.time_scale, max_lag=s.max_lag_s,
        cycle_history=int((s.warmup_hours + s.hours) * 3600 / s.negotiator_interval) + 100, cpus=s.cpus, memory=s.cpus * 2048, negotiator_interval=s.negotiator_interval,
        priority_config=priority_config(s.priority), machines=s.machines, defrag_interval=d["interval"],
        defrag_per_hour=d["per_hour"], defrag_max_concurrent=d["max_concurrent"], defrag_max_whole=d["max_whole"],
        mc_cpus=s.cpus, drainboss_interval=s.drainboss_interval, setpoint=s.setpoint, propband=s.propband,
        reset=s.reset, lookback=s.lookback, maxtodrain=s.maxtodrain, keepgoing=s.keepgoing,
        node_choice=s.node_choice)


def priority_config(priority: str) -> str:
    if priority == "group":
        return GROUPS_CONFIG.format(group_sort_expr=GROUP_SORT_EXPR)
    if priority == "factor":
        return f"# Multicore work first by the submitter's priority factor ({MULTICORE_FACTOR:g}; set at start-up)."
    return "# No preference for multicore work: fair share alone."


# ---- one run ---------------------------------------------------------------------------
class Feeder:
    """Upstream: keeps the queues at their levels, multicore delivery off in droughts."""

    def __init__(self, s: Settings, client: PoolClient, droughts: list[tuple[float, float]]) -> None:
        self.s, self.c = s, client
        self.rng = random.Random(s.seed)
        self.droughts = droughts
        self.submitted = {"sc": 0, "mc": 0}

    async def submit(self, kind: str, n: int) -> None:
        if n <= 0:
            return
        wl = self.s.workload
        mean = wl.multicore_mean_s if kind == "mc" else wl.singlecore_mean_s
        cpus = wl.multicore_cpus if kind == "mc" else 1
        text = submit_text(kind, [duration(self.rng, mean) for _ in range(n)], cpus,
                           grouped=self.s.priority == "group")
        await _with_schedd(lambda: self.c.submit(text, f"{kind}.sub", kind))
        self.submitted[kind] += n

    async def feed(self, offset_s: float, queued_sc: int, queued_mc: int) -> bool:
        """Top the queues up; True while multicore jobs are being delivered."""
        wl = self.s.workload
        await self.submit("sc", top_up(wl.singlecore_queued, queued_sc))
        delivering = not in_drought(self.droughts, offset_s)
        if delivering:
            await self.submit("mc", top_up(wl.multicore_queued, queued_mc))
        return delivering


async def _with_schedd(call):
    """A call to the schedd, found through its ad in the collector. At a high time scale a busy
    schedd's ad can outlive its lifetime there (CLASSAD_LIFETIME is pool time) before its next
    update: wait for it to come back rather than fail the run."""
    async def attempt():
        try:
            return (await call(),)
        except ClientError:
            return None
    result, = await wait_for(attempt, timeout_s=60, what="the schedd to answer (its ad back in the collector)")
    return result


async def _observe(c: PoolClient, s: Settings, now: float) -> Sample:
    mc = s.workload.multicore_cpus

    jobs = await _with_schedd(lambda: c.jobs("JobStatus == 1 || JobStatus == 2", ["JobStatus", "RequestCpus"]))
    counts = {"rm": 0, "rs": 0, "qm": 0, "qs": 0}
    for j in jobs:
        kind = "m" if (ads.as_number(ads.get(j, "RequestCpus")) or 1) >= mc else "s"
        counts[("r" if ads.get(j, "JobStatus") == 2 else "q") + kind] += 1
    pslots = await c.ads("Machine", "PartitionableSlot", ["Machine", "Cpus", "TotalSlotCpus", "Draining"])
    draining = [p for p in pslots if ads.get(p, "Draining") is True]
    free = [int(ads.as_number(ads.get(p, "Cpus")) or 0) for p in pslots]
    return Sample(now, counts["rm"], counts["rs"], counts["qm"], counts["qs"], len(draining),
                  sum(int(ads.as_number(ads.get(p, "Cpus")) or 0) for p in draining), sum(free),
                  s.machines * s.cpus)


async def run_controller(controller: str, s: Settings, state: Path, emit) -> dict[str, Any]:
    cfg = state / f"{controller}.conf"
    cfg.write_text(pool_config(s))
    roles = ("collector", "negotiator", "schedd", "startd") + (() if controller == "none" else (controller,))
    pool = LocalPool(state / controller, cfg, machines=s.machines, roles=roles,
                     daemon_args={controller: ["--seed", str(s.seed)]} if controller != "none" else {})
    span_s = (s.warmup_hours + s.hours) * 3600
    droughts = drought_schedule(random.Random(s.seed + 1), s.workload, span_s)
    t0 = 0.0
    feeder: Feeder | None = None
    samples: list[Sample] = []
    delivering: list[bool] = []
    lag_max = 0.0
    cycles: dict[str, float] = {}
    wall0 = time.monotonic()
    try:
        pool.start(timeout_s=120)
        clock = PoolClock(scale=s.time_scale, epoch=pool.epoch)
        async with pool.client() as c:
            follower = asyncio.create_task(c.keep_following(clock))
            async def machines_up():
                return len(await c.ads("Machine", "PartitionableSlot", ["Name"])) >= s.machines
            await wait_for(machines_up, timeout_s=120, what=f"{s.machines} machines")
            if s.priority == "factor":
                await c.set_userprio("mc@farm", factor=MULTICORE_FACTOR)
            # Fill the pool with single-core work first, as a farm is before multicore jobs
            # come: multicore delivery starts once the first negotiation cycles have run.
            fill_s = max(1800.0, 4.0 * s.negotiator_interval)
            feeder = Feeder(s, c, [(0.0, fill_s)] + droughts)
            t0 = clock.now()
            await feeder.submit("sc", s.machines * s.cpus + s.workload.singlecore_queued)
            emit(f"  [{controller}] {s.machines * s.cpus + s.workload.singlecore_queued} single-core jobs to fill "
                 f"the pool; multicore delivery from pool minute {fill_s / 60:.0f}; running "
                 f"{s.warmup_hours + s.hours:g} pool hours ({span_s / s.time_scale:.0f} s wall at TIME_SCALE "
                 f"{s.time_scale:g})")
            tick = 0
            next_report = 12 * 3600
            while True:
                target = t0 + tick * s.sample_s
                if target - t0 > span_s:
                    break
                await clock.sleep_until(target)
                lag_max = max(lag_max, clock.now() - target)
                now = clock.now()
                sample = await _observe(c, s, now)
                delivering.append(await feeder.feed(now - t0, sample.queued_sc, sample.queued_mc))
                samples.append(sample)
                if now - t0 >= next_report:
                    emit(f"  [{controller}] pool hour {(now - t0) / 3600:5.1f}: running mc {sample.running_mc} "
                         f"sc {sample.running_sc}, queued mc {sample.queued_mc} sc {sample.queued_sc}, "
                         f"draining {sample.draining}")
                    next_report += 12 * 3600
                tick += 1
            stats = await _controller_stats(c, controller)
            cycles = cycle_fidelity(await c.cycles(), t0 + s.warmup_hours * 3600, s.negotiator_interval)
            follower.cancel()
    finally:
        pool.stop()
    measured = [x for x in samples if x.t - t0 >= s.warmup_hours * 3600]
    summary = summarize(measured)
    first = steady_start(measured)
    steady = summarize(measured[first:])
    steady_from_h = (measured[first].t - t0) / 3600 if measured else 0.0
    return {"controller": controller, "t0": t0, "samples": samples, "delivering": delivering,
            "summary": summary, "steady": steady, "steady_from_h": steady_from_h, "droughts": droughts,
            "submitted": dict(feeder.submitted) if feeder else {},
            "controller_stats": stats, "lag_max_s": lag_max, "cycles": cycles, "wall_s": time.monotonic() - wall0,
            # The lag policy may have slowed the pool (the clock followed it): the slowest scale.
            "time_scale_min": min(s.time_scale, clock.scale)}


def cycle_fidelity(records: list[Any], after: float, interval_s: float) -> dict[str, float]:
    """How long the measured window's negotiation cycles took in pool time, and how late they
    started (after NEGOTIATOR_INTERVAL from the last start, or the last end if it ran longer).
    In a real pool of this size a cycle takes seconds; here a cycle's wall time is multiplied
    by the time scale, and a freed core waits for the next cycle, so long cycles show up
    as idle cores (\"idle %\")."""
    rs = [r for r in records if r.start >= after and not r.error]
    lags = [max(0.0, b.start - max(a.start + interval_s, a.end)) for a, b in zip(rs, rs[1:])]
    durations = [r.duration for r in rs]
    return {"cycles": len(rs),
            "cycle_pool_s_mean": round(sum(durations) / len(rs), 1) if rs else 0.0,
            "cycle_pool_s_max": round(max(durations, default=0.0), 1),
            "cycle_wall_s_mean": round(sum(r.wall_duration for r in rs) / len(rs), 3) if rs else 0.0,
            "start_lag_s_max": round(max(lags, default=0.0), 1),
            "overran": sum(1 for d in durations if d > interval_s)}


async def _controller_stats(c: PoolClient, controller: str) -> dict[str, Any]:
    if controller == "defrag":
        found = await c.ads("Defrag")
        keys = ("DrainSuccesses", "DrainFailures", "CancelledDrains", "DrainedMachines", "DefragPolls")
    elif controller == "drainboss":
        found = await c.ads("DrainBoss")
        keys = ("DrainsStarted", "DrainsCancelled", "DrainFailures", "RunErrors", "LastRunError", "DrainBossRuns")
    else:
        return {}
    return {k: ads.get(found[0], k) for k in keys} if found else {}


# ---- output ----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    try:
        s = settings_from(args)
    except ValueError as e:
        print(f"htcpool experiment multicore: {e}", file=sys.stderr)
        return 2
    controllers = list(CONTROLLERS) if args.compare else [args.controller]
    out = out_dir(args.out, "multicore")
    state = Path(tempfile.mkdtemp(prefix="htcpool-exp-multicore-"))

    def emit(line: str) -> None:
        print(line, flush=True)

    d, wl = s.defrag, s.workload
    emit(f"experiment multicore: {s.machines} machines of {s.cpus} cores; {s.hours:g} pool hours measured after "
         f"{s.warmup_hours:g} of warm-up; seed {s.seed}")
    emit(f"  workload: upstream keeps {wl.singlecore_queued} single-core jobs (mean {wl.singlecore_mean_s / 3600:g} h) "
         f"and {wl.multicore_queued} {wl.multicore_cpus}-core jobs (mean {wl.multicore_mean_s / 3600:g} h) waiting; "
         + (f"multicore droughts of mean {wl.drought_mean_s / 3600:g} h every {wl.delivery_mean_s / 3600:g} h"
            if wl.drought_mean_s > 0 else "no multicore droughts"))
    emit("  multicore work first by " + {
        "group": "accounting groups and the seed's GROUP_SORT_EXPR (group_mcore sorts first)",
        "factor": f"the multicore submitter's priority factor ({MULTICORE_FACTOR:g} against 1000), no groups",
        "none": "nothing: fair share alone, no groups"}[s.priority])
    emit(f"  defrag: RAL's settings for {RAL['machines']} nodes scaled to {s.machines}: "
         f"DEFRAG_DRAINING_MACHINES_PER_HOUR = {d['per_hour']:.2f} (30), DEFRAG_MAX_CONCURRENT_DRAINING = "
         f"{d['max_concurrent']} (60), DEFRAG_MAX_WHOLE_MACHINES = {d['max_whole']} (300), DEFRAG_INTERVAL = "
         f"{d['interval']}, DEFRAG_WHOLE_MACHINE_EXPR = Cpus >= {s.cpus}")
    emit(f"  drainboss: setpoint {s.setpoint:g}, propband {s.propband:g}, reset {s.reset:g} s, lookback "
         f"{s.lookback:g} s, maxtodrain {s.maxtodrain}, every {s.drainboss_interval} s, node choice "
         f"{s.node_choice}{', keepgoing' if s.keepgoing else ''} (SIMC tuning for an expected drain time of "
         f"{s.tuning.drain_time_s / 3600:.1f} h = {s.tuning.runs_per_drain:.0f} runs: propband "
         f"{s.tuning.propband:.0f}, reset {s.tuning.reset_s:.0f} s)")
    results: dict[str, dict[str, Any]] = {}
    try:
        for controller in controllers:
            results[controller] = asyncio.run(run_controller(controller, s, state, emit))
    finally:
        shutil.rmtree(state, ignore_errors=True)

    _write_csv(out, results, s)
    _plot(out / "multicore.png", results, s)
    emit("")
    rows = []
    for name, r in results.items():
        m: Summary = r["summary"]
        st: Summary = r["steady"]
        rows.append([name, round(m.mc_mean, 1), round(m.mc_sd, 1), round(r["steady_from_h"], 1), round(st.mc_mean, 1),
                     round(st.mc_sd, 1), f"{st.mc_mean / s.setpoint:.2f}" if s.setpoint else "-",
                     round(st.wastage_pct, 2), round(m.wastage_pct, 2), round(m.idle_pct, 2),
                     round(m.draining_mean, 1), _drains(r["controller_stats"])])
    for name, f in SEED_FIGURES.items():
        rows.append([f"seed 003 {name}", "", "", "", f["mc_mean"], f["mc_sd"], f"{f['mc_mean'] / f['setpoint']:.2f}",
                     f["wastage_pct"], "", "", "", ""])
    print_table(["controller", "mc mean", "mc sd", "steady from h", "steady mc mean", "steady mc sd",
                 "steady mean/setpoint", "steady wastage %", "wastage %", "idle %", "draining", "drains"], rows)
    emit(f"the first {s.warmup_hours:g} pool hours are left out of every figure; the steady state starts where "
         "running multicore jobs first reach 90% of the level they settle at (the second half's mean)")
    emit(f"mean/setpoint: against this run's DrainBoss setpoint ({s.setpoint:g}); the seed's against its 250")
    lags = {n: r["lag_max_s"] for n, r in results.items() if r["lag_max_s"] > s.sample_s}
    if lags:
        emit(f"warning: sampling fell behind the pool clock by up to {max(lags.values()):.0f} pool s "
             f"({', '.join(lags)}); a lower --time-scale gives steadier figures")
    for name, r in results.items():
        cy = r["cycles"]
        if cy:
            emit(f"  [{name}] negotiation cycles: {cy['cycles']}, each {cy['cycle_pool_s_mean']:g} pool s on average "
                 f"({cy['cycle_wall_s_mean']:g} s wall), longest {cy['cycle_pool_s_max']:g} of NEGOTIATOR_INTERVAL "
                 f"{s.negotiator_interval}; latest start {cy['start_lag_s_max']:g} pool s late")
    slow = [n for n, r in results.items()
            if r["cycles"] and (r["cycles"]["overran"] or r["cycles"]["start_lag_s_max"] > 0.1 * s.negotiator_interval)]
    if slow:
        emit(f"warning: negotiation cycles overran NEGOTIATOR_INTERVAL or started late ({', '.join(slow)}): freed "
             "cores waited longer than in a real pool; a lower --time-scale gives faithful idle figures")
    slowed = {n: r["time_scale_min"] for n, r in results.items() if r["time_scale_min"] < s.time_scale}
    if slowed:
        emit(f"the pool slowed itself (HTCPOOL_LAG_POLICY = slow, HTCPOOL_MAX_LAG = {s.max_lag_s:g} pool s): TIME_SCALE "
             + ", ".join(f"{n} {s.time_scale:g} -> {v:g}" for n, v in slowed.items())
             + "; every figure is in pool time, which the sampling followed")
    emit(f"wrote {out / 'timeseries.csv'}, {out / 'summary.csv'}, {out / 'multicore.png'}")
    if args.json:
        json_line({name: {"mc_mean": round(r["summary"].mc_mean, 2), "mc_sd": round(r["summary"].mc_sd, 2),
                          "wastage_pct": round(r["summary"].wastage_pct, 3), "setpoint": s.setpoint,
                          "steady_from_h": round(r["steady_from_h"], 2),
                          "steady_mc_mean": round(r["steady"].mc_mean, 2), "steady_mc_sd": round(r["steady"].mc_sd, 2),
                          "steady_wastage_pct": round(r["steady"].wastage_pct, 3),
                          "lag_max_s": round(r["lag_max_s"], 1), "time_scale_min": round(r["time_scale_min"], 3),
                          "priority": s.priority, "idle_pct": round(r["summary"].idle_pct, 3),
                          "draining_mean": round(r["summary"].draining_mean, 2),
                          "samples": r["summary"].samples, "controller": r["controller_stats"],
                          "wall_s": round(r["wall_s"], 1), "cycles": r["cycles"]}
                   for name, r in results.items()})
    return 0


def _drains(stats: dict[str, Any]) -> str:
    if "DrainSuccesses" in stats:
        return f"{stats['DrainSuccesses']} started, {stats['CancelledDrains']} cancelled"
    if "DrainsStarted" in stats:
        return f"{stats['DrainsStarted']} started, {stats['DrainsCancelled']} cancelled"
    return "-"


def _write_csv(out: Path, results: dict[str, dict[str, Any]], s: Settings) -> None:
    header = ["controller", "pool_hours", "running_mc", "running_sc", "queued_mc", "queued_sc", "draining",
              "idle_cores_draining", "idle_cores", "cores", "multicore_delivered", "measured"]
    rows = []
    for name, r in results.items():
        for x, delivering in zip(r["samples"], r["delivering"]):
            hours = (x.t - r["t0"]) / 3600
            rows.append([name, round(hours, 3), x.running_mc, x.running_sc, x.queued_mc, x.queued_sc, x.draining,
                         x.idle_cores_draining, x.idle_cores, x.cores, int(delivering),
                         int(hours >= s.warmup_hours)])
    write_csv(out / "timeseries.csv", header, rows)
    write_csv(out / "summary.csv", ["controller", "mc_mean", "mc_sd", "wastage_pct", "idle_pct", "draining_mean",
                                    "setpoint", "samples", "steady_from_h", "steady_mc_mean", "steady_mc_sd",
                                    "steady_wastage_pct"],
              [[n, round(r["summary"].mc_mean, 2), round(r["summary"].mc_sd, 2), round(r["summary"].wastage_pct, 3),
                round(r["summary"].idle_pct, 3), round(r["summary"].draining_mean, 2), s.setpoint,
                r["summary"].samples, round(r["steady_from_h"], 2), round(r["steady"].mc_mean, 2),
                round(r["steady"].mc_sd, 2), round(r["steady"].wastage_pct, 3)] for n, r in results.items()])


def _plot(path: Path, results: dict[str, dict[str, Any]], s: Settings) -> None:
    plt = pyplot()
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    colours = {"none": "tab:gray", "defrag": "tab:orange", "drainboss": "tab:blue"}
    for name, r in results.items():
        hours = [(x.t - r["t0"]) / 3600 for x in r["samples"]]
        col = colours.get(name)
        ax1.plot(hours, [x.running_mc for x in r["samples"]], color=col, label=f"{name}")
        ax2.plot(hours, [x.queued_mc for x in r["samples"]], color=col, label=f"{name}: multicore")
        ax2.plot(hours, [x.queued_sc for x in r["samples"]], color=col, ls=":", label=f"{name}: single-core")
        ax3.plot(hours, [x.draining for x in r["samples"]], color=col, label=name)
        if name != "none":
            ax1.axvline(r["steady_from_h"], color=col, ls=":", lw=1)
    first = next(iter(results.values()))
    for a, b in first["droughts"]:
        for ax in (ax1, ax2, ax3):
            ax.axvspan(a / 3600, b / 3600, color="tab:red", alpha=0.06, lw=0)
    ax1.axhline(s.setpoint, color="k", ls="--", lw=1, label=f"setpoint {s.setpoint:g}")
    for ax in (ax1, ax2, ax3):
        if s.warmup_hours > 0:
            ax.axvspan(0, s.warmup_hours, color="k", alpha=0.05, lw=0)
    ax1.set_ylabel("running multicore jobs")
    ax1.set_title(f"{s.machines} machines × {s.cpus} cores; shaded: warm-up (grey), multicore droughts (red); "
                  "dotted: steady state begins")
    ax2.set_ylabel("queued jobs")
    ax3.set_ylabel("draining machines")
    ax3.set_xlabel("pool hours")
    for ax in (ax1, ax2, ax3):
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
