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
# The same matches, possessively (a run of plain characters and an escape cannot overlap,
# and the optional closing quote never fails, so nothing is ever given back): a step per
# run instead of one per character.
_STRING_FAST = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)

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


# The fast path on ASCII text works on bytes, where a translation table and substring
# searches run in C at memory speed (the regular expressions above cost a slot ad
# 150-250 microseconds, several times what classad2 takes to parse it): every digit
# becomes "0", "eE" "e", "+-" "+" and "xX" "x", so each _ODD_NUMBER form is a plain
# substring of the folded text.
_FOLD = bytes.maketrans(b"0123456789Ee-Xx", b"0000000000ee+xx")
_STRUCTURAL_BYTES = _STRUCTURAL.encode()


def _shallow_ascii(bare: str, max_depth: int) -> bool:
    """The fast path's answer for ASCII `bare` (strings blanked): every structural
    character and every `is` adding a level still stays within `max_depth`, and no
    number looks odd. Counting each "is" in the lower-cased text bounds the `is`/`isnt`
    words from above, so the answer is never yes where _WORD_OPERATOR would say no."""
    b = bare.encode("ascii")
    structural = len(b) - len(b.translate(None, _STRUCTURAL_BYTES))
    if structural >= max_depth:
        return False
    folded = b.translate(_FOLD)
    if b"0" * 19 in folded or b"e000" in folded or b"e+000" in folded or b"0x" in folded:
        return False
    # A text holds at most len / 2 "is": when even that many keep it shallow, no need to count.
    return structural + len(b) // 2 < max_depth or structural + b.lower().count(b"is") < max_depth


def problem(text: str, *, ad: bool = False, limits: ClassAdLimits | None = None) -> str | None:
    """Why `text` (an expression, or an ad if `ad`) must not be given to classad2, or None."""
    lim = limits or _limits
    size = lim.max_ad_size if ad else lim.max_expr_length
    if len(text) > size:
        knob = "CLASSAD_MAX_AD_SIZE" if ad else "CLASSAD_MAX_EXPR_LENGTH"
        return f"{len(text):,} characters, more than the limit of {size:,} (see {knob})"
    # Fast path: if every structural character (and every `is`) added a level, the
    # text would still be shallow enough, and no number looks odd: nothing to scan.
    # String literals count for nothing in the scan, so they are blanked first (a claim
    # id's hex secret looks like an exponent), where they are found exactly as the scan
    # finds them: with no quoted attribute name and no comment, a '"' can only open one.
    bare = text
    if '"' in text and "'" not in text and ("/" not in text or ("//" not in text and "/*" not in text)):
        bare = _STRING_FAST.sub('""', text)
    if bare.isascii():
        if _shallow_ascii(bare, lim.max_depth):
            return None
        return scan(text, lim.max_depth)
    structural = len(bare) - len(bare.translate(_DROP_STRUCTURAL))
    if structural < lim.max_depth and _ODD_NUMBER.search(bare) is None:
        if structural + len(_WORD_OPERATOR.findall(bare)) < lim.max_depth:
            return None
    return scan(text, lim.max_depth)
