"""The closed-form bound of Feldman, McMillan, Talwar (FOCS 2021), Theorem 3.1.

Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis
of privacy amplification by shuffling", FOCS 2021, Theorem 3.1:
``epsilon = ln(1 + (e^epsilon0 - 1)/(e^epsilon0 + 1) * (8 sqrt(e^epsilon0 ln(4/delta))
/ sqrt(n) + 8 e^epsilon0 / n))`` for ``epsilon0 <= ln(n / (16 ln(2/delta)))``.
"""
from __future__ import annotations

import math

from .checks import (
    _DEFAULT_TOL, MAX_EPSILON0, AmplificationDomainError, _check_delta, _check_epsilon,
    _check_epsilon0, _check_n, _check_tol,
)
from .search import _bisect_last_true

__all__ = ["fmt21_closed_form_epsilon", "fmt21_closed_form_epsilon0"]

def _fmt21_cap(n: int, delta: float) -> float:
    ratio = n / (16.0 * math.log(2.0 / delta))
    if ratio <= 1.0:
        raise AmplificationDomainError(
            f"fmt21_closed_form needs n > 16 ln(2/delta) = {16.0 * math.log(2.0 / delta):.6g}"
            f", got n = {n}")
    return math.log(ratio)


def _fmt21_formula(n: int, epsilon0: float, delta: float) -> float:
    e0 = math.exp(epsilon0)
    inner = 8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n
    return math.log1p(math.tanh(epsilon0 / 2.0) * inner)


def fmt21_closed_form_epsilon(n: int, epsilon0: float, delta: float) -> float:
    """Closed-form central epsilon of Feldman, McMillan, Talwar (FOCS 2021), Theorem 3.1.

    ``ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta)/n) + 8 e^eps0 / n))``.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: ``epsilon0 > ln(n / (16 ln(2/delta)))``.
    """
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_delta(delta)
    cap = _fmt21_cap(n, delta)
    if epsilon0 > cap:
        raise AmplificationDomainError(
            f"fmt21_closed_form needs epsilon0 <= ln(n/(16 ln(2/delta))) = {cap:.6g}, "
            f"got {epsilon0}")
    return min(_fmt21_formula(n, epsilon0, delta), epsilon0)


def fmt21_closed_form_epsilon0(n: int, epsilon: float, delta: float,
                               tol: float = _DEFAULT_TOL) -> float:
    """Largest epsilon0 (within Theorem 3.1's range, or <= epsilon) meeting a central target.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: ``n <= 16 ln(2/delta)``.
    """
    n = _check_n(n)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    tol = _check_tol(tol)
    cap = min(_fmt21_cap(n, delta), MAX_EPSILON0)
    if epsilon >= cap:
        return epsilon
    if _fmt21_formula(n, cap, delta) <= epsilon:
        return cap
    return _bisect_last_true(lambda e0: _fmt21_formula(n, e0, delta) <= epsilon,
                             epsilon, cap, tol)
