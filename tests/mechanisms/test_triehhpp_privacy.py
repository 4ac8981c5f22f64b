"""Privacy calculators of TrieHH++ (Cormode 2021, Lemmas 1 and 3 and the Remark)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from mechanisms.triehhpp_privacy import (
    PrivacyConditionError, additive_tail_bound, flat_privacy, lemma1_theta, level_epsilon,
    p_theta, solve_sample_size, theta_for_delta, triehhpp_privacy, truncation_probability,
)

N = 10**6


def test_lemma1_closed_form_meets_delta() -> None:
    for delta in [1e-3, 1e-6, 1e-9, 1e-12]:
        th = lemma1_theta(delta)
        assert th == pytest.approx(3 + math.log(1 / delta))
        assert p_theta(th) < delta


def test_second_case_is_stricter_than_first() -> None:
    # Lemma 1 claims the multiplicative case dominates for all theta > 1
    for th in np.linspace(1.001, 200, 5000):
        assert additive_tail_bound(float(th)) <= p_theta(float(th)) * (1 + 1e-9)


def test_multiplicative_chernoff_holds_for_binomial() -> None:
    # P[Bin(k, p) >= theta k p] <= p_theta whenever k p >= 1 (spot checks, exact tails)
    for theta in [3, 5, 10, 15]:
        for k, p in [(100, 0.01), (1000, 0.005), (10**5, 0.012), (50, 0.5)]:
            mu = k * p
            tail = stats.binom.sf(math.ceil(theta * mu) - 1, k, p)
            assert tail <= p_theta(theta)


def test_lemma3_basic_values() -> None:
    g = triehhpp_privacy(N, 6_000, 15, 10)
    eps_i = math.log(1 + 10 * 6_000 * 15 / (9 * N))
    assert g.epsilon == pytest.approx(10 * eps_i)
    assert g.delta == pytest.approx(10 * math.exp(-(14 ** 2) / 16), rel=1e-9)
    assert "Lemma 3" in g.theorem and g.parameters["level_epsilon"] == pytest.approx(eps_i)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.parameters["m"] = 1  # type: ignore[index]


def test_lemma3_condition_named() -> None:
    # the paper's worked example m = 12,000, theta = 15 violates m <= n/(10 theta)
    with pytest.raises(PrivacyConditionError, match=r"m <= n/\(10 theta\)"):
        triehhpp_privacy(N, 12_000, 15, 10)
    g = triehhpp_privacy(N, 12_000, 15, 10, bound="eq3")
    assert g.epsilon == pytest.approx(-10 * math.log(1 - 0.18))
    with pytest.raises(PrivacyConditionError, match=r"theta \* m < n"):
        level_epsilon(N, 70_000, 15, bound="eq3")
    with pytest.raises(PrivacyConditionError, match="theta > 1"):
        triehhpp_privacy(N, 100, 1, 10)
    with pytest.raises(PrivacyConditionError, match="0 < m <= n"):
        triehhpp_privacy(N, 0, 10, 10)
    with pytest.raises(PrivacyConditionError, match="max_length"):
        triehhpp_privacy(N, 100, 10, 0)


def test_eq3_bound_is_tighter_than_eq4_where_both_apply() -> None:
    for m in [100, 1_000, 6_000]:
        assert level_epsilon(N, m, 15, "eq3") <= level_epsilon(N, m, 15, "paper")


def test_advanced_composition_is_drv_not_the_paper_literal() -> None:
    g = triehhpp_privacy(N, 2_000, 15, 10, composition="advanced")
    e = g.parameters["level_epsilon"]
    dp = 10 * p_theta(15)
    assert g.epsilon == pytest.approx(e * math.sqrt(20 * math.log(1 / dp)) + 10 * e * math.expm1(e))
    assert g.delta == pytest.approx(2 * dp, rel=1e-9)
    # the paper's literal form understates epsilon
    assert g.parameters["paper_literal_epsilon"] < g.epsilon


def test_flat_remark() -> None:
    g = flat_privacy(N, 12_000, 15)
    assert g.epsilon == pytest.approx(10 * 15 * 12_000 / N) and g.delta == pytest.approx(p_theta(15))
    with pytest.raises(PrivacyConditionError, match=r"9n/\(10 theta\)"):
        flat_privacy(N, 61_000, 15)
    # the Remark's value bounds the one-level ratio of eq. (3)
    assert flat_privacy(N, 12_000, 15, bound="eq3").epsilon < g.epsilon


def test_truncation_enters_delta() -> None:
    eta = truncation_probability(1_000, 100, 1.0)
    assert eta == pytest.approx(stats.binom.sf(110, 1_000, 0.1))
    g0 = triehhpp_privacy(1_000, 10, 5, 2, bound="eq3", c=None)
    g1 = triehhpp_privacy(1_000, 10, 5, 2, bound="eq3", c=0.5)
    e1 = g1.parameters["level_epsilon"]
    eta1 = truncation_probability(1_000, 10, 0.5)
    assert g1.delta == pytest.approx(g0.delta + 2 * (1 + math.exp(e1)) * eta1)


def test_theta_for_delta_is_smallest() -> None:
    for delta, L in [(1e-6, 10), (1e-6, 1), (1e-9, 5), (0.5, 1)]:
        th = theta_for_delta(delta, L)
        assert L * p_theta(th) <= delta
        if th > 2:
            assert L * p_theta(th - 1) > delta
    with pytest.raises(PrivacyConditionError, match="delta"):
        theta_for_delta(0.0)


@pytest.mark.parametrize("kw", [
    dict(), dict(composition="advanced"), dict(bound="eq3"), dict(flat=True),
    dict(flat=True, bound="eq3"), dict(bound="eq3", composition="advanced"),
])
def test_solver_round_trip(kw: dict) -> None:
    eps = 0.8 if kw.get("bound") != "eq3" else 2.0
    sol = solve_sample_size(N, eps, 1e-6, 10, **kw)
    g = sol.guarantee
    assert g.epsilon <= eps * (1 + 1e-12) and g.delta <= 1e-6
    assert sol.rate == pytest.approx(sol.m / N)
    # maximal: one more client per level would exceed the target (or a condition)
    try:
        if kw.get("flat"):
            g2 = flat_privacy(N, sol.m + 1, sol.theta, kw.get("bound", "paper"))
        else:
            g2 = triehhpp_privacy(N, sol.m + 1, sol.theta, 10, kw.get("composition", "basic"),
                                  kw.get("bound", "paper"))
        assert g2.epsilon > eps or g2.delta > 1e-6
    except PrivacyConditionError:
        pass
    # and theta is the smallest integer meeting delta
    assert sol.theta == theta_for_delta(1e-6, 1 if kw.get("flat") else 10,
                                        2.0 if kw.get("composition") == "advanced"
                                        and not kw.get("flat") else 1.0)


def test_solver_reports_failing_condition() -> None:
    with pytest.raises(PrivacyConditionError, match=r"m <= n/\(10 theta\)"):
        solve_sample_size(N, 2.0, 1e-6, 10)  # eps > L ln(10/9)
    with pytest.raises(PrivacyConditionError, match="m < 1"):
        solve_sample_size(100, 0.01, 1e-6, 10)
    with pytest.raises(PrivacyConditionError, match="epsilon"):
        solve_sample_size(N, -1.0, 1e-6, 10)


def test_worked_example_eq3() -> None:
    # Cormode's section-3 example (n = 1e6, theta = 15, m = 12,000, L = 10) gives
    # epsilon ~ 2 under eq. (3); p_theta(15) ~ 4.8e-6 per level
    g = triehhpp_privacy(N, 12_000, 15, 10, bound="eq3")
    assert 1.9 < g.epsilon < 2.0
    assert p_theta(15) == pytest.approx(4.785e-6, rel=1e-3)


def _exact_delta(k: int, p: float, theta: int, eps: float) -> float:
    """Smallest delta for which one thresholded cell is (eps, delta)-DP between a
    dataset with k + 1 holders of the prefix and one with k (both directions), computed
    exactly from the binomial laws (outputs: each released value tau >= theta, or
    'suppressed')."""
    tau = np.arange(0, k + 2)
    a = stats.binom.pmf(tau, k + 1, p)
    b = stats.binom.pmf(tau, k, p)
    a_out = np.concatenate([[a[:theta].sum()], a[theta:]])
    b_out = np.concatenate([[b[:theta].sum()], b[theta:]])
    e = math.exp(eps)
    return max(float(np.maximum(a_out - e * b_out, 0).sum()),
               float(np.maximum(b_out - e * a_out, 0).sum()))


@pytest.mark.parametrize("m, bound", [(12_000, "eq3"), (6_000, "paper"), (6_000, "eq3")])
def test_level_epsilon_verified_exactly_on_one_cell(m: int, bound: str) -> None:
    # the per-level (eps_i, p_theta) claim checked against the exact privacy-loss
    # distribution of one thresholded binomial cell, for prefix counts from 1 to 10^5
    theta, p = 15, m / N
    eps_i = level_epsilon(N, m, theta, bound)
    for k in [1, 5, 14, 30, 60, 83, 150, 500, 1_000, 1_250, 3_000, 10_000, 100_000]:
        assert _exact_delta(k, p, theta, eps_i) <= p_theta(theta), k
    # the check can fail: at epsilon 0 (total variation) the cell laws differ by more
    assert max(_exact_delta(k, p, theta, 0.0) for k in [500, 1_000, 3_000]) > p_theta(theta)
