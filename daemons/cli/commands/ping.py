"""`htcpool ping`: is a daemon there and ready (Admin.Ping), like condor_ping's liveness use.

A container healthcheck and a script's readiness test: exit 0 when the daemon answers
and is ready (its ads are advertised), 1 when it answers but is not ready or does not
answer, 2 for a malformed address.
"""
from __future__ import annotations

import argparse
import json

from daemons.cli.base import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, collector_address, pool_client, run_async
from daemons.core.common import split_host_port


def cmd_ping(args: argparse.Namespace) -> int:
    from daemons.cli.client import PoolClient

    target = args.address or collector_address(args)
    try:
        host, port = split_host_port(target)
    except ValueError as e:
        raise CliError(f"address {target!r}: {e}", EXIT_USAGE) from None
    if not host:
        raise CliError(f"address {target!r}: no host", EXIT_USAGE)

    async def go():
        try:
            # The pool's tokens (and TLS settings): Ping needs READ, which is authenticated.
            client = pool_client(args)
        except CliError:
            if not args.address:
                raise
            client = PoolClient(f"{host}:{port}")   # no pool known: ask without credentials
        async with client as c:
            return await c.ping(f"{host}:{port}")

    reply = run_async(go())
    if args.json:
        print(json.dumps({"address": f"{host}:{port}", "role": reply.role, "name": reply.name,
                          "ready": reply.ready, "pid": reply.pid, "status_url": reply.status_url}))
    else:
        print(f"{reply.role} {reply.name} at {host}:{port}: {'ready' if reply.ready else 'not ready'}")
    return EXIT_OK if reply.ready else EXIT_ERROR


def register(sub) -> None:
    s = sub.add_parser("ping", help="ask a daemon whether it is up and ready (default: the collector)")
    s.add_argument("address", nargs="?", help="the daemon's HOST:PORT (default: the pool's collector)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_ping)
