"""Network faults as iptables and tc commands (pure)."""
from __future__ import annotations

import pytest

from daemons.harness.netfaults import (NetFault, NetFaultError, deletions, iptables_rules, ours, tc_clear,
                                       tc_commands)

B, C, GW = "10.213.5.3", "10.213.5.4", "10.213.5.1"
TAG = ["-m", "comment", "--comment", "htcpool-fault:p1"]


def test_a_partition_from_one_peer_drops_both_ways():
    assert iptables_rules(NetFault("p1", "drop", (B,))) == [
        ["INPUT", "-s", B, *TAG, "-j", "DROP"],
        ["OUTPUT", "-d", B, *TAG, "-j", "DROP"]]


def test_a_partition_from_everyone_spares_loopback_and_the_exempt_and_can_end_by_itself():
    rules = iptables_rules(NetFault("p1", "drop", exempt=(GW,), until="2026-11-25T06:00:00"))
    end = ["-m", "time", "--datestop", "2026-11-25T06:00:00"]
    assert rules == [
        ["INPUT", "-s", GW, *TAG, *end, "-j", "ACCEPT"],
        ["INPUT", "!", "-i", "lo", *TAG, *end, "-j", "DROP"],
        ["OUTPUT", "-d", GW, *TAG, *end, "-j", "ACCEPT"],
        ["OUTPUT", "!", "-o", "lo", *TAG, *end, "-j", "DROP"]]


def test_resets_and_loss():
    assert iptables_rules(NetFault("p1", "reset", (B, C)))[0] == \
        ["INPUT", "-s", B, *TAG, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"]
    assert iptables_rules(NetFault("p1", "reset", (B, C)))[2] == \
        ["OUTPUT", "-d", B, *TAG, "-p", "tcp", "!", "--tcp-flags", "RST", "RST", "-j", "REJECT", "--reject-with",
         "tcp-reset"]
    assert len(iptables_rules(NetFault("p1", "reset", (B, C)))) == 4
    assert iptables_rules(NetFault("p1", "loss", (B,), percent=25))[1] == \
        ["OUTPUT", "-d", B, *TAG, "-m", "statistic", "--mode", "random", "--probability", "0.2500", "-j", "DROP"]


def test_bandwidth_is_tc_on_both_ends_of_the_veth_and_has_no_rules():
    f = NetFault("bw", "bandwidth", rate="1mbit")
    assert iptables_rules(f) == []
    inner, outer = tc_commands(f, "eth0", "htcpv1")
    qdisc = ["root", "handle", "4711:", "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "500ms"]
    assert inner == [["qdisc", "replace", "dev", "eth0", *qdisc]]
    assert outer == [["qdisc", "replace", "dev", "htcpv1", *qdisc]]
    assert tc_clear("eth0", "htcpv1") == ([["qdisc", "del", "dev", "eth0", "root", "handle", "4711:"]],
                                          [["qdisc", "del", "dev", "htcpv1", "root", "handle", "4711:"]])


LISTED = f"""-P INPUT ACCEPT
-P OUTPUT ACCEPT
-A INPUT -s {B}/32 -m comment --comment "htcpool-fault:p1" -j DROP
-A INPUT -s 10.0.0.9/32 -j DROP
-A OUTPUT -d {B}/32 -m comment --comment htcpool-fault:p1 -j DROP
-A OUTPUT -d {C}/32 -m comment --comment "htcpool-fault:p2" -m time --datestop 2026-11-25T06:00:00 -j DROP
"""


def test_our_rules_are_found_by_their_comment_and_deleted_alone():
    assert [i for i, _ in ours(LISTED)] == ["p1", "p1", "p2"]
    assert deletions(LISTED, "p1") == [
        ["-D", "INPUT", "-s", f"{B}/32", "-m", "comment", "--comment", "htcpool-fault:p1", "-j", "DROP"],
        ["-D", "OUTPUT", "-d", f"{B}/32", "-m", "comment", "--comment", "htcpool-fault:p1", "-j", "DROP"]]
    assert len(deletions(LISTED)) == 3          # never the rule that is not ours


@pytest.mark.parametrize("fault, message", [
    (NetFault("a b", "drop"), "id 'a b'"),
    (NetFault("x", "delay"), "'delay' is not one of"),
    (NetFault("x", "loss", percent=0), "loss of 0%"),
    (NetFault("x", "bandwidth", rate="fast"), "rate 'fast'"),
    (NetFault("x", "bandwidth", (B,), rate="1mbit"), "all of a host's traffic"),
])
def test_bad_faults_are_refused_by_name(fault, message):
    with pytest.raises(NetFaultError, match=message):
        iptables_rules(fault)


def test_descriptions():
    assert NetFault("p1", "drop", (B,)).describe() == f"p1: partition (drop) from {B}"
    assert NetFault("p1", "loss", percent=20, until="2026-11-25T06:00:00").describe() == \
        "p1: 20% packet loss from every peer, until 2026-11-25T06:00:00 UTC"
    assert NetFault("bw", "bandwidth", rate="1mbit").describe() == "bw: bandwidth 1mbit"
