"""Frequency oracles: interface, hash family, unbiasedness and variance.

Statistical tests use fixed seeds; each states the probability that a correct
implementation fails it for a fresh seed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import hashing
from mechanisms.fo import (AoN, AoNReports, GRR, GRRReports, OLH, OLHReports, OUE,
                           OUEReports, OracleInputError, ReportError, make_oracle)

NAMES = ["grr", "oue", "olh", "aon"]


# -- hash family -----------------------------------------------------------------------
def test_bucket_sizes_are_exact() -> None:
    for g in (2, 3, 7, 8, 1000, 99_991):
        c = hashing.bucket_sizes(g)
        assert int(c.sum()) == 1 << 32
        assert int(c.max()) - int(c.min()) <= 1
        assert hashing.collision_probability(g) == pytest.approx(
            sum(int(v) ** 2 for v in c) / 2.0 ** 64, rel=1e-15)
        assert hashing.bucket_size(g - 1, g) == int(c[-1])
    big = 1 << 31  # never materialised: per-bucket functions only
    assert hashing.bucket_size(big - 1, big) == 2
    assert hashing.collision_probability(big) == pytest.approx(1 / big)
    starts = hashing.bucket_starts(3)
    # z at each boundary maps to the right bucket with the same code as hash_to_range
    z = np.array([starts[1] - 1, starts[1], starts[2] - 1, starts[2]], dtype=np.uint64)
    assert list((z * np.uint64(3)) >> np.uint64(32)) == [0, 1, 1, 2]


def test_hash_collision_rate_close_to_one_over_g() -> None:
    """Collision rate of two fixed ids over 400k random keys. Failure probability of a
    correct implementation: < 1e-6 (binomial two-sided test)."""
    rng = np.random.default_rng(21)
    n = 400_000
    keys = hashing.draw_keys(rng, n)
    for g, (x, y) in [(5, (3, 4)), (8, (0, 1 << 40)), (64, (7, 7 + (1 << 32))),
                      (3, ((1 << 62) + 5, 12345))]:
        hx = hashing.hash_to_range(keys, np.full(n, x, dtype=np.uint64), g)
        hy = hashing.hash_to_range(keys, np.full(n, y, dtype=np.uint64), g)
        k = int((hx == hy).sum())
        assert stats.binomtest(k, n, hashing.collision_probability(g)).pvalue > 1e-6


def test_hash_pairs_uniform_chi_square() -> None:
    """(h(x), h(y)) uniform on [g]^2 for distinct ids. Failure probability < 1e-6 each."""
    rng = np.random.default_rng(22)
    n = 300_000
    keys = hashing.draw_keys(rng, n)
    g = 6
    for x, y in [(0, 1), (2, 1 << 33), (1 << 32, 1 << 33)]:
        hx = hashing.hash_to_range(keys, np.full(n, x, dtype=np.uint64), g)
        hy = hashing.hash_to_range(keys, np.full(n, y, dtype=np.uint64), g)
        obs = np.bincount(hx * g + hy, minlength=g * g)
        assert stats.chisquare(obs).pvalue > 1e-6


def test_multiply_shift_strong_universality_exhaustive_scaled() -> None:
    """The theorem the hash family rests on, checked exhaustively on a scaled copy
    (64-bit keys -> 6 bits, 32-bit components -> 3 bits, 32-bit output -> 3 bits):
    for distinct ids the pair of hash values is exactly uniform."""
    M, comp, out = 1 << 6, 3, 3
    a_lo, a_hi, b = np.meshgrid(np.arange(M), np.arange(M), np.arange(M), indexing="ij")

    def z(x: int) -> np.ndarray:
        return (((a_lo * (x & 7) + a_hi * (x >> comp) + b) % M) >> (6 - out)).ravel()

    for x, y in [(0, 1), (3, 60), (8, 16), (7, 63), (9, 1)]:
        joint = np.bincount(z(x) * 8 + z(y), minlength=64)
        assert np.all(joint == joint[0])


def test_count_matches_agrees_with_direct_hashing() -> None:
    rng = np.random.default_rng(23)
    n, g = 3000, 5
    keys = hashing.draw_keys(rng, n)
    targets = rng.integers(0, g, n)
    cands = np.array([0, 1, 17, (1 << 32) + 3, (1 << 60) + 9], dtype=np.uint64)
    got = hashing.count_matches(keys, targets, g, cands, chunk_elements=777)
    want = [int((hashing.hash_to_range(keys, np.full(n, c), g) == targets).sum()) for c in cands]
    assert got.tolist() == want
    outer = hashing.hash_outer(keys[:50], cands, g)
    for j, c in enumerate(cands):
        assert np.array_equal(outer[:, j], hashing.hash_to_range(keys[:50], np.full(50, c), g))


def test_hash_input_errors() -> None:
    keys = hashing.draw_keys(np.random.default_rng(0), 3)
    with pytest.raises(hashing.HashInputError):
        hashing.hash_to_range(keys, np.array([1, 2, 3]), 1)
    with pytest.raises(hashing.HashInputError):
        hashing.hash_to_range(keys, np.array([-1, 2, 3]), 4)
    with pytest.raises(hashing.HashInputError):
        hashing.hash32(keys.astype(np.int64), np.array([1, 2, 3]))
    with pytest.raises(hashing.HashInputError):
        hashing.count_matches(keys, np.array([0, 1, 9]), 4, np.arange(3))


# -- interface and validation ----------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_interface(name: str) -> None:
    o = make_oracle(name, 1.5, 20)
    rng = np.random.default_rng(1)
    rep = o.randomize(rng.integers(0, 20, 500), rng)
    assert rep.n == 500
    est = o.estimate(rep)
    assert est.shape == (20,)
    assert np.allclose(o.estimate_counts(rep, [3, 4]), est[[3, 4]] * 500)
    assert o.support_counts(rep, np.array([5])).dtype == np.int64
    pr = o.privacy()
    assert pr.epsilon == 1.5 and pr.delta == 0.0 and 0 < pr.effective_epsilon <= 1.5
    p, q = o.support_probabilities
    assert 0 <= q < p <= 1
    assert o.variance(1000, 0.0) == pytest.approx(q * (1 - q) / (1000 * (p - q) ** 2))
    with pytest.raises(OracleInputError):
        o.randomize(np.array([0, 20]), rng)          # out of domain without a dummy
    with pytest.raises(OracleInputError):
        o.randomize(np.array([0.5]), rng)
    with pytest.raises(OracleInputError):
        o.estimate(rep, [20])                        # no dummy candidate
    with pytest.raises(OracleInputError):
        o.variance(0)
    with pytest.raises(ReportError):
        o.estimate(GRRReports(np.array([0])) if name != "grr" else OUEReports(
            np.zeros((1, 3), np.uint8), 20))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon(bad: float) -> None:
    for name in NAMES:
        with pytest.raises(OracleInputError):
            make_oracle(name, bad, 10)


def test_bad_parameters_and_reports() -> None:
    with pytest.raises(OracleInputError):
        make_oracle("rappor", 1.0, 10)
    with pytest.raises(OracleInputError):
        make_oracle("grr", 1.0, 10, g=3)
    with pytest.raises(OracleInputError):
        GRR(1.0, 1)
    with pytest.raises(OracleInputError):
        OLH(1.0, 10, g=1)
    with pytest.raises(OracleInputError):
        AoN(1.0, 10, B=1)
    with pytest.raises(ReportError):
        GRR(1.0, 4).estimate(GRRReports(np.array([0, 4])))
    with pytest.raises(ReportError):
        GRRReports(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ReportError):
        OUE(1.0, 10).estimate(OUEReports(np.zeros((3, 1), np.uint8), 8))
    with pytest.raises(ReportError):
        OLHReports(np.zeros((2, 3), np.int64), np.array([0, 1]))
    with pytest.raises(ReportError):
        OLH(1.0, 10, g=4).estimate(OLHReports(np.zeros((2, 3), np.uint64), np.array([0, 4])))
    with pytest.raises(ReportError):
        AoNReports(np.zeros((2, 3), np.uint64), np.array([1, 0]))
    with pytest.raises(ReportError):
        GRR(1.0, 4).estimate(GRRReports(np.array([], dtype=np.int64)))


@pytest.mark.parametrize("name", NAMES)
def test_dummy_item_absorbs_out_of_domain_values(name: str) -> None:
    o = make_oracle(name, 3.0, 10, dummy=True)
    rng = np.random.default_rng(2)
    values = np.concatenate([np.full(20_000, 3), np.full(20_000, -1), np.full(10_000, 99)])
    est = o.estimate(o.randomize(values, rng), np.array([3, 10, 0]))
    sd = math.sqrt(o.variance(50_000, 0.4))
    # 6 standard deviations: failure probability < 2e-9 per entry
    assert abs(est[0] - 0.4) < 6 * sd and abs(est[1] - 0.6) < 6 * sd and abs(est[2]) < 6 * sd


def test_large_domains_use_bounded_memory() -> None:
    """48-bit prefix domains (PEM/TAP): candidates only, never O(domain) arrays."""
    big = 1 << 48
    rng = np.random.default_rng(3)
    values = np.concatenate([np.full(3000, big - 5), rng.integers(0, big, 1000)])
    grr = make_oracle("grr", 30.0, 1 << 30)  # sort-based counting above 2^20 categories
    y = rng.integers(0, 50, 1000)
    assert np.array_equal(grr.support_counts(GRRReports(y), np.arange(60)),
                          np.bincount(y, minlength=60))
    cands = np.array([big - 5, 12345, big])  # big = the dummy item
    for name in NAMES:
        if name in ("oue", "grr"):  # one bit per item / keep probability below 2^-32
            with pytest.raises(OracleInputError):
                make_oracle(name, 4.0, big)
            continue
        o = make_oracle(name, 4.0, big, dummy=True)
        with pytest.raises(OracleInputError):
            o.estimate(o.randomize(values[:10], rng))  # whole domain: refused
        est = o.estimate(o.randomize(values, rng), cands)
        sd = math.sqrt(o.variance(4000, 0.75))
        assert sd < 0.05
        assert abs(est[0] - 0.75) < 6 * sd and abs(est[1]) < 6 * sd and abs(est[2]) < 6 * sd


# -- AoN: the integer-B estimator ------------------------------------------------------
def test_aon_constants() -> None:
    o = AoN(2.0, 100)
    assert o.B == math.ceil(math.exp(1.0) + 1) == 4
    p, q = o.support_probabilities
    B = o.B
    assert p == pytest.approx(1 / B, abs=1e-9)
    assert q == pytest.approx(1 / B**2 + math.exp(-2.0) * (B - 1) / B**2, abs=1e-9)


def test_aon_paper_estimator_is_biased_for_integer_B_ours_is_not() -> None:
    """The expected count is exact (no sampling), so this is a deterministic check."""
    eps, f = 2.0, 0.3
    o = AoN(eps, 100)
    p, q = o.support_probabilities
    mean_count_over_n = f * p + (1 - f) * q
    ours = (mean_count_over_n - q) / (p - q)
    s = math.exp(eps / 2)
    paper = (mean_count_over_n - 1 / (s * (1 + s))) * s * (1 + s) / (s - 1)
    assert ours == pytest.approx(f, abs=1e-12)
    assert abs(paper - f) > 0.01
    # with the non-integer B the paper intends, the two agree
    pi = 1 / (s + 1)
    q_real = pi * pi + math.exp(-eps) * pi * (1 - pi)
    assert q_real == pytest.approx(1 / (s * (1 + s)))
    assert (p - q) != pytest.approx(pi - q_real)


def test_aon_lemma4_bound_holds() -> None:
    """Hoeffding (Lemma 4 with our constants) at delta = 1e-3: the max error over the
    domain exceeds the bound with probability <= 1e-3 for a correct implementation."""
    o = AoN(2.0, 200)
    rng = np.random.default_rng(31)
    n = 20_000
    values = np.minimum(rng.zipf(1.5, n) - 1, 199)
    f = np.bincount(values, minlength=200) / n
    err = np.abs(o.estimate(o.randomize(values, rng)) - f).max()
    assert err <= o.lemma4_bound(n, 1e-3)


# -- unbiasedness and variance ---------------------------------------------------------
def _repeat(o, values: np.ndarray, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([o.estimate(o.randomize(values, rng)) for _ in range(runs)])


def _population(d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    f = np.array([0.4, 0.2, 0.1, 0.05] + [0.0] * (d - 4))
    f[4:] = (1 - f.sum()) / (d - 4) if d > 4 else 0
    counts = np.floor(f * n).astype(int)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(d), counts), counts / n


def _check_moments(name: str, runs: int, n: int, var_rel_tol: float | None) -> None:
    o = make_oracle(name, 1.5, 8)
    values, f = _population(8, n)
    est = _repeat(o, values, runs, seed=100 + NAMES.index(name))
    var = o.variance(n, f)
    # mean over runs: |mean - f| <= 5.5 sd/sqrt(runs); per item failure ~ 4e-8
    assert np.all(np.abs(est.mean(axis=0) - f) <= 5.5 * np.sqrt(var / runs))
    s2 = est.var(axis=0, ddof=1)
    if var_rel_tol is None:
        # (runs-1) s2 / var ~ chi2(runs-1) for near-normal estimates; two-sided 1e-6
        lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], runs - 1) / (runs - 1)
        assert np.all((s2 / var > lo) & (s2 / var < hi)), s2 / var
    else:
        assert np.all(np.abs(s2 / var - 1) < var_rel_tol), s2 / var


@pytest.mark.parametrize("name", NAMES)
def test_unbiased_and_variance_fast(name: str) -> None:
    _check_moments(name, runs=300, n=1000, var_rel_tol=None)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_unbiased_and_variance_within_10_percent(name: str) -> None:
    """6000 runs: the sample variance's relative sd is ~sqrt(2/6000) = 1.8%, so a 10%
    deviation is > 5 sd (failure probability < 1e-6 per item)."""
    _check_moments(name, runs=6000, n=2000, var_rel_tol=0.10)
