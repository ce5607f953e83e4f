"""Network faults between hosts of the namespace harness: iptables and tc commands.

A fault lives in one host's namespace and acts on that host's traffic with its peers
(every host but the exempt addresses when no peer is named):

- drop: a partition, packets to and from the peers dropped (iptables DROP);
- reset: connections to and from the peers refused with a TCP reset (REJECT
  --reject-with tcp-reset), as a peer whose port is closed or a firewall that says no;
- loss: a share of the packets to and from the peers dropped at random (the
  `statistic` match);
- bandwidth: the host's traffic limited to a rate (tc tbf on its interface, both
  ways: inside its namespace for what it sends, on the bridge's side of its veth for
  what it receives). `tc netem` is not available on these machines: delay comes from
  the RPC fault layer.

Every iptables rule carries a comment `htcpool-fault:<id>`, by which it is listed and
removed; a rule with an end (`until`, wall-clock UTC) stops matching by itself (the
`time` match), so a partition heals even if whoever set it is gone. The exempt
addresses (the bridge's, where the operator's tools run) are never cut. Pure functions
build the argument lists; `apply`, `clear` and `listing` run them through the runners
they are given, and `Namespace` makes those runners for a namespace known by name (a
daemon of a pool.json started with `ip netns exec NS ...`).
"""
from __future__ import annotations

import ipaddress
import re
import subprocess
from dataclasses import dataclass
from typing import Callable, Sequence

TAG = "htcpool-fault:"
HOWS = ("drop", "reset", "loss", "bandwidth")
# The tbf qdiscs we add carry this handle, so we remove only ours.
TC_HANDLE = "4711:"
_RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")


class NetFaultError(ValueError):
    pass


@dataclass(frozen=True)
class NetFault:
    id: str
    how: str                          # drop | reset | loss | bandwidth
    peers: tuple[str, ...] = ()       # IP addresses; () = every peer
    percent: float = 100.0            # loss: of the packets
    rate: str = ""                    # bandwidth, in tc's units: "1mbit", "256kbit"
    until: str | None = None          # UTC "YYYY-MM-DDThh:mm:ss": the rules stop matching then
    exempt: tuple[str, ...] = ()      # addresses never cut (the operator's)

    def check(self) -> "NetFault":
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.id or ""):
            raise NetFaultError(f"network fault id {self.id!r} must be letters, digits, '_', '.', ':' or '-'")
        if self.how not in HOWS:
            raise NetFaultError(f"network fault {self.id}: {self.how!r} is not one of {', '.join(HOWS)}")
        if self.how == "loss" and not 0 < self.percent <= 100:
            raise NetFaultError(f"network fault {self.id}: loss of {self.percent:g}% must be above 0 and at most 100")
        if self.how == "bandwidth":
            if not _RATE.match(self.rate):
                raise NetFaultError(f"network fault {self.id}: rate {self.rate!r} is not a tc rate (e.g. 1mbit)")
            if self.peers:
                raise NetFaultError(f"network fault {self.id}: a bandwidth limit is for all of a host's traffic")
        return self

    def describe(self) -> str:
        what = {"drop": "partition (drop)", "reset": "partition (TCP reset)",
                "loss": f"{self.percent:g}% packet loss", "bandwidth": f"bandwidth {self.rate}"}[self.how]
        who = "" if self.how == "bandwidth" else f" from {', '.join(self.peers) if self.peers else 'every peer'}"
        return f"{self.id}: {what}{who}" + (f", until {self.until} UTC" if self.until else "")


def iptables_rules(f: NetFault) -> list[list[str]]:
    """The rules to append, each as `iptables -A` arguments (chain first)."""
    f.check()
    if f.how == "bandwidth":
        return []
    tag = ["-m", "comment", "--comment", f"{TAG}{f.id}"]
    end = ["-m", "time", "--datestop", f.until] if f.until else []
    out: list[list[str]] = []
    for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
        if f.how == "drop":
            action = ["-j", "DROP"]
        elif f.how == "reset":
            # Outgoing, spare the resets REJECT itself sends (they leave through OUTPUT too).
            action = ["-p", "tcp", *(["!", "--tcp-flags", "RST", "RST"] if chain == "OUTPUT" else []),
                      "-j", "REJECT", "--reject-with", "tcp-reset"]
        else:
            action = ["-m", "statistic", "--mode", "random", "--probability", f"{f.percent / 100:.4f}",
                      "-j", "DROP"]
        if f.peers:
            out += [[chain, flag, peer, *tag, *end, *action] for peer in f.peers]
        else:
            # Everyone but loopback and the exempt addresses (accepted first).
            out += [[chain, flag, ex, *tag, *end, "-j", "ACCEPT"] for ex in f.exempt]
            out.append([chain, "!", "-i" if chain == "INPUT" else "-o", "lo", *tag, *end, *action])
    return out


def tc_commands(f: NetFault, inner: str, outer: str) -> tuple[list[list[str]], list[list[str]]]:
    """(commands in the host's namespace, commands in the root namespace) that limit its
    bandwidth: `inner` is its interface, `outer` the bridge's end of its veth."""
    f.check()
    if f.how != "bandwidth":
        return [], []
    # A burst of at least a few packets, and a queue of at most ~half a second.
    qdisc = ["root", "handle", TC_HANDLE, "tbf", "rate", f.rate, "burst", "32kbit", "latency", "500ms"]
    return [["qdisc", "replace", "dev", inner, *qdisc]], [["qdisc", "replace", "dev", outer, *qdisc]]


def tc_clear(inner: str, outer: str) -> tuple[list[list[str]], list[list[str]]]:
    return [["qdisc", "del", "dev", inner, "root", "handle", TC_HANDLE]], \
        [["qdisc", "del", "dev", outer, "root", "handle", TC_HANDLE]]


def ours(iptables_s: str, fault_id: str | None = None) -> list[tuple[str, list[str]]]:
    """(fault id, rule) for each rule of ours in `iptables -S` output (all, or one fault's)."""
    out = []
    for line in iptables_s.splitlines():
        if not line.startswith("-A ") or TAG not in line:
            continue
        m = re.search(rf'--comment "?{re.escape(TAG)}([A-Za-z0-9_.:-]+)"?', line)
        if m is None or (fault_id is not None and m.group(1) != fault_id):
            continue
        out.append((m.group(1), _split(line)[1:]))
    return out


def deletions(iptables_s: str, fault_id: str | None = None) -> list[list[str]]:
    """`iptables -D` arguments that remove our rules (all, or one fault's)."""
    return [["-D", *rule] for _, rule in ours(iptables_s, fault_id)]


def _split(line: str) -> list[str]:
    """iptables -S quotes a comment with spaces; ours have none, but strip the quotes."""
    return [w.strip('"') for w in re.findall(r'"[^"]*"|\S+', line)]


# ---- acting in a host of daemons/harness/netns.py -------------------------------------------
Runner = Callable[[Sequence[str]], str]     # runs argv in some namespace, returns stdout


def apply(f: NetFault, in_host: Runner, in_root: Runner, inner: str = "eth0", outer: str = "") -> None:
    for rule in iptables_rules(f):
        in_host(["iptables", "-w", "-A", *rule])
    host_tc, root_tc = tc_commands(f, inner, outer)
    for cmd in host_tc:
        in_host(["tc", *cmd])
    if outer:
        for cmd in root_tc:
            in_root(["tc", *cmd])


def clear(in_host: Runner, in_root: Runner, fault_id: str | None = None, inner: str = "eth0",
          outer: str = "", bandwidth: bool = True) -> list[str]:
    """Remove our rules (all, or one fault's) and, with `bandwidth`, our rate limits;
    return the ids removed."""
    listed = in_host(["iptables", "-w", "-S"])
    ids = sorted({i for i, _ in ours(listed, fault_id)})
    for args in deletions(listed, fault_id):
        in_host(["iptables", "-w", *args])
    if bandwidth:
        host_tc, root_tc = tc_clear(inner, outer)
        if TC_HANDLE.rstrip(":") in in_host(["tc", "qdisc", "show", "dev", inner]):
            for cmd in host_tc:
                in_host(["tc", *cmd])
            ids.append("bandwidth")
        if outer and TC_HANDLE.rstrip(":") in in_root(["tc", "qdisc", "show", "dev", outer]):
            for cmd in root_tc:
                in_root(["tc", *cmd])
    return ids


def listing(in_host: Runner, inner: str = "eth0") -> list[str]:
    """One line per fault of ours in force in a host."""
    rules = ours(in_host(["iptables", "-w", "-S"]))
    out = []
    for fid in dict.fromkeys(i for i, _ in rules):
        mine = [r for i, r in rules if i == fid]
        text = " ".join(" ".join(r) for r in mine)
        how = "reset" if "tcp-reset" in text else "loss" if "statistic" in text else "drop"
        peers = sorted({r[r.index("-s") + 1] for r in mine if "-s" in r and "ACCEPT" not in r})
        until = re.search(r"--datestop (\S+)", text)
        out.append(f"{fid}: {how} from {', '.join(peers) or 'every peer'}"
                   + (f", until {until.group(1)} UTC" if until else ""))
    tc = in_host(["tc", "qdisc", "show", "dev", inner])
    m = re.search(rf"qdisc tbf {TC_HANDLE.rstrip(':')}: .*?rate (\S+)", tc)
    if m:
        out.append(f"bandwidth: {m.group(1)} on {inner}")
    return out


def namespace_of(argv: Sequence[str]) -> str | None:
    """The network namespace a daemon was started in (`ip netns exec NS ...`), if any."""
    a = list(argv)
    if len(a) >= 4 and a[0].rsplit("/", 1)[-1] == "ip" and a[1:3] == ["netns", "exec"]:
        return a[3]
    return None


def _run(argv: Sequence[str]) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise NetFaultError(f"{' '.join(argv)}: {r.stderr.strip() or 'exit ' + str(r.returncode)}")
    return r.stdout


def in_root(argv: Sequence[str]) -> str:
    return _run(argv)


@dataclass(frozen=True)
class Namespace:
    """A host of the harness known by its namespace's name: runners, its veth, its bridge."""
    name: str
    inner: str = "eth0"

    def run(self, argv: Sequence[str]) -> str:
        return _run(["ip", "netns", "exec", self.name, *argv])

    def outer(self) -> str:
        """The bridge's end of this host's veth (by the peer index `ip link` shows)."""
        m = re.search(rf"{self.inner}@if(\d+)", _run(["ip", "-n", self.name, "-o", "link", "show", self.inner]))
        if m is None:
            raise NetFaultError(f"namespace {self.name} has no {self.inner} with a peer")
        for line in _run(["ip", "-o", "link", "show"]).splitlines():
            index, _, rest = line.partition(": ")
            if index.strip() == m.group(1):
                return rest.split(":", 1)[0].split("@", 1)[0]
        raise NetFaultError(f"no link {m.group(1)} (the peer of {self.name}'s {self.inner})")

    def bridge_address(self) -> str:
        """The subnet's first address: the bridge's, in the root namespace (the harness's rule)."""
        m = re.search(r"inet (\S+)", _run(["ip", "-n", self.name, "-o", "-4", "addr", "show", self.inner]))
        if m is None:
            raise NetFaultError(f"namespace {self.name} has no address on {self.inner}")
        return str(next(ipaddress.ip_interface(m.group(1)).network.hosts()))
