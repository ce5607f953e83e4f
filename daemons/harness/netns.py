"""Hosts on one machine: each in its own Linux network namespace, on one bridge.

A `Network` makes N hosts. Each has its own network namespace (its own interfaces,
ports, routes and iptables rules), one veth pair whose inner end is `eth0` with an
address on a private /24, and whose outer end is enslaved to one bridge in the root
namespace. The bridge holds the subnet's first address, so a process in the root
namespace (a CLI, a test) reaches every host by its address, and the hosts reach one
another through the bridge over real interfaces. Host names resolve inside every
namespace through /etc/netns/<namespace>/hosts, which `ip netns exec` mounts over
/etc/hosts (the machine's own host name names each host's own address there), and
an /etc/netns/<namespace>/resolv.conf makes any other name fail at once. There is no
default route: nothing in a namespace reaches beyond the bridge.

    with Network(["collector", "schedd", "startd1"]) as net:
        p = net["collector"].popen([sys.executable, "-m", "daemons.cli.main", "daemon", "collector"])
        net["schedd"].run(["ping", "-c1", "collector"])

Names are unique per run (a random token in every namespace, interface and rule),
so two runs never collide, and a /24 is reserved through a lock file under
/run/htcpool-netns so two runs never share a subnet. `close()` undoes everything
made so far, in reverse order, even after a failure half-way through creation; it
also kills what is still running inside the namespaces. Runs that died without
closing are cleaned by `clean_stale()` (run at every creation).

For faults (partitions, resets, loss, bandwidth) between hosts, use each host's
namespace: `host.run(["iptables", ...])` or `host.run(["tc", "qdisc", "add", "dev",
"eth0", ...])` affect that host only and vanish with its namespace; `host.veth` is the
outer end, on which root-namespace tc applies to traffic towards the host.

Needs root, iproute2 (`ip`) and a kernel with network namespaces; `unavailable()`
says why not, for tests to skip with that reason.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

RUN_DIR = Path("/run/htcpool-netns")
NETNS_ETC = Path("/etc/netns")
PREFIX = "htcp"                               # every namespace, link and rule starts with this
SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")  # /24s are taken from here
INNER_IF = "eth0"


class NetnsError(RuntimeError):
    """A step of building or using the network failed; the message names the step."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip command is not installed"
    if not Path("/proc/self/ns/net").exists():
        return "this kernel has no network namespaces"
    probe = f"{PREFIX}probe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def faults_unavailable() -> str | None:
    """Why network faults (iptables rules inside a host) cannot be made here, or None."""
    why = unavailable()
    if why is None and shutil.which("iptables") is None:
        why = "iptables is not installed (apt-get install iptables)"
    return why


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip() or 'exit ' + str(r.returncode)}")
    return r


def _iptables(*args: str) -> subprocess.CompletedProcess | None:
    if shutil.which("iptables") is None:
        return None
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Host:
    """One host: a network namespace with one address on the bridge."""
    name: str
    netns: str
    ip: str
    veth: str                      # the outer end of the veth pair, on the bridge
    procs: list[subprocess.Popen] = field(default_factory=list)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this host's namespace (ip netns exec replaces itself: same PID)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def popen(self, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start a long-running process (a daemon) inside the host; close() stops it."""
        p = subprocess.Popen(self.argv(argv), **kwargs)
        self.procs.append(p)
        return p

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = 60.0,
            **kwargs) -> subprocess.CompletedProcess:
        """Run a command inside the host and wait for it."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        r = subprocess.run(self.argv(argv), timeout=timeout, **kwargs)
        if check and r.returncode != 0:
            raise NetnsError(f"{' '.join(argv)} on {self.name}: exit {r.returncode}: "
                             f"{(r.stderr or '').strip()}")
        return r

    def pids(self) -> list[int]:
        """Every process whose network namespace is this host's."""
        r = _ip("netns", "pids", self.netns, check=False)
        return [int(p) for p in r.stdout.split() if p.isdigit()]


class Network:
    """N hosts on one bridge; a context manager that always tears everything down."""

    def __init__(self, names: Iterable[str], *, token: str | None = None) -> None:
        self.names = list(names)
        if len(set(self.names)) != len(self.names) or not self.names:
            raise ValueError(f"host names must be distinct and at least one: {self.names}")
        if len(self.names) > 250:
            raise ValueError("at most 250 hosts on one /24")
        self.token = token or secrets.token_hex(3)        # 6 hex digits: names stay <= 15 chars
        self.bridge = f"{PREFIX}br{self.token}"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""                                  # the bridge's address, in the root namespace
        self._undo: list[tuple[str, Callable[[], object]]] = []
        self._lock: Path | None = None

    # ---- access -------------------------------------------------------------
    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __iter__(self):
        return iter(self.hosts.values())

    def hosts_file(self, own_ip: str | None = None) -> str:
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        # Namespaces share the machine's host name (no UTS namespace): inside each, it
        # names that host's own address, as a real host's name does.
        if own_ip:
            lines.append(f"{own_ip} {socket.gethostname()}")
        lines += [f"{h.ip} {h.name}" for h in self.hosts.values()]
        return "\n".join(lines) + "\n"

    # ---- building -------------------------------------------------------------
    def __enter__(self) -> "Network":
        return self.create()

    def __exit__(self, *exc) -> None:
        self.close()

    def create(self) -> "Network":
        why = unavailable()
        if why:
            raise NetnsError(why)
        clean_stale()
        try:
            self._reserve_subnet()
            self._make_bridge()
            for i, name in enumerate(self.names):
                self._make_host(name, i)
            for h in self.hosts.values():
                (NETNS_ETC / h.netns / "hosts").write_text(self.hosts_file(h.ip))
        except BaseException:
            self.close()
            raise
        return self

    def _reserve_subnet(self) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        used = _routes_in_use()
        candidates = list(SUPERNET.subnets(new_prefix=24))
        start = int(self.token, 16) % len(candidates)
        for k in range(len(candidates)):
            net = candidates[(start + k) % len(candidates)]
            if any(net.overlaps(u) for u in used):
                continue
            lock = RUN_DIR / f"{net.network_address}.lock"
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()} {self.token}\n")
            self._lock = lock
            self.subnet = net
            self._undo.append(("release subnet", lambda: lock.unlink(missing_ok=True)))
            return
        raise NetnsError(f"no free /24 left in {SUPERNET}")

    def _make_bridge(self) -> None:
        assert self.subnet is not None
        hosts = list(self.subnet.hosts())
        self.gateway = str(hosts[0])
        _ip("link", "add", self.bridge, "type", "bridge")
        self._undo.append((f"delete bridge {self.bridge}", lambda: _ip("link", "del", self.bridge, check=False)))
        _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        # A host that ever ran dockerd has FORWARD's policy at DROP, and with br_netfilter
        # bridged frames pass FORWARD: accept everything on our bridge, first.
        comment = f"{PREFIX}-{self.token}"
        for direction in ("-i", "-o"):
            rule = [direction, self.bridge, "-m", "comment", "--comment", comment, "-j", "ACCEPT"]
            r = _iptables("-I", "FORWARD", *rule)
            if r is not None and r.returncode == 0:
                self._undo.append((f"delete FORWARD rule {direction} {self.bridge}",
                                   lambda rule=rule: _iptables("-D", "FORWARD", *rule)))

    def _make_host(self, name: str, index: int) -> None:
        assert self.subnet is not None
        ip = str(list(self.subnet.hosts())[index + 1])
        netns = f"{PREFIX}-{self.token}-{name}"
        veth = f"{PREFIX}{self.token}v{index}"
        peer = f"{PREFIX}{self.token}p{index}"
        _ip("netns", "add", netns)
        etc = NETNS_ETC / netns

        def drop_netns() -> None:
            _kill_netns(netns)
            _ip("netns", "del", netns, check=False)
            shutil.rmtree(etc, ignore_errors=True)
        self._undo.append((f"delete namespace {netns}", drop_netns))
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(self.hosts_file(ip))
        # No name server is reachable from inside: a name not in hosts fails at once
        # (the namespace's own loopback refuses port 53) instead of timing out.
        (etc / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
        self._undo.append((f"delete link {veth}", lambda: _ip("link", "del", veth, check=False)))
        _ip("link", "set", peer, "netns", netns)
        _ip("link", "set", veth, "master", self.bridge)
        _ip("link", "set", veth, "up")
        n = ["-n", netns]
        _ip(*n, "link", "set", peer, "name", INNER_IF)
        _ip(*n, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", INNER_IF)
        _ip(*n, "link", "set", INNER_IF, "up")
        _ip(*n, "link", "set", "lo", "up")
        self.hosts[name] = Host(name, netns, ip, veth)

    # ---- tearing down -------------------------------------------------------------
    def close(self) -> list[str]:
        """Undo everything made, last first; return what could not be undone (best effort)."""
        # Last host first: daemons usually start with the collector, and stop better
        # while it is still there to take their ads' withdrawal.
        for h in reversed(list(self.hosts.values())):
            _stop(h.procs)
        failed = []
        while self._undo:
            what, fn = self._undo.pop()
            try:
                fn()
            except Exception as e:   # keep undoing the rest
                failed.append(f"{what}: {e}")
        self.hosts.clear()
        return failed


def _stop(procs: list[subprocess.Popen], timeout_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def _kill_netns(netns: str) -> None:
    """SIGKILL whatever still runs in the namespace (what close() did not start, or left)."""
    r = _ip("netns", "pids", netns, check=False)
    for pid in (int(p) for p in r.stdout.split() if p.isdigit()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _routes_in_use() -> list[ipaddress.IPv4Network]:
    out = []
    for line in _ip("-4", "route", "show", "table", "all", check=False).stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("local", "broadcast", "unreachable", "blackhole", "prohibit"):
            word = line.split()[1] if len(line.split()) > 1 else ""
        try:
            if word != "default":
                out.append(ipaddress.IPv4Network(word, strict=False))
        except ValueError:
            continue
    return out


def clean_stale() -> list[str]:
    """Remove what runs that died without closing left behind (their subnet lock names
    a PID that is gone); return the tokens cleaned."""
    cleaned = []
    if not RUN_DIR.is_dir():
        return cleaned
    for lock in RUN_DIR.glob("*.lock"):
        try:
            pid_text, token = lock.read_text().split()[:2]
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if _pid_alive(pid):
            continue
        _remove_token(token)
        lock.unlink(missing_ok=True)
        cleaned.append(token)
    return cleaned


def _remove_token(token: str) -> None:
    tag = f"{PREFIX}-{token}-"
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(tag):
            _kill_netns(name)
            _ip("netns", "del", name, check=False)
            shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            link = parts[1].strip().split("@")[0]
            if link.startswith(f"{PREFIX}{token}") or link == f"{PREFIX}br{token}":
                _ip("link", "del", link, check=False)
    r = _iptables("-S", "FORWARD")
    if r is not None:
        for rule in r.stdout.splitlines():
            if f"{PREFIX}-{token}" in rule and rule.startswith("-A FORWARD "):
                _iptables("-D", "FORWARD", *rule.split()[2:])


__all__ = ["Host", "Network", "NetnsError", "unavailable", "clean_stale", "INNER_IF"]
