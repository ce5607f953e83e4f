"""IDTOKENS: minting and verifying HTCondor's JWTs (HS256, PyJWT).

A token's header names its signing key (`kid`, "POOL" for the pool key); its claims are
HTCondor's: `sub` (the identity, user@domain), `iss` (the issuing trust domain), `iat`,
`jti` (a random id), optional `exp`, and an optional `scope` of space-separated
`condor:/LEVEL` entries that *limit* what the identity may do (they never grant more
than the ALLOW lists do). Verification follows Condor_Auth_Passwd::analyze_token:
signature, expiry, SEC_TOKEN_MAX_AGE, a non-empty issuer and jti, then
SEC_TOKEN_REVOCATION_EXPR evaluated over the claims (revoked when true, and when it
cannot be evaluated to a boolean: "out of an abundance of caution").
"""
from __future__ import annotations

import base64
import json
import math
import re
import secrets
import sys
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import classad2

from daemons.core.security.keys import POOL_KEY_ID, KeyFileError, KeyRing, check_key_id
from daemons.core.security.levels import ALL, parse_level

SCOPE_PREFIX = "condor:/"
# HTCondor signs with HS256; it verifies HS384 and HS512 too. Nothing else (never "none").
ALGORITHMS = ("HS256", "HS384", "HS512")
# The text of a JWT in compact form: base64url parts joined by dots.
_JWT_TEXT = re.compile(r"[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")
# A token longer than this is refused before it is decoded (HTCondor's are ~300 bytes).
MAX_TOKEN_BYTES = 4096


class TokenError(Exception):
    """A token that is refused; the message says why in a user's terms."""


@dataclass(frozen=True)
class TokenInfo:
    """What a verified token says."""
    identity: str                        # user@domain
    issuer: str
    key_id: str
    jti: str
    issued_at: int | None
    expires_at: int | None               # Unix seconds (wall clock), None: never
    scopes: frozenset[str] | None        # authorization limits; None: none

    @property
    def user(self) -> str:
        return self.identity.rsplit("@", 1)[0]


def scope_text(levels: Iterable[str]) -> str:
    return " ".join(f"{SCOPE_PREFIX}{parse_level(x)}" for x in levels)


def parse_scopes(scope: Any) -> frozenset[str] | None:
    """`condor:/READ condor:/WRITE` -> {READ, WRITE}; None when no condor:/ level is named
    (HTCondor then applies no limit); entries for other services are ignored."""
    if not isinstance(scope, str):
        return None
    found = set()
    for entry in scope.split():
        if entry.startswith(SCOPE_PREFIX) and entry[len(SCOPE_PREFIX):].upper() in ALL:
            found.add(entry[len(SCOPE_PREFIX):].upper())
    return frozenset(found) if found else None


def _jwt():
    # PyJWT only where a token is made or checked: a command that only sends tokens starts
    # faster without it.
    if "jwt" not in sys.modules and "cryptography.x509" not in sys.modules:
        # IDTOKENS are HMAC (ALGORITHMS), which PyJWT does with the standard library; with
        # cryptography importable it also loads its RSA, EC and EdDSA keys and X.509 (9 MB)
        # and cryptography's Rust library (7.5 MB with its modules), never used here. With
        # cryptography hidden while PyJWT is imported (X.509 alone, if something loaded
        # cryptography already), PyJWT does without them (its has_crypto); a process that
        # has loaded X.509 for TLS keeps PyJWT's full set. (The key derivation's HKDF is
        # OpenSSL's where it can be: keys.derive_jwt_key.)
        hidden = "cryptography.x509" if "cryptography" in sys.modules else "cryptography"
        sys.modules[hidden] = None  # type: ignore[assignment]
        try:
            import jwt  # noqa: F401
        finally:
            del sys.modules[hidden]
    import jwt
    from jwt.warnings import InsecureKeyLengthWarning
    # HTCondor's key is always 32 bytes (HKDF output), which PyJWT finds short for HS384 and
    # HS512, tokens HTCondor accepts: without this, any caller could fill a daemon's output
    # with the warning by sending such tokens.
    warnings.filterwarnings("ignore", category=InsecureKeyLengthWarning)
    return jwt


def mint(jwt_key: bytes, *, identity: str, issuer: str, key_id: str = POOL_KEY_ID,
         scopes: Iterable[str] = (), lifetime_s: float | None = None, now: float | None = None,
         jti: str | None = None, extra_claims: dict[str, Any] | None = None) -> str:
    """A signed token, with the claims condor_token_create would put in it."""
    if not issuer or any(c in issuer for c in ", \t"):
        raise TokenError(f"trust domain {issuer!r} must be non-empty, without spaces or commas")
    if not identity or any(c.isspace() for c in identity):
        raise TokenError(f"identity {identity!r} must be non-empty, without spaces")
    iat = int(time.time() if now is None else now)
    claims: dict[str, Any] = dict(extra_claims or {})
    claims.update({"sub": identity, "iss": issuer, "iat": iat, "jti": jti or secrets.token_hex(16)})
    if lifetime_s is not None:
        claims["exp"] = iat + int(lifetime_s)
    text = scope_text(scopes)
    if text:
        claims["scope"] = text
    # Laid out as condor_token_create's (jwt-cpp): header {"alg","kid"} without "typ",
    # claims in name order, so the same inputs give the same token text.
    return _jwt().encode(dict(sorted(claims.items())), jwt_key, algorithm="HS256",
                      headers={"kid": check_key_id(key_id), "typ": None})


def unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) without checking the signature: for listing tokens and leaving out
    expired ones, never for trust. Plain base64 and JSON (no PyJWT needed)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("not a JWT (it has not three dot-separated parts)")
    if not _JWT_TEXT.fullmatch(token):
        # (Sent as is, such text would make gRPC refuse the call's metadata, not the server.)
        raise TokenError("not a JWT (it holds characters other than base64url letters and dots)")
    try:
        header, claims = (json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in parts[:2])
    except (ValueError, TypeError) as e:
        raise TokenError(f"not a JWT ({e})") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("not a JWT (its header or payload is not a JSON object)")
    return header, claims


def _revocation_ad(claims: dict[str, Any]) -> classad2.ClassAd | None:
    ad = classad2.ClassAd()
    for k, v in claims.items():
        if isinstance(v, (bool, int, float, str)) and k.replace("_", "a").isalnum() and not k[0].isdigit():
            ad[k] = v
    return ad


def is_revoked(revocation_expr: str | None, claims: dict[str, Any]) -> bool:
    """SEC_TOKEN_REVOCATION_EXPR over the claims; anything but a clean false revokes."""
    if not revocation_expr:
        return False
    try:
        value = classad2.ExprTree(revocation_expr).eval(_revocation_ad(claims))
    except Exception:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, classad2.Value):
        return value != 0
    return True


def _finite_number(x: Any) -> bool:
    # JSON as Python reads it allows NaN and Infinity (and 1e400 becomes infinity), which
    # compare false with everything and cannot become the int a TokenInfo holds.
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) and abs(x) < 2 ** 62


def verify(token: str, keys: KeyRing, *, trust_domain: str, now: float | None = None,
           max_age_s: int | None = None, revocation_expr: str | None = None) -> TokenInfo:
    """A verified token's contents, or TokenError saying why it is refused."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError(f"token of {len(token)} bytes is larger than the limit of {MAX_TOKEN_BYTES}")
    jwt = _jwt()
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise TokenError(f"malformed token ({e})") from None
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise TokenError(f"token signed with algorithm {alg!r}; only {', '.join(ALGORITHMS)} are accepted")
    key_id = header.get("kid")
    if not isinstance(key_id, str) or not key_id:
        raise TokenError("token has no key id (kid)")
    try:
        key = keys.jwt_key(key_id)
    except KeyFileError as e:
        raise TokenError(f"token signed with key {key_id!r}, which this daemon cannot use: {e}") from None
    wall = time.time() if now is None else now
    try:
        claims = jwt.decode(token, key, algorithms=list(ALGORITHMS),
                            options={"verify_aud": False, "verify_iat": False, "verify_exp": False,
                                     "verify_nbf": False})
    except jwt.InvalidSignatureError:
        raise TokenError(f"token signature does not verify with key {key_id!r} (forged, or signed with "
                         f"another pool's key)") from None
    except jwt.PyJWTError as e:
        raise TokenError(f"malformed token ({e})") from None
    exp = claims.get("exp")
    if exp is not None:
        if not _finite_number(exp):
            raise TokenError("token's exp claim is not a finite number")
        if wall > exp:
            raise TokenError(f"token expired {int(wall - exp)} s ago")
    iat = claims.get("iat")
    if iat is not None and not _finite_number(iat):
        raise TokenError("token's iat claim is not a finite number")
    if max_age_s is not None and iat is not None and wall - iat > max_age_s:
        raise TokenError(f"token is {int(wall - iat)} s old, more than SEC_TOKEN_MAX_AGE = {max_age_s}")
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or not issuer:
        raise TokenError("token has no issuer (iss)")
    if issuer != trust_domain:
        raise TokenError(f"token issued by trust domain {issuer!r}, not this pool's {trust_domain!r}")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise TokenError("token has no id (jti)")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.strip() or any(c.isspace() for c in sub):
        raise TokenError("token has no usable subject (sub); capability tokens are not supported")
    if is_revoked(revocation_expr, claims):
        raise TokenError(f"token {jti} has been revoked (SEC_TOKEN_REVOCATION_EXPR)")
    identity = sub if "@" in sub else f"{sub}@{issuer}"
    return TokenInfo(identity=identity, issuer=issuer, key_id=key_id, jti=jti,
                     issued_at=int(iat) if iat is not None else None,
                     expires_at=int(exp) if exp is not None else None,
                     scopes=parse_scopes(claims.get("scope")))


class TokenCache:
    """Verified tokens by their text, so a caller's every RPC costs a dict lookup.

    An entry holds until the token expires (checked on every hit); configuration
    (keys, SEC_TOKEN_REVOCATION_EXPR) is read once per process, so nothing else can
    change a verdict. Only verified tokens are kept, at most `size` of them.
    """

    def __init__(self, verify_fn: Callable[[str], TokenInfo], size: int = 4096) -> None:
        self._verify = verify_fn
        self._size = size
        self._entries: OrderedDict[str, TokenInfo] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, token: str, now: float) -> TokenInfo:
        info = self._entries.get(token)
        if info is not None:
            if info.expires_at is not None and now > info.expires_at:
                del self._entries[token]
                raise TokenError(f"token expired {int(now - info.expires_at)} s ago")
            self.hits += 1
            return info
        self.misses += 1
        info = self._verify(token)
        self._entries[token] = info
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return info
