"""Significant attributes: the job attributes the pool's machines can look at. Pure.

HTCondor (matchmaker.cpp, compute_significant_attrs): every attribute of every
machine ad, except list-valued ones, contributes the names it refers to that the
machine ad does not define itself (TARGET.x counts as x); so do the negotiator's
policy expressions (PREEMPTION_REQUIREMENTS, PREEMPTION_RANK, NEGOTIATOR_PRE_JOB_RANK,
NEGOTIATOR_POST_JOB_RANK, and NEGOTIATOR_JOB_CONSTRAINT) evaluated against a sample
machine ad. Names that are never job attributes are removed: HTCondor's own list
(CurrentTime and the priority and usage figures the negotiator inserts) and the
machine-local names a slot carries about itself (SlotID, PartitionableSlot, RemoteUser*,
Slot<N>_*). The result is sorted case-insensitively; a schedd receives it as its
AutoClusterAttrs list.

Work is cached by expression text and by ad text, so a cycle only analyses ads that
changed since the previous one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable, Iterable, Sequence

import classad2

REMOVED = frozenset(n.lower() for n in (
    # HTCondor's list
    "CurrentTime", "RemoteUserPrio", "RemoteUserResourcesInUse", "RemoteGroupResourcesInUse", "SubmittorPrio",
    "SubmitterUserPrio", "SubmitterUserResourcesInUse", "SubmitterGroupResourcesInUse",
    # machine-local names: a slot's facts about itself, never a job's
    "SlotID", "PartitionableSlot", "DynamicSlot", "RemoteOwner", "RemoteUser",
))
_MACHINE_LOCAL = re.compile(r"^(RemoteUser|Slot\d+_)", re.IGNORECASE)

if TYPE_CHECKING:
    from daemons.negotiator.slotads import SlotView

_EMPTY = classad2.ClassAd()


def _trim(ref: str) -> tuple[str | None, str]:
    """('target' | 'my' | None, the attribute name) as HTCondor's TrimReferenceNames sees it."""
    head, dot, rest = ref.partition(".")
    qualifier = None
    if dot and head.lower() in ("target", "other", "my"):
        qualifier = "my" if head.lower() == "my" else "target"
        ref = rest
    elif ref.startswith("."):
        ref = ref[1:]
    return qualifier, re.split(r"[.\[]", ref, maxsplit=1)[0]


def is_removed(name: str) -> bool:
    return name.lower() in REMOVED or bool(_MACHINE_LOCAL.match(name))


@dataclass
class SignificantAttributes:
    """Computes the list each cycle; remembers what it learned about expressions and ads."""
    _refs_by_text: dict[str, tuple[tuple[str | None, str], ...]] = field(default_factory=dict)
    _by_ad_text: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _by_view_key: dict[Hashable, tuple[str, ...]] = field(default_factory=dict)
    # The last list's removed names that something did refer to (lower case): the figures
    # the negotiator puts in each request (SubmitterUserPrio...) that a slot or a policy
    # looks at. Not significant to a schedd, whose jobs lack them, but they tell requests
    # apart for the matchmaker as significant attributes do.
    inserted_refs: frozenset[str] = frozenset()

    def _refs(self, text: str, tree: classad2.ExprTree | None = None) -> tuple[tuple[str | None, str], ...]:
        refs = self._refs_by_text.get(text)
        if refs is None:
            try:
                raw = _EMPTY.externalRefs(tree if tree is not None else classad2.ExprTree(text + "\n"))
            except Exception:
                raw = []
            refs = tuple(_trim(r) for r in raw if r)  # classad2 reports [''] for a literal
            self._refs_by_text[text] = refs
        return refs

    def of_ad(self, ad: classad2.ClassAd, text: str | None = None) -> tuple[str, ...]:
        """Job attributes one machine ad refers to, in the ad's order (cached by the ad's text)."""
        if text is not None:
            cached = self._by_ad_text.get(text)
            if cached is not None:
                return cached
        keys = {k.lower() for k in ad.keys()}
        out: dict[str, str] = {}   # lower -> first spelling, in order: deterministic whatever the hash seed
        for k in ad.keys():
            value = ad[k]
            if not isinstance(value, classad2.ExprTree):
                continue  # literals refer to nothing; list values are skipped, as in HTCondor
            tree = ad.lookup(k)
            for qualifier, name in self._refs(str(tree), tree):
                if qualifier == "my":
                    continue
                if qualifier is None and name.lower() in keys:
                    continue
                out.setdefault(name.lower(), name)
        result = tuple(out.values())
        if text is not None:
            self._by_ad_text[text] = result
        return result

    def of_policy(self, exprs: Iterable[str], sample: classad2.ClassAd | None) -> list[str]:
        """Names the negotiator's policy expressions refer to outside a sample machine ad."""
        keys = {k.lower() for k in sample.keys()} if sample is not None else set()
        out: list[str] = []
        for text in exprs:
            if not text:
                continue
            for qualifier, name in self._refs(text):
                if qualifier == "my" or (qualifier is None and name.lower() in keys):
                    continue
                out.append(name)
        return out

    def compute(self, slot_ads: list[tuple[classad2.ClassAd, str]], policy_exprs: Iterable[str] = (),
                job_constraint: str = "") -> list[str]:
        """The significant attributes of a cycle, from (ad, ad text) pairs."""
        if not slot_ads:
            self.inserted_refs = frozenset()
            return []  # HTCondor: "if no startd ads, there are no sig attrs"
        # lower -> the first spelling seen, ads in order: HTCondor's References is a
        # case-insensitive set that keeps the spelling it met first.
        by_lower: dict[str, str] = {}
        seen: set[tuple[str, ...]] = set()
        current_texts = set()
        for ad, text in slot_ads:
            refs = self.of_ad(ad, text)
            current_texts.add(text)
            if refs not in seen:  # many ads share one result: merge each once
                seen.add(refs)
                for name in refs:
                    by_lower.setdefault(name.lower(), name)
        # Forget ads that left the pool or changed, so the cache does not grow without end.
        if len(self._by_ad_text) > 2 * max(1, len(current_texts)):
            self._by_ad_text = {t: r for t, r in self._by_ad_text.items() if t in current_texts}
        for name in self.of_policy(policy_exprs, slot_ads[0][0]) + self.of_policy([job_constraint], None):
            by_lower.setdefault(name.lower(), name)
        return self._result(by_lower)

    def compute_views(self, views: Sequence["SlotView"], policy_exprs: Iterable[str] = (),
                      job_constraint: str = "") -> list[str]:
        """compute() over slot views: ads alike in all but literal instance attributes
        (same shape, same attribute names) refer to the same job attributes, so each
        such kind of ad is analysed, and parsed, once."""
        if not views:
            self.inserted_refs = frozenset()
            return []
        by_lower: dict[str, str] = {}
        seen: set[tuple[str, ...]] = set()
        current: set[Hashable] = set()
        cache = self._by_view_key
        for v in views:
            key = v.sig_key
            refs = cache.get(key)
            if refs is None:
                refs = cache[key] = self.of_ad(v.ad)
            current.add(key)
            if refs not in seen:
                seen.add(refs)
                for name in refs:
                    by_lower.setdefault(name.lower(), name)
        if len(cache) > 2 * max(1, len(current)) + 100:
            self._by_view_key = {k: r for k, r in cache.items() if k in current}
        for name in self.of_policy(policy_exprs, views[0].ad) + self.of_policy([job_constraint], None):
            by_lower.setdefault(name.lower(), name)
        return self._result(by_lower)

    def _result(self, by_lower: dict[str, str]) -> list[str]:
        self.inserted_refs = frozenset(low for low, n in by_lower.items() if n and is_removed(n))
        return sorted((n for n in by_lower.values() if n and not is_removed(n)), key=str.lower)
