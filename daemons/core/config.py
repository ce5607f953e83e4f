"""HTCondor-syntax configuration, read once per process through htcondor2.param.

htcondor2 is process-global and, on a malformed line, prints a message and calls
exit() from C, which no Python code can catch. So a configuration is first read in
a throwaway interpreter (`check_config_file`); only if that succeeds is it loaded
here. htcondor2 also silently replaces a badly typed value of a knob it knows by
that knob's default ("NEGOTIATOR_INTERVAL = abc" reads as 60); `Param` therefore
reads every knob's raw text and converts it itself, naming the knob and the line
that set it when the text is not of the right type.

The file actually loaded is a small wrapper: htcpool's emulation defaults
(htcpool_defaults.conf), then `include :` the user's file. Environment overrides
(`_CONDOR_<KNOB>=value`) work as in HTCondor and beat both.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import classad2

from daemons.core.ads import AdError, expr_text

DEFAULTS_FILE = Path(__file__).with_name("htcpool_defaults.conf")
_PROBE = "HTCPOOL_RAW_PROBE"
_loaded: "Param | None" = None


class ConfigError(Exception):
    """A configuration that cannot be used; the message names file, line or knob."""


def _wrapper_text(user_file: Path | None, local_dir: Path) -> str:
    lines = [
        f"include : {DEFAULTS_FILE}",
        # Where daemon state lives unless the user's file (or the environment) says.
        f"LOCAL_DIR = {local_dir}",
    ]
    if user_file is not None:
        lines.append(f"include : {user_file}")
    return "\n".join(lines) + "\n"


def _resolve_user_file(path: str | os.PathLike | None) -> Path | None:
    if path is None:
        return None
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise ConfigError(f"config file {path}: no such file")
    if not p.is_file():
        raise ConfigError(f"config file {path}: not a regular file")
    try:
        p.read_bytes()
    except OSError as e:
        raise ConfigError(f"config file {path}: cannot be read ({e.strerror})") from e
    return p


_SOURCE_ERROR = re.compile(r'Config source Error "(?P<file>[^"]+)", Line (?P<line>\d+)')
_GLOBAL_ERROR = re.compile(r"Configuration Error Line (?P<line>\d+) while reading (?:global )?config source (?P<file>\S+)")


def _explain_htcondor_error(stderr: str) -> str:
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


def check_config_file(path: str | os.PathLike | None, local_dir: Path | None = None,
                      timeout_s: float = 30.0) -> None:
    """Read the configuration in a fresh interpreter; raise ConfigError if HTCondor rejects it."""
    user_file = _resolve_user_file(path)
    with tempfile.TemporaryDirectory(prefix="htcpool-cfg-") as d:
        wrapper = Path(d) / "condor_config"
        wrapper.write_text(_wrapper_text(user_file, local_dir or Path.cwd() / ".htcpool"))
        env = dict(os.environ, CONDOR_CONFIG=str(wrapper))
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "import htcondor2; htcondor2.reload_config()"],
                env=env, capture_output=True, text=True, timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as e:
            # HTCondor loops forever on some self-referencing macros.
            raise ConfigError(
                f"config file {path}: reading it did not finish in {timeout_s:.0f} s "
                "(a macro that refers to itself?)") from e
        if proc.returncode != 0:
            raise ConfigError(_explain_htcondor_error(proc.stderr + proc.stdout))


def load(path: str | os.PathLike | None = None, *, local_dir: Path | None = None,
         check: bool = True) -> "Param":
    """Load the configuration into this process (once) and return typed access to it."""
    global _loaded
    user_file = _resolve_user_file(path)
    if check:
        check_config_file(user_file, local_dir)
    fd, wrapper = tempfile.mkstemp(prefix="htcpool-condor_config-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_wrapper_text(user_file, local_dir or Path.cwd() / ".htcpool"))
        os.environ["CONDOR_CONFIG"] = wrapper
        import htcondor2  # imported late: it reads CONDOR_CONFIG on import

        htcondor2.reload_config()
        param = htcondor2.param
    finally:
        os.unlink(wrapper)

    def raw(name: str) -> str | None:
        # "$(KNOB)" expands to the knob's text, or its HTCondor default, untouched
        # by htcondor2's typed conversion.
        param[_PROBE] = f"$({name})"
        value = param.get(_PROBE)
        return None if value is None or value == "" else str(value)

    _loaded = Param(raw, user_file, names=lambda: [k for k in param.keys() if k != _PROBE])
    return _loaded


def loaded() -> "Param":
    if _loaded is None:
        raise RuntimeError("configuration not loaded; call daemons.core.config.load() first")
    return _loaded


_TRUE = {"true", "yes", "t", "y", "1"}
_FALSE = {"false", "no", "f", "n", "0"}


@dataclass
class Param:
    """Typed, validated access to configuration knobs."""

    raw: Callable[[str], str | None]
    user_file: Path | None = None
    names: Callable[[], list[str]] = list

    @classmethod
    def from_dict(cls, values: dict[str, str]) -> "Param":
        """A Param over plain values (unit tests; no htcondor2 involved)."""
        upper = {k.upper(): v for k, v in values.items()}
        return cls(lambda name: upper.get(name.upper()), names=lambda: list(values))

    def with_prefix(self, prefix: str) -> list[str]:
        """Knob names (set or defaulted) that start with `prefix`, case-insensitively."""
        p = prefix.upper()
        return sorted({n for n in self.names() if n.upper().startswith(p)})

    def where(self, name: str) -> str:
        """'file, line N' of the last line that sets `name` in the user's file, if any."""
        if self.user_file is not None:
            pattern = re.compile(rf"^\s*{re.escape(name)}\s*[=:]", re.IGNORECASE)
            found = None
            try:
                for i, line in enumerate(self.user_file.read_text(errors="replace").splitlines(), 1):
                    if pattern.match(line):
                        found = i
            except OSError:
                pass
            if found is not None:
                return f"config file {self.user_file}, line {found}"
        if os.environ.get(f"_CONDOR_{name}") is not None:
            return f"environment _CONDOR_{name}"
        return "configuration"

    def _fail(self, name: str, value: str, want: str) -> ConfigError:
        return ConfigError(f"{self.where(name)}: {name} = {value!r} is not {want}")

    def is_set(self, name: str) -> bool:
        return self.raw(name) is not None

    def str(self, name: str, default: str | None = None) -> str | None:
        v = self.raw(name)
        return default if v is None else v.strip()

    def _number(self, name: str, want: str) -> float | None:
        v = self.raw(name)
        if v is None:
            return None
        text = v.strip()
        try:
            return float(int(text))
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            pass
        # HTCondor evaluates numeric knobs as ClassAd expressions ("3600 * 24").
        try:
            result = classad2.ExprTree(text).eval()
        except Exception:
            raise self._fail(name, text, want) from None
        # Undefined and Error are IntEnum members: they must not pass as numbers.
        if isinstance(result, (bool, classad2.Value)) or not isinstance(result, (int, float)):
            raise self._fail(name, text, want)
        return float(result)

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        n = self._number(name, "an integer")
        if n is None:
            return default
        if n != int(n):
            raise self._fail(name, self.raw(name) or "", "an integer")
        if minimum is not None and n < minimum:
            raise ConfigError(f"{self.where(name)}: {name} = {int(n)} is below the minimum {minimum}")
        return int(n)

    def float(self, name: str, default: float | None = None, *, minimum: float | None = None,
              positive: bool = False) -> float | None:
        n = self._number(name, "a number")
        if n is None:
            return default
        if positive and n <= 0:
            raise ConfigError(f"{self.where(name)}: {name} = {n:g} must be positive")
        if minimum is not None and n < minimum:
            raise ConfigError(f"{self.where(name)}: {name} = {n:g} is below the minimum {minimum:g}")
        return n

    def bool(self, name: str, default: bool | None = None) -> bool | None:
        v = self.raw(name)
        if v is None:
            return default
        text = v.strip()
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        try:
            result = classad2.ExprTree(text).eval()
        except Exception:
            raise self._fail(name, text, "a boolean") from None
        if isinstance(result, bool):
            return result
        raise self._fail(name, text, "a boolean")

    def expr(self, name: str, default: str | None = None) -> str | None:
        """A ClassAd expression, validated; returned as canonical text."""
        v = self.raw(name)
        if v is None:
            return default
        return parse_expr(v, self.where(name) + f": {name}")

    def list(self, name: str, default: list[str] | None = None) -> list[str]:
        """HTCondor list syntax: items separated by commas and/or whitespace."""
        v = self.raw(name)
        if v is None:
            return list(default or [])
        return [item for item in re.split(r"[,\s]+", v.strip()) if item]


def parse_expr(text: str, what: str) -> str:
    """Validate a ClassAd expression and return its canonical one-line text."""
    try:
        return expr_text(text, what)
    except AdError:
        raise ConfigError(f"{what} = {text.strip()!r} is not a valid ClassAd expression") from None
