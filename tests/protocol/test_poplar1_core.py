"""protocol.core.poplar1 beyond the vectors: Field64 arithmetic against Python integers,
batch/one-report agreement, complete validation of every decoder, the aggregation
parameter's rules, and that counts come out right over many reports."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.poplar1 import (Aggregator, Poplar1, Poplar1DecodeError, Poplar1UsageError,
                                   decode_agg_param, encode_agg_param, is_valid,
                                   sketch_accepts, sketch_message)
from protocol.core.poplar1 import field as F
from protocol.core.poplar1 import idpf as I

P = F.P64
EDGES = [0, 1, 2, P - 1, P - 2, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, (1 << 63), P - (1 << 32),
         (1 << 64) - (1 << 32)]


def _values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.integers(0, P, size=n, dtype=np.uint64, endpoint=False)
    return np.concatenate([np.asarray(EDGES, dtype=np.uint64), v])


def test_field64_against_python_ints() -> None:
    a = _values(5000, 1)
    b = np.roll(_values(5000, 2), 3)
    ai, bi = [int(x) for x in a], [int(x) for x in b]
    assert [int(x) for x in F.add64(a, b)] == [(x + y) % P for x, y in zip(ai, bi)]
    assert [int(x) for x in F.sub64(a, b)] == [(x - y) % P for x, y in zip(ai, bi)]
    assert [int(x) for x in F.mul64(a, b)] == [(x * y) % P for x, y in zip(ai, bi)]
    assert [int(x) for x in F.neg64(a)] == [(-x) % P for x in ai]
    # every pair of edge values
    e = np.asarray(EDGES, dtype=np.uint64)
    prod = F.mul64(e[:, None], e[None, :])
    assert all(int(prod[i, j]) == (EDGES[i] * EDGES[j]) % P
               for i in range(len(EDGES)) for j in range(len(EDGES)))
    m = a[: 4000].reshape(40, 100)
    assert [int(x) for x in F.sum64(m)] == [sum(int(x) for x in row) % P for row in m]
    full = np.full(1000, P - 1, dtype=np.uint64)
    assert int(F.sum64(full)) == (1000 * (P - 1)) % P


def test_field_decoders_refuse_out_of_range_and_bad_lengths() -> None:
    with pytest.raises(Poplar1DecodeError):
        F.decode64(P.to_bytes(8, "little"))
    with pytest.raises(Poplar1DecodeError):
        F.decode64(b"\x00" * 7)
    with pytest.raises(Poplar1DecodeError):
        F.decode64(b"\x00" * 16, 1)
    with pytest.raises(Poplar1DecodeError):
        F.decode255(F.P255.to_bytes(32, "little"))
    with pytest.raises(Poplar1DecodeError):
        F.decode255(b"\x00" * 33)
    assert F.decode255((F.P255 - 1).to_bytes(32, "little")) == [F.P255 - 1]


def _reports(vdaf: Poplar1, words: list[int], seed: int):  # noqa: ANN202
    rng = np.random.default_rng(seed)
    n = len(words)
    meas = np.array([[(w >> (vdaf.bits - 1 - i)) & 1 for i in range(vdaf.bits)] for w in words],
                    dtype=bool)
    nonces = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    rands = rng.integers(0, 256, size=(n, vdaf.RAND_SIZE), dtype=np.uint8)
    return vdaf.shard_batch(meas, nonces, rands)


def test_batch_shard_equals_one_report_shard() -> None:
    vdaf = Poplar1(9, b"fedhh test")
    rep = _reports(vdaf, [5, 300, 511], 3)
    rng = np.random.default_rng(3)
    meas = np.array([[(w >> (8 - i)) & 1 for i in range(9)] for w in [5, 300, 511]], dtype=bool)
    nonces = rng.integers(0, 256, size=(3, 16), dtype=np.uint8)
    rands = rng.integers(0, 256, size=(3, vdaf.RAND_SIZE), dtype=np.uint8)
    for r in range(3):
        pub, shares = vdaf.shard(meas[r].tolist(), nonces[r].tobytes(), rands[r].tobytes())
        assert pub == I.encode_public_share(rep.public, r)
        assert shares == [vdaf.encode_input_share(rep.shares[j], r) for j in (0, 1)]


def _run_levels(vdaf: Poplar1, rep, key: bytes, levels):  # noqa: ANN001, ANN202
    aggs = [Aggregator(vdaf, j, key, rep.nonces, rep.public, rep.shares[j]) for j in (0, 1)]
    out = []
    for agg_param in levels:
        level = agg_param[0]
        r1 = [a.verify_init(agg_param) for a in aggs]
        msg = sketch_message(level, vdaf.bits, *r1)
        r2 = [a.verify_next(msg) for a in aggs]
        ok = sketch_accepts(level, vdaf.bits, *r2)
        shares = [a.aggregate(ok) for a in aggs]
        mod = F.P64 if level < vdaf.bits - 1 else F.P255
        out.append((ok, [(int(x) + int(y)) % mod for x, y in zip(*shares)]))
    return out


def test_counts_over_every_level_with_the_node_cache() -> None:
    """Many honest reports, a prefix search over all levels: every report accepted and
    every count equal to the true count of its prefix (the cached IDPF walk and a walk
    from the root agree)."""
    bits = 6
    vdaf = Poplar1(bits, b"ctx")
    words = [0b101100] * 7 + [0b101101] * 3 + [0b000111] * 2 + [0b111111]
    rep = _reports(vdaf, words, 4)
    key = bytes(range(32))
    levels = []
    prev = [()]
    for level in range(bits):
        pref = sorted({p + (b,) for p in prev for b in (False, True)})
        levels.append((level, tuple(pref)))
        prev = pref
    for (ok, counts), (level, pref) in zip(_run_levels(vdaf, rep, key, levels), levels):
        assert ok.all()
        truth = [sum(1 for w in words
                     if tuple(bool((w >> (bits - 1 - i)) & 1) for i in range(level + 1)) == p)
                 for p in pref]
        assert counts == truth
    # a fresh aggregator asked only the last level (walk from the root) agrees
    (ok, counts), = _run_levels(vdaf, rep, key, [levels[-1]])
    assert counts == [sum(1 for w in words if tuple(bool((w >> (bits - 1 - i)) & 1)
                                                    for i in range(bits)) == p)
                      for p in levels[-1][1]]


def test_one_bit_strings() -> None:
    """BITS = 1, which the draft allows: the leaf is the only level; shares encode to
    the draft's sizes (no inner payload), decode back, and the counts are right."""
    vdaf = Poplar1(1, b"one")
    words = [1, 1, 0, 1, 0, 1, 1]
    rep = _reports(vdaf, words, 5)
    assert rep.public.w_inner.shape == (7, 0, 2) and vdaf.public_share_size() == 1 + 16 + 64
    pubs = [I.encode_public_share(rep.public, r) for r in range(7)]
    assert all(len(x) == vdaf.public_share_size() for x in pubs)
    dec = vdaf.decode_public_shares(pubs)
    assert [I.encode_public_share(dec, r) for r in range(7)] == pubs
    (ok, counts), = _run_levels(vdaf, rep, bytes(32), [(0, ((False,), (True,)))])
    assert ok.all() and counts == [2, 5]
    with pytest.raises(Poplar1UsageError):
        Poplar1(0)
    with pytest.raises(Poplar1UsageError):
        Poplar1(1 << 16)


def test_agg_param_rules_and_encoding() -> None:
    ap = (2, ((False, True, True), (True, False, False)))
    assert decode_agg_param(encode_agg_param(ap)) == ap
    assert is_valid(ap, [(1, ((False, True), (True, False)))])
    assert not is_valid(ap, [(2, ((False, True, True),))])                 # level not above
    assert not is_valid(ap, [(1, ((False, True),))])                       # not an extension
    assert not is_valid((2, tuple(reversed(ap[1]))), [])                   # unsorted
    assert not is_valid((2, (ap[1][0], ap[1][0])), [])                     # repeated
    enc = encode_agg_param(ap)
    with pytest.raises(Poplar1DecodeError):
        decode_agg_param(enc + b"\x00")
    with pytest.raises(Poplar1DecodeError):
        decode_agg_param(enc[:-1])
    with pytest.raises(Poplar1DecodeError):
        decode_agg_param(enc[:6] + bytes([enc[6] | 1]) + enc[7:])        # trailing bit
    with pytest.raises(Poplar1DecodeError):
        decode_agg_param(b"\x00")
    vdaf = Poplar1(4)
    with pytest.raises(Poplar1DecodeError):
        vdaf.decode_agg_param(encode_agg_param((4, ((False,) * 5,))))      # level >= bits
    rep = _reports(vdaf, [3], 1)
    agg = Aggregator(vdaf, 0, bytes(32), rep.nonces, rep.public, rep.shares[0])
    agg.verify_init((1, ((False, True),)))
    with pytest.raises(Poplar1UsageError):
        agg.verify_init((1, ((False, True),)))                             # same level twice


def test_share_decoders_validate_completely() -> None:
    vdaf = Poplar1(5, b"c")
    rep = _reports(vdaf, [9], 2)
    pub = I.encode_public_share(rep.public, 0)
    ins = vdaf.encode_input_share(rep.shares[0], 0)
    assert I.encode_public_share(vdaf.decode_public_shares([pub]), 0) == pub
    assert vdaf.encode_input_share(vdaf.decode_input_shares([ins]), 0) == ins
    bad_public = [
        pub + b"\x00",                                       # trailing byte
        pub[:-1],                                            # short
        bytes([pub[0], pub[1] | 0x80]) + pub[2:],            # trailing control bit (10 of 16)
        pub[:-32] + F.P255.to_bytes(32, "little"),           # leaf element out of range
        pub[:2 + 80] + P.to_bytes(8, "little") + pub[2 + 88:],   # inner element out of range
    ]
    for b in bad_public:
        with pytest.raises(Poplar1DecodeError):
            vdaf.decode_public_shares([pub, b])
    bad_input = [ins + b"\x00", ins[:-1], ins[:48] + P.to_bytes(8, "little") + ins[56:],
                 ins[:-32] + F.P255.to_bytes(32, "little")]
    for b in bad_input:
        with pytest.raises(Poplar1DecodeError):
            vdaf.decode_input_shares([b])
    with pytest.raises(Poplar1DecodeError):
        vdaf.decode_input_shares(["not bytes"])  # type: ignore[list-item]


class _RejectingXof:
    """A stand-in for XofTurboShake128 whose stream, for the ``(dst, binder)`` pairs in
    ``TARGETS`` (streams that start with Field64 elements), starts with one element above
    the modulus (0xff * 8) and then continues as the real stream: rejection sampling
    must skip exactly that element."""

    TARGETS: set[tuple[bytes, bytes]] = set()

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        from protocol.core.poplar1.xof import XofTurboShake128

        self._real = XofTurboShake128(seed, dst, binder)
        self._prefix = b"\xff" * 8 if (dst, binder) in self.TARGETS else b""

    def next(self, length: int) -> bytes:
        take, self._prefix = self._prefix[:length], self._prefix[length:]
        return take + (self._real.next(length - len(take)) if length > len(take) else b"")

    def next_vec64(self, length: int) -> np.ndarray:
        from protocol.core.poplar1.xof import next_vec_from_stream
        return next_vec_from_stream(self.next, P, 8, length)

    def next_vec255(self, length: int) -> list[int]:
        from protocol.core.poplar1.xof import next_vec_from_stream
        return next_vec_from_stream(self.next, F.P255, 32, length)


class _RejectingStreams:
    """:func:`turboshake_streams` over :class:`_RejectingXof` (one per row)."""

    def __init__(self, seeds: np.ndarray, dst: bytes, binders: np.ndarray) -> None:
        self._x = [_RejectingXof(s.tobytes(), dst, b.tobytes()) for s, b in zip(seeds, binders)]

    def read(self, length: int) -> np.ndarray:
        return np.frombuffer(b"".join(x.next(length) for x in self._x),
                             dtype=np.uint8).reshape(len(self._x), length)


def _rejecting_many(seeds: np.ndarray, dst: bytes, binders: np.ndarray, length: int) -> np.ndarray:
    return _RejectingStreams(seeds, dst, binders).read(length)


def _inject(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Route the VDAF's XOF calls (one-by-one and batched) through :class:`_RejectingXof`
    (``on``) or back to the real ones."""
    from protocol.core.poplar1 import vdaf as V
    from protocol.core.poplar1 import xof as X

    monkeypatch.setattr(V, "XofTurboShake128", _RejectingXof if on else X.XofTurboShake128)
    monkeypatch.setattr(V, "turboshake_many", _rejecting_many if on else X.turboshake_many)
    monkeypatch.setattr(V, "turboshake_streams",
                        _RejectingStreams if on else X.turboshake_streams)


def test_rejection_redraw_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass readers fall back to the exact element-by-element draw for a report
    whose stream rejected an element: the verification randomness, the correlated
    randomness across levels, and the client's shard stream all come out as the real
    stream with the rejected element skipped."""
    from protocol.core.poplar1 import vdaf as V
    from protocol.core.poplar1.xof import XofTurboShake128

    vdaf = Poplar1(5, b"r")
    rep = _reports(vdaf, [3, 17, 30], 9)
    key = bytes(range(32))
    nonce1 = rep.nonces[1].tobytes()
    level = 2
    # verification randomness of report 1 at level 2
    _RejectingXof.TARGETS = {(vdaf.dst(V.USAGE_VERIFY_RAND), nonce1 + level.to_bytes(2, "big"))}
    _inject(monkeypatch, True)
    agg = Aggregator(vdaf, 0, key, rep.nonces, rep.public, rep.shares[0])
    got = agg._verify_rand(level, 4)
    want = XofTurboShake128(key, vdaf.dst(V.USAGE_VERIFY_RAND), nonce1 + b"\x00\x02").next_vec64(4)
    assert got[1].tolist() == want.tolist()
    # correlated randomness of report 1 (aggregator 0), levels 0, 1, 3: once dirty, exact
    _RejectingXof.TARGETS = {(vdaf.dst(V.USAGE_CORR_INNER), b"\x00" + nonce1)}
    agg = Aggregator(vdaf, 0, key, rep.nonces, rep.public, rep.shares[0])
    seed = rep.shares[0].corr_seed[1].tobytes()
    for lv in (0, 1, 3):
        real = XofTurboShake128(seed, vdaf.dst(V.USAGE_CORR_INNER), b"\x00" + nonce1)
        real.next_vec64(3 * lv)
        assert agg._corr_inner(lv)[1].tolist() == real.next_vec64(3).tolist()
    # the client's shard stream and its correlated randomness: a rejected first element
    # is skipped, so the report equals the one from the real stream, byte for byte
    _inject(monkeypatch, False)
    honest = _reports(vdaf, [3, 17, 30], 9)
    n2 = honest.nonces[2].tobytes()
    for target in ((vdaf.dst(V.USAGE_SHARD_RAND), n2), (vdaf.dst(V.USAGE_CORR_INNER), b"\x00" + n2),
                   (vdaf.dst(V.USAGE_CORR_INNER), b"\x01" + n2)):
        _RejectingXof.TARGETS = {target}
        _inject(monkeypatch, True)
        shifted = _reports(vdaf, [3, 17, 30], 9)
        _inject(monkeypatch, False)
        for r in range(3):
            for j in (0, 1):
                assert vdaf.encode_input_share(shifted.shares[j], r) == \
                    vdaf.encode_input_share(honest.shares[j], r)
