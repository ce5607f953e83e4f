"""What every `htcpool experiment` shares: output directory, CSV, plots, JSON line."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterable, Sequence


def out_dir(path: str | None, name: str) -> Path:
    d = Path(path) if path else Path("results") / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(r)
    return path


def pyplot():
    """matplotlib on a file backend: experiments run without a display."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    rows = [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    print("  ".join(f"{h:>{w}}" for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(f"{v:>{w}}" for v, w in zip(r, widths)))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def json_line(obj: Any) -> None:
    print(json.dumps(obj))
