"""AES-128 under one key per report (``RowKeyedAes``): the ``openssl`` backend (one
OpenSSL context keyed again per report, through cffi) against ``cryptography``'s AES-ECB,
and the IDPF's outputs equal under both backends."""
from __future__ import annotations

import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from protocol.core.poplar1 import xof

pytestmark = pytest.mark.skipif(xof._load_openssl() is None,
                                reason="libcrypto cannot be loaded through cffi here")


@pytest.fixture
def backend():  # noqa: ANN201
    before = xof.aes_backend()
    yield xof.set_aes_backend
    xof.set_aes_backend(before)


def _ecb(key: bytes, data: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(data) + enc.finalize()


@pytest.mark.parametrize("name", xof.AES_BACKENDS)
@pytest.mark.parametrize("n,blocks", [(1, 1), (7, 3), (64, 40), (3, 0), (0, 2)])
def test_row_keyed_aes_is_aes_ecb_under_each_rows_key(backend, name, n, blocks) -> None:  # noqa: ANN001
    """Random keys and blocks: row ``r`` under ``keys[r]`` equals cryptography's
    AES-128-ECB under that key, byte for byte."""
    backend(name)
    keys = np.frombuffer(os.urandom(16 * n), dtype=np.uint8).reshape(n, 16)
    data = np.frombuffer(os.urandom(16 * blocks * n), dtype=np.uint8).reshape(n, 16 * blocks)
    got = xof.RowKeyedAes(keys).encrypt_rows(data)
    assert got.shape == (n, 16 * blocks)
    for r in range(n):
        assert got[r].tobytes() == _ecb(keys[r].tobytes(), data[r].tobytes())
    # a subset of the rows keeps their keys
    idx = np.arange(n)[::2]
    sub = xof.RowKeyedAes(keys).take(idx).encrypt_rows(data[idx])
    assert np.array_equal(sub, got[idx])


@pytest.mark.parametrize("name", xof.AES_BACKENDS)
def test_fips197_known_answer_and_bad_input(backend, name) -> None:  # noqa: ANN001
    """FIPS 197 appendix C.1 (AES-128) under every backend; malformed calls raise."""
    backend(name)
    key = np.frombuffer(bytes(range(16)), dtype=np.uint8).reshape(1, 16)
    pt = np.frombuffer(bytes.fromhex("00112233445566778899aabbccddeeff"), dtype=np.uint8)
    out = xof.RowKeyedAes(key).encrypt_rows(pt.reshape(1, 16))
    assert out.tobytes().hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    with pytest.raises(ValueError, match="whole blocks"):
        xof.RowKeyedAes(key).encrypt_rows(np.zeros((1, 15), dtype=np.uint8))
    with pytest.raises(ValueError, match="whole blocks"):
        xof.RowKeyedAes(key).encrypt_rows(np.zeros((2, 16), dtype=np.uint8))
    with pytest.raises(ValueError, match="one of"):
        xof.set_aes_backend("bitsliced")
    with pytest.raises(ValueError, match=r"\(N, 16\)"):
        xof.RowKeyedAes(np.zeros((2, 15), dtype=np.uint8))


def test_a_report_keeps_only_its_two_keys(backend) -> None:  # noqa: ANN001
    """With the openssl (or numpy) backend a report's AES state is its two 16-byte keys:
    after two levels of preparation no context is kept; the contexts backend keeps one
    each; the sketch shares are the same under all three."""
    from protocol.core.poplar1 import Aggregator, Poplar1

    vdaf = Poplar1(16, b"aes")
    n = 20
    rng = np.random.default_rng(1)
    rep = vdaf.shard_batch(rng.integers(0, 2, (n, 16)).astype(bool),
                           rng.integers(0, 256, (n, 16), dtype=np.uint8),
                           rng.integers(0, 256, (n, vdaf.RAND_SIZE), dtype=np.uint8))
    p0 = (0, ((False,), (True,)))
    p1 = (1, ((False, True), (True, False), (True, True)))
    out = {}
    for name in xof.AES_BACKENDS:
        backend(name)
        a = Aggregator(vdaf, 0, bytes(32), rep.nonces, rep.public, rep.shares[0])
        out[name] = (a.verify_init(p0), a.verify_init(p1))
        c = a.ciphers
        assert c.extend.keys.nbytes + c.convert.keys.nbytes == 32 * n
        assert (c.convert._contexts is None) == (name != "contexts")
    for name in ("contexts", "numpy"):
        for x, y in zip(out["openssl"], out[name]):
            assert np.array_equal(x, y)


def test_bench_state_measures_each_part() -> None:
    """``fedhh bench poplar1 --state``: the nodes are 17 bytes each, the sponge its 200
    bytes of state, the keys 32 bytes a report; the kept contexts allocate more than
    the keys."""
    from protocol.studies.runners.poplar1 import bench_state

    out = bench_state(256, 16, 8, levels=5, aes_blocks=4, repeats=1)
    b = out["backends"]
    assert set(b) == set(xof.AES_BACKENDS)
    for part in b.values():
        assert part["node_bytes_per_report"] == 17 * part["nodes_per_report"] == 17 * 8
        assert part["sponge_bytes_per_report"] == 200
        assert part["aes_key_bytes_per_report"] == 32
        assert part["aes_us_per_report"] > 0
    if b["openssl"]["aes_bytes_per_report"] is not None:
        assert b["contexts"]["aes_bytes_per_report"] > 10 * b["openssl"]["aes_bytes_per_report"]


@pytest.mark.parametrize("name", xof.AES_BACKENDS)
def test_draft_vectors_under_each_aes_backend(backend, name) -> None:  # noqa: ANN001
    """The draft's Poplar1 and IDPF vectors, byte for byte, with the IDPF's AES through
    each backend."""
    import importlib
    import pathlib
    import sys

    here = str(pathlib.Path(__file__).resolve().parent)
    if here not in sys.path:      # pytest's default import mode puts it there already
        sys.path.insert(0, here)
    vec = importlib.import_module("test_poplar1_vectors")
    backend(name)
    vec.run_every_vector()


def test_without_libcrypto_the_contexts_backend_is_used(monkeypatch) -> None:  # noqa: ANN001
    """Where libcrypto cannot be loaded (or failed its known answer), the default is the
    contexts backend and asking for openssl is refused."""
    monkeypatch.setattr(xof, "_openssl_lib", False)
    monkeypatch.setattr(xof, "_backend", [])
    assert xof.aes_backend() == "contexts"
    with pytest.raises(ValueError, match="libcrypto"):
        xof.set_aes_backend("openssl")
    keys = np.frombuffer(bytes(range(16)), dtype=np.uint8).reshape(1, 16)
    pt = np.frombuffer(bytes.fromhex("00112233445566778899aabbccddeeff"), dtype=np.uint8)
    assert xof.RowKeyedAes(keys).encrypt_rows(pt.reshape(1, 16)).tobytes().hex() \
        == "69c4e0d86a7b0430d8cdb78070b4c55a"
