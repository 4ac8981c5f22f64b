"""Privacy-blanket bounds (Balle, Bell, Gascon, Nissim, CRYPTO 2019).

``bbgn19_hoeffding``
    Balle, Bell, Gascon, Nissim, "The privacy blanket of the shuffle model", CRYPTO 2019,
    generic ``epsilon0``-LDP randomiser analysed with Hoeffding's inequality (implicit
    form, as in the authors' public code): blanket mass ``gamma = e^-epsilon0``,
    ``a = e^epsilon - 1``, ``b = (e^epsilon + 1)(e^epsilon0 - e^-epsilon0)``,
    ``delta = b^2 / (4 a gamma n) * (1 - gamma (1 - exp(-2 a^2 / b^2)))^n``
    for ``epsilon < epsilon0`` (and 0 otherwise).

``bbgn19_triehh``
    The closed form used by the TrieHH authors' SFP code (Zhu et al., AISTATS 2020,
    which cites Theorem 5.3 of arXiv:1903.02837 for it), with ``x = a^2 / b^2``:
    ``delta = (e^epsilon - 1) / (4 n x) * exp(-(1 - e^-2) * n * min(e^-epsilon0, x))``.
    It reproduces the paper's local epsilons 4.29 / 4.96 (n = 659,380, delta = 1/n^2,
    central 1 / 4). We could not check its constants against the paper text; it is far
    more optimistic than ``bbgn19_hoeffding`` but less so than the clone bounds of
    :mod:`shuffler.amplification.clones`.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .checks import (
    _DEFAULT_TOL, _check_delta, _check_epsilon, _check_epsilon0, _check_n, _check_tol,
)
from .search import _first_crossing, _largest_epsilon0

__all__ = [
    "blanket_hoeffding_delta", "blanket_hoeffding_epsilon", "blanket_hoeffding_epsilon0",
    "triehh_blanket_delta", "triehh_blanket_epsilon", "triehh_blanket_epsilon0",
]

_BLANKET_C = 1.0 - math.exp(-2.0)


def _log_2sinh(x: float) -> float:
    """ln(e^x - e^-x) for x > 0 without overflow or cancellation."""
    return x + math.log(-math.expm1(-2.0 * x))


def _blanket_log_x(epsilon: np.ndarray, epsilon0: float) -> np.ndarray:
    """ln(a^2 / b^2) with a = e^eps - 1, b = (e^eps + 1)(e^eps0 - e^-eps0)."""
    return 2.0 * (np.log(np.tanh(epsilon / 2.0)) - _log_2sinh(epsilon0))


def _hoeffding_log_delta(n: int, epsilon0: float, epsilon: np.ndarray) -> np.ndarray:
    epsilon = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        log_x = _blanket_log_x(epsilon, epsilon0)
        log_gamma = -epsilon0
        # ln(b^2/(4a)) = ln(a/4) - ln x
        log_a = np.log(np.expm1(epsilon))
        one_minus = -np.expm1(-2.0 * np.exp(log_x))          # 1 - exp(-2x)
        log_base = np.log1p(-math.exp(log_gamma) * one_minus)
        out = -(log_gamma + math.log(n)) + (log_a - math.log(4.0) - log_x) + n * log_base
    return np.where(epsilon >= epsilon0, -np.inf, out)


def _triehh_log_delta(n: int, epsilon0: float, epsilon: np.ndarray) -> np.ndarray:
    epsilon = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        log_x = _blanket_log_x(epsilon, epsilon0)
        log_a = np.log(np.expm1(epsilon))
        m = np.exp(np.minimum(-epsilon0, log_x))
        return log_a - log_x - math.log(4.0 * n) - _BLANKET_C * n * m


LogDelta = Callable[[int, float, np.ndarray], np.ndarray]


def _blanket_delta(log_delta: LogDelta, n: int, epsilon0: float, epsilon: float) -> float:
    """``exp(log_delta(n, epsilon0, epsilon))`` after validation (``inf`` at epsilon 0)."""
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    epsilon = _check_epsilon(epsilon)
    if epsilon == 0.0:
        return math.inf
    return float(np.exp(log_delta(n, epsilon0, np.array([epsilon]))[0]))


def _blanket_epsilon(log_delta: LogDelta, n: int, epsilon0: float, delta: float,
                     tol: float) -> float:
    """Smallest epsilon (<= epsilon0) whose ``log_delta`` is at most ``ln delta``."""
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_delta(delta)
    tol = _check_tol(tol)
    return _first_crossing(lambda e: log_delta(n, epsilon0, e), epsilon0, math.log(delta),
                           tol)


def _blanket_epsilon0(log_delta: LogDelta, n: int, epsilon: float, delta: float,
                      tol: float) -> float:
    """Largest epsilon0 whose ``log_delta`` at ``epsilon`` is at most ``ln delta`` (both
    blanket bounds grow with epsilon0, so bisection applies)."""
    n = _check_n(n)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    tol = _check_tol(tol)
    if epsilon == 0.0:
        return 0.0
    log_t = math.log(delta)
    return _largest_epsilon0(
        lambda e0: bool(log_delta(n, e0, np.array([epsilon]))[0] <= log_t), epsilon, tol)


def blanket_hoeffding_delta(n: int, epsilon0: float, epsilon: float) -> float:
    """Delta of the privacy-blanket bound with Hoeffding's inequality (Balle et al. 2019).

    Generic pure ``epsilon0``-LDP randomiser, blanket mass ``gamma = e^-epsilon0``:
    ``b^2/(4 a gamma n) (1 - gamma (1 - exp(-2 a^2/b^2)))^n``, zero for ``epsilon >= epsilon0``.

    Raises:
        ValueError: malformed arguments.
    """
    return _blanket_delta(_hoeffding_log_delta, n, epsilon0, epsilon)


def blanket_hoeffding_epsilon(n: int, epsilon0: float, delta: float,
                              tol: float = _DEFAULT_TOL) -> float:
    """Smallest central epsilon certified by :func:`blanket_hoeffding_delta` (<= epsilon0).

    Raises:
        ValueError: malformed arguments.
    """
    return _blanket_epsilon(_hoeffding_log_delta, n, epsilon0, delta, tol)


def blanket_hoeffding_epsilon0(n: int, epsilon: float, delta: float,
                               tol: float = _DEFAULT_TOL) -> float:
    """Largest epsilon0 whose Hoeffding blanket delta at ``epsilon`` is <= ``delta``.

    The bound's delta increases with epsilon0 (gamma falls, b grows), so bisection applies.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: the target holds up to :data:`MAX_EPSILON0`.
    """
    return _blanket_epsilon0(_hoeffding_log_delta, n, epsilon, delta, tol)


def triehh_blanket_delta(n: int, epsilon0: float, epsilon: float) -> float:
    """Delta of the closed form in the TrieHH authors' SFP code (see module docstring).

    ``(e^eps - 1)/(4 n x) * exp(-(1 - e^-2) n min(e^-eps0, x))``,
    ``x = ((e^eps - 1)/((e^eps + 1)(e^eps0 - e^-eps0)))^2``.

    Raises:
        ValueError: malformed arguments.
    """
    return _blanket_delta(_triehh_log_delta, n, epsilon0, epsilon)


def triehh_blanket_epsilon(n: int, epsilon0: float, delta: float,
                           tol: float = _DEFAULT_TOL) -> float:
    """Smallest central epsilon with :func:`triehh_blanket_delta` <= delta (<= epsilon0).

    Raises:
        ValueError: malformed arguments.
    """
    return _blanket_epsilon(_triehh_log_delta, n, epsilon0, delta, tol)


def triehh_blanket_epsilon0(n: int, epsilon: float, delta: float,
                            tol: float = _DEFAULT_TOL) -> float:
    """Largest epsilon0 with :func:`triehh_blanket_delta` at ``epsilon`` <= ``delta``.

    This is the TrieHH code's ``central_to_local`` (there solved with a root finder); the
    formula's delta increases with epsilon0, so the root is unique.

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: the target holds up to :data:`MAX_EPSILON0`.
    """
    return _blanket_epsilon0(_triehh_log_delta, n, epsilon, delta, tol)
