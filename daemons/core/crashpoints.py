"""Named crash points: kill this process at an exact place, to test recovery from it.

`HTCPOOL_CRASHPOINTS=name[,name...]` in a daemon's environment makes `crashpoint(name)`
end the process at once (os._exit, as abrupt as SIGKILL: no cleanup, no flushing of
Python buffers) the first time that point is reached. Unset, a crash point costs one set
lookup. Used by tests and fault-injection runs to crash a daemon between two steps that
must not be separable (for example a completion's commit and its history record).
"""
from __future__ import annotations

import os
import sys

_ARMED = frozenset(p.strip() for p in os.environ.get("HTCPOOL_CRASHPOINTS", "").split(",") if p.strip())
EXIT_CODE = 137  # what a shell reports for SIGKILL


def crashpoint(name: str) -> None:
    if name in _ARMED:
        sys.stderr.write(f"htcpool: crash point {name} reached; exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
