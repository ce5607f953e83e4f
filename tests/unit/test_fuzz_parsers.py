"""Property-based tests: for every input, a parser either accepts it correctly or refuses
it cleanly (hypothesis; a bounded budget in the default run, `htcpool bench fuzz` for longer)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from daemons.fuzz import strategies as S
from daemons.fuzz import targets as T
from daemons.fuzz.pool_targets import message_class, rpc_targets

# The same inputs on every run (a failure is the code's, never the draw's); `htcpool bench
# fuzz --seed N` explores further.
FUZZ = settings(max_examples=100, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def ok(outcome: tuple[str, str]) -> None:
    assert outcome[0] in ("accepted", "refused"), outcome[1]


@FUZZ
@given(S.submit_bytes())
# Found by a random run: the largest double prints back beyond a double's range.
@example(b"executable = /bin/sleep\nrequest_cpus = 1.7976931348623155e+308\nqueue\nqueue\n")
def test_submit_files(data):
    ok(T.submit_parser(data))


@FUZZ
@given(st.one_of(S.classad_expr(), S.classad_text()))
def test_classad_texts(text):
    ok(T.classad_parser(text))


@FUZZ
@given(S.config_file())
def test_configuration_knobs(text):
    ok(T.config_reader(text))


@pytest.mark.parametrize("target", rpc_targets(), ids=lambda t: t.name)
def test_every_rpc_message_can_be_generated(target):
    """The RPC fuzzer builds every request type from its descriptor, and they serialize."""
    cls = message_class(target.request)

    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(S.message_values(target.request))
    def build(values):
        msg = S.build_message(cls, values)
        assert cls.FromString(msg.SerializeToString()) == msg
    build()
