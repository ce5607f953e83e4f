"""`htcpool daemon defrag`: HTCondor's defrag daemon on pool time.

Every DEFRAG_INTERVAL pool seconds: read the partitionable slot ads from the
collector, let the policy (daemons/defrag/policy.py) decide, cancel and drain by RPC
on the startds, log each decision in HTCondor's DefragLog wording, and publish the
daemon's own ad (MyType "Defrag") with its counts. LastPoll and the carried fraction
of a drain are saved in DEFRAG_STATE_FILE before acting, as HTCondor saves LastPoll:
a restarted defrag waits out the rest of the interval instead of polling at once, so
a crash errs on the side of draining too little.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.daemon import Daemon
from daemons.defrag.config import DefragConfig
from daemons.defrag.drain_client import DrainClient
from daemons.defrag.policy import DefragPolicy, DefragState, PollPlan

# Only p-slots matter to the policy (BASE_SLOT_CONSTRAINT); SlotID 1 carries the
# machine's draining totals (queryDrainingCost). Filtering at the collector keeps the
# dynamic slots of a busy pool off the wire.
QUERY_CONSTRAINT = "PartitionableSlot =?= true || SlotID == 1"
QUERY_GIVE_UP_S = 30.0


class DefragDaemon(Daemon):
    role = "defrag"
    my_type = "Defrag"

    def __init__(self, common: CommonConfig, cfg: DefragConfig, clock: PoolClock | None = None,
                 seed: int = 0) -> None:
        super().__init__(common, clock)
        self.cfg = cfg
        self.policy = DefragPolicy(cfg, self.name, random.Random(seed), self._load_state())
        self.drains = DrainClient(self.channels, self.log)
        self.last_plan: PollPlan | None = None
        self.decisions: deque[dict[str, Any]] = deque(maxlen=200)

    # ---- state file ---------------------------------------------------------------
    def _load_state(self) -> DefragState:
        st = DefragState()
        path = self.cfg.state_file
        if path is None:
            return st
        if not path.exists():
            self.log.info("State file %s does not yet exist.", path)
            return st
        try:
            ad = ads.parse_ad(path.read_text(), f"defrag state file {path}")
        except (OSError, ads.AdError) as e:
            self.log.warning("WARNING: failed to parse state from %s (%s)", path, e)
            return st
        st.last_poll = float(ads.as_number(ads.get(ad, "LastPoll")) or 0.0)
        st.carry = float(ads.as_number(ads.get(ad, "DrainRemainder")) or 0.0)
        self.log.info("Last poll: %d", int(st.last_poll))
        return st

    def _save_state(self) -> None:
        path = self.cfg.state_file
        if path is None:
            return
        st = self.policy.state
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".new")
            tmp.write_text(ads.ad_text({"LastPoll": int(st.last_poll), "DrainRemainder": st.carry}) + "\n")
            tmp.replace(path)
        except OSError as e:
            self.log.warning("WARNING: failed to save state to %s (%s)", path, e)

    # ---- lifecycle ------------------------------------------------------------------
    async def on_start(self) -> None:
        cfg = self.cfg
        if cfg.interval_s <= 0:
            self.log.info("DEFRAG_INTERVAL=%d, so no pool defragmentation will be done.", cfg.interval_s)
            return
        self.log.info("Will evaluate defragmentation policy every DEFRAG_INTERVAL=%d seconds.", cfg.interval_s)
        self.log.info("polling interval %ds, DEFRAG_DRAINING_MACHINES_PER_HOUR = %f/hour = %.3f/interval "
                      "(the fraction carried to the next interval)", cfg.interval_s,
                      cfg.draining_machines_per_hour, cfg.drains_per_poll)
        now, last = self.clock.now(), self.policy.state.last_poll
        first = 0.0
        if last and last <= now and now - last < cfg.interval_s:
            first = cfg.interval_s - (now - last)
        self.add_periodic("poll", cfg.interval_s, self.poll, first_delay_s=first)

    # ---- one poll ---------------------------------------------------------------------
    async def poll(self) -> PollPlan:
        assert self.collector is not None
        log = self.log
        texts = await self.collector.query("Machine", QUERY_CONSTRAINT, give_up_after_s=QUERY_GIVE_UP_S)
        slot_ads = [ads.parse_ad(t, "slot ad") for t in texts]
        now = self.clock.now()
        plan = self.policy.poll(slot_ads, now)
        self.last_plan = plan
        self._save_state()
        log.info("There are currently %d draining and %d whole machines.", len(plan.draining), len(plan.whole))
        if plan.newly_drained:
            log.info("Newly drained machines: %s", " ".join(plan.newly_drained))
        st = self.policy.state
        log.info("Lifetime whole machines arrived: %d", st.drained_machines)
        if st.arrival_sum > 0:
            log.info("Lifetime mean arrival rate: %g machines / hour", 3600.0 * st.mean_drained_arrival)
        log.info("Average pool draining badput = %.2f%%", plan.avg_draining_badput * 100)
        log.info("Average pool draining unclaimed = %.2f%%", plan.avg_draining_unclaimed * 100)
        cancelled = 0
        for c in plan.cancels:
            log.info("Cancel draining of %s.", c.slot)
            r = await self.drains.cancel(c.address, c.target)
            self.policy.record_cancel(c, r.ok, now)
            self._decision(now, "cancel", c.target, r.ok, r.reason)
            if r.ok:
                cancelled += 1
            else:
                log.info("Unable to cancel draining on %s: %s", c.target, r.reason)
        log.info("Cancelled draining of %d whole machines.", cancelled)
        if plan.why_not:
            log.info("%s", plan.why_not)
            self.trigger("advertise")
            return plan
        log.info("Looking for %d machines to drain.", plan.num_to_drain)
        drained = 0
        for d in plan.candidates:
            if drained >= plan.num_to_drain:
                break
            log.info("Initiating %s draining of %s.", d.how, d.slot)
            if d.expected_completion is not None:
                log.info("Expected draining completion time is %ds; expected draining badput is %d cpu-seconds",
                         int(d.expected_completion - now), d.expected_badput or 0)
            r = await self.drains.drain(d.address, d.target, d.how, resume_on_completion=True,
                                        check_expr=d.check_expr, start_expr=d.start_expr, reason=d.reason)
            self.policy.record_drain(d, r.ok, now)
            self._decision(now, "drain", d.target, r.ok, r.reason, rank=d.rank)
            if r.ok:
                drained += 1
                if drained >= plan.num_to_drain:
                    log.info("Drained maximum number of machines allowed in this cycle (%d).", plan.num_to_drain)
            else:
                log.info("Failed to send request to drain %s: %s", d.target, r.reason)
        log.info("Drained %d machines (wanted to drain %d machines).", drained, plan.num_to_drain)
        self.trigger("advertise")
        return plan

    def _decision(self, now: float, action: str, machine: str, ok: bool, reason: str, **extra: Any) -> None:
        self.decisions.append({"time": now, "action": action, "machine": machine, "ok": ok, "reason": reason,
                               **extra})

    # ---- ad, status, metrics -----------------------------------------------------------------
    def own_ads(self) -> list[dict[str, Any]]:
        ad = self.base_ad()
        ad.update(self.policy.ad_attrs())
        cfg = self.cfg
        ad.update({"DefragInterval": cfg.interval_s,
                   "DefragDrainingMachinesPerHour": cfg.draining_machines_per_hour,
                   "DefragMaxConcurrentDraining": cfg.max_concurrent_draining,
                   "DefragMaxWholeMachines": cfg.max_whole_machines,
                   "DefragDrainingSchedule": cfg.draining_schedule})
        return [ad]

    def status(self) -> dict[str, Any]:
        s = self.base_status()
        cfg = asdict(self.cfg)
        cfg["state_file"] = str(self.cfg.state_file) if self.cfg.state_file else None
        st = self.policy.state
        s.update({"config": cfg,
                  "counts": {k: v for k, v in self.policy.ad_attrs().items() if not isinstance(v, ads.Expr)},
                  "last_poll": None if self.last_plan is None else {
                      "time": self.last_plan.now, "num_to_drain": self.last_plan.num_to_drain,
                      "budget": self.last_plan.budget, "draining": list(self.last_plan.draining),
                      "whole": list(self.last_plan.whole), "why_not": self.last_plan.why_not,
                      "candidates": [c.target for c in self.last_plan.candidates[:20]]},
                  "recent_drains": [asdict(e) for e in st.recent_drains],
                  "recent_cancels": [asdict(e) for e in st.recent_cancels],
                  "decisions": list(self.decisions)[-50:]})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        st = self.policy.state
        m.update({"machines_draining": float(st.machines_draining),
                  "whole_machines": float(st.whole_machines),
                  "drained_machines_total": float(st.drained_machines),
                  "drain_successes_total": float(st.drain_successes),
                  "drain_failures_total": float(st.drain_failures),
                  "cancelled_drains_total": float(st.cancelled_drains),
                  "polls_total": float(st.polls),
                  "avg_draining_badput": st.avg_draining_badput})
        return m


def build(common: CommonConfig, param, seed: int = 0) -> DefragDaemon:
    """What runner.build_daemon calls for the "defrag" role."""
    return DefragDaemon(common, DefragConfig.from_param(param, Path(common.spool_dir)), seed=seed)
