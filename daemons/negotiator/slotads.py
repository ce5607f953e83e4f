"""Slot ads as a negotiation cycle reads them: a cheap pass per ad, the real work once per shape.

Beyond HTCondor (seed 000's "Future Work": cluster machine ads as jobs are clustered).
In a big pool most slot ads differ only in per-instance attributes: Name, SlotID,
addresses, claim ids, timestamps (`INSTANCE_ATTRS`). An ad's *shape* is its text with
those attributes cut out, found by one regular expression over the text (for a shape
met often, by a pattern of that shape's cut: `Template`); everything
that depends only on the rest of the ad is worked out once per shape: the attribute
texts that group slots for matching, the slot attributes its expressions look at,
values such as State and SlotWeight, whether it has a consumption policy. Per ad
there is only the cut itself and a few dictionary look-ups, and an ad is parsed
into a ClassAd only when something has to evaluate it (a group's first slot, a
request that looks at single slots, a partitionable slot split by a consumption
policy), not for being counted.

Exactness: slots of one shape have identical texts for every other attribute, so
anything computed from those attributes holds for all of them. An instance
attribute that some expression refers to is taken back into account wherever it
matters (the matchmaker's grouping key, a per-slot SlotWeight). Text the cut cannot
read safely (escapes, a ';' inside a string, quoted attribute names, another
printer's spacing) falls back to reading the ad attribute by attribute, which only
makes groups finer.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Hashable, Sequence

import classad2

from daemons.core import ads

# Attributes that tell otherwise identical slots apart without making them match differently.
INSTANCE_ATTR_NAMES = (
    "Name", "Machine", "SlotID", "MyAddress", "StartdIpAddr", "ClaimId", "Capability", "PublicClaimId",
    "LastHeardFrom", "DaemonStartTime", "EnteredCurrentState", "EnteredCurrentActivity",
    "UpdateSequenceNumber", "KeyboardIdle", "CurrentTime", "MyCurrentTime", "NumDynamicSlots", "ChildCpus",
    "UidDomain", "FileSystemDomain", "StartdName",
    # The claim and its job: claimed slots of one kind differ in these.
    "JobId", "GlobalJobId", "JobStart", "TotalJobRunTime", "TotalClaimRunTime", "RetirementTimeRemaining",
    "RemoteOwner", "RemoteUser", "RemoteScheddName", "ClientMachine", "AccountingGroup", "ConcurrencyLimits",
    "PreemptingUser", "PreemptingRank", "PreemptingAccountingGroup",
    # Draining: the startd works these out afresh for every ad it sends (a machine that runs
    # nothing expects to finish draining "now"), so they differ between machines and updates.
    "ExpectedMachineGracefulDrainingCompletion", "ExpectedMachineGracefulDrainingBadput",
    "ExpectedMachineQuickDrainingCompletion", "ExpectedMachineQuickDrainingBadput",
    "LastDrainStartTime", "LastDrainCompletionTime", "DrainingRequestId",
)
INSTANCE_ATTRS = frozenset(a.lower() for a in INSTANCE_ATTR_NAMES)
# `CurrentTime` is the negotiator's own (it sets it before evaluating): never part of a key.
_CURRENT_TIME = "currenttime"


def name_pattern(names: Sequence[str]) -> str:
    """A regular expression matching exactly `names`, factored by common prefixes: re tries a
    plain alternation's words one by one at every position, a factored one fails at the
    first letter that no name continues with (the split below took 40 % less time)."""
    heads: dict[str, list[str]] = {}
    for n in names:
        heads.setdefault(n[:1], []).append(n[1:])
    parts = []
    for head, tails in sorted(heads.items()):
        if not head:
            continue
        rest = [t for t in tails if t]
        tail = name_pattern(rest) if rest else ""
        if rest and len(rest) < len(tails):
            tail = f"(?:{tail})?"   # the head alone is a name too
        parts.append(re.escape(head) + tail)
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


# "; Name = value" of an instance attribute in "; "-separated one-line ad text. Split
# with the groups, the text falls apart into [shape piece, name, value, shape piece, ...].
_INSTANCE_ITEM = re.compile(r"; (" + name_pattern(INSTANCE_ATTR_NAMES) + r") = ([^;]*)")
_WORDS = frozenset(("true", "false", "undefined", "error"))
_CACHE_LIMIT = 20_000
# Cuts compiled into templates: the two most recently used are tried on each new text (a
# template of another shape whose pieces have the same lengths fails only after a whole
# match, 3 µs; ads mostly come in runs of one shape, a machine's slots together), and a
# cut is compiled once the general split has made it this many times. A template read
# saves about 6 µs of a split and a compile costs about 1.5 ms: the cut is compiled once
# the splits it could have saved have cost what the compile does (the rent-or-buy rule,
# never more than twice the better choice in hindsight). A shape per ad never compiles.
_TEMPLATES_TRIED = 2
TEMPLATE_AFTER = 256


def is_literal_text(text: str) -> bool:
    """True for texts that are literals whatever the ad (they refer to nothing); False if unsure."""
    c = text[:1]
    if c == '"':
        return len(text) > 1 and text[-1] == '"' and text.count('"') == 2 and "\\" not in text
    if c.isdigit() or (c == "-" and text[1:2].isdigit()):
        try:
            float(text)
        except ValueError:
            return False
        return True
    return text in _WORDS


def string_value(text: str) -> str | None:
    """The string a simple string-literal text stands for, else None."""
    if len(text) > 1 and text[0] == '"' and text[-1] == '"' and text.count('"') == 2 and "\\" not in text:
        return text[1:-1]
    return None


class Shape:
    """What slots of one shape share: every attribute but the instance ones."""

    __slots__ = ("id", "items", "values", "machine_refs", "memo", "got", "dependent")

    def __init__(self, shape_id: int, items: tuple[tuple[str, str], ...], machine_refs: frozenset[str]) -> None:
        self.id = shape_id
        self.items = items                      # (lower name, value text), sorted
        self.values = dict(items)
        self.machine_refs = machine_refs        # slot attributes these attributes' expressions refer to
        self.memo: dict[str, Any] = {}          # per-shape results others compute (weights, policies)
        self.got: dict[str, Any] = {}           # SlotView.get results of shape attributes
        self.dependent = bool(machine_refs & INSTANCE_ATTRS)   # its expressions look at instance attributes


class Template:
    """A shape's cut as one anchored pattern: each piece of the shape's text as a group of
    its length, each instance attribute as `; Name = ([^;]*)`. A text the pattern matches
    whole, whose piece groups are the shape's pieces, falls apart exactly as
    `_INSTANCE_ITEM.split` would cut it. No cut can start inside a piece: a match of
    `; Name = ` that begins in a piece ends inside it (what follows a piece starts with
    ';' or ends the text), so the split, which found none in those same pieces when it
    learnt the cut, finds none now; and each value runs to the next ';' as the split's
    does, since every piece after a value starts with ';' or is the text's end. So the
    values are the match's other groups, and the shape and names are the template's.
    About a third of the split's cost on the bench's slot ads, and no join and hash of
    the shape's text. (Pieces as lengths, compared afterwards as strings, keep the
    pattern short: re compiles a long literal slowly, character by character.)"""

    __slots__ = ("fullmatch", "pieces", "shape", "names")

    def __init__(self, pieces: Sequence[str], names: tuple[str, ...], shape: Shape) -> None:
        pattern = f"(.{{{len(pieces[0])}}})" + "".join(
            f"; {re.escape(n)} = ([^;]*)(.{{{len(piece)}}})" for n, piece in zip(names, pieces[1:]))
        self.fullmatch = re.compile(pattern, re.DOTALL).fullmatch
        self.pieces = tuple(pieces)
        self.shape = shape
        self.names = names


class SlotView:
    """One slot ad of a cycle: its text, its shape, its instance attributes, its ad when needed."""

    __slots__ = ("text", "_ad", "_parse", "shape", "names", "values", "machine_refs", "sig_key", "_dependent",
                 "_index")

    def __init__(self, text: str, ad: classad2.ClassAd | None, parse: Callable[[str], classad2.ClassAd] | None,
                 shape: Shape, names: tuple[str, ...], values: tuple[str, ...], machine_refs: frozenset[str],
                 instance_exprs: tuple[tuple[str, str], ...] = ()) -> None:
        self.text = text
        self._ad = ad
        self._parse = parse
        self.shape = shape
        self.names = names                      # instance attributes as spelled, in text order
        self.values = values                    # and their value texts
        self.machine_refs = machine_refs        # the shape's, plus those of instance expressions
        # Equal for ads whose significant attributes are sure to be equal: same shape,
        # same attribute names, same instance expressions.
        self.sig_key: Hashable = (shape.id, names, instance_exprs)
        self._dependent = shape.dependent if machine_refs is shape.machine_refs else \
            bool(machine_refs & INSTANCE_ATTRS)
        self._index: dict[str, int] | None = None   # lower-cased instance name -> position, when first asked

    @property
    def ad(self) -> classad2.ClassAd:
        if self._ad is None:
            assert self._parse is not None
            self._ad = self._parse(self.text)
        return self._ad

    @property
    def parsed(self) -> bool:
        return self._ad is not None

    @property
    def instance(self) -> tuple[tuple[str, str], ...]:
        """(lower name, value text) of the instance attributes, sorted; CurrentTime left out."""
        return tuple(sorted((n.lower(), v) for n, v in zip(self.names, self.values) if n.lower() != _CURRENT_TIME))

    @property
    def items(self) -> tuple[tuple[str, str], ...]:
        """Every attribute (lower name, value text), sorted; CurrentTime left out."""
        return tuple(sorted(self.shape.items + self.instance))

    def get(self, name: str, default: Any = None) -> Any:
        """ads.get(ad, name), straight from the text when the value is a simple literal."""
        shape = self.shape
        got = shape.got.get(name, _MISSING)
        if got is _MISSING:
            t = shape.values.get(name.lower())
            got = shape.got[name] = _NOT_IN_SHAPE if t is None else literal_value(t)
        if got is _NOT_IN_SHAPE:
            index = self._index
            if index is None:
                index = self._index = _lower_index(self.names)
            i = index.get(name.lower(), -1)
            if i < 0:
                return default if self._ad is None or name not in self._ad else ads.get(self._ad, name, default)
            got = literal_value(self.values[i])
        if got is EVALUATE:
            return ads.get(self.ad, name, default)
        return got

    def key(self, referenced_of: Callable[[tuple[str, ...]], tuple[int, ...]]) -> tuple:
        """Slots with equal keys match and rank every request alike. `referenced_of(names)`
        gives the positions of the instance attributes that something looks at."""
        picked = referenced_of(self.names)
        if not picked:
            return (self.shape.id,)
        values = self.values
        return (self.shape.id,) + tuple((self.names[i].lower(), values[i]) for i in picked)

    def depends_on_instance(self) -> bool:
        """True if some expression of the ad looks at an instance attribute (or CurrentTime)."""
        return self._dependent

    def string(self, name: str) -> Any:
        """get() of an instance attribute spelled as INSTANCE_ATTR_NAMES spells it (Name, ClaimId...)."""
        try:
            s = string_value(self.values[self.names.index(name)])
        except ValueError:
            s = None
        return s if s is not None else self.get(name)


_MISSING = object()
_NOT_IN_SHAPE = object()
EVALUATE = object()   # literal_value: not a plain literal, the ad must evaluate it
# Instance attribute names (as a view holds them) -> lower-cased name -> first position: an
# attribute asked for in another spelling, or missing (a dynamic slot's PartitionableSlot,
# asked of every claimed slot every cycle), costs a look-up, not a scan.
_LOWER_INDEX: dict[tuple[str, ...], dict[str, int]] = {}
_LOWER_INDEX_KEEP = 4096


def _lower_index(names: tuple[str, ...]) -> dict[str, int]:
    index = _LOWER_INDEX.get(names)
    if index is None:
        if len(_LOWER_INDEX) >= _LOWER_INDEX_KEEP:
            _LOWER_INDEX.clear()
        index = _LOWER_INDEX[names] = {}
        for j, n in enumerate(names):
            index.setdefault(n.lower(), j)
    return index


def literal_value(text: str) -> Any:
    """The Python value ads.get gives for a literal text, or EVALUATE if the ad must evaluate it."""
    s = string_value(text)
    if s is not None:
        return s
    if text == "true":
        return True
    if text == "false":
        return False
    if text.isdigit() and text.isascii():   # (other scripts' digits are str.isdigit too)
        return int(text)
    return EVALUATE


def referenced_positions(instance_attrs: frozenset[str]) -> Callable[[tuple[str, ...]], tuple[int, ...]]:
    """For SlotView.key: positions of the instance attributes not in `instance_attrs` (those
    something looks at), cached per tuple of names; CurrentTime is never one."""
    cache: dict[tuple[str, ...], tuple[int, ...]] = {}

    def positions(names: tuple[str, ...]) -> tuple[int, ...]:
        found = cache.get(names)
        if found is None:
            found = cache[names] = tuple(i for i, n in enumerate(names)
                                         if n.lower() not in instance_attrs and n.lower() != _CURRENT_TIME)
        return found
    return positions


class References:
    """What expressions refer to, cached by text: (qualifier, name) pairs, qualifier None/'my'/'target'."""

    _EMPTY = classad2.ClassAd()

    def __init__(self) -> None:
        self._by_text: dict[str, tuple[tuple[str | None, str], ...]] = {}
        self._own: dict[str, tuple[str, ...]] = {}

    def own_side(self, text: str) -> tuple[str, ...]:
        """The names the ad holding the expression may define itself (MY.x and bare x),
        lower-cased, as a tuple cached by text."""
        names = self._own.get(text)
        if names is None:
            names = tuple(dict.fromkeys(n.lower() for q, n in self.of(text) if q != "target"))
            if len(self._own) > _CACHE_LIMIT:
                self._own.clear()
            self._own[text] = names
        return names

    def of(self, text: str) -> tuple[tuple[str | None, str], ...]:
        refs = self._by_text.get(text)
        if refs is None:
            try:
                raw = self._EMPTY.externalRefs(classad2.ExprTree(text + "\n"))
            except Exception:
                raw = []
            out = []
            for r in raw:
                if not r:
                    continue
                head, dot, rest = r.partition(".")
                if dot and head.lower() in ("my", "target", "other"):
                    out.append(("my" if head.lower() == "my" else "target", rest.split(".")[0].split("[")[0]))
                else:
                    out.append((None, r.split(".")[0].split("[")[0]))
            refs = tuple(out)
            if len(self._by_text) > _CACHE_LIMIT:
                self._by_text.clear()
            self._by_text[text] = refs
        return refs

    def machine_side(self, text: str) -> set[str]:
        """Names that may be slot attributes when the slot is MY (MY.x and bare x)."""
        return set(self.own_side(text))

    def target_side(self, text: str) -> set[str]:
        """Names that may be slot attributes when the slot is TARGET (TARGET.x and bare x)."""
        return {n.lower() for q, n in self.of(text) if q != "my"}


class SlotCache:
    """Views of slot-ad texts and their shapes, kept across cycles (an unchanged ad costs a look-up)."""

    def __init__(self) -> None:
        self.refs = References()
        self._by_text: dict[str, SlotView] = {}
        self._shapes: dict[str, Shape] = {}
        self._expr_refs: dict[str, frozenset[str]] = {}   # value text -> machine refs (empty: not an expression)
        self._shape_ids = 0
        self._templates: list[Template] = []               # tried on new texts, most recently matched first
        self.template_after = TEMPLATE_AFTER
        self._cuts: dict[tuple[int, tuple[str, ...]], int] = {}   # (shape id, names) -> times split
        self._compiled: dict[tuple[int, tuple[str, ...]], Template | None] = {}   # None: re refused it

    def view(self, text: str, ad: classad2.ClassAd | None = None,
             parse: Callable[[str], classad2.ClassAd] | None = None) -> SlotView:
        """The view of an ad's text; `ad` is the text parsed (or `parse` makes it when needed)."""
        v = self._by_text.get(text)
        if v is not None:
            if v._ad is None and ad is not None:
                v._ad = ad
            return v
        if parse is None and ad is None:
            raise ValueError("a slot view needs the ad or a way to parse it")
        parse = parse or (lambda t: ads.parse_ad(t, "slot ad"))
        v = self._fast_view(text, ad, parse)
        if v is None:
            v = self._slow_view(text, ad if ad is not None else parse(text), parse)
        self._by_text[text] = v
        return v

    def trim(self, live: Sequence[SlotView]) -> None:
        """Forget the views of ads no longer in the pool: the collector restamps an ad at
        every update, so each cycle brings new texts and the old ones would pile up."""
        if len(self._by_text) > 2 * len(live) + 100:
            self._by_text = {v.text: v for v in live}
        if len(self._shapes) > 4 * len(live) + 1000:
            self._shapes.clear()
            self._templates.clear()
            self._compiled.clear()
        if len(self._cuts) > 4 * len(live) + 1000:
            self._cuts.clear()
        if len(self._expr_refs) > _CACHE_LIMIT:
            self._expr_refs.clear()

    # ---- reading ---------------------------------------------------------------------------
    def _fast_view(self, text: str, ad: classad2.ClassAd | None,
                   parse: Callable[[str], classad2.ClassAd]) -> SlotView | None:
        if not (text.startswith("[ ") and text.endswith(" ]")) or "\\" in text or "'" in text:
            return None
        inner = "; " + text[2:-2]
        template = self._template_of(inner)
        if template is not None:
            shape, names, values = template
        else:
            parts = _INSTANCE_ITEM.split(inner)
            names = tuple(parts[1::3])
            values = tuple(parts[2::3])
        # Every cut must fall between attributes, never inside a string literal (without
        # escapes, the odd pieces between quotes are the strings' insides). Checked in two
        # halves: each cut-out value holds an even number of quotes (its strings whole:
        # no value separator sits in an odd piece, and the count is even), so a character
        # of the shape's text is inside a string here exactly when it is in the shape's
        # text alone; and the shape's text, once when the shape is learnt, has no ';'
        # inside a string and an even number of quotes. A cut inside a string would leave
        # such a ';' (or an odd count) in the shape's text.
        pieces = "\x00".join(values).split('"')
        if not len(pieces) & 1 or "\x00" in "".join(pieces[1::2]):
            return None
        if template is None:
            learnt = self._learn_shape(text, ad, parse, parts, names)
            if learnt is None:
                return None
            shape, ad = learnt
        refs = shape.machine_refs
        exprs: tuple[tuple[str, str], ...] = ()
        # Instance values are nearly always string or integer literals: then, outside the
        # quotes, nothing is left but digits, minus signs and separators.
        if "".join(pieces[0::2]).strip("0123456789-\x00"):
            found = []
            for n, t in zip(names, values):
                if not is_literal_text(t):
                    found.append((n.lower(), t))
                    extra = self._refs_of(t, lambda: ad if ad is not None else parse(text), n.lower())
                    if extra:
                        refs = refs | extra
            exprs = tuple(found)
        return SlotView(text, ad, parse, shape, names, values, refs, exprs)

    def _template_of(self, inner: str) -> tuple[Shape, tuple[str, ...], tuple[str, ...]] | None:
        """(shape, names, values) of a text that one of the recent templates matches whole."""
        templates = self._templates
        for i, t in enumerate(templates):
            m = t.fullmatch(inner)
            if m is not None:
                groups = m.groups()
                if groups[0::2] == t.pieces:
                    if i:
                        templates.insert(0, templates.pop(i))
                    return t.shape, t.names, groups[1::2]
        return None

    def _learn_shape(self, text: str, ad: classad2.ClassAd | None, parse: Callable[[str], classad2.ClassAd],
                     parts: list[str], names: tuple[str, ...]) -> tuple[Shape, classad2.ClassAd | None] | None:
        """The shape of a text the general split cut into `parts`, learnt at its first sight
        (with the ad, parsed if need be); the cut is made a template when it has been
        split `template_after` times."""
        shape_text = "".join(parts[0::3])
        shape = self._shapes.get(shape_text)
        if shape is None:
            shape_pieces = shape_text.split('"')
            if not len(shape_pieces) & 1 or ";" in "".join(shape_pieces[1::2]):
                return None
            ad = ad if ad is not None else parse(text)
            items = ads.ad_items(ad, text)
            removed = set(names)
            if not removed <= {k for k, _ in items}:
                return None  # the ad is not what the text says
            kept = tuple(sorted((k.lower(), t) for k, t in items
                                if k not in removed and k.lower() != _CURRENT_TIME))
            shape = self._new_shape(kept, ad)
            self._shapes[shape_text] = shape
        cut = (shape.id, names)
        if cut in self._compiled:
            template = self._compiled[cut]   # compiled, but pushed out of the few tried
        else:
            seen = self._cuts[cut] = self._cuts.get(cut, 0) + 1
            if seen < self.template_after:
                return shape, ad
            try:
                template = Template(parts[0::3], names, shape)
            except (re.error, RecursionError, OverflowError):
                template = None     # a pattern re cannot take: the split stays the way
            self._compiled[cut] = template
        if template is not None:
            self._templates.insert(0, template)
            del self._templates[_TEMPLATES_TRIED:]
        return shape, ad

    def _slow_view(self, text: str, ad: classad2.ClassAd, parse: Callable[[str], classad2.ClassAd]) -> SlotView:
        """Attribute by attribute: the ad's shape is its own."""
        items = ads.ad_items(ad, text)
        kept = tuple(sorted((k.lower(), t) for k, t in items
                            if k.lower() not in INSTANCE_ATTRS and k.lower() != _CURRENT_TIME))
        instance = [(k, t) for k, t in items if k.lower() in INSTANCE_ATTRS]
        shape = self._new_shape(kept, ad)
        refs = shape.machine_refs
        exprs = []
        for n, t in instance:
            if not is_literal_text(t) and n.lower() != _CURRENT_TIME:
                exprs.append((n.lower(), t))
                refs = refs | self._refs_of(t, lambda: ad, n.lower())
        return SlotView(text, ad, parse, shape, tuple(n for n, _ in instance), tuple(t for _, t in instance), refs,
                        tuple(exprs))

    def _new_shape(self, items: tuple[tuple[str, str], ...], ad: classad2.ClassAd) -> Shape:
        refs: set[str] = set()
        for n, t in items:
            if not is_literal_text(t):
                refs |= self._refs_of(t, lambda: ad, n)
        self._shape_ids += 1
        return Shape(self._shape_ids, items, frozenset(refs))

    def _refs_of(self, text: str, get_ad: Callable[[], classad2.ClassAd], lower_name: str) -> frozenset[str]:
        """Slot attributes an attribute's value refers to (MY side); none for literals and lists."""
        refs = self._expr_refs.get(text)
        if refs is None:
            ad = get_ad()
            value = ad[lower_name] if lower_name in ad else None   # names are case-insensitive
            refs = frozenset(self.refs.machine_side(text)) if isinstance(value, classad2.ExprTree) else frozenset()
            self._expr_refs[text] = refs
        return refs
