"""core/config_check.py: a configuration is read, expanded and checked in a throwaway
interpreter, so a circle of macros or a value out of range stops `htcpool` with one line."""
from __future__ import annotations

from pathlib import Path

import pytest

from daemons.core.collector_client import UPDATE_CHUNK_ADS, update_chunks
from daemons.core.config import ConfigError
from daemons.core.config_check import check_config_file, find_circle


def defs(**values) -> dict:
    return {k: (Path("f"), i, v) for i, (k, v) in enumerate(values.items(), 1)}


def test_find_circle():
    assert find_circle(defs(START="$(A)", A="$(B)", B="$(A)"), "START") == ["A", "B", "A"]
    assert find_circle(defs(A="$(A) more"), "A") == []           # the previous definition, as in HTCondor
    assert find_circle(defs(A="$(B)", B="x"), "A") == []


def test_a_circle_of_macros_is_named_with_its_line(tmp_path):
    cfg = tmp_path / "c.conf"
    cfg.write_text("NUM_CPUS = 2\nA = $(B)\nB = $(A)\nSTART = $(A)\n")
    with pytest.raises(ConfigError) as e:
        check_config_file(cfg, tmp_path, stall_s=1.0)
    assert str(e.value) == (f"config file {cfg}, line 2: A = '$(B)': the macros A -> B -> A refer to each "
                            "other in a circle, so expanding them never finishes")


def test_roles_are_type_checked_before_any_daemon_starts(tmp_path):
    cfg = tmp_path / "c.conf"
    cfg.write_text("TIME_SCALE = 1e300\n")
    check_config_file(cfg, tmp_path)                 # syntax and expansion are fine
    with pytest.raises(ConfigError) as e:
        check_config_file(cfg, tmp_path, roles=("collector", "negotiator"))
    assert str(e.value) == f"config file {cfg}, line 1: TIME_SCALE = 1e300 is above the maximum 100000"


def test_update_chunks_split_ads_and_invalidations():
    ads = [f"[ N = {i} ]" for i in range(UPDATE_CHUNK_ADS * 2 + 1)]
    chunks = update_chunks(ads, ["gone"])
    assert [len(a) for a, _ in chunks] == [UPDATE_CHUNK_ADS, UPDATE_CHUNK_ADS, 1]
    assert [n for _, n in chunks] == [[], [], ["gone"]]
    assert update_chunks([], []) == [([], [])]
    assert [len(n) for _, n in update_chunks([], ["x"] * (UPDATE_CHUNK_ADS + 1))] == [UPDATE_CHUNK_ADS, 1]
