"""Pool time.

Every daemon derives pool time from the same two numbers, so clocks in separate
processes never drift apart: pool = epoch + (wall - epoch) * scale. At the epoch,
pool time equals wall time; afterwards it runs `scale` times faster. Accumulating
sleeps would drift; this does not.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class PoolClock:
    scale: float = 1.0
    epoch: float = 0.0
    wall: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"TIME_SCALE must be positive, got {self.scale}")

    def now(self) -> float:
        return self.epoch + (self.wall() - self.epoch) * self.scale

    def wall_at(self, pool_time: float) -> float:
        """The wall time at which the pool clock reads `pool_time`."""
        return self.epoch + (pool_time - self.epoch) / self.scale

    def wall_delay(self, pool_seconds: float) -> float:
        return max(0.0, pool_seconds / self.scale)

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
