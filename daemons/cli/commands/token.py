"""`htcpool token create|init|list`: IDTOKENS, like condor_token_create and condor_token_list;
`init` makes a pool's secrets once, as a container image's first start does."""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

from daemons.cli.base import EXIT_OK, EXIT_USAGE, CliError, state_dir

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_lifetime(text: str) -> int:
    """Seconds, or a number with s/m/h/d/w: '3600', '90m', '1d'."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", text or "")
    if not m or int(m.group(1)) <= 0:
        raise CliError(f"--lifetime {text!r}: give a positive number of seconds, or with s/m/h/d/w (1d)", EXIT_USAGE)
    return int(m.group(1)) * _UNITS[m.group(2) or "s"]


def _pool_security(args: argparse.Namespace) -> dict:
    from daemons.cli.pool import PoolError, load_state
    try:
        return dict(load_state(state_dir(args)).get("security") or {})
    except (PoolError, OSError, ValueError):
        return {}


def _signing(args: argparse.Namespace) -> tuple[bytes, str, Path]:
    """The HS256 key, the trust domain and the key file, from --key-file / the environment
    (_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE, else _CONDOR_SEC_PASSWORD_DIRECTORY/<key>,
    _CONDOR_TRUST_DOMAIN) / the pool in the state directory."""
    from daemons.core.security.keys import POOL_KEY_ID, KeyFileError, check_key_id, derive_jwt_key, read_key_file
    pool = _pool_security(args)
    env = os.environ
    if args.key_file:
        path = Path(args.key_file)
    elif args.key != POOL_KEY_ID and env.get("_CONDOR_SEC_PASSWORD_DIRECTORY"):
        path = Path(env["_CONDOR_SEC_PASSWORD_DIRECTORY"]) / args.key
    elif args.key == POOL_KEY_ID and env.get("_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE"):
        path = Path(env["_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE"])
    elif args.key == POOL_KEY_ID and env.get("_CONDOR_SEC_PASSWORD_DIRECTORY"):
        # HTCondor's default: SEC_TOKEN_POOL_SIGNING_KEY_FILE = $(SEC_PASSWORD_DIRECTORY)/POOL.
        path = Path(env["_CONDOR_SEC_PASSWORD_DIRECTORY"]) / POOL_KEY_ID
    elif pool.get("pool_key_file"):
        pool_file = Path(pool["pool_key_file"])
        path = pool_file if args.key == POOL_KEY_ID else pool_file.parent / args.key
    else:
        raise CliError("no signing key: name it with --key-file, or _CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE, or run "
                       "this where 'htcpool up' recorded a pool (--state-dir)", EXIT_USAGE)
    domain = args.trust_domain or env.get("_CONDOR_TRUST_DOMAIN") or pool.get("trust_domain")
    if not domain:
        raise CliError("no trust domain: give --trust-domain (the pool's TRUST_DOMAIN) or _CONDOR_TRUST_DOMAIN",
                       EXIT_USAGE)
    try:
        check_key_id(args.key)
        return derive_jwt_key(read_key_file(path, pool=args.key == POOL_KEY_ID)), domain, path
    except KeyFileError as e:
        raise CliError(str(e), EXIT_USAGE) from None


def cmd_token_create(args: argparse.Namespace) -> int:
    from daemons.core.security.discovery import htcondor_token_dir, write_token_file
    from daemons.core.security.levels import parse_level
    from daemons.core.security.tokens import TokenError, mint
    try:
        scopes = [parse_level(a) for a in args.authz or []]
    except ValueError as e:
        raise CliError(f"--authz {e}", EXIT_USAGE) from None
    lifetime = parse_lifetime(args.lifetime) if args.lifetime else None
    key, domain, _ = _signing(args)
    identity = args.identity if "@" in args.identity else f"{args.identity}@{domain}"
    try:
        token = mint(key, identity=identity, issuer=domain, key_id=args.key, scopes=scopes, lifetime_s=lifetime)
    except TokenError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    if args.file:
        path = Path(args.file)
        write_token_file(path.parent if str(path.parent) else Path("."), path.name, token)
        print(f"token for {identity} written to {path}")
    elif args.token:
        try:
            path = write_token_file(htcondor_token_dir(os.environ), args.token, token)
        except ValueError as e:
            raise CliError(f"--token {e}", EXIT_USAGE) from None
        print(f"token for {identity} written to {path}")
    else:
        print(token)
    return EXIT_OK


def cmd_token_init(args: argparse.Namespace) -> int:
    """A pool's secrets made once, before any daemon starts, where every daemon will find
    them (a compose pool's secrets volume, a directory copied to every host): the signing
    key DIR/passwords.d/POOL unless there is one, and a token per --identity in
    DIR/tokens.d/<user> unless one that verifies is there. Running it again changes nothing."""
    from daemons.core.security.discovery import ensure_token_file
    from daemons.core.security.keys import POOL_KEY_ID, KeyFileError, KeyRing, create_key_file
    from daemons.core.security.tokens import TokenError
    domain = args.trust_domain or os.environ.get("_CONDOR_TRUST_DOMAIN")
    if not domain:
        raise CliError("no trust domain: give --trust-domain (the pool's TRUST_DOMAIN) or _CONDOR_TRUST_DOMAIN",
                       EXIT_USAGE)
    base = Path(args.dir)
    passwords, tokens = base / "passwords.d", base / "tokens.d"
    key_file = passwords / POOL_KEY_ID
    try:
        made = create_key_file(key_file)
        print(f"{'created' if made else 'kept'} the pool signing key {key_file}")
        keys = KeyRing(key_file, passwords)
        keys.jwt_key(POOL_KEY_ID)   # a key file that cannot be used is refused now, not by every daemon later
        for who in args.identity or []:
            user, _, dom = who.partition("@")
            identity = f"{user}@{dom or domain}"
            wrote = ensure_token_file(tokens, user, keys, trust_domain=domain, identity=identity)
            print(f"{'wrote' if wrote else 'kept'} the token for {identity} in {tokens / user}")
    except (KeyFileError, TokenError, ValueError) as e:
        raise CliError(str(e), EXIT_USAGE) from None
    except OSError as e:
        raise CliError(f"{e.filename or base}: {e.strerror}", EXIT_USAGE) from None
    print("Every daemon of the pool needs (the command reads the _CONDOR_ forms):")
    for line in (f"SEC_PASSWORD_DIRECTORY = {passwords.resolve()}",
                 f"SEC_TOKEN_SYSTEM_DIRECTORY = {tokens.resolve()}", f"TRUST_DOMAIN = {domain}"):
        print(f"  {line}")
    return EXIT_OK


def cmd_token_list(args: argparse.Namespace) -> int:
    from daemons.core.security import discovery
    from daemons.core.security.tokens import TokenError, parse_scopes, unverified
    if args.file:
        found = [t for t in discovery.read_dir(Path(args.file).parent) if t.path.name == Path(args.file).name]
    elif args.dir:
        found = discovery.read_dir(Path(args.dir))
    else:
        from daemons.cli.base import _pool_target
        try:
            _, state = _pool_target(args)
        except CliError:
            state = None
        pool_dir = Path(state["tokens"]) if state and state.get("tokens") else None
        found = [t for d in discovery.candidate_dirs(os.environ, pool_dir) for t in discovery.read_dir(d)]
    rows = []
    sent = 0
    for t in found:
        row = {"file": str(t.path), "line": t.line, "usable": not t.problem, "problem": t.problem}
        try:
            header, claims = unverified(t.token)
            scopes = parse_scopes(claims.get("scope"))
            row.update({"header": header, "payload": claims, "identity": claims.get("sub"),
                        "issuer": claims.get("iss"), "authz": sorted(scopes) if scopes else "all the identity's",
                        "expires": claims.get("exp")})
        except TokenError:
            pass
        if not t.problem and sent < discovery.MAX_CANDIDATES:
            row["sent"] = True
            sent += 1
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return EXIT_OK
    if not rows:
        print("no tokens found")
        return EXIT_OK
    for r in rows:
        if "header" in r:
            # condor_token_list's line, then what it means.
            print(f"Header: {json.dumps(r['header'], separators=(',', ':'))} "
                  f"Payload: {json.dumps(r['payload'], separators=(',', ':'))} File: {r['file']}")
            exp = r["expires"]
            when = "never" if exp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(exp))
            authz = r["authz"] if isinstance(r["authz"], str) else " ".join(r["authz"])
            state = "sent first" if r.get("sent") and r is next(x for x in rows if x.get("sent")) else \
                ("sent" if r.get("sent") else f"not sent: {r['problem']}" if r["problem"] else "not sent (too many)")
            print(f"  identity {r['identity']}, issuer {r['issuer']}, authz {authz}, expires {when}; {state}")
        else:
            print(f"{r['file']}, line {r['line']}: {r['problem']}")
    return EXIT_OK


def register(sub) -> None:
    s = sub.add_parser("token", help="IDTOKENS: create and list, like condor_token_create / condor_token_list")
    tokens = s.add_subparsers(dest="token_command", required=True, metavar="create|init|list")
    common = sub.common_parent
    c = tokens.add_parser("create", parents=[common], help="mint a token signed with the pool's key")
    c.add_argument("--identity", required=True, help="USER@DOMAIN the token authenticates as")
    c.add_argument("--authz", action="append", metavar="LEVEL",
                   help="limit the token to this level (repeatable: READ, WRITE, ADMINISTRATOR, DAEMON, ...)")
    c.add_argument("--lifetime", help="seconds, or with s/m/h/d/w (1d); default: no expiry")
    c.add_argument("--key", default="POOL", help="signing key id (a file in SEC_PASSWORD_DIRECTORY; default POOL)")
    c.add_argument("--key-file", help="the signing key file (default: the pool's)")
    c.add_argument("--trust-domain", help="the issuer (default: the pool's TRUST_DOMAIN)")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--token", metavar="NAME", help="write it as NAME in SEC_TOKEN_DIRECTORY or ~/.condor/tokens.d")
    where.add_argument("--file", help="write it to this file (mode 0600)")
    c.set_defaults(fn=cmd_token_create)
    i = tokens.add_parser("init", parents=[common],
                          help="make a pool's signing key and tokens in a directory, once (a secrets volume)")
    i.add_argument("--dir", required=True, help="where: DIR/passwords.d/POOL and DIR/tokens.d/USER")
    i.add_argument("--trust-domain", help="the pool's TRUST_DOMAIN (default: $_CONDOR_TRUST_DOMAIN)")
    i.add_argument("--identity", action="append", metavar="USER[@DOMAIN]",
                   help="also a token for this user, in DIR/tokens.d/USER (repeatable)")
    i.set_defaults(fn=cmd_token_init)
    ls = tokens.add_parser("list", parents=[common], help="the tokens this command would send, and what they grant")
    ls.add_argument("--dir", help="list the tokens in this directory instead")
    ls.add_argument("--file", help="list the tokens in this file instead")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_token_list)
