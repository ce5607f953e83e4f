"""The negotiator daemon: negotiation cycles on HTCondor's cadence, with fair share and preemption.

A cycle (matchmaker.cpp negotiationTime):
- Phase 1: slot ads (NEGOTIATOR_SLOT_CONSTRAINT) and submitter ads from the collector;
- Phase 2: accounting (accounting.py): priorities age, usage is rebuilt from the claimed
  slots, the pool's summed slot weight is the pie; significant attributes;
- Phase 3/4: the cycle's decisions (cycle.py: group order, shares, pie spins,
  matches, rejections, preemptions), each submitter a session with its schedd over a
  bidirectional stream. This module is the wiring: queries, streams, logs, the
  accountant's persistence and the gRPC service.
A schedd that fails or sends something malformed costs only its own session, which is
logged; the rest of the pool negotiates. The log uses HTCondor's NegotiatorLog wording
so runs can be compared line by line.
"""
from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.daemon import Daemon, cancel_and_wait
from daemons.core.log import EACH_LINE_STAMPED
from daemons.core.rpc import describe
from daemons.negotiator.accountant import Accountant
from daemons.negotiator.accounting import account
from daemons.negotiator.config import NegotiatorConfig
from daemons.negotiator.cycle import Cycle, Submitter
from daemons.negotiator.matchmaker import Matchmaker, SlotCache
from daemons.negotiator.preemption import Preemption
from daemons.negotiator.significant import SignificantAttributes
from daemons.negotiator.slotads import SlotView
from daemons.negotiator.sessions import SessionsMixin
from daemons.pb.htcpool import negotiator_pb2_grpc

__all__ = ["CycleRecord", "NegotiatorConfig", "NegotiatorDaemon"]

_SAVE_LOCK = threading.Lock()


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
    preemptions: int = 0       # matches that preempt a claim
    failed: list[str] = field(default_factory=list)   # submitters whose session failed (and why)
    prefetched: int = 0        # submitters whose first requests came in the prefetch
    reschedule_wait: float = 0.0   # wall s from the Reschedule that called the cycle to its start
    prefetched_resumed: int = 0    # later sessions begun with requests asked for as the previous one ended
    stream_messages: int = 0       # messages written to the schedds' Negotiate streams
    stream_writes: int = 0         # the writes that carried them (what waited went as one bundle)


class _Phases:
    """Records the wall time since the previous call under a phase's name."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.into[name] = round(self.into.get(name, 0.0) + now - self.t, 6)
        self.t = now

    def move(self, name: str, seconds: float) -> None:
        """Count `seconds` just spent under `name` (an earlier phase), not the current one."""
        self.into[name] = round(self.into.get(name, 0.0) + seconds, 6)
        self.t += seconds


class NegotiatorDaemon(SessionsMixin, Daemon):
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
        self._preemption = Preemption(cfg.preemption)
        self._rescheduled_at: float | None = None        # perf_counter() of a Reschedule not yet served
        self.init_sessions()

    def default_name(self) -> str:
        return self.common.full_hostname

    def add_services(self, server: grpc.aio.Server) -> None:
        from daemons.negotiator.service import NegotiatorService
        negotiator_pb2_grpc.add_NegotiatorServicer_to_server(NegotiatorService(self), server)

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
        # One writer at a time across threads too: a save cancelled while its thread still
        # writes releases the asyncio lock, and shutdown's save must not share the .tmp file.
        with _SAVE_LOCK:
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
        self.log.info("NEGOTIATOR_CONSIDER_PREEMPTION = %s, PREEMPTION_REQUIREMENTS = %s, PREEMPTION_RANK = %s",
                      self.cfg.consider_preemption, self.cfg.preemption_requirements or "None",
                      self.cfg.preemption_rank or "None")
        if self.cfg.groups.enabled:
            self.log.info("group quotas: %s", ", ".join(
                f"{g.name} ({'static ' if g.static else 'dynamic '}{g.config_quota:g}"
                f"{', accept surplus' if g.accept_surplus else ''}{', autoregroup' if g.autoregroup else ''})"
                for g in self.cfg.groups.groups))
        self._loop_task = self.spawn(self._cycle_loop(), "negotiator:cycles")

    async def on_close(self) -> None:
        if self._loop_task is not None:
            await cancel_and_wait(self._loop_task)
        await self._save_accountant()

    def reschedule(self) -> int:
        if self._rescheduled_at is None:
            self._rescheduled_at = time.perf_counter()
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
        if self._rescheduled_at is not None:
            rec.reschedule_wait = max(0.0, wall0 - self._rescheduled_at)
            self._rescheduled_at = None
        self._cycle_autoclusters = set()
        log = self.log
        log.info("---------- Started Negotiation Cycle ----------")
        # No cyclic garbage collection during the cycle: it allocates slot views, candidates
        # and outcomes by the hundred thousand, freed by reference counting as it ends, and
        # each full collection meanwhile walked all of them (at 50,000 slots, five took 0.2 s
        # of a 5 s cycle). What cyclic garbage a cycle leaves waits for the next collection.
        collecting = gc.isenabled()
        gc.disable()
        try:
            await self._negotiate(rec)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            rec.error = describe(e)
            if isinstance(e, grpc.aio.AioRpcError):
                log.warning("Aborting negotiation cycle: %s", rec.error)
            else:
                self.note_error("negotiation cycle", e, f"Aborting negotiation cycle: {rec.error}")
        finally:
            if collecting:
                gc.enable()
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
        # One cheap pass per slot ad, as the answer's chunks arrive (the collector prints the
        # next chunk meanwhile): the ClassAd library parses an ad only when it is evaluated.
        # The "query" phase includes that pass.
        views, submitter_texts = await asyncio.gather(
            self.collector.query("Machine", constraint=self.cfg.slot_constraint, include_private=True,
                                 give_up_after_s=5.0, each=self._view_slot),
            self.collector.query("Submitter", give_up_after_s=5.0))
        phase("query")
        # The views of ads gone from the pool go now, every cycle: grouping the slots would
        # (Matchmaker.from_views), but a cycle with no request does not group them, and
        # forty such cycles in a row kept every one of their texts' views (bench throughput:
        # the negotiator's peak RSS 117 -> 180 MB).
        self._slot_cache.trim(views)
        submitters = self._submitters(submitter_texts)
        rec.slots, rec.submitters = len(views), len(submitters)
        log.info("Got ads: %d public and %d private", len(views) + len(submitter_texts), len(views))
        log.info("Public ads include %d submitter, %d startd", len(submitters), len(views))
        phase("parse")

        log.info("Phase 2:  Performing accounting ...")
        for problem in self.cfg.problems:
            log.error("configuration: %s", problem)
        cycle = Cycle(self.cfg.cycle_policy, self.accountant, None, submitters, 0.0, 1.0)
        cycle.pool_weight, cycle.min_weight = account(views, self.accountant, rec.start, cycle.ancestry_of,
                                                      self.cfg.use_slot_weights)
        rec.pool_weight = cycle.pool_weight
        phase("accounting")
        sig = self.significant.compute_views(views, self.cfg.policy_exprs(), self.cfg.job_constraint)
        if sig != self.significant_attrs:
            log.info("Significant attributes: %s", ",".join(sig))
            self.significant_attrs = sig
        rec.significant = len(sig)
        phase("significant")
        phase("group")

        def group() -> Matchmaker:
            # When the first request is served (Cycle.matchmaker_later). Its time is the
            # "group" phase's, not the session's it falls in.
            t0 = time.perf_counter()
            mm = Matchmaker.from_views(views, self.cfg.policy, rec.start, self._slot_cache,
                                       use_slot_weights=self.cfg.use_slot_weights, preemption=self._preemption,
                                       remote_attrs=cycle.remote_attrs, significant=sig,
                                       inserted_refs=self.significant.inserted_refs)
            mm.count_jobs_in_slot = self.cfg.depth_first
            rec.slot_groups = len(mm.groups)
            phase.move("group", time.perf_counter() - t0)
            return mm
        cycle.matchmaker_later(group)
        watchers: list[asyncio.Future] = []
        try:
            self._rec = rec
            if self.cfg.prefetch_requests:
                watchers = self._prefetch(cycle, rec)
            phase("prefetch")
            await self._run(cycle, rec)
        finally:
            cycle.end()
            self._prefetched, self._resumed = {}, set()
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                for w in watchers:
                    w.cancel()
            await self._close_streams()
            # Closing read every answer still due, so the watchers have their figures.
            await asyncio.gather(*watchers, return_exceptions=True)
            self._rec = None
            self.last_limits, self.last_quotas = cycle.last_limits, cycle.last_quotas
            c = cycle.counts
            rec.matches, rec.rejections, rec.requests, rec.considered = c.matches, c.rejections, c.requests, \
                c.considered
            rec.preemptions, rec.order = c.preemptions, c.order
            self._cycle_autoclusters = c.autoclusters
        phase("negotiate")
        mm = cycle.built_mm
        if mm is not None:
            rec.evaluations = mm.evaluations
            for slot, problem in mm.errors.items():
                log.error("slot %s: %s", slot, problem)

    def _submitters(self, texts: list[str]) -> list[Submitter]:
        out = []
        for t in texts:
            try:
                ad = ads.parse_ad(t, "submitter ad")
            except ads.AdError as e:
                self.log.warning("  Error!  A submitter ad does not parse (%s); ignored", e)
                continue
            name, schedd, addr = (ads.get(ad, a) for a in ("Name", "ScheddName", "ScheddIpAddr"))
            if not all(isinstance(v, str) and v for v in (name, schedd, addr)):
                self.log.info("  Error!  Could not get Name, ScheddName and ScheddIpAddr from a submitter ad; "
                              "ignored")
                continue

            def num(k: str) -> float:
                v = ads.as_number(ads.get(ad, k))
                return v if v is not None and math.isfinite(v) else 0.0
            out.append(Submitter(str(name), str(addr).strip("<>"), num("IdleJobs"), num("RunningJobs"),
                                 num("WeightedIdleJobs"), num("WeightedRunningJobs")))
        return out

    async def _run(self, cycle: Cycle, rec: CycleRecord) -> None:
        """Drive the cycle's decisions: each session it asks for is negotiated with its schedd."""
        sessions = cycle.sessions()
        try:
            session = next(sessions)
            while True:
                self._log_lines(cycle.lines)
                result = await self._negotiate_with(session, rec)
                session = sessions.send(result)
        except StopIteration:
            pass
        finally:
            self._log_lines(cycle.lines)

    def _log_lines(self, lines: list[str]) -> None:
        if lines:
            self.log.info("%s", "\n".join(lines), extra=EACH_LINE_STAMPED)
            lines.clear()

    @staticmethod
    def _parse_slot(text: str):
        return ads.parse_ad(text, "slot ad")

    def _view_slot(self, text: str) -> SlotView:
        return self._slot_cache.view(text, parse=self._parse_slot)

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
