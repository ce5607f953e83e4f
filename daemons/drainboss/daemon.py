"""`htcpool daemon drainboss`: seed 003's drainBoss.py made a daemon with its own clock.

Every DRAINBOSS_INTERVAL pool seconds (the seed ran the script from a shell loop every
300 s): read the slot ads from the collector and the idle and running jobs from every
schedd (RPC only), run the PI controller (controller.py), apply the truth table and
the node choice (decide.py), cancel and start drains by RPC on the startds, and log one
line: running and queued multicore and single-core jobs, error, P and I terms, output,
nodes drained and cancelled. With DRAINBOSS_TEST (--test) the line says what would
have been done and nothing is.

The seed's future work done here: errors are handled and reported (a run whose
queries fail records nothing, logs why, and shows it in the daemon's ad and status
page; a refused drain or cancel is logged and counted, and the run goes on); the
controller's history is saved after every run in DRAINBOSS_STATE_FILE and reloaded at
start, so a restart resumes with its integral instead of ramping up from nothing.
"""
from __future__ import annotations

import asyncio
import json
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from daemons.core import ads
from daemons.core.clock import PoolClock
from daemons.core.common import CommonConfig
from daemons.core.daemon import Daemon
from daemons.core.rpc import call_with_retry, describe
from daemons.defrag.drain_client import DrainClient
from daemons.drainboss.config import DrainBossConfig
from daemons.drainboss.controller import ControllerState, ControlOutput, Sample, step
from daemons.drainboss.decide import START, Decision, JobCounts, count_jobs, decide, nodes_from_ads
from daemons.pb.htcpool import schedd_pb2, schedd_pb2_grpc

SLOT_PROJECTION = ["Name", "Machine", "Cpus", "TotalCpus", "TotalSlotCpus", "PartitionableSlot", "DynamicSlot",
                   "Draining", "DrainReason", "StartdIpAddr", "MyAddress"]
JOB_CONSTRAINT = "JobStatus == 1 || JobStatus == 2"
QUERY_GIVE_UP_S = 20.0
QUERY_TIMEOUT_S = 60.0


@dataclass
class RunRecord:
    run: int
    time: float
    counts: JobCounts | None = None
    control: ControlOutput | None = None
    action: str = ""
    candidates: int = 0
    drained: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    test: bool = False
    error: str = ""


class DrainBossDaemon(Daemon):
    role = "drainboss"
    my_type = "DrainBoss"

    def __init__(self, common: CommonConfig, cfg: DrainBossConfig, clock: PoolClock | None = None,
                 seed: int = 0) -> None:
        super().__init__(common, clock)
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.reason = f"DrainBoss {self.name}"
        self.controller = ControllerState()
        self.state_note = ""
        self.drains = DrainClient(self.channels, self.log)
        self.runs = 0
        self.run_errors = 0
        self.last_error = ""
        self.drains_started = 0
        self.drains_cancelled = 0
        self.drain_failures = 0
        self.history: deque[RunRecord] = deque(maxlen=2000)

    # ---- state file -----------------------------------------------------------------
    def _load_state(self) -> None:
        path = self.cfg.state_file
        if path is None or not path.exists():
            self.state_note = "no saved controller state: starting with an empty integral"
            return
        try:
            data = json.loads(path.read_text())
            self.controller = ControllerState(tuple(Sample(float(t), float(e)) for t, e in data["samples"]),
                                              float(data.get("carry", 0.0)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            self.state_note = f"controller state in {path} unreadable ({e}); starting with an empty integral"
            self.log.warning("%s", self.state_note)
            return
        self.state_note = f"resumed {len(self.controller.samples)} controller sample(s) from {path}"
        self.log.info("%s", self.state_note)

    def _save_state(self) -> None:
        path = self.cfg.state_file
        if path is None or self.cfg.test:
            return  # --test changes nothing, its own saved state included
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".new")
            tmp.write_text(json.dumps({"samples": [[s.t, s.error] for s in self.controller.samples],
                                       "carry": self.controller.carry,
                                       "setpoint": self.cfg.controller.setpoint}))
            tmp.replace(path)
        except OSError as e:
            self.log.warning("could not save the controller state to %s: %s", path, e)

    # ---- lifecycle --------------------------------------------------------------------
    async def on_start(self) -> None:
        c = self.cfg.controller
        self._load_state()
        self.log.info("DrainBoss every %.0f s: setpoint %g, propband %g, reset %g s, lookback %g s, "
                      "maxtodrain %d%s%s; multicore = RequestCpus >= %d, wide slot = %d cpus, node choice %s",
                      self.cfg.interval_s, c.setpoint, c.propband, c.reset_s, c.lookback_s, c.maxtodrain,
                      ", keepgoing" if self.cfg.keepgoing else "", ", TEST MODE (changes nothing)"
                      if self.cfg.test else "", self.cfg.multicore_cpus, self.cfg.wide_cpus, self.cfg.node_choice)
        self.add_periodic("run", self.cfg.interval_s, self.run)

    # ---- one run ------------------------------------------------------------------------
    async def run(self) -> RunRecord:
        self.runs += 1
        rec = RunRecord(self.runs, self.clock.now(), test=self.cfg.test)
        self.history.append(rec)
        try:
            await self._run(rec)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # Reported, not ignored: the run changes nothing, the next one tries again.
            self.run_errors += 1
            rec.error = self.last_error = describe(e)
            self.log.warning("run %d failed, nothing done: %s", rec.run, rec.error)
        self.trigger("advertise")
        return rec

    async def _run(self, rec: RunRecord) -> None:
        cfg = self.cfg
        slot_ads, job_ads = await asyncio.gather(self._slots(), self._jobs())
        counts = count_jobs(job_ads, cfg.multicore_cpus)
        nodes = nodes_from_ads(slot_ads, cfg.wide_cpus)
        control, state = step(cfg.controller, self.controller, rec.time, counts.running_multicore)
        decision = decide(counts, nodes, control.nodes, keepgoing=cfg.keepgoing, wide=cfg.wide_cpus,
                          policy=cfg.node_choice, my_reason=self.reason, rng=self.rng)
        if decision.action != START:
            state = ControllerState(state.samples, 0.0)   # no drains now: nothing to carry
        self.controller = state
        self._save_state()
        rec.counts, rec.control, rec.action, rec.candidates = counts, control, decision.action, decision.candidates
        if not cfg.test:
            await self._act(decision, rec)
        self.log.info("%s", run_line(rec, decision))

    async def _slots(self) -> list:
        assert self.collector is not None
        texts = await self.collector.query("Machine", projection=SLOT_PROJECTION, give_up_after_s=QUERY_GIVE_UP_S)
        return [ads.parse_ad(t, "slot ad") for t in texts]

    async def _jobs(self) -> list:
        assert self.collector is not None
        texts = await self.collector.query("Scheduler", projection=["Name", "ScheddIpAddr", "MyAddress"],
                                           give_up_after_s=QUERY_GIVE_UP_S)
        if not texts:
            raise RuntimeError("no schedd in the collector: cannot count jobs")
        out: list = []
        for t in texts:
            ad = ads.parse_ad(t, "schedd ad")
            addr = ads.get(ad, "ScheddIpAddr") or ads.get(ad, "MyAddress")
            if not isinstance(addr, str) or not addr:
                raise RuntimeError(f"schedd {ads.get(ad, 'Name')} advertises no address")
            out.extend(await self._query_schedd(addr.strip().strip("<>").split("?", 1)[0]))
        return out

    async def _query_schedd(self, address: str) -> list:
        req = schedd_pb2.QueryJobsRequest(constraint=JOB_CONSTRAINT, projection=["JobStatus", "RequestCpus"])

        async def query() -> list:
            found = []
            stub = schedd_pb2_grpc.ScheddStub(self.channels.get(address))
            async for chunk in stub.Query(req, timeout=QUERY_TIMEOUT_S):
                found.extend(ads.parse_ad(a.text, "job ad") for a in chunk.ads)
            return found
        return await call_with_retry(f"query of the jobs at the schedd at {address}", query,
                                     give_up_after_s=QUERY_GIVE_UP_S, logger=self.log)

    async def _act(self, decision: Decision, rec: RunRecord) -> None:
        cfg = self.cfg
        for node, why in decision.cancel:
            r = await self.drains.cancel(node.address, node.name)
            if r.ok:
                self.drains_cancelled += 1
                rec.cancelled.append(node.name)
                self.log.info("  cancelled the drain of %s: %s", node.name, why)
            elif r.code == "FAILED_PRECONDITION":
                # The collector's ad was older than the startd: the drain has already ended,
                # which is what the cancel wanted.
                self.log.info("  %s is no longer draining (%s)", node.name, r.reason)
            else:
                self.drain_failures += 1
                rec.failures.append(f"cancel {node.name}: {r.reason}")
                self.log.warning("  could not cancel the drain of %s: %s", node.name, r.reason)
        for node in decision.drain:
            r = await self.drains.drain(node.address, node.name, cfg.draining_schedule,
                                        resume_on_completion=cfg.resume_on_completion,
                                        start_expr=cfg.draining_start_expr, reason=self.reason)
            if r.ok:
                self.drains_started += 1
                rec.drained.append(node.name)
            else:
                self.drain_failures += 1
                rec.failures.append(f"drain {node.name}: {r.reason}")
                self.log.warning("  could not drain %s: %s", node.name, r.reason)

    # ---- ad, status, metrics ---------------------------------------------------------------
    def _last_good(self) -> RunRecord | None:
        return next((r for r in reversed(self.history) if r.control is not None), None)

    def own_ads(self) -> list[dict[str, Any]]:
        ad = self.base_ad()
        c = self.cfg.controller
        ad.update({"Setpoint": c.setpoint, "PropBand": c.propband, "ResetTime": c.reset_s,
                   "Lookback": c.lookback_s, "MaxToDrain": c.maxtodrain, "KeepGoing": self.cfg.keepgoing,
                   "TestMode": self.cfg.test, "NodeChoice": self.cfg.node_choice,
                   "MulticoreCpus": self.cfg.multicore_cpus, "WideCpus": self.cfg.wide_cpus,
                   "DrainBossInterval": self.cfg.interval_s, "DrainBossRuns": self.runs,
                   "RunErrors": self.run_errors, "LastRunError": self.last_error,
                   "DrainsStarted": self.drains_started, "DrainsCancelled": self.drains_cancelled,
                   "DrainFailures": self.drain_failures, "ControllerSamples": len(self.controller.samples)})
        last = self._last_good()
        if last is not None and last.counts is not None and last.control is not None:
            ad.update({"LastRunTime": int(last.time),
                       "RunningMulticore": last.counts.running_multicore,
                       "QueuedMulticore": last.counts.queued_multicore,
                       "RunningSinglecore": last.counts.running_singlecore,
                       "QueuedSinglecore": last.counts.queued_singlecore,
                       "ControllerError": last.control.error, "ProportionalTerm": last.control.p_term,
                       "IntegralTerm": last.control.i_term, "ControllerOutput": last.control.output,
                       "LastAction": last.action, "LastDrained": len(last.drained),
                       "LastCancelled": len(last.cancelled)})
        return [ad]

    def status(self) -> dict[str, Any]:
        s = self.base_status()
        cfg = asdict(self.cfg)
        cfg["state_file"] = str(self.cfg.state_file) if self.cfg.state_file else None
        s.update({"config": cfg, "state": self.state_note, "runs": self.runs, "run_errors": self.run_errors,
                  "last_error": self.last_error, "drains_started": self.drains_started,
                  "drains_cancelled": self.drains_cancelled, "drain_failures": self.drain_failures,
                  "controller_samples": len(self.controller.samples),
                  "controller_carry": self.controller.carry,
                  "history": [asdict(r) for r in list(self.history)[-500:]]})
        return s

    def metrics(self) -> dict[str, Any]:
        m = super().metrics()
        m.update({"runs_total": float(self.runs), "run_errors_total": float(self.run_errors),
                  "drains_started_total": float(self.drains_started),
                  "drains_cancelled_total": float(self.drains_cancelled),
                  "drain_failures_total": float(self.drain_failures)})
        last = self._last_good()
        if last is not None and last.counts is not None and last.control is not None:
            m.update({"running_multicore": float(last.counts.running_multicore),
                      "queued_multicore": float(last.counts.queued_multicore),
                      "running_singlecore": float(last.counts.running_singlecore),
                      "queued_singlecore": float(last.counts.queued_singlecore),
                      "error": last.control.error, "p_term": last.control.p_term, "i_term": last.control.i_term,
                      "output": last.control.output})
        return m


def run_line(rec: RunRecord, decision: Decision) -> str:
    """The one log line of a run."""
    c, k = rec.control, rec.counts
    assert c is not None and k is not None
    if rec.test:
        acted = (f"TEST: would drain {len(decision.drain)} [{' '.join(n.name for n in decision.drain)}], "
                 f"would cancel {len(decision.cancel)} [{' '.join(n.name for n, _ in decision.cancel)}]")
    else:
        acted = (f"drained {len(rec.drained)} [{' '.join(rec.drained)}], "
                 f"cancelled {len(rec.cancelled)} [{' '.join(rec.cancelled)}]")
        if rec.failures:
            acted += f", {len(rec.failures)} refused"
    return (f"run {rec.run}: running mc {k.running_multicore} sc {k.running_singlecore}, "
            f"queued mc {k.queued_multicore} sc {k.queued_singlecore}; error {c.error:g} "
            f"P {c.p_term:.3f} I {c.i_term:.3f} output {c.output:.3f} -> {c.nodes} node(s), "
            f"{rec.action} ({rec.candidates} candidates); {acted}")


def build(common: CommonConfig, param, seed: int = 0) -> DrainBossDaemon:
    """What runner.build_daemon calls for the "drainboss" role."""
    return DrainBossDaemon(common, DrainBossConfig.from_param(param, Path(common.spool_dir)), seed=seed)
