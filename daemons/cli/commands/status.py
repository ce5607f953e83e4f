"""`htcpool status`: slots and daemons, like condor_status."""
from __future__ import annotations

import argparse
import json

from daemons.cli.base import (EXIT_OK, autoformat, pool_client, duration, jsonable,
                               print_long, run_async, value)

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
    my_type = STATUS_TYPES[args.kind]

    async def go():
        async with pool_client(args) as c:
            return await c.ads(my_type, args.constraint or "", args.af or []), await c.pool_now()

    rows, now = run_async(go())
    rows.sort(key=lambda a: _slot_sort_key(str(value(a, "Name") or "")))
    if args.json:
        print(json.dumps([jsonable(r) for r in rows], indent=1))
        return EXIT_OK
    if args.af:
        autoformat(rows, args.af)
        return EXIT_OK
    if args.long:
        print_long(rows)
        return EXIT_OK
    if my_type == "Machine":
        print(f"{'Name':<22} {'OpSys':<10} {'Arch':<6} {'State':<9} {'Activity':<8} {'LoadAv':>6} {'Mem':>6}"
              f" {'ActvtyTime':>12}")
        totals: dict[str, int] = {}
        for r in rows:
            state = str(value(r, "State"))
            totals[state] = totals.get(state, 0) + 1
            act_time = now - float(value(r, "EnteredCurrentActivity") or now)
            print(f"{str(value(r, 'Name')):<22} {str(value(r, 'OpSys')):<10} {str(value(r, 'Arch')):<6} "
                  f"{state:<9} {str(value(r, 'Activity')):<8} {float(value(r, 'LoadAvg') or 0):>6.3f} "
                  f"{value(r, 'Memory') or 0:>6} {duration(act_time):>12}")
        print(f"\nTotal {len(rows)}: " + ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
    elif my_type in DRAINER_COLUMNS:
        for r in rows:
            print(str(value(r, "Name")))
            for attr in DRAINER_COLUMNS[my_type]:
                v = value(r, attr)
                print(f"  {attr:<20} {'-' if v is None else (f'{v:.4g}' if isinstance(v, float) else v)}")
    else:
        for r in rows:
            print(f"{str(value(r, 'Name')):<40} {str(value(r, 'MyAddress') or value(r, 'ScheddIpAddr') or '')}")
    return EXIT_OK


def _slot_sort_key(name: str) -> tuple:
    slot, _, host = name.partition("@")
    parts = slot.replace("slot", "").split("_")
    nums = tuple(int(p) if p.isdigit() else 0 for p in parts)
    return (host, nums)


def register(sub) -> None:
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
