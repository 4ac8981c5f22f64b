"""OpenSSL's libcrypto through ``cffi``, for block ciphers keyed again per call.

``cryptography`` builds a new cipher context for every key (about 10 us of object
set-up around an AES key schedule of tens of nanoseconds with AES-NI). Where one call
has many keys (a client's ``k + 1`` mask seeds, Poplar1's per-report keys), one
``EVP_CIPHER_CTX``, keyed again for each key, does the same work for a fraction of the
cost. This is the libcrypto that Python's own ``ssl`` and
``hashlib`` load; ``cffi`` is already a dependency of ``cryptography``.

Callers check the output against a known answer before they rely on it, and fall back
to ``cryptography`` when the library cannot be loaded (:func:`libcrypto` returns
``None``). A context is never shared between threads: the mask PRG makes one per call
(one call covers all of a client's seeds), Poplar1 keeps one per thread.
"""
from __future__ import annotations

from typing import Any

__all__ = ["libcrypto", "new_context"]

_CDEF = """
typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_cipher_st EVP_CIPHER;
EVP_CIPHER_CTX *EVP_CIPHER_CTX_new(void);
void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx);
const EVP_CIPHER *EVP_aes_128_ecb(void);
const EVP_CIPHER *EVP_aes_256_ctr(void);
int EVP_EncryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *type, void *impl,
                       const unsigned char *key, const unsigned char *iv);
int EVP_EncryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                      const unsigned char *in, int inl);
int EVP_CIPHER_CTX_set_padding(EVP_CIPHER_CTX *ctx, int padding);
"""
_loaded: Any = None          # None: not tried yet; False: not available


def libcrypto() -> tuple[Any, Any] | None:
    """``(ffi, lib)`` of the process's libcrypto, or ``None`` if it cannot be loaded."""
    global _loaded
    if _loaded is None:   # two threads loading at once load the same library twice
        try:
            import ctypes.util

            import cffi

            name = ctypes.util.find_library("crypto")
            if not name:
                raise OSError("no libcrypto")
            ffi = cffi.FFI()
            ffi.cdef(_CDEF)
            _loaded = (ffi, ffi.dlopen(name))
        except (ImportError, OSError, AttributeError):
            _loaded = False
    return _loaded or None


def new_context(cipher: str) -> Any:
    """A new encryption context of ``cipher`` (``"aes_128_ecb"``, no padding, or
    ``"aes_256_ctr"``), freed when dropped; key it again with
    ``EVP_EncryptInit_ex(ctx, NULL, NULL, key, iv)`` for each key. For one thread.

    Raises:
        RuntimeError: libcrypto is not available, or refused to make the context.
    """
    loaded = libcrypto()
    if loaded is None:
        raise RuntimeError("libcrypto is not available")
    ffi, lib = loaded
    raw = lib.EVP_CIPHER_CTX_new()
    if raw == ffi.NULL:
        raise RuntimeError("EVP_CIPHER_CTX_new failed")
    ctx = ffi.gc(raw, lib.EVP_CIPHER_CTX_free)
    kind = {"aes_128_ecb": lib.EVP_aes_128_ecb, "aes_256_ctr": lib.EVP_aes_256_ctr}[cipher]
    if lib.EVP_EncryptInit_ex(ctx, kind(), ffi.NULL, ffi.NULL, ffi.NULL) != 1 or (
            cipher.endswith("ecb") and lib.EVP_CIPHER_CTX_set_padding(ctx, 0) != 1):
        raise RuntimeError("EVP_EncryptInit_ex failed")
    return ctx
