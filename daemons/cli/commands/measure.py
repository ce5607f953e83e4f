"""`htcpool bench` and `htcpool experiment`: performance figures and scientific runs."""
from __future__ import annotations

import argparse


def cmd_bench(args: argparse.Namespace) -> int:
    from daemons.cli import benchreport
    from daemons.cli.bench import BENCHES
    # Every bench: peak RSS of its daemons, ratios to issue 14's goals and to --baseline.
    return benchreport.run(args.name, BENCHES[args.name], args)


def register(sub) -> None:
    common = sub.common_parent
    s = sub.add_parser("bench", help="performance figures")
    benches = s.add_subparsers(dest="name", required=True, metavar="NAME")
    b = benches.add_parser("throughput", parents=[common], help="1,000 zero-length jobs on 100 emulated machines")
    b.add_argument("--jobs", type=int, default=1000)
    b.add_argument("--machines", type=int, default=100)
    b.add_argument("--cpus", type=int, default=8)
    b.add_argument("--time-scale", type=float, default=1000.0, metavar="X",
                   help="the pool's TIME_SCALE (default 1000; a scale the pool cannot keep up with is "
                        "flagged LAGGED, or shows as ads the collector dropped as stale)")
    b.add_argument("--profile", metavar="DIR",
                   help="sample every daemon with py-spy while the jobs run; collapsed stacks and top "
                        "functions into DIR (with --repeat, DIR/run<K>)")
    b.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run N times, each on a fresh pool, and report the median run (default 1; at most 20)")
    b = benches.add_parser("autocluster", parents=[common], help="schedd autocluster ids: jobs/s and re-clustering cost")
    b.add_argument("--jobs", type=int, default=100_000)
    b.add_argument("--seed", type=int, default=0)
    b = benches.add_parser("negotiator", parents=[common],
                           help="one negotiation cycle's wall and CPU time at 1k, 10k and 50k slots")
    b.add_argument("--sizes", default="1000,10000,50000", help="pool sizes in slots (default 1000,10000,50000)")
    b.add_argument("--jobs", type=int, default=100_000, help="idle jobs (default 100,000)")
    b.add_argument("--submitters", type=int, default=100, help="submitters (default 100)")
    b.add_argument("--autoclusters", type=int, default=500, help="job kinds, one autocluster each (default 500)")
    b.add_argument("--profile", metavar="DIR",
                   help="sample every daemon with py-spy during the measured cycle; collapsed stacks and top "
                        "functions into DIR/<slots> (with --repeat, DIR/<slots>/run<K>)")
    b.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="measure each size N times, each on a fresh pool, and report the median run "
                        "(default 1; at most 20)")
    b = benches.add_parser("security", parents=[common],
                           help="the cost of authentication per RPC: without a token, with one, with TLS")
    b.add_argument("--calls", type=int, default=2000, help="RPCs per measurement (default 2,000)")
    b.add_argument("--modes", default="off,token,tls,mutual", help="off, token, tls, mutual (default all)")
    b = benches.add_parser("netns", parents=[common],
                           help="job throughput of one pool on loopback and across network namespaces (root)")
    b.add_argument("--jobs", type=int, default=1000)
    b.add_argument("--machines", type=int, default=50)
    b.add_argument("--cpus", type=int, default=8)
    b = benches.add_parser("fuzz", parents=[common],
                           help="a fuzzing campaign: inputs tried and outcomes by class (crashes, hangs, errors: 0)")
    b.add_argument("--minutes", type=float, default=5.0, help="time budget (default 5)")
    b.add_argument("--seed", type=int, default=0, help="hypothesis seed: the same seed tries the same inputs")
    b.add_argument("--out", help="where the pool, its logs and failures.json go (default a new temp dir)")
    b = benches.add_parser("scale", parents=[common],
                           help="the highest faithful TIME_SCALE of a steady pool at 1k, 10k and 50k slots")
    b.add_argument("--sizes", default="1000,10000,50000", help="pool sizes in slots (default 1000,10000,50000)")
    b.add_argument("--scales", default="100,300,1000,3000,10000",
                   help="TIME_SCALEs to try in rising order, stopping at the first unfaithful one "
                        "(default 100,300,1000,3000,10000)")
    b.add_argument("--interval", type=float, help="NEGOTIATOR_INTERVAL, pool s (default 300; --quick 60)")
    b.add_argument("--mean", type=float, help="mean job duration, pool s (default 3600; --quick 600)")
    b.add_argument("--distribution", default="exponential",
                   help="job durations: exponential, lognormal, uniform or fixed (default exponential)")
    b.add_argument("--warmup-hours", type=float, help="pool hours after the pool fills before measuring "
                                                      "(default 1; --quick 1/6)")
    b.add_argument("--window-hours", type=float, help="pool hours measured per step (default 3; --quick 0.5)")
    b.add_argument("--quantile", type=float, default=1.0,
                   help="share of the observations each criterion must hold for (default 1: every one)")
    b.add_argument("--max-step-wall", type=float, default=0.0,
                   help="wall seconds a step may take (default 0: set-up time plus twice the step's pool time)")
    b.add_argument("--refine", type=int, default=0, metavar="N",
                   help="then up to N more steps per size, each between the highest faithful scale and "
                        "the first unfaithful one (their geometric mean; default 0)")
    b.add_argument("--quick", action="store_true", help="short jobs and windows, for a test")
    b.add_argument("--seed", type=int, default=0, help="the workload's random seed")
    b.add_argument("--out", help="where CSV and PNG go (default results/scale)")
    b = benches.add_parser("schedd", parents=[common],
                           help="the schedd's job queue: submit, replay after a crash, queries, RSS per job")
    b.add_argument("--jobs", type=int, default=100_000, help="jobs in one `queue N` (default 100,000)")
    b = benches.add_parser("startd", parents=[common],
                           help="a startd's memory per emulated slot, in one process per size, "
                                "and its CPU per match on the claim path")
    b.add_argument("--sizes", default="10000,50000", help="slots in the one startd (default 10000,50000)")
    b.add_argument("--class", dest="machine_class", default="dept", choices=("std", "bigmem", "dept"),
                   help="bench negotiator's machine class (default dept: a START and a STARTD_ATTRS)")
    b.add_argument("--claim-machines", type=int, default=250,
                   help="8-slot machines claimed for the claim-path figure (default 250)")
    for b in benches.choices.values():
        b.add_argument("--json", action="store_true", help="end with one JSON object")
        b.add_argument("--baseline", metavar="FILE",
                       help="a previous run's --json output: print each figure's ratio to it")
        b.set_defaults(fn=cmd_bench)

    from daemons.cli.experiments import EXPERIMENTS
    s = sub.add_parser("experiment", help="scientific runs that write CSV and PNG")
    experiments = s.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, (help_text, add_args) in EXPERIMENTS.items():
        e = experiments.add_parser(name, parents=[common], help=help_text)
        e.add_argument("--json", action="store_true", help="end with one JSON object")
        e.add_argument("--out", help=f"where CSV and PNG go (default results/{name})")
        e.add_argument("--seed", type=int, default=0, help="the workload's random seed")
        e.set_defaults(fn=add_args(e))
