"""The namespace harness itself: unique names, no collisions, nothing left behind."""
from __future__ import annotations

import subprocess

import pytest

from daemons.harness import netns

from .conftest import wait_until

WHY = netns.faults_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"namespace harness: {WHY}")


def leftovers(token: str) -> list[str]:
    """Everything of run `token` still on the machine."""
    found = []
    found += [line for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
              .stdout.splitlines() if token in line]
    found += [line for line in subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
              .stdout.splitlines() if token in line]
    rules = subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True, text=True).stdout
    found += [line for line in rules.splitlines() if token in line]
    found += [str(p) for p in netns.RUN_DIR.glob("*.lock") if token in p.read_text()]
    found += [str(p) for p in netns.NETNS_ETC.glob(f"*{token}*")]
    return found


def connects(host: netns.Host, ip: str, port: int) -> bool:
    """Whether a TCP connection from `host` to ip:port is refused (reached) rather than unreachable."""
    code = ("import socket; s = socket.socket(); s.settimeout(2)\n"
            f"print(s.connect_ex(({ip!r}, {port})))")
    r = host.run(["python3", "-c", code], check=False)
    return r.stdout.strip() == "111"   # ECONNREFUSED: the packet reached a host with no listener


def test_two_networks_side_by_side_then_nothing_left():
    with netns.Network(["a", "b"]) as one, netns.Network(["a", "b"]) as two:
        assert one.subnet != two.subnet and one.token != two.token
        assert one["a"].netns != two["a"].netns
        # Hosts reach each other by name within a network, over the bridge...
        assert connects(one["a"], one["b"].ip, 9)
        assert "b" in one["a"].run(["cat", "/etc/hosts"]).stdout
        assert one["a"].run(["python3", "-c", "import socket; print(socket.gethostbyname('b'))"]).stdout.strip() \
            == one["b"].ip
        # ...and not another network's hosts: no route leads there.
        assert not connects(one["a"], two["b"].ip, 9)
        tokens = (one.token, two.token)
    for t in tokens:
        assert leftovers(t) == []


def test_failure_half_way_undoes_everything(monkeypatch):
    net = netns.Network(["a", "b", "c"])
    real = netns.Network._make_host

    def fail_on_third(self, name, index):
        if index == 2:
            raise netns.NetnsError("injected failure")
        return real(self, name, index)
    monkeypatch.setattr(netns.Network, "_make_host", fail_on_third)
    with pytest.raises(netns.NetnsError, match="injected"):
        net.create()
    assert leftovers(net.token) == []


def test_processes_inside_are_stopped_and_stale_runs_cleaned():
    net = netns.Network(["a"]).create()
    try:
        p = net["a"].popen(["sleep", "600"])
        # Same PID: ip netns exec replaces itself, once it has entered the namespace.
        wait_until(lambda: p.pid in net["a"].pids(), timeout_s=30, what="the process inside the namespace")
    finally:
        net.close()
    assert p.poll() is not None and leftovers(net.token) == []
    # A run that died without closing: its lock names a PID that is gone.
    dead = netns.Network(["a"]).create()
    orphan = dead["a"].popen(["sleep", "600"])
    dead["a"].procs.clear()
    lock = next(p for p in netns.RUN_DIR.glob("*.lock") if dead.token in p.read_text())
    lock.write_text(f"999999999 {dead.token}\n")
    dead._undo.clear()          # as if the process had died here
    assert dead.token in netns.clean_stale()
    assert orphan.wait(timeout=10) is not None
    assert leftovers(dead.token) == []


def test_rules_inside_a_host_cut_it_off_and_vanish_with_it():
    """What fault injection does with the harness: iptables and tc inside one host's namespace."""
    with netns.Network(["a", "b"]) as net:
        a, b = net["a"], net["b"]
        assert connects(a, b.ip, 9)
        a.run(["iptables", "-w", "-A", "OUTPUT", "-d", b.ip, "-j", "DROP"])
        assert not connects(a, b.ip, 9)                 # a partition, one way
        a.run(["iptables", "-w", "-F", "OUTPUT"])
        assert connects(a, b.ip, 9)
        a.run(["tc", "qdisc", "add", "dev", netns.INNER_IF, "root", "tbf", "rate", "1mbit", "burst", "32kbit",
               "latency", "400ms"])
        assert "tbf" in a.run(["tc", "qdisc", "show", "dev", netns.INNER_IF]).stdout
        assert "tbf" not in b.run(["tc", "qdisc", "show", "dev", netns.INNER_IF]).stdout
