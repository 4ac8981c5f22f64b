"""Count Mean Sketch and Sequence Fragment Puzzle.

Statistical tests use fixed seeds and state the probability that a correct
implementation fails them for a fresh seed.
"""
from __future__ import annotations

import itertools
import math
import string

import numpy as np
import pytest
from scipy import stats

from mechanisms import hashing
from mechanisms.fo import OracleInputError, ReportError
from mechanisms.fo.cms import CMSReports, CMSSketch, CountMeanSketch
from mechanisms.sfp import PAD, SFP


# -- CMS privacy -----------------------------------------------------------------------
def _cms_output_probs(cms: CountMeanSketch, item: int) -> np.ndarray:
    """P[(j, v~) | item] for every j in [k] and v~ in {0,1}^m (bit 1 = +1), from the
    implemented flip probability and the same public hash keys randomize uses."""
    phi = cms.flip_probability
    outs = np.array(list(itertools.product([0, 1], repeat=cms.m)))
    h = hashing.hash_to_range(cms.keys, np.full(cms.k, item, dtype=np.uint64), cms.m)
    P = np.empty((cms.k, outs.shape[0]))
    for j in range(cms.k):
        v = np.zeros(cms.m, dtype=int)
        v[h[j]] = 1
        flipped = outs != v
        P[j] = np.prod(np.where(flipped, phi, 1 - phi), axis=1) / cms.k
    return P.ravel()


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_cms_exact_privacy(eps: float) -> None:
    cms = CountMeanSketch(eps, k=4, m=4, hash_seed=3)
    P = np.stack([_cms_output_probs(cms, x) for x in range(12)])
    assert np.allclose(P.sum(axis=1), 1.0)
    ratio = float(np.max(P.max(axis=0) / P.min(axis=0)))
    assert ratio <= math.exp(eps) * (1 + 1e-12)
    assert math.log(ratio) <= cms.privacy().effective_epsilon * (1 + 1e-12)


def test_cms_randomize_matches_exact_distribution() -> None:
    """Chi-square over all k * 2^m outputs; failure probability 1e-6 per item."""
    cms = CountMeanSketch(2.0, k=3, m=4, hash_seed=5)
    rng = np.random.default_rng(41)
    for item in (0, 7):
        rep = cms.randomize(np.full(120_000, item), rng)
        bits = np.unpackbits(rep.bits, axis=1, count=4)
        code = rep.j * 16 + bits @ np.array([8, 4, 2, 1])
        obs = np.bincount(code, minlength=48)
        assert stats.chisquare(obs, _cms_output_probs(cms, item) * 120_000).pvalue > 1e-6


# -- CMS estimation --------------------------------------------------------------------
def _estimates_one_by_one(cms: CountMeanSketch, sketches: list, cand: np.ndarray) -> np.ndarray:
    """The estimator written out per candidate and per hash function, in Python ints."""
    out = np.empty((len(sketches), cand.shape[0]))
    for si, sk in enumerate(sketches):
        for ci, x in enumerate(cand.tolist()):
            h = hashing.hash_to_range(cms.keys, np.full(cms.k, x, dtype=np.uint64), cms.m)
            total = sum(int(sk.T[l, int(h[l])]) for l in range(cms.k))
            mean_row = cms.c * total / 2.0 + sk.n / 2.0
            out[si, ci] = cms.m / (cms.m - 1.0) * (mean_row - sk.n / cms.m)
    return out


@pytest.mark.parametrize("scale", [1, 1 << 28])   # int32 sums, then sums past 2^31
def test_cms_estimates_equal_the_estimator_written_out(scale: int) -> None:
    cms = CountMeanSketch(2.0, k=24, m=64, hash_seed=11)
    rng = np.random.default_rng(scale)
    sketches = [CMSSketch(rng.integers(-40, 41, (24, 64)).astype(np.int64) * scale,
                          rng.integers(1, 50, 24).astype(np.int64)) for _ in range(3)]
    # small ids, ids above 2^32 (the hash's high half) and a block smaller than the count
    cand = np.concatenate([np.arange(40, dtype=np.uint64),
                           np.array([2**40 + 3, 2**63 + 12345, 2**64 - 1], dtype=np.uint64)])
    want = _estimates_one_by_one(cms, sketches, cand)
    for block in (7, 32768):
        got = cms.estimate_counts_multi(sketches, cand, block=block)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-9)
    assert np.allclose(cms.estimate_counts(sketches[1], cand), want[1], rtol=1e-12, atol=1e-9)
    for bad in (0, -1, 2.5):
        with pytest.raises(OracleInputError):
            cms.estimate_counts_multi(sketches, cand, block=bad)


def test_cms_unbiased_over_hash_families() -> None:
    """Mean of 60 runs (fresh public family each run) within 5.5 sd of the truth;
    failure probability < 1e-7 per item."""
    n_heavy, n_light, runs = 3000, 200, 60
    items = np.concatenate([np.full(n_heavy, 1), np.repeat(np.arange(2, 32), n_light),
                            np.arange(1000, 1000 + 4000)])
    n = items.shape[0]
    est = []
    rng = np.random.default_rng(42)
    for r in range(runs):
        cms = CountMeanSketch(3.0, k=32, m=64, hash_seed=1000 + r)
        est.append(cms.estimate_counts(cms.randomize(items, rng), np.array([1, 2, 999])))
    est = np.array(est)
    truth = np.array([n_heavy, n_light, 0])
    sumsq = n_heavy ** 2 + 30 * n_light ** 2 + 4000
    var = np.array([cms.variance(n, t, sumsq - t * t) for t in truth])
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5.5 * np.sqrt(var / runs))
    # measured variance agrees with the formula within the chi-square 1e-6 band
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], runs - 1) / (runs - 1)
    ratio = est.var(axis=0, ddof=1) / var
    assert np.all((ratio > lo) & (ratio < hi)), ratio


def test_cms_sketch_matches_naive_sum() -> None:
    cms = CountMeanSketch(1.0, k=8, m=16)
    rng = np.random.default_rng(43)
    rep = cms.randomize(rng.integers(0, 50, 3000), rng)
    sk = cms.sketch(rep)
    v = 2 * np.unpackbits(rep.bits, axis=1, count=16).astype(np.int64) - 1
    naive = np.zeros((8, 16), dtype=np.int64)
    np.add.at(naive, rep.j, v)
    assert np.array_equal(sk.T, naive) and sk.n == 3000


def test_cms_input_errors() -> None:
    with pytest.raises(OracleInputError):
        CountMeanSketch(1.0, m=1000)
    with pytest.raises(OracleInputError):
        CountMeanSketch(-1.0)
    cms = CountMeanSketch(1.0, k=8, m=16)
    with pytest.raises(OracleInputError):
        cms.randomize(np.array([-1]), np.random.default_rng(0))
    with pytest.raises(ReportError):
        CMSReports(np.array([0]), np.zeros((1, 3), np.uint8), 16)
    with pytest.raises(ReportError):
        cms.sketch(CMSReports(np.array([8]), np.zeros((1, 2), np.uint8), 16))


# -- SFP -------------------------------------------------------------------------------
def _zipf_words(rng: np.random.Generator, vocab_size: int, n: int, s: float = 1.1):
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < vocab_size:
        w = "".join(rng.choice(list(string.ascii_lowercase), int(rng.integers(2, 11))))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    p = 1.0 / np.arange(1, vocab_size + 1) ** s
    return vocab, rng.choice(vocab_size, size=n, p=p / p.sum())


def test_sfp_encoding() -> None:
    sfp = SFP(4.0, k=16)
    codes = sfp.encode_words(["abc", "abcdefghijklmno", "z"])
    assert codes.shape == (3, 10) and codes[0, 3] == 0  # pad is code 0
    assert sfp.decode(codes[1]) == "abcdefghij"
    ids = sfp.word_ids(sfp.encode_words(["ab", "ba", "abz", "a", "aa"]))
    assert len(set(ids.tolist())) == 5
    with pytest.raises(OracleInputError):
        sfp.encode_words(["ok", "Bad"])
    with pytest.raises(OracleInputError):
        sfp.encode_words([f"a{PAD}b"])
    with pytest.raises(OracleInputError):
        sfp.encode_words(["caf\u00e9"])
    with pytest.raises(OracleInputError):
        SFP(4.0, alphabet="abc")
    with pytest.raises(OracleInputError):
        SFP(4.0, length=9)


def test_sfp_privacy_is_basic_composition() -> None:
    pr = SFP(3.0, epsilon_word=1.5, k=16).privacy()
    assert pr.epsilon == 4.5 and pr.delta == 0 and 4.49 < pr.effective_epsilon <= 4.5
    assert SFP(3.0, k=16).privacy().epsilon == 3.0


@pytest.mark.parametrize("with_word", [True, False])
def test_sfp_recovers_top_words(with_word: bool) -> None:
    """Generous epsilon (8 per report), 200k users, k = 256: the 10 most frequent words
    are discovered and ranked first. The top-10 words hold >= 1.5% of users each
    (>= 600 fragment reports per position), against a CMS noise sd of about 30."""
    rng = np.random.default_rng(44)
    vocab, idx = _zipf_words(rng, 2000, 200_000)
    sfp = SFP(8.0, epsilon_word=8.0 if with_word else 0.0, k=256, threshold=20)
    reports = sfp.randomize(sfp.encode_words(vocab)[idx], rng)
    result = sfp.discover(reports)
    assert set(vocab[:10]) <= set(result.words)
    if with_word:
        assert set(result.words[:10]) == set(vocab[:10])
        truth = np.bincount(idx, minlength=2000)
        est = dict(zip(result.words, result.counts))
        for i in range(3):
            sd = math.sqrt(sfp.word_cms.variance(200_000, truth[i]))  # type: ignore[union-attr]
            assert abs(est[vocab[i]] - truth[i]) < 8 * sd + 0.02 * truth[i]
    assert len(result.top_tuples) == 5 and all(len(q) == 20 for q in result.top_tuples)


def test_sfp_assembly_is_appendix_c_and_filter_is_an_option() -> None:
    """Two 10-letter words sharing a word-hash bucket, each held by half of 40k users,
    at local epsilon 8, T = 4 (k = 256): every position's top tuples hold both words'
    fragments in the shared bucket, so Appendix C's Cartesian product returns all
    2^5 = 32 assemblies. The filter keeps only those hashing to the bucket: the two true
    words and, by chance, any of the 30 cross-assemblies that collide (fixed seed)."""
    sfp = SFP(8.0, k=256, threshold=4)
    assert not sfp.hash_filter  # the paper's algorithm by default
    rng = np.random.default_rng(47)
    letters = np.array(list(string.ascii_lowercase))
    pool = ["".join(rng.choice(letters, 10)) for _ in range(400)]
    h = sfp.word_hash(sfp.word_ids(sfp.encode_words(pool)))
    i, j = next((i, j) for i in range(400) for j in range(i + 1, 400)
                if h[i] == h[j] and all(pool[i][p:p + 2] != pool[j][p:p + 2]
                                        for p in range(0, 10, 2)))
    a, b = pool[i], pool[j]
    codes = sfp.encode_words([a, b])[np.arange(40_000) % 2]
    reports = sfp.randomize(codes, rng)
    plain = sfp.discover(reports)
    crosses = {"".join((a, b)[(mask >> q) & 1][2 * q:2 * q + 2] for q in range(5))
               for mask in range(32)}
    assert set(plain.words) == crosses and len(crosses) == 32
    filtered = SFP(8.0, k=256, threshold=4, hash_filter=True).discover(reports)
    fw = set(filtered.words)
    assert {a, b} <= fw < set(plain.words)
    hashes = sfp.word_hash(sfp.word_ids(sfp.encode_words(sorted(fw))))
    assert set(hashes.tolist()) == {int(h[i])}


def test_sfp_rejects_malformed_reports() -> None:
    sfp = SFP(4.0, k=16)
    rng = np.random.default_rng(45)
    rep = sfp.randomize(sfp.encode_words(["abc", "de"]), rng)
    with pytest.raises(ReportError):
        SFP(4.0, epsilon_word=1.0, k=16).discover(rep)
    with pytest.raises(OracleInputError):
        sfp.randomize(np.zeros((2, 9), np.uint8), rng)


@pytest.mark.slow
def test_sfp_paper_parameters_one_million_users() -> None:
    """k = 2048, m = 1024, T = 20, 1e6 users, local epsilon 5.99 + 4 (the OOV setting's
    central 4 -> local 5.99 for the fragment, a word report at 4)."""
    rng = np.random.default_rng(46)
    vocab, idx = _zipf_words(rng, 10_000, 1_000_000)
    sfp = SFP(5.99, epsilon_word=4.0)
    result = sfp.discover(sfp.randomize(sfp.encode_words(vocab)[idx], rng))
    assert set(vocab[:10]) <= set(result.words[:20])


# -- Hadamard CMS ----------------------------------------------------------------------
def test_walsh_hadamard_matches_matrix() -> None:
    from mechanisms.fo.cms import _walsh_hadamard_rows
    m = 8
    r, c = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    H = np.where(np.bitwise_count(r & c) % 2 == 0, 1.0, -1.0)
    a = np.random.default_rng(0).normal(size=(3, m))
    assert np.allclose(_walsh_hadamard_rows(a), a @ H)


def _hcms_output_probs(h, item: int) -> np.ndarray:
    """P[(j, l, bit) | item], from the implemented flip probability and hash keys."""
    phi = h.flip_probability
    col = hashing.hash_to_range(h.keys, np.full(h.k, item, dtype=np.uint64), h.m)
    P = np.empty((h.k, h.m, 2))
    for j in range(h.k):
        for l in range(h.m):
            plus = bin(l & int(col[j])).count("1") % 2 == 0
            P[j, l, int(plus)] = (1 - phi) / (h.k * h.m)
            P[j, l, int(not plus)] = phi / (h.k * h.m)
    return P.ravel()


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_hcms_exact_privacy_and_sampling(eps: float) -> None:
    """Exact ratio over all outputs; chi-square (failure probability 1e-6) on randomize."""
    from mechanisms.fo.cms import HadamardCountMeanSketch
    h = HadamardCountMeanSketch(eps, k=3, m=8, hash_seed=9)
    P = np.stack([_hcms_output_probs(h, x) for x in range(10)])
    ratio = float(np.max(P.max(axis=0) / P.min(axis=0)))
    assert ratio <= math.exp(eps) * (1 + 1e-12)
    assert math.isclose(math.log(ratio), h.privacy().effective_epsilon, rel_tol=1e-9)
    rep = h.randomize(np.full(60_000, 4), np.random.default_rng(47))
    code = (rep.j * h.m + rep.l) * 2 + rep.bit.astype(int)
    obs = np.bincount(code, minlength=P.shape[1])
    assert stats.chisquare(obs, P[4] * 60_000).pvalue > 1e-6


def test_hcms_unbiased_over_hash_families() -> None:
    """Mean of 60 runs within 5.5 sd (failure < 1e-7 per item); variance in the chi-square
    band at 1e-6."""
    from mechanisms.fo.cms import HadamardCountMeanSketch
    items = np.concatenate([np.full(3000, 1), np.repeat(np.arange(2, 32), 200),
                            np.arange(1000, 5000)])
    n, runs = items.shape[0], 60
    rng = np.random.default_rng(48)
    est = []
    for r in range(runs):
        h = HadamardCountMeanSketch(3.0, k=32, m=64, hash_seed=2000 + r)
        est.append(h.estimate_counts(h.randomize(items, rng), np.array([1, 2, 999])))
    est = np.array(est)
    truth = np.array([3000, 200, 0])
    sumsq = 3000 ** 2 + 30 * 200 ** 2 + 4000
    var = np.array([h.variance(n, t, sumsq - t * t) for t in truth])
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5.5 * np.sqrt(var / runs))
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], runs - 1) / (runs - 1)
    ratio = est.var(axis=0, ddof=1) / var
    assert np.all((ratio > lo) & (ratio < hi)), ratio
