"""The schedd's side of negotiation: resource requests out, matches and rejections in.

A session per submitter and cycle: the jobs' autoclusters become resource requests
(scheduling.resource_requests), handed out in batches; a match reserves a job and
starts its claim (claims.py); a rejection skips the rest of that autocluster for the
cycle, as HTCondor's schedd does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from daemons.core import ads
from daemons.schedd import scheduling
from daemons.schedd.scheduling import Request


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
    # Each request's ConcurrencyLimits, read at its first match: the ones the negotiator
    # counted its matches against (a request of 1,000 jobs is not evaluated 1,000 times).
    limits: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {r.request_id: r for r in self.requests}



class NegotiationMixin:
    """ScheddDaemon's negotiation methods (kept apart so each part reads in one sitting)."""

    def begin_negotiation(self, submitter: str, cycle: int, significant: list[str] | None = None,
                          job_constraint: str = "", skip: int = 0) -> NegotiationSession:
        """A submitter's session. `skip`: the negotiator already holds that many of its first
        requests, prefetched in a session this schedd no longer has (a new stream): they are
        left out, as if handed out already."""
        if significant and self.ac.update_negotiator_attrs(significant):
            self.log.info("significant attributes from the negotiator grew (%d now): every autocluster id "
                          "is recomputed", len(self.ac.negotiator_attrs))
        n0, t0 = self.ac.ids_assigned, self.ac.assign_seconds
        if job_constraint.strip():
            # NEGOTIATOR_JOB_CONSTRAINT: HTCondor's schedd offers only the jobs that satisfy it
            # (a list of its own, built for this session).
            jobs = scheduling.idle_jobs(self.queue, submitter)
            try:
                tree = ads.parse_expr(job_constraint, "NEGOTIATOR_JOB_CONSTRAINT")
                now = self.clock.now()
                jobs = [j for j in jobs if ads.is_true(ads.evaluate(tree, scheduling.with_time(j.classad(), now)))]
            except ads.AdError as e:
                self.log.warning("ignoring the negotiator's job constraint: %s", e)
            requests = scheduling.resource_requests(jobs, self.ac.assign)
        else:
            # Kept in step with the queue (requests.py), not rebuilt for every cycle.
            requests = self.request_lists.requests(submitter)
        idle = sum(r.count for r in requests)
        acs = {r.autocluster for r in requests}
        autoclusters = len(acs)
        self.ac_stats.note(cycle, self.clock.now(), acs, idle, self.ac.ids_assigned - n0,
                           self.ac.assign_seconds - t0)
        session = NegotiationSession(submitter, cycle, requests, position=min(skip, len(requests)))
        self.counters["negotiations"] += 1
        self.log.info("Negotiating for %s (cycle %d): %d idle job(s) in %d autocluster(s), %d request(s)",
                      submitter, cycle, idle, autoclusters, len(requests))
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
                 consumed: dict[str, int] | None = None, where: tuple[str, str] = ("", ""),
                 now: float | None = None) -> None:
        """`where`: the slot's name and its startd's address, as the negotiator read them
        (empty if it did not); the match's slot ad text is then not kept for the claim.
        `now`: the pool time it arrived, if the caller read the clock for a batch of them."""
        now = self.clock.now() if now is None else now
        req = session.by_id.get(request_id)
        session.matches += 1
        job = req.next_job() if req is not None else None
        # The negotiator counted this match against the request's concurrency limits.
        limits = ""
        if req is not None:
            limits = session.limits.get(request_id)
            if limits is None:
                limits = session.limits[request_id] = scheduling.concurrency_limits(req.job.classad())
            self.ac_rejections.pop(req.autocluster, None)
        if job is None:
            # The job started meanwhile (on a leftover or a reused claim): the match is
            # the submitter's, so another of its idle jobs that fits the slot takes it.
            try:
                slot_ad = ads.parse_ad(slot_ad_text, "matched slot ad")
            except ads.AdError:
                return
            job = scheduling.pick_job_for_slot(self.queue.idle_in_order(session.submitter), slot_ad,
                                               now, self._recycling_limits(limits))
            if job is None:
                self.log.info("match for request %s arrived, but no idle job of %s fits %s now; not used",
                              request_id, session.submitter, ads.get(slot_ad, "Name"))
                return
        job.reserved = True
        job.matched_at = now
        self.counters["matches"] += 1
        self._contact(job, claim_id, slot_ad_text, session.submitter, consumed or None, limits, where=where)

    def on_reject(self, session: NegotiationSession, request_id: str, reason: str,
                  now: float | None = None) -> None:
        """Skip the rest of the autocluster this cycle; its jobs all carry the reason."""
        req = session.by_id.get(request_id)
        session.rejections += 1
        if req is None:
            return
        session.rejected.add(req.autocluster)
        self.ac_rejections[req.autocluster] = (reason, int(self.clock.now() if now is None else now))
