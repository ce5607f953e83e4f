"""daemons/core/heap.py: long-lived objects frozen out of the cyclic collector's walks,
after the cyclic garbage of the moment is collected."""
import gc
import weakref

from daemons.core import heap


class _Node:
    def __init__(self) -> None:
        self.me = self     # a reference cycle: only the cyclic collector frees it


def test_the_settler_collects_then_freezes_once_enough_items_came_in():
    gc.unfreeze()
    try:
        s = heap.Settler(3)
        assert not s.added(2) and s.settled == 0 and gc.get_freeze_count() == 0
        kept = [[i] for i in range(1000)]      # long-lived containers
        node = _Node()
        gone = weakref.ref(node)
        del node
        assert gone() is not None              # unreachable, but in a cycle: still there
        assert s.added(1) and s.settled == 1 and s.pending == 0
        assert gone() is None                  # collected before the freeze
        assert gc.get_freeze_count() >= len(kept)
        assert not s.added(2)                  # counting starts again
    finally:
        gc.unfreeze()
