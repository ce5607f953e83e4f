"""DrainBoss's settings: the seed's command-line options as knobs, read once.

Each option of the seed's drainBoss.py has a knob (DRAINBOSS_SETPOINT, ...), and
DRAINBOSS_OPTIONS takes the seed's own command line, so a site's cron line can be
pasted unchanged ("-s 250 -p 750 -r 43600 --lookback 86400 --maxtodrain 7
--keepgoing"); options given there win over the knobs. A value out of range (a
negative setpoint, a zero reset time, ...) stops the daemon before it does anything,
with a message naming the knob or option.
"""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from daemons.core.config import LARGE, ConfigError, Param
from daemons.drainboss.controller import ControllerSettings, SettingsError
from daemons.drainboss.decide import POLICIES

SCHEDULES = ("graceful", "quick", "fast")


@dataclass(frozen=True)
class DrainBossConfig:
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    interval_s: float = 300.0          # DRAINBOSS_INTERVAL: pool seconds between runs (the seed's cron: 300)
    keepgoing: bool = False            # DRAINBOSS_KEEPGOING / --keepgoing
    test: bool = False                 # DRAINBOSS_TEST / --test: log decisions, change nothing
    multicore_cpus: int = 8            # DRAINBOSS_MULTICORE_CPUS: a job with RequestCpus >= this is multicore
    wide_cpus: int = 8                 # DRAINBOSS_WIDE_CPUS: a slot this wide fits a multicore job
    node_choice: str = "random"        # DRAINBOSS_NODE_CHOICE: random | largest | fewest
    draining_schedule: str = "graceful"  # DRAINBOSS_DRAINING_SCHEDULE (condor_drain's default)
    resume_on_completion: bool = False   # DRAINBOSS_RESUME_ON_COMPLETION (the seed cancels drains itself)
    draining_start_expr: str = ""        # DRAINBOSS_DRAINING_START_EXPR ("": the startd's default, False)
    state_file: Path | None = None       # DRAINBOSS_STATE_FILE: the controller's history, for restarts

    @classmethod
    def from_param(cls, p: Param, spool_dir: Path | None = None) -> "DrainBossConfig":
        interval = p.float("DRAINBOSS_INTERVAL", 300.0, positive=True, minimum=1.0, maximum=2 ** 31 - 1) or 300.0
        settings = ControllerSettings(
            setpoint=_num(p, "DRAINBOSS_SETPOINT", 250.0),
            propband=_num(p, "DRAINBOSS_PROPBAND", 200.0),
            reset_s=_num(p, "DRAINBOSS_RESET", 10000.0),
            lookback_s=_num(p, "DRAINBOSS_LOOKBACK", 86400.0),
            maxtodrain=p.int("DRAINBOSS_MAXTODRAIN", 9) if p.is_set("DRAINBOSS_MAXTODRAIN") else 9,
            period_s=interval)
        schedule = (p.str("DRAINBOSS_DRAINING_SCHEDULE", "graceful") or "graceful").lower()
        if schedule not in SCHEDULES:
            raise ConfigError(f"{p.where('DRAINBOSS_DRAINING_SCHEDULE')}: DRAINBOSS_DRAINING_SCHEDULE = "
                              f"{schedule!r} is not one of {', '.join(SCHEDULES)}")
        choice = (p.str("DRAINBOSS_NODE_CHOICE", "random") or "random").lower()
        if choice not in POLICIES:
            raise ConfigError(f"{p.where('DRAINBOSS_NODE_CHOICE')}: DRAINBOSS_NODE_CHOICE = {choice!r} "
                              f"is not one of {', '.join(POLICIES)}")
        state = p.str("DRAINBOSS_STATE_FILE")
        cfg = cls(
            controller=settings,
            interval_s=interval,
            keepgoing=bool(p.bool("DRAINBOSS_KEEPGOING", False)),
            test=bool(p.bool("DRAINBOSS_TEST", False)),
            multicore_cpus=p.int("DRAINBOSS_MULTICORE_CPUS", 8, minimum=1) or 8,
            wide_cpus=p.int("DRAINBOSS_WIDE_CPUS", 8, minimum=1) or 8,
            node_choice=choice,
            draining_schedule=schedule,
            resume_on_completion=bool(p.bool("DRAINBOSS_RESUME_ON_COMPLETION", False)),
            draining_start_expr=p.expr("DRAINBOSS_DRAINING_START_EXPR", "") or "",
            state_file=Path(state) if state else (spool_dir / "drainboss_state.json" if spool_dir else None),
        )
        try:
            cfg.controller.validate()
        except SettingsError as e:
            raise ConfigError(f"{_where_setting(p, str(e))}: {e}") from None
        options = p.str("DRAINBOSS_OPTIONS")
        if options:
            try:
                cfg = with_options(cfg, options)
            except SettingsError as e:
                raise ConfigError(f"{p.where('DRAINBOSS_OPTIONS')}: DRAINBOSS_OPTIONS = {options!r}: {e}") from None
        return cfg


_KNOB_OF_OPTION = {"--setpoint": "DRAINBOSS_SETPOINT", "--propband": "DRAINBOSS_PROPBAND",
                   "--reset": "DRAINBOSS_RESET", "--lookback": "DRAINBOSS_LOOKBACK",
                   "--maxtodrain": "DRAINBOSS_MAXTODRAIN", "interval": "DRAINBOSS_INTERVAL"}


def _where_setting(p: Param, message: str) -> str:
    for option, knob in _KNOB_OF_OPTION.items():
        if message.startswith(option):
            return f"{p.where(knob)}: {knob}"
    return "configuration"


def _num(p: Param, name: str, default: float) -> float:
    v = p.float(name, default, maximum=LARGE)
    return default if v is None else v


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise SettingsError(message)


def option_parser() -> argparse.ArgumentParser:
    """The seed's options (drainBoss.py -h), plus htcpool's."""
    p = _Parser(prog="drainboss", add_help=False, exit_on_error=False)
    p.add_argument("-s", "--setpoint", type=float, help="running multicore jobs wanted (seed: 250)")
    p.add_argument("-p", "--propband", type=float, help="proportional band: error giving full output (seed: 200)")
    p.add_argument("-r", "--reset", type=float, help="reset (integral) time, seconds (seed: 10000)")
    p.add_argument("-l", "--lookback", type=float, help="integration window, seconds (seed: 86400)")
    p.add_argument("-m", "--maxtodrain", type=int, help="most nodes to start draining per run (seed: 9)")
    p.add_argument("-k", "--keepgoing", action="store_true", default=None,
                   help="do not cancel drains when only single-core jobs are queued")
    p.add_argument("-t", "--test", action="store_true", default=None, help="log decisions, change nothing")
    p.add_argument("--multicore-cpus", type=int, help="RequestCpus from which a job is multicore (8)")
    p.add_argument("--wide", type=int, help="cpus of a slot that fits a multicore job (8)")
    p.add_argument("--node-choice", choices=POLICIES, help="random | largest | fewest")
    return p


def with_options(cfg: DrainBossConfig, text: str) -> DrainBossConfig:
    """`cfg` with a seed-style command line applied; SettingsError (nothing changed) if bad."""
    try:
        ns = option_parser().parse_args(shlex.split(text))
    except (argparse.ArgumentError, ValueError) as e:
        raise SettingsError(str(e)) from None
    c = cfg.controller
    controller = replace(c, setpoint=_pick(ns.setpoint, c.setpoint), propband=_pick(ns.propband, c.propband),
                         reset_s=_pick(ns.reset, c.reset_s), lookback_s=_pick(ns.lookback, c.lookback_s),
                         maxtodrain=_pick(ns.maxtodrain, c.maxtodrain)).validate()
    for name, value in (("--multicore-cpus", ns.multicore_cpus), ("--wide", ns.wide)):
        if value is not None and value < 1:
            raise SettingsError(f"{name} {value}: must be 1 or more cpus")
    return replace(cfg, controller=controller, keepgoing=_pick(ns.keepgoing, cfg.keepgoing),
                   test=_pick(ns.test, cfg.test), multicore_cpus=_pick(ns.multicore_cpus, cfg.multicore_cpus),
                   wide_cpus=_pick(ns.wide, cfg.wide_cpus), node_choice=_pick(ns.node_choice, cfg.node_choice))


def _pick(value, default):
    return default if value is None else value
