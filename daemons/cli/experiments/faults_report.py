"""What `htcpool experiment faults` writes and prints: timeline and fault CSVs, the plot, the verdict."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemons.cli.experiments import invariants as inv
from daemons.cli.experiments.common import json_line, print_table, pyplot, write_csv

if TYPE_CHECKING:
    from daemons.cli.experiments.faults import Run

COLORS = {"kill": "tab:red", "pause": "tab:purple", "restart": "tab:orange", "partition": "tab:brown",
          "delay": "tab:olive", "drop": "tab:gray", "abort": "tab:pink", "clock": "tab:cyan"}


def summary(r: "Run") -> dict[str, Any]:
    v = r.verdict
    by_kind: dict[str, list[float | None]] = defaultdict(list)
    alone: dict[str, list[float | None]] = defaultdict(list)
    for e in r.events:
        if e.index in r.applied:
            by_kind[e.kind].append(r.recovery.get(e.index))
            if not r.confounded.get(e.index):
                alone[e.kind].append(r.recovery.get(e.index))
    applied = [e for e in r.events if e.index in r.applied]
    err = v.usage_error
    return {
        "jobs": len(r.submitted),
        "faults": len(applied),
        "kinds": dict(sorted(Counter(e.kind for e in applied).items())),
        "lost": len(v.lost),
        "duplicated": len(v.duplicated),
        "overlapping": len(v.overlapping),
        "view_mismatches": len(v.view_mismatches),
        "tracebacks": len(v.tracebacks),
        "recovery_s": inv.summarize_recovery(by_kind),
        # The same over faults with no other fault in force until they recovered.
        "recovery_alone_s": inv.summarize_recovery(alone),
        "wall_s": round(r.wall_s, 1),
        "unfinished": len(v.unfinished),
        "completed": v.completed,
        "removed": v.removed,
        "held_released": r.held_released,
        "wrong_end": len(v.wrong_end),
        "usage_error": None if err is None else round(err, 4),
        "usage_over_jobs": None if v.usage_over_jobs is None else round(v.usage_over_jobs, 4),
        "usage_ok": v.usage_ok,
        "overlap_unchecked": v.overlap_unchecked,
        "errors": list(r.errors),
        "seed": r.cfg.seed,
        "slots": r.cfg.slots,
        "time_scale": r.cfg.time_scale,
        "ok": v.ok and not r.errors,
    }


def report(r: "Run", out: Path) -> int:
    s = summary(r)
    written = [
        write_csv(out / "timeline.csv", ["pool_s", "running", "idle", "held", "queued", "done", "busy_slots",
                                         "claimed_slots", "unclaimed_slots", "faults_in_force"],
                  ([x["t"], x["running"], x["idle"], x["held"], x["queued"], x["done"], x["busy"], x["claimed"],
                    x["unclaimed"], x["faults"]] for x in r.samples)),
        write_csv(out / "faults.csv", ["index", "kind", "target", "planned_start_s", "planned_stop_s", "start_s",
                                       "stop_s", "params", "recovery_s", "confounded"],
                  ([e.index, e.kind, e.target, e.start, e.stop, *_applied(r, e.index),
                    " ".join(f"{k}={v}" for k, v in e.params),
                    "" if r.recovery.get(e.index) is None else round(r.recovery[e.index], 1),
                    int(bool(r.confounded.get(e.index)))] for e in r.events)),
    ]
    lines = r.verdict.lines() + [f"FAIL {e}" for e in r.errors]
    (out / "verdict.txt").write_text("\n".join(lines) + "\n")
    written.append(out / "verdict.txt")
    try:
        written.append(plot(r, out / "faults.png"))
    except Exception as e:     # a plot is a convenience; the verdict is the result
        lines.append(f"(no plot: {type(e).__name__}: {e})")
    emit = print
    emit(f"\nfaults: {s['jobs']} jobs, {s['faults']} faults "
         f"({', '.join(f'{k} {n}' for k, n in s['kinds'].items())}) in {s['wall_s']:.0f} s of wall time")
    def fmt(x: Any) -> Any:
        return "-" if x is None else x
    rows = []
    for k, x in s["recovery_s"].items():
        a = s["recovery_alone_s"].get(k, {"n": 0, "median": None, "max": None})
        rows.append([k, x["n"], x["recovered"], fmt(x["median"]), fmt(x["max"]), a["n"], fmt(a["median"]),
                     fmt(a["max"])])
    if rows:
        emit("recovery (pool seconds from heal until the startds' busy slots are back to 90% of their level "
             "before the fault; 'alone': no other fault in force meanwhile):")
        print_table(["kind", "faults", "recovered", "median_s", "max_s", "alone", "alone_median_s", "alone_max_s"],
                    rows)
    emit("invariants:")
    for line in lines:
        emit(f"  {line}")
    emit(f"verdict: {'PASS' if s['ok'] else 'FAIL'}")
    emit("wrote " + ", ".join(str(p) for p in written) + f", {out / 'logs'}/")
    if r.cfg.json:
        json_line(s)
    return 0 if s["ok"] else 1


def _applied(r: "Run", index: int) -> list[Any]:
    a = r.applied.get(index)
    if a is None:
        return ["", ""]
    return [round(a[0], 1), round(a[1], 1) if a[1] >= 0 else ""]


def plot(r: "Run", path: Path) -> Path:
    plt = pyplot()
    fig, (top, lanes) = plt.subplots(2, 1, figsize=(12, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    xs = [x["t"] for x in r.samples]

    def series(key: str) -> list[float]:
        return [float("nan") if x[key] is None else x[key] for x in r.samples]
    top.plot(xs, series("busy"), label="busy slots (startds)", color="tab:blue")
    top.plot(xs, series("running"), label="running jobs (schedd)", color="tab:purple", alpha=0.6, linewidth=0.8)
    top.plot(xs, series("claimed"), label="claimed slots (collector)", color="tab:green", alpha=0.6, linewidth=0.8)
    top.set_ylabel("slots / jobs")
    top.set_ylim(bottom=0)
    right = top.twinx()
    right.plot(xs, series("idle"), label="idle jobs (right)", color="black", alpha=0.45, linewidth=0.8)
    right.set_ylabel("idle jobs")
    right.set_ylim(bottom=0)
    targets = sorted({e.target for e in r.events}, key=lambda t: (t.rstrip("0123456789"), t))
    for e in r.events:
        a = r.applied.get(e.index)
        if a is None:
            continue
        start, stop = a[0], a[1] if a[1] >= 0 else e.stop
        color = COLORS.get(e.kind, "tab:gray")
        top.axvspan(start, stop, color=color, alpha=0.12, linewidth=0)
        lanes.barh(targets.index(e.target), stop - start, left=start, color=color, alpha=0.8, height=0.7)
    lanes.set_yticks(range(len(targets)), targets)
    lanes.set_xlabel("pool seconds since the campaign started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k], alpha=0.8) for k in COLORS
               if any(e.kind == k for e in r.events)]
    lanes.legend(handles, [k for k in COLORS if any(e.kind == k for e in r.events)], loc="upper center",
                 bbox_to_anchor=(0.5, -0.35), ncol=8, fontsize=8)
    lines = top.get_legend_handles_labels()
    extra = right.get_legend_handles_labels()
    top.legend(lines[0] + extra[0], lines[1] + extra[1], loc="lower right", fontsize=8)
    verdict = "PASS" if r.verdict.ok and not r.errors else "FAIL"
    top.set_title(f"htcpool experiment faults: {len(r.submitted)} jobs, {len(r.applied)} faults, seed {r.cfg.seed}"
                  f" - {verdict}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
