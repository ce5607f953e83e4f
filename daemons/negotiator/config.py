"""The negotiator's typed configuration, read once (HTCondor's knobs and defaults)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from daemons.core.config import LARGE, ConfigError, Param
from daemons.negotiator import groups as hgq
from daemons.negotiator.accountant import AccountantConfig
from daemons.negotiator.cadence import Cadence
from daemons.negotiator.candidates import MatchPolicy
from daemons.negotiator.cycle import CyclePolicy
from daemons.negotiator.preemption import PreemptionConfig


@dataclass(frozen=True)
class NegotiatorConfig:
    cadence: Cadence = field(default_factory=Cadence)
    request_list_size: int = 200          # NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE
    policy: MatchPolicy = field(default_factory=MatchPolicy)
    timeout_s: float = 30.0               # NEGOTIATOR_TIMEOUT (wall seconds per schedd exchange)
    prefetch_requests: bool = True        # NEGOTIATOR_PREFETCH_REQUESTS
    prefetch_max_time_s: float | None = 60.0   # NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME (wall s; 0: none)
    cycle_history: int = 1000             # how many cycle records the status page keeps
    # Policy expressions whose references are significant (HTCondor's compute_significant_attrs).
    preemption_requirements: str = ""     # PREEMPTION_REQUIREMENTS
    preemption_rank: str = ""             # PREEMPTION_RANK
    job_constraint: str = ""              # NEGOTIATOR_JOB_CONSTRAINT (the schedd offers only such jobs)
    slot_constraint: str = ""             # NEGOTIATOR_SLOT_CONSTRAINT (other slots are never fetched)
    depth_first: bool = False             # NEGOTIATOR_DEPTH_FIRST
    use_slot_weights: bool = True         # NEGOTIATOR_USE_SLOT_WEIGHTS
    accountant: AccountantConfig = field(default_factory=AccountantConfig)
    groups: hgq.GroupsConfig = field(default_factory=hgq.GroupsConfig)
    accountant_file: Path | None = None   # ACCOUNTANT_DATABASE_FILE (JSON here)
    problems: tuple[str, ...] = ()        # configuration problems reported every cycle, not fatal
    consider_preemption: bool = True      # NEGOTIATOR_CONSIDER_PREEMPTION
    consider_early_preemption: bool = False  # NEGOTIATOR_CONSIDER_EARLY_PREEMPTION

    @classmethod
    def from_param(cls, p: Param, spool: Path | None = None) -> "NegotiatorConfig":
        groups, problems = hgq.read_groups(p)
        limits, scoped = [], []
        for knob in p.names():
            up = knob.upper()
            if up.endswith("_LIMIT") and not up.startswith(("CONCURRENCY_LIMIT_DEFAULT", "NEGOTIATOR_")):
                try:
                    v = p.float(knob, minimum=0.0, maximum=LARGE)
                except ConfigError as e:
                    problems.append(str(e))
                    continue
                if v is not None and p.is_set(knob):
                    limits.append((knob[:-len("_LIMIT")].lower(), v))
            elif up.startswith("CONCURRENCY_LIMIT_DEFAULT_"):
                v = p.float(knob, minimum=0.0, maximum=LARGE)
                if v is not None:
                    scoped.append((knob[len("CONCURRENCY_LIMIT_DEFAULT_"):].lower(), v))
        group_factors = []
        for spec in groups.groups:
            f = p.float(f"GROUP_PRIO_FACTOR_{spec.name}", minimum=1.0, maximum=LARGE)
            if f is not None:
                group_factors.append((spec.name, f))
        db = p.str("ACCOUNTANT_DATABASE_FILE")
        acct_file = Path(db).with_suffix(".json") if db and db != "/spool/Accountantnew.log" else (
            (spool / "Accountant.json") if spool else None)
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
            prefetch_requests=bool(p.bool("NEGOTIATOR_PREFETCH_REQUESTS", True)),
            prefetch_max_time_s=float(p.int("NEGOTIATOR_PREFETCH_REQUESTS_MAX_TIME", 60, minimum=0) or 0) or None,
            cycle_history=p.int("NEGOTIATOR_CYCLE_HISTORY", 1000, minimum=1) or 1000,
            preemption_requirements=p.expr("PREEMPTION_REQUIREMENTS", "") or "",
            preemption_rank=p.expr("PREEMPTION_RANK", "") or "",
            job_constraint=p.expr("NEGOTIATOR_JOB_CONSTRAINT", "") or "",
            slot_constraint=p.expr("NEGOTIATOR_SLOT_CONSTRAINT", "") or "",
            depth_first=bool(p.bool("NEGOTIATOR_DEPTH_FIRST", False)),
            consider_preemption=bool(p.bool("NEGOTIATOR_CONSIDER_PREEMPTION", True)),
            consider_early_preemption=bool(p.bool("NEGOTIATOR_CONSIDER_EARLY_PREEMPTION", False)),
            use_slot_weights=bool(p.bool("NEGOTIATOR_USE_SLOT_WEIGHTS", True)),
            accountant=AccountantConfig(
                halflife_s=p.float("PRIORITY_HALFLIFE", 86400.0, positive=True, maximum=LARGE) or 86400.0,
                default_factor=p.float("DEFAULT_PRIO_FACTOR", 1000.0, minimum=1.0, maximum=LARGE) or 1000.0,
                use_slot_weights=bool(p.bool("NEGOTIATOR_USE_SLOT_WEIGHTS", True)),
                group_factors=tuple(group_factors),
                concurrency_default=p.float("CONCURRENCY_LIMIT_DEFAULT", 2308032.0, minimum=0, maximum=LARGE) or 2308032.0,
                concurrency_limits=tuple(limits),
                concurrency_scoped_defaults=tuple(scoped)),
            groups=groups,
            accountant_file=acct_file,
            problems=tuple(problems),
        )

    def policy_exprs(self) -> list[str]:
        return [self.preemption_requirements, self.preemption_rank, self.policy.pre_job_rank,
                self.policy.post_job_rank]

    @property
    def preemption(self) -> PreemptionConfig:
        return PreemptionConfig(self.consider_preemption, self.consider_early_preemption,
                                self.preemption_requirements, self.preemption_rank)

    @property
    def cycle_policy(self) -> CyclePolicy:
        return CyclePolicy(self.groups, self.use_slot_weights, self.depth_first, self.consider_preemption)
