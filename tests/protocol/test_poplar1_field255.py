"""Field255 (p = 2^255 - 19) over numpy limbs against Python integers: property tests
(hypothesis) of every operation the leaf level uses, the edge values (0, 1, p - 1,
values at and above p, 2^255 - 1, 2^256 - 1), encoding and decoding (values at or above
p refused), the XOF's masked conversion, and the row container."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.poplar1 import Poplar1DecodeError
from protocol.core.poplar1 import field as F

P = F.P255
EDGES = [0, 1, 2, 18, 19, 20, P - 1, P - 2, P - 19, (1 << 254), (1 << 255) - 20,
         (1 << 26) - 1, 1 << 26, (1 << 234), (1 << 252) - 1, 608, P - 608]
elem = st.one_of(st.sampled_from(EDGES), st.integers(0, P - 1))
vec = st.lists(elem, min_size=1, max_size=40)


def L(values: list[int]) -> np.ndarray:
    return F.limbs_from_ints(values, (len(values),))


def ints(x: np.ndarray) -> list[int]:
    return F.limbs_to_ints(x)


@settings(max_examples=80, deadline=None)
@given(vec, vec)
def test_add_sub_mul_neg_match_python_ints(a: list[int], b: list[int]) -> None:
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    A, B = L(a), L(b)
    assert ints(F.add255(A, B)) == [(x + y) % P for x, y in zip(a, b)]
    assert ints(F.sub255(A, B)) == [(x - y) % P for x, y in zip(a, b)]
    assert ints(F.mul255(A, B)) == [(x * y) % P for x, y in zip(a, b)]
    assert ints(F.neg255(A)) == [(-x) % P for x in a]
    assert ints(F.mul255(A, A)) == [(x * x) % P for x in a]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(elem, elem), min_size=1, max_size=150))
def test_dot_and_sum_match_python_ints(pairs: list[tuple[int, int]]) -> None:
    """More pairs than one unreduced block (64) of the dot product."""
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    assert ints(F.dot255(L(a), L(b))) == sum(x * y for x, y in pairs) % P
    assert ints(F.sum255(L(a))) == sum(a) % P


def test_all_edge_pairs_and_extremes() -> None:
    a = [x for x in EDGES for _ in EDGES]
    b = [y for _ in EDGES for y in EDGES]
    A, B = L(a), L(b)
    assert ints(F.mul255(A, B)) == [(x * y) % P for x, y in zip(a, b)]
    assert ints(F.add255(A, B)) == [(x + y) % P for x, y in zip(a, b)]
    assert ints(F.sub255(A, B)) == [(x - y) % P for x, y in zip(a, b)]
    full = F.const255(P - 1, (5000,))
    assert ints(F.sum255(full)) == 5000 * (P - 1) % P
    assert ints(F.dot255(full, full)) == 5000 * (P - 1) ** 2 % P
    # 2-D element shapes, along either axis
    m = np.asarray(a[:200], dtype=object).reshape(10, 20)
    mb = np.asarray(b[:200], dtype=object).reshape(10, 20)
    Am, Bm = F.limbs_from_ints(m.tolist(), (10, 20)), F.limbs_from_ints(mb.tolist(), (10, 20))
    assert ints(F.dot255(Am, Bm, axis=0)) == [int(sum(x * y for x, y in zip(m[:, j], mb[:, j])) % P)
                                             for j in range(20)]
    assert ints(F.dot255(Am, Bm, axis=1)) == [int(sum(x * y for x, y in zip(m[i], mb[i])) % P)
                                             for i in range(10)]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-(1 << 61), (1 << 61)), min_size=1, max_size=30))
def test_reduction_of_any_columns(cols: list[int]) -> None:
    """reduce255 takes signed columns of weights 2^(26 k), of any count."""
    value = sum(c << (26 * k) for k, c in enumerate(cols))
    c = np.asarray(cols, dtype=np.int64)[:, None]
    assert ints(F.reduce255(c)) == [value % P]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, (1 << 256) - 1))
def test_bytes_round_trip_and_the_modulus_check(v: int) -> None:
    raw = np.frombuffer(v.to_bytes(32, "little"), dtype=np.uint8)[None, :]
    x = F.limbs_from_bytes(raw)
    assert bool(F.at_least_p(x)[0]) == (v >= P)
    masked = F.limbs_from_bytes(raw, mask=True)
    assert bool(F.at_least_p(masked)[0]) == ((v & ((1 << 255) - 1)) >= P)
    if v < P:
        assert F.limbs_to_bytes(x)[0].tobytes() == v.to_bytes(32, "little")
        assert F.decode255(v.to_bytes(32, "little")) == [v]
        assert ints(F.decode255_array(raw)) == [v]
    else:
        with pytest.raises(Poplar1DecodeError):
            F.decode255(v.to_bytes(32, "little"))
        with pytest.raises(Poplar1DecodeError):
            F.decode255_array(raw)


def test_decode_refuses_every_value_at_or_above_p() -> None:
    for v in [P, P + 1, P + 18, (1 << 255) - 1, 1 << 255, (1 << 256) - 1]:
        data = (0).to_bytes(32, "little") + v.to_bytes(32, "little")
        with pytest.raises(Poplar1DecodeError):
            F.decode255(data)
    assert F.decode255((P - 1).to_bytes(32, "little") + bytes(32)) == [P - 1, 0]
    with pytest.raises(Poplar1DecodeError):
        F.decode255(bytes(31))
    with pytest.raises(Poplar1DecodeError):
        F.decode255(bytes(64), 1)


def test_rows_container() -> None:
    rows = F.Field255Rows.from_ints([[1, P - 1], [0, 5]])
    assert len(rows) == 2 and rows.width == 2 and rows.tolist() == [[1, P - 1], [0, 5]]
    assert rows[np.array([1])].tolist() == [[0, 5]] and rows[1:].tolist() == [[0, 5]]
    assert ints(rows.limbs()) == [[1, P - 1], [0, 5]]
    rows[0] = [7, 8]
    assert rows[0] == [7, 8]
    with pytest.raises(ValueError):
        rows[0] = [1]
    assert F.Field255Rows.from_limbs(F.leaf_limbs([[3, 4]])).tolist() == [[3, 4]]


class _Rejecting255:
    """A TurboSHAKE128 stream that, for the ``(dst, binder)`` pairs in ``TARGETS``,
    carries one Field255 element above the modulus (32 bytes of 0xff: 2^255 - 1 after
    the mask) at byte ``AT`` and then continues as the real stream: the draft's
    rejection sampling must skip exactly that element."""

    TARGETS: set[tuple[bytes, bytes]] = set()
    AT = 0

    def __init__(self, seed: bytes, dst: bytes, binder: bytes) -> None:
        from protocol.core.poplar1.xof import XofTurboShake128

        self._real = XofTurboShake128(seed, dst, binder)
        hit = (dst, binder) in self.TARGETS
        self._head = self._real.next(self.AT) if hit else b""
        self._bad = b"\xff" * 32 if hit else b""

    def next(self, length: int) -> bytes:
        out = b""
        for attr in ("_head", "_bad"):
            part = getattr(self, attr)
            take = part[:length - len(out)]
            setattr(self, attr, part[len(take):])
            out += take
        return out + self._real.next(length - len(out))

    def next_vec255(self, length: int) -> list[int]:
        from protocol.core.poplar1.xof import next_vec_from_stream
        return next_vec_from_stream(self.next, P, 32, length)

    def next_vec64(self, length: int) -> np.ndarray:
        from protocol.core.poplar1.xof import next_vec_from_stream
        return next_vec_from_stream(self.next, F.P64, 8, length)


def _rejecting_many(seeds: np.ndarray, dst: bytes, binders, length: int) -> np.ndarray:  # noqa: ANN001
    if isinstance(binders, (bytes, bytearray)):
        binders = np.broadcast_to(np.frombuffer(bytes(binders), dtype=np.uint8),
                                  (len(seeds), len(binders)))
    xs = [_Rejecting255(np.asarray(s).tobytes(), dst, np.asarray(b).tobytes())
          for s, b in zip(seeds, binders)]
    return np.frombuffer(b"".join(x.next(length) for x in xs),
                         dtype=np.uint8).reshape(len(xs), length)


def _inject(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    from protocol.core.poplar1 import idpf as I
    from protocol.core.poplar1 import vdaf as V
    from protocol.core.poplar1 import xof as X

    for mod in (V, I):
        monkeypatch.setattr(mod, "XofTurboShake128", _Rejecting255 if on else X.XofTurboShake128)
        monkeypatch.setattr(mod, "turboshake_many", _rejecting_many if on else X.turboshake_many)


def _leaf_run(vdaf, words: list[int], seed: int):  # noqa: ANN001, ANN202
    from protocol.core.poplar1 import Aggregator, sketch_accepts, sketch_message

    rng = np.random.default_rng(seed)
    n, b = len(words), vdaf.bits
    meas = np.array([[(w >> (b - 1 - i)) & 1 for i in range(b)] for w in words], dtype=bool)
    nonces = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    rands = rng.integers(0, 256, size=(n, vdaf.RAND_SIZE), dtype=np.uint8)
    rep = vdaf.shard_batch(meas, nonces, rands)
    leaf = (b - 1, tuple(sorted({tuple(bool(x) for x in m) for m in meas})))
    aggs = [Aggregator(vdaf, j, bytes(range(32)), rep.nonces, rep.public, rep.shares[j])
            for j in (0, 1)]
    r1 = [a.verify_init(leaf) for a in aggs]
    r2 = [a.verify_next(sketch_message(b - 1, b, *r1)) for a in aggs]
    ok = sketch_accepts(b - 1, b, *r2)
    counts = [(x + y) % P for x, y in zip(*[a.aggregate(ok) for a in aggs])]
    return rep, r1, ok, counts


def test_field255_rejection_redraw_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Field255 draw falls back to the exact draw when an element is rejected,
    and the result equals the real stream with that element skipped: the client's
    shard stream (BITS = 1: its first element is the leaf's), its leaf correlated
    randomness, the IDPF's leaf ``convert`` (after the 16-byte seed), the aggregators'
    leaf correlated randomness and verification randomness."""
    from protocol.core.poplar1 import Poplar1
    from protocol.core.poplar1 import idpf as I
    from protocol.core.poplar1 import vdaf as V

    for bits, words in ((1, [1, 0, 1]), (3, [5, 5, 2])):
        vdaf = Poplar1(bits, b"r")
        rep, r1, ok, counts = _leaf_run(vdaf, words, 9)
        assert ok.all() and sorted(counts, reverse=True)[0] == 2
        n1 = rep.nonces[1].tobytes()
        targets = [
            ((vdaf.dst(V.USAGE_SHARD_RAND), n1), 8 * (bits - 1)),
            ((vdaf.dst(V.USAGE_CORR_LEAF), b"\x00" + n1), 0),
            ((vdaf.dst(V.USAGE_CORR_LEAF), b"\x01" + n1), 0),
            ((I._DST_CONVERT + b"r", n1), 16),
            ((vdaf.dst(V.USAGE_VERIFY_RAND), n1 + (bits - 1).to_bytes(2, "big")), 0),
        ]
        for target, at in targets:
            _Rejecting255.TARGETS, _Rejecting255.AT = {target}, at
            _inject(monkeypatch, True)
            rep2, r1b, ok2, counts2 = _leaf_run(vdaf, words, 9)
            _inject(monkeypatch, False)
            assert [vdaf.encode_input_share(rep2.shares[j], r) for j in (0, 1) for r in range(3)] \
                == [vdaf.encode_input_share(rep.shares[j], r) for j in (0, 1) for r in range(3)]
            assert [I.encode_public_share(rep2.public, r) for r in range(3)] == \
                [I.encode_public_share(rep.public, r) for r in range(3)]
            assert r1b == r1 and ok2.all() and counts2 == counts, target


def test_leaf_rounds_as_limbs_equal_the_integer_rounds() -> None:
    """``leaf_limbs=True`` (what the aggregator processes use) gives the same sketch
    shares, round-2 shares, encodings and decisions as the lists of ints, a tampered
    report rejected alike; decoding as limbs refuses what decoding as ints refuses."""
    from protocol.core.poplar1 import Aggregator, Poplar1, sketch_accepts, sketch_message
    from protocol.core.poplar1 import vdaf as V
    from protocol.core.poplar1.errors import Poplar1DecodeError, Poplar1UsageError

    bits, n = 5, 40
    rng = np.random.default_rng(21)
    meas = rng.integers(0, 2, (n, bits)).astype(bool)
    vdaf = Poplar1(bits, b"limbs")
    rep = vdaf.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                           rng.integers(0, 256, (n, vdaf.RAND_SIZE), dtype=np.uint8))
    leaf = (bits - 1, tuple(sorted({tuple(bool(x) for x in m) for m in meas})))
    runs = {}
    for as_limbs in (False, True):
        aggs = [Aggregator(vdaf, j, bytes(range(32)), rep.nonces, rep.public, rep.shares[j])
                for j in (0, 1)]
        r1 = [a.verify_init(leaf, leaf_limbs=as_limbs) for a in aggs]
        wire1 = [V.encode_field_vec(bits - 1, bits, r if as_limbs else [x for row in r for x in row])
                 for r in r1]
        if as_limbs:
            assert all(isinstance(r, np.ndarray) and r.shape == (10, n, 3) for r in r1)
            msg = F.add255(r1[0], r1[1])
            msg[:, 7, 0] = F.add255(msg[:, 7, 0], F.const255(1))      # report 7 tampered
        else:
            msg = sketch_message(bits - 1, bits, *r1)
            msg[7][0] = (msg[7][0] + 1) % P
        r2 = [a.verify_next(msg, leaf_limbs=as_limbs) for a in aggs]
        wire2 = [V.encode_field_vec(bits - 1, bits, r) for r in r2]
        ok = sketch_accepts(bits - 1, bits, *r2)
        runs[as_limbs] = (wire1, wire2, ok.tolist(), [a.aggregate(ok) for a in aggs])
        if as_limbs:
            back = V.decode_field_vec(bits - 1, bits, wire1[0], 3 * n, leaf_limbs=True)
            assert np.array_equal(back, r1[0].reshape(10, 3 * n))
            with pytest.raises(Poplar1UsageError):
                sketch_accepts(bits - 1, bits, r2[0], r2[1][:, :-1])
            with pytest.raises(Poplar1UsageError):
                sketch_message(bits - 1, bits, r1[0], r1[1][:, :-1])
    assert runs[False] == runs[True]
    assert runs[True][2].count(False) == 1 and not runs[True][2][7]
    bad = (P).to_bytes(32, "little") + bytes(32)
    for kw in ({}, {"leaf_limbs": True}):
        with pytest.raises(Poplar1DecodeError):
            V.decode_field_vec(bits - 1, bits, bad, 2, **kw)
        with pytest.raises(Poplar1DecodeError):
            V.decode_field_vec(bits - 1, bits, bytes(63), 2, **kw)
