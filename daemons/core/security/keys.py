"""Token signing keys: HTCondor's key files and the HMAC key it derives from them.

A signing key file (the pool's is `SEC_TOKEN_POOL_SIGNING_KEY_FILE`, default
`passwords.d/POOL`; others are `SEC_PASSWORD_DIRECTORY/<kid>`) holds random bytes
XOR-ed with 0xDEADBEEF ("simple_scramble", src/condor_utils/secure_file.cpp). To sign
or verify an IDTOKEN HTCondor reads the file (refusing one that group or others may
read, or that another user owns: read_secure_file), undoes the scramble, and, for the
POOL key only, doubles it (key + key, kept for tokens issued before 8.9.12:
getTokenSigningKey in src/condor_utils/store_cred.cpp). The HS256 key is then
HKDF-SHA256 of that with salt "htcondor", info "master jwt" and 32 bytes of output
(Condor_Auth_Passwd::generate_token and ::hkdf in src/condor_io/condor_auth_passwd.cpp).
An independent implementation that does the same: CoffeaTeam/coffea-casa,
charts/coffea-casa/files/hub/auth.py (simple_scramble, "if kid == 'POOL': password +=
password", derive_master_key). tests/unit/test_security_keys.py checks the steps
against a vector worked out by hand from that source.

Doing it HTCondor's way means a token made by `condor_token_create` from the same key
file is accepted here, and one made by `htcpool token create` is accepted by HTCondor.
"""
from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

POOL_KEY_ID = "POOL"
SCRAMBLE = bytes((0xDE, 0xAD, 0xBE, 0xEF))
KEY_FILE_BYTES = 64          # what HTCondor's collector writes (create_signing_key)
JWT_KEY_BYTES = 32           # AUTH_PW_KEY_STRENGTH
HKDF_SALT = b"htcondor"
HKDF_INFO = b"master jwt"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


class KeyFileError(Exception):
    """A signing key that cannot be used; the message names the file and what to do."""


def scramble(data: bytes) -> bytes:
    """HTCondor's simple_scramble: XOR with DE AD BE EF, repeated. Its own inverse."""
    return bytes(b ^ SCRAMBLE[i % 4] for i, b in enumerate(data))


def derive_jwt_key(shared_key: bytes) -> bytes:
    """The HS256 key HTCondor signs IDTOKENS with, from a key file's (unscrambled) bytes:
    OpenSSL's HKDF where the interpreter's libcrypto offers it (openssl_hkdf.py: importing
    cryptography costs a daemon 7.5 MB), else cryptography's. Never hand-written."""
    from daemons.core.security.openssl_hkdf import hkdf_sha256
    derived = hkdf_sha256(shared_key, HKDF_SALT, HKDF_INFO, JWT_KEY_BYTES)
    if derived is not None:
        return derived
    return _cryptography_hkdf(shared_key)


def _cryptography_hkdf(shared_key: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    return HKDF(algorithm=hashes.SHA256(), length=JWT_KEY_BYTES, salt=HKDF_SALT, info=HKDF_INFO).derive(shared_key)


def check_key_id(key_id: str) -> str:
    """A kid names a file in SEC_PASSWORD_DIRECTORY: a plain file name, nothing else."""
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id) or key_id in (".", ".."):
        raise KeyFileError(f"signing key name {key_id!r} is not a plain file name")
    return key_id


def read_key_file(path: Path, *, pool: bool) -> bytes:
    """The shared key of a signing key file, as HTCondor's getTokenSigningKey makes it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise KeyFileError(f"signing key file {path}: no such file") from None
    except OSError as e:
        raise KeyFileError(f"signing key file {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"signing key file {path}: not a regular file")
    if st.st_uid != os.geteuid():
        raise KeyFileError(f"signing key file {path}: must be owned by uid {os.geteuid()}, is owned by uid "
                           f"{st.st_uid}")
    if st.st_mode & 0o077:
        raise KeyFileError(f"signing key file {path}: must not be readable or writable by group or others "
                           f"(mode {stat.S_IMODE(st.st_mode):04o}; chmod 600 {path})")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise KeyFileError(f"signing key file {path}: {e.strerror}") from None
    if not raw:
        raise KeyFileError(f"signing key file {path}: empty")
    key = scramble(raw)
    return key + key if pool else key


def create_key_file(path: Path, random_bytes: bytes | None = None) -> bool:
    """Create a signing key file as HTCondor's collector does (64 random bytes, scrambled,
    mode 0600, directory 0700); False if it already exists (it is never overwritten)."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = random_bytes if random_bytes is not None else secrets.token_bytes(KEY_FILE_BYTES)
    # Written whole under a temporary name, then linked into place: a daemon starting at
    # the same moment (a compose or swarm pool whose key is being made) sees no file or
    # the whole key, never an empty one; link() fails if another process made it first.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(scramble(data))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


@dataclass
class KeyRing:
    """The signing keys a daemon can verify (and sign) with, derived once per key id."""
    pool_key_file: Path
    password_dir: Path
    _derived: dict[str, bytes] = field(default_factory=dict)

    def path_of(self, key_id: str) -> Path:
        if key_id == POOL_KEY_ID:
            return self.pool_key_file
        return self.password_dir / check_key_id(key_id)

    def jwt_key(self, key_id: str) -> bytes:
        """The HS256 key of `key_id`; KeyFileError if there is no usable file for it."""
        found = self._derived.get(key_id)
        if found is None:
            found = derive_jwt_key(read_key_file(self.path_of(key_id), pool=key_id == POOL_KEY_ID))
            self._derived[key_id] = found
        return found
