"""The htcpool subcommands, one module per family.

Each module has `register(sub)`, which adds its subparsers (with `fn=` set to the
function that runs the command). A new family of commands is a new module here and
one entry in MODULES.
"""
from __future__ import annotations

from daemons.cli.commands import admin, control, fault, jobs, lifecycle, measure, ping, status, tls, token

MODULES = (lifecycle, control, jobs, status, admin, fault, measure, token, tls, ping)
