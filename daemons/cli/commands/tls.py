"""`htcpool tls init|cert`: a pool CA and certificates for TLS on every port."""
from __future__ import annotations

import argparse
from pathlib import Path

from daemons.cli.base import EXIT_OK, EXIT_USAGE, CliError


def _config_lines(directory: Path, name: str, mutual: bool) -> list[str]:
    d = directory.resolve()
    lines = ["SEC_DEFAULT_ENCRYPTION = REQUIRED",
             f"AUTH_SSL_SERVER_CERTFILE = {d / f'{name}.crt'}",
             f"AUTH_SSL_SERVER_KEYFILE = {d / f'{name}.key'}",
             f"AUTH_SSL_SERVER_CAFILE = {d / 'ca.crt'}"]
    if mutual:
        lines += ["AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE = True",
                  f"AUTH_SSL_CLIENT_CAFILE = {d / 'ca.crt'}",
                  f"AUTH_SSL_CLIENT_CERTFILE = {d / f'{name}.crt'}",
                  f"AUTH_SSL_CLIENT_KEYFILE = {d / f'{name}.key'}"]
    return lines


def cmd_tls_init(args: argparse.Namespace) -> int:
    from daemons.core.security.tls import TlsError, issue, make_ca
    directory = Path(args.dir)
    try:
        ca = make_ca(directory)
        cert = issue(directory, directory, args.name, args.host or ["127.0.0.1", "localhost"])
    except TlsError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    print(f"CA: {ca.cert} (key {ca.key}); certificate: {cert.cert} (key {cert.key})")
    print("Use it in the pool's configuration (every daemon; the command reads the _CONDOR_ forms):")
    print("\n".join(f"  {line}" for line in _config_lines(directory, args.name, args.mutual)))
    return EXIT_OK


def cmd_tls_cert(args: argparse.Namespace) -> int:
    from daemons.core.security.tls import TlsError, issue
    try:
        cert = issue(Path(args.ca_dir), Path(args.dir or args.ca_dir), args.name, args.host)
    except TlsError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    print(f"certificate: {cert.cert} (key {cert.key})")
    return EXIT_OK


def register(sub) -> None:
    s = sub.add_parser("tls", help="a pool CA and certificates for TLS on every gRPC port")
    cmds = s.add_subparsers(dest="tls_command", required=True, metavar="init|cert")
    common = sub.common_parent
    i = cmds.add_parser("init", parents=[common], help="make a CA and one certificate (ca.crt, NAME.crt, keys 0600)")
    i.add_argument("--dir", required=True, help="where to write them")
    i.add_argument("--host", action="append",
                   help="a host name or address the daemons are reached at (repeatable; default 127.0.0.1, localhost)")
    i.add_argument("--name", default="pool", help="the certificate's file name (default pool)")
    i.add_argument("--mutual", action="store_true", help="print the configuration for mutual TLS too")
    i.set_defaults(fn=cmd_tls_init)
    c = cmds.add_parser("cert", parents=[common], help="another certificate from an existing CA")
    c.add_argument("--ca-dir", required=True, help="the directory with ca.crt and ca.key")
    c.add_argument("--dir", help="where to write it (default: the CA's directory)")
    c.add_argument("--name", required=True, help="its file name")
    c.add_argument("--host", action="append", required=True, help="a host name or address (repeatable)")
    c.set_defaults(fn=cmd_tls_cert)
