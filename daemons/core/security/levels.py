"""HTCondor's authorization levels, which imply which, and where a level's ALLOW list is read.

Both tables are HTCondor's (src/condor_utils/condor_perms.cpp, DCpermissionHierarchy):
- implication: a caller allowed DAEMON is allowed WRITE and so READ; ADMINISTRATOR
  implies WRITE; NEGOTIATOR, CONFIG and ADVERTISE_* imply READ;
- configuration fallback: ALLOW_ADVERTISE_STARTD (and _SCHEDD, _MASTER), when not set,
  is read from ALLOW_DAEMON; every level then falls back to ALLOW_DEFAULT.
"""
from __future__ import annotations

READ = "READ"
WRITE = "WRITE"
NEGOTIATOR = "NEGOTIATOR"
ADMINISTRATOR = "ADMINISTRATOR"
CONFIG = "CONFIG"
DAEMON = "DAEMON"
ADVERTISE_STARTD = "ADVERTISE_STARTD"
ADVERTISE_SCHEDD = "ADVERTISE_SCHEDD"
ADVERTISE_MASTER = "ADVERTISE_MASTER"
DEFAULT = "DEFAULT"

LEVELS: tuple[str, ...] = (READ, WRITE, NEGOTIATOR, ADMINISTRATOR, CONFIG, DAEMON,
                           ADVERTISE_STARTD, ADVERTISE_SCHEDD, ADVERTISE_MASTER)
ALL = frozenset(LEVELS)

# aImpliedNext: holding the key level also grants the value level (and so on down).
IMPLIES: dict[str, str] = {
    WRITE: READ,
    NEGOTIATOR: READ,
    ADMINISTRATOR: WRITE,
    CONFIG: READ,
    DAEMON: WRITE,
    ADVERTISE_STARTD: READ,
    ADVERTISE_SCHEDD: READ,
    ADVERTISE_MASTER: READ,
}

# aConfigNext: where a level's ALLOW_/DENY_ list comes from when its own is not set.
CONFIG_NEXT: dict[str, str] = {
    ADVERTISE_STARTD: DAEMON,
    ADVERTISE_SCHEDD: DAEMON,
    ADVERTISE_MASTER: DAEMON,
}


def implied(level: str) -> frozenset[str]:
    """The level and every level it implies: implied('DAEMON') = {DAEMON, WRITE, READ}."""
    out = [level]
    while out[-1] in IMPLIES:
        out.append(IMPLIES[out[-1]])
    return frozenset(out)


def implied_by(level: str) -> tuple[str, ...]:
    """Levels that directly imply `level` (HTCondor's DirectlyImpliedBy)."""
    return tuple(k for k, v in IMPLIES.items() if v == level)


def config_chain(level: str) -> tuple[str, ...]:
    """Knob suffixes searched for `level`'s list, in order: ('ADVERTISE_STARTD', 'DAEMON', 'DEFAULT')."""
    chain = [level]
    while chain[-1] in CONFIG_NEXT:
        chain.append(CONFIG_NEXT[chain[-1]])
    chain.append(DEFAULT)
    return tuple(chain)


def parse_level(text: str) -> str:
    """A level name, case-insensitively; ValueError naming the choices otherwise."""
    up = text.strip().upper()
    if up not in ALL:
        raise ValueError(f"{text!r} is not an authorization level (one of {', '.join(LEVELS)})")
    return up
