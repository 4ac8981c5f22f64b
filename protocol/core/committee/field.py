"""Vectorised arithmetic in the prime field ``F_p``, ``p = 2^61 - 1`` (a Mersenne prime).

Every function takes and returns ``uint64`` arrays whose entries are in ``[0, p)``.
Products of two 61-bit values need 122 bits; :func:`mul` splits each operand into 32-bit
halves so that every partial product fits a ``uint64``, then folds with ``2^61 = 1``
(mod ``p``). The verified committee (:mod:`protocol.core.committee.verified`) and the
threshold transport's malicious-model rounds work in this field: it is large enough that
a random linear check catches a cheating party except with probability about ``2^-60``,
and counts up to ``2^60`` fit with room for ``x - theta``.

Uniform field elements are drawn from a ChaCha20 keystream by rejection: a 61-bit word
equal to ``p`` is replaced by the next word (probability ``2^-61`` each), so both holders
of a key derive exactly the same, exactly uniform values.
"""
from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

__all__ = ["P", "add", "sub", "neg", "mul", "scale", "check", "uniform", "from_ints"]

#: the field's modulus, 2^61 - 1
P = (1 << 61) - 1
_P = np.uint64(P)
_M32 = np.uint64(0xFFFFFFFF)
_M29 = np.uint64((1 << 29) - 1)
_S29, _S32, _S61, _S3 = np.uint64(29), np.uint64(32), np.uint64(61), np.uint64(3)


def _fold(t: np.ndarray) -> np.ndarray:
    """Reduce values below ``2^63`` to ``[0, p)``."""
    t = (t & _P) + (t >> _S61)
    t = (t & _P) + (t >> _S61)
    return np.where(t >= _P, t - _P, t)


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b mod p``."""
    s = a + b
    return np.where(s >= _P, s - _P, s)


def neg(a: np.ndarray) -> np.ndarray:
    """``-a mod p``."""
    return np.where(a == 0, a, _P - a)


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b mod p``."""
    return add(a, neg(b))


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b mod p`` (exact, elementwise; operands broadcast)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    a_hi, a_lo = a >> _S32, a & _M32
    b_hi, b_lo = b >> _S32, b & _M32
    hh = a_hi * b_hi                      # < 2^58; weight 2^64 = 8 (mod p)
    mid = a_hi * b_lo + a_lo * b_hi       # < 2^62; weight 2^32
    ll = a_lo * b_lo                      # < 2^64
    t = ((hh << _S3) + (mid >> _S29) + ((mid & _M29) << _S32)
         + (ll & _P) + (ll >> _S61))      # < 3 * 2^61 + 2^33 + 8 < 2^63
    return _fold(t)


def scale(a: np.ndarray, c: int) -> np.ndarray:
    """``c * a mod p`` for a public integer ``c``."""
    return mul(a, np.uint64(int(c) % P))


def from_ints(values: object) -> np.ndarray:
    """Non-negative integers below ``p`` as a field vector.

    Raises:
        ValueError: a value outside ``[0, p)``.
    """
    arr = np.asarray(values)
    if arr.size and (arr.dtype.kind not in "iu" or int(arr.min()) < 0 or int(arr.max()) >= P):
        raise ValueError("field elements are integers in [0, 2^61 - 1)")
    return arr.astype(np.uint64)


def check(a: object, shape: tuple[int, ...]) -> bool:
    """Whether ``a`` is a ``uint64`` array of this shape with every entry below ``p``."""
    return (isinstance(a, np.ndarray) and a.dtype == np.uint64 and a.shape == shape
            and (a.size == 0 or int(a.max()) < P))


def uniform(key: bytes, label: str, count: int) -> np.ndarray:
    """``count`` uniform field elements from the ChaCha20 keystream of ``key`` under
    ``label`` (the nonce is SHA-256 of the label, so each use of a key has its own
    stream and two holders of the key derive the same values)."""
    nonce = hashlib.sha256(b"fedhh committee stream\x00" + label.encode()).digest()[:16]
    enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
    out = np.frombuffer(enc.update(b"\x00" * (8 * count)), dtype=np.uint64) & _P
    bad = np.flatnonzero(out == _P)
    if bad.size:
        out = out.copy()
        for i in bad:                       # probability 2^-61 per word
            while True:
                w = np.frombuffer(enc.update(b"\x00" * 8), dtype=np.uint64)[0] & _P
                if w != _P:
                    out[i] = w
                    break
    return out
