"""Shamir secret sharing of 32-byte secrets, lane by lane over GF(2^31 - 1).

Theory of operation
-------------------
Shamir (CACM 1979): to share ``s`` with threshold ``t``, pick a polynomial
``f(z) = s + a_1 z + ... + a_{t-1} z^{t-1}`` with ``a_i`` uniform in ``GF(p)`` and hand
party ``j`` the point ``(x_j, f(x_j))``. Any ``t`` points determine ``f`` and so
``s = f(0)`` by Lagrange interpolation at zero::

    s = sum_i y_i * L_i,   L_i = prod_{j != i} x_j / (x_j - x_i)   (mod p)

while any ``t - 1`` points are independent of ``s`` (for every candidate ``s`` exactly
one polynomial of degree ``< t`` fits them).

Lanes. The field is ``GF(p)`` with the Mersenne prime :data:`PRIME` ``= 2^31 - 1``. The
32-byte secret, read as a big-endian integer, is cut into :data:`LANES` ``= 9`` lanes of
:data:`LANE_BITS` ``= 30`` bits (lane ``l`` holds bits ``30 l .. 30 l + 29``; the last
lane the top 16 bits), and each lane is shared with its own polynomial of degree
``t - 1`` whose ``t - 1`` coefficients are drawn independently and uniformly. A share
is the point ``x`` and the nine values ``f_l(x)``. Each lane is a Shamir sharing of its
own, and the lanes' coefficients are independent, so any ``t - 1`` shares are
independent of the whole secret, and any ``t`` shares give back every lane and so the
secret: the same threshold guarantee as one sharing over a field above ``2^256``.

Why lanes. The work is small-integer arithmetic that numpy does in bulk: a value
below ``2^31`` times a point below ``2^16`` fits 47 bits, and ``2^31 = 1 (mod p)``, so
reducing is two shifts and adds. Sharing evaluates every lane at every point at once
as one matrix product ``Y = C V`` of the coefficients ``C`` (lanes x t) with the powers
``V[i, j] = x_j^i`` (t x points); the product runs in float64 on 16-bit halves of both
factors, which is exact (each entry is a sum of ``t < 2^16`` products below ``2^32``,
under the 53-bit mantissa). The powers come from a baby-step giant-step table
(``x^(a B + b) = x^(a B) x^b`` with ``B = ceil(sqrt(t))``). Several secrets shared to
the same points (a client's ``b`` and ``s_sk``) share one table.

A reconstruction whose lanes do not fit their widths (a lane ``>= 2^30``, the top lane
``>= 2^16``) cannot come from a valid sharing and is reported as an error; a wrong
share otherwise yields a wrong secret undetected (Shamir alone is not verifiable: the
protocol authenticates the shares with the AEAD instead).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from math import isqrt

import numpy as np

from .errors import ParameterError
from .randomness import RandomSource

__all__ = ["PRIME", "LANES", "LANE_BITS", "SECRET_BYTES", "SHARE_BYTES", "SHARE_WIRE_BYTES",
           "MAX_X", "Share", "split", "split_encoded", "split_encoded_many", "share_value",
           "check_encodings", "combine", "combine_encoded", "combine_encoded_many"]

PRIME = (1 << 31) - 1
LANE_BITS = 30
LANES = 9                   # ceil(256 / 30)
SECRET_BYTES = 32
_TOP_BITS = 8 * SECRET_BYTES - LANE_BITS * (LANES - 1)   # 16 bits in the last lane
_LANE_BYTES = 4
SHARE_BYTES = LANES * _LANE_BYTES   # bytes of the y coordinate (36)
SHARE_WIRE_BYTES = 2 + SHARE_BYTES
MAX_X = 1 << 16  # x in [1, MAX_X)

_P = np.uint64(PRIME)
_S31 = np.uint64(31)
_HALF = np.uint64(0xFFFF)
_S16 = np.uint64(16)
_LANE_MASK = (1 << LANE_BITS) - 1
_Y_LANES = np.dtype(">u4")
_WIRE = np.dtype([("x", ">u2"), ("y", ">u4", (LANES,))])   # one share encoding


@dataclass(frozen=True, slots=True)
class Share:
    """One point ``(x, y)`` of a lane-wise sharing.

    Attributes:
        x: evaluation point, ``1 <= x < 2**16``.
        y: the :data:`LANES` values ``f_l(x)``, each ``0 <= y_l < PRIME``.

    Raises:
        ParameterError: (a ``ValueError``) on construction with an out-of-range field.
    """

    x: int
    y: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.x, int) or isinstance(self.x, bool):
            raise ParameterError(f"share x must be an int, got {type(self.x).__name__}")
        if not 1 <= self.x < MAX_X:
            raise ParameterError(f"share x must satisfy 1 <= x < 2**16, got {self.x}")
        if not isinstance(self.y, tuple) or len(self.y) != LANES:
            raise ParameterError(f"share y must be a tuple of {LANES} ints")
        for v in self.y:
            if not isinstance(v, int) or isinstance(v, bool):
                raise ParameterError(f"share y must hold ints, got {type(v).__name__}")
            if not 0 <= v < PRIME:
                raise ParameterError("share y values must satisfy 0 <= y < PRIME")

    def to_bytes(self) -> bytes:
        """Fixed 38-byte encoding: ``x`` as 2 bytes, then each lane as 4 bytes,
        big-endian."""
        return struct.pack(f">H{LANES}I", self.x, *self.y)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Share":
        """Decode :meth:`to_bytes`; the result is validated like any ``Share``.

        Raises:
            ParameterError: (a ``ValueError``) wrong type or length, or a field out of
                range.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ParameterError(f"share encoding must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) != SHARE_WIRE_BYTES:
            raise ParameterError(f"share encoding must be {SHARE_WIRE_BYTES} bytes, "
                                 f"got {len(data)}")
        x, *y = struct.unpack(f">H{LANES}I", data)
        return cls(x, tuple(y))


def share_value(data: bytes, x: int) -> bytes:
    """The ``y`` bytes of an encoded share that must be ``Share(x, y)``
    (:meth:`Share.to_bytes`), checked without building a :class:`Share`: bytes of the
    wire length, the point ``x`` (``x >= 1``, the receiver's or sender's own) and every
    lane ``< PRIME``.

    Raises:
        ParameterError: (a ``ValueError``) not bytes of the wire length, another point,
            or a lane outside the field.
    """
    if type(data) is not bytes or len(data) != SHARE_WIRE_BYTES:
        raise ParameterError(f"a share encoding is {SHARE_WIRE_BYTES} bytes")
    if int.from_bytes(data[:2], "big") != x:
        raise ParameterError(f"share has the wrong evaluation point (expected {x})")
    y = data[2:]
    if max(struct.unpack(f">{LANES}I", y)) >= PRIME:
        raise ParameterError("share value outside the field")
    return y


def check_encodings(encodings: Sequence[bytes], x: int) -> None:
    """:func:`share_value`'s checks on many encodings at once: each one bytes of the
    wire length, at the point ``x``, every lane ``< PRIME``.

    Raises:
        ParameterError: (a ``ValueError``) the first kind of defect found (the
            encodings are all refused together).
    """
    if any(type(e) is not bytes for e in encodings) or (
            set(map(len, encodings)) - {SHARE_WIRE_BYTES}):
        raise ParameterError(f"a share encoding is {SHARE_WIRE_BYTES} bytes")
    if not encodings:
        return
    rows = np.frombuffer(b"".join(encodings), _WIRE)
    if (rows["x"] != x).any():
        raise ParameterError(f"share has the wrong evaluation point (expected {x})")
    if (rows["y"] >= PRIME).any():
        raise ParameterError("share value outside the field")


# ------------------------------------------------------------------ arithmetic mod p

def _fold(v: np.ndarray) -> np.ndarray:
    """``v mod p`` for uint64 ``v`` (any value below ``2^64``)."""
    v = (v & _P) + (v >> _S31)          # < 2^31 + 2^33
    v = (v & _P) + (v >> _S31)          # < 2^31 + 8
    v[v >= _P] -= _P
    return v


def _fold_once(v: np.ndarray) -> np.ndarray:
    """A value congruent to ``v`` mod p and below ``2^31 + 2^(b - 31)`` for ``v < 2^b``."""
    return (v & _P) + (v >> _S31)


#: ``x^i mod p`` for ``x = 1 .. rows`` and ``i < t``, by ``t`` (public values, a pure
#: function of ``(x, i)``): built once per process for all the points a session uses,
#: so a split gathers its powers instead of computing them; only tables of at most
#: ``_TABLE_ENTRIES`` entries are kept
_POWER_TABLES: dict[int, np.ndarray] = {}
_TABLE_ENTRIES = 1 << 22


def _power_table(rows: int, t: int) -> np.ndarray | None:
    """The cached powers of ``1 .. rows`` up to degree ``t - 1`` (row ``x - 1`` holds
    the powers of ``x``), or ``None`` when such a table would be too large."""
    table = _POWER_TABLES.get(t)
    if table is not None and table.shape[0] >= rows:
        return table
    rows = max(rows, 1024)
    if rows * t > _TABLE_ENTRIES:
        return None
    x = np.arange(1, rows + 1, dtype=np.uint64)
    table = np.empty((rows, t), np.uint64)
    table[:, 0] = 1
    for i in range(1, t):
        table[:, i] = _fold(table[:, i - 1] * x)
    table.setflags(write=False)
    if len(_POWER_TABLES) >= 8:
        _POWER_TABLES.clear()
    _POWER_TABLES[t] = table
    return table


def _powers(xs: np.ndarray, t: int) -> np.ndarray:
    """``V[i, j] = xs[j]^i mod p`` for ``i < t`` (uint64, shape ``(t, len(xs))``)."""
    table = _power_table(int(xs.max()), t)
    if table is not None:
        return table[xs.astype(np.intp) - 1].T
    b = max(1, isqrt(t - 1) + 1) if t > 1 else 1     # B * B >= t
    k = xs.size
    low = np.empty((b, k), np.uint64)                  # x^0 .. x^(B-1)
    low[0] = 1
    for i in range(1, b):
        low[i] = _fold(low[i - 1] * xs)                # < 2^31 * 2^16
    giant = _fold(low[b - 1] * xs)                     # x^B
    a = -(-t // b)
    high = np.empty((a, k), np.uint64)                 # x^0, x^B, x^2B, ...
    high[0] = 1
    for i in range(1, a):
        high[i] = _fold(high[i - 1] * giant)           # < 2^62
    table = _fold(high[:, None, :] * low[None, :, :])  # (a, B, k): x^(aB + b)
    return table.reshape(a * b, k)[:t]


def _matmul_mod(c: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``c @ v mod p`` for uint64 matrices with entries below ``p`` and an inner
    dimension below ``2^16``, exactly: float64 products of 16-bit halves."""
    m = c.shape[0]
    halves_c = np.concatenate([c & _HALF, c >> _S16]).astype(np.float64)
    halves_v = np.concatenate([v & _HALF, v >> _S16], axis=1).astype(np.float64)
    prod = (halves_c @ halves_v).astype(np.uint64)     # exact: < t * 2^32 < 2^48
    k = v.shape[1]
    ll, lh = prod[:m, :k], prod[:m, k:]
    hl, hh = prod[m:, :k], prod[m:, k:]
    # c v = ll + (lh + hl) 2^16 + hh 2^32, and 2^32 = 2 (mod p); every term < 2^48
    mid = _fold_once(lh + hl) << _S16                  # < (2^31 + 2^18) 2^16 < 2^48
    return _fold(ll + mid + (hh << np.uint64(1)))       # < 2^50


def _coefficients(rand: RandomSource, count: int) -> np.ndarray:
    """``count`` elements uniform on GF(p): 31-bit draws, ``p`` itself redrawn."""
    out = np.empty(count, np.uint64)
    todo = np.arange(count)
    while todo.size:
        raw = rand.token_bytes(4 * todo.size)
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != 4 * todo.size:
            raise ParameterError("randomness source returned the wrong number of bytes")
        vals = np.frombuffer(raw, ">u4").astype(np.uint64) & _P
        out[todo] = vals
        todo = todo[vals == _P]
    return out


def _lanes(secret: int) -> list[int]:
    return [(secret >> (LANE_BITS * i)) & _LANE_MASK for i in range(LANES)]


# ------------------------------------------------------------------ split

def _check_threshold(threshold: object, n: int | None = None) -> int:
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise ParameterError(f"threshold must be an int, got {type(threshold).__name__}")
    if threshold < 1:
        raise ParameterError(f"threshold must be >= 1, got {threshold}")
    if n is not None and threshold > n:
        raise ParameterError(f"threshold {threshold} exceeds the number of shares {n}")
    return threshold


def _check_points(xs: Sequence[int]) -> list[int]:
    points = list(xs)
    if not points or any(type(x) is not int for x in points) or not (
            1 <= min(points) and max(points) < MAX_X):
        for x in points:
            if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x < MAX_X:
                raise ParameterError(
                    f"evaluation points must be ints in [1, 2**16), got {x!r}")
    if len(set(points)) != len(points):
        raise ParameterError("evaluation points must be distinct")
    return points


def _split_many(secrets: Sequence[bytes], xs: Sequence[int], threshold: int,
                rand: RandomSource) -> tuple[list[int], np.ndarray]:
    """The checked points and ``Y`` of shape ``(len(secrets), LANES, len(xs))``."""
    lanes = []
    for secret in secrets:
        if not isinstance(secret, (bytes, bytearray, memoryview)):
            raise ParameterError(f"secret must be bytes, got {type(secret).__name__}")
        secret = bytes(secret)
        if len(secret) != SECRET_BYTES:
            raise ParameterError(f"secret must be {SECRET_BYTES} bytes, got {len(secret)}")
        lanes.append(_lanes(int.from_bytes(secret, "big")))
    points = _check_points(xs)
    t = _check_threshold(threshold, len(points))
    rows = len(secrets) * LANES
    coeffs = np.empty((rows, t), np.uint64)
    coeffs[:, 0] = np.array(lanes, np.uint64).reshape(rows)
    # the secrets' coefficients in order: secret by secret, lane by lane, degree 1..t-1
    coeffs[:, 1:] = _coefficients(rand, rows * (t - 1)).reshape(rows, t - 1)
    ys = _matmul_mod(coeffs, _powers(np.array(points, np.uint64), t))
    return points, ys.reshape(len(secrets), LANES, len(points))


def split(secret: bytes, xs: Sequence[int], threshold: int, rand: RandomSource) -> list[Share]:
    """Share a 32-byte secret so that any ``threshold`` of the points recover it.

    Args:
        secret: exactly 32 bytes.
        xs: distinct evaluation points in ``[1, 2**16)`` (typically participant id + 1).
        threshold: ``1 <= threshold <= len(xs)``.
        rand: randomness source with ``token_bytes(n)`` for the lanes' ``threshold - 1``
            coefficients each.

    Returns:
        One :class:`Share` per entry of ``xs``, in the same order.

    Raises:
        ParameterError: bad secret length, repeated or out-of-range points, bad threshold.
    """
    points, ys = _split_many([secret], xs, threshold, rand)
    cols = ys[0].T.tolist()
    return [Share(x, tuple(y)) for x, y in zip(points, cols)]


def split_encoded_many(secrets: Sequence[bytes], xs: Sequence[int], threshold: int,
                       rand: RandomSource) -> list[list[bytes]]:
    """Several secrets shared to the same points, each share in its wire encoding.

    The same result as :func:`split_encoded` called on each secret in turn with the same
    randomness source (the coefficients are drawn in that order); the powers of the
    points are computed once.

    Raises:
        ParameterError: as :func:`split`.
    """
    points, ys = _split_many(list(secrets), xs, threshold, rand)
    k = len(points)
    head = np.array(points, ">u2").view(np.uint8).reshape(k, 2)
    out = []
    for y in ys:
        rows = np.empty((k, SHARE_WIRE_BYTES), np.uint8)
        rows[:, :2] = head
        rows[:, 2:] = np.ascontiguousarray(y.T).astype(_Y_LANES).view(np.uint8).reshape(
            k, SHARE_BYTES)
        blob = rows.tobytes()
        out.append([blob[i:i + SHARE_WIRE_BYTES]
                    for i in range(0, k * SHARE_WIRE_BYTES, SHARE_WIRE_BYTES)])
    return out


def split_encoded(secret: bytes, xs: Sequence[int], threshold: int,
                  rand: RandomSource) -> list[bytes]:
    """:func:`split`, each share returned in its wire encoding (``Share.to_bytes``).

    The same polynomials and points for the same randomness; what a client sends,
    without building a checked :class:`Share` per point (the points were checked once
    for the whole call, and every lane is reduced mod ``p`` by construction).

    Raises:
        ParameterError: as :func:`split`.
    """
    return split_encoded_many([secret], xs, threshold, rand)[0]


# ------------------------------------------------------------------ combine

#: most entries of one block of the interpolation (its working arrays are ``rows x
#: t``): 64 KiB per array, whatever the number of secrets. The block once held a
#: ``rows x t x t`` table of differences, and at 2^19 entries a server's
#: reconstruction of 1000 owners raised the process's peak by 11 MB (t = 17) to 19 MB
#: (t = 51); blocks small enough for memory then had so few rows that 21,980 owners at
#: t = 66 took 2.3 s (now 0.55 s; docs/scaling.md)
_BLOCK_ENTRIES = 1 << 13


def _block_rows(t: int) -> int:
    """Secrets interpolated together at threshold ``t`` (a block's working arrays,
    ``rows x t``, stay within :data:`_BLOCK_ENTRIES` entries)."""
    return max(1, _BLOCK_ENTRIES // t)


def _product(rows: np.ndarray) -> np.ndarray:
    """The product mod p of each row along the last axis (entries below ``2^32``): a
    tree, each level's products only partly reduced (below ``2^31 + 8``, so the next
    level's stay below ``2^64``), the result fully."""
    while rows.shape[-1] > 1:
        if rows.shape[-1] % 2:
            pad = np.ones(rows.shape[:-1] + (1,), np.uint64)
            rows = np.concatenate([rows, pad], axis=-1)
        rows = _fold_once(_fold_once(rows[..., 0::2] * rows[..., 1::2]))
    return _fold(rows[..., 0])


def _inverse(v: np.ndarray) -> np.ndarray:
    """``v^(p-2) mod p`` elementwise (``v`` below p and not 0): Fermat's inverse."""
    out = np.ones_like(v)
    base = v.copy()
    e = PRIME - 2
    while e:
        if e & 1:
            out = _fold(out * base)
        e >>= 1
        if e:
            base = _fold(base * base)
    return out


#: fewer entries than this are inverted with Python integers (numpy's per-call
#: overhead would dominate a few rows)
_SMALL_INVERSE = 512


def _row_inverses(den: np.ndarray) -> np.ndarray:
    """``den^-1 mod p`` elementwise (uint64 ``(rows, t)``, entries below p, not 0).

    A few rows: Python's modular inverse per entry. Many: every inverse of a row from
    one inversion (Montgomery's batch trick), the prefix products and the way back
    one column at a time over all rows."""
    rows, t = den.shape
    if rows * t <= _SMALL_INVERSE:
        return np.array([[pow(d, -1, PRIME) for d in row] for row in den.tolist()],
                        np.uint64).reshape(rows, t)
    prefix = np.empty((rows, t + 1), np.uint64)
    prefix[:, 0] = 1
    for i in range(t):
        prefix[:, i + 1] = _fold(prefix[:, i] * den[:, i])
    inv = _inverse(prefix[:, t])
    out = np.empty((rows, t), np.uint64)
    for i in range(t - 1, -1, -1):
        out[:, i] = _fold(inv * prefix[:, i])
        inv = _fold(inv * den[:, i])
    return out


def _lagrange_at_zero(x: np.ndarray) -> np.ndarray:
    """Row ``r``: ``L_i = prod_{j != i} x_j / (x_j - x_i) mod p`` over the distinct
    points ``x[r]`` (int64 ``(rows, t)``, entries below ``2^16``; uint64 ``(rows, t)``
    out).

    The denominators ``den_i = x_i prod_{j != i} (x_j - x_i)`` are built one ``j`` at a
    time over all rows, so that no working array is larger than ``(rows, t)`` (a
    ``(rows, t, t)`` table of differences held ``t`` times more)."""
    t = x.shape[1]
    xu = x.astype(np.uint64)
    neg = _P - xu                      # -x_i + p, so x_j - x_i + p: congruent, < 2^32
    den = xu.copy()                    # the x_i factor
    d = np.empty_like(xu)
    low = np.empty_like(xu)
    for j in range(t):
        np.add(neg, xu[:, j, None], out=d)
        d[:, j] = 1                    # no (x_j - x_j) factor in den_j
        np.multiply(den, d, out=den)   # den < 2^31 + 8, d < 2^32: below 2^64
        for _ in range(2):             # _fold_once twice, in place: below 2^31 + 8
            np.bitwise_and(den, _P, out=low)
            np.right_shift(den, _S31, out=den)
            den += low
    # L_i = (prod_j x_j) / den_i
    total = _product(xu)
    return _fold(_row_inverses(_fold(den)) * total[:, None])


def _secrets(lanes: np.ndarray) -> list[bytes]:
    """The 32-byte secrets of reconstructed lanes ``(m, LANES)``, each below p.

    Raises:
        ParameterError: a lane does not fit its width (inconsistent shares or a wrong
            threshold).
    """
    widths = np.full(LANES, LANE_BITS, np.uint64)
    widths[-1] = _TOP_BITS
    if (lanes >> widths).any():
        raise ParameterError("reconstructed lanes do not fit 32 bytes: shares are "
                             "inconsistent or the threshold is wrong")
    out = []
    for row in lanes.tolist():
        value = 0
        for i, lane in enumerate(row):
            value |= lane << (LANE_BITS * i)
        out.append(value.to_bytes(SECRET_BYTES, "big"))
    return out


def combine(shares: Sequence[Share], threshold: int) -> bytes:
    """Recover the secret from the first ``threshold`` shares.

    More than ``threshold`` shares may be passed; only the first ``threshold`` are used
    (they are all checked for type and for distinct ``x``).

    Args:
        shares: at least ``threshold`` :class:`Share` objects with distinct ``x``.
        threshold: the threshold used at :func:`split` time.

    Returns:
        The 32-byte secret.

    Raises:
        ParameterError: fewer than ``threshold`` shares, a repeated ``x``, a non-Share
            entry, or lanes that do not fit their widths (inconsistent shares or a wrong
            threshold).
    """
    shares = list(shares)
    for s in shares:
        if not isinstance(s, Share):
            raise ParameterError(f"shares must be Share objects, got {type(s).__name__}")
    if len({s.x for s in shares}) != len(shares):
        raise ParameterError("shares have repeated x coordinates")
    _check_threshold(threshold)
    if len(shares) < threshold:
        raise ParameterError(f"need {threshold} shares, got {len(shares)}")
    used = shares[:threshold]
    return _interpolate(np.array([[s.x for s in used]], np.int64),
                        np.array([[s.y for s in used]], np.uint64))[0]


def combine_encoded(encodings: bytes, threshold: int) -> bytes:
    """:func:`combine` on ``threshold`` share encodings (``Share.to_bytes``) laid end to
    end, decoded in one pass.

    Raises:
        ParameterError: not ``threshold`` whole encodings, a point outside ``[1, 2^16)``,
            a repeated point, a lane outside the field, or lanes that do not fit their
            widths.
    """
    return combine_encoded_many([encodings], threshold)[0]


def combine_encoded_many(encodings: Sequence[bytes], threshold: int) -> list[bytes]:
    """:func:`combine_encoded` for many secrets at once (each item the ``threshold``
    encodings of one secret, laid end to end): one vectorised interpolation over all
    of them, each with its own points. A server rebuilds every survivor's self-mask
    seed this way.

    Raises:
        ParameterError: as :func:`combine_encoded`, for any item (nothing is returned
            then).
    """
    _check_threshold(threshold)
    size = threshold * SHARE_WIRE_BYTES
    items = list(encodings)
    for item in items:
        if type(item) is not bytes or len(item) != size:
            raise ParameterError(f"need {threshold} share encodings of "
                                 f"{SHARE_WIRE_BYTES} bytes")
    out: list[bytes] = []
    # decoded a block of secrets at a time: the working arrays stay a few MB
    chunk = _block_rows(threshold)
    for lo in range(0, len(items), chunk):
        part = items[lo:lo + chunk]
        rows = np.frombuffer(b"".join(part), _WIRE).reshape(len(part), threshold)
        xs = rows["x"].astype(np.int64)
        if (xs < 1).any():
            raise ParameterError("share points must be distinct and at least 1")
        ordered = np.sort(xs, axis=1)
        if (ordered[:, 1:] == ordered[:, :-1]).any():
            raise ParameterError("share points must be distinct and at least 1")
        del ordered
        ys = rows["y"]
        if (ys >= PRIME).any():
            raise ParameterError("share value outside the field")
        out += _interpolate(xs, ys)
    return out


def _interpolate(xs: np.ndarray, ys: np.ndarray) -> list[bytes]:
    """The secrets from rows of distinct points ``xs`` (int64 ``(rows, t)``) and their
    lanes ``ys`` (unsigned ``(rows, t, LANES)``, each below p; a view of the wire's
    big-endian words will do): one block, at most :func:`_block_rows` ``(t)`` rows
    (:func:`combine_encoded_many` hands it blocks). One lane at a time, so that no
    working array is larger than ``(rows, t)``."""
    coeffs = _lagrange_at_zero(xs)
    lanes = np.empty((xs.shape[0], LANES), np.uint64)
    for lane in range(LANES):
        # each term below p, at most 2^16 of them: the sum stays below 2^47
        lanes[:, lane] = _fold(ys[:, :, lane] * coeffs).sum(axis=1, dtype=np.uint64)
    return _secrets(_fold(lanes))
