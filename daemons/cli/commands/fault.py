"""`htcpool fault inject|list|clear|partition`: RPC and clock faults on a running pool.

A fault is set in the fault layer of the daemon it acts in (through that daemon's
Admin service), so it works on any pool the CLI can reach. Daemons are named by role
(every daemon of the role), by their key in the local pool.json (startd2), by their
Name (globs allowed), or `all`. Times (--delay, --jitter, --after, --for,
--clock-offset) are pool seconds, with optional units: 500ms, 2s, 5m, 1h.

`partition A --from B` cuts A off from B (without --from, from every peer). When A runs
in a network namespace (a pool of the namespace harness, its pool.json says `ip netns
exec`), it is cut in the network: iptables rules in A's namespace drop the packets
(`--reset`: refuse connections with a TCP reset; `--loss P`: drop P% at random), and
`bandwidth A --rate 1mbit` limits A's traffic (tc tbf); the operator's own address (the
bridge's) is never cut. On a pool of processes on one host (loopback) the partition is
made in A's own fault layers instead: calls from B into A and from A to B are dropped
(`--reset`: refused UNAVAILABLE; `--loss P`: P% of them dropped); the admin service
still answers, so it can be cleared. With `--compose PROJECT` the daemons are the
containers of a compose pool (compose/docker-compose.yml) and the cut is made in the
container's network namespace (nsenter, the host's iptables and tc).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from daemons.cli.base import EXIT_OK, EXIT_USAGE, CliError, pool_client, run_async, state_dir

ROLES = ("collector", "negotiator", "schedd", "startd", "defrag", "drainboss")


@dataclass(frozen=True)
class Target:
    label: str       # how the user named it, or its key
    role: str
    name: str
    address: str


async def resolve(client, spec: str, args: argparse.Namespace) -> list[Target]:
    """The daemons `spec` names; a CliError when none."""
    import fnmatch

    from daemons.cli.client import DAEMON_TYPES, strip_addr
    from daemons.core import ads
    role_of = {v: k for k, v in DAEMON_TYPES.items()}
    found = []
    for ad in await client.daemons():
        found.append(Target(str(ads.get(ad, "Name")), role_of.get(str(ads.get(ad, "MyType")), "?"),
                            str(ads.get(ad, "Name")), strip_addr(str(ads.get(ad, "MyAddress") or ""))))
    keyed = _local_keys(args)
    # A local daemon whose ad the collector does not have (yet, or any more) still counts.
    seen = {t.address for t in found}
    for key, address in keyed.items():
        if address not in seen:
            role = key.rstrip("0123456789")
            found.append(Target(key, role if role in ROLES else "?", key, address))
    if spec in keyed:
        address = keyed[spec]
        named = [t for t in found if t.address == address]
        return [Target(spec, named[0].role if named else spec.rstrip("0123456789"),
                       named[0].name if named else spec, address)]
    if spec == "all":
        out = found
    elif spec in ROLES:
        out = [t for t in found if t.role == spec]
    else:
        out = [t for t in found if fnmatch.fnmatchcase(t.name.lower(), spec.lower())]
    if not out:
        known = sorted({t.role for t in found} | set(keyed))
        raise CliError(f"no daemon {spec!r} in the pool (daemons: {', '.join(known) or 'none advertised'})",
                       EXIT_USAGE)
    return sorted(out, key=lambda t: (ROLES.index(t.role) if t.role in ROLES else 99, t.name))


def _local_daemons(args: argparse.Namespace) -> dict[str, dict]:
    """pool.json's daemons, when this pool is the local one (no --pool); else none."""
    if getattr(args, "pool", None):
        return {}
    from daemons.cli.pool import PoolError, load_state
    try:
        return load_state(state_dir(args)).get("daemons", {})
    except (PoolError, ValueError, OSError):
        return {}


def _local_keys(args: argparse.Namespace) -> dict[str, str]:
    """pool.json's keys (startd2, ...) and addresses, when this pool is the local one."""
    return {k: v.get("address", "") for k, v in _local_daemons(args).items()
            if v.get("address") and v.get("state", "running") != "off"}


def _local_netns(args: argparse.Namespace) -> dict[str, str]:
    """address -> network namespace, for the local pool's daemons started in one."""
    from daemons.harness.netfaults import namespace_of
    out = {}
    for v in _local_daemons(args).values():
        ns = namespace_of(v.get("args") or [])
        if ns and v.get("address"):
            out[v["address"]] = ns
    return out


async def _time_scale(client) -> float:
    from daemons.core import ads
    found = await client.ads("Collector", projection=["TimeScale"])
    scale = ads.get(found[0], "TimeScale") if found else None
    return float(scale) if isinstance(scale, (int, float)) and scale > 0 else 1.0


def _checked(fault):
    """A network fault as given on the command line, or a usage error naming what is wrong."""
    from daemons.harness.netfaults import NetFaultError
    try:
        return fault.check()
    except NetFaultError as e:
        raise CliError(f"network fault: {e}", EXIT_USAGE) from None


def _net(call):
    """Run a network-fault step; its failure (not root, no such namespace) is one line."""
    from daemons.harness.netfaults import NetFaultError
    try:
        return call()
    except NetFaultError as e:
        raise CliError(f"network fault: {e}") from None


async def _peer_pattern(client, spec: str, side: str, args: argparse.Namespace) -> str:
    """What a fault's `peer` must be to pick `spec`: for a server fault the peer's role or
    name (calls carry them), for a client fault the addresses it calls."""
    if spec in ("*", "all"):
        return "*"
    if side == "server" and spec in ROLES:
        return spec
    try:
        targets = await resolve(client, spec, args)
    except CliError:
        return spec        # a glob of names or addresses, taken as it is
    if side == "server":
        return ",".join(t.name for t in targets)
    return ",".join(t.address for t in targets)


def _duration(text: str | None, what: str) -> float:
    from daemons.core.faults import FaultError, duration
    if text is None:
        return 0.0
    try:
        return duration(text, what)
    except FaultError as e:
        raise CliError(str(e), EXIT_USAGE) from None


def add_fault_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rpc", default="*", metavar="METHOD",
                   help="the method: Negotiate, Schedd.*, Startd.KeepAlive (default: every method)")
    p.add_argument("--side", choices=("server", "client"), default="server",
                   help="server: calls into the daemon (default); client: calls it makes")
    p.add_argument("--from", dest="from_", metavar="PEER", help="server fault: only calls from this peer")
    p.add_argument("--to", metavar="PEER", help="client fault: only calls to this peer (implies --side client)")
    p.add_argument("--delay", metavar="TIME", help="delay each call this long (pool time)")
    p.add_argument("--jitter", metavar="TIME", help="spread the delay by up to this much either way")
    p.add_argument("--abort", metavar="CODE", help="fail the call with this gRPC status (e.g. UNAVAILABLE)")
    p.add_argument("--drop", action="store_true", help="never answer: the caller waits for its deadline")
    p.add_argument("--percent", type=float, default=100.0, help="of matching calls (default 100)")
    p.add_argument("--after", metavar="TIME", help="start this much pool time from now")
    p.add_argument("--for", dest="for_", metavar="TIME", help="end this much pool time after it starts")
    p.add_argument("--max-active", type=int, default=0, help="calls under the fault at once (default no limit)")
    p.add_argument("--clock-offset", metavar="TIME", help="a clock fault: move the daemon's clock by this much")
    p.add_argument("--clock-drift", type=float, default=0.0,
                   help="a clock fault: the daemon's clock runs this much fast (0.01 = 1%%)")
    p.add_argument("--id", help="the fault's id (default: the daemon picks f1, f2, ...)")


def _fault_from_args(args: argparse.Namespace, now: float):
    from daemons.core.faults import Fault, FaultError, validate
    after = _duration(args.after, "--after")
    length = _duration(args.for_, "--for")
    if after < 0 or length < 0:
        raise CliError("--after and --for must not be negative", EXIT_USAGE)
    f = Fault(id=args.id or "new", side=args.side, method=args.rpc, peer=args.peer,
              delay_s=_duration(args.delay, "--delay"), jitter_s=_duration(args.jitter, "--jitter"),
              abort=args.abort or "", drop=args.drop, percent=args.percent,
              start=now + after if after else None, stop=now + after + length if length else None,
              max_active=args.max_active, clock_offset_s=_duration(args.clock_offset, "--clock-offset"),
              clock_drift=args.clock_drift)
    try:
        return validate(f)
    except FaultError as e:
        raise CliError(str(e).split(": ", 1)[1], EXIT_USAGE) from None


def cmd_inject(args: argparse.Namespace) -> int:
    from daemons.core.fault_admin import fault_to_pb
    if args.from_ and args.to:
        raise CliError("--from picks the callers of a server fault, --to the peers of a client fault: "
                       "give one", EXIT_USAGE)
    side = "client" if args.to else args.side

    async def go():
        async with pool_client(args) as c:
            now = await c.pool_now()
            peer = await _peer_pattern(c, args.from_ or args.to or "*", side, args)
            args.side, args.peer = side, peer
            message = fault_to_pb(_fault_from_args(args, now))
            if not args.id:
                message.id = ""      # the daemon numbers it
            out = []
            for spec in args.daemons:
                for t in await resolve(c, spec, args):
                    out.append((t, await c.set_faults(t.address, [message]), []))
            return out

    return _print(run_async(go()), args.json, "inject")


def cmd_partition(args: argparse.Namespace) -> int:
    from daemons.core.fault_admin import fault_to_pb
    from daemons.core.faults import Fault
    length = _duration(args.for_, "--for")
    if args.loss is not None and not 0 < args.loss <= 100:
        raise CliError(f"--loss {args.loss:g} must be a percentage above 0 and at most 100", EXIT_USAGE)
    if args.loss is not None and args.reset:
        raise CliError("--reset refuses every connection, --loss drops some packets: give one", EXIT_USAGE)
    how = "reset" if args.reset else "loss" if args.loss is not None else "drop"
    base = args.id or f"part-{(args.from_ or 'all').replace('*', 'any')}"
    if args.compose:
        return _compose_partition(args, base, how, length)

    async def go():
        async with pool_client(args) as c:
            now = await c.pool_now()
            stop = now + length if length else None
            in_ns = _local_netns(args)
            out = []
            for spec in args.daemons:
                for t in await resolve(c, spec, args):
                    if t.address in in_ns:
                        peers = () if (args.from_ or "*") in ("*", "all") else tuple(sorted(
                            {p.address.rpartition(":")[0] for p in await resolve(c, args.from_, args)}))
                        wall = length / await _time_scale(c) if length else 0.0
                        out.append((t, await c.list_faults(t.address),
                                    _partition_net(in_ns[t.address], base, how, peers, args.loss, wall)))
                        continue
                    # Loopback: both directions in the daemon's own fault layers.
                    kind = ({"abort": "UNAVAILABLE"} if how == "reset" else {"drop": True})
                    percent = args.loss if args.loss is not None else 100.0
                    faults = [Fault(f"{base}-in", side="server", stop=stop, percent=percent, **kind,
                                    peer=await _peer_pattern(c, args.from_ or "*", "server", args)),
                              Fault(f"{base}-out", side="client", stop=stop, percent=percent, **kind,
                                    peer=await _peer_pattern(c, args.from_ or "*", "client", args))]
                    out.append((t, await c.set_faults(t.address, [fault_to_pb(f) for f in faults]), []))
            return out

    return _print(run_async(go()), args.json, "partition")


def _partition_net(ns: str, fault_id: str, how: str, peers: tuple[str, ...], loss: float | None,
                   wall_s: float) -> list[str]:
    import datetime

    from daemons.harness import netfaults as nf
    host = nf.Namespace(ns)
    until = None
    if wall_s:
        end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=wall_s)
        until = end.strftime("%Y-%m-%dT%H:%M:%S")
    fault = nf.NetFault(fault_id, how, peers, percent=loss or 100.0, until=until,
                        exempt=(_net(host.bridge_address),))
    _net(lambda: nf.clear(host.run, nf.in_root, fault_id, bandwidth=False))   # the same id again replaces it
    _net(lambda: nf.apply(fault, host.run, nf.in_root))
    return _net(lambda: nf.listing(host.run))


def _compose(call):
    from daemons.harness.compose_faults import ComposeError, UnknownDaemon
    try:
        return _net(call)
    except ComposeError as e:
        raise CliError(str(e), EXIT_USAGE if isinstance(e, UnknownDaemon) else 1) from None


def _compose_partition(args: argparse.Namespace, fault_id: str, how: str, length: float) -> int:
    import datetime

    from daemons.harness import compose_faults as cf
    from daemons.harness import netfaults as nf
    until = None
    if length:
        if not getattr(args, "pool", None):
            raise CliError("--for is pool time: name the pool (--pool HOST:PORT) so its time scale can be read",
                           EXIT_USAGE)

        async def scale():
            async with pool_client(args) as c:
                return await _time_scale(c)
        end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=length / run_async(scale()))
        until = end.strftime("%Y-%m-%dT%H:%M:%S")
    found = _compose(lambda: cf.containers(args.compose))
    peers: tuple[str, ...] = ()
    if (args.from_ or "*") not in ("*", "all"):
        peer = _compose(lambda: cf.pick(found, args.from_, args.compose))
        peers = tuple(_compose(lambda: cf.addresses(peer.id)))
    _checked(nf.NetFault(fault_id, how, peers, percent=args.loss or 100.0, until=until))
    # Every name is found before anything is cut, so a bad one changes nothing.
    chosen = [_compose(lambda name=name: cf.pick(found, name, args.compose)) for name in args.daemons]
    for c in chosen:
        host = _compose(lambda: cf.ContainerNamespace.of(c.id))
        fault = nf.NetFault(fault_id, how, peers, percent=args.loss or 100.0, until=until,
                            exempt=tuple(_compose(lambda: cf.gateways(c.id))))
        _net(lambda: nf.clear(host.run, nf.in_root, fault_id, bandwidth=False))
        _net(lambda: nf.apply(fault, host.run, nf.in_root))
        _print_compose(c, _net(lambda: nf.listing(host.run)))
    return EXIT_OK


def _print_compose(c, lines: list[str]) -> None:
    print(f"{c.key} (container {c.id}, {c.state}):" + ("" if lines else " no network faults"))
    for line in lines:
        print(f"  network {line}")


def _compose_each(args: argparse.Namespace, act) -> int:
    """`act(container, namespace)` for each named container of the project (all when none is named)."""
    from daemons.harness import compose_faults as cf
    found = _compose(lambda: cf.containers(args.compose))
    chosen = [_compose(lambda n=n: cf.pick(found, n, args.compose)) for n in args.daemons] if args.daemons \
        else [c for c in found if c.state in ("running", "paused")]
    for c in chosen:
        act(c, _compose(lambda c=c: cf.ContainerNamespace.of(c.id)))
    return EXIT_OK


def cmd_bandwidth(args: argparse.Namespace) -> int:
    from daemons.harness import netfaults as nf
    fault = _checked(nf.NetFault(args.id or "bandwidth", "bandwidth", rate=args.rate))
    if args.compose:
        def limit(c, host):
            _net(lambda: nf.apply(fault, host.run, nf.in_root, host.inner, host.outer()))
            _print_compose(c, _net(lambda: nf.listing(host.run)))
        return _compose_each(args, limit)

    async def go():
        async with pool_client(args) as c:
            in_ns = _local_netns(args)
            out = []
            for spec in args.daemons:
                for t in await resolve(c, spec, args):
                    if t.address not in in_ns:
                        raise CliError(f"{t.role} {t.name} is not in a network namespace: a bandwidth limit needs a "
                                       "pool of the namespace harness (on loopback, use 'fault inject --delay')",
                                       EXIT_USAGE)
                    host = nf.Namespace(in_ns[t.address])
                    _net(lambda: nf.apply(fault, host.run, nf.in_root, host.inner, host.outer()))
                    out.append((t, await c.list_faults(t.address), _net(lambda: nf.listing(host.run))))
            return out

    return _print(run_async(go()), args.json, "bandwidth")


def cmd_list(args: argparse.Namespace) -> int:
    if args.compose:
        from daemons.harness import netfaults as nf
        return _compose_each(args, lambda c, host: _print_compose(c, _net(lambda: nf.listing(host.run))))

    async def go():
        async with pool_client(args) as c:
            out = []
            in_ns = _local_netns(args)
            for spec in args.daemons or ["all"]:
                for t in await resolve(c, spec, args):
                    net = []
                    if t.address in in_ns:
                        from daemons.harness import netfaults as nf
                        net = _net(lambda: nf.listing(nf.Namespace(in_ns[t.address]).run))
                    out.append((t, await c.list_faults(t.address), net))
            return out

    return _print(run_async(go()), args.json, "list")


def cmd_clear(args: argparse.Namespace) -> int:
    if args.compose:
        from daemons.harness import netfaults as nf

        def clear(c, host):
            for fid in (args.id or [None]):
                _net(lambda fid=fid: nf.clear(host.run, nf.in_root, fid, host.inner, host.outer(),
                                              bandwidth=fid in (None, "bandwidth")))
            _print_compose(c, _net(lambda: nf.listing(host.run)))
        return _compose_each(args, clear)

    async def go():
        async with pool_client(args) as c:
            out = []
            in_ns = _local_netns(args)
            for spec in args.daemons or ["all"]:
                for t in await resolve(c, spec, args):
                    cleared_net: list[str] = []
                    if t.address in in_ns:
                        from daemons.harness import netfaults as nf
                        host = nf.Namespace(in_ns[t.address])
                        for fid in (args.id or [None]):
                            cleared_net += _net(lambda fid=fid: nf.clear(
                                host.run, nf.in_root, fid, host.inner, host.outer(),
                                bandwidth=fid in (None, "bandwidth")))
                    if args.id:
                        have = {s.fault.id for s in (await c.list_faults(t.address)).faults}
                        ids = [i for i in args.id if i in have]
                        if not ids and not cleared_net:
                            continue
                        reply = await c.clear_faults(t.address, ids) if ids else await c.list_faults(t.address)
                        out.append((t, reply, []))
                    else:
                        out.append((t, await c.clear_faults(t.address), []))
            if args.id and not out:
                raise CliError(f"no daemon has a fault {', '.join(args.id)} (see 'htcpool fault list')", EXIT_USAGE)
            return out

    return _print(run_async(go()), args.json, "clear")


def _print(results, as_json: bool, what: str) -> int:
    if as_json:
        from google.protobuf.json_format import MessageToDict
        print(json.dumps([{"daemon": t.label, "role": t.role, "name": t.name, "address": t.address,
                           **MessageToDict(reply, preserving_proto_field_name=True), "network_faults": net}
                          for t, reply, net in results], indent=1))
        return EXIT_OK
    for t, reply, net in results:
        skew = reply.pool_time - reply.true_pool_time
        head = f"{t.role} {t.name} ({t.address})"
        if abs(skew) >= 0.5:
            head += f", clock {skew:+.0f} s"
        if not reply.faults and not net:
            print(f"{head}: no faults" + (" (cleared)" if what == "clear" else ""))
            continue
        print(f"{head}:")
        for s in reply.faults:
            print(f"  {s.fault.text}  [fired {s.fired}, active {s.active}]")
        for line in net:
            print(f"  network {line}")
    return EXIT_OK


def register(sub) -> None:
    s = sub.add_parser("fault", help="inject, list and clear faults on a running pool")
    fs = s.add_subparsers(dest="fault_command", required=True, metavar="inject|list|clear|partition|bandwidth")
    common = sub.common_parent

    p = fs.add_parser("inject", parents=[common], help="delay, abort or drop RPCs, or skew a daemon's clock")
    p.add_argument("daemons", nargs="+", metavar="DAEMON", help="role, pool.json key, Name (glob) or all")
    add_fault_arguments(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_inject)

    p = fs.add_parser("partition", parents=[common], help="cut a daemon off from a peer (or from all)")
    p.add_argument("daemons", nargs="+", metavar="DAEMON")
    p.add_argument("--from", dest="from_", metavar="PEER", help="the peer to cut it off from (default: all)")
    p.add_argument("--for", dest="for_", metavar="TIME", help="heal after this much pool time")
    p.add_argument("--reset", action="store_true", help="refuse connections (TCP reset) instead of dropping")
    p.add_argument("--loss", type=float, metavar="PERCENT", help="drop this share of the packets (or calls)")
    p.add_argument("--id", help="the faults' id (prefix) (default part-PEER)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compose", metavar="PROJECT",
                   help="the daemons are containers of this compose project: network faults in their namespaces")
    p.set_defaults(fn=cmd_partition)

    p = fs.add_parser("bandwidth", parents=[common], help="limit a namespaced daemon's bandwidth (tc tbf)")
    p.add_argument("daemons", nargs="+", metavar="DAEMON")
    p.add_argument("--rate", required=True, help="in tc's units: 256kbit, 1mbit, ...")
    p.add_argument("--id", help="the fault's id (default bandwidth)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compose", metavar="PROJECT",
                   help="the daemons are containers of this compose project: network faults in their namespaces")
    p.set_defaults(fn=cmd_bandwidth)

    p = fs.add_parser("list", parents=[common], help="each daemon's faults and how often they fired")
    p.add_argument("daemons", nargs="*", metavar="DAEMON", help="default: all")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compose", metavar="PROJECT",
                   help="the daemons are containers of this compose project: network faults in their namespaces")
    p.set_defaults(fn=cmd_list)

    p = fs.add_parser("clear", parents=[common], help="remove faults (all, or --id) and heal clocks")
    p.add_argument("daemons", nargs="*", metavar="DAEMON", help="default: all")
    p.add_argument("--id", action="append", help="only this fault (repeatable)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compose", metavar="PROJECT",
                   help="the daemons are containers of this compose project: network faults in their namespaces")
    p.set_defaults(fn=cmd_clear)
