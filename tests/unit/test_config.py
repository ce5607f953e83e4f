"""daemons/core/config.py: typed access to knobs through Param.from_dict."""
import pytest

from daemons.core.config import ConfigError, Param, parse_expr


def p(**values):
    return Param.from_dict(values)


def test_int_plain_and_default():
    assert (p(N="42").int("N"), p().int("N", 7), p().int("N")) == (42, 7, None)


def test_knob_names_are_case_insensitive():
    assert Param.from_dict({"negotiator_interval": "30"}).int("NEGOTIATOR_INTERVAL") == 30


def test_int_expression_is_evaluated():
    assert p(PRIORITY_HALFLIFE="3600 * 24").int("PRIORITY_HALFLIFE") == 86400


def test_int_not_a_number_names_the_knob():
    with pytest.raises(ConfigError) as e:
        p(NEGOTIATOR_INTERVAL="abc").int("NEGOTIATOR_INTERVAL")
    assert str(e.value) == "configuration: NEGOTIATOR_INTERVAL = 'abc' is not an integer"


def test_int_refuses_a_fraction():
    with pytest.raises(ConfigError) as e:
        p(N="1.5").int("N")
    assert "N = '1.5' is not an integer" in str(e.value)


def test_int_below_minimum():
    with pytest.raises(ConfigError) as e:
        p(NUM_CPUS="0").int("NUM_CPUS", minimum=1)
    assert str(e.value) == "configuration: NUM_CPUS = 0 is below the minimum 1"


def test_float():
    assert (p(X="0.25").float("X"), p(X="2").float("X"), p(X="1.0 / 4").float("X")) == (0.25, 2.0, 0.25)


def test_float_positive():
    with pytest.raises(ConfigError) as e:
        p(TIME_SCALE="0").float("TIME_SCALE", positive=True)
    assert str(e.value) == "configuration: TIME_SCALE = 0 must be positive"


def test_bool_words_and_expressions():
    values = [p(B=t).bool("B") for t in ("True", "yes", "1", "false", "No", "0", "1 > 2")]
    assert values == [True, True, True, False, False, False, False]
    assert p().bool("B", True) is True


def test_bool_not_a_boolean():
    with pytest.raises(ConfigError) as e:
        p(B="maybe").bool("B")
    assert "B = 'maybe' is not a boolean" in str(e.value)


def test_str_is_stripped():
    assert (p(S="  hello  ").str("S"), p().str("S", "d")) == ("hello", "d")


def test_expr_is_canonical():
    assert p(START="TARGET.Owner ==   \"alice\"").expr("START") == 'TARGET.Owner == "alice"'
    assert p().expr("START", "True") == "True"


def test_bad_expr_names_the_knob():
    with pytest.raises(ConfigError) as e:
        p(START="(Owner ==").expr("START")
    assert str(e.value) == "configuration: START = '(Owner ==' is not a valid ClassAd expression"


def test_list_splits_on_commas_and_spaces():
    assert p(L="a, b  c,,d").list("L") == ["a", "b", "c", "d"]
    assert p().list("L", ["x"]) == ["x"]


def test_is_set():
    assert (p(A="1").is_set("A"), p().is_set("A")) == (True, False)


def test_parse_expr_rejects_trailing_text():
    with pytest.raises(ConfigError):
        parse_expr("1; Foo = 2", "KNOB")


def test_float_not_a_number_names_the_knob():
    with pytest.raises(ConfigError) as e:
        p(TIME_SCALE="fast").float("TIME_SCALE")
    assert str(e.value) == "configuration: TIME_SCALE = 'fast' is not a number"


def test_int_expression_that_errors_is_refused():
    with pytest.raises(ConfigError) as e:
        p(N="1/0").int("N")
    assert str(e.value) == "configuration: N = '1/0' is not an integer"


def test_integers_are_32_bit_as_in_htcondor():
    with pytest.raises(ConfigError) as e:
        p(NEGOTIATOR_INTERVAL="99999999999999999999").int("NEGOTIATOR_INTERVAL")
    assert str(e.value) == "configuration: NEGOTIATOR_INTERVAL = 99999999999999999999 is above the maximum 2147483647"
    with pytest.raises(ConfigError):
        p(N="-2147483649").int("N")
    assert p(N="2147483647").int("N") == 2147483647


@pytest.mark.parametrize("text", ["nan", "inf", "1e400", 'real("NaN")', "1" * 400])
def test_numbers_must_be_finite(text):
    with pytest.raises(ConfigError) as e:
        p(X=text).float("X")
    assert "X = " in str(e.value)


def test_a_maximum_names_the_value_as_written():
    with pytest.raises(ConfigError) as e:
        p(TIME_SCALE="1e300").float("TIME_SCALE", maximum=1e5)
    assert str(e.value) == "configuration: TIME_SCALE = 1e300 is above the maximum 100000"


def test_a_deep_expression_in_a_knob_is_refused_by_its_bound():
    with pytest.raises(ConfigError) as e:
        p(X=" + ".join(["1"] * 5000)).int("X")
    assert "X: nested more than 1000 deep" in str(e.value)


def test_knob_expressions_are_parsed_whole():
    """classad2.ExprTree("1; Foo = 2") would quietly keep the 1."""
    with pytest.raises(ConfigError):
        p(X="1; Foo = 2").int("X")


def test_the_lag_policy_knobs_and_the_start_up_grace():
    from daemons.core.common import read_lag_policy
    from daemons.core.lagpolicy import LagPolicy
    assert read_lag_policy(Param.from_dict({})) == LagPolicy()
    got = read_lag_policy(Param.from_dict({"HTCPOOL_LAG_POLICY": "Stop", "HTCPOOL_MAX_LAG": "5",
                                           "HTCPOOL_LAG_GRACE": "0"}))
    assert got == LagPolicy(policy="stop", max_lag_s=5.0, grace_s=0.0)
    with pytest.raises(ConfigError, match="HTCPOOL_LAG_GRACE = -1 is below the minimum 0"):
        read_lag_policy(Param.from_dict({"HTCPOOL_LAG_GRACE": "-1"}))
