"""Parsed slot ads for policy evaluation, kept for the slots evaluated last.

A claim evaluates the slot's Requirements, RANK and MODIFY_REQUEST_EXPR_* with the slot
ad as MY, and so does every activation; building that ad meant printing the slot's
attributes and parsing the text (about 50 microseconds), two to four times per match.
Between those evaluations only a few attributes of the slot differ (State, Activity,
EnteredCurrentState, the claim's, the job's, CurrentTime...). So the parsed ad of each
slot evaluated lately is kept with the attributes it was made from, and the next time
only what differs is set on it: the same ad a fresh parse would give
(tests/unit/test_eval_ads.py compares them). A kept ad is brought up to date by what it
holds, not by whose it was, so a key reused by another slot costs a miss at worst.

An ad is given as the parts slotad.py builds it from: a static part shared by every slot
of its shape (printed once, compared by identity) and the two dicts of what changes. A
kept ad whose static part is the same object needs only those dicts compared.

Two tables, because a parsed ad costs about 5 KB: a partitionable slot is claimed again
and again (its leftovers), so the last KEEP of them are kept; a static or dynamic slot is
claimed once and activated once or a few times, close together, so only the last
KEEP_SHORT of them are: enough to span a burst's claim and activation calls, and a startd
of 50,000 static slots keeps about 1 MB.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Hashable, Mapping

import classad2

from daemons.core import ads

if TYPE_CHECKING:
    from daemons.startd.slotad import _StaticPart

KEEP = 2048       # partitionable slots whose parsed ad is kept
KEEP_SHORT = 256  # other slots'

_NOTHING: Mapping[str, Any] = {}


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
    def __init__(self, keep: int = KEEP, keep_short: int = KEEP_SHORT) -> None:
        self.keep = keep
        self.keep_short = keep_short
        # key -> (static part or None, changing attributes, late attributes, the parsed ad)
        Entry = tuple[Any, Mapping[str, Any], Mapping[str, Any], classad2.ClassAd]
        self._ads: OrderedDict[Hashable, Entry] = OrderedDict()
        self._short: OrderedDict[Hashable, Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, attrs: Mapping[str, Any]) -> classad2.ClassAd:
        """The parsed ad of `attrs` (the slot `key`'s ad now). The caller must not change it."""
        return self._get(self._ads, self.keep, key, None, attrs, _NOTHING)

    def get_parts(self, key: Hashable, static: "_StaticPart | None", a: Mapping[str, Any],
                  late: Mapping[str, Any], *, short: bool) -> classad2.ClassAd:
        """The parsed ad of a slot's parts (slotad.eval_parts). `short`: a static or
        dynamic slot's."""
        if short:
            return self._get(self._short, self.keep_short, key, static, a, late)
        return self._get(self._ads, self.keep, key, static, a, late)

    def _get(self, table: OrderedDict, keep: int, key: Hashable, static: Any, a: Mapping[str, Any],
             late: Mapping[str, Any]) -> classad2.ClassAd:
        found = table.pop(key, None)
        if found is None or found[0] is not static:
            self.misses += 1
            ad = classad2.ClassAd(ads.ad_text(a) if static is None else _printed(static, a, late))
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


def _printed(static: "_StaticPart", a: Mapping[str, Any], late: Mapping[str, Any]) -> str:
    from daemons.startd.slotad import _text
    return _text(static, a, late)


_ABSENT = object()
