"""Amplification by shuffling of Erlingsson et al. (SODA 2019).

Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta, "Amplification by
shuffling: from local to central differential privacy via anonymity", SODA 2019:
``epsilon = 12 * epsilon0 * sqrt(ln(1/delta) / n)`` for ``epsilon0 <= 1/2``,
``n >= 1000`` and ``delta <= 1/100`` (the regime encoded by Balle et al.'s public
companion code for that bound).
"""
from __future__ import annotations

import math

from .checks import AmplificationDomainError, _check_delta, _check_epsilon, _check_epsilon0, _check_n

__all__ = ["efmrtt19_epsilon", "efmrtt19_epsilon0"]

_EFMRTT_MAX_EPS0 = 0.5
_EFMRTT_MIN_N = 1000
_EFMRTT_MAX_DELTA = 0.01


def _efmrtt_check(n: int, delta: float) -> None:
    if n < _EFMRTT_MIN_N:
        raise AmplificationDomainError(f"efmrtt19 needs n >= {_EFMRTT_MIN_N}, got {n}")
    if delta > _EFMRTT_MAX_DELTA:
        raise AmplificationDomainError(
            f"efmrtt19 needs delta <= {_EFMRTT_MAX_DELTA}, got {delta}")


def efmrtt19_epsilon(n: int, epsilon0: float, delta: float) -> float:
    """Central epsilon by Erlingsson et al. (SODA 2019): 12 eps0 sqrt(ln(1/delta)/n).

    Args:
        n: number of shuffled reports.
        epsilon0: local epsilon of each report.
        delta: central delta.

    Returns:
        ``min(12 * epsilon0 * sqrt(ln(1/delta) / n), epsilon0)``.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: ``epsilon0 > 1/2``, ``n < 1000`` or ``delta > 1/100``.
    """
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_delta(delta)
    _efmrtt_check(n, delta)
    if epsilon0 > _EFMRTT_MAX_EPS0:
        raise AmplificationDomainError(
            f"efmrtt19 needs epsilon0 <= {_EFMRTT_MAX_EPS0}, got {epsilon0}")
    return min(12.0 * epsilon0 * math.sqrt(math.log(1.0 / delta) / n), epsilon0)


def efmrtt19_epsilon0(n: int, epsilon: float, delta: float) -> float:
    """Largest local epsilon (<= 1/2, or <= epsilon trivially) meeting a central target.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: ``n < 1000`` or ``delta > 1/100``.
    """
    n = _check_n(n)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    _efmrtt_check(n, delta)
    certified = min(epsilon / (12.0 * math.sqrt(math.log(1.0 / delta) / n)), _EFMRTT_MAX_EPS0)
    return max(certified, epsilon)
