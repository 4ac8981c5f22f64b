"""The two fields of Poplar1 (draft-irtf-cfrg-vdaf, section "Finite Fields").

* **Field64**, ``p = 2^32 * 4294967295 + 1 = 2^64 - 2^32 + 1`` (the inner levels of the
  IDPF tree): vectorised over ``uint64`` numpy arrays whose entries are in ``[0, p)``.
  A product of two 64-bit values needs 128 bits; :func:`mul64` splits each operand into
  32-bit halves so that each partial product fits a ``uint64``, carries by hand, and
  reduces with ``2^64 = 2^32 - 1`` and ``2^96 = -1`` (mod ``p``). Sums wrap at ``2^64``
  and are corrected by ``2^64 - p = 2^32 - 1``.
* **Field255**, ``p = 2^255 - 19`` (the leaf level): vectorised over ``int64`` numpy
  arrays of ten 26-bit limbs, the limb axis first (``(10, *shape)``): products as
  schoolbook columns exact in ``int64``, carried and folded with ``2^260 = 608`` (mod
  ``p``), then frozen to ``[0, p)`` (the section "Field255 over arrays" below;
  docs/dependencies.md for the choice). :class:`Field255Rows` keeps rows of validated
  elements as their bytes. Python integers appear only at the API's edges (the
  one-report encodings, the lists the aggregators exchange).

Encoding: little-endian, 8 bytes (Field64) or 32 bytes (Field255) per element; a
decoded element at or above the modulus is refused (:class:`Poplar1DecodeError`).
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from protocol.core.poplar1.errors import Poplar1DecodeError

__all__ = ["P64", "P255", "ENC64", "ENC255", "add64", "sub64", "neg64", "mul64", "sum64", "dot64",
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


def _mod64(x: np.ndarray) -> np.ndarray:
    """Any ``uint64`` value to ``[0, p)``."""
    return _canon(np.asarray(x, dtype=np.uint64))


def dot64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sum_i a_i b_i mod p`` along the last axis (fewer than ``2^32`` terms) of Field64
    arrays, with one reduction per sum instead of one per product: with 32-bit halves
    ``a = a1 2^32 + a0`` (and ``b``), each of the four partial products is below
    ``2^64`` and is summed as its low and high 32-bit halves exactly in ``uint64``; the
    eight sums are recombined with ``2^64 = 2^32 - 1`` and ``2^96 = -1`` (mod ``p``)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    if a.shape[-1] >= (1 << 32):
        raise ValueError("dot64 takes fewer than 2^32 terms")
    a0, a1 = a & _M32, a >> _S32
    b0, b1 = b & _M32, b >> _S32
    out = []
    for x, y in ((a0, b0), (a0, b1), (a1, b0), (a1, b1)):
        prod = x * y
        out.append(((prod & _M32).sum(axis=-1, dtype=np.uint64),
                    (prod >> _S32).sum(axis=-1, dtype=np.uint64)))
    (l00, h00), (l01, h01), (l10, h10), (l11, h11) = out
    # weights: l00 1; h00, l01, l10 2^32; h01, h10, l11 2^64; h11 2^96
    t32 = add64(add64(_mod64(h00), _mod64(l01)), _mod64(l10))
    t64 = add64(add64(_mod64(h01), _mod64(h10)), _mod64(l11))
    r = add64(_mod64(l00), mul64(t32, np.uint64(1 << 32)))
    r = add64(r, mul64(t64, _EPS))
    return sub64(r, _mod64(h11))


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
    """Field255 elements from little-endian bytes (validated in one numpy step).

    Raises:
        Poplar1DecodeError: bad length or an element out of range.
    """
    if len(data) % ENC255 or (count is not None and len(data) != ENC255 * count):
        raise Poplar1DecodeError("Field255 vector of the wrong length")
    data = bytes(data)
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, ENC255)
    if raw.shape[0] and at_least_p(limbs_from_bytes(raw)).any():
        raise Poplar1DecodeError("Field255 element at or above the modulus")
    return [int.from_bytes(data[i:i + ENC255], "little") for i in range(0, len(data), ENC255)]


# ----------------------------------------------------------------- Field255 over arrays
#
# Field255 elements as arrays: ten limbs of 26 bits in int64, the limb axis first, so a
# batch of shape ``S`` is a ``(10, *S)`` array whose row ``k`` holds every element's
# limb of weight ``2^(26 k)`` (each limb row is contiguous: every step below is one numpy
# operation over all elements). 26-bit limbs keep a product of two limbs below 2^52 and
# a column of a schoolbook product (at most ten of them) below 2^56, so a product of two
# elements, or a dot product over up to 64 pairs, is exact in int64 before any carry.
# Reduction uses 2^255 = 19 (mod p), so 2^260 = 19 * 32 = 608: a column of weight
# 2^(26 (10 + j)) is folded into column j times 608.

#: limbs of a Field255 element and their width
LIMBS, RADIX = 10, 26
_MASK = (1 << RADIX) - 1
_FOLD = 608                           # 2^260 mod p
_TOP = 255 - RADIX * (LIMBS - 1)      # bits of the top limb below 2^255 (21)
#: pairs a dot product sums before it carries (64 * 10 * 2^52 < 2^62)
_DOT_BLOCK = 64


def _carry(c: np.ndarray) -> np.ndarray:
    """Carry ``(K, ...)`` signed columns (each below ``2^62`` in magnitude) into ``K + 1``
    columns: the first ``K`` in ``[0, 2^26)``, the last the (signed) carry out."""
    out = np.empty((c.shape[0] + 1,) + c.shape[1:], dtype=np.int64)
    carry = None
    for k in range(c.shape[0]):
        t = c[k] if carry is None else c[k] + carry
        np.bitwise_and(t, _MASK, out=out[k, ...])
        carry = t >> RADIX
    out[-1] = carry
    return out


def _loose(c: np.ndarray) -> np.ndarray:
    """Columns ``(K, ...)`` (any ``K``, signed, below ``2^62`` in magnitude) to ten limbs
    in ``[0, 2^26)`` of the same value mod ``p`` (below ``2^260``): carry, fold the
    columns at and above ``2^260`` back times 608, until nothing is left above. Values
    that are negative as integers (a difference) come out as their residue."""
    c = np.asarray(c, dtype=np.int64)
    while True:
        c = _carry(c)
        if c.shape[0] <= LIMBS or not c[LIMBS:].any():
            out = c[:LIMBS]
            if out.shape[0] < LIMBS:
                out = np.concatenate([out, np.zeros((LIMBS - out.shape[0],) + out.shape[1:],
                                                    dtype=np.int64)])
            return out
        lo, hi = c[:LIMBS], c[LIMBS:]
        width = max(LIMBS, hi.shape[0])
        nxt = np.zeros((width,) + c.shape[1:], dtype=np.int64)
        nxt[:LIMBS] = lo
        nxt[:hi.shape[0]] += _FOLD * hi
        c = nxt


def _freeze(x: np.ndarray) -> np.ndarray:
    """Ten limbs in ``[0, 2^26)`` (value below ``2^260``) to the canonical residue in
    ``[0, p)``: fold the bits at and above 2^255 twice (``2^255 = 19``), then subtract
    ``p`` where the value is at least ``p`` (where ``value + 19`` reaches 2^255)."""
    x = np.array(x, dtype=np.int64)
    for _ in range(2):
        hi = x[LIMBS - 1] >> _TOP
        x[LIMBS - 1] &= (1 << _TOP) - 1
        x[0] += 19 * hi
        for k in range(LIMBS - 1):
            x[k + 1] += x[k] >> RADIX
            x[k] &= _MASK
    t = x.copy()
    t[0] += 19
    for k in range(LIMBS - 1):
        t[k + 1] += t[k] >> RADIX
        t[k] &= _MASK
    ge = (t[LIMBS - 1] >> _TOP) != 0                 # value + 19 >= 2^255: value >= p
    t[LIMBS - 1] &= (1 << _TOP) - 1
    return np.where(ge, t, x)


#: elements one step of the elementwise operations processes at once (their
#: temporaries stay in the cache; measured fastest between 2^12 and 2^14)
_CHUNK = 16384


def _chunked(fn, *arrays: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """``fn`` over the element axes of ``(K_i, ...)`` arrays (broadcast), in chunks of
    :data:`_CHUNK` elements; ``fn`` maps ``(K_i, m)`` blocks to ``(10, m)``."""
    arrays = [np.asarray(x, dtype=np.int64) for x in arrays]
    shape = np.broadcast_shapes(*(x.shape[1:] for x in arrays))
    flat = [np.broadcast_to(x, x.shape[:1] + shape).reshape(x.shape[0], -1) for x in arrays]
    m = flat[0].shape[1] if flat else 0
    out = np.empty((LIMBS, m), dtype=np.int64)
    for lo in range(0, m, _CHUNK):
        out[:, lo:lo + _CHUNK] = fn(*(x[:, lo:lo + _CHUNK] for x in flat))
    return out.reshape((LIMBS,) + shape)


def reduce255(c: np.ndarray) -> np.ndarray:
    """Any ``(K, ...)`` int64 columns of weights ``2^(26 k)`` (signed, below ``2^62`` in
    magnitude) to canonical Field255 limbs ``(10, ...)``."""
    return _chunked(lambda x: _freeze(_loose(x)), c)


def add255(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b mod p`` on canonical limbs (broadcasting over the element axes)."""
    return _chunked(lambda x, y: _freeze(_loose(x + y)), a, b)


def sub255(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b mod p``."""
    return _chunked(lambda x, y: _freeze(_loose(x - y)), a, b)


def neg255(a: np.ndarray) -> np.ndarray:
    """``-a mod p``."""
    return _chunked(lambda x: _freeze(_loose(-x)), a)


def _product_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The 19 columns of the schoolbook product of limbs ``a`` and ``b`` (same shape)."""
    cols = np.zeros((2 * LIMBS - 1,) + b.shape[1:], dtype=np.int64)
    for i in range(LIMBS):
        cols[i:i + LIMBS] += a[i] * b
    return cols


def mul255(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b mod p`` elementwise (broadcasting over the element axes)."""
    return _chunked(lambda x, y: _freeze(_loose(_product_columns(x, y))), a, b)


def dot255(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """``sum_i a_i b_i mod p`` along element axis ``axis`` (of the element shape, not
    counting the limb axis): products accumulate unreduced, :data:`_DOT_BLOCK` pairs at
    a time."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a = np.moveaxis(np.broadcast_to(a, shape), axis if axis < 0 else axis + 1, -1)
    b = np.moveaxis(np.broadcast_to(b, shape), axis if axis < 0 else axis + 1, -1)
    total = None
    for lo in range(0, max(a.shape[-1], 1), _DOT_BLOCK):
        aa, bb = a[..., lo:lo + _DOT_BLOCK], b[..., lo:lo + _DOT_BLOCK]
        cols = np.zeros((2 * LIMBS - 1,) + aa.shape[1:-1], dtype=np.int64)
        for i in range(LIMBS):
            # column i + j gets sum over the pairs of a_i * b_j, for every j at once
            cols[i:i + LIMBS] += np.einsum("...k,j...k->j...", aa[i], bb)
        part = _carry(cols)                              # 20 columns below 2^26 each
        total = part if total is None else total + part
    return reduce255(total)


def sum255(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """The sum mod ``p`` along element axis ``axis`` (fewer than ``2^36`` terms: limbs
    below 2^26 sum exactly in int64)."""
    a = np.asarray(a, dtype=np.int64)
    ax = axis if axis < 0 else axis + 1
    if a.shape[ax] >= (1 << 36):
        raise ValueError("sum255 takes fewer than 2^36 terms")
    return reduce255(a.sum(axis=ax))


def zeros255(shape: tuple[int, ...]) -> np.ndarray:
    return np.zeros((LIMBS,) + tuple(shape), dtype=np.int64)


def const255(value: int, shape: tuple[int, ...] = ()) -> np.ndarray:
    """The limbs of the integer ``value mod p``, broadcast to ``shape``."""
    v = int(value) % P255
    limbs = np.asarray([(v >> (RADIX * k)) & _MASK for k in range(LIMBS)], dtype=np.int64)
    return np.broadcast_to(limbs.reshape((LIMBS,) + (1,) * len(shape)),
                           (LIMBS,) + tuple(shape)).copy()


def limbs_from_bytes(raw: np.ndarray, *, mask: bool = False) -> np.ndarray:
    """``(..., 32)`` little-endian bytes to ``(10, ...)`` limbs of their integer value
    (below ``2^256``, not reduced); ``mask`` clears bit 255 first (the draft's rejection
    sampling masks to the modulus's bit length)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.shape[-1] != ENC255:
        raise ValueError("Field255 elements are 32 bytes")
    words = raw.view("<u8").astype(np.uint64)              # (..., 4)
    if mask:
        words[..., 3] &= np.uint64((1 << 63) - 1)
    out = np.empty((LIMBS,) + raw.shape[:-1], dtype=np.int64)
    m = np.uint64(_MASK)
    for k in range(LIMBS):
        pos = RADIX * k
        j, off = divmod(pos, 64)
        v = words[..., j] >> np.uint64(off)
        if off + RADIX > 64 and j + 1 < 4:
            v = v | (words[..., j + 1] << np.uint64(64 - off))
        out[k] = (v & m).astype(np.int64)
    return out


def limbs_to_bytes(x: np.ndarray) -> np.ndarray:
    """Canonical limbs ``(10, ...)`` to ``(..., 32)`` little-endian bytes."""
    x = np.asarray(x, dtype=np.int64)
    words = np.zeros(x.shape[1:] + (4,), dtype=np.uint64)
    for k in range(LIMBS):
        pos = RADIX * k
        j, off = divmod(pos, 64)
        v = x[k].astype(np.uint64)
        words[..., j] |= v << np.uint64(off)
        if off + RADIX > 64 and j + 1 < 4:
            words[..., j + 1] |= v >> np.uint64(64 - off)
    return np.ascontiguousarray(words.astype("<u8")).view(np.uint8)


def at_least_p(x: np.ndarray) -> np.ndarray:
    """Where the integer of limbs ``x`` (from :func:`limbs_from_bytes`, below
    ``2^256``) is at or above ``p``: ``x + 19`` reaches ``2^255``."""
    t = np.array(x, dtype=np.int64)
    t[0] += 19
    for k in range(LIMBS - 1):
        t[k + 1] += t[k] >> RADIX
        t[k] &= _MASK
    return (t[LIMBS - 1] >> _TOP) != 0


def decode255_array(raw: np.ndarray) -> np.ndarray:
    """Validated Field255 elements from ``(..., 32)`` bytes as limbs.

    Raises:
        Poplar1DecodeError: an element at or above the modulus.
    """
    x = limbs_from_bytes(raw)
    if at_least_p(x).any():
        raise Poplar1DecodeError("Field255 element at or above the modulus")
    return x


def limbs_from_ints(values, shape: tuple[int, ...] | None = None) -> np.ndarray:  # noqa: ANN001
    """Python integers in ``[0, p)`` (nested lists of one shape) to limbs."""
    flat = np.asarray(values, dtype=object)
    shp = flat.shape if shape is None else shape
    buf = b"".join(int(v).to_bytes(ENC255, "little") for v in flat.reshape(-1))
    raw = np.frombuffer(buf, dtype=np.uint8).reshape(tuple(shp) + (ENC255,))
    return limbs_from_bytes(raw)


def limbs_to_ints(x: np.ndarray) -> list:
    """Canonical limbs to (nested) lists of Python integers."""
    raw = limbs_to_bytes(x)
    shape = raw.shape[:-1]
    b = raw.tobytes()
    flat = [int.from_bytes(b[i:i + ENC255], "little") for i in range(0, len(b), ENC255)]
    return np.asarray(flat + [None], dtype=object)[:-1].reshape(shape).tolist() if shape \
        else flat[0]


class Field255Rows:
    """``N`` rows of ``k`` Field255 elements kept as their ``(N, 32 k)`` little-endian
    bytes (already validated, or a callable that reads them on first use): what
    ``PublicShares.w_leaf`` and ``InputShares.corr_leaf`` hold. The arithmetic reads
    them as limbs in one step (:meth:`limbs`); ``rows[r]`` is row ``r`` as a list of
    ints (and can be assigned one), ``rows[a:b]`` or ``rows[index_array]`` a
    :class:`Field255Rows` of those rows."""

    __slots__ = ("_raw", "_n")

    def __init__(self, raw: np.ndarray | Callable[[], np.ndarray], n: int | None = None) -> None:
        self._raw = raw
        self._n = raw.shape[0] if isinstance(raw, np.ndarray) else n

    @classmethod
    def from_limbs(cls, x: np.ndarray) -> "Field255Rows":
        """From canonical limbs ``(10, N, k)``."""
        raw = limbs_to_bytes(x)                                  # (N, k, 32)
        return cls(np.ascontiguousarray(raw.reshape(raw.shape[0], -1)))

    @classmethod
    def from_ints(cls, rows) -> "Field255Rows":  # noqa: ANN001
        """From ``N`` lists of ``k`` ints in ``[0, p)``."""
        n = len(rows)
        buf = b"".join(int(v).to_bytes(ENC255, "little") for row in rows for v in row)
        return cls(np.frombuffer(buf, dtype=np.uint8).reshape(n, -1).copy())

    @property
    def raw(self) -> np.ndarray:
        if not isinstance(self._raw, np.ndarray):
            self._raw = self._raw()
        return self._raw

    @property
    def width(self) -> int:
        """Elements per row."""
        return self.raw.shape[1] // ENC255

    def limbs(self) -> np.ndarray:
        """The elements as limbs ``(10, N, k)``."""
        raw = self.raw
        return limbs_from_bytes(raw.reshape(raw.shape[0], -1, ENC255))

    def __len__(self) -> int:
        return int(self._n if self._n is not None else self.raw.shape[0])

    def __getitem__(self, r):  # noqa: ANN001, ANN204
        if isinstance(r, (int, np.integer)):
            row = self.raw[r].tobytes()
            return [int.from_bytes(row[i:i + ENC255], "little")
                    for i in range(0, len(row), ENC255)]
        return Field255Rows(np.ascontiguousarray(self.raw[r]))

    def __setitem__(self, r: int, values) -> None:  # noqa: ANN001
        raw = self.raw
        row = b"".join(int(v).to_bytes(ENC255, "little") for v in values)
        if len(row) != raw.shape[1]:
            raise ValueError("a row of the wrong width")
        if not raw.flags.writeable:
            self._raw = raw = raw.copy()
        raw[r] = np.frombuffer(row, dtype=np.uint8)

    def __iter__(self) -> Iterator[list[int]]:
        for r in range(len(self)):
            yield self[r]

    def tolist(self) -> list[list[int]]:
        return list(self)


def is_limbs(values) -> bool:  # noqa: ANN001
    """Whether ``values`` is an int64 array of Field255 limbs (the limb axis first), not
    a list of Python integers."""
    return isinstance(values, np.ndarray) and values.dtype == np.int64 and values.ndim >= 1 \
        and values.shape[0] == LIMBS


def leaf_limbs(values) -> np.ndarray:  # noqa: ANN001
    """``N`` rows of Field255 elements -- a :class:`Field255Rows`, limbs ``(10, N, k)``,
    or ``N`` lists of ints -- as limbs ``(10, N, k)``."""
    if isinstance(values, Field255Rows):
        return values.limbs()
    if is_limbs(values) and values.ndim == 3:
        return values
    n = len(values)
    k = len(values[0]) if n else 0
    return limbs_from_ints(values, (n, k))
