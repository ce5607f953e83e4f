"""Authorization: HTCondor's ALLOW_<LEVEL> / DENY_<LEVEL> lists, decided as IpVerify does.

A list entry is `user@domain/host`, `user@domain` (any host), or a host alone (any
user); `*` is a wildcard within a name (`*@cs.wisc.edu`, `*.wisc.edu`, `10.0.*`) and a
host may be an address, a network (`10.0.0.0/8`, `10.0.0.0/255.0.0.0`) or a name
(resolved to its addresses when the list is read, as HTCondor does). Callers without a
token are `unauthenticated@unmapped`. Splitting an entry follows IpVerify::split_entry
and deciding one level follows IpVerify::Verify (src/condor_io/condor_ipverify.cpp):

- no ALLOW list for a level other than READ and WRITE, or `DENY = *`: nobody;
- `ALLOW = *` and no DENY list: everybody;
- otherwise a matching DENY entry refuses, then a matching ALLOW entry allows, then
  (`ALLOW = *` with a DENY list) not being denied allows; otherwise the caller is
  allowed if a level that implies this one allows it (DAEMON and ADMINISTRATOR imply
  WRITE, ...), and refused if none does.

A token's scope then limits the result: a token scoped to `condor:/READ` holds READ at
most, whatever the lists say (daemon_command.cpp applies the limit the same way).
"""
from __future__ import annotations

import fnmatch
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from daemons.core.security.levels import LEVELS, READ, WRITE, config_chain, implied, implied_by

UNAUTHENTICATED = "unauthenticated@unmapped"

ALLOW_ANYONE, DENY_EVERYONE, ONLY_DENIES, USE_TABLE = "allow", "deny", "only_denies", "table"


@dataclass(frozen=True)
class Entry:
    user: str       # a wildcard pattern over user@domain
    host: str       # "*", an address pattern, a network, or a host-name pattern
    text: str       # as written, for messages

    def matches_user(self, identity: str) -> bool:
        return _wild(self.user, identity)


def _wild(pattern: str, value: str) -> bool:
    if pattern == "*":
        return True
    if "*" not in pattern:
        return pattern.lower() == value.lower()
    return fnmatch.fnmatchcase(value.lower(), pattern.lower().replace("[", "[[]").replace("?", "[?]"))


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if "/" not in text:
        return None
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def split_entry(entry: str) -> tuple[str, str]:
    """(user, host) of one list entry, by HTCondor's rules."""
    first = entry.find("/")
    if first < 0:
        return (entry, "*") if "@" in entry else ("*", entry)
    second = entry.find("/", first + 1)
    if second >= 0:                                   # user/net/mask
        return entry[:first], entry[first + 1:]
    at = entry.find("@")
    if (0 <= at < first) or entry.startswith("*"):    # user/host, and the ambiguous */x
        return entry[:first], entry[first + 1:]
    if _network(entry) is not None:                   # net/mask
        return "*", entry
    return entry[:first], entry[first + 1:]


def parse_list(text: str | None) -> tuple[str, ...] | None:
    """A list knob's entries (commas and/or spaces); None when the knob is not set."""
    if text is None:
        return None
    return tuple(e for e in re.split(r"[,\s]+", text.strip()) if e)


@dataclass(frozen=True)
class Peer:
    """Who is calling from where: the caller's address and any names it resolves to."""
    address: str
    names: tuple[str, ...] = ()


def host_matches(pattern: str, peer: Peer, resolved: dict[str, tuple[str, ...]]) -> bool:
    if pattern in ("*", "*/*"):
        return True
    net = _network(pattern)
    if net is not None:
        try:
            return ipaddress.ip_address(peer.address) in net
        except ValueError:
            return False
    if _wild(pattern, peer.address):
        return True
    if peer.address in resolved.get(pattern, ()):
        return True
    return any(_wild(pattern, name) for name in peer.names)


@dataclass(frozen=True)
class LevelList:
    behavior: str
    allow: tuple[Entry, ...] = ()
    deny: tuple[Entry, ...] = ()
    allow_knob: str = ""
    deny_knob: str = ""


def _behavior(level: str, allow: tuple[str, ...] | None, deny: tuple[str, ...] | None) -> str:
    allow_all = allow is not None and allow in (("*",), ("*/*",))
    deny_all = deny is not None and deny in (("*",), ("*/*",))
    if deny_all or (allow is None and level not in (READ, WRITE)):
        return DENY_EVERYONE
    if allow_all:
        return ALLOW_ANYONE if deny is None else ONLY_DENIES
    return USE_TABLE


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass
class Policy:
    """The ALLOW/DENY lists of every level, as one daemon reads them."""
    lists: dict[str, LevelList]
    # host names in the lists -> their addresses (resolved when the lists were read)
    resolved: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_lists(cls, raw: Callable[[str], str | None], subsys: str = "",
                   resolve: Callable[[str], tuple[str, ...]] | None = None) -> "Policy":
        """Read ALLOW_/DENY_ knobs through `raw(knob) -> text | None`, with HTCondor's
        search order: <KNOB>_<SUBSYS> before <KNOB>, then the level's fallbacks."""

        def lookup(prefix: str, level: str) -> tuple[str, tuple[str, ...] | None]:
            for name in config_chain(level):
                for knob in ((f"{prefix}_{name}_{subsys}",) if subsys else ()) + (f"{prefix}_{name}",):
                    value = parse_list(raw(knob))
                    if value is not None:
                        return knob, value
            return "", None

        lists: dict[str, LevelList] = {}
        resolved: dict[str, tuple[str, ...]] = {}
        for level in LEVELS:
            allow_knob, allow = lookup("ALLOW", level)
            deny_knob, deny = lookup("DENY", level)
            entries = []
            for texts in (allow or (), deny or ()):
                entries.append(tuple(Entry(*split_entry(t), t) for t in texts))
            for e in entries[0] + entries[1]:
                if resolve is not None and _is_hostname(e.host) and e.host not in resolved:
                    resolved[e.host] = resolve(e.host)
            lists[level] = LevelList(_behavior(level, allow, deny), entries[0], entries[1], allow_knob, deny_knob)
        return cls(lists, resolved)

    def needs_names(self) -> bool:
        """Whether deciding needs the caller's host names (a host-name wildcard in a list)."""
        return any("*" in e.host and any(c.isalpha() for c in e.host)
                   for lst in self.lists.values() for e in lst.allow + lst.deny)

    def _match(self, entries: Sequence[Entry], identity: str, peer: Peer) -> Entry | None:
        for e in entries:
            if e.matches_user(identity) and host_matches(e.host, peer, self.resolved):
                return e
        return None

    def verify(self, level: str, identity: str, peer: Peer) -> Decision:
        """Whether the lists allow `identity` calling from `peer` the `level`, and why."""
        lst = self.lists[level]
        if lst.behavior == ALLOW_ANYONE:
            return Decision(True, f"{level} authorization policy allows access by anyone")
        if lst.behavior == DENY_EVERYONE:
            return Decision(False, f"{level} authorization policy denies all access")
        denied = self._match(lst.deny, identity, peer)
        if denied is not None:
            return Decision(False, f"{level} authorization policy denies {identity} ({lst.deny_knob} has "
                                   f"{denied.text})")
        allowed = self._match(lst.allow, identity, peer)
        if allowed is not None:
            return Decision(True, f"{level} authorization policy allows {identity} ({lst.allow_knob} has "
                                  f"{allowed.text})")
        if lst.behavior == ONLY_DENIES:
            return Decision(True, f"{level} authorization policy does not deny, so allowing")
        for parent in implied_by(level):
            d = self.verify(parent, identity, peer)
            if d.allowed:
                return Decision(True, f"{level} is implied by {parent}; {d.reason}")
        where = lst.allow_knob or f"ALLOW_{level}"
        return Decision(False, f"{level} authorization policy contains no matching ALLOW entry for "
                               f"{identity} from {peer.address} (see {where})")

    def levels_of(self, identity: str, peer: Peer, scopes: frozenset[str] | None = None) -> frozenset[str]:
        """Every level the caller holds, after the token's scope limits."""
        held = frozenset(lv for lv in LEVELS if self.verify(lv, identity, peer).allowed)
        return held if scopes is None else held & limit_of(scopes)

    def explain(self, level: str, identity: str, peer: Peer, scopes: frozenset[str] | None = None) -> str:
        """Why `level` is refused (the scope, or the lists)."""
        if scopes is not None and level not in limit_of(scopes):
            return (f"the token is limited to {', '.join(sorted(scopes))} (its scope), which does not "
                    f"include {level}")
        return self.verify(level, identity, peer).reason


def limit_of(scopes: Iterable[str]) -> frozenset[str]:
    """Levels a scope lets through: each named level and what it implies."""
    out: set[str] = set()
    for s in scopes:
        out |= implied(s)
    return frozenset(out)


def _is_hostname(host: str) -> bool:
    if host in ("*", "*/*") or _network(host) is not None:
        return False
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        pass
    return any(c.isalpha() for c in host) and "*" not in host
