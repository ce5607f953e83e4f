"""Daemon logs in HTCondor's style: "MM/DD/YY HH:MM:SS message", stamped in pool time.

Each daemon writes the log HTCondor's daemon would (CollectorLog, NegotiatorLog,
SchedLog, StartLog) under $(LOG), so a run can be read, and compared with a real
pool's log, the way an admin reads HTCondor's.
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
# each with its own stamp (one record is much cheaper than several).
EACH_LINE_STAMPED = {"each_line_stamped": True}


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
            self._second, self._stamp = second, time.strftime("%m/%d/%y %H:%M:%S", time.localtime(second))
        stamp = self._stamp
        msg = record.getMessage()
        level = "" if record.levelno == logging.INFO else f"{record.levelname}: "
        if getattr(record, "each_line_stamped", False):
            msg = f"\n{stamp} {self.prefix}{level}".join(msg.split("\n"))
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return f"{stamp} {self.prefix}{level}{msg}"


def setup(role: str, log_dir: Path | None, clock: PoolClock, *, stderr: bool = True,
          level: int = logging.INFO) -> logging.Logger:
    """Configure the process's `htcpool` logger for one daemon and return it."""
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
