"""`htcpool bench scale`: the table, the CSV files, the plot and the JSON line."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from daemons.cli import scale_criteria as sc
from daemons.cli.experiments.common import json_line, pyplot, write_csv

ROLES = ("collector", "negotiator", "schedd", "startd")
AIM = (10_000, 1000.0)     # the aim: at least 1,000x real time at 10k slots


def role_of(key: str) -> str:
    """A daemon key ("startd2") to its role; the startds of a pool are added up."""
    return "startd" if key.startswith("startd") else key


def cost_by_role(row: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, v in (row.get("cpu_s_per_pool_hour") or {}).items():
        out[role_of(key)] = round(out.get(role_of(key), 0.0) + v, 2)
    return out


def summarize(rows: list[dict[str, Any]], sizes: Sequence[int], scales: Sequence[float], plan) -> dict[str, Any]:
    per_size = []
    for slots in sizes:
        mine = [r for r in rows if r["requested_slots"] == slots]
        best = sc.highest_faithful([(r["time_scale"], r["faithful"]) for r in mine])
        # Cost from the fastest faithful step, else the first step that measured any.
        at = next((r for r in mine if r["time_scale"] == best and r["faithful"]), None) if best else None
        at = at or next((r for r in mine if r.get("cpu_s_per_pool_hour")), None)
        cost = cost_by_role(at) if at else {}
        per_size.append({"slots": mine[0]["slots"] if mine else slots, "highest_faithful_scale": best,
                         "steps": len(mine), "capped": bool(mine) and all(r["faithful"] for r in mine),
                         "cost_scale": at["time_scale"] if at else None, "cpu_s_per_pool_hour": cost,
                         "cpu_s_per_pool_hour_total": round(sum(cost.values()), 2) if cost else None})
    aim = next((p for p in per_size if p["slots"] >= AIM[0]), None)
    return {"sizes": per_size, "scales": list(scales), "interval_s": plan.interval_s,
            "distribution": plan.dist.kind, "mean_s": plan.dist.mean_s, "warmup_s": plan.warmup_s,
            "window_s": plan.window_s, "quantile": plan.crit.quantile,
            "aim_10k_met": (aim["highest_faithful_scale"] or 0) >= AIM[1] if aim else None}


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.2f}%"
    return f"{v:g}" if isinstance(v, float) else str(v)


def table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    lines = [f"faithfulness per step (window of {summary['window_s']:g} pool s after {summary['warmup_s']:g}; "
             f"{summary['distribution']} jobs of mean {summary['mean_s']:g} s; NEGOTIATOR_INTERVAL "
             f"{summary['interval_s']:g}; criteria hold for {summary['quantile']:g} of the observations):",
             f"  {'slots':>6} {'scale':>7} {'cycle gap err':>13} {'run time err':>12} {'late activ.':>12} "
             f"{'loading meas/model':>19} {'lag ev.':>7}  verdict"]
    for r in rows:
        if "checks" not in r:
            lines.append(f"  {r['slots']:>6} {r['time_scale']:>7g}  FAILED: {r.get('error', '?')}")
            continue
        ck = r["checks"]
        a, ld = ck["activation"], ck["loading"]
        load = f"{_fmt(ld['measured'])}/{_fmt(ld['model'])}"
        lines.append(f"  {r['slots']:>6} {r['time_scale']:>7g} {_fmt(ck['cycles']['gap_error_max'], True):>13} "
                     f"{_fmt(ck['runtime']['error_max'], True):>12} {a['late']:>5}/{a['activations']:<6} "
                     f"{load:>19} {r['lag_events']:>7}  "
                     + ("faithful" if r["faithful"] else "not: " + "; ".join(r["why_not"])))
    lines.append("worst event-loop lag in the window (pool s), per daemon:")
    for r in rows:
        if r.get("loop_lag_pool_s"):
            lines.append(f"  {r['slots']:>6} {r['time_scale']:>7g}  " +
                         ", ".join(f"{k} {v:g}" for k, v in r["loop_lag_pool_s"].items()))
    lines.append("highest faithful TIME_SCALE and CPU cost per pool hour (CPU s, at that scale):")
    for p in summary["sizes"]:
        best = p["highest_faithful_scale"]
        cost = ", ".join(f"{k} {v:g}" for k, v in p["cpu_s_per_pool_hour"].items())
        lines.append(f"  {p['slots']:>6} slots: " + (f"{best:g}x" if best else "none of the scales tried")
                     + (" (the highest tried; try higher)" if p["capped"] else "")
                     + (f"; cost at {p['cost_scale']:g}x: {cost}" if cost else ""))
    if summary["aim_10k_met"] is not None:
        lines.append(f"aim (>= {AIM[1]:g}x at {AIM[0]:,} slots): {'met' if summary['aim_10k_met'] else 'not met'}")
    return lines


STEP_COLUMNS = ("slots", "time_scale", "faithful", "why_not", "cycles", "cycle_gap_error_max", "runtime_jobs",
                "runtime_error_max", "activations", "activations_late", "activation_p99_le_s", "loading_jobs",
                "loading_measured", "loading_model", "loading_error", "lag_events", "idle_jobs_left", "cores_busy",
                "window_wall_s", "wall_s", "error")


def step_row(r: dict[str, Any], daemons: list[str]) -> list[Any]:
    ck = r.get("checks") or {}
    c, rt, a, ld = (ck.get(k, {}) for k in ("cycles", "runtime", "activation", "loading"))
    base = [r["slots"], r["time_scale"], r["faithful"], "; ".join(r.get("why_not", [])), c.get("cycles"),
            c.get("gap_error_max"), rt.get("jobs"), rt.get("error_max"), a.get("activations"), a.get("late"),
            a.get("p99_le_s"), ld.get("jobs"), ld.get("measured"), ld.get("model"), ld.get("error"),
            r.get("lag_events"), r.get("idle_jobs_left"), r.get("cores_busy"), r.get("window_wall_s"),
            r.get("wall_s"), r.get("error", "")]
    cost = r.get("cpu_s_per_pool_hour") or {}
    lag = r.get("loop_lag_pool_s") or {}
    rss = r.get("peak_rss_mb") or {}
    return base + [cost.get(d) for d in daemons] + [lag.get(d) for d in daemons] + [rss.get(d) for d in daemons]


def write(rows: list[dict[str, Any]], summary: dict[str, Any], out: Path) -> list[Path]:
    daemons = sorted({k for r in rows for k in (r.get("cpu_s_per_pool_hour") or {})}
                     | {k for r in rows for k in (r.get("loop_lag_pool_s") or {})})
    header = [*STEP_COLUMNS, *(f"cpu_s_per_pool_hour_{d}" for d in daemons),
              *(f"loop_lag_pool_s_{d}" for d in daemons), *(f"peak_rss_mb_{d}" for d in daemons)]
    written = [write_csv(out / "scale_steps.csv", header, (step_row(r, daemons) for r in rows))]
    written.append(write_csv(
        out / "scale_cost.csv",
        ["slots", "highest_faithful_scale", "cost_scale", *(f"cpu_s_per_pool_hour_{k}" for k in ROLES),
         "cpu_s_per_pool_hour_total"],
        ([p["slots"], p["highest_faithful_scale"], p["cost_scale"], *(p["cpu_s_per_pool_hour"].get(k) for k in ROLES),
          p["cpu_s_per_pool_hour_total"]] for p in summary["sizes"])))
    written.append(plot(summary, out / "scale.png"))
    return written


def plot(summary: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    sizes = summary["sizes"]
    xs = [p["slots"] for p in sizes]
    best = [p["highest_faithful_scale"] for p in sizes]
    left.plot([x for x, b in zip(xs, best) if b], [b for b in best if b], "o-", color="tab:blue",
              label="highest faithful TIME_SCALE")
    for x, b, p in zip(xs, best, sizes):
        if not b:
            left.plot([x], [min(summary["scales"])], "v", color="tab:red")
            left.annotate("none", (x, min(summary["scales"])), textcoords="offset points", xytext=(4, 4), fontsize=8)
        elif p["capped"]:
            left.annotate("cap", (x, b), textcoords="offset points", xytext=(4, 4), fontsize=8)
    left.plot([AIM[0]], [AIM[1]], "*", color="tab:orange", ms=12, label=f"aim: {AIM[1]:g}x at {AIM[0]:,} slots")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("pool size (slots)")
    left.set_ylabel("TIME_SCALE (pool s per wall s)")
    left.set_title("fastest faithful emulation")
    left.legend(fontsize=8)
    for role, color in zip(ROLES, ("tab:green", "tab:purple", "tab:blue", "tab:brown")):
        pts = [(p["slots"], p["cpu_s_per_pool_hour"][role]) for p in sizes if role in p["cpu_s_per_pool_hour"]]
        if pts:
            right.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=color, label=role)
    total = [(p["slots"], p["cpu_s_per_pool_hour_total"]) for p in sizes if p["cpu_s_per_pool_hour_total"]]
    if total:
        right.plot([x for x, _ in total], [y for _, y in total], "kx--", label="all daemons")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("pool size (slots)")
    right.set_ylabel("CPU s per pool hour")
    right.set_title("cost against pool size\n(at the fastest faithful scale, else the lowest tried)", fontsize=10)
    if total:
        right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def json_result(rows: list[dict[str, Any]], summary: dict[str, Any], written: list[Path]) -> None:
    json_line({**summary, "steps": rows, "files": [str(p) for p in written]})
