from __future__ import annotations

import math

import numpy as np
import pytest

from protocol.studies.audit import audit_epsilon, clopper_pearson_lower, clopper_pearson_upper, exact_epsilon


def _rr(bit: int, eps: float):
    p = math.exp(eps) / (1 + math.exp(eps))

    def sample(n: int, rng: np.random.Generator) -> np.ndarray:
        keep = rng.random(n) < p
        return np.where(keep, bit, 1 - bit)

    return sample


def test_randomized_response_bound_is_tight_and_valid() -> None:
    # epsilon-RR: the audit's bound must be <= eps (fails w.p. <= 5%, fixed seed) and
    # close to it with 4e5 samples per input.
    res = audit_epsilon(_rr(0, 1.0), _rr(1, 1.0), claimed_epsilon=1.0, samples=400_000,
                        rng=np.random.default_rng(11))
    assert res.consistent
    assert res.epsilon_lower_bound > 0.9


def test_a_broken_mechanism_is_caught() -> None:
    # claims eps = 0.5 but runs eps = 2: the audit must exceed the claim
    res = audit_epsilon(_rr(0, 2.0), _rr(1, 2.0), claimed_epsilon=0.5, samples=20_000,
                        rng=np.random.default_rng(1))
    assert not res.consistent and res.epsilon_lower_bound > 1.5


def test_identical_mechanisms_give_near_zero() -> None:
    same = _rr(0, 1.0)
    res = audit_epsilon(same, same, claimed_epsilon=0.0, samples=20_000,
                        rng=np.random.default_rng(2))
    assert res.epsilon_lower_bound < 0.1


def test_clopper_pearson_brackets_the_rate() -> None:
    assert clopper_pearson_lower(50, 100, 0.025) < 0.5 < clopper_pearson_upper(50, 100, 0.025)
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0
    assert clopper_pearson_upper(10, 10, 0.05) == 1.0


def test_exact_epsilon() -> None:
    e = math.e
    assert exact_epsilon([e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]) == pytest.approx(1.0)
    # with delta: a point mass of 0.01 unreachable under b costs exactly delta = 0.01
    assert exact_epsilon([0.01, 0.99], [0.0, 1.0], delta=0.01) == pytest.approx(0.0, abs=1e-9)
    assert exact_epsilon([0.01, 0.99], [0.0, 1.0], delta=0.0) == math.inf
    with pytest.raises(ValueError):
        exact_epsilon([0.5, 0.6], [0.5, 0.5])
