"""The schedd's claim life cycle: claim a matched slot, activate a job, take its exit,
reuse or release the claim, keep claims alive, and give up on lost ones.

A job is marked Running before the startd is asked to start it (a zero-length job's
exit can arrive before the activation reply); a completion is committed, then the job
moves to the history.
"""
from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from dataclasses import replace
from typing import Callable, Iterable

import classad2
import grpc

from daemons.core import ads
from daemons.core.crashpoints import crashpoint
from daemons.core.rpc import describe
from daemons.pb.htcpool import common_pb2, schedd_pb2, startd_pb2, startd_pb2_grpc
from daemons.schedd import machine_attrs, scheduling, txlog
from daemons.schedd.activation import activation_delay
from daemons.schedd.jobqueue import HEADER_KEY, Job
from daemons.schedd.scheduling import ScheddClaim
from daemons.schedd.submit import COMPLETED, IDLE, RUNNING

RPC_TIMEOUT_S = 10.0
_WHERE = ("StartdIpAddr", "MyAddress", "Name")
MAX_KEEPALIVES_IN_FLIGHT = 3    # unanswered keepalives to one startd at a time
# A keepalive names at most this many claims per call, the calls to one startd made one
# after another. One call naming all of a startd's claims (46,000 in a 50,000-slot pool) was
# a 5 MB message that the startd held twice over while reading it, its peak memory's
# largest moment; HTCondor's schedd, for its part, sends an ALIVE for each claim.
KEEPALIVE_CLAIMS_PER_CALL = 5000


def _strip_addr(text: str) -> str:
    return text.strip().strip("<>").split("?", 1)[0]


def _quote(s: str) -> str:
    return ads.literal(s)


class ClaimsMixin:
    """ScheddDaemon's claim methods."""

    def _startd(self, address: str) -> startd_pb2_grpc.StartdStub:
        return startd_pb2_grpc.StartdStub(self.channels.get(address))

    def _recycling_limits(self, limits: str) -> str | None:
        """The ConcurrencyLimits a job must have to start on a claim without the negotiator
        (CLAIM_RECYCLING_CONSIDER_LIMITS), or None if they are not considered."""
        return limits if self.cfg.claim_recycling_consider_limits else None

    def _contact(self, job: Job, claim_id: str, slot_ad_text: str, submitter: str,
                 consumed: dict[str, int] | None = None, limits: str = "",
                 slot_ad: classad2.ClassAd | None = None, where: tuple[str, str] = ("", "")) -> None:
        """Claim a matched slot and start the job, in the background. With
        MAX_PENDING_STARTD_CONTACTS the claims wait in one queue (HTCondor's startd contact
        queue) and that many workers take them in order: a cycle's 50,000 matches are 50,000
        queue entries, not 50,000 tasks waiting on a semaphore. `limits`: the concurrency
        limits the negotiator counted this match against ("" for leftovers, which the
        negotiator never saw). `slot_ad`: the slot ad already parsed, if it is. `where`: the
        slot's name and its startd's address, if the negotiator gave them; the text of the
        slot ad is then not kept while the claim waits (a queue of 46,000 matches kept 80 MB
        of them)."""
        name, address = where
        if slot_ad is None and name and address:
            # Every slot of a startd has the same address: one string for them all.
            slot_ad_text, where = "", (name, sys.intern(_strip_addr(address)))
        else:
            where = ("", "")
        item = (job, claim_id, slot_ad_text, submitter, consumed, limits, slot_ad, where)
        limit = self.cfg.max_pending_startd_contacts
        if limit <= 0:
            self.spawn(self._contact_one(item), f"schedd:claim:{job.id}")
            return
        self._contact_queue.append(item)
        while self._contact_workers < limit and self._contact_workers < len(self._contact_queue):
            self._contact_workers += 1
            self.spawn(self._contact_worker(), "schedd:contacts")

    async def _contact_worker(self) -> None:
        try:
            while self._contact_queue:
                item = self._contact_queue.popleft()
                try:
                    await self._contact_one(item)
                except asyncio.CancelledError:
                    raise
                except Exception as e:   # one claim's failure is that claim's, not the queue's
                    item[0].reserved = False
                    self.note_error("schedd:claim", e, f"claiming a slot for job {item[0].id} failed: {describe(e)}")
        finally:
            self._contact_workers -= 1

    async def _contact_one(self, item: tuple) -> None:
        """One startd contact, counted while it is pending (the status page's startd_contacts)."""
        counts = self.contact_counts
        counts["pending"] += 1
        counts["most_pending"] = max(counts["most_pending"], counts["pending"])
        try:
            await self._claim_and_run_now(*item)
        finally:
            counts["pending"] -= 1

    def _where(self, job: Job, slot_ad_text: str, slot_ad: classad2.ClassAd | None) -> tuple[str, str] | None:
        """The slot's name and its startd's address, from its ad: read from the text when they
        are plain strings (a match's ad is not needed parsed for anything else). None, and
        the job free again, if the ad does not parse."""
        known = ads.string_values(slot_ad_text, _WHERE) if slot_ad is None else None
        if known is None and slot_ad is None:
            try:
                slot_ad = ads.parse_ad(slot_ad_text, "matched slot ad")
            except ads.AdError as e:
                job.reserved = False
                self.log.warning("match for job %s carries a bad slot ad: %s", job.id, e)
                return None
        if known is None:
            assert slot_ad is not None
            known = {n: v for n in _WHERE if isinstance(v := ads.get(slot_ad, n), str)}
        return known.get("Name") or "?", _strip_addr(known.get("StartdIpAddr") or known.get("MyAddress") or "")

    async def _claim_and_run_now(self, job: Job, claim_id: str, slot_ad_text: str, submitter: str,
                                 consumed: dict[str, int] | None = None, limits: str = "",
                                 slot_ad: classad2.ClassAd | None = None,
                                 where: tuple[str, str] = ("", "")) -> None:
        slot_name, addr = where
        if not addr:
            found = self._where(job, slot_ad_text, slot_ad)
            if found is None:
                return
            slot_name, addr = found
        try:
            reply = await self.startd_calls.request_claim(addr, startd_pb2.RequestClaimRequest(
                claim_id=claim_id, job_ad=common_pb2.ClassAd(text=job.text()), schedd_name=self.name,
                schedd_address=self.address, submitter=submitter, resources=consumed or {}))
        except grpc.aio.AioRpcError as e:
            job.reserved = False
            self.log.warning("could not request a claim on %s at %s for job %s: %s", slot_name, addr, job.id,
                             describe(e))
            return
        self._heard(addr, self.clock.now())
        if not reply.ok:
            job.reserved = False
            self.counters["claims_refused"] += 1
            self.log.info("claim on %s for job %s refused: %s", slot_name, job.id, reply.reason)
            return
        now = self.clock.now()
        if reply.pending:
            # A preempting claim: the job waits (reserved) until the startd has vacated the slot.
            claim = ScheddClaim(reply.claim_id, slot_name, addr, submitter, now, None, job.key, now, pending=True,
                                limits=limits)
            self.claims[claim.id] = claim
            self.counters["claims"] += 1
            self.log.info("Claim on %s for job %s accepted; waiting while the startd preempts its current claim",
                          slot_name, job.id)
            return
        claimed_ad = ads.parse_ad(reply.slot_ad.text, "claimed slot ad")
        claim = ScheddClaim(reply.claim_id, str(ads.get(claimed_ad, "Name", slot_name)), addr, submitter, now,
                            self.slot_packer.packed(reply.slot_ad.text), None, now, limits=limits)
        self.claims[claim.id] = claim
        self.counters["claims"] += 1
        self.log.info("Claimed %s for job %s (%s)", claim.slot_name, job.id, submitter)
        if reply.leftover_claim_id and reply.HasField("leftover_ad"):
            self.spawn(self._claim_leftover(reply.leftover_ad.text, reply.leftover_claim_id, submitter),
                       f"schedd:leftover:{slot_name}")
        await self._activate(claim, job, claimed_ad)

    async def _claim_leftover(self, leftover_text: str, claim_id: str, submitter: str) -> None:
        """CLAIM_PARTITIONABLE_LEFTOVERS: claim what is left of the p-slot for another job at once."""
        slot_ad = ads.parse_ad(leftover_text, "leftover slot ad")
        # schedd.cpp drops MatchedConcurrencyLimits from the leftover ad: the negotiator
        # counted only the first match, so only a job without limits may take the rest.
        job = scheduling.pick_job_for_slot(self.queue.idle_in_order(submitter), slot_ad, self.clock.now(),
                                           self._recycling_limits(""))
        if job is None:
            return
        job.reserved = True
        job.matched_at = 0.0   # no match of its own: not counted in the activation delays
        self._contact(job, claim_id, leftover_text, submitter, slot_ad=slot_ad)

    async def _activate(self, claim: ScheddClaim, job: Job, slot_ad: classad2.ClassAd) -> None:
        """Start `job` on `claim`, whose slot ad `slot_ad` is (parsed: the claim keeps it packed).

        The job is marked Running *before* the startd is asked, as HTCondor's schedd
        does when it spawns the shadow: a zero-length job's exit can arrive before the
        activation reply, and must find its job running on this claim. If activation
        fails the job goes back to Idle.
        """
        if self.queue.jobs.get(job.key) is not job or job.status != IDLE:
            # Held or removed while its claim was being made: it must not run. The claim
            # serves another idle job of the submitter that fits, or goes back.
            job.reserved = False
            other = scheduling.pick_job_for_slot(self.queue.idle_in_order(claim.submitter), slot_ad,
                                                 self.clock.now(), self._recycling_limits(claim.limits))
            self.log.info("job %s is no longer idle (status %d) now that %s is claimed for it; %s", job.id,
                          job.status, claim.slot_name, f"job {other.id} takes the claim" if other else
                          "releasing the claim")
            if other is None:
                await self._release_claim(claim, f"job {job.id} was held or removed before it started")
                return
            job = other
        now = int(self.clock.now())
        changes: dict[str, str | None] = {
            "JobStatus": str(RUNNING),
            "EnteredCurrentStatus": str(now),
            "JobCurrentStartDate": str(now),
            "NumJobStarts": str(job.int_attr("NumJobStarts") + 1),
            "JobRunCount": str(job.int_attr("JobRunCount") + 1),
            "NumJobMatches": str(job.int_attr("NumJobMatches") + 1),
            "LastMatchTime": str(now),
            "LastJobLeaseRenewal": str(now),    # as HTCondor's schedd sets it when the shadow starts
            "RemoteHost": _quote(claim.slot_name),
            "ClaimId": _quote(claim.id),
            "StartdIpAddr": _quote(f"<{claim.startd_address}>"),
            "LastRejMatchReason": None,
        }
        if "JobStartDate" not in job.attrs:
            changes["JobStartDate"] = str(now)
        changes.update(machine_attrs.on_start(job.attrs, slot_ad, self.cfg.system_job_machine_attrs,
                                              self.cfg.system_job_machine_attrs_history_length))
        before = {k: job.attrs.get(k) for k in changes}
        job_ad = job.text()
        claim.job = job.key
        claim.job_lease = scheduling.job_lease_s(job)
        self.note_job_lease(claim.job_lease, job.key)
        n = self.change(job, changes)
        # A query shows the job Running from here on, while the startd is being asked: its
        # record goes to the OS now, so a schedd killed meanwhile does not forget the start.
        self.txlog.write_soon()
        crashpoint("schedd.start.before_activate")
        job.reserved = False
        try:
            reply = await self.startd_calls.activate_claim(claim.startd_address, startd_pb2.ActivateClaimRequest(
                claim_id=claim.id, job_ad=common_pb2.ClassAd(text=job_ad)))
            ok, reason, started = reply.ok, reply.reason, reply.start_time
            self._heard(claim.startd_address, self.clock.now())
        except grpc.aio.AioRpcError as e:
            ok, reason, started = False, describe(e), 0.0
        if not ok:
            self.log.warning("could not start job %s on %s: %s", job.id, claim.slot_name, reason)
            claim.job = None
            if job.key in self.queue.jobs and job.attrs.get("ClaimId") == _quote(claim.id):
                self.change(job, before)
            await self._release_claim(claim, f"activation failed: {reason}")
            await self.txlog.commit()
            return
        self.counters["jobs_started"] += 1
        if job.matched_at > 0:
            # Only a job started on a negotiator's match (not a leftover or a reused claim).
            self.activation_delay.observe(activation_delay(job.matched_at, started, self.clock.now()))
            job.matched_at = 0.0
        self.log.info("Started job %s on %s", job.id, claim.slot_name)
        self.trigger("advertise")
        await self.txlog.commit(n)

    def rotate_machine_attrs(self, job: Job) -> dict[str, str]:
        """A job leaving its slot unfinished: shift its MachineAttr<X><N> history by one."""
        return machine_attrs.on_leave(job.attrs, self.cfg.system_job_machine_attrs,
                                      self.cfg.system_job_machine_attrs_history_length)

    async def _release_claim(self, claim: ScheddClaim, reason: str) -> None:
        self.claims.pop(claim.id, None)
        try:
            await self.startd_calls.release_claim(claim.startd_address, claim.id, reason)
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
            slot_ad = claim.slot_ad
            assert slot_ad is not None
            job = scheduling.pick_job_for_slot(self.queue.idle_in_order(claim.submitter),
                                               slot_ad, now, self._recycling_limits(claim.limits))
            if job is not None:
                job.reserved = True
                job.matched_at = 0.0   # no match of its own: not counted in the activation delays
                self.counters["claim_reuses"] += 1
                self.log.info("Reusing claim on %s for job %s", claim.slot_name, job.id)
                await self._activate(claim, job, slot_ad)
                return
            reason = "no idle job matches the slot" + (
                f" with ConcurrencyLimits {claim.limits!r}" if self.cfg.claim_recycling_consider_limits else "")
        elif claim.packed_ad is None:
            reason = "claim reconnected after a restart"
        else:
            reason = f"CLAIM_WORKLIFE ({self.cfg.claim_worklife_s:.0f} s) reached"
        await self._release_claim(claim, reason)

    async def _claim_ready(self, claim: ScheddClaim, slot_ad_text: str) -> None:
        """A preempting claim now holds its slot: start the job that waited for it."""
        slot_ad: classad2.ClassAd | None = None
        try:
            slot_ad = ads.parse_ad(slot_ad_text, "claimed slot ad")
            claim.packed_ad = self.slot_packer.packed(slot_ad_text)
        except ads.AdError as e:
            self.log.warning("claim on %s is ready but carries a bad slot ad: %s", claim.slot_name, e)
            claim.packed_ad = None
        claim.pending = False
        claim.created = self.clock.now()
        key, claim.job = claim.job, None
        job = self.queue.jobs.get(key) if key is not None else None
        self.log.info("Claimed %s for job %s (%s) after preemption", claim.slot_name, job.id if job else "?",
                      claim.submitter)
        if job is None or slot_ad is None:
            if job is not None:
                job.reserved = False
            await self._release_claim(claim, "the job that waited for the slot is gone")
            return
        await self._activate(claim, job, slot_ad)

    async def on_claim_events(self, events: Iterable[schedd_pb2.ClaimEvent]) -> int:
        accepted = 0
        finished: list[Job] = []
        freed: list[ScheddClaim] = []
        now = self.clock.now()
        for ev in events:
            claim = self.claims.get(ev.claim_id)
            if claim is not None:
                self._heard(claim.startd_address, now)
            if claim is not None and claim.pending:
                # News of a preempting claim: the slot is ours now, or it will never be.
                if ev.kind == schedd_pb2.CLAIM_READY:
                    accepted += 1
                    self.spawn(self._claim_ready(claim, ev.slot_ad.text), f"schedd:ready:{claim.slot_name}")
                else:
                    self.claims.pop(claim.id, None)
                    waiting = self.queue.jobs.get(claim.job) if claim.job is not None else None
                    if waiting is not None:
                        waiting.reserved = False
                    self.log.info("Claim on %s will not be ours: %s", claim.slot_name, ev.reason or "lost")
                continue
            job = self.queue.get(ev.job_id)
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
                **(self.renewed_lease(job) or {}),
            }
            if ev.kind == schedd_pb2.JOB_EXITED:
                common.update({"JobStatus": str(COMPLETED), "CompletionDate": str(t), "ExitCode": "0",
                               "ExitBySignal": "false", "JobFinishedHookDone": str(t)})
                finished.append((job, common))
                self.counters["jobs_completed"] += 1
                self.log.info("Job %s completed on %s after %.0f s", job.id, ev.slot_name, ran)
                if claim is not None:
                    claim.job = None
                    freed.append(claim)
            else:
                why = ev.reason or ("claim lost" if ev.kind == schedd_pb2.CLAIM_LOST else "evicted")
                common.update({"JobStatus": str(IDLE), "LastVacateTime": str(t), "VacateReason": _quote(why)})
                common.update(self.rotate_machine_attrs(job))
                self.change(job, common)
                self.claims.pop(ev.claim_id, None)
                self.counters["jobs_evicted"] += 1
                self.log.info("Job %s on %s returned to the queue: %s", job.id, ev.slot_name, why)
        if finished:
            # Completed, numbered for the history and out of the queue in one transaction.
            self.retire(finished)
            crashpoint("schedd.completion.before_commit")
        await self.txlog.commit()
        if finished:
            crashpoint("schedd.completion.after_commit")
        self.write_history()
        if finished:
            crashpoint("schedd.completion.after_history")
        for claim in freed:
            self.spawn(self._after_job(claim), f"schedd:after:{claim.slot_name}")
        self.trigger("advertise")
        return accepted

    def retire(self, finished: list[tuple[Job, dict[str, str | None]]]) -> int:
        """Give jobs their final attributes and move them out of the queue, in one log
        transaction that also numbers their history records; returns the transaction.
        The records reach the history file once it is committed (write_history)."""
        mark = len(self.queue.retired)
        lines = self.queue.retire_jobs(finished)
        txn = self.txlog.append(lines)
        self.queue.retired[mark:] = [replace(r, txn=txn) for r in self.queue.retired[mark:]]
        return txn

    def write_history(self) -> None:
        """Append the history records whose transactions are on disk (in record order)."""
        durable = [r for r in self.queue.retired if r.txn <= self.txlog.synced]
        if not durable:
            return
        self.history.append(durable)
        self.queue.retired = [r for r in self.queue.retired if r.txn > self.txlog.synced]

    # ---- keepalive and reconnection ------------------------------------------------
    async def keepalive(self) -> None:
        """Keep every claim alive, one call per startd, each on its own: a startd that does
        not answer (frozen, partitioned) must not hold up the keepalives of the others,
        whose leases would lapse meanwhile. A keepalive still unanswered after an
        ALIVE_INTERVAL does not hold up the next to that startd either (a startd that is
        only slow, delivering news before it answers, renews the leases the moment it reads
        the next one), up to MAX_KEEPALIVES_IN_FLIGHT; beyond that, claims whose lease (and
        the pool's lag) has passed are given up."""
        by_addr: dict[str, list[ScheddClaim]] = defaultdict(list)
        running = False
        for c in self.claims.values():
            by_addr[c.startd_address].append(c)
            running = running or c.job is not None
        now = self.clock.now()
        if running:
            self.renew_job_leases(now)
        for address, claims in by_addr.items():
            pending = [(t0, t) for t0, t in self._keepalives.get(address, []) if not t.done()]
            self._keepalives[address] = pending
            if pending and (len(pending) >= MAX_KEEPALIVES_IN_FLIGHT
                            or now - pending[-1][0] < self.keepalive_interval_s):
                await self._give_up_silent(address, claims, now, lambda silent, a=address: (
                    f"startd at {a} has not answered a keepalive for {silent:.0f} s"))
                continue
            trip = max(self.round_trips.get(address, now), self.startd_calls.oldest_out_s(address, now),
                       now - pending[0][0] if pending else 0.0)
            pending.append((now, self.spawn(self._keepalive_one(address, claims, trip),
                                            f"schedd:keepalive:{address}")))
        for address in [a for a, p in self._keepalives.items() if a not in by_addr and all(t.done() for _, t in p)]:
            del self._keepalives[address]

    async def _keepalive_one(self, address: str, claims: list[ScheddClaim], round_trip: float = 0.0) -> None:
        """One keepalive (in calls of KEEPALIVE_CLAIMS_PER_CALL claims); `round_trip` (pool
        s), the longest recent round trip to that startd or the age of the oldest call still
        out there, is what the startd stretches this schedd's leases by (a claim it grants
        now is named here only that much later)."""
        for first in range(0, len(claims), KEEPALIVE_CLAIMS_PER_CALL):
            part = claims[first:first + KEEPALIVE_CLAIMS_PER_CALL]
            now = self.clock.now()
            try:
                reply = await self._startd(address).KeepAlive(startd_pb2.KeepAliveRequest(
                    claim_ids=[c.id for c in part], schedd_address=self.address,
                    round_trip=round_trip), timeout=RPC_TIMEOUT_S)
            except grpc.aio.AioRpcError as e:
                failure = describe(e)   # (`e` is unbound once the except clause ends)
                await self._give_up_silent(address, claims[first:], now, lambda silent: (
                    f"startd at {address} unreachable for {silent:.0f} s ({failure})"))
                return
            answered = self.clock.now()
            self.round_trips.add(address, answered, answered - now)
            self._heard(address, now)
            unknown, idle = set(reply.unknown_claim_ids), set(reply.idle_claim_ids)
            for c in part:
                if c.id not in self.claims:
                    continue     # given up while the call was on its way
                if c.id in unknown:
                    await self._claim_lost(c, "the startd no longer holds the claim")
                    continue
                c.last_alive_ok = max(c.last_alive_ok, now)   # an older call may answer after a newer one
                if c.id in idle and c.reconnected and c.job is not None:
                    await self._never_started(c)

    async def _give_up_silent(self, address: str, claims: list[ScheddClaim], now: float,
                              why: Callable[[float], str]) -> None:
        """Give up the claims at `address` not heard of for longer than their lease. A startd
        (or this schedd) that runs behind answers late: only a lease's worth of silence beyond
        the pool's own lag and the path's round trip means it is gone. `why(silent)`: the reason."""
        lease = self.cfg.claim_lease_s
        slack = self.lag_allowance_s() + self.round_trips.get(address, now)
        heard = self._startd_heard.get(address, 0.0)
        for c in claims:
            silent = now - max(c.last_alive_ok, heard)
            if c.id in self.claims and silent > c.lease_s(lease) + slack:
                await self._claim_lost(c, why(silent))

    def note_job_lease(self, lease_s: float, job: tuple[int, int] | None) -> None:
        """A job starts (or is reconnected) with this JobLeaseDuration: keep claims alive at
        least three times per lease, as HTCondor's schedd does (RecomputeAliveInterval: the
        shortest lease seen, over three, never more often than every 10 s, only ever
        lowered), so a short job lease does not lapse between two keepalives."""
        if lease_s <= 0:
            return
        interval = max(10.0, float(int(lease_s) // 3))
        if interval >= self.keepalive_interval_s:
            return
        self.keepalive_interval_s = interval
        self.set_interval("keepalive", interval)
        self.log.info("keepalive interval lowered to %.0f s (job %s has a JobLeaseDuration of %.0f s)",
                      interval, ".".join(map(str, job)) if job else "?", lease_s)

    def _heard(self, address: str, now: float) -> None:
        """The startd at `address` answered or called: it is up. Its claims are not given up
        for silence while it is heard from (it reports the claims it drops itself)."""
        if now > self._startd_heard.get(address, 0.0):
            self._startd_heard[address] = now

    def renew_job_leases(self, now: float) -> None:
        """Record that the running jobs' leases were renewed now. HTCondor's schedd writes
        LastJobLeaseRenewal into every running job's ad each alive interval, in one
        non-durable transaction; here one header record stands for all of them (a pool of
        10,000 running jobs at TIME_SCALE 1000 would otherwise log 30,000 lines a second). A
        restarted schedd reads it to tell which jobs' leases ran out while it was down."""
        self.queue.lease_renewal = int(now)
        self.txlog.append([txlog.op_set(HEADER_KEY, "LastJobLeaseRenewal", str(int(now)))])
        self.txlog.write_soon()    # non-durable, as HTCondor commits it: a crash only makes it older

    def renewed_lease(self, job: Job) -> dict[str, str] | None:
        """The running job's LastJobLeaseRenewal as its ad shows it, when the queue's renewal
        of every running job is later than the job's own (set when it started)."""
        renewal = self.queue.lease_renewal
        return {"LastJobLeaseRenewal": str(renewal)} if renewal > job.int_attr("LastJobLeaseRenewal") else None

    def back_to_idle(self, job: Job, ran: float, reason: str) -> int:
        """A run that ended without an exit: the job is idle again, `ran` pool seconds of
        it counted (RemoteWallClockTime, CumulativeSlotTime); returns the transaction."""
        t = int(self.clock.now())
        return self.change(job, {"JobStatus": str(IDLE), "EnteredCurrentStatus": str(t),
                                 "LastRemoteHost": job.attrs.get("RemoteHost"), "RemoteHost": None,
                                 "ClaimId": None, "LastVacateTime": str(t), "VacateReason": _quote(reason),
                                 "RemoteWallClockTime": repr(float(job.attrs.get("RemoteWallClockTime", "0")) + ran),
                                 "CumulativeSlotTime": repr(float(job.attrs.get("CumulativeSlotTime", "0")) + ran),
                                 **(self.renewed_lease(job) or {}), **self.rotate_machine_attrs(job)})

    async def _never_started(self, claim: ScheddClaim) -> None:
        """A claim rebuilt after a restart runs no job at its startd, which owes us no news
        of one: the job was marked running (before the startd is asked, as HTCondor's schedd
        does when it spawns the shadow) and this schedd died before the activation reached
        the startd. As a shadow whose reconnect finds no starter, the job goes back to the
        queue, not having run, and the claim is let go."""
        job = self.queue.jobs.get(claim.job) if claim.job else None
        reason = "its claim was found running no job after the schedd's restart"
        claim.job = None
        if job is not None and job.status == RUNNING and job.attrs.get("ClaimId") == _quote(claim.id):
            n = self.back_to_idle(job, 0.0, reason)
            self.log.info("Job %s on %s returned to the queue: %s", job.id, claim.slot_name, reason)
            await self.txlog.commit(n)
            self.trigger("advertise")
        await self._release_claim(claim, "reconnected, running no job")

    async def _claim_lost(self, claim: ScheddClaim, reason: str) -> None:
        self.claims.pop(claim.id, None)
        job = self.queue.jobs.get(claim.job) if claim.job else None
        if claim.pending:
            if job is not None:
                job.reserved = False   # it waited for a preempting claim that will not come
            return
        # Only a job still running on *this* claim goes back: it may already run on another.
        if job is None or job.status != RUNNING or job.attrs.get("ClaimId") != _quote(claim.id):
            return
        # The run counts until now, as the shadow's wall clock would when it gives up the claim.
        now = self.clock.now()
        n = self.back_to_idle(job, max(0.0, now - job.int_attr("JobCurrentStartDate", int(now))), reason)
        self.log.info("Job %s on %s returned to the queue: %s", job.id, claim.slot_name, reason)
        await self.txlog.commit(n)
        self.trigger("advertise")
