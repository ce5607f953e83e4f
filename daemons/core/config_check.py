"""Checking a configuration in a throwaway interpreter, before any daemon uses it.

Three things can go wrong that no Python code can catch once htcondor2 holds the
configuration in this process: a malformed line (HTCondor prints a message and calls
exit()), a macro that refers to itself through others (`A = $(B)`, `B = $(A)`:
expanding it spins forever, holding the interpreter), and a macro that grows without
bound. So a child interpreter reads the file, then expands every knob, saying which
one it is about to expand; the parent watches: a child that stops making progress is
killed and the knob it was expanding named, with the circle of macros found in the
file. With `roles`, the child also reads each daemon's settings the way the daemon
would (types and ranges of every knob it uses), so `htcpool up` refuses a bad value
before it starts any process.
"""
from __future__ import annotations

import os
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

# A knob expands in microseconds; one that takes this long is in a circle.
STALL_S = 5.0
CHILD_MEMORY_BYTES = 4 * 1024 ** 3
PLACEHOLDER_COLLECTOR = "127.0.0.1:9618"

_SOURCE_ERROR = re.compile(r'Config source Error "(?P<file>[^"]+)", Line (?P<line>\d+)')
_GLOBAL_ERROR = re.compile(r"Configuration Error Line (?P<line>\d+) while reading (?:global )?config source (?P<file>\S+)")
_DEFINITION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s?(.*)$")
_INCLUDE = re.compile(r"^\s*include\s*(?:ifexist\s*)?:\s*(.+?)\s*$", re.IGNORECASE)
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)")


def explain_htcondor_error(stderr: str) -> str:
    """Turn htcondor2's exit message into one line naming the file, line and text."""
    m = _SOURCE_ERROR.search(stderr) or _GLOBAL_ERROR.search(stderr)
    detail = " ".join(
        line.strip() for line in stderr.splitlines()
        if line.strip() and not _SOURCE_ERROR.search(line) and not _GLOBAL_ERROR.search(line)
    )
    if not m:
        return f"configuration could not be read: {stderr.strip() or 'htcondor2 exited'}"
    file, line_no = m.group("file"), int(m.group("line"))
    text = ""
    try:
        text = Path(file).read_text(errors="replace").splitlines()[line_no - 1].strip()
    except (OSError, IndexError):
        pass
    msg = f"config file {file}, line {line_no}: cannot parse"
    if text:
        msg += f" {text!r}"
    if detail:
        msg += f" ({detail})"
    return msg


# ---- reading the file as written: its lines, its definitions, a circle for the message ----
def _lines(path: Path, seen: set[Path] | None = None) -> Iterator[tuple[Path, int, bytes]]:
    """(file, line number, bytes) of every line, each `include :` followed by the included
    file's lines."""
    seen = seen if seen is not None else set()
    if path in seen:
        return
    seen.add(path)
    try:
        data = path.read_bytes()
    except OSError:
        return
    for n, raw in enumerate(data.splitlines(), 1):
        yield path, n, raw
        inc = _INCLUDE.match(raw.decode("utf-8", errors="replace"))
        if inc:
            target = Path(inc.group(1))
            yield from _lines(target if target.is_absolute() else path.parent / target, seen)


def _definitions(path: Path) -> dict[str, tuple[Path, int, str]]:
    """NAME -> (file, line, value) of the last plain definition, following `include :`."""
    out: dict[str, tuple[Path, int, str]] = {}
    for f, n, raw in _lines(path):
        line = raw.decode("utf-8", errors="replace")
        m = _DEFINITION.match(line)
        if m and not line.lstrip().startswith("#"):
            out[m.group(1).upper()] = (f, n, m.group(2).strip())
    return out


def first_non_utf8(path: Path) -> tuple[Path, int, str] | None:
    """(file, line number, the line) of the first line that is not UTF-8 text, following
    `include :`. HTCondor takes any bytes; htcpool's daemons read values as text, and
    expanding such a knob would fail deep inside a daemon's start-up."""
    for f, n, raw in _lines(path):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return f, n, raw.decode("utf-8", errors="replace").strip()
    return None


def find_circle(defs: dict[str, tuple[Path, int, str]], start: str) -> list[str]:
    """Names from `start` around a circle of references (A, B, A), or [] if none is seen.

    A knob that names itself ("A = $(A) more") means its previous definition, as in
    HTCondor, so that alone is no circle.
    """
    def refs(name: str) -> list[str]:
        value = defs.get(name, (None, 0, ""))[2]
        return [r.upper() for r in _REFERENCE.findall(value) if r.upper() != name]

    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def visit(name: str) -> list[str]:
        if name in on_path:
            return path[path.index(name):] + [name]
        if name in done or name not in defs:
            return []
        path.append(name)
        on_path.add(name)
        for r in refs(name):
            found = visit(r)
            if found:
                return found
        path.pop()
        on_path.discard(name)
        done.add(name)
        return []

    return visit(start.upper())


def _stalled_message(path: str | os.PathLike | None, user_file: Path | None, knob: str) -> str:
    defs = _definitions(user_file) if user_file is not None else {}
    circle: list[str] = []
    for start in ([knob] if knob != "*" else []) + sorted(defs):
        circle = find_circle(defs, start)
        if circle:
            break
    if circle:
        file, line, value = defs[circle[0]]
        return (f"config file {file}, line {line}: {circle[0]} = {value!r}: the macros "
                f"{' -> '.join(circle)} refer to each other in a circle, so expanding them never finishes")
    if knob == "*":
        return f"config file {path}: expanding its macros never finishes (a macro that refers to itself?)"
    if os.environ.get(f"_CONDOR_{knob}") is not None:
        return f"environment _CONDOR_{knob}: expanding {knob} never finishes (a macro that refers to itself?)"
    return f"config file {path}: expanding {knob} never finishes (a macro that refers to itself?)"


# ---- the parent ------------------------------------------------------------------------
def check_config_file(path: str | os.PathLike | None, local_dir: Path | None = None,
                      timeout_s: float = 30.0, *, roles: Sequence[str] = (),
                      env: dict[str, str] | None = None, stall_s: float = STALL_S) -> None:
    """Read (and expand, and with `roles` type-check) the configuration in a fresh
    interpreter; raise ConfigError naming the file and line, or the knob."""
    from daemons.core.config import ConfigError, resolve_user_file, wrapper_text
    user_file = resolve_user_file(path)
    bad = first_non_utf8(user_file) if user_file else None
    if bad is not None:
        raise ConfigError(f"config file {bad[0]}, line {bad[1]}: not UTF-8 text ({bad[2]!r})")
    with tempfile.TemporaryDirectory(prefix="htcpool-cfg-") as d:
        wrapper = Path(d) / "condor_config"
        wrapper.write_text(wrapper_text(user_file, local_dir or Path.cwd() / ".htcpool"))
        child_env = dict(env if env is not None else os.environ, CONDOR_CONFIG=str(wrapper))
        cmd = [sys.executable, "-m", "daemons.core.config_check", str(user_file or ""),
               str(local_dir or ""), *roles]
        proc = subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=os.getcwd())
        try:
            outcome, last = _watch(proc, timeout_s, stall_s)
            if outcome in ("ok", "ended", "error"):
                proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            outcome = "timeout"
        finally:
            if proc.poll() is None:
                proc.kill()
            stdout_rest, stderr = proc.communicate()
        if outcome == "ok" and proc.returncode == 0:
            return
        if outcome == "stalled":
            raise ConfigError(_stalled_message(path, user_file, last))
        if outcome == "timeout":
            raise ConfigError(f"config file {path}: reading it did not finish in {timeout_s:.0f} s "
                              "(a macro that refers to itself?)")
        for line in stdout_rest.splitlines():
            if line.startswith("ERROR "):
                raise ConfigError(line[len("ERROR "):])
        if outcome == "error":
            raise ConfigError(last)
        if proc.returncode != 0:
            if last == "reading":
                raise ConfigError(explain_htcondor_error(stderr + stdout_rest))
            raise ConfigError(f"config file {path}: checking it failed while expanding {last} "
                              f"(exit code {proc.returncode}; a macro that grows without bound?)")


def _watch(proc: subprocess.Popen, timeout_s: float, stall_s: float) -> tuple[str, str]:
    """Follow the child's progress lines: ("ok" | "error" | "stalled" | "timeout", detail)."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    last_progress = time.monotonic()
    phase, last = "reading", "reading"
    try:
        while True:
            now = time.monotonic()
            limit = deadline if phase != "expanding" else min(deadline, last_progress + stall_s)
            if now >= limit:
                return ("stalled" if phase == "expanding" else "timeout"), last
            if not sel.select(timeout=limit - now):
                continue
            line = proc.stdout.readline()
            if not line:
                return "ended", last
            line = line.rstrip("\n")
            last_progress = time.monotonic()
            if line == "READ":
                phase, last = "expanding", ""
            elif line.startswith("K "):
                last = line[2:]
            elif line == "EXPANDED":
                phase, last = "roles", ""
            elif line.startswith("ERROR "):
                return "error", line[len("ERROR "):]
            elif line == "OK":
                return "ok", ""
    finally:
        sel.close()


# ---- the child ---------------------------------------------------------------------------
def _child(user_file: str, local_dir: str, roles: list[str]) -> int:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    except (ValueError, OSError):
        pass
    import htcondor2
    htcondor2.reload_config()
    print("READ", flush=True)
    # The knobs the file and the environment define first, one at a time: htcondor2's
    # list of all knobs expands every value, so a circle would hang it unnamed.
    own = list(_definitions(Path(user_file))) if user_file else []
    own += [k[len("_CONDOR_"):] for k in os.environ if k.startswith("_CONDOR_")]
    for name in own:
        print(f"K {name}", flush=True)
        htcondor2.param.get(name)
    print("K *", flush=True)
    for name in list(htcondor2.param.keys()):
        print(f"K {name}", flush=True)
        htcondor2.param.get(name)
    print("EXPANDED", flush=True)
    if roles:
        from daemons.core import config as configmod
        from daemons.core.config import ConfigError
        from daemons.core.runner import read_role_config
        file = user_file or None
        ldir = Path(local_dir) if local_dir else None
        collector_first = sorted(roles, key=lambda r: r != "collector")
        placeholder = False
        try:
            param = configmod.load(file, local_dir=ldir, check=False)
            for role in collector_first:
                if role != "collector" and not placeholder and not param.str("COLLECTOR_HOST"):
                    # `up` tells the other daemons where its collector is.
                    os.environ["_CONDOR_COLLECTOR_HOST"] = PLACEHOLDER_COLLECTOR
                    param = configmod.load(file, local_dir=ldir, check=False)
                    placeholder = True
                read_role_config(role, param)
        except ConfigError as e:
            print(f"ERROR {e}", flush=True)
            return 3
    print("OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2], sys.argv[3:]))
