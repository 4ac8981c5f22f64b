"""The two fields of Poplar1 (draft-irtf-cfrg-vdaf, section "Finite Fields").

* **Field64**, ``p = 2^32 * 4294967295 + 1 = 2^64 - 2^32 + 1`` (the inner levels of the
  IDPF tree): vectorised over ``uint64`` numpy arrays whose entries are in ``[0, p)``.
  A product of two 64-bit values needs 128 bits; :func:`mul64` splits each operand into
  32-bit halves so that each partial product fits a ``uint64``, carries by hand, and
  reduces with ``2^64 = 2^32 - 1`` and ``2^96 = -1`` (mod ``p``). Sums wrap at ``2^64``
  and are corrected by ``2^64 - p = 2^32 - 1``.
* **Field255**, ``p = 2^255 - 19`` (the leaf level): Python integers (the leaf level is
  one level of ``BITS``; its cost is measured in ``docs/poplar1.md``).

Encoding: little-endian, 8 bytes (Field64) or 32 bytes (Field255) per element; a
decoded element at or above the modulus is refused (:class:`Poplar1DecodeError`).
"""
from __future__ import annotations

import numpy as np

from protocol.core.poplar1.errors import Poplar1DecodeError

__all__ = ["P64", "P255", "ENC64", "ENC255", "add64", "sub64", "neg64", "mul64", "sum64",
           "encode64", "decode64", "encode255", "decode255"]

#: Field64's modulus
P64 = (1 << 64) - (1 << 32) + 1
#: Field255's modulus
P255 = (1 << 255) - 19
#: encoded sizes in bytes
ENC64, ENC255 = 8, 32

_P = np.uint64(P64)
_EPS = np.uint64((1 << 32) - 1)          # 2^64 mod p
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def _canon(x: np.ndarray) -> np.ndarray:
    return x - (x >= _P).astype(np.uint64) * _P


def add64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b mod p`` elementwise (broadcasting)."""
    a = np.asarray(a, dtype=np.uint64)
    s = a + np.asarray(b, dtype=np.uint64)
    s = s + (s < a).astype(np.uint64) * _EPS     # a carry out of 2^64 is worth 2^32 - 1
    return _canon(s)


def sub64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b mod p`` elementwise."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    d = a - b
    return d - (a < b).astype(np.uint64) * _EPS  # a borrow: wrapped value - 2^64 + p


def neg64(a: np.ndarray) -> np.ndarray:
    """``-a mod p``."""
    a = np.asarray(a, dtype=np.uint64)
    return np.where(a == 0, a, _P - a)


def _reduce128(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``hi * 2^64 + lo mod p`` for ``uint64`` halves."""
    hi_hi = hi >> _S32
    hi_lo = hi & _M32
    t0 = lo - hi_hi                                   # hi_hi * 2^96 = -hi_hi (mod p)
    t0 = t0 - (lo < hi_hi).astype(np.uint64) * _EPS   # a borrow added 2^64 = 2^32 - 1 (mod p)
    t1 = hi_lo * _EPS                                 # hi_lo * 2^64 = hi_lo * (2^32 - 1)
    t2 = t0 + t1
    t2 = t2 + (t2 < t0).astype(np.uint64) * _EPS
    return _canon(t2)


def mul64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b mod p`` elementwise (broadcasting)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    a0, a1 = a & _M32, a >> _S32
    b0, b1 = b & _M32, b >> _S32
    ll = a0 * b0
    mid1 = a0 * b1
    mid2 = a1 * b0
    hh = a1 * b1
    mid = mid1 + mid2
    mid_carry = (mid < mid1).astype(np.uint64)
    lo = ll + (mid << _S32)
    lo_carry = (lo < ll).astype(np.uint64)
    hi = hh + (mid >> _S32) + (mid_carry << _S32) + lo_carry
    return _reduce128(lo, hi)


def sum64(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """The sum mod ``p`` along ``axis`` (at most ``2^32`` terms): the low and high
    32-bit halves are summed exactly in ``uint64`` and recombined."""
    a = np.asarray(a, dtype=np.uint64)
    if a.shape[axis] >= (1 << 32):
        raise ValueError("sum64 takes fewer than 2^32 terms")
    lo = (a & _M32).sum(axis=axis, dtype=np.uint64)
    hi = (a >> _S32).sum(axis=axis, dtype=np.uint64)
    hi = _canon(_canon(hi))        # hi < 2^64; two subtractions bring it below p
    lo = _canon(_canon(lo))
    return add64(mul64(hi, np.uint64(1 << 32)), lo)


def encode64(a: np.ndarray) -> bytes:
    """Little-endian encoding of Field64 elements (row-major)."""
    return np.ascontiguousarray(a, dtype="<u8").tobytes()


def decode64(data: bytes | np.ndarray, count: int | None = None) -> np.ndarray:
    """Field64 elements from little-endian bytes; refuses a length that is not a
    multiple of 8 (or not ``8 * count``) and any value at or above ``p``.

    Raises:
        Poplar1DecodeError: bad length or an element out of range.
    """
    buf = np.frombuffer(bytes(data) if not isinstance(data, np.ndarray) else data.tobytes(),
                        dtype=np.uint8)
    if buf.size % ENC64 or (count is not None and buf.size != ENC64 * count):
        raise Poplar1DecodeError("Field64 vector of the wrong length")
    out = buf.view("<u8").astype(np.uint64)
    if (out >= _P).any():
        raise Poplar1DecodeError("Field64 element at or above the modulus")
    return out


def encode255(values: list[int]) -> bytes:
    """Little-endian encoding of Field255 elements."""
    return b"".join(int(v).to_bytes(ENC255, "little") for v in values)


def decode255(data: bytes, count: int | None = None) -> list[int]:
    """Field255 elements from little-endian bytes.

    Raises:
        Poplar1DecodeError: bad length or an element out of range.
    """
    if len(data) % ENC255 or (count is not None and len(data) != ENC255 * count):
        raise Poplar1DecodeError("Field255 vector of the wrong length")
    out = [int.from_bytes(data[i:i + ENC255], "little") for i in range(0, len(data), ENC255)]
    if any(v >= P255 for v in out):
        raise Poplar1DecodeError("Field255 element at or above the modulus")
    return out
