"""The negotiator daemon: negotiation cycles on HTCondor's cadence.

Each cycle: slot and submitter ads from the collector (Phase 1), then for each
submitter a negotiation session with its schedd over a bidirectional stream: the
schedd sends resource requests in batches of NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE,
the negotiator answers each with matches (claim id + slot ad) or a rejection.
The log uses HTCondor's NegotiatorLog wording so runs can be compared line by line.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import classad2
import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.config import Param
from daemons.core.daemon import Daemon
from daemons.core.rpc import describe
from daemons.negotiator.cadence import Cadence
from daemons.negotiator.matchmaker import Match, Matchmaker, MatchPolicy, SlotCache
from daemons.negotiator.significant import SignificantAttributes
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
    job_constraint: str = ""              # NEGOTIATOR_JOB_CONSTRAINT

    @classmethod
    def from_param(cls, p: Param) -> "NegotiatorConfig":
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
    evaluations: int = 0     # request-against-slot-group evaluations
    requests: int = 0        # resource request ads received from schedds
    considered: int = 0      # request ads evaluated against the pool (matches + rejections)
    significant: int = 0     # significant attributes sent to schedds


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
        # Parsed slot ads by their text: an ad that did not change is not parsed again.
        self._parsed: dict[str, classad2.ClassAd] = {}
        self._slot_cache = SlotCache()

    def default_name(self) -> str:
        return self.common.full_hostname

    def add_services(self, server: grpc.aio.Server) -> None:
        negotiator_pb2_grpc.add_NegotiatorServicer_to_server(_NegotiatorService(self), server)

    async def on_start(self) -> None:
        c = self.cfg.cadence
        self.log.info("NEGOTIATOR_INTERVAL %.0f s, NEGOTIATOR_MIN_INTERVAL %.0f s, NEGOTIATOR_CYCLE_DELAY %.0f s",
                      c.interval_s, c.min_interval_s, c.cycle_delay_s)
        self._loop_task = asyncio.create_task(self._cycle_loop(), name="negotiator:cycles")

    async def on_close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except (asyncio.CancelledError, Exception):
                pass

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
        wall0 = time.perf_counter()
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
        self.history.append(rec)
        log.info("---------- Finished Negotiation Cycle ----------")
        log.info("Cycle %d: %d match(es), %d rejection(s), %d slot(s), %d submitter(s), %.3f s (%.3f s wall)",
                 rec.cycle, rec.matches, rec.rejections, rec.slots, rec.submitters, rec.duration, rec.wall_duration)
        self.trigger("advertise")
        return rec

    async def _negotiate(self, rec: CycleRecord) -> None:
        assert self.collector is not None
        log = self.log
        log.info("Phase 1:  Obtaining ads from collector ...")
        slot_texts, submitter_texts = await asyncio.gather(
            self.collector.query("Machine", include_private=True, give_up_after_s=5.0),
            self.collector.query("Submitter", give_up_after_s=5.0))
        slot_ads = [self._parse_slot(t) for t in slot_texts]
        if len(self._parsed) > 2 * len(slot_texts) + 100:
            current = set(slot_texts)
            self._parsed = {t: a for t, a in self._parsed.items() if t in current}
        submitters = []
        for t in submitter_texts:
            ad = ads.parse_ad(t, "submitter ad")
            name, schedd, addr = (ads.get(ad, a) for a in ("Name", "ScheddName", "ScheddIpAddr"))
            if not all(isinstance(v, str) and v for v in (name, schedd, addr)):
                log.info("  Error!  Could not get Name, ScheddName and ScheddIpAddr from a submitter ad; ignored")
                continue
            submitters.append(ad)
        rec.slots, rec.submitters = len(slot_ads), len(submitters)
        log.info("Got ads: %d public and %d private", len(slot_texts) + len(submitter_texts), len(slot_texts))
        log.info("Public ads include %d submitter, %d startd", len(submitters), len(slot_ads))
        log.info("Phase 2:  Performing accounting ...")
        sig = self.significant.compute(list(zip(slot_ads, slot_texts)), self.cfg.policy_exprs(),
                                       self.cfg.job_constraint)
        if sig != self.significant_attrs:
            log.info("Significant attributes: %s", ",".join(sig))
            self.significant_attrs = sig
        rec.significant = len(sig)
        log.info("Phase 3:  Sorting submitter ads by priority ...")
        submitters.sort(key=lambda a: str(ads.get(a, "Name")))
        mm = Matchmaker.from_ads(slot_ads, self.cfg.policy, rec.start, slot_texts, self._slot_cache)
        rec.slot_groups = len(mm.groups)
        log.info("Phase 4.1:  Negotiating with schedds ...  (%d candidate slots in %d groups)", mm.available,
                 len(mm.groups))
        for sub in submitters:
            name = str(ads.get(sub, "Name"))
            addr = str(ads.get(sub, "ScheddIpAddr"))
            if (ads.as_number(ads.get(sub, "IdleJobs")) or 0) <= 0:
                continue
            if mm.available == 0:
                log.info("Halting negotiation: no slots available to match (preemption disabled)")
                break
            log.info("  Negotiating with %s at %s", name, addr)
            try:
                await self._negotiate_with(name, addr.strip("<>"), mm, rec)
            except grpc.aio.AioRpcError as e:
                log.warning("  Negotiation with %s at %s failed: %s", name, addr, describe(e))

    async def _negotiate_with(self, submitter: str, address: str, mm: Matchmaker, rec: CycleRecord) -> None:
        stub = schedd_pb2_grpc.ScheddStub(self.channels.get(address))
        call = stub.Negotiate(timeout=self.cfg.timeout_s)
        log = self.log
        await call.write(schedd_pb2.NegotiatorMessage(start=schedd_pb2.NegotiateStart(
            submitter=submitter, cycle=rec.cycle, pool_time=rec.start, significant_attrs=self.significant_attrs)))
        rejected: set[int] = set()   # autoclusters rejected in this session: skip the rest of them
        try:
            while True:
                await call.write(schedd_pb2.NegotiatorMessage(
                    send_requests=schedd_pb2.SendRequests(max_requests=self.cfg.request_list_size)))
                reply = await call.read()
                if reply is grpc.aio.EOF or reply.WhichOneof("msg") != "requests":
                    break
                batch = reply.requests
                for req in batch.requests:
                    if mm.available == 0:
                        break
                    rec.requests += 1
                    await self._serve_request(call, req, submitter, address, mm, rec, rejected)
                if batch.no_more or not batch.requests or mm.available == 0:
                    if not batch.requests:
                        log.info("  Got NO_MORE_JOBS;  schedd has no more requests")
                    break
        finally:
            try:
                await call.write(schedd_pb2.NegotiatorMessage(end=schedd_pb2.NegotiateEnd()))
                await call.done_writing()
                while await call.read() is not grpc.aio.EOF:
                    pass
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass

    async def _serve_request(self, call, req: schedd_pb2.ResourceRequest, submitter: str, address: str,
                             mm: Matchmaker, rec: CycleRecord, rejected: set[int]) -> None:
        log = self.log
        ad = ads.parse_ad(req.ad.text, f"resource request {req.request_id}")
        cluster, proc = ads.get(ad, "ClusterId", 0), ads.get(ad, "ProcId", 0)
        ac = ads.get(ad, "AutoClusterId", -1)
        if ac in rejected:
            return  # a later request of an autocluster that already failed this cycle
        count = max(1, req.count)
        for i in range(count):
            log.info("    Request %05d.%05d:  autocluster %s (request count %d of %d)",
                     int(cluster), int(proc), ac, i + 1, count)
            rec.considered += 1
            result = mm.match(ad)
            if isinstance(result, Match):
                rec.matches += 1
                log.info("      Matched %s.%s %s <%s> preempting none %s %s", cluster, proc, submitter, address,
                         result.startd_address, result.slot_name)
                log.info("      Successfully matched with %s", result.slot_name)
                await call.write(schedd_pb2.NegotiatorMessage(match=schedd_pb2.MatchFound(
                    request_id=req.request_id, claim_id=result.claim_id,
                    slot_ad=common_pb2.ClassAd(text=result.slot_ad_text))))
            else:
                rec.rejections += 1
                log.info("      Rejected %s.%s %s <%s>: %s", cluster, proc, submitter, address, result.reason)
                await call.write(schedd_pb2.NegotiatorMessage(reject=schedd_pb2.RequestRejected(
                    request_id=req.request_id, reason=result.reason)))
                if isinstance(ac, int) and ac >= 0:
                    rejected.add(ac)
                return
            if mm.available == 0:
                return

    def _parse_slot(self, text: str) -> classad2.ClassAd:
        ad = self._parsed.get(text)
        if ad is None:
            ad = ads.parse_ad(text, "slot ad")
            self._parsed[text] = ad
        return ad

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
                  "cycle_history": [asdict(r) for r in list(self.history)[-200:]]})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        last = self.history[-1] if self.history else None
        m.update({"cycles_total": float(self.cycle_count),
                  "matches_total": float(sum(r.matches for r in self.history)),
                  "last_cycle_duration_seconds": last.duration if last else 0.0,
                  "last_cycle_wall_seconds": last.wall_duration if last else 0.0,
                  "last_cycle_matches": float(last.matches) if last else 0.0})
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
                                       requests=r.requests, considered=r.considered, significant=r.significant)
            for r in records])
