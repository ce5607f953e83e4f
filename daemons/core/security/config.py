"""Security knobs, read once into frozen dataclasses (HTCondor's names and meanings).

| knob | meaning |
|---|---|
| SEC_DEFAULT_AUTHENTICATION, SEC_<LEVEL>_AUTHENTICATION | REQUIRED, PREFERRED, OPTIONAL or NEVER |
| ALLOW_<LEVEL>, DENY_<LEVEL> (and _<SUBSYS> variants) | who may do what (authz.py) |
| TRUST_DOMAIN | the issuer of this pool's tokens (default $(UID_DOMAIN)) |
| SEC_TOKEN_POOL_SIGNING_KEY_FILE, SEC_PASSWORD_DIRECTORY | signing keys (keys.py) |
| SEC_TOKEN_SYSTEM_DIRECTORY, SEC_TOKEN_DIRECTORY | where a daemon or tool finds tokens |
| SEC_TOKEN_REVOCATION_EXPR, SEC_TOKEN_MAX_AGE | tokens to refuse |
| QUEUE_SUPER_USERS, QUEUE_SUPER_USER_MAY_IMPERSONATE | who may act on anyone's jobs |
| SEC_DEFAULT_ENCRYPTION = REQUIRED, AUTH_SSL_* | TLS on every gRPC port and status page |
"""
from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from daemons.core.config import ConfigError, Param
from daemons.core.security.authz import Policy
from daemons.core.security.levels import DEFAULT, LEVELS, config_chain

REQUIRED, PREFERRED, OPTIONAL, NEVER = "REQUIRED", "PREFERRED", "OPTIONAL", "NEVER"
_REQUIREMENTS = (REQUIRED, PREFERRED, OPTIONAL, NEVER)


class TlsError(Exception):
    """A certificate or key that cannot be made or used; the message names the file."""


@dataclass(frozen=True)
class TlsConfig:
    """TLS for gRPC (and the status page): HTCondor's AUTH_SSL_* file knobs."""
    server_cert: Path                 # AUTH_SSL_SERVER_CERTFILE
    server_key: Path                  # AUTH_SSL_SERVER_KEYFILE
    server_ca: Path | None = None     # AUTH_SSL_SERVER_CAFILE: what clients check servers against
    client_cert: Path | None = None   # AUTH_SSL_CLIENT_CERTFILE: what this process shows as a client
    client_key: Path | None = None    # AUTH_SSL_CLIENT_KEYFILE
    client_ca: Path | None = None     # AUTH_SSL_CLIENT_CAFILE: what servers check clients against
    require_client_cert: bool = False  # AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE (mutual TLS)
    skip_host_check: bool = False     # SSL_SKIP_HOST_CHECK: check the CA and the name `htcpool` only


@dataclass(frozen=True)
class SecurityConfig:
    # (level, REQUIRED|PREFERRED|OPTIONAL|NEVER) for every level
    authentication: tuple[tuple[str, str], ...] = tuple((lv, NEVER) for lv in LEVELS)
    # (knob, value) of every ALLOW_/DENY_ knob that is set, for Policy.from_lists
    lists: tuple[tuple[str, str], ...] = ()
    subsys: str = ""
    trust_domain: str = "htcpool"
    pool_key_file: Path = Path("passwords.d/POOL")
    password_dir: Path = Path("passwords.d")
    token_system_dir: Path = Path("tokens.d")
    token_dir: Path | None = None
    revocation_expr: str | None = None
    max_age_s: int | None = None
    queue_super_users: tuple[str, ...] = ("root", "condor")
    impersonate: str | None = None     # regex of users a super user may submit as
    tls: TlsConfig | None = None
    resolve_hosts: bool = field(default=True, compare=False)

    def requirement(self, level: str) -> str:
        return dict(self.authentication).get(level, REQUIRED)

    def anchored(self, base: Path) -> "SecurityConfig":
        """Relative key and token paths taken under `base` (the daemon's LOCAL_DIR), so that a
        daemon built in code never creates or reads secrets in whatever directory it runs from."""
        def at(p: Path | None) -> Path | None:
            return p if p is None or p.is_absolute() else base / p
        return replace(self, pool_key_file=at(self.pool_key_file), password_dir=at(self.password_dir),
                       token_system_dir=at(self.token_system_dir), token_dir=at(self.token_dir))

    @property
    def open_levels(self) -> tuple[str, ...]:
        """Levels with authentication NEVER: anyone may call them (today's open pool)."""
        return tuple(lv for lv, req in self.authentication if req == NEVER)

    @property
    def all_open(self) -> bool:
        return len(self.open_levels) == len(LEVELS)

    def policy(self) -> Policy:
        values = dict(self.lists)
        return Policy.from_lists(values.get, self.subsys, resolve=_resolve if self.resolve_hosts else None)


def _resolve(host: str) -> tuple[str, ...]:
    try:
        return tuple(sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)}))
    except OSError:
        return ()


def _requirement(p: Param, level: str, subsys: str) -> str:
    for name in config_chain(level):
        for knob in (f"SEC_{name}_AUTHENTICATION_{subsys}", f"SEC_{name}_AUTHENTICATION"):
            text = p.str(knob)
            if text:
                up = text.strip().upper()
                match = next((r for r in _REQUIREMENTS if r.startswith(up[:1]) and r.startswith(up)), None)
                if match is None:
                    raise ConfigError(f"{p.where(knob)}: {knob} = {text!r} is not one of "
                                      f"{', '.join(_REQUIREMENTS)}")
                return match
    return PREFERRED  # HTCondor's built-in default when nothing is configured


def _first_existing(p: Param, knob: str) -> Path | None:
    """A file knob; HTCondor allows a comma-separated list of candidates (the first that exists)."""
    text = p.str(knob)
    if not text:
        return None
    candidates = [Path(c.strip()) for c in text.split(",") if c.strip()]
    for c in candidates:
        if c.is_file():
            return c
    return candidates[0] if candidates else None


def _must_exist(p: Param, knob: str, path: Path | None, why: str) -> Path:
    if path is None:
        raise ConfigError(f"{p.where(knob)}: {knob} is not set, and {why}")
    if not path.is_file():
        raise ConfigError(f"{p.where(knob)}: {knob} = {path}: no such file ({why})")
    return path


def read_tls(p: Param) -> TlsConfig | None:
    encryption = (p.str("SEC_DEFAULT_ENCRYPTION") or "").strip().upper()
    if not encryption.startswith("R"):
        return None
    why = "SEC_DEFAULT_ENCRYPTION = REQUIRED turns TLS on"
    cert = _must_exist(p, "AUTH_SSL_SERVER_CERTFILE", _first_existing(p, "AUTH_SSL_SERVER_CERTFILE"), why)
    key = _must_exist(p, "AUTH_SSL_SERVER_KEYFILE", _first_existing(p, "AUTH_SSL_SERVER_KEYFILE"), why)
    require = bool(p.bool("AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE", False))
    optional = {k: _first_existing(p, k) for k in ("AUTH_SSL_SERVER_CAFILE", "AUTH_SSL_CLIENT_CAFILE",
                                                   "AUTH_SSL_CLIENT_CERTFILE", "AUTH_SSL_CLIENT_KEYFILE")}
    for k, v in optional.items():
        if v is not None and not v.is_file():
            raise ConfigError(f"{p.where(k)}: {k} = {v}: no such file")
    if require:
        for k in ("AUTH_SSL_CLIENT_CAFILE", "AUTH_SSL_CLIENT_CERTFILE", "AUTH_SSL_CLIENT_KEYFILE"):
            if optional[k] is None:
                raise ConfigError(f"{p.where(k)}: {k} is needed with AUTH_SSL_REQUIRE_CLIENT_CERTIFICATE = True "
                                  f"(mutual TLS: every daemon shows a certificate and checks its callers')")
    return TlsConfig(server_cert=cert, server_key=key, server_ca=optional["AUTH_SSL_SERVER_CAFILE"],
                     client_cert=optional["AUTH_SSL_CLIENT_CERTFILE"],
                     client_key=optional["AUTH_SSL_CLIENT_KEYFILE"],
                     client_ca=optional["AUTH_SSL_CLIENT_CAFILE"], require_client_cert=require,
                     skip_host_check=bool(p.bool("SSL_SKIP_HOST_CHECK", False)))


def read_security(p: Param, subsys: str, uid_domain: str) -> SecurityConfig:
    """Every security knob a daemon uses, checked; ConfigError naming the knob otherwise."""
    lists = []
    for level in LEVELS + (DEFAULT,):
        for prefix in ("ALLOW", "DENY"):
            for knob in (f"{prefix}_{level}_{subsys}", f"{prefix}_{level}"):
                value = p.str(knob)
                if value is not None:
                    lists.append((knob, value))
    trust = p.str("TRUST_DOMAIN") or uid_domain
    if any(c in trust for c in ", \t"):
        raise ConfigError(f"{p.where('TRUST_DOMAIN')}: TRUST_DOMAIN = {trust!r} may not contain spaces or commas")
    revocation = p.str("SEC_TOKEN_REVOCATION_EXPR") or None
    if revocation:
        from daemons.core.config import parse_expr
        revocation = parse_expr(revocation, f"{p.where('SEC_TOKEN_REVOCATION_EXPR')}: SEC_TOKEN_REVOCATION_EXPR")
    max_age = p.int("SEC_TOKEN_MAX_AGE", None, minimum=0) if p.is_set("SEC_TOKEN_MAX_AGE") else None
    impersonate = p.str("QUEUE_SUPER_USER_MAY_IMPERSONATE") or None
    if impersonate:
        try:
            re.compile(impersonate)
        except re.error as e:
            raise ConfigError(f"{p.where('QUEUE_SUPER_USER_MAY_IMPERSONATE')}: QUEUE_SUPER_USER_MAY_IMPERSONATE = "
                              f"{impersonate!r} is not a regular expression ({e})") from None
    password_dir = Path(p.str("SEC_PASSWORD_DIRECTORY") or "passwords.d")
    token_dir = p.str("SEC_TOKEN_DIRECTORY")
    return SecurityConfig(
        authentication=tuple((lv, _requirement(p, lv, subsys)) for lv in LEVELS),
        lists=tuple(lists), subsys=subsys, trust_domain=trust,
        pool_key_file=Path(p.str("SEC_TOKEN_POOL_SIGNING_KEY_FILE") or password_dir / "POOL"),
        password_dir=password_dir,
        token_system_dir=Path(p.str("SEC_TOKEN_SYSTEM_DIRECTORY") or "tokens.d"),
        token_dir=Path(token_dir) if token_dir else None,
        revocation_expr=revocation, max_age_s=max_age,
        queue_super_users=tuple(p.list("QUEUE_SUPER_USERS", ["root", "condor"])),
        impersonate=impersonate, tls=read_tls(p))
