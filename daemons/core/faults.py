"""Fault plans: which RPCs to delay, abort or drop, and how to skew a daemon's clock. Pure.

The vocabulary is gRPC's own fault injection (gRFC A33) where it fits: a fault delays
a call by a fixed time plus jitter, aborts it with a chosen status, or both (delay
first), on a percentage of the calls that match its method and peer, at most
`max_active` at once. htcpool adds what A33 lacks and a fault experiment needs:

- drop: never answer, so the caller waits until its own deadline (a lost message);
- a window in pool time (`start`, `stop`), so a fault heals itself even if whoever
  set it goes away;
- a side: "server" faults act on calls into the daemon (the peer is the caller),
  "client" faults on calls it makes (the peer is the address called);
- clock faults: an offset (a jump) and a drift (a rate error) of the daemon's pool
  clock, as Jepsen's clock nemesis bumps and strobes a node's clock.

All times are pool seconds (delays too: at TIME_SCALE 100 a 20 s delay is 0.2 s of
wall time), so a fault means the same thing to the pool at any time scale. Windows
are read on the daemon's true pool clock, never on a clock a fault has skewed.

This module decides; `fault_layer.py` acts (sleeps, aborts, logs, counts).
"""
from __future__ import annotations

import fnmatch
import random
import re
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

# gRPC status codes a fault may abort with (OK is not a fault).
ABORT_CODES = ("CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
               "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
               "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
SIDES = ("server", "client")
# The admin service is never faulted: a plan can always be listed and cleared.
EXEMPT_SERVICE = "Admin"


class FaultError(ValueError):
    """A fault that cannot be used; the message names the fault and the field."""


@dataclass(frozen=True)
class Fault:
    id: str
    side: str = "server"
    method: str = "*"             # glob over "Service.Method" (or just the method's name)
    peer: str = "*"               # globs (comma-separated) over the peer's role, daemon name, host, address
    delay_s: float = 0.0          # pool seconds
    jitter_s: float = 0.0         # the delay is delay_s +- jitter_s, never below 0
    abort: str = ""               # a gRPC status code name; "" = none
    drop: bool = False
    percent: float = 100.0        # of matching calls (and stream messages)
    start: float | None = None    # pool time; None = at once
    stop: float | None = None     # pool time; None = until cleared
    max_active: int = 0           # calls under this fault at once; 0 = no limit
    clock_offset_s: float = 0.0   # added to the daemon's pool clock
    clock_drift: float = 0.0      # 0.01 = the pool clock runs 1% fast

    @property
    def kind(self) -> str:
        if self.is_clock:
            return "clock"
        if self.drop:
            return "drop"
        if self.abort:
            return "abort"
        return "delay"

    @property
    def is_clock(self) -> bool:
        return self.clock_offset_s != 0.0 or self.clock_drift != 0.0

    def active_at(self, now: float) -> bool:
        return (self.start is None or now >= self.start) and (self.stop is None or now < self.stop)

    def describe(self, now: float | None = None) -> str:
        """One line; with `now` (pool time) the window reads relative to it."""
        if self.is_clock:
            parts = []
            if self.clock_offset_s:
                parts.append(f"offset {self.clock_offset_s:+g} s")
            if self.clock_drift:
                parts.append(f"drift {self.clock_drift:+g}")
            what = "clock " + ", ".join(parts)
        else:
            bits = []
            if self.delay_s or self.jitter_s:
                bits.append(f"delay {self.delay_s:g} s" + (f" +- {self.jitter_s:g} s" if self.jitter_s else ""))
            if self.drop:
                bits.append("drop")
            elif self.abort:
                bits.append(f"abort {self.abort}")
            what = " then ".join(bits) + f" on {self.percent:g}% of {self.side} calls {self.method}"
            if self.peer != "*":
                what += f" peer {self.peer}"
            if self.max_active:
                what += f", at most {self.max_active} at once"
        if now is not None and (self.start is not None or self.stop is not None):
            if self.start is not None and self.start > now:
                what += f", from {self.start - now:.0f} s from now"
                if self.stop is not None:
                    what += f" for {self.stop - self.start:.0f} s"
            elif self.stop is not None:
                what += f", {max(0.0, self.stop - now):.0f} s left" if self.stop > now else ", over"
        elif self.start is not None or self.stop is not None:
            what += (f", pool time {'' if self.start is None else f'{self.start:.0f}'}"
                     f"..{'' if self.stop is None else f'{self.stop:.0f}'}")
        return f"{self.id}: {what}"


def validate(f: Fault) -> Fault:
    """Return `f` with names canonicalised, or raise FaultError naming what is wrong."""
    where = f"fault {f.id or '?'}"
    if not f.id or not re.fullmatch(r"[A-Za-z0-9_.:-]+", f.id):
        raise FaultError(f"{where}: id {f.id!r} must be letters, digits, '_', '.', ':' or '-'")
    if f.side not in SIDES:
        raise FaultError(f"{where}: side {f.side!r} is not one of {', '.join(SIDES)}")
    for name in ("delay_s", "jitter_s"):
        v = getattr(f, name)
        if not (v >= 0.0) or v == float("inf"):
            raise FaultError(f"{where}: {name[:-2]} {v!r} must be a finite number of seconds, at least 0")
    if not (0.0 < f.percent <= 100.0):
        raise FaultError(f"{where}: percent {f.percent!r} must be above 0 and at most 100")
    if f.max_active < 0:
        raise FaultError(f"{where}: max_active {f.max_active} must be at least 0")
    abort = f.abort.strip().upper()
    if abort and abort not in ABORT_CODES:
        raise FaultError(f"{where}: abort code {f.abort!r} is not a gRPC status code "
                         f"(one of {', '.join(ABORT_CODES)})")
    if f.drop and abort:
        raise FaultError(f"{where}: a fault either drops or aborts a call, not both")
    if f.start is not None and f.stop is not None and f.stop <= f.start:
        raise FaultError(f"{where}: the window ends ({f.stop:g}) before it starts ({f.start:g})")
    if abs(f.clock_drift) >= 1.0:
        raise FaultError(f"{where}: clock drift {f.clock_drift:g} must be between -1 and 1 (a rate error)")
    if f.is_clock and (f.delay_s or f.jitter_s or abort or f.drop):
        raise FaultError(f"{where}: a clock fault cannot also delay, abort or drop calls")
    if not f.is_clock and not (f.delay_s or f.jitter_s or abort or f.drop):
        raise FaultError(f"{where}: nothing to do (give a delay, an abort code, drop, or a clock offset or drift)")
    for name in ("method", "peer"):
        if not getattr(f, name).strip():
            raise FaultError(f"{where}: {name} is empty (use * for any)")
    return replace(f, abort=abort, method=f.method.strip(), peer=f.peer.strip())


# ---- matching and deciding ---------------------------------------------------------------
@dataclass(frozen=True)
class CallInfo:
    """What a fault can match on."""
    side: str
    method: str                     # "Schedd.Negotiate"
    peers: tuple[str, ...] = ()     # the peer's names: role, daemon name, host, address


@dataclass(frozen=True)
class Action:
    """What happens to one call (or stream message): the faults that fired, in plan order."""
    faults: tuple[str, ...]
    delay_s: float = 0.0
    abort: str = ""
    drop: bool = False
    drop_until: float | None = None   # pool time the dropping fault ends, if it has a window


def method_matches(pattern: str, method: str) -> bool:
    """'Negotiate', 'Schedd.*', 'Schedd.Negotiate' or '/htcpool.v1.Schedd/Negotiate' style patterns."""
    if pattern in ("*", ""):
        return True
    short = method.rsplit(".", 1)[-1]
    p = pattern.lstrip("/")
    if "/" in p:   # a full gRPC method name: package.Service/Method
        p = p.rsplit("/", 2)[-2].rsplit(".", 1)[-1] + "." + p.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(x.lower(), p.lower()) for x in (method, short))


def peer_matches(pattern: str, peers: Sequence[str]) -> bool:
    """`pattern` is one glob, or several separated by commas (any may match)."""
    if pattern in ("*", ""):
        return True
    globs = [g.strip().lower() for g in pattern.split(",") if g.strip()]
    return any(fnmatch.fnmatchcase(p.lower(), g) for p in peers if p for g in globs)


def matches(f: Fault, call: CallInfo) -> bool:
    if f.is_clock or f.side != call.side:
        return False
    if call.method.split(".", 1)[0] == EXEMPT_SERVICE:
        return False
    return method_matches(f.method, call.method) and peer_matches(f.peer, call.peers)


def decide(faults: Sequence[Fault], call: CallInfo, now: float, rng: random.Random,
           active: Mapping[str, int] | None = None) -> Action | None:
    """Which faults fire on this call at pool time `now`: None when none does.

    Each matching fault rolls its own percentage (one draw per matching fault, in plan
    order, so a seed replays the same decisions). Delays of all that fire add up; the
    first abort or drop in plan order ends the call. A fault already acting on
    `max_active` calls does not fire.
    """
    active = active or {}
    fired: list[str] = []
    delay = 0.0
    abort = ""
    drop = False
    drop_until: float | None = None
    for f in faults:
        if not f.active_at(now) or not matches(f, call):
            continue
        roll = rng.random() * 100.0
        if roll >= f.percent:
            continue
        if f.max_active and active.get(f.id, 0) >= f.max_active:
            continue
        fired.append(f.id)
        if f.delay_s or f.jitter_s:
            jitter = rng.uniform(-f.jitter_s, f.jitter_s) if f.jitter_s else 0.0
            delay += max(0.0, f.delay_s + jitter)
        if not abort and not drop:
            if f.drop:
                drop, drop_until = True, f.stop
            elif f.abort:
                abort = f.abort
    if not fired:
        return None
    return Action(tuple(fired), delay, abort, drop, drop_until)


@dataclass(frozen=True)
class ClockSkew:
    offset_s: float = 0.0
    drift: float = 0.0


def clock_skew(faults: Iterable[Fault], now: float) -> ClockSkew:
    """The clock faults in force at true pool time `now`, summed."""
    offset = drift = 0.0
    for f in faults:
        if f.is_clock and f.active_at(now):
            offset += f.clock_offset_s
            drift += f.clock_drift
    return ClockSkew(offset, drift)


def next_change(faults: Iterable[Fault], now: float) -> float | None:
    """The next pool time after `now` at which some fault's window opens or closes."""
    times = [t for f in faults for t in (f.start, f.stop) if t is not None and t > now]
    return min(times) if times else None


# ---- the text form: FAULT_PLAN knobs and the command line ---------------------------------
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(ms|s|m|h|d)?\s*$")


def duration(text: str, what: str) -> float:
    """'2', '2s', '500ms', '5m', '1h' -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise FaultError(f"{what} {text!r} is not a duration (a number of seconds, or with ms, s, m, h, d)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


_KEYS = ("id", "side", "method", "peer", "delay", "jitter", "abort", "drop", "percent", "after", "for",
         "max_active", "clock_offset", "clock_drift")


def parse_plan(text: str, now: float, *, id_prefix: str = "f") -> list[Fault]:
    """Faults from text: ';'-separated faults, each of space-separated key=value words.

        method=Negotiate delay=2s jitter=500ms percent=30 for=10m ; method=Submit abort=UNAVAILABLE

    Keys: id, side (server|client), method, peer, delay, jitter, abort (a status code),
    drop (a bare word, or drop=true), percent, after and for (the window, relative to
    `now`), max_active, clock_offset, clock_drift. Raises FaultError naming the fault
    (by its position) and the key.
    """
    out: list[Fault] = []
    for i, chunk in enumerate([c for c in text.split(";") if c.strip()], 1):
        where = f"fault {i} ({chunk.strip()!r})"
        vals: dict[str, str] = {}
        for word in chunk.split():
            key, eq, value = word.partition("=")
            key = key.strip().lower().replace("-", "_")
            if key not in _KEYS:
                raise FaultError(f"{where}: unknown key {key!r} (known: {', '.join(_KEYS)})")
            if not eq:
                if key != "drop":
                    raise FaultError(f"{where}: {key} needs a value ({key}=...)")
                value = "true"
            vals[key] = value
        out.append(_fault_from(vals, now, f"{id_prefix}{i}", where))
    ids = [f.id for f in out]
    dup = sorted({x for x in ids if ids.count(x) > 1})
    if dup:
        raise FaultError(f"fault id {dup[0]!r} is used twice")
    return out


def _fault_from(vals: dict[str, str], now: float, default_id: str, where: str) -> Fault:
    def num(key: str, default: float) -> float:
        if key not in vals:
            return default
        try:
            return float(vals[key])
        except ValueError:
            raise FaultError(f"{where}: {key} {vals[key]!r} is not a number") from None

    def secs(key: str, default: float) -> float:
        return duration(vals[key], f"{where}: {key}") if key in vals else default

    drop_text = vals.get("drop", "false").lower()
    if drop_text not in ("true", "false", "yes", "no", "1", "0"):
        raise FaultError(f"{where}: drop {vals['drop']!r} is not true or false")
    after = secs("after", 0.0)
    length = secs("for", 0.0)
    if after < 0 or length < 0:
        raise FaultError(f"{where}: after and for must not be negative")
    max_active = num("max_active", 0)
    if max_active != int(max_active):
        raise FaultError(f"{where}: max_active {vals['max_active']!r} is not a whole number")
    f = Fault(
        id=vals.get("id", default_id),
        side=vals.get("side", "server").lower(),
        method=vals.get("method", "*"),
        peer=vals.get("peer", "*"),
        delay_s=secs("delay", 0.0),
        jitter_s=secs("jitter", 0.0),
        abort=vals.get("abort", ""),
        drop=drop_text in ("true", "yes", "1"),
        percent=num("percent", 100.0),
        start=now + after if after else None,
        stop=now + after + length if length else None,
        max_active=int(max_active),
        clock_offset_s=secs("clock_offset", 0.0),
        clock_drift=num("clock_drift", 0.0),
    )
    try:
        return validate(f)
    except FaultError as e:
        raise FaultError(f"{where}: {str(e).split(': ', 1)[1]}") from None
