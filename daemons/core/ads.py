"""ClassAd helpers over classad2: strict parsing, one-line printing, building ads.

classad2.ExprTree("1; Foo = 2") quietly keeps "1" and drops the rest, and
ClassAd("[a = 1] junk") ignores the junk. Input from users and the wire goes
through `parse_expr` / `parse_ad`, which refuse anything not consumed whole.
"""
from __future__ import annotations

import math
import re
import time
from typing import Any, Callable, Iterable, Mapping

import classad2

from daemons.core import limits

_PROBE_ATTR = "HtcpoolParsedExpression"
_NEWLINE_INDENT = re.compile(r"\n\s*")


class AdError(ValueError):
    """Text that is not a valid ClassAd or ClassAd expression."""


class LimitError(AdError):
    """Text refused before parsing: too long, too deep, or a number ClassAd would misread."""


class WorkLimitError(AdError):
    """Evaluating a constraint over many ads took longer than its budget."""


def work_budget(seconds: float, knob: str, clock: Callable[[], float] = time.monotonic) -> Callable[[], None]:
    """A check to call between evaluations: raises WorkLimitError once `seconds` have passed.

    An expression's size does not bound its cost: an ad literal whose attributes refer to
    each other twice over (`[a0 = a1 + a1; a1 = a2 + a2; ...].a0`) costs classad2 its
    whole step budget, about 1.5 s, on every ad a query looks at. 0 means no budget.
    """
    if seconds <= 0:
        return lambda: None
    deadline = clock() + seconds

    def check() -> None:
        if clock() > deadline:
            raise WorkLimitError(f"evaluating the constraint took more than {seconds:g} s (see {knob}); "
                                 "nothing was changed")
    return check


def check_bounds(text: str, what: str, *, ad: bool = False) -> None:
    """Raise LimitError naming `what` if `text` must not reach classad2 (core/limits.py)."""
    problem = limits.problem(text, ad=ad)
    if problem is not None:
        raise LimitError(f"{what}: {problem}")


class Expr(str):
    """A value that is ClassAd expression text, not a string literal."""


def one_line(text: str) -> str:
    # The unparser breaks lines only between tokens; string literals print their
    # newlines escaped, so real newlines are always safe to fold.
    return _NEWLINE_INDENT.sub(" ", text).strip()


def parse_expr(text: str, what: str = "expression") -> classad2.ExprTree:
    """Parse one whole ClassAd expression or raise AdError naming `what`."""
    if not isinstance(text, str) or not text.strip():
        raise AdError(f"{what}: empty expression")
    check_bounds(text, what)
    # Parenthesised so that text cannot close the record early, and the newline
    # ends any // comment before the closing parenthesis.
    try:
        ad = classad2.ClassAd(f"[{_PROBE_ATTR} = ({text}\n)]")
    except Exception:
        raise AdError(f"{what}: cannot parse {text.strip()!r} as a ClassAd expression") from None
    if len(ad) != 1 or _PROBE_ATTR not in ad:
        raise AdError(f"{what}: cannot parse {text.strip()!r} as a ClassAd expression")
    # Parse again without the parentheses so the canonical text has none added;
    # the newline again ends any // comment before ExprTree's own closing bracket.
    # A text that closes the probe's parenthesis early (`a) ] ...`: ClassAd ignores what
    # follows an ad) passes the probe, but has a parenthesis too many here.
    try:
        return classad2.ExprTree(text + "\n")
    except Exception:
        raise AdError(f"{what}: cannot parse {text.strip()!r} as a ClassAd expression") from None


_INTEGER = re.compile(r"^-?\d{1,15}$")
_EXPR_TEXT_CACHE: dict[str, str] = {}
_EXPR_TEXT_CACHE_SIZE = 50_000


def expr_text(value: classad2.ExprTree | str, what: str = "expression") -> str:
    """Canonical one-line text of an expression (validated if given as text).

    Submitting thousands of procs repeats the same texts: results are memoized, and an
    integer literal is its own canonical text.
    """
    if not isinstance(value, str):
        return one_line(str(value))
    text = value.strip()
    if _INTEGER.match(text):
        return str(int(text))
    cached = _EXPR_TEXT_CACHE.get(text)
    if cached is None:
        cached = one_line(str(parse_expr(text, what)))
        if len(_EXPR_TEXT_CACHE) >= _EXPR_TEXT_CACHE_SIZE:
            _EXPR_TEXT_CACHE.clear()
        _EXPR_TEXT_CACHE[text] = cached
    return cached


def parse_ad(text: str, what: str = "ClassAd") -> classad2.ClassAd:
    """Parse a whole ClassAd in the new syntax or raise AdError naming `what`."""
    if not isinstance(text, str):
        raise AdError(f"{what}: not text")
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        raise AdError(f"{what}: a ClassAd must be written [ Name = value; ... ]")
    check_bounds(stripped, what, ad=True)
    try:
        ad = classad2.ClassAd(stripped)
    except Exception:
        raise AdError(f"{what}: cannot parse as a ClassAd: {stripped[:200]!r}") from None
    return ad


def quote(text: str) -> str:
    """classad2.quote(text): a string literal. Most strings in ads (names, addresses, claim
    ids) are printable ASCII with nothing to escape, and need only their quotes; the rest go
    to the library (tests/unit/test_ads_quote.py compares the two)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return classad2.quote(text)


def literal(value: Any) -> str:
    """ClassAd text of a Python value (Expr passes through as expression text)."""
    t = value.__class__
    if t is str:
        return quote(value)
    if t is int:
        return str(value)
    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "error"
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "undefined"
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(literal(v) for v in value) + " }"
    raise TypeError(f"no ClassAd literal for {type(value).__name__}")


# "Name = value" texts already printed, by (name, type, value): the startd prints tens of
# thousands of slot ads whose items repeat ("Arch", "Cpus = 1", its START expression),
# and a look-up costs a fraction of printing. The type is in the key because equal
# values of different types print differently (True and 1, an Expr and a string); floats
# are left out (0.0 and -0.0 are equal keys but print differently).
_ITEM_TEXTS: dict[tuple[str, type, Any], str] = {}
_ITEM_TEXTS_LIMIT = 20_000
_MEMO_TYPES = frozenset((str, Expr, int, bool))


def ad_text(attrs: Mapping[str, Any]) -> str:
    """New-syntax text of an ad from attribute -> Python value / Expr."""
    return "[ " + items_text(attrs) + " ]"


def items_text(attrs: Mapping[str, Any], unique: frozenset[str] = frozenset()) -> str:
    """The items of ad_text(attrs) without its brackets ("A = 1; B = 2"): texts of disjoint
    parts joined with "; " and bracketed are the text of the whole. Attributes named in
    `unique` have values that do not repeat (a slot's name, a claim id): not memoized,
    or they would crowd out the texts that do."""
    memo = _ITEM_TEXTS
    parts = []
    for k, v in attrs.items():
        t = v.__class__
        if t not in _MEMO_TYPES or k in unique:
            parts.append(f"{k} = {literal(v)}")
            continue
        key = (k, t, v)
        text = memo.get(key)
        if text is None:
            text = f"{k} = {literal(v)}"
            if len(memo) >= _ITEM_TEXTS_LIMIT:
                memo.clear()
            memo[key] = text
        parts.append(text)
    return "; ".join(parts)


def text_of_exprs(attrs: Mapping[str, str]) -> str:
    """New-syntax text of an ad whose values are already expression text."""
    return "[ " + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + " ]"


def exprs_of(ad: classad2.ClassAd) -> dict[str, str]:
    """attribute -> canonical one-line expression text."""
    return {k: one_line(str(ad.lookup(k))) for k in ad.keys()}


# One top-level attribute of a one-line ad text: a name, "=", then a value made of
# string literals and any characters but ';', '"' and the brackets of a nested ad.
# Possessive (Python 3.11): a value is runs of plain characters and whole string literals,
# which cannot overlap, so giving nothing back loses no match and spares the regex engine a
# step per character (this split is most of the collector's work on an update).
_ITEM = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*((?:"(?:[^"\\]++|\\.)*+"|[^;"\[\]]++)*+)(;|$)')
_SIMPLE_ITEM = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*([^;]*)")
# Values that are literals whatever the ad: they refer to nothing.
LITERAL_TEXT = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|(?i:true|false|undefined|error)')


def split_ad_text(text: str) -> list[tuple[str, str]] | None:
    """[(name, value text)] of an ad printed on one line ("[ A = 1; B = x ]"), or None.

    The value texts are exactly the printed ones. None when the text is not that
    simple form (a nested ad or a subscript, a quoted attribute name): the caller
    then asks the ClassAd library attribute by attribute.
    """
    inner = _ad_inner(text)
    if inner is None:
        return None
    if not inner.strip():
        return []
    if "\\" in inner or "[" in inner or "]" in inner or "'" in inner:
        return _split_exactly(inner)
    # No escapes and no brackets: every ';' ends an attribute unless it is inside a
    # string literal, and then the attribute has an odd number of quotes before it.
    items = _SIMPLE_ITEM.findall(inner)
    separators = inner.count(";") - (1 if inner.rstrip().endswith(";") else 0)
    if len(items) != separators + 1 or any(v.count('"') & 1 for _, v in items):
        return _split_exactly(inner)
    last = items[-1]
    items[-1] = (last[0], last[1].rstrip())
    return items


_PLAIN_STRING = re.compile(r'"([^"\\]*)"')


def string_values(text: str, names: Iterable[str]) -> dict[str, str] | None:
    """The named attributes of a one-line ad text whose values are plain string literals
    (no escapes), read without parsing the ad: {name: the string} for those present. None
    when the text is not that simple (split_ad_text), a named attribute appears twice or
    is not a plain string literal: then parse it."""
    items = split_ad_text(text)
    if items is None:
        return None
    wanted = {n.lower(): n for n in names}
    out: dict[str, str] = {}
    for k, v in items:
        n = wanted.get(k.lower())
        if n is None:
            continue
        m = _PLAIN_STRING.fullmatch(v)
        if m is None or n in out:
            return None
        out[n] = m.group(1)
    return out


def _ad_inner(text: str) -> str | None:
    """What lies between an ad text's brackets; None when it is not bracketed."""
    t = text.strip()
    return t[1:-1] if len(t) >= 2 and t[0] == "[" and t[-1] == "]" else None


def split_ad_text_strictly(text: str) -> list[tuple[str, str]] | None:
    """Like split_ad_text, for text from outside: every character belongs to an item
    (split_ad_text's quick form may pass over junk between items), and an ad that ends
    in ';' is not taken. None when the text is not that plain form."""
    inner = _ad_inner(text)
    if inner is None:
        return None
    if not inner.strip():
        return []
    if inner.rstrip().endswith(";"):
        return None
    return _split_exactly(inner)


def _split_exactly(inner: str, item: re.Pattern[str] = _ITEM) -> list[tuple[str, str]] | None:
    out = []
    pos, end = 0, len(inner)
    match = item.match
    while pos < end:
        m = match(inner, pos)
        if m is None:
            return None
        out.append((m.group(1), m.group(2).rstrip()))
        pos = m.end()
        if not m.group(3):
            break
    return out if pos >= end else None


def ad_items(ad: classad2.ClassAd, text: str | None = None) -> list[tuple[str, str]]:
    """[(name, one-line value text)] of every attribute of `ad`, whose text is `text` if given.

    Splitting the text costs a few microseconds where asking classad2 for each
    attribute costs several per attribute; an ad changed since it was printed (or
    printed otherwise) is read attribute by attribute.
    """
    if text is not None:
        items = split_ad_text(text)
        if items is not None and len(items) == len(ad):
            return items
    return [(k, one_line(str(ad.lookup(k)))) for k in ad.keys()]


_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_attr_name(name: str) -> bool:
    """A plain ClassAd attribute name (no quoting needed), bounded in length."""
    return len(name) <= 256 and _ATTR_NAME.fullmatch(name) is not None


def has(ad: classad2.ClassAd, attr: str) -> bool:
    """`attr in ad`, for any string: classad2 raises on some (an embedded NUL)."""
    try:
        return attr in ad
    except (ValueError, TypeError):
        return False


def get(ad: classad2.ClassAd, attr: str, default: Any = None) -> Any:
    """Evaluate `attr` in `ad`; undefined, error or missing give `default`."""
    if not has(ad, attr):
        return default
    try:
        v = ad.eval(attr)
    except Exception:
        return default
    if isinstance(v, classad2.Value):
        return default
    return v


# HTCondor's private attributes (ClassAdPrivateAttrs in src/condor_utils/compat_classad.cpp,
# and the "_condor_priv" names of ClassAdAttributeIsPrivateV2): claim ids and keys, which
# only the daemons that hold the claim, and the negotiator, may see.
PRIVATE_ATTRS = frozenset(a.lower() for a in ("Capability", "ChildClaimIds", "ClaimId", "ClaimIdList", "ClaimIds",
                                              "TransferKey"))


def is_private(name: str) -> bool:
    low = name.lower()
    return low in PRIVATE_ATTRS or low.startswith("_condor_priv")


def without_private(ad: classad2.ClassAd) -> classad2.ClassAd:
    """`ad` itself when it has no private attribute, else a copy without them."""
    hidden = [k for k in ad.keys() if is_private(k)]
    if not hidden:
        return ad
    out = classad2.ClassAd(repr(ad))
    for k in hidden:
        del out[k]
    return out


def project(ad: classad2.ClassAd, attrs: Iterable[str]) -> classad2.ClassAd:
    """The named attributes of `ad` (a name that is not an attribute name names none)."""
    out = classad2.ClassAd()
    for a in attrs:
        if _ATTR_NAME.fullmatch(a) and a in ad:
            out[a] = ad.lookup(a)
    return out


def evaluate(tree: classad2.ExprTree, my: classad2.ClassAd | None = None,
             target: classad2.ClassAd | None = None) -> Any:
    """Evaluate with MY and TARGET scopes; evaluation failures become classad2.Value.Error."""
    try:
        if my is None:
            return tree.eval()
        if target is None:
            return tree.eval(my)
        return tree.eval(my, target)
    except Exception:
        return classad2.Value.Error


def is_true(value: Any) -> bool:
    """ClassAd truth for a constraint: only boolean true (or a non-zero number) is true."""
    if isinstance(value, classad2.Value):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return False


def as_number(value: Any) -> float | None:
    """A finite number, or None (undefined, error, a string, NaN or infinity)."""
    if isinstance(value, classad2.Value) or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    return None


def as_float(value: Any) -> float | None:
    """A value as HTCondor's EvalFloat reads it: booleans are numbers too (1.0 and 0.0;
    the ClassAd library's NUMBER_VALUES include BOOLEAN_VALUE). Ranks, slot weights,
    consumption policies and sort expressions are read this way."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return as_number(value)


_LEASES: dict[float, float] = {}


def as_lease(value: Any) -> float:
    """A job's JobLeaseDuration as HTCondor's startd reads it (LookupInteger: a number,
    truncated to whole seconds), or 0.0 where it gives no lease of its own (missing, not a
    number, not positive): then the claim keeps ALIVE_INTERVAL x MAX_CLAIM_ALIVES_MISSED.
    One float per distinct lease: every claim of a big pool holds one."""
    v = as_float(value)
    if v is None or v < 1:
        return 0.0
    v = float(min(int(v), 2 ** 31 - 1))
    return _LEASES.setdefault(v, v) if len(_LEASES) < 1000 else v
