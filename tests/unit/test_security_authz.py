"""ALLOW/DENY lists and levels, decided as HTCondor's IpVerify decides them."""
from __future__ import annotations

import pytest

from daemons.core.security.authz import UNAUTHENTICATED, Peer, Policy, limit_of, split_entry
from daemons.core.security.levels import config_chain, implied, parse_level

HERE = Peer("10.0.0.5", ("node5.cs.example.edu",))
AWAY = Peer("192.168.1.9")


def policy(knobs: dict[str, str], subsys: str = "", resolve=None) -> Policy:
    return Policy.from_lists({k.upper(): v for k, v in knobs.items()}.get, subsys, resolve=resolve)


def allowed(p: Policy, level: str, who: str, peer: Peer = HERE) -> bool:
    return p.verify(level, who, peer).allowed


def test_implications_and_configuration_fallbacks_are_htcondors():
    assert implied("DAEMON") == {"DAEMON", "WRITE", "READ"}
    assert implied("ADMINISTRATOR") == {"ADMINISTRATOR", "WRITE", "READ"}
    assert implied("NEGOTIATOR") == {"NEGOTIATOR", "READ"}
    assert implied("ADVERTISE_STARTD") == {"ADVERTISE_STARTD", "READ"}
    assert config_chain("ADVERTISE_SCHEDD") == ("ADVERTISE_SCHEDD", "DAEMON", "DEFAULT")
    assert config_chain("WRITE") == ("WRITE", "DEFAULT")
    assert parse_level("daemon") == "DAEMON"
    with pytest.raises(ValueError, match="not an authorization level"):
        parse_level("ROOT")


@pytest.mark.parametrize("entry, split", [
    ("alice@cs.wisc.edu", ("alice@cs.wisc.edu", "*")),
    ("*.cs.wisc.edu", ("*", "*.cs.wisc.edu")),
    ("10.0.0.7", ("*", "10.0.0.7")),
    ("alice@cs.wisc.edu/10.0.0.7", ("alice@cs.wisc.edu", "10.0.0.7")),
    ("*/node1.example", ("*", "node1.example")),
    ("10.0.0.0/8", ("*", "10.0.0.0/8")),
    ("10.0.0.0/255.0.0.0", ("*", "10.0.0.0/255.0.0.0")),
    ("bob@x/10.0.0.0/8", ("bob@x", "10.0.0.0/8")),
])
def test_entries_split_into_user_and_host(entry, split):
    assert split_entry(entry) == split


def test_allow_and_deny_by_identity_host_and_network():
    p = policy({"ALLOW_WRITE": "alice@* *@cs.example.edu/10.0.0.0/8 carol@x/*.cs.example.edu",
                "DENY_WRITE": "mallory@*, *@*/192.168.1.9"})
    assert allowed(p, "WRITE", "alice@anywhere", AWAY) is False      # denied host wins over allow
    assert allowed(p, "WRITE", "alice@anywhere") is True
    assert allowed(p, "WRITE", "dan@cs.example.edu") is True          # domain wildcard, in 10/8
    assert allowed(p, "WRITE", "dan@cs.example.edu", Peer("11.0.0.1")) is False
    assert allowed(p, "WRITE", "carol@x") is True                     # host-name wildcard
    assert allowed(p, "WRITE", "mallory@cs.example.edu") is False     # DENY beats ALLOW
    assert allowed(p, "WRITE", "ALICE@Anywhere") is True              # case-insensitive
    assert "DENY_WRITE has mallory@*" in p.verify("WRITE", "mallory@cs.example.edu", HERE).reason


def test_wildcard_allows_everybody_and_unauthenticated_too():
    p = policy({"ALLOW_READ": "*"})
    assert allowed(p, "READ", UNAUTHENTICATED, AWAY)
    assert p.verify("READ", "x@y", AWAY).reason == "READ authorization policy allows access by anyone"


def test_only_denies():
    p = policy({"ALLOW_WRITE": "*", "DENY_WRITE": "bad@*"})
    assert allowed(p, "WRITE", "good@x") and not allowed(p, "WRITE", "bad@x")


def test_a_level_without_an_allow_list_denies_everybody_but_read_and_write_inherit():
    p = policy({"ALLOW_DAEMON": "condor@*"})
    assert not allowed(p, "ADMINISTRATOR", "condor@pool")      # no ALLOW_ADMINISTRATOR: nobody
    assert allowed(p, "WRITE", "condor@pool")                  # DAEMON implies WRITE
    assert allowed(p, "READ", "condor@pool")                   # ... and READ
    assert not allowed(p, "READ", "alice@pool")
    assert "READ is implied by WRITE; WRITE is implied by DAEMON" in p.verify("READ", "condor@pool", HERE).reason


def test_deny_at_a_level_is_not_overridden_by_an_implying_level():
    p = policy({"ALLOW_DAEMON": "condor@*", "DENY_WRITE": "condor@*"})
    assert allowed(p, "DAEMON", "condor@pool") and not allowed(p, "WRITE", "condor@pool")


def test_deny_star_denies_everybody():
    p = policy({"ALLOW_READ": "*", "DENY_READ": "*"})
    assert not allowed(p, "READ", "anyone@x")
    assert p.verify("READ", "anyone@x", HERE).reason == "READ authorization policy denies all access"


def test_advertise_levels_read_the_daemon_list_when_not_set():
    p = policy({"ALLOW_DAEMON": "condor@*", "ALLOW_ADVERTISE_SCHEDD": "schedd@*"})
    assert allowed(p, "ADVERTISE_STARTD", "condor@pool")         # from ALLOW_DAEMON
    assert not allowed(p, "ADVERTISE_SCHEDD", "condor@pool")     # its own list replaces DAEMON's
    assert allowed(p, "ADVERTISE_SCHEDD", "schedd@pool")


def test_subsystem_lists_come_first():
    p = policy({"ALLOW_WRITE": "*", "ALLOW_WRITE_COLLECTOR": "condor@*"}, subsys="COLLECTOR")
    assert not allowed(p, "WRITE", "alice@pool") and allowed(p, "WRITE", "condor@pool")
    assert allowed(policy({"ALLOW_WRITE": "*", "ALLOW_WRITE_COLLECTOR": "condor@*"}, subsys="SCHEDD"),
                   "WRITE", "alice@pool")


def test_default_list_is_the_last_resort():
    p = policy({"ALLOW_DEFAULT": "ops@*"})
    assert allowed(p, "ADMINISTRATOR", "ops@pool") and not allowed(p, "ADMINISTRATOR", "alice@pool")


def test_host_names_are_resolved_when_the_lists_are_read():
    p = policy({"ALLOW_ADMINISTRATOR": "*/headnode.example"}, resolve=lambda h: ("10.1.2.3",))
    assert allowed(p, "ADMINISTRATOR", "root@pool", Peer("10.1.2.3"))
    assert not allowed(p, "ADMINISTRATOR", "root@pool", Peer("10.1.2.4"))


def test_token_scopes_limit_what_the_lists_allow():
    p = policy({"ALLOW_READ": "*", "ALLOW_WRITE": "*", "ALLOW_ADMINISTRATOR": "admin@*"})
    assert p.levels_of("admin@x", HERE) == {"READ", "WRITE", "ADMINISTRATOR"}
    assert p.levels_of("admin@x", HERE, frozenset({"READ"})) == {"READ"}
    assert p.levels_of("alice@x", HERE, frozenset({"ADMINISTRATOR"})) == {"READ", "WRITE"}   # never grants
    assert limit_of({"WRITE"}) == {"WRITE", "READ"}
    assert "limited to READ (its scope)" in p.explain("WRITE", "admin@x", HERE, frozenset({"READ"}))
