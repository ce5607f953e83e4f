"""What every htcpool command shares: errors and exit codes, finding the pool, printing ads."""
from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import grpc

from daemons.core.rpc import describe

DEFAULT_STATE_DIR = ".htcpool"
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def state_dir(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "state_dir", None) or os.environ.get("HTCPOOL_STATE_DIR") or DEFAULT_STATE_DIR)


def collector_address(args: argparse.Namespace) -> str:
    if getattr(args, "pool", None):
        return args.pool
    if os.environ.get("HTCPOOL_POOL"):
        return os.environ["HTCPOOL_POOL"]
    # Inside a pool's container: HTCondor's own environment overrides name the collector.
    for knob in ("_CONDOR_COLLECTOR_HOST", "_CONDOR_CONDOR_HOST"):
        if os.environ.get(knob):
            from daemons.core.common import split_host_port
            try:
                host, port = split_host_port(os.environ[knob])
            except ValueError as e:
                raise CliError(f"environment {knob} = {os.environ[knob]!r}: {e}", EXIT_USAGE) from None
            return f"{host}:{port}"
    from daemons.cli.pool import PoolError, load_state
    try:
        state = load_state(state_dir(args))
    except PoolError as e:
        raise CliError(f"{e}; or name a pool with --pool HOST:PORT or HTCPOOL_POOL") from None
    return state["collector"]


def run_async(coro) -> Any:
    from daemons.cli.client import ClientError
    try:
        return asyncio.run(coro)
    except grpc.aio.AioRpcError as e:
        if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                        grpc.StatusCode.FAILED_PRECONDITION):
            raise CliError(e.details() or e.code().name, EXIT_USAGE) from None
        raise CliError(f"the pool did not answer: {describe(e)}") from None
    except ClientError as e:
        raise CliError(str(e), EXIT_USAGE) from None


# ---- printing ads -------------------------------------------------------------------------
def value(ad, attr: str) -> Any:
    from daemons.core import ads
    return ads.get(ad, attr)


def jsonable(ad) -> dict[str, Any]:
    from daemons.core import ads
    out = {}
    for k in ad.keys():
        v = ads.get(ad, k)
        if v is None:
            v = ads.one_line(str(ad.lookup(k)))
        elif not isinstance(v, (str, int, float, bool, list)):
            v = str(v)
        out[k] = v
    return out


def print_long(rows: list) -> None:
    """Whole ads as condor_q -l / condor_status -l print them: expressions unevaluated."""
    from daemons.core import ads
    for ad in rows:
        for k in sorted(ad.keys(), key=str.lower):
            print(f"{k} = {ads.one_line(str(ad.lookup(k)))}")
        print()


def autoformat(rows: list, attrs: list[str]) -> None:
    for ad in rows:
        vals = []
        for a in attrs:
            v = value(ad, a)
            vals.append("undefined" if v is None else (("true" if v else "false") if isinstance(v, bool) else str(v)))
        print(" ".join(vals))


def duration(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 86400}+{(s % 86400) // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}"
