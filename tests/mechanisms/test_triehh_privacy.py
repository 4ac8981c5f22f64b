"""Tests of the TrieHH privacy and utility calculators (mechanisms/triehh_privacy.py)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from mechanisms.triehh_privacy import (
    PrivacyGuarantee, TrieHHPrivacyError, check_conditions, corollary1, discovery_rate,
    min_population_for_discovery, theorem1, theorem1_delta,
)

# Table 1 of Zhu et al. (2020): epsilon = 2, L = 10.
# (n, theta, gamma) for delta <= 1/(300 n), then for delta <= 1/n^2.
TABLE1 = [
    (10**4, 10, 1.81, 12, 1.51),
    (10**5, 11, 5.21, 14, 4.09),
    (10**6, 12, 15.10, 15, 12.08),
    (10**7, 13, 44.09, 17, 33.71),
]
CELLS = [(n, "1/(300n)", 1 / (300 * n), t1, g1) for n, t1, g1, _, _ in TABLE1] + \
        [(n, "1/n^2", 1 / n**2, t2, g2) for n, _, _, t2, g2 in TABLE1]


@pytest.mark.parametrize("n, label, delta, theta, gamma", CELLS)
def test_table1_cell(n: int, label: str, delta: float, theta: int, gamma: float) -> None:
    p = corollary1(2.0, delta, n, 10)
    assert p.theta == theta
    # the paper prints gamma truncated to two decimals (15.1057 -> 15.10, 33.719 -> 33.71)
    assert math.floor(p.gamma * 100) / 100 == pytest.approx(gamma, abs=1e-9)
    assert p.m == math.floor(p.gamma * math.sqrt(n))
    assert p.guarantee.epsilon <= 2.0 and p.guarantee.epsilon > 1.99
    assert p.guarantee.delta <= delta


def test_theorem1_formula_and_data() -> None:
    g = theorem1(12, 15.0, 10**6, 10)
    expected = 10 * math.log(1 + 1 / (1000 / (15.0 * 12) - 1))
    assert g.epsilon == pytest.approx(expected, rel=1e-12)
    assert g.delta == pytest.approx(10 / (9 * math.factorial(12)), rel=1e-12)
    assert g.theorem.endswith("Theorem 1")
    assert g.parameters["theta"] == 12 and g.parameters["L"] == 10
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.parameters["theta"] = 3  # type: ignore[index]
    assert theorem1(12, 15.0, 10**6, 10, multi_word=True).theorem.endswith("Corollary 2")
    assert isinstance(g, PrivacyGuarantee)


def test_theorem1_delta_values() -> None:
    assert theorem1_delta(4) == pytest.approx(2 / (1 * 24))
    assert theorem1_delta(10) == pytest.approx(8 / (7 * math.factorial(10)))
    assert 0 < theorem1_delta(150) < 1e-250


@pytest.mark.parametrize("theta, gamma, n, msg", [
    (3, 1.5, 10**4, r"4 <= theta"),
    (101, 1.0, 10**4, r"theta <= sqrt\(n\)"),
    (10, 0.5, 10**4, r"1 <= gamma"),
    (10, 9.2, 10**4, r"gamma <= sqrt\(n\)/\(theta\+1\)"),
    (10, float("nan"), 10**4, r"1 <= gamma"),
])
def test_conditions_named(theta: int, gamma: float, n: int, msg: str) -> None:
    with pytest.raises(TrieHHPrivacyError, match=msg):
        check_conditions(theta, gamma, n)
    with pytest.raises(TrieHHPrivacyError, match=msg):
        theorem1(theta, gamma, n, 10)


def test_condition_boundaries_pass() -> None:
    check_conditions(4, 1.0, 25)
    check_conditions(10, 100 / 11, 10**4)


@pytest.mark.parametrize("kwargs, msg", [
    ({"epsilon": 2.0, "delta": 1e-8, "n": 400, "max_levels": 10}, r"1 <= gamma"),
    ({"epsilon": 2.0, "delta": 1e-8, "n": 100, "max_levels": 10}, r"theta <= sqrt"),
    ({"epsilon": 0.0, "delta": 1e-8, "n": 10**6, "max_levels": 10}, "epsilon"),
    ({"epsilon": float("inf"), "delta": 1e-8, "n": 10**6, "max_levels": 10}, "epsilon"),
    ({"epsilon": 2.0, "delta": 1.5, "n": 10**6, "max_levels": 10}, "delta"),
    ({"epsilon": 2.0, "delta": 1e-8, "n": 0, "max_levels": 10}, "n must be"),
    ({"epsilon": 2.0, "delta": 1e-8, "n": 10**6, "max_levels": 0}, "max_levels"),
])
def test_corollary1_errors(kwargs: dict, msg: str) -> None:
    with pytest.raises(TrieHHPrivacyError, match=msg):
        corollary1(**kwargs)


def test_corollary1_theta_floor_and_large_epsilon() -> None:
    # a weak delta still gives theta >= 10 (the max with 10)
    assert corollary1(1.0, 0.01, 10**6, 10).theta == 10
    # a large per-level epsilon makes ceil(e^(eps/L) - 1) the binding term
    p = corollary1(40.0, 1e-6, 10**8, 10)
    assert p.theta == max(10, math.ceil(math.exp(4.0) - 1))


def test_discovery_rate_brute_force() -> None:
    n, m, theta, L = 60, 20, 4, 3
    for w in (0, 3, 4, 10, 30, 60):
        tail = sum(math.comb(w, i) * math.comb(n - w, m - i)
                   for i in range(theta, min(w, m) + 1)) / math.comb(n, m)
        assert discovery_rate(w, n, m, theta, L) == pytest.approx(tail ** L, abs=1e-12)
    with pytest.raises(TrieHHPrivacyError):
        discovery_rate(61, n, m, theta, L)
    with pytest.raises(TrieHHPrivacyError):
        discovery_rate(5, n, 61, theta, L)


def test_min_population_is_minimal() -> None:
    f, eps = 0.01, 4.0
    n = min_population_for_discovery(f, eps, 10)

    def rate(k: int) -> float:
        p = corollary1(eps, 1 / k**2, k, 10)
        return discovery_rate(int(round(f * k)), k, p.m, p.theta, 10)

    assert rate(n) >= 0.9 > rate(n - 1)
    # smaller epsilon needs a larger population (Figure 2)
    assert min_population_for_discovery(f, 1.0, 10) > n
    with pytest.raises(TrieHHPrivacyError):
        min_population_for_discovery(0.0, eps)
