"""The security layer of the RPC pipeline, driven with a stand-in gRPC context."""
from __future__ import annotations

import logging
import os

import grpc
import pytest

from daemons.core.interceptors import Call
from daemons.core.security.config import NEVER, OPTIONAL, REQUIRED, SecurityConfig
from daemons.core.security.keys import KeyRing, derive_jwt_key, scramble
from daemons.core.security.layer import DaemonToken, SecurityLayer, tokens_in
from daemons.core.security.levels import LEVELS
from daemons.core.security.tokens import mint
from daemons.pb.htcpool import collector_pb2, common_pb2

DOMAIN = "pool"
NOW = 1_800_000_000.0
LISTS = (("ALLOW_READ", "*"), ("ALLOW_WRITE", "*"), ("ALLOW_ADMINISTRATOR", "admin@*"),
         ("ALLOW_DAEMON", "condor@*"), ("ALLOW_NEGOTIATOR", "condor@*"))


class Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class Context:
    def __init__(self, tokens=()):
        self._md = tuple(("authorization", f"Bearer {t}") for t in tokens)

    def invocation_metadata(self):
        return self._md

    async def abort(self, code, details):
        raise Aborted(code, details)


@pytest.fixture
def keys(tmp_path):
    (tmp_path / "POOL").write_bytes(scramble(b"secret"))
    os.chmod(tmp_path / "POOL", 0o600)
    return KeyRing(tmp_path / "POOL", tmp_path)


def layer(keys, requirement=REQUIRED, **overrides) -> SecurityLayer:
    auth = tuple((lv, overrides.pop(lv, requirement)) for lv in LEVELS)
    cfg = SecurityConfig(authentication=auth, lists=LISTS, trust_domain=DOMAIN, resolve_hosts=False)
    return SecurityLayer(cfg, keys, logging.getLogger("test"), wall=lambda: NOW)


def token(keys, who, **kw):
    return mint(keys.jwt_key("POOL"), identity=who, issuer=DOMAIN, now=NOW - 5, **kw)


async def admit(lay, method, tokens=(), request=None):
    call = Call(method=f"/htcpool.v1.{method}", peer="ipv4:127.0.0.1:5000", metadata={})
    ctx = Context(tokens)
    await lay.admit(call, ctx)
    if request is not None:
        await lay.on_unary_request(call, request, ctx)
    return call


async def refused(lay, method, tokens=(), request=None) -> Aborted:
    with pytest.raises(Aborted) as e:
        await admit(lay, method, tokens, request)
    return e.value


async def test_no_token_is_unauthenticated_where_authentication_is_required(keys):
    e = await refused(layer(keys), "Schedd/Query")
    assert e.code == grpc.StatusCode.UNAUTHENTICATED and "no token was presented" in e.details


async def test_a_valid_token_sets_identity_and_levels(keys):
    call = await admit(layer(keys), "Schedd/Submit", [token(keys, "alice@pool")])
    assert (call.identity, call.authenticated, call.levels) == ("alice@pool", True, {"READ", "WRITE"})
    assert call.notes["open"] is False


async def test_a_level_the_caller_lacks_is_permission_denied_with_level_and_identity(keys):
    e = await refused(layer(keys), "Startd/DrainJobs", [token(keys, "alice@pool")])
    assert e.code == grpc.StatusCode.PERMISSION_DENIED
    assert e.details.startswith("PERMISSION DENIED to alice@pool from host 127.0.0.1 for Startd.DrainJobs, "
                                "access level ADMINISTRATOR: reason: ADMINISTRATOR authorization policy contains "
                                "no matching ALLOW entry")


async def test_scope_limits(keys):
    e = await refused(layer(keys), "Schedd/Submit", [token(keys, "alice@pool", scopes=["READ"])])
    assert "the token is limited to READ" in e.details
    await admit(layer(keys), "Schedd/Query", [token(keys, "alice@pool", scopes=["READ"])])


async def test_a_bad_token_is_unauthenticated_even_with_a_good_one_later_refused_first(keys):
    forged = mint(derive_jwt_key(b"other"), identity="condor@pool", issuer=DOMAIN, now=NOW)
    e = await refused(layer(keys), "Schedd/Query", [forged])
    assert e.code == grpc.StatusCode.UNAUTHENTICATED and "signature does not verify" in e.details
    # Among several candidates the first that verifies is used.
    call = await admit(layer(keys), "Schedd/Query", [forged, token(keys, "bob@pool")])
    assert call.identity == "bob@pool"


async def test_an_rpc_not_in_the_table_is_refused(keys):
    e = await refused(layer(keys), "Schedd/Secret", [token(keys, "condor@pool")])
    assert e.code == grpc.StatusCode.PERMISSION_DENIED and "not in the authorization table" in e.details


async def test_collector_updates_need_the_ad_types_level(keys):
    req = collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(text='[MyType="Machine"; Name="fake@x"]')])
    e = await refused(layer(keys), "Collector/UpdateAds", [token(keys, "admin@pool")], req)
    assert "Collector.UpdateAds (Machine ads), access level ADVERTISE_STARTD" in e.details
    await admit(layer(keys), "Collector/UpdateAds", [token(keys, "condor@pool")], req)   # via ALLOW_DAEMON
    # A daemon holds every level an update can need: its ads are not parsed twice.
    garbage = collector_pb2.UpdateAdsRequest(ads=[common_pb2.ClassAd(text="[ not an ad")])
    lay = layer(keys)
    calls = []
    import daemons.core.security.table as table
    rule = table.TABLE["/htcpool.v1.Collector/UpdateAds"]
    table.TABLE["/htcpool.v1.Collector/UpdateAds"] = table.Rule(rule.level, rule.htcondor,
                                                                lambda r: calls.append(r) or rule.needs(r))
    try:
        await admit(lay, "Collector/UpdateAds", [token(keys, "condor@pool")], garbage)
        assert calls == []
        with pytest.raises(Aborted):
            await admit(lay, "Collector/UpdateAds", [token(keys, "admin@pool")], req)
        assert len(calls) == 1
    finally:
        table.TABLE["/htcpool.v1.Collector/UpdateAds"] = rule
    private = collector_pb2.QueryAdsRequest(include_private=True)
    e = await refused(layer(keys), "Collector/QueryAds", [token(keys, "admin@pool")], private)
    assert "access level NEGOTIATOR" in e.details


async def test_optional_lets_unauthenticated_callers_through_the_lists(keys):
    lay = layer(keys, READ=OPTIONAL)
    call = await admit(lay, "Schedd/Query")
    assert (call.identity, call.authenticated) == ("unauthenticated@unmapped", False)
    e = await refused(lay, "Schedd/Submit")
    assert e.code == grpc.StatusCode.UNAUTHENTICATED


async def test_never_opens_the_level_to_everybody(keys):
    lay = layer(keys, NEVER)
    call = await admit(lay, "Admin/Shutdown", ["not-a-token"])     # a bad token is ignored, not refused
    assert (call.authenticated, call.notes["open"], "ADMINISTRATOR" in call.levels) == (False, True, True)
    call = await admit(lay, "Schedd/Submit", [token(keys, "alice@pool")])
    assert (call.identity, call.notes["open"]) == ("alice@pool", False)   # a good one still names the caller


async def test_verified_tokens_are_cached(keys):
    lay, t = layer(keys), token(keys, "alice@pool")
    for _ in range(3):
        await admit(lay, "Schedd/Query", [t])
    assert (lay.cache.misses, lay.cache.hits) == (1, 2)


def test_metadata_tokens_and_daemon_token(keys):
    md = [("authorization", "Bearer a"), ("x", "y"), ("authorization", "bearer b"), ("authorization", "Basic c")]
    assert tokens_in(md) == ["a", "b"]
    now = [NOW]
    own = DaemonToken(keys, DOMAIN, wall=lambda: now[0], lifetime_s=100)
    first = own()
    assert own() == first
    now[0] += 60                                  # past half its lifetime: renewed
    assert own() != first
