"""The Poplar1 VDAF of draft-irtf-cfrg-vdaf-20, batched over reports.

Theory of operation. A client holds a ``BITS``-bit string. :meth:`Poplar1.shard_batch`
draws, per client, a random authenticator ``k_l`` for every level, programs the IDPF
(:mod:`protocol.core.poplar1.idpf`) with the value ``(1, k_l)`` on the path of its
string at level ``l``, and splits correlated randomness for the sketch: per level, shares
of ``A = -2a + k`` and ``B = a^2 + b - a k + c`` for a triple ``(a, b, c)`` whose two
additive shares each aggregator re-derives from its 32-byte seed (Boneh et al. 2021,
appendix C.4; the sketch is their section 4.2). A report is the public share (the IDPF's correction words) and one input
share per aggregator.

The two aggregators evaluate a level for a list of candidate prefixes (the aggregation
parameter ``(level, prefixes)``; prefixes sorted and distinct, each level above the last
and each prefix extending one of the last level's). Each evaluates its IDPF key at the
prefixes, giving shares of ``(data_i, auth_i)``, draws the verification randomness
``r_i`` from the 32-byte verify key they share (bound to the nonce and level), and sends
its share of the sketch ``(a + sum data_i r_i, b + sum data_i r_i^2, c + sum auth_i r_i)``
(round 1). The sum of the two shares gives the sketch ``(z, z*, z**)``; each then sends
``agg_id (z^2 - z* - z**) + A z + B`` (round 2), and the report is accepted exactly when
these two shares sum to zero: their sum is ``Z^2 - Z* - Z** + k Z`` over the unmasked
sums, zero for an honest report and otherwise a nonzero polynomial of degree 2 in the
unpredictable ``r_i``, so it vanishes with probability at most ``2 / |F|`` per report
(Schwartz-Zippel) when the data is not one-hot with the authenticated weight (two votes, a wrong weight, an inconsistent public share). Accepted
reports' data shares are summed per prefix (the aggregate share); the two aggregate shares
sum to the count of each prefix.

Batching. Everything takes ``N`` reports as arrays (:class:`InputShares`,
:class:`~protocol.core.poplar1.idpf.PublicShares`); the one-report methods named as in
the draft (:meth:`Poplar1.shard`, :func:`verify_one`) wrap the batch ones, encode and
decode as the draft, and are what the conformance tests drive. A sketch that fails
raises :class:`Poplar1VerificationError` in the one-report API; in the batch API the
report is marked rejected (``accepted`` mask) and left out of the aggregate, as a DAP
aggregator drops it.

Randomness. The caller passes each client's ``RAND_SIZE`` random bytes and 16-byte
nonce (from ``os.urandom`` in production; a seeded source only in a simulation that
asks for it by name, :mod:`protocol.core.randomness`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from protocol.core.poplar1 import field as F
from protocol.core.poplar1 import idpf as I
from protocol.core.poplar1 import jit
from protocol.core.poplar1.errors import (Poplar1DecodeError, Poplar1UsageError,
                                          Poplar1VerificationError)
from protocol.core.poplar1.keccak import SpongeBatch
from protocol.core.poplar1.xof import (XofTurboShake128, format_dst, turboshake_many,
                                       turboshake_streams)

__all__ = ["Poplar1", "InputShares", "Reports", "Aggregator", "AggParam", "is_valid",
           "encode_agg_param", "decode_agg_param", "sketch_message", "sketch_accepts",
           "verify_one", "USAGE_SHARD_RAND", "USAGE_CORR_INNER", "USAGE_CORR_LEAF",
           "USAGE_VERIFY_RAND"]

USAGE_SHARD_RAND = 1
USAGE_CORR_INNER = 2
USAGE_CORR_LEAF = 3
USAGE_VERIFY_RAND = 4

#: ``(level, prefixes)``: prefixes are tuples of bools of length ``level + 1``
AggParam = tuple[int, tuple[tuple[bool, ...], ...]]


@dataclass
class InputShares:
    """One aggregator's input shares of ``N`` reports: IDPF keys ``(N, 16)``,
    correlated-randomness seeds ``(N, 32)``, the inner levels' ``(A, B)`` shares
    ``(N, BITS - 1, 2)`` uint64 and the leaf's (``N`` Field255 pairs: a
    :class:`~protocol.core.poplar1.field.Field255Rows`, or ``N`` lists of two ints)."""

    key: np.ndarray
    corr_seed: np.ndarray
    corr_inner: np.ndarray
    corr_leaf: "F.Field255Rows | list[list[int]]"

    def __len__(self) -> int:
        return self.key.shape[0]

    def take(self, idx: np.ndarray) -> "InputShares":
        return InputShares(self.key[idx], self.corr_seed[idx], self.corr_inner[idx],
                           I.take_rows(self.corr_leaf, idx))


@dataclass
class Reports:
    """``N`` clients' reports: nonces ``(N, 16)``, public shares, two input shares."""

    nonces: np.ndarray
    public: I.PublicShares
    shares: tuple[InputShares, InputShares]

    def __len__(self) -> int:
        return self.nonces.shape[0]


class Poplar1:
    """Poplar1 with ``bits``-bit strings under the application context ``ctx``."""

    ID = 0x00000006
    NONCE_SIZE = 16
    SHARES = 2
    ROUNDS = 2
    VERIFY_KEY_SIZE = XofTurboShake128.SEED_SIZE
    RAND_SIZE = 3 * XofTurboShake128.SEED_SIZE + I.RAND_SIZE

    def __init__(self, bits: int, ctx: bytes = b"") -> None:
        if not 1 <= bits < (1 << 16):
            raise Poplar1UsageError("bits must be in [1, 2^16)")
        self.bits = bits
        self.ctx = bytes(ctx)

    def dst(self, usage: int) -> bytes:
        """The domain separation tag of ``usage`` (VDAF class 0, algorithm 6)."""
        return format_dst(0, self.ID, usage) + self.ctx

    def field_size(self, level: int) -> int:
        return F.ENC255 if level == self.bits - 1 else F.ENC64

    # ------------------------------------------------------------------ sizes
    def public_share_size(self) -> int:
        return I.public_share_size(self.bits)

    def input_share_size(self) -> int:
        return 16 + 32 + F.ENC64 * 2 * (self.bits - 1) + F.ENC255 * 2

    # ------------------------------------------------------------------ client
    def shard_batch(self, measurements: np.ndarray, nonces: np.ndarray,
                    rands: np.ndarray, *, weights: np.ndarray | None = None) -> Reports:
        """Shard ``N`` measurements.

        Args:
            measurements: ``(N, BITS)`` bool, most significant bit first.
            nonces: ``(N, 16)`` uint8.
            rands: ``(N, RAND_SIZE)`` uint8.
            weights: ``(N, BITS)`` ints, the value each client programs on its path
                (authenticated as ``weight * k``). Honest clients use 1 (the default);
                any other weight is a malicious client, which the sketch rejects -- the
                attack catalogue plays one with it.

        Raises:
            Poplar1UsageError: inputs of the wrong shape.
        """
        meas = np.asarray(measurements, dtype=bool)
        nonces = np.ascontiguousarray(nonces, dtype=np.uint8)
        rands = np.ascontiguousarray(rands, dtype=np.uint8)
        n = meas.shape[0]
        if meas.shape != (n, self.bits) or nonces.shape != (n, self.NONCE_SIZE) \
                or rands.shape != (n, self.RAND_SIZE):
            raise Poplar1UsageError("shard: measurement, nonce or rand of the wrong size")
        b = self.bits
        idpf_rand = rands[:, :I.RAND_SIZE]
        corr_seeds = [rands[:, 32:64], rands[:, 64:96]]
        shard_seed = rands[:, 96:128]
        k_inner = np.empty((n, b - 1), dtype=np.uint64)
        ab_inner = np.empty((n, b - 1, 2), dtype=np.uint64)   # shares for aggregator 1
        d_shard = self.dst(USAGE_SHARD_RAND)
        span = 8 * (b - 1) + 32 + 16 * (b - 1) + 64
        # the stream is read once per client: k (inner), k (leaf), the (A, B) shares of
        # aggregator 1 (inner, leaf); a client whose stream rejected an element
        # (probability about 2^-32 per Field64 element) is drawn again element by element
        buf = turboshake_many(shard_seed, d_shard, nonces, span)
        k_inner[:] = buf[:, :8 * (b - 1)].copy().view("<u8").astype(np.uint64)
        off = 8 * (b - 1) + 32
        ab_inner[:] = buf[:, off:off + 16 * (b - 1)].copy().view("<u8").astype(
            np.uint64).reshape(n, b - 1, 2)
        k_leaf = F.limbs_from_bytes(buf[:, 8 * (b - 1):off], mask=True)          # (10, N)
        ab_leaf1 = F.limbs_from_bytes(buf[:, span - 64:].reshape(n, 2, F.ENC255), mask=True)
        bad = (k_inner >= np.uint64(F.P64)).any(axis=1) | \
            (ab_inner >= np.uint64(F.P64)).reshape(n, -1).any(axis=1) | \
            F.at_least_p(k_leaf) | F.at_least_p(ab_leaf1).any(axis=-1)
        for r in np.flatnonzero(bad):
            xof = XofTurboShake128(shard_seed[r].tobytes(), d_shard, nonces[r].tobytes())
            k_inner[r] = xof.next_vec64(b - 1)
            k_leaf[:, r] = F.limbs_from_ints(xof.next_vec255(1)[0], ())
            ab_inner[r] = xof.next_vec64(2 * (b - 1)).reshape(b - 1, 2)
            ab_leaf1[:, r] = F.limbs_from_ints(xof.next_vec255(2), (2,))
        one = F.const255(1, (n,))
        if weights is None:
            beta_inner = np.stack([np.ones((n, b - 1), dtype=np.uint64), k_inner], axis=-1)
            beta_leaf = np.stack([one, k_leaf], axis=-1)                      # (10, N, 2)
        else:
            w = np.asarray(weights)
            if w.shape != (n, b):
                raise Poplar1UsageError("shard: weights of the wrong shape")
            wi = (w[:, :b - 1].astype(object) % F.P64).astype(np.uint64)
            beta_inner = np.stack([wi, F.mul64(wi, k_inner)], axis=-1)
            wl = F.limbs_from_ints([int(x) % F.P255 for x in w[:, b - 1]], (n,))
            beta_leaf = np.stack([wl, F.mul255(wl, k_leaf)], axis=-1)
        public, keys = I.gen(b, self.ctx, meas, beta_inner, beta_leaf, nonces, idpf_rand)
        # the (a, b, c) triples: the sum of both aggregators' expansions
        abc_inner = np.zeros((n, b - 1, 3), dtype=np.uint64)
        abc_leaf = F.zeros255((n, 3))
        d_in, d_leaf = self.dst(USAGE_CORR_INNER), self.dst(USAGE_CORR_LEAF)
        for j in (0, 1):
            # each aggregator's expansion, read once per client; a client whose stream
            # rejected an element is expanded again element by element
            binders = np.concatenate([np.full((n, 1), j, dtype=np.uint8), nonces], axis=1)
            lv = F.limbs_from_bytes(turboshake_many(corr_seeds[j], d_leaf, binders, 96).reshape(
                n, 3, F.ENC255), mask=True)
            for r in np.flatnonzero(F.at_least_p(lv).any(axis=-1)):
                lv[:, r] = F.limbs_from_ints(XofTurboShake128(
                    corr_seeds[j][r].tobytes(), d_leaf, binders[r].tobytes()).next_vec255(3), (3,))
            abc_leaf = F.add255(abc_leaf, lv)
            v = turboshake_many(corr_seeds[j], d_in, binders, 24 * (b - 1)).view(
                "<u8").astype(np.uint64).reshape(n, b - 1, 3)
            for r in np.flatnonzero((v >= np.uint64(F.P64)).reshape(n, -1).any(axis=1)):
                v[r] = XofTurboShake128(corr_seeds[j][r].tobytes(), d_in,
                                        bytes([j]) + nonces[r].tobytes()
                                        ).next_vec64(3 * (b - 1)).reshape(b - 1, 3)
            abc_inner = F.add64(abc_inner, v)
        a, bb, c = abc_inner[..., 0], abc_inner[..., 1], abc_inner[..., 2]
        A = F.add64(F.neg64(F.add64(a, a)), k_inner)
        B = F.add64(F.sub64(F.add64(F.mul64(a, a), bb), F.mul64(a, k_inner)), c)
        ab0_inner = F.sub64(np.stack([A, B], axis=-1), ab_inner)
        la, lb, lc = abc_leaf[..., 0], abc_leaf[..., 1], abc_leaf[..., 2]
        A_l = F.reduce255(k_leaf - 2 * la)
        B_l = F.reduce255(F.mul255(la, F.sub255(la, k_leaf)) + lb + lc)
        ab_leaf0 = F.Field255Rows.from_limbs(F.sub255(np.stack([A_l, B_l], axis=-1), ab_leaf1))
        ab_leaf1 = F.Field255Rows.from_limbs(ab_leaf1)
        s0 = InputShares(keys[0], corr_seeds[0].copy(), ab0_inner, ab_leaf0)
        s1 = InputShares(keys[1], corr_seeds[1].copy(), ab_inner, ab_leaf1)
        return Reports(nonces.copy(), public, (s0, s1))

    def shard(self, measurement: Sequence[bool], nonce: bytes,
              rand: bytes) -> tuple[bytes, list[bytes]]:
        """The draft's ``shard`` for one measurement, encoded: ``(public_share,
        [input_share_0, input_share_1])``.

        Raises:
            Poplar1UsageError: wrong sizes.
        """
        if len(nonce) != self.NONCE_SIZE or len(rand) != self.RAND_SIZE \
                or len(measurement) != self.bits:
            raise Poplar1UsageError("shard: measurement, nonce or rand of the wrong size")
        rep = self.shard_batch(np.asarray([measurement], dtype=bool),
                               np.frombuffer(nonce, dtype=np.uint8)[None, :],
                               np.frombuffer(rand, dtype=np.uint8)[None, :])
        return (I.encode_public_share(rep.public, 0),
                [self.encode_input_share(rep.shares[j], 0) for j in (0, 1)])

    # ------------------------------------------------------------------ encoding
    def encode_input_share(self, s: InputShares, r: int) -> bytes:
        leaf = s.corr_leaf
        tail = leaf.raw[r].tobytes() if isinstance(leaf, F.Field255Rows) \
            else F.encode255(leaf[r])
        return s.key[r].tobytes() + s.corr_seed[r].tobytes() + F.encode64(s.corr_inner[r]) + tail

    def decode_input_shares(self, encoded: Sequence[bytes]) -> InputShares:
        """Decode ``N`` input shares (of one aggregator), validating each completely.

        Raises:
            Poplar1DecodeError: the first malformed share, naming its index.
        """
        size, b = self.input_share_size(), self.bits
        n = len(encoded)
        for i, e in enumerate(encoded):
            if not isinstance(e, (bytes, bytearray)) or len(e) != size:
                raise Poplar1DecodeError(f"input share {i}: expected {size} bytes")
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8).reshape(n, size)
        inner = buf[:, 48:48 + 16 * (b - 1)].copy().view("<u8").astype(np.uint64)
        if (inner >= np.uint64(F.P64)).any():
            bad = int(np.argmax((inner >= np.uint64(F.P64)).any(axis=1)))
            raise Poplar1DecodeError(f"input share {bad}: Field64 element at or above the modulus")
        leaf = buf[:, 48 + 16 * (b - 1):].copy()
        bad = F.at_least_p(F.limbs_from_bytes(leaf.reshape(n, 2, F.ENC255))).any(axis=-1)
        if bad.any():
            raise Poplar1DecodeError(f"input share {int(np.argmax(bad))}: Field255 element at "
                                     "or above the modulus")
        return InputShares(buf[:, :16].copy(), buf[:, 16:48].copy(),
                           inner.reshape(n, b - 1, 2), F.Field255Rows(leaf))

    def decode_public_shares(self, encoded: Sequence[bytes]) -> I.PublicShares:
        return I.decode_public_shares(self.bits, encoded)

    def encode_agg_param(self, agg_param: AggParam) -> bytes:
        return encode_agg_param(agg_param)

    def decode_agg_param(self, encoded: bytes) -> AggParam:
        level, prefixes = decode_agg_param(encoded)
        if level >= self.bits:
            raise Poplar1DecodeError("aggregation parameter: level out of range")
        return level, prefixes


# ---------------------------------------------------------------------- agg param
def encode_agg_param(agg_param: AggParam) -> bytes:
    """``be16(level) || be32(count) || prefixes`` packed most significant bit first,
    ``ceil((level + 1) / 8)`` bytes each."""
    level, prefixes = agg_param
    if not 0 <= level < (1 << 16) or len(prefixes) >= (1 << 32):
        raise Poplar1UsageError("aggregation parameter out of range")
    out = bytearray(level.to_bytes(2, "big") + len(prefixes).to_bytes(4, "big"))
    width = (level + 1 + 7) // 8
    for p in prefixes:
        if len(p) != level + 1:
            raise Poplar1UsageError("incorrect prefix length")
        bits = np.zeros(8 * width, dtype=np.uint8)
        bits[:level + 1] = np.asarray(p, dtype=np.uint8)
        out += np.packbits(bits).tobytes()
    return bytes(out)


def decode_agg_param(encoded: bytes) -> AggParam:
    """Inverse of :func:`encode_agg_param`, refusing trailing bits and bytes.

    Raises:
        Poplar1DecodeError: a malformed encoding.
    """
    if not isinstance(encoded, (bytes, bytearray)) or len(encoded) < 6:
        raise Poplar1DecodeError("aggregation parameter too short")
    level = int.from_bytes(encoded[:2], "big")
    count = int.from_bytes(encoded[2:6], "big")
    width = (level + 1 + 7) // 8
    if len(encoded) != 6 + width * count:
        raise Poplar1DecodeError("aggregation parameter of the wrong length")
    if count == 0:
        return level, ()
    bits = np.unpackbits(np.frombuffer(bytes(encoded[6:]), dtype=np.uint8).reshape(count, width),
                         axis=1)
    if bits[:, level + 1:].any():
        raise Poplar1DecodeError("trailing bits in prefix")
    return level, tuple(tuple(bool(x) for x in row[:level + 1]) for row in bits)


def is_valid(agg_param: AggParam, previous: Sequence[AggParam]) -> bool:
    """The draft's validity rule: prefixes sorted and distinct; the level above the
    previous one; every prefix extends one of the previous level's."""
    level, prefixes = agg_param
    if any(prefixes[i - 1] >= prefixes[i] for i in range(1, len(prefixes))):
        return False
    if not previous:
        return True
    last_level, last = previous[-1]
    if level <= last_level:
        return False
    last_set = set(last)
    return all(p[:last_level + 1] in last_set for p in prefixes)


# ---------------------------------------------------------------------- aggregator
class Aggregator:
    """One aggregator's preparation of a batch of reports, level after level.

    It keeps, per report, its IDPF nodes of the last evaluated level and its position
    in the correlated-randomness stream, so a level costs one IDPF step and 24 bytes of
    stream per report (not a walk from the root).

    Raises:
        Poplar1UsageError: an aggregation parameter that breaks :func:`is_valid`, or a
            message out of order.
    """

    def __init__(self, vdaf: Poplar1, agg_id: int, verify_key: bytes, nonces: np.ndarray,
                 public: I.PublicShares, share: InputShares) -> None:
        if agg_id not in (0, 1):
            raise Poplar1UsageError("aggregator id out of range")
        if len(verify_key) != vdaf.VERIFY_KEY_SIZE:
            raise Poplar1UsageError("verify key of the wrong size")
        n = nonces.shape[0]
        if len(public) != n or len(share) != n:
            raise Poplar1UsageError("reports of different counts")
        self.vdaf, self.agg_id, self.verify_key = vdaf, agg_id, bytes(verify_key)
        self.nonces, self.public, self.share = nonces, public, share
        self._ciphers: I.ReportCiphers | None = None
        self._parked: dict[str, Any] = {}
        self.previous: list[AggParam] = []
        self._cache: I.EvalCache | None = None
        self._streams = None
        self._streams_pos = 0
        self._corr_dirty = np.zeros(n, dtype=bool)
        self._state: tuple | None = None

    def __len__(self) -> int:
        return self.nonces.shape[0]

    @property
    def ciphers(self) -> I.ReportCiphers:
        """The reports' fixed-key AES keys (derived on first use and kept: 32 bytes a
        report, :class:`~protocol.core.poplar1.idpf.ReportCiphers`)."""
        if self._ciphers is None:
            self._ciphers = I.ReportCiphers.derive(self.vdaf.ctx, self.nonces)
        return self._ciphers

    def park(self) -> dict[str, np.ndarray]:
        """Hand over the per-report state kept between levels -- the IDPF nodes of the
        last level and the correlated-randomness sponges -- as arrays, and drop it
        (the AES keys, 32 bytes a report, stay): a caller short of memory keeps the arrays out of core
        and gives them back with :meth:`unpark` before the next level. Without them
        the next level is still exact (the nodes are walked again from the root and
        the streams drawn again from their start), only slower. The round state of the
        current level is kept."""
        out: dict[str, np.ndarray] = {}
        self._parked = {}
        if self._cache is not None:
            out["cache_seeds"], out["cache_ctrl"] = self._cache.seeds, self._cache.ctrl
            self._parked["cache"] = (self._cache.level, self._cache.prefixes)
            self._cache = None
        if isinstance(self._streams, SpongeBatch):
            out["sponge_state"], _, pos = self._streams.snapshot()
            self._parked["sponge"] = (pos, self._streams_pos)
            self._streams = None
        if self._ciphers is not None:      # the ``contexts`` backend's (0.95 KB each)
            self._ciphers.extend.drop_contexts()
            self._ciphers.convert.drop_contexts()
        return out

    def unpark(self, arrays: dict[str, np.ndarray]) -> None:
        """The state :meth:`park` handed over, back (the arrays of that call)."""
        n = len(self)
        if "cache" in self._parked and "cache_seeds" in arrays:
            level, prefixes = self._parked["cache"]
            seeds, ctrl = np.asarray(arrays["cache_seeds"]), np.asarray(arrays["cache_ctrl"])
            if seeds.shape != (n, len(prefixes), 16) or ctrl.shape != (n, len(prefixes)):
                raise Poplar1UsageError("parked IDPF nodes of the wrong shape")
            self._cache = I.EvalCache(level, prefixes, seeds, ctrl.astype(bool))
        if "sponge" in self._parked and "sponge_state" in arrays:
            pos, stream_pos = self._parked["sponge"]
            sponge = SpongeBatch.resume(arrays["sponge_state"], None, pos)
            if len(sponge) != n:
                raise Poplar1UsageError("parked sponges of the wrong count")
            self._streams, self._streams_pos = sponge, stream_pos
        self._parked = {}

    def _verify_rand(self, level: int, count: int):  # noqa: ANN202
        d = self.vdaf.dst(USAGE_VERIFY_RAND)
        lb = level.to_bytes(2, "big")
        key = self.verify_key
        n = len(self)
        binders = np.empty((n, 18), dtype=np.uint8)
        binders[:, :16] = self.nonces
        binders[:, 16:] = np.frombuffer(lb, dtype=np.uint8)
        seeds = np.broadcast_to(np.frombuffer(key, dtype=np.uint8), (n, len(key)))
        if level == self.vdaf.bits - 1:
            # 32 * count bytes per report in one pass, masked to 255 bits and checked
            # against p in numpy; a report with a rejected element drawn again exactly
            raw = turboshake_many(seeds, d, binders, F.ENC255 * count).reshape(n, count, F.ENC255)
            r255 = F.limbs_from_bytes(raw, mask=True)                        # (10, N, C)
            for r in np.flatnonzero(F.at_least_p(r255).any(axis=-1)):
                r255[:, r] = F.limbs_from_ints(
                    XofTurboShake128(key, d, self.nonces[r].tobytes() + lb).next_vec255(count),
                    (count,))
            return r255
        # the common case in one pass: 8 * count bytes per report; a report with a
        # rejected element (probability about count * 2^-32) is drawn again exactly
        out = turboshake_many(seeds, d, binders, 8 * count).view("<u8").astype(
            np.uint64).reshape(n, count)
        for r in np.flatnonzero((out >= np.uint64(F.P64)).any(axis=1)):
            out[r] = XofTurboShake128(key, d, self.nonces[r].tobytes() + lb).next_vec64(count)
        return out

    def _corr_inner(self, level: int) -> np.ndarray:
        """Elements ``3 level .. 3 level + 2`` of each report's correlated-randomness
        stream. The streams of all reports are kept between levels and advance in
        lockstep, 24 bytes a level (:func:`turboshake_streams`: one numpy sponge over
        all reports); a report whose stream ever rejected an element is drawn exactly
        from the start (rare: probability about ``2^-32`` per element)."""
        d = self.vdaf.dst(USAGE_CORR_INNER)
        want = 24 * level
        n = len(self)
        if self._streams is None or self._streams_pos > want:
            binders = np.concatenate([np.full((n, 1), self.agg_id, dtype=np.uint8),
                                      self.nonces], axis=1)
            self._streams = turboshake_streams(self.share.corr_seed, d, binders)
            self._streams_pos = 0
        skip = want - self._streams_pos
        if skip:
            self._streams.read(skip)
        out = self._streams.read(24).view("<u8").astype(np.uint64).reshape(n, 3)
        self._streams_pos = want + 24
        # once a stream rejected an element its positions shift: exact from then on
        self._corr_dirty |= (out >= np.uint64(F.P64)).any(axis=1)
        for r in np.flatnonzero(self._corr_dirty):
            x = XofTurboShake128(self.share.corr_seed[r].tobytes(), d,
                                 bytes([self.agg_id]) + self.nonces[r].tobytes())
            x.next_vec64(3 * level)
            out[r] = x.next_vec64(3)
        return out

    def verify_init(self, agg_param: AggParam, *, leaf_limbs: bool = False):  # noqa: ANN201
        """Round 1: this aggregator's sketch shares, ``(N, 3)`` uint64 on an inner level,
        ``N`` triples of Field255 ints on the leaf (with ``leaf_limbs``, the limbs ``(10,
        N, 3)`` of :mod:`~protocol.core.poplar1.field` instead: no conversion to Python
        integers, for callers that exchange bytes).

        Raises:
            Poplar1UsageError: an invalid aggregation parameter.
        """
        level, prefixes = agg_param
        prefixes = tuple(tuple(bool(b) for b in p) for p in prefixes)
        if not 0 <= level < self.vdaf.bits or not is_valid((level, prefixes), self.previous):
            raise Poplar1UsageError("invalid aggregation parameter for this batch")
        value, self._cache = I.eval_batch(self.vdaf.bits, self.vdaf.ctx, self.agg_id, self.public,
                                          self.share.key, level, prefixes, self.ciphers,
                                          self._cache)
        self.previous.append((level, prefixes))
        rand = self._verify_rand(level, len(prefixes))
        n = len(self)
        if level < self.vdaf.bits - 1:
            abc = self._corr_inner(level)
            data, auth = value[..., 0], value[..., 1]
            if jit.available():
                sketch = jit.sketch_inner(data, auth, rand, abc)
            else:
                r2 = F.mul64(rand, rand)
                sketch = np.stack([F.add64(abc[:, 0], F.dot64(data, rand)),
                                   F.add64(abc[:, 1], F.dot64(data, r2)),
                                   F.add64(abc[:, 2], F.dot64(auth, rand))], axis=1)
            AB = self.share.corr_inner[:, level]
            self._state = ("evaluate", agg_param, AB, data)
            return sketch
        d = self.vdaf.dst(USAGE_CORR_LEAF)
        binders = np.concatenate([np.full((n, 1), self.agg_id, dtype=np.uint8), self.nonces],
                                 axis=1)
        abc = F.limbs_from_bytes(turboshake_many(self.share.corr_seed, d, binders, 96).reshape(
            n, 3, F.ENC255), mask=True)                                      # (10, N, 3)
        for r in np.flatnonzero(F.at_least_p(abc).any(axis=-1)):
            # a rejected element (19 / 2^255): drawn exactly
            abc[:, r] = F.limbs_from_ints(XofTurboShake128(
                self.share.corr_seed[r].tobytes(), d, binders[r].tobytes()).next_vec255(3), (3,))
        data, auth = value[..., 0], value[..., 1]                            # (10, N, C)
        if jit.available():
            sketch = jit.sketch_leaf(value, rand, abc)
        else:
            r2 = F.mul255(rand, rand)
            sketch = np.stack([F.add255(abc[..., 0], F.dot255(data, rand)),
                               F.add255(abc[..., 1], F.dot255(data, r2)),
                               F.add255(abc[..., 2], F.dot255(auth, rand))], axis=-1)
        self._state = ("evaluate", agg_param, F.leaf_limbs(self.share.corr_leaf), data)
        return sketch if leaf_limbs else F.limbs_to_ints(sketch)

    def verify_next(self, message, *, leaf_limbs: bool = False):  # noqa: ANN001, ANN201
        """Round 2: from the combined sketch (:func:`sketch_message`), this aggregator's
        share of ``agg_id (z^2 - z* - z**) + A z + B``: ``(N,)`` uint64 or ``N`` ints
        (with ``leaf_limbs``, limbs ``(10, N)`` on the leaf).

        Raises:
            Poplar1UsageError: called out of order or with a message of the wrong shape.
        """
        if self._state is None or self._state[0] != "evaluate":
            raise Poplar1UsageError("verify_next before verify_init")
        _, agg_param, AB, data = self._state
        level = agg_param[0]
        if level < self.vdaf.bits - 1:
            m = np.asarray(message, dtype=np.uint64)
            if m.shape != (len(self), 3):
                raise Poplar1UsageError("sketch message of the wrong shape")
            z, zs, zss = m[:, 0], m[:, 1], m[:, 2]
            out = F.add64(F.mul64(AB[:, 0], z), AB[:, 1])
            if self.agg_id == 1:
                out = F.add64(out, F.sub64(F.sub64(F.mul64(z, z), zs), zss))
        else:
            m = _leaf_message(message, len(self), 3)                          # (10, N, 3)
            z, zs, zss = m[..., 0], m[..., 1], m[..., 2]
            out = F.add255(F.mul255(AB[..., 0], z), AB[..., 1])
            if self.agg_id == 1:
                out = F.add255(out, F.reduce255(F.mul255(z, z) - zs - zss))
            if not leaf_limbs:
                out = F.limbs_to_ints(out)
        self._state = ("reveal", agg_param, None, data)
        return out

    def out_shares(self, accepted: np.ndarray):  # noqa: ANN201
        """The output shares (data shares at every prefix) of the accepted reports.

        Raises:
            Poplar1UsageError: before the sketch was revealed.
        """
        if self._state is None or self._state[0] != "reveal":
            raise Poplar1UsageError("output shares before the sketch was verified")
        _, agg_param, _, data = self._state
        self._state = None
        idx = np.flatnonzero(np.asarray(accepted, dtype=bool))
        if data.dtype == np.uint64:
            return data[idx]
        return F.limbs_to_ints(data[:, idx])

    def aggregate(self, accepted: np.ndarray):  # noqa: ANN201
        """This aggregator's aggregate share: the sum of the accepted reports' output
        shares per prefix (``(C,)`` uint64, or ``C`` ints on the leaf)."""
        if self._state is None or self._state[0] != "reveal":
            raise Poplar1UsageError("output shares before the sketch was verified")
        data = self._state[3]
        count = len(self._state[1][1])
        if data.dtype == np.uint64:
            out = self.out_shares(accepted)
            if out.shape[0] == 0:
                return np.zeros(count, dtype=np.uint64)
            return F.sum64(out, axis=0)
        self._state = None
        idx = np.flatnonzero(np.asarray(accepted, dtype=bool))
        return F.limbs_to_ints(F.sum255(data[:, idx], axis=0))


def sketch_message(level: int, bits: int, share0, share1):  # noqa: ANN001, ANN201
    """The round-1 message: the sum of the two sketch shares."""
    if level < bits - 1:
        return F.add64(np.asarray(share0, dtype=np.uint64), np.asarray(share1, dtype=np.uint64))
    n = _leaf_count(share0)
    if _leaf_count(share1) != n:
        raise Poplar1UsageError("sketch shares of different counts")
    return F.limbs_to_ints(F.add255(_leaf_message(share0, n, 3), _leaf_message(share1, n, 3)))


def sketch_accepts(level: int, bits: int, share0, share1) -> np.ndarray:  # noqa: ANN001
    """Which reports pass: the two round-2 shares sum to zero."""
    if level < bits - 1:
        return F.add64(np.asarray(share0, dtype=np.uint64), np.asarray(share1, dtype=np.uint64)) == 0
    n = _leaf_count(share0)
    if _leaf_count(share1) != n:
        raise Poplar1UsageError("verifier shares of different counts")
    if n == 0:
        return np.zeros(0, dtype=bool)
    s = F.add255(_leaf_elements(share0, n), _leaf_elements(share1, n))
    return ~s.any(axis=0)


def _leaf_count(values) -> int:  # noqa: ANN001
    """How many elements (or rows) a leaf message holds: ints, or limbs ``(10, n, ...)``."""
    return int(values.shape[1]) if F.is_limbs(values) and values.ndim >= 2 else len(values)


def _leaf_elements(values, n: int) -> np.ndarray:  # noqa: ANN001
    """``n`` Field255 elements (ints, reduced mod p on the way, or limbs ``(10, n)``) as
    limbs ``(10, n)``.

    Raises:
        Poplar1UsageError: limbs of the wrong shape.
    """
    if F.is_limbs(values):
        if values.shape != (F.LIMBS, n):
            raise Poplar1UsageError("verifier shares of the wrong shape")
        return values
    return F.limbs_from_ints([int(v) % F.P255 for v in values], (n,))


def _leaf_message(values, n: int, k: int) -> np.ndarray:  # noqa: ANN001
    """``n`` rows of ``k`` Field255 elements (lists of ints, reduced mod p on the way, or
    limbs ``(10, n, k)``) as limbs ``(10, n, k)``.

    Raises:
        Poplar1UsageError: rows of the wrong count or width.
    """
    if F.is_limbs(values):
        if values.shape[1:] != (n, k):
            raise Poplar1UsageError("sketch message of the wrong shape")
        return values
    if len(values) != n or any(len(x) != k for x in values):
        raise Poplar1UsageError("sketch message of the wrong shape")
    return F.limbs_from_ints([int(v) % F.P255 for row in values for v in row], (n, k))


def encode_field_vec(level: int, bits: int, values) -> bytes:  # noqa: ANN001
    """A verifier share, message or aggregate share, encoded in the level's field: on
    the leaf a list of ints, or canonical limbs ``(10, ...)`` (their elements in
    row-major order)."""
    if level < bits - 1:
        return F.encode64(np.asarray(values, dtype=np.uint64))
    if F.is_limbs(values):
        return F.limbs_to_bytes(values).tobytes()
    return F.encode255(list(values))


def decode_field_vec(level: int, bits: int, encoded: bytes, count: int, *,  # noqa: ANN201
                     leaf_limbs: bool = False):
    """Inverse of :func:`encode_field_vec`, requiring exactly ``count`` elements (on the
    leaf with ``leaf_limbs``, as limbs ``(10, count)``).

    Raises:
        Poplar1DecodeError: wrong length or an element out of range.
    """
    if level < bits - 1:
        return F.decode64(encoded, count)
    if leaf_limbs:
        if len(encoded) != F.ENC255 * count:
            raise Poplar1DecodeError("Field255 vector of the wrong length")
        return F.decode255_array(np.frombuffer(bytes(encoded), dtype=np.uint8).reshape(
            count, F.ENC255))
    return F.decode255(encoded, count)


def verify_one(vdaf: Poplar1, verify_key: bytes, agg_param: AggParam, nonce: bytes,
               public_share: bytes, input_shares: Sequence[bytes]) -> dict:
    """Prepare one encoded report with both aggregators, as the draft's
    ``verify_init``, ``verifier_shares_to_message`` and ``verify_next``, and return every
    intermediate encoding (``verifier_shares`` per round, ``verifier_messages``,
    ``out_shares``).

    Raises:
        Poplar1DecodeError: a malformed share or nonce.
        Poplar1VerificationError: the sketch does not verify.
    """
    if len(nonce) != vdaf.NONCE_SIZE:
        raise Poplar1DecodeError("nonce of the wrong size")
    level, prefixes = agg_param
    bits = vdaf.bits
    nonces = np.frombuffer(bytes(nonce), dtype=np.uint8)[None, :].copy()
    public = vdaf.decode_public_shares([bytes(public_share)])
    aggs = [Aggregator(vdaf, j, verify_key, nonces, public,
                       vdaf.decode_input_shares([bytes(input_shares[j])])) for j in (0, 1)]
    r1 = [a.verify_init(agg_param) for a in aggs]
    msg1 = sketch_message(level, bits, r1[0], r1[1])
    r2 = [a.verify_next(msg1) for a in aggs]
    rec = {
        "verifier_shares": [[encode_field_vec(level, bits, s[0]) for s in r1],
                            [encode_field_vec(level, bits, [s[0]]) for s in r2]],
        "verifier_messages": [encode_field_vec(level, bits, msg1[0])],
    }
    ok = sketch_accepts(level, bits, r2[0], r2[1])
    if not ok[0]:
        raise Poplar1VerificationError("sketch verification failed")
    rec["verifier_messages"].append(b"")
    outs = [a.out_shares(ok) for a in aggs]
    rec["out_shares"] = [encode_field_vec(level, bits, o[0]) for o in outs]
    return rec
