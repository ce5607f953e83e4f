"""The schedd's job queue log, in HTCondor's job_queue.log format.

Each line is "<op> <body>" with HTCondor's op codes:
  101 <key> <MyType> <TargetType>   NewClassAd
  102 <key>                         DestroyClassAd
  103 <key> <name> <expression>     SetAttribute
  104 <key> <name>                  DeleteAttribute
  105                               BeginTransaction
  106                               EndTransaction
  107 <seq> CreationTimestamp <t>   the first line of every log
A transaction counts only once its 106 is on disk; an unterminated one at the end
(a crash mid-write) is dropped on replay, as HTCondor drops it.

Commits are grouped: many transactions appended while one fsync is in flight are
made durable by the next single fsync, and each commit() returns once its own
records are on disk. The in-memory queue changes before the fsync; nobody is told
about a change (no RPC reply) until its commit returns.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from daemons.core.common import StateFileError

NEW, DESTROY, SET, DELETE_ATTR, BEGIN, END, HEADER = 101, 102, 103, 104, 105, 106, 107


class LogCorrupt(StateFileError):
    pass


class Op(NamedTuple):
    # A tuple, not a dataclass: a replay makes one per line of the log.
    code: int
    key: str = ""
    name: str = ""
    value: str = ""


def op_new(key: str, my_type: str = "Job") -> str:
    return f"{NEW} {key} {my_type} Machine"


def op_destroy(key: str) -> str:
    return f"{DESTROY} {key}"


def op_set(key: str, name: str, value: str) -> str:
    if "\n" in value:
        raise ValueError(f"attribute {name}: value spans lines")
    return f"{SET} {key} {name} {value}"


def op_delete_attr(key: str, name: str) -> str:
    return f"{DELETE_ATTR} {key} {name}"


def render(op: Op) -> str:
    """The log line of an op (parse_op's inverse)."""
    if op.code == SET:
        return op_set(op.key, op.name, op.value)
    if op.code == NEW:
        return op_new(op.key, op.name or "Job")
    if op.code == DELETE_ATTR:
        return op_delete_attr(op.key, op.name)
    if op.code == DESTROY:
        return op_destroy(op.key)
    return f"{op.code} {op.value}"


def parse_op(line: str, line_no: int, path: Path) -> Op:
    head, _, body = line.partition(" ")
    try:
        code = int(head)
    except ValueError:
        raise LogCorrupt(f"{path}, line {line_no}: not a log entry: {line[:80]!r}") from None
    if code == SET:
        key, _, rest = body.partition(" ")
        name, _, value = rest.partition(" ")
        if not key or not name:
            raise LogCorrupt(f"{path}, line {line_no}: SetAttribute without key or name")
        return Op(SET, key, name, value or "UNDEFINED")
    if code in (NEW, DESTROY, DELETE_ATTR):
        parts = body.split()
        if not parts:
            raise LogCorrupt(f"{path}, line {line_no}: entry {code} without a key")
        return Op(code, parts[0], parts[1] if code == DELETE_ATTR and len(parts) > 1 else
                  (parts[1] if code == NEW and len(parts) > 1 else ""))
    if code in (BEGIN, END, HEADER):
        return Op(code, value=body.strip())
    raise LogCorrupt(f"{path}, line {line_no}: unknown log op {code}")


class LogReader:
    """The committed ops of a log, in order, read as they are iterated; afterwards `seq` is
    the log's sequence number, `cut` whether a transaction was cut off at the end, and
    `entries` the ops given.

    Two passes: the first checks the structure (every line an entry, transactions neither
    nested nor ended without a beginning) and finds where a transaction cut off at the end
    begins; the second gives every op before that, so a replay holds no transaction whole
    (one submit of 100,000 jobs is one transaction) and a corrupt log changes nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0
        self.cut = False
        self.entries = 0
        self.line = 0      # the line of the op given last

    def _lines(self) -> Iterator[tuple[int, str]]:
        with open(self.path, encoding="utf-8", errors="strict", newline="\n") as f:
            for i, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    return          # a final line without its newline is a torn write: ignore it
                yield i, line[:-1]

    def _check(self) -> int | None:
        """The line where a transaction cut off at the end begins (None: none is)."""
        begun: int | None = None
        for i, line in self._lines():
            if not line.strip():
                continue
            head = line.partition(" ")[0]
            try:
                code = int(head)
            except ValueError:
                raise LogCorrupt(f"{self.path}, line {i}: not a log entry: {line[:80]!r}") from None
            if code == BEGIN:
                if begun is not None:
                    raise LogCorrupt(f"{self.path}, line {i}: a transaction begins inside another")
                begun = i
            elif code == END:
                if begun is None:
                    raise LogCorrupt(f"{self.path}, line {i}: a transaction ends that never began")
                begun = None
            elif code not in (NEW, DESTROY, SET, DELETE_ATTR, HEADER):
                raise LogCorrupt(f"{self.path}, line {i}: unknown log op {code}")
        return begun

    def __iter__(self) -> Iterator[Op]:
        if not self.path.exists():
            return
        cut_at = self._check()
        self.cut = cut_at is not None
        for i, line in self._lines():
            if i == cut_at:
                return
            if not line.strip():
                continue
            self.line = i
            op = parse_op(line, i, self.path)
            if op.code == HEADER:
                try:
                    self.seq = int(op.value.split()[0])
                except (ValueError, IndexError):
                    self.seq = 0
            elif op.code not in (BEGIN, END):
                self.entries += 1
                yield op


def read_log(path: Path) -> tuple[list[Op], int, bool]:
    """Committed ops in order, the log's sequence number, and whether a transaction was cut off."""
    reader = LogReader(path)
    ops = list(reader)
    return ops, reader.seq, reader.cut


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TxLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = None
        self._pending: list[str | list[str]] = []
        self._appended = 0     # transactions appended
        self._synced = 0       # transactions durable
        self._written = 0      # transactions handed to the OS (a killed process loses none of them)
        self._write_error: BaseException | None = None   # a write_soon() that failed, for the next commit
        self._flusher: asyncio.Task | None = None
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self.fsyncs = 0
        self.commits = 0

    def rewrite(self, state_lines: Iterable[str], seq: int) -> int:
        """Replace the log with a compact one holding `state_lines` (HTCondor's log rotation);
        returns how many lines it holds."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        n = 0
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{HEADER} {seq} CreationTimestamp {int(time.time())}\n")
            for line in state_lines:
                f.write(line)
                f.write("\n")
                n += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self.close()
        self._file = open(self.path, "a", encoding="utf-8")
        return n

    @property
    def synced(self) -> int:
        """How many appended transactions are on disk."""
        return self._synced

    @property
    def quiet(self) -> bool:
        """Every appended transaction is on disk and no write is under way: safe to rewrite."""
        return self._synced == self._appended and not self._pending and (self._flusher is None or self._flusher.done())

    def append(self, lines: list[str]) -> int:
        """Add one transaction; returns its number, to pass to commit()."""
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        self._pending.append(f"{BEGIN} \n" + "".join(line + "\n" for line in lines) + f"{END} \n")
        self._appended += 1
        return self._appended

    def append_transaction(self, text: list[str]) -> int:
        """Add one transaction already written out, in pieces, its BeginTransaction and
        EndTransaction lines included (a large submit: JobQueue.submit_transaction);
        returns its number."""
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        self._pending.append(text)
        self._appended += 1
        return self._appended

    async def commit(self, number: int | None = None) -> None:
        """Wait until transaction `number` (default: every one appended so far) is on disk."""
        target = self._appended if number is None else number
        if self._write_error is not None:
            e, self._write_error = self._write_error, None
            raise e
        if self._synced >= target:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        self._start_flusher()
        await fut

    def write_soon(self) -> None:
        """Hand every appended transaction to the OS now and fsync it in the background.
        For a change that others can see before anyone awaits its commit (a query shows a job
        Running while the startd is still being asked to start it): a schedd killed meanwhile
        then does not forget it. A failed write is raised by the next commit."""
        if self._pending:
            try:
                self._write_pending()
            except Exception as e:
                self._write_error = e
                self._lost()
                return
        self._start_flusher()

    def _start_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="txlog:flush")

    def _write_pending(self) -> None:
        batch, self._pending = self._pending, []
        assert self._file is not None
        for text in batch:      # (not joined: a large submit's text is not copied again)
            if isinstance(text, list):
                for piece in text:
                    self._file.write(piece)
            else:
                self._file.write(text)
        self._file.flush()
        # Pending transactions are always the last ones appended.
        self._written = self._appended

    def _lost(self) -> None:
        # The transactions of a failed write or fsync will never be known durable; their
        # error has been (or will be) raised once. Later ones are committed as usual, and a
        # commit of these does not wait for ever.
        self._synced = self._written = self._appended - len(self._pending)

    async def _flush(self) -> None:
        while self._pending or self._synced < self._written:
            try:
                if self._pending:
                    self._write_pending()
                upto = self._written
                await asyncio.to_thread(os.fsync, self._file.fileno())
            except Exception as e:
                # Raised by the commits waiting, or else by the next one (not by this task,
                # whose failure nobody awaits).
                if self._waiters:
                    for _, fut in self._waiters:
                        if not fut.done():
                            fut.set_exception(e)
                    self._waiters.clear()
                else:
                    self._write_error = e
                self._lost()
                return
            self.fsyncs += 1
            self.commits += upto - self._synced
            self._synced = upto
            still = []
            for target, fut in self._waiters:
                if target <= self._synced:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((target, fut))
            self._waiters = still

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
