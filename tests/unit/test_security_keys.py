"""Signing keys: HTCondor's key-file format and HS256 key derivation, against a worked vector.

The vector, worked out by hand from HTCondor's source:
- simple_scramble (src/condor_utils/secure_file.cpp) XORs each byte with DE AD BE EF in
  turn, so the key file for the password "password" (70 61 73 73 77 6f 72 64) holds
  70^DE 61^AD 73^BE 73^EF 77^DE 6f^AD 72^BE 64^EF = ae cc cd 9c a9 c2 cc 8b;
- getTokenSigningKey (src/condor_utils/store_cred.cpp) unscrambles it and, for the POOL
  key, doubles it: "passwordpassword";
- generate_token (src/condor_io/condor_auth_passwd.cpp) takes HKDF-SHA256 of that with
  salt "htcondor", info "master jwt", 32 bytes (RFC 5869; computed below with hmac as an
  independent check of the library): 839fe9ac...11c7ed56;
- the token of fixed claims signed with it is pinned, and its header and payload are
  laid out as condor_token_create's are (the header of the token in HTCondor's manual,
  docs/admin-manual/security.rst, is eyJhbGciOiJIUzI1NiIsImtpZCI6IlBPT0wifQ).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemons.core.security.keys import (KeyFileError, KeyRing, check_key_id, create_key_file, derive_jwt_key,
                                        read_key_file, scramble)
from daemons.core.security.tokens import mint

FILE_BYTES = bytes.fromhex("aecccd9ca9c2cc8b")
DERIVED = bytes.fromhex("839fe9acdd6ed825ed9307d64fac28c0a6bf21016e6f7e2a614d8ed811c7ed56")
TOKEN = ("eyJhbGciOiJIUzI1NiIsImtpZCI6IlBPT0wifQ."
         "eyJpYXQiOjE3MDAwMDAwMDAsImlzcyI6InBvb2wiLCJqdGkiOiIwMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZiIsInN1YiI6"
         "ImFsaWNlQHBvb2wifQ.7YYJX7whmRk00R5rvHs4hVzNhGRyPQVAuveeI48ZC-4")


def _rfc5869(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-SHA256, spelled out (a cross-check of the library in this test only)."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


def _key_file(tmp_path, data: bytes, mode: int = 0o600, name: str = "POOL"):
    path = tmp_path / name
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def test_scramble_is_htcondors_xor_with_deadbeef():
    assert scramble(b"password") == FILE_BYTES
    assert scramble(FILE_BYTES) == b"password"


def test_hkdf_matches_rfc_5869_test_case_1():
    ikm, salt, info = bytes([0x0b] * 22), bytes(range(13)), bytes(range(0xf0, 0xfa))
    expected = bytes.fromhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                             "34007208d5b887185865")
    assert _rfc5869(ikm, salt, info, 42) == expected


def test_pool_key_is_unscrambled_doubled_and_derived(tmp_path):
    shared = read_key_file(_key_file(tmp_path, FILE_BYTES), pool=True)
    assert shared == b"passwordpassword"
    assert derive_jwt_key(shared) == _rfc5869(b"passwordpassword", b"htcondor", b"master jwt", 32) == DERIVED
    assert KeyRing(tmp_path / "POOL", tmp_path).jwt_key("POOL") == DERIVED


def test_a_named_key_is_not_doubled(tmp_path):
    _key_file(tmp_path, FILE_BYTES, name="AP")
    assert read_key_file(tmp_path / "AP", pool=False) == b"password"
    assert KeyRing(tmp_path / "POOL", tmp_path).jwt_key("AP") == derive_jwt_key(b"password")


def test_token_vector_signed_and_laid_out_as_condor_token_create(tmp_path):
    key = KeyRing(_key_file(tmp_path, FILE_BYTES), tmp_path).jwt_key("POOL")
    made = mint(key, identity="alice@pool", issuer="pool", now=1700000000, jti="0123456789abcdef0123456789abcdef")
    assert made == TOKEN
    assert jwt.decode(TOKEN, DERIVED, algorithms=["HS256"]) == {
        "iat": 1700000000, "iss": "pool", "jti": "0123456789abcdef0123456789abcdef", "sub": "alice@pool"}


def test_key_file_refused_when_others_may_read_it(tmp_path):
    path = _key_file(tmp_path, FILE_BYTES, mode=0o644)
    with pytest.raises(KeyFileError, match=r"must not be readable or writable by group or others \(mode 0644; "
                                           r"chmod 600"):
        read_key_file(path, pool=True)


def test_missing_and_empty_key_files(tmp_path):
    with pytest.raises(KeyFileError, match="no such file"):
        read_key_file(tmp_path / "POOL", pool=True)
    with pytest.raises(KeyFileError, match="empty"):
        read_key_file(_key_file(tmp_path, b""), pool=True)


def test_key_ids_are_plain_file_names(tmp_path):
    assert check_key_id("POOL") == "POOL"
    for bad in ("../POOL", "a/b", "", ".."):
        with pytest.raises(KeyFileError, match="plain file name"):
            KeyRing(tmp_path / "POOL", tmp_path).path_of(bad)


def test_create_key_file_as_htcondors_collector_does(tmp_path):
    path = tmp_path / "passwords.d" / "POOL"
    assert create_key_file(path, random_bytes=b"x" * 64)
    assert (os.stat(path).st_mode & 0o777, os.stat(path.parent).st_mode & 0o777) == (0o600, 0o700)
    assert path.read_bytes() == scramble(b"x" * 64)
    assert not create_key_file(path)                 # never overwritten
    assert path.read_bytes() == scramble(b"x" * 64)


def test_create_key_file_racing_itself_makes_one_whole_key(tmp_path):
    # A compose or swarm pool's key may be made by two processes at once: exactly one wins,
    # the file is always one writer's whole key, and no temporary file is left behind.
    import threading
    path = tmp_path / "passwords.d" / "POOL"
    won: list[int] = []
    start = threading.Barrier(8)

    def make(i: int) -> None:
        start.wait()
        if create_key_file(path, random_bytes=bytes([i]) * 64):
            won.append(i)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert path.read_bytes() == scramble(bytes([won[0]]) * 64)
    assert os.listdir(path.parent) == ["POOL"]


@pytest.mark.parametrize("shared", [b"", b"password", b"passwordpassword", bytes(range(256)), b"\xff" * 128])
def test_derived_key_is_cryptographys_hkdf(shared):
    # HTCondor's derivation (salt "htcondor", info "master jwt"), with cryptography's HKDF.
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"htcondor", info=b"master jwt").derive(shared)
    assert derive_jwt_key(shared) == expected


@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=0, max_size=300))
def test_openssls_hkdf_and_cryptographys_derive_the_same_key(key):
    # derive_jwt_key takes OpenSSL's HKDF where the interpreter's libcrypto has it, else
    # cryptography's: the two must give the same bytes, or a daemon's tokens would depend
    # on the machine it runs on.
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    want = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"htcondor", info=b"master jwt").derive(key)
    assert derive_jwt_key(key) == want
    from daemons.core.security.openssl_hkdf import hkdf_sha256
    got = hkdf_sha256(key, b"htcondor", b"master jwt", 32)
    assert got is None or got == want


def test_openssls_hkdf_is_there_on_this_kind_of_machine():
    # The memory figure in docs/PERFORMANCE.md assumes it: without it a daemon maps cryptography.
    from daemons.core.security.openssl_hkdf import hkdf_sha256
    assert hkdf_sha256(b"passwordpassword", b"htcondor", b"master jwt", 32) == DERIVED

