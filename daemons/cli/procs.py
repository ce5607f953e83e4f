"""Processes a local pool runs: whether a pid is still one of our daemons, waiting for
processes to be gone (zombies of other parents included), stopping a pool's daemons in
order, and their peak resident set (and proportional set) for the benches."""
from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# Where stopping pools leave their daemons' peak RSS (record_peaks): the benches report it.
peak_listeners: list[dict[str, float]] = []


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def pss_mb(pid: int) -> float | None:
    """The proportional set size of a live process now, in MiB: its resident pages, each page
    it shares with other processes (the interpreter's and libraries' code) divided among them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


@contextmanager
def record_peaks(into: dict[str, float]) -> Iterator[dict[str, float]]:
    """While inside, every LocalPool that stops first records each daemon's peak RSS (MiB)
    into `into`, as "<state dir name>/<daemon key>"."""
    peak_listeners.append(into)
    try:
        yield into
    finally:
        peak_listeners.remove(into)


def is_daemon_process(pid: int, role: str) -> bool:
    """Whether `pid` is a live (not zombie) htcpool daemon of `role`: never signal a pid
    the system has since given to another program."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, IndexError):
        return False
    return b"daemon" in argv and role.encode() in argv


def wait_gone(pids: list[int], deadline: float) -> list[int]:
    """Wait until the processes exit (reaping our own children); return those still alive.
    A zombie whose parent is some other process than init (a test that started the pool, a
    shell) has exited: that parent may not reap it for a long time. One whose parent is
    init is reaped at once, and we wait for that."""
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        still = []
        for pid in alive:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    continue
            except ChildProcessError:
                pass  # not our child: probe it instead
            state = proc_state(pid)
            if state is not None and not (state[0] == "Z" and state[1] != 1):
                still.append(pid)
        alive = still
        if alive:
            time.sleep(0.02)
    return alive


def proc_state(pid: int) -> tuple[str, int] | None:
    """A process's state letter (Z: a zombie) and parent pid from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def stop_in_order(pids: dict[str, int], timeout_s: float = 15.0) -> list[str]:
    """SIGTERM every daemon but the collector, wait, then the collector; SIGKILL stragglers."""
    stopped = []
    for phase in ([k for k in pids if k != "collector"], [k for k in pids if k == "collector"]):
        group = []
        for key in phase:
            try:
                os.kill(pids[key], signal.SIGTERM)
                os.kill(pids[key], signal.SIGCONT)   # a paused daemon must run to exit
                group.append(pids[key])
                stopped.append(key)
            except ProcessLookupError:
                continue
        for pid in wait_gone(group, time.monotonic() + timeout_s):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return stopped
