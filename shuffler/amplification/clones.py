"""The clone reduction of Feldman, McMillan, Talwar (FOCS 2021, SODA 2023), numerically.

``fmt21_numerical`` and ``fmt23_numerical``
    The shuffled output is as private as the pair
    ``P = (A + D, C - A + 1 - D)`` and ``Q = (A + 1 - D, C - A + D)`` with
    ``C ~ Bin(n - 1, p)``, ``A ~ Bin(C, 1/2)``, ``D ~ Bern(e^epsilon0 / (e^epsilon0 + 1))``.
    Feldman, McMillan, Talwar, "Hiding among the clones", FOCS 2021 (Theorem 3.2) uses
    ``p = e^-epsilon0``; the stronger analysis of Feldman, McMillan, Talwar, "Stronger
    privacy amplification by shuffling for Renyi and approximate differential privacy",
    SODA 2023, lets ``p = 2 / (e^epsilon0 + 1)``.
    ``delta(epsilon)`` is the hockey-stick divergence ``sum_x max(0, P(x) - e^epsilon Q(x))``
    computed here exactly (see below) and ``epsilon`` is the smallest value with
    ``delta(epsilon) <= delta`` (a bracketing search; the divergence decreases in
    ``epsilon``).

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
"""
from __future__ import annotations

import math

import numpy as np

from .binomial import _log_binom_pmf, _logsumexp
from .checks import (
    _DEFAULT_TOL, MAX_EPSILON0, AmplificationDomainError, _check_delta, _check_epsilon,
    _check_epsilon0, _check_n, _check_tol,
)
from .fmt21_closed_form import _fmt21_formula
from .search import _illinois

__all__ = ["clone_probability", "clone_log_delta", "clone_delta", "clone_epsilon",
           "clone_epsilon0"]

_LOG_DEFAULT_TAIL = math.log(1e-30)
_LOG_TAIL_FRACTION = math.log(1e-12)
_DEFAULT_MAX_WORK = 20_000_000
_CHUNK_ELEMENTS = 1_000_000


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
