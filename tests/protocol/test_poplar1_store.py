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
    """Reports written chunk by chunk read back, for any batch and level, as exactly
    what the validating decoders give (control bits, seeds, Field64 and Field255
    elements); out of core the files live in a fresh directory that close removes."""
    n, bits = 17, 9
    vdaf, rep = _reports(n, bits, 0)
    pub_b = [encode_public_share(rep.public, r) for r in range(n)]
    in_b = [[vdaf.encode_input_share(rep.shares[j], r) for r in range(n)] for j in (0, 1)]
    pub = vdaf.decode_public_shares(pub_b)
    ins = [vdaf.decode_input_shares(x) for x in in_b]
    store = ReportStore(bits, n, directory=str(tmp_path) if where == "disk" else None)
    assert store.bytes_per_report() == 16 + (16 + 1 + 16) * bits - 16 + 64 + 2 * (
        48 + 16 * (bits - 1) + 64)
    for lo, hi in [(0, 6), (6, n)]:
        store.put(lo, rep.nonces[lo:hi], pub.take(np.arange(lo, hi)),
                  [x.take(np.arange(lo, hi)) for x in ins])
    if where == "disk":
        assert store.out_of_core and len(os.listdir(tmp_path)) == 1
    for lo, hi in [(0, n), (3, 8), (16, 17)]:
        assert np.array_equal(store.nonces(lo, hi), rep.nonces[lo:hi])
        got = store.public(1, lo, hi)
        assert len(got) == hi - lo
        for lv in range(bits):
            assert np.array_equal(got.seed_cw[:, lv], pub.seed_cw[lo:hi, lv])
            assert np.array_equal(got.ctrl_cw[:, lv], pub.ctrl_cw[lo:hi, lv])
            assert got.ctrl_cw[:, lv].dtype == bool
        for lv in range(bits - 1):
            assert np.array_equal(got.w_inner[:, lv], pub.w_inner[lo:hi, lv])
        assert list(got.w_leaf) == list(pub.w_leaf[lo:hi])
        for j in (0, 1):
            sh = store.inputs(j, lo, hi)
            assert np.array_equal(sh.key, ins[j].key[lo:hi])
            assert np.array_equal(sh.corr_seed, ins[j].corr_seed[lo:hi])
            for lv in range(bits - 1):
                assert np.array_equal(sh.corr_inner[:, lv], ins[j].corr_inner[lo:hi, lv])
            assert [sh.corr_leaf[r] for r in range(hi - lo)] == list(ins[j].corr_leaf[lo:hi])
    with pytest.raises(Exception, match="one level at a time"):
        store.public(0, 0, 2).seed_cw[0]
    store.close()
    assert os.listdir(tmp_path) == []
    with pytest.raises(Exception, match="closed"):
        store.nonces(0, 1)


def test_store_refuses_rows_of_the_wrong_shape() -> None:
    store = ReportStore(4, 16)
    with pytest.raises(Exception, match="bad rows"):
        store.write("nonces", 0, np.zeros((3, 15), dtype=np.uint8))
    with pytest.raises(Exception, match="bad rows"):
        store.write("nonces", 15, np.zeros((2, 16), dtype=np.uint8))
    with pytest.raises(Exception, match="bad rows"):   # key: (n, 16), not level-major
        store.write("key0", 0, np.zeros((16, 4, 16), dtype=np.uint8))
    store.write("key0", 0, np.ones((16, 16), dtype=np.uint8))
    assert store.inputs(0, 0, 16).key.sum() == 256


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


def test_parked_search_equals_the_in_memory_one(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path) -> None:  # noqa: ANN001
    """With the aggregators' per-report state parked in files between levels (batches
    of 17, 17 and 6: numpy sponges and one-by-one streams), the search learns exactly
    the in-memory search's views, counts and bytes, and leaves no file behind."""
    words = ["ab"] * 15 + ["ba"] * 12 + ["c"] * 8 + ["a"] * 5
    enc = runner.encode_words(words, "abc", 2)
    monkeypatch.setattr(runner, "PREP_BATCH", 17)
    mem = runner.heavy_hitters_bits(enc, 4, seed=5, out_of_core=False)
    parked = runner.heavy_hitters_bits(enc, 4, seed=5, park=True, tmpdir=str(tmp_path))
    assert parked.heavy == mem.heavy and len(mem.heavy) == 4
    for a, b in zip(mem.parties, parked.parties):
        assert a.view == b.view
        assert (a.bytes_sent, a.bytes_received) == (b.bytes_sent, b.bytes_received)
    assert os.listdir(tmp_path) == []
    from protocol.studies.errors import StudyError

    with pytest.raises(StudyError, match="out of core"):
        runner.heavy_hitters_bits(enc, 4, seed=5, park=True, out_of_core=False)


def test_aggregator_park_and_unpark_restore_its_state() -> None:
    """An aggregator parked after a level and given its arrays back continues from its
    IDPF nodes and sponges (not from the root) with the same sketch shares as one that
    was never parked; parked and never given them back, it is still exact."""
    from protocol.core.poplar1 import Aggregator
    from protocol.core.poplar1.keccak import SpongeBatch

    vdaf, rep = _reports(20, 6, 3)
    key = bytes(range(32))
    aggs = [Aggregator(vdaf, 1, key, rep.nonces, rep.public, rep.shares[1]) for _ in range(3)]
    p0 = (0, ((False,), (True,)))
    p1 = (1, ((False, False), (False, True), (True, False), (True, True)))
    for a in aggs:
        a.verify_init(p0)
    arrays = aggs[1].park()
    assert set(arrays) == {"cache_seeds", "cache_ctrl", "sponge_state"}
    aggs[2].park()
    assert aggs[1]._cache is None and aggs[1]._streams is None
    aggs[1].unpark({k: np.array(v) for k, v in arrays.items()})
    assert aggs[1]._cache is not None and isinstance(aggs[1]._streams, SpongeBatch)
    want = aggs[0].verify_init(p1)
    assert np.array_equal(aggs[1].verify_init(p1), want)
    assert np.array_equal(aggs[2].verify_init(p1), want)
    from protocol.core.poplar1.errors import Poplar1UsageError

    bad = aggs[1].park()
    with pytest.raises(Poplar1UsageError, match="wrong shape"):
        aggs[1].unpark({**bad, "cache_seeds": bad["cache_seeds"][:3]})


def test_bench_refuses_more_strings_than_exist() -> None:
    """--support above the number of printable strings of that length is refused
    (it used to search for them forever)."""
    from protocol.studies.errors import StudyError

    with pytest.raises(StudyError, match="printable"):
        runner.bench_hh([100], [2], support=10_000)


def test_bench_trace_reports_every_level(tmp_path) -> None:  # noqa: ANN001
    """`bench poplar1 --hh --trace FILE` appends one JSON line per level as it ends
    (candidates, peak memory, CPU seconds of this process and of each aggregator), so a
    run cut short still says how far it got."""
    import json

    from protocol.cli import main

    trace = tmp_path / "t.jsonl"
    assert main(["bench", "poplar1", "--hh", "--users", "40", "--chars", "1", "--support", "20",
                 "--park", "--trace", str(trace)]) == 0
    rows = [json.loads(x) for x in trace.read_text().splitlines()]
    assert [r["level"] for r in rows] == list(range(8))
    assert all(r["peak_rss_mb"] > 0 and r["n"] == 40 for r in rows)
    assert all(r["candidates"] >= 2 and len(r["aggregator_cpu_seconds"]) == 2 for r in rows)
