"""Options of `htcpool experiment multicore` (kept apart so the CLI's parser stays light)."""
from __future__ import annotations

import argparse
from typing import Callable


def add_arguments(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    p.add_argument("--controller", choices=("none", "defrag", "drainboss"), default="drainboss",
                   help="what drains machines (default drainboss)")
    p.add_argument("--compare", action="store_true", help="run none, defrag and drainboss on the same seed")
    g = p.add_argument_group("pool and run")
    g.add_argument("--machines", type=int, default=100, help="8-core machines (default 100)")
    g.add_argument("--cpus", type=int, default=8, help="cores per machine, and of a multicore job (default 8)")
    g.add_argument("--hours", type=float, default=96.0, help="pool hours measured (default 96)")
    g.add_argument("--warmup-hours", type=float, default=12.0,
                   help="pool hours after the pool fills that the statistics leave out (default 12)")
    # 300: the scale at which the 100-machine pool keeps up on 2 cores (README, "multicore").
    g.add_argument("--time-scale", type=float, default=300.0, help="pool seconds per wall second (default 300)")
    g.add_argument("--sample-interval", type=float, default=300.0,
                   help="pool seconds between samples and queue top-ups (default 300)")
    g.add_argument("--negotiator-interval", type=int, default=300, help="NEGOTIATOR_INTERVAL (default 300)")
    g.add_argument("--max-lag", type=float, default=None,
                   help="HTCPOOL_MAX_LAG, pool seconds a daemon may run behind before the pool slows its "
                        "clock (default: the sample interval; hour-long jobs do not notice less)")
    g.add_argument("--priority", choices=("group", "factor", "none"), default="group",
                   help="how multicore work is preferred: group = accounting groups and the seed's GROUP_SORT_EXPR "
                        "(default); factor = no groups, the multicore submitter's priority factor set to 250 "
                        "against the default 1000 (the seed's condor_userprio -setfactor route); none = fair "
                        "share alone")
    g = p.add_argument_group("workload (seeded)")
    g.add_argument("--sc-queued", type=int, default=100, help="single-core jobs kept waiting (default 100)")
    g.add_argument("--mc-queued", type=int, default=20, help="multicore jobs kept waiting (default 20)")
    g.add_argument("--sc-hours", type=float, default=3.0, help="mean single-core job length, hours (default 3)")
    g.add_argument("--mc-hours", type=float, default=6.0, help="mean multicore job length, hours (default 6)")
    g.add_argument("--delivery-hours", type=float, default=36.0,
                   help="mean stretch of multicore delivery between droughts, hours (default 36)")
    g.add_argument("--drought-hours", type=float, default=4.0,
                   help="mean multicore drought, hours; 0 for none (default 4)")
    g = p.add_argument_group("DrainBoss (the seed's options; see the README on tuning)")
    g.add_argument("--setpoint", type=float, help="running multicore jobs wanted (default 30%% of the machines)")
    g.add_argument("--maxtodrain", type=int, default=1, help="most nodes drained per run (default 1)")
    g.add_argument("--propband", type=float,
                   help="proportional band, jobs (default: tuned from the expected drain time, 2 x maxtodrain x "
                        "drain time / interval)")
    g.add_argument("--reset", type=float, help="reset time, s (default: 8 x the expected drain time)")
    g.add_argument("--lookback", type=float, default=86400.0, help="integration window, s (default 86400)")
    g.add_argument("--keepgoing", action=argparse.BooleanOptionalAction, default=True,
                   help="do not cancel drains in a multicore drought (default: keep going, as the seed's cron line)")
    g.add_argument("--node-choice", choices=("random", "largest", "fewest"), default="random")
    g.add_argument("--drainboss-interval", type=int, default=300, help="DRAINBOSS_INTERVAL (default 300)")

    def run(args: argparse.Namespace) -> int:
        from daemons.cli.experiments import multicore
        return multicore.run(args)
    return run
