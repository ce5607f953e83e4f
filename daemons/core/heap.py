"""Long-lived objects kept out of the cyclic garbage collector's walks.

A full collection walks every container object the process tracks. A schedd holding
100,000 submitted jobs walked them all in about 40 ms, in the middle of whatever its
loop was doing (in `bench negotiator`, the negotiator's cycle waited that long for its
requests). What a daemon keeps for long (its modules and configuration once started, a
startd's machines, a restored or newly submitted job queue) is therefore moved out of
the collector's generations once it exists (gc.freeze); reference counting still frees
each object when its last reference goes. Cyclic garbage present at that instant is
collected first; a cycle among frozen objects that becomes garbage later is never
collected, which is why only whole settled states are frozen, not every change.
"""
from __future__ import annotations

import gc


def settle() -> None:
    """Collect what is cyclic garbage now, then freeze everything that survives."""
    gc.collect()
    gc.freeze()


class Settler:
    """Calls settle() once `every` items (jobs) have been added since it last did."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self.pending = 0
        self.settled = 0      # how many times it has

    def added(self, n: int) -> bool:
        self.pending += n
        if self.pending < self.every:
            return False
        self.pending = 0
        settle()
        self.settled += 1
        return True
