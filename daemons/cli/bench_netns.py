"""`htcpool bench netns`: the same pool on loopback and across network namespaces.

One pool (collector, negotiator, schedd, one startd emulating `--machines` machines of
`--cpus` cores) runs `--jobs` zero-length jobs twice: first with every daemon on this
host's loopback, then with each daemon in its own network namespace on one bridge
(daemons/harness/netns.py), bound to all interfaces and advertising its own address,
as on separate hosts (security on in both: every daemon shares the pool's key from
the state directory, and the bench's client carries the invoking user's token). The
figure is jobs per second of wall time from submit until the history holds every job,
for each, and their ratio (namespaces / loopback): what real interfaces (veth, a
bridge, netfilter) cost the pool. Needs root.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from daemons.cli.client import wait_for
from daemons.cli.pool import LocalPool, PoolError
from daemons.core import ads

TIME_SCALE = 1000.0
CONFIG = """\
NUM_CPUS = {cpus}
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
NUM_SLOTS_TYPE_1 = 1
TIME_SCALE = {scale:g}
NEGOTIATOR_INTERVAL = 60
"""
NETNS_CONFIG = """\
NETWORK_INTERFACE = *
BIND_ALL_INTERFACES = True
"""
HOSTS = ("collector", "negotiator", "schedd", "startd1")


class BenchFailed(RuntimeError):
    pass


async def _run_jobs(pool: LocalPool, jobs: int, machines: int) -> dict[str, Any]:
    async with pool.client() as c:     # the invoking user's token (a super user: submits as "bench")
        async def ready() -> bool:
            hosts = {str(ads.get(a, "Machine")) for a in await c.ads("Machine", projection=["Machine"])}
            return len(hosts) >= machines and bool(await c.ads("Negotiator", projection=["Name"]))
        await wait_for(ready, timeout_s=120, what=f"{machines} machines and the negotiator in the collector")
        t0 = time.monotonic()
        cluster, _ = await c.submit(f"executable = /bin/sleep\narguments = 0\nqueue {jobs}\n", "bench.sub", "bench")

        async def done() -> bool:
            hist = await c.jobs(f"ClusterId == {cluster}", ["ProcId", "JobStatus"], history=True)
            return sum(1 for h in hist if ads.get(h, "JobStatus") == 4) >= jobs
        await wait_for(done, timeout_s=max(300.0, jobs * 0.3), interval_s=0.25, what=f"{jobs} jobs to complete")
        wall = time.monotonic() - t0
        return {"wall_s": round(wall, 2), "jobs_per_s": round(jobs / wall, 1)}


def _one(where: str, args: argparse.Namespace, state: Path, emit) -> dict[str, Any]:
    from daemons.harness import netns
    config = state / f"{where}.conf"
    text = CONFIG.format(cpus=args.cpus, scale=TIME_SCALE)
    net = None
    kw: dict[str, Any] = {}
    if where == "netns":
        text += NETNS_CONFIG
        net = netns.Network(HOSTS).create()
        # LocalPool names its lone startd "startd1", the host it runs on.
        kw = {"launch_prefix": lambda key: net[key].argv([])}
    config.write_text(text)
    pool = LocalPool(state / where, config, machines=args.machines, startds=1, **kw)
    try:
        pool.start()
        emit(f"{where}: pool up, collector at {pool.collector_address}")
        r = asyncio.run(_run_jobs(pool, args.jobs, args.machines))
        emit(f"{where}: {args.jobs} jobs in {r['wall_s']} s ({r['jobs_per_s']} jobs/s)")
        return r
    finally:
        pool.stop()
        if net is not None:
            net.close()


def bench_netns(args: argparse.Namespace) -> int:
    from daemons.harness import netns
    why = netns.unavailable()
    if why:
        print(f"htcpool bench netns: {why}", file=sys.stderr)
        return 2
    for name in ("jobs", "machines", "cpus"):
        if getattr(args, name) < 1:
            print(f"htcpool bench netns: --{name} must be at least 1", file=sys.stderr)
            return 2
    state = Path(tempfile.mkdtemp(prefix="htcpool-bench-netns-"))
    emit = lambda line: print(line, flush=True)   # noqa: E731
    try:
        loop = _one("loopback", args, state, emit)
        ns = _one("netns", args, state, emit)
    except (BenchFailed, PoolError, TimeoutError) as e:
        print(f"htcpool bench netns: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(state, ignore_errors=True)
    ratio = round(ns["jobs_per_s"] / loop["jobs_per_s"], 3) if loop["jobs_per_s"] else None
    emit(f"\n{'':10}{'wall s':>8}{'jobs/s':>9}\n{'loopback':10}{loop['wall_s']:>8}{loop['jobs_per_s']:>9}\n"
         f"{'netns':10}{ns['wall_s']:>8}{ns['jobs_per_s']:>9}\nratio (netns / loopback): {ratio}")
    if args.json:
        print(json.dumps({"jobs": args.jobs, "machines": args.machines, "cpus": args.cpus, "time_scale": TIME_SCALE,
                          "loopback_jobs_per_s": loop["jobs_per_s"], "netns_jobs_per_s": ns["jobs_per_s"],
                          "loopback_wall_s": loop["wall_s"], "netns_wall_s": ns["wall_s"], "ratio": ratio}))
    return 0
