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


@pytest.mark.parametrize("n", [1, 7, 2048, 9000])
def test_keccak_kernel_equals_numpy_rounds(n: int) -> None:
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


def test_fused_inner_step_falls_back_when_a_value_is_redrawn(monkeypatch) -> None:  # noqa: ANN001
    """A value drawn at least p (probability about 2^-32) sends the level to the numpy
    path, which draws it again exactly: forced here, the shares are the same."""
    from protocol.core.poplar1 import Aggregator, Poplar1, sketch_accepts, sketch_message
    from protocol.core.poplar1 import idpf as I

    if not I._fused_inner():
        pytest.skip("the fused step needs libcrypto")
    bits, n = 6, 50
    rng = np.random.default_rng(9)
    meas = rng.integers(0, 2, (n, bits)).astype(bool)
    v = Poplar1(bits, b"fallback")
    rep = v.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                        rng.integers(0, 256, (n, v.RAND_SIZE), dtype=np.uint8))

    def run() -> list:
        aggs = [Aggregator(v, j, bytes(32), rep.nonces, rep.public, rep.shares[j])
                for j in (0, 1)]
        out = []
        for lv in range(bits - 1):
            pref = tuple(sorted({tuple(bool(b) for b in row[:lv + 1]) for row in meas[:9]}))
            r1 = [a.verify_init((lv, pref)) for a in aggs]
            r2 = [a.verify_next(sketch_message(lv, bits, *r1)) for a in aggs]
            ok = sketch_accepts(lv, bits, *r2)
            out.append([np.asarray(x).tolist() for x in r1 + r2 + [a.aggregate(ok) for a in aggs]])
        return out

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
