"""`htcpool submit`, `q`, `rm`, `hold`, `release`, `qedit`: the job queue."""
from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from pathlib import Path

from daemons.cli.base import (EXIT_OK, EXIT_USAGE, CliError, autoformat, pool_client, duration, jsonable,
                               print_long, run_async, value)

def cmd_submit(args: argparse.Namespace) -> int:
    from daemons.schedd.submit import (SubmitContext, SubmitError, build_jobs, decode_submit, parse_submit,
                                       resolve_external_items)
    path = Path(args.file)
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else path.read_bytes()
    except OSError as e:
        raise CliError(f"{args.file}: {e.strerror}", EXIT_USAGE) from None
    name = "<stdin>" if args.file == "-" else str(path)
    owner = getpass.getuser()
    try:
        text = decode_submit(data, name)
        desc = parse_submit(text, name)
        # condor_submit reads `queue ... from FILE` and expands `queue ... matching` here,
        # where the files are; the schedd gets the items with the description.
        items = resolve_external_items(desc, _read_item_lines, _glob)
        # Check locally first, as condor_submit does, so mistakes never reach the schedd;
        # the schedd applies its limits (MAX_JOBS_PER_SUBMISSION, ...) itself.
        build_jobs(desc, SubmitContext(owner=owner, uid_domain="local", cluster_id=1, now=0), sample=True)
    except SubmitError as e:
        raise CliError(str(e), EXIT_USAGE) from None

    async def go() -> tuple[int, int]:
        async with pool_client(args) as c:
            # The schedd makes the jobs the token's user's; --owner is for queue super users.
            return await c.submit(text, name, args.owner or "", queue_items=items)

    cluster, count = run_async(go())
    if args.json:
        print(json.dumps({"cluster": cluster, "count": count}))
    else:
        print(f"{count} job(s) submitted to cluster {cluster}.")
    return EXIT_OK


def _read_item_lines(name: str) -> list[str]:
    if name == "-":
        return sys.stdin.read().splitlines()
    data = Path(name).read_bytes()
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise OSError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def _glob(pattern: str, kind: str) -> list[str]:
    """condor_submit's `matching [files | dirs | any]`: names in the current directory."""
    import glob as globmod
    names = sorted(globmod.glob(pattern))
    if kind == "files":
        return [n for n in names if Path(n).is_file()]
    if kind == "dirs":
        return [n for n in names if Path(n).is_dir()]
    return names


STATUS_LETTER = {1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}


def cmd_q(args: argparse.Namespace) -> int:
    if args.autocluster:
        return _q_autoclusters(args)
    if args.analyze:
        return _q_analyze(args)
    constraint = args.constraint or ""
    if args.jobs:
        ids = " || ".join(
            (f"(ClusterId == {j.split('.')[0]} && ProcId == {j.split('.')[1]})" if "." in j else f"ClusterId == {j}")
            for j in args.jobs if all(p.isdigit() for p in j.split(".")))
        if not ids:
            raise CliError(f"not job ids: {' '.join(args.jobs)}", EXIT_USAGE)
        constraint = f"({ids})" + (f" && ({constraint})" if constraint else "")

    async def go():
        async with pool_client(args) as c:
            jobs = await c.jobs(constraint, args.af or [], history=args.history)
            return jobs, await c.pool_now(), await c.daemon_address("Scheduler")

    jobs, now, schedd = run_async(go())
    if args.json:
        print(json.dumps([jsonable(j) for j in jobs], indent=1))
        return EXIT_OK
    if args.af:
        autoformat(jobs, args.af)
        return EXIT_OK
    if args.long:
        print_long(jobs)
        return EXIT_OK
    print(f"-- Schedd: {schedd} @ {time.strftime('%m/%d/%y %H:%M:%S', time.localtime(now))}")
    print(f" {'ID':<9}{'OWNER':<15}{'SUBMITTED':<13}{'RUN_TIME':>11} ST PRI {'SIZE':>5} CMD")
    counts = {k: 0 for k in STATUS_LETTER}
    for j in jobs:
        status = value(j, "JobStatus") or 1
        counts[status] = counts.get(status, 0) + 1
        run = float(value(j, "RemoteWallClockTime") or 0)
        if status == 2:
            run += now - float(value(j, "JobCurrentStartDate") or now)
        q = time.strftime("%m/%d %H:%M", time.localtime(float(value(j, "QDate") or 0)))
        cmd = f"{os.path.basename(str(value(j, 'Cmd') or ''))} {value(j, 'Args') or value(j, 'Arguments') or ''}"
        jid = f"{value(j, 'ClusterId')}.{value(j, 'ProcId')}"
        print(f" {jid:<9}{str(value(j, 'Owner')):<15}{q:<13}{duration(run):>11} {STATUS_LETTER.get(status, '?')}  "
              f"{value(j, 'JobPrio') or 0:<3} {float(value(j, 'ImageSize') or 0) / 1024:>5.1f} {cmd.strip()}")
    print(f"\n{len(jobs)} jobs; {counts[4]} completed, {counts[3]} removed, {counts[1]} idle, {counts[2]} running, "
          f"{counts[5]} held, {counts[7]} suspended")
    return EXIT_OK


def _q_autoclusters(args: argparse.Namespace) -> int:
    """condor_q -autocluster: one line per autocluster with its count and significant values."""

    async def go():
        async with pool_client(args) as c:
            return await c.jobs(args.constraint or "", autoclusters=True)

    rows = run_async(go())
    if args.json:
        print(json.dumps([jsonable(r) for r in rows], indent=1))
        return EXIT_OK
    if args.af:
        autoformat(rows, args.af)
        return EXIT_OK
    from daemons.core import ads
    print(f"{'AutoClusterId':>13} {'JobCount':>8} {'Idle':>5} {'Run':>5}  Significant values")
    skip = {"autoclusterid", "autoclusterattrs", "jobcount", "jobids", "idlejobs", "runningjobs",
            "lastrejmatchreason", "lastrejmatchtime"}
    for r in rows:
        values = [f"{k}={ads.one_line(str(r.lookup(k)))}" for k in str(value(r, "AutoClusterAttrs") or "").split(",")
                  if k and k.lower() not in skip and k in r and str(r.lookup(k)) != "undefined"]
        print(f"{value(r, 'AutoClusterId'):>13} {value(r, 'JobCount'):>8} {value(r, 'IdleJobs'):>5} "
              f"{value(r, 'RunningJobs'):>5}  {' '.join(values)}")
        reason = value(r, "LastRejMatchReason")
        if reason:
            print(f"{'':>36}last rejected: {reason}")
    print(f"\n{len(rows)} autoclusters; {sum(int(value(r, 'JobCount') or 0) for r in rows)} jobs")
    return EXIT_OK


def _q_analyze(args: argparse.Namespace) -> int:
    from daemons.cli.analyze import analyze
    if len(args.jobs) != 1 or not all(p.isdigit() for p in args.jobs[0].split(".")) or "." not in args.jobs[0]:
        raise CliError("--analyze takes one job id, CLUSTER.PROC", EXIT_USAGE)
    cluster, proc = args.jobs[0].split(".")

    async def go():
        async with pool_client(args) as c:
            jobs = await c.jobs(f"ClusterId == {cluster} && ProcId == {proc}")
            if not jobs:
                jobs = await c.jobs(f"ClusterId == {cluster} && ProcId == {proc}", history=True)
            return jobs, await c.ads("Machine"), await c.pool_now()

    jobs, slots, now = run_async(go())
    if not jobs:
        raise CliError(f"job {args.jobs[0]} is neither in the queue nor in the history")
    print(analyze(jobs[0], slots, now), end="")
    return EXIT_OK


ACT_VERB = {"rm": "remove", "hold": "hold", "release": "release", "qedit": "edit"}


def _cmd_act(action_name: str):
    def run(args: argparse.Namespace) -> int:
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

        async def go():
            async with pool_client(args) as c:
                return await c.act_reply(action, ids, args.constraint or "", getattr(args, "reason", "") or "",
                                         edits)

        reply = run_async(go())
        done, denied = list(reply.job_ids), list(reply.denied_job_ids)
        verb = {"rm": "removed", "hold": "held", "release": "released", "qedit": "edited"}[action_name]
        for job in denied:
            # condor_rm's words for a job that is not yours (dc_schedd.cpp).
            print(f"Permission denied to {ACT_VERB[action_name]} job {job}", file=sys.stderr)
        if not done:
            raise CliError(f"no matching job was {verb}")
        print(f"{len(done)} job(s) {verb}: {' '.join(done)}")
        return EXIT_USAGE if denied else EXIT_OK
    return run


def register(sub) -> None:
    s = sub.add_parser("submit", help="submit jobs from an HTCondor submit-description file")
    s.add_argument("file", help="submit file, or - for standard input")
    s.add_argument("--owner", help="submit for this user (queue super users only; default: the token's user)")
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
