"""Mask expansion (a stream-cipher PRG) and bit-exact packing of vectors mod ``m``.

Theory of operation
-------------------
Secure aggregation (Bonawitz et al., CCS 2017, section 4) masks an input vector
``x_u in Z_m^d`` with ``PRG(b_u)`` and with ``+-PRG(s_{u,v})`` for every peer ``v``; the
masks cancel in the sum. The PRG must be a real cryptographic PRG and its output must
be *exactly* uniform on ``Z_m``, otherwise the masked vector leaks information about
``x_u``.

:func:`expand_mask` uses AES-256 in counter mode (NIST SP 800-38A) keyed with the
32-byte seed, initial counter block all zero: the keystream ``KS = AES_seed(0) ||
AES_seed(1) || ...`` (128-bit big-endian counter). The seed must be used for one mask
only (the protocol derives it with HKDF from a per-session label), so a fixed counter
start is safe. AES-256-CTR was measured faster than ChaCha20 on this machine (AES-NI).

Let ``b = bitlen(m - 1)`` and ``w`` the smallest of 1, 2, 4, 8 with ``8 w >= b``. The
keystream is cut into ``w``-byte little-endian words; each word, with all but its low
``b`` bits cleared, is a *candidate* uniform on ``[0, 2^b)``. The output is the first
``d`` candidates that are ``< m`` (rejection sampling). For ``m = 2^b`` every candidate is
accepted, so entry ``i`` is simply word ``i`` masked to ``b`` bits. Candidates are
uniform and independent (up to the PRF security of AES), and the accepted ones are
exactly uniform on ``Z_m``. Each candidate is accepted with probability
``m / 2^b > 1/2``; the vectorised implementation draws candidates in batches, and since
it takes accepted candidates in stream order, the result does not depend on the batch
sizes: it is a deterministic function of ``(seed, d, m)``.

:func:`pack_uints` writes entries with exactly ``b`` bits each: entry ``i`` occupies bits
``[i b, (i+1) b)`` of the little-endian bit string (bit ``j`` of the output is bit
``j mod 8`` of byte ``j // 8``); unused high bits of the last byte are zero. So 20-bit
entries cost 2.5 bytes each, and a vector of ``d`` entries costs ``ceil(d b / 8)`` bytes.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .errors import ParameterError

__all__ = ["SEED_BYTES", "MAX_MODULUS", "MERSENNE61", "expand_mask", "mask_sum",
           "mask_sum_mersenne61", "mask_bytes_per_entry",
           "pack_uints", "unpack_uints", "keystream"]

SEED_BYTES = 32
MAX_MODULUS = 1 << 64
# keystream generated per step: large enough to amortise the call, small enough for L2
_CHUNK_BYTES = 1 << 20
_WORD_DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


def _check_modulus(modulus: object) -> int:
    if not isinstance(modulus, (int, np.integer)) or isinstance(modulus, bool):
        raise ParameterError(f"modulus must be an int, got {type(modulus).__name__}")
    modulus = int(modulus)
    if not 2 <= modulus <= MAX_MODULUS:
        raise ParameterError(f"modulus must satisfy 2 <= modulus <= 2**64, got {modulus}")
    return modulus


def _check_count(count: object, name: str) -> int:
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool):
        raise ParameterError(f"{name} must be an int, got {type(count).__name__}")
    count = int(count)
    if count < 0:
        raise ParameterError(f"{name} must be >= 0, got {count}")
    return count


def _bits(modulus: int) -> int:
    return (modulus - 1).bit_length()


def _word_bytes(b: int) -> int:
    """The smallest of 1, 2, 4, 8 bytes that holds ``b`` bits."""
    return 1 if b <= 8 else 2 if b <= 16 else 4 if b <= 32 else 8


def mask_bytes_per_entry(modulus: int) -> int:
    """Keystream bytes consumed per candidate for ``modulus``: 1, 2, 4 or 8.

    Raises:
        ParameterError: modulus outside ``[2, 2**64]``.
    """
    return _word_bytes(_bits(_check_modulus(modulus)))


# masks of at most this many keystream bytes take the one-call path of expand_mask
_SMALL_MASK_BYTES = 1 << 16
# the plaintext of every keystream step: shared, never written
_ZEROS = np.zeros(_CHUNK_BYTES, np.uint8)
_ZEROS.setflags(write=False)
_ZERO_BYTES = bytes(_SMALL_MASK_BYTES)
#: the counter block every mask starts from (immutable; shared by every cipher)
_CTR_ZERO = modes.CTR(bytes(16))
#: ``(dim, modulus) -> (keystream bytes, word dtype, low-bit mask or None)`` for masks
#: that take the one-call path (:func:`_one_call_mask`): filled by the checked path,
#: bounded in size
_SMALL_PLANS: dict[tuple[int, int], tuple[int, np.dtype, np.uint64 | None]] = {}


class _Keystream:
    """AES-256-CTR keystream written into one reused buffer.

    ``capacity`` is the largest step the caller will ask for (capped at
    ``_CHUNK_BYTES``): buffers are sized to it, so a short mask costs a short buffer
    rather than a megabyte.
    """

    def __init__(self, seed: bytes, capacity: int = _CHUNK_BYTES) -> None:
        self._enc = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()
        self._cap = max(1, min(int(capacity), _CHUNK_BYTES))
        # update_into wants room for one extra block minus one byte
        self._buf = np.empty(self._cap + 16, np.uint8)

    def chunk(self, n: int) -> np.ndarray:
        """The next ``n`` keystream bytes, ``n <= capacity`` (a view, valid until the
        next call)."""
        if n > self._cap:
            raise ValueError(f"keystream step of {n} bytes exceeds capacity {self._cap}")
        self._enc.update_into(_ZEROS[:n], self._buf)
        return self._buf[:n]

    def into(self, out: np.ndarray) -> None:
        """Fill the contiguous uint8 array ``out`` with the next ``len(out)`` bytes."""
        done, total = 0, out.size
        while done < total:
            n = min(self._cap, total - done)
            out[done:done + n] = self.chunk(n)
            done += n


def _check_seed(seed: object) -> bytes:
    if not isinstance(seed, (bytes, bytearray, memoryview)):
        raise ParameterError(f"seed must be bytes, got {type(seed).__name__}")
    seed = bytes(seed)
    if len(seed) != SEED_BYTES:
        raise ParameterError(f"seed must be {SEED_BYTES} bytes, got {len(seed)}")
    return seed


def keystream(seed: bytes, nbytes: int) -> bytes:
    """The first ``nbytes`` bytes of the AES-256-CTR keystream under ``seed``.

    Exposed for tests and benchmarks (the bare cipher rate).

    Raises:
        ParameterError: seed not 32 bytes or ``nbytes < 0``.
    """
    seed = _check_seed(seed)
    nbytes = _check_count(nbytes, "nbytes")
    out = np.empty(nbytes, np.uint8)
    _Keystream(seed, nbytes).into(out)
    return out.tobytes()


def _one_call_mask(seed: bytes, nbytes: int, word: np.dtype,
                   low_mask: np.uint64 | None) -> np.ndarray:
    """A mask of one keystream call (power-of-two modulus): ``nbytes`` of keystream as
    words, widened to ``uint64``, the bits above the modulus cleared (``low_mask``)."""
    ks = Cipher(algorithms.AES(seed), _CTR_ZERO).encryptor().update(_ZERO_BYTES[:nbytes])
    small = np.frombuffer(ks, dtype=word).astype(np.uint64)
    if low_mask is not None:
        np.bitwise_and(small, low_mask, out=small)
    return small


def mask_sum(terms: Iterable[tuple[bytes, int]], dim: int, modulus: int) -> np.ndarray:
    """``sum(sign * expand_mask(seed, dim, modulus) for seed, sign in terms) mod modulus``
    for a power-of-two ``modulus``: a fresh ``uint64`` array in ``[0, modulus)``.

    The masks are the same keystream words :func:`expand_mask` cuts to ``b`` bits; since
    ``2^b`` divides ``2^(8 w)``, the words are summed in their own width (wrapping) and
    cut once at the end. Many short masks (a client adds ``k + 1`` of them; see
    :func:`_matrix_pays`) are expanded as the rows of one matrix (one keystream call per
    seed, into its row; :func:`_keystream_rows`) and summed with two column reductions,
    the added rows and the subtracted ones, so the numpy calls do not grow with the
    number of masks; long masks are added one at a time, a keystream chunk at a time
    (:func:`_streamed_sum`).

    ``2^61 - 1`` has its own fast path (:func:`mask_sum_mersenne61`).

    Raises:
        ParameterError: a bad seed, dim or modulus, a modulus that is neither a power of
            two nor ``2^61 - 1``, or a sign other than ``1`` and ``-1``.
    """
    dim = _check_count(dim, "dim")
    modulus = _check_modulus(modulus)
    if modulus == MERSENNE61:
        return mask_sum_mersenne61(terms, dim)
    if modulus & (modulus - 1):
        raise ParameterError("mask_sum needs a power-of-two modulus or 2^61 - 1 "
                             "(expand_mask serves any)")
    b = _bits(modulus)
    w = _word_bytes(b)
    seeds, added = _signed_seeds(terms)
    if _grouped_pays(len(seeds), dim, w):
        total = _grouped_wrapped_sum(seeds, added, dim, w)
    elif _matrix_pays(len(seeds), dim):
        total = _wrapped_sum(seeds[:added], dim, w)
        if added < len(seeds):
            np.subtract(total, _wrapped_sum(seeds[added:], dim, w), out=total)
    else:
        total = _streamed_sum(seeds, added, dim, w)
    out = total.astype(np.uint64)
    if b < 64:
        np.bitwise_and(out, np.uint64(modulus - 1), out=out)
    return out


def _wrapped_sum(seeds: list[bytes], dim: int, w: int) -> np.ndarray:
    """The sum of the first ``dim`` ``w``-byte keystream words of every seed, wrapping
    in their own width (native byte order)."""
    native = _WORD_DTYPES[w].newbyteorder("=")
    total = np.zeros(dim, native)
    for start, words in _keystream_rows(seeds, dim, w):
        part = total[start:start + words.shape[1]]
        np.add(part, words.sum(axis=0, dtype=native), out=part)
    return total


def _matrix_pays(masks: int, dim: int) -> bool:
    """Whether the keystream matrix beats mask-by-mask sums: many masks (the numpy calls
    saved are per mask) that are short (a long mask's own vector stays in cache while
    it is added; a matrix block of many rows is narrow). Measured on 89 masks of
    ``2^61 - 1``: 1.9x faster at ``dim = 30``, 1.7x at 300, 1.4x at 1456, 1.0x at 3000,
    0.9x at 30,000; 0.7x for 3 masks (docs/scaling.md)."""
    return masks >= _MATRIX_MIN_MASKS and dim <= _MATRIX_MAX_DIM


_MATRIX_MIN_MASKS = 8
_MATRIX_MAX_DIM = 2048


def _streamed_sum(seeds: list[bytes], added: int, dim: int, w: int) -> np.ndarray:
    """The wrapping sum of :func:`mask_sum` taken mask by mask, a keystream chunk at a
    time (the first ``added`` seeds added, the others subtracted)."""
    word = _WORD_DTYPES[w]
    acc = np.zeros(dim, word.newbyteorder("="))
    nbytes = dim * w
    per_chunk = _CHUNK_BYTES // w
    buf = np.empty(min(nbytes, _CHUNK_BYTES) + 16, np.uint8) if nbytes > _SMALL_MASK_BYTES else None
    for i, seed in enumerate(seeds):
        op = np.add if i < added else np.subtract
        enc = Cipher(algorithms.AES(seed), _CTR_ZERO).encryptor()
        if buf is None:
            op(acc, np.frombuffer(enc.update(_ZERO_BYTES[:nbytes]), dtype=word), out=acc)
            continue
        for start in range(0, dim, per_chunk):
            n = min(per_chunk, dim - start)
            enc.update_into(_ZEROS[:n * w], buf)
            part = acc[start:start + n]
            op(part, buf[:n * w].view(word), out=part)
    return acc


def _signed_seeds(terms: Iterable[tuple[bytes, int]]) -> tuple[list[bytes], int]:
    """The checked seeds of ``terms``, those to add first, then those to subtract, and
    how many are added.

    Raises:
        ParameterError: a bad seed, or a sign other than ``1`` and ``-1``.
    """
    plus: list[bytes] = []
    minus: list[bytes] = []
    for seed, sign in terms:
        if type(seed) is not bytes or len(seed) != SEED_BYTES:
            seed = _check_seed(seed)
        if type(sign) is not int or sign not in (1, -1):
            raise ParameterError(f"a mask's sign must be 1 or -1, got {sign!r}")
        (plus if sign == 1 else minus).append(seed)
    return plus + minus, len(plus)


#: bytes of keystream matrix per step of :func:`_keystream_rows`
_MATRIX_BYTES = 1 << 18
#: fewest words per row in a step (many rows are taken a group at a time instead)
_MIN_COLUMNS = 256


def _keystream_rows(seeds: list[bytes], dim: int,
                    w: int) -> Iterator[tuple[int, np.ndarray]]:
    """The first ``dim`` ``w``-byte keystream words of every seed as the rows of a
    matrix, a block at a time: yields ``(first column, words)``, ``words`` of shape
    ``(rows, columns)`` in the native byte order, for a group of the seeds' rows (a view
    of one reused buffer, valid until the next step); the caller sums the blocks of a
    column range over the groups. A row continues its own keystream from block to
    block: on libcrypto's context keyed again per seed with the counter where the block
    starts (:func:`_ctr_rows`), else on one ``cryptography`` encryptor per seed of the
    group."""
    word = _WORD_DTYPES[w]
    if not seeds or not dim:
        return
    cols = max(1, min(dim, _CHUNK_BYTES // w,
                      max(_MIN_COLUMNS, _MATRIX_BYTES // (w * len(seeds)))))
    if cols < dim:   # every step starts on a 16-byte block (cols >= 256 here)
        cols -= cols % (16 // w)
    group = max(1, _MATRIX_BYTES // (w * cols))
    buf = np.empty(min(group, len(seeds)) * cols * w + 16, np.uint8)
    libcrypto = _openssl_ctr() is not None
    for first in range(0, len(seeds), group):
        rows = seeds[first:first + group]
        encs = None if libcrypto else [Cipher(algorithms.AES(seed), _CTR_ZERO).encryptor()
                                       for seed in rows]
        for start in range(0, dim, cols):
            n = min(cols, dim - start)
            nb = n * w
            if encs is None:
                _ctr_rows(rows, start * w // 16, nb, buf)
            else:
                zeros = _ZEROS[:nb]
                for i, enc in enumerate(encs):
                    # room for the block the call may need past the row: the next row
                    # (or the buffer's 16 spare bytes) takes it, and is written afterwards
                    enc.update_into(zeros, buf[i * nb:(i + 1) * nb + 15])
            words = buf[:len(rows) * nb].view(word).reshape(len(rows), n)
            if not np.little_endian and w > 1:   # pragma: no cover - little-endian hosts
                words = words.astype(word.newbyteorder("="))
            yield start, words


#: bytes of keystream per group of whole rows (:func:`_grouped_rows`): a group stays in
#: the core's second-level cache while it is summed
_GROUP_BYTES = 1 << 19
#: the grouped sums serve at least this many masks, each longer than
#: ``_GROUPED_MIN_DIM`` entries and at most ``_GROUP_BYTES / 2`` bytes (two rows a
#: group); shorter masks take the keystream matrix, longer or fewer the streamed sums
_GROUPED_MIN_MASKS = 4
_GROUPED_MIN_DIM = 768


def _grouped_pays(masks: int, dim: int, w: int) -> bool:
    """Whether whole-row groups beat the keystream matrix and the mask-by-mask sums:
    masks long enough that a matrix block of many rows is narrow (its column sums
    stride), short enough that a group holds several rows, and libcrypto's context
    keyed again per seed available (one ``cryptography`` context per seed costs more
    than the sum it serves). Measured on 89 masks of ``2^61 - 1``, against the path
    taken before: 0.65x at 700 entries (so the matrix keeps those), 1.10x at 800, 1.05x
    at 1372, 1.55x at 4200, 1.35x at 7224, 1.56x at 32,768; 1.3x to 1.4x for 4 to 9
    masks of 4200, 0.6x for 2 (docs/scaling.md)."""
    return (masks >= _GROUPED_MIN_MASKS and dim > _GROUPED_MIN_DIM
            and 2 * dim * w <= _GROUP_BYTES and _openssl_ctr() is not None)


def _grouped_rows(seeds: list[bytes], dim: int, w: int,
                  max_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """The first ``dim`` ``w``-byte keystream words of every seed, whole rows at a time:
    yields ``(index of the group's first seed, words)``, ``words`` of shape ``(rows,
    dim)`` in the native byte order (at most ``max_rows`` rows and about
    ``_GROUP_BYTES``; a view of one reused buffer, valid until the next step), from
    libcrypto's context keyed again per seed (:func:`_ctr_rows`)."""
    word = _WORD_DTYPES[w]
    nb = dim * w
    rows = max(1, min(max_rows, _GROUP_BYTES // nb))
    buf = np.empty(min(rows, len(seeds)) * nb, np.uint8)
    for first in range(0, len(seeds), rows):
        group = seeds[first:first + rows]
        _ctr_rows(group, 0, nb, buf)
        words = buf[:len(group) * nb].view(word).reshape(len(group), dim)
        if not np.little_endian and w > 1:   # pragma: no cover - little-endian hosts
            words = words.astype(word.newbyteorder("="))
        yield first, words


def _grouped_wrapped_sum(seeds: list[bytes], added: int, dim: int, w: int) -> np.ndarray:
    """The wrapping sum of :func:`mask_sum` a group of whole rows at a time (the first
    ``added`` seeds added, the others subtracted)."""
    native = _WORD_DTYPES[w].newbyteorder("=")
    acc = np.zeros(dim, native)
    for first, words in _grouped_rows(seeds, dim, w, len(seeds)):
        m = words.shape[0]
        plus = min(m, max(0, added - first))
        if plus:
            np.add(acc, words[:plus].sum(axis=0, dtype=native), out=acc)
        if plus < m:
            np.subtract(acc, words[plus:].sum(axis=0, dtype=native), out=acc)
    return acc


# ----------------------------------------------- AES-256-CTR keyed again per seed
_CTR_STATE: list[object] = []    # [] not tried yet; [None] unavailable; [(ffi, lib)]


def _openssl_ctr() -> tuple[object, object] | None:
    """libcrypto (:mod:`secagg._libcrypto`) if its AES-256-CTR, keyed again per seed on
    one context, gives ``cryptography``'s keystream (checked once, on three seeds, from
    block 0 and from block 5, over a partial last block), else ``None``: the
    ``cryptography`` path then serves."""
    if not _CTR_STATE:
        state: tuple[object, object] | None = None
        try:
            from ._libcrypto import libcrypto

            state = libcrypto()
            if state is not None:
                seeds = [bytes([i]) * SEED_BYTES for i in (1, 2, 3)]
                buf = np.empty(3 * 200 + 16, np.uint8)
                for block in (0, 5):
                    _ctr_rows(seeds, block, 200, buf)
                    iv = block.to_bytes(16, "big")
                    want = b"".join(Cipher(algorithms.AES(sd), modes.CTR(iv)).encryptor()
                                    .update(bytes(200)) for sd in seeds)
                    if buf[:600].tobytes() != want:
                        state = None
        except (ImportError, OSError, AttributeError, RuntimeError):
            state = None
        _CTR_STATE[:] = [state]
    return _CTR_STATE[0]  # type: ignore[return-value]


def _ctr_rows(seeds: list[bytes], block: int, nb: int, buf: np.ndarray) -> None:
    """Row ``r`` of ``buf`` (rows of ``nb`` bytes) := bytes ``16 block .. 16 block + nb``
    of the AES-256-CTR keystream under ``seeds[r]`` (initial counter block 0): one
    context, keyed again per seed with the counter at ``block``."""
    from ._libcrypto import libcrypto, new_context

    if not 0 <= nb <= _ZEROS.size or buf.size < len(seeds) * nb or buf.dtype != np.uint8 \
            or not buf.flags.c_contiguous:
        raise ValueError("keystream rows: a row is at most 1 MiB, into a large enough "
                         "contiguous uint8 buffer")
    if seeds and (set(map(type, seeds)) != {bytes} or set(map(len, seeds)) != {SEED_BYTES}):
        raise ParameterError(f"every seed must be {SEED_BYTES} bytes")  # libcrypto reads 32
    ctx = new_context("aes_256_ctr")   # this call's own: no thread shares it
    ffi, lib = libcrypto()  # type: ignore[misc]   # loaded: new_context raised otherwise
    iv = block.to_bytes(16, "big")
    zeros = ffi.from_buffer("unsigned char[]", _ZEROS[:nb])
    out = ffi.from_buffer("unsigned char[]", buf, require_writable=True)
    outl = ffi.new("int *")
    init, update, null = lib.EVP_EncryptInit_ex, lib.EVP_EncryptUpdate, ffi.NULL
    ok = 1
    for r, seed in enumerate(seeds):
        ok &= init(ctx, null, null, seed, iv)
        ok &= update(ctx, out + r * nb, outl, zeros, nb) & (outl[0] == nb)
    if ok != 1:
        raise RuntimeError("OpenSSL AES-256-CTR failed")


#: the Mersenne prime of the threshold committee's field, the one prime modulus with a
#: summing fast path (:func:`mask_sum_mersenne61`)
MERSENNE61 = (1 << 61) - 1
_M61 = np.uint64(MERSENNE61)
_S61 = np.uint64(61)


def _column_sum_m61(rows: np.ndarray) -> np.ndarray:
    """``rows.sum(axis=0) mod p`` for entries below ``p``: eight rows at a time (eight
    entries below ``2^61`` cannot wrap ``2^64``), each partial sum reduced with
    ``2^61 = 1 (mod p)``, until one row is left."""
    while rows.shape[0] > 1:
        r, cols = rows.shape
        whole = r - r % 8
        parts = []
        if whole:
            parts.append(rows[:whole].reshape(whole // 8, 8, cols).sum(axis=1))
        if whole < r:
            parts.append(rows[whole:].sum(axis=0, keepdims=True))
        acc = parts[0] if len(parts) == 1 else np.concatenate(parts)
        acc = (acc & _M61) + (acc >> _S61)             # < 2^61 + 8
        rows = np.where(acc >= _M61, acc - _M61, acc)  # < p
    return rows[0] if rows.shape[0] else np.zeros(rows.shape[1], np.uint64)


def mask_sum_mersenne61(terms: Iterable[tuple[bytes, int]], dim: int) -> np.ndarray:
    """:func:`mask_sum` for the modulus ``p = 2^61 - 1``: ``sum(sign *
    expand_mask(seed, dim, p)) mod p``, a fresh ``uint64`` array in ``[0, p)``.

    :func:`expand_mask` draws each entry as the low 61 bits of the next 64-bit keystream
    word, rejecting the one value ``p`` (probability ``2^-61`` a word). So a mask whose
    first ``dim`` words reject nothing is exactly those words' low bits. Many short
    masks (:func:`_matrix_pays`) are the rows of one keystream matrix
    (:func:`_keystream_rows`), cut to 61 bits, the added and the subtracted rows summed
    by columns (:func:`_column_sum_m61`); if any word of any of them is the rejected
    value (never seen in practice), the sum is taken mask by mask instead. Mask by mask
    (:func:`_streamed_sum_m61`), each mask is added straight from the keystream, the
    sum folded with ``2^61 = 1 (mod p)`` every six masks, and a mask with a rejected
    word is expanded by :func:`expand_mask` itself; so the result is the same.

    Raises:
        ParameterError: a bad seed or dim, or a sign other than ``1`` and ``-1``.
    """
    dim = _check_count(dim, "dim")
    seeds, added = _signed_seeds(terms)
    if _grouped_pays(len(seeds), dim, 8):
        return _grouped_sum_m61(seeds, added, dim)
    if not _matrix_pays(len(seeds), dim):
        return _streamed_sum_m61(seeds, added, dim)
    plus = _sum_m61(seeds[:added], dim)
    minus = _sum_m61(seeds[added:], dim)
    if plus is None or minus is None:
        # a rejected word shifts its mask's later entries: mask by mask
        return _streamed_sum_m61(seeds, added, dim)
    plus += _M61 - minus       # below 2p: one conditional cut
    return np.where(plus >= _M61, plus - _M61, plus)


def _sum_m61(seeds: list[bytes], dim: int) -> np.ndarray | None:
    """``sum(expand_mask(seed, dim, p)) mod p`` over ``seeds`` from the keystream
    matrix, or ``None`` if a word of some mask is the rejected value ``p``."""
    total = np.zeros(dim, np.uint64)
    for start, words in _keystream_rows(seeds, dim, 8):
        low = np.bitwise_and(words, _M61, out=words)
        if low.max() == _M61:
            return None
        part = total[start:start + low.shape[1]]
        part += _column_sum_m61(low)
        np.copyto(part, np.where(part >= _M61, part - _M61, part))
    return total


def _grouped_sum_m61(seeds: list[bytes], added: int, dim: int) -> np.ndarray:
    """The sum of :func:`mask_sum_mersenne61` six whole masks at a time
    (:func:`_grouped_rows`; the first ``added`` seeds added, the others subtracted):
    each group's words cut to 61 bits, its added and subtracted rows summed by columns
    (six entries below ``2^61`` and the running sum, below ``2^61 + 8``, cannot wrap
    ``2^64``), and the running sum folded with ``2^61 = 1 (mod p)`` after each group. A
    mask with a rejected word is expanded by :func:`expand_mask` in its row."""
    acc = np.zeros(dim, np.uint64)
    for first, words in _grouped_rows(seeds, dim, 8, 6):
        m = words.shape[0]
        np.bitwise_and(words, _M61, out=words)
        # every word is now <= p, and p exactly when the PRG rejects it (2^-61 a word)
        if words.max() == _M61:
            for r in range(m):
                if words[r].max() == _M61:
                    words[r] = expand_mask(seeds[first + r], dim, MERSENNE61)
        plus = min(m, max(0, added - first))
        if plus:
            np.add(acc, words[:plus].sum(axis=0), out=acc)
        if plus < m:   # acc + (m - plus) p - their sum: no wrap in the true value
            np.subtract(acc, words[plus:].sum(axis=0), out=acc)
            np.add(acc, np.uint64((m - plus) * MERSENNE61), out=acc)
        high = acc >> _S61
        np.bitwise_and(acc, _M61, out=acc)
        np.add(acc, high, out=acc)
    acc = (acc & _M61) + (acc >> _S61)
    return np.where(acc >= _M61, acc - _M61, acc)


def _streamed_sum_m61(seeds: list[bytes], added: int, dim: int) -> np.ndarray:
    """The sum of :func:`mask_sum_mersenne61` taken mask by mask (the first ``added``
    seeds added, the others subtracted)."""
    acc = np.zeros(dim, np.uint64)
    low = np.empty(dim, np.uint64)
    nbytes = 8 * dim
    big = np.empty(dim, np.uint64) if nbytes > _SMALL_MASK_BYTES else None
    pending = 0
    for i, seed in enumerate(seeds):
        if big is None:
            enc = Cipher(algorithms.AES(seed), _CTR_ZERO).encryptor()
            words = np.frombuffer(enc.update(_ZERO_BYTES[:nbytes]), dtype="<u8")
        else:
            _Keystream(seed, nbytes).into(big.view(np.uint8))
            words = big.view("<u8")
        np.bitwise_and(words, _M61, out=low)
        # low <= p everywhere, so its maximum is p exactly when a word is rejected
        mask = low if not dim or low.max() != _M61 else expand_mask(seed, dim, MERSENNE61)
        if i < added:
            np.add(acc, mask, out=acc)
        else:   # acc + p - m (wrapping in between; the true value is below 2^64)
            np.subtract(acc, mask, out=acc)
            np.add(acc, _M61, out=acc)
        pending += 1
        if pending == 6:          # after a fold acc < 2^61 + 8; six more stay < 2^64
            high = acc >> _S61
            np.bitwise_and(acc, _M61, out=acc)
            np.add(acc, high, out=acc)
            pending = 0
    acc = (acc & _M61) + (acc >> _S61)
    acc = (acc & _M61) + (acc >> _S61)
    return np.where(acc >= _M61, acc - _M61, acc)


def expand_mask(seed: bytes, dim: int, modulus: int) -> np.ndarray:
    """Expand a 32-byte seed into ``dim`` entries exactly uniform on ``[0, modulus)``.

    Args:
        seed: 32-byte key (an HKDF output; use each seed for one mask only).
        dim: number of entries, ``>= 0``.
        modulus: ``2 <= modulus <= 2**64``.

    Returns:
        A fresh ``uint64`` array of shape ``(dim,)``.

    Raises:
        ParameterError: bad seed, dim or modulus.
    """
    plan = _SMALL_PLANS.get((dim, modulus)) if type(dim) is int and type(modulus) is int else None
    if plan is not None and type(seed) is bytes and len(seed) == SEED_BYTES:
        # the common case of a simulation, checked and planned once per (dim, modulus)
        return _one_call_mask(seed, *plan)
    seed = _check_seed(seed)
    dim = _check_count(dim, "dim")
    modulus = _check_modulus(modulus)
    b = _bits(modulus)
    w = _word_bytes(b)
    word = _WORD_DTYPES[w]
    low_mask = np.uint64((1 << b) - 1) if b < 64 else None
    exact = modulus == 1 << b
    if exact and dim * w <= _SMALL_MASK_BYTES:
        # one keystream call and one conversion: most masks of a simulation are this
        # small (a TrieHH vote vector), where the fixed costs dominate
        plan = (dim * w, word, low_mask if low_mask is not None and b != 8 * w else None)
        if len(_SMALL_PLANS) < 64:
            _SMALL_PLANS[(dim, modulus)] = plan
        return _one_call_mask(seed, *plan)
    out = np.empty(dim, np.uint64)
    per_chunk = _CHUNK_BYTES // w
    # largest step below: the whole mask, or its first rejection-sampling batch
    first = dim if exact else int(dim / (modulus / float(1 << b)) * 1.02) + 64
    ks = _Keystream(seed, min(per_chunk, first) * w)

    if exact:  # power of two: every candidate accepted
        if w == 8:
            ks.into(out.view(np.uint8))
            if not np.little_endian:
                out.byteswap(inplace=True)
        else:
            for start in range(0, dim, per_chunk):
                n = min(per_chunk, dim - start)
                dst = out[start:start + n]
                np.copyto(dst, ks.chunk(n * w).view(word), casting="unsafe")
                if low_mask is not None and b != 8 * w:
                    np.bitwise_and(dst, low_mask, out=dst)
        if w == 8 and low_mask is not None:
            np.bitwise_and(out, low_mask, out=out)
        return out

    # general modulus: rejection sampling in stream order
    # (work in the word dtype: the modulus is not a power of two, so it is < 2^(8w))
    accept = modulus / float(1 << b)  # > 1/2
    word_mask = word.type((1 << b) - 1)
    word_modulus = word.type(modulus)
    cand = np.empty(min(per_chunk, first), word)
    filled = 0
    while filled < dim:
        remaining = dim - filled
        want = min(per_chunk, int(remaining / accept * 1.02) + 64)
        view = cand[:want]
        np.bitwise_and(ks.chunk(want * w).view(word), word_mask, out=view)
        good = np.compress(view < word_modulus, view)
        take = min(good.size, remaining)
        out[filled:filled + take] = good[:take]
        filled += take
    return out


_PACK_CHUNK = 1 << 16  # entries per packing step (multiple of 8: whole bytes per step)


def _as_uint_array(values: object, modulus: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ParameterError(f"values must be a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "ui":
        raise ParameterError(f"values must have an integer dtype, got {arr.dtype}")
    if arr.dtype.kind == "i":
        if arr.size and int(arr.min()) < 0:
            raise ParameterError("values must be non-negative")
    arr = arr.astype(np.uint64, copy=False)
    if modulus < MAX_MODULUS and arr.size and int(arr.max()) >= modulus:
        raise ParameterError(f"values must be < modulus {modulus}")
    return arr


def pack_uints(values: np.ndarray, modulus: int) -> bytes:
    """Pack entries of ``Z_modulus`` with ``bitlen(modulus - 1)`` bits each.

    Args:
        values: 1-D integer array with entries in ``[0, modulus)``.
        modulus: ``2 <= modulus <= 2**64``.

    Returns:
        ``ceil(len(values) * b / 8)`` bytes, layout as in the module docstring.

    Raises:
        ParameterError: (a ``ValueError``) bad modulus, shape, dtype, or an entry
            outside ``[0, modulus)``.
    """
    modulus = _check_modulus(modulus)
    arr = _as_uint_array(values, modulus)
    b = _bits(modulus)
    if b in (8, 16, 32, 64):
        return arr.astype(_WORD_DTYPES[b // 8], copy=False).tobytes()
    le = arr.astype("<u8", copy=False)
    nbytes = (b + 7) // 8  # only the low bytes of each entry carry bits
    parts = []
    for start in range(0, le.size, _PACK_CHUNK):
        block = np.ascontiguousarray(
            le[start:start + _PACK_CHUNK].view(np.uint8).reshape(-1, 8)[:, :nbytes])
        # flat (un)packbits: numpy's axis= variants are an order of magnitude slower
        bits = np.unpackbits(block.ravel(), bitorder="little").reshape(-1, 8 * nbytes)
        parts.append(np.packbits(bits[:, :b].ravel(), bitorder="little").tobytes())
    return b"".join(parts)


def unpack_uints(data: bytes, count: int, modulus: int) -> np.ndarray:
    """Inverse of :func:`pack_uints`.

    Args:
        data: exactly ``ceil(count * b / 8)`` bytes.
        count: number of entries.
        modulus: ``2 <= modulus <= 2**64``.

    Returns:
        ``uint64`` array of shape ``(count,)``.

    Raises:
        ParameterError: (a ``ValueError``) wrong length, non-zero padding bits, an entry
            ``>= modulus``, or bad arguments.
    """
    modulus = _check_modulus(modulus)
    count = _check_count(count, "count")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ParameterError(f"data must be bytes, got {type(data).__name__}")
    b = _bits(modulus)
    expected = (count * b + 7) // 8
    if len(data) != expected:
        raise ParameterError(f"packed data must be {expected} bytes for {count} entries of "
                             f"{b} bits, got {len(data)}")
    raw = np.frombuffer(bytes(data), np.uint8)
    if b in (8, 16, 32, 64):
        out = raw.view(_WORD_DTYPES[b // 8]).astype(np.uint64)
    else:
        total_bits = count * b
        if total_bits % 8:
            last = int(raw[-1])
            if last >> (total_bits % 8):
                raise ParameterError("non-zero padding bits after the last entry")
        out = np.zeros(count, "<u8")
        if b <= 56:
            # entry i = the 8 bytes at byte (i b) // 8, shifted right by (i b) % 8, masked
            padded = np.concatenate([raw, np.zeros(8, np.uint8)])
            words = np.lib.stride_tricks.as_strided(
                padded, shape=(raw.size + 1, 8), strides=(1, 1), writeable=False)
            for start in range(0, count, _PACK_CHUNK):
                offs = np.arange(start, min(count, start + _PACK_CHUNK), dtype=np.uint64)
                offs *= np.uint64(b)
                w = words[(offs >> np.uint64(3)).astype(np.intp)]  # (n, 8) gathered bytes
                vals = np.ascontiguousarray(w).view("<u8")[:, 0]
                vals >>= offs & np.uint64(7)
                vals &= np.uint64((1 << b) - 1)
                out[start:start + vals.size] = vals
        else:
            out_bytes = out.view(np.uint8).reshape(count, 8)
            nbytes = (b + 7) // 8
            step_bytes = _PACK_CHUNK * b // 8
            for i, start in enumerate(range(0, count, _PACK_CHUNK)):
                n = min(_PACK_CHUNK, count - start)
                chunk = raw[i * step_bytes:i * step_bytes + (n * b + 7) // 8]
                bits = np.unpackbits(chunk, bitorder="little", count=n * b).reshape(n, b)
                full = np.zeros((n, 8 * nbytes), np.uint8)
                full[:, :b] = bits
                out_bytes[start:start + n, :nbytes] = np.packbits(
                    full.ravel(), bitorder="little").reshape(n, nbytes)
        out = out.astype(np.uint64, copy=False)
    if modulus < MAX_MODULUS and out.size and int(out.max()) >= modulus:
        raise ParameterError(f"packed entry >= modulus {modulus}")
    return out
