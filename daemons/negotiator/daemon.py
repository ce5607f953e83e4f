"""The negotiator daemon: negotiation cycles on HTCondor's cadence, with fair share.

A cycle (matchmaker.cpp negotiationTime):
- Phase 1: slot ads (NEGOTIATOR_SLOT_CONSTRAINT) and submitter ads from the collector;
- Phase 2: accounting: priorities age, usage is rebuilt from the claimed slots, the
  pool's summed slot weight is the pie; significant attributes;
- Phase 3/4: with GROUP_NAMES, allocation rounds over the group tree (groups.py), each
  group negotiated in GROUP_SORT_EXPR order up to its allocation; without groups, one
  group of everybody. Within a group, "pie spins": submitters in ascending effective
  priority, each up to its share of the pie (fairshare.py), repeated while progress is
  made. Each submitter is a session with its schedd over a bidirectional stream.
The log uses HTCondor's NegotiatorLog wording so runs can be compared line by line.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import classad2
import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.config import ConfigError, Param
from daemons.core.daemon import Daemon, cancel_and_wait
from daemons.core.log import EACH_LINE_STAMPED
from daemons.core.rpc import describe
from daemons.negotiator import groups as hgq
from daemons.negotiator.accountant import Accountant, AccountantConfig
from daemons.negotiator.cadence import Cadence
from daemons.negotiator.fairshare import submitter_limits
from daemons.negotiator.matchmaker import Match, Matchmaker, MatchPolicy, SlotCache
from daemons.negotiator.significant import SignificantAttributes
from daemons.negotiator.slotads import SlotView
from daemons.pb.htcpool import common_pb2, negotiator_pb2, negotiator_pb2_grpc, schedd_pb2, schedd_pb2_grpc


@dataclass(frozen=True)
class NegotiatorConfig:
    cadence: Cadence = field(default_factory=Cadence)
    request_list_size: int = 200          # NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE
    policy: MatchPolicy = field(default_factory=MatchPolicy)
    timeout_s: float = 30.0               # NEGOTIATOR_TIMEOUT (wall seconds per schedd exchange)
    cycle_history: int = 1000             # how many cycle records the status page keeps
    # Policy expressions whose references are significant (HTCondor's compute_significant_attrs).
    preemption_requirements: str = ""     # PREEMPTION_REQUIREMENTS
    preemption_rank: str = ""             # PREEMPTION_RANK
    job_constraint: str = ""              # NEGOTIATOR_JOB_CONSTRAINT (the schedd offers only such jobs)
    slot_constraint: str = ""             # NEGOTIATOR_SLOT_CONSTRAINT (other slots are never fetched)
    depth_first: bool = False             # NEGOTIATOR_DEPTH_FIRST
    use_slot_weights: bool = True         # NEGOTIATOR_USE_SLOT_WEIGHTS
    accountant: AccountantConfig = field(default_factory=AccountantConfig)
    groups: hgq.GroupsConfig = field(default_factory=hgq.GroupsConfig)
    accountant_file: Path | None = None   # ACCOUNTANT_DATABASE_FILE (JSON here)
    problems: tuple[str, ...] = ()        # configuration problems reported every cycle, not fatal

    @classmethod
    def from_param(cls, p: Param, spool: Path | None = None) -> "NegotiatorConfig":
        groups, problems = hgq.read_groups(p)
        limits, scoped = [], []
        for knob in p.names():
            up = knob.upper()
            if up.endswith("_LIMIT") and not up.startswith(("CONCURRENCY_LIMIT_DEFAULT", "NEGOTIATOR_")):
                try:
                    v = p.float(knob)
                except ConfigError as e:
                    problems.append(str(e))
                    continue
                if v is not None and p.is_set(knob):
                    limits.append((knob[:-len("_LIMIT")].lower(), v))
            elif up.startswith("CONCURRENCY_LIMIT_DEFAULT_"):
                v = p.float(knob)
                if v is not None:
                    scoped.append((knob[len("CONCURRENCY_LIMIT_DEFAULT_"):].lower(), v))
        group_factors = []
        for spec in groups.groups:
            f = p.float(f"GROUP_PRIO_FACTOR_{spec.name}")
            if f is not None:
                group_factors.append((spec.name, f))
        db = p.str("ACCOUNTANT_DATABASE_FILE")
        acct_file = Path(db).with_suffix(".json") if db and db != "/spool/Accountantnew.log" else (
            (spool / "Accountant.json") if spool else None)
        return cls(
            cadence=Cadence(
                interval_s=float(p.int("NEGOTIATOR_INTERVAL", 60, minimum=1) or 60),
                min_interval_s=float(p.int("NEGOTIATOR_MIN_INTERVAL", 5, minimum=0) or 0),
                cycle_delay_s=float(p.int("NEGOTIATOR_CYCLE_DELAY", 20, minimum=0)
                                    if p.is_set("NEGOTIATOR_CYCLE_DELAY") else 20)),
            request_list_size=p.int("NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE", 200, minimum=1) or 200,
            policy=MatchPolicy(pre_job_rank=p.expr("NEGOTIATOR_PRE_JOB_RANK", "") or "",
                               post_job_rank=p.expr("NEGOTIATOR_POST_JOB_RANK", "") or ""),
            timeout_s=float(p.int("NEGOTIATOR_TIMEOUT", 30, minimum=1) or 30),
            cycle_history=p.int("NEGOTIATOR_CYCLE_HISTORY", 1000, minimum=1) or 1000,
            preemption_requirements=p.expr("PREEMPTION_REQUIREMENTS", "") or "",
            preemption_rank=p.expr("PREEMPTION_RANK", "") or "",
            job_constraint=p.expr("NEGOTIATOR_JOB_CONSTRAINT", "") or "",
            slot_constraint=p.expr("NEGOTIATOR_SLOT_CONSTRAINT", "") or "",
            depth_first=bool(p.bool("NEGOTIATOR_DEPTH_FIRST", False)),
            use_slot_weights=bool(p.bool("NEGOTIATOR_USE_SLOT_WEIGHTS", True)),
            accountant=AccountantConfig(
                halflife_s=p.float("PRIORITY_HALFLIFE", 86400.0, positive=True) or 86400.0,
                default_factor=p.float("DEFAULT_PRIO_FACTOR", 1000.0, minimum=1.0) or 1000.0,
                use_slot_weights=bool(p.bool("NEGOTIATOR_USE_SLOT_WEIGHTS", True)),
                group_factors=tuple(group_factors),
                concurrency_default=p.float("CONCURRENCY_LIMIT_DEFAULT", 2308032.0, minimum=0) or 2308032.0,
                concurrency_limits=tuple(limits),
                concurrency_scoped_defaults=tuple(scoped)),
            groups=groups,
            accountant_file=acct_file,
            problems=tuple(problems),
        )

    def policy_exprs(self) -> list[str]:
        return [self.preemption_requirements, self.preemption_rank, self.policy.pre_job_rank,
                self.policy.post_job_rank]


@dataclass
class CycleRecord:
    cycle: int
    start: float
    end: float = 0.0
    matches: int = 0
    rejections: int = 0
    duration: float = 0.0
    wall_duration: float = 0.0
    slots: int = 0
    submitters: int = 0
    rescheduled: bool = False
    error: str = ""
    slot_groups: int = 0     # candidate slots after grouping identical ones
    requests: int = 0        # resource request ads received from schedds
    considered: int = 0      # request ads evaluated against the pool (matches + rejections)
    significant: int = 0     # significant attributes sent to schedds
    pool_weight: float = 0.0  # the pie: summed slot weights
    order: list[str] = field(default_factory=list)   # "group/submitter" in negotiation order
    cpu_duration: float = 0.0  # this process's CPU seconds (every thread) during the cycle
    evaluations: int = 0       # request-against-slot evaluations (one per slot group, thanks to grouping)
    autoclusters: int = 0      # distinct autoclusters among the request ads received
    phases: dict[str, float] = field(default_factory=dict)   # wall seconds per phase of the cycle


class _Phases:
    """Records the wall time since the previous call under a phase's name."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.into[name] = round(self.into.get(name, 0.0) + now - self.t, 6)
        self.t = now


class _Outgoing:
    """What a session has decided and not yet sent: matches and rejections, and log lines.

    They travel as one message and one log record per batch of requests (the lines
    still read as HTCondor's, each stamped): a message per match would cost more
    than the matching itself.
    """

    def __init__(self, log) -> None:
        self.log = log
        self.lines: list[str] = []
        self.msg = schedd_pb2.NegotiatorMessage()

    def match(self, request_id: str, result: Match) -> None:
        m = self.msg.outcomes.outcomes.add().match
        m.request_id = request_id
        m.claim_id = result.claim_id
        m.slot_ad.text = result.slot_ad_text
        if result.consumed:
            m.consumed.update(dict(result.consumed))

    def reject(self, request_id: str, reason: str) -> None:
        r = self.msg.outcomes.outcomes.add().reject
        r.request_id = request_id
        r.reason = reason

    def flush_log(self) -> None:
        if self.lines:
            self.log.info("%s", "\n".join(self.lines), extra=EACH_LINE_STAMPED)
            self.lines = []

    async def flush(self, call) -> None:
        self.flush_log()
        if self.msg.HasField("outcomes"):
            msg, self.msg = self.msg, schedd_pb2.NegotiatorMessage()
            await call.write(msg)


@dataclass
class _ScheddStream:
    call: Any          # the Negotiate stream-stream call
    opened: float      # time.monotonic() when it opened

    async def close(self) -> None:
        try:
            if not self.call.done():
                await self.call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
                await self.call.done_writing()
                while await self.call.read() is not grpc.aio.EOF:
                    pass
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass


@dataclass
class Session:
    """One submitter's negotiation within a spin."""
    name: str
    address: str
    group: hgq.Group | None
    ancestry: list[str]
    limit: float
    used: float = 0.0
    limited: bool = False     # stopped or rejected by the submitter limit
    matches: int = 0


class NegotiatorDaemon(Daemon):
    role = "negotiator"
    my_type = "Negotiator"

    def __init__(self, common: CommonConfig, cfg: NegotiatorConfig, clock: PoolClock | None = None) -> None:
        super().__init__(common, clock)
        self.cfg = cfg
        self.history: deque[CycleRecord] = deque(maxlen=cfg.cycle_history)
        self.cycle_count = 0
        self._reschedule = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self.last_start: float | None = None
        self.last_end: float | None = None
        self.significant = SignificantAttributes()
        self.significant_attrs: list[str] = []
        # Views of slot ads by their text (with the ad once parsed): an unchanged ad costs a look-up.
        self._slot_cache = SlotCache()
        self.accountant = self._load_accountant()
        # One save at a time: a cycle's save and a SetUserPrio's may overlap in their threads,
        # and both write through the one temporary file.
        self._accountant_saving = asyncio.Lock()
        self.last_limits: dict[str, tuple[float, float]] = {}   # submitter -> (share, limit)
        self.last_quotas: dict[str, float] = {}
        self._cycle_autoclusters: set[object] = set()   # autocluster ids of this cycle's request ads
        self._streams: dict[str, _ScheddStream] = {}     # this cycle's Negotiate streams, by schedd address
        self._closing: list[asyncio.Future] = []

    def default_name(self) -> str:
        return self.common.full_hostname

    def add_services(self, server: grpc.aio.Server) -> None:
        negotiator_pb2_grpc.add_NegotiatorServicer_to_server(_NegotiatorService(self), server)

    # ---- accountant persistence -------------------------------------------------
    def _load_accountant(self) -> Accountant:
        path = self.cfg.accountant_file
        if path is not None and path.exists():
            try:
                return Accountant.from_state(self.cfg.accountant, json.loads(path.read_text()))
            except (ValueError, TypeError) as e:
                self.log.warning("accountant state %s unreadable (%s); starting afresh", path, e)
        return Accountant(self.cfg.accountant)

    async def _save_accountant(self) -> None:
        path = self.cfg.accountant_file
        if path is None:
            return
        async with self._accountant_saving:
            # The state as it is when this save's turn comes: saves land in order, the last newest.
            state = json.dumps(self.accountant.to_state())
            await asyncio.to_thread(self._write_accountant, path, state)

    @staticmethod
    def _write_accountant(path: Path, state: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    async def on_start(self) -> None:
        c = self.cfg.cadence
        self.log.info("NEGOTIATOR_INTERVAL %.0f s, NEGOTIATOR_MIN_INTERVAL %.0f s, NEGOTIATOR_CYCLE_DELAY %.0f s",
                      c.interval_s, c.min_interval_s, c.cycle_delay_s)
        for problem in self.cfg.problems:
            self.log.error("configuration: %s", problem)
        if self.cfg.groups.enabled:
            self.log.info("group quotas: %s", ", ".join(
                f"{g.name} ({'static ' if g.static else 'dynamic '}{g.config_quota:g}"
                f"{', accept surplus' if g.accept_surplus else ''}{', autoregroup' if g.autoregroup else ''})"
                for g in self.cfg.groups.groups))
        self._loop_task = asyncio.create_task(self._cycle_loop(), name="negotiator:cycles")

    async def on_close(self) -> None:
        if self._loop_task is not None:
            await cancel_and_wait(self._loop_task)
        await self._save_accountant()

    def reschedule(self) -> int:
        self._reschedule.set()
        return self.cycle_count + 1

    async def _cycle_loop(self) -> None:
        next_start = self.clock.now()
        while True:
            rescheduled = await self._wait_for_cycle(next_start)
            start = self.clock.now()
            record = await self.negotiation_cycle(rescheduled)
            self.last_start, self.last_end = start, record.end
            next_start = self.cfg.cadence.next_scheduled(start, record.end)

    async def _wait_for_cycle(self, scheduled: float) -> bool:
        """Sleep until the scheduled start or a reschedule; True if a reschedule woke us."""
        rescheduled = False
        while True:
            target = scheduled
            if self._reschedule.is_set():
                rescheduled = True
                target = min(scheduled, self.cfg.cadence.earliest_rescheduled(
                    self.clock.now(), self.last_start, self.last_end))
            delay = self.clock.wall_at(target) - self.clock.wall()
            if delay <= 0:
                self._reschedule.clear()
                return rescheduled and target < scheduled
            if rescheduled:
                await asyncio.sleep(delay)
                continue
            try:
                await asyncio.wait_for(self._reschedule.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass

    async def negotiation_cycle(self, rescheduled: bool = False) -> CycleRecord:
        self.cycle_count += 1
        rec = CycleRecord(self.cycle_count, self.clock.now(), rescheduled=rescheduled)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        self._cycle_autoclusters = set()
        log = self.log
        log.info("---------- Started Negotiation Cycle ----------")
        try:
            await self._negotiate(rec)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            rec.error = describe(e)
            log.warning("Aborting negotiation cycle: %s", rec.error, exc_info=not isinstance(e, grpc.aio.AioRpcError))
        rec.end = self.clock.now()
        rec.duration = rec.end - rec.start
        rec.wall_duration = time.perf_counter() - wall0
        rec.cpu_duration = time.process_time() - cpu0
        rec.autoclusters = len(self._cycle_autoclusters)
        self.history.append(rec)
        log.info("---------- Finished Negotiation Cycle ----------")
        log.info("Cycle %d: %d match(es), %d rejection(s), %d slot(s), %d submitter(s), %.3f s (%.3f s wall, "
                 "%.3f s cpu; %s)", rec.cycle, rec.matches, rec.rejections, rec.slots, rec.submitters, rec.duration,
                 rec.wall_duration, rec.cpu_duration, ", ".join(f"{k} {v:.3f}" for k, v in rec.phases.items()))
        try:
            await self._save_accountant()
        except OSError as e:
            log.warning("could not save the accountant's state: %s", e)
        self.trigger("advertise")
        return rec

    # ---- a cycle ---------------------------------------------------------------------
    async def _negotiate(self, rec: CycleRecord) -> None:
        assert self.collector is not None
        log = self.log
        log.info("Phase 1:  Obtaining ads from collector ...")
        phase = _Phases(rec.phases)
        slot_texts, submitter_texts = await asyncio.gather(
            self.collector.query("Machine", constraint=self.cfg.slot_constraint, include_private=True,
                                 give_up_after_s=5.0),
            self.collector.query("Submitter", give_up_after_s=5.0))
        phase("query")
        # One cheap pass per ad: the ClassAd library parses an ad only when it is evaluated.
        views = [self._slot_cache.view(t, parse=self._parse_slot) for t in slot_texts]
        submitters = []
        for t in submitter_texts:
            ad = ads.parse_ad(t, "submitter ad")
            name, schedd, addr = (ads.get(ad, a) for a in ("Name", "ScheddName", "ScheddIpAddr"))
            if not all(isinstance(v, str) and v for v in (name, schedd, addr)):
                log.info("  Error!  Could not get Name, ScheddName and ScheddIpAddr from a submitter ad; ignored")
                continue
            submitters.append(ad)
        rec.slots, rec.submitters = len(views), len(submitters)
        log.info("Got ads: %d public and %d private", len(slot_texts) + len(submitter_texts), len(slot_texts))
        log.info("Public ads include %d submitter, %d startd", len(submitters), len(views))
        phase("parse")

        log.info("Phase 2:  Performing accounting ...")
        for problem in self.cfg.problems:
            log.error("configuration: %s", problem)
        tree = hgq.build_tree(self.cfg.groups) if self.cfg.groups.enabled else None
        groups_by_name = {g.name.lower(): g for g in tree[1]} if tree else {}
        self.accountant.update_priorities(rec.start)
        pool_weight, min_weight, claimed = 0.0, math.inf, []
        for v in views:
            w = self._view_weight(v)
            pool_weight += w
            min_weight = min(min_weight, w) if w > 0 else min_weight
            if v.get("State") in ("Claimed", "Preempting"):
                owner = v.get("RemoteOwner")
                if isinstance(owner, str) and owner:
                    limits = v.get("ConcurrencyLimits")
                    claimed.append((owner, self._groups_of(owner, groups_by_name), w,
                                    limits if isinstance(limits, str) else ""))
        self.accountant.check_matches(claimed)
        rec.pool_weight = pool_weight
        phase("accounting")
        sig = self.significant.compute_views(views, self.cfg.policy_exprs(), self.cfg.job_constraint)
        if sig != self.significant_attrs:
            log.info("Significant attributes: %s", ",".join(sig))
            self.significant_attrs = sig
        rec.significant = len(sig)
        phase("significant")
        mm = Matchmaker.from_views(views, self.cfg.policy, rec.start, self._slot_cache,
                                   use_slot_weights=self.cfg.use_slot_weights)
        mm.count_jobs_in_slot = self.cfg.depth_first
        rec.slot_groups = len(mm.groups)
        phase("group")
        min_weight = min_weight if math.isfinite(min_weight) else 1.0
        self.last_limits, self.last_quotas = {}, {}
        try:
            if tree is None:
                await self._negotiate_group(None, submitters, math.inf, pool_weight, min_weight, mm, rec, {})
            else:
                await self._negotiate_groups(tree, submitters, pool_weight, min_weight, mm, rec)
        finally:
            await self._close_streams()
        phase("negotiate")
        rec.evaluations = mm.evaluations
        for slot, problem in mm.errors.items():
            log.error("slot %s: %s", slot, problem)

    def _view_weight(self, v: SlotView) -> float:
        """A slot's weight, once per shape unless its expressions look at its instance attributes."""
        if not self.cfg.use_slot_weights:
            return 1.0
        if v.depends_on_instance():
            return self._slot_weight(v.ad)
        w = v.shape.memo.get("weight")
        if w is None:
            w = v.shape.memo["weight"] = self._slot_weight(v.ad)
        return w

    def _slot_weight(self, ad: classad2.ClassAd) -> float:
        if not self.cfg.use_slot_weights:
            return 1.0
        w = ads.as_number(ads.evaluate(ad.lookup("SlotWeight"), ad)) if "SlotWeight" in ad else None
        if w is None:
            w = ads.as_number(ads.get(ad, "Cpus"))  # HTCondor's default SLOT_WEIGHT
        return w if w is not None and w >= 0 else 1.0

    def _groups_of(self, submitter: str, groups_by_name: dict[str, hgq.Group]) -> list[str]:
        """The accounting groups a submitter's usage counts against (its group and those above)."""
        if not groups_by_name:
            return []
        g = hgq.group_of(submitter, groups_by_name)
        return [hgq.ROOT] if g.name == hgq.ROOT else g.ancestry()

    # ---- groups ----------------------------------------------------------------------
    async def _negotiate_groups(self, tree: tuple[hgq.Group, list[hgq.Group]], submitters: list[classad2.ClassAd],
                                pool_weight: float, min_weight: float, mm: Matchmaker, rec: CycleRecord) -> None:
        """HTCondor's hierarchical group quotas (GroupEntry::hgq_negotiate_with_all_groups)."""
        log = self.log
        gcfg = self.cfg.groups
        root, order = tree
        by_name = {g.name.lower(): g for g in order}
        members: dict[str, list[classad2.ClassAd]] = {g.name: [] for g in order}
        log.info("group quotas: assigning %d submitters to accounting groups", len(submitters))
        for ad in submitters:
            name = str(ads.get(ad, "Name"))
            g = hgq.group_of(name, by_name)
            members[g.name].append(ad)
            demand_keys = ("WeightedIdleJobs", "WeightedRunningJobs") if gcfg.weighted_demand else ("IdleJobs",
                                                                                                   "RunningJobs")
            g.requested += sum(ads.as_number(ads.get(ad, k)) or 0.0 for k in demand_keys)
        if root.autoregroup:
            for g in order[1:]:
                if g.autoregroup and members[g.name]:
                    members[root.name].extend(members[g.name])
                    log.info("group quotas: autoregroup mode: appended %d submitters to group %s negotiation",
                             len(members[g.name]), root.name)
        log.info("group quotas: assigning group quotas from %g available%s slots", pool_weight,
                 " weighted" if self.cfg.use_slot_weights else "")
        hgq.assign_quotas(root, pool_weight, gcfg.allow_oversubscription)
        for g in order:
            g.usage = self.accountant.weighted_used(g.name)
            self.last_quotas[g.name] = g.quota
            log.info("group quotas: group= %s  cquota= %g  static= %d  accept= %d  quota= %g  req= %g  usage= %g",
                     g.name, g.config_quota, int(g.static), int(g.accept_surplus), g.quota, g.requested, g.usage)
        sort_expr = ads.parse_expr(gcfg.sort_expr, "GROUP_SORT_EXPR")
        for round_ in range(1, gcfg.max_rounds + 1):
            log.info("group quotas: allocation round %d", round_)
            for g in order:
                g.allocated = 0.0
            surplus = hgq.fairshare(root)
            if root.autoregroup:
                root.quota = root.allocated = pool_weight
            accept_any = any(g.accept_surplus for g in order[1:])
            maxdelta = max((max(0.0, (g.allocated if accept_any else g.quota) - g.usage) for g in order),
                           default=0.0)
            log.info("group quotas: groups= %d  requesting= %d  allocated= %g  surplus= %g  maxdelta= %g",
                     len(order), sum(1 for g in order if g.requested + g.allocated > 0),
                     sum(g.allocated for g in order), surplus, maxdelta)
            for g in order:
                v = ads.as_number(ads.evaluate(sort_expr, classad2.ClassAd(ads.ad_text(hgq.group_sort_ad(g)))))
                g.sort_key = v if v is not None else 3.4e38
            ranked = sorted(order, key=lambda g: (g is root and root.autoregroup, g.sort_key))
            n = 0.0
            while True:
                n = min(n + gcfg.rr_rate, maxdelta) if maxdelta > 0 else 0.0
                for g in ranked:
                    if g.allocated <= 0:
                        log.info("Group %s - skipping, zero slots allocated", g.name)
                        continue
                    if g.usage >= g.allocated:
                        log.info("Group %s - skipping, at or over quota (quota=%g) (usage=%g) (allocation=%g)",
                                 g.name, g.quota, g.usage, g.allocated)
                        continue
                    if not members[g.name]:
                        log.info("Group %s - skipping, no submitters (usage=%g)", g.name, g.usage)
                        continue
                    log.info("Group %s - BEGIN NEGOTIATION", g.name)
                    target = max(g.allocated, g.quota)
                    delta = max(0.0, target - g.usage)
                    slots = g.usage + delta * (n / maxdelta) if delta > 0 and maxdelta > 0 else target
                    slots = min(slots, target)
                    if not self.cfg.use_slot_weights:
                        slots = math.floor(slots)
                    subtree = {x.name: self.accountant.weighted_used(x.name) for x in order}
                    slots = hgq.strict_enforce(g, slots, subtree)
                    await self._negotiate_group(g, members[g.name], slots, pool_weight, min_weight, mm, rec,
                                                by_name)
                    for x in order:
                        x.usage = self.accountant.weighted_used(x.name)
                if n >= maxdelta or mm.available == 0:
                    break
            usage_total = sum(min(g.usage, g.allocated) for g in order)
            allocated_total = sum(g.allocated for g in order)
            log.info("Round %d totals: allocated= %g  usage= %g", round_, allocated_total, usage_total)
            if usage_total >= allocated_total or mm.available == 0:
                break
            for g in order:
                g.requested = g.usage if g.usage < g.allocated else g.requested + g.allocated

    # ---- within a group: pie spins -------------------------------------------------------
    async def _negotiate_group(self, group: hgq.Group | None, submitters: list[classad2.ClassAd], group_quota: float,
                               pool_weight: float, min_weight: float, mm: Matchmaker, rec: CycleRecord,
                               groups_by_name: dict[str, hgq.Group]) -> None:
        log = self.log
        remaining = [s for s in submitters if (ads.as_number(ads.get(s, "IdleJobs")) or 0) > 0]
        name_of = {str(ads.get(s, "Name")): s for s in remaining}
        group_name = group.name if group is not None else None
        spin = 0
        while remaining and mm.available > 0:
            spin += 1
            group_usage = self.accountant.weighted_used(group_name) if group_name else 0.0
            if group_name is not None and group_usage >= group_quota:
                log.info("Group %s is using its quota %g - halting negotiation", group_name, group_quota)
                break
            slot_weight_total = min(pool_weight, group_quota)
            prios = {n: self.accountant.effective_priority(n, group_name) for n in name_of}
            usage = {n: self.accountant.weighted_used(n) for n in name_of}
            shares = submitter_limits(prios, usage, slot_weight_total,
                                      group_quota if group_name is not None else None, group_usage)
            pie_left = sum(s.limit for s in shares)
            if pie_left <= 0:
                log.info("Halting negotiation: no slots available to match (preemption disabled,pieLeft=%.3f)",
                         pie_left)
                break
            if spin == 1:
                log.info("Phase 3:  Sorting submitter ads by priority ...")
                for s in shares:
                    self.last_limits[s.name] = (s.share, s.limit)
            log.info("Phase 4.%d:  Negotiating with schedds ...", spin)
            pie_before = pie_left
            done: list[str] = []
            for s in shares:
                if mm.available == 0:
                    break
                limit = min(s.limit, pie_left)
                if spin > 1 and (limit < min_weight or pie_left < min_weight):
                    log.info("  Negotiation with %s skipped as pieLeft < minSlotWeight", s.name)
                    continue
                ad = name_of[s.name]
                addr = str(ads.get(ad, "ScheddIpAddr"))
                log.info("  Negotiating with %s at %s\n    SubmitterPrio       = %f\n    submitterShare      = %f\n"
                         "    submitterLimit    = %f\n    submitterUsage    = %f", s.name, addr, s.priority, s.share,
                         limit, s.usage, extra=EACH_LINE_STAMPED)
                rec.order.append(f"{group_name or '<none>'}/{s.name}")
                ancestry = ([hgq.ROOT] if group is not None and group.name == hgq.ROOT else
                            group.ancestry() if group is not None else [])
                if group is not None and group.name == hgq.ROOT and groups_by_name:
                    # an autoregrouped submitter still charges its own group
                    ancestry = self._groups_of(s.name, groups_by_name)
                session = Session(s.name, addr.strip("<>"), group, ancestry, limit)
                try:
                    result = await self._negotiate_with(session, mm, rec)
                except grpc.aio.AioRpcError as e:
                    log.warning("  Negotiation with %s at %s failed: %s", s.name, addr, describe(e))
                    result = "error"
                pie_left -= session.used
                if result == "done":
                    log.info("  Submitter %s got all it wants; removing it.", s.name)
                    done.append(s.name)
                elif result == "error":
                    done.append(s.name)
                else:
                    log.info("  This submitter hit its submitterLimit.")
            for n in done:
                name_of.pop(n, None)
            remaining = list(name_of.values())
            if not (pie_left < pie_before - 1e-9 or done):
                break

    # ---- one submitter -----------------------------------------------------------------------
    def _stream(self, address: str) -> "_ScheddStream":
        """The cycle's Negotiate stream to a schedd: every submitter of that schedd negotiates
        over it in turn (HTCondor keeps its sockets to schedds in a cache the same way). A
        stream is reused while less than a quarter of NEGOTIATOR_TIMEOUT has passed since it
        opened, so a session always has most of the timeout ahead of it."""
        s = self._streams.get(address)
        if s is not None and time.monotonic() - s.opened < self.cfg.timeout_s / 4:
            return s
        if s is not None:
            self._streams.pop(address)
            self._closing.append(asyncio.ensure_future(s.close()))
        stub = schedd_pb2_grpc.ScheddStub(self.channels.get(address))
        s = self._streams[address] = _ScheddStream(stub.Negotiate(timeout=self.cfg.timeout_s), time.monotonic())
        return s

    async def _close_streams(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Shutting down: no goodbyes to schedds that may not answer.
            for f in self._closing:
                f.cancel()
            for st in streams:
                st.call.cancel()
            self._closing = []
            return
        closing, self._closing = self._closing + [asyncio.ensure_future(st.close()) for st in streams], []
        if closing:
            await asyncio.gather(*closing, return_exceptions=True)

    async def _negotiate_with(self, session: Session, mm: Matchmaker, rec: CycleRecord) -> str:
        """"done" (it has nothing more), "resume" (stopped at its limit) or raises on error."""
        stream = self._stream(session.address)
        call = stream.call
        out = _Outgoing(self.log)
        rejected: set[int] = set()   # autoclusters rejected in this session: skip the rest of them
        stopped = False
        failed = True
        try:
            await call.write(schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(
                submitter=session.name, cycle=rec.cycle, pool_time=rec.start,
                significant_attrs=self.significant_attrs, job_constraint=self.cfg.job_constraint)))
            while not stopped:
                # What the last batch decided goes first: the schedd then leaves the
                # rejected autoclusters out of the next batch.
                await out.flush(call)
                await call.write(schedd_pb2.NegotiatorMessage(
                    send_requests=schedd_pb2.SendRequests(max_requests=self.cfg.request_list_size)))
                reply = await call.read()
                if reply is grpc.aio.EOF or reply.WhichOneof("msg") != "requests":
                    break
                batch = reply.requests
                for req in batch.requests:
                    if mm.available == 0:
                        stopped = True
                        break
                    if session.used >= session.limit:
                        out.lines.append(f"    Reached submitter resource limit: {session.used:f} ... stopping")
                        session.limited = stopped = True
                        break
                    rec.requests += 1
                    self._serve_request(out, req, session, mm, rec, rejected)
                if batch.no_more or not batch.requests:
                    if not batch.requests:
                        out.lines.append("  Got NO_MORE_JOBS;  schedd has no more requests")
                    break
            failed = False
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
            # A broken stream is no one's next session: the next submitter of that schedd opens another.
            if self._streams.get(session.address) is stream:
                self._streams.pop(session.address)
            stream.call.cancel()
            if isinstance(e, asyncio.InvalidStateError):
                # Written to or read after the call had ended (it failed before or while we
                # wrote): that is the stream's RPC error, this session's failure alone.
                raise await _ended_call_error(call) from None
            raise
        finally:
            try:
                if not stream.call.done():
                    await out.flush(call)   # decided matches reach the schedd even if something failed
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass
            out.flush_log()
            if failed and self._streams.get(session.address) is stream:
                self._streams.pop(session.address)
                self._closing.append(asyncio.ensure_future(stream.close()))
        return "resume" if session.limited else "done"

    def _serve_request(self, out: "_Outgoing", req: schedd_pb2.ResourceRequest, session: Session, mm: Matchmaker,
                       rec: CycleRecord, rejected: set[int]) -> None:
        """Match one resource request as often as it asks; the outcomes go to `out`, in order."""
        ad = ads.parse_ad(req.ad.text, f"resource request {req.request_id}")
        cluster, proc = ads.get(ad, "ClusterId", 0), ads.get(ad, "ProcId", 0)
        ac = ads.get(ad, "AutoClusterId", -1)
        self._cycle_autoclusters.add(ac)
        if ac in rejected:
            return  # a later request of an autocluster that already failed this cycle
        limits = ads.get(ad, "ConcurrencyLimits")
        limits = limits if isinstance(limits, str) else ""
        count = max(1, req.count)
        lines = out.lines
        job = f"{int(cluster):05d}.{int(proc):05d}"
        who = f"{cluster}.{proc} {session.name} <{session.address}>"
        i = 0
        while i < count:
            rec.considered += 1
            exceeded = self.accountant.limits_exceeded(limits) if limits else []
            found: list[Match] = []
            reason = ""
            if exceeded:
                reason = f"concurrency limit {', '.join(exceeded)} reached"
            elif session.used >= session.limit:
                reason = "submitter limit exceeded"
            elif limits or self.cfg.depth_first:
                # Each match moves a limit counter or the depth-first count: one at a time.
                result = mm.match(ad, session.used, session.limit)
                if isinstance(result, Match):
                    found = [result]
                else:
                    reason = result.reason
            else:
                # One evaluation of the slot groups serves the rest of the request.
                found, rejection = mm.match_many(ad, count - i, session.used, session.limit)
                reason = rejection.reason if rejection is not None else ""
                rec.considered += max(0, len(found) - 1)
            for result in found:
                lines.append(f"    Request {job}:  autocluster {ac} (request count {i + 1} of {count})")
                rec.matches += 1
                session.matches += 1
                session.used += result.cost
                self.accountant.add_match(session.name, session.ancestry, result.cost, limits)
                lines.append(f"      Matched {who} preempting none {result.startd_address} {result.slot_name}")
                lines.append(f"      Successfully matched with {result.slot_name}")
                out.match(req.request_id, result)
                i += 1
                if self.cfg.depth_first and not result.consumed and result.jobs_in_slot > 1:
                    # The schedd packs this many more of the autocluster into the p-slot's leftovers.
                    i += result.jobs_in_slot - 1
            if found and mm.available == 0:
                return
            if reason:
                if not found:
                    lines.append(f"    Request {job}:  autocluster {ac} (request count {i + 1} of {count})")
                rec.rejections += 1
                if reason == "submitter limit exceeded":
                    session.limited = True
                lines.append(f"      Rejected {who}: {reason}")
                out.reject(req.request_id, reason)
                if isinstance(ac, int) and ac >= 0:
                    rejected.add(ac)
                return

    @staticmethod
    def _parse_slot(text: str) -> classad2.ClassAd:
        return ads.parse_ad(text, "slot ad")

    # ---- userprio -------------------------------------------------------------------------------
    def userprio(self, all_users: bool = False) -> tuple[float, list[dict[str, Any]]]:
        now = self.clock.now()
        out = []
        for c in self.accountant.customers.values():
            if not all_users and not c.is_group and c.weighted_used == 0 and c.last_usage_time < now - 86400 \
                    and c.factor is None:
                continue
            share, limit = self.last_limits.get(c.name, (0.0, 0.0))
            out.append({"name": c.name, "effective_priority": self.accountant.effective_priority(c.name),
                        "real_priority": self.accountant.real_priority(c.name),
                        "priority_factor": self.accountant.factor(c.name),
                        "weighted_in_use": c.weighted_used, "accumulated_usage_hours": c.accumulated_usage / 3600.0,
                        "begin_usage_time": c.begin_usage_time, "last_usage_time": c.last_usage_time,
                        "is_group": c.is_group, "quota": self.last_quotas.get(c.name, 0.0),
                        "submitter_limit": limit, "submitter_share": share})
        out.sort(key=lambda e: (e["is_group"], e["effective_priority"], e["name"]))
        return self.accountant.last_update or now, out

    def set_userprio(self, name: str, factor: float, priority: float) -> dict[str, Any]:
        if factor:
            f = self.accountant.set_factor(name, factor)
            self.log.info("Setting the priority factor of %s to %f", name, f)
        if priority:
            p = self.accountant.set_priority(name, priority)
            self.log.info("Setting the priority of %s to %f", name, p)
        return next(e for e in self.userprio(all_users=True)[1] if e["name"] == name)

    # ---- ads and status ------------------------------------------------------------------------
    def own_ads(self) -> list[dict[str, Any]]:
        ad = self.base_ad()
        last = self.history[-1] if self.history else None
        if last is not None:
            ad.update({"LastNegotiationCycleTime0": int(last.start), "LastNegotiationCycleEnd0": int(last.end),
                       "LastNegotiationCycleDuration0": int(round(last.duration)),
                       "LastNegotiationCycleMatches0": last.matches,
                       "LastNegotiationCycleRejectedJobs0": last.rejections,
                       "LastNegotiationCycleNumSchedulers0": last.submitters,
                       "LastNegotiationCycleCandidateSlots0": last.slots})
        ad["NegotiationCycles"] = self.cycle_count
        return [ad]

    def status(self) -> dict[str, Any]:
        s = self.base_status()
        c = self.cfg.cadence
        s.update({"cycles": self.cycle_count, "interval_s": c.interval_s, "min_interval_s": c.min_interval_s,
                  "cycle_delay_s": c.cycle_delay_s,
                  "cycle_history": [asdict(r) for r in list(self.history)[-200:]],
                  "configuration_problems": list(self.cfg.problems),
                  "users": self.userprio(all_users=True)[1]})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        last = self.history[-1] if self.history else None
        m.update({"cycles_total": float(self.cycle_count),
                  "matches_total": float(sum(r.matches for r in self.history)),
                  "last_cycle_duration_seconds": last.duration if last else 0.0,
                  "last_cycle_wall_seconds": last.wall_duration if last else 0.0,
                  "last_cycle_matches": float(last.matches) if last else 0.0,
                  "user_effective_priority": {(("user", c.name),): self.accountant.effective_priority(c.name)
                                              for c in self.accountant.customers.values()},
                  "user_weighted_in_use": {(("user", c.name),): c.weighted_used
                                           for c in self.accountant.customers.values()}})
        return m


class _NegotiatorService(negotiator_pb2_grpc.NegotiatorServicer):
    def __init__(self, daemon: NegotiatorDaemon) -> None:
        self.d = daemon

    async def Reschedule(self, request: common_pb2.Empty, context) -> negotiator_pb2.RescheduleReply:
        return negotiator_pb2.RescheduleReply(next_cycle=self.d.reschedule())

    async def CycleHistory(self, request: negotiator_pb2.CycleHistoryRequest,
                           context) -> negotiator_pb2.CycleHistoryReply:
        records = list(self.d.history)
        if request.last > 0:
            records = records[-request.last:]
        return negotiator_pb2.CycleHistoryReply(cycles=[
            negotiator_pb2.CycleRecord(cycle=r.cycle, start=r.start, end=r.end, matches=r.matches,
                                       rejections=r.rejections, duration=r.duration,
                                       wall_duration=r.wall_duration, slots=r.slots,
                                       submitters=r.submitters, rescheduled=r.rescheduled,
                                       requests=r.requests, considered=r.considered, significant=r.significant,
                                       pool_weight=r.pool_weight, cpu_duration=r.cpu_duration,
                                       slot_groups=r.slot_groups, autoclusters=r.autoclusters, phases=r.phases,
                                       evaluations=r.evaluations)
            for r in records])

    async def UserPrio(self, request: negotiator_pb2.UserPrioRequest, context) -> negotiator_pb2.UserPrioReply:
        last, entries = self.d.userprio(request.all_users)
        return negotiator_pb2.UserPrioReply(last_update=last,
                                            entries=[negotiator_pb2.UserPrioEntry(**e) for e in entries])

    async def SetUserPrio(self, request: negotiator_pb2.SetUserPrioRequest, context) -> negotiator_pb2.UserPrioEntry:
        if not request.name.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name a submitter (user@domain) or a group")
        if request.factor < 0 or request.priority < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a priority or factor must not be negative")
        if not request.factor and not request.priority:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "give a factor or a priority to set")
        entry = self.d.set_userprio(request.name, request.factor, request.priority)
        await self.d._save_accountant()
        return negotiator_pb2.UserPrioEntry(**entry)


async def _ended_call_error(call) -> grpc.aio.AioRpcError:
    """The status a finished call ended with, as the error its reads and writes stand for."""
    try:
        code, details = await call.code(), await call.details()
    except Exception:
        code, details = grpc.StatusCode.UNKNOWN, ""
    if code == grpc.StatusCode.OK:
        code, details = grpc.StatusCode.CANCELLED, "the stream ended"
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details or "RPC already finished")
