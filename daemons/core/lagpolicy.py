"""What the pool does when a daemon cannot keep up with TIME_SCALE (pure).

Each daemon publishes how late its event loop runs (`HtcpoolLoopLag*` in its ad) and
how far its ad updates run past UPDATE_INTERVAL (`HtcpoolUpdateLag*`: a daemon with
more work than wall time keeps its loop on time but falls behind on its rounds); the
collector, which hears from every daemon, decides for the pool:

- `slow` (the default): lower the time scale so that the worst lag is back under half
  of HTCPOOL_MAX_LAG pool seconds, at most 10x at a time and never below
  HTCPOOL_MIN_TIME_SCALE; pool time stays continuous, every daemon switches at one
  announced wall instant (the collector's ad carries it), and results stay valid
  because everything runs on pool time;
- `stop`: end the run, saying which daemon lagged how far;
- `warn`: say so and carry on (results are flagged).

Whatever the policy, leases are stretched by the pool's lag (Daemon.lag_allowance_s), so
that no claim is lost because its schedd or startd ran behind.

A daemon's lag counts when it is *sustained*: the median of its window's samples, so a
single pause does not slow a whole pool. After a change the policy waits HOLDOFF_S of
wall time for lag figures measured at the new scale.
"""
from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("slow", "stop", "warn")
HOLDOFF_S = 5.0          # wall seconds after a change before the next decision
NOTICE_S = 2.0           # wall seconds between deciding a new scale and switching to it, at least
MAX_NOTICE_S = 30.0      # ... and at most
MAX_STEP = 10.0          # the most one change divides the scale by


@dataclass(frozen=True)
class LagPolicy:
    policy: str = "slow"              # HTCPOOL_LAG_POLICY
    max_lag_s: float = 60.0           # HTCPOOL_MAX_LAG, pool seconds
    min_time_scale: float = 1.0       # HTCPOOL_MIN_TIME_SCALE
    grace_s: float = 10.0             # HTCPOOL_LAG_GRACE: wall seconds after the collector starts
                                      # before the policy acts (a pool starting up is busy in ways
                                      # that say nothing about its steady lag)


@dataclass(frozen=True)
class DaemonLag:
    name: str                  # "schedd <name>": what a person reads
    sustained_wall_s: float    # HtcpoolLoopLagSustainedWall from its ad (or HtcpoolUpdateLagWall)
    what: str = ""             # "" for its event loop; "ad updates" for its update rounds
    interval_s: float = 0.0    # for rounds: their interval (pool s, UpdateInterval from its ad)


@dataclass(frozen=True)
class Slow:
    scale: float
    reason: str


@dataclass(frozen=True)
class Stop:
    reason: str


@dataclass(frozen=True)
class Warn:
    reason: str


@dataclass(frozen=True)
class Floor:
    """Slowing is the policy but the scale is already at its floor."""
    reason: str


Action = Slow | Stop | Warn | Floor | None


def worst(lags: list[DaemonLag]) -> DaemonLag | None:
    return max(lags, key=lambda d: (d.sustained_wall_s, d.name, d.what), default=None)


def decide(policy: LagPolicy, lags: list[DaemonLag], scale: float, now_wall: float,
           last_change_wall: float | None) -> Action:
    """The pool's answer to its daemons' lag at time scale `scale` (the latest announced).
    Slowing only ever lowers the scale."""
    w = worst(lags)
    if w is None:
        return None
    lag_pool = w.sustained_wall_s * scale
    if lag_pool <= policy.max_lag_s:
        return None
    late = f"'s {w.what} run" if w.what else " runs"
    what = (f"the {w.name}{late} {lag_pool:.0f} pool s ({w.sustained_wall_s:.2f} s) behind at TIME_SCALE {scale:g}, "
            f"more than HTCPOOL_MAX_LAG = {policy.max_lag_s:g}")
    if policy.policy == "warn":
        return Warn(what)
    if policy.policy == "stop":
        return Stop(what)
    # `last_change_wall` is when the last change took (or takes) effect: none while one is
    # announced, and lag figures need a while at the new scale.
    if last_change_wall is not None and now_wall - last_change_wall < HOLDOFF_S:
        return None
    if scale <= policy.min_time_scale:
        return Floor(f"{what}, and the scale is at HTCPOOL_MIN_TIME_SCALE = {policy.min_time_scale:g}")
    # Over the threshold, this is at most half the scale already.
    if w.interval_s > 0:
        # A round that takes D s of wall time ends D * s - interval pool s past the next one's
        # start at scale s: a slower clock gives it more wall time as well as fewer pool
        # seconds per wall second (assuming the work per round stays the same).
        duration = w.sustained_wall_s + w.interval_s / scale
        target = (policy.max_lag_s / 2.0 + w.interval_s) / duration
    else:
        target = policy.max_lag_s / 2.0 / w.sustained_wall_s
    new = max(policy.min_time_scale, scale / MAX_STEP, target)
    if new >= scale:
        return Floor(f"{what}, and the scale is at HTCPOOL_MIN_TIME_SCALE = {policy.min_time_scale:g}")
    return Slow(new, what)


def notice_s(worst_recent_lag_s: float) -> float:
    """How far ahead to announce a change: a daemon whose loop turns take L seconds needs a
    few turns to ask for the clock and hear the answer, and one that hears too late holds
    its clock still until the new segment catches up with it."""
    return min(MAX_NOTICE_S, max(NOTICE_S, 4.0 * worst_recent_lag_s))
