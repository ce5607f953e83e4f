"""daemons/core/ads.py quote: the fast path for plain strings prints what classad2.quote does."""
import classad2
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core import ads


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF)))   # (NUL: the library refuses it)
def test_quote_is_classad2s(text):
    assert ads.quote(text) == classad2.quote(text)
    assert ads.literal(text) == classad2.quote(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126)))
def test_printable_ascii_round_trips(text):
    assert classad2.ExprTree(ads.quote(text)).eval() == text


def test_names_and_escapes():
    for text in ["slot1_1@vm-0001", "<127.0.0.1:9618>#1#2#s", 'say "hi"', "back\\slash", "tab\there", "nl\n",
                 "é", "", "'single'", "$(MACRO)"]:
        assert ads.quote(text) == classad2.quote(text), text
