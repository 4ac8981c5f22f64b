"""Poisson sampling by contacting s = m + c sqrt(m) clients (Cormode 2021, section 2.1)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from protocol.core.contract import ABSTAIN
from mechanisms.sampling import (
    SamplingError, participant_count_pmf, plan_poisson_sampling, sample_participant_counts,
    sample_round, votes_with_abstentions,
)


def test_plan_values() -> None:
    plan = plan_poisson_sampling(10**6, 12_000, c=10)
    assert plan.contacted == math.ceil(12_000 + 10 * math.sqrt(12_000)) == 13_096
    assert plan.rate == pytest.approx(0.012)
    # exact tail far below Cormode's Chernoff bound exp(-c^2/3)
    assert 0 < plan.truncation_probability < 1e-20 < plan.chernoff_truncation_bound
    assert plan.exact_tv_distance() == plan.truncation_probability
    # Cormode's scheme is not Poisson sampling: Bin(s, m/s) vs Bin(n, m/n) differ a lot
    assert 0.4 < plan.cormode_tv_distance() < 0.7


def test_plan_caps_at_population_and_rejects_bad_input() -> None:
    plan = plan_poisson_sampling(100, 90, c=10)
    assert plan.contacted == 100 and plan.truncation_probability == 0.0
    for args in [(0, 1), (10, 0), (10, 11), (10, float("nan"))]:
        with pytest.raises(SamplingError):
            plan_poisson_sampling(*args)
    with pytest.raises(SamplingError, match="c must be"):
        plan_poisson_sampling(10, 5, c=-1)
    with pytest.raises(SamplingError, match="scheme"):
        plan_poisson_sampling(10, 5, scheme="fixed")


def test_sample_round_shapes_and_uniqueness() -> None:
    plan = plan_poisson_sampling(50_000, 400)
    r = sample_round(plan, np.random.default_rng(1))
    assert r.contacted.size == plan.contacted
    assert np.unique(r.contacted).size == plan.contacted
    assert r.contacted.min() >= 0 and r.contacted.max() < 50_000
    assert r.participates.sum() == min(r.needed, plan.contacted) and not r.truncated
    assert set(r.participants.tolist()) <= set(r.contacted.tolist())


def test_pmf_sums_to_one_with_mass_on_s() -> None:
    plan = plan_poisson_sampling(1_000, 100, c=1)  # s = 110: truncation is frequent
    k = np.arange(0, plan.contacted + 1)
    pmf = participant_count_pmf(plan, k)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert pmf[-1] == pytest.approx(stats.binom.sf(plan.contacted - 1, 1_000, 0.1))
    assert plan.truncation_probability == pytest.approx(stats.binom.sf(110, 1_000, 0.1))


def _chi2_pvalue(counts: np.ndarray, pmf: np.ndarray, min_expected: float = 20.0) -> float:
    """Chi-square goodness of fit, pooling bins with small expectation into neighbours."""
    exp = pmf * counts.sum()
    obs_b, exp_b, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(counts, exp):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            obs_b.append(acc_o), exp_b.append(acc_e)
            acc_o = acc_e = 0.0
    obs_b[-1] += acc_o
    exp_b[-1] += acc_e
    return float(stats.chisquare(obs_b, exp_b).pvalue)


def test_participant_count_is_truncated_binomial_goodness_of_fit() -> None:
    # s = 110 of n = 1000 at m = 100: truncation has probability ~0.13, so the test
    # also checks that the mass above s lands exactly on s. The participant counts of
    # 3000 full sample_round calls (fixed seed) are tested against the truncated
    # binomial with a chi-square test at level 1e-3 (failure probability 1e-3 if the
    # implementation is right); the Cormode-scheme law must be rejected.
    plan = plan_poisson_sampling(1_000, 100, c=1)
    rng = np.random.default_rng(20260601)
    draws = np.array([sample_round(plan, rng).participates.sum() for _ in range(3_000)])
    k = np.arange(plan.contacted + 1)
    counts = np.bincount(draws, minlength=k.size)
    assert _chi2_pvalue(counts, participant_count_pmf(plan, k)) > 1e-3
    cormode = plan_poisson_sampling(1_000, 100, c=1, scheme="cormode")
    assert _chi2_pvalue(counts, participant_count_pmf(cormode, k)) < 1e-6


def test_large_population_count_matches_binomial() -> None:
    # n = 1e6, m = 12,000, c = 10: truncation is negligible (1.6e-23), so the counts
    # must follow Bin(n, m/n). 20,000 vectorised draws; chi-square at level 1e-3.
    plan = plan_poisson_sampling(10**6, 12_000)
    draws = sample_participant_counts(plan, np.random.default_rng(5), 20_000)
    lo = 11_400
    k = np.arange(lo, plan.contacted + 1)
    counts = np.bincount(draws - lo, minlength=k.size)
    assert draws.min() >= lo
    assert _chi2_pvalue(counts, participant_count_pmf(plan, k)) > 1e-3
    # the Cormode scheme's count is far tighter (std ~32 instead of ~109)
    cd = sample_participant_counts(
        plan_poisson_sampling(10**6, 12_000, scheme="cormode"), np.random.default_rng(5), 5_000)
    assert cd.std() < 40 < 100 < draws.std() < 118


def test_each_client_included_with_rate_m_over_n() -> None:
    # inclusion frequency of every client over 4000 rounds: n = 200, m = 20 (p = 0.1),
    # s = 20 + 3 sqrt(20) -> 34. Per-client counts ~ Bin(4000, 0.1) (up to truncation
    # P ~ 1e-3); the mean over clients must be within 4 standard errors.
    plan = plan_poisson_sampling(200, 20, c=3)
    rng = np.random.default_rng(11)
    hits = np.zeros(200)
    for _ in range(4_000):
        hits[sample_round(plan, rng).participants] += 1
    freq = hits / 4_000
    assert abs(freq.mean() - 0.1) < 4 * math.sqrt(0.1 * 0.9 / (4_000 * 200)) + 1e-3
    assert freq.min() > 0.07 and freq.max() < 0.13  # each client individually


def test_votes_with_abstentions() -> None:
    v = votes_with_abstentions(np.array([3, 1, -1, 0]), np.array([True, False, True, True]))
    assert v.tolist() == [3, ABSTAIN, ABSTAIN, 0]
    with pytest.raises(SamplingError):
        votes_with_abstentions(np.array([1, 2]), np.array([True]))
