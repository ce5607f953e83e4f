"""`htcpool experiment NAME`: scientific runs on real pools that write CSV and PNG.

Each experiment registers its arguments here; `run(args)` returns an exit code and,
with --json, prints one JSON object as its last line.
"""
from __future__ import annotations

import argparse
from typing import Callable


def _autocluster(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    p.add_argument("--cycles", type=int, default=4, help="negotiation cycles measured per run (default 4)")
    p.add_argument("--warmup", type=int, default=0,
                   help="cycles left out after the one that fills the empty pool (default 0)")
    p.add_argument("--interval", type=int, default=300, help="NEGOTIATOR_INTERVAL, pool seconds (default 300)")
    p.add_argument("--users", type=int, default=85, help="submitters (default 85, as seed 000)")
    p.add_argument("--jobs", type=int, default=5831, help="jobs (default 5831, as seed 000)")
    p.add_argument("--kinds", type=int, default=372, help="job kinds, i.e. autoclusters (default 372, as seed 000)")
    p.add_argument("--machine-scale", type=float, default=1.0, help="multiply every machine class's size")
    # A cycle must take a small part of its 300 s interval in pool time, as a real pool's
    # (seconds) does: at 5 a cycle of 4 wall seconds is 20 pool seconds. At 30 a cycle
    # without autoclustering takes most of the interval and the run is flagged as distorted.
    p.add_argument("--time-scale", type=float, default=5.0,
                   help="pool seconds per wall second (default 5; a run takes about 12 minutes)")

    def run(args: argparse.Namespace) -> int:
        from daemons.cli.experiments import autocluster
        return autocluster.run(args)
    return run


EXPERIMENTS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int]]]] = {
    "autocluster": ("seed 000: match fraction with and without autoclustering", _autocluster),
    "cadence": ("seed 004: slot and pool loading factor against NEGOTIATOR_INTERVAL",
                lambda p: __import__("daemons.cli.experiments.cadence", fromlist=["cadence"]).add_arguments(p)),
    "multicore": ("seed 003: running multicore jobs and drain wastage with no controller, defrag or DrainBoss",
                  lambda p: __import__("daemons.cli.experiments.multicore_args",
                                       fromlist=["multicore_args"]).add_arguments(p)),
    "faults": ("fault injection: a seeded nemesis kills, pauses, partitions, slows and skews daemons while jobs "
               "run; checks that every job completes exactly once",
               lambda p: __import__("daemons.cli.experiments.faults_args", fromlist=["faults_args"]).add_arguments(p)),
}
