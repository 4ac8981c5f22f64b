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

:func:`matmul` computes ``a @ b mod p`` exactly with float64 BLAS products. Each entry of
``a`` is read as its two 32-bit halves (a ``uint32`` view, no shifting), ``a = lo + 2^32 hi``,
so ``a b = lo b + hi (2^32 b mod p)``: ``a`` becomes a ``(rows, 2d)`` matrix of values below
``2^32`` and ``b`` a ``(2d, k)`` matrix ``c`` that interleaves ``b`` with ``2^32 b mod p``.
Each entry of ``c`` is written in six balanced base-``2^11`` digits in ``[-2^10, 2^10)``
(66 bits cover 61), six digit columns per column of ``b``, so one float64 matmul of a block
of ``a``'s halves by the digit matrix gives every partial sum at once. Every product has
magnitude below ``2^42`` and a block sums at most ``2^11`` of them, so every partial sum
BLAS forms, in any order and with or without FMA, is an integer below ``2^53`` in
magnitude and exact in float64. The block sums are accumulated as ``int64``, reduced mod
``p``, shifted by their digit weight ``2^(11 l)`` (a 61-bit rotation, since ``2^61 = 1``
mod ``p``) and added. Each BLAS call covers two columns of ``b`` and a batch of about 20
rows, small enough that OpenBLAS does not start its own threads (they slowed the product
down about tenfold whenever other processes kept the cores busy); rows are shared among
Python threads instead. That costs a few nanoseconds per entry of ``a`` against tens to
hundreds for :func:`mul` and a sum.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

__all__ = ["P", "add", "sub", "neg", "mul", "scale", "matmul", "dot", "check", "uniform",
           "from_ints"]

#: the field's modulus, 2^61 - 1
P = (1 << 61) - 1
_P = np.uint64(P)
_M32 = np.uint64(0xFFFFFFFF)
_M29 = np.uint64((1 << 29) - 1)
_S29, _S32, _S61, _S3 = np.uint64(29), np.uint64(32), np.uint64(61), np.uint64(3)

# matmul: balanced base-2^11 digits on b's side; |a half * digit| <= (2^32 - 1) * 2^10, so
# 2^11 of them sum to less than 2^53 in magnitude (exact in float64)
_DIGIT_BITS = 11
_DIGITS = 6                              # 6 * 11 = 66 bits: carries included, 61 bits fit
_BLOCK = 1 << (53 - 32 - (_DIGIT_BITS - 1))   # 2048 half-columns = 1024 columns of a
_FLUSH = 512                             # 512 block sums add < 2^62 to a sum < p: no overflow
_GROUP = 2                               # columns of b (12 digit columns) per BLAS call
# OpenBLAS runs a dgemm with m n k < 2 * 4 * 65536 on the calling thread (interface/gemm.c,
# GEMM_MULTITHREAD_THRESHOLD = 4); bigger calls start its threads, which wait for each other
# and, on a machine whose cores are busy, made matmul about 10x slower. Calls stay below it.
_CALL = 1 << 19
_BUDGET = 4 << 20                        # bytes of float64 scratch per worker thread
_MIN_THREADED = 1 << 20                  # entries of a below which one thread does it all
_LO = 0 if sys.byteorder == "little" else 1   # which uint32 half of a uint64 is the low one


def _fold(t: np.ndarray) -> np.ndarray:
    """Reduce ``uint64`` values to ``[0, p)`` (exact for every ``uint64``: after the first
    fold a value is at most ``p + 7``)."""
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


def _rot(x: np.ndarray, s: int) -> np.ndarray:
    """``2^s * x mod p`` for ``x < 2^61``: a rotation of the 61-bit word by ``s`` bits."""
    s %= 61
    if s == 0:
        return x
    return ((x << np.uint64(s)) & _P) | (x >> np.uint64(61 - s))


def _digit_groups(b: np.ndarray) -> list[np.ndarray]:
    """The float64 right-hand operands of :func:`matmul` for ``b`` ``(d, k)``: for each group
    of :data:`_GROUP` columns of ``b``, a contiguous ``(2d, 6 * group)`` matrix.

    Row ``2j + h`` (``h`` the position of the half in memory) holds the balanced digits of
    ``b[j]`` for the low half and of ``2^32 b[j] mod p`` for the high half; within a group,
    column ``6 c + l`` holds digit ``l`` (weight ``2^(11 l)``) of the group's column ``c``.
    """
    d, k = b.shape
    b = _fold(b)                                  # any uint64 -> [0, p)
    c = np.empty((d, 2, k), dtype=np.uint64)
    c[:, _LO] = b
    c[:, 1 - _LO] = _rot(b, 32)
    x = c.reshape(2 * d, k).view(np.int64)        # values below 2^61
    digits = np.empty((2 * d, k, _DIGITS), dtype=np.float64)
    mask, half, base = (1 << _DIGIT_BITS) - 1, 1 << (_DIGIT_BITS - 1), 1 << _DIGIT_BITS
    for l in range(_DIGITS):
        r = x & mask
        r[r >= half] -= base
        digits[:, :, l] = r
        x = (x - r) >> _DIGIT_BITS
    return [np.ascontiguousarray(digits[:, g:g + _GROUP].reshape(2 * d, -1))
            for g in range(0, k, _GROUP)]


def _recombine(acc: np.ndarray, k: int) -> np.ndarray:
    """``sum_l 2^(11 l) acc[:, 6 c + l] mod p`` for the ``int64`` digit sums ``acc`` ``(n, 6k)``."""
    r = (acc % P).view(np.uint64).reshape(acc.shape[0], k, _DIGITS)
    out = r[:, :, 0]
    for l in range(1, _DIGITS):
        out = add(out, _rot(r[:, :, l], _DIGIT_BITS * l))
    return out


def _matmul_worker(halves: np.ndarray, groups: list[np.ndarray], out: np.ndarray,
                   starts: Iterator[int], job: int, sub: int, block: int) -> None:
    """Take row jobs from ``starts`` until it is exhausted; write each job's rows of ``out``.

    A job of ``job`` rows is cut into batches of ``sub`` rows: one 3-D ``np.matmul`` makes
    one small dgemm per batch (in C, without the GIL), and rows past the last whole batch
    take one more 2-D product.
    """
    rows, width = halves.shape
    k = out.shape[1]
    cols = [g.shape[1] for g in groups]
    scratch = np.empty((job // sub, sub, block), dtype=np.float64)
    sums = np.empty((job // sub, sub, max(cols)), dtype=np.float64)
    ints = np.empty((job, max(cols)), dtype=np.int64)
    tail = np.empty((sub, block), dtype=np.float64)
    tail_sums = np.empty((sub, max(cols)), dtype=np.float64)
    for r0 in starts:
        n = min(job, rows - r0)
        m = n // sub * sub                        # rows in whole batches
        acc = np.zeros((n, _DIGITS * k), dtype=np.int64)
        for i, s0 in enumerate(range(0, width, block)):
            s1 = min(width, s0 + block)
            src = halves[r0:r0 + n, s0:s1]
            x = scratch[:m // sub, :, :s1 - s0]
            t = tail[:n - m, :s1 - s0]
            if m:
                np.copyto(x, src[:m].reshape(m // sub, sub, s1 - s0))
            if n > m:
                np.copyto(t, src[m:])
            c0 = 0
            for g, c in zip(groups, cols):
                if m:
                    np.matmul(x, g[s0:s1], out=sums[:m // sub, :, :c])
                    np.copyto(ints[:m, :c], sums[:m // sub, :, :c].reshape(m, c),
                              casting="unsafe")          # integers below 2^53: exact
                if n > m:
                    np.matmul(t, g[s0:s1], out=tail_sums[:n - m, :c])
                    np.copyto(ints[m:n, :c], tail_sums[:n - m, :c], casting="unsafe")
                acc[:, c0:c0 + c] += ints[:n, :c]
                c0 += c
            if (i + 1) % _FLUSH == 0:
                acc %= P
        out[r0:r0 + n] = _recombine(acc, k)


class Right:
    """A right-hand operand of :func:`matmul` prepared once (its float digits), for a
    caller that multiplies many matrices by the same ``b``: ``matmul(a, Right(b))``.
    ``b`` is copied, so later changes to the caller's array do not reach it."""

    def __init__(self, b: np.ndarray) -> None:
        if not isinstance(b, np.ndarray) or b.dtype != np.uint64 or b.ndim != 2:
            raise ValueError(f"matmul: b must be a 2-D uint64 array, got "
                             f"{getattr(b, 'dtype', type(b).__name__)} {getattr(b, 'shape', '')}")
        self.b = b.copy()
        self.shape = b.shape
        self.groups = _digit_groups(self.b) if b.size else []


def matmul(a: np.ndarray, b: "np.ndarray | Right", *, threads: int | None = None
           ) -> np.ndarray:
    """``(a @ b) mod p``, exact (see the module docstring for the method).

    Built for many rows, moderate ``d`` and few columns ``k`` (a random linear check of
    many vectors). ``a`` is read once through a ``uint32`` view and never copied as a
    whole (only when its last axis is not contiguous). Scratch: about 4 MB of float64 per
    thread, plus ``96 d k`` bytes for ``b``'s digits (about twice that while they are made).

    Every BLAS call is kept small enough (``m n k < 2^19``) that OpenBLAS makes it on the
    calling thread; rows are instead shared among ``threads`` Python threads, which take
    jobs of about 250 rows as they finish (numpy releases the GIL for the conversions and
    products), so a busy machine slows the product down gracefully.

    Args:
        a: ``(rows, d)`` ``uint64`` array with entries in ``[0, p)`` (any ``uint64`` value
            is taken as the integer it is, so the result is still exact mod ``p``).
        b: ``(d, k)`` ``uint64`` array with entries in ``[0, p)`` (likewise), or a
            :class:`Right` made from one.
        threads: worker threads; ``None`` means one per CPU this process may run on (one
            for fewer than ``2^20`` entries of ``a``). Pass 1 when the caller already keeps
            every core busy.

    Returns:
        The ``(rows, k)`` ``uint64`` array ``a @ b mod p``, entries in ``[0, p)``.

    Raises:
        ValueError: ``a`` or ``b`` is not a 2-D ``uint64`` array, their inner sizes differ,
            or ``threads`` is below 1.
    """
    prepared = b if isinstance(b, Right) else None
    if prepared is not None:
        b = prepared.b
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray) or x.dtype != np.uint64 or x.ndim != 2:
            raise ValueError(f"matmul: {name} must be a 2-D uint64 array, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} "
                             f"{getattr(x, 'shape', '')}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: inner sizes differ, a {a.shape} and b {b.shape}")
    if threads is not None and threads < 1:
        raise ValueError(f"matmul: threads must be at least 1, got {threads}")
    rows, d = a.shape
    k = b.shape[1]
    if rows == 0 or d == 0 or k == 0:
        return np.zeros((rows, k), dtype=np.uint64)
    if a.strides[1] != a.itemsize:
        a = np.ascontiguousarray(a)
    halves = a.view(np.uint32)                    # (rows, 2d): both 32-bit halves of each entry
    groups = prepared.groups if prepared is not None else _digit_groups(b)
    block = min(_BLOCK, 2 * d)
    # rows per job: the float scratch plus the few (rows, 6k) temporaries within the budget;
    # rows per batch: one dgemm of sub x block x (6 * group) stays below _CALL
    job = max(1, min(rows, _BUDGET // (8 * (block + 4 * _DIGITS * k))))
    sub = max(1, min(job, (_CALL - 1) // (block * groups[0].shape[1])))
    job = max(sub, job // sub * sub)
    starts = range(0, rows, job)
    if threads is None:
        threads = 1
        if rows * d >= _MIN_THREADED:
            threads = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                       else os.cpu_count() or 1)
    threads = min(threads, len(starts))
    out = np.empty((rows, k), dtype=np.uint64)
    if threads == 1:
        _matmul_worker(halves, groups, out, iter(starts), job, sub, block)
        return out
    lock = threading.Lock()
    shared = iter(starts)

    def take() -> Iterator[int]:
        while True:
            with lock:
                r0 = next(shared, None)
            if r0 is None:
                return
            yield r0

    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(_matmul_worker, halves, groups, out, take(), job, sub, block)
                  for _ in range(threads)]:
            f.result()
    return out


def dot(a: np.ndarray, b: np.ndarray) -> int:
    """``sum(a * b) mod p`` for two ``uint64`` vectors of the same length (via :func:`matmul`).

    Raises:
        ValueError: ``a`` or ``b`` is not a 1-D ``uint64`` array, or their lengths differ.
    """
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray) or x.dtype != np.uint64 or x.ndim != 1:
            raise ValueError(f"dot: {name} must be a 1-D uint64 array")
    if a.shape != b.shape:
        raise ValueError(f"dot: lengths differ, {a.shape[0]} and {b.shape[0]}")
    return int(matmul(a[None, :], b[:, None])[0, 0])


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
