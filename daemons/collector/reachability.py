"""Is a daemon's advertised address one its peers can reach? The collector checks.

HTCondor's collector stores whatever MyAddress an ad carries; a daemon that
advertises loopback or an address behind a NAT then simply never gets contacted, and
the pool looks idle for no visible reason. The collector is the one process every
daemon talks to, so it says so, once per address, naming the knobs to fix:

- `address_problem` (pure): an address that cannot be right whatever the network,
  judged against where the update came from (the gRPC peer);
- `Prober`: for an address that looks right, one TCP connection from the collector,
  in the background, to see that it answers.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from dataclasses import dataclass, field

KNOBS = "NETWORK_INTERFACE, BIND_ALL_INTERFACES or TCP_FORWARDING_HOST"


def split_sinful(text: str) -> tuple[str, int] | None:
    """'<host:port?...>' or 'host:port' -> (host, port); None if it is not one."""
    v = text.strip().strip("<>").split("?", 1)[0]
    host, _, port = v.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def peer_host(peer: str) -> str | None:
    """gRPC's peer string ('ipv4:10.0.0.3:5555', 'ipv6:[::1]:5555') -> its address."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def address_problem(my_address: str, peer: str) -> str | None:
    """Why `my_address` cannot be reached by the daemon's peers, or None if it may be."""
    parsed = split_sinful(my_address)
    if parsed is None:
        return f"MyAddress {my_address!r} is not host:port"
    host, port = parsed
    ip = _ip(host)
    if ip is not None and ip.is_unspecified:
        return f"{host} is the unspecified address, which no peer can connect to"
    sender = _ip(peer_host(peer) or "")
    if ip is not None and ip.is_loopback and sender is not None and not sender.is_loopback:
        return f"{host} is a loopback address and the update came from {sender}, another host"
    return None


@dataclass
class Prober:
    """One TCP connection per new advertised address, a few at a time, remembered."""
    log: logging.Logger
    timeout_s: float = 3.0
    max_remembered: int = 4096
    concurrency: int = 8
    unreachable: dict[str, str] = field(default_factory=dict)   # address -> why
    _seen: set[str] = field(default_factory=set)
    _sem: asyncio.Semaphore | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    def check(self, who: str, my_address: str, peer: str) -> None:
        """Judge an advertised address; probe it in the background the first time it is seen."""
        if my_address in self._seen:
            return
        if len(self._seen) >= self.max_remembered:
            self._seen.clear()
        self._seen.add(my_address)
        problem = address_problem(my_address, peer)
        if problem is not None:
            self._report(who, my_address, problem)
            return
        task = asyncio.create_task(self._probe(who, my_address))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _probe(self, who: str, my_address: str) -> None:
        parsed = split_sinful(my_address)
        assert parsed is not None
        host, port = parsed
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.timeout_s)
            except asyncio.TimeoutError:
                self._report(who, my_address, f"a connection to it timed out after {self.timeout_s:g} s")
                return
            except OSError as e:
                why = ("its host name does not resolve here" if isinstance(e, socket.gaierror)
                       else (e.strerror or str(e)).lower())
                self._report(who, my_address, f"the collector cannot connect to it ({why})")
                return
            writer.close()
            self.unreachable.pop(my_address, None)

    def _report(self, who: str, my_address: str, why: str) -> None:
        self.unreachable[my_address] = why
        self.log.warning("%s advertises MyAddress %s, but %s: no peer will reach it; check %s on that host",
                         who, my_address, why, KNOBS)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
