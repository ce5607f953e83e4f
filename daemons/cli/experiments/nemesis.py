"""The fault experiment's nemesis schedule: which fault, on which daemon, from when to when. Pure.

Like Jepsen's nemeses, faults are drawn from a seeded generator: `schedule()` spreads
the requested number of faults of the chosen kinds over the campaign, each on a
random daemon, with random starts (so they land anywhere in a negotiation cycle,
not only between cycles), staggered so that at most `max_concurrent` are in force
at once and never two on one daemon, and every one healed a quiet tail before the
campaign's end.

Kinds (what the experiment does at the fault's start / at its stop):
- kill: SIGKILL / start again;        restart: SIGTERM (graceful) / start again;
- pause: SIGSTOP / SIGCONT;
- partition: drop everything between the daemon and one peer (or all peers) / clear;
- reset, loss: refuse connections (TCP reset), or drop a share of the packets, between
  the daemon and one peer (or all) / clear; bandwidth: limit its traffic / clear;
- delay, drop, abort: an RPC fault on one of the daemon's methods (or all) / clear;
- clock: an offset or a drift of the daemon's pool clock / clear.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Mapping, Sequence

KINDS = ("kill", "pause", "restart", "partition", "delay", "drop", "abort", "clock", "reset", "loss", "bandwidth")
PROCESS_KINDS = ("kill", "pause", "restart")
# Kinds that cut the network between a daemon and its peers (real packets in a pool of
# network namespaces; calls in the daemon's own fault layers on loopback).
NETWORK_KINDS = ("partition", "reset", "loss", "bandwidth")
BANDWIDTHS = ("64kbit", "256kbit", "1mbit")

# The methods a daemon serves that faults may pick (besides every method at once). A glob
# covers a claim call single and batched (RequestClaim and RequestClaims).
METHODS = {
    "collector": ("UpdateAds", "InvalidateAds", "QueryAds"),
    "negotiator": ("Reschedule",),
    "schedd": ("Submit", "Query", "Act", "Negotiate", "ClaimEvents"),
    "startd": ("RequestClaim*", "ActivateClaim*", "ReleaseClaim", "KeepAlive"),
}
ABORT_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED", "CANCELLED")


@dataclass(frozen=True)
class FaultEvent:
    index: int
    kind: str
    target: str                   # a daemon key: collector, negotiator, schedd, startd2, ...
    start: float                  # pool seconds from the campaign's start
    stop: float
    params: tuple[tuple[str, object], ...] = field(default=())

    def param(self, name: str, default: object = None) -> object:
        return dict(self.params).get(name, default)

    def describe(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.params)
        return f"#{self.index} {self.kind} {self.target} [{self.start:.0f}, {self.stop:.0f}) {extra}".rstrip()


@dataclass(frozen=True)
class Settings:
    faults: int
    kinds: tuple[str, ...]
    targets: Mapping[str, str]      # daemon key -> role
    span_s: float                   # the campaign, pool seconds
    warmup_s: float = 0.0           # no fault before this
    tail_s: float = 0.0             # every fault healed this long before the end
    min_length_s: float = 30.0
    max_length_s: float = 300.0
    max_concurrent: int = 2
    lease_s: float = 300.0          # the pool's claim lease: sizes delays and clock jumps
    # Roles a kind may not target, and why (see the experiment's documentation).
    exclude: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def check(s: Settings) -> None:
    unknown = [k for k in s.kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind {unknown[0]!r} (known: {', '.join(KINDS)})")
    if not s.kinds:
        raise ValueError("no fault kinds to choose from")
    if s.faults < 0:
        raise ValueError(f"the number of faults must not be negative, got {s.faults}")
    if s.max_concurrent < 1:
        raise ValueError("at least one fault must be allowed at a time")
    if not 0 < s.min_length_s <= s.max_length_s:
        raise ValueError(f"fault lengths {s.min_length_s:g}..{s.max_length_s:g} s are not a range")
    window = s.span_s - s.warmup_s - s.tail_s
    if s.faults and window < s.max_length_s:
        raise ValueError(f"the campaign leaves {window:.0f} pool s for faults, less than one fault's "
                         f"longest length ({s.max_length_s:.0f} s)")
    for kind in s.kinds:
        if not _targets_for(kind, s):
            raise ValueError(f"no daemon a {kind} fault may target")


def _targets_for(kind: str, s: Settings) -> list[str]:
    excluded = s.exclude.get(kind, ())
    return sorted(k for k, role in s.targets.items() if role not in excluded)


def schedule(s: Settings, seed: int) -> list[FaultEvent]:
    """`s.faults` faults, kinds in equal shares (the remainder drawn), sorted by start.

    Every fault starts after the warm-up and stops at least `tail_s` before the end.
    When the campaign is too crowded for the concurrency limit, a fault is shortened
    to its minimum length or, failing that, moved to the first place it fits.
    """
    check(s)
    rng = random.Random(seed)
    kinds = [s.kinds[i % len(s.kinds)] for i in range(s.faults)]
    rng.shuffle(kinds)
    lo, hi = s.warmup_s, s.span_s - s.tail_s
    starts = sorted(rng.uniform(lo, hi - s.min_length_s) for _ in kinds)
    placed: list[FaultEvent] = []
    for i, (kind, start) in enumerate(zip(kinds, starts), 1):
        length = rng.uniform(s.min_length_s, s.max_length_s)
        target = rng.choice(_targets_for(kind, s))
        params = _params(kind, s.targets[target], target, s, rng)
        slot = _fit(placed, target, start, length, s, lo, hi)
        if slot is None:
            continue
        start, stop = slot
        placed.append(FaultEvent(i, kind, target, round(start, 3), round(stop, 3), params))
    placed.sort(key=lambda e: (e.start, e.index))
    return [FaultEvent(n, e.kind, e.target, e.start, e.stop, e.params) for n, e in enumerate(placed, 1)]


def _fit(placed: Sequence[FaultEvent], target: str, start: float, length: float, s: Settings,
         lo: float, hi: float) -> tuple[float, float] | None:
    """The first [start, stop) at or after `start` (wrapping to the warm-up's end once)
    where fewer than max_concurrent faults are in force and none on `target`."""
    def free(a: float, b: float) -> bool:
        overlapping = [e for e in placed if e.start < b and a < e.stop]
        return len(overlapping) < s.max_concurrent and all(e.target != target for e in overlapping)

    for length_try in (length, s.min_length_s):
        candidates = [start] + sorted({e.stop for e in placed if e.stop > start}) \
            + [lo] + sorted({e.stop for e in placed if e.stop <= start})
        for a in candidates:
            b = a + length_try
            if a >= lo and b <= hi and free(a, b):
                return a, b
    return None


def _params(kind: str, role: str, target: str, s: Settings, rng: random.Random) -> tuple[tuple[str, object], ...]:
    lease = s.lease_s
    if kind in ("delay", "drop", "abort"):
        methods = METHODS.get(role, ())
        method = rng.choice(methods) if methods and rng.random() < 0.7 else "*"
        side = "server" if rng.random() < 0.75 else "client"
        if side == "client":
            method = "*"
        percent = round(rng.uniform(20.0, 100.0), 1)
        out: list[tuple[str, object]] = [("side", side), ("method", method), ("percent", percent)]
        if kind == "delay":
            out += [("delay_s", round(rng.uniform(lease / 20, lease / 2), 1)),
                    ("jitter_s", round(rng.uniform(0.0, lease / 10), 1))]
        elif kind == "abort":
            out.append(("code", rng.choice(ABORT_CODES)))
        return tuple(out)
    if kind in ("partition", "reset", "loss"):
        others = sorted(k for k in s.targets if k != target)
        peer = rng.choice(others) if others and rng.random() < 0.6 else "*"
        if kind == "loss":
            return (("peer", peer), ("percent", round(rng.uniform(10.0, 60.0), 1)))
        return (("peer", peer),)
    if kind == "bandwidth":
        return (("rate", rng.choice(BANDWIDTHS)),)
    if kind == "clock":
        if rng.random() < 0.6:
            sign = rng.choice((-1.0, 1.0))
            return (("offset_s", round(sign * rng.uniform(lease / 2, lease * 3), 1)),)
        sign = rng.choice((-1.0, 1.0))
        return (("drift", round(sign * rng.uniform(0.05, 0.5), 3)),)
    return ()


def in_force(events: Sequence[FaultEvent], t: float) -> list[FaultEvent]:
    return [e for e in events if e.start <= t < e.stop]
