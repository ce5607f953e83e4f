"""What every htcpool command shares: errors and exit codes, finding the pool, printing ads."""
from __future__ import annotations

import argparse
import asyncio
import os
import re
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


def _environment_collector() -> str | None:
    """Inside a pool's container, HTCondor's own environment overrides name the collector."""
    for knob in ("_CONDOR_COLLECTOR_HOST", "_CONDOR_CONDOR_HOST"):
        if os.environ.get(knob):
            from daemons.core.common import split_host_port
            try:
                host, port = split_host_port(os.environ[knob])
            except ValueError as e:
                raise CliError(f"environment {knob} = {os.environ[knob]!r}: {e}", EXIT_USAGE) from None
            return f"{host}:{port}"
    return None


def checked_address(value: str, what: str = "address") -> str:
    """HOST:PORT of an address a user gave, or a one-line usage error naming it (gRPC would
    dial a port past 65535 modulo 65536)."""
    from daemons.core.common import split_host_port
    try:
        host, port = split_host_port(value)
        if not host:
            raise ValueError("no host")
        if not 0 < port <= 65535:
            raise ValueError(f"port {port} is not between 1 and 65535")
    except ValueError as e:
        raise CliError(f"{what} {value!r}: {e}", EXIT_USAGE) from None
    return f"{host}:{port}"


def _pool_target(args: argparse.Namespace) -> tuple[str, dict | None]:
    """The collector's address, and the state of the pool it came from (if it did)."""
    from daemons.cli.pool import PoolError, load_state
    named = getattr(args, "pool", None) or os.environ.get("HTCPOOL_POOL") or _environment_collector()
    if named:
        checked_address(named, "pool address")
    try:
        state = load_state(state_dir(args))
    except PoolError as e:
        if named:
            return named, None
        raise CliError(f"{e}; or name a pool with --pool HOST:PORT or HTCPOOL_POOL") from None
    except (OSError, ValueError):
        state = None
    if named:
        # The state directory's tokens go only to the pool it records.
        return named, state if state is not None and state.get("collector") == named else None
    if state is None:
        raise CliError(f"cannot read the pool recorded in {state_dir(args).resolve()}")
    return state["collector"], state


def collector_address(args: argparse.Namespace) -> str:
    return _pool_target(args)[0]


# Where the last client looked for tokens (named in an UNAUTHENTICATED refusal).
_token_sources: list[Path] = []
_tokens_sent = 0


def _daemon_addresses(state: dict) -> set[str]:
    return {str(state.get("collector", ""))} | {str(d.get("address", "")) for d in state.get("daemons", {}).values()}


def pool_client(args: argparse.Namespace, daemon: str | None = None):
    """A client of the pool this command addresses, with the tokens and TLS settings that
    pool's state directory records, then HTCondor's token directory and _CONDOR_* overrides.
    `daemon`: talk to this HOST:PORT instead of the collector (the state's tokens and TLS
    go with it only if it is one of that pool's daemons)."""
    global _token_sources, _tokens_sent
    from daemons.cli.client import PoolClient
    from daemons.core.security import discovery
    if daemon is None:
        address, state = _pool_target(args)
    else:
        try:
            state = _pool_target(args)[1]
        except CliError:
            state = None    # no pool recorded or named: the token directories only
        if state is not None and daemon not in _daemon_addresses(state):
            state = None
        address = daemon
    pool_tokens = Path(state["tokens"]) if state and state.get("tokens") else None
    _token_sources = discovery.candidate_dirs(os.environ, pool_tokens)
    tokens = discovery.candidates(_token_sources)
    _tokens_sent = len(tokens)
    creds, server_name = None, None
    tls = state.get("tls") if state else None
    env = os.environ
    encrypted = (env.get("_CONDOR_SEC_DEFAULT_ENCRYPTION") or "").strip().upper().startswith("R")
    if tls or encrypted:
        from daemons.core.security.tls import SERVER_NAME_ALIAS, channel_credentials
    if tls:
        creds = channel_credentials(Path(tls["ca"]), Path(tls["cert"]) if tls.get("cert") else None,
                                    Path(tls["key"]) if tls.get("key") else None)
    elif encrypted:
        def path(knob: str) -> Path | None:
            return Path(env[knob]) if env.get(knob) else None
        creds = channel_credentials(path("_CONDOR_AUTH_SSL_SERVER_CAFILE"), path("_CONDOR_AUTH_SSL_CLIENT_CERTFILE"),
                                    path("_CONDOR_AUTH_SSL_CLIENT_KEYFILE"))
        if (env.get("_CONDOR_SSL_SKIP_HOST_CHECK") or "").strip().lower() in ("true", "1", "yes"):
            server_name = SERVER_NAME_ALIAS
    return PoolClient(address, tokens=tokens, credentials=creds, server_name=server_name)


def refusal(e: grpc.aio.AioRpcError) -> str:
    """A refused call in HTCondor's words, with the daemon's reason."""
    details = e.details() or e.code().name
    if e.code() == grpc.StatusCode.PERMISSION_DENIED:
        m = re.match(r"PERMISSION DENIED to (\S+) ", details)
        if m:
            return f'SECMAN:2010:Received "DENIED" from server for user {m.group(1)} using method IDTOKENS.\n{details}'
        return details
    hint = ""
    if not _tokens_sent:
        where = ", ".join(str(p) for p in _token_sources) or "any token directory"
        hint = (f"\nno usable token found (looked in {where}); get one from the pool's administrator "
                f"('htcpool token create') or set _CONDOR_SEC_TOKEN_DIRECTORY")
    return f"AUTHENTICATE:1003:Failed to authenticate with any method\n{details}{hint}"


def _unresolved(details: str) -> bool:
    """gRPC's words for a host name that does not resolve (c-ares and the native resolver)."""
    low = details.lower()
    return "domain name not found" in low or "dns resolution failed" in low or "errors resolving" in low


def run_async(coro) -> Any:
    from daemons.cli.client import ClientError
    try:
        return asyncio.run(coro)
    except grpc.aio.AioRpcError as e:
        if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                        grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED):
            raise CliError(e.details() or e.code().name, EXIT_USAGE) from None
        if e.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            # A refused request: exit code 2, as for any request the pool will not do.
            raise CliError(refusal(e), EXIT_USAGE) from None
        if e.code() == grpc.StatusCode.UNAVAILABLE and _unresolved(e.details() or ""):
            # A name that does not resolve is a bad address, not a pool that is down.
            raise CliError(f"unknown host: {describe(e)}", EXIT_USAGE) from None
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
