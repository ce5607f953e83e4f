"""Parsed slot ads for policy evaluation, kept for the partitionable slots evaluated last.

A claim evaluates the slot's Requirements, RANK and MODIFY_REQUEST_EXPR_* with the slot
ad as MY, and so does every activation; building that ad meant printing the slot's
attributes and parsing the text (about 140 microseconds), for every claim. A
partitionable slot is claimed again and again (its leftovers), with a few attributes
different each time (Cpus, Memory, NumDynamicSlots, EnteredCurrentState...). So the
parsed ad of each of the last few hundred slots is kept with the attributes it was made
from, and the next time only what differs is set on it: the same ad a fresh parse would
give (tests/unit/test_eval_ads.py compares them). Only partitionable slots' ads are kept
(Machine.classad), at most KEEP of them: a parsed ad costs about 5 KB, and a startd of
50,000 static slots keeps none.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Hashable, Mapping

import classad2

from daemons.core import ads

KEEP = 2048     # partitionable slots whose parsed ad is kept


@functools.lru_cache(maxsize=4096)
def _tree(text: str) -> classad2.ExprTree:
    # Our own printing of an attribute value: parsed once (setting a tree copies it).
    return classad2.ExprTree(text)


def _set(ad: classad2.ClassAd, name: str, value: Any) -> None:
    t = value.__class__
    if t is int or t is bool or t is str:
        ad[name] = value     # a literal of the same value as the one its text would parse to
    else:
        ad[name] = _tree(ads.literal(value))


class EvalAds:
    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._ads: OrderedDict[Hashable, tuple[Mapping[str, Any], classad2.ClassAd]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, attrs: Mapping[str, Any]) -> classad2.ClassAd:
        """The parsed ad of `attrs` (the slot `key`'s ad now). The caller must not change it."""
        found = self._ads.pop(key, None)
        if found is None:
            self.misses += 1
            ad = classad2.ClassAd(ads.ad_text(attrs))
        else:
            self.hits += 1
            old, ad = found
            for name, value in attrs.items():
                was = old.get(name, _ABSENT)
                if was is value:
                    continue
                t = value.__class__
                if was.__class__ is not t or (was != value if t is not float and t is not list
                                              else ads.literal(was) != ads.literal(value)):
                    _set(ad, name, value)
            for name in old:
                if name not in attrs:
                    del ad[name]
        self._ads[key] = (attrs, ad)
        if len(self._ads) > self.keep:
            self._ads.popitem(last=False)
        return ad

    def forget(self, key: Hashable) -> None:
        self._ads.pop(key, None)


_ABSENT = object()
