"""`htcpool bench security`: what authentication costs per RPC.

For each way of running a pool (security off; tokens, htcpool's default; tokens over
TLS; tokens over mutual TLS) a fresh collector process answers `Admin.Ping` (READ):
the round trip of `--calls` calls one at a time (mean, p50, p99) and of the same
number with 100 in flight (per call). In this process it also times what the
security layer does per call: verifying a token (signature, claims) the first time,
and the cache hit every later call costs.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from daemons.cli.benchkit import KEEP_ENV, time_calls
from daemons.cli.client import PoolClient
from daemons.cli.pool import LocalPool, PoolError
from daemons.core.config import ConfigError
from daemons.pb.htcpool import admin_pb2_grpc, common_pb2

MODES = ("off", "token", "tls", "mutual")
CONFIG = "NETWORK_HOSTNAME = benchhost\n"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _ping_costs(client: PoolClient, address: str, calls: int) -> dict[str, float]:
    stub = admin_pb2_grpc.AdminStub(client.channels.get(address))

    async def ping():
        return await stub.Ping(common_pb2.Empty(), timeout=10)

    await time_calls(min(200, calls), ping)                      # warm up: channel, caches
    one = await time_calls(calls, ping)
    sem = asyncio.Semaphore(100)

    async def bounded():
        async with sem:
            await ping()
    t0 = time.perf_counter()
    await asyncio.gather(*(bounded() for _ in range(calls)))
    many = (time.perf_counter() - t0) * 1000.0 / calls
    return {"mean_ms": round(statistics.fmean(one), 3), "p50_ms": round(_pct(one, 0.5), 3),
            "p99_ms": round(_pct(one, 0.99), 3), "in_flight_100_ms": round(many, 3)}


def _mode(mode: str, state: Path, calls: int) -> dict[str, float]:
    config = state / f"{mode}.conf"
    config.write_text(CONFIG + ("SEC_DEFAULT_AUTHENTICATION = NEVER\n" if mode == "off" else ""))
    tls = {"tls": True, "mutual": "mutual"}.get(mode, False)
    pool = LocalPool(state / mode, config, roles=("collector",), tls=tls)
    pool.start()
    try:
        async def run() -> dict[str, float]:
            client = pool.client() if mode != "off" else PoolClient(pool.collector_address)
            async with client:
                return await _ping_costs(client, pool.collector_address, calls)
        return asyncio.run(run())
    finally:
        pool.stop()


def _layer_costs(state: Path, n: int = 2000) -> dict[str, float]:
    """Per-call work of the security layer, in this process: verification and a cache hit."""
    from daemons.core.security.keys import KeyRing, create_key_file
    from daemons.core.security.tokens import TokenCache, mint, verify
    key_file = state / "layer" / "POOL"
    create_key_file(key_file)
    keys = KeyRing(key_file, key_file.parent)
    token = mint(keys.jwt_key("POOL"), identity="alice@bench", issuer="bench", scopes=["READ", "WRITE"])
    t0 = time.perf_counter()
    for _ in range(n):
        verify(token, keys, trust_domain="bench")
    verify_us = (time.perf_counter() - t0) * 1e6 / n
    cache = TokenCache(lambda t: verify(t, keys, trust_domain="bench"))
    now = time.time()
    cache.get(token, now)
    t0 = time.perf_counter()
    for _ in range(n * 10):
        cache.get(token, now)
    hit_us = (time.perf_counter() - t0) * 1e6 / (n * 10)
    return {"verify_us": round(verify_us, 2), "cache_hit_us": round(hit_us, 3)}


def bench_security(args: argparse.Namespace) -> int:
    if args.calls < 10:
        print("htcpool bench security: --calls must be at least 10", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"htcpool bench security: --modes {','.join(unknown)}: unknown (one of {', '.join(MODES)})",
              file=sys.stderr)
        return 2
    keep = os.environ.get(KEEP_ENV, "") not in ("", "0")
    state = Path(tempfile.mkdtemp(prefix="htcpool-bench-security-"))
    result: dict[str, Any] = {"calls": args.calls, "rpc": "Admin.Ping", "modes": {}}
    try:
        for mode in modes:
            result["modes"][mode] = _mode(mode, state, args.calls)
            r = result["modes"][mode]
            print(f"  {mode:<7} one at a time: mean {r['mean_ms']:.3f} ms, p50 {r['p50_ms']:.3f}, "
                  f"p99 {r['p99_ms']:.3f}; 100 in flight: {r['in_flight_100_ms']:.3f} ms a call", flush=True)
        result["layer"] = _layer_costs(state)
    except (PoolError, ConfigError, TimeoutError) as e:
        print(f"htcpool bench security: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
    base = result["modes"].get("off")
    if base:
        for mode, r in result["modes"].items():
            r["vs_off_p50"] = round(r["p50_ms"] / base["p50_ms"], 3) if base["p50_ms"] else None
    print(f"  token verification {result['layer']['verify_us']:.1f} us the first time, "
          f"{result['layer']['cache_hit_us']:.2f} us a call after (cache)")
    if args.json:
        print(json.dumps(result))
    return 0
