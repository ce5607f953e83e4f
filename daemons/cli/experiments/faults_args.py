"""Options of `htcpool experiment faults` (kept apart so the CLI's parser stays light)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

# The kinds a pool of local processes supports; partition is emulated in the daemons'
# own fault layers (calls dropped both ways) since loopback has no interfaces to cut.
DEFAULT_KINDS = "kill,pause,restart,partition,delay,drop,abort,clock"
# With --netns the network is real: partitions, resets and loss are iptables rules in a
# daemon's namespace, and bandwidth limits (tc) become possible.
NETNS_KINDS = DEFAULT_KINDS + ",reset,loss,bandwidth"


@dataclass(frozen=True)
class Config:
    jobs: int
    faults: int
    kinds: tuple[str, ...]
    seed: int
    netns: bool                   # every daemon on its own host (a network namespace)
    startds: int
    machines: int                 # per startd
    cpus: int                     # per machine (one partitionable slot)
    mean_s: float                 # mean job duration, pool seconds (uniform on [mean/2, 3 mean/2])
    time_scale: float
    batches: int                  # submits: the first half of the jobs at once, the rest spread out
    act_fraction: float           # of the jobs: half removed, half held and released, while faults run
    min_fault_s: float
    max_fault_s: float
    max_concurrent: int
    sample_s: float               # pool seconds between samples of the pool
    max_wall_s: float             # the whole campaign stops by itself after this
    usage_tolerance: float
    out: str | None
    json: bool

    @property
    def slots(self) -> int:
        return self.startds * self.machines * self.cpus


def add_arguments(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    p.add_argument("--jobs", type=int, default=2000, help="jobs in the workload (default 2000)")
    p.add_argument("--faults", type=int, default=24, help="faults the nemesis injects (default 24)")
    p.add_argument("--kinds", help=f"fault kinds, comma-separated (default {DEFAULT_KINDS}; with --netns also "
                                   "reset, loss, bandwidth)")
    p.add_argument("--netns", action="store_true",
                   help="every daemon in its own network namespace (needs root): network faults are real")
    g = p.add_argument_group("pool and workload")
    g.add_argument("--startds", type=int, default=3, help="startd processes (default 3)")
    g.add_argument("--machines", type=int, default=10, help="machines per startd (default 10)")
    g.add_argument("--cpus", type=int, default=4, help="cores per machine, one partitionable slot (default 4)")
    g.add_argument("--mean-duration", type=float, default=300.0,
                   help="mean job length in pool seconds; lengths are uniform on [mean/2, 3 mean/2] (default 300)")
    g.add_argument("--time-scale", type=float, default=60.0, help="pool seconds per wall second (default 60)")
    g.add_argument("--batches", type=int, default=6,
                   help="submits: half the jobs at the start, the rest in batches while faults run (default 6)")
    g.add_argument("--act-fraction", type=float, default=0.02,
                   help="fraction of the jobs the experiment acts on while faults run: half removed, half held "
                        "and released later (default 0.02)")
    g = p.add_argument_group("nemesis")
    g.add_argument("--min-fault", type=float, default=60.0, help="shortest fault, pool seconds (default 60)")
    g.add_argument("--max-fault", type=float, default=600.0, help="longest fault, pool seconds (default 600)")
    g.add_argument("--concurrent", type=int, default=2, help="faults in force at once, at most (default 2)")
    g.add_argument("--sample-interval", type=float, default=30.0,
                   help="pool seconds between samples of the pool (default 30)")
    g.add_argument("--max-wall", type=float, default=0.0,
                   help="stop after this many wall seconds whatever happens (default: 3 x the expected run + 5 min)")
    g.add_argument("--usage-tolerance", type=float, default=0.25,
                   help="allowed relative difference of the accountant's usage and the claimed slot time "
                        "(default 0.25: the accountant samples once a cycle and charges a gap at the last usage "
                        "it saw, as HTCondor's does)")

    def run(args: argparse.Namespace) -> int:
        from daemons.cli.experiments import faults
        return faults.run(args)
    return run


def config(args: argparse.Namespace) -> Config:
    """The run's settings; ValueError naming the option when one is out of range."""
    from daemons.cli.experiments.nemesis import KINDS
    text = args.kinds or (NETNS_KINDS if args.netns else DEFAULT_KINDS)
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"--kinds: unknown fault kind {unknown[0]!r} (known: {', '.join(KINDS)})")
    if "bandwidth" in kinds and not args.netns:
        raise ValueError("--kinds: bandwidth needs real interfaces: add --netns (root)")
    if args.netns:
        from daemons.harness import netns
        why = netns.unavailable()
        if why:
            raise ValueError(f"--netns: {why}")
    for name, value, low in (("--jobs", args.jobs, 1), ("--faults", args.faults, 0), ("--startds", args.startds, 1),
                             ("--machines", args.machines, 1), ("--cpus", args.cpus, 1),
                             ("--batches", args.batches, 1), ("--concurrent", args.concurrent, 1)):
        if value < low:
            raise ValueError(f"{name} {value} must be at least {low}")
    for name, value in (("--mean-duration", args.mean_duration), ("--time-scale", args.time_scale),
                        ("--min-fault", args.min_fault), ("--sample-interval", args.sample_interval)):
        if not value > 0:
            raise ValueError(f"{name} {value:g} must be positive")
    if args.max_fault < args.min_fault:
        raise ValueError(f"--max-fault {args.max_fault:g} is shorter than --min-fault {args.min_fault:g}")
    if not 0 <= args.act_fraction <= 1:
        raise ValueError(f"--act-fraction {args.act_fraction:g} must be between 0 and 1")
    if not 0 < args.usage_tolerance < 10:
        raise ValueError(f"--usage-tolerance {args.usage_tolerance:g} must be a fraction, e.g. 0.15")
    return Config(jobs=args.jobs, faults=args.faults, kinds=kinds, seed=args.seed, netns=args.netns,
                  startds=args.startds,
                  machines=args.machines, cpus=args.cpus, mean_s=args.mean_duration, time_scale=args.time_scale,
                  batches=args.batches, act_fraction=args.act_fraction, min_fault_s=args.min_fault, max_fault_s=args.max_fault,
                  max_concurrent=args.concurrent, sample_s=args.sample_interval, max_wall_s=args.max_wall,
                  usage_tolerance=args.usage_tolerance, out=args.out, json=args.json)
