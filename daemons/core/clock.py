"""Pool time.

Every daemon derives pool time from the same two numbers, so clocks in separate
processes never drift apart: pool = epoch + (wall - epoch) * scale. At the epoch,
pool time equals wall time; afterwards it runs `scale` times faster. Accumulating
sleeps would drift; this does not.

A clock fault (faults.py) skews one daemon's clock on purpose: each skew adds an
offset and a drift (a rate error) counted from the moment the skew was set, so a
daemon can be made to see leases lapse early or late. `true_now()` ignores skews.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True)
class Skew:
    offset_s: float          # pool seconds added
    drift: float             # rate error: 0.01 = 1% fast
    since_wall: float        # when the drift started counting


@dataclass
class PoolClock:
    scale: float = 1.0
    epoch: float = 0.0
    wall: Callable[[], float] = time.time
    skews: tuple[Skew, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"TIME_SCALE must be positive, got {self.scale}")

    def true_now(self) -> float:
        """The pool's time, whatever skews this clock."""
        return self.epoch + (self.wall() - self.epoch) * self.scale

    def now(self) -> float:
        return self.at_wall(self.wall())

    def at_wall(self, wall: float) -> float:
        """What this clock reads at wall time `wall` (skews included)."""
        t = self.epoch + (wall - self.epoch) * self.scale
        for s in self.skews:
            t += s.offset_s + s.drift * (wall - s.since_wall) * self.scale
        return t

    @property
    def rate(self) -> float:
        """Pool seconds per wall second, drift included."""
        return self.scale * (1.0 + sum(s.drift for s in self.skews))

    def set_skews(self, skews: Sequence[tuple[float, float, float | None]]) -> None:
        """Replace the skews: (offset_s, drift, since_wall or None for now)."""
        w = self.wall()
        self.skews = tuple(Skew(o, d, w if since is None else since) for o, d, since in skews if o or d)

    def skew_now(self) -> float:
        """How far this clock is from the pool's true time, in pool seconds."""
        w = self.wall()
        return self.at_wall(w) - (self.epoch + (w - self.epoch) * self.scale)

    def wall_at(self, pool_time: float) -> float:
        """The wall time at which the pool clock reads `pool_time`."""
        if not self.skews:
            return self.epoch + (pool_time - self.epoch) / self.scale
        s = self.scale
        offset = sum(k.offset_s for k in self.skews)
        drift_terms = sum(k.drift * k.since_wall for k in self.skews)
        return (pool_time - self.epoch + s * self.epoch - offset + s * drift_terms) / self.rate

    def wall_delay(self, pool_seconds: float) -> float:
        return max(0.0, pool_seconds / self.rate)

    async def sleep(self, pool_seconds: float) -> None:
        await asyncio.sleep(self.wall_delay(pool_seconds))

    async def sleep_until(self, pool_time: float) -> None:
        await asyncio.sleep(max(0.0, self.wall_at(pool_time) - self.wall()))

    def call_at(self, pool_time: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        """Schedule `callback` on the running loop when the pool clock reaches `pool_time`."""
        loop = asyncio.get_running_loop()
        delay = max(0.0, self.wall_at(pool_time) - self.wall())
        return loop.call_later(delay, callback)


class ManualClock(PoolClock):
    """A clock that moves only when told to: for unit tests of pure modules."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._t = start
        super().__init__(scale=1.0, epoch=0.0, wall=lambda: self._t)

    def advance(self, seconds: float) -> None:
        self._t += seconds

    def set(self, t: float) -> None:
        self._t = t
