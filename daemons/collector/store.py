"""The collector's ad store: pure, no I/O; time is passed in.

Ads are keyed by (MyType, Name), as HTCondor keys them. Each update stamps
LastHeardFrom; an ad expires when LastHeardFrom + lifetime has passed, the lifetime
being the ad's own ClassAdLifetime or else CLASSAD_LIFETIME (HTCondor's rule).
Claim ids are private (ads.is_private): kept apart from the ad, as HTCondor's collector
keeps a startd's private ad apart. Constraints are evaluated against the public ad only
(so no query can test a claim id's characters one by one), and the private attributes
are added to what is returned only when asked, which only callers holding NEGOTIATOR
may (the security table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import classad2

from daemons.core import ads


class StoreError(ValueError):
    pass


@dataclass
class StoredAd:
    my_type: str
    name: str
    ad: classad2.ClassAd                   # the public ad: what constraints see
    full_text: str
    public_text: str
    last_heard: float
    lifetime: float
    private: classad2.ClassAd | None = None   # the private attributes, if any

    def expired(self, now: float) -> bool:
        return now > self.last_heard + self.lifetime


def _key(my_type: str, name: str) -> tuple[str, str]:
    return (my_type.lower(), name)


class AdStore:
    def __init__(self, default_lifetime_s: float) -> None:
        self.default_lifetime_s = default_lifetime_s
        self._ads: dict[tuple[str, str], StoredAd] = {}
        self.updates_total = 0
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

    def update(self, ad: classad2.ClassAd, now: float, what: str = "ad") -> StoredAd:
        my_type, name = self.check(ad, what)
        ad["LastHeardFrom"] = int(now)
        lifetime = ads.get(ad, "ClassAdLifetime")
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
            lifetime = self.default_lifetime_s
        full = repr(ad)
        public_ad = ads.without_private(ad)
        private = None
        if public_ad is not ad:
            private = ads.project(ad, [k for k in ad.keys() if ads.is_private(k)])
        public = full if private is None else repr(public_ad)
        stored = StoredAd(my_type, name, public_ad, full, public, now, float(lifetime), private)
        self._ads[_key(my_type, name)] = stored
        self.updates_total += 1
        return stored

    def invalidate(self, my_type: str, names: Iterable[str] = (),
                   constraint: classad2.ExprTree | None = None, check: Callable[[], None] | None = None) -> int:
        """Remove ads by name and by constraint; `check` (ads.work_budget) may stop the
        constraint's evaluation, and then nothing is removed."""
        doomed = []
        if constraint is not None:
            for key, stored in self._ads.items():
                if check is not None:
                    check()
                if self._type_matches(stored, my_type) and ads.is_true(ads.evaluate(constraint, stored.ad)):
                    doomed.append(key)
        removed = 0
        for n in names:
            if self._ads.pop(_key(my_type, n), None) is not None:
                removed += 1
        for key in doomed:
            if self._ads.pop(key, None) is not None:
                removed += 1
        self.invalidated_total += removed
        return removed

    @staticmethod
    def _type_matches(stored: StoredAd, my_type: str) -> bool:
        return my_type in ("", "Any", "any") or stored.my_type.lower() == my_type.lower()

    def query(self, my_type: str, now: float, constraint: classad2.ExprTree | None = None,
              projection: Sequence[str] = (), include_private: bool = False,
              check: Callable[[], None] | None = None) -> list[str]:
        out: list[str] = []
        for stored in self._ads.values():
            if not self._type_matches(stored, my_type) or stored.expired(now):
                continue
            if constraint is not None:
                if check is not None:
                    check()
                if not ads.is_true(ads.evaluate(constraint, stored.ad)):
                    continue
            if projection:
                shown = ads.project(stored.ad, projection)
                if include_private and stored.private is not None:
                    for a in projection:
                        if a in stored.private:
                            shown[a] = stored.private.lookup(a)
                out.append(repr(shown))
            else:
                out.append(stored.full_text if include_private else stored.public_text)
        return out

    def expire(self, now: float) -> list[StoredAd]:
        gone = [s for s in self._ads.values() if s.expired(now)]
        for s in gone:
            del self._ads[_key(s.my_type, s.name)]
        self.expired_total += len(gone)
        return gone

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self._ads.values():
            out[s.my_type] = out.get(s.my_type, 0) + 1
        return out
