"""`htcpool up`, `down`, `daemon` and `demo`: pools and daemons."""
from __future__ import annotations

import argparse
import shlex

from daemons.cli.base import (EXIT_OK, EXIT_USAGE, CliError, run_async, state_dir)

def cmd_up(args: argparse.Namespace) -> int:
    from daemons.cli.pool import LocalPool, PoolError
    from daemons.core.config import ConfigError
    state = state_dir(args)
    if (state / "pool.json").exists():
        raise CliError(f"a pool is already recorded in {state.resolve()}; run 'htcpool down' first")
    env = {"_CONDOR_TIME_SCALE": str(args.time_scale)} if args.time_scale else {}
    roles = ("collector", "negotiator", "schedd", "startd") + tuple(dict.fromkeys(args.with_roles))
    pool = LocalPool(state, args.config, machines=args.machines, startds=args.startds, env=env,
                     tie_to_parent=False, roles=roles, tls="mutual" if args.mutual_tls else bool(args.tls),
                     check_roles=True)
    try:
        pool.start()
    except ConfigError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    except PoolError as e:
        pool.stop()
        raise CliError(str(e)) from None
    expected = args.machines * args.startds

    async def slots_seen() -> int:
        from daemons.cli.client import wait_for
        async with pool.client() as c:
            return await wait_for(lambda: _count_machines(c, expected), timeout_s=60, what="slot ads")

    run_async(slots_seen())
    print(f"pool up: collector at {pool.collector_address}, state in {state.resolve()}")
    for key, d in pool.daemons.items():
        print(f"  {key:<11} pid {d.pid:<7} {d.address:<21} {d.info.get('status_url', '')}")
    if pool.security:
        print(f"signing key {pool.security['pool_key_file']}; your token ({pool.user}@"
              f"{pool.security['trust_domain']}) in {pool.tokens_dir / pool.user}"
              f"{'; TLS on' if pool.tls else ''}")
    print(f"logs in {state.resolve() / 'log'}; stop with 'htcpool down'")
    return EXIT_OK


async def _count_machines(client, expected: int) -> bool:
    hosts = {str(a.get("Machine")) for a in await client.ads("Machine", projection=["Machine"])}
    return len(hosts) >= expected


def cmd_down(args: argparse.Namespace) -> int:
    from daemons.cli.pool import PoolError, stop_detached
    try:
        stopped = stop_detached(state_dir(args))
    except PoolError as e:
        raise CliError(str(e)) from None
    print(f"stopped {len(stopped)} daemon(s): {', '.join(stopped) or 'none were running'}")
    return EXIT_OK


def cmd_daemon(args: argparse.Namespace) -> int:
    from daemons.core.runner import run
    options = args.options
    if options and args.role != "drainboss":
        raise CliError(f"unexpected arguments {shlex.join(options)!r}: only drainboss takes options", EXIT_USAGE)
    return run(args.role, args.config, address_file=args.address_file, machines=args.machines,
               host_prefix=args.host_prefix, name=args.name, seed=args.seed,
               options=shlex.join(options), machine_groups=args.machine_group)


def cmd_demo(args: argparse.Namespace) -> int:
    from daemons.cli.demo import run_demo, run_seed001
    if args.which == "seed001":
        return run_seed001(json_out=args.json, time_scale=args.time_scale, keep=args.keep)
    if args.which:
        raise CliError(f"unknown demo {args.which!r}; 'htcpool demo' or 'htcpool demo seed001'", EXIT_USAGE)
    return run_demo(json_out=args.json, time_scale=args.time_scale, keep=args.keep)


def register(sub) -> None:
    s = sub.add_parser("up", help="start a local pool of daemon processes")
    s.add_argument("--config", help="HTCondor configuration file")
    s.add_argument("--machines", type=int, default=1, help="machines each startd emulates (default 1)")
    s.add_argument("--startds", type=int, default=1, help="startd processes (default 1)")
    s.add_argument("--time-scale", type=float, help="pool seconds per wall second (overrides TIME_SCALE)")
    s.add_argument("--with", dest="with_roles", action="append", default=[], choices=("defrag", "drainboss"),
                   help="also run this draining daemon (repeatable)")
    s.add_argument("--tls", action="store_true", help="TLS on every port (a pool CA and certificate in STATE/tls)")
    s.add_argument("--mutual-tls", action="store_true", help="TLS, and every client shows a certificate too")
    s.set_defaults(fn=cmd_up)

    s = sub.add_parser("down", help="stop the pool started by 'up'")
    s.set_defaults(fn=cmd_down)

    s = sub.add_parser("daemon", help="run one daemon in the foreground",
                       epilog="drainboss takes seed 003's options after --, for example "
                              "'htcpool daemon drainboss --config pool.conf -- --setpoint 250 --test'")
    s.add_argument("role", help="collector, negotiator, schedd, startd, defrag or drainboss")
    s.add_argument("--config", help="HTCondor configuration file")
    s.add_argument("--address-file", help="write {address, status_url, pid} here once serving")
    s.add_argument("--machines", type=int, default=1, help="startd: machines to emulate")
    s.add_argument("--host-prefix", help="startd: emulated host names are PREFIX001, PREFIX002, ...")
    s.add_argument("--machine-group", action="append", default=[], metavar="COUNT:PREFIX:CONFIG",
                   help="startd: also emulate COUNT machines named PREFIX001, ... as the configuration file "
                        "CONFIG describes them (their slots and policy; repeatable), in the same process")
    s.add_argument("--name", help="the daemon's Name (default: HTCondor's for the role)")
    s.add_argument("--seed", type=int, default=0, help="seed of the daemon's random choices")
    s.set_defaults(fn=cmd_daemon)

    s = sub.add_parser("demo", help="seed 001's demonstration on a local pool")
    s.add_argument("which", nargs="?", default="", help="seed001: all three demonstrations of seed 001")
    s.add_argument("--json", action="store_true", help="end with one JSON object")
    s.add_argument("--time-scale", type=float, default=30.0, help="pool seconds per wall second (default 30)")
    s.add_argument("--keep", action="store_true", help="keep the state directory")
    s.set_defaults(fn=cmd_demo)
