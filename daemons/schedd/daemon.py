"""The schedd daemon: job queue, negotiation answers, claims and job lifecycles.

Flow of a job: Submit commits it Idle. In a negotiation the negotiator matches a
request to a slot; the schedd claims the slot at its startd (a p-slot yields a
dynamic slot, and maybe leftovers it claims at once for more jobs of the same
submitter), activates the job and commits it Running. The startd reports the exit;
the schedd commits it Completed, moves it to the history, and runs another job on
the claim while CLAIM_WORKLIFE allows, else releases the claim.
"""
from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.config import ConfigError, Param
from daemons.core.daemon import Daemon
from daemons.core.rpc import describe
from daemons.pb.htcpool import common_pb2, negotiator_pb2_grpc, schedd_pb2, schedd_pb2_grpc, startd_pb2, startd_pb2_grpc
from daemons.schedd import scheduling, txlog
from daemons.schedd.autocluster import (IDENTIFIER, AutoclusterConfig, Autoclusterer, AutoclusterStats,
                                        check_names, parse_rounding)
from daemons.schedd.jobqueue import Job, JobQueue
from daemons.schedd.scheduling import Request, ScheddClaim
from daemons.schedd.submit import (COMPLETED, HELD, IDLE, REMOVED, RUNNING, SubmitContext, SubmitError,
                                   build_jobs, parse_submit)

RPC_TIMEOUT_S = 10.0
PROTECTED_ATTRS = {"clusterid", "procid", "mytype", "targettype", "jobstatus", "globaljobid"}


@dataclass(frozen=True)
class ScheddConfig:
    claim_worklife_s: float = 1200.0          # CLAIM_WORKLIFE
    alive_interval_s: float = 300.0           # ALIVE_INTERVAL
    max_claim_alives_missed: int = 6          # MAX_CLAIM_ALIVES_MISSED
    job_queue_log: Path = Path("job_queue.log")
    history_file: Path = Path("history")
    arch: str = "X86_64"
    opsys: str = "LINUX"
    default_request_memory: str = "128"
    default_request_disk: str = "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"
    default_request_cpus: str = "1"
    autocluster: AutoclusterConfig = field(default_factory=AutoclusterConfig)
    min_interval_s: float = 5.0               # SCHEDD_MIN_INTERVAL
    max_pending_startd_contacts: int = 0      # MAX_PENDING_STARTD_CONTACTS (0: no limit)

    @property
    def claim_lease_s(self) -> float:
        return self.alive_interval_s * self.max_claim_alives_missed

    @classmethod
    def from_param(cls, p: Param, spool: Path) -> "ScheddConfig":
        return cls(
            claim_worklife_s=float(p.int("CLAIM_WORKLIFE", 1200)),  # 0 is meaningful: one job per claim
            alive_interval_s=float(p.int("ALIVE_INTERVAL", 300, minimum=1) or 300),
            max_claim_alives_missed=p.int("MAX_CLAIM_ALIVES_MISSED", 6, minimum=1) or 6,
            job_queue_log=Path(p.str("JOB_QUEUE_LOG") or spool / "job_queue.log"),
            history_file=Path(p.str("HISTORY") or spool / "history"),
            arch=p.str("ARCH", "X86_64") or "X86_64",
            opsys=p.str("OPSYS", "LINUX") or "LINUX",
            default_request_memory=p.expr("JOB_DEFAULT_REQUESTMEMORY", "128") or "128",
            default_request_disk=p.expr("JOB_DEFAULT_REQUESTDISK", cls.default_request_disk) or cls.default_request_disk,
            default_request_cpus=p.expr("JOB_DEFAULT_REQUESTCPUS", "1") or "1",
            autocluster=read_autocluster_config(p),
            min_interval_s=float(p.int("SCHEDD_MIN_INTERVAL", 5, minimum=0) or 0),
            max_pending_startd_contacts=p.int("MAX_PENDING_STARTD_CONTACTS", 0, minimum=0) or 0,
        )


def read_autocluster_config(p: Param) -> AutoclusterConfig:
    def names(knob: str) -> tuple[str, ...]:
        try:
            return check_names(knob, p.list(knob))
        except ValueError as e:
            raise ConfigError(f"{p.where(knob)}: {e}") from None

    rounding = []
    for knob in p.with_prefix("SCHEDD_ROUND_ATTR_"):
        attr = knob[len("SCHEDD_ROUND_ATTR_"):]
        text = p.str(knob)
        if not text:
            continue
        if not IDENTIFIER.match(attr):
            raise ConfigError(f"{p.where(knob)}: {knob}: {attr!r} is not a ClassAd attribute name")
        try:
            rule = parse_rounding(attr, text)
        except ValueError as e:
            raise ConfigError(f"{p.where(knob)}: {knob} = {text!r}: {e}") from None
        if rule is not None:
            rounding.append(rule)
    return AutoclusterConfig(
        enabled=bool(p.bool("SCHEDD_AUTOCLUSTERING", True)),
        significant=names("SIGNIFICANT_ATTRIBUTES") if p.is_set("SIGNIFICANT_ATTRIBUTES") else None,
        add=names("ADD_SIGNIFICANT_ATTRIBUTES"),
        remove=names("REMOVE_SIGNIFICANT_ATTRIBUTES"),
        rounding=tuple(rounding),
    )


class ActError(ValueError):
    pass


@dataclass
class NegotiationSession:
    submitter: str
    cycle: int
    requests: list[Request]
    position: int = 0
    matches: int = 0
    rejections: int = 0
    by_id: dict[str, Request] = field(default_factory=dict)
    rejected: set[int] = field(default_factory=set)   # autoclusters skipped for the rest of the cycle

    def __post_init__(self) -> None:
        self.by_id = {r.request_id: r for r in self.requests}


def _strip_addr(text: str) -> str:
    return text.strip().strip("<>").split("?", 1)[0]


def _quote(s: str) -> str:
    return ads.literal(s)


class ScheddDaemon(Daemon):
    role = "schedd"
    my_type = "Scheduler"

    def __init__(self, common: CommonConfig, cfg: ScheddConfig, clock: PoolClock | None = None) -> None:
        super().__init__(common, clock)
        self.cfg = cfg
        self.queue = JobQueue(common.uid_domain, cfg.autocluster.rounding)
        self.ac = Autoclusterer(cfg.autocluster, canon=self.queue.canonical)
        self.ac_stats = AutoclusterStats()
        # Beyond HTCondor: a rejection's reason belongs to the whole autocluster.
        self.ac_rejections: dict[int, tuple[str, int]] = {}
        self.txlog = txlog.TxLog(cfg.job_queue_log)
        self.claims: dict[str, ScheddClaim] = {}
        self._background: set[asyncio.Task] = set()
        self._advertised_submitters: set[str] = set()
        self.counters = defaultdict(int)
        n = cfg.max_pending_startd_contacts
        self._contacts: asyncio.Semaphore | None = asyncio.Semaphore(n) if n > 0 else None

    def default_name(self) -> str:
        return self.common.full_hostname

    def advertise_min_interval_s(self) -> float:
        return self.cfg.min_interval_s

    def add_services(self, server: grpc.aio.Server) -> None:
        from daemons.schedd.service import ScheddService
        schedd_pb2_grpc.add_ScheddServicer_to_server(ScheddService(self), server)

    # ---- start-up: replay, compaction, reconnection ----------------------------
    async def on_start(self) -> None:
        path = self.cfg.job_queue_log
        t0 = time.perf_counter()
        ops, seq, cut = txlog.read_log(path)
        for op in ops:
            self.queue.apply_op(op)
        if cut:
            self.log.warning("%s ends inside a transaction (a crash mid-commit); that transaction is dropped", path)
        self.txlog.rewrite(self.queue.state_lines(), seq + 1)
        self.log.info("job queue %s: %d job(s) restored from %d log entries in %.3f s",
                      path, len(self.queue), len(ops), time.perf_counter() - t0)
        finished = [j for j in self.queue.jobs.values() if j.status in (COMPLETED, REMOVED)]
        if finished:
            await self._to_history(finished)
        now = self.clock.now()
        for job in self.queue.by_status(RUNNING):
            claim_id = ads.parse_expr(job.attrs.get("ClaimId", '""')).eval()
            addr = ads.parse_expr(job.attrs.get("StartdIpAddr", '""')).eval()
            slot = ads.parse_expr(job.attrs.get("RemoteHost", '""')).eval()
            if isinstance(claim_id, str) and claim_id and isinstance(addr, str) and addr:
                self.claims[claim_id] = ScheddClaim(claim_id, str(slot), _strip_addr(addr), job.submitter,
                                                    now, None, job.key, now)
        if self.claims:
            self.log.info("reconnecting to %d running job(s)", len(self.claims))
        self.add_periodic("keepalive", self.cfg.alive_interval_s, self.keepalive)

    async def on_close(self) -> None:
        for t in list(self._background):
            t.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        try:
            await self.txlog.commit()
        except Exception:
            pass
        self.txlog.close()

    def spawn(self, coro, name: str) -> asyncio.Task:
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("background task %s failed: %s", task.get_name(), describe(task.exception()),
                           exc_info=task.exception())

    # ---- committing changes ---------------------------------------------------
    def change(self, job: Job, changes: dict[str, str | None]) -> int:
        """Apply attribute changes to a job in memory and append them to the log."""
        lines = self.queue.set_lines(job, changes)
        self.queue.apply(lines)
        return self.txlog.append(lines)

    # ---- submit ---------------------------------------------------------------
    async def submit(self, text: str, file: str, owner: str) -> tuple[int, int]:
        desc = parse_submit(text, file or "<submit>")
        cluster = self.queue.next_cluster
        ctx = SubmitContext(owner=owner or "nobody", uid_domain=self.common.uid_domain, cluster_id=cluster,
                            now=int(self.clock.now()), schedd_name=self.name, arch=self.cfg.arch,
                            opsys=self.cfg.opsys, default_request_memory=self.cfg.default_request_memory,
                            default_request_disk=self.cfg.default_request_disk,
                            default_request_cpus=self.cfg.default_request_cpus)
        procs = build_jobs(desc, ctx)
        lines = self.queue.submit_lines(procs, cluster)
        self.queue.apply(lines)
        await self.txlog.commit(self.txlog.append(lines))
        self.counters["jobs_submitted"] += len(procs)
        submitters = sorted({self.queue.jobs[(cluster, int(p["ProcId"]))].submitter for p in procs})
        self.log.info("Submitted cluster %d: %d job(s) for %s", cluster, len(procs), ", ".join(submitters))
        self.spawn(self._reschedule_negotiator(), "schedd:reschedule")
        return cluster, len(procs)

    async def _reschedule_negotiator(self) -> None:
        # The negotiator must see our submitter ads before it cycles (condor_submit's reschedule).
        await self.advertise()
        assert self.collector is not None
        try:
            texts = await self.collector.query("Negotiator", projection=["MyAddress"], give_up_after_s=2.0)
        except Exception as e:
            self.log.info("no reschedule sent: %s", describe(e))
            return
        for t in texts:
            addr = ads.get(ads.parse_ad(t), "MyAddress")
            if isinstance(addr, str) and addr:
                try:
                    stub = negotiator_pb2_grpc.NegotiatorStub(self.channels.get(_strip_addr(addr)))
                    await stub.Reschedule(common_pb2.Empty(), timeout=5.0)
                except grpc.aio.AioRpcError as e:
                    self.log.info("reschedule to the negotiator at %s failed: %s", addr, describe(e))

    # ---- negotiation -------------------------------------------------------------
    def begin_negotiation(self, submitter: str, cycle: int, significant: list[str] | None = None,
                          job_constraint: str = "") -> NegotiationSession:
        if significant and self.ac.update_negotiator_attrs(significant):
            self.log.info("significant attributes from the negotiator grew (%d now): every autocluster id "
                          "is recomputed", len(self.ac.negotiator_attrs))
        jobs = scheduling.idle_jobs(self.queue, submitter)
        if job_constraint.strip():
            # NEGOTIATOR_JOB_CONSTRAINT: HTCondor's schedd offers only the jobs that satisfy it.
            try:
                tree = ads.parse_expr(job_constraint, "NEGOTIATOR_JOB_CONSTRAINT")
                now = self.clock.now()
                jobs = [j for j in jobs if ads.is_true(ads.evaluate(tree, scheduling.with_time(j.classad(), now)))]
            except ads.AdError as e:
                self.log.warning("ignoring the negotiator's job constraint: %s", e)
        n0, t0 = self.ac.ids_assigned, self.ac.assign_seconds
        requests = scheduling.resource_requests(jobs, self.ac.assign)
        acs = {r.autocluster for r in requests}
        autoclusters = len(acs)
        self.ac_stats.note(cycle, self.clock.now(), acs, len(jobs), self.ac.ids_assigned - n0,
                           self.ac.assign_seconds - t0)
        session = NegotiationSession(submitter, cycle, requests)
        self.counters["negotiations"] += 1
        self.log.info("Negotiating for %s (cycle %d): %d idle job(s) in %d autocluster(s), %d request(s)",
                      submitter, cycle, len(jobs), autoclusters, len(requests))
        return session

    def next_requests(self, session: NegotiationSession, max_requests: int) -> tuple[list[Request], bool]:
        """The next batch, leaving out autoclusters already rejected in this cycle."""
        n = max(1, max_requests)
        batch: list[Request] = []
        while len(batch) < n and session.position < len(session.requests):
            r = session.requests[session.position]
            session.position += 1
            if r.autocluster not in session.rejected:
                batch.append(r)
        return batch, session.position >= len(session.requests)

    def on_match(self, session: NegotiationSession, request_id: str, claim_id: str, slot_ad_text: str,
                 consumed: dict[str, int] | None = None) -> None:
        req = session.by_id.get(request_id)
        session.matches += 1
        job = req.next_job() if req is not None else None
        if req is not None:
            self.ac_rejections.pop(req.autocluster, None)
        if job is None:
            # The job started meanwhile (on a leftover or a reused claim): the match is
            # the submitter's, so another of its idle jobs that fits the slot takes it.
            try:
                slot_ad = ads.parse_ad(slot_ad_text, "matched slot ad")
            except ads.AdError:
                return
            job = scheduling.pick_job_for_slot(scheduling.idle_jobs(self.queue, session.submitter), slot_ad,
                                               self.clock.now())
            if job is None:
                self.log.info("match for request %s arrived, but no idle job of %s fits %s now; not used",
                              request_id, session.submitter, ads.get(slot_ad, "Name"))
                return
        job.reserved = True
        self.counters["matches"] += 1
        self.spawn(self._claim_and_run(job, claim_id, slot_ad_text, session.submitter, consumed or None),
                   f"schedd:claim:{job.id}")

    def on_reject(self, session: NegotiationSession, request_id: str, reason: str) -> None:
        """Skip the rest of the autocluster this cycle; its jobs all carry the reason."""
        req = session.by_id.get(request_id)
        session.rejections += 1
        if req is None:
            return
        session.rejected.add(req.autocluster)
        self.ac_rejections[req.autocluster] = (reason, int(self.clock.now()))

    # ---- claims and jobs ------------------------------------------------------------
    def _startd(self, address: str) -> startd_pb2_grpc.StartdStub:
        return startd_pb2_grpc.StartdStub(self.channels.get(address))

    async def _claim_and_run(self, job: Job, claim_id: str, slot_ad_text: str, submitter: str,
                             consumed: dict[str, int] | None = None) -> None:
        """Claim a matched slot and start the job; with MAX_PENDING_STARTD_CONTACTS, at most
        that many at a time (the others wait their turn without costing anything)."""
        if self._contacts is None:
            await self._claim_and_run_now(job, claim_id, slot_ad_text, submitter, consumed)
            return
        async with self._contacts:
            await self._claim_and_run_now(job, claim_id, slot_ad_text, submitter, consumed)

    async def _claim_and_run_now(self, job: Job, claim_id: str, slot_ad_text: str, submitter: str,
                                 consumed: dict[str, int] | None = None) -> None:
        try:
            slot_ad = ads.parse_ad(slot_ad_text, "matched slot ad")
        except ads.AdError as e:
            job.reserved = False
            self.log.warning("match for job %s carries a bad slot ad: %s", job.id, e)
            return
        addr = _strip_addr(str(ads.get(slot_ad, "StartdIpAddr") or ads.get(slot_ad, "MyAddress") or ""))
        slot_name = str(ads.get(slot_ad, "Name", "?"))
        try:
            reply = await self._startd(addr).RequestClaim(startd_pb2.RequestClaimRequest(
                claim_id=claim_id, job_ad=common_pb2.ClassAd(text=job.text()), schedd_name=self.name,
                schedd_address=self.address, submitter=submitter, resources=consumed or {}), timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            job.reserved = False
            self.log.warning("could not request a claim on %s at %s for job %s: %s", slot_name, addr, job.id,
                             describe(e))
            return
        if not reply.ok:
            job.reserved = False
            self.counters["claims_refused"] += 1
            self.log.info("claim on %s for job %s refused: %s", slot_name, job.id, reply.reason)
            return
        now = self.clock.now()
        claimed_ad = ads.parse_ad(reply.slot_ad.text, "claimed slot ad")
        claim = ScheddClaim(reply.claim_id, str(ads.get(claimed_ad, "Name", slot_name)), addr, submitter, now,
                            claimed_ad, None, now)
        self.claims[claim.id] = claim
        self.counters["claims"] += 1
        self.log.info("Claimed %s for job %s (%s)", claim.slot_name, job.id, submitter)
        if reply.leftover_claim_id and reply.HasField("leftover_ad"):
            self.spawn(self._claim_leftover(reply.leftover_ad.text, reply.leftover_claim_id, submitter),
                       f"schedd:leftover:{slot_name}")
        await self._activate(claim, job)

    async def _claim_leftover(self, leftover_text: str, claim_id: str, submitter: str) -> None:
        """CLAIM_PARTITIONABLE_LEFTOVERS: claim what is left of the p-slot for another job at once."""
        slot_ad = ads.parse_ad(leftover_text, "leftover slot ad")
        job = scheduling.pick_job_for_slot(scheduling.idle_jobs(self.queue, submitter), slot_ad, self.clock.now())
        if job is None:
            return
        job.reserved = True
        await self._claim_and_run(job, claim_id, leftover_text, submitter)

    async def _activate(self, claim: ScheddClaim, job: Job) -> None:
        """Start `job` on `claim`.

        The job is marked Running *before* the startd is asked, as HTCondor's schedd
        does when it spawns the shadow: a zero-length job's exit can arrive before the
        activation reply, and must find its job running on this claim. If activation
        fails the job goes back to Idle.
        """
        now = int(self.clock.now())
        changes: dict[str, str | None] = {
            "JobStatus": str(RUNNING),
            "EnteredCurrentStatus": str(now),
            "JobCurrentStartDate": str(now),
            "NumJobStarts": str(job.int_attr("NumJobStarts") + 1),
            "JobRunCount": str(job.int_attr("JobRunCount") + 1),
            "NumJobMatches": str(job.int_attr("NumJobMatches") + 1),
            "LastMatchTime": str(now),
            "RemoteHost": _quote(claim.slot_name),
            "ClaimId": _quote(claim.id),
            "StartdIpAddr": _quote(f"<{claim.startd_address}>"),
            "LastRejMatchReason": None,
        }
        if "JobStartDate" not in job.attrs:
            changes["JobStartDate"] = str(now)
        before = {k: job.attrs.get(k) for k in changes}
        job_ad = job.text()
        claim.job = job.key
        n = self.change(job, changes)
        job.reserved = False
        try:
            reply = await self._startd(claim.startd_address).ActivateClaim(startd_pb2.ActivateClaimRequest(
                claim_id=claim.id, job_ad=common_pb2.ClassAd(text=job_ad)), timeout=RPC_TIMEOUT_S)
            ok, reason = reply.ok, reply.reason
        except grpc.aio.AioRpcError as e:
            ok, reason = False, describe(e)
        if not ok:
            self.log.warning("could not start job %s on %s: %s", job.id, claim.slot_name, reason)
            claim.job = None
            if job.key in self.queue.jobs and job.attrs.get("ClaimId") == _quote(claim.id):
                self.change(job, before)
            await self._release_claim(claim, f"activation failed: {reason}")
            await self.txlog.commit()
            return
        self.counters["jobs_started"] += 1
        self.log.info("Started job %s on %s", job.id, claim.slot_name)
        self.trigger("advertise")
        await self.txlog.commit(n)

    async def _release_claim(self, claim: ScheddClaim, reason: str) -> None:
        self.claims.pop(claim.id, None)
        try:
            await self._startd(claim.startd_address).ReleaseClaim(
                startd_pb2.ReleaseClaimRequest(claim_ids=[claim.id], reason=reason), timeout=RPC_TIMEOUT_S)
            self.log.info("Released claim on %s (%s)", claim.slot_name, reason)
        except grpc.aio.AioRpcError as e:
            # The startd drops the claim itself once its lease lapses.
            self.log.warning("could not release the claim on %s: %s", claim.slot_name, describe(e))

    async def _after_job(self, claim: ScheddClaim) -> None:
        """The job on `claim` is done: run another of the submitter's jobs on it, or let it go."""
        now = self.clock.now()
        if claim.id not in self.claims:
            return
        if scheduling.claim_reusable(claim, now, self.cfg.claim_worklife_s):
            assert claim.slot_ad is not None
            job = scheduling.pick_job_for_slot(scheduling.idle_jobs(self.queue, claim.submitter),
                                               claim.slot_ad, now)
            if job is not None:
                job.reserved = True
                self.counters["claim_reuses"] += 1
                self.log.info("Reusing claim on %s for job %s", claim.slot_name, job.id)
                await self._activate(claim, job)
                return
            reason = "no idle job matches the slot"
        elif claim.slot_ad is None:
            reason = "claim reconnected after a restart"
        else:
            reason = f"CLAIM_WORKLIFE ({self.cfg.claim_worklife_s:.0f} s) reached"
        await self._release_claim(claim, reason)

    async def on_claim_events(self, events: Iterable[schedd_pb2.ClaimEvent]) -> int:
        accepted = 0
        finished: list[Job] = []
        freed: list[ScheddClaim] = []
        for ev in events:
            job = self.queue.get(ev.job_id)
            claim = self.claims.get(ev.claim_id)
            if job is None or job.status != RUNNING or job.attrs.get("ClaimId") != _quote(ev.claim_id):
                # A duplicate, or news of a claim this schedd has already given up.
                if claim is not None and ev.kind != schedd_pb2.JOB_EXITED:
                    self.claims.pop(claim.id, None)
                continue
            accepted += 1
            t = int(ev.pool_time)
            started = ev.job_start if ev.job_start > 0 else job.int_attr("JobCurrentStartDate", t)
            ran = max(0.0, ev.pool_time - started)
            common: dict[str, str | None] = {
                "EnteredCurrentStatus": str(t),
                "LastRemoteHost": job.attrs.get("RemoteHost"),
                "RemoteHost": None,
                "ClaimId": None,
                "RemoteWallClockTime": repr(float(job.attrs.get("RemoteWallClockTime", "0")) + ran),
                "CumulativeSlotTime": repr(float(job.attrs.get("CumulativeSlotTime", "0")) + ran),
                "LastJobStatus": str(RUNNING),
            }
            if ev.kind == schedd_pb2.JOB_EXITED:
                common.update({"JobStatus": str(COMPLETED), "CompletionDate": str(t), "ExitCode": "0",
                               "ExitBySignal": "false", "JobFinishedHookDone": str(t)})
                self.change(job, common)
                finished.append(job)
                self.counters["jobs_completed"] += 1
                self.log.info("Job %s completed on %s after %.0f s", job.id, ev.slot_name, ran)
                if claim is not None:
                    claim.job = None
                    freed.append(claim)
            else:
                why = ev.reason or ("claim lost" if ev.kind == schedd_pb2.CLAIM_LOST else "evicted")
                common.update({"JobStatus": str(IDLE), "LastVacateTime": str(t), "VacateReason": _quote(why)})
                self.change(job, common)
                self.claims.pop(ev.claim_id, None)
                self.counters["jobs_evicted"] += 1
                self.log.info("Job %s on %s returned to the queue: %s", job.id, ev.slot_name, why)
        await self.txlog.commit()
        if finished:
            await self._to_history(finished)
        for claim in freed:
            self.spawn(self._after_job(claim), f"schedd:after:{claim.slot_name}")
        self.trigger("advertise")
        return accepted

    async def _to_history(self, jobs: list[Job]) -> None:
        """Completed and removed jobs leave the queue for the history file."""
        self.cfg.history_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.cfg.history_file, "a", encoding="utf-8") as f:
            for job in jobs:
                f.write(job.text() + "\n")
        lines = [txlog.op_destroy(j.id) for j in jobs if j.key in self.queue.jobs]
        self.queue.apply(lines)
        self.txlog.append(lines)

    # ---- keepalive and reconnection ------------------------------------------------
    async def keepalive(self) -> None:
        by_addr: dict[str, list[ScheddClaim]] = defaultdict(list)
        for c in self.claims.values():
            by_addr[c.startd_address].append(c)
        if by_addr:
            await asyncio.gather(*(self._keepalive_one(a, cs) for a, cs in by_addr.items()))

    async def _keepalive_one(self, address: str, claims: list[ScheddClaim]) -> None:
        now = self.clock.now()
        try:
            reply = await self._startd(address).KeepAlive(startd_pb2.KeepAliveRequest(
                claim_ids=[c.id for c in claims], schedd_address=self.address), timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            for c in claims:
                if now - c.last_alive_ok > self.cfg.claim_lease_s:
                    await self._claim_lost(c, f"startd at {address} unreachable for "
                                              f"{now - c.last_alive_ok:.0f} s ({describe(e)})")
            return
        unknown = set(reply.unknown_claim_ids)
        for c in claims:
            if c.id in unknown:
                await self._claim_lost(c, "the startd no longer holds the claim")
            else:
                c.last_alive_ok = now

    async def _claim_lost(self, claim: ScheddClaim, reason: str) -> None:
        self.claims.pop(claim.id, None)
        job = self.queue.jobs.get(claim.job) if claim.job else None
        if job is None or job.status != RUNNING:
            return
        t = int(self.clock.now())
        n = self.change(job, {"JobStatus": str(IDLE), "EnteredCurrentStatus": str(t),
                              "LastRemoteHost": job.attrs.get("RemoteHost"), "RemoteHost": None,
                              "ClaimId": None, "LastVacateTime": str(t), "VacateReason": _quote(reason)})
        self.log.info("Job %s on %s returned to the queue: %s", job.id, claim.slot_name, reason)
        await self.txlog.commit(n)
        self.trigger("advertise")

    # ---- remove / hold / release / edit ----------------------------------------------
    def select(self, job_ids: list[str], constraint: str) -> list[Job]:
        if job_ids:
            jobs = self.queue.select(job_ids)
        else:
            jobs = list(self.queue.jobs.values())
        if constraint.strip():
            tree = ads.parse_expr(constraint, "constraint")
            now = self.clock.now()
            jobs = [j for j in jobs if ads.is_true(ads.evaluate(tree, scheduling.with_time(j.classad(), now)))]
        return jobs

    async def act(self, action: int, job_ids: list[str], constraint: str, reason: str,
                  edits: dict[str, str]) -> list[str]:
        if not job_ids and not constraint.strip():
            raise ActError("name jobs (cluster or cluster.proc) or give a constraint")
        jobs = self.select(job_ids, constraint)
        now = str(int(self.clock.now()))
        done: list[Job] = []
        to_release: list[ScheddClaim] = []
        if action == schedd_pb2.EDIT:
            checked = {}
            for attr, value in edits.items():
                if attr.lower() in PROTECTED_ATTRS:
                    raise ActError(f"attribute {attr} cannot be edited")
                if not attr.replace("_", "a").isalnum() or attr[0].isdigit():
                    raise ActError(f"{attr!r} is not an attribute name")
                try:
                    checked[attr] = ads.expr_text(value, attr)
                except ads.AdError as e:
                    raise ActError(str(e)) from None
            if not checked:
                raise ActError("nothing to edit")
            for j in jobs:
                self.change(j, dict(checked))
                done.append(j)
        for j in jobs if action != schedd_pb2.EDIT else []:
            s = j.status
            claim = next((c for c in self.claims.values() if c.job == j.key), None)
            if action == schedd_pb2.REMOVE and s not in (REMOVED, COMPLETED):
                self.change(j, {"JobStatus": str(REMOVED), "EnteredCurrentStatus": now,
                                "RemoveReason": _quote(reason or "removed by user"), "RemoteHost": None,
                                "ClaimId": None, "LastJobStatus": str(s)})
            elif action == schedd_pb2.HOLD and s in (IDLE, RUNNING):
                self.change(j, {"JobStatus": str(HELD), "EnteredCurrentStatus": now,
                                "HoldReason": _quote(reason or "held by user"), "HoldReasonCode": "1",
                                "RemoteHost": None, "ClaimId": None, "LastJobStatus": str(s)})
            elif action == schedd_pb2.RELEASE and s == HELD:
                self.change(j, {"JobStatus": str(IDLE), "EnteredCurrentStatus": now, "HoldReason": None,
                                "HoldReasonCode": None, "ReleaseReason": _quote(reason or "released by user"),
                                "LastJobStatus": str(s)})
            else:
                continue
            j.reserved = False
            done.append(j)
            if claim is not None:
                claim.job = None
                to_release.append(claim)
        await self.txlog.commit()
        if action == schedd_pb2.REMOVE:
            await self._to_history([j for j in done if j.status == REMOVED])
        for claim in to_release:
            await self._release_claim(claim, f"job {'removed' if action == schedd_pb2.REMOVE else 'held'}")
        verb = {schedd_pb2.REMOVE: "removed", schedd_pb2.HOLD: "held", schedd_pb2.RELEASE: "released",
                schedd_pb2.EDIT: "edited"}.get(action, "?")
        if done:
            self.log.info("%d job(s) %s: %s", len(done), verb, " ".join(j.id for j in done[:20]))
            self.trigger("advertise")
            if action == schedd_pb2.RELEASE:
                self.spawn(self._reschedule_negotiator(), "schedd:reschedule")
        return [j.id for j in done]

    # ---- queries --------------------------------------------------------------------
    def query(self, constraint: str, projection: list[str], history: bool, limit: int) -> list[str]:
        tree = ads.parse_expr(constraint, "constraint") if constraint.strip() else None
        now = self.clock.now()
        out: list[str] = []
        for ad in self._iter_ads(history):
            if tree is not None and not ads.is_true(ads.evaluate(tree, scheduling.with_time(ad, now))):
                continue
            out.append(repr(ads.project(ad, projection)) if projection else repr(ad))
            if limit and len(out) >= limit:
                break
        return out

    def autocluster_ads(self, constraint: str = "") -> list[str]:
        """condor_q -autocluster: the autoclusters of the jobs in the queue."""
        tree = ads.parse_expr(constraint, "constraint") if constraint.strip() else None
        groups: dict[int, list[Job]] = {}
        for job in sorted(self.queue.jobs.values(), key=lambda j: j.key):
            if job.status in (COMPLETED, REMOVED):
                continue
            groups.setdefault(self.ac.assign(job), []).append(job)
        out = []
        for ac, jobs in sorted(groups.items()):
            first = jobs[0]
            attrs: dict[str, str] = {a: first.attrs.get(a, "undefined") for a in first.ac_attrs}
            attrs.update({
                "AutoClusterId": str(ac),
                "AutoClusterAttrs": ads.literal(",".join(first.ac_attrs)),
                "JobCount": str(len(jobs)),
                "JobIds": ads.literal(",".join(j.id for j in jobs)),
                "IdleJobs": str(sum(j.status == IDLE for j in jobs)),
                "RunningJobs": str(sum(j.status == RUNNING for j in jobs)),
            })
            rejection = self.ac_rejections.get(ac)
            if rejection is not None:
                attrs["LastRejMatchReason"] = _quote(rejection[0])
                attrs["LastRejMatchTime"] = str(rejection[1])
            ad = ads.parse_ad(ads.text_of_exprs(attrs))
            if tree is None or ads.is_true(ads.evaluate(tree, ad)):
                out.append(repr(ad))
        return out

    def _iter_ads(self, history: bool):
        if not history:
            for j in sorted(self.queue.jobs.values(), key=lambda j: j.key):
                shared = self.ac_rejections.get(j.ac_id) if j.ac_id is not None and j.status == IDLE else None
                if shared is None:
                    yield j.classad()
                else:
                    # The autocluster's last rejection speaks for every job in it.
                    view = dict(j.view())
                    view["LastRejMatchReason"] = _quote(shared[0])
                    view["LastRejMatchTime"] = str(shared[1])
                    yield ads.parse_ad(ads.text_of_exprs(view))
            return
        path = self.cfg.history_file
        if path.exists():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        try:
                            yield ads.parse_ad(line)
                        except ads.AdError:
                            continue

    # ---- ads -----------------------------------------------------------------------
    def own_ads(self) -> list[dict[str, Any]]:
        counts = self.queue.counts_by_submitter()
        sched = self.base_ad()
        total = {k: sum(c[k] for c in counts.values()) for k in ("idle", "running", "held")}
        sched.update({"ScheddIpAddr": f"<{self.address}>", "TotalIdleJobs": total["idle"],
                      "TotalRunningJobs": total["running"], "TotalHeldJobs": total["held"],
                      "TotalJobAds": len(self.queue), "NumUsers": len(counts),
                      "TotalClaims": len(self.claims)})
        out = [sched]
        for submitter, c in counts.items():
            out.append({"MyType": "Submitter", "Name": submitter, "ScheddName": self.name,
                         "ScheddIpAddr": f"<{self.address}>", "MyAddress": f"<{self.address}>",
                         "Machine": self.common.full_hostname,
                         "IdleJobs": c["idle"], "RunningJobs": c["running"], "HeldJobs": c["held"],
                         "WeightedIdleJobs": c["weighted_idle"], "WeightedRunningJobs": c["weighted_running"],
                         "SubmitterTag": self.common.collector_host or "",
                         "UpdateSequenceNumber": sched["UpdateSequenceNumber"]})
        return out

    async def advertise(self) -> None:
        assert self.collector is not None
        ads_now = self.own_ads()
        names = {a["Name"] for a in ads_now if a["MyType"] == "Submitter"}
        gone = self._advertised_submitters - names
        await self.collector.update([ads.ad_text(a) for a in ads_now], invalidate_type="Submitter",
                                    invalidate_names=sorted(gone))
        self._advertised_submitters = names

    def withdraw_keys(self) -> list[tuple[str, list[str]]]:
        return [(self.my_type, [self.name]), ("Submitter", sorted(self._advertised_submitters))]

    # ---- status ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        s = self.base_status()
        counts = self.queue.counts_by_submitter()
        s.update({"jobs": len(self.queue), "claims": len(self.claims), "submitters": counts,
                  "autoclustering": dict(self.ac_stats.summary(), enabled=self.ac.cfg.enabled,
                                         significant_attributes=list(self.ac.base_list()),
                                         known_signatures=self.ac.known_signatures),
                  "counters": dict(self.counters), "job_queue_log": str(self.cfg.job_queue_log),
                  "fsyncs": self.txlog.fsyncs, "commits": self.txlog.commits})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        by_status: dict[int, int] = defaultdict(int)
        for j in self.queue.jobs.values():
            by_status[j.status] += 1
        m.update({"jobs": {(("status", str(k)),): float(v) for k, v in by_status.items()},
                  "claims": float(len(self.claims)),
                  "txlog_fsyncs_total": float(self.txlog.fsyncs),
                  "txlog_commits_total": float(self.txlog.commits)})
        for k, v in self.counters.items():
            m[f"{k}_total"] = float(v)
        a = self.ac_stats.summary()
        m.update({"autoclusters": float(a["active_autoclusters"]),
                  "autoclusters_mean": a["active_autoclusters_mean"],
                  "autoclusters_sd": a["active_autoclusters_sd"],
                  "jobs_per_autocluster_mean": a["jobs_per_autocluster_mean"],
                  "autocluster_id_microseconds_mean": a["id_cost_us_mean"],
                  "autocluster_id_microseconds_sd": a["id_cost_us_sd"],
                  "autocluster_ids_assigned_total": float(self.ac.ids_assigned),
                  "autocluster_id_cost_jobs": {(("le_us", k),): float(v)
                                               for k, v in a["id_cost_histogram_us"].items()}})
        return m


__all__ = ["ScheddDaemon", "ScheddConfig", "ActError", "SubmitError"]
