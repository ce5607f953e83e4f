"""The defrag daemon's knobs, read once, with HTCondor's names and defaults.

HTCondor reads them in Defrag::config() (src/defrag/defrag.cpp); its default table
(param_info.in) gives DEFRAG_INTERVAL 600, DEFRAG_DRAINING_MACHINES_PER_HOUR 0,
DEFRAG_MAX_CONCURRENT_DRAINING and DEFRAG_MAX_WHOLE_MACHINES -1 (no limit),
DEFRAG_WHOLE_MACHINE_EXPR `Cpus == TotalSlotCpus`, DEFRAG_CANCEL_REQUIREMENTS
`$(DEFRAG_WHOLE_MACHINE_EXPR)`, DEFRAG_RANK `-ExpectedMachineGracefulDrainingBadput`,
DEFRAG_DRAINING_SCHEDULE graceful and DEFRAG_DRAINING_START_EXPR `FALSE`. The defaults
below repeat them so that a Param without HTCondor's table behind it (unit tests)
means the same.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from daemons.core.config import ConfigError, Param

SCHEDULES = ("graceful", "quick", "fast")
DEFAULT_WHOLE_MACHINE_EXPR = "Cpus == TotalSlotCpus"
DEFAULT_RANK = "-ExpectedMachineGracefulDrainingBadput"


@dataclass(frozen=True)
class DefragConfig:
    interval_s: int = 600                          # DEFRAG_INTERVAL; <= 0: no defragmentation
    draining_machines_per_hour: float = 0.0        # DEFRAG_DRAINING_MACHINES_PER_HOUR
    max_concurrent_draining: int = -1              # DEFRAG_MAX_CONCURRENT_DRAINING; -1: no limit
    max_whole_machines: int = -1                   # DEFRAG_MAX_WHOLE_MACHINES; -1: no limit
    whole_machine_expr: str = DEFAULT_WHOLE_MACHINE_EXPR   # DEFRAG_WHOLE_MACHINE_EXPR
    cancel_requirements: str = DEFAULT_WHOLE_MACHINE_EXPR  # DEFRAG_CANCEL_REQUIREMENTS; "": never cancel
    requirements: str = ""                         # DEFRAG_REQUIREMENTS; "": every p-slot
    rank: str = DEFAULT_RANK                       # DEFRAG_RANK; "": no ordering (shuffled only)
    draining_schedule: str = "graceful"            # DEFRAG_DRAINING_SCHEDULE
    draining_start_expr: str = "FALSE"             # DEFRAG_DRAINING_START_EXPR
    state_file: Path | None = None                 # DEFRAG_STATE_FILE

    @classmethod
    def from_param(cls, p: Param, spool_dir: Path | None = None) -> "DefragConfig":
        schedule = (p.str("DEFRAG_DRAINING_SCHEDULE", "graceful") or "graceful").lower()
        if schedule not in SCHEDULES:
            raise ConfigError(f"{p.where('DEFRAG_DRAINING_SCHEDULE')}: DEFRAG_DRAINING_SCHEDULE = {schedule!r} "
                              f"is not one of {', '.join(SCHEDULES)}")
        whole = p.expr("DEFRAG_WHOLE_MACHINE_EXPR", DEFAULT_WHOLE_MACHINE_EXPR) or DEFAULT_WHOLE_MACHINE_EXPR
        state = p.str("DEFRAG_STATE_FILE")
        return cls(
            interval_s=p.int("DEFRAG_INTERVAL", 600) or 0,
            draining_machines_per_hour=p.float("DEFRAG_DRAINING_MACHINES_PER_HOUR", 0.0, minimum=0.0, maximum=1e9) or 0.0,
            max_concurrent_draining=_int_or(p.int("DEFRAG_MAX_CONCURRENT_DRAINING", -1, minimum=-1), -1),
            max_whole_machines=_int_or(p.int("DEFRAG_MAX_WHOLE_MACHINES", -1, minimum=-1), -1),
            whole_machine_expr=whole,
            # HTCondor's default table sets it to $(DEFRAG_WHOLE_MACHINE_EXPR); a file that
            # empties it turns cancellation off, as in HTCondor.
            cancel_requirements=_expr_or_empty(p, "DEFRAG_CANCEL_REQUIREMENTS", whole),
            requirements=p.expr("DEFRAG_REQUIREMENTS", "") or "",
            rank=_expr_or_empty(p, "DEFRAG_RANK", DEFAULT_RANK),
            draining_schedule=schedule,
            draining_start_expr=p.expr("DEFRAG_DRAINING_START_EXPR", "FALSE") or "FALSE",
            state_file=Path(state) if state else (spool_dir / "defrag_state" if spool_dir else None),
        )

    @property
    def drains_per_poll(self) -> float:
        """The configured rate as machines per poll (fractional): rate × interval / 3600."""
        return self.draining_machines_per_hour * max(self.interval_s, 0) / 3600.0


def _int_or(v: int | None, default: int) -> int:
    return default if v is None else v


def _expr_or_empty(p: Param, name: str, default: str) -> str:
    """The knob's expression; its default when unset; "" when the configuration sets it empty.

    Param reads an empty value as unset, so "set empty" is told apart by a line (or an
    environment override) that sets the knob while no value comes back.
    """
    if not p.is_set(name) and p.where(name) != "configuration":
        return ""
    return p.expr(name, default) or ""
