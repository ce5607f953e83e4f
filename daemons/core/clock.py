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

A clock fault (faults.py) skews one daemon's clock on purpose: each skew adds an
offset and a drift (a rate error) counted from the moment the skew was set, so a
daemon can be made to see leases lapse early or late. `true_now()` ignores skews.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import time
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence


@dataclass(frozen=True)
class Skew:
    offset_s: float          # pool seconds added
    drift: float             # rate error: 0.01 = 1% fast
    since_wall: float        # when the drift started counting


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


# Wall times closer than this are one segment's, printed and read back (is_newer).
SAME_SEGMENT_S = 0.01

# The collector's ad carries the segment every daemon (and every client that keeps pool
# time, such as an experiment's sampler) follows.
CLOCK_SEGMENT_ATTRS = ("HtcpoolClockWall", "HtcpoolClockPool", "HtcpoolClockScale")


def segment_from(get: Callable[[str], object]) -> Segment | None:
    """The clock segment a collector ad announces (`get` looks up an attribute), or None."""
    wall, pool, scale = (get(a) for a in CLOCK_SEGMENT_ATTRS)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (wall, pool, scale)) and scale > 0:
        return Segment(float(wall), float(pool), float(scale))
    return None


@dataclass
class PoolClock:
    scale: float = 1.0
    epoch: float = 0.0
    wall: Callable[[], float] = time.time
    # The segment in force (None: anchored at the epoch with `scale`) and one announced.
    segment: Segment | None = None
    pending: Segment | None = None
    changes: int = 0                       # scale changes applied so far
    skews: tuple[Skew, ...] = field(default=())
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

    def is_newer(self, seg: Segment) -> bool:
        """Whether `seg` was decided after the one this clock follows: the lag policy's changes
        come one after another, each switching at a later wall time. An older one (a collector
        restarted without the pool's changes announces the epoch's) must not be followed.
        Changes are seconds apart; a segment read back from an ad has lost digits (a ClassAd
        prints 15 significant ones, a millisecond of a wall time), so the same segment must
        not pass for a newer one."""
        return seg.wall > self.latest().wall + SAME_SEGMENT_S

    def adopt(self, seg: Segment) -> None:
        """Take the pool's segment as this clock's at start-up. A daemon (re)started after the
        pool slowed counted from the epoch at the configured scale, far ahead of the pool;
        that reading was never the pool's time, so this clock does not hold still until the
        pool catches up with it (for three times as long as the pool has run slowed) but
        moves back to the pool's time at once."""
        self.segment = self.pending = None
        self._last = float("-inf")
        self.follow(seg)

    # ---- reading and waiting --------------------------------------------------------
    def _base(self, wall: float) -> float:
        """The pool's true time at `wall` (no skews); never back within this process."""
        t = self.current(wall).pool_at(wall)
        if self.segment is not None and t < self._last:
            return self._last
        self._last = max(self._last, t)
        return t

    def _skewed(self, wall: float, base: float) -> float:
        for k in self.skews:
            base += k.offset_s + k.drift * (wall - k.since_wall) * self.scale
        return base

    def true_now(self) -> float:
        """The pool's time, whatever skews this clock."""
        return self._base(self.wall())

    def now(self) -> float:
        w = self.wall()
        return self._skewed(w, self._base(w))

    def at_wall(self, wall: float) -> float:
        """What this clock reads at wall time `wall` (skews included)."""
        return self._skewed(wall, self.current().pool_at(wall))

    def pool_at_wall(self, wall: float) -> float:
        """Pool time at a wall instant (a log record's): the segment in force then."""
        return self.current().pool_at(wall)

    @property
    def rate(self) -> float:
        """Pool seconds per wall second, drift included."""
        return self.scale * (1.0 + sum(k.drift for k in self.skews))

    def set_skews(self, skews: Sequence[tuple[float, float, float | None]]) -> None:
        """Replace the skews: (offset_s, drift, since_wall or None for now)."""
        w = self.wall()
        self.skews = tuple(Skew(o, d, w if since is None else since) for o, d, since in skews if o or d)

    def skew_now(self) -> float:
        """How far this clock is from the pool's true time, in pool seconds."""
        w = self.wall()
        base = self._base(w)
        return self._skewed(w, base) - base

    def _wall_in(self, seg: Segment, pool_time: float) -> float:
        # Solve pool_time = seg.pool + (w - seg.wall) s + sum(o + d (w - since) s) for w.
        s = seg.scale
        offset = sum(k.offset_s for k in self.skews)
        drift_terms = sum(k.drift * k.since_wall for k in self.skews)
        rate = s * (1.0 + sum(k.drift for k in self.skews))
        return (pool_time - seg.pool + seg.wall * s - offset + s * drift_terms) / rate

    def wall_at(self, pool_time: float) -> float:
        """The wall time at which this clock reads `pool_time` (as announced now)."""
        seg = self.current()
        if self.pending is not None and pool_time >= self._skewed(self.pending.wall, seg.pool_at(self.pending.wall)):
            return self._wall_in(self.pending, pool_time)
        return self._wall_in(seg, pool_time)

    def wall_delay(self, pool_seconds: float) -> float:
        return max(0.0, pool_seconds / self.rate)

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

    # A startd holds one per running job: tens of thousands.
    __slots__ = ("clock", "pool_time", "callback", "_handle", "_cancelled")

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


class _TupleHeap:
    """(time, key) pairs in a heapq list: any comparable keys."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[tuple[float, Any]] = []

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, Any]]:
        return iter(self._items)

    def push(self, t: float, key: Any) -> None:
        heapq.heappush(self._items, (t, key))

    def peek(self) -> tuple[float, Any]:
        return self._items[0]

    def pop(self) -> tuple[float, Any]:
        return heapq.heappop(self._items)

    def keep(self, wanted: Callable[[float, Any], bool]) -> None:
        self._items = [e for e in self._items if wanted(*e)]
        heapq.heapify(self._items)

    def clear(self) -> None:
        self._items.clear()


class _PairHeap:
    """(time, key) pairs, keys ints of 64 bits, in a binary heap kept in two arrays: 16
    bytes a pair, where a list of tuples takes 72 (a busy startd holds one per running
    job: 2.6 MB at 46,000). Sifting is Python's, a few microseconds a push or pop."""

    __slots__ = ("_t", "_k")

    def __init__(self) -> None:
        self._t = array("d")
        self._k = array("q")

    def __len__(self) -> int:
        return len(self._t)

    def __iter__(self) -> Iterator[tuple[float, int]]:
        return zip(self._t, self._k)

    def push(self, t: float, key: int) -> None:
        ts, ks = self._t, self._k
        ts.append(t)
        ks.append(key)
        i = len(ts) - 1
        while i:
            p = (i - 1) >> 1
            pt = ts[p]
            if pt < t or (pt == t and ks[p] <= key):
                break
            ts[i], ks[i] = pt, ks[p]
            i = p
        ts[i], ks[i] = t, key

    def peek(self) -> tuple[float, int]:
        return self._t[0], self._k[0]

    def pop(self) -> tuple[float, int]:
        ts, ks = self._t, self._k
        top = ts[0], ks[0]
        t, key = ts.pop(), ks.pop()
        if ts:
            ts[0], ks[0] = t, key
            self._sift_down(0)
        return top

    def _sift_down(self, i: int) -> None:
        ts, ks = self._t, self._k
        n = len(ts)
        t, key = ts[i], ks[i]
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ts[c + 1] < ts[c] or (ts[c + 1] == ts[c] and ks[c + 1] < ks[c])):
                c += 1
            ct = ts[c]
            if t < ct or (t == ct and key <= ks[c]):
                break
            ts[i], ks[i] = ct, ks[c]
            i = c
        ts[i], ks[i] = t, key

    def keep(self, wanted: Callable[[float, Any], bool]) -> None:
        """Only the pairs `wanted` says, in place (no copy of the heap: a sweep must not be
        the peak of the process's memory), then made a heap again."""
        ts, ks = self._t, self._k
        j = 0
        for i in range(len(ts)):
            t, k = ts[i], ks[i]
            if wanted(t, k):
                ts[j], ks[j] = t, k
                j += 1
        del ts[j:], ks[j:]
        for i in reversed(range(j // 2)):
            self._sift_down(i)

    def clear(self) -> None:
        del self._t[:], self._k[:]


class TimerQueue:
    """Many keyed callbacks at pool times behind one PoolTimer, for the earliest.

    A loop timer, its handle and its callback cost about 700 bytes; a startd with a timer
    per running job held that for every busy slot. Here an entry is a (time, key) pair in
    a heap, and an entry that `set` replaced or `cancel` forgot is skipped when it comes
    up. How a current entry is told from such a stale one: by default a dict from each
    key to its time; with `current(key, time)` the owner says, from what it keeps anyway
    (the startd: does that claim's job still end then?), the queue keeps no dict (about 56
    bytes a key at 50,000 running jobs), keys must be ints of 64 bits, and the pairs are
    kept in arrays (_PairHeap). Keys must be comparable (ints, strings): due entries run
    in time order, then in key order, an entry set twice for the same time once. One that
    raises is logged and the rest still run, as separate loop callbacks would."""

    __slots__ = ("clock", "callback", "log", "current", "_heap", "_due", "_stale", "_timer")

    def __init__(self, clock: PoolClock, callback: Callable[[Any], object],
                 log: "logging.Logger | None" = None,
                 current: "Callable[[Any, float], bool] | None" = None) -> None:
        self.clock, self.callback = clock, callback
        self.log = log or logging.getLogger("htcpool.clock")
        self.current = current
        self._heap: _TupleHeap | _PairHeap = _TupleHeap() if current is None else _PairHeap()
        # key -> its time (no `current`): heap entries of another time are stale
        self._due: dict[Any, float] | None = {} if current is None else None
        self._stale = 0     # (with `current`) entries cancelled since the last sweep
        self._timer: PoolTimer | None = None

    def _is_current(self, t: float, key: Any) -> bool:
        due = self._due
        return due.get(key) == t if due is not None else bool(self.current(key, t))   # type: ignore[misc]

    def __len__(self) -> int:
        """How many keys wait (with `current`, a walk of the heap)."""
        if self._due is not None:
            return len(self._due)
        return len({k for t, k in self._heap if self._is_current(t, k)})

    def __contains__(self, key: object) -> bool:
        if self._due is not None:
            return key in self._due
        return any(k == key and self._is_current(t, k) for t, k in self._heap)

    def set(self, key: Any, pool_time: float) -> None:
        """`key` runs at `pool_time` (with `current`, once current(key, pool_time) holds)."""
        if self._due is not None:
            self._due[key] = pool_time
        self._heap.push(pool_time, key)
        if self._timer is None or pool_time < self._timer.pool_time:
            self._rearm()

    def cancel(self, key: Any) -> bool:
        """Forget `key`; True if it was waiting. With `current` the owner has already made
        the entry stale (it is skipped when it comes up), and says so here only so that the
        heap is swept once it is mostly stale entries: False."""
        if self._due is None:
            self._stale += 1
            if self._stale > len(self._heap) // 2 + 64:
                self._sweep()
            return False
        gone = self._due.pop(key, None) is not None
        if len(self._heap) > 2 * len(self._due) + 64:
            self._sweep()
        return gone

    def _sweep(self) -> None:
        """Mostly stale entries: keep the heap the size of what is waiting."""
        self._heap.keep(self._is_current)
        self._stale = 0

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()
        if self._due is not None:
            self._due.clear()

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        heap = self._heap
        while heap and not self._is_current(*heap.peek()):
            heap.pop()    # cancelled or set again
        if heap:
            self._timer = self.clock.call_at(heap.peek()[0], self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.clock.now()
        heap, due = self._heap, self._due
        last = None
        while heap and heap.peek()[0] <= now:
            entry = heap.pop()
            t, key = entry
            if entry == last or not self._is_current(t, key):
                continue    # stale, or the same entry twice (equal entries pop one after another)
            last = entry
            if due is not None:
                del due[key]
            try:
                self.callback(key)
            except Exception:
                self.log.exception("timer %s failed", key)
        if self._timer is None:
            self._rearm()


class ManualClock(PoolClock):
    """A clock that moves only when told to: for unit tests of pure modules."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._t = start
        super().__init__(scale=1.0, epoch=0.0, wall=lambda: self._t)

    def advance(self, seconds: float) -> None:
        self._t += seconds

    def set(self, t: float) -> None:
        self._t = t
