"""The `htcpool` command."""
from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import grpc

from daemons.core.rpc import describe

DEFAULT_STATE_DIR = ".htcpool"
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "state_dir", None) or os.environ.get("HTCPOOL_STATE_DIR") or DEFAULT_STATE_DIR)


def _collector_address(args: argparse.Namespace) -> str:
    if getattr(args, "pool", None):
        return args.pool
    if os.environ.get("HTCPOOL_POOL"):
        return os.environ["HTCPOOL_POOL"]
    from daemons.cli.pool import PoolError, load_state
    try:
        state = load_state(_state_dir(args))
    except PoolError as e:
        raise CliError(f"{e}; or name a pool with --pool HOST:PORT or HTCPOOL_POOL") from None
    return state["collector"]


def _run_async(coro) -> Any:
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


# ---- up / down -----------------------------------------------------------------------
def cmd_up(args: argparse.Namespace) -> int:
    from daemons.cli.pool import LocalPool, PoolError
    from daemons.core.config import ConfigError
    state = _state_dir(args)
    if (state / "pool.json").exists():
        raise CliError(f"a pool is already recorded in {state.resolve()}; run 'htcpool down' first")
    env = {"_CONDOR_TIME_SCALE": str(args.time_scale)} if args.time_scale else {}
    roles = ("collector", "negotiator", "schedd", "startd") + tuple(dict.fromkeys(args.with_roles))
    pool = LocalPool(state, args.config, machines=args.machines, startds=args.startds, env=env,
                     tie_to_parent=False, roles=roles)
    try:
        pool.start()
    except ConfigError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    except PoolError as e:
        pool.stop()
        raise CliError(str(e)) from None
    expected = args.machines * args.startds

    async def slots_seen() -> int:
        from daemons.cli.client import PoolClient, wait_for
        async with PoolClient(pool.collector_address) as c:
            return await wait_for(lambda: _count_machines(c, expected), timeout_s=60, what="slot ads")

    _run_async(slots_seen())
    print(f"pool up: collector at {pool.collector_address}, state in {state.resolve()}")
    for key, d in pool.daemons.items():
        print(f"  {key:<11} pid {d.pid:<7} {d.address:<21} {d.info.get('status_url', '')}")
    print(f"logs in {state.resolve() / 'log'}; stop with 'htcpool down'")
    return EXIT_OK


async def _count_machines(client, expected: int) -> bool:
    hosts = {str(a.get("Machine")) for a in await client.ads("Machine", projection=["Machine"])}
    return len(hosts) >= expected


def cmd_down(args: argparse.Namespace) -> int:
    from daemons.cli.pool import PoolError, stop_detached
    try:
        stopped = stop_detached(_state_dir(args))
    except PoolError as e:
        raise CliError(str(e)) from None
    print(f"stopped {len(stopped)} daemon(s): {', '.join(stopped) or 'none were running'}")
    return EXIT_OK


# ---- submit ----------------------------------------------------------------------------
def cmd_submit(args: argparse.Namespace) -> int:
    from daemons.cli.client import PoolClient
    from daemons.schedd.submit import SubmitContext, SubmitError, build_jobs, parse_submit
    path = Path(args.file)
    try:
        text = sys.stdin.read() if args.file == "-" else path.read_text()
    except OSError as e:
        raise CliError(f"{args.file}: {e.strerror}", EXIT_USAGE) from None
    name = "<stdin>" if args.file == "-" else str(path)
    owner = getpass.getuser()
    try:
        # Check locally first, as condor_submit does, so mistakes never reach the schedd.
        build_jobs(parse_submit(text, name), SubmitContext(owner=owner, uid_domain="local", cluster_id=1, now=0))
    except SubmitError as e:
        raise CliError(str(e), EXIT_USAGE) from None

    async def go() -> tuple[int, int]:
        async with PoolClient(_collector_address(args)) as c:
            return await c.submit(text, name, owner)

    cluster, count = _run_async(go())
    if args.json:
        print(json.dumps({"cluster": cluster, "count": count}))
    else:
        print(f"{count} job(s) submitted to cluster {cluster}.")
    return EXIT_OK


# ---- listings ----------------------------------------------------------------------------
def _value(ad, attr: str) -> Any:
    from daemons.core import ads
    return ads.get(ad, attr)


def _jsonable(ad) -> dict[str, Any]:
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


def _print_long(rows: list) -> None:
    """Whole ads as condor_q -l / condor_status -l print them: expressions unevaluated."""
    from daemons.core import ads
    for ad in rows:
        for k in sorted(ad.keys(), key=str.lower):
            print(f"{k} = {ads.one_line(str(ad.lookup(k)))}")
        print()


def _autoformat(rows: list, attrs: list[str]) -> None:
    for ad in rows:
        vals = []
        for a in attrs:
            v = _value(ad, a)
            vals.append("undefined" if v is None else (("true" if v else "false") if isinstance(v, bool) else str(v)))
        print(" ".join(vals))


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 86400}+{(s % 86400) // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}"


STATUS_LETTER = {1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}


def cmd_q(args: argparse.Namespace) -> int:
    if args.autocluster:
        return _q_autoclusters(args)
    if args.analyze:
        return _q_analyze(args)
    from daemons.cli.client import PoolClient
    constraint = args.constraint or ""
    if args.jobs:
        ids = " || ".join(
            (f"(ClusterId == {j.split('.')[0]} && ProcId == {j.split('.')[1]})" if "." in j else f"ClusterId == {j}")
            for j in args.jobs if all(p.isdigit() for p in j.split(".")))
        if not ids:
            raise CliError(f"not job ids: {' '.join(args.jobs)}", EXIT_USAGE)
        constraint = f"({ids})" + (f" && ({constraint})" if constraint else "")

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            jobs = await c.jobs(constraint, args.af or [], history=args.history)
            return jobs, await c.pool_now(), await c.daemon_address("Scheduler")

    jobs, now, schedd = _run_async(go())
    if args.json:
        print(json.dumps([_jsonable(j) for j in jobs], indent=1))
        return EXIT_OK
    if args.af:
        _autoformat(jobs, args.af)
        return EXIT_OK
    if args.long:
        _print_long(jobs)
        return EXIT_OK
    print(f"-- Schedd: {schedd} @ {time.strftime('%m/%d/%y %H:%M:%S', time.localtime(now))}")
    print(f" {'ID':<9}{'OWNER':<15}{'SUBMITTED':<13}{'RUN_TIME':>11} ST PRI {'SIZE':>5} CMD")
    counts = {k: 0 for k in STATUS_LETTER}
    for j in jobs:
        status = _value(j, "JobStatus") or 1
        counts[status] = counts.get(status, 0) + 1
        run = float(_value(j, "RemoteWallClockTime") or 0)
        if status == 2:
            run += now - float(_value(j, "JobCurrentStartDate") or now)
        q = time.strftime("%m/%d %H:%M", time.localtime(float(_value(j, "QDate") or 0)))
        cmd = f"{os.path.basename(str(_value(j, 'Cmd') or ''))} {_value(j, 'Args') or _value(j, 'Arguments') or ''}"
        jid = f"{_value(j, 'ClusterId')}.{_value(j, 'ProcId')}"
        print(f" {jid:<9}{str(_value(j, 'Owner')):<15}{q:<13}{_duration(run):>11} {STATUS_LETTER.get(status, '?')}  "
              f"{_value(j, 'JobPrio') or 0:<3} {float(_value(j, 'ImageSize') or 0) / 1024:>5.1f} {cmd.strip()}")
    print(f"\n{len(jobs)} jobs; {counts[4]} completed, {counts[3]} removed, {counts[1]} idle, {counts[2]} running, "
          f"{counts[5]} held, {counts[7]} suspended")
    return EXIT_OK


def _q_autoclusters(args: argparse.Namespace) -> int:
    """condor_q -autocluster: one line per autocluster with its count and significant values."""
    from daemons.cli.client import PoolClient

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            return await c.jobs(args.constraint or "", autoclusters=True)

    rows = _run_async(go())
    if args.json:
        print(json.dumps([_jsonable(r) for r in rows], indent=1))
        return EXIT_OK
    if args.af:
        _autoformat(rows, args.af)
        return EXIT_OK
    from daemons.core import ads
    print(f"{'AutoClusterId':>13} {'JobCount':>8} {'Idle':>5} {'Run':>5}  Significant values")
    skip = {"autoclusterid", "autoclusterattrs", "jobcount", "jobids", "idlejobs", "runningjobs",
            "lastrejmatchreason", "lastrejmatchtime"}
    for r in rows:
        values = [f"{k}={ads.one_line(str(r.lookup(k)))}" for k in str(_value(r, "AutoClusterAttrs") or "").split(",")
                  if k and k.lower() not in skip and k in r and str(r.lookup(k)) != "undefined"]
        print(f"{_value(r, 'AutoClusterId'):>13} {_value(r, 'JobCount'):>8} {_value(r, 'IdleJobs'):>5} "
              f"{_value(r, 'RunningJobs'):>5}  {' '.join(values)}")
        reason = _value(r, "LastRejMatchReason")
        if reason:
            print(f"{'':>36}last rejected: {reason}")
    print(f"\n{len(rows)} autoclusters; {sum(int(_value(r, 'JobCount') or 0) for r in rows)} jobs")
    return EXIT_OK


def _q_analyze(args: argparse.Namespace) -> int:
    from daemons.cli.analyze import analyze
    from daemons.cli.client import PoolClient
    if len(args.jobs) != 1 or not all(p.isdigit() for p in args.jobs[0].split(".")) or "." not in args.jobs[0]:
        raise CliError("--analyze takes one job id, CLUSTER.PROC", EXIT_USAGE)
    cluster, proc = args.jobs[0].split(".")

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            jobs = await c.jobs(f"ClusterId == {cluster} && ProcId == {proc}")
            if not jobs:
                jobs = await c.jobs(f"ClusterId == {cluster} && ProcId == {proc}", history=True)
            return jobs, await c.ads("Machine"), await c.pool_now()

    jobs, slots, now = _run_async(go())
    if not jobs:
        raise CliError(f"job {args.jobs[0]} is neither in the queue nor in the history")
    print(analyze(jobs[0], slots, now), end="")
    return EXIT_OK


STATUS_TYPES = {"startd": "Machine", "schedd": "Scheduler", "submitters": "Submitter",
                "negotiator": "Negotiator", "collector": "Collector", "defrag": "Defrag",
                "drainboss": "DrainBoss", "any": "Any"}
# The columns `status --defrag` / `--drainboss` print: each daemon's counts and last decision.
DRAINER_COLUMNS = {
    "Defrag": ("MachinesDraining", "WholeMachines", "DrainedMachines", "DrainSuccesses", "DrainFailures",
               "CancelledDrains", "AvgDrainingBadput", "DefragPolls"),
    "DrainBoss": ("Setpoint", "RunningMulticore", "QueuedMulticore", "RunningSinglecore", "QueuedSinglecore",
                  "ControllerError", "ProportionalTerm", "IntegralTerm", "ControllerOutput", "DrainsStarted",
                  "DrainsCancelled", "DrainFailures", "RunErrors", "TestMode"),
}


def cmd_status(args: argparse.Namespace) -> int:
    from daemons.cli.client import PoolClient
    my_type = STATUS_TYPES[args.kind]

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            return await c.ads(my_type, args.constraint or "", args.af or []), await c.pool_now()

    rows, now = _run_async(go())
    rows.sort(key=lambda a: _slot_sort_key(str(_value(a, "Name") or "")))
    if args.json:
        print(json.dumps([_jsonable(r) for r in rows], indent=1))
        return EXIT_OK
    if args.af:
        _autoformat(rows, args.af)
        return EXIT_OK
    if args.long:
        _print_long(rows)
        return EXIT_OK
    if my_type == "Machine":
        print(f"{'Name':<22} {'OpSys':<10} {'Arch':<6} {'State':<9} {'Activity':<8} {'LoadAv':>6} {'Mem':>6}"
              f" {'ActvtyTime':>12}")
        totals: dict[str, int] = {}
        for r in rows:
            state = str(_value(r, "State"))
            totals[state] = totals.get(state, 0) + 1
            act_time = now - float(_value(r, "EnteredCurrentActivity") or now)
            print(f"{str(_value(r, 'Name')):<22} {str(_value(r, 'OpSys')):<10} {str(_value(r, 'Arch')):<6} "
                  f"{state:<9} {str(_value(r, 'Activity')):<8} {float(_value(r, 'LoadAvg') or 0):>6.3f} "
                  f"{_value(r, 'Memory') or 0:>6} {_duration(act_time):>12}")
        print(f"\nTotal {len(rows)}: " + ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
    elif my_type in DRAINER_COLUMNS:
        for r in rows:
            print(str(_value(r, "Name")))
            for attr in DRAINER_COLUMNS[my_type]:
                v = _value(r, attr)
                print(f"  {attr:<20} {'-' if v is None else (f'{v:.4g}' if isinstance(v, float) else v)}")
    else:
        for r in rows:
            print(f"{str(_value(r, 'Name')):<40} {str(_value(r, 'MyAddress') or _value(r, 'ScheddIpAddr') or '')}")
    return EXIT_OK


def _slot_sort_key(name: str) -> tuple:
    slot, _, host = name.partition("@")
    parts = slot.replace("slot", "").split("_")
    nums = tuple(int(p) if p.isdigit() else 0 for p in parts)
    return (host, nums)


def cmd_userprio(args: argparse.Namespace) -> int:
    """condor_userprio: list users' priorities, or -setfactor / -setprio."""
    from daemons.cli.client import PoolClient

    def number(text: str, what: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise CliError(f"{what} {text!r} is not a number", EXIT_USAGE) from None
        if v <= 0:
            raise CliError(f"{what} must be positive, got {text}", EXIT_USAGE)
        return v

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            if args.setfactor:
                return await c.set_userprio(args.setfactor[0], factor=number(args.setfactor[1], "factor"))
            if args.setprio:
                return await c.set_userprio(args.setprio[0], priority=number(args.setprio[1], "priority"))
            return await c.userprio(all_users=args.allusers), await c.pool_now()

    result = _run_async(go())
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
            else _duration(now - e.last_usage_time)[:-3]
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
    from daemons.cli.client import PoolClient

    async def go():
        async with PoolClient(_collector_address(args)) as c:
            if args.cancel:
                await c.cancel_drain(args.host, args.request_id or "")
                return None
            return await c.drain(args.host, args.how, args.resume_on_completion, args.check or "",
                                 args.start or "", args.reason or "", args.request_id or "")

    request_id = _run_async(go())
    if args.cancel:
        print(f"Sent request to cancel draining on {args.host}")
    else:
        print(f"Sent request to drain {args.host} ({args.how}); request id {request_id}")
    return EXIT_OK


# ---- actions -------------------------------------------------------------------------
def cmd_reschedule(args: argparse.Namespace) -> int:
    from daemons.cli.client import PoolClient

    async def go() -> int:
        async with PoolClient(_collector_address(args)) as c:
            return await c.reschedule()

    n = _run_async(go())
    print(f"Sent reschedule to the negotiator (cycle {n} next).")
    return EXIT_OK


def _cmd_act(action_name: str):
    def run(args: argparse.Namespace) -> int:
        from daemons.cli.client import PoolClient
        from daemons.pb.htcpool import schedd_pb2
        action = {"rm": schedd_pb2.REMOVE, "hold": schedd_pb2.HOLD, "release": schedd_pb2.RELEASE,
                  "qedit": schedd_pb2.EDIT}[action_name]
        edits = {}
        ids = list(getattr(args, "jobs", []) or [])
        if action_name == "qedit":
            ids = [args.job]
            edits = {args.attr: args.value}
        if not ids and not args.constraint:
            raise CliError("name jobs (cluster or cluster.proc) or give --constraint", EXIT_USAGE)

        async def go() -> list[str]:
            async with PoolClient(_collector_address(args)) as c:
                return await c.act(action, ids, args.constraint or "", getattr(args, "reason", "") or "", edits)

        done = _run_async(go())
        verb = {"rm": "removed", "hold": "held", "release": "released", "qedit": "edited"}[action_name]
        if not done:
            raise CliError(f"no matching job was {verb}")
        print(f"{len(done)} job(s) {verb}: {' '.join(done)}")
        return EXIT_OK
    return run


# ---- daemon / demo / bench -----------------------------------------------------------
def cmd_daemon(args: argparse.Namespace) -> int:
    from daemons.core.runner import run
    options = args.options
    if options and args.role != "drainboss":
        raise CliError(f"unexpected arguments {shlex.join(options)!r}: only drainboss takes options", EXIT_USAGE)
    return run(args.role, args.config, address_file=args.address_file, machines=args.machines,
               host_prefix=args.host_prefix, name=args.name, seed=args.seed,
               options=shlex.join(options))


def cmd_demo(args: argparse.Namespace) -> int:
    from daemons.cli.demo import run_demo, run_seed001
    if args.which == "seed001":
        return run_seed001(json_out=args.json, time_scale=args.time_scale, keep=args.keep)
    if args.which:
        raise CliError(f"unknown demo {args.which!r}; 'htcpool demo' or 'htcpool demo seed001'", EXIT_USAGE)
    return run_demo(json_out=args.json, time_scale=args.time_scale, keep=args.keep)


def cmd_bench(args: argparse.Namespace) -> int:
    from daemons.cli.bench import BENCHES
    return BENCHES[args.name](args)


def build_parser() -> argparse.ArgumentParser:
    # --pool and --state-dir work before or after the command name.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--pool", default=argparse.SUPPRESS,
                        help="collector address HOST:PORT (default: $HTCPOOL_POOL or the pool in --state-dir)")
    common.add_argument("--state-dir", default=argparse.SUPPRESS,
                        help=f"where 'up' keeps a pool (default: $HTCPOOL_STATE_DIR or {DEFAULT_STATE_DIR})")
    p = argparse.ArgumentParser(prog="htcpool", description="An emulated HTCondor pool.", parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_parser = sub.add_parser

    def add_parser(name: str, **kw):
        return _add_parser(name, parents=[common], **kw)
    sub.add_parser = add_parser  # type: ignore[method-assign]

    s = sub.add_parser("up", help="start a local pool of daemon processes")
    s.add_argument("--config", help="HTCondor configuration file")
    s.add_argument("--machines", type=int, default=1, help="machines each startd emulates (default 1)")
    s.add_argument("--startds", type=int, default=1, help="startd processes (default 1)")
    s.add_argument("--time-scale", type=float, help="pool seconds per wall second (overrides TIME_SCALE)")
    s.add_argument("--with", dest="with_roles", action="append", default=[], choices=("defrag", "drainboss"),
                   help="also run this draining daemon (repeatable)")
    s.set_defaults(fn=cmd_up)

    s = sub.add_parser("down", help="stop the pool started by 'up'")
    s.set_defaults(fn=cmd_down)

    s = sub.add_parser("submit", help="submit jobs from an HTCondor submit-description file")
    s.add_argument("file", help="submit file, or - for standard input")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_submit)

    s = sub.add_parser("q", help="list jobs, like condor_q")
    s.add_argument("jobs", nargs="*", help="cluster or cluster.proc")
    s.add_argument("--history", action="store_true", help="completed and removed jobs")
    s.add_argument("--autocluster", action="store_true", help="autoclusters and their jobs, like condor_q -autocluster")
    s.add_argument("--analyze", action="store_true", help="why one job does or does not run")
    s.add_argument("--constraint", help="ClassAd constraint")
    s.add_argument("-af", "--autoformat", dest="af", nargs="+", metavar="ATTR", help="print these attributes")
    s.add_argument("-l", "--long", action="store_true", help="whole job ads")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_q)

    s = sub.add_parser("status", help="list slots and daemons, like condor_status")
    g = s.add_mutually_exclusive_group()
    for kind in STATUS_TYPES:
        g.add_argument(f"--{kind}", dest="kind", action="store_const", const=kind)
    s.set_defaults(kind="startd")
    s.add_argument("--constraint", help="ClassAd constraint")
    s.add_argument("-af", "--autoformat", dest="af", nargs="+", metavar="ATTR", help="print these attributes")
    s.add_argument("-l", "--long", action="store_true", help="whole ads")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_status)

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

    for name, help_text in (("rm", "remove jobs"), ("hold", "hold jobs"), ("release", "release held jobs")):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("jobs", nargs="*", help="cluster or cluster.proc")
        s.add_argument("--constraint")
        s.add_argument("--reason", default="")
        s.set_defaults(fn=_cmd_act(name))

    s = sub.add_parser("qedit", help="set a job attribute, like condor_qedit")
    s.add_argument("job")
    s.add_argument("attr")
    s.add_argument("value", help="a ClassAd expression (quote strings: '\"text\"')")
    s.add_argument("--constraint")
    s.set_defaults(fn=_cmd_act("qedit"))

    s = sub.add_parser("daemon", help="run one daemon in the foreground",
                       epilog="drainboss takes seed 003's options after --, for example "
                              "'htcpool daemon drainboss --config pool.conf -- --setpoint 250 --test'")
    s.add_argument("role", help="collector, negotiator, schedd, startd, defrag or drainboss")
    s.add_argument("--config", help="HTCondor configuration file")
    s.add_argument("--address-file", help="write {address, status_url, pid} here once serving")
    s.add_argument("--machines", type=int, default=1, help="startd: machines to emulate")
    s.add_argument("--host-prefix", help="startd: emulated host names are PREFIX001, PREFIX002, ...")
    s.add_argument("--name", help="the daemon's Name (default: HTCondor's for the role)")
    s.add_argument("--seed", type=int, default=0, help="seed of the daemon's random choices")
    s.set_defaults(fn=cmd_daemon)

    s = sub.add_parser("demo", help="seed 001's demonstration on a local pool")
    s.add_argument("which", nargs="?", default="", help="seed001: all three demonstrations of seed 001")
    s.add_argument("--json", action="store_true", help="end with one JSON object")
    s.add_argument("--time-scale", type=float, default=30.0, help="pool seconds per wall second (default 30)")
    s.add_argument("--keep", action="store_true", help="keep the state directory")
    s.set_defaults(fn=cmd_demo)

    s = sub.add_parser("bench", help="performance figures")
    benches = s.add_subparsers(dest="name", required=True, metavar="NAME")
    b = benches.add_parser("throughput", parents=[common], help="1,000 zero-length jobs on 100 emulated machines")
    b.add_argument("--jobs", type=int, default=1000)
    b.add_argument("--machines", type=int, default=100)
    b.add_argument("--cpus", type=int, default=8)
    b = benches.add_parser("autocluster", parents=[common], help="schedd autocluster ids: jobs/s and re-clustering cost")
    b.add_argument("--jobs", type=int, default=100_000)
    b.add_argument("--seed", type=int, default=0)
    b = benches.add_parser("negotiator", parents=[common],
                           help="one negotiation cycle's wall and CPU time at 1k, 10k and 50k slots")
    b.add_argument("--sizes", default="1000,10000,50000", help="pool sizes in slots (default 1000,10000,50000)")
    b.add_argument("--jobs", type=int, default=100_000, help="idle jobs (default 100,000)")
    b.add_argument("--submitters", type=int, default=100, help="submitters (default 100)")
    b.add_argument("--autoclusters", type=int, default=500, help="job kinds, one autocluster each (default 500)")
    for b in benches.choices.values():
        b.add_argument("--json", action="store_true", help="end with one JSON object")
        b.set_defaults(fn=cmd_bench)

    from daemons.cli.experiments import EXPERIMENTS
    s = sub.add_parser("experiment", help="scientific runs that write CSV and PNG")
    experiments = s.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, (help_text, add_args) in EXPERIMENTS.items():
        e = experiments.add_parser(name, parents=[common], help=help_text)
        e.add_argument("--json", action="store_true", help="end with one JSON object")
        e.add_argument("--out", help=f"where CSV and PNG go (default results/{name})")
        e.add_argument("--seed", type=int, default=0, help="the workload's random seed")
        e.set_defaults(fn=add_args(e))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare -- is the daemon's own command line (drainboss's seed options).
    options = argv[argv.index("--") + 1:] if "--" in argv else []
    args = build_parser().parse_args(argv[:len(argv) - len(options) - 1] if options or "--" in argv else argv)
    args.options = options
    if args.command != "daemon":
        # Retry chatter belongs in daemon logs; a command reports the outcome once.
        logging.getLogger("htcpool").addHandler(logging.NullHandler())
        logging.getLogger("htcpool").propagate = False
    try:
        return int(args.fn(args) or 0)
    except CliError as e:
        print(f"htcpool {args.command}: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
