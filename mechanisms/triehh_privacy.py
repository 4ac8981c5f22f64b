"""Privacy and utility calculators for TrieHH (Zhu, Kairouz, McMahan, Sun, Li,
"Federated Heavy Hitters Discovery with Differential Privacy", AISTATS 2020).

Notation: ``n`` users, batch size ``m = gamma * sqrt(n)`` users sampled without
replacement per round, vote threshold ``theta``, at most ``L`` rounds (trie levels).
``L`` is also the longest word, in units, that a run can find: the run's end-of-word
step for a word of exactly ``L`` units is level ``L`` itself (:mod:`mechanisms.triehh`),
so a run never has more than ``L`` rounds and these calculators count exactly the
rounds that can run.

* Theorem 1 (one sequence per user) and Corollary 2 (several sequences per user,
  Algorithm 3): when ``4 <= theta <= sqrt(n)`` and ``1 <= gamma <= sqrt(n)/(theta+1)``
  the algorithm is (epsilon, delta)-DP with::

      epsilon = L * ln(1 + 1 / (sqrt(n) / (gamma * theta) - 1))
      delta   = (theta - 2) / ((theta - 3) * theta!)

* Corollary 1 (parameters for a target (epsilon, delta))::

      C     = e^-1 * ln(8 / (7 * sqrt(2 pi) * delta))
      theta = max(10, ceil(e^(W(C) + 1) - 1/2), ceil(e^(epsilon/L) - 1))
      gamma = (e^(epsilon/L) - 1) * sqrt(n) / (theta * e^(epsilon/L))

  with ``W`` the principal branch of the Lambert W function. Table 1 of the paper
  (epsilon = 2, L = 10) is reproduced by :func:`corollary1` and checked by the tests.

* Proposition 1 (worst-case discovery rate of a sequence held by ``W`` of ``n`` users
  and sharing no prefix with any other sequence): the hypergeometric tail
  ``P[X >= theta]``, ``X ~ Hypergeometric(n, W, m)``, raised to the power ``L``.

* Figure 2: the smallest ``n`` for which a sequence of relative frequency ``f``
  (``W = f n``) has worst-case discovery rate at least 0.9 with ``delta = 1/n^2``.

The batch size used by the mechanism is the integer ``m = floor(gamma sqrt(n))``; the
guarantee it reports is computed from the effective ``gamma = m / sqrt(n)``, which is
never larger than the requested one, so the reported epsilon is never larger.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import lambertw
from scipy.stats import hypergeom

from .privacy import ANALYST, CENTRAL, ZHU_2020, PrivacyGuarantee

__all__ = [
    "PrivacyGuarantee", "TrieHHPrivacyError", "TrieHHParameters", "check_conditions",
    "theorem1_delta", "theorem1", "corollary1", "batch_size", "discovery_rate",
    "min_population_for_discovery",
]


def first_passing(ok: Callable[[int], bool], lo: int, hi: int, limit: int) -> int | None:
    """The smallest ``n > lo`` with ``ok(n)``, for an ``ok`` that fails below some
    population and holds from there on: doubling from ``hi``, then bisection. ``None``
    when no ``n <= limit`` passes."""
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


class TrieHHPrivacyError(ValueError):
    """Parameters outside the range where the TrieHH theorems hold."""


@dataclass(frozen=True)
class TrieHHParameters:
    """Parameters from Corollary 1 and the guarantee they give (Theorem 1).

    Attributes:
        theta: vote threshold.
        gamma: batch-size factor from Corollary 1 (unrounded).
        m: batch size ``floor(gamma * sqrt(n))``.
        n: population size.
        max_levels: ``L``.
        guarantee: Theorem 1 evaluated at the effective ``gamma = m / sqrt(n)``.
    """

    theta: int
    gamma: float
    m: int
    n: int
    max_levels: int
    guarantee: PrivacyGuarantee

    def as_dict(self) -> dict[str, object]:
        return {"theta": self.theta, "gamma": self.gamma, "m": self.m, "n": self.n,
                "max_levels": self.max_levels, "guarantee": self.guarantee.as_dict()}


def _check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise TrieHHPrivacyError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_conditions(theta: int, gamma: float, n: int) -> None:
    """Check the conditions of Theorem 1 / Corollary 2.

    Raises:
        TrieHHPrivacyError: naming the first failing condition among
            ``4 <= theta``, ``theta <= sqrt(n)``, ``1 <= gamma`` and
            ``gamma <= sqrt(n)/(theta+1)``.
    """
    _check_positive_int("n", n)
    _check_positive_int("theta", theta)
    root = math.sqrt(n)
    if theta < 4:
        raise TrieHHPrivacyError(f"condition 4 <= theta fails: theta = {theta}")
    if theta > root:
        raise TrieHHPrivacyError(f"condition theta <= sqrt(n) fails: theta = {theta}, "
                                 f"sqrt(n) = {root:.4g}")
    if not math.isfinite(gamma) or gamma < 1:
        raise TrieHHPrivacyError(f"condition 1 <= gamma fails: gamma = {gamma:.6g} "
                                 "(the population is too small for this epsilon and delta)")
    if gamma > root / (theta + 1) * (1 + 1e-12):
        raise TrieHHPrivacyError(f"condition gamma <= sqrt(n)/(theta+1) fails: gamma = "
                                 f"{gamma:.6g} > {root / (theta + 1):.6g}")


def theorem1_delta(theta: int) -> float:
    """``delta = (theta - 2) / ((theta - 3) * theta!)`` (computed in log space).

    Raises:
        TrieHHPrivacyError: ``theta < 4``.
    """
    _check_positive_int("theta", theta)
    if theta < 4:
        raise TrieHHPrivacyError(f"condition 4 <= theta fails: theta = {theta}")
    return math.exp(math.log(theta - 2) - math.log(theta - 3) - math.lgamma(theta + 1))


def theorem1(theta: int, gamma: float, n: int, max_levels: int,
             multi_word: bool = False) -> PrivacyGuarantee:
    """The (epsilon, delta) of Theorem 1 (or Corollary 2 for Algorithm 3).

    Args:
        theta: vote threshold.
        gamma: batch-size factor, ``m = gamma * sqrt(n)``.
        n: number of users.
        max_levels: ``L``, the maximum number of rounds (trie levels).
        multi_word: report Corollary 2 (several sequences per user).

    Raises:
        TrieHHPrivacyError: a condition of the theorem fails or ``L < 1``.
    """
    _check_positive_int("max_levels (L)", max_levels)
    check_conditions(theta, gamma, n)
    ratio = math.sqrt(n) / (gamma * theta)
    epsilon = max_levels * math.log1p(1.0 / (ratio - 1.0))
    name = "Zhu et al. 2020, Corollary 2" if multi_word else "Zhu et al. 2020, Theorem 1"
    return PrivacyGuarantee("triehh", epsilon, theorem1_delta(theta), name, CENTRAL, ANALYST,
                            {"theta": int(theta), "gamma": float(gamma), "n": int(n),
                             "m": float(gamma * math.sqrt(n)), "L": int(max_levels)},
                            ZHU_2020)


def batch_size(gamma: float, n: int) -> int:
    """``m = floor(gamma * sqrt(n))`` (at least 1, at most n)."""
    return int(min(n, max(1, math.floor(gamma * math.sqrt(n) + 1e-9))))


def corollary1(epsilon: float, delta: float, n: int, max_levels: int,
               multi_word: bool = False) -> TrieHHParameters:
    """Solve Corollary 1 for theta, gamma and m.

    Raises:
        TrieHHPrivacyError: a non-positive or non-finite epsilon, delta outside
            (0, 1), or parameters violating the conditions of Theorem 1 (typically
            ``1 <= gamma`` for a population too small for the target).
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise TrieHHPrivacyError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise TrieHHPrivacyError(f"delta must be in (0, 1), got {delta!r}")
    _check_positive_int("n", n)
    _check_positive_int("max_levels (L)", max_levels)
    c = math.log(8.0 / (7.0 * math.sqrt(2.0 * math.pi) * delta)) / math.e
    w = float(np.real(lambertw(c)))
    growth = math.exp(epsilon / max_levels)
    theta = max(10, math.ceil(math.exp(w + 1.0) - 0.5), math.ceil(growth - 1.0))
    gamma = (growth - 1.0) * math.sqrt(n) / (theta * growth)
    check_conditions(theta, gamma, n)
    m = batch_size(gamma, n)
    guarantee = theorem1(theta, m / math.sqrt(n), n, max_levels, multi_word)
    return TrieHHParameters(theta, gamma, m, n, max_levels, guarantee)


def discovery_rate(holders: int | np.ndarray, n: int, m: int, theta: int,
                   max_levels: int) -> float | np.ndarray:
    """Proposition 1: worst-case discovery rate of a sequence held by ``holders``
    of ``n`` users: ``P[Hypergeom(n, W, m) >= theta] ** L``.

    Raises:
        TrieHHPrivacyError: ``m`` or ``holders`` outside ``[0, n]``, ``theta < 1``.
    """
    _check_positive_int("n", n)
    _check_positive_int("theta", theta)
    _check_positive_int("max_levels (L)", max_levels)
    if not 0 <= m <= n:
        raise TrieHHPrivacyError(f"m must be in [0, n], got {m}")
    w = np.asarray(holders)
    if w.size and (w.min() < 0 or w.max() > n):
        raise TrieHHPrivacyError("holders W must be in [0, n]")
    tail = hypergeom.sf(theta - 1, n, w, m)
    out = np.clip(tail, 0.0, 1.0) ** max_levels
    return float(out) if np.ndim(out) == 0 else out


def min_population_for_discovery(frequency: float, epsilon: float, max_levels: int = 10,
                                 rate: float = 0.9,
                                 delta_of_n: Callable[[int], float] | None = None,
                                 n_max: int = 10**12) -> int:
    """Figure 2: the smallest ``n`` for which a sequence of relative frequency
    ``frequency`` (``W = round(frequency * n)`` holders) reaches worst-case
    discovery rate ``rate``, with theta and gamma from Corollary 1 at
    ``delta = delta_of_n(n)`` (default ``1/n^2``).

    The rate is not exactly monotone in ``n`` (theta and m are integers), so the
    search brackets the first passing ``n`` on a doubling grid and bisects; the
    result passes and ``result - 1`` fails.

    Raises:
        TrieHHPrivacyError: frequency or rate outside (0, 1], or no ``n <= n_max``
            reaches the rate.
    """
    if not 0 < frequency <= 1:
        raise TrieHHPrivacyError("frequency must be in (0, 1]")
    if not 0 < rate <= 1:
        raise TrieHHPrivacyError("rate must be in (0, 1]")
    dfn = delta_of_n or (lambda k: 1.0 / float(k) ** 2)

    def ok(k: int) -> bool:
        try:
            p = corollary1(epsilon, dfn(k), k, max_levels)
        except TrieHHPrivacyError:
            return False
        w = int(round(frequency * k))
        return discovery_rate(w, k, p.m, p.theta, max_levels) >= rate

    n = first_passing(ok, 100, 200, n_max)
    if n is None:
        raise TrieHHPrivacyError(f"no population up to {n_max} reaches rate {rate}")
    return n
