"""Privacy amplification by shuffling: central (epsilon, delta) of n shuffled LDP reports.

Setting. Each of ``n`` users applies an ``epsilon0``-LDP local randomiser to its own input
and the shuffler forwards the ``n`` reports in a uniformly random order (only the
multiset reaches the analyst). The bounds below say for which ``(epsilon, delta)`` the
shuffled output is central ``(epsilon, delta)``-DP with respect to one user's input
(replacement adjacency). All of them are *upper* bounds: the true privacy loss is at most
what they report. Where a bound returns a value it is a certificate; where its theorem
does not cover the parameters it raises :class:`AmplificationDomainError`.

Trivial bound. The shuffled output is a post-processing of the ``n`` reports and one
user's input changes one report, so it is always ``(epsilon0, 0)``-DP. Every forward
function therefore returns ``min(bound, epsilon0)``, and every inverse accepts any
``epsilon0 <= epsilon``.

Bounds (names as used by :func:`central_epsilon` and :func:`local_epsilon`):

``efmrtt19``
    Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta, "Amplification by
    shuffling: from local to central differential privacy via anonymity", SODA 2019:
    ``epsilon = 12 * epsilon0 * sqrt(ln(1/delta) / n)`` for ``epsilon0 <= 1/2``,
    ``n >= 1000`` and ``delta <= 1/100`` (the regime encoded by Balle et al.'s public
    companion code for that bound).

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
    more optimistic than ``bbgn19_hoeffding`` but less so than the clone bounds below.

``fmt21_closed_form``
    Feldman, McMillan, Talwar, "Hiding among the clones", FOCS 2021, Theorem 3.1:
    ``epsilon = ln(1 + (e^epsilon0 - 1)/(e^epsilon0 + 1) * (8 sqrt(e^epsilon0 ln(4/delta))
    / sqrt(n) + 8 e^epsilon0 / n))`` for ``epsilon0 <= ln(n / (16 ln(2/delta)))``.

``fmt21_numerical`` and ``fmt23_numerical``
    The clone reduction: the shuffled output is as private as the pair
    ``P = (A + D, C - A + 1 - D)`` and ``Q = (A + 1 - D, C - A + D)`` with
    ``C ~ Bin(n - 1, p)``, ``A ~ Bin(C, 1/2)``, ``D ~ Bern(e^epsilon0 / (e^epsilon0 + 1))``.
    FMT 2021 (Theorem 3.2) uses ``p = e^-epsilon0``; the stronger analysis of Feldman,
    McMillan, Talwar, "Stronger privacy amplification by shuffling for Renyi and
    approximate differential privacy", SODA 2023, lets ``p = 2 / (e^epsilon0 + 1)``.
    ``delta(epsilon)`` is the hockey-stick divergence ``sum_x max(0, P(x) - e^epsilon Q(x))``
    computed here exactly (see below) and ``epsilon`` is the smallest value with
    ``delta(epsilon) <= delta`` (a bracketing search; the divergence decreases in
    ``epsilon``).

Exact evaluation of the clone divergence. Given ``C = c`` the first coordinate ``k``
determines the pair, and with ``b`` the ``Bin(c, 1/2)`` pmf,
``P(k) = alpha b(k-1) + (1-alpha) b(k)``, ``Q(k) = (1-alpha) b(k-1) + alpha b(k)``.
The likelihood ratio increases in ``k``, so the positive part is a tail:
``B_c = sum_{j >= j*} b(j) g_j`` with ``g_j = w1 - |w2| (c - j)/(j + 1) >= 0``,
``w1 = (e^epsilon0 - e^epsilon)/(e^epsilon0 + 1)``,
``|w2| = (e^(epsilon + epsilon0) - 1)/(e^epsilon0 + 1)``. All terms are positive: per
``c`` they are summed relative to the first one (products of the ratios
``b(j+1)/b(j)``), whose log comes from Loader's saddle-point form of the binomial pmf
(``stirlerr`` and ``bd0``, about 1e-13 relative at any size); the ``c`` sum is a
log-sum-exp. There is no cancellation and no floor: the result is ``ln delta``, so values
far below 1e-300 are reported as they are. Truncations are *provable* and added to
``delta``, never dropped:

* the sum over ``j`` stops after enough terms for ``b`` to fall by about ``e^-40`` and the rest
  is bounded by ``w1 * b(J) / (1 - (c - J)/(J + 1))`` (a geometric tail, since the ratio
  ``b(j+1)/b(j) = (c - j)/(j + 1)`` decreases in ``j``);
* ``C`` is restricted to a window outside which the Chernoff bound
  ``Pr[C <= k] <= exp(-(n-1) KL(k/(n-1) || p))`` (and its upper-tail twin) is below a
  budget (1e-12 of the target in searches; by default tightened in :func:`clone_delta`
  until the tails are below 1e-12 of the result); the excluded mass is added with
  ``B <= w1`` (lower side) and ``B <= B_{c_hi}`` (upper side);
* ``B_c`` does not increase with ``c`` (one more clone is the same independent
  post-processing applied to both ``P`` and ``Q``), so when the window is very wide the
  block ``[c_i, c_{i+1})`` is charged ``B_{c_i}`` times its exact probability -- still an
  upper bound, used only when ``window * terms`` exceeds ``max_work``.

Assumptions. Reports are pure ``epsilon0``-LDP (``delta0 = 0``), every user uses an
``epsilon0``-LDP randomiser, the shuffle is uniform and secret, and each user sends one
report. Nothing here accounts for composition over several rounds or reports per user.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "AmplificationDomainError",
    "BoundInfo",
    "BOUNDS",
    "MAX_EPSILON0",
    "central_epsilon",
    "local_epsilon",
    "efmrtt19_epsilon",
    "efmrtt19_epsilon0",
    "fmt21_closed_form_epsilon",
    "fmt21_closed_form_epsilon0",
    "blanket_hoeffding_delta",
    "blanket_hoeffding_epsilon",
    "blanket_hoeffding_epsilon0",
    "triehh_blanket_delta",
    "triehh_blanket_epsilon",
    "triehh_blanket_epsilon0",
    "clone_probability",
    "clone_log_delta",
    "clone_delta",
    "clone_epsilon",
    "clone_epsilon0",
]

#: Largest local epsilon accepted. Beyond it e^-epsilon0 < 1e-21: no amplification is
#: left to compute, and exp(epsilon0) stays far from overflow.
MAX_EPSILON0 = 50.0
_DEFAULT_TOL = 1e-6
_LOG_DEFAULT_TAIL = math.log(1e-30)
_LOG_TAIL_FRACTION = math.log(1e-12)
_DEFAULT_MAX_WORK = 20_000_000
_CHUNK_ELEMENTS = 1_000_000
_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_BLANKET_C = 1.0 - math.exp(-2.0)


class AmplificationDomainError(ValueError):
    """The requested bound's theorem does not cover these parameters."""


# --------------------------------------------------------------------------- validation

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


def _log_2sinh(x: float) -> float:
    """ln(e^x - e^-x) for x > 0 without overflow or cancellation."""
    return x + math.log(-math.expm1(-2.0 * x))


# --------------------------------------------------------------------- generic searches

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


# ------------------------------------------------------------------------------ EFMRTT19

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


# ----------------------------------------------------------------- FMT21 closed form

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


# ----------------------------------------------------------- privacy blanket (BBGN19)

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


# ------------------------------------------------------- exact binomial log-pmf (Loader)

_STIRLERR_SMALL = 32
_STIRLERR_TABLE = np.array(
    [0.0] + [math.lgamma(m + 1.0) - (m + 0.5) * math.log(m) + m - _LN_SQRT_2PI
             for m in range(1, _STIRLERR_SMALL)])


def _stirlerr(m: np.ndarray) -> np.ndarray:
    """ln(m!) - [(m + 1/2) ln m - m + ln sqrt(2 pi)] for integers m >= 1 (Stirling error)."""
    m = np.asarray(m, dtype=float)
    small = m < _STIRLERR_SMALL
    mm = np.where(small, _STIRLERR_SMALL, m)
    inv = 1.0 / mm
    inv2 = inv * inv
    series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)))
    idx = np.clip(m, 0, _STIRLERR_SMALL - 1).astype(np.int64)
    return np.where(small, _STIRLERR_TABLE[idx], series)


def _bd0(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """x ln(x/mean) + mean - x, without cancellation when x is close to mean (Loader)."""
    x = np.asarray(x, dtype=float)
    mean = np.broadcast_to(np.asarray(mean, dtype=float), x.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.where(x > 0, x * np.log(x / mean), 0.0) + mean - x
        d = x - mean
        s = x + mean
        near = np.abs(d) < 0.1 * s
        v = np.where(near, d / s, 0.0)
        v2 = v * v
        acc = d * v
        ej = 2.0 * x * v
        for k in range(1, 14):          # |v| < 0.1: each term is 100x smaller
            ej = ej * v2
            acc = acc + ej / (2 * k + 1)
    return np.where(near, acc, direct)


def _log_binom_pmf(k: np.ndarray, m: np.ndarray, p: float, q: float) -> np.ndarray:
    """ln Pr[Bin(m, p) = k] for integer arrays 0 <= k <= m (q = 1 - p given accurately)."""
    k = np.asarray(k, dtype=np.int64)
    m = np.broadcast_to(np.asarray(m, dtype=np.int64), k.shape)
    kf = k.astype(float)
    mf = m.astype(float)
    rest = mf - kf
    inner = (k > 0) & (k < m)
    with np.errstate(divide="ignore", invalid="ignore"):
        safe_k = np.where(inner, kf, 1.0)
        safe_r = np.where(inner, rest, 1.0)
        safe_m = np.where(inner, mf, 2.0)
        core = (_stirlerr(safe_m) - _stirlerr(safe_k) - _stirlerr(safe_r)
                - _bd0(safe_k, safe_m * p) - _bd0(safe_r, safe_m * q)
                + 0.5 * np.log(safe_m / (safe_k * safe_r)) - _LN_SQRT_2PI)
        log_p = math.log(p) if p > 0 else -math.inf
        log_q = math.log(q) if q > 0 else -math.inf
        edge0 = np.where(m > 0, mf * log_q, 0.0)
        edgem = np.where(m > 0, mf * log_p, 0.0)
    out = np.where(inner, core, np.where(k == 0, edge0, edgem))
    return np.where((k < 0) | (k > m), -np.inf, out)


def _logsumexp(a: np.ndarray, axis: int | None = None) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    mx = np.max(a, axis=axis, keepdims=True)
    mx_safe = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp(a - mx_safe), axis=axis, keepdims=True)) + mx_safe
    return np.squeeze(s, axis=axis) if axis is not None else s.reshape(())


# ------------------------------------------------------------------- clone reduction

def clone_probability(epsilon0: float, variant: str) -> tuple[float, float]:
    """(p, 1 - p) for the clone count C ~ Bin(n - 1, p), both computed accurately.

    ``fmt21``: ``p = e^-epsilon0`` (FOCS 2021). ``fmt23``: ``p = 2 / (e^epsilon0 + 1)``
    (SODA 2023).

    Raises:
        ValueError: unknown variant or bad epsilon0.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    if variant == "fmt21":
        return math.exp(-epsilon0), -math.expm1(-epsilon0)
    if variant == "fmt23":
        em = math.exp(-epsilon0)
        return 2.0 * em / (1.0 + em), math.tanh(epsilon0 / 2.0)
    raise ValueError(f"variant must be 'fmt21' or 'fmt23', got {variant!r}")


def _kl_bernoulli(a: float, p: float, q: float) -> float:
    """KL(Bern(a) || Bern(p)) with q = 1 - p."""
    out = 0.0
    if a > 0.0:
        out += a * (math.log(a) - math.log(p))
    if a < 1.0:
        out += (1.0 - a) * (math.log1p(-a) - math.log(q))
    return out


def _binomial_window(m: int, p: float, q: float, log_tail: float) -> tuple[int, int, float, float]:
    """[lo, hi] holding Bin(m, p) up to Chernoff tails each <= exp(log_tail).

    Returns:
        (lo, hi, log of a bound on Pr[C < lo], log of a bound on Pr[C > hi]).
    """
    if m == 0:
        return 0, 0, -math.inf, -math.inf
    mean = m * p

    def bound(k: int) -> float:       # Chernoff bound on the tail beyond k (away from mean)
        return -m * _kl_bernoulli(k / m, p, q)

    # lower side: largest k < mean with bound(k) <= log_tail
    lo, lo_tail = 0, -math.inf
    top = min(int(math.floor(mean)), m)
    if top >= 1 and bound(0) <= log_tail:
        a, b = 0, top                  # bound(a) <= log_tail, search the last such k < mean
        while b - a > 1:
            mid = (a + b) // 2
            if mid < mean and bound(mid) <= log_tail:
                a = mid
            else:
                b = mid
        lo, lo_tail = a + 1, bound(a)
    # upper side: smallest k > mean with bound(k) <= log_tail
    hi, hi_tail = m, -math.inf
    bottom = max(int(math.ceil(mean)), 0)
    if bottom <= m - 1 and bound(m) <= log_tail:
        a, b = bottom, m               # search the first k > mean with bound(k) <= log_tail
        while b - a > 1:
            mid = (a + b) // 2
            if mid > mean and bound(mid) <= log_tail:
                b = mid
            else:
                a = mid
        hi, hi_tail = b - 1, bound(b)
    return lo, hi, lo_tail, hi_tail


def _summation_plan(c: np.ndarray, w1: float, w2abs: float) -> tuple[np.ndarray, int]:
    """First index j0 (just below the threshold j*) per c, and the common number of terms.

    ``g_j > 0`` iff ``j > (c - r0)/(1 + r0)`` with ``r0 = w1/|w2|``. From ``j0 = c/2 + d``
    on, ``b`` falls by about ``exp(-(2/c)(2 d K + K^2))`` over ``K`` terms; ``K`` is chosen
    so that this is about ``e^-40`` (the rest is bounded, not dropped).
    """
    r0 = w1 / w2abs
    cf = c.astype(float)
    jstar = np.floor((cf - r0) / (1.0 + r0)).astype(np.int64) + 1
    j0 = np.clip(jstar - 1, 0, c)
    d = j0 - cf / 2.0
    need = np.ceil(-d + np.sqrt(d * d + 20.0 * cf + 1.0)) + 8
    width = int(min(np.max(need), np.max(c - j0) + 1))
    return j0, max(width, 1)


def _log_blanket_divergence(c: np.ndarray, w1: float, w2abs: float) -> np.ndarray:
    """ln B_c = ln sum_j max(0, P(j) - e^eps Q(j)) given C = c, vectorised over c.

    Sums the positive terms b(j) g_j from the threshold on, then adds a provable geometric
    bound on what is left (see the module docstring).
    """
    c = np.asarray(c, dtype=np.int64)
    out = np.empty(c.shape, dtype=float)
    if c.size == 0:
        return out
    log_w1 = math.log(w1)
    j0, width = _summation_plan(c, w1, w2abs)
    rows = max(1, _CHUNK_ELEMENTS // width)
    steps = np.arange(width, dtype=float)
    for start in range(0, c.size, rows):
        cc = c[start:start + rows]
        jj0 = j0[start:start + rows]
        ccf = cc.astype(float)[:, None]
        jf = jj0.astype(float)[:, None] + steps[None, :]
        # ratio[:, i] = b(j_i + 1) / b(j_i) = (c - j_i)/(j_i + 1), zero from j = c on
        ratio = np.maximum(ccf - jf, 0.0) / (jf + 1.0)
        # b(j_i) / b(j0): products of the ratios before i (at most ~1 + 2/c, then falling)
        rel = np.empty_like(ratio)
        rel[:, 0] = 1.0
        np.cumprod(ratio[:, :-1], axis=1, out=rel[:, 1:])
        g = np.maximum(w1 - w2abs * ratio, 0.0)       # g_j = w1 - |w2| (c - j)/(j + 1)
        body = np.einsum("ij,ij->i", rel, g)
        # geometric bound on the terms after the last one summed: b(J) w1 / (1 - rho)
        rest_rel = rel[:, -1] * ratio[:, -1]           # b(J)/b(j0), J = j0 + width
        jl = jj0 + width
        rho = np.maximum(cc - jl, 0) / (jl + 1.0)
        has_rest = (jl <= cc) & (rest_rel > 0.0)
        safe_rho = np.where(rho < 1.0, rho, 0.0)
        rest = np.where(rho < 1.0, w1 * rest_rel / (1.0 - safe_rho), 0.0)
        head = _log_binom_pmf(jj0, cc, 0.5, 0.5)
        with np.errstate(divide="ignore"):
            total = head + np.log(body + np.where(has_rest, rest, 0.0))
            # rho >= 1 cannot happen for j0 >= c/2 - 1 and width >= 8; if it did, the
            # remaining tail is bounded by w1 * Pr[Bin(c, 1/2) >= J] <= w1
            total = np.where(has_rest & (rho >= 1.0), np.logaddexp(total, log_w1), total)
        out[start:start + rows] = total
    return out


def clone_log_delta(n: int, epsilon0: float, epsilon: float, variant: str = "fmt23", *,
                    tail_budget: float | None = None,
                    max_work: int = _DEFAULT_MAX_WORK) -> float:
    """Natural log of the clone-reduction delta at ``epsilon`` (an upper bound).

    Args:
        n: number of shuffled reports (>= 1).
        epsilon0: local epsilon.
        epsilon: central epsilon at which delta is evaluated (>= 0).
        variant: ``"fmt21"`` (C ~ Bin(n-1, e^-eps0)) or ``"fmt23"`` (C ~ Bin(n-1,
            2/(e^eps0+1))).
        tail_budget: Chernoff mass allowed outside the summation window on each side of
            C; it is *added* to delta (with the appropriate B), never dropped. ``None``
            (default) starts at 1e-30 and tightens until the added tails are below 1e-12
            of delta, so tiny deltas are computed exactly rather than floored.
        max_work: above ``window * terms`` elements the window is evaluated on a grid with
            each block charged its left end point (valid because B_c does not increase).

    Returns:
        ln delta; ``-inf`` when ``epsilon >= epsilon0`` (delta is exactly 0 there).

    Raises:
        ValueError: malformed arguments.
    """
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    epsilon = _check_epsilon(epsilon)
    if tail_budget is not None and not (0.0 < tail_budget < 1.0):
        raise ValueError(f"tail_budget must satisfy 0 < tail_budget < 1, got {tail_budget!r}")
    if max_work < 1:
        raise ValueError(f"max_work must be >= 1, got {max_work!r}")
    p, q = clone_probability(epsilon0, variant)
    log_tail = None if tail_budget is None else math.log(tail_budget)
    return _clone_log_delta(n, epsilon0, epsilon, p, q, log_tail, int(max_work))


def _clone_log_delta_parts(n: int, epsilon0: float, epsilon: float, p: float, q: float,
                           log_tail: float, max_work: int) -> tuple[float, float]:
    """(ln delta, ln of the part summed inside the window) for a fixed window budget."""
    if epsilon >= epsilon0:
        return -math.inf, -math.inf
    em = math.exp(-epsilon0)
    w1 = -math.expm1(epsilon - epsilon0) / (1.0 + em)
    w2abs = (math.exp(epsilon) - em) / (1.0 + em)
    m = n - 1
    lo, hi, lo_tail, hi_tail = _binomial_window(m, p, q, log_tail)
    cs = np.arange(lo, hi + 1, dtype=np.int64)
    log_wc = _log_binom_pmf(cs, m, p, q)
    _, width = _summation_plan(cs, w1, w2abs)
    stride = max(1, int(math.ceil(cs.size * width / max_work)))
    if stride == 1:
        log_b = _log_blanket_divergence(cs, w1, w2abs)
        body = float(_logsumexp(log_wc + log_b))
        last_b = float(log_b[-1])
    else:
        starts = np.arange(0, cs.size, stride)
        block_max = np.maximum.reduceat(log_wc, starts)
        shifted = np.exp(log_wc - np.repeat(block_max, np.diff(np.append(starts, cs.size))))
        log_mass = np.log(np.add.reduceat(shifted, starts)) + block_max
        log_b = _log_blanket_divergence(cs[starts], w1, w2abs)
        body = float(_logsumexp(log_mass + log_b))
        last_b = float(log_b[-1])
    parts = [body, lo_tail + math.log(w1), hi_tail + last_b]
    return float(_logsumexp(np.array(parts))), body


def _clone_log_delta(n: int, epsilon0: float, epsilon: float, p: float, q: float,
                     log_tail: float | None, max_work: int) -> float:
    """ln delta; with ``log_tail=None`` the window widens until its tails are negligible.

    Adaptive mode starts with a 1e-30 budget and, while the added tail bounds exceed
    1e-12 of the summed part, recomputes with a budget of 1e-15 times that part. This
    keeps delta exact (not floored at the budget) however small it is.
    """
    if log_tail is not None:
        return _clone_log_delta_parts(n, epsilon0, epsilon, p, q, log_tail, max_work)[0]
    log_tail = _LOG_DEFAULT_TAIL
    total = -math.inf
    for _ in range(6):
        total, body = _clone_log_delta_parts(n, epsilon0, epsilon, p, q, log_tail, max_work)
        if not math.isfinite(total) or total - body <= 1e-12:
            break
        log_tail = min(log_tail, body) + math.log(1e-15)
    return total


def clone_delta(n: int, epsilon0: float, epsilon: float, variant: str = "fmt23", *,
                tail_budget: float | None = None,
                max_work: int = _DEFAULT_MAX_WORK) -> float:
    """Clone-reduction delta at ``epsilon`` (``exp`` of :func:`clone_log_delta`).

    Raises:
        ValueError: malformed arguments.
    """
    return math.exp(clone_log_delta(n, epsilon0, epsilon, variant, tail_budget=tail_budget,
                                    max_work=max_work))


def _search_log_tail(delta: float) -> float:
    """Chernoff window budget for searches: 1e-12 of the target delta on each side."""
    return math.log(delta) + _LOG_TAIL_FRACTION


def clone_epsilon(n: int, epsilon0: float, delta: float, variant: str = "fmt23",
                  tol: float = _DEFAULT_TOL, *, max_work: int = _DEFAULT_MAX_WORK) -> float:
    """Smallest central epsilon (to ``tol``, rounded up) with clone delta <= ``delta``.

    The hockey-stick divergence decreases in epsilon, so bisection on [0, epsilon0] is
    exact; the returned value always satisfies the target. The Chernoff window budget is
    ``min(1e-30, 1e-12 * delta)``.

    Raises:
        ValueError: malformed arguments.
    """
    n = _check_n(n)
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_delta(delta)
    tol = _check_tol(tol)
    p, q = clone_probability(epsilon0, variant)
    log_t = math.log(delta)
    log_tail = _search_log_tail(delta)

    def g(eps: float) -> float:
        return _clone_log_delta(n, epsilon0, eps, p, q, log_tail, max_work) - log_t

    g0 = g(0.0)
    if g0 <= 0.0:
        return 0.0
    hi, g_hi = epsilon0, -math.inf
    if n > 16.0 * math.log(2.0 / delta):
        cap = math.log(n / (16.0 * math.log(2.0 / delta)))
        if epsilon0 <= cap:             # the closed form bounds the same divergence
            guess = _fmt21_formula(n, epsilon0, delta)
            if guess < hi:
                g_guess = g(guess)
                if g_guess <= 0.0:
                    hi, g_hi = guess, g_guess
    return _illinois(g, hi, 0.0, g_hi, g0, tol)


def clone_epsilon0(n: int, epsilon: float, delta: float, variant: str = "fmt23",
                   tol: float = _DEFAULT_TOL, *, max_work: int = _DEFAULT_MAX_WORK) -> float:
    """Largest epsilon0 (to ``tol``, rounded down) whose clone delta at ``epsilon`` <= delta.

    Bisection on epsilon0 assumes the divergence grows with epsilon0 (fewer clones, larger
    mixing weight); checked numerically in the tests. The returned epsilon0 always meets
    the target (the search keeps the satisfied end).

    Raises:
        ValueError: malformed arguments.
        AmplificationDomainError: the target holds up to :data:`MAX_EPSILON0`.
    """
    n = _check_n(n)
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    tol = _check_tol(tol)
    clone_probability(1.0, variant)     # validates the variant name
    log_t = math.log(delta)
    log_tail = _search_log_tail(delta)

    def g(e0: float) -> float:
        p, q = clone_probability(e0, variant)
        return _clone_log_delta(n, e0, epsilon, p, q, log_tail, max_work) - log_t

    if epsilon == 0.0:
        return 0.0
    if epsilon >= MAX_EPSILON0:
        return epsilon
    lo, g_lo = epsilon, -math.inf      # delta is exactly 0 at epsilon0 = epsilon
    step = 1.0
    hi = min(lo + step, MAX_EPSILON0)
    g_hi = g(hi)
    while g_hi <= 0.0:
        if hi >= MAX_EPSILON0:
            raise AmplificationDomainError(
                f"the central target holds for every epsilon0 up to {MAX_EPSILON0}; "
                "this bound cannot locate the largest epsilon0")
        lo, g_lo = hi, g_hi
        step *= 2.0
        hi = min(lo + step, MAX_EPSILON0)
        g_hi = g(hi)
    return _illinois(g, lo, hi, g_lo, g_hi, tol)


# --------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class BoundInfo:
    """One amplification bound: where it comes from and how to evaluate it both ways."""

    name: str
    source: str
    validity: str
    forward: Callable[[int, float, float], float]
    inverse: Callable[[int, float, float], float]


BOUNDS: dict[str, BoundInfo] = {
    b.name: b for b in (
        BoundInfo("efmrtt19", "Erlingsson et al., SODA 2019",
                  "epsilon0 <= 1/2, n >= 1000, delta <= 1/100",
                  efmrtt19_epsilon, efmrtt19_epsilon0),
        BoundInfo("bbgn19_hoeffding", "Balle, Bell, Gascon, Nissim, CRYPTO 2019 (Hoeffding)",
                  "any pure epsilon0-LDP randomiser",
                  blanket_hoeffding_epsilon, blanket_hoeffding_epsilon0),
        BoundInfo("bbgn19_triehh", "TrieHH code's closed form (cites BBGN19 Thm 5.3)",
                  "any pure epsilon0-LDP randomiser (constants unverified)",
                  triehh_blanket_epsilon, triehh_blanket_epsilon0),
        BoundInfo("fmt21_closed_form", "Feldman, McMillan, Talwar, FOCS 2021, Thm 3.1",
                  "epsilon0 <= ln(n / (16 ln(2/delta)))",
                  fmt21_closed_form_epsilon, fmt21_closed_form_epsilon0),
        BoundInfo("fmt21_numerical", "Feldman, McMillan, Talwar, FOCS 2021 (clones, numerical)",
                  "any pure epsilon0-LDP randomiser",
                  lambda n, e0, d: clone_epsilon(n, e0, d, "fmt21"),
                  lambda n, e, d: clone_epsilon0(n, e, d, "fmt21")),
        BoundInfo("fmt23_numerical", "Feldman, McMillan, Talwar, SODA 2023 (stronger clones)",
                  "any pure epsilon0-LDP randomiser",
                  lambda n, e0, d: clone_epsilon(n, e0, d, "fmt23"),
                  lambda n, e, d: clone_epsilon0(n, e, d, "fmt23")),
    )
}


def _bound(name: str) -> BoundInfo:
    try:
        return BOUNDS[name]
    except KeyError:
        raise ValueError(f"unknown bound {name!r}; choose from {sorted(BOUNDS)}") from None


def central_epsilon(n: int, epsilon0: float, delta: float,
                    bound: str = "fmt23_numerical") -> float:
    """Central epsilon (at ``delta``) of ``n`` shuffled ``epsilon0``-LDP reports.

    Args:
        n: number of shuffled reports.
        epsilon0: local epsilon of each report.
        delta: central delta.
        bound: a key of :data:`BOUNDS`.

    Returns:
        The bound's central epsilon, at most ``epsilon0``.

    Raises:
        ValueError: malformed arguments or unknown bound.
        AmplificationDomainError: outside the bound's theorem.
    """
    return float(_bound(bound).forward(n, epsilon0, delta))


def local_epsilon(n: int, epsilon: float, delta: float,
                  bound: str = "fmt23_numerical") -> float:
    """Largest local epsilon0 whose shuffled output is central (epsilon, delta)-DP.

    Args:
        n: number of shuffled reports.
        epsilon: central epsilon target.
        delta: central delta target.
        bound: a key of :data:`BOUNDS`.

    Raises:
        ValueError: malformed arguments or unknown bound.
        AmplificationDomainError: outside the bound's theorem.
    """
    return float(_bound(bound).inverse(n, epsilon, delta))
