"""The startd daemon: the Startd model behind gRPC, on pool time.

Side effects live here: a timer per running job, collector updates shortly after
any state change (coalesced and held for a claim burst: updates.py) and in full every
UPDATE_INTERVAL, and a queue of job events delivered to schedds with retries
(reports.py), so a schedd that is down or restarting still hears that its job finished.
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, Iterator

import classad2
import grpc

from daemons.core import ads
from daemons.core.clock import PoolClock, PoolTimer, TimerQueue
from daemons.core.common import CommonConfig
from daemons.core.daemon import Daemon
from daemons.pb.htcpool import startd_pb2_grpc
from daemons.startd.config import StartdConfig
from daemons.startd import policy, preemption, refresh
from daemons.startd.drain import DrainError, cancel_drain, check_drained, idle_claims, start_drain
from daemons.startd.reports import ReportsMixin
from daemons.startd.updates import UpdatesMixin, machine_ad_texts
from daemons.startd.service import StartdService
from daemons.startd.machines import Startd
from daemons.startd.slots import CLAIMED, ClaimOutcome


def host_names(base: str, machines: int, prefix: str | None = None) -> list[str]:
    """One machine keeps the host's own name; many get distinct numbered names."""
    if machines == 1 and prefix is None:
        return [base]
    p = prefix if prefix is not None else f"{base}-"
    width = max(3, len(str(machines)))
    return [f"{p}{i:0{width}d}" for i in range(1, machines + 1)]


class StartdDaemon(UpdatesMixin, ReportsMixin, Daemon):
    role = "startd"
    my_type = "StartDaemon"

    def __init__(self, common: CommonConfig, cfg: StartdConfig, hosts: list[str],
                 clock: PoolClock | None = None, seed: int = 0,
                 machine_groups: list[tuple[list[str], StartdConfig]] | None = None) -> None:
        # The machines of each configuration: `cfg`'s, then those of --machine-group. The
        # process's own knobs (leases, intervals) are `cfg`'s; a machine's slots and policy
        # are its group's.
        self.groups = [(hosts, cfg), *(machine_groups or [])]
        self.hosts = [h for group_hosts, _ in self.groups for h in group_hosts]  # (default_name() needs them)
        super().__init__(common, clock)
        self.cfg = cfg
        self.seed = seed
        self.model: Startd | None = None
        self._timers: dict[str, PoolTimer] = {}   # drains' evictions and preemptions, by key
        # Running jobs' ends, keyed by their claims' numbers: one loop timer for all of them (a
        # timer each cost about 700 bytes per busy slot); whether an entry still stands is
        # read from the claim (_job_still_ends), so the queue keeps no dictionary of them.
        self._job_ends = TimerQueue(self.clock, self._job_done, self.log, current=self._job_still_ends)
        self._init_updates()
        self._init_reports()
        self._event_task: asyncio.Task | None = None
        self.jobs_started = 0
        self.jobs_finished = 0
        self.jobs_evicted = 0
        self.claims_granted = 0
        self.claims_refused = 0
        self.job_ads_reused = 0     # activations served by their claim's parse (service.py)
        self.ads_refreshed = 0      # slot ads refreshed, not sent whole (refresh.py)

    def default_name(self) -> str:
        return f"startd@{self.hosts[0]}" if len(self.hosts) == 1 else f"startd@{self.hosts[0]}+{len(self.hosts) - 1}"

    def add_services(self, server: grpc.aio.Server) -> None:
        startd_pb2_grpc.add_StartdServicer_to_server(StartdService(self), server)

    async def on_start(self) -> None:
        own_hosts = self.groups[0][0]
        self.model = Startd(own_hosts, self.cfg, self.address, self.clock.now(), machine_groups=self.groups[1:])
        for hosts, cfg in self.groups:
            self.log.info("emulating %d machine(s): %s; %s", len(hosts),
                          ", ".join(hosts[:5]) + (" ..." if len(hosts) > 5 else ""),
                          ", ".join(f"{t.count} x {'partitionable' if t.partitionable else 'static'} slot type "
                                    f"{t.type_id} ({t.size.cpus} cpus, {t.size.memory} MB, {t.size.disk} KB)"
                                    for t in cfg.slot_types))
            for warning in cfg.warnings:
                self.log.warning("%s", warning)
        self._event_task = self.spawn(self._deliver_events(), "startd:events")
        lease = self.cfg.claim_lease_s
        self.add_periodic("leases", max(1.0, min(self.cfg.alive_interval_s, lease / 10)), self._check_leases)
        pols = [cfg.policy(t) for _, cfg in self.groups for t in cfg.slot_types]
        if any(not policy.never(p.preempt) or not policy.never(p.is_owner) for p in pols):
            # HTCondor evaluates its policy every POLLING_INTERVAL; with PREEMPT and IS_OWNER
            # false whatever happens (the defaults) there is nothing to evaluate.
            self.add_periodic("policy", self.cfg.polling_interval_s, self._evaluate_policy)

    async def on_close(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        self._job_ends.close()
        if self._event_task is not None:
            self._event_task.cancel()
        if self._flush_task is not None:
            self._flush_task.cancel()

    # ---- operations (called by the service) -------------------------------
    def request_claim(self, capability: str, job_ad: classad2.ClassAd, schedd_name: str,
                      schedd_address: str, submitter: str, decided: dict[str, int] | None = None) -> ClaimOutcome:
        assert self.model is not None
        found = self.model.find_capability(capability)
        if found is None:
            self.claims_refused += 1
            return ClaimOutcome(False, "unknown claim id: the slot was claimed or changed since the match")
        machine, slot = found
        preempting = slot.state == CLAIMED and slot.claim is not None
        current = slot.claim.submitter if preempting and slot.claim is not None else ""
        out = machine.request_claim(slot, job_ad, schedd_name, schedd_address, submitter, self.clock.now(),
                                    decided or None, preempting=preempting)
        if out.ok and out.pending:
            self.claims_granted += 1
            self.log.info("%s: preempting claim of %s for %s accepted", out.slot_name, current, submitter)
            self._changed()
        elif out.ok:
            self.claims_granted += 1
            self.log.info("%s: claimed by %s for %s", out.slot_name, schedd_name, submitter)
            self._claim_call()
        else:
            self.claims_refused += 1
            self.log.info("claim request refused: %s", out.reason)
        return out

    def activate(self, claim_id: str, job_ad: classad2.ClassAd) -> tuple[bool, str, float]:
        assert self.model is not None
        found = self.model.find_claim(claim_id)
        if found is None:
            return False, "unknown claim id", 0.0
        machine, slot = found
        now = self.clock.now()
        ok, reason, end = machine.activate(slot, job_ad, now)
        if not ok:
            return ok, reason, 0.0
        self.jobs_started += 1
        c = slot.claim
        assert c is not None
        self.log.info("%s: starting job %s for %.0f s", machine.name_of(slot), c.job_id, end - now)
        # Keyed by the number of the claim's id (claimids.py), not a copy of the id.
        self._job_ends.set(c.seq, end)
        self._claim_call()
        return True, "", now

    def _job_still_ends(self, claim_number: int, pool_time: float) -> bool:
        return self.model is not None and self.model.job_ends_at(claim_number, pool_time)

    def _job_done(self, claim_number: int) -> None:
        assert self.model is not None
        found = self.model.claim_numbered(claim_number)
        if found is None:
            return
        machine, slot = found
        ev = machine.finish_job(slot, self.clock.now())
        if ev is not None:
            self.jobs_finished += 1
            self.log.info("%s: job %s exited", ev.slot_name, ev.job_id)
            self._queue_event(ev)
        if slot.preempt_reason:
            # Its claim was being preempted: it ends now that its job has.
            self._cancel_timer(f"preempt:{self.model.ids.text(claim_number)}")
            preemption.after_job(machine, slot, self.clock.now())
        elif machine.drain is not None:
            # A draining machine starts nothing new: the claim goes with its job.
            self._cancel_timer(f"evict:{self.model.ids.text(claim_number)}")
            machine.release(slot, self.clock.now(), "machine draining")
            self._drain_progress(machine)
        self._changed()

    # ---- draining -------------------------------------------------------------
    def _machine(self, host: str):
        assert self.model is not None
        m = self.model.machines.get(host)
        if m is None:
            known = ", ".join(sorted(self.model.machines)[:5])
            raise DrainError("not_found", f"no machine {host!r} in this startd (it emulates {known}"
                                          f"{' ...' if len(self.model.machines) > 5 else ''})")
        return m

    def drain(self, host: str, how: str, resume: bool, check_expr: str, start_expr: str, reason: str,
              request_id: str) -> str:
        machine = self._machine(host)
        now = self.clock.now()
        state, evictions = start_drain(machine, how, resume, check_expr, start_expr, reason, request_id, now)
        self.log.info("%s: draining (%s, request %s%s): %s", host, how, state.request_id,
                      ", resume on completion" if resume else "", state.reason)
        for s in idle_claims(machine):
            machine.release(s, now, "machine draining")
        for e in evictions:
            slot = machine.slots[e.slot]
            assert slot.claim is not None
            cid = slot.claim.id
            self._timers[f"evict:{cid}"] = self.clock.call_at(e.at, lambda cid=cid: self._evict(cid))
        self._drain_progress(machine)
        self._changed()
        return state.request_id

    def cancel_drain(self, host: str, request_id: str) -> None:
        machine = self._machine(host)
        vacating = {s.claim.id for s in machine.slots.values() if s.claim is not None and s.activity == "Vacating"}
        d = cancel_drain(machine, request_id, self.clock.now())
        for s in machine.slots.values():
            if s.claim is not None and s.claim.id not in vacating:
                self._cancel_timer(f"evict:{s.claim.id}")
        self.log.info("%s: drain %s cancelled", host, d.request_id)
        self._changed()

    def _forget_claim(self, claim_id: str, *, preempt: bool = True) -> None:
        """Cancel a claim's timers: its job's end, a drain's eviction, a preemption's next step."""
        self._cancel_job_end(claim_id)
        self._cancel_timer(f"evict:{claim_id}")
        if preempt:
            self._cancel_timer(f"preempt:{claim_id}")

    def _cancel_job_end(self, claim_id: str) -> None:
        """The job's end no longer stands once its claim is gone or the job evicted
        (_job_still_ends); the queue hears of it only to sweep stale entries in time."""
        assert self.model is not None
        self._job_ends.cancel(self.model.ids.number(claim_id))

    def _cancel_timer(self, key: str) -> None:
        t = self._timers.pop(key, None)
        if t is not None:
            t.cancel()

    def _evict(self, claim_id: str) -> None:
        """A drain's deadline for a job: it is evicted and returns to its schedd's queue."""
        self._timers.pop(f"evict:{claim_id}", None)
        assert self.model is not None
        found = self.model.find_claim(claim_id)
        if found is None:
            return
        machine, slot = found
        self._cancel_job_end(claim_id)
        how = machine.drain.how if machine.drain is not None else "quick"
        ev = machine.release(slot, self.clock.now(), f"evicted by a {how} drain of {machine.host}")
        if ev is not None:
            self.jobs_evicted += 1
            self.log.info("%s: job %s evicted (%s drain)", ev.slot_name, ev.job_id, how)
            self._queue_event(ev)
        self._drain_progress(machine)
        self._changed()

    def _drain_progress(self, machine) -> None:
        if check_drained(machine, self.clock.now()):
            d = machine.drain
            assert d is not None
            self.log.info("%s: drained after %.0f s", machine.host, self.clock.now() - d.started)
            if d.resume_on_completion:
                cancel_drain(machine, "", self.clock.now())
                self.log.info("%s: back in service (resume on completion)", machine.host)

    def release(self, claim_ids: list[str], reason: str) -> int:
        assert self.model is not None
        n = 0
        now = self.clock.now()
        for cid in claim_ids:
            found = self.model.find_claim(cid)
            if found is None:
                continue
            machine, slot = found
            name = machine.name_of(slot)
            if slot.pre is not None and slot.pre.id == cid:
                preemption.withdraw(machine, slot, now)
                self.log.info("%s: preempting claim released (%s)", name, reason)
                n += 1
                continue
            self._forget_claim(cid)
            machine.release(slot, now, reason)
            self.log.info("%s: claim released (%s)", name, reason)
            preemption.take_over(machine, slot, now)
            self._drain_progress(machine)
            n += 1
        if n:
            self._changed()
        return n

    async def keepalive(self, claim_ids: Iterable[str], schedd_address: str, round_trip: float = 0.0,
                        idle: list[str] | None = None) -> list[str]:
        """Renew the leases; return the claim ids this startd does not hold. `idle` collects
        those it holds that run no job and owe the schedd no news of one (a job's exit not
        yet delivered makes its claim look idle here before the schedd knows the job ended).

        News of the claims we no longer hold, not yet delivered (a job's exit while the
        schedd was down), goes to the schedd first: it must learn that a job finished
        before it learns that the job's claim is gone, or it runs the finished job again.
        The leases of the claims we hold are renewed before anything waits."""
        assert self.model is not None
        # Leases first: a claim we hold must not wait for anything to be renewed.
        found_idle: list[str] = []
        unknown = self.model.keepalive(claim_ids, schedd_address, self.clock.now(), round_trip, found_idle)
        self._schedd_heard.set()
        if idle is not None and found_idle:
            owed = {e.claim_id for e, _ in self._events}
            idle.extend(i for i in found_idle if i not in owed)
        if unknown:
            await self._deliver_news_of(set(unknown), schedd_address)
            # News that could not be delivered yet (a report still on its way to a busy
            # schedd): that claim is not called gone until it is, or the schedd would run
            # the finished job again. A later keepalive says so.
            owed = {e.claim_id for e, _ in self._events}
            unknown = [u for u in unknown if u not in owed]
        return unknown

    async def _evaluate_policy(self) -> None:
        """POLLING_INTERVAL: IS_OWNER for unclaimed slots, PREEMPT for running jobs."""
        assert self.model is not None
        now = self.clock.now()
        changed = False
        for m in self.model.machines.values():
            changed |= m.refresh_owner(now)
            for slot in preemption.check_preempt(m, now):
                self.log.info("%s: State change: PREEMPT is TRUE; retiring the claim of %s",
                              m.name_of(slot), slot.claim.submitter if slot.claim else "")
                changed = True
        if changed:
            self._changed()

    async def _check_leases(self) -> None:
        assert self.model is not None
        # Never lose a claim to the pool's own lag: the lease is stretched by it.
        events = self.model.expire_leases(self.clock.now(), self.lag_allowance_s())
        for ev in events:
            self._forget_claim(ev.claim_id)
            self.log.info("%s: %s", ev.slot_name, ev.reason)
            self._queue_event(ev)
        for m in self.model.machines.values():
            self._drain_progress(m)
        if events:
            self._changed()

    # ---- preemption timers and events ------------------------------------------
    def _sync_preemption(self) -> None:
        """Send what state changes put in the machines' outboxes, and keep one timer per
        preemption under way at its next deadline (end of retirement, end of vacate)."""
        assert self.model is not None
        shared = self.model.shared
        while shared.notes:
            self.log.info("%s", shared.notes.pop(0))
        for m, short in list(shared.preempting):
            s = m.slots.get(short)
            c = s.claim if s is not None else None
            due = preemption.deadline(s) if s is not None else None
            if c is None or not s.preempt_reason:
                shared.preempting.discard((m, short))
                continue
            key = f"preempt:{c.id}"
            if due is not None and key not in self._timers:
                self._timers[key] = self.clock.call_at(due, lambda cid=c.id: self._preempt_tick(cid))
        while shared.outbox:
            ev = shared.outbox.pop(0)
            if ev.kind == "evicted":
                self.jobs_evicted += 1
                self._forget_claim(ev.claim_id, preempt=False)
            self._queue_event(ev)

    def _preempt_tick(self, claim_id: str) -> None:
        self._timers.pop(f"preempt:{claim_id}", None)
        assert self.model is not None
        found = self.model.find_claim(claim_id)
        if found is None:
            return
        machine, slot = found
        if slot.claim is None or slot.claim.id != claim_id:
            return
        preemption.tick(machine, slot, self.clock.now())
        self._drain_progress(machine)
        self._changed()

    # ---- collector updates --------------------------------------------------
    def _daemon_ad(self) -> dict[str, Any]:
        daemon_ad = self.base_ad()
        daemon_ad.update({"EmulatedMachines": len(self.hosts), "JobsStarted": self.jobs_started,
                          "JobsFinished": self.jobs_finished})
        return daemon_ad

    def own_ads(self) -> list[dict[str, Any]]:
        assert self.model is not None
        now = self.clock.now()
        out = [self._daemon_ad()]
        for m in self.model.machines.values():
            m.sent()
            out.extend(m.all_ads(now))
        return out

    async def advertise(self) -> None:
        """UPDATE_INTERVAL: this startd's own ad, the slots that changed whole (every slot
        of a machine marked dirty), and a refresh of every other slot's clock-driven
        attributes (refresh.py); a slot the collector cannot refresh is sent whole next."""
        assert self.model is not None and self.collector is not None
        machines = list(self.model.machines.values())
        due = [m for m in machines if m.due]
        sent = refresh.whole(due)
        deleted: list[str] = []

        def texts() -> Iterator[str]:
            yield ads.ad_text(self._daemon_ad())
            yield from machine_ad_texts(due, self.clock.now(), deleted, only_due=True)

        try:
            async with self._sending(due):
                await self.collector.update(texts(), invalidate_type="Machine", invalidate_names=deleted)
        except BaseException:
            # What was built for this update goes again, whole, and the deleted names with it.
            for m in due:
                m.dirty = True
            if machines:
                machines[0].deleted.extend(deleted)
            raise
        count = [0]

        def refreshes() -> Iterator[tuple[tuple[str, ...], str, tuple[str, ...]]]:
            for r in refresh.plan(machines, self.clock.now, sent, self._hosts_sending):
                count[0] += len(r.names)
                yield r.names, r.items, r.own

        missed = await self.collector.refresh("Machine", refreshes())
        self.ads_refreshed += count[0] - len(missed)
        for name in missed:
            short, _, host = name.partition("@")
            m = self.model.machines.get(host)
            if m is not None and short in m.slots:
                m.touch(m.slots[short])
        if missed:
            self._changed()

    def withdraw_keys(self) -> list[tuple[str, list[str]]]:
        names = []
        if self.model is not None:
            names = [m.name_of(s) for m in self.model.machines.values() for s in m.slots.values()]
        return [(self.my_type, [self.name]), ("Machine", names)]

    # ---- status ---------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        s = self.base_status()
        assert self.model is not None or not self.ready
        s.update({
            "machines": len(self.hosts),
            "slots": self.model.counts() if self.model else {},
            "jobs_started": self.jobs_started,
            "jobs_finished": self.jobs_finished,
            "jobs_evicted": self.jobs_evicted,
            "draining": sorted(h for h, m in self.model.machines.items() if m.drain is not None) if self.model else [],
            "claims_granted": self.claims_granted,
            "claims_refused": self.claims_refused,
            "pending_events": len(self._events),
            "ads_refreshed": self.ads_refreshed,
        })
        return s

    def status_detail(self, name: str) -> Any | None:
        """`slots`: every slot's state, activity and job, as this startd sees it."""
        if name != "slots" or self.model is None:
            return None
        out = {}
        for m in self.model.machines.values():
            for s in m.slots.values():
                out[m.name_of(s)] = {"state": s.state, "activity": s.activity,
                                     "job": s.claim.job_id if s.claim is not None else "",
                                     "claimed": s.claim is not None}
        return out

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        m.update({
            "machines": float(len(self.hosts)),
            "slots": {(("state", k),): float(v) for k, v in (self.model.counts() if self.model else {}).items()},
            "jobs_started_total": float(self.jobs_started),
            "jobs_finished_total": float(self.jobs_finished),
            "jobs_evicted_total": float(self.jobs_evicted),
            "machines_draining": float(sum(m.drain is not None for m in self.model.machines.values())
                                       if self.model else 0),
            "claims_granted_total": float(self.claims_granted),
            "claims_refused_total": float(self.claims_refused),
            "activation_job_ads_reused_total": float(self.job_ads_reused),
            "pending_job_events": float(len(self._events)),
            "job_event_reports_total": float(self.reports_sent),
            "ads_refreshed_total": float(self.ads_refreshed),
            # The longest round trip a schedd has reported lately: its claims' leases are
            # stretched by it (machines.Startd.expire_leases).
            "schedd_round_trip_max_pool_seconds": max(self.model.round_trips.values(), default=0.0)
                                                  if self.model else 0.0,
        })
        return m
