"""Seeded hash families for the hash-based frequency oracles (OLH, AoN, CMS/SFP).

Theory of operation
-------------------
Every hash function is identified by a *key* ``(a_lo, a_hi, b)`` of three uniform
64-bit words; the key travels inside the report that used it, so client and server
share no randomness. An item is a 64-bit id ``x = x_hi * 2^32 + x_lo``.

1. **Strongly universal 32-bit hash** (Dietzfelbinger's multiply-add-shift for vectors,
   see Dietzfelbinger, "Universal hashing and k-wise independent random variables via
   integer arithmetic without primes", STACS 1996; Thorup, "High speed hashing for
   integers and strings", 2015, section 3)::

       z(x) = ((a_lo * x_lo + a_hi * x_hi + b) mod 2^64) div 2^32

   With ``a_lo, a_hi, b`` uniform in ``[2^64]`` and 32-bit components
   (``w = 32``, ``l = 32``, ``w_bar = 64 >= w + l - 1``) the family is *strongly
   universal* (2-independent): for every pair of distinct ids ``x != y`` the pair
   ``(z(x), z(y))`` is exactly uniform on ``[2^32]^2``; for one id ``z(x)`` is exactly
   uniform. ``numpy.uint64`` arithmetic wraps modulo 2^64, which is exactly the
   arithmetic the construction needs. (It is not 3-wise independent.)

2. **Range reduction** to ``[g]`` for any ``2 <= g <= 2^31``::

       h(x) = (z(x) * g) div 2^32

   Bucket ``y`` receives exactly ``c_y = ceil((y+1) 2^32 / g) - ceil(y 2^32 / g)``
   of the 2^32 values of ``z`` (``c_y`` is ``floor(2^32/g)`` or ``ceil(2^32/g)``;
   all equal when ``g`` is a power of two). Therefore, exactly:

       P[h(x) = y]               = c_y / 2^32
       P[h(x) = y, h(x') = y']   = c_y c_y' / 2^64       (x != x')

   so the family is pairwise independent with marginals that differ from ``1/g`` by at
   most ``g / 2^32`` relative. The oracles use these exact constants
   (:func:`bucket_sizes`) in their estimators, so no bias is left from the rounding.

3. **Fast membership test.** ``h(x) = y`` iff ``z(x)`` lies in
   ``[L_y, L_y + c_y)`` with ``L_y = ceil(y 2^32 / g)``, iff
   ``(u(x) - L_y 2^32) mod 2^64 < c_y 2^32`` where ``u`` is the 64-bit value before the
   shift. :func:`count_matches` uses this to count, for many candidates, how many
   reports satisfy ``h_i(candidate) = y_i`` with one multiply, one add and one compare
   per (report, candidate) pair, in memory-bounded chunks.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "KEY_WORDS", "HashInputError", "draw_keys", "keys_from_seed", "split_ids", "hash32",
    "hash_to_range", "hash_outer", "bucket_start", "bucket_starts", "bucket_sizes",
    "bucket_size", "collision_probability",
    "count_matches", "DEFAULT_CHUNK_ELEMENTS",
]

KEY_WORDS = 3  #: a key is (a_lo, a_hi, b), three uint64 words
_TWO32 = 1 << 32
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
DEFAULT_CHUNK_ELEMENTS = 1 << 18  #: (reports x candidates) block size: 2 MiB of uint64, cache sized


class HashInputError(ValueError):
    """Keys, ids or a range size that the hash family does not accept."""


def draw_keys(rng: np.random.Generator, n: int) -> np.ndarray:
    """Draw ``n`` independent uniform keys.

    Args:
        rng: source of randomness (its bit generator supplies raw 64-bit words).
        n: number of keys.

    Returns:
        ``(n, 3)`` uint64 array, rows ``(a_lo, a_hi, b)``.

    Raises:
        HashInputError: if ``n`` is negative.
    """
    if n < 0:
        raise HashInputError(f"number of keys must be >= 0, got {n}")
    raw = rng.bit_generator.random_raw(KEY_WORDS * n)
    return np.asarray(raw, dtype=np.uint64).reshape(n, KEY_WORDS)


def keys_from_seed(seed: int, n: int) -> np.ndarray:
    """``n`` public keys derived from an integer seed (for public hash functions such as
    the CMS family shared by every client). Uses numpy's PCG64 seeded with ``seed``.

    Raises:
        HashInputError: if ``n`` is negative.
    """
    return draw_keys(np.random.Generator(np.random.PCG64(seed)), n)


def _check_keys(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] != KEY_WORDS or keys.dtype != np.uint64:
        raise HashInputError(f"keys must be a (n, {KEY_WORDS}) uint64 array, got "
                             f"shape {keys.shape} dtype {keys.dtype}")
    return keys


def _check_range(g: int) -> int:
    g = int(g)
    if not 2 <= g <= (1 << 31):
        raise HashInputError(f"hash range g must be in [2, 2^31], got {g}")
    return g


def split_ids(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split ids into their low and high 32-bit halves (as uint64).

    Raises:
        HashInputError: if an id is negative or not an integer.
    """
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise HashInputError(f"item ids must be integers, got dtype {x.dtype}")
    if x.dtype.kind == "i" and x.size and int(x.min()) < 0:
        raise HashInputError("item ids must be non-negative")
    x = x.astype(np.uint64, copy=False)
    return x & _MASK32, x >> _SHIFT32


def _u64(keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    lo, hi = split_ids(x)
    u = keys[:, 0] * lo
    u += keys[:, 2]
    if hi.size and hi.any():
        u += keys[:, 1] * hi
    return u


def hash32(keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Element-wise strongly universal hash ``z_i = h_{keys[i]}(x[i])`` in ``[2^32]``.

    Returns:
        uint64 array of the same length with values below 2^32.

    Raises:
        HashInputError: on malformed keys or ids, or mismatched lengths.
    """
    keys = _check_keys(keys)
    x = np.asarray(x)
    if x.shape != (keys.shape[0],):
        raise HashInputError(f"need one id per key: {x.shape} ids for {keys.shape[0]} keys")
    return _u64(keys, x) >> _SHIFT32


def hash_to_range(keys: np.ndarray, x: np.ndarray, g: int) -> np.ndarray:
    """Element-wise ``h_{keys[i]}(x[i])`` in ``[g]`` (int64).

    Raises:
        HashInputError: on malformed keys or ids, or ``g`` outside ``[2, 2^31]``.
    """
    g = _check_range(g)
    z = hash32(keys, x)
    return ((z * np.uint64(g)) >> _SHIFT32).astype(np.int64)


def hash_outer(keys: np.ndarray, x: np.ndarray, g: int) -> np.ndarray:
    """All pairs: ``out[j, c] = h_{keys[j]}(x[c])`` in ``[g]``, shape ``(len(keys), len(x))``.

    Intended for a small public family (CMS) against a block of candidates; the caller
    bounds the block size.

    Raises:
        HashInputError: on malformed keys or ids, or ``g`` outside ``[2, 2^31]``.
    """
    keys = _check_keys(keys)
    g = _check_range(g)
    lo, hi = split_ids(np.asarray(x).ravel())
    u = keys[:, 0, None] * lo[None, :]
    u += keys[:, 2, None]
    if hi.size and hi.any():
        u += keys[:, 1, None] * hi[None, :]
    u >>= _SHIFT32
    u *= np.uint64(g)
    u >>= _SHIFT32
    return u.astype(np.int64)


def bucket_start(y: np.ndarray | int, g: int) -> np.ndarray:
    """``L_y = ceil(y 2^32 / g)`` element-wise for ``y`` in ``[0, g]`` (``L_g = 2^32``).

    Raises:
        HashInputError: if ``g`` is outside ``[2, 2^31]`` or ``y`` outside ``[0, g]``.
    """
    g = _check_range(g)
    y = np.asarray(y)
    if y.size and (int(y.min()) < 0 or int(y.max()) > g):
        raise HashInputError(f"bucket index outside [0, {g}]")
    y = y.astype(np.uint64)
    # y * 2^32 <= 2^63 and adding g - 1 stays below 2^64: exact in uint64
    return ((y << _SHIFT32) + np.uint64(g - 1)) // np.uint64(g)


def bucket_starts(g: int) -> np.ndarray:
    """All ``L_y`` for ``y = 0..g`` (memory ``8 (g + 1)`` bytes: for small ``g``).

    Raises:
        HashInputError: if ``g`` is outside ``[2, 2^31]``.
    """
    return bucket_start(np.arange(_check_range(g) + 1), g)


def bucket_sizes(g: int) -> np.ndarray:
    """``c_y``: how many of the 2^32 values of ``z`` land in bucket ``y`` (sums to 2^32;
    memory ``8 g`` bytes: for small ``g``).

    Raises:
        HashInputError: if ``g`` is outside ``[2, 2^31]``.
    """
    return np.diff(bucket_starts(g))


def bucket_size(y: int, g: int) -> int:
    """``c_y`` for one bucket.

    Raises:
        HashInputError: if ``g`` is outside ``[2, 2^31]`` or ``y`` outside ``[0, g)``.
    """
    if not 0 <= int(y) < _check_range(g):
        raise HashInputError(f"bucket index outside [0, {g})")
    s = bucket_start(np.array([y, y + 1]), g)
    return int(s[1]) - int(s[0])


def collision_probability(g: int) -> float:
    """``P[h(x) = h(x')]`` for distinct ids: ``sum_y c_y^2 / 2^64`` (exactly ``1/g`` when
    ``g`` divides 2^32, otherwise within ``2^-32`` of it). Closed form: ``r = 2^32 mod g``
    buckets hold ``F + 1 = floor(2^32/g) + 1`` values, the other ``g - r`` hold ``F``.

    Raises:
        HashInputError: if ``g`` is outside ``[2, 2^31]``.
    """
    g = _check_range(g)
    F, r = divmod(_TWO32, g)
    return (r * (F + 1) ** 2 + (g - r) * F * F) / float(1 << 64)


def count_matches(keys: np.ndarray, targets: np.ndarray, g: int, candidates: np.ndarray,
                  chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> np.ndarray:
    """For every candidate ``c``: ``#{i : h_{keys[i]}(c) = targets[i]}``.

    Works in blocks of at most ``chunk_elements`` (report, candidate) pairs, so memory
    stays bounded for any number of reports and candidates.

    Args:
        keys: ``(n, 3)`` uint64 keys, one per report.
        targets: ``(n,)`` integers in ``[g]``.
        g: hash range.
        candidates: item ids to score.
        chunk_elements: block size in pairs.

    Returns:
        int64 counts, one per candidate.

    Raises:
        HashInputError: on malformed keys, ids or targets.
    """
    keys = _check_keys(keys)
    g = _check_range(g)
    targets = np.asarray(targets)
    if targets.shape != (keys.shape[0],) or targets.dtype.kind not in "iu":
        raise HashInputError("targets must be one integer per key")
    if targets.size and (int(targets.min()) < 0 or int(targets.max()) >= g):
        raise HashInputError(f"targets must lie in [0, {g})")
    lo, hi = split_ids(np.asarray(candidates).ravel())
    n, n_cand = keys.shape[0], lo.shape[0]
    counts = np.zeros(n_cand, dtype=np.int64)
    if n == 0 or n_cand == 0:
        return counts
    start = bucket_start(targets, g)
    size = bucket_start(targets + 1, g) - start
    shifted_b = keys[:, 2] - (start << _SHIFT32)  # wraps mod 2^64, as intended
    width = size << _SHIFT32
    a_lo, a_hi = keys[:, 0], keys[:, 1]
    use_hi = bool(hi.any())
    # at least ~256 reports per block so that huge candidate lists do not degrade into
    # one numpy call per report
    cand_block = max(1, min(n_cand, chunk_elements // 256))
    rep_block = max(1, chunk_elements // cand_block)
    buf = np.empty(rep_block * cand_block, dtype=np.uint64)
    tmp = np.empty(rep_block * cand_block, dtype=np.uint64) if use_hi else None
    for c0 in range(0, n_cand, cand_block):
        c1 = min(n_cand, c0 + cand_block)
        lo_c, hi_c = lo[None, c0:c1], hi[None, c0:c1]
        for r0 in range(0, n, rep_block):
            r1 = min(n, r0 + rep_block)
            shape = (r1 - r0, c1 - c0)
            u = buf[: shape[0] * shape[1]].reshape(shape)
            np.multiply(a_lo[r0:r1, None], lo_c, out=u)
            u += shifted_b[r0:r1, None]
            if use_hi:
                v = tmp[: shape[0] * shape[1]].reshape(shape)  # type: ignore[index]
                np.multiply(a_hi[r0:r1, None], hi_c, out=v)
                u += v
            counts[c0:c1] += np.count_nonzero(u < width[r0:r1, None], axis=0)
    return counts
