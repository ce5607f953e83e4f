"""core/limits.py: text that would crash classad2, or be misread by it, never reaches it."""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core import ads, limits
from daemons.core.limits import ClassAdLimits, problem


def chain(n: int, op: str = "+", term: str = "1") -> str:
    return f" {op} ".join([term] * n)


@pytest.mark.parametrize("text", [
    chain(50_000), chain(2_000, "&&", "x"), chain(1_500, "is", "x"), "a" + ".b" * 1_500, "x" + "[0]" * 1_500,
    "[a = " * 150 + chain(900) + "]" * 150,   # levels of nested ads add up
])
def test_deep_expressions_are_refused(text):
    assert "nested more than 1000 deep" in problem(text)


def test_the_crash_itself_is_real():
    """Why the bound exists: classad2 crashes printing a 50,000-term chain (in a child process)."""
    code = "import classad2; str(classad2.ExprTree(' + '.join(['1'] * 50000)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.returncode < 0      # killed by a signal (SIGSEGV)


@pytest.mark.parametrize("text", [
    "1 + 1", "{" + ",".join(["x + 1"] * 3000) + "}", "[" + "; ".join(f"a{i} = {i} + 1" for i in range(2000)) + "]",
    '"' + "(" * 5000 + '"', "// " + "(" * 5000 + "\n1", "/* " + "+" * 5000 + " */ 2", "9223372036854775807",
    "1.5e308", "0.0", "Disk >= 1 && isUndefined(x)",
])
def test_ordinary_text_passes(text):
    assert problem(text) is None


def test_a_quote_in_a_comment_does_not_hide_what_follows():
    assert "nested" in problem('// "\n' + chain(5000) + '\n// "')


@pytest.mark.parametrize("text, says", [
    ("99999999999999999999", "out of range (ClassAd integers are 64-bit)"),
    ("1" + "0" * 400, "out of range"),
    ("1e400", "out of range (beyond a double)"),
    ("2e-400", "out of range"),
    ("0x10", "is not a number ClassAd can read"),
])
def test_numbers_classad_would_misread_are_refused(text, says):
    """classad2 reads the first three as 0 / inf / 0 and 0x10 as 0, silently."""
    assert says in problem(text)


def test_length_limits_name_their_knob():
    assert "see CLASSAD_MAX_EXPR_LENGTH" in problem("1" * 300_000)
    assert "see CLASSAD_MAX_AD_SIZE" in problem("[a = " + '"' + "x" * 1_100_000 + '"]', ad=True)


def test_limits_are_configurable():
    small = ClassAdLimits(max_expr_length=1024, max_depth=10, max_ad_size=2048)
    assert problem(chain(20), limits=small) is not None
    assert problem(chain(5), limits=small) is None


def test_parse_expr_and_parse_ad_apply_the_bounds():
    with pytest.raises(ads.LimitError) as e:
        ads.parse_expr(chain(50_000), "START")
    assert str(e.value).startswith("START: nested more than 1000 deep")
    with pytest.raises(ads.LimitError):
        ads.parse_ad("[ X = " + chain(50_000) + " ]", "ad 1 of 1")
    try:
        limits.configure(ClassAdLimits(max_depth=5))
        with pytest.raises(ads.LimitError):
            ads.parse_expr(chain(10) + " + 7", "x")
    finally:
        limits.configure(ClassAdLimits())


def test_string_literals_do_not_send_an_ad_to_the_full_scan(monkeypatch):
    """A slot ad's claim id carries a hex secret ("...#9d7e752924...") that looks like an
    odd exponent: with its strings blanked, the cheap bound answers and the scan is skipped."""
    text = ('[ Name = "slot1_1@vm-0001"; Capability = "<127.0.0.1:9618>#1000000000#3#9d7e752924f1"; '
            'Cpus = 1; Start = true; Requirements = START && (TARGET.RequestCpus <= Cpus) ]')
    assert limits._ODD_NUMBER.search(text) is not None

    def no_scan(*_):
        raise AssertionError("the full scan ran")
    monkeypatch.setattr(limits, "scan", no_scan)
    assert problem(text, ad=True) is None


_PIECES = st.sampled_from(['"', "'", "\\", "//", "/*", "*/", "\n", "(", ")", "[", "]", "{", "}", ";", ",",
                           "+", "1", "1e400", "e999", "0x1", "99999999999999999999", "is", "x", " ", ".", "=="])


@given(st.lists(_PIECES, max_size=60), st.integers(1, 12))
@settings(max_examples=3000, deadline=None)
def test_the_fast_path_passes_nothing_too_deep_or_misread(pieces, depth):
    """What the fast path (over blanked strings) lets through, the scan finds neither too
    deep nor holding a number classad2 would misread. (The scan also refuses a token such
    as `1is` that classad2 simply fails to parse; the fast path never looked for those.)"""
    text = "".join(pieces)
    if problem(text, limits=ClassAdLimits(max_depth=depth)) is None:
        found = limits.scan(text, depth)
        if found is not None:
            assert found.endswith("is not a number ClassAd can read"), found
            token = ast.literal_eval(found[:-len(" is not a number ClassAd can read")])
            assert limits._ODD_NUMBER.search(token) is None, found


_OLD_PIECES = st.sampled_from(['"', "'", "\\", "//", "/*", "\n", "(", ")", "[", "]", ";", "+", "-", "1", "9",
                               "e", "E", "x", "X", "e999", "E-123", "0x1", "9" * 19, "is", "IsNt", "Disk",
                               " ", ".", "==", "é", "٣"])


@given(st.lists(_OLD_PIECES, max_size=80), st.integers(1, 40))
@settings(max_examples=3000, deadline=None)
def test_the_byte_fast_path_answers_as_the_regular_expressions_did(pieces, depth):
    """The ASCII fast path (a translation table and substring searches) says "nothing to
    scan" only where the regular expressions it replaced said so too: it never lets through
    what they would have sent to the scan, so the scan's verdicts stand."""
    text = "".join(pieces)
    assert limits._STRING_FAST.sub('""', text) == limits._STRING.sub('""', text)
    bare = text
    if '"' in text and "'" not in text and "//" not in text and "/*" not in text:
        bare = limits._STRING.sub('""', text)
    structural = len(bare) - len(bare.translate(limits._DROP_STRUCTURAL))
    old_fast = (structural < depth and limits._ODD_NUMBER.search(bare) is None
                and structural + len(limits._WORD_OPERATOR.findall(bare)) < depth)
    if bare.isascii() and limits._shallow_ascii(bare, depth):
        assert old_fast
    if old_fast and bare.isascii():
        # Only the `is` bound is looser: an "is" inside a longer word counts in it.
        lowered = bare.lower().count("is")
        assert limits._shallow_ascii(bare, depth) == (structural + lowered < depth)
