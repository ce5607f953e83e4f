"""How far a daemon's event loop runs behind.

A timer asks to fire every `period_s` of wall time; how late it fires is the time a
ready callback waits for the loop (a long callback, or thousands of ready ones ahead
of it). In pool seconds that lateness is what a lease, an interval or a job's end
waits beyond its due time, so it is reported in both units. `LagWindow` is the pure
part: samples in, figures out.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Callable

PERIOD_S = 0.1      # wall seconds between samples
WINDOW_S = 2.0      # wall seconds of samples that make the "recent" figures


@dataclass(frozen=True)
class LagFigures:
    last_s: float          # wall seconds late, the last sample
    recent_max_s: float    # the most over the window
    sustained_s: float     # the median over the window: late most of the time, not one spike
    max_s: float           # the most since the start
    last_pool_s: float     # the same in pool seconds (at the scale of each sample)
    recent_max_pool_s: float
    sustained_pool_s: float
    max_pool_s: float
    samples: int


class LagWindow:
    """Lateness samples (wall time taken, wall seconds late, pool seconds late) over a window."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._recent: deque[tuple[float, float, float]] = deque()
        self.samples = 0
        self.max_s = 0.0
        self.max_pool_s = 0.0

    def add(self, at_wall: float, late_s: float, scale: float) -> None:
        late_s = max(0.0, late_s)
        late_pool = late_s * scale
        self._recent.append((at_wall, late_s, late_pool))
        while self._recent and self._recent[0][0] < at_wall - self.window_s:
            self._recent.popleft()
        self.samples += 1
        self.max_s = max(self.max_s, late_s)
        self.max_pool_s = max(self.max_pool_s, late_pool)

    def figures(self, now_wall: float | None = None, scale: float = 1.0, period_s: float = PERIOD_S) -> LagFigures:
        """The figures; with `now_wall`, a timer that is overdue now counts as that late."""
        recent = list(self._recent)
        if now_wall is not None and recent:
            # No sample for a while is itself lag (asked from a thread, or by the late timer's
            # loop after a long callback): the timer has not fired since.
            silent = now_wall - recent[-1][0] - period_s
            if silent > 0:
                recent.append((now_wall, silent, silent * scale))
        if not recent:
            return LagFigures(0.0, 0.0, 0.0, self.max_s, 0.0, 0.0, 0.0, self.max_pool_s, self.samples)
        # Sustained: the median sample, so half the window's samples were at least this late.
        # One pause (a collection, a large parse) moves it little; a loop whose every turn is
        # long moves it all the way. Only over a good part of the window, not the first sample.
        spans = recent[-1][0] - recent[0][0] >= self.window_s / 2
        sustained, sustained_pool = (_median([r[1] for r in recent]), _median([r[2] for r in recent])) \
            if spans else (0.0, 0.0)
        return LagFigures(
            last_s=recent[-1][1], recent_max_s=max(r[1] for r in recent), sustained_s=sustained,
            max_s=self.max_s, last_pool_s=recent[-1][2], recent_max_pool_s=max(r[2] for r in recent),
            sustained_pool_s=sustained_pool, max_pool_s=self.max_pool_s, samples=self.samples)


def _median(values: list[float]) -> float:
    """The lower median: a real sample, and 0 lateness wins a tie with a late one."""
    return sorted(values)[(len(values) - 1) // 2]


class LagMonitor:
    """Samples the running loop's lateness into a LagWindow, from start() until stop()."""

    def __init__(self, scale: Callable[[], float], period_s: float = PERIOD_S, window_s: float = WINDOW_S) -> None:
        self.scale = scale
        self.period_s = period_s
        self.window = LagWindow(window_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._schedule()

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + self.period_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.window.add(now, now - self._due, self.scale())
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def figures(self) -> LagFigures:
        now = self._loop.time() if self._loop is not None else None
        return self.window.figures(now, self.scale(), self.period_s)


class RecentMax:
    """The most of each peer's samples over the last `window_s` (pool seconds): a sliding
    window's maximum, kept as a deque of falling values (a sample below a later one can
    never be the most again), so adding and asking cost O(1) on average."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._by_key: dict[str, deque[tuple[float, float]]] = {}

    def add(self, key: str, at: float, value: float) -> None:
        q = self._by_key.setdefault(key, deque())
        while q and q[-1][1] <= value:
            q.pop()
        q.append((at, value))
        self._prune(key, q, at)

    def get(self, key: str, now: float) -> float:
        q = self._by_key.get(key)
        if not q:
            return 0.0
        self._prune(key, q, now)
        return q[0][1] if q else 0.0

    def most(self, now: float) -> float:
        """The most over every peer."""
        return max((self.get(k, now) for k in list(self._by_key)), default=0.0)

    def _prune(self, key: str, q: deque[tuple[float, float]], now: float) -> None:
        while q and q[0][0] < now - self.window_s:
            q.popleft()
        if not q:
            del self._by_key[key]


class RoundLateness:
    """How far a periodic round's work runs past the start of the next round (pure).

    The event loop's lateness misses a daemon that keeps every callback short but has
    more work than wall time: a startd emulating a thousand machines whose ad updates,
    one round per UPDATE_INTERVAL, take longer than the interval. Its timers fire on
    time; its ads reach the collector later and later, until the collector drops live
    ads as stale. A round that ends `late` pool seconds after the next one was due is
    that late, as a timer firing then would be.

    Sustained is the lower median of the last `rounds` rounds, 0 until there are that
    many: one slow round (a paused peer, a burst at start-up) is not lag, two of three
    are. Rounds at another time scale say nothing of this one: a change of scale starts
    the count again (the policy would otherwise slow the pool twice for one overload)."""

    def __init__(self, rounds: int = 3) -> None:
        self._recent: deque[tuple[float, float, float]] = deque(maxlen=rounds)   # (wall s, pool s) late, scale
        self.max_pool_s = 0.0
        self.rounds = 0

    def add(self, late_pool_s: float, scale: float) -> None:
        late_pool_s = max(0.0, late_pool_s)
        if self._recent and self._recent[-1][2] != scale:
            self._recent.clear()
        self._recent.append((late_pool_s / scale if scale > 0 else 0.0, late_pool_s, scale))
        self.max_pool_s = max(self.max_pool_s, late_pool_s)
        self.rounds += 1

    def skip(self) -> None:
        """A round whose time says nothing about this daemon's load (a fault slowed it)."""
        self._recent.clear()

    def recent_max_wall(self) -> float:
        return max((r[0] for r in self._recent), default=0.0)

    def sustained(self) -> tuple[float, float]:
        """(wall s, pool s) late."""
        if len(self._recent) < (self._recent.maxlen or 1):
            return 0.0, 0.0
        return _median([r[0] for r in self._recent]), _median([r[1] for r in self._recent])
