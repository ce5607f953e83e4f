"""A daemon's security, assembled from its SecurityConfig: keys, the server layer, its own
token for the calls it makes, and TLS credentials."""
from __future__ import annotations

import logging

import grpc

from daemons.core.interceptors import ClientLayer
from daemons.core.security.config import SecurityConfig
from daemons.core.security.keys import POOL_KEY_ID, KeyFileError, KeyRing, create_key_file
from daemons.core.security.layer import DaemonToken, SecurityLayer, TokenLayer


class DaemonSecurity:
    def __init__(self, cfg: SecurityConfig, role: str, log: logging.Logger) -> None:
        self.cfg = cfg
        self.role = role
        self.log = log
        self.keys = KeyRing(cfg.pool_key_file, cfg.password_dir)
        self.layer = SecurityLayer(cfg, self.keys, log)
        self.token = DaemonToken(self.keys, cfg.trust_domain)
        self._token_ok = False

    def prepare(self) -> None:
        """Before serving: the collector creates the pool key if there is none (as HTCondor's
        does); every daemon then needs it to verify tokens. KeyFileError stops the daemon."""
        if self.role == "collector":
            try:
                if create_key_file(self.cfg.pool_key_file):
                    self.log.info("Created POOL token signing key in file %s", self.cfg.pool_key_file)
            except OSError as e:
                # A read-only secrets volume without the key, say: the key was not made first.
                raise KeyFileError(f"signing key file {self.cfg.pool_key_file}: no such file, and the collector "
                                   f"cannot create it ({e.strerror}) (SEC_TOKEN_POOL_SIGNING_KEY_FILE)") from None
        if self.cfg.all_open:
            self.log.warning("SECURITY IS OFF: SEC_DEFAULT_AUTHENTICATION = NEVER; anyone who can reach this "
                             "daemon may do anything it serves (shut it down, submit as anyone, read claim ids)")
        elif self.cfg.open_levels:
            self.log.warning("authentication NEVER for %s: anyone may call RPCs of those levels",
                             ", ".join(self.cfg.open_levels))
        try:
            self.keys.jwt_key(POOL_KEY_ID)
            self._token_ok = True
        except KeyFileError as e:
            if not self.cfg.all_open:
                raise KeyFileError(f"{e} (SEC_TOKEN_POOL_SIGNING_KEY_FILE; every daemon needs the pool's signing "
                                   f"key to verify tokens)") from None
            self.layer.keys = None
        if self.cfg.tls is not None:
            self.log.info("TLS on: certificate %s%s", self.cfg.tls.server_cert,
                          ", client certificates required" if self.cfg.tls.require_client_cert else "")
        self.log.info("security: trust domain %s, authentication %s", self.cfg.trust_domain,
                      ", ".join(f"{lv} {req}" for lv, req in self.cfg.authentication))

    def _tokens(self) -> list[str]:
        if not self._token_ok:
            return []
        return self.token()

    def client_layers(self) -> list[ClientLayer]:
        return [TokenLayer(self._tokens)]

    # TLS (and the cryptography it imports) only for pools that use it.
    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.cfg.tls is None:
            return None
        from daemons.core.security.tls import server_credentials
        return server_credentials(self.cfg.tls)

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        if self.cfg.tls is None:
            return None
        from daemons.core.security.tls import client_credentials
        return client_credentials(self.cfg.tls)

    def server_name(self) -> str | None:
        if self.cfg.tls is None or not self.cfg.tls.skip_host_check:
            return None
        from daemons.core.security.tls import SERVER_NAME_ALIAS
        return SERVER_NAME_ALIAS
