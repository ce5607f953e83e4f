"""core/log.py: no string from a user can forge a log line."""
from __future__ import annotations

import logging

from daemons.core import log as logmod
from daemons.core.clock import PoolClock

FORMATTER = logmod.PoolTimeFormatter(PoolClock(scale=1.0, epoch=0.0))


def formatted(msg, *args, each_line=False) -> str:
    r = logging.LogRecord("htcpool.test", logging.INFO, __file__, 1, msg, args, None)
    if each_line:
        r.each_line_stamped = True
    return FORMATTER.format(r)


def test_control_characters_in_arguments_are_escaped():
    line = formatted("Submitted cluster 1 for %s", "bob\n01/01/70 00:00:00 forged\r\x1b[2J\u2028")
    assert "\n" not in line
    assert line.endswith("for bob\\n01/01/70 00:00:00 forged\\r\\x1b[2J\\u2028")


def test_a_preformatted_message_is_escaped_too():
    assert "\n" not in formatted("owner is x\ny")


def test_each_line_stamped_records_keep_their_own_lines_only():
    out = formatted("%s", logmod.lines(["  one", "  two\nforged"]), each_line=True).split("\n")
    assert len(out) == 2 and out[1].endswith("  two\\nforged")
    out = formatted("Negotiating with %s\n  prio %f", "ev\nil", 1.5, each_line=True).split("\n")
    assert len(out) == 2 and out[0].endswith("Negotiating with ev\\nil")


def test_a_stamp_beyond_the_calendar_does_not_break_logging():
    f = logmod.PoolTimeFormatter(PoolClock(scale=1e5, epoch=1e15))
    r = logging.LogRecord("htcpool.test", logging.INFO, __file__, 1, "hello", (), None)
    assert f.format(r).endswith("hello")


def test_printable_text_is_returned_as_it_is_and_everything_escaped_is_unprintable():
    """escape() skips translating text that is printable: sound only while no character it
    escapes is printable."""
    from daemons.core.log import _ESCAPES, escape
    assert all(not chr(c).isprintable() for c in _ESCAPES)
    text = "Matched 1.0 alice@example.org <10.0.0.1:9618> slot1@host"
    assert escape(text) is text
    assert escape("a\u2028b\tc\x1bd") == "a\\u2028b\tc\\x1bd"
