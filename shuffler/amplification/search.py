"""Monotone one-dimensional searches used by the inverse solvers of the bounds.

Each search keeps the end of its bracket where the target is met, so a returned epsilon
(or epsilon0) always satisfies the bound it was solved for.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .checks import MAX_EPSILON0, AmplificationDomainError


def _bisect_last_true(pred: Callable[[float], bool], lo: float, hi: float, tol: float) -> float:
    """Largest x in [lo, hi] with pred(x) (pred(lo) holds, pred monotone true->false)."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _bisect_first_true(pred: Callable[[float], bool], lo: float, hi: float, tol: float) -> float:
    """Smallest x in [lo, hi] with pred(x) (pred(hi) holds, pred monotone false->true)."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _illinois(g: Callable[[float], float], x_ok: float, x_bad: float, g_ok: float,
              g_bad: float, tol: float) -> float:
    """Bracketing root search (regula falsi, Illinois variant) for a monotone ``g``.

    Invariant: ``g(x_ok) <= 0 < g(x_bad)``. Returns the final ``x_ok``, within ``tol`` of
    the boundary and always on the satisfied side. Each trial point is kept at least
    ``tol/2`` inside the bracket, so the bracket shrinks to ``tol`` in a handful of steps
    on smooth functions and never stalls (infinite end values fall back to bisection).
    """
    last = ""
    while abs(x_bad - x_ok) > tol:
        if math.isfinite(g_ok) and math.isfinite(g_bad) and g_bad != g_ok:
            x = x_ok - g_ok * (x_bad - x_ok) / (g_bad - g_ok)
        else:
            x = 0.5 * (x_ok + x_bad)
        lo, hi = (x_ok, x_bad) if x_ok < x_bad else (x_bad, x_ok)
        x = min(max(x, lo + 0.5 * tol), hi - 0.5 * tol)
        gx = g(x)
        if gx <= 0.0:
            x_ok, g_ok = x, gx
            if last == "ok":
                g_bad *= 0.5
            last = "ok"
        else:
            x_bad, g_bad = x, gx
            if last == "bad":
                g_ok *= 0.5
            last = "bad"
    return x_ok


def _first_crossing(log_delta: Callable[[np.ndarray], np.ndarray], epsilon0: float,
                    log_target: float, tol: float, grid: int = 4096) -> float:
    """Smallest epsilon in (0, epsilon0) with log_delta(epsilon) <= log_target, or epsilon0.

    For implicit bounds whose delta(epsilon) first falls and may later rise again: scan a
    fine grid, then bisect inside the first grid cell where the bound is met.
    """
    eps = np.linspace(0.0, epsilon0, grid + 1)[1:-1]
    vals = log_delta(eps)
    ok = np.nonzero(vals <= log_target)[0]
    if ok.size == 0:
        return epsilon0
    i = int(ok[0])
    lo = float(eps[i - 1]) if i > 0 else 0.0
    hi = float(eps[i])

    def pred(x: float) -> bool:
        return bool(log_delta(np.array([x]))[0] <= log_target)

    return _bisect_first_true(pred, lo, hi, tol)


def _largest_epsilon0(pred: Callable[[float], bool], epsilon: float, tol: float,
                      cap: float = MAX_EPSILON0) -> float:
    """Largest epsilon0 in [epsilon, cap] with pred(epsilon0), assuming monotonicity.

    ``pred(epsilon0)`` says "the bound certifies the central target at epsilon0"; every
    epsilon0 <= epsilon qualifies trivially.

    Raises:
        AmplificationDomainError: if the target is met all the way up to ``cap``.
    """
    lo = max(epsilon, 0.0)
    if lo >= cap:
        return lo
    step = 1.0
    hi = min(lo + step, cap)
    while pred(hi):
        lo = hi
        if hi >= cap:
            raise AmplificationDomainError(
                f"the central target holds for every epsilon0 up to {cap}; "
                "this bound cannot locate the largest epsilon0")
        step *= 2.0
        hi = min(lo + step, cap)
    return _bisect_last_true(pred, lo, hi, tol)
