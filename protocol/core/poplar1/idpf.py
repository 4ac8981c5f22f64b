"""IdpfBBCGGI21: the incremental distributed point function of Poplar1, batched.

Theory of operation (draft-irtf-cfrg-vdaf-20, section "The IDPF of BBCGGI21"; Boneh,
Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Lightweight Techniques for Private Heavy
Hitters", IEEE S&P 2021, section 6). A client with a ``BITS``-bit string ``alpha``
builds a binary tree whose node at level ``l`` on the path of ``alpha`` holds the value
``beta[l]`` (a pair of field elements, Field64 on the inner levels, Field255 on the leaf)
and every other node zero, and splits it into two keys and a public share of one
correction word per level ``(seed_cw, ctrl_cw, w_cw)``. Each aggregator walks the tree
from its key: a node is a 16-byte seed and a control bit; ``extend`` expands a seed into
the two children's seeds and bits, the correction word is applied where the control
bit is set, and ``convert`` turns the chosen child's seed into the next seed and the
node's value share. Inner levels use the fixed-key AES XOF, the leaf TurboSHAKE128.

Vectorisation. Every function here takes ``N`` reports at once: seeds are ``(N, ..., 16)``
uint8 arrays, control bits bool arrays, Field64 values uint64 arrays. The XOR, bit and
field arithmetic runs in numpy over all reports and all nodes of a level; the AES
permutation is keyed per report (the key binds the report's nonce), so each level costs
one AES call per report over all of its blocks. :class:`EvalCache` keeps the nodes of
the last level an aggregator evaluated so the next level of a prefix search costs one
``extend`` and one ``convert`` per candidate (the draft's implementation note on caching),
not a walk from the root.

The client's side (:func:`gen`) is not constant time in numpy (nor is the draft's
reference); the aggregators' side handles only shares.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from protocol.core.poplar1 import field as F
from protocol.core.poplar1 import jit
from protocol.core.poplar1.errors import Poplar1DecodeError, Poplar1UsageError
from protocol.core.poplar1.xof import (RowKeyedAes, XofFixedKeyAes128, XofTurboShake128,
                                       aes_backend, fixed_keys, format_dst, turboshake_many)

__all__ = ["KEY_SIZE", "RAND_SIZE", "PublicShares", "ReportCiphers", "EvalCache", "gen",
           "eval_batch", "encode_public_share", "decode_public_shares", "public_share_size",
           "take_rows"]

KEY_SIZE = 16
RAND_SIZE = 32
VALUE_LEN = 2
_DST_EXTEND = format_dst(1, 0, 0)
_DST_CONVERT = format_dst(1, 0, 1)


@dataclass
class PublicShares:
    """The correction words of ``N`` reports (struct of arrays).

    ``seed_cw`` ``(N, BITS, 16)`` uint8, ``ctrl_cw`` ``(N, BITS, 2)`` bool, ``w_inner``
    ``(N, BITS - 1, 2)`` uint64 (Field64), ``w_leaf`` the ``N`` Field255 pairs (a
    :class:`~protocol.core.poplar1.field.Field255Rows`; ``N`` lists of two ints are
    accepted too).
    """

    seed_cw: np.ndarray
    ctrl_cw: np.ndarray
    w_inner: np.ndarray
    w_leaf: "F.Field255Rows | list[list[int]]"

    def __len__(self) -> int:
        return self.seed_cw.shape[0]

    def take(self, idx: np.ndarray) -> "PublicShares":
        idx = np.asarray(idx)
        return PublicShares(self.seed_cw[idx], self.ctrl_cw[idx], self.w_inner[idx],
                            take_rows(self.w_leaf, idx))


def take_rows(rows, idx: np.ndarray):  # noqa: ANN001, ANN201
    """Rows ``idx`` of a :class:`~protocol.core.poplar1.field.Field255Rows` (one array
    step) or of a list."""
    if isinstance(rows, F.Field255Rows):
        return rows[np.asarray(idx, dtype=np.intp)]
    return [rows[int(i)] for i in idx]


@dataclass
class ReportCiphers:
    """The two fixed-key AES permutations of each report (``extend`` and ``convert``
    domain tags, the report's nonce as binder), derived once per report and aggregator
    and kept as their 16-byte keys (:class:`~protocol.core.poplar1.xof.RowKeyedAes`):
    32 bytes a report, the key schedule run again at each use."""

    ctx: bytes
    nonces: np.ndarray
    extend: RowKeyedAes
    convert: RowKeyedAes

    @classmethod
    def derive(cls, ctx: bytes, nonces: np.ndarray) -> "ReportCiphers":
        nonces = np.asarray(nonces, dtype=np.uint8)
        return cls(ctx, nonces, RowKeyedAes(fixed_keys(_DST_EXTEND + ctx, nonces)),
                   RowKeyedAes(fixed_keys(_DST_CONVERT + ctx, nonces)))

    def take(self, idx: np.ndarray) -> "ReportCiphers":
        return ReportCiphers(self.ctx, self.nonces[idx], self.extend.take(idx),
                             self.convert.take(idx))


def _sigma_counters(seeds: np.ndarray) -> np.ndarray:
    """``sigma(seed XOR le128(i))`` for ``i = 0, 1`` on ``(N, M, 16)`` uint8 seeds, as
    ``(N, M, 2, 2)`` uint64 (block, half): with ``seed = lo || hi`` (8 bytes each,
    little-endian), ``sigma(lo XOR i || hi) = hi || (hi XOR lo XOR i)``."""
    s = np.ascontiguousarray(seeds, dtype=np.uint8).view("<u8")      # (N, M, 2)
    lo, hi = s[..., 0], s[..., 1]
    out = np.empty(s.shape[:-1] + (2, 2), dtype=np.uint64)
    out[..., 0, 0] = hi
    out[..., 1, 0] = hi
    np.bitwise_xor(hi, lo, out=out[..., 0, 1])
    np.bitwise_xor(out[..., 0, 1], np.uint64(1), out=out[..., 1, 1])
    return out


def _hash_per_report(aes: RowKeyedAes, sig: np.ndarray) -> np.ndarray:
    """The circular correlation-robust hash ``AES(x) XOR x`` of every sigma'd block
    (``(N, ..., 2)`` uint64, from :func:`_sigma_counters`), report ``r``'s blocks under
    its own key: one AES call per report over all of that report's blocks (the key
    binds the report's nonce, so reports cannot share a call). Returns the hashed
    blocks as ``(N, ..., 16)`` uint8."""
    n = sig.shape[0]
    flat = np.ascontiguousarray(sig).reshape(n, -1).view(np.uint8)     # (N, width)
    enc = aes.encrypt_rows(flat)
    np.bitwise_xor(enc, flat, out=enc)
    return enc.reshape(sig.shape[:-1] + (16,))


def _split_ctrl(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The control bit is the low bit of a seed's first byte, then cleared."""
    t = (s[..., 0] & 1).astype(bool)
    if not s.flags.writeable:             # else in place: the callers pass fresh arrays
        s = s.copy()
    s[..., 0] &= 0xFE
    return s, t


def _extend_inner(ciphers: RowKeyedAes, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``extend`` on ``(N, M, 16)`` seeds: children ``(N, M, 2, 16)``, bits ``(N, M, 2)``."""
    out = _hash_per_report(ciphers, _sigma_counters(seeds))
    return _split_ctrl(out)


def _convert_inner(ciphers: RowKeyedAes, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``convert`` on ``(N, M, 16)`` seeds: next seeds ``(N, M, 16)`` and Field64 values
    ``(N, M, 2)``; the rare rejected value (probability ``2^-32`` per element) is drawn
    again from the scalar XOF."""
    out = _hash_per_report(ciphers, _sigma_counters(seeds))
    nxt = out[..., 0, :].copy()
    w = np.ascontiguousarray(out[..., 1, :]).view("<u8").astype(np.uint64, copy=False)  # (N, M, 2)
    bad = np.argwhere((w >= np.uint64(F.P64)).any(axis=-1))
    for r, m in bad:
        xof = XofFixedKeyAes128(seeds[r, m].tobytes(), b"", b"", cipher=ciphers.cipher(r))
        xof.next(KEY_SIZE)
        w[r, m] = xof.next_vec64(VALUE_LEN)
    return nxt, w


def _leaf_xof(ctx_dst: bytes, nonces: np.ndarray, seeds: np.ndarray, length: int) -> np.ndarray:
    """XofTurboShake128(seed, dst, nonce of its report) for every node of every report,
    ``(N, M, length)``: one batch over all ``N M`` nodes."""
    n, m = seeds.shape[:2]
    binders = np.repeat(np.asarray(nonces, dtype=np.uint8), m, axis=0)
    return turboshake_many(seeds.reshape(n * m, 16), ctx_dst, binders, length).reshape(n, m, length)


def _extend_leaf(ctx: bytes, nonces: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, m = seeds.shape[:2]
    out = _leaf_xof(_DST_EXTEND + ctx, nonces, seeds, 32).reshape(n, m, 2, 16)
    return _split_ctrl(out)


def _convert_leaf(ctx: bytes, nonces: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``convert`` at the leaf on ``(N, M, 16)`` seeds: next seeds ``(N, M, 16)`` and the
    nodes' Field255 pairs as limbs ``(10, N, M, 2)``. One TurboSHAKE128 read per node
    (the seed and two elements' bytes), masked to 255 bits and checked against ``p`` in
    numpy; the exact draw of the XOF only for a node with a rejected element
    (probability about ``2 * 19 / 2^255``)."""
    n, m = seeds.shape[:2]
    dst = _DST_CONVERT + ctx
    e = _leaf_xof(dst, nonces, seeds, KEY_SIZE + 2 * F.ENC255)
    nxt = e[:, :, :KEY_SIZE].copy()
    vals = F.limbs_from_bytes(e[:, :, KEY_SIZE:].reshape(n, m, VALUE_LEN, F.ENC255), mask=True)
    for r, j in np.argwhere(F.at_least_p(vals).any(axis=-1)):
        vals[:, r, j] = _leaf_values_exact(seeds[r, j], dst, nonces[r])
    return nxt, vals


def _leaf_values_exact(seed: np.ndarray, dst: bytes, nonce: np.ndarray) -> np.ndarray:
    """One node's two Field255 elements of the leaf ``convert`` drawn exactly by the
    scalar XOF (after its 16-byte seed), as limbs ``(10, 2)``: the path of a node whose
    batched draw rejected an element."""
    xof = XofTurboShake128(seed.tobytes(), dst, nonce.tobytes())
    xof.next(KEY_SIZE)
    return F.limbs_from_ints(xof.next_vec255(VALUE_LEN), (VALUE_LEN,))


def _leaf_shares_compiled(ctx: bytes, nonces: np.ndarray, child: np.ndarray, ctrl: np.ndarray,
                          w_leaf, agg_id: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """The leaf's ``convert`` and this aggregator's value shares in one compiled pass
    (:func:`jit.leaf_values`) over the TurboSHAKE128 output of every node: next seeds
    ``(N, M, 16)`` and shares ``(10, N, M, 2)``, the same as :func:`_convert_leaf`
    followed by the correction and the negation; a node with a rejected element is
    drawn again exactly."""
    dst = _DST_CONVERT + ctx
    e = _leaf_xof(dst, nonces, child, KEY_SIZE + 2 * F.ENC255)
    cw = F.leaf_limbs(w_leaf)                                          # (10, N, 2)
    y, bad = jit.leaf_values(e, ctrl, cw, agg_id)
    for r, j in np.argwhere(bad):
        v = _leaf_values_exact(child[r, j], dst, nonces[r])                  # (10, 2)
        if ctrl[r, j]:
            v = F.add255(v, cw[:, r])
        y[:, r, j] = F.neg255(v) if agg_id == 1 else v
    return e[:, :, :KEY_SIZE].copy(), y


def gen(bits: int, ctx: bytes, alpha: np.ndarray, beta_inner: np.ndarray,
        beta_leaf, nonces: np.ndarray, rand: np.ndarray,  # noqa: ANN001
        ciphers: ReportCiphers | None = None) -> tuple[PublicShares, np.ndarray]:
    """IDPF key generation for ``N`` clients.

    Args:
        alpha: ``(N, BITS)`` bool, each client's string (most significant bit first).
        beta_inner: ``(N, BITS - 1, 2)`` uint64, the inner levels' values.
        beta_leaf: the ``N`` Field255 pairs: limbs ``(10, N, 2)``, a
            :class:`~protocol.core.poplar1.field.Field255Rows` or ``N`` lists of ints.
        nonces: ``(N, 16)`` uint8.
        rand: ``(N, 32)`` uint8, the two keys.

    Returns:
        The public shares and the keys, ``(2, N, 16)`` uint8.
    """
    alpha = np.asarray(alpha, dtype=bool)
    n = alpha.shape[0]
    beta_leaf = F.leaf_limbs(beta_leaf)
    if alpha.shape != (n, bits) or beta_inner.shape != (n, bits - 1, VALUE_LEN) \
            or rand.shape != (n, RAND_SIZE) or nonces.shape != (n, 16) \
            or beta_leaf.shape != (F.LIMBS, n, VALUE_LEN):
        raise Poplar1UsageError("IDPF gen: inputs of the wrong shape")
    if ciphers is None:
        ciphers = ReportCiphers.derive(ctx, nonces)
    keys = np.stack([rand[:, :16], rand[:, 16:]]).copy()
    seed = keys.transpose(1, 0, 2).copy()                 # (N, 2, 16)
    ctrl = np.zeros((n, 2), dtype=bool)
    ctrl[:, 1] = True
    seed_cw = np.empty((n, bits, 16), dtype=np.uint8)
    ctrl_cw = np.empty((n, bits, 2), dtype=bool)
    w_inner = np.empty((n, max(bits - 1, 0), VALUE_LEN), dtype=np.uint64)
    w_leaf = None
    rows = np.arange(n)
    for level in range(bits):
        bit = alpha[:, level]
        keep = bit.astype(np.intp)
        lose = 1 - keep
        if level < bits - 1:
            s, t = _extend_inner(ciphers.extend, seed)       # (N, 2, 2, 16), (N, 2, 2)
        else:
            s, t = _extend_leaf(ctx, nonces, seed)
        scw = s[rows, 0, lose] ^ s[rows, 1, lose]
        ccw = np.stack([t[:, 0, 0] ^ t[:, 1, 0] ^ ~bit, t[:, 0, 1] ^ t[:, 1, 1] ^ bit], axis=1)
        x = s[rows[:, None], np.arange(2)[None, :], keep[:, None]]      # (N, 2, 16)
        x = x ^ (ctrl[:, :, None] * scw[:, None, :]).astype(np.uint8)
        tk = t[rows[:, None], np.arange(2)[None, :], keep[:, None]]     # (N, 2)
        ctrl = tk ^ (ctrl & ccw[rows, keep][:, None])
        if level < bits - 1:
            seed, w = _convert_inner(ciphers.convert, x)                # w (N, 2, 2)
            b = beta_inner[:, level]
            wcw = F.add64(F.sub64(b, w[:, 0]), w[:, 1])
            wcw = np.where(ctrl[:, 1:2], F.neg64(wcw), wcw)
            w_inner[:, level] = wcw
        else:
            seed, wl = _convert_leaf(ctx, nonces, x)              # (10, N, 2, 2)
            wcw = F.reduce255(beta_leaf - wl[:, :, 0] + wl[:, :, 1])
            wcw = np.where(ctrl[None, :, 1:2], F.neg255(wcw), wcw)
            w_leaf = F.Field255Rows.from_limbs(wcw)
        seed_cw[:, level] = scw
        ctrl_cw[:, level] = ccw
    return PublicShares(seed_cw, ctrl_cw, w_inner, w_leaf), keys


@dataclass
class EvalCache:
    """The nodes an aggregator reached at its last evaluated level, for a batch of
    reports: ``prefixes`` (tuples of bools, all of length ``level + 1``), their seeds
    ``(N, M, 16)`` and control bits ``(N, M)``."""

    level: int
    prefixes: list[tuple[bool, ...]]
    seeds: np.ndarray
    ctrl: np.ndarray


def _fused_inner() -> bool:
    """Whether an inner level runs as one compiled step (:func:`jit.idpf_inner_step`):
    numba and libcrypto are there and the AES backend is OpenSSL's."""
    return aes_backend() == "openssl" and jit.aes_rows_available()


def eval_batch(bits: int, ctx: bytes, agg_id: int, public: PublicShares, keys: np.ndarray,
               level: int, prefixes: Sequence[tuple[bool, ...]], ciphers: ReportCiphers,
               cache: EvalCache | None = None) -> tuple[np.ndarray | list, EvalCache]:
    """One aggregator's value shares at ``prefixes`` (all of length ``level + 1``,
    distinct) for ``N`` reports.

    Returns:
        ``(N, C, 2)`` uint64 on an inner level or Field255 limbs ``(10, N, C, 2)``
        (:mod:`~protocol.core.poplar1.field`) on the leaf, and the cache of the nodes at ``level`` (pass it to
        the next call: nodes whose ancestors it holds start from there).

    Raises:
        Poplar1UsageError: a bad level, a prefix of the wrong length or a repeated one.
    """
    if agg_id not in (0, 1):
        raise Poplar1UsageError("aggregator id out of range")
    if not 0 <= level < bits:
        raise Poplar1UsageError("level out of range")
    prefixes = [tuple(bool(b) for b in p) for p in prefixes]
    if len(set(prefixes)) != len(prefixes):
        raise Poplar1UsageError("prefixes must be unique")
    if any(len(p) != level + 1 for p in prefixes):
        raise Poplar1UsageError("incorrect prefix length")
    n = keys.shape[0]
    # where to start: the cache when it holds every ancestor at its level, else the root
    start, cur_pref, seeds, ctrl = -1, [()], keys[:, None, :].copy(), np.full((n, 1), bool(agg_id))
    if cache is not None and cache.level < level and cache.seeds.shape[0] == n:
        have = {p: i for i, p in enumerate(cache.prefixes)}
        if all(p[:cache.level + 1] in have for p in prefixes):
            start, cur_pref, seeds, ctrl = cache.level, cache.prefixes, cache.seeds, cache.ctrl
    y: np.ndarray | list = np.zeros((n, 0, VALUE_LEN), dtype=np.uint64)
    for depth in range(start + 1, level + 1):
        nodes = sorted({p[:depth + 1] for p in prefixes}) if depth < level else prefixes
        index = {p: i for i, p in enumerate(cur_pref)}
        parent_ids = sorted({index[p[:depth]] for p in nodes})
        pos = {q: i for i, q in enumerate(parent_ids)}
        par = np.asarray(parent_ids, dtype=np.intp)
        qi = np.asarray([pos[index[p[:depth]]] for p in nodes], dtype=np.intp)
        bi = np.asarray([int(p[depth]) for p in nodes], dtype=np.intp)
        if depth < bits - 1 and _fused_inner():
            nseeds, nctrl, yy, bad = jit.idpf_inner_step(
                seeds, ctrl, par, qi, bi, ciphers.extend.keys, ciphers.convert.keys,
                public.seed_cw[:, depth], public.ctrl_cw[:, depth], public.w_inner[:, depth],
                agg_id)
            if not bad.any():        # else (probability about 2^-32 a value) the numpy path
                seeds, ctrl, cur_pref = nseeds, nctrl, list(nodes)
                if depth == level:
                    y = yy
                continue
        if depth < bits - 1:
            s, t = _extend_inner(ciphers.extend, seeds[:, par])
        else:
            s, t = _extend_leaf(ctx, ciphers.nonces, seeds[:, par])
        pc = ctrl[:, par]                                               # (N, Q)
        # the seed correction where the parent's control bit is set, on 64-bit halves
        cw = np.ascontiguousarray(public.seed_cw[:, depth]).view("<u8")       # (N, 2)
        s64 = s.view("<u8")                                                # (N, Q, 2, 2)
        s64 ^= np.where(pc[:, :, None, None], cw[:, None, None, :], np.uint64(0))
        t = t ^ (pc[:, :, None] & public.ctrl_cw[:, depth][:, None, :])
        child = s[:, qi, bi]                                            # (N, M, 16)
        ctrl = t[:, qi, bi]                                             # (N, M)
        if depth < bits - 1:
            seeds, w = _convert_inner(ciphers.convert, child)
            if depth == level:
                corr = public.w_inner[:, depth][:, None, :]             # (N, 1, 2)
                y = np.where(ctrl[:, :, None], F.add64(w, corr), w)
                if agg_id == 1:
                    y = F.neg64(y)
        elif jit.available():
            seeds, y = _leaf_shares_compiled(ctx, ciphers.nonces, child, ctrl, public.w_leaf,
                                             agg_id)
        else:
            seeds, wl = _convert_leaf(ctx, ciphers.nonces, child)   # (10, N, M, 2)
            cw = F.leaf_limbs(public.w_leaf)[:, :, None, :]            # (10, N, 1, 2)
            y = np.where(ctrl[None, :, :, None], F.add255(wl, cw), wl)
            if agg_id == 1:
                y = F.neg255(y)
        cur_pref = list(nodes)
    return y, EvalCache(level, list(prefixes), seeds, ctrl)


# ----------------------------------------------------------------------- encoding
def public_share_size(bits: int) -> int:
    """Bytes of one encoded public share."""
    return (2 * bits + 7) // 8 + 16 * bits + F.ENC64 * VALUE_LEN * (bits - 1) + F.ENC255 * VALUE_LEN


def encode_public_share(public: PublicShares, r: int) -> bytes:
    """The draft's encoding of report ``r``'s public share: packed control bits
    (least significant bit first), the seeds, the inner payloads, the leaf payload."""
    ctrl = public.ctrl_cw[r].reshape(-1)
    packed = np.packbits(ctrl, bitorder="little").tobytes()
    leaf = public.w_leaf
    tail = leaf.raw[r].tobytes() if isinstance(leaf, F.Field255Rows) else F.encode255(leaf[r])
    return packed + public.seed_cw[r].tobytes() + F.encode64(public.w_inner[r]) + tail


def decode_public_shares(bits: int, encoded: Sequence[bytes]) -> PublicShares:
    """Decode ``N`` public shares, validating each completely (length, trailing bits of
    the control-bit field, field elements below their moduli).

    Raises:
        Poplar1DecodeError: the first malformed share, naming its index.
    """
    size = public_share_size(bits)
    n = len(encoded)
    for i, e in enumerate(encoded):
        if not isinstance(e, (bytes, bytearray)) or len(e) != size:
            raise Poplar1DecodeError(f"public share {i}: expected {size} bytes")
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).reshape(n, size)
    nctrl = (2 * bits + 7) // 8
    ctrl = np.unpackbits(buf[:, :nctrl], axis=1, bitorder="little")
    if ctrl[:, 2 * bits:].any():
        bad = int(np.argmax(ctrl[:, 2 * bits:].any(axis=1)))
        raise Poplar1DecodeError(f"public share {bad}: trailing control bits")
    ctrl_cw = ctrl[:, :2 * bits].reshape(n, bits, 2).astype(bool)
    off = nctrl
    seed_cw = buf[:, off:off + 16 * bits].reshape(n, bits, 16).copy()
    off += 16 * bits
    inner = buf[:, off:off + 16 * (bits - 1)].copy().view("<u8").astype(np.uint64)
    if (inner >= np.uint64(F.P64)).any():
        bad = int(np.argmax((inner >= np.uint64(F.P64)).any(axis=1)))
        raise Poplar1DecodeError(f"public share {bad}: Field64 element at or above the modulus")
    off += 16 * (bits - 1)
    leaf = buf[:, off:].copy()
    bad = F.at_least_p(F.limbs_from_bytes(leaf.reshape(n, VALUE_LEN, F.ENC255))).any(axis=-1)
    if bad.any():
        raise Poplar1DecodeError(f"public share {int(np.argmax(bad))}: Field255 element at or "
                                 "above the modulus")
    return PublicShares(seed_cw, ctrl_cw, inner.reshape(n, bits - 1, VALUE_LEN),
                        F.Field255Rows(leaf))
