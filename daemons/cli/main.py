"""The `htcpool` command: the parser, assembled from daemons/cli/commands, and main()."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

# gRPC's C core writes its own copy of errors the commands and daemons report in one
# line of their own (a port in use): keep it quiet unless asked for.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from daemons.cli.base import DEFAULT_STATE_DIR, CliError  # noqa: E402


def command_word(argv: Sequence[str]) -> str | None:
    """The command's name: the first word that is neither an option nor --pool's or --state-dir's value."""
    value_next = False
    for a in argv:
        if value_next:
            value_next = False
        elif a in ("--pool", "--state-dir"):
            value_next = True
        elif a == "--":
            return None
        elif not a.startswith("-"):
            return a
    return None


def build_parser(only: tuple[str, ...] | None = None) -> argparse.ArgumentParser:
    """The htcpool parser; `only`: just these command modules (daemons.cli.commands.NAMES)."""
    from daemons.cli.commands import NAMES, modules
    # --pool and --state-dir work before or after the command name.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--pool", default=argparse.SUPPRESS,
                        help="collector address HOST:PORT (default: $HTCPOOL_POOL or the pool in --state-dir)")
    common.add_argument("--state-dir", default=argparse.SUPPRESS,
                        help=f"where 'up' keeps a pool (default: $HTCPOOL_STATE_DIR or {DEFAULT_STATE_DIR})")
    p = argparse.ArgumentParser(prog="htcpool", description="An emulated HTCondor pool.", parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_parser = sub.add_parser

    def add_parser(name: str, **kw):
        return _add_parser(name, parents=[common], **kw)
    sub.add_parser = add_parser  # type: ignore[method-assign]
    sub.common_parent = common   # for nested subcommands (bench NAME, experiment NAME)
    for module in modules(only or NAMES):
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare -- is the daemon's own command line (drainboss's seed options).
    options = argv[argv.index("--") + 1:] if "--" in argv else []
    # A daemon process builds only the parser of `daemon` (daemons.cli.commands: modules()).
    parser = build_parser(("lifecycle",) if command_word(argv) == "daemon" else None)
    args = parser.parse_args(argv[:len(argv) - len(options) - 1] if options or "--" in argv else argv)
    args.options = options
    if args.command != "daemon":
        # Retry chatter belongs in daemon logs; a command reports the outcome once.
        logging.getLogger("htcpool").addHandler(logging.NullHandler())
        logging.getLogger("htcpool").propagate = False
    try:
        return int(args.fn(args) or 0)
    except CliError as e:
        print(f"htcpool {args.command}: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
