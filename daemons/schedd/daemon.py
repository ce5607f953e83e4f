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
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from daemons.core import ads, heap
from daemons.core.adpack import AdPacker
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.config import ConfigError, Param
from daemons.core.daemon import Daemon
from daemons.core.lag import RecentMax
from daemons.core.rpc import describe
from daemons.pb.htcpool import common_pb2, negotiator_pb2_grpc, schedd_pb2_grpc
from daemons.schedd import scheduling, txlog
from daemons.schedd.activation import DelayHistogram
from daemons.schedd.autocluster import (IDENTIFIER, AutoclusterConfig, Autoclusterer, AutoclusterStats,
                                        check_names, parse_rounding)
from daemons.schedd.claim_batches import StartdCalls
from daemons.schedd.claims import ClaimsMixin, _strip_addr
from daemons.schedd.history import HistoryFile
from daemons.schedd.jobqueue import Job, JobQueue
from daemons.schedd.negotiation import NegotiationMixin
from daemons.schedd.owners import Caller, OwnerError, submit_owner
from daemons.schedd.protected import name_problem
from daemons.schedd.queue_ops import ActError, QueueOpsMixin
from daemons.schedd.requests import RequestLists
from daemons.schedd.scheduling import ScheddClaim
from daemons.schedd.submit import (COMPLETED, REMOVED, RUNNING, SubmitContext, SubmitError, build_cluster,
                                   count_jobs, parse_submit)

# Jobs submitted between two settlings of the heap (core/heap.py): at 10,000 a settling's
# collection walks at most that many new jobs (a few milliseconds), and a full collection
# never walks the 100,000 jobs of a large queue (about 40 ms).
SETTLE_EVERY_JOBS = 10_000


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
    # JOB_DEFAULT_LEASE_DURATION: the JobLeaseDuration a job gets when its submit
    # description sets none (HTCondor's 2400, for the universes that reconnect).
    default_job_lease: str = "2400"
    autocluster: AutoclusterConfig = field(default_factory=AutoclusterConfig)
    min_interval_s: float = 5.0               # SCHEDD_MIN_INTERVAL
    max_pending_startd_contacts: int = 0      # MAX_PENDING_STARTD_CONTACTS (0: no limit)
    claim_recycling_consider_limits: bool = True   # CLAIM_RECYCLING_CONSIDER_LIMITS
    # HTCondor's limits on the queue (a submission that would pass one is refused whole).
    max_jobs_per_submission: int = 20_000     # MAX_JOBS_PER_SUBMISSION
    max_jobs_per_owner: int = 100_000         # MAX_JOBS_PER_OWNER
    max_jobs_submitted: int = 2 ** 31 - 1     # MAX_JOBS_SUBMITTED
    query_max_worktime_s: float = 10.0        # htcpool's SCHEDD_QUERY_MAX_WORKTIME (0: no limit)
    # Slot attributes recorded in every job as MachineAttr<X><N> (machine_attrs.py).
    system_job_machine_attrs: tuple[str, ...] = ("Cpus", "SlotWeight")   # SYSTEM_JOB_MACHINE_ATTRS
    system_job_machine_attrs_history_length: int = 1                      # ..._HISTORY_LENGTH
    queue_clean_interval_s: float = 86400.0   # QUEUE_CLEAN_INTERVAL: compact the job queue log this often
    # htcpool's own: claims and activations to one startd go in batched calls (claim_batches.py).
    batch_claims: bool = True                 # HTCPOOL_BATCH_CLAIMS

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
            # Empty is unset, as for every knob here; `undefined` gives jobs no lease of their own.
            default_job_lease=p.expr("JOB_DEFAULT_LEASE_DURATION", "2400") or "2400",
            autocluster=read_autocluster_config(p),
            min_interval_s=float(p.int("SCHEDD_MIN_INTERVAL", 5, minimum=0) or 0),
            max_pending_startd_contacts=p.int("MAX_PENDING_STARTD_CONTACTS", 0, minimum=0) or 0,
            claim_recycling_consider_limits=bool(p.bool("CLAIM_RECYCLING_CONSIDER_LIMITS", True)),
            max_jobs_per_submission=_int(p, "MAX_JOBS_PER_SUBMISSION", 20_000, minimum=0),
            max_jobs_per_owner=_int(p, "MAX_JOBS_PER_OWNER", 100_000, minimum=0),
            max_jobs_submitted=_int(p, "MAX_JOBS_SUBMITTED", 2 ** 31 - 1, minimum=0),
            query_max_worktime_s=float(_int(p, "SCHEDD_QUERY_MAX_WORKTIME", 10, minimum=0)),
            system_job_machine_attrs=_attr_names(p, "SYSTEM_JOB_MACHINE_ATTRS", ("Cpus", "SlotWeight")),
            system_job_machine_attrs_history_length=_int(p, "SYSTEM_JOB_MACHINE_ATTRS_HISTORY_LENGTH", 1,
                                                         minimum=0),
            queue_clean_interval_s=float(p.int("QUEUE_CLEAN_INTERVAL", 86400, minimum=1) or 86400),
            batch_claims=bool(p.bool("HTCPOOL_BATCH_CLAIMS", True)),
        )


def _int(p: Param, knob: str, default: int, *, minimum: int) -> int:
    v = p.int(knob, default, minimum=minimum)
    return default if v is None else v


def _attr_names(p: Param, knob: str, default: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(p.list(knob, list(default)))
    for n in names:
        problem = name_problem(n)
        if problem is not None:
            raise ConfigError(f"{p.where(knob)}: {knob}: {problem}")
    return names


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


class ScheddDaemon(NegotiationMixin, ClaimsMixin, QueueOpsMixin, Daemon):
    role = "schedd"
    my_type = "Scheduler"

    def __init__(self, common: CommonConfig, cfg: ScheddConfig, clock: PoolClock | None = None) -> None:
        super().__init__(common, clock)
        self.cfg = cfg
        self.queue = JobQueue(common.uid_domain, cfg.autocluster.rounding)
        self.ac = Autoclusterer(cfg.autocluster, canon=self.queue.canonical)
        self.request_lists = RequestLists(self.queue, self.ac.assign, lambda: self.ac.generation,
                                          self.ac.assign_all)
        self.ac_stats = AutoclusterStats()
        # Beyond HTCondor: a rejection's reason belongs to the whole autocluster.
        self.ac_rejections: dict[int, tuple[str, int]] = {}
        self.txlog = txlog.TxLog(cfg.job_queue_log)
        self.history = HistoryFile(cfg.history_file)
        self.claims: dict[str, ScheddClaim] = {}
        self.slot_packer = AdPacker()   # the claims' slot ads, kept packed (core/adpack.py)
        # startd address -> keepalives in flight there (pool time sent, task)
        self._keepalives: dict[str, list[tuple[float, asyncio.Task]]] = {}
        # When each startd was last heard from (a claim or activation answered, job events
        # received): a startd that talks to us is not gone, however late its keepalives.
        self._startd_heard: dict[str, float] = {}
        # How often claims are kept alive: ALIVE_INTERVAL, lowered by short job leases
        # (ClaimsMixin.note_job_lease).
        self.keepalive_interval_s = cfg.alive_interval_s
        self._log_seq = 0
        self._advertised_submitters: set[str] = set()
        self.counters = defaultdict(int)
        # Submitted jobs live long: once SETTLE_EVERY_JOBS have come in, they leave the cyclic
        # collector's walks (core/heap.py), as the queue restored at start-up does.
        self.heap = heap.Settler(SETTLE_EVERY_JOBS)
        self.activation_delay = DelayHistogram()   # match to running job, pool seconds
        # MAX_PENDING_STARTD_CONTACTS: claims waiting for a worker (claims.ClaimsMixin._contact).
        self._contact_queue: deque = deque()
        self._contact_workers = 0
        self.contact_counts = {"pending": 0, "most_pending": 0}
        # The longest recent round trip to each startd (pool seconds), its claim calls' and
        # keepalives': under load a claim's grant can take longer to be read than its lease
        # (measured: 2,200 pool s against 1,800 at TIME_SCALE 1000 while the loops' lag read
        # 300), so each keepalive tells the startd, which stretches the leases by it.
        self.round_trips = RecentMax(window_s=2 * cfg.claim_lease_s)
        self.startd_calls = StartdCalls(self._startd, self.log, cfg.batch_claims,
                                       lambda: self.clock.now(), self.round_trips)

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
        t0, cpu0 = time.perf_counter(), time.process_time()
        reader = txlog.LogReader(path)
        try:
            for op in reader:
                self.queue.apply_op(op)
        except UnicodeDecodeError as e:
            raise txlog.LogCorrupt(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except (ValueError, OverflowError) as e:
            # An entry in the log's format whose value the queue cannot take (a header number
            # that is not one): say where, as for a line that is not an entry at all.
            raise txlog.LogCorrupt(f"{path}, line {reader.line}: {e}") from None
        seq, cut = reader.seq, reader.cut
        if cut:
            self.log.warning("%s ends inside a transaction (a crash mid-commit); that transaction is dropped", path)
        # Finish what a crash interrupted before the log is compacted: history records the
        # log decided but the file may lack (history.py), then jobs that finished in an
        # older log without leaving the queue.
        self.history.repair()
        before = self.history.last_seq()
        finished = [j for j in self.queue.jobs.values() if j.status in (COMPLETED, REMOVED)]
        if finished:
            self.retire([(j, {}) for j in finished])
            await self.txlog.commit()
        self.write_history()
        if self.history.last_seq() > before:
            self.log.info("history: %d record(s) written after a restart", self.history.last_seq() - before)
        self.history.sync()
        self._log_seq = seq + 1
        self.txlog.rewrite(self.queue.iter_state_lines(), self._log_seq)
        self.log.info("job queue %s: %d job(s) restored from %d log entries in %.3f s (%.3f s of CPU)",
                      path, len(self.queue), reader.entries, time.perf_counter() - t0, time.process_time() - cpu0)
        now, margin = self.clock.now(), self.lag_allowance_s() + self.keepalive_interval_s
        expired = 0
        for job in list(self.queue.by_status(RUNNING)):
            lease = scheduling.job_lease_s(job)
            renewed = scheduling.lease_renewed_at(job, self.queue.lease_renewal)
            if scheduling.lease_expired(lease, renewed, now, margin):
                # As HTCondor's schedd at start-up (mark_idle): a job whose lease ran out while
                # nobody renewed it is not reconnected; the startd has given it up by now. Its
                # run counts until the lease lapsed: the startd runs a job for its lease after
                # the last keepalive, which went out when the lease was last renewed.
                assert renewed is not None
                ran = max(0.0, min(now, renewed + lease) - job.int_attr("JobCurrentStartDate", renewed))
                self.back_to_idle(job, ran, f"the job lease ({lease:.0f} s) expired while the schedd was down")
                expired += 1
                continue
            claim_id = ads.parse_expr(job.attrs.get("ClaimId", '""')).eval()
            addr = ads.parse_expr(job.attrs.get("StartdIpAddr", '""')).eval()
            slot = ads.parse_expr(job.attrs.get("RemoteHost", '""')).eval()
            if isinstance(claim_id, str) and claim_id and isinstance(addr, str) and addr:
                # The claim was last known alive when its lease was last renewed.
                self.claims[claim_id] = ScheddClaim(claim_id, str(slot), _strip_addr(addr), job.submitter,
                                                    now, None, job.key, float(renewed or now), job_lease=lease,
                                                    reconnected=True)
        if expired:
            await self.txlog.commit()
            self.log.info("%d running job(s) returned to the queue: their job lease expired while the schedd "
                          "was down", expired)
        if self.claims:
            self.log.info("reconnecting to %d running job(s)", len(self.claims))
        self.add_periodic("keepalive", self.keepalive_interval_s, self.keepalive)
        for claim in self.claims.values():
            self.note_job_lease(claim.job_lease, claim.job)
        self.add_periodic("clean_queue", self.cfg.queue_clean_interval_s, self.clean_queue_log,
                          first_delay_s=self.cfg.queue_clean_interval_s)

    async def on_close(self) -> None:
        self.startd_calls.close()
        try:
            await self.txlog.commit()
        except Exception:
            pass
        self.txlog.close()

    async def clean_queue_log(self) -> None:
        """QUEUE_CLEAN_INTERVAL: replace the job queue log by the queue's state, so a restart
        replays the jobs there are, not every change since the last start. Only when every
        transaction is on disk, so nothing in flight is lost or written twice."""
        for _ in range(3):
            await self.txlog.commit()
            if self.txlog.quiet:
                break
        else:
            self.log.info("job queue log busy; compacting it at the next QUEUE_CLEAN_INTERVAL")
            return
        # No await from here on: the state written is exactly the state on disk. The
        # records of retired jobs must be safe in the history before the log forgets them.
        self.write_history()
        self.history.sync()
        self._log_seq += 1
        t0 = time.perf_counter()
        lines = self.txlog.rewrite(self.queue.iter_state_lines(), self._log_seq)
        self.log.info("job queue log %s rewritten: %d job(s), %d line(s) in %.3f s", self.cfg.job_queue_log,
                      len(self.queue), lines, time.perf_counter() - t0)

    # ---- committing changes ---------------------------------------------------
    def change(self, job: Job, changes: dict[str, str | None]) -> int:
        """Apply attribute changes to a job in memory and append them to the log."""
        return self.txlog.append(self.queue.apply_changes(job, changes))

    # ---- submit ---------------------------------------------------------------
    async def submit(self, text: str, file: str, owner: str, caller: Caller = Caller(),
                     items: dict[int, list[str]] | None = None) -> tuple[int, int]:
        """Parse, check against the queue's limits, build and commit one cluster; a
        SubmitError changes nothing (not even the next cluster id). Its Owner is the
        caller's user (OwnerError when the request asks for another owner it may not have)."""
        sec = self.common.security
        owner = submit_owner(caller, owner, sec.queue_super_users, sec.impersonate)
        file = file or "<submit>"
        desc = parse_submit(text, file, items)
        self.check_limits(file, owner or "nobody", count_jobs(desc))
        cluster = self.queue.next_cluster
        ctx = SubmitContext(owner=owner or "nobody", uid_domain=self.common.uid_domain, cluster_id=cluster,
                            now=int(self.clock.now()), schedd_name=self.name, arch=self.cfg.arch,
                            opsys=self.cfg.opsys, default_request_memory=self.cfg.default_request_memory,
                            default_request_disk=self.cfg.default_request_disk,
                            default_request_cpus=self.cfg.default_request_cpus,
                            default_job_lease=self.cfg.default_job_lease)
        build = build_cluster(desc, ctx, max_jobs=self.cfg.max_jobs_per_submission)
        if not caller.open:
            for text in {a.get("Owner", build.common.get("Owner", '""')) for a in build.distinct()}:
                # `+Owner = "bob"` must not make alice's job bob's (qmgmt refuses it too; the
                # submit parser already refuses +Owner as an attribute the schedd owns).
                if ads.parse_expr(text).eval() != owner:
                    raise OwnerError(f"Owner = {text} in {file or 'the submit description'} is not the "
                                     f"authenticated user {caller.identity} (jobs are owned by whoever submits them)")
        number = self.txlog.append_transaction(self.queue.submit_transaction(build, cluster))
        await self.txlog.commit(number)
        count = len(build)
        self.counters["jobs_submitted"] += count
        self.heap.added(count)
        submitters = sorted({self.queue.jobs[(cluster, n)].submitter for n in build.numbers()
                             if (cluster, n) in self.queue.jobs})
        self.log.info("Submitted cluster %d: %d job(s) for %s", cluster, count, ", ".join(submitters))
        self.spawn(self._reschedule_negotiator(), "schedd:reschedule")
        return cluster, count

    def check_limits(self, file: str, owner: str, n: int) -> None:
        """MAX_JOBS_PER_SUBMISSION, MAX_JOBS_PER_OWNER and MAX_JOBS_SUBMITTED, as HTCondor's
        schedd counts them: the queue after the submission may hold at most the limit."""
        cfg = self.cfg
        if n > cfg.max_jobs_per_submission:
            raise SubmitError(file, None, f"{n:,} jobs in one submission; MAX_JOBS_PER_SUBMISSION is "
                                          f"{cfg.max_jobs_per_submission:,}")
        mine = self.queue.jobs_of_owner(owner)
        if mine + n > cfg.max_jobs_per_owner:
            raise SubmitError(file, None, f"{owner} has {mine:,} job(s) in the queue; {n:,} more would pass "
                                          f"MAX_JOBS_PER_OWNER ({cfg.max_jobs_per_owner:,})")
        if len(self.queue) + n > cfg.max_jobs_submitted:
            raise SubmitError(file, None, f"the queue holds {len(self.queue):,} job(s); {n:,} more would pass "
                                          f"MAX_JOBS_SUBMITTED ({cfg.max_jobs_submitted:,})")

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
        s["claim_activation_delay"] = self.activation_delay.snapshot()   # match to running job
        counts = self.queue.counts_by_submitter()
        s.update({"jobs": len(self.queue), "claims": len(self.claims), "submitters": counts,
                  "autoclustering": dict(self.ac_stats.summary(), enabled=self.ac.cfg.enabled,
                                         significant_attributes=list(self.ac.base_list()),
                                         known_signatures=self.ac.known_signatures),
                  "counters": dict(self.counters), "job_queue_log": str(self.cfg.job_queue_log),
                  "fsyncs": self.txlog.fsyncs, "commits": self.txlog.commits,
                  "startd_claim_calls": dict(self.startd_calls.calls),
                  "startd_contacts": dict(self.contact_counts, queued=len(self._contact_queue))})
        return s

    def status_detail(self, name: str) -> Any | None:
        """`claims`: each claim this schedd holds, by slot, with the job it runs ("" when idle);
        `running`: each job the queue says is running, with its slot."""
        if name == "claims":
            return {c.slot_name: (f"{c.job[0]}.{c.job[1]}" if c.job else "") for c in self.claims.values()}
        if name == "running":
            return {j.id: ads.parse_expr(j.attrs.get("RemoteHost", '""')).eval() for j in self.queue.by_status(RUNNING)}
        return None

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        by_status = self.queue.jobs_by_status()
        m.update({"jobs": {(("status", str(k)),): float(v) for k, v in by_status.items()},
                  "claims": float(len(self.claims)),
                  "txlog_fsyncs_total": float(self.txlog.fsyncs),
                  "txlog_commits_total": float(self.txlog.commits),
                  "startd_claim_calls_total": {(("how", "single"),): float(self.startd_calls.calls["single"]),
                                               (("how", "batched"),): float(self.startd_calls.calls["batched"])},
                  "startd_claim_batch_items_total": float(self.startd_calls.calls["batched_items"]),
                  # what its keepalives tell the startds (claims.ClaimsMixin._keepalive_one)
                  "startd_round_trip_max_pool_seconds": self.round_trips.most(self.clock.now())})
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
        d = self.activation_delay
        m.update({"claim_activation_delay_pool_seconds_bucket": {(("le", k),): v for k, v in d.cumulative().items()},
                  "claim_activation_delay_pool_seconds_count": float(d.total),
                  "claim_activation_delay_pool_seconds_sum": d.sum_s,
                  "claim_activation_delay_max_pool_seconds": d.max_s})
        return m


__all__ = ["ScheddDaemon", "ScheddConfig", "ActError", "SubmitError", "OwnerError"]
