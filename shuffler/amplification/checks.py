"""Argument checks and the domain error shared by every amplification bound.

Every bound of :mod:`shuffler.amplification` validates its arguments here, so a malformed
argument raises ``ValueError`` with the same message whichever bound is asked, and a
theorem that does not cover its parameters raises :class:`AmplificationDomainError`.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["AmplificationDomainError", "MAX_EPSILON0"]

#: Largest local epsilon accepted. Beyond it e^-epsilon0 < 1e-21: no amplification is
#: left to compute, and exp(epsilon0) stays far from overflow.
MAX_EPSILON0 = 50.0
_DEFAULT_TOL = 1e-6


class AmplificationDomainError(ValueError):
    """The requested bound's theorem does not cover these parameters."""

def _check_n(n: int, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n must be an integer, got {n!r}")
    if n < minimum:
        raise ValueError(f"n must be >= {minimum}, got {n}")
    return int(n)


def _as_float(value: object, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None


def _check_epsilon0(epsilon0: float) -> float:
    e = _as_float(epsilon0, "epsilon0")
    if not math.isfinite(e) or e <= 0.0:
        raise ValueError(f"epsilon0 must be finite and > 0, got {epsilon0!r}")
    if e > MAX_EPSILON0:
        raise ValueError(f"epsilon0 must be <= {MAX_EPSILON0}, got {epsilon0!r}")
    return e


def _check_epsilon(epsilon: float) -> float:
    e = _as_float(epsilon, "epsilon")
    if not math.isfinite(e) or e < 0.0:
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return e


def _check_delta(delta: float) -> float:
    d = _as_float(delta, "delta")
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
    return d


def _check_tol(tol: float) -> float:
    t = _as_float(tol, "tol")
    if not (0.0 < t < 1.0):
        raise ValueError(f"tol must satisfy 0 < tol < 1, got {tol!r}")
    return t
