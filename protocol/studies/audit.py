"""Empirical privacy audits: statistically sound *lower* bounds on epsilon.

Theory of operation
-------------------
A mechanism M is (epsilon, delta)-DP if for neighbouring inputs a, b and every
output event S: P[M(a) in S] <= e^epsilon P[M(b) in S] + delta. Any event S whose
probabilities we can bound from samples therefore certifies

    epsilon >= ln((P_a(S) - delta) / P_b(S)).

The audit (in the style of Jagielski, Ullman and Oprea, NeurIPS 2020, and Nasr et
al., USENIX Security 2023) runs M many times on a and on b, and

1. uses a *selection* half of the samples to choose the event S: the set of the
   r outputs with the largest empirical likelihood ratio, for the r that maximises
   the selection-half estimate;
2. uses the disjoint *estimation* half to bound P_a(S) from below and P_b(S) from
   above with exact Clopper-Pearson intervals;
3. does the same with a and b swapped, and reports the larger bound.

The four one-sided intervals each have level alpha/4, so with probability at least
1 - alpha the reported bound is below the mechanism's true epsilon (union bound).
Selecting S on data disjoint from the data that certifies it keeps this valid. A
correct mechanism must never produce a bound above its claimed epsilon; a bound close
to the claim shows the audit has power.

When the output distributions are known exactly (small populations), use
:func:`exact_epsilon`, which returns the tight value max_S ln((P_a(S)-delta)/P_b(S)).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy.stats import beta as beta_dist

Sampler = Callable[[int, np.random.Generator], np.ndarray]
"""``sampler(count, rng)`` returns ``count`` outputs of the mechanism on one fixed
input, each encoded as a non-negative integer (an output id)."""


@dataclass(frozen=True)
class AuditResult:
    """An empirical lower bound on epsilon and how it was obtained."""

    epsilon_lower_bound: float
    claimed_epsilon: float
    delta: float
    confidence: float
    samples_per_input: int
    event_size: int
    p_a_lower: float
    p_b_upper: float
    direction: str

    @property
    def consistent(self) -> bool:
        """True when the bound does not contradict the claim (it must not)."""
        return self.epsilon_lower_bound <= self.claimed_epsilon + 1e-12

    def as_dict(self) -> dict:
        d = asdict(self)
        d["consistent"] = self.consistent
        return d


def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """One-sided lower confidence bound of level 1 - alpha for a binomial rate."""
    return 0.0 if k == 0 else float(beta_dist.ppf(alpha, k, n - k + 1))


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided upper confidence bound of level 1 - alpha for a binomial rate."""
    return 1.0 if k == n else float(beta_dist.ppf(1 - alpha, k + 1, n - k))


def _choose_event(sel_a: np.ndarray, sel_b: np.ndarray, delta: float) -> np.ndarray:
    """Output ids forming the event with the best selection-half bound."""
    ids = np.union1d(sel_a, sel_b)
    ca = np.searchsorted(ids, sel_a)
    cb = np.searchsorted(ids, sel_b)
    pa = np.bincount(ca, minlength=ids.size) / max(sel_a.size, 1)
    pb = np.bincount(cb, minlength=ids.size) / max(sel_b.size, 1)
    # order by likelihood ratio, add-half smoothing so unseen-in-b outputs rank high
    ratio = (pa + 0.5 / max(sel_a.size, 1)) / (pb + 0.5 / max(sel_b.size, 1))
    order = np.argsort(-ratio, kind="stable")
    cpa, cpb = np.cumsum(pa[order]), np.cumsum(pb[order])
    floor_b = 1.0 / max(sel_b.size, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.log(np.maximum(cpa - delta, 1e-300)) - np.log(np.maximum(cpb, floor_b))
    r = int(np.argmax(score)) + 1
    return ids[order[:r]]


def _one_direction(out_a: np.ndarray, out_b: np.ndarray, delta: float,
                   alpha: float) -> tuple[float, int, float, float]:
    half_a, half_b = out_a.size // 2, out_b.size // 2
    event = _choose_event(out_a[:half_a], out_b[:half_b], delta)
    est_a, est_b = out_a[half_a:], out_b[half_b:]
    ka = int(np.isin(est_a, event).sum())
    kb = int(np.isin(est_b, event).sum())
    pa_lo = clopper_pearson_lower(ka, est_a.size, alpha / 4)
    pb_hi = clopper_pearson_upper(kb, est_b.size, alpha / 4)
    if pa_lo - delta <= 0:
        return 0.0, event.size, pa_lo, pb_hi
    return max(0.0, math.log((pa_lo - delta) / pb_hi)), event.size, pa_lo, pb_hi


def audit_epsilon(sample_a: Sampler, sample_b: Sampler, *, claimed_epsilon: float,
                  samples: int, rng: np.random.Generator, delta: float = 0.0,
                  confidence: float = 0.95) -> AuditResult:
    """Empirical lower bound on epsilon from two neighbouring inputs.

    Args:
        sample_a: draws outputs of the mechanism on input a.
        sample_b: draws outputs on the neighbouring input b.
        claimed_epsilon: the epsilon the mechanism claims (reported alongside).
        samples: runs per input (half select the event, half certify it).
        rng: randomness for the runs.
        delta: the mechanism's claimed delta (subtracted as the definition allows).
        confidence: 1 - alpha, the probability that the bound is valid.

    Raises:
        ValueError: for fewer than 4 samples or a confidence outside (0, 1).
    """
    if samples < 4:
        raise ValueError("samples must be at least 4")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    alpha = 1 - confidence
    out_a = np.asarray(sample_a(samples, rng)).ravel()
    out_b = np.asarray(sample_b(samples, rng)).ravel()
    if out_a.size != samples or out_b.size != samples:
        raise ValueError("a sampler returned the wrong number of outputs")
    # each direction uses alpha/2 split over its two intervals (alpha/4 each)
    ab = _one_direction(out_a, out_b, delta, alpha)
    ba = _one_direction(out_b, out_a, delta, alpha)
    best, direction = (ab, "a>b") if ab[0] >= ba[0] else (ba, "b>a")
    return AuditResult(best[0], claimed_epsilon, delta, confidence, samples, best[1],
                       best[2], best[3], direction)


def exact_epsilon(p_a: np.ndarray, p_b: np.ndarray, delta: float = 0.0) -> float:
    """Tight epsilon for two known output distributions over the same outputs.

    For delta = 0 this is the largest log ratio over outputs; for delta > 0 it is
    the smallest epsilon with sum_o max(0, p_a(o) - e^epsilon p_b(o)) <= delta in
    both directions (the hockey-stick divergence), found by bisection.

    Raises:
        ValueError: if the inputs are not probability vectors of one shape.
    """
    p_a, p_b = np.asarray(p_a, float), np.asarray(p_b, float)
    if p_a.shape != p_b.shape or np.any(p_a < 0) or np.any(p_b < 0):
        raise ValueError("p_a and p_b must be non-negative arrays of one shape")
    if not (np.isclose(p_a.sum(), 1) and np.isclose(p_b.sum(), 1)):
        raise ValueError("p_a and p_b must each sum to 1")

    def hockey(eps: float) -> float:
        return max(np.maximum(0, p_a - math.exp(eps) * p_b).sum(),
                   np.maximum(0, p_b - math.exp(eps) * p_a).sum())

    if delta == 0:
        with np.errstate(divide="ignore"):
            r = np.abs(np.log(p_a[(p_a > 0) | (p_b > 0)]) - np.log(p_b[(p_a > 0) | (p_b > 0)]))
        return float(r.max()) if r.size else 0.0
    if hockey(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while hockey(hi) > delta:
        hi *= 2
        if hi > 1e4:
            return math.inf
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi
