"""`htcpool userprio`, `drain`, `reschedule`: the pool's administration."""
from __future__ import annotations

import argparse
import json
import time

from daemons.cli.base import (EXIT_OK, EXIT_USAGE, CliError, pool_client, duration, run_async)

def cmd_userprio(args: argparse.Namespace) -> int:
    """condor_userprio: list users' priorities, or -setfactor / -setprio."""

    def number(text: str, what: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise CliError(f"{what} {text!r} is not a number", EXIT_USAGE) from None
        if v <= 0:
            raise CliError(f"{what} must be positive, got {text}", EXIT_USAGE)
        return v

    async def go():
        async with pool_client(args) as c:
            if args.setfactor:
                return await c.set_userprio(args.setfactor[0], factor=number(args.setfactor[1], "factor"))
            if args.setprio:
                return await c.set_userprio(args.setprio[0], priority=number(args.setprio[1], "priority"))
            return await c.userprio(all_users=args.allusers), await c.pool_now()

    result = run_async(go())
    if args.setfactor or args.setprio:
        print(f"The {'priority factor' if args.setfactor else 'priority'} of {result.name} was set: "
              f"effective priority {result.effective_priority:.2f}, real priority {result.real_priority:.2f}, "
              f"factor {result.priority_factor:.2f}")
        return EXIT_OK
    reply, now = result
    entries = list(reply.entries)
    if args.json:
        from google.protobuf.json_format import MessageToDict
        print(json.dumps([MessageToDict(e, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
                          for e in entries], indent=1))
        return EXIT_OK
    width = max([10, len(f"Number of users: {len(entries)}")] + [len(e.name) for e in entries])
    print(f"Last Priority Update: {time.strftime('%m/%d %H:%M', time.localtime(reply.last_update))}")
    print(f"{'':<{width}} {'Effective':>12} {'Priority':>9} {'Wghted':>7} {'Total Usage':>12} {'Time Since':>10}")
    print(f"{'User Name':<{width}} {'Priority':>12} {'Factor':>9} {'In Use':>7} {'(wghted-hrs)':>12} {'Last Usage':>10}")
    print(f"{'-' * width} {'-' * 12} {'-' * 9} {'-' * 7} {'-' * 12} {'-' * 10}")
    for e in entries:
        since = "<now>" if e.weighted_in_use > 0 or e.last_usage_time <= 0 and e.accumulated_usage_hours == 0 \
            else duration(now - e.last_usage_time)[:-3]
        name = e.name + (" (group)" if e.is_group else "")
        print(f"{name:<{width}} {e.effective_priority:>12.2f} {e.priority_factor:>9.2f} {e.weighted_in_use:>7.0f} "
              f"{e.accumulated_usage_hours:>12.2f} {since:>10}")
    print(f"{'-' * width} {'-' * 12} {'-' * 9} {'-' * 7} {'-' * 12} {'-' * 10}")
    users = [e for e in entries if not e.is_group]
    print(f"{'Number of users: ' + str(len(users)):<{width}} {'':>12} {'':>9} "
          f"{sum(e.weighted_in_use for e in users):>7.0f} {sum(e.accumulated_usage_hours for e in users):>12.2f}")
    return EXIT_OK


def cmd_drain(args: argparse.Namespace) -> int:
    """condor_drain: drain a machine, or cancel its drain."""

    async def go():
        async with pool_client(args) as c:
            if args.cancel:
                await c.cancel_drain(args.host, args.request_id or "")
                return None
            return await c.drain(args.host, args.how, args.resume_on_completion, args.check or "",
                                 args.start or "", args.reason or "", args.request_id or "")

    request_id = run_async(go())
    if args.cancel:
        print(f"Sent request to cancel draining on {args.host}")
    else:
        print(f"Sent request to drain {args.host} ({args.how}); request id {request_id}")
    return EXIT_OK


def cmd_reschedule(args: argparse.Namespace) -> int:

    async def go() -> int:
        async with pool_client(args) as c:
            return await c.reschedule()

    n = run_async(go())
    print(f"Sent reschedule to the negotiator (cycle {n} next).")
    return EXIT_OK


def register(sub) -> None:
    s = sub.add_parser("userprio", help="user priorities, like condor_userprio")
    s.add_argument("--setfactor", nargs=2, metavar=("USER", "FACTOR"), help="set a user's priority factor")
    s.add_argument("--setprio", nargs=2, metavar=("USER", "PRIORITY"), help="set a user's real priority")
    s.add_argument("--allusers", action="store_true", help="also users without recent usage")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_userprio)

    s = sub.add_parser("drain", help="drain a machine, like condor_drain")
    s.add_argument("host", help="the machine's name (its slots' Machine attribute)")
    s.add_argument("--how", choices=("graceful", "quick", "fast"), default="graceful")
    s.add_argument("--cancel", action="store_true", help="cancel the machine's drain")
    s.add_argument("--resume-on-completion", action="store_true", help="back in service once drained")
    s.add_argument("--reason", help="DrainReason")
    s.add_argument("--check", help="refuse unless this expression is true for every slot")
    s.add_argument("--start", help="START while draining (default false)")
    s.add_argument("--request-id", help="a request id to give (or to cancel)")
    s.set_defaults(fn=cmd_drain)

    s = sub.add_parser("reschedule", help="ask the negotiator for a cycle now")
    s.set_defaults(fn=cmd_reschedule)
