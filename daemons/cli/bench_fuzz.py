"""`htcpool bench fuzz`: a fuzzing campaign for a time budget, and its outcomes by class.

A third of the budget goes to the parsers (submit files as bytes, ClassAd texts,
configurations read knob by knob), each in a watched worker process; the rest to a
running pool (collector, negotiator, schedd, startd; security as by default, so every
call needs a token), round-robin in slices: submit files to the schedd, ClassAd texts
wherever a daemon takes one, every RPC of every daemon built from the protobuf
descriptors (with valid tokens: the daemons' own and a plain user's), the same RPCs with
bad credentials against the security layer (`auth`: no token, garbage metadata,
malformed, expired or foreign tokens, a kid naming no key), and configurations checked
as `htcpool up` checks them and then used to start a real daemon. It prints, for each class, the
inputs tried and how many were accepted, refused, errors, hangs and crashes (all of
the last three must be 0), writes the inputs behind any bad outcome to
OUT/failures.json, and exits 1 if there was one.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path


def bench_fuzz(args: argparse.Namespace) -> int:
    from daemons.fuzz import campaign as C
    from daemons.fuzz import targets as T
    if args.minutes <= 0:
        print("htcpool bench fuzz: --minutes must be positive", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else C.new_workdir()
    out.mkdir(parents=True, exist_ok=True)
    budget = args.minutes * 60.0
    tally = T.Tally()
    t0 = time.monotonic()
    parser_share = budget / 3
    for cls in ("submit", "classad", "config"):
        print(f"parsers: {cls} for {parser_share / 3:.0f} s", flush=True)
        C.run_parsers_watched(tally, cls, parser_share / 3, args.seed, out)
    pool_budget = max(10.0, budget - (time.monotonic() - t0))
    restarts = asyncio.run(_pool_campaign(tally, out, pool_budget, args.seed))
    wall = time.monotonic() - t0
    (out / "failures.json").write_text(json.dumps(tally.failures, indent=1))
    result = C.summary(tally)
    result.update({"minutes": args.minutes, "wall_s": round(wall, 1), "seed": args.seed,
                   "daemon_restarts": restarts, "out": str(out)})
    _print_table(tally, wall)
    if tally.failures:
        print(f"\n{len(tally.failures)} bad outcome(s); the inputs are in {out / 'failures.json'}")
    if args.json:
        print(json.dumps(result))
    return 1 if tally.bad() else 0


async def _pool_campaign(tally, out: Path, budget_s: float, seed: int) -> int:
    from daemons.cli.client import wait_for
    from daemons.cli.pool import LocalPool
    from daemons.fuzz import campaign as C
    from daemons.fuzz.pool_targets import FUZZ_POOL_CONFIG, PoolFuzzer
    cfg = out / "pool.conf"
    cfg.write_text(FUZZ_POOL_CONFIG)
    pool = LocalPool(out / "pool", cfg)
    print(f"pool: starting a fuzz pool in {out / 'pool'}", flush=True)
    await asyncio.to_thread(pool.start)
    try:
        # The daemons' own identity (condor@...): every RPC gets past authorization, so
        # the inputs reach the handlers.
        async with pool.client("condor") as c:
            await wait_for(lambda: c.ads("Machine"), timeout_s=60, what="the fuzz pool's slot ad")
            fuzzer = PoolFuzzer(pool, c)
            try:
                deadline = time.monotonic() + budget_s
                classes = ("submit", "rpc", "auth", "classad", "config")
                slice_s = max(10.0, min(60.0, budget_s / 10))
                turn = 0
                while time.monotonic() < deadline - 1:
                    cls = classes[turn % len(classes)]
                    left = deadline - time.monotonic()
                    print(f"pool: {cls} for {min(slice_s, left):.0f} s", flush=True)
                    await C.run_pool(tally, fuzzer, cls, min(slice_s, left), seed + 1000 * turn)
                    turn += 1
                C.final_checks(tally, fuzzer)
                return fuzzer.restarts
            finally:
                await fuzzer.close()
    finally:
        await asyncio.to_thread(pool.stop)


def _print_table(tally, wall: float) -> None:
    from daemons.fuzz.campaign import by_class
    from daemons.fuzz.targets import OUTCOMES
    print(f"\nfuzzing, {wall:.0f} s of wall time (inputs tried and outcomes by class; parser = in a worker "
          "process, pool = against the running daemons)")
    print(f"{'class':<16}{'tried':>8}" + "".join(f"{o:>10}" for o in OUTCOMES))
    totals = by_class(tally)
    for cls in ("submit", "config", "classad", "rpc", "auth", "pool"):
        for key in (f"{cls}:parser", f"{cls}:pool", cls):
            c = tally.counts.get(key) if key != cls else totals.get(cls)
            if c:
                label = key if key != cls else f"{cls} (all)"
                print(f"{label:<16}{sum(c.values()):>8}" + "".join(f"{c.get(o, 0):>10}" for o in OUTCOMES))
