"""The collector's ad store: pure, no I/O; time is passed in.

Ads are keyed by (MyType, Name), as HTCondor keys them. Each update stamps
LastHeardFrom; an ad expires when LastHeardFrom + lifetime has passed, the lifetime
being the ad's own ClassAdLifetime or else CLASSAD_LIFETIME (HTCondor's rule).
Claim ids are private (ads.is_private): constraints are evaluated against the public
attributes only (so no query can test a claim id's characters one by one), and the
private attributes are added to what is returned only when asked, which only callers
holding NEGOTIATOR may (the security table).

Storage is compact (collector/compact.py): an ad is a tuple of shared attribute texts,
not a parsed ClassAd plus its text. An update in the plain one-line form daemons send is
read item by item (`prepare`), each distinct value text checked and printed by classad2
once; anything else is parsed whole (`update`).
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable, Iterator, Sequence

import classad2

from daemons.collector import compact
from daemons.core import ads

LAG_ATTR = "HtcpoolLoopLagSustainedWall"


class StoreError(ValueError):
    pass


class StoredAd:
    """One ad. `items` is None for an ad whose text the compact form cannot split safely
    (nested ads, quoted attribute names): it keeps its printed texts instead."""

    __slots__ = ("my_type", "name", "layout", "items", "texts", "last_heard", "lifetime")

    def __init__(self, my_type: str, name: str, layout: compact.Layout | None, items: tuple[str, ...] | None,
                 texts: tuple[str, str] | None, last_heard: float, lifetime: float) -> None:
        self.my_type, self.name = my_type, name
        self.layout, self.items, self.texts = layout, items, texts
        self.last_heard, self.lifetime = last_heard, lifetime

    def expired(self, now: float) -> bool:
        return now > self.last_heard + self.lifetime

    def text(self, include_private: bool = False) -> str:
        if self.items is None:
            assert self.texts is not None
            return self.texts[0] if include_private else self.texts[1]
        assert self.layout is not None
        return compact.full_text(self.items) if include_private else compact.public_text(self.layout, self.items)

    def projected(self, projection: Sequence[str], include_private: bool) -> str:
        if self.items is not None:
            assert self.layout is not None
            return compact.project(self.layout, self.items, projection, include_private)
        ad = classad2.ClassAd(self.text(include_private=True))
        shown = classad2.ClassAd()
        for a in projection:
            if ads.is_attr_name(a) and a in ad and (include_private or not ads.is_private(a)):
                shown[a] = ad.lookup(a)
        return repr(shown)

    def matches(self, constraint: compact.Constraint) -> bool:
        if self.items is None:
            assert self.texts is not None
            return constraint.matches_text(self.texts[1])
        assert self.layout is not None
        return constraint.matches(self.layout, self.items)


def _key(my_type: str, name: str) -> tuple[str, str]:
    return (sys.intern(my_type.lower()), name)


class AdStore:
    def __init__(self, default_lifetime_s: float) -> None:
        self.default_lifetime_s = default_lifetime_s
        self._ads: dict[tuple[str, str], StoredAd] = {}
        # The same ads by lower-case MyType: a query of the negotiator's or the schedds' few
        # ads must not walk 50,000 slot ads (it did, for every query, several a second).
        self._by_type: dict[str, dict[tuple[str, str], StoredAd]] = {}
        self._interner = compact.Interner()
        self._canon = compact.Canon()
        self.updates_total = 0
        self.prepared_total = 0       # updates read item by item, not parsed whole
        self.refreshed_total = 0      # ads refreshed (UpdateAdsRequest.refreshes)
        self.expired_total = 0
        self.invalidated_total = 0

    def __len__(self) -> int:
        return len(self._ads)

    @staticmethod
    def check(ad: classad2.ClassAd, what: str = "ad") -> tuple[str, str]:
        """The ad's key, or StoreError naming what is wrong with it."""
        my_type = ads.get(ad, "MyType")
        name = ads.get(ad, "Name")
        if not isinstance(my_type, str) or not my_type:
            raise StoreError(f"{what}: MyType is missing or not a string")
        if not isinstance(name, str) or not name:
            raise StoreError(f"{what}: Name is missing or not a string")
        return my_type, name

    # ---- updates ------------------------------------------------------------------------------
    def refresh_items(self, text: str) -> list[compact.Item] | None:
        return compact.refresh_items(text, self._canon)

    def prepare(self, text: str) -> compact.Prepared | None:
        """An update read without parsing it whole, or None: then parse it and call update."""
        return compact.prepare(text, self._canon)

    def update_prepared(self, p: compact.Prepared, now: float) -> StoredAd:
        lifetime = float(p.lifetime) if p.lifetime else self.default_lifetime_s
        layout, items = self._interner.compact_items(p.names, p.items, int(now))
        stored = StoredAd(sys.intern(p.my_type), p.name, layout, items, None, now, lifetime)
        self._put(_key(p.my_type, p.name), stored)
        self.updates_total += 1
        self.prepared_total += 1
        return stored

    def refresh(self, my_type: str, name: str, new: list[compact.Item], now: float) -> bool:
        """Set `new` (refresh_items) in a stored ad, and LastHeardFrom, as a whole update of
        the ad with those values would; False (nothing changed) if there is no such ad (or
        it has expired), or it is kept uncompacted, or one of the items is not in it."""
        stored = self._ads.get(_key(my_type, name))
        if stored is None or stored.items is None or stored.expired(now):
            return False
        assert stored.layout is not None
        items = self._interner.refreshed(stored.layout, stored.items, new, int(now))
        if items is None:
            return False
        stored.items, stored.last_heard = items, now
        self.refreshed_total += 1
        return True

    def update(self, ad: classad2.ClassAd, now: float, what: str = "ad") -> StoredAd:
        my_type, name = self.check(ad, what)
        lifetime = ads.get(ad, "ClassAdLifetime")
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
            lifetime = self.default_lifetime_s
        if compact.LAST_HEARD in ad:
            del ad[compact.LAST_HEARD]
        printed = repr(ad)
        pairs = ads.split_ad_text(printed)
        if pairs is not None and len(pairs) == len(ad):
            layout, items = self._interner.compact(pairs, int(now))
            stored = StoredAd(sys.intern(my_type), name, layout, items, None, now, float(lifetime))
        else:
            ad[compact.LAST_HEARD] = int(now)
            full = repr(ad)
            public = ads.without_private(ad)
            stored = StoredAd(sys.intern(my_type), name, None, None,
                              (full, full if public is ad else repr(public)), now, float(lifetime))
        self._put(_key(my_type, name), stored)
        self.updates_total += 1
        return stored

    def _put(self, key: tuple[str, str], stored: StoredAd) -> None:
        self._ads[key] = stored
        kind = self._by_type.get(key[0])
        if kind is None:
            kind = self._by_type[key[0]] = {}
        kind[key] = stored

    def _pop(self, key: tuple[str, str]) -> StoredAd | None:
        stored = self._ads.pop(key, None)
        if stored is not None:
            kind = self._by_type.get(key[0])
            if kind is not None:
                kind.pop(key, None)
                if not kind:
                    del self._by_type[key[0]]
        return stored

    def _of_type(self, my_type: str) -> Iterable[StoredAd]:
        """The ads a query or invalidation of `my_type` looks at ("", Any: every ad)."""
        if my_type in ("", "Any", "any"):
            return list(self._ads.values())
        kind = self._by_type.get(my_type.lower())
        return list(kind.values()) if kind else []

    # ---- invalidation, queries, expiry -------------------------------------------------------
    def invalidate(self, my_type: str, names: Iterable[str] = (),
                   constraint: classad2.ExprTree | None = None, check: Callable[[], None] | None = None) -> int:
        """Remove ads by name and by constraint; `check` (ads.work_budget) may stop the
        constraint's evaluation, and then nothing is removed."""
        doomed = []
        if constraint is not None:
            c = compact.Constraint(constraint)
            for stored in self._of_type(my_type):
                if check is not None:
                    check()
                if stored.matches(c):
                    doomed.append(_key(stored.my_type, stored.name))
        removed = 0
        for n in names:
            if self._pop(_key(my_type, n)) is not None:
                removed += 1
        for key in doomed:
            if self._pop(key) is not None:
                removed += 1
        self.invalidated_total += removed
        return removed

    def select(self, my_type: str, now: float, constraint: classad2.ExprTree | None = None,
               check: Callable[[], None] | None = None) -> list[StoredAd]:
        """The live ads of the type that the constraint selects (evaluated on public attributes)."""
        c = compact.Constraint(constraint) if constraint is not None else None
        out = []
        for stored in self._of_type(my_type):
            if stored.expired(now):
                continue
            if c is not None:
                if check is not None:
                    check()
                if not stored.matches(c):
                    continue
            out.append(stored)
        return out

    @staticmethod
    def render(selected: Iterable[StoredAd], projection: Sequence[str] = (),
               include_private: bool = False) -> Iterator[str]:
        """The texts of selected ads, printed one at a time (a big answer is never all in memory)."""
        for stored in selected:
            yield stored.projected(projection, include_private) if projection else stored.text(include_private)

    def query(self, my_type: str, now: float, constraint: classad2.ExprTree | None = None,
              projection: Sequence[str] = (), include_private: bool = False,
              check: Callable[[], None] | None = None) -> list[str]:
        return list(self.render(self.select(my_type, now, constraint, check), projection, include_private))

    def expire(self, now: float) -> list[StoredAd]:
        gone = [s for s in self._ads.values() if s.expired(now)]
        for s in gone:
            self._pop(_key(s.my_type, s.name))
        self.expired_total += len(gone)
        if self._interner.needs_sweep():
            self._interner.sweep((s.layout, s.items) for s in self._ads.values() if s.items is not None)
        return gone

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self._ads.values():
            out[s.my_type] = out.get(s.my_type, 0) + 1
        return out
