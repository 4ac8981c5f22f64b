"""Privacy of TrieHH++ (sample-and-threshold with released counts) and its calculators.

Source: G. Cormode, "Federated heavy hitters revisited" (2021), section 2. Notation:
``n`` clients, expected sample ``m`` per level (Poisson rate ``p = m / n``), threshold
``theta`` (a node is released with its sampled count when the count is at least
``theta``), ``L`` levels.

Formulas, as checked against the paper
--------------------------------------
* Lemma 1: for ``theta = 3 + ln(1/delta)`` the sampled count of a prefix exceeds
  ``theta`` times its expectation with probability at most ``delta``. The proof's
  multiplicative Chernoff bound gives the sharper per-level failure probability
  ``p_theta = exp(-(theta - 1)^2 / (theta + 1))`` (prefixes with expected count at
  least 1), and the additive bound ``exp(-theta ln theta + theta - 1)`` (expected
  count below 1) is never larger (checked numerically in the tests for
  ``1 < theta <= 200``), so ``p_theta`` covers both cases.
* Lemma 3 (trie, ``L`` levels): per level ``eps_i = ln(1 + 10 m theta / (9 n))``
  under the assumption ``m <= n / (10 theta)``, ``delta = L p_theta`` with basic
  composition (``eps = L eps_i``).
* Lemma 3, advanced composition: the paper states
  ``(L eps'^2 + eps' sqrt(L ln(1 / (p_theta L))), 2 L p_theta)`` for ``eps' < 1``.
  That is *not* the advanced composition theorem (Dwork, Rothblum, Vadhan 2010), which
  gives ``eps' sqrt(2 L ln(1/delta')) + L eps' (e^eps' - 1)`` with ``delta = L delta_i
  + delta'``: the paper drops the factor 2 under the square root and writes ``eps'^2``
  for ``eps' (e^eps' - 1)``, both of which *understate* epsilon. Resolution: we compute
  the theorem's form with the paper's choice ``delta' = L p_theta`` (so ``delta =
  2 L p_theta`` as in the paper) and report the paper's literal value as
  ``parameters["paper_literal_epsilon"]`` for reference only.
* Remark (flat heavy hitters, one thresholded histogram): ``theta = 3 + ln(1/delta)``,
  ``m <= 9 n / (10 theta)``, ``eps = 10 theta m / n``. Following the proof of Lemma 3
  with one level: ``e^eps <= n / (n - theta m) = 1 + x / (1 - x)`` with
  ``x = theta m / n <= 9/10``, hence ``e^eps <= 1 + 10 x`` and ``eps <= ln(1 + 10 x)
  <= 10 x``. The Remark's value is valid but loose; we return it as stated.
* Equation (3) of the proof is the tight per-level ratio ``n / (n - theta m)``; (4)
  only simplifies it under ``m <= n / (10 theta)``. Working the proof with Poisson
  sampling exactly (the count of the differing prefix is ``Bin(k + 1, p)`` versus
  ``Bin(k, p)``: the likelihood ratio of a released value ``tau`` is
  ``(1 - p)(k + 1) / (k + 1 - tau) <= 1 / (1 - theta p)`` when ``tau <= theta (k + 1)
  p``, the reverse ratio is at most ``1 / (1 - p)``, and a suppressed cell has ratios
  ``<= 1`` and ``<= 1 / (1 - p)``) shows that ``eps_i = -ln(1 - theta m / n)`` holds
  whenever ``theta m < n``. It is available as ``bound="eq3"`` (default
  ``bound="paper"``). This matters: the paper's own worked examples (``n = 10^6,
  theta = 15, m = 12,000``; section 4 with ``m = eps n / (L theta)``) violate the
  assumption ``m <= n / (10 theta)`` of (4), and ``eps > L ln(10/9)`` (1.05 for
  ``L = 10``) is unreachable under it.
* Minor slips that do not change results: Lemma 2 writes ``(n - k - m - tau)`` for
  ``(n - k - m + tau)`` (the factor is still at most 1) and calls ``p^s (1 - p)^(n-s)``
  the probability of a sample *size* (it is the probability of one sample *set*).
* Sampling truncation (:mod:`mechanisms.sampling`): contacting only ``s = m + c sqrt(m)``
  clients truncates Poisson sampling with probability ``eta = P[Bin(n, p) > s]``.
  Truncation changes the output law by at most ``eta`` in total variation, so each
  level's ``delta_i`` gains ``(1 + e^eps_i) eta``. Pass ``c=None`` for untruncated
  Poisson sampling.

Neighbouring datasets differ by adding or removing one client (one string), the
setting of Lemma 3. Every result is a :class:`PrivacyGuarantee`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from scipy import optimize, stats

from .privacy import ANALYST, CENTRAL, CORMODE_2021, PrivacyGuarantee

__all__ = [
    "PrivacyConditionError", "PrivacyGuarantee", "SampleSizeSolution", "p_theta",
    "lemma1_theta", "additive_tail_bound", "level_epsilon", "truncation_probability",
    "triehhpp_privacy", "flat_privacy", "theta_for_delta", "solve_sample_size",
    "COMPOSITIONS", "BOUNDS",
]

COMPOSITIONS = ("basic", "advanced")
BOUNDS = ("paper", "eq3")
_MAX_THETA = 10_000


class PrivacyConditionError(ValueError):
    """A parameter violates a condition of the theorem being applied; the message
    names the condition."""


@dataclass(frozen=True, slots=True)
class SampleSizeSolution:
    """Result of :func:`solve_sample_size`: the expected sample size ``m`` per level
    (sampling rate ``m / n``), the threshold ``theta`` and the guarantee they give."""

    m: int
    theta: int
    rate: float
    guarantee: PrivacyGuarantee


def p_theta(theta: float) -> float:
    """Per-level failure probability ``exp(-(theta - 1)^2 / (theta + 1))`` (Lemma 1/3)."""
    _check_theta(theta)
    return math.exp(-(theta - 1.0) ** 2 / (theta + 1.0))


def lemma1_theta(delta: float) -> float:
    """Lemma 1's closed form ``theta = 3 + ln(1/delta)`` (then ``p_theta < delta``).

    Raises:
        PrivacyConditionError: ``delta`` not in ``(0, 1)``.
    """
    _check_delta(delta)
    return 3.0 + math.log(1.0 / delta)


def additive_tail_bound(theta: float) -> float:
    """Lemma 1, case ``p <= 1/k``: ``P[X >= theta] <= exp(-theta ln theta + theta - 1)``."""
    _check_theta(theta)
    return math.exp(-theta * math.log(theta) + theta - 1.0)


def level_epsilon(n: int, m: float, theta: float, bound: str = "paper",
                  flat: bool = False) -> float:
    """Per-level epsilon.

    ``bound="paper"``: Lemma 3 eq. (4), ``ln(1 + 10 m theta / (9 n))`` under
    ``m <= n / (10 theta)``; with ``flat=True`` the Remark's ``10 theta m / n`` under
    ``m <= 9 n / (10 theta)``. ``bound="eq3"``: ``-ln(1 - theta m / n)`` under
    ``theta m < n`` (same for both).

    Raises:
        PrivacyConditionError: a parameter is out of range or the condition fails.
    """
    _check_common(n, m, theta)
    if bound not in BOUNDS:
        raise PrivacyConditionError(f"unknown bound {bound!r} (expected one of {BOUNDS})")
    if bound == "eq3":
        if theta * m >= n:
            raise PrivacyConditionError(
                f"equation (3) needs theta * m < n (theta={theta}, m={m}, n={n})")
        return -math.log1p(-theta * m / n)
    if flat:
        if m > 9.0 * n / (10.0 * theta):
            raise PrivacyConditionError(
                f"Remark (flat) condition m <= 9n/(10 theta) fails: m={m} > "
                f"{9.0 * n / (10.0 * theta):.6g}")
        return 10.0 * theta * m / n
    if m > n / (10.0 * theta):
        raise PrivacyConditionError(
            f"Lemma 3 condition m <= n/(10 theta) fails: m={m} > {n / (10.0 * theta):.6g} "
            f"(use bound='eq3' (--bound eq3), the tight ratio of equation (3), which needs only "
            f"theta*m < n)")
    return math.log1p(10.0 * m * theta / (9.0 * n))


def truncation_probability(n: int, m: float, c: float | None) -> float:
    """``P[Bin(n, m/n) > s]`` with ``s = min(n, ceil(m + c sqrt(m)))``; 0 for ``c=None``."""
    if c is None:
        return 0.0
    if not (math.isfinite(c) and c >= 0):
        raise PrivacyConditionError(f"slack constant c must be >= 0, got {c!r}")
    s = min(n, int(math.ceil(m + c * math.sqrt(m))))
    if s >= n:
        return 0.0
    return float(stats.binom.sf(s, n, m / n))


def triehhpp_privacy(n: int, m: float, theta: float, max_length: int,
                     composition: str = "basic", bound: str = "paper",
                     c: float | None = 10.0) -> PrivacyGuarantee:
    """Guarantee of TrieHH++ over ``max_length`` levels (Cormode 2021, Lemma 3).

    Args:
        n: number of clients.
        m: expected sample size per level.
        theta: release threshold (> 1).
        max_length: number of levels ``L``.
        composition: ``"basic"`` or ``"advanced"`` (Dwork-Rothblum-Vadhan with
            ``delta' = L p_theta``; needs ``eps_i < 1`` as the paper states).
        bound: ``"paper"`` (eq. 4) or ``"eq3"`` (tight ratio of eq. 3).
        c: sampling slack (``s = m + c sqrt(m)``) or ``None`` for exact Poisson.

    Raises:
        PrivacyConditionError: a parameter is out of range or a condition fails.
    """
    if not isinstance(max_length, numbers.Integral) or max_length < 1:
        raise PrivacyConditionError(f"max_length L must be a positive integer, got {max_length!r}")
    max_length = int(max_length)
    if composition not in COMPOSITIONS:
        raise PrivacyConditionError(
            f"unknown composition {composition!r} (expected one of {COMPOSITIONS})")
    eps_i = level_epsilon(n, m, theta, bound)
    pt = p_theta(theta)
    eta = truncation_probability(n, m, c)
    delta_i = pt + (1.0 + math.exp(eps_i)) * eta
    L = max_length
    params: dict[str, Any] = {
        "n": n, "m": m, "theta": theta, "max_length": L, "composition": composition,
        "bound": bound, "c": c, "level_epsilon": eps_i, "p_theta": pt,
        "truncation_probability": eta, "sampling_rate": m / n,
    }
    if composition == "basic":
        return _guarantee(L * eps_i, min(1.0, L * delta_i),
                          f"Cormode 2021 Lemma 3 ({_bound_name(bound)}), basic composition",
                          params)
    if eps_i >= 1.0:
        raise PrivacyConditionError(
            f"advanced composition (Lemma 3) needs per-level epsilon < 1, got {eps_i:.6g}")
    delta_prime = L * pt
    if delta_prime >= 1.0:
        raise PrivacyConditionError(
            f"advanced composition needs delta' = L p_theta < 1, got {delta_prime:.6g}")
    eps = _advanced(eps_i, L, delta_prime)
    params["delta_prime"] = delta_prime
    params["paper_literal_epsilon"] = (L * eps_i ** 2
                                       + eps_i * math.sqrt(L * math.log(1.0 / delta_prime)))
    params["basic_epsilon"] = L * eps_i
    return _guarantee(eps, min(1.0, L * delta_i + delta_prime),
                      f"Cormode 2021 Lemma 3 ({_bound_name(bound)}), advanced composition "
                      f"(Dwork-Rothblum-Vadhan 2010)", params)


def flat_privacy(n: int, m: float, theta: float, bound: str = "paper",
                 c: float | None = 10.0) -> PrivacyGuarantee:
    """Guarantee of the flat one-round variant (Remark after Lemma 3): one thresholded
    histogram of whole items.

    Raises:
        PrivacyConditionError: a parameter is out of range or a condition fails.
    """
    eps = level_epsilon(n, m, theta, bound, flat=True)
    pt = p_theta(theta)
    eta = truncation_probability(n, m, c)
    eps_for_trunc = eps if bound == "eq3" else math.log1p(10.0 * theta * m / n)
    delta = pt + (1.0 + math.exp(eps_for_trunc)) * eta
    name = "Remark after Lemma 3" if bound == "paper" else "Remark after Lemma 3 with eq. (3)"
    return _guarantee(eps, min(1.0, delta), f"Cormode 2021 {name} (flat heavy hitters)",
                      {"n": n, "m": m, "theta": theta, "max_length": 1, "flat": True,
                       "bound": bound, "c": c, "p_theta": pt,
                       "truncation_probability": eta, "sampling_rate": m / n})


def theta_for_delta(delta: float, levels: int = 1, factor: float = 1.0) -> int:
    """Smallest integer ``theta >= 2`` with ``factor * levels * p_theta <= delta``.

    Raises:
        PrivacyConditionError: ``delta`` not in ``(0, 1)`` or no ``theta`` up to 10^4.
    """
    _check_delta(delta)
    # (theta-1)^2/(theta+1) is increasing for theta > 1: start near Lemma 1's value
    target = math.log(factor * levels / delta)
    hi = max(2, int(math.ceil(3.0 + max(target, 0.0))) + 1)
    lo = 2
    while lo < hi:  # binary search for the first theta meeting the bound
        mid = (lo + hi) // 2
        if (mid - 1.0) ** 2 / (mid + 1.0) >= target:
            hi = mid
        else:
            lo = mid + 1
    theta = lo
    if theta > _MAX_THETA:
        raise PrivacyConditionError(f"no threshold theta <= {_MAX_THETA} reaches delta={delta}")
    return theta


def solve_sample_size(n: int, epsilon: float, delta: float | None, max_length: int,
                      flat: bool = False, composition: str = "basic",
                      bound: str = "paper", c: float | None = 10.0,
                      theta: int | None = None) -> SampleSizeSolution:
    """Largest integer expected sample size ``m`` (and smallest integer ``theta``) that
    meet a target ``(epsilon, delta)``.

    ``theta`` is the smallest integer whose failure terms fit in ``delta``; ``m`` is
    then solved from the per-level epsilon formula (closed form for basic composition,
    a root find for advanced). If the truncation term pushes ``delta`` over the
    target, ``theta`` is increased. With a fixed ``theta`` only ``m`` is solved;
    ``delta=None`` then accepts whatever delta that ``theta`` gives.

    Raises:
        PrivacyConditionError: targets out of range, a theorem condition fails for
            the solved ``m`` (the message names it), or ``m < 1``.
    """
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
        raise PrivacyConditionError(f"n must be a positive integer, got {n!r}")
    n = int(n)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyConditionError(f"epsilon must be > 0, got {epsilon!r}")
    if theta is None or delta is not None:
        _check_delta(delta)  # type: ignore[arg-type]
    if theta is not None and (not isinstance(theta, int) or theta < 2):
        raise PrivacyConditionError(f"theta must be an integer >= 2, got {theta!r}")
    if not isinstance(max_length, int) or max_length < 1:
        raise PrivacyConditionError(f"max_length L must be a positive integer, got {max_length!r}")
    if composition not in COMPOSITIONS or bound not in BOUNDS:
        raise PrivacyConditionError(f"composition must be in {COMPOSITIONS}, bound in {BOUNDS}")
    levels = 1 if flat else max_length
    adv = composition == "advanced" and not flat
    fixed = theta is not None
    if theta is None:
        theta = theta_for_delta(delta, levels, 2.0 if adv else 1.0)  # type: ignore[arg-type]
    for _ in range(200):
        eps_i = _per_level_target(epsilon, levels, theta, adv, flat, bound)
        m = _m_for_level_epsilon(n, eps_i, theta, bound, flat)
        if m < 1:
            raise PrivacyConditionError(
                f"target epsilon={epsilon} gives an expected sample m < 1 for n={n}, "
                f"theta={theta}")
        if flat:
            g = flat_privacy(n, m, theta, bound, c)
        else:
            g = triehhpp_privacy(n, m, theta, max_length, composition, bound, c)
        if (delta is None or g.delta <= delta) and g.epsilon <= epsilon * (1 + 1e-12):
            return SampleSizeSolution(int(m), int(theta), m / n, g)
        if fixed:
            raise PrivacyConditionError(
                f"theta={theta} gives delta={g.delta:.3g} > target delta={delta:.3g}")
        theta += 1
    raise PrivacyConditionError("no (m, theta) found for the target")  # pragma: no cover


# ---------------------------------------------------------------- helpers


def _advanced(eps_i: float, L: int, delta_prime: float) -> float:
    return eps_i * math.sqrt(2.0 * L * math.log(1.0 / delta_prime)) + L * eps_i * math.expm1(eps_i)


def _per_level_target(epsilon: float, levels: int, theta: int, adv: bool, flat: bool,
                      bound: str) -> float:
    if not adv:
        return epsilon / levels
    delta_prime = levels * p_theta(theta)
    f = lambda e: _advanced(e, levels, delta_prime) - epsilon  # noqa: E731
    if f(1.0 - 1e-12) < 0:  # even eps_i -> 1 stays under target: cap at the condition
        raise PrivacyConditionError(
            "advanced composition needs per-level epsilon < 1; the target epsilon is "
            "large enough that basic composition applies instead")
    return float(optimize.brentq(f, 1e-15, 1.0 - 1e-12, xtol=1e-15, rtol=1e-14))


def _m_for_level_epsilon(n: int, eps_i: float, theta: int, bound: str, flat: bool) -> int:
    if bound == "eq3":
        m = n * (-math.expm1(-eps_i)) / theta
    elif flat:
        m = eps_i * n / (10.0 * theta)
        if m > 9.0 * n / (10.0 * theta):
            raise PrivacyConditionError(
                f"Remark (flat) condition m <= 9n/(10 theta) fails for epsilon={eps_i}: "
                f"the Remark's bound reaches at most epsilon = 9")
    else:
        m = math.expm1(eps_i) * 9.0 * n / (10.0 * theta)
        if m > n / (10.0 * theta) * (1 + 1e-12):
            raise PrivacyConditionError(
                f"Lemma 3 condition m <= n/(10 theta) fails: per-level epsilon {eps_i:.6g} "
                f"exceeds ln(10/9) = {math.log(10 / 9):.6g}, the most Lemma 3's eq. (4) "
                f"allows; lower epsilon, raise L, or use bound='eq3' (--bound eq3: equation (3), valid "
                f"for theta*m < n)")
        m = min(m, n / (10.0 * theta))
    m_int = int(math.floor(m * (1 - 1e-12)))
    if bound == "eq3" and theta * m_int >= n:
        m_int = (n - 1) // theta
    return m_int


def _guarantee(epsilon: float, delta: float, theorem: str,
               params: dict[str, Any]) -> PrivacyGuarantee:
    """TrieHH++'s release is central DP: it protects against the analyst."""
    return PrivacyGuarantee("triehhpp", epsilon, delta, theorem, CENTRAL, ANALYST, params,
                            CORMODE_2021)


def _bound_name(bound: str) -> str:
    return "eq. (4)" if bound == "paper" else "eq. (3)"


def _check_theta(theta: float) -> None:
    if not (isinstance(theta, numbers.Real) and math.isfinite(theta) and theta > 1):
        raise PrivacyConditionError(f"Lemma 1 needs theta > 1, got {theta!r}")


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise PrivacyConditionError(f"delta must be in (0, 1), got {delta!r}")


def _check_common(n: int, m: float, theta: float) -> None:
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
        raise PrivacyConditionError(f"n must be a positive integer, got {n!r}")
    if not (isinstance(m, numbers.Real) and math.isfinite(m) and 0 < m <= n):
        raise PrivacyConditionError(f"expected sample size m must satisfy 0 < m <= n, got {m!r}")
    _check_theta(theta)
