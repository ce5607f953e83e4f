"""The schedd's scheduling decisions. Pure: queue state and time in, choices out."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import classad2

from daemons.core import ads
from daemons.core.adpack import PackedAd
from daemons.schedd.jobqueue import Job, JobQueue
from daemons.schedd.submit import IDLE


@dataclass
class ScheddClaim:
    """A claim this schedd holds on a slot."""
    id: str
    slot_name: str
    startd_address: str
    submitter: str
    created: float
    # The claimed slot's ad, for reusing the claim, packed (about 35 bytes where the parsed
    # ad is 8 KB; a schedd holds one per running job). None after a restart: the claim is
    # then not reused.
    packed_ad: PackedAd | None
    job: tuple[int, int] | None = None
    last_alive_ok: float = 0.0
    # A preempting claim: the startd gives the slot once the current claim has retired
    # and been vacated (a CLAIM_READY event); `job` is then the job waiting for it.
    pending: bool = False
    limits: str = ""                   # ConcurrencyLimits of the job the negotiator matched (claim recycling)
    job_lease: float = 0.0             # the running job's JobLeaseDuration (0.0: none; job_lease_s)
    reconnected: bool = False          # rebuilt from the job queue after a restart

    def lease_s(self, claim_lease_s: float) -> float:
        """How long this schedd waits on a silent startd before it gives the claim up: the
        running job's lease (the shadow's, in HTCondor: it tries to reconnect for as long),
        else the claim lease. Never shorter than the startd's wait for the same claim, so a
        job is not run again elsewhere while the startd may still be running it."""
        return self.job_lease if self.job is not None and self.job_lease else claim_lease_s

    @property
    def slot_ad(self) -> classad2.ClassAd | None:
        """The claimed slot's ad, parsed afresh."""
        return self.packed_ad.parse() if self.packed_ad is not None else None


def job_lease_s(job: Job) -> float:
    """The job's JobLeaseDuration, read as the startd reads it (ads.as_lease); 0.0 if none."""
    text = job.get("JobLeaseDuration")
    if text is None:
        return 0.0
    try:
        value = int(text)             # the usual case, a literal: no ad to build
    except (TypeError, ValueError):
        value = ads.get(job.classad(), "JobLeaseDuration")
    return ads.as_lease(value)


def lease_renewed_at(job: Job, queue_renewal: int) -> int | None:
    """When a running job's lease was last renewed, as a restarted schedd reads it: its own
    LastJobLeaseRenewal (written when it started) or the queue's last renewal of every
    running job (JobQueue.lease_renewal), whichever is later; None if neither is known
    (a queue written before leases were renewed: the job is reconnected as before)."""
    own = job.int_attr("LastJobLeaseRenewal", 0)
    renewed = max(own, queue_renewal)
    return renewed or None


def lease_expired(lease_s: float, renewed_at: int | None, now: float, margin_s: float = 0.0) -> bool:
    """HTCondor's jobLeaseIsValid, negated: the lease ran out while nobody renewed it, by
    more than `margin_s` (the daemon passes the pool's own lag, by which the startd
    stretches the lease too, and an ALIVE_INTERVAL, the most a startd waits between two
    checks of its leases: the job is not started elsewhere while its startd may still run
    it). A job without a lease (or a renewal) is not judged here; it is reconnected and
    the startd's answer decides."""
    return bool(lease_s) and renewed_at is not None and lease_s + margin_s - (int(now) - renewed_at) <= 0


@dataclass
class Request:
    """One resource request: consecutive idle jobs of one autocluster, in priority order.

    The first job's ad represents them; `count` is HTCondor's _condor_RESOURCE_COUNT.
    """
    request_id: str
    job: Job
    count: int
    autocluster: int = 0
    jobs: list[Job] = field(default_factory=list)
    # Jobs before `cursor` were found taken, and no job of the queue has become free since
    # the queue's count of such events was `freed`: a request of 1,000 jobs is walked once,
    # not once per match.
    cursor: int = 0
    freed: int = -1

    def next_job(self) -> Job | None:
        """The first job of the request still waiting for a slot."""
        jobs, i = self.jobs, self.cursor
        queue = self.job.queue
        freed = queue.freed if queue is not None else -1
        if freed != self.freed or freed < 0:
            i, self.freed = 0, freed
        while i < len(jobs):
            j = jobs[i]
            if j.status == IDLE and not j.reserved:
                self.cursor = i
                return j
            i += 1
        self.cursor = i
        return None


def job_order(job: Job) -> tuple[int, int, int]:
    """HTCondor's order within a submitter: higher JobPrio first, then submission order."""
    return (-job.int_attr("JobPrio"), job.cluster, job.proc)


def idle_jobs(queue: JobQueue, submitter: str) -> list[Job]:
    """The submitter's idle jobs not yet reserved for a match, in job_order (the queue keeps
    them sorted as it changes)."""
    return [j for j in queue.idle_in_order(submitter) if not j.reserved]


def resource_requests(jobs: list[Job], autocluster_of: Callable[[Job], int]) -> list[Request]:
    """Group consecutive jobs (in priority order) of the same autocluster into one request."""
    out: list[Request] = []
    for j in jobs:
        ac = autocluster_of(j)
        if out and out[-1].autocluster == ac:
            out[-1].jobs.append(j)
            out[-1].count += 1
        else:
            out.append(Request(f"{ac}:{len(out)}", j, 1, ac, [j]))
    return out


def with_time(ad: classad2.ClassAd, now: float) -> classad2.ClassAd:
    """classad2 has no CurrentTime of its own: give the ad the pool's."""
    ad["CurrentTime"] = int(now)
    return ad


def concurrency_limits(ad: classad2.ClassAd, slot_ad: classad2.ClassAd | None = None) -> str:
    """A job's ConcurrencyLimits as one lower-case string ("" if it has none)."""
    if "ConcurrencyLimits" not in ad:
        return ""
    try:
        v = ad.lookup("ConcurrencyLimits").eval(ad, slot_ad) if slot_ad is not None else ad.eval("ConcurrencyLimits")
    except Exception:
        return ""
    return v.lower() if isinstance(v, str) else ""


def pick_job_for_slot(candidates: Iterable[Job], slot_ad: classad2.ClassAd, now: float,
                      limits: str | None = None) -> Job | None:
    """The first job, in priority order, that may start on a claim the schedd holds
    without the negotiator (qmgmt.cpp FindRunnableJob): it matches the slot both ways,
    the slot ranks it at least as well as the job the claim was made for (CurrentRank),
    and, with `limits` given (CLAIM_RECYCLING_CONSIDER_LIMITS), its ConcurrencyLimits are
    the claim's: the negotiator counted the claim against those limits and no others.
    Jobs of an autocluster that failed one of these are not tried again."""
    with_time(slot_ad, now)
    current_rank = ads.as_float(ads.get(slot_ad, "CurrentRank"))
    rank_tree = slot_ad.lookup("Rank") if current_rank is not None and "Rank" in slot_ad else None
    refused: set[object] = set()
    for job in candidates:
        if job.reserved or job.status != IDLE:
            continue
        ac = job.ac_id
        if ac is not None and ac in refused:
            continue
        ad = with_time(job.classad(), now)
        ok = ad.symmetricMatch(slot_ad)
        if ok and rank_tree is not None:
            r = ads.as_float(ads.evaluate(rank_tree, slot_ad, ad))
            ok = r is None or r >= current_rank
        if ok and limits is not None:
            ok = concurrency_limits(ad, slot_ad) == limits.lower()
        if ok:
            return job
        if ac is not None:
            refused.add(ac)
    return None


def claim_reusable(claim: ScheddClaim, now: float, worklife_s: float) -> bool:
    """CLAIM_WORKLIFE: run another job on the claim only while it is younger than this.

    0 means one job per claim; a negative value means forever.
    """
    if claim.packed_ad is None:
        return False
    if worklife_s < 0:
        return True
    return now - claim.created < worklife_s
