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

import contextlib
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import classad2

from daemons.core import ads
from daemons.core.ads import AdError, LimitError, expr_text

DEFAULTS_FILE = Path(__file__).with_name("htcpool_defaults.conf")
_PROBE = "HTCPOOL_RAW_PROBE"
_loaded: "Param | None" = None


class ConfigError(Exception):
    """A configuration that cannot be used; the message names file, line or knob."""


def wrapper_text(user_file: Path | None, local_dir: Path) -> str:
    lines = [
        f"include : {DEFAULTS_FILE}",
        # Where daemon state lives unless the user's file (or the environment) says.
        f"LOCAL_DIR = {local_dir}",
    ]
    if user_file is not None:
        lines.append(f"include : {user_file}")
    return "\n".join(lines) + "\n"


def resolve_user_file(path: str | os.PathLike | None) -> Path | None:
    if path is None or str(path) == "":
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


def check_config_file(path: str | os.PathLike | None, local_dir: Path | None = None,
                      timeout_s: float = 30.0, **kw) -> None:
    """See daemons/core/config_check.py: read, expand (and type-check) in a throwaway interpreter."""
    from daemons.core.config_check import check_config_file as check
    check(path, local_dir, timeout_s, **kw)


def load(path: str | os.PathLike | None = None, *, local_dir: Path | None = None,
         check: bool = True) -> "Param":
    """Load the configuration into this process (once) and return typed access to it."""
    global _loaded
    user_file = resolve_user_file(path)
    if check:
        check_config_file(user_file, local_dir)
    fd, wrapper = tempfile.mkstemp(prefix="htcpool-condor_config-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(wrapper_text(user_file, local_dir or Path.cwd() / ".htcpool"))
        os.environ["CONDOR_CONFIG"] = wrapper
        with _quiet_stderr():
            # The throwaway read has already said what is wrong with the file; HTCondor's
            # library repeats some of it (a bad NETWORK_INTERFACE) on stderr.
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


@contextlib.contextmanager
def _quiet_stderr():
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def loaded() -> "Param":
    if _loaded is None:
        raise RuntimeError("configuration not loaded; call daemons.core.config.load() first")
    return _loaded


# HTCondor reads integer knobs into a C int.
INT_MIN, INT_MAX = -2 ** 31, 2 ** 31 - 1
# A ceiling for real-valued knobs (factors, limits, times) beyond any meaningful
# setting, so that the arithmetic done with them stays finite.
LARGE = 1e12
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
            n = float(int(text))
        except ValueError:
            n = None
        except OverflowError:
            raise ConfigError(f"{self.where(name)}: {name} = {text[:60]!r} is out of range") from None
        if n is None:
            try:
                n = float(text)
            except ValueError:
                n = None
        if n is None:
            # HTCondor evaluates numeric knobs as ClassAd expressions ("3600 * 24").
            result = self._evaluate(name, text, want)
            # Undefined and Error are IntEnum members: they must not pass as numbers.
            if isinstance(result, (bool, classad2.Value)) or not isinstance(result, (int, float)):
                raise self._fail(name, text, want)
            n = float(result)
        if not math.isfinite(n):
            raise ConfigError(f"{self.where(name)}: {name} = {text[:60]!r} is not a finite number")
        return n

    def _evaluate(self, name: str, text: str, want: str):
        try:
            tree = ads.parse_expr(text, name)
        except ads.LimitError as e:
            raise ConfigError(f"{self.where(name)}: {e}") from None
        except ads.AdError:
            raise self._fail(name, text, want) from None
        try:
            return tree.eval()
        except Exception:
            raise self._fail(name, text, want) from None

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
        """An integer knob; like HTCondor's, a 32-bit one unless a wider range is given."""
        n = self._number(name, "an integer")
        if n is None:
            return default
        if n != int(n):
            raise self._fail(name, self.raw(name) or "", "an integer")
        if minimum is not None and n < minimum:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} is below the minimum {minimum}")
        top = INT_MAX if maximum is None else maximum
        if n > top:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} is above the maximum {top}")
        if minimum is None and n < INT_MIN:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} is below the minimum {INT_MIN}")
        return int(n)

    def _shown(self, name: str, n: float) -> str:
        """The value as written when it is a plain number, else as evaluated."""
        text = (self.raw(name) or "").strip()
        return text[:60] if re.fullmatch(r"[-+]?[\d.eE+-]+", text) else f"{n:g}"

    def float(self, name: str, default: float | None = None, *, minimum: float | None = None,
              maximum: float | None = None, positive: bool = False) -> float | None:
        n = self._number(name, "a number")
        if n is None:
            return default
        if positive and n <= 0:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} must be positive")
        if minimum is not None and n < minimum:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} is below the minimum {minimum:g}")
        if maximum is not None and n > maximum:
            raise ConfigError(f"{self.where(name)}: {name} = {self._shown(name, n)} is above the maximum {maximum:g}")
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
        result = self._evaluate(name, text, "a boolean")
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
    except LimitError as e:
        raise ConfigError(str(e)) from None
    except AdError:
        raise ConfigError(f"{what} = {text.strip()!r} is not a valid ClassAd expression") from None
