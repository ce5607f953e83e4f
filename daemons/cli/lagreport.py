"""Whether a bench's or experiment's figures were produced under lag.

Every daemon's ad says how late its event loop has run (`HtcpoolLoopLag*`), and the
collector's how often the pool's lag passed HTCPOOL_MAX_LAG (`HtcpoolLagEvents`) and
whether the time scale was lowered. A run is *lagged* when the lag policy had to act
(or would have, under `warn`) between two snapshots: its figures then describe an
overloaded emulator, not the configured pool, and are flagged as such.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from daemons.core import ads

ATTRS = ["MyType", "Name", "HtcpoolLoopLagMax", "HtcpoolLoopLag", "HtcpoolUpdateLagMax", "TimeScale",
         "HtcpoolTimeScaleChanges", "HtcpoolLagEvents", "HtcpoolConfiguredTimeScale", "HtcpoolLagPolicy", "HtcpoolMaxLag"]


@dataclass(frozen=True)
class LagSnapshot:
    worst_pool_s: dict[str, float] = field(default_factory=dict)  # "schedd <name>" -> HtcpoolLoopLagMax
    worst_update_pool_s: dict[str, float] = field(default_factory=dict)   # ... -> HtcpoolUpdateLagMax
    lag_events: int = 0
    time_scale: float | None = None
    configured_time_scale: float | None = None
    scale_changes: int = 0
    policy: str = ""
    max_lag_s: float | None = None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def snapshot(found: list) -> LagSnapshot:
    """From the daemons' ads (any MyType, projected on ATTRS)."""
    worst: dict[str, float] = {}
    updates: dict[str, float] = {}
    collector = None
    for a in found:
        my_type = str(ads.get(a, "MyType", ""))
        v = _num(ads.get(a, "HtcpoolLoopLagMax"))
        if v is None:
            continue
        who = f"{my_type.lower()} {ads.get(a, 'Name', '?')}"
        worst[who] = v
        u = _num(ads.get(a, "HtcpoolUpdateLagMax"))
        if u:
            updates[who] = u
        if my_type == "Collector":
            collector = a
    if collector is None:
        return LagSnapshot(worst, updates)
    return LagSnapshot(worst, updates, int(_num(ads.get(collector, "HtcpoolLagEvents")) or 0),
                       _num(ads.get(collector, "TimeScale")), _num(ads.get(collector, "HtcpoolConfiguredTimeScale")),
                       int(_num(ads.get(collector, "HtcpoolTimeScaleChanges")) or 0),
                       str(ads.get(collector, "HtcpoolLagPolicy", "")), _num(ads.get(collector, "HtcpoolMaxLag")))


async def take(client) -> LagSnapshot:
    return snapshot(await client.ads("Any", "HtcpoolLoopLagMax =!= undefined", projection=ATTRS))


def report(before: LagSnapshot, after: LagSnapshot) -> dict[str, Any]:
    """The run between two snapshots, as JSON-able figures with the `lagged` flag."""
    events = after.lag_events - before.lag_events
    changes = after.scale_changes - before.scale_changes
    return {
        "lagged": events > 0 or changes > 0,
        "lag_events": events,
        "time_scale_changes": changes,
        "time_scale_end": after.time_scale,
        "time_scale_configured": after.configured_time_scale,
        "lag_policy": after.policy,
        "max_lag_pool_s": after.max_lag_s,
        "loop_lag_max_pool_s": {k: round(v, 3) for k, v in sorted(after.worst_pool_s.items())},
        "update_lag_max_pool_s": {k: round(v, 3) for k, v in sorted(after.worst_update_pool_s.items())},
    }


def lines(r: dict[str, Any]) -> list[str]:
    """The report for a bench's table: one verdict line, then each daemon's worst lag."""
    if r["lagged"]:
        head = (f"LAGGED: the pool could not keep up with TIME_SCALE {r['time_scale_configured']:g} "
                f"({r['lag_events']} lag event(s), {r['time_scale_changes']} change(s) of scale, now "
                f"{r['time_scale_end']:g}; HTCPOOL_LAG_POLICY = {r['lag_policy']}): these figures describe an "
                "overloaded emulator")
    else:
        head = (f"lag: within HTCPOOL_MAX_LAG = {r['max_lag_pool_s']:g} pool s throughout"
                if r["max_lag_pool_s"] is not None else "lag: not reported (no collector ad)")
    out = [head]
    end, configured = r.get("time_scale_end"), r.get("time_scale_configured")
    if r["lagged"] and end is not None and configured is not None and end < configured:
        out.append(f"  to measure a pool that keeps up, run it at TIME_SCALE {math.floor(end):d} or less "
                   "(where this one had slowed itself to, and may still have lagged)")
    out.append("  worst event-loop lag since start (pool s): " +
               ", ".join(f"{k} {v:g}" for k, v in r["loop_lag_max_pool_s"].items()))
    if r.get("update_lag_max_pool_s"):
        out.append("  worst ad update round past UPDATE_INTERVAL since start (pool s): " +
                   ", ".join(f"{k} {v:g}" for k, v in r["update_lag_max_pool_s"].items()))
    return out
