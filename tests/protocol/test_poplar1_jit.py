"""The compiled kernels of protocol.core.poplar1.jit (numba) against the numpy code they
replace, and Poplar1 end to end with and without them: the same bytes either way."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from protocol.core.poplar1 import field as F
from protocol.core.poplar1 import jit
from protocol.core.poplar1 import keccak as K
from protocol.core.poplar1 import xof as X

pytestmark = pytest.mark.skipif(not jit.available(), reason="numba is not installed")


@pytest.mark.parametrize("n", [1, 7, 2048, 8192, 9000])
def test_keccak_kernel_equals_numpy_rounds(n: int) -> None:
    """The compiled permutation equals the numpy rounds, rows 1 KB apart or not (2,048
    and 8,192 sponges and the strided view go through the padded blocks, the last of
    them partial for a 5,000-sponge view of an 8,192-sponge state)."""
    rng = np.random.default_rng(n)
    state = rng.integers(0, 2**64, size=(25, n), dtype=np.uint64, endpoint=False)
    a, b, c = state.copy(), state.copy(), state.copy()
    K._rounds_planes(a)
    K._rounds_lanes(b)
    jit.keccak_p1600_12_columns(c)
    assert np.array_equal(a, b) and np.array_equal(a, c)
    # a strided view (the chunks keccak_p1600_12 passes) is permuted in place too
    d = state.copy()
    jit.keccak_p1600_12_columns(d[:, ::2])
    K._rounds_lanes(state[:, ::2])
    assert np.array_equal(d, state)
    if n == 8192:
        e, f = state.copy(), state.copy()
        jit.keccak_p1600_12_columns(e[:, 1000:6000])
        K._rounds_lanes(f[:, 1000:6000])
        assert np.array_equal(e, f)


def test_keccak_kernel_known_answer() -> None:
    """RFC 9861: TurboSHAKE128 of the empty message, domain 0x1F, 32 bytes (through the
    kernel, which keccak_p1600_12 uses when numba is installed)."""
    assert K._compiled is not None
    out = K.turboshake128_many(np.zeros((1, 0), dtype=np.uint8), 0x1F, 32)
    assert out[0].tobytes().hex() == (
        "1e415f1c5983aff2169217277d17bb538cd945a397ddec541f1ce41af2c1b74c")


def test_aes_rows_equals_cryptography_and_cffi_loop() -> None:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    if not jit.aes_rows_available():
        pytest.skip("libcrypto is not loadable by ctypes")
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 256, (37, 16), dtype=np.uint8)
    assert X._load_openssl() is not None and X._jit_rows is not None
    for width in (16, 48, 1408):
        data = rng.integers(0, 256, (37, width), dtype=np.uint8)
        got = X._openssl_rows(keys, data)          # through the compiled loop
        for r in range(37):
            enc = Cipher(algorithms.AES(keys[r].tobytes()), modes.ECB()).encryptor()
            assert got[r].tobytes() == enc.update(data[r].tobytes()) + enc.finalize()
        saved = X._jit_rows
        try:
            X._jit_rows = None                 # the cffi loop of the numpy code path
            assert np.array_equal(X._openssl_rows(keys, data), got)
        finally:
            X._jit_rows = saved
    assert X._openssl_rows(keys[:0], np.zeros((0, 16), np.uint8)).shape == (0, 16)
    with pytest.raises(ValueError):
        X._openssl_rows(keys, np.zeros((37, 15), np.uint8))
    with pytest.raises(ValueError):
        X._openssl_rows(keys[:3], np.zeros((37, 16), np.uint8))


def _field64(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.integers(0, 2**64, size=shape, dtype=np.uint64, endpoint=False)
    return np.where(x >= np.uint64(F.P64), x - np.uint64(F.P64), x)


@pytest.mark.parametrize("c", [1, 2, 44])
def test_sketch_kernel_equals_numpy_field(c: int) -> None:
    rng = np.random.default_rng(c)
    n = 500
    d, a, r, abc = (_field64(rng, n, c), _field64(rng, n, c), _field64(rng, n, c),
                    _field64(rng, n, 3))
    # the edges of the field: p - 1, 0, 1, 2^32 and its neighbours
    edges = np.array([F.P64 - 1, 0, 1, 2**32 - 1, 2**32, 2**32 + 1, 2**63], dtype=np.uint64)
    d[:7, 0] = edges
    r[:7, 0] = edges[::-1]
    a[:7, 0] = edges
    abc[:7, 0] = edges
    want = np.stack([F.add64(abc[:, 0], F.dot64(d, r)),
                     F.add64(abc[:, 1], F.dot64(d, F.mul64(r, r))),
                     F.add64(abc[:, 2], F.dot64(a, r))], axis=1)
    assert np.array_equal(jit.sketch_inner(d, a, r, abc), want)
    # against Python integers too
    P = F.P64
    for i in range(10):
        row = [(int(abc[i, 0]) + sum(int(x) * int(y) for x, y in zip(d[i], r[i]))) % P,
               (int(abc[i, 1]) + sum(int(x) * int(y) ** 2 for x, y in zip(d[i], r[i]))) % P,
               (int(abc[i, 2]) + sum(int(x) * int(y) for x, y in zip(a[i], r[i]))) % P]
        assert [int(v) for v in want[i]] == row


_SCRIPT = r"""
import hashlib, numpy as np
from protocol.core.poplar1 import Aggregator, Poplar1, jit, sketch_accepts, sketch_message
from protocol.core.poplar1 import keccak, xof
bits, n = 9, 300
rng = np.random.default_rng(5)
meas = rng.integers(0, 2, (n, bits)).astype(bool)
v = Poplar1(bits, b"jit test")
rep = v.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                    rng.integers(0, 256, (n, v.RAND_SIZE), dtype=np.uint8))
h = hashlib.sha256()
h.update(rep.nonces.tobytes())
aggs = [Aggregator(v, j, bytes(range(32)), rep.nonces, rep.public, rep.shares[j]) for j in (0, 1)]
for lv in range(bits):
    pref = tuple(sorted({tuple(bool(b) for b in row[:lv + 1]) for row in meas[:40]}))
    r1 = [a.verify_init((lv, pref)) for a in aggs]
    r2 = [a.verify_next(sketch_message(lv, bits, *r1)) for a in aggs]
    ok = sketch_accepts(lv, bits, *r2)
    for part in (r1, r2, [a.aggregate(ok) for a in aggs]):
        h.update(repr([np.asarray(x).tolist() if hasattr(x, 'shape') else x for x in part]).encode())
print(jit.available(), keccak._compiled is not None, xof._jit_rows is not None, h.hexdigest(),
      jit.kernels().split()[0])
"""


def test_poplar1_gives_the_same_bytes_with_and_without_numba() -> None:
    """Sharding, both preparation rounds and the aggregate shares at every level (the
    leaf included) hash the same in a process with the kernels and in one with
    ``FEDHH_JIT=0`` (the numpy code alone)."""
    outs = {}
    for flag in ("1", "0"):
        env = dict(os.environ, FEDHH_JIT=flag)
        res = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                             text=True, timeout=300, check=True)
        outs[flag] = res.stdout.split()
    assert outs["1"][:2] == ["True", "True"] and outs["0"][:3] == ["False", "False", "False"]
    assert outs["1"][3] == outs["0"][3]
    assert (outs["1"][4], outs["0"][4]) == ("numba", "numpy")  # what bench outputs record
    assert len(outs["1"][3]) == len(hashlib.sha256().hexdigest())


def test_committed_keccak_kernel_is_the_generated_one() -> None:
    import inspect

    from protocol.core.poplar1 import _keccak_kernel
    body = inspect.getsource(_keccak_kernel.keccak_columns).split("\n", 1)[1]
    assert body == jit._keccak_source().split("\n", 1)[1]


def _level_runner(bits: int, n: int, seed: int, ctx: bytes, levels: int, rows: int):  # noqa: ANN202
    """``n`` random reports sharded once; the returned function prepares the first
    ``levels`` levels with fresh aggregators (candidates: the prefixes of the first
    ``rows`` reports) and returns every round's shares and the aggregates as lists."""
    from protocol.core.poplar1 import Aggregator, Poplar1, sketch_accepts, sketch_message

    rng = np.random.default_rng(seed)
    meas = rng.integers(0, 2, (n, bits)).astype(bool)
    v = Poplar1(bits, ctx)
    rep = v.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                        rng.integers(0, 256, (n, v.RAND_SIZE), dtype=np.uint8))

    def run() -> list:
        aggs = [Aggregator(v, j, bytes(32), rep.nonces, rep.public, rep.shares[j])
                for j in (0, 1)]
        out = []
        for lv in range(levels):
            pref = tuple(sorted({tuple(bool(b) for b in row[:lv + 1]) for row in meas[:rows]}))
            r1 = [a.verify_init((lv, pref)) for a in aggs]
            r2 = [a.verify_next(sketch_message(lv, bits, *r1)) for a in aggs]
            ok = sketch_accepts(lv, bits, *r2)
            out.append([np.asarray(x).tolist() if hasattr(x, "shape") else x
                        for x in r1 + r2 + [a.aggregate(ok) for a in aggs]])
        return out
    return run


def test_fused_inner_step_falls_back_when_a_value_is_redrawn(monkeypatch) -> None:  # noqa: ANN001
    """A value drawn at least p (probability about 2^-32) sends the level to the numpy
    path, which draws it again exactly: forced here, the shares are the same."""
    from protocol.core.poplar1 import idpf as I

    if not I._fused_inner():
        pytest.skip("the fused step needs libcrypto")
    run = _level_runner(6, 50, 9, b"fallback", levels=5, rows=9)
    want = run()
    calls = []
    real = jit.idpf_inner_step

    def flagged(*args):  # noqa: ANN002, ANN202
        s, c, y, bad = real(*args)
        bad = bad.copy()
        bad[0, 0] = True
        calls.append(1)
        return s, c, y, bad

    monkeypatch.setattr(jit, "idpf_inner_step", flagged)
    assert run() == want and calls


_EDGES255 = [F.P255 - 1, F.P255 - 2, 0, 1, 2, 19, (1 << 255) - 20, (1 << 26) - 1, 1 << 26,
             (1 << 254), (1 << 234) - 1]


def _field255(rng: np.random.Generator, *shape: int) -> list:
    """Python integers in [0, p) of ``shape`` (nested lists), the edges of the field first."""
    flat = [int.from_bytes(rng.bytes(32), "little") % F.P255 for _ in range(int(np.prod(shape)))]
    flat[:len(_EDGES255)] = _EDGES255[:len(flat)]
    return np.asarray(flat, dtype=object).reshape(shape).tolist()


@pytest.mark.parametrize("c", [0, 1, 2, 31, 32, 33, 44, 64, 65, 130])
def test_leaf_sketch_kernel_equals_numpy_and_python_integers(c: int) -> None:
    """The leaf's round-1 sketch in compiled code (partial reductions every 32
    candidates) is the numpy code's and Python's integers', at the edges of the field
    and with every element p - 1 (the largest columns)."""
    rng = np.random.default_rng(100 + c)
    n = 40
    P = F.P255
    for maxed in (False, True):
        d, e, r = (_field255(rng, n, c) for _ in range(3))
        abc = _field255(rng, n, 3)
        if maxed:
            d = [[P - 1] * c for _ in range(n)]
            e, r = d, d
            abc = [[P - 1] * 3 for _ in range(n)]
        vals = F.limbs_from_ints([[[x, y] for x, y in zip(dr, er)] for dr, er in zip(d, e)],
                                 (n, c, 2))
        rl, al = F.limbs_from_ints(r, (n, c)), F.limbs_from_ints(abc, (n, 3))
        got = jit.sketch_leaf(vals, rl, al)
        data, auth = vals[..., 0], vals[..., 1]
        want = np.stack([F.add255(al[..., 0], F.dot255(data, rl)),
                         F.add255(al[..., 1], F.dot255(data, F.mul255(rl, rl))),
                         F.add255(al[..., 2], F.dot255(auth, rl))], axis=-1)
        assert np.array_equal(got, want)
        ints = F.limbs_to_ints(got)
        for i in range(n):
            assert ints[i] == [(abc[i][0] + sum(x * y for x, y in zip(d[i], r[i]))) % P,
                               (abc[i][1] + sum(x * y * y for x, y in zip(d[i], r[i]))) % P,
                               (abc[i][2] + sum(x * y for x, y in zip(e[i], r[i]))) % P]


@pytest.mark.parametrize("agg_id", [0, 1])
def test_leaf_values_kernel_equals_numpy_and_flags_rejected_elements(agg_id: int) -> None:
    """The leaf's value shares from the convert output (bit 255 masked, the correction
    where the control bit is set, negated for aggregator 1) equal the numpy code's, and
    exactly the nodes with an element at or above p are flagged (among them the elements
    p, p + 18, 2^255 - 1 and p with bit 255 set, after the mask; not p - 1)."""
    rng = np.random.default_rng(7 + agg_id)
    n, m = 60, 9
    raw = rng.integers(0, 256, (n, m, 80), dtype=np.uint8)
    specials = {(0, 0, 0): F.P255, (1, 2, 1): F.P255 + 18, (2, 3, 0): (1 << 256) - 1,
                (3, 4, 1): F.P255 - 1, (4, 5, 0): 0, (5, 6, 1): (1 << 255) + F.P255}
    for (r, j, v), value in specials.items():
        raw[r, j, 16 + 32 * v:48 + 32 * v] = np.frombuffer(value.to_bytes(32, "little"), np.uint8)
    ctrl = rng.integers(0, 2, (n, m)).astype(bool)
    ctrl[:6] = True
    cw = F.limbs_from_ints(_field255(rng, n, 2), (n, 2))
    y, bad = jit.leaf_values(raw, ctrl, cw, agg_id)
    vals = F.limbs_from_bytes(raw[:, :, 16:].reshape(n, m, 2, 32), mask=True)
    want_bad = F.at_least_p(vals).any(axis=-1)
    assert np.array_equal(bad, want_bad)
    assert bad[0, 0] and bad[1, 2] and bad[2, 3] and not bad[3, 4] and bad[5, 6]
    ok = ~want_bad
    want = np.where(ctrl[None, :, :, None], F.add255(vals, cw[:, :, None, :]), F.reduce255(vals))
    if agg_id == 1:
        want = F.neg255(want)
    assert np.array_equal(y[:, ok], want[:, ok])
    ints = F.limbs_to_ints(y[:, 3, 4])
    c3 = F.limbs_to_ints(cw[:, 3])[1]
    assert ints[1] == ((-1) ** agg_id * (F.P255 - 1 + c3)) % F.P255


def test_leaf_values_redraw_equals_the_exact_draw(monkeypatch) -> None:  # noqa: ANN001
    """A node flagged by the compiled leaf (an element at or above p) is drawn again
    exactly: forced here on a node whose draw was fine, the level's shares are the same."""
    run = _level_runner(4, 30, 11, b"leaf redraw", levels=4, rows=30)
    want = run()
    calls = []
    real = jit.leaf_values

    def flagged(*args):  # noqa: ANN002, ANN202
        y, bad = real(*args)
        y, bad = y.copy(), bad.copy()
        y[:, 0, 0] = 0                       # what the redraw must put right
        y[:, 5, 1] = 12345
        bad[0, 0] = bad[5, 1] = True
        calls.append(1)
        return y, bad

    monkeypatch.setattr(jit, "leaf_values", flagged)
    assert run() == want and len(calls) == 2
