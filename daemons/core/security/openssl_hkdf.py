"""HKDF-SHA256 from OpenSSL's libcrypto, the one the interpreter's hashlib and ssl already load.

Why not cryptography's HKDF, which the project otherwise takes its cryptography from:
importing any of cryptography maps its Rust library, about 7.5 MB resident in every
daemon process (6.4 MB of library pages and its Python modules), only to derive one
32-byte key at start-up. OpenSSL's HKDF is the same primitive from the library
cryptography itself builds on, already in memory; nothing here computes a hash or an
HMAC by hand. Called through ctypes with OpenSSL 3's EVP_PKEY HKDF functions; where
they cannot be loaded (another C library, OpenSSL 1.1, a static interpreter) or refuse
an input, `hkdf_sha256` returns None and the caller uses cryptography's HKDF, which a
unit test checks gives the same bytes.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Any

EVP_PKEY_HKDF = 1036            # NID_hkdf (obj_mac.h)
LIBCRYPTO = "libcrypto.so.3"     # OpenSSL 3's soname, as Python's _hashlib links it
OPENSSL_3 = 0x30000000


@lru_cache(maxsize=1)
def _lib() -> Any:
    try:
        import _hashlib  # noqa: F401  (the interpreter's own libcrypto, loaded first)
        lib = ctypes.CDLL(LIBCRYPTO)
        lib.OpenSSL_version_num.restype = ctypes.c_ulong
        if lib.OpenSSL_version_num() < OPENSSL_3:
            return None
        p, i, ub = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        for name, res, args in (
                ("EVP_PKEY_CTX_new_id", p, (i, p)),
                ("EVP_PKEY_derive_init", i, (p,)),
                ("EVP_sha256", p, ()),
                ("EVP_PKEY_CTX_set_hkdf_md", i, (p, p)),
                ("EVP_PKEY_CTX_set1_hkdf_salt", i, (p, ub, i)),
                ("EVP_PKEY_CTX_set1_hkdf_key", i, (p, ub, i)),
                ("EVP_PKEY_CTX_add1_hkdf_info", i, (p, ub, i)),
                ("EVP_PKEY_derive", i, (p, ub, ctypes.POINTER(ctypes.c_size_t))),
                ("EVP_PKEY_CTX_free", None, (p,))):
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        return lib
    except (ImportError, OSError, AttributeError):
        return None


def hkdf_sha256(key: bytes, salt: bytes, info: bytes, length: int) -> bytes | None:
    """RFC 5869 HKDF with SHA-256 (extract and expand), or None where OpenSSL 3 is not at hand."""
    lib = _lib()
    if lib is None or not key or length <= 0:
        return None
    ctx = lib.EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, None)
    if not ctx:
        return None
    try:
        out = ctypes.create_string_buffer(length)
        n = ctypes.c_size_t(length)
        ok = (lib.EVP_PKEY_derive_init(ctx) > 0
              and lib.EVP_PKEY_CTX_set_hkdf_md(ctx, lib.EVP_sha256()) > 0
              and lib.EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, len(salt)) > 0
              and lib.EVP_PKEY_CTX_set1_hkdf_key(ctx, key, len(key)) > 0
              and lib.EVP_PKEY_CTX_add1_hkdf_info(ctx, info, len(info)) > 0
              and lib.EVP_PKEY_derive(ctx, out, ctypes.byref(n)) > 0)
        return out.raw[:length] if ok and n.value == length else None
    finally:
        lib.EVP_PKEY_CTX_free(ctx)
