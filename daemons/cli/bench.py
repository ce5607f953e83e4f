"""`htcpool bench NAME`: performance figures of local pools of real processes.

The table of benches (BENCHES); each bench is a module of its own (bench_throughput,
bench_negotiator, bench_scale, ...), loaded when it runs, and what they share is in
daemons/cli/benchkit.py. `autocluster` is here: it measures the schedd's
autoclustering in this process, with no pool.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

# ---- autocluster ------------------------------------------------------------------------
# A significant list like a heterogeneous pool's (what the experiment's pool sends).
AUTOCLUSTER_SIGNIFICANT = ("Department", "ImageSize", "Offline", "Owner", "RequestCpus", "RequestDisk",
                           "RequestMemory", "TotalJobRuntime", "WantGPU")


def bench_autocluster(args: argparse.Namespace) -> int:
    """Schedd-side: ids for N fresh jobs, and the cost of re-clustering after one SetAttribute.

    The jobs are the experiment's workload scaled up (its 12 templates, 85 users), built
    by the schedd's own submit code into a real JobQueue; the clock is perf_counter.
    """
    import random as _random

    from daemons.cli.experiments.autocluster import workload
    from daemons.schedd import txlog
    from daemons.schedd.autocluster import Autoclusterer
    from daemons.schedd.jobqueue import JobQueue
    from daemons.schedd.submit import SubmitContext, build_jobs, parse_submit

    n = args.jobs
    if n < 1:
        print("htcpool bench autocluster: --jobs must be at least 1", file=sys.stderr)
        return 2
    queue = JobQueue("bench.example")
    t0 = time.perf_counter()
    users = workload(args.seed, jobs=n)  # the trace's 85 users and 372 job kinds, more jobs per kind
    cluster = 0
    for u in users:
        cluster += 1
        procs = build_jobs(parse_submit(u.submit, f"{u.user}.sub"),
                           SubmitContext(owner=u.user, uid_domain="bench.example", cluster_id=cluster, now=0))
        queue.apply(queue.submit_lines(procs, cluster))
    build_s = time.perf_counter() - t0
    jobs = list(queue.jobs.values())

    ac = Autoclusterer(canon=queue.canonical)
    ac.update_negotiator_attrs(AUTOCLUSTER_SIGNIFICANT)
    t0 = time.perf_counter()
    ids = [ac.assign(j) for j in jobs]
    assign_s = time.perf_counter() - t0
    autoclusters = len(set(ids))
    cached_t0 = time.perf_counter()
    for j in jobs:
        ac.assign(j)
    cached_s = time.perf_counter() - cached_t0

    # One SetAttribute of a significant attribute, then the job's id again: HTCondor's
    # invalidation path (the id cache is dropped, the signature rebuilt).
    rng = _random.Random(args.seed)
    sample = [rng.choice(jobs) for _ in range(min(20_000, len(jobs)))]
    costs = []
    for j in sample:
        mem = j.attrs.get("RequestMemory", "128")
        t = time.perf_counter()
        queue.apply([txlog.op_set(j.id, "RequestMemory", str(int(mem) + 1) if mem.isdigit() else "256")])
        ac.assign(j)
        costs.append(time.perf_counter() - t)
    recluster_us = statistics.mean(costs) * 1e6
    result = {
        "jobs": len(jobs),
        "autoclusters": autoclusters,
        "jobs_per_s": round(len(jobs) / assign_s),
        "recluster_us": round(recluster_us, 2),
        "recluster_p50_us": round(statistics.median(costs) * 1e6, 2),
        "assign_s": round(assign_s, 3),
        "cached_lookup_ns": round(cached_s / len(jobs) * 1e9, 1),
        "build_queue_s": round(build_s, 2),
        "significant_attributes": len(ac.base_list()),
        "seed000_jobs_per_s": round(5831 / 4.7, 1),
    }
    print(f"autocluster ids for {len(jobs)} fresh jobs ({len(users)} users, {autoclusters} autoclusters, "
          f"{result['significant_attributes']} significant attributes before expansion):")
    print(f"  {'jobs per second':<44}{result['jobs_per_s']:>12,}")
    print(f"  {'  (seed 000: 5,831 jobs in 4.7 s)':<44}{result['seed000_jobs_per_s']:>12,}"
          f"   x{result['jobs_per_s'] / result['seed000_jobs_per_s']:,.0f}")
    print(f"  {'id lookup when cached':<44}{result['cached_lookup_ns']:>12} ns/job")
    print(f"  {'re-cluster after one SetAttribute (mean/p50)':<44}{result['recluster_us']:>12} / "
          f"{result['recluster_p50_us']} us")
    if args.json:
        print(json.dumps(result))
    return 0


def bench_throughput(args: argparse.Namespace) -> int:
    from daemons.cli.bench_throughput import bench_throughput as run
    return run(args)


def bench_negotiator(args: argparse.Namespace) -> int:
    from daemons.cli.bench_negotiator import bench_negotiator as run
    return run(args)


def bench_security(args: argparse.Namespace) -> int:
    from daemons.cli.bench_security import bench_security as run
    return run(args)


def bench_netns(args: argparse.Namespace) -> int:
    from daemons.cli.bench_netns import bench_netns as run
    return run(args)


def bench_fuzz(args: argparse.Namespace) -> int:
    from daemons.cli.bench_fuzz import bench_fuzz as run
    return run(args)


def bench_scale(args: argparse.Namespace) -> int:
    from daemons.cli.bench_scale import bench_scale as run
    return run(args)


def bench_schedd(args: argparse.Namespace) -> int:
    from daemons.cli.bench_schedd import bench_schedd as run
    return run(args)


def bench_startd(args: argparse.Namespace) -> int:
    from daemons.cli.bench_startd import bench_startd as run
    return run(args)


BENCHES: dict[str, Callable[[argparse.Namespace], int]] = {"throughput": bench_throughput,
                                                          "autocluster": bench_autocluster,
                                                          "negotiator": bench_negotiator,
                                                          "security": bench_security,
                                                          "netns": bench_netns,
                                                          "fuzz": bench_fuzz,
                                                          "scale": bench_scale,
                                                          "schedd": bench_schedd,
                                                          "startd": bench_startd}
