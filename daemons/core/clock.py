"""Pool time.

Every daemon derives pool time from the same numbers, so clocks in separate processes
never drift apart: pool = anchor_pool + (wall - anchor_wall) * scale. At first the
anchor is the epoch (pool time equals wall time there); afterwards the pool runs
`scale` times faster. Accumulating sleeps would drift; this does not.

The scale can change while the pool runs (the lag policy slows a pool that cannot keep
up): a change is a new anchor at a wall time announced in advance (`retime`), so that
every daemon that hears of it in time switches at the same instant and their clocks
still agree. A daemon that hears too late would see its clock step back; pool time
within one process never goes backwards, it holds still until the clock catches up.
Waits ask the clock again when they wake: a wait that was converted to wall time at
the old scale ends when pool time says so, not when the old scale said it would.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Segment:
    """From `wall` on, pool time runs `scale` times wall time, reading `pool` at `wall`."""
    wall: float
    pool: float
    scale: float

    def pool_at(self, wall: float) -> float:
        return self.pool + (wall - self.wall) * self.scale

    def wall_at(self, pool: float) -> float:
        return self.wall + (pool - self.pool) / self.scale


@dataclass
class PoolClock:
    scale: float = 1.0
    epoch: float = 0.0
    wall: Callable[[], float] = time.time
    # The segment in force (None: anchored at the epoch with `scale`) and one announced.
    segment: Segment | None = None
    pending: Segment | None = None
    changes: int = 0                       # scale changes applied so far
    _last: float = field(default=float("-inf"), repr=False)

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"TIME_SCALE must be positive, got {self.scale}")

    # ---- the segments -------------------------------------------------------------
    def current(self, wall: float | None = None) -> Segment:
        """The segment in force at `wall` (now by default), applying an announced one that is due."""
        w = self.wall() if wall is None else wall
        if self.pending is not None and w >= self.pending.wall:
            self.segment, self.pending = self.pending, None
            self.scale = self.segment.scale
            self.changes += 1
        if self.segment is None:
            return Segment(self.epoch, self.epoch, self.scale)
        return self.segment

    def retime(self, at_wall: float, scale: float) -> Segment:
        """From wall time `at_wall` on, run at `scale`; pool time is continuous at the switch."""
        if scale <= 0:
            raise ValueError(f"a time scale must be positive, got {scale}")
        base = self.current()
        if self.pending is not None:
            # One announced change at a time: the policy waits for it to take effect.
            raise ValueError(f"a change to scale {self.pending.scale:g} is already announced")
        seg = Segment(at_wall, base.pool_at(at_wall), scale)
        self.follow(seg)
        return seg

    def follow(self, seg: Segment) -> None:
        """Adopt a segment decided elsewhere (the collector's), now or when it is due."""
        if seg == self.segment or seg == self.pending:
            return
        self.pending = seg
        self.current()

    def latest(self) -> Segment:
        """The segment announced last: what peers should follow."""
        return self.pending if self.pending is not None else self.current()

    # ---- reading and waiting --------------------------------------------------------
    def now(self) -> float:
        w = self.wall()
        t = self.current(w).pool_at(w)
        if self.segment is not None and t < self._last:
            return self._last
        self._last = t
        return t

    def pool_at_wall(self, wall: float) -> float:
        """Pool time at a wall instant (a log record's): the segment in force then."""
        return self.current().pool_at(wall)

    def wall_at(self, pool_time: float) -> float:
        """The wall time at which the pool clock reads `pool_time` (as announced now)."""
        seg = self.current()
        if self.pending is not None:
            switch_pool = seg.pool_at(self.pending.wall)
            if pool_time >= switch_pool:
                return self.pending.wall_at(pool_time)
        return seg.wall_at(pool_time)

    def wall_delay(self, pool_seconds: float) -> float:
        return max(0.0, pool_seconds / self.scale)

    async def sleep(self, pool_seconds: float) -> None:
        await self.sleep_until(self.now() + max(0.0, pool_seconds))

    async def sleep_until(self, pool_time: float) -> None:
        while True:
            delay = self.wall_at(pool_time) - self.wall()
            if delay <= 0 or self.now() >= pool_time:
                return
            await asyncio.sleep(delay)

    def call_at(self, pool_time: float, callback: Callable[[], object]) -> "PoolTimer":
        """Schedule `callback` on the running loop when the pool clock reaches `pool_time`."""
        return PoolTimer(self, pool_time, callback)


class PoolTimer:
    """A loop timer at a pool time: re-armed if it wakes before the pool clock gets there
    (the scale fell since it was set); `cancel()` as an asyncio.TimerHandle's."""

    def __init__(self, clock: PoolClock, pool_time: float, callback: Callable[[], object]) -> None:
        self.clock, self.pool_time, self.callback = clock, pool_time, callback
        self._handle: asyncio.TimerHandle | None = None
        self._cancelled = False
        self._arm()

    def _arm(self) -> None:
        delay = max(0.0, self.clock.wall_at(self.pool_time) - self.clock.wall())
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        if self._cancelled:
            return
        if self.clock.now() < self.pool_time and self.clock.wall_at(self.pool_time) > self.clock.wall():
            self._arm()
            return
        self.callback()

    def cancel(self) -> None:
        self._cancelled = True
        if self._handle is not None:
            self._handle.cancel()

    def cancelled(self) -> bool:
        return self._cancelled


class ManualClock(PoolClock):
    """A clock that moves only when told to: for unit tests of pure modules."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._t = start
        super().__init__(scale=1.0, epoch=0.0, wall=lambda: self._t)

    def advance(self, seconds: float) -> None:
        self._t += seconds

    def set(self, t: float) -> None:
        self._t = t
