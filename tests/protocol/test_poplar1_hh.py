"""Poplar1 heavy hitters: the prefix search, the parties' views, the encoding shared
with TrieHH, ``api.poplar1`` and ``fedhh hh --mechanism poplar1``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from protocol.studies import api
from protocol.studies.errors import StudyError
from protocol.studies.runners import poplar1 as runner


def test_encoding_round_trip_and_refusal() -> None:
    alphabet = "abc"
    bits = runner.encode_words(["a", "cab", "abcabc"], alphabet, 4)
    assert bits.shape == (3, 4 * 2)
    assert [runner.decode_bits(b, alphabet) for b in bits] == ["a", "cab", "abca"]
    with pytest.raises(StudyError):
        runner.encode_words(["abd"], alphabet, 4)
    with pytest.raises(StudyError):
        runner.encode_words(["a"], alphabet, 0)


def test_search_finds_exactly_the_strings_above_threshold_and_views_hold_every_count() -> None:
    words = ["ab"] * 9 + ["ba"] * 5 + ["c"] * 3 + ["a"] * 1
    res = runner.heavy_hitters_bits(runner.encode_words(words, "abc", 2), 4, seed=7)
    found = {runner.decode_bits(s, "abc"): c for s, c in res.heavy.items()}
    assert found == {"ab": 9, "ba": 5}
    p0, p1 = res.parties
    assert p0.view == p1.view and len(p0.view) == res.bits
    # every count either aggregator learnt is the true count of that candidate prefix
    enc = runner.encode_words(words, "abc", 2)
    for v in p0.view:
        for cand, count in zip(v["candidates"], v["counts"]):
            pref = np.array([c == "1" for c in cand])
            assert count == int((enc[:, :len(pref)] == pref).all(axis=1).sum())
        assert v["rejected_reports"] == []
    assert p0.cpu_seconds > 0 and p0.bytes_sent > 0 and p0.bytes_received > 0


def test_search_in_preparation_batches_equals_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search splits the population into preparation batches of PREP_BATCH reports:
    with batches of 7 (the last one short) it finds the same strings with the same
    counts, learns the same views and sends the same bytes as with one batch; a
    malformed report in the middle batch is rejected there as in one batch."""
    words = ["ab"] * 9 + ["ba"] * 5 + ["c"] * 3 + ["a"] * 2
    enc = runner.encode_words(words, "abc", 2)
    whole = runner.heavy_hitters_bits(enc, 3, seed=4)
    monkeypatch.setattr(runner, "PREP_BATCH", 7)
    batched = runner.heavy_hitters_bits(enc, 3, seed=4)
    assert batched.heavy == whole.heavy and batched.heavy
    for a, b in zip(whole.parties, batched.parties):
        assert a.view == b.view
        assert (a.bytes_sent, a.bytes_received) == (b.bytes_sent, b.bytes_received)
    # a wrong-weight report (index 10, in the second batch) is rejected at its level
    from protocol.core.poplar1 import Poplar1

    vdaf = Poplar1(enc.shape[1], runner.CTX)
    rng = np.random.default_rng(1)
    n = enc.shape[0]
    w = np.ones(enc.shape, dtype=np.int64)
    w[10, 1] = 2
    rep = vdaf.shard_batch(enc, rng.integers(0, 256, (n, 16), dtype=np.uint8),
                           rng.integers(0, 256, (n, vdaf.RAND_SIZE), dtype=np.uint8), weights=w)
    out = runner.search(vdaf, rep.nonces, rep.public, rep.shares, 3, verify_key=bytes(32))
    assert [lv["rejected"] for lv in out["levels"]][:3] == [0, 1, 0]
    assert out["parties"][0].view[1]["rejected_reports"] == [10]


def test_api_poplar1_shape() -> None:
    items = ["the"] * 30 + ["of"] * 20 + ["to"] * 3 + ["and"] * 2
    out = api.poplar1(items, threshold=10, max_length=4, alphabet="abcdefghijklmnopqrstuvwxyz",
                      seed=1)
    assert [(h.item, h.count) for h in out.heavy_hitters] == [("the", 30), ("of", 20)]
    assert out.mechanism == "poplar1" and out.guarantee is None and out.n == 55
    assert len(out.rounds) == out.parameters["levels"] == 4 * 5
    assert set(out.costs.cpu_seconds) == {"clients", "aggregator 0", "aggregator 1"}
    d = json.loads(out.to_json(views=True))
    # level 0 is the first bit of the first character's code (index + 1 on 5 bits):
    # t = 20 and "to" start with 1 (33 users), o = 15 and a = 1 with 0 (22)
    assert d["views"][0]["views"]["aggregator 0"]["counts"] == [22, 33]
    assert "item,count" in out.to_table()
    with pytest.raises(StudyError):
        api.poplar1(["ab$"], alphabet="ab")


def test_api_poplar1_sampled_release_is_triehhs_function_of_the_samples() -> None:
    """``api.poplar1(mode="sampled")``: Corollary 1's theta and m and Theorem 1's
    guarantee; each round's sample (in the aggregators' views) has m clients, and the
    release is exactly TrieHH's on those samples: an ``i``-character prefix extending a
    released unfinished one is released iff at least theta sampled clients hold it."""
    from mechanisms.triehh_privacy import corollary1

    pop = _en(8000)
    words = [pop.vocabulary[i] for i in pop.items]
    L, eps = 5, 6.0
    out = api.poplar1(words, mode="sampled", epsilon=eps, max_length=L, seed=3,
                      alphabet=pop.alphabet, progress=False)
    want = corollary1(eps, 1 / 8000 ** 2, 8000, L)
    assert out.guarantee == want.guarantee
    theta, m = out.parameters["theta"], out.parameters["m"]
    assert (theta, m) == (want.theta, want.m)
    assert all(h.count is None for h in out.heavy_hitters)
    cut = [w[:L] + ("$" if len(w) < L else "") for w in words]
    frontier, released, got_words = {""}, [], set()
    for i, rv in enumerate(out.views, start=1):
        sample = rv.views["aggregator 0"]["sampled_clients"]
        assert np.array_equal(sample, rv.views["aggregator 1"]["sampled_clients"])
        assert len(set(np.asarray(sample).tolist())) == m
        held: dict[str, int] = {}
        for u in np.asarray(sample).tolist():
            if len(cut[u]) >= i:
                held[cut[u][:i]] = held.get(cut[u][:i], 0) + 1
        rel = {p for p, c in held.items() if c >= theta and p[:-1] in frontier}
        assert out.rounds[i - 1].released == len(rel) and out.rounds[i - 1].contacted == m
        released.append(rel)
        got_words |= {p.rstrip("$") for p in rel if p.endswith("$") or i == L}
        frontier = {p for p in rel if not p.endswith("$")}
        # sub-threshold counts reach the aggregators (the leakage the table states)
        assert any(c < theta for v in rv.views["aggregator 0"]["levels"] for c in v["counts"])
    assert set(out.items) == got_words and len(got_words) >= 3
    assert set(out.released_prefixes) == {p for r in released[:L - 1] for p in r
                                          if not p.endswith("$")}
    assert set(out.costs.cpu_seconds) == {"clients", "aggregator 0", "aggregator 1",
                                          "collector"}
    assert "Theorem 1" in str(out) and json.loads(out.to_json(views=True))["views"]


def test_api_poplar1_sampled_refusals() -> None:
    words = ["the"] * 300 + ["of"] * 200
    with pytest.raises(StudyError, match=r"^Poplar1 \(sampled\) takes TrieHH's parameters: "
                       r".*the population has 500 users; Poplar1 \(sampled\) at epsilon 4 "
                       r"\(L = 10\) needs at least 941 users$"):
        api.poplar1(words, mode="sampled", epsilon=4, seed=1, progress=False)
    with pytest.raises(StudyError, match="needs epsilon"):
        api.poplar1(words, mode="sampled", progress=False)
    with pytest.raises(StudyError, match="threshold applies to mode='plain'"):
        api.poplar1(words, mode="sampled", epsilon=4, threshold=5, progress=False)
    with pytest.raises(StudyError, match="apply to mode='sampled' only"):
        api.poplar1(words, epsilon=4, progress=False)
    with pytest.raises(StudyError, match="mode must be"):
        api.poplar1(words, mode="dp", progress=False)  # type: ignore[arg-type]


def test_hh_command_poplar1(capsys: pytest.CaptureFixture[str]) -> None:
    from protocol.cli import main

    rc = main(["hh", "--mechanism", "poplar1", "--dataset", "en", "--users", "400",
               "--threshold", "8", "--max-length", "3", "--seed", "2", "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mechanism"] == "poplar1" and out["privacy"]["kind"] == "none"
    assert out["details"]["levels"] >= 1 and out["discovered"]
    assert out["discovered"][0]["item"] == "the"
    assert main(["hh", "--mechanism", "poplar1", "--users", "300", "--transport", "secagg",
                 "--quiet"]) == 2


def test_eval_compare_side_by_side(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from protocol.cli import main

    rc = main(["eval", "compare", "--mechanisms", "triehh,poplar1", "--poplar1-mode", "plain",
               "--dataset", "en",
               "--users", "400", "--epsilons", "4", "--k", "5", "--max-length", "3",
               "--threshold", "8",
               "--out", str(tmp_path), "--seed", "1", "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["mechanism"]: r for r in out["rows"]}
    assert set(rows) == {"triehh", "poplar1"}
    p = rows["poplar1"]
    assert p["clients_contacted"] == 400 and p["rounds"] == 2 * p["levels"]
    assert p["client_upload_bytes"] > rows["triehh"]["client_upload_bytes"]
    assert "every candidate prefix" in p["learns"] and "DP" in rows["triehh"]["privacy"]
    assert (tmp_path / "table.md").read_text().count("| poplar1 |") == 1
    assert main(["eval", "compare", "--mechanisms", "triehh,pem", "--users", "400",
                 "--out", str(tmp_path), "--quiet"]) == 2


def test_poplar1_options_are_refused_elsewhere() -> None:
    from protocol.cli import main

    assert main(["hh", "--mechanism", "pem", "--users", "300", "--threshold", "5",
                 "--quiet"]) == 2
    assert main(["hh", "--mechanism", "triehh", "--users", "300", "--max-length", "5",
                 "--quiet"]) == 2


# ------------------------------------------------------------------ the sampled mode
def _en(n: int, seed: int = 5):  # noqa: ANN202
    from protocol.studies.runners.hh import load_population

    return load_population("en", n, np.random.default_rng(seed))


def test_sampled_mode_releases_triehhs_trie_from_the_same_samples() -> None:
    """With TrieHH's sampling stream the sampled mode draws TrieHH's users each round
    and releases TrieHH's trie, level by level: the release is TrieHH's function of the
    sampled, thresholded counts (docs/poplar1.md, "The sampled mode")."""
    from mechanisms.triehh_privacy import batch_size
    from protocol.studies.runners import default_transport
    from protocol.studies.runners import triehh as T

    pop = _en(6000)
    theta, gamma = 5, 7.0
    prep, _ = T.prepare(T.TrieHHOptions(dataset="en", users=pop.n, theta=theta, gamma=gamma,
                                        max_length=10), population=pop)
    res = T.run_once(prep, default_transport("plain"), np.random.default_rng(11))
    m = batch_size(gamma, pop.n)
    codes = runner.encode_codes(pop.vocabulary, pop.alphabet, 10)[pop.items]
    out = runner.sampled_search(codes, runner.bits_per_char(pop.alphabet), len(pop.alphabet),
                                theta, m, sample_rng=np.random.default_rng(11).spawn(3)[0],
                                seed=2)
    labels = prep.alphabet.labels
    trie = res.trie
    by_depth: dict[int, set[str]] = {}
    for node in range(1, len(trie)):
        by_depth.setdefault(int(trie.depth[node]), set()).add(trie.label(node, labels))
    mine = {i + 1: {"".join(pop.alphabet[c - 1] for c in p if c) + ("$" if p[-1] == 0 else "")
                    for p in rel} for i, rel in enumerate(out.released) if rel}
    assert mine == by_depth and len(mine) >= 3
    words = {"".join(pop.alphabet[c - 1] for c in w) for w in out.words}
    assert words == set(res.heavy_hitters) and len(words) >= 5
    assert [r["sampled"] for r in out.rounds] == [r.sampled for r in res.rounds]


def test_sampled_views_hold_the_counts_over_each_rounds_sample() -> None:
    """Each aggregator learns, per bit level of a round, the count over that round's
    sample of every candidate (sub-threshold ones included), and nothing about the
    clients outside the sample; only the sampled clients ever upload."""
    pop = _en(3000)
    codes = runner.encode_codes(pop.vocabulary, pop.alphabet, 6)[pop.items]
    b = runner.bits_per_char(pop.alphabet)
    out = runner.sampled_search(codes, b, len(pop.alphabet), 6, 400,
                                sample_rng=np.random.default_rng(3), seed=4)
    bits = runner.codes_to_bits(codes, b)
    p0, p1 = out.parties
    assert p0.view == p1.view and p0.view
    below = 0
    for v in p0.view:
        sample = bits[out.samples[v["round"] - 1]]
        for cand, count in zip(v["candidates"], v["counts"]):
            pref = np.array([c == "1" for c in cand])
            assert count == int((sample[:, :len(pref)] == pref).all(axis=1).sum())
            below += count < 6
        assert v["rejected_reports"] == []
    assert below > 0
    assert out.uploads == len(set(np.concatenate(out.samples).tolist())) < pop.n


def test_gather_reads_the_asked_rows_in_the_asked_order(tmp_path,  # noqa: ANN001
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from protocol.core.poplar1.store import ReportStore

    monkeypatch.setattr(runner, "GATHER_ROWS", 7)
    rng = np.random.default_rng(0)
    n, bits = 50, 4
    with ReportStore(bits, n) as mem, ReportStore(bits, n, directory=str(tmp_path)) as files:
        nonces = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        seeds = rng.integers(0, 256, (n, bits, 16), dtype=np.uint8)
        for st in (mem, files):
            st.write("nonces", 0, nonces)
            st.write("seed_cw", 0, seeds)
        idx = np.array([33, 2, 49, 2, 10, 0, 17, 41], dtype=np.int64)
        for name, level, want in (("nonces", None, nonces[idx]),
                                  ("seed_cw", 0, seeds[idx, 0]), ("seed_cw", 3, seeds[idx, 3])):
            assert np.array_equal(runner._gather(mem, name, idx, level), want)
            assert np.array_equal(runner._gather(files, name, idx, level), want)
        assert runner._gather(files, "nonces", idx[:0]).shape == (0, 16)


def test_sampled_search_out_of_core_reads_only_the_sample_and_changes_nothing(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The uploads in files (gathered a few rows per positioned read) or in memory: the
    same release, the same counts in both aggregators' views; the files are removed."""
    pop = _en(3000)
    codes = runner.encode_codes(pop.vocabulary, pop.alphabet, 6)[pop.items]
    b = runner.bits_per_char(pop.alphabet)
    monkeypatch.setattr(runner, "GATHER_ROWS", 97)   # many windows per gather
    got = []
    for ooc in (False, True):
        out = runner.sampled_search(codes, b, len(pop.alphabet), 6, 400,
                                    sample_rng=np.random.default_rng(3), seed=4,
                                    out_of_core=ooc, tmpdir=str(tmp_path))
        assert out.out_of_core is ooc
        got.append(out)
    mem, files = got
    assert files.released == mem.released and files.words == mem.words and mem.words
    assert [p.view for p in files.parties] == [p.view for p in mem.parties]
    assert list(tmp_path.iterdir()) == []


def test_sampled_mode_carries_triehhs_guarantee_and_refuses_what_it_cannot() -> None:
    from mechanisms.triehh_privacy import corollary1

    pop = _en(5000)
    res = runner.run_poplar1_sampled(pop, 10, epsilon=8.0, seed=1)
    want = corollary1(8.0, 1 / pop.n ** 2, pop.n, 10)
    pv = res.privacy
    assert pv["kind"] == "central" and pv["epsilon"] == want.guarantee.epsilon
    assert pv["delta"] == want.guarantee.delta and pv["parameters"]["m"] == want.m
    assert all(c is None for c in res.discovered.values()) and res.discovered
    d = res.details
    assert d["mode"] == "sampled" and d["clients_uploaded"] < pop.n
    assert d["aggregators_learn"]["below_threshold"] > 0
    with pytest.raises(StudyError, match="gamma"):
        runner.run_poplar1_sampled(_en(2000), 10, epsilon=1.0, seed=1)
    with pytest.raises(StudyError):
        runner.sampled_search(np.zeros((5, 2), dtype=np.int64), 2, 3, 2, 9,
                              sample_rng=np.random.default_rng(0))


def test_hh_command_poplar1_sampled_is_triehhs_release(capsys: pytest.CaptureFixture[str]) -> None:
    from protocol.cli import main

    got = {}
    for mech, extra in (("triehh", []), ("poplar1", ["--poplar1-mode", "sampled"])):
        assert main(["hh", "--mechanism", mech, *extra, "--dataset", "en", "--users", "6000",
                     "--epsilon", "6", "--seed", "3", "--json", "--quiet"]) == 0
        got[mech] = json.loads(capsys.readouterr().out)
    assert got["poplar1"]["privacy"]["epsilon"] == got["triehh"]["privacy"]["epsilon"]
    assert {d["item"] for d in got["poplar1"]["discovered"]} == \
        {d["item"] for d in got["triehh"]["discovered"]}
    assert main(["hh", "--mechanism", "poplar1", "--poplar1-mode", "sampled", "--threshold",
                 "5", "--users", "20000", "--dataset", "en", "--quiet"]) == 2
    assert main(["hh", "--mechanism", "pem", "--poplar1-mode", "sampled", "--users", "300",
                 "--quiet"]) == 2
