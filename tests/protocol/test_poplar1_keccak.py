"""The numpy TurboSHAKE128 (Keccak-p[1600, 12] across messages) against pycryptodome's,
and Poplar1 through it: the same bytes whichever path a batch takes."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from Crypto.Hash import TurboSHAKE128

from protocol.core.poplar1 import Poplar1
from protocol.core.poplar1 import keccak as K
from protocol.core.poplar1 import xof as X
from protocol.core.poplar1.idpf import encode_public_share
from protocol.core.poplar1.vdaf import Aggregator, encode_field_vec, sketch_accepts, sketch_message


def _ref(msg: bytes, domain: int, length: int) -> bytes:
    return TurboSHAKE128.new(domain=domain, data=msg).read(length)


@pytest.mark.parametrize("msg_len", [0, 1, 87, 166, 167, 168, 169, 335, 336, 337])
def test_many_equals_pycryptodome(msg_len: int) -> None:
    """Message lengths around the 168-byte rate (the padding byte and 0x80 in one byte
    at 167; a whole extra block at 168), several domain bytes, outputs of one and of
    several blocks."""
    rng = np.random.default_rng(msg_len)
    msgs = rng.integers(0, 256, size=(4, msg_len), dtype=np.uint8)
    for domain in (0x01, 0x02, 0x1F, 0x7F):
        for length in (0, 1, 16, 168, 169, 500):
            got = K.turboshake128_many(msgs, domain, length)
            assert got.shape == (4, length)
            for i in range(4):
                assert got[i].tobytes() == _ref(msgs[i].tobytes(), domain, length)


def test_known_answer() -> None:
    """RFC 9861's first TurboSHAKE128 test vector: the empty message, domain 0x1F, 32
    bytes."""
    out = K.turboshake128_many(np.zeros((1, 0), dtype=np.uint8), 0x1F, 32)
    assert out[0].tobytes().hex() == ("1e415f1c5983aff2169217277d17bb53"
                            "8cd945a397ddec541f1ce41af2c1b74c")


def test_sponge_batch_reads_like_pycryptodome() -> None:
    rng = np.random.default_rng(7)
    msgs = rng.integers(0, 256, size=(6, 90), dtype=np.uint8)
    batch = K.SpongeBatch(msgs, 1)
    one = [TurboSHAKE128.new(domain=1, data=m.tobytes()) for m in msgs]
    for length in (24, 24, 0, 100, 168, 3, 200, 24):
        got = batch.read(length)
        assert got.shape == (6, length)
        for i in range(6):
            assert got[i].tobytes() == one[i].read(length)


def test_the_two_schedules_agree() -> None:
    """The plane-at-a-time rounds (small batches) and the lane-at-a-time rounds (large
    ones) are the same permutation."""
    state = np.random.default_rng(3).integers(0, 2 ** 63, size=(25, 300), dtype=np.uint64)
    a, b = state.copy(), state.copy()
    K._rounds_planes(a)
    K._rounds_lanes(b)
    assert (a == b).all()
    assert not (a == state).all()
    with pytest.raises(ValueError):
        K.keccak_p1600_12(np.zeros((24, 3), dtype=np.uint64))
    with pytest.raises(ValueError):
        K.turboshake128_many(np.zeros((1, 3), dtype=np.uint8), 0, 8)


@pytest.mark.parametrize("batched", [False, True])
def test_xof_helpers_match_the_scalar_xof(monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    """turboshake_many, turboshake_streams and fixed_keys on either side of MIN_BATCH give
    the scalar XofTurboShake128 / fixed_key bytes."""
    monkeypatch.setattr(X, "MIN_BATCH", 1 if batched else 10 ** 9)
    rng = np.random.default_rng(11)
    seeds = rng.integers(0, 256, size=(5, 32), dtype=np.uint8)
    binders = rng.integers(0, 256, size=(5, 17), dtype=np.uint8)
    dst = b"some dst"
    got = X.turboshake_many(seeds, dst, binders, 200)
    streams = X.turboshake_streams(seeds, dst, binders)
    parts = np.concatenate([streams.read(24), streams.read(176)], axis=1)
    keys = X.fixed_keys(dst, binders)
    for i in range(5):
        want = X.XofTurboShake128(seeds[i].tobytes(), dst, binders[i].tobytes()).next(200)
        assert got[i].tobytes() == want
        assert parts[i].tobytes() == want
        assert keys[i].tobytes() == X.fixed_key(dst, binders[i].tobytes())
    one = X.turboshake_many(seeds, dst, b"one binder", 40)
    for i in range(5):
        assert one[i].tobytes() == X.XofTurboShake128(seeds[i].tobytes(), dst,
                                                      b"one binder").next(40)


def _prepare(vdaf: Poplar1, rep, key: bytes, level: int, prefixes) -> list:  # noqa: ANN001
    aggs = [Aggregator(vdaf, j, key, rep.nonces, rep.public, rep.shares[j]) for j in (0, 1)]
    out = []
    for lv in range(level + 1):
        ap = (lv, tuple(sorted({p[:lv + 1] for p in prefixes})))
        r1 = [a.verify_init(ap) for a in aggs]
        r2 = [a.verify_next(sketch_message(lv, vdaf.bits, *r1)) for a in aggs]
        ok = sketch_accepts(lv, vdaf.bits, *r2)
        out.append((ok.tolist(),
                    [[encode_field_vec(lv, vdaf.bits, r1[j][i]) for i in range(len(rep))]
                     for j in (0, 1)],
                    [encode_field_vec(lv, vdaf.bits, a.aggregate(ok)) for a in aggs]))
    return out


def test_poplar1_batch_path_equals_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch sharded and prepared through the numpy sponge (MIN_BATCH = 1) gives the
    same reports, sketch shares and aggregate shares at every level, the leaf included,
    as through pycryptodome one call at a time."""
    bits, n = 6, 20
    vdaf = Poplar1(bits, b"keccak test")
    rng = np.random.default_rng(5)
    meas = rng.integers(0, 2, size=(n, bits)).astype(bool)
    nonces = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    rands = rng.integers(0, 256, size=(n, vdaf.RAND_SIZE), dtype=np.uint8)
    key = bytes(range(32))
    prefixes = [tuple(bool(b) for b in m) for m in meas[:4]]
    runs = []
    for min_batch in (10 ** 9, 1):
        monkeypatch.setattr(X, "MIN_BATCH", min_batch)
        rep = vdaf.shard_batch(meas, nonces, rands)
        enc = [encode_public_share(rep.public, r) + b"".join(
            vdaf.encode_input_share(rep.shares[j], r) for j in (0, 1)) for r in range(n)]
        runs.append((enc, _prepare(vdaf, rep, key, bits - 1, prefixes)))
    assert runs[0] == runs[1]
    assert all(all(ok) for ok, _, _ in runs[1][1])


def test_vectors_through_the_numpy_sponge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft's Poplar1 vectors, byte for byte, with every XOF batch (even of one
    report) through the numpy sponge."""
    import importlib
    import sys

    here = str(pathlib.Path(__file__).resolve().parent)
    if here not in sys.path:      # pytest's default import mode puts it there already
        sys.path.insert(0, here)
    vec = importlib.import_module("test_poplar1_vectors")
    monkeypatch.setattr(X, "MIN_BATCH", 1)
    vec.run_every_vector()


def test_sponge_keeps_only_its_state_and_resumes() -> None:
    """A SpongeBatch holds only its 200-byte states; read across block boundaries it
    gives pycryptodome's stream, and resumed from a snapshot (with or without the
    output block) it continues it; a block that is not the state's is refused."""
    rng = np.random.default_rng(4)
    msgs = rng.integers(0, 256, (20, 50), dtype=np.uint8)
    want = [TurboSHAKE128.new(domain=1, data=m.tobytes()).read(500) for m in msgs]
    sp = K.SpongeBatch(msgs, 1)
    assert sp.snapshot()[0].nbytes == 200 * 20
    got = [sp.read(k) for k in (7, 161, 1, 168)]
    state, buf, pos = sp.snapshot()
    a = K.SpongeBatch.resume(state.copy(), buf.copy(), pos)
    b = K.SpongeBatch.resume(state.copy(), None, pos)
    rest = [sp.read(163), a.read(163), b.read(163)]
    assert np.array_equal(rest[0], rest[1]) and np.array_equal(rest[0], rest[2])
    whole = np.concatenate(got + [rest[0]], axis=1)
    assert [r.tobytes() for r in whole] == want
    bad = buf.copy()
    bad[0, 0] ^= 1
    with pytest.raises(ValueError, match="snapshot"):
        K.SpongeBatch.resume(state, bad, pos)
