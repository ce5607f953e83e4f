"""Which address a daemon binds and which it advertises, as HTCondor separates them.

HTCondor's knobs:
- NETWORK_INTERFACE picks the interface whose address the daemon uses: an IPv4
  address, an interface name (eth0), a pattern (192.168.*), or * for "the host's
  routable address" (HTCondor's default; htcpool's default is 127.0.0.1 so that a
  laptop pool stays on loopback).
- BIND_ALL_INTERFACES (HTCondor's default True; htcpool's False, for the same reason)
  binds 0.0.0.0 while still advertising the chosen address.
- TCP_FORWARDING_HOST, when set, is the address peers must use instead (a NAT or a
  published port): like HTCondor, the daemon resolves a name to an address itself.

The advertised address goes into every ad (MyAddress, StartdIpAddr, claim ids,
status-page URLs), so it must be one that other hosts and containers can reach:
never 0.0.0.0.
"""
from __future__ import annotations

import fcntl
import fnmatch
import ipaddress
import socket
import struct
from dataclasses import dataclass

_SIOCGIFADDR = 0x8915


def interface_addresses() -> dict[str, str]:
    """IPv4 address of every interface that has one, in interface order."""
    out: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name[:15].encode())
                out[name] = socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)[20:24])
            except OSError:
                continue  # no IPv4 address on this interface
    return out


def default_route_address() -> str | None:
    """The source address the kernel would use for off-host traffic (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.254", 9))
            return s.getsockname()[0]
        except OSError:
            return None


def routable_address(addresses: dict[str, str] | None = None) -> str:
    """HTCondor's NETWORK_INTERFACE = *: the default route's source address, else the
    first non-loopback interface's, else loopback."""
    via_route = default_route_address()
    if via_route and not ipaddress.ip_address(via_route).is_loopback:
        return via_route
    addresses = interface_addresses() if addresses is None else addresses
    for ip in addresses.values():
        if not ipaddress.ip_address(ip).is_loopback:
            return ip
    return "127.0.0.1"


def choose_interface(spec: str, addresses: dict[str, str] | None = None) -> str:
    """The IPv4 address NETWORK_INTERFACE names; ValueError with a reason if none."""
    spec = spec.strip()
    if spec in ("", "*", "0.0.0.0"):
        return routable_address(addresses)
    have = interface_addresses() if addresses is None else addresses
    listed = ", ".join(sorted(set(have.values()))) or "none"
    parts = spec.split(".")
    if all(p.isdigit() or p == "*" for p in parts):
        if "*" in parts:  # a pattern such as 192.168.* or 10.0.*.*
            pattern = ".".join(parts + ["*"] * (4 - len(parts))) if len(parts) < 4 else spec
            for found in have.values():
                if fnmatch.fnmatchcase(found, pattern):
                    return found
            raise ValueError(f"no address of this host matches {spec} (it has {listed})")
        try:
            ip = ipaddress.IPv4Address(spec)
        except ValueError:
            raise ValueError(f"{spec} is not an IPv4 address") from None
        if not ip.is_loopback and spec not in have.values():
            raise ValueError(f"no interface of this host has the address {spec} (it has {listed})")
        return spec
    for name, found in have.items():
        if fnmatch.fnmatchcase(name, spec):
            return found
    raise ValueError(f"no interface named {spec} with an IPv4 address (interfaces: {', '.join(have) or 'none'})")


def resolve_host(name: str) -> str:
    """A host name's IPv4 address (an address is returned as it is); ValueError if none."""
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise ValueError(f"{name} does not resolve ({e})") from None
    if not infos:
        raise ValueError(f"{name} does not resolve")
    return str(infos[0][4][0])


@dataclass(frozen=True)
class Addressing:
    bind_host: str       # what the gRPC server and status page bind
    advertise_host: str  # what goes into ads: reachable by peers


def decide_addressing(network_interface: str, bind_all: bool, forwarding_host: str | None,
                      addresses: dict[str, str] | None = None) -> Addressing:
    """Pure given `addresses`; raises ValueError naming what is wrong (the caller names the knob)."""
    chosen = choose_interface(network_interface, addresses)
    advertise = chosen
    if forwarding_host:
        advertise = resolve_host(forwarding_host.strip())
    bind = "0.0.0.0" if bind_all else chosen
    return Addressing(bind_host=bind, advertise_host=advertise)
