"""`htcpool experiment faults`: break a pool on purpose while it runs jobs; prove nothing is lost.

A local pool (collector, negotiator, schedd, N startds of M machines each) on fast
leases and intervals, as HTCondor's own tests configure theirs (pool seconds;
wall seconds at the default TIME_SCALE 60 in brackets):

    NEGOTIATOR_INTERVAL 60 (1)      UPDATE_INTERVAL, SCHEDD_INTERVAL 60 (1)
    ALIVE_INTERVAL 60 (1)           MAX_CLAIM_ALIVES_MISSED 5: a claim lease of 300 (5)
    JOB_DEFAULT_LEASE_DURATION 300 (5): a running job's claim lease, the same
    CLASSAD_LIFETIME 300 (5)        CLAIM_WORKLIFE 1200 (20)
    QUEUE_CLEAN_INTERVAL 900 (15): the schedd compacts its job queue log, so a restart is quick

runs a seeded workload of jobs with random lengths, submitted half at once and the
rest in batches while the faults run (a submit that fails is retried only once the
schedd shows no job of its batch, so an answer lost to a fault does not submit
twice). A seeded nemesis (nemesis.py) injects faults of the chosen kinds on random
daemons at random times, staggered, each healed before the end; every fault RPC
plan also carries its own window, so the pool heals even if this process dies.
Every sample interval the pool's state is recorded. When the last fault has healed
and the queue is empty (or the wall-time bound is reached), the pool settles and
invariants.py checks what the daemons recorded.

Writes under results/faults/ (or --out): timeline.csv (the pool per sample, with the
faults in force), faults.csv (each fault and its recovery time), faults.png (the
pool's curves with the faults as bands), verdict.txt; prints the verdict and, with
--json, one JSON object. Exits 1 when an invariant is violated.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from daemons.cli.experiments import invariants as inv
from daemons.cli.experiments import nemesis
from daemons.cli.experiments.faults_args import Config, config
from daemons.cli.experiments.faults_workload import _retry, submit_loop

POOL_CONFIG = """\
TIME_SCALE = {scale}
NEGOTIATOR_INTERVAL = 60
NEGOTIATOR_CYCLE_DELAY = 5
NEGOTIATOR_MIN_INTERVAL = 5
UPDATE_INTERVAL = 60
SCHEDD_INTERVAL = 60
ALIVE_INTERVAL = 60
MAX_CLAIM_ALIVES_MISSED = 5
JOB_DEFAULT_LEASE_DURATION = 300
CLASSAD_LIFETIME = 300
CLAIM_WORKLIFE = 1200
QUEUE_CLEAN_INTERVAL = 900
NUM_CPUS = {cpus}
MEMORY = {memory}
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1
FAULT_SEED = {seed}
"""
# A pool across network namespaces: each daemon binds all interfaces of its own host and
# advertises that host's address; the collector is found by name.
NETNS_CONFIG = """\
NETWORK_INTERFACE = *
BIND_ALL_INTERFACES = True
COLLECTOR_HOST = collector:9618
"""
LEASE_S = 300.0
UPDATE_S = 60.0
# The accountant charges by the negotiator's clock, as HTCondor's does: a skewed
# negotiator clock changes usage by design, so clock faults leave it out.
EXCLUDE = {"clock": ("negotiator",)}


@dataclass
class Run:
    cfg: Config
    events: list[nemesis.FaultEvent] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    submitted: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)          # rm confirmed
    maybe_removed: set[str] = field(default_factory=set)    # rm unanswered
    held_released: int = 0
    acts: list = field(default_factory=list)
    batches_done: int = 0
    errors: list[str] = field(default_factory=list)
    applied: dict[int, tuple[float, float]] = field(default_factory=dict)   # index -> actual (start, stop)
    verdict: inv.Verdict = field(default_factory=inv.Verdict)
    recovery: dict[int, float | None] = field(default_factory=dict)
    confounded: dict[int, bool] = field(default_factory=dict)
    net: Any = None                     # the namespace harness's Network, with --netns
    wall_s: float = 0.0
    span_s: float = 0.0


def expected_span_s(cfg: Config) -> float:
    """The workload's length in pool time on a healthy pool: its work over the slots, plus a ramp."""
    return cfg.jobs * cfg.mean_s / cfg.slots + 1.5 * cfg.mean_s + 4 * 60.0


def run(args: argparse.Namespace) -> int:
    from daemons.cli.base import CliError, EXIT_USAGE
    from daemons.cli.experiments.faults_report import report
    try:
        cfg = config(args)
        events, span = plan(cfg)
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    out = Path(cfg.out) if cfg.out else Path("results") / "faults"
    out.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="htcpool-faults-"))
    result = Run(cfg, events=events, span_s=span)
    t0 = time.monotonic()
    try:
        asyncio.run(campaign(result, state, emit=lambda s: print(s, file=sys.stderr if cfg.json else sys.stdout,
                                                                 flush=True)))
    except Exception as e:
        # The experiment's own failure is a failed run with what was measured, not a traceback.
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        result.errors.append(f"the campaign failed: {type(e).__name__}: {e} ({Path(where.filename).name}:"
                             f"{where.lineno})")
    finally:
        result.wall_s = time.monotonic() - t0
        try:
            _keep_logs(state, out)
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return report(result, out)


def plan(cfg: Config) -> tuple[list[nemesis.FaultEvent], float]:
    span = expected_span_s(cfg)
    targets = {"collector": "collector", "negotiator": "negotiator", "schedd": "schedd",
               **{f"startd{i}": "startd" for i in range(1, cfg.startds + 1)}}
    s = nemesis.Settings(faults=cfg.faults, kinds=cfg.kinds, targets=targets, span_s=span, warmup_s=3 * 60.0,
                         tail_s=cfg.mean_s, min_length_s=cfg.min_fault_s, max_length_s=cfg.max_fault_s,
                         max_concurrent=cfg.max_concurrent, lease_s=LEASE_S, exclude=EXCLUDE)
    try:
        return nemesis.schedule(s, cfg.seed), span
    except ValueError as e:
        raise ValueError(f"{e}; run more jobs (--jobs), or shorter faults (--max-fault)") from None


def _keep_logs(state: Path, out: Path) -> None:
    logs = out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    if (state / "pool" / "log").exists():
        shutil.copytree(state / "pool" / "log", logs)


# ---- the campaign ---------------------------------------------------------------------------
async def campaign(r: Run, state: Path, emit) -> None:
    from daemons.cli.client import wait_for
    from daemons.cli.pool import LocalPool
    from daemons.core.clock import PoolClock
    cfg = r.cfg
    conf = state / "pool.conf"
    conf.write_text(POOL_CONFIG.format(scale=cfg.time_scale, cpus=cfg.cpus, memory=1024 * cfg.cpus, seed=cfg.seed)
                    + (NETNS_CONFIG if cfg.netns else ""))
    net = None
    kw: dict[str, Any] = {}
    if cfg.netns:
        from daemons.harness import netns
        # One host per daemon, on one bridge; the daemons find the collector by name.
        net = netns.Network(["collector", "negotiator", "schedd", *(f"startd{i}" for i in range(1, cfg.startds + 1))])
        net.create()
        kw = {"launch_prefix": lambda key: net[key].argv([]),
              "daemon_env": {h: {"_CONDOR_COLLECTOR_HOST": "collector:9618"} for h in net.names}}
    r.net = net
    pool = LocalPool(state / "pool", conf, machines=cfg.machines, startds=cfg.startds, host_prefix="exec", **kw)
    wall_deadline = time.monotonic() + (cfg.max_wall_s or 3 * r.span_s / cfg.time_scale + 300.0)
    emit(f"faults: {cfg.jobs} jobs on {cfg.slots} slots ({cfg.startds} startds x {cfg.machines} machines x "
         f"{cfg.cpus} cores), {len(r.events)} faults of {', '.join(cfg.kinds)}, seed {cfg.seed}; "
         f"about {r.span_s / cfg.time_scale:.0f} s of wall time at TIME_SCALE {cfg.time_scale:g}")
    try:
        pool.start(timeout_s=120)
        clock = PoolClock(scale=cfg.time_scale, epoch=pool.epoch)
        async with pool.client() as c:
            async def all_machines():
                found = await c.ads("Machine", projection=["Machine"])
                return len({str(a.lookup("Machine")) for a in found}) >= cfg.startds * cfg.machines
            await wait_for(all_machines, timeout_s=120, what=f"{cfg.startds * cfg.machines} machines")
            # The pool may slow its clock (the lag policy): the campaign's schedule follows it.
            follower = asyncio.create_task(c.keep_following(clock))
            t0 = clock.now()
            nem = Nemesis(pool, c, clock, t0, r, emit)
            sampling = asyncio.Event()
            sampling.set()
            sampler = asyncio.create_task(sample_loop(pool, c, clock, t0, r, sampling))
            submitter = asyncio.create_task(submit_loop(c, clock, t0, r, emit))
            try:
                await nem.run(wall_deadline)
                await asyncio.wait_for(asyncio.shield(submitter), timeout=max(1.0, wall_deadline - time.monotonic()))
                emit(f"faults: the last fault healed at pool time {clock.now() - t0:.0f} s; waiting for the queue")
                await wait_queue_empty(pool, r, wall_deadline)
            except asyncio.TimeoutError:
                r.errors.append("the campaign reached its wall-time bound (--max-wall)")
            finally:
                await nem.heal_all()
                submitter.cancel()
                for t in r.acts:
                    t.cancel()
                await settle_and_check(pool, c, clock, t0, r, emit)
                # Stop by asking, then wait a bounded time: a cancel can be lost in Python
                # 3.11's asyncio.wait_for when the awaited call finishes at that moment.
                sampling.clear()
                await asyncio.wait([sampler, submitter], timeout=10.0)
                for t in (sampler, submitter, follower, *r.acts):
                    t.cancel()
    finally:
        pool.stop()
        if net is not None:
            net.close()


async def wait_queue_empty(pool, r: Run, deadline: float) -> None:
    while time.monotonic() < deadline:
        s = await _status(pool, "schedd")
        if s is not None and s.get("jobs") == 0 and r.batches_done and r.submitted:
            return
        await asyncio.sleep(0.5)
    r.errors.append("the queue was not empty when the wall-time bound was reached")


# ---- observation ------------------------------------------------------------------------------
async def _status(pool, key: str, detail: str = "") -> Any:
    import aiohttp
    d = pool.daemons.get(key)
    url = d.info.get("status_url", "") if d is not None else ""
    if not url or d.state != "running":
        return None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as http:
            async with http.get(f"{url}/status{'/' + detail if detail else ''}") as resp:
                return await resp.json() if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None


async def sample_loop(pool, c, clock, t0: float, r: Run, running: asyncio.Event) -> None:
    while running.is_set():
        t = clock.now() - t0
        schedd = await _status(pool, "schedd")
        row: dict[str, Any] = {"t": round(t, 1), "running": None, "idle": None, "held": None, "queued": None,
                               "done": None, "busy": None, "claimed": None, "unclaimed": None}
        # The jobs really running: busy slots as each startd counts them (a frozen startd
        # runs nothing). The schedd's own count lags behind a fault: it counts a job it
        # cannot reach as running until its claim's lease runs out.
        busy = 0
        for key in pool.startd_keys():
            st = await _status(pool, key)
            if st is not None:
                busy += sum(n for k, n in st.get("slots", {}).items() if k in ("Claimed/Busy", "Claimed/Retiring"))
        row["busy"] = busy
        if schedd is not None:
            subs = schedd.get("submitters", {}).values()
            row.update(running=sum(s.get("running", 0) for s in subs), idle=sum(s.get("idle", 0) for s in subs),
                       held=sum(s.get("held", 0) for s in subs), queued=schedd.get("jobs"))
            row["done"] = max(0, len(r.submitted) - row["queued"]) if r.submitted else 0
        try:
            from daemons.core import ads
            slots = await asyncio.wait_for(c.collector.query("Machine", projection=["State"], give_up_after_s=0.5),
                                           timeout=2.0)
            states = Counter(str(ads.get(ads.parse_ad(t), "State")) for t in slots)
            row.update(claimed=states.get("Claimed", 0), unclaimed=states.get("Unclaimed", 0))
        except (grpc.aio.AioRpcError, asyncio.TimeoutError):
            pass
        row["faults"] = " ".join(f"{e.kind}:{e.target}" for e in r.events if e.index in r.applied
                                 and r.applied[e.index][0] <= t and (r.applied[e.index][1] < 0
                                                                     or t < r.applied[e.index][1]))
        r.samples.append(row)
        await clock.sleep_until(t0 + t + r.cfg.sample_s)


# ---- the nemesis, acted out --------------------------------------------------------------------
class Nemesis:
    def __init__(self, pool, client, clock, t0: float, r: Run, emit) -> None:
        self.pool, self.c, self.clock, self.t0, self.r, self.emit = pool, client, clock, t0, r, emit
        self.open: dict[int, nemesis.FaultEvent] = {}

    async def run(self, wall_deadline: float) -> None:
        """Each daemon's faults in order (a heal before the next fault's start, even when a
        restart takes a while), and different daemons' faults side by side, so a slow
        restart delays nothing else."""
        by_target: dict[str, list[tuple[float, int, nemesis.FaultEvent]]] = {}
        for e in self.r.events:
            by_target.setdefault(e.target, []).extend([(e.start, 1, e), (e.stop, 0, e)])

        async def one_target(actions: list[tuple[float, int, nemesis.FaultEvent]]) -> None:
            for at, is_start, e in sorted(actions, key=lambda a: (a[0], a[1], a[2].index)):
                wait = self.clock.wall_at(self.t0 + at) - self.clock.wall()
                if time.monotonic() + max(0.0, wait) > wall_deadline:
                    raise asyncio.TimeoutError
                await self.clock.sleep_until(self.t0 + at)
                if not is_start and e.index not in self.open:
                    continue
                try:
                    await (self.start(e) if is_start else self.stop(e))
                except Exception as ex:   # a fault that cannot be applied is reported, not fatal
                    self.r.errors.append(f"{e.describe()}: {'start' if is_start else 'stop'}: "
                                         f"{type(ex).__name__}: {ex}")
        results = await asyncio.gather(*(one_target(a) for a in by_target.values()), return_exceptions=True)
        if any(isinstance(x, asyncio.TimeoutError) for x in results):
            raise asyncio.TimeoutError

    async def heal_all(self) -> None:
        for e in list(self.open.values()):
            try:
                await self.stop(e)
            except Exception as ex:
                self.r.errors.append(f"{e.describe()}: healing at the end: {type(ex).__name__}: {ex}")

    def _now(self) -> float:
        return self.clock.now() - self.t0

    async def start(self, e: nemesis.FaultEvent) -> None:
        self.r.applied[e.index] = (self._now(), -1.0)
        pool = self.pool
        if e.kind == "kill":
            await asyncio.to_thread(pool.kill, e.target, signal.SIGKILL)
        elif e.kind == "restart":
            await asyncio.to_thread(pool.kill, e.target, signal.SIGTERM)
        elif e.kind == "pause":
            await asyncio.to_thread(pool.pause, e.target)
        elif self.r.net is not None and e.kind in nemesis.NETWORK_KINDS:
            await asyncio.to_thread(self._net_set, e)
        else:
            await self._set_faults(e)
        self.open[e.index] = e
        self.emit(f"faults: pool time {self._now():6.0f} s  start {e.describe()}")

    async def stop(self, e: nemesis.FaultEvent) -> None:
        if e.index not in self.open:
            return
        del self.open[e.index]
        pool = self.pool
        if e.kind in ("kill", "restart"):
            await asyncio.to_thread(pool.restart, e.target)
        elif e.kind == "pause":
            await asyncio.to_thread(pool.resume, e.target)
        elif self.r.net is not None and e.kind in nemesis.NETWORK_KINDS:
            await asyncio.to_thread(self._net_clear, e)
        else:
            d = pool.daemons[e.target]
            if d.alive():
                ids = [f"n{e.index}-in", f"n{e.index}-out"] if e.kind in ("partition", "reset", "loss") \
                    else [f"n{e.index}"]
                have = {s.fault.id for s in (await _retry(f"listing faults of {e.target}",
                                                         lambda: self.c.list_faults(d.address),
                                                         time.monotonic() + 30)).faults}
                if have & set(ids):
                    await self.c.clear_faults(d.address, sorted(have & set(ids)))
        self.r.applied[e.index] = (self.r.applied[e.index][0], self._now())
        self.emit(f"faults: pool time {self._now():6.0f} s  heal  #{e.index} {e.kind} {e.target}")

    # Real network faults in the target's namespace (--netns): iptables and tc.
    def _net_host(self, e: nemesis.FaultEvent):
        from daemons.harness import netfaults as nf
        return nf.Namespace(self.r.net[e.target].netns)

    def _net_set(self, e: nemesis.FaultEvent) -> None:
        from daemons.harness import netfaults as nf
        host = self._net_host(e)
        peer = str(e.param("peer", "*"))
        peers = () if peer == "*" else (self.pool.daemons[peer].address.rpartition(":")[0],)
        how = {"partition": "drop", "reset": "reset", "loss": "loss", "bandwidth": "bandwidth"}[e.kind]
        fault = nf.NetFault(f"n{e.index}", how, peers if how != "bandwidth" else (),
                            percent=float(e.param("percent", 100.0)), rate=str(e.param("rate", "")),
                            exempt=(self.r.net.gateway,))
        nf.apply(fault, host.run, nf.in_root, host.inner, host.outer() if how == "bandwidth" else "")

    def _net_clear(self, e: nemesis.FaultEvent) -> None:
        from daemons.harness import netfaults as nf
        host = self._net_host(e)
        nf.clear(host.run, nf.in_root, f"n{e.index}", host.inner, host.outer(), bandwidth=e.kind == "bandwidth")

    async def _set_faults(self, e: nemesis.FaultEvent) -> None:
        from daemons.core.fault_admin import fault_to_pb
        from daemons.core.faults import Fault
        start = self.t0 + e.start
        stop = self.t0 + e.stop
        d = self.pool.daemons[e.target]
        if e.kind in ("partition", "reset", "loss"):
            # Loopback: the cut is made in the daemon's own layers, both ways (a reset is a
            # call refused UNAVAILABLE, loss a share of the calls dropped).
            peer = str(e.param("peer", "*"))
            if peer == "*":
                into, out = "*", "*"
            else:
                p = self.pool.daemons[peer]
                into = str(p.info.get("name") or p.role)
                out = p.address
            how: dict[str, Any] = {"abort": "UNAVAILABLE"} if e.kind == "reset" else {"drop": True}
            pct = float(e.param("percent", 100.0))
            faults = [Fault(f"n{e.index}-in", peer=into, stop=stop, percent=pct, **how),
                      Fault(f"n{e.index}-out", side="client", peer=out, stop=stop, percent=pct, **how)]
        elif e.kind == "clock":
            faults = [Fault(f"n{e.index}", clock_offset_s=float(e.param("offset_s", 0.0) or 0.0),
                            clock_drift=float(e.param("drift", 0.0) or 0.0), stop=stop)]
        else:
            faults = [Fault(f"n{e.index}", side=str(e.param("side")), method=str(e.param("method")),
                            percent=float(e.param("percent")), stop=stop,
                            delay_s=float(e.param("delay_s", 0.0)), jitter_s=float(e.param("jitter_s", 0.0)),
                            drop=e.kind == "drop", abort=str(e.param("code", "")) if e.kind == "abort" else "")]
        del start   # faults act from now: the window's end is what makes them heal on their own
        await _retry(f"setting fault #{e.index} on {e.target}",
                     lambda: self.c.set_faults(d.address, [fault_to_pb(f) for f in faults]),
                     time.monotonic() + 30, self.r.errors)


# ---- the end: settle, collect, check --------------------------------------------------------------
async def settle_and_check(pool, c, clock, t0: float, r: Run, emit) -> None:
    from daemons.core import ads
    cfg = r.cfg
    deadline = time.monotonic() + max(30.0, 6 * UPDATE_S / cfg.time_scale)
    emit("faults: every fault healed; letting the pool settle and checking the invariants")
    views = None
    while True:
        views = await collect_views(pool, c)
        v = inv.Verdict()
        if views is not None:
            inv.check_views(v, *views[:4])
            if not v.view_mismatches:
                break
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    far = time.monotonic() + 60

    async def jobs(history: bool):
        return await _retry("querying the schedd", lambda: c.jobs(
            "FaultBatch =!= undefined", ["ClusterId", "ProcId", "JobStatus", "LastRemoteHost", "CompletionDate",
                                         "Duration", "CumulativeSlotTime", "NumJobStarts"], history=history), far)
    history_ads = await jobs(True)
    queue_ads = await jobs(False)

    def num(a, k, default=0.0) -> float:
        x = ads.get(a, k)
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else default

    def jid(a) -> str:
        return f"{ads.get(a, 'ClusterId')}.{ads.get(a, 'ProcId')}"
    history = [inv.JobRecord(jid(a), int(num(a, "JobStatus")), str(ads.get(a, "LastRemoteHost") or ""),
                             num(a, "CompletionDate") - num(a, "Duration"), num(a, "CompletionDate"),
                             num(a, "CumulativeSlotTime")) for a in history_ads]
    queue = {jid(a): int(num(a, "JobStatus")) for a in queue_ads}
    # Jobs whose submit answer a fault swallowed count as submitted too.
    r.submitted |= {h.job for h in history} | set(queue)
    v = r.verdict
    inv.check_jobs(v, r.submitted, history, queue, r.removed, r.maybe_removed)
    machine_startd = {}
    if views is not None:
        for slot in views[0]:
            machine_startd[slot.split("@", 1)[-1]] = views[4].get(slot, "")
    slot_startd = {h.slot: machine_startd.get(h.slot.split("@", 1)[-1], "") for h in history}
    windows = [inv.ClockWindow(e.target, t0 + e.start, t0 + e.stop,
                               abs(float(e.param("offset_s", 0.0) or 0.0))
                               + abs(float(e.param("drift", 0.0) or 0.0)) * (e.stop - e.start))
               for e in r.events if e.kind == "clock" and e.target.startswith("startd")]
    inv.check_overlaps(v, history, slot_startd, windows)
    if views is not None:
        inv.check_views(v, *views[:4])
    else:
        v.view_mismatches = ["the views could not be collected (a daemon did not answer)"]
    try:
        prio = await _retry("querying the accountant", lambda: c.userprio(all_users=True), far)
        acct = sum(e.accumulated_usage_hours for e in prio.entries if not e.is_group) * 3600.0
    except grpc.aio.AioRpcError:
        acct = None
    claimed = inv.slot_seconds([(x["t"], x["claimed"]) for x in r.samples])
    inv.check_usage(v, acct, claimed, history, cfg.usage_tolerance)
    logs = {}
    for f in sorted((pool.state_dir / "log").iterdir()):
        if f.is_file():
            logs[f.name] = f.read_text(errors="replace")
    inv.check_logs(v, logs)
    samples = [inv.Sample(s["t"], s["busy"], s["idle"]) for s in r.samples]
    spans = {i: (a, b if b >= 0 else r.events[i - 1].stop) for i, (a, b) in r.applied.items()}
    for i, (start, stop) in spans.items():
        r.recovery[i] = inv.recovery_time(samples, start, stop)
        until = stop + (r.recovery[i] if r.recovery[i] is not None else float("inf"))
        # Another fault in force between this one's start and its recovery muddles the figure.
        r.confounded[i] = any(j != i and a < until and start < b for j, (a, b) in spans.items())


async def collect_views(pool, c):
    """(startd slots, collector slots, schedd claims, schedd running, slot -> startd key), or None."""
    from daemons.core import ads
    startd: dict[str, inv.SlotView] = {}
    owner: dict[str, str] = {}
    for key in pool.startd_keys():
        slots = await _status(pool, key, "slots")
        if slots is None:
            return None
        for name, s in slots.items():
            startd[name] = inv.SlotView(s["state"], s["job"], bool(s["claimed"]))
            owner[name] = key
    try:
        found = await c.ads("Machine", projection=["Name", "State", "JobId"])
    except grpc.aio.AioRpcError:
        return None
    collector = {}
    for a in found:
        job = ads.get(a, "JobId")
        state = str(ads.get(a, "State"))
        collector[str(ads.get(a, "Name"))] = inv.SlotView(state, job if isinstance(job, str) else "",
                                                          state == "Claimed")
    claims = await _status(pool, "schedd", "claims")
    running = await _status(pool, "schedd", "running")
    if claims is None or running is None:
        return None
    return startd, collector, claims, running, owner
