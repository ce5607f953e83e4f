"""The parser side of a fuzzing campaign, in a process of its own (campaign.py watches it).

Usage: python -m daemons.fuzz.worker CLASS SECONDS SEED CURRENT_FILE RESULT_FILE

Before each input it writes the input to CURRENT_FILE and a heartbeat to stdout, so
that if the parsing code kills the process or never returns, the campaign knows which
input did it. At the end it writes the tally to RESULT_FILE as JSON.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from daemons.fuzz import targets as T
from daemons.fuzz.campaign import PARSER_STRATEGIES, draw_batch


def main(cls: str, seconds: float, seed: int, current: Path, result: Path) -> int:
    make, target = PARSER_STRATEGIES[cls]
    tally = T.Tally()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for x in draw_batch(make(), 50, seed):
            current.write_bytes(x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass"))
            sys.stdout.write(".")
            sys.stdout.flush()
            outcome, detail = target(x)
            tally.add(f"{cls}:parser", outcome, x, detail)
            if time.monotonic() >= deadline:
                break
        seed += 1
    result.write_text(json.dumps({"counts": tally.counts, "failures": tally.failures}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])))
