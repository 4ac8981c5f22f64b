"""Privacy audits: bounds stay below the claims and have power (GRR at eps = 1 >= 0.8).

Every audit bound is valid with probability >= 0.95 by construction; the tests use
fixed seeds, so they are deterministic. For the power assertions, the expected bound
at these sample sizes is ~0.98 of the claim with a standard deviation below 0.01, so a
bound under 0.8 would be a > 15-sigma event for a correct audit.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from protocol.studies.audit import (ORACLE_AUDITS, audit_oracle, audit_triehh, exact_epsilon,
                                    oracle_sampler)
from protocol.cli import main


@pytest.mark.parametrize("name", ORACLE_AUDITS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_oracle_bound_below_claim_and_close(name, eps):
    r = audit_oracle(name, eps, samples=200_000, seed=3)
    assert r.consistent and r.epsilon_lower_bound <= eps
    assert r.epsilon_lower_bound >= 0.8 * eps, r


def test_grr_power_at_epsilon_one():
    r = audit_oracle("grr", 1.0, samples=1_000_000, seed=0)
    assert 0.8 <= r.epsilon_lower_bound <= 1.0


def test_encodings_carry_the_full_privacy_loss():
    """Exact output laws of the encodings (estimated with many samples) have log ratio
    about epsilon on the event the docstring names; the audit is not handicapped."""
    for name in ORACLE_AUDITS:
        rng = np.random.default_rng(1)
        a = np.bincount(oracle_sampler(name, 1.0, 0)(400_000, rng), minlength=8) / 400_000
        b = np.bincount(oracle_sampler(name, 1.0, 1)(400_000, rng), minlength=8) / 400_000
        keep = (a > 0.01) & (b > 0.01)
        ratio = np.abs(np.log(a[keep] / b[keep])).max()
        assert 0.9 < ratio < 1.1, (name, ratio)


def test_a_broken_mechanism_is_caught():
    """A 'GRR' that keeps the true value with probability 0.9 while claiming eps = 1
    (true eps = ln 9 = 2.2) must be exposed: the bound exceeds the claim."""
    from protocol.studies.audit import audit_epsilon

    def leaky(value):
        def draw(count, rng):
            keep = rng.random(count) < 0.9
            return np.where(keep, value, 1 - value)
        return draw
    r = audit_epsilon(leaky(0), leaky(1), claimed_epsilon=1.0, samples=200_000,
                      rng=np.random.default_rng(0))
    assert not r.consistent and r.epsilon_lower_bound > 2.0


def test_triehh_audit_below_theorem1():
    t = audit_triehh(samples=400_000, seed=2)
    assert 0 < t.exact_epsilon <= t.claimed_epsilon
    assert t.sampled.consistent and t.sampled.epsilon_lower_bound <= t.sampled_exact_epsilon
    d = t.as_dict()
    assert d["consistent"] and json.dumps(d, default=float)


def test_triehh_exact_matches_direct_computation():
    from scipy.stats import hypergeom
    t = audit_triehh(samples=100, holders=range(300, 301))
    pa = hypergeom.sf(9, 10_000, 300, 200)
    pb = hypergeom.sf(9, 9_999, 299, 199)
    assert t.exact_epsilon == pytest.approx(
        exact_epsilon(np.array([pa, 1 - pa]), np.array([pb, 1 - pb]), t.delta))


def test_cli_audit(capsys):
    assert main(["audit", "grr", "--epsilon", "1", "--samples", "100000", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["consistent"] and d["claimed_epsilon"] == 1.0
    assert main(["audit", "triehh", "--samples", "20000"]) == 0
    assert "exact tight epsilon" in capsys.readouterr().out
