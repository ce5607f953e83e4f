"""Bounds on ClassAd text, checked with a cheap scan before the text reaches classad2.

classad2 parses and prints expressions recursively on the C stack, and guards only
some of that recursion: a chain of ~30,000 left-associative operators (`1+1+...`,
`a.b.c...`, `x[0][0]...`) parses, then crashes the process (SIGSEGV) when it is
printed, copied or searched for references; at ~170,000 even parsing crashes. Its
evaluator stops at a depth of a few hundred, so nothing deeper can ever evaluate to
a value anyway. The lexer also silently turns an integer literal beyond 64 bits, or
a hexadecimal one, into 0, and a real beyond the double range into infinity.

So every expression and ad a process accepts is first measured here: its length,
its nesting depth estimated from the tokens (an upper bound on the depth of the tree
classad2 would build), and its number literals. The limits are knobs
(CLASSAD_MAX_EXPR_LENGTH, CLASSAD_MAX_EXPR_DEPTH, CLASSAD_MAX_AD_SIZE), read once per
process and set here by the process's entry point.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

INT64_MAX = 2 ** 63 - 1
# The deepest tree classad2 prints safely on an 8 MiB main-thread stack is about
# 24,000 levels; a depth limit is refused above this ceiling so that no knob value
# can bring the crash back.
DEPTH_CEILING = 10_000


@dataclass(frozen=True)
class ClassAdLimits:
    max_expr_length: int = 262_144     # CLASSAD_MAX_EXPR_LENGTH: characters of one expression
    max_depth: int = 1_000             # CLASSAD_MAX_EXPR_DEPTH: estimated nesting of one expression or ad
    max_ad_size: int = 1_048_576       # CLASSAD_MAX_AD_SIZE: characters of one ad's text


_limits = ClassAdLimits()


def configure(limits: ClassAdLimits) -> None:
    """Set this process's limits (once, from its configuration, before it serves)."""
    global _limits
    _limits = limits


def current() -> ClassAdLimits:
    return _limits


# Characters that can add a level to the tree: operators, brackets, attribute selection.
_STRUCTURAL = "()[]{}+-*/%<>=!?:&|^~."
_DROP_STRUCTURAL = str.maketrans("", "", _STRUCTURAL)
_WORD_OPERATOR = re.compile(r"(?i)\bis(?:nt)?\b")
# Literals the lexer would read wrongly: 19+ digits, a 3+ digit exponent, 0x...
_ODD_NUMBER = re.compile(r"\d{19}|[eE][+-]?\d{3}|\d[xX]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)   # a string literal, as _TOKEN reads one

_TOKEN = re.compile(r"""
    "(?:[^"\\]|\\.)*"?              # string literal (skipped)
  | '(?:[^'\\]|\\.)*'?              # quoted attribute name (skipped)
  | //[^\n]*                        # comments (skipped)
  | /\*.*?(?:\*/|\Z)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z0-9_]*)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<sep>[,;])
  | (?P<op>=\?=|=!=|>>>|<<|>>|&&|\|\||==|!=|<=|>=|\?:|[-+*/%<>=!?:&|^~.])
""", re.VERBOSE | re.DOTALL)


_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _number_problem(text: str) -> str | None:
    if _NUMBER.fullmatch(text) is None:
        return f"{text[:40]!r} is not a number ClassAd can read"
    if text.isdigit():
        if int(text) > INT64_MAX:
            return f"the integer {text[:40]} is out of range (ClassAd integers are 64-bit)"
        return None
    value = float(text)
    mantissa = re.split("[eE]", text)[0]
    if value == float("inf") or (value == 0.0 and mantissa.strip("0.") != ""):
        return f"the number {text[:40]} is out of range (beyond a double)"
    return None


def scan(text: str, max_depth: int) -> str | None:
    """What is wrong with `text` (too deep, an unreadable number), or None.

    The depth estimate: within one bracket level, every operator may add a level
    (left-associative chains do); a closed bracket counts as one operand of its
    level; a comma or semicolon starts a sibling; the levels of open brackets add up.
    """
    stack: list[int] = []
    outer = 0        # depth contributed by the enclosing levels
    here = 0         # operators so far at this level
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:
            continue
        if kind == "op" or (kind == "word" and m.group("word").lower() in ("is", "isnt")):
            here += 1
            if outer + here > max_depth:
                return f"nested more than {max_depth} deep (see CLASSAD_MAX_EXPR_DEPTH)"
        elif kind == "open":
            stack.append(here)
            outer += here + 1
            here = 0
            if outer > max_depth:
                return f"nested more than {max_depth} deep (see CLASSAD_MAX_EXPR_DEPTH)"
        elif kind == "close":
            if stack:
                prev = stack.pop()
                outer -= prev + 1
                here = prev + 1
                if outer + here > max_depth:
                    return f"nested more than {max_depth} deep (see CLASSAD_MAX_EXPR_DEPTH)"
        elif kind == "sep":
            here = 0
        elif kind == "number":
            problem = _number_problem(m.group("number"))
            if problem is not None:
                return problem
    return None


# The fast path works on the text's bytes, through translation tables (C loops, where the
# equivalent regular expressions cost ten times as much: a 2 KB slot ad took 350 µs).
# Numbers: digits become '0', e/E 'e', x/X 'x', signs stay, everything else a space; then
# each of _ODD_NUMBER's three forms is a plain substring of that.
_NUMBERS_MAP = bytes(
    ord("0") if chr(c).isdigit() and c < 128 else
    ord("e") if chr(c) in "eE" else
    ord("x") if chr(c) in "xX" else
    c if chr(c) in "+-" else ord(" ")
    for c in range(256))
_ODD_FORMS = (b"0" * 19, b"e000", b"e+000", b"e-000", b"0x")
# Words: identifier characters kept (lower-cased), everything else a space; the words
# `is` and `isnt` are then whole items of split().
_WORDS_MAP = bytes(
    (ord(chr(c).lower()) if (chr(c).isalnum() or c == ord("_")) and c < 128 else ord(" "))
    for c in range(256))
_STRUCTURAL_BYTES = _STRUCTURAL.encode()


def _shallow_and_plain(text: str, max_depth: int) -> bool:
    """True if, even were every structural character (and every `is`) a level of its own,
    `text` would be shallow enough, and no number in it looks odd: the scan can be skipped.
    Equivalent to _ODD_NUMBER and _WORD_OPERATOR over ASCII text; other text takes the
    regular expressions (their idea of a word boundary is Unicode's)."""
    if not text.isascii():
        structural = len(text) - len(text.translate(_DROP_STRUCTURAL))
        return (structural < max_depth and _ODD_NUMBER.search(text) is None
                and structural + len(_WORD_OPERATOR.findall(text)) < max_depth)
    b = text.encode("ascii")
    structural = len(b) - len(b.translate(None, _STRUCTURAL_BYTES))
    if structural >= max_depth:
        return False
    numbers = b.translate(_NUMBERS_MAP)
    if any(form in numbers for form in _ODD_FORMS):
        return False
    if b"is" in b or b"IS" in b or b"Is" in b or b"iS" in b:
        words = b.translate(_WORDS_MAP).split()
        structural += words.count(b"is") + words.count(b"isnt")
    return structural < max_depth


def problem(text: str, *, ad: bool = False, limits: ClassAdLimits | None = None) -> str | None:
    """Why `text` (an expression, or an ad if `ad`) must not be given to classad2, or None."""
    lim = limits or _limits
    size = lim.max_ad_size if ad else lim.max_expr_length
    if len(text) > size:
        knob = "CLASSAD_MAX_AD_SIZE" if ad else "CLASSAD_MAX_EXPR_LENGTH"
        return f"{len(text):,} characters, more than the limit of {size:,} (see {knob})"
    # Fast path: if every structural character (and every `is`) added a level, the
    # text would still be shallow enough, and no number looks odd: nothing to scan.
    if _shallow_and_plain(text, lim.max_depth):
        return None
    # String literals count for nothing in the scan, so they are blanked and the cheap
    # bound tried again (a claim id's hex secret looks like an exponent), where they are
    # found exactly as the scan finds them: with no quoted attribute name and no comment,
    # a '"' can only open one.
    if '"' in text and "'" not in text and "//" not in text and "/*" not in text:
        if _shallow_and_plain(_STRING.sub('""', text), lim.max_depth):
            return None
    return scan(text, lim.max_depth)
