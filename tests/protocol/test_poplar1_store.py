"""The Poplar1 report store: the validated uploads kept once, in memory or out of core
(np.memmap files in a temporary directory), read back batch by batch."""
from __future__ import annotations

import os

import numpy as np
import pytest

from protocol.core.poplar1 import Poplar1
from protocol.core.poplar1.idpf import encode_public_share
from protocol.core.poplar1.store import Field255Rows, ReportStore
from protocol.studies.runners import poplar1 as runner


def _reports(n: int, bits: int, seed: int):  # noqa: ANN202
    vdaf = Poplar1(bits, runner.CTX)
    rng = np.random.default_rng(seed)
    meas = rng.integers(0, 2, (n, bits)).astype(bool)
    rep = vdaf.shard_batch(meas, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                           rng.integers(0, 256, (n, vdaf.RAND_SIZE), dtype=np.uint8))
    return vdaf, rep


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_store_gives_back_the_decoded_reports(where: str, tmp_path) -> None:  # noqa: ANN001
    """Rows written from the encoded uploads read back, for any batch, as exactly what
    the validating decoders give (the control bits, seeds, Field64 and Field255
    elements); out of core the files live in a fresh directory that close removes."""
    vdaf, rep = _reports(11, 9, 0)
    pub_b = [encode_public_share(rep.public, r) for r in range(11)]
    in_b = [[vdaf.encode_input_share(rep.shares[j], r) for r in range(11)] for j in (0, 1)]
    store = ReportStore(9, 11, directory=str(tmp_path) if where == "disk" else None)
    assert store.bytes_per_report() == 16 + vdaf.public_share_size() + 2 * vdaf.input_share_size()
    store.put(0, rep.nonces[:6], pub_b[:6], [x[:6] for x in in_b])
    store.put(6, rep.nonces[6:], pub_b[6:], [x[6:] for x in in_b])
    if where == "disk":
        assert store.out_of_core and len(os.listdir(tmp_path)) == 1
    want_pub = vdaf.decode_public_shares(pub_b)
    for lo, hi in [(0, 11), (3, 8), (10, 11)]:
        assert np.array_equal(store.nonces(lo, hi), rep.nonces[lo:hi])
        got = store.public(1, lo, hi)
        assert np.array_equal(got.seed_cw, want_pub.seed_cw[lo:hi])
        assert np.array_equal(got.ctrl_cw, want_pub.ctrl_cw[lo:hi]) and got.ctrl_cw.dtype == bool
        assert np.array_equal(got.w_inner, want_pub.w_inner[lo:hi])
        assert list(got.w_leaf) == want_pub.w_leaf[lo:hi]
        for j in (0, 1):
            want = vdaf.decode_input_shares(in_b[j])
            sh = store.inputs(j, lo, hi)
            assert np.array_equal(sh.key, want.key[lo:hi])
            assert np.array_equal(sh.corr_seed, want.corr_seed[lo:hi])
            assert np.array_equal(sh.corr_inner, want.corr_inner[lo:hi])
            assert [sh.corr_leaf[r] for r in range(hi - lo)] == want.corr_leaf[lo:hi]
    store.close()
    assert os.listdir(tmp_path) == []
    with pytest.raises(Exception, match="closed|No such file"):
        store.public(0, 0, 1)


def test_store_refuses_rows_of_the_wrong_shape() -> None:
    store = ReportStore(4, 3)
    with pytest.raises(Exception, match="bad rows"):
        store.write("nonces", 0, np.zeros((3, 15), dtype=np.uint8))
    with pytest.raises(Exception, match="bad rows"):
        store.write("nonces", 2, np.zeros((2, 16), dtype=np.uint8))


def test_field255_rows_reads_little_endian_elements() -> None:
    raw = np.zeros((2, 64), dtype=np.uint8)
    raw[1, 0], raw[1, 32] = 5, 1
    raw[1, 33] = 1
    rows = Field255Rows(raw)
    assert len(rows) == 2 and rows[0] == [0, 0] and rows[1] == [5, 257]
    assert list(rows) == [[0, 0], [5, 257]]


def test_out_of_core_search_equals_the_in_memory_one(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path) -> None:  # noqa: ANN001
    """Forced out of core (with preparation batches of 5, the last one short), the
    search learns exactly the in-memory search's views, counts, rejected reports and
    bytes, and leaves no file behind."""
    words = ["ab"] * 9 + ["ba"] * 5 + ["c"] * 3 + ["a"] * 2
    enc = runner.encode_words(words, "abc", 2)
    mem = runner.heavy_hitters_bits(enc, 3, seed=4, out_of_core=False)
    monkeypatch.setattr(runner, "PREP_BATCH", 5)
    disk = runner.heavy_hitters_bits(enc, 3, seed=4, out_of_core=True, tmpdir=str(tmp_path))
    assert disk.heavy == mem.heavy and mem.heavy
    assert [{k: v for k, v in lv.items() if k != "seconds"} for lv in disk.levels] == [
        {k: v for k, v in lv.items() if k != "seconds"} for lv in mem.levels]
    for a, b in zip(mem.parties, disk.parties):
        assert a.view == b.view
        assert (a.bytes_sent, a.bytes_received) == (b.bytes_sent, b.bytes_received)
    assert disk.upload_bytes_per_client == mem.upload_bytes_per_client
    assert os.listdir(tmp_path) == []


def test_out_of_core_files_are_removed_on_error(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path) -> None:  # noqa: ANN001
    """A search that fails (too many candidates) still removes its directory."""
    enc = runner.encode_words(["ab", "ba", "cc", "ca"] * 3, "abc", 2)
    from protocol.studies.errors import StudyError

    with pytest.raises(StudyError, match="candidates"):
        runner.heavy_hitters_bits(enc, 1, seed=1, out_of_core=True, tmpdir=str(tmp_path),
                                  max_candidates=2)
    assert os.listdir(tmp_path) == []


def test_detached_aggregator_refuses_to_prepare() -> None:
    """An aggregator whose shares were dropped (out of core, between levels) must be
    given them again before its next level."""
    from protocol.core.poplar1 import Aggregator
    from protocol.core.poplar1.errors import Poplar1UsageError

    vdaf, rep = _reports(3, 4, 2)
    a = Aggregator(vdaf, 0, bytes(32), rep.nonces, rep.public, rep.shares[0])
    a.detach()
    with pytest.raises(Poplar1UsageError, match="detached"):
        a.verify_init((0, ((False,), (True,))))
    with pytest.raises(Poplar1UsageError, match="different counts"):
        a.attach(rep.public.take(np.arange(2)), rep.shares[0].take(np.arange(2)))
    a.attach(rep.public, rep.shares[0])
    assert len(a.verify_init((0, ((False,), (True,))))) == 3
