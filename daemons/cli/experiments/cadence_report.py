"""The report of `htcpool experiment cadence`: tables, CSV files and plots."""
from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from daemons.cli.experiments import loading
from daemons.cli.experiments.cadence_measure import model_pool_lf, pooled
from daemons.cli.experiments.common import print_table, pyplot, write_csv

if TYPE_CHECKING:
    from daemons.cli.experiments.cadence import RunResult, Settings

def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _write_cycles(runs: Sequence[RunResult], path: Path) -> Path:
    rows = []
    for r in runs:
        prev = None
        for c in r.cycles:
            rows.append([r.label, r.time_scale, c.cycle, round(c.start, 3), round(c.end, 3),
                         round(c.start - prev.start, 3) if prev is not None else "", c.matches, c.rejections,
                         c.rescheduled, round(c.wall_duration, 4)])
            prev = c
    return write_csv(path, ["run", "time_scale", "cycle", "start", "end", "spacing", "matches", "rejections",
                            "rescheduled", "wall_duration_s"], rows)


def _write_jobs(runs: Sequence[RunResult], interval_s: float, path: Path) -> Path:
    """Every real job: when its slot was given it and its successor; without claim reuse,
    how many more cycles than the seed's model its slot waited (a job that ended too
    close before a cycle to be matched in it)."""
    rows = []
    for r in runs:
        for machine, slots in sorted(r.measures.items()):
            w = r.workloads[machine]
            for slot, m in sorted(slots.items()):
                for j in m.jobs:
                    model = interval_s * loading.cycles_held(j.duration, interval_s)
                    rows.append([r.label, r.time_scale, machine, slot, w.kind, w.ratio, j.proc, j.duration,
                                 round(j.origin, 3), round(j.start, 3), round(j.end, 3), j.reused,
                                 round(j.next_origin, 3), round(j.held, 3), round(j.loading, 5), model,
                                 round((j.held - model) / interval_s) if r.worklife_s == 0 else ""])
    return write_csv(path, ["run", "time_scale", "machine", "slot", "kind", "ratio", "proc", "duration", "origin",
                            "start", "end", "reused", "next_origin", "held", "loading", "model_held",
                            "extra_cycles"], rows)


def _report_fixed(fixed: dict[float, RunResult], s: Settings, out: Path, written: list[Path], emit) -> list[dict]:
    C = s.interval_s
    rows: list[dict[str, Any]] = []
    per_scale = []
    for scale, r in fixed.items():
        worst: dict[str, Any] | None = None
        for machine, w in sorted(r.workloads.items(), key=lambda kv: kv[1].ratio):
            ms = list(r.measures[machine].values())
            f = loading.loading_factor(w.ratio * C, C)
            meas = pooled(ms)
            row = {"time_scale": scale, "d_over_c": w.ratio, "duration_s": w.durations[0], "slots": len(ms),
                   "jobs": sum(len(m.jobs) for m in ms), "busy_s": round(sum(m.busy for m in ms), 3),
                   "held_s": round(sum(m.held for m in ms), 3), "formula": round(f, 5), "measured": round(meas, 5),
                   "error": round(meas - f, 5), "max_abs_slot_error": round(max(abs(m.loading - f) for m in ms), 5),
                   "measured_from_first_start": round(pooled(ms, from_start=True), 5),
                   "match_to_start_s": round(_mean([x for m in ms for x in m.start_latency]), 2)}
            rows.append(row)
            if worst is None or abs(row["error"]) > abs(worst["error"]):
                worst = row
        mine = [rw for rw in rows if rw["time_scale"] == scale]
        per_scale.append({"time_scale": scale, "max_abs_error": abs(worst["error"]) if worst else None,
                          "worst_d_over_c": worst["d_over_c"] if worst else None,
                          "max_abs_slot_error": max(rw["max_abs_slot_error"] for rw in mine),
                          "max_abs_error_from_first_start": round(max(abs(rw["measured_from_first_start"]
                                                                         - rw["formula"]) for rw in mine), 5),
                          "points": len(mine), "wall_s": round(r.wall_s, 1)})
    header = list(rows[0])
    written.append(write_csv(out / "fixed.csv", header, [[rw[k] for k in header] for rw in rows]))
    written.append(_plot_fixed(rows, s, out / "cadence_fixed.png"))
    emit("")
    emit(f"fixed durations, C = {C:g} s, CLAIM_WORKLIFE = 0: measured loading factor (busy / held) against seed "
         f"004's D / (C (q + ceil(r)))")
    scales = list(fixed)
    header = ["D/C", "formula"]
    for scale in scales:
        header += [f"measured x{scale:g}", f"error x{scale:g}"]
    table = []
    for ratio in sorted({rw["d_over_c"] for rw in rows}):
        line: list[Any] = [f"{ratio:g}", round(loading.loading_factor(ratio * C, C), 4)]
        for scale in scales:
            rw = next(x for x in rows if x["time_scale"] == scale and x["d_over_c"] == ratio)
            line += [round(rw["measured"], 4), f"{rw['error']:+.4f}"]
        table.append(line)
    print_table(header, table)
    for t in per_scale:
        emit(f"TIME_SCALE {t['time_scale']:g}: max |error| {t['max_abs_error']:.4f} (at D/C = "
             f"{t['worst_d_over_c']:g}), worst single slot {t['max_abs_slot_error']:.4f}: "
             f"{'within' if t['max_abs_error'] <= 0.02 else 'OUTSIDE'} the 2% target")
    return per_scale


def _report_random(rand: dict[str, RunResult], s: Settings, out: Path, written: list[Path], emit) -> dict:
    C = s.interval_s
    rows: list[dict[str, Any]] = []
    for part, r in rand.items():
        for machine, w in sorted(r.workloads.items(), key=lambda kv: (s.kinds.index(kv[1].kind), kv[1].ratio)):
            dist = loading.Distribution(w.kind, w.ratio * C)
            ms = list(r.measures[machine].values())
            jobs = [j for m in ms for j in m.jobs]
            meas = pooled(ms)
            model = model_pool_lf(w, r.slots, C, r.worklife_s)
            row = {"mode": "reuse off" if part == "random" else "reuse on", "worklife_s": r.worklife_s,
                   "distribution": w.kind, "mean_over_c": w.ratio, "slots": len(ms), "jobs": len(jobs),
                   "sample_mean_over_c": round(_mean(w.durations) / C, 4),
                   "measured": round(meas, 5), "model_same_draws": round(model, 5),
                   "error_vs_model": round(meas - model, 5),
                   "pool_lf_theory": round(loading.pool_lf(dist, C), 5),
                   "mean_slot_lf_theory": round(loading.mean_slot_lf(dist, C), 5),
                   "approx": round(loading.approx_pool_lf(w.ratio * C, C), 5),
                   "measured_mean_job_lf": round(_mean([j.loading for j in jobs]), 5),
                   "matches": sum(m.matches for m in ms),
                   # without reuse: jobs whose slot waited a cycle more than the model (ended too close before a cycle)
                   "late_jobs": sum(1 for j in jobs if j.held > C * loading.cycles_held(j.duration, C) + C / 2)
                   if r.worklife_s == 0 else "",
                   "model_matches": loading.queue_replay(w.durations, r.slots, C, r.worklife_s).matches}
            if part == "reuse":
                row["model_long_run"] = round(loading.simulate_pool_lf(
                    dist, C, r.worklife_s, random.Random(f"long:{w.kind}:{w.ratio}")), 5)
            rows.append(row)
    header = list(dict.fromkeys(k for rw in rows for k in rw))
    written.append(write_csv(out / "random.csv", header, [[rw.get(k, "") for k in header] for rw in rows]))
    off = [rw for rw in rows if rw["mode"] == "reuse off"]
    on = [rw for rw in rows if rw["mode"] == "reuse on"]
    if off:
        written.append(_plot_random(off, s, out / "cadence_random.png"))
    if on:
        written.append(_plot_reuse(off, on, s, out / "cadence_reuse.png"))
    result: dict[str, Any] = {}
    if off:
        emit("")
        emit(f"random durations, C = {C:g} s, CLAIM_WORKLIFE = 0, TIME_SCALE {s.random_time_scale:g}: pool loading "
             f"factor (summed busy / summed held)")
        print_table(["dist", "E[D]/C", "jobs", "measured", "model, same draws", "error", "late", "E[D]/E[Z]",
                     "E[LF(D)]", "E[D]/(E[D]+C/2)", "mean job LF"],
                    [[rw["distribution"], f"{rw['mean_over_c']:g}", rw["jobs"], round(rw["measured"], 4),
                      round(rw["model_same_draws"], 4), f"{rw['error_vs_model']:+.4f}", rw["late_jobs"],
                      round(rw["pool_lf_theory"], 4), round(rw["mean_slot_lf_theory"], 4), round(rw["approx"], 4),
                      round(rw["measured_mean_job_lf"], 4)] for rw in off])
        emit("(late: jobs that ended so shortly before a cycle that their slot was not free in it, and waited "
             "one more; model: the seed's model run on the same durations)")
        result["random"] = _summary(off, s)
    if on:
        by_key = {(rw["distribution"], rw["mean_over_c"]): rw for rw in off}
        emit("")
        emit(f"the same draws with claim reuse, CLAIM_WORKLIFE = {s.worklife_s:g}, TIME_SCALE "
             f"{s.random_time_scale:g}: pool loading factor")
        print_table(["dist", "E[D]/C", "reuse off", "reuse on", "gain", "model on, same draws", "error",
                     "model on, long run", "matches off", "matches on"],
                    [[rw["distribution"], f"{rw['mean_over_c']:g}",
                      round(by_key[k]["measured"], 4) if (k := (rw["distribution"], rw["mean_over_c"])) in by_key
                      else "", round(rw["measured"], 4),
                      f"{rw['measured'] - by_key[k]['measured']:+.4f}" if k in by_key else "",
                      round(rw["model_same_draws"], 4), f"{rw['error_vs_model']:+.4f}", round(rw["model_long_run"], 4),
                      by_key[k]["matches"] if k in by_key else "", rw["matches"]] for rw in on])
        result["reuse"] = _summary(on, s)
        if off:
            gains = [rw["measured"] - by_key[(rw["distribution"], rw["mean_over_c"])]["measured"]
                     for rw in on if (rw["distribution"], rw["mean_over_c"]) in by_key]
            result["reuse"]["mean_gain"] = round(_mean(gains), 4)
    return result


def _summary(rows: list[dict[str, Any]], s: Settings) -> dict[str, Any]:
    errs = [abs(rw["error_vs_model"]) for rw in rows]
    out: dict[str, Any] = {
        "time_scale": s.random_time_scale, "max_abs_error_vs_model": round(max(errs), 5),
        "mean_abs_error_vs_model": round(_mean(errs), 5),
        "measured": {f"{rw['distribution']}:{rw['mean_over_c']:g}": rw["measured"] for rw in rows}}
    if rows and rows[0]["late_jobs"] != "":
        out["late_jobs"] = sum(rw["late_jobs"] for rw in rows)
        out["jobs"] = sum(rw["jobs"] for rw in rows)
    return out


# ---- plots ---------------------------------------------------------------------------------
_STYLES = ("o", "s", "^", "D", "v")


def _plot_fixed(rows: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    hi = max(6.2, max(s.ratios) + 0.2)
    xs = [i / 3000 * hi for i in range(1, 3001)]
    ax.plot(xs, [loading.loading_factor(x * C, C) for x in xs], color="0.55", lw=1,
            label="seed 004: D / (C (q + ceil(r)))")
    scales = list(dict.fromkeys(rw["time_scale"] for rw in rows))
    for k, scale in enumerate(scales):
        pts = [rw for rw in rows if rw["time_scale"] == scale]
        ax.plot([rw["d_over_c"] for rw in pts], [rw["measured"] for rw in pts], _STYLES[k % 5], ms=7 - 2 * k,
                mfc="none" if k else None, label=f"measured, TIME_SCALE {scale:g}")
        ax2.plot([rw["d_over_c"] for rw in pts], [rw["error"] for rw in pts], _STYLES[k % 5] + "-", ms=4, lw=0.8,
                 mfc="none" if k else None, label=f"TIME_SCALE {scale:g}")
    ax.set_ylabel("slot loading factor (busy / held)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"fixed job durations: NEGOTIATOR_INTERVAL C = {C:g} s, CLAIM_WORKLIFE = 0")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    ax2.axhspan(-0.02, 0.02, color="tab:green", alpha=0.12, label="±0.02 target")
    ax2.axhline(0, color="0.5", lw=0.8)
    ax2.set_ylabel("measured − formula")
    lim = max(0.03, max(abs(rw["error"]) for rw in rows) * 1.2)
    ax2.set_ylim(-lim, lim)
    ax2.set_xlabel("job duration D / C (negotiation cycles)")
    ax2.legend(loc="upper right", fontsize=7, ncol=3)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _curve_xs(means: Sequence[float]) -> list[float]:
    lo, hi = min(0.1, min(means)), max(means) * 1.05
    return [lo + (hi - lo) * i / 240 for i in range(241)]


def _plot_random(rows: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    kinds = list(dict.fromkeys(rw["distribution"] for rw in rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.4), sharey=True, squeeze=False)
    xs = _curve_xs(s.means)
    for ax, kind in zip(axes[0], kinds):
        pts = [rw for rw in rows if rw["distribution"] == kind]
        ax.plot(xs, [loading.approx_pool_lf(x * C, C) for x in xs], "--", color="tab:orange", lw=1.2,
                label="E[D] / (E[D] + C/2)")
        ax.plot(xs, [loading.mean_slot_lf(loading.Distribution(kind, x * C), C) for x in xs], ":",
                color="tab:purple", lw=1.5, label="E[LF(D)]: seed's formula, averaged")
        ax.plot(xs, [loading.pool_lf(loading.Distribution(kind, x * C), C) for x in xs], "-", color="0.45", lw=1,
                label="E[D] / E[Z]: seed's model, pool")
        ax.plot([rw["mean_over_c"] for rw in pts], [rw["model_same_draws"] for rw in pts], "x", color="0.2", ms=6,
                label="seed's model on the same draws")
        ax.plot([rw["mean_over_c"] for rw in pts], [rw["measured"] for rw in pts], "o", color="tab:blue", mfc="none",
                ms=8, label="measured pool loading")
        ax.set_title(f"{kind} durations")
        ax.set_xlabel("mean job duration E[D] / C")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("pool loading factor (summed busy / summed held)")
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.suptitle(f"random job durations: C = {C:g} s, CLAIM_WORKLIFE = 0, TIME_SCALE {s.random_time_scale:g}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_reuse(off: list[dict[str, Any]], on: list[dict[str, Any]], s: Settings, path: Path) -> Path:
    plt = pyplot()
    C = s.interval_s
    kinds = list(dict.fromkeys(rw["distribution"] for rw in on))
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.4), sharey=True, squeeze=False)
    xs = _curve_xs(s.means)
    for ax, kind in zip(axes[0], kinds):
        o = [rw for rw in off if rw["distribution"] == kind]
        n = [rw for rw in on if rw["distribution"] == kind]
        ax.plot(xs, [loading.pool_lf(loading.Distribution(kind, x * C), C) for x in xs], "-", color="0.55", lw=1,
                label="off: E[D] / E[Z]")
        if o:
            ax.plot([rw["mean_over_c"] for rw in o], [rw["measured"] for rw in o], "o", color="tab:blue", mfc="none",
                    ms=8, label="off (CLAIM_WORKLIFE 0): measured")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["model_long_run"] for rw in n], "--", color="tab:green", lw=1,
                label="on: seed's model, long run")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["model_same_draws"] for rw in n], "x", color="tab:green", ms=6,
                label="on: seed's model, same draws")
        ax.plot([rw["mean_over_c"] for rw in n], [rw["measured"] for rw in n], "s", color="tab:green", mfc="none",
                ms=8, label=f"on (CLAIM_WORKLIFE {s.worklife_s:g}): measured")
        ax.set_title(f"{kind} durations")
        ax.set_xlabel("mean job duration E[D] / C")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("pool loading factor (summed busy / summed held)")
    axes[0][0].legend(loc="lower right", fontsize=7)
    fig.suptitle(f"what claim reuse buys: C = {C:g} s, TIME_SCALE {s.random_time_scale:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
