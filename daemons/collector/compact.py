"""Compact ads for the collector: one tuple of shared attribute texts per ad, no ClassAd kept.

A pool's slot ads are nearly all alike: "Arch = "X86_64"", "Cpus = 1", the START and
WithinResourceLimits expressions are the same text in thousands of ads. So an ad is kept
as a tuple of its one-line "Name = value" item texts, each text interned (stored once for
the whole collector), plus a `Layout` shared by every ad with the same attribute names
(their positions, which are private). Printing an ad back is one join; a projection picks
items by position. Nothing keeps a parsed ClassAd, which costs several times the text.

Constraints are still evaluated by classad2, against a small ad of only the attributes
the constraint can reach: the attributes it names, and those their values name, and so
on. Ads that agree on those items agree on the result, so each distinct set of items is
parsed and evaluated once per query. Anything that could reach an attribute not named in
the text (eval(), a subscript, a whole-ad reference such as MY alone) or that is not the
same on every evaluation (random()) is evaluated the slow, exact way: against the whole
public ad, parsed for the purpose.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import classad2

from daemons.core import ads, limits

EMPTY_AD_TEXT = repr(classad2.ClassAd())
LAST_HEARD = "LastHeardFrom"
_LAST_HEARD_LOW = LAST_HEARD.lower()
_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What the reference analysis cannot follow: evaluation of built strings, subscripts and
# nested ads, the ad as a whole, and values that differ from one evaluation to the next.
_OPAQUE = re.compile(r"(?i)\beval\s*\(|\brandom\s*\(|\[|\b(?:my|parent|root|self|target|other)\b(?!\s*\.)")
_REFS_CACHE_LIMIT = 100_000
_MEMO_LIMIT = 100_000
_EMPTY = classad2.ClassAd()
# Attributes whose values differ in every ad: sharing their texts would only cost a table entry.
_UNSHARED = frozenset(("name", "claimid", "capability", "publicclaimid", "globaljobid", "jobid"))


class Layout:
    """What ads with the same attribute names (in the same order) share."""

    __slots__ = ("names", "index", "public", "public_index", "all_public", "unshared")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.index = {n.lower(): i for i, n in enumerate(names)}
        self.public = tuple(i for i, n in enumerate(names) if not ads.is_private(n))
        self.public_index = {names[i].lower(): i for i in self.public}
        self.all_public = len(self.public) == len(names)
        self.unshared = tuple(n.lower() in _UNSHARED for n in names)


def ad_text(items: Sequence[str]) -> str:
    return "[ " + "; ".join(items) + " ]" if items else EMPTY_AD_TEXT


class Interner:
    """The one copy of each item text and layout; swept of what no stored ad uses any more."""

    def __init__(self, sweep_floor: int = 50_000) -> None:
        self.items: dict[str, str] = {}
        self.layouts: dict[tuple[str, ...], Layout] = {}
        # Swept when it holds more than twice what was live at the last sweep, plus this.
        self.sweep_floor = sweep_floor
        self._swept_at = 0

    def compact(self, pairs: Iterable[tuple[str, str]], last_heard: int) -> tuple[Layout, tuple[str, ...]]:
        """(layout, items) of an ad given as (name, value text) pairs; LastHeardFrom goes last."""
        names, items = [], []
        intern = self.items.setdefault
        for name, value in pairs:
            low = name.lower()
            if low == _LAST_HEARD_LOW:
                continue
            names.append(name)
            text = f"{name} = {value}"
            items.append(text if low in _UNSHARED else intern(text, text))
        names.append(LAST_HEARD)
        items.append(self.last_heard_item(last_heard))
        key = tuple(names)
        layout = self.layouts.get(key)
        if layout is None:
            layout = self.layouts[key] = Layout(key)
        return layout, tuple(items)

    def compact_items(self, names: tuple[str, ...], items: list[str],
                      last_heard: int) -> tuple[Layout, tuple[str, ...]]:
        """compact() of an ad already in canonical item texts (Prepared), without LastHeardFrom."""
        key = names + (LAST_HEARD,)
        layout = self.layouts.get(key)
        if layout is None:
            layout = self.layouts[key] = Layout(key)
        intern = self.items.setdefault
        out = [t if unshared else intern(t, t) for t, unshared in zip(items, layout.unshared)]
        out.append(self.last_heard_item(last_heard))
        return layout, tuple(out)

    def refreshed(self, layout: Layout, items: tuple[str, ...], new: list[Item],
                  last_heard: int) -> tuple[str, ...] | None:
        """`items` with each of `new` in place of the item of the same name, and
        LastHeardFrom; None if one of them is not an attribute of the ad (spelt as there)."""
        out = list(items)
        index, names, unshared = layout.index, layout.names, layout.unshared
        intern = self.items.setdefault
        for text, name, _, _ in new:
            i = index.get(name.lower())
            if i is None or names[i] != name:
                return None
            out[i] = text if unshared[i] else intern(text, text)
        out[-1] = self.last_heard_item(last_heard)
        return tuple(out)

    def last_heard_item(self, last_heard: int) -> str:
        text = f"{LAST_HEARD} = {last_heard}"
        return self.items.setdefault(text, text)

    def needs_sweep(self) -> bool:
        return len(self.items) > 2 * self._swept_at + self.sweep_floor

    def sweep(self, live: Iterable[tuple[Layout, tuple[str, ...]]]) -> None:
        """Keep only the items and layouts that stored ads use."""
        items: dict[str, str] = {}
        layouts: dict[tuple[str, ...], Layout] = {}
        for layout, its in live:
            layouts[layout.names] = layout
            for n, t in zip(layout.names, its):
                if n.lower() not in _UNSHARED:
                    items[t] = t
        self.items, self.layouts, self._swept_at = items, layouts, len(items)


def public_text(layout: Layout, items: tuple[str, ...]) -> str:
    if layout.all_public:
        return ad_text(items)
    return ad_text([items[i] for i in layout.public])


def full_text(items: tuple[str, ...]) -> str:
    return ad_text(items)


def project(layout: Layout, items: tuple[str, ...], projection: Sequence[str], include_private: bool) -> str:
    """The named attributes, spelled as asked; private ones only if `include_private`."""
    index = layout.index if include_private else layout.public_index
    out, seen = [], set()
    for a in projection:
        low = a.lower()
        if low in seen or not _ATTR_NAME.fullmatch(a):
            continue
        i = index.get(low)
        if i is None:
            continue
        seen.add(low)
        out.append(f"{a} = {items[i][len(layout.names[i]) + 3:]}")
    return ad_text(out)


# ---- constraints -------------------------------------------------------------------------
_refs_cache: dict[str, tuple[frozenset[str], bool]] = {}


def _names(raw: Iterable[str]) -> frozenset[str]:
    """Attribute names (lower case) that references may reach in MY ad."""
    out = set()
    for r in raw:
        r = r.lstrip(".")           # ".Cpus": the outermost ad's, which is the ad itself here
        if not r:
            continue
        head, dot, rest = r.partition(".")
        if dot and head.lower() in ("my", "target", "other"):
            if head.lower() != "my":
                continue        # nothing but MY when a constraint is evaluated
            r = rest
        out.add(re.split(r"[.\[]", r, maxsplit=1)[0].lower())
    return frozenset(out)


_LITERAL = re.compile(r'"[^"\\]*"|-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|true|false|undefined|error')
_NO_REFS: tuple[frozenset[str], bool] = (frozenset(), False)


def expr_refs(text: str) -> tuple[frozenset[str], bool]:
    """(names an expression text may reach, whether it is opaque to this analysis); cached."""
    if _LITERAL.fullmatch(text):
        return _NO_REFS        # most values: nothing to parse, nothing to remember
    found = _refs_cache.get(text)
    if found is None:
        opaque = _OPAQUE.search(text) is not None
        names: frozenset[str] = frozenset()
        if not opaque:
            try:
                names = _names(_EMPTY.externalRefs(classad2.ExprTree(text + "\n")))
            except Exception:
                opaque = True
        found = (names, opaque)
        if len(_refs_cache) >= _REFS_CACHE_LIMIT:
            _refs_cache.clear()
        _refs_cache[text] = found
    return found


class Constraint:
    """One query's constraint, evaluated against compact ads (memoized for this query only)."""

    def __init__(self, tree: classad2.ExprTree) -> None:
        self.tree = tree
        self.names, self.opaque = expr_refs(ads.one_line(str(tree)))
        self._memo: dict[tuple[str, ...], bool] = {}

    def _reach(self, layout: Layout, items: tuple[str, ...]) -> tuple[str, ...] | None:
        """The public items the constraint can reach, in ad order; None if one is opaque."""
        index = layout.public_index
        need = set(self.names)
        todo = list(need)
        picked = []
        while todo:
            i = index.get(todo.pop())
            if i is None:
                continue
            picked.append(i)
            names, opaque = expr_refs(items[i][len(layout.names[i]) + 3:])
            if opaque:
                return None
            for n in names:
                if n not in need:
                    need.add(n)
                    todo.append(n)
        picked.sort()
        return tuple(items[i] for i in picked)

    def matches(self, layout: Layout, items: tuple[str, ...]) -> bool:
        reached = None if self.opaque else self._reach(layout, items)
        if reached is None:
            return self.matches_text(public_text(layout, items))
        found = self._memo.get(reached)
        if found is None:
            found = ads.is_true(ads.evaluate(self.tree, classad2.ClassAd(ad_text(reached))))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[reached] = found
        return found

    def matches_text(self, text: str) -> bool:
        """The exact way: the whole ad, parsed."""
        return ads.is_true(ads.evaluate(self.tree, classad2.ClassAd(text)))


# ---- updates without parsing the whole ad ------------------------------------------------------
# Values whose text is already what classad2 prints: plain integers, printable strings
# without escapes, the two booleans. Everything else is printed by classad2 once per
# distinct text (`Canon`).
_PLAIN_INT = re.compile(r"(?:0|[1-9][0-9]{0,14})\Z")
_PLAIN_STR = re.compile(r'"[ !#-\[\]-~]*"\Z')
_CANON_LIMIT = 100_000
# Attributes the collector itself reads; an update whose values for them are not plain
# literals is parsed the whole way (where ads.get evaluates them).
_KEY_ATTRS = frozenset(("mytype", "name", "myaddress"))


class Prepared:
    """An update read item by item: what AdStore.update_prepared stores. `names` and
    `items` are the attributes in order, each item its canonical "Name = value" text
    (LastHeardFrom left out: the collector sets its own)."""

    __slots__ = ("my_type", "name", "lifetime", "names", "items", "my_address")

    def __init__(self, my_type: str, name: str, lifetime: int | None, names: tuple[str, ...],
                 items: list[str], my_address: str | None) -> None:
        self.my_type, self.name, self.lifetime = my_type, name, lifetime
        self.names, self.items, self.my_address = names, items, my_address


class Canon:
    """Canonical value texts (as classad2 prints them in an ad), checked by classad2 once
    per distinct text, and attribute names classad2 takes."""

    def __init__(self, limit: int = _CANON_LIMIT) -> None:
        self.limit = limit
        self._values: dict[str, str] = {}
        self._names: set[str] = set()
        # Whole item texts already checked (prepare), a bounded number: item text ->
        # (canonical item, name, kind, canonical value).
        self.items: dict[str, tuple[str, str, int, str]] = {}

    def value(self, text: str) -> str | None:
        if text == "true" or text == "false" or _PLAIN_INT.match(text) or _PLAIN_STR.match(text):
            return text
        found = self._values.get(text)
        if found is None:
            found = self._print("HtcpoolValue", text)
            if found is None:
                return None
            if len(self._values) >= self.limit:
                self._values.clear()
            self._values[text] = found
        return found

    def name_ok(self, name: str) -> bool:
        low = name.lower()
        if low in self._names:
            return True
        if self._print(name, "0") is None:
            return False
        if len(self._names) >= self.limit:
            self._names.clear()
        self._names.add(low)
        return True

    @staticmethod
    def _print(name: str, value: str) -> str | None:
        text = f"[ {name} = {value} ]"
        # The bounds a whole ad is held to (an ad is as deep as its deepest item).
        if limits.problem(text, ad=True) is not None:
            return None
        try:
            ad = classad2.ClassAd(text)
        except Exception:
            return None
        if len(ad) != 1:
            return None
        pairs = ads.split_ad_text(repr(ad))
        if pairs is None or len(pairs) != 1 or pairs[0][0].lower() != name.lower():
            return None
        return pairs[0][1]


# What an attribute is to the collector (Canon.items' kinds).
_ORDINARY, _KEY, _LIFETIME, _LAG, _HEARD = range(5)


def _kind(low: str) -> int:
    if low in _KEY_ATTRS:
        return _KEY
    if low == "classadlifetime":
        return _LIFETIME
    if low.startswith("htcpoollooplag"):
        return _LAG
    return _HEARD if low == _LAST_HEARD_LOW else _ORDINARY


# One whole item of an ad printed as the daemons print them: "Name = value", no space at
# either end of the value (whose grammar is ads._ITEM's: string literals and anything but
# ';', '"' and the brackets of a nested ad).
_ONE_ITEM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*) = ((?=[^\s;])(?:"(?:[^"\\]++|\\.)*+"|[^;"\[\]]++)*+)(?<!\s)\Z')
_MEMO_ITEMS = 20_000


def _inner(text: str) -> str | None:
    t = text.strip()
    if len(t) < 2 or t[0] != "[" or t[-1] != "]":
        return None
    return t[1:-1].strip()


def prepare(text: str, canon: Canon) -> Prepared | None:
    """The update `text` read without parsing it whole, or None: then it must be parsed
    (it may be wrong, or not in the plain one-line form this reads, or carry a daemon's
    loop lag, which the lag policy reads from the parsed ad).

    Exact: the text is no longer than a parsed one may be, splits into items with no
    character left over, and every value and name is one classad2 takes on its own
    (within the bounds of core/limits.py), no name twice; such a text is the ad of
    those items. Besides the time, this spares the memory classad2 does not give back
    after parsing an ad.

    Most updates repeat items the collector has checked before (every slot ad's Arch,
    START, WithinResourceLimits...): in the daemons' printed form each whole item is
    checked once and then looked up (Canon.items), so an update costs a split and a
    dictionary lookup per item."""
    if len(text) > limits.current().max_ad_size:
        return None
    inner = _inner(text)
    if inner is None:
        return None
    # The daemons' form first: items joined by "; ". Each piece of the split that is a
    # whole item by itself (remembered, or matched alone) is one the strict split would
    # find too: a complete item's value ends outside any string literal, so the ';' after
    # it ends it there. A piece that is not (a "; " inside a string, other spacing) sends
    # the text the strict way.
    found = _read(inner, canon)
    if found is _NOT_PRINTED:
        return _prepare_strictly(text, canon)
    return None if found is None else _prepared(found)


Item = tuple[str, str, int, str]     # (canonical item text, name, kind, canonical value)
_NOT_PRINTED: list[Item] = []        # _read's answer for a text not in the printed form


def _read(inner: str, canon: Canon) -> list[Item] | None:
    """The items of `inner` in the daemons' printed form; _NOT_PRINTED when a piece is not
    a whole item by itself; None when one is, but classad2 would not take it."""
    memo = canon.items
    found: list[Item] = []
    for part in inner.split("; "):
        hit = memo.get(part)
        if hit is None:
            m = _ONE_ITEM.match(part)
            if m is None:
                return _NOT_PRINTED
            hit = _check_item(part, m.group(1), m.group(2), canon)
            if hit is None:
                return None
        found.append(hit)
    return found


def refresh_items(text: str, canon: Canon) -> list[Item] | None:
    """The items of a refresh ("A = 1; B = 2", possibly empty), each checked as an update's
    are; None if one does not read, or is one a refresh may not set (MyType, Name,
    MyAddress, ClassAdLifetime, LastHeardFrom, a daemon's lag), or is named twice."""
    if not text:
        return []
    if len(text) > limits.current().max_ad_size:
        return None
    found = _read(text, canon)
    if not found or any(kind for _, _, kind, _ in found):
        return None
    if len({name.lower() for _, name, _, _ in found}) != len(found):
        return None
    return found


def _check_item(item: str, name: str, value: str, canon: Canon) -> tuple[str, str, int, str] | None:
    """(canonical item text, name, kind, canonical value) of one item, remembered; None if
    classad2 would not take the name or the value."""
    if not canon.name_ok(name):
        return None
    v = canon.value(value)
    if v is None:
        return None
    hit = (item if v == value else f"{name} = {v}", name, _kind(name.lower()), v)
    memo = canon.items
    if len(memo) >= _MEMO_ITEMS:
        memo.clear()
    memo[item] = hit
    return hit


def _prepare_strictly(text: str, canon: Canon) -> Prepared | None:
    """prepare() of a text in any plain one-line form (ads.split_ad_text_strictly)."""
    pairs = ads.split_ad_text_strictly(text)
    if not pairs:
        return None
    found = []
    for name, value in pairs:
        hit = _check_item(f"{name} = {value}", name, value, canon)
        if hit is None:
            return None
        found.append(hit)
    return _prepared(found)


def _prepared(found: list[tuple[str, str, int, str]]) -> Prepared | None:
    seen: set[str] = set()
    names: list[str] = []
    items: list[str] = []
    key: dict[str, str] = {}
    lifetime: int | None = None
    for canonical, name, kind, v in found:
        low = name.lower()
        if low in seen:
            return None
        seen.add(low)
        if kind:
            if kind == _KEY:
                if not _PLAIN_STR.match(v):
                    return None
                key[low] = v[1:-1]
            elif kind == _LIFETIME:
                if not _PLAIN_INT.match(v):
                    return None
                lifetime = int(v)
            elif kind == _LAG:
                return None
            else:
                continue      # LastHeardFrom: the collector's own goes last
        names.append(name)
        items.append(canonical)
    if not key.get("mytype") or not key.get("name"):
        return None
    return Prepared(key["mytype"], key["name"], lifetime, tuple(names), items, key.get("myaddress"))
