"""Fuzzing the security layer: credentials that must never let a caller in.

Each input is an RPC (any method of any daemon, its message built from the descriptors,
as the `rpc` class sends) carrying bad credentials: no token at all, garbage metadata,
text that is not a JWT, or a JWT with one defect that makes it invalid whatever else it
holds — expired, signed with another pool's key, a kid that names no key (or a path),
alg none or an algorithm HTCondor does not accept, a signature or payload tampered with,
another trust domain, a claim missing or not a finite number, a header or payload that
is not a JSON object, truncated, oversized — or a valid token the server must not look
at (sent under another scheme than Bearer, or after more candidates than a server
reads). The tokens are otherwise the daemons' own (condor@<trust domain>, which may do
everything), so a defect the layer overlooked shows as an accepted call.

With authentication REQUIRED at every level (the default; the fuzz pool does not change
it), the only correct answers are UNAUTHENTICATED and PERMISSION_DENIED, given by the
security layer before any handler sees the request: an acceptance, any other refusal
(INVALID_ARGUMENT means a handler ran), INTERNAL, a missed deadline or a dead daemon
are all bad outcomes.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import string
import time
from typing import Any

import grpc
from hypothesis import strategies as st

from daemons.core.security.discovery import MAX_CANDIDATES
from daemons.core.security.tokens import MAX_TOKEN_BYTES

# The answers the security layer gives; anything else means bad credentials got further.
SECURITY_REFUSALS = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})
# gRPC's transport refuses a call whose metadata is over its hard limit (16 KiB) before any
# layer sees it: a refusal too (several oversized tokens reach it).
TRANSPORT_METADATA_LIMIT = "received metadata size exceeds"


def security_refusal(code: grpc.StatusCode, details: str | None) -> bool:
    return code in SECURITY_REFUSALS or (code == grpc.StatusCode.RESOURCE_EXHAUSTED
                                         and (details or "").startswith(TRANSPORT_METADATA_LIMIT))

DEFECTS = ("expired", "other key", "unknown kid", "path kid", "bad kid", "no kid", "alg none", "other alg",
           "tampered", "other domain", "no iss", "no jti", "no sub", "bad sub", "not finite", "not a number",
           "not an object", "truncated", "oversized", "garbage", "two parts")
_HASHES = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}
_B64 = string.ascii_letters + string.digits + "-_"
# Printable ASCII: what a gRPC metadata value may hold (the client refuses anything else).
_PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7f))
_RESERVED_KEYS = ("te", "content-type", "user-agent", "host")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed(header: Any, payload: bytes, key: bytes, alg: str = "HS256") -> str:
    """A JWS over exactly these header and payload bytes (stdlib HMAC: the fuzzer needs
    tokens PyJWT would refuse to make)."""
    h = b64(json.dumps(header).encode())
    p = b64(payload)
    sig = hmac.new(key, f"{h}.{p}".encode(), _HASHES.get(alg, hashlib.sha256)).digest()
    return f"{h}.{p}.{b64(sig)}"


def claims_json(claims: dict[str, Any], raw: dict[str, str] | None = None) -> bytes:
    """JSON of `claims` (NaN and Infinity as Python writes them), plus `raw` members whose
    text is given as is (a number like 1e400 that only the reader turns into infinity)."""
    text = json.dumps(claims)
    for k, v in (raw or {}).items():
        text = text[:-1] + (", " if len(text) > 2 else "") + f"{json.dumps(k)}: {v}}}"
    return text.encode()


@st.composite
def bad_token(draw, key: bytes, domain: str, identity: str, now: float | None = None) -> tuple[str, str]:
    """(defect, token): a token for `identity` that `defect` makes invalid."""
    now = time.time() if now is None else now
    defect = draw(st.sampled_from(DEFECTS))
    extra = draw(st.dictionaries(st.text(string.ascii_lowercase, min_size=4, max_size=8).filter(
        lambda k: k not in ("exp", "iat", "iss", "jti", "sub", "scope")),
        st.one_of(st.integers(), st.text(_PRINTABLE, max_size=20), st.booleans()), max_size=3))
    claims: dict[str, Any] = {**extra, "sub": identity, "iss": domain, "iat": int(now) - 60,
                              "jti": draw(st.text(_B64, min_size=1, max_size=32))}
    if draw(st.booleans()):
        claims["exp"] = int(now) + 86400
    header: Any = {"alg": draw(st.sampled_from(sorted(_HASHES))), "kid": "POOL"}
    raw: dict[str, str] = {}

    def good() -> str:
        return signed(header, claims_json(claims, raw), key, header["alg"])

    if defect == "expired":
        claims["exp"] = int(now) - draw(st.integers(1, 10 ** 8))
    elif defect == "other key":
        other = draw(st.binary(min_size=1, max_size=64).filter(lambda k: k != key))
        return defect, signed(header, claims_json(claims), other, header["alg"])
    elif defect == "unknown kid":
        header["kid"] = draw(st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=40)
                             .filter(lambda k: k != "POOL"))
    elif defect == "path kid":
        header["kid"] = draw(st.sampled_from(["../POOL", "./POOL", "/etc/passwd", "..", ".", "POOL/",
                                              "../passwords.d/POOL", "POOL\n", "PO\x00OL", "~/POOL"]))
    elif defect == "bad kid":
        header["kid"] = draw(st.sampled_from([5, None, [], {}, True, ["POOL"], {"POOL": 1}]))
    elif defect == "no kid":
        del header["kid"]
    elif defect == "alg none":
        h = b64(json.dumps({"alg": draw(st.sampled_from(["none", "None", "NONE", ""])), "kid": "POOL"}).encode())
        return defect, f"{h}.{b64(claims_json(claims))}." + draw(st.sampled_from(["", "x", good().split('.')[2]]))
    elif defect == "other alg":
        alg = draw(st.sampled_from(["RS256", "ES256", "PS256", "HS1", "hs256", "HS257", 5, None, ["HS256"]]))
        return defect, signed({"alg": alg, "kid": "POOL"}, claims_json(claims), key)
    elif defect == "tampered":
        token = good()
        spots = [i for i, c in enumerate(token[:-1]) if c != "."]
        i = draw(st.sampled_from(spots))
        c = draw(st.sampled_from(_B64).filter(lambda c, old=token[i]: c != old))
        return defect, token[:i] + c + token[i + 1:]
    elif defect == "other domain":
        claims["iss"] = draw(st.text(_PRINTABLE, max_size=30).filter(lambda d: d != domain))
    elif defect in ("no iss", "no jti", "no sub"):
        del claims[defect[3:]]
    elif defect == "bad sub":
        claims["sub"] = draw(st.sampled_from(["", " ", "con dor", "condor\t", "\n", 5, None, [], {}, True]))
    elif defect == "not finite":
        which = draw(st.sampled_from(["exp", "iat"]))
        claims.pop(which, None)
        raw[which] = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]))
    elif defect == "not a number":
        claims[draw(st.sampled_from(["exp", "iat"]))] = draw(st.sampled_from(["soon", "1", [], {}, True, False]))
    elif defect == "not an object":
        bad = draw(st.sampled_from([b"[]", b'"x"', b"5", b"null", b"{", b"\xff\xfe", b""]))
        if draw(st.booleans()):
            h = b64(bad)
            p = b64(claims_json(claims))
            sig = hmac.new(key, f"{h}.{p}".encode(), hashlib.sha256).digest()
            return defect, f"{h}.{p}.{b64(sig)}"
        return defect, signed({"alg": "HS256", "kid": "POOL"}, bad, key)
    elif defect == "truncated":
        token = good()
        return defect, token[:draw(st.integers(0, len(token) - 1))]
    elif defect == "oversized":
        claims["pad"] = "x" * draw(st.integers(MAX_TOKEN_BYTES, 2 * MAX_TOKEN_BYTES))
    elif defect == "garbage":
        return defect, draw(st.text(_PRINTABLE, max_size=200))
    elif defect == "two parts":
        return defect, ".".join(good().split(".")[:2])
    return defect, good()


def _metadata_key() -> st.SearchStrategy[str]:
    return st.text(string.ascii_lowercase + string.digits + "-_.", min_size=1, max_size=20).filter(
        lambda k: not k.startswith("grpc-") and k not in _RESERVED_KEYS)


@st.composite
def bad_metadata(draw, key: bytes, domain: str, valid_token: str) -> tuple[str, list[tuple[str, Any]]]:
    """(what, metadata): call metadata whose credentials must not get a caller in."""
    identity = f"condor@{domain}"
    noise = draw(st.lists(st.one_of(
        st.tuples(_metadata_key(), st.text(_PRINTABLE, max_size=60).map(str.strip)),
        st.tuples(_metadata_key().map(lambda k: k + "-bin"), st.binary(max_size=60)),
        st.tuples(st.just("authorization-bin"), st.binary(max_size=60))), max_size=4))
    kind = draw(st.sampled_from(["no token", "bad tokens", "garbage authorization", "valid token, other scheme",
                                 "valid token after too many candidates"]))
    md: list[tuple[str, Any]] = []
    what = kind
    if kind == "bad tokens":
        found = draw(st.lists(bad_token(key, domain, identity), min_size=1, max_size=MAX_CANDIDATES + 2))
        what = "bad tokens: " + ", ".join(d for d, _ in found)
        for _, token in found:
            md.append(("authorization", draw(st.sampled_from(["Bearer ", "bearer ", "BEARER ", "Bearer  "])) + token))
    elif kind == "garbage authorization":
        md += [("authorization", v) for v in draw(st.lists(st.text(_PRINTABLE, max_size=80).map(str.strip),
                                                           min_size=1, max_size=3))]
    elif kind == "valid token, other scheme":
        md.append(("authorization", draw(st.sampled_from(["Basic ", "Token ", "", "Bearer:", "Bearertoken "]))
                   + valid_token))
    elif kind == "valid token after too many candidates":
        # Each bad one must be a candidate the server reads ("Bearer" and nothing is none).
        bad = draw(st.lists(bad_token(key, domain, identity).filter(lambda dt: dt[1].strip()),
                            min_size=MAX_CANDIDATES, max_size=MAX_CANDIDATES + 2))
        md += [("authorization", f"Bearer {t}") for _, t in bad]
        md.append(("authorization", f"Bearer {valid_token}"))
    # Noise around the credentials, in any order (a server must not read past its own key).
    where = draw(st.integers(0, len(noise)))
    # gRPC's client sends text values without leading or trailing spaces.
    return what, [(k, v.strip() if isinstance(v, str) else v) for k, v in noise[:where] + md + noise[where:]]
