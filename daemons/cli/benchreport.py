"""What every `htcpool bench NAME` reports besides its own figures.

- The peak RSS of every daemon of the bench's pools (VmHWM, read just before each pool
  stops; `pool.record_peaks`), for benches that do not report their own, or the bench
  process's own peak when the bench runs in-process.
- Each figure as a ratio to the goal issue 14 sets for it, where it sets one.
- With `--baseline FILE` (a previous run's --json output: its last line is the JSON
  object), each figure as a ratio to the same figure in that run.

It wraps the bench: the bench's result is its JSON object, whose line is held back
until the bench returns, so that the JSON stays the last line of the output, now with
`peak_rss_mb`, `goal_ratios` and `baseline_ratios` added.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import resource
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from daemons.cli.base import CliError
from daemons.cli.procs import record_peaks

EXIT_USAGE = 2
ROW_KEYS = ("slots", "size", "mode", "name")   # what names one row of a list of rows


@dataclass(frozen=True)
class Goal:
    path: str           # a figure, as flatten() names it
    goal: float
    at_most: bool       # the goal is an upper bound (times, bytes), else a lower bound (rates)
    what: str

    def ratio(self, value: float) -> float:
        return value / self.goal

    def met(self, value: float) -> bool:
        return value <= self.goal if self.at_most else value >= self.goal


# Issue 14's goals, by bench. The negotiator's are for 100,000 idle jobs of 100 submitters
# in 500 autoclusters (the bench's defaults); its memory goals are stated at 50k slots
# and 100k jobs, and shown for every size.
GOALS: dict[str, tuple[Goal, ...]] = {
    "negotiator": (
        Goal("rows[slots=1000].reschedule_to_record_s", 0.3, True, "1k-slot cycle, Reschedule to record (s)"),
        Goal("rows[slots=10000].reschedule_to_record_s", 1.0, True, "10k-slot cycle, Reschedule to record (s)"),
        Goal("rows[slots=50000].reschedule_to_record_s", 4.0, True, "50k-slot cycle, Reschedule to record (s)"),
        *(g for slots in (1000, 10000, 50000) for g in (
            Goal(f"rows[slots={slots}].collector_bytes_per_slot_ad", 4096, True,
                 f"collector bytes per slot ad, {slots // 1000}k slots"),
            Goal(f"rows[slots={slots}].schedd_bytes_per_idle_job", 2048, True,
                 f"schedd bytes per idle job, {slots // 1000}k slots"),
            Goal(f"rows[slots={slots}].startd_bytes_per_slot", 2048, True,
                 f"startd bytes per emulated slot, {slots // 1000}k slots"))),
    ),
    "startd": tuple(Goal(f"rows[slots={slots}].startd_bytes_per_slot", 2048, True,
                         f"startd bytes per emulated slot, {slots // 1000}k slots in one process")
                    for slots in (10000, 50000)),
    "throughput": (
        Goal("jobs_per_s", 1500, False, "jobs per second (goal set for --jobs 10000 --machines 1000)"),
    ),
}


# ---- the figures of a result ----------------------------------------------------------------
def _row_label(row: Any, index: int) -> str:
    if isinstance(row, dict):
        for k in ROW_KEYS:
            if isinstance(row.get(k), (str, int)) and not isinstance(row.get(k), bool):
                return f"{k}={row[k]}"
    return str(index)


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """(path, value) of every finite number in a JSON result: `a.b`, rows as `rows[slots=1000].x`."""
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            yield prefix, float(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            label = _row_label(v, i)
            if "=" in label:          # the row's own name is not one of its figures
                v = {k: x for k, x in v.items() if k != label.split("=", 1)[0]}
            yield from flatten(v, f"{prefix}[{label}]")


def goal_ratios(bench: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    figures = dict(flatten(result))
    out = []
    for g in GOALS.get(bench, ()):
        v = figures.get(g.path)
        if v is not None:
            out.append({"figure": g.path, "what": g.what, "value": v, "goal": g.goal,
                        "bound": "at most" if g.at_most else "at least",
                        "ratio": round(g.ratio(v), 3), "met": g.met(v)})
    return out


def baseline_ratios(result: dict[str, Any], baseline: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Figures in both runs whose values differ (now / before), and how many are the same."""
    before = dict(flatten(baseline))
    out, same = [], 0
    for path, v in flatten(result):
        if path.startswith(("goal_ratios", "baseline_")) or path not in before:
            continue
        b = before[path]
        if v == b:
            same += 1
            continue
        out.append({"figure": path, "now": v, "baseline": b, "ratio": round(v / b, 3) if b else None})
    return out, same


def read_baseline(path: str, bench: str) -> dict[str, Any]:
    """The JSON object on the last non-empty line of FILE, or CliError (exit 2) saying why not."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise CliError(f"--baseline {path}: {e.strerror or e}", EXIT_USAGE) from None
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise CliError(f"--baseline {path}: the file is empty", EXIT_USAGE)
    try:
        found = json.loads(lines[-1])
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise CliError(f"--baseline {path}, line {len(text.splitlines())}: not a JSON object "
                       "(give the output of a run with --json)", EXIT_USAGE)
    other = found.get("bench")
    if isinstance(other, str) and other != bench:
        raise CliError(f"--baseline {path}: that is a run of bench {other}, not {bench}", EXIT_USAGE)
    return found


# ---- holding the JSON line back ------------------------------------------------------------
class _HoldJson(io.TextIOBase):
    """stdout, except that a line holding a JSON object is written only once another line
    follows it: the one that ends the bench is kept for `run` to complete."""

    def __init__(self, out) -> None:
        self.out = out
        self.partial = ""
        self.held: str | None = None

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.partial += s
        while "\n" in self.partial:
            line, self.partial = self.partial.split("\n", 1)
            self._line(line)
        return len(s)

    def _line(self, line: str) -> None:
        if self.held is not None:
            self.out.write(self.held + "\n")
            self.held = None
        if line.startswith("{") and line.endswith("}"):
            self.held = line
        else:
            self.out.write(line + "\n")

    def flush(self) -> None:
        self.out.flush()

    def close_held(self) -> dict[str, Any] | None:
        if self.partial:
            self._line(self.partial)
            self.partial = ""
        line, self.held = self.held, None
        if line is None:
            return None
        try:
            found = json.loads(line)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            self.out.write(line + "\n")
            return None
        return found


# ---- the wrapper ------------------------------------------------------------------------------
def own_peak_rss_mb() -> float:
    """This process's peak resident set (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _has_peaks(result: dict[str, Any]) -> bool:
    if "peak_rss_mb" in result:
        return True
    rows = result.get("rows")
    return isinstance(rows, list) and any(isinstance(r, dict) and "peak_rss_mb" in r for r in rows)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def report_lines(bench: str, result: dict[str, Any], added_peaks: bool,
                 baseline: dict[str, Any] | None, baseline_path: str | None) -> list[str]:
    lines: list[str] = []
    if added_peaks:
        lines.append("peak RSS (VmHWM) of every daemon, MB:")
        for key, mb in result["peak_rss_mb"].items():
            lines.append(f"  {key:<32}{mb:>10.1f}")
    goals = result.get("goal_ratios") or []
    if goals:
        lines.append("against issue 14's goals (ratio = figure / goal):")
        for g in goals:
            lines.append(f"  {g['what']:<58}{_fmt(g['value']):>10} {g['bound']} {_fmt(g['goal']):<8}"
                         f" x{g['ratio']:<7} {'met' if g['met'] else 'NOT MET'}")
    if baseline is not None:
        ratios, same = result["baseline_ratios"], result["baseline_unchanged"]
        lines.append(f"against the baseline {baseline_path} (ratio = now / baseline; {same} figure(s) unchanged):")
        width = max((len(r["figure"]) for r in ratios), default=10) + 2
        for r in ratios:
            ratio = f"x{r['ratio']}" if r["ratio"] is not None else "(baseline 0)"
            lines.append(f"  {r['figure']:<{width}}{_fmt(r['now']):>12} {_fmt(r['baseline']):>12}  {ratio}")
    return lines


def run(bench: str, fn: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    baseline_path = getattr(args, "baseline", None)
    baseline = read_baseline(baseline_path, bench) if baseline_path else None
    want_json = bool(getattr(args, "json", False))
    args.json = True        # the result is needed for the ratios; printed only if asked for
    real = sys.stdout
    hold = _HoldJson(real)
    peaks: dict[str, float] = {}
    sys.stdout = hold
    try:
        with record_peaks(peaks):
            rc = fn(args)
    finally:
        sys.stdout = real
        result = hold.close_held()
        args.json = want_json
    if result is None:
        return rc
    added = not _has_peaks(result)
    if added:
        result["peak_rss_mb"] = {k: round(v, 1) for k, v in peaks.items()} if peaks else \
            {"bench (this process)": round(own_peak_rss_mb(), 1)}
    result.setdefault("bench", bench)
    result["goal_ratios"] = goal_ratios(bench, result)
    if baseline is not None:
        result["baseline_ratios"], result["baseline_unchanged"] = baseline_ratios(result, baseline)
    lines = report_lines(bench, result, added, baseline, baseline_path)
    if lines:
        print()
        for line in lines:
            print(line)
    if want_json:
        print(json.dumps(result))
    sys.stdout.flush()
    return rc
