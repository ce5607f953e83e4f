"""Daemon logs in HTCondor's style: "MM/DD/YY HH:MM:SS message", stamped in pool time.

Each daemon writes the log HTCondor's daemon would (CollectorLog, NegotiatorLog,
SchedLog, StartLog) under $(LOG), so a run can be read, and compared with a real
pool's log, the way an admin reads HTCondor's.

Log lines carry strings from anyone (owners, attribute names, ad texts): control
characters in them are escaped (a newline becomes \\n), so no input can forge a line.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from daemons.core.clock import PoolClock

LOG_FILE_NAMES = {
    "collector": "CollectorLog",
    "negotiator": "NegotiatorLog",
    "schedd": "SchedLog",
    "startd": "StartLog",
    "defrag": "DefragLog",
    "drainboss": "DrainBossLog",
}


# `extra=` for a record of several lines that should read as that many log lines,
# each with its own stamp (one record is much cheaper than several). Its template's
# newlines are kept; its string arguments are escaped, except `lines(...)`.
EACH_LINE_STAMPED = {"each_line_stamped": True}

_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_ESCAPES.update({0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def escape(text: str) -> str:
    """`text` with control characters (and Unicode line separators) written as escapes."""
    if text.isprintable():   # nothing to escape (every escaped character is unprintable): the usual case
        return text
    return text.translate(_ESCAPES)


class Lines(str):
    """Lines for one EACH_LINE_STAMPED record, each escaped, joined by newlines."""


def lines(items) -> Lines:
    return Lines("\n".join(escape(str(i)) for i in items))


def _escaped_arg(a):
    if isinstance(a, Lines) or not isinstance(a, str):
        return a
    return escape(a)


def message_of(record: logging.LogRecord) -> str:
    """The record's message with every untrusted control character escaped."""
    if not getattr(record, "each_line_stamped", False):
        return escape(record.getMessage())
    msg = str(record.msg)
    args = record.args
    if not args:
        return msg
    if isinstance(args, dict):
        return msg % {k: _escaped_arg(v) for k, v in args.items()}
    return msg % tuple(_escaped_arg(a) for a in args)


class PoolTimeFormatter(logging.Formatter):
    def __init__(self, clock: PoolClock, prefix: str = "") -> None:
        super().__init__()
        self.clock = clock
        self.prefix = prefix
        self._second: int | None = None
        self._stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        # The record's own wall time, moved onto the pool clock (as skewed, like a real host's).
        pool = self.clock.at_wall(record.created)
        second = int(pool // 1)
        if second != self._second:   # busy logs write many records a second: format the stamp once
            try:
                self._stamp = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(second))
            except (OverflowError, ValueError, OSError):
                self._stamp = f"pool time {second}"
            self._second = second
        stamp = self._stamp
        msg = message_of(record)
        level = "" if record.levelno == logging.INFO else f"{record.levelname}: "
        if getattr(record, "each_line_stamped", False):
            msg = f"\n{stamp} {self.prefix}{level}".join(msg.split("\n"))
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return f"{stamp} {self.prefix}{level}{msg}"


def setup(role: str, log_dir: Path | None, clock: PoolClock, *, stderr: bool = True,
          level: int = logging.INFO) -> logging.Logger:
    """Configure the process's `htcpool` logger for one daemon and return it."""
    # A daemon's lines carry the pool time and the message, nothing else: what the logging
    # module would gather for each record besides (the caller's file and line, found by
    # walking the stack; the thread, process and task names) is skipped, as Python's
    # logging guide suggests for speed. That is a quarter of each line's cost, and a busy
    # schedd or startd writes several lines per job.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if hasattr(logging, "logAsyncioTasks"):
        logging.logAsyncioTasks = False
    logger = logging.getLogger("htcpool")
    logger.setLevel(level)
    logger.propagate = False
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(log_dir / LOG_FILE_NAMES.get(role, f"{role}Log"))
        fh.setFormatter(PoolTimeFormatter(clock))
        logger.addHandler(fh)
    if stderr:
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(PoolTimeFormatter(clock, prefix=f"[{role}] "))
        logger.addHandler(sh)
    return logger


def retime(clock: PoolClock) -> None:
    """Point existing handlers at a clock learned after start-up (the pool epoch)."""
    for h in logging.getLogger("htcpool").handlers:
        if isinstance(h.formatter, PoolTimeFormatter):
            h.formatter.clock = clock
