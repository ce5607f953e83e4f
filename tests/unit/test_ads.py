"""daemons/core/ads.py: strict parsing, one-line text, literals."""
import classad2
import pytest

from daemons.core import ads
from daemons.core.ads import AdError, Expr


def test_parse_expr_rejects_a_second_statement():
    with pytest.raises(AdError) as e:
        ads.parse_expr("1; Foo = 2", "START")
    assert str(e.value) == "START: cannot parse '1; Foo = 2' as a ClassAd expression"


def test_parse_expr_rejects_two_expressions():
    with pytest.raises(AdError):
        ads.parse_expr("a b")


def test_parse_expr_rejects_empty_text():
    with pytest.raises(AdError) as e:
        ads.parse_expr("  ", "RANK")
    assert str(e.value) == "RANK: empty expression"


def test_parse_expr_rejects_closing_the_record():
    with pytest.raises(AdError):
        ads.parse_expr("1 ] [ x = 2")


def test_parse_expr_accepts_a_trailing_comment():
    tree = ads.parse_expr("x // comment")
    assert str(tree) == "x"


def test_parse_expr_evaluates():
    assert ads.parse_expr("3600 * 24").eval() == 86400


def test_expr_text_list_literal_on_one_line():
    assert ads.expr_text("{1,\n 2,\n 3}") == "{ 1, 2, 3 }"


def test_expr_text_normalises_spacing():
    assert ads.expr_text("TARGET.Memory   >=  RequestMemory") == "TARGET.Memory >= RequestMemory"


def test_literal_quoting():
    assert ads.literal('say "hi"\\') == '"say \\"hi\\"\\\\"'
    assert classad2.ExprTree(ads.literal('say "hi"\\')).eval() == 'say "hi"\\'


def test_literal_scalars():
    assert [ads.literal(v) for v in (True, False, 3, 1.5, None, float("inf"))] == [
        "true", "false", "3", "1.5", "undefined", "error"]


def test_literal_list_and_expr():
    assert ads.literal([1, "x", Expr("a + b")]) == '{ 1, "x", a + b }'


def test_literal_refuses_other_types():
    with pytest.raises(TypeError):
        ads.literal({"a": 1})


def test_ad_text_round_trips():
    ad = classad2.ClassAd(ads.ad_text({"Name": "slot1@h", "Cpus": 4, "Start": Expr("Cpus > 2")}))
    assert (ad.eval("Name"), ad.eval("Cpus"), ad.eval("Start")) == ("slot1@h", 4, True)


def test_parse_ad_requires_brackets():
    with pytest.raises(AdError) as e:
        ads.parse_ad("a = 1", "update")
    assert str(e.value) == "update: a ClassAd must be written [ Name = value; ... ]"


def test_get_gives_default_for_missing_and_undefined():
    ad = classad2.ClassAd("[a = 1; b = undefined; c = 1/0 ]")
    assert [ads.get(ad, k, "d") for k in ("a", "b", "c", "z")] == [1, "d", "d", "d"]


def test_is_true():
    assert [ads.is_true(v) for v in (True, False, 1, 0, "x", classad2.Value.Undefined)] == [
        True, False, True, False, False, False]


def test_a_text_that_closes_the_probe_early_is_refused_not_raised():
    """Found by `htcpool bench fuzz`: `a) ] ...` passed the probe ad (ClassAd ignores what
    follows an ad) and then made classad2 raise in the second parse."""
    import pytest as _pytest

    from daemons.core import ads as _ads
    for text in ('1) ] + (2', 'Cpus is "" >= "") ? -2.4e-215 : Cpu]s'):
        with _pytest.raises(_ads.AdError):
            _ads.parse_expr(text, "x")


def test_ad_text_prints_repeated_items_as_it_printed_them_first():
    """ad_text remembers item texts by (name, type, value): values equal across types
    (True and 1, an Expr and a string, 0.0 and -0.0) still print each as its own."""
    ads._ITEM_TEXTS.clear()
    values = [True, 1, 1.0, 0.0, -0.0, "true", ads.Expr("true"), "1", ads.Expr("1"), None, [1, "a"], 7, False, 0]
    for _ in range(2):
        for v in values:
            assert ads.ad_text({"A": v}) == f"[ A = {ads.literal(v)} ]"
    assert ads.ad_text({"A": 1, "B": ads.Expr("A + 1")}) == "[ A = 1; B = A + 1 ]"


def test_string_values_reads_plain_strings_or_leaves_the_ad_to_the_parser():
    text = '[ Name = "slot1_1@h"; Cpus = 1; StartdIpAddr = "<127.0.0.1:5>"; Machine = "h" ]'
    assert ads.string_values(text, ("StartdIpAddr", "MyAddress", "Name")) == {
        "Name": "slot1_1@h", "StartdIpAddr": "<127.0.0.1:5>"}
    assert ads.string_values('[ name = "a" ]', ("Name",)) == {"Name": "a"}
    for odd in ['[ Name = strcat("a", "b") ]', '[ Name = "a\\"b" ]', '[ Name = "a"; NAME = "b" ]',
                '[ Name = "a"; N = [ x = 1 ] ]', "not an ad"]:
        assert ads.string_values(odd, ("Name",)) is None, odd
