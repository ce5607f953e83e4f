"""The schedd's history file: finished jobs, each recorded exactly once, whatever crashes when.

A job leaves the queue in one committed transaction of the job queue log that sets its
final status, numbers its history record (the queue header's `HistorySeq`) and destroys
it. Only after that transaction is on disk is the record appended here, in record-number
order, carrying its number as `HtcpoolHistorySeq`. So:
- a crash before the commit leaves the job Running in the queue; the startd re-sends the
  exit and the job finishes then, once;
- a crash after the commit but before the append is repaired on restart: replaying the
  log yields every numbered record, and those past the last number in this file are
  appended (`HistoryFile.last_seq`);
- a record is never appended twice, because the file's last number says what is there.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

SEQ_ATTR = "HtcpoolHistorySeq"


@dataclass(frozen=True)
class Record:
    seq: int
    text: str     # the job ad, one line, already carrying SEQ_ATTR
    txn: int = 0  # the job queue log transaction that decided it (0: replayed, already durable)


def record_text(ad_text: str, seq: int) -> str:
    """Add the record number to a one-line ad text '[ a = 1; b = 2 ]'."""
    body = ad_text.strip()
    assert body.startswith("[") and body.endswith("]"), body[:40]
    inner = body[1:-1].strip().rstrip(";")
    return f"[ {inner}; {SEQ_ATTR} = {seq} ]" if inner else f"[ {SEQ_ATTR} = {seq} ]"


class HistoryFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._last: int | None = None

    def last_seq(self) -> int:
        """The number of the file's last record (0 if none): read from its end."""
        if self._last is None:
            self._last = _last_seq_in(self.path)
        return self._last

    def repair(self) -> None:
        """Cut a torn last line (a crash in the middle of an append), then sync the file."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            data_end = f.seek(0, os.SEEK_END)
            if data_end == 0:
                return
            f.seek(data_end - 1)
            if f.read(1) != b"\n":
                pos = data_end
                while pos > 0:
                    step = min(65536, pos)
                    f.seek(pos - step)
                    chunk = f.read(step)
                    nl = chunk.rfind(b"\n")
                    if nl >= 0:
                        f.truncate(pos - step + nl + 1)
                        break
                    pos -= step
                else:
                    f.truncate(0)
            f.flush()
            os.fsync(f.fileno())
        self._last = None

    def sync(self) -> None:
        if self.path.exists():
            with open(self.path, "rb") as f:
                os.fsync(f.fileno())

    def append(self, records: list[Record]) -> int:
        """Append the records not yet in the file, in order; returns how many were written."""
        fresh = [r for r in sorted(records, key=lambda r: r.seq) if r.seq > self.last_seq()]
        if not fresh:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(r.text + "\n" for r in fresh))
        self._last = fresh[-1].seq
        return len(fresh)

    def lines(self) -> Iterator[str]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    yield line


def _last_seq_in(path: Path) -> int:
    """The record number on the file's last line, read backwards from the end."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    marker = f"{SEQ_ATTR} = ".encode()
    with open(path, "rb") as f:
        tail, end = b"", size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            tail = f.read(end - start) + tail
            end = start
            body = tail.rstrip(b"\n")
            if b"\n" in body or end == 0:
                last = body.rsplit(b"\n", 1)[-1]
                at = last.rfind(marker)
                if at < 0:
                    return 0  # an older history file, without record numbers
                digits = last[at + len(marker):].split(b"]")[0].split(b";")[0].strip()
                return int(digits) if digits.isdigit() else 0
    return 0
