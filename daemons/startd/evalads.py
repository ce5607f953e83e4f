"""Parsed slot ads for policy evaluation: one kept per slot shape, brought up to date.

A claim evaluates the slot's Requirements, RANK and MODIFY_REQUEST_EXPR_* with the slot
ad as MY, and so does every activation; building that ad meant printing the slot's
attributes and parsing the text (about 50 microseconds), two to four times per match.
Most of a slot ad is its static part (slotad.py: type, policy, totals, STARTD_ATTRS),
one object for every slot of a shape (slotN of every machine of a configuration). So
one parsed ad is kept per static part, with the attributes it was last made from, and
the next evaluation of any slot of that shape has only what differs set on it (Name,
State, the claim's, the job's, CurrentTime...): the same ad a fresh parse would give
(tests/unit/test_eval_ads.py compares them at every step of random claims,
activations and releases). A kept ad is brought up to date by what it holds, so it
serves any slot of its shape, in any order.

The ad given out is the kept one: the caller must not change it, and must not hold it
across the evaluation of another slot (the startd evaluates one slot at a time).

A slot whose STARTD_ATTRS override one of its own items has no separate static part
(slotad.eval_parts gives the whole ad): its ad is kept by slot, for the last KEEP_SLOTS
such slots (a parsed ad costs about 5 KB).
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Hashable, Mapping

import classad2

from daemons.core import ads
from daemons.startd.slotad import _StaticPart, _text

KEEP = 1024        # slot shapes whose parsed ad is kept (a startd has a few dozen)
KEEP_SLOTS = 256   # slots kept one by one (their STARTD_ATTRS override their own items)


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


def _update(ad: classad2.ClassAd, old: Mapping[str, Any], new: Mapping[str, Any],
            other: Mapping[str, Any]) -> None:
    """Bring the items of `ad` that came from `old` to `new`; `other` is the new ad's other
    changing part (a name that moved there is not deleted)."""
    for name, value in new.items():
        was = old.get(name, _ABSENT)
        if was is value:
            continue
        t = value.__class__
        if was.__class__ is not t or (was != value if t is not float and t is not list
                                      else ads.literal(was) != ads.literal(value)):
            _set(ad, name, value)
    for name in old:
        if name not in new and name not in other:
            del ad[name]


class EvalAds:
    def __init__(self, keep: int = KEEP, keep_slots: int = KEEP_SLOTS) -> None:
        self.keep = keep
        self.keep_slots = keep_slots
        # key -> (static part or None, changing attributes, late attributes, the parsed ad)
        Entry = tuple[Any, Mapping[str, Any], Mapping[str, Any], classad2.ClassAd]
        self._shapes: OrderedDict[Hashable, Entry] = OrderedDict()   # by static part
        self._slots: OrderedDict[Hashable, Entry] = OrderedDict()    # by slot
        self.hits = 0
        self.misses = 0

    def slot_ad(self, slot_key: Hashable, static: _StaticPart | None, a: Mapping[str, Any],
                late: Mapping[str, Any]) -> classad2.ClassAd:
        """The parsed ad of a slot's parts (slotad.eval_parts): kept by its static part,
        or, if it has none, by `slot_key`."""
        if static is None:
            return self._get(self._slots, self.keep_slots, slot_key, None, a, late)
        return self._get(self._shapes, self.keep, static, static, a, late)

    def _get(self, table: OrderedDict, keep: int, key: Hashable, static: Any, a: Mapping[str, Any],
             late: Mapping[str, Any]) -> classad2.ClassAd:
        found = table.pop(key, None)
        if found is None or found[0] is not static:
            self.misses += 1
            ad = classad2.ClassAd(ads.ad_text(a) if static is None else _text(static, a, late))
        else:
            self.hits += 1
            _, old_a, old_late, ad = found
            _update(ad, old_a, a, late)
            if old_late or late:
                _update(ad, old_late, late, a)
        table[key] = (static, a, late, ad)
        if len(table) > keep:
            table.popitem(last=False)
        return ad


_ABSENT = object()
