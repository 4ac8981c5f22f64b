"""Privacy audits: statistically sound empirical *lower* bounds on a mechanism's epsilon.

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

The mechanisms audited and their output encodings
-------------------------------------------------
The audit chooses its event among output ids, so an encoding must keep the outputs
that carry the privacy loss apart.

Local oracles (Wang et al., USENIX Security 2017), neighbouring inputs ``a = 0`` and
``b = 1`` (one user's value changes), each report run through the oracle's own
``randomize``:

* **GRR**: the reported item itself. ``P[a | a] / P[a | b] = p/q = e^eps``.
* **OUE**: the two bits of items ``a`` and ``b``, id ``2 bit_a + bit_b``. The bit of
  ``a`` alone gives only ``(1/2)/q = (e^eps + 1)/2``; the pair ``(1, 0)`` has
  probability ``(1/2)(1 - q)`` under ``a`` and ``q/2`` under ``b``: ratio ``e^eps``.
* **OLH**: "the report supports ``a``" and "supports ``b``" (``H(a) = y``), id
  ``2 s_a + s_b``. ``(1, 0)`` has ratio close to ``e^eps`` (hash collisions, of
  probability ``1/g``, mix the events a little).
* **AoN**: the report flag and the two support bits (``reported and h(v) = 0``), id
  ``4 r + 2 s_a + s_b``.

TrieHH (Zhu et al., AISTATS 2020, Theorem 1) at one level: neighbouring populations
``D`` (``n`` users, ``c`` of whom hold word ``w``, the target among them) and
``D' = D`` minus the target. The server samples ``m = floor(gamma sqrt(n))`` users
(``m'`` for ``n - 1``); ``w`` is released iff at least ``theta`` sampled users hold it,
so the number of votes is hypergeometric and the output ("released" or not) has the
exact law ``P_D = P[Hypergeom(n, c, m) >= theta]``. :func:`audit_triehh` computes

* the exact tight epsilon with the claimed ``delta`` (:func:`exact_epsilon`)
  maximised over ``c``, and
* a sampled Clopper-Pearson bound at the worst ``c`` whose release probability is
  in [0.02, 0.98] (rarer events cannot be certified from samples; samples drawn from the same
  hypergeometric laws, which are exactly what one round of the mechanism outputs;
  the attack ``triehh.targeted_sampling`` checks them against the real mechanism).

Every bound must stay below the claimed epsilon: a bound above it is a bug in the
mechanism (or the claim).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import hypergeom

from mechanisms import hashing
from mechanisms.fo import make_oracle
from mechanisms.triehh_privacy import batch_size, theorem1, theorem1_delta

__all__ = ["Sampler", "AuditResult", "clopper_pearson_lower", "clopper_pearson_upper",
           "audit_epsilon", "exact_epsilon", "AUDITABLE", "ORACLE_AUDITS", "oracle_sampler",
           "audit_oracle", "TrieHHAudit", "audit_triehh", "AuditSummary", "audit_mechanism"]


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


AUDITABLE = ("grr", "oue", "olh", "aon", "triehh")
ORACLE_AUDITS = ("grr", "oue", "olh", "aon")


def oracle_sampler(name: str, epsilon: float, value: int, domain_size: int = 2,
                   **params: Any) -> Callable[[int, np.random.Generator], np.ndarray]:
    """Sampler of output ids of oracle ``name`` on input ``value`` (encodings above).

    Raises:
        mechanisms.fo.OracleInputError: unknown oracle or bad parameters.
    """
    oracle = make_oracle(name, epsilon, domain_size, **params)
    kind = name.lower()

    def supports(keys: np.ndarray, target: np.ndarray, item: int, g: int) -> np.ndarray:
        return hashing.hash_to_range(keys, np.full(keys.shape[0], item, dtype=np.int64),
                                     g) == target

    def sample(count: int, rng: np.random.Generator) -> np.ndarray:
        rep = oracle.randomize(np.full(count, value, dtype=np.int64), rng)
        if kind == "grr":
            return np.asarray(rep.values, dtype=np.int64)
        if kind == "oue":
            bits = rep.unpacked()
            return 2 * bits[:, 0].astype(np.int64) + bits[:, 1]
        if kind == "olh":
            y = np.asarray(rep.y, dtype=np.int64)
            return (2 * supports(rep.keys, y, 0, oracle.g).astype(np.int64)
                    + supports(rep.keys, y, 1, oracle.g))
        zero = np.zeros(count, dtype=np.int64)
        r = rep.reported
        sa = r & supports(rep.keys, zero, 0, oracle.B)
        sb = r & supports(rep.keys, zero, 1, oracle.B)
        return 4 * r.astype(np.int64) + 2 * sa.astype(np.int64) + sb
    return sample


def audit_oracle(name: str, epsilon: float = 1.0, samples: int = 1_000_000, seed: int = 0,
                 domain_size: int = 2, confidence: float = 0.95, **params: Any) -> AuditResult:
    """Clopper-Pearson lower bound on the epsilon of one oracle (inputs 0 and 1).

    Raises:
        ValueError: fewer than 4 samples, a confidence outside (0, 1), or bad oracle
            parameters.
    """
    rng = np.random.default_rng(seed)
    return audit_epsilon(oracle_sampler(name, epsilon, 0, domain_size, **params),
                         oracle_sampler(name, epsilon, 1, domain_size, **params),
                         claimed_epsilon=epsilon, samples=samples, rng=rng,
                         confidence=confidence)


@dataclass(frozen=True)
class TrieHHAudit:
    """Result of :func:`audit_triehh`.

    Attributes:
        claimed_epsilon, delta: Theorem 1 for one level.
        exact_epsilon: tight epsilon of the one-level output at the worst ``c``.
        worst_holders: that ``c``.
        sampled: the Clopper-Pearson audit at ``sampled_holders``, the worst ``c``
            whose release probability lies in [0.02, 0.98] (exact value there:
            ``sampled_exact_epsilon``).
        scan: (c, exact epsilon) for every ``c`` scanned.
    """

    n: int
    theta: int
    gamma: float
    m: int
    claimed_epsilon: float
    delta: float
    exact_epsilon: float
    worst_holders: int
    sampled: AuditResult
    sampled_holders: int
    sampled_exact_epsilon: float
    scan: list[tuple[int, float]]

    def as_dict(self) -> dict:
        d = asdict(self)
        d["sampled"] = self.sampled.as_dict()
        d["consistent"] = (self.exact_epsilon <= self.claimed_epsilon + 1e-12
                           and self.sampled.consistent)
        return d


def _release_law(n: int, holders: int, m: int, theta: int) -> float:
    return float(hypergeom.sf(theta - 1, n, holders, m))


def audit_triehh(n: int = 10_000, theta: int = 10, gamma: float = 2.0, samples: int = 1_000_000,
                 seed: int = 0, confidence: float = 0.95,
                 holders: range | None = None) -> TrieHHAudit:
    """Exact and sampled lower bounds on TrieHH's per-level epsilon (Theorem 1's delta).

    Raises:
        mechanisms.triehh_privacy.TrieHHPrivacyError: parameters outside Theorem 1.
        ValueError: bad sample count or confidence.
    """
    claim = theorem1(theta, gamma, n, 1)
    delta = theorem1_delta(theta)
    m, m_wo = batch_size(gamma, n), batch_size(gamma, n - 1)
    scan = []
    for c in (holders if holders is not None else range(theta, min(n, 40 * n // m), 5)):
        pa, pb = _release_law(n, c, m, theta), _release_law(n - 1, c - 1, m_wo, theta)
        scan.append((c, exact_epsilon(np.array([pa, 1 - pa]), np.array([pb, 1 - pb]), delta)))
    worst_c, worst = max(scan, key=lambda r: r[1])
    # sampling can only certify events of non-negligible probability: audit the worst c
    # whose release probability is in [0.02, 0.98]
    usable = [r for r in scan if 0.02 <= _release_law(n, r[0], m, theta) <= 0.98] or scan
    sample_c, sample_exact = max(usable, key=lambda r: r[1])

    def sampler(pop: int, hold: int, size: int) -> Callable[[int, np.random.Generator],
                                                            np.ndarray]:
        def draw(count: int, rng: np.random.Generator) -> np.ndarray:
            votes = rng.hypergeometric(hold, pop - hold, size, count)
            return (votes >= theta).astype(np.int64)
        return draw

    sampled = audit_epsilon(sampler(n, sample_c, m), sampler(n - 1, sample_c - 1, m_wo),
                            claimed_epsilon=claim.epsilon, samples=samples,
                            rng=np.random.default_rng(seed), delta=delta,
                            confidence=confidence)
    return TrieHHAudit(n, theta, gamma, m, claim.epsilon, delta, worst, worst_c, sampled,
                       sample_c, sample_exact, scan)


class AuditSummary(NamedTuple):
    """What ``fedhh audit`` reports: the audit's fields, and the bound against the claim."""

    details: dict[str, Any]
    epsilon_lower_bound: float
    claimed_epsilon: float
    consistent: bool


def audit_mechanism(mechanism: str, *, epsilon: float = 1.0, samples: int = 1_000_000,
                    seed: int = 0, domain_size: int = 2, confidence: float = 0.95,
                    theta: int = 10, gamma: float = 2.0, n: int = 10_000) -> AuditSummary:
    """Audit one of :data:`AUDITABLE`: an oracle at ``epsilon`` over ``domain_size``
    items, or TrieHH at one level (``n``, ``theta``, ``gamma``; the scan over holders
    is left out of the details).

    Raises:
        ValueError: bad samples, confidence or oracle parameters.
        mechanisms.triehh_privacy.TrieHHPrivacyError: TrieHH parameters outside Theorem 1.
    """
    if mechanism == "triehh":
        t = audit_triehh(n, theta, gamma, samples, seed, confidence)
        out = t.as_dict()
        out.pop("scan")
        return AuditSummary(out, t.sampled.epsilon_lower_bound, t.claimed_epsilon,
                            out["consistent"])
    r = audit_oracle(mechanism, epsilon, samples, seed, domain_size, confidence)
    return AuditSummary(r.as_dict(), r.epsilon_lower_bound, r.claimed_epsilon, r.consistent)
