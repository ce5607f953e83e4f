"""The startd's job events to schedds: queued, delivered in bounded batches, retried.

A job's exit, an eviction, a lost claim or a preempting claim now ready is news its
schedd must hear. Events wait in one queue until a schedd has acknowledged them; each
call carries at most MAX_EVENTS_PER_REPORT of them, so a backlog of thousands (a busy
pool at a high time scale) goes out as several calls that each finish well inside
their deadline, instead of one that cannot. An event leaves the queue only when the
call that carried it succeeded, and it is never in two calls at once (the delivery
loop and a keepalive's delivery share one set of events in flight), so nothing is
dropped or sent twice by the startd; the schedd also takes news only for a job still
running on that very claim.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING

from daemons.core import ads
from daemons.core.rpc import describe
from daemons.pb.htcpool import common_pb2, schedd_pb2, schedd_pb2_grpc
from daemons.startd.slots import JobEvent

if TYPE_CHECKING:
    from daemons.startd.machines import Startd

EVENT_RETRY_MAX_WALL_S = 5.0
JOB_NEWS_KEEP_S = 86400.0      # pool seconds undelivered news of a job is kept after its claim is gone
MAX_EVENTS_PER_REPORT = 200    # events in one ClaimEvents call
REPORT_TIMEOUT_S = 10.0        # wall seconds for one ClaimEvents call
_EVENT_KINDS = {
    "exited": schedd_pb2.JOB_EXITED,
    "evicted": schedd_pb2.JOB_EVICTED,
    "claim_lost": schedd_pb2.CLAIM_LOST,
    "claim_ready": schedd_pb2.CLAIM_READY,
}


def batches(items: list, size: int) -> list[list]:
    """`items` in order, cut into lists of at most `size`."""
    return [items[i:i + size] for i in range(0, len(items), max(1, size))]


class ReportsMixin:
    """StartdDaemon's job-event queue and its delivery."""

    model: "Startd | None"

    def _init_reports(self) -> None:
        self._events: list[tuple[JobEvent, float]] = []    # (event, wall time queued), oldest first
        self._in_flight: set[int] = set()                   # id() of the events a call carries now
        self._flight_done = asyncio.Event()                  # set (and replaced) when such a call ends
        self._events_wake = asyncio.Event()
        self._schedd_heard = asyncio.Event()                 # a schedd called us: retry delivery now
        self.reports_sent = 0

    def _queue_event(self, ev: JobEvent) -> None:
        self._events.append((ev, self.clock.wall()))
        self._events_wake.set()

    def _current_address(self, ev: JobEvent) -> str:
        # A restarted schedd tells us its new address through KeepAlive.
        assert self.model is not None
        found = self.model.find_claim(ev.claim_id)
        if found is not None and found[1].claim is not None:
            return found[1].claim.schedd_address
        return ev.schedd_address

    def _moot(self, ev: JobEvent, queued_wall: float) -> bool:
        """News no schedd needs any more. While the claim lives its schedd keeps it alive and
        is owed the news, however long delivery takes. Once the claim is gone, news of a
        job (its exit, its eviction, its claim lost) is kept for a day: a schedd that
        restarts with the job still running on that claim must hear it finished, or it
        runs the job again, and must hear when it stopped, or it counts the run until it
        found the claim gone (a schedd may be away for as long as a job's lease, 40
        minutes by default). News of a claim without a job (a preempting claim's) is moot
        after a claim lease. (Late news is harmless: the schedd takes it only for a job
        still running on that very claim.) The wait is measured on the wall clock: a jump
        of this startd's pool clock must not age the news."""
        assert self.model is not None
        if self.model.find_claim(ev.claim_id) is not None:
            return False
        waited = (self.clock.wall() - queued_wall) * self.clock.scale
        return waited > (JOB_NEWS_KEEP_S if ev.job_id else self.cfg.claim_lease_s)

    async def _deliver_events(self) -> None:
        backoff = 0.05
        while True:
            await self._events_wake.wait()
            self._events_wake.clear()
            while self._events:
                ok, sent = await self._deliver_pending()
                if not ok:
                    # A schedd that calls us (a keepalive) is up again: retry at once instead of
                    # sleeping out a backoff that may be hundreds of pool seconds long by now.
                    self._schedd_heard.clear()
                    try:
                        await asyncio.wait_for(self._schedd_heard.wait(), timeout=backoff)
                        backoff = 0.05
                    except asyncio.TimeoutError:
                        backoff = min(EVENT_RETRY_MAX_WALL_S, backoff * 2)
                    continue
                backoff = 0.05
                if not sent and self._events:
                    # Every event left is on its way in a keepalive's delivery: wait for it.
                    try:
                        await asyncio.wait_for(self._flight_done.wait(), timeout=EVENT_RETRY_MAX_WALL_S)
                    except asyncio.TimeoutError:
                        pass

    async def _deliver_pending(self) -> tuple[bool, int]:
        """One pass over the queue: each schedd's events in batches, oldest first. A batch
        that fails stays queued, with the rest of that schedd's events behind it (they
        keep their order). Returns (no batch failed, batches sent)."""
        kept = []
        for ev, queued in self._events:
            if self._moot(ev, queued):
                self.log.info("%s: dropping undelivered news of job %s (%s): its claim is gone and its "
                              "schedd has not been reachable since", ev.slot_name, ev.job_id or "-", ev.kind)
                continue
            kept.append((ev, queued))
        self._events = kept
        by_addr: dict[str, list[JobEvent]] = defaultdict(list)
        for ev, _ in kept:
            if id(ev) not in self._in_flight:
                by_addr[self._current_address(ev)].append(ev)
        ok, sent = True, 0
        for addr, evs in by_addr.items():
            for batch in batches(evs, MAX_EVENTS_PER_REPORT):
                # A keepalive's delivery may have sent some of these meanwhile.
                queued_ids = {id(e) for e, _ in self._events}
                batch = [e for e in batch if id(e) in queued_ids and id(e) not in self._in_flight]
                if not batch:
                    continue
                try:
                    await self._send_tracked(addr, batch)
                    sent += 1
                except Exception as e:
                    self.log.warning("could not report %d job event(s) to the schedd at %s (%s); retrying",
                                     len(batch), addr, describe(e))
                    ok = False
                    break
        return ok, sent

    async def _send_tracked(self, address: str, evs: list[JobEvent], wait_for_ready: bool = False) -> None:
        """Send `evs` in one call, marked in flight meanwhile; on success they leave the queue."""
        ids = {id(e) for e in evs}
        self._in_flight |= ids
        try:
            await self._send_events(address, evs, wait_for_ready=wait_for_ready)
        finally:
            self._in_flight -= ids
            done, self._flight_done = self._flight_done, asyncio.Event()
            done.set()
        self._events = [(e, q) for e, q in self._events if id(e) not in ids]
        self.reports_sent += 1

    def _news_wait_s(self) -> float:
        """Wall seconds a keepalive may wait on news delivery: a small part of a claim lease.
        The schedd gives up a claim whose keepalive goes unanswered for a lease, and at a
        high time scale a lease is a fraction of a wall second; news not delivered in time
        keeps its claim from being called gone, and the next keepalive tries again."""
        return min(EVENT_RETRY_MAX_WALL_S, self.cfg.claim_lease_s / max(self.clock.scale, 1e-9) / 6)

    async def _deliver_news_of(self, claim_ids: set[str], address: str) -> None:
        """Before a keepalive says these claims are gone: deliver what is queued about them."""
        loop = asyncio.get_running_loop()
        budget = self._news_wait_s()
        deadline = loop.time() + budget
        # News of these claims on its way already (a batch of the delivery loop): let it end.
        while any(id(e) in self._in_flight for e, _ in self._events if e.claim_id in claim_ids):
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._flight_done.wait(), timeout=left)
            except asyncio.TimeoutError:
                break
        mine = [e for e, _ in self._events if e.claim_id in claim_ids and id(e) not in self._in_flight]
        if not mine or not address:
            return
        try:
            # The schedd is calling us, so it is up: wait for the channel to reconnect to it.
            for batch in batches(mine, MAX_EVENTS_PER_REPORT):
                await asyncio.wait_for(self._send_tracked(address, batch, wait_for_ready=True),
                                       timeout=max(0.01, deadline - loop.time()))
        except Exception as e:
            self.log.info("could not deliver %d job event(s) to the schedd at %s with its keepalive: %s", len(mine),
                          address, describe(e))

    async def _send_events(self, address: str, evs: list[JobEvent], wait_for_ready: bool = False) -> None:
        stub = schedd_pb2_grpc.ScheddStub(self.channels.get(address))
        req = schedd_pb2.ClaimEventsRequest(events=[
            schedd_pb2.ClaimEvent(claim_id=e.claim_id, job_id=e.job_id, kind=_EVENT_KINDS[e.kind],
                                  pool_time=e.pool_time, reason=e.reason, slot_name=e.slot_name,
                                  job_start=e.job_start,
                                  slot_ad=common_pb2.ClassAd(text=ads.ad_text(e.slot_ad)) if e.slot_ad else None)
            for e in evs])
        await stub.ClaimEvents(req, timeout=REPORT_TIMEOUT_S, wait_for_ready=wait_for_ready)
