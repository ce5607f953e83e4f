"""Finding a compose pool's daemons among its containers (pure)."""
from __future__ import annotations

import pytest

from daemons.harness.compose_faults import Container, UnknownDaemon, parse_ps, pick

PS = """a1 collector 1 running
b2 startd 2 running
b1 startd 1 paused
c1 schedd 1 running
junk line
"""


def test_containers_are_named_as_a_local_pools_daemons():
    found = parse_ps(PS)
    assert [(c.key, c.id, c.state) for c in found] == [
        ("collector", "a1", "running"), ("schedd", "c1", "running"), ("startd1", "b1", "paused"),
        ("startd2", "b2", "running")]
    assert pick(found, "startd2", "p") == Container("b2", "startd", 2, "running")
    assert pick(found, "schedd", "p").id == "c1"


def test_an_ambiguous_or_unknown_name_is_refused_with_the_choices():
    found = parse_ps(PS)
    with pytest.raises(UnknownDaemon, match="2 startd containers in project p: name one of startd1, startd2"):
        pick(found, "startd", "p")
    with pytest.raises(UnknownDaemon, match="no 'negotiator' container in compose project 'p'"):
        pick(found, "negotiator", "p")
    only = parse_ps("b1 startd 1 running\n")
    assert pick(only, "startd", "p").key == "startd1"
