"""The htcpool subcommands, one module per family.

Each module has `register(sub)`, which adds its subparsers (with `fn=` set to the
function that runs the command). A new family of commands is a new module here and
one entry in NAMES.

`modules()` imports them when a parser is built, not when this package is imported:
`htcpool daemon ROLE` needs only `lifecycle`, and a daemon process should not carry the
rest (the benches and experiments are a megabyte of every daemon's memory).
"""
from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("lifecycle", "control", "jobs", "status", "admin", "fault", "measure", "token", "tls", "ping")


def modules(names: tuple[str, ...] = NAMES) -> list[ModuleType]:
    return [importlib.import_module(f"daemons.cli.commands.{n}") for n in names]
