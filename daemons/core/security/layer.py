"""Security as two layers of the RPC pipeline: who is calling, and may they.

Server side (SecurityLayer), for every call:
1. the RPC's rule from the one table (table.py); an RPC not in it is refused;
2. the caller's tokens (`authorization: Bearer <jwt>` metadata, a few candidates) are
   verified, through a cache keyed by the token's text (tokens.py); a token that is
   presented but refused makes the call UNAUTHENTICATED, saying why;
3. without a verified token the caller is `unauthenticated@unmapped`, refused as
   UNAUTHENTICATED where the level's authentication is REQUIRED;
4. the levels the caller holds (ALLOW/DENY lists with implications, limited by the
   token's scope; levels whose authentication is NEVER are open to everybody) go into
   `Call.levels`, with the identity, for the service (`current_call()`);
5. the RPC's level, and for some requests the levels the request itself needs (ad types
   at the collector, claim ids), must be held, else PERMISSION_DENIED.
Every refusal is logged in HTCondor's words ("PERMISSION DENIED to alice@pool from host
127.0.0.1 for Startd.DrainJobs, access level ADMINISTRATOR: reason: ...") and counted.

Client side (TokenLayer): every outgoing call carries the process's tokens.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, Callable, Sequence

import grpc

from daemons.core.interceptors import Call, ClientLayer, ServerLayer
from daemons.core.security.authz import UNAUTHENTICATED, Peer
from daemons.core.security.config import REQUIRED, SecurityConfig
from daemons.core.security.discovery import MAX_CANDIDATES
from daemons.core.security.keys import POOL_KEY_ID, KeyRing
from daemons.core.security.levels import implied
from daemons.core.security.table import REQUEST_LEVELS, rule_for, short
from daemons.core.security.tokens import TokenCache, TokenError, TokenInfo, mint, verify

BEARER = "bearer "
METADATA_KEY = "authorization"
# Identities the pool's own daemons use (HTCondor's daemons authenticate as condor@...).
DAEMON_USER = "condor"
DAEMON_TOKEN_LIFETIME_S = 7 * 86400


def tokens_in(metadata: Sequence[tuple[str, Any]] | None) -> list[str]:
    out = []
    for k, v in metadata or ():
        if k == METADATA_KEY and isinstance(v, str) and v[:len(BEARER)].lower() == BEARER:
            out.append(v[len(BEARER):].strip())
            if len(out) >= MAX_CANDIDATES:
                break
    return out


class SecurityLayer(ServerLayer):
    name = "security"

    def __init__(self, cfg: SecurityConfig, keys: KeyRing | None, log: logging.Logger,
                 wall: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.log = log
        self.wall = wall
        self.policy = cfg.policy()
        self.open = frozenset().union(*(implied(lv) for lv in cfg.open_levels)) if cfg.open_levels else frozenset()
        self.keys = keys
        self.cache = TokenCache(self._verify)
        self._held: dict[tuple[str, str, frozenset[str] | None], frozenset[str]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._needs_names = self.policy.needs_names()
        self.refused: Counter[tuple[str, str]] = Counter()   # (method, code) -> count
        self.tokens_refused = 0

    def _verify(self, token: str) -> TokenInfo:
        if self.keys is None:
            raise TokenError("this daemon has no signing key to verify tokens with")
        return verify(token, self.keys, trust_domain=self.cfg.trust_domain, now=self.wall(),
                      max_age_s=self.cfg.max_age_s, revocation_expr=self.cfg.revocation_expr)

    async def _peer(self, call: Call) -> Peer:
        host = call.peer_host
        if not self._needs_names:
            return Peer(host)
        names = self._names.get(host)
        if names is None:
            try:
                name, _ = await asyncio.get_running_loop().getnameinfo((host, 0))
                names = (name,) if name and name != host else ()
            except OSError:
                names = ()
            self._names[host] = names
        return Peer(host, names)

    def _levels(self, identity: str, peer: Peer, scopes: frozenset[str] | None) -> frozenset[str]:
        key = (identity, peer.address if not peer.names else f"{peer.address}/{','.join(peer.names)}", scopes)
        held = self._held.get(key)
        if held is None:
            held = self.policy.levels_of(identity, peer, scopes) | self.open
            if len(self._held) > 4096:
                self._held.clear()
            self._held[key] = held
        return held

    async def _refuse(self, call: Call, context: grpc.aio.ServicerContext, code: grpc.StatusCode,
                      message: str) -> None:
        self.refused[(call.method, code.name)] += 1
        self.log.warning("%s", message)
        await context.abort(code, message)

    async def admit(self, call: Call, context: grpc.aio.ServicerContext) -> None:
        rule = rule_for(call.method)
        if rule is None:
            await self._refuse(call, context, grpc.StatusCode.PERMISSION_DENIED,
                               f"PERMISSION DENIED to {call.identity} from host {call.peer_host} for "
                               f"{short(call.method)}: it is not in the authorization table")
            return
        info: TokenInfo | None = None
        problems = []
        for token in tokens_in(context.invocation_metadata()):
            try:
                info = self.cache.get(token, self.wall())
                break
            except TokenError as e:
                problems.append(str(e))
        if info is None and problems:
            self.tokens_refused += 1
            if rule.level not in self.open:
                await self._refuse(call, context, grpc.StatusCode.UNAUTHENTICATED,
                                   f"AUTHENTICATE: token refused from host {call.peer_host} for {short(call.method)}, "
                                   f"access level {rule.level}: {problems[0]}")
                return
        identity = info.identity if info is not None else UNAUTHENTICATED
        held = self._levels(identity, await self._peer(call), info.scopes if info is not None else None)
        call.identity, call.authenticated, call.levels = identity, info is not None, held
        call.notes["token"] = info
        # Security is off for this call (NEVER): the service trusts what the request says.
        call.notes["open"] = info is None and rule.level in self.open
        await self._check(call, context, rule.level, short(call.method))

    async def _check(self, call: Call, context: grpc.aio.ServicerContext, level: str, what: str) -> None:
        if level in self.open and not call.authenticated:
            return
        if not call.authenticated and self.cfg.requirement(level) == REQUIRED:
            await self._refuse(call, context, grpc.StatusCode.UNAUTHENTICATED,
                               f"AUTHENTICATE: {what} from host {call.peer_host} needs authentication "
                               f"(access level {level}: SEC_{level}_AUTHENTICATION or SEC_DEFAULT_AUTHENTICATION "
                               f"is REQUIRED) and no token was presented")
            return
        if level not in call.levels:
            info = call.notes.get("token")
            reason = self.policy.explain(level, call.identity, Peer(call.peer_host),
                                         info.scopes if info is not None else None)
            await self._refuse(call, context, grpc.StatusCode.PERMISSION_DENIED,
                               f"PERMISSION DENIED to {call.identity} from host {call.peer_host} for {what}, "
                               f"access level {level}: reason: {reason}")

    async def on_unary_request(self, call: Call, request: Any, context: grpc.aio.ServicerContext) -> None:
        rule = rule_for(call.method)
        if rule is None or rule.needs is None:
            return
        if call.levels >= REQUEST_LEVELS:
            return  # holds everything a request could need: no need to look inside it
        for need in rule.needs(request):
            await self._check(call, context, need.level, f"{short(call.method)} ({need.what})")

    def metrics(self) -> dict[str, Any]:
        return {
            "security_refused_total": {(("method", m.rsplit("/", 1)[-1]), ("service", m.rsplit("/", 2)[-2]),
                                        ("code", code)): float(n) for (m, code), n in self.refused.items()},
            "security_tokens_refused_total": float(self.tokens_refused),
            "security_token_cache_hits_total": float(self.cache.hits),
            "security_token_cache_misses_total": float(self.cache.misses),
        }


class TokenLayer(ClientLayer):
    """Attaches tokens to every outgoing call (at most MAX_CANDIDATES, first preferred)."""
    name = "tokens"

    def __init__(self, tokens: Sequence[str] | Callable[[], Sequence[str]]) -> None:
        self._tokens = tokens if callable(tokens) else (lambda fixed=list(tokens): fixed)

    async def outgoing(self, method: str, metadata: list[tuple[str, str]]) -> None:
        for t in list(self._tokens())[:MAX_CANDIDATES]:
            metadata.append((METADATA_KEY, f"Bearer {t}"))


class DaemonToken:
    """A daemon's own token (condor@<trust domain>), minted from the pool key it holds and
    renewed well before it expires; it lives only in memory."""

    def __init__(self, keys: KeyRing, trust_domain: str, wall: Callable[[], float] = time.time,
                 lifetime_s: float = DAEMON_TOKEN_LIFETIME_S) -> None:
        self.keys = keys
        self.trust_domain = trust_domain
        self.wall = wall
        self.lifetime_s = lifetime_s
        self._token = ""
        self._renew_at = 0.0

    def __call__(self) -> list[str]:
        now = self.wall()
        if now >= self._renew_at:
            self._token = mint(self.keys.jwt_key(POOL_KEY_ID), identity=f"{DAEMON_USER}@{self.trust_domain}",
                               issuer=self.trust_domain, lifetime_s=self.lifetime_s, now=now)
            self._renew_at = now + self.lifetime_s / 2
        return [self._token]
