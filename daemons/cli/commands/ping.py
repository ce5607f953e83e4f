"""`htcpool ping`: is a daemon there and ready (Admin.Ping), like condor_ping's liveness use.

A container healthcheck and a script's readiness test: exit 0 when the daemon answers
and is ready (its ads are advertised), 1 when it answers but is not ready or does not
answer, 2 for a malformed address or a refusal (no token, or one the daemon does not accept).
"""
from __future__ import annotations

import argparse
import json

from daemons.cli.base import EXIT_ERROR, EXIT_OK, checked_address, collector_address, pool_client, run_async


def cmd_ping(args: argparse.Namespace) -> int:
    address = checked_address(args.address or collector_address(args))

    # Admin.Ping needs READ, so the ping carries the user's token (and TLS settings) as
    # every command does: a healthcheck proves the daemon answers an authenticated call.
    client = pool_client(args, daemon=address)

    async def go():
        async with client as c:
            return await c.ping(address)

    reply = run_async(go())
    if args.json:
        print(json.dumps({"address": address, "role": reply.role, "name": reply.name,
                          "ready": reply.ready, "pid": reply.pid, "status_url": reply.status_url}))
    else:
        print(f"{reply.role} {reply.name} at {address}: {'ready' if reply.ready else 'not ready'}")
    return EXIT_OK if reply.ready else EXIT_ERROR


def register(sub) -> None:
    s = sub.add_parser("ping", help="ask a daemon whether it is up and ready (default: the collector)")
    s.add_argument("address", nargs="?", help="the daemon's HOST:PORT (default: the pool's collector)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_ping)
