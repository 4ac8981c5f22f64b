"""Shamir secret sharing of 32-byte secrets over the prime field GF(p), p = 2^256 + 297.

Theory of operation
-------------------
Shamir (CACM 1979): to share ``s`` with threshold ``t``, pick a polynomial
``f(z) = s + a_1 z + ... + a_{t-1} z^{t-1}`` with ``a_i`` uniform in ``GF(p)`` and hand
party ``j`` the point ``(x_j, f(x_j))``. Any ``t`` points determine ``f`` and so
``s = f(0)`` by Lagrange interpolation at zero::

    s = sum_i y_i * L_i,   L_i = prod_{j != i} x_j / (x_j - x_i)   (mod p)

while any ``t - 1`` points are independent of ``s`` (for every candidate ``s`` exactly
one polynomial of degree ``< t`` fits them).

The secret is the raw 32-byte string read as a big-endian integer ``< 2^256 < p``, so no
hashing or encoding loss; :data:`PRIME` is the smallest prime above ``2^256`` (checked
with Miller-Rabin in the tests). A reconstruction that lands at or above ``2^256`` cannot
come from a valid sharing and is reported as an error; a wrong share otherwise yields a
wrong secret undetected (Shamir alone is not verifiable: the protocol authenticates the
shares with the AEAD instead).

Speed: evaluation points are small (``1 <= x < 2^16``), so Horner's rule multiplies a
field element by a 16-bit integer; it runs on all points at once over a numpy object
array and reduces mod ``p`` only every :data:`_HORNER_REDUCE_EVERY` steps.
Interpolation writes ``L_i = (prod_j x_j) / (x_i prod_{j != i} (x_j - x_i))``; the
denominators are built from exact int64 products of three differences, and all of them
are inverted with one modular inversion (Montgomery's batch-inversion trick).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError
from .randomness import RandomSource

__all__ = ["PRIME", "SECRET_BYTES", "SHARE_BYTES", "SHARE_WIRE_BYTES", "MAX_X", "Share",
           "split", "split_encoded", "share_value", "combine"]

PRIME = (1 << 256) + 297
SECRET_BYTES = 32
SHARE_BYTES = 33  # bytes of the y coordinate
SHARE_WIRE_BYTES = 2 + SHARE_BYTES
MAX_X = 1 << 16  # x in [1, MAX_X)
_HORNER_REDUCE_EVERY = 16  # 16 steps of a 16-bit multiplier grow a value by <= 256 bits


@dataclass(frozen=True, slots=True)
class Share:
    """One point ``(x, y)`` of a sharing polynomial.

    Attributes:
        x: evaluation point, ``1 <= x < 2**16``.
        y: polynomial value, ``0 <= y < PRIME``.

    Raises:
        ParameterError: (a ``ValueError``) on construction with an out-of-range field.
    """

    x: int
    y: int

    def __post_init__(self) -> None:
        for name, value, hi in (("x", self.x, MAX_X), ("y", self.y, PRIME)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ParameterError(f"share {name} must be an int, got {type(value).__name__}")
        if not 1 <= self.x < MAX_X:
            raise ParameterError(f"share x must satisfy 1 <= x < 2**16, got {self.x}")
        if not 0 <= self.y < PRIME:
            raise ParameterError("share y must satisfy 0 <= y < PRIME")

    def to_bytes(self) -> bytes:
        """Fixed 35-byte encoding: ``x`` as 2 bytes then ``y`` as 33 bytes, big-endian."""
        return struct.pack(">H", self.x) + self.y.to_bytes(SHARE_BYTES, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> "Share":
        """Decode :meth:`to_bytes` output.

        Raises:
            ParameterError: (a ``ValueError``) wrong type or length, ``x = 0`` or
                ``y >= PRIME``.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ParameterError(f"share encoding must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) != SHARE_WIRE_BYTES:
            raise ParameterError(f"share encoding must be {SHARE_WIRE_BYTES} bytes, "
                                 f"got {len(data)}")
        return cls(struct.unpack(">H", data[:2])[0], int.from_bytes(data[2:], "big"))


def share_value(data: bytes, x: int) -> int:
    """``y`` of an encoded share that must be ``Share(x, y)`` (:meth:`Share.to_bytes`),
    checked without building a :class:`Share`: bytes of the wire length, the point ``x``
    (``x >= 1``, the receiver's or sender's own) and ``y < PRIME``.

    Raises:
        ParameterError: (a ``ValueError``) not bytes of the wire length, another point,
            or ``y`` outside the field.
    """
    if type(data) is not bytes or len(data) != SHARE_WIRE_BYTES:
        raise ParameterError(f"a share encoding is {SHARE_WIRE_BYTES} bytes")
    if int.from_bytes(data[:2], "big") != x:
        raise ParameterError(f"share has the wrong evaluation point (expected {x})")
    y = int.from_bytes(data[2:], "big")
    if y >= PRIME:
        raise ParameterError("share value outside the field")
    return y


def _field_elements(rand: RandomSource, count: int) -> list[int]:
    """``count`` elements uniform on GF(p) by rejection sampling 257-bit candidates.

    Each 33-byte draw is masked to 257 bits (uniform on ``[0, 2^257)``) and kept if it is
    below ``p``; acceptance probability ``p / 2^257`` is just over 1/2.
    """
    out: list[int] = []
    top = (1 << 257) - 1
    while len(out) < count:
        need = count - len(out)
        batch = 2 * need + 8
        raw = rand.token_bytes(batch * SHARE_BYTES)
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != batch * SHARE_BYTES:
            raise ParameterError("randomness source returned the wrong number of bytes")
        for i in range(batch):
            c = int.from_bytes(raw[i * SHARE_BYTES:(i + 1) * SHARE_BYTES], "big") & top
            if c < PRIME:
                out.append(c)
                if len(out) == count:
                    break
    return out


def _check_threshold(threshold: object, n: int | None = None) -> int:
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise ParameterError(f"threshold must be an int, got {type(threshold).__name__}")
    if threshold < 1:
        raise ParameterError(f"threshold must be >= 1, got {threshold}")
    if n is not None and threshold > n:
        raise ParameterError(f"threshold {threshold} exceeds the number of shares {n}")
    return threshold


def split(secret: bytes, xs: Sequence[int], threshold: int, rand: RandomSource) -> list[Share]:
    """Share a 32-byte secret so that any ``threshold`` of the points recover it.

    Args:
        secret: exactly 32 bytes.
        xs: distinct evaluation points in ``[1, 2**16)`` (typically participant id + 1).
        threshold: ``1 <= threshold <= len(xs)``.
        rand: randomness source with ``token_bytes(n)`` for the ``threshold - 1``
            coefficients.

    Returns:
        One :class:`Share` per entry of ``xs``, in the same order.

    Raises:
        ParameterError: bad secret length, repeated or out-of-range points, bad threshold.
    """
    points, ys = _split(secret, xs, threshold, rand)
    return [Share(x, y) for x, y in zip(points, ys)]


def split_encoded(secret: bytes, xs: Sequence[int], threshold: int,
                  rand: RandomSource) -> list[bytes]:
    """:func:`split`, each share returned in its wire encoding (``Share.to_bytes``).

    The same polynomial and points for the same randomness; what a client sends, without
    building a checked :class:`Share` per point (the points were checked once for the
    whole call, and every ``y`` is reduced mod ``p`` by construction).

    Raises:
        ParameterError: as :func:`split`.
    """
    points, ys = _split(secret, xs, threshold, rand)
    return [x.to_bytes(2, "big") + y.to_bytes(SHARE_BYTES, "big") for x, y in zip(points, ys)]


def _split(secret: bytes, xs: Sequence[int], threshold: int,
           rand: RandomSource) -> tuple[list[int], list[int]]:
    """The checked points and the polynomial's values at them."""
    if not isinstance(secret, (bytes, bytearray, memoryview)):
        raise ParameterError(f"secret must be bytes, got {type(secret).__name__}")
    secret = bytes(secret)
    if len(secret) != SECRET_BYTES:
        raise ParameterError(f"secret must be {SECRET_BYTES} bytes, got {len(secret)}")
    points = list(xs)
    for x in points:
        if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x < MAX_X:
            raise ParameterError(f"evaluation points must be ints in [1, 2**16), got {x!r}")
    if len(set(points)) != len(points):
        raise ParameterError("evaluation points must be distinct")
    _check_threshold(threshold, len(points))
    coeffs = [int.from_bytes(secret, "big")] + _field_elements(rand, threshold - 1)
    return points, _evaluate(coeffs, points)


def _evaluate(coeffs: list[int], points: list[int]) -> list[int]:
    """``f(x) mod p`` for every point: Horner's rule run on all points at once.

    The accumulator is a numpy object array (one Python int per point), so each Horner
    step is one C-level loop; the reduction mod ``p`` is deferred (the multiplier is
    below ``2^16``).
    """
    p = PRIME
    x = np.array(points, dtype=object)
    acc = np.zeros(len(points), dtype=object)
    for i, c in enumerate(reversed(coeffs)):
        acc = acc * x + c
        if i % _HORNER_REDUCE_EVERY == _HORNER_REDUCE_EVERY - 1:
            acc %= p
    return [int(v) % p for v in acc]


def _denominators(xs: list[int]) -> list[int]:
    """``x_i * prod_{j != i} (x_j - x_i) mod p`` for every ``i``.

    The differences are 17-bit signed integers, so three of them multiply exactly in
    int64; the big-integer products then run over numpy object arrays, a block of rows
    at a time to bound memory.
    """
    p = PRIME
    t = len(xs)
    x = np.array(xs, dtype=np.int64)
    out: list[int] = []
    rows_per_block = max(1, (1 << 21) // max(t, 1))
    for start in range(0, t, rows_per_block):
        rows = np.arange(start, min(t, start + rows_per_block))
        diff = x[None, :] - x[rows, None]          # diff[r, j] = x_j - x_i
        diff[np.arange(rows.size), rows] = 1       # skip j = i
        pad = (-t) % 3
        if pad:
            diff = np.concatenate([diff, np.ones((rows.size, pad), np.int64)], axis=1)
        triples = diff.reshape(rows.size, -1, 3).prod(axis=2)  # |.| < 2^51: exact
        acc = x[rows].astype(object)
        cols = triples.astype(object)
        for c in range(cols.shape[1]):
            acc = acc * cols[:, c]
            if c % 4 == 3:
                acc %= p
        out.extend(int(v) % p for v in acc)
    return out


def _batch_inverse(values: list[int]) -> list[int]:
    """Inverses mod ``PRIME`` of non-zero ``values`` with one modular inversion."""
    p = PRIME
    prefix = [1] * (len(values) + 1)
    for i, v in enumerate(values):
        prefix[i + 1] = prefix[i] * v % p
    inv = pow(prefix[-1], -1, p)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv * prefix[i] % p
        inv = inv * values[i] % p
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
            entry, or a result ``>= 2^256`` (inconsistent shares or wrong threshold).
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
    xs = [s.x for s in used]
    p = PRIME
    # L_i = prod_{j != i} x_j / (x_j - x_i) = total / (x_i * prod_{j != i} (x_j - x_i))
    total = 1
    for x in xs:
        total = total * x % p
    dens = _denominators(xs)
    inv = _batch_inverse(dens)
    acc = 0
    for s, di in zip(used, inv):
        acc += s.y * di
    value = acc % p * total % p
    if value >> (8 * SECRET_BYTES):
        raise ParameterError("reconstructed value does not fit 32 bytes: shares are "
                             "inconsistent or the threshold is wrong")
    return value.to_bytes(SECRET_BYTES, "big")
