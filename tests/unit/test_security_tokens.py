"""IDTOKENS: what verifies, and every kind of bad token refused with a clear reason."""
from __future__ import annotations

import base64
import json
import os

import jwt
import pytest
from hypothesis import HealthCheck, given, settings

from daemons.fuzz.auth import bad_metadata, bad_token, claims_json, signed

from daemons.core.security.keys import KeyRing, derive_jwt_key, scramble
from daemons.core.security.tokens import (MAX_TOKEN_BYTES, TokenCache, TokenError, is_revoked, mint, parse_scopes,
                                          verify)

NOW = 1_800_000_000.0
DOMAIN = "pool.example"


@pytest.fixture
def keys(tmp_path):
    for name, secret in (("POOL", b"pool-secret"), ("AP", b"ap-secret")):
        (tmp_path / name).write_bytes(scramble(secret))
        os.chmod(tmp_path / name, 0o600)
    return KeyRing(tmp_path / "POOL", tmp_path)


def _mint(keys, **kw):
    args = dict(identity="alice@pool.example", issuer=DOMAIN, now=NOW)
    args.update(kw)
    return mint(keys.jwt_key(args.pop("key_id", "POOL")), key_id=kw.get("key_id", "POOL"), **args)


def _verify(keys, token, **kw):
    return verify(token, keys, trust_domain=DOMAIN, now=kw.pop("now", NOW + 10), **kw)


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def test_a_pool_token_verifies_with_its_claims(keys):
    info = _verify(keys, _mint(keys, scopes=["READ", "WRITE"], lifetime_s=3600, jti="j1"))
    assert (info.identity, info.user, info.issuer, info.key_id, info.jti, info.issued_at, info.expires_at,
            info.scopes) == ("alice@pool.example", "alice", DOMAIN, "POOL", "j1", int(NOW), int(NOW) + 3600,
                             frozenset({"READ", "WRITE"}))


def test_a_token_signed_with_a_named_key_verifies(keys):
    assert _verify(keys, _mint(keys, key_id="AP")).key_id == "AP"


def test_a_subject_without_a_domain_gets_the_issuers(keys):
    assert _verify(keys, _mint(keys, identity="bob")).identity == f"bob@{DOMAIN}"


def test_scopes_are_condor_levels_only():
    assert parse_scopes("condor:/READ condor:/write other:/x") == frozenset({"READ", "WRITE"})
    assert parse_scopes("compute.read") is None          # no condor:/ entry: no limit
    assert parse_scopes(None) is None


@pytest.mark.parametrize("case, match", [
    ("expired", "expired 10 s ago"),
    ("alg none", "algorithm 'none'"),
    ("wrong signature", "signature does not verify"),
    ("wrong kid", "key 'NOPE', which this daemon cannot use: signing key file .*NOPE: no such file"),
    ("no kid", "no key id"),
    ("path kid", "not a plain file name"),
    ("malformed", "malformed token"),
    ("oversized", f"larger than the limit of {MAX_TOKEN_BYTES}"),
    ("other domain", "issued by trust domain 'elsewhere', not this pool's 'pool.example'"),
    ("no jti", "no id"),
    ("no subject", "no usable subject"),
    ("nan iat", "iat claim is not a finite number"),
    ("infinite exp", "exp claim is not a finite number"),
    ("kid with a newline", "not a plain file name"),
    ("kid not a string", "malformed token"),
])
def test_bad_tokens_are_refused_with_the_reason(keys, case, match):
    good = _mint(keys)
    header, payload, sig = good.split(".")
    claims = {"sub": "alice@pool.example", "iss": DOMAIN, "iat": int(NOW), "jti": "x"}
    key = keys.jwt_key("POOL")
    token = {
        "expired": lambda: _mint(keys, lifetime_s=0, now=NOW),
        "alg none": lambda: f"{_b64({'alg': 'none', 'kid': 'POOL'})}.{payload}.",
        "wrong signature": lambda: mint(derive_jwt_key(b"another pool"), identity="alice@pool.example",
                                        issuer=DOMAIN, now=NOW),
        "wrong kid": lambda: jwt.encode(claims, key, algorithm="HS256", headers={"kid": "NOPE"}),
        "no kid": lambda: jwt.encode(claims, key, algorithm="HS256"),
        "path kid": lambda: jwt.encode(claims, key, algorithm="HS256", headers={"kid": "../POOL"}),
        "malformed": lambda: "not.a.token",
        "oversized": lambda: jwt.encode(dict(claims, pad="x" * MAX_TOKEN_BYTES), key, algorithm="HS256",
                                        headers={"kid": "POOL"}),
        "other domain": lambda: jwt.encode(dict(claims, iss="elsewhere"), key, algorithm="HS256",
                                           headers={"kid": "POOL"}),
        "no jti": lambda: jwt.encode({k: v for k, v in claims.items() if k != "jti"}, key, algorithm="HS256",
                                     headers={"kid": "POOL"}),
        "no subject": lambda: jwt.encode({k: v for k, v in claims.items() if k != "sub"}, key, algorithm="HS256",
                                         headers={"kid": "POOL"}),
        # Signed with the right key, but JSON as Python reads it: NaN, and 1e400 = infinity.
        "nan iat": lambda: signed({"alg": "HS256", "kid": "POOL"}, claims_json(
            {k: v for k, v in claims.items() if k != "iat"}, {"iat": "NaN"}), key),
        "infinite exp": lambda: signed({"alg": "HS256", "kid": "POOL"}, claims_json(claims, {"exp": "1e400"}), key),
        "kid with a newline": lambda: jwt.encode(claims, key, algorithm="HS256", headers={"kid": "POOL\n"}),
        "kid not a string": lambda: signed({"alg": "HS256", "kid": ["POOL"]}, claims_json(claims), key),
    }[case]()
    with pytest.raises(TokenError, match=match):
        _verify(keys, token)


def test_max_age(keys):
    token = _mint(keys)
    assert _verify(keys, token, max_age_s=60).jti
    with pytest.raises(TokenError, match="more than SEC_TOKEN_MAX_AGE = 5"):
        _verify(keys, token, max_age_s=5)


def test_revocation_expression_over_the_claims(keys):
    alice, bob = _mint(keys, jti="aaa"), _mint(keys, identity="bob@pool.example", jti="bbb")
    expr = 'sub == "bob@pool.example" || jti == "zzz"'
    assert _verify(keys, alice, revocation_expr=expr).identity == "alice@pool.example"
    with pytest.raises(TokenError, match="token bbb has been revoked"):
        _verify(keys, bob, revocation_expr=expr)


def test_revocation_is_cautious_when_the_expression_is_not_boolean():
    claims = {"sub": "a@b", "iat": 5}
    assert is_revoked("iat < 10", claims) is True
    assert is_revoked("iat > 10", claims) is False
    # HTCondor: anything that does not evaluate to a boolean revokes (exp is undefined here).
    assert is_revoked("exp < 10", claims) is True
    assert is_revoked('"text"', claims) is True
    assert is_revoked(None, claims) is False


def test_cache_verifies_once_and_still_expires(keys):
    calls = []

    def counting(token):
        calls.append(token)
        return _verify(keys, token)

    cache = TokenCache(counting, size=2)
    token = _mint(keys, lifetime_s=100)
    assert cache.get(token, NOW + 1).identity == cache.get(token, NOW + 2).identity == "alice@pool.example"
    assert (len(calls), cache.hits, cache.misses) == (1, 1, 1)
    with pytest.raises(TokenError, match="expired"):
        cache.get(token, NOW + 101)
    with pytest.raises(TokenError):
        cache.get("garbage", NOW)      # refused tokens are not kept
    others = [_mint(keys, jti=f"j{i}") for i in range(3)]
    for t in others:
        cache.get(t, NOW + 1)
    assert len(cache._entries) == 2     # bounded


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=bad_token(derive_jwt_key(b"pool-secret" * 2), DOMAIN, f"condor@{DOMAIN}", now=NOW))
def test_every_kind_of_defective_token_is_refused_never_an_unexpected_error(keys, data):
    """The fuzzer's bad tokens (daemons/fuzz/auth.py: each otherwise the daemons' own, so an
    overlooked defect would let it in): TokenError, with a reason, for every one."""
    defect, token = data
    with pytest.raises(TokenError):
        _verify(keys, token)


def test_the_fuzzers_tokens_are_signed_with_the_pools_key(keys):
    """The property above means something only if the fuzzer signs as the pool does: the
    same claims and key without a defect verify."""
    key = keys.jwt_key("POOL")
    assert key == derive_jwt_key(b"pool-secret" * 2)
    claims = {"sub": f"condor@{DOMAIN}", "iss": DOMAIN, "iat": int(NOW), "jti": "j"}
    for alg in ("HS256", "HS384", "HS512"):
        assert _verify(keys, signed({"alg": alg, "kid": "POOL"}, claims_json(claims), key, alg)).identity == \
            f"condor@{DOMAIN}"


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=bad_metadata(derive_jwt_key(b"k"), DOMAIN, "valid.token.text"))
def test_the_fuzzers_buried_valid_token_comes_after_as_many_candidates_as_a_server_reads(data):
    """Otherwise a server rightly accepts it, and the fuzzer would call that a hole."""
    from daemons.core.security.layer import tokens_in
    what, metadata = data
    if what == "valid token after too many candidates":
        assert "valid.token.text" not in tokens_in(metadata)
    elif what == "valid token, other scheme":
        assert tokens_in(metadata) == []
