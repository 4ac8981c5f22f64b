"""Poisson sampling of clients, done by contacting only a few more than ``m`` of them.

Source: G. Cormode, "Federated heavy hitters revisited" (2021), section 2.1.

Why Poisson sampling
--------------------
TrieHH++ releases the sampled count of every trie node that reaches the threshold
``theta``. If exactly ``m`` clients were sampled, the analyst could add up the released
counts, subtract them from ``m`` and learn how many votes were suppressed, which breaks
differential privacy (Cormode's example forces ``delta >= m / n``). With Poisson
sampling every client takes part independently with probability ``p = m / n``; the
number of participants ``K ~ Bin(n, p)`` is itself random and hidden.

Cormode's efficient scheme (``scheme="cormode"``)
------------------------------------------------
Contact ``s = m + c * sqrt(m)`` clients chosen uniformly without replacement (``c``
about 10); each takes part with probability ``m / s`` and otherwise abstains in a way
the aggregator cannot tell from a vote. Each client is then included with marginal
probability ``(s / n) (m / s) = m / n``, but the participant count is

    K_cormode ~ Bin(s, m / s),       Var = m (1 - m / s),

not ``Bin(n, m / n)`` (``Var = m (1 - m / n)``). Given its size, the participant set is
a uniformly random subset in both schemes, so the total-variation distance between the
two sampling schemes equals the distance between the two count laws,
``TV(Bin(s, m/s), Bin(n, m/n))`` (:meth:`SamplingPlan.cormode_tv_distance`). With
``c = 10`` the ratio ``m / s`` is close to 1, the Cormode count is far more
concentrated than a binomial over the population, and the distance is large (about
0.53 for ``n = 10^6, m = 12,000``): the scheme has the right marginals but is not
Poisson sampling, and the privacy proof (which uses independence) does not cover it
directly. No scheme in which the ``s`` contacted clients decide *independently* can
fix this: a sum of ``s`` independent Bernoulli variables with mean ``m`` has variance
at most ``m (1 - m / s) < m (1 - m / n)``.

The exact scheme used here (``scheme="exact"``, the default)
------------------------------------------------------------
Draw ``K ~ Bin(n, m / n)``, contact ``s`` clients uniformly without replacement, and
let a uniformly random ``min(K, s)`` of them take part; the others abstain. Conditioned
on ``K <= s`` the participant set is *exactly* a Poisson sample (each client included
independently with probability ``m / n``); otherwise it is truncated to ``s``. The
participant count therefore has the truncated law

    P[K' = k] = P[Bin(n, p) = k]   for k < s,      P[K' = s] = P[Bin(n, p) >= s],

and the total-variation distance from true Poisson sampling is at most
``eta = P[Bin(n, p) > s]`` (:attr:`SamplingPlan.truncation_probability`, computed with
scipy). A Chernoff bound gives ``eta <= exp(-c^2 / 3)``; the exact value is far
smaller (about 1e-23 for ``n = 10^6, m = 12,000, c = 10``). The privacy calculators add
``(1 + e^eps_i) * eta`` to each level's ``delta`` to cover the truncation.

Deployment requirement: ``K`` and the choice of which contacted clients take part must
be hidden from the aggregator (the client alone knows whether it abstained). They can be
drawn by a party the aggregator does not control (the shuffler, a trusted execution
environment) or derived from a seed shared by the contacted clients and unknown to the
server. In this simulation the ``rng`` argument plays that party.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from protocol.core.contract import ABSTAIN

__all__ = [
    "SamplingError", "SamplingPlan", "SampledRound", "plan_poisson_sampling",
    "sample_round", "participant_count_pmf", "sample_participant_counts",
    "votes_with_abstentions",
]

SCHEMES = ("exact", "cormode")


class SamplingError(ValueError):
    """Sampling parameters that do not describe a valid plan."""


@dataclass(frozen=True, slots=True)
class SamplingPlan:
    """How many clients to contact for an expected sample of ``m`` out of ``n``.

    Attributes:
        population: ``n``, the number of clients.
        expected: ``m``, the expected number of participants (Poisson rate ``m / n``).
        c: the slack constant in ``s = m + c * sqrt(m)``.
        contacted: ``s = min(n, ceil(m + c * sqrt(m)))``.
        scheme: ``"exact"`` (Poisson up to truncation) or ``"cormode"`` (each
            contacted client takes part with probability ``m / s``).
    """

    population: int
    expected: float
    c: float
    contacted: int
    scheme: str = "exact"

    @property
    def rate(self) -> float:
        """The Poisson inclusion probability ``p = m / n``."""
        return self.expected / self.population

    @property
    def truncation_probability(self) -> float:
        """``P[Bin(n, m/n) > s]``: the chance that more than ``s`` clients would have
        been needed (0 when every client is contacted)."""
        if self.contacted >= self.population:
            return 0.0
        return float(stats.binom.sf(self.contacted, self.population, self.rate))

    @property
    def chernoff_truncation_bound(self) -> float:
        """Cormode's bound ``exp(-c^2 / 3)`` on the truncation probability."""
        return math.exp(-self.c ** 2 / 3.0)

    def cormode_tv_distance(self) -> float:
        """Total-variation distance between Cormode's scheme (count ``Bin(s, m/s)``)
        and true Poisson sampling (count ``Bin(n, m/n)``).

        Both schemes pick a uniformly random participant set given its size, so this
        is also the distance between the two laws of the participant *set*.
        """
        n, s = self.population, self.contacted
        p = self.rate
        hi = int(min(n, self.expected + 60 * math.sqrt(self.expected) + 60))
        k = np.arange(0, hi + 1)
        a = stats.binom.pmf(k, n, p)
        b = stats.binom.pmf(k, s, self.expected / s)
        tail = float(stats.binom.sf(hi, n, p))  # Bin(s, .) has no mass above s <= hi
        return 0.5 * float(np.abs(a - b).sum() + tail)

    def exact_tv_distance(self) -> float:
        """Total-variation distance between the exact scheme and Poisson sampling:
        ``P[Bin(n, p) > s]`` (the mass moved onto ``s`` by truncation)."""
        return self.truncation_probability


@dataclass(frozen=True, slots=True)
class SampledRound:
    """One round's sample.

    Attributes:
        contacted: indices (into the population) of the ``s`` contacted clients.
        participates: boolean mask over ``contacted``; ``False`` means the client
            abstains (indistinguishably from a vote).
        needed: for the exact scheme, the binomial draw ``K`` before truncation
            (``K > s`` means the round was truncated); for Cormode's scheme the
            number of participants.
    """

    contacted: np.ndarray
    participates: np.ndarray
    needed: int

    @property
    def participants(self) -> np.ndarray:
        """Population indices of the clients that take part."""
        return self.contacted[self.participates]

    @property
    def truncated(self) -> bool:
        return self.needed > self.contacted.size


def plan_poisson_sampling(population: int, expected: float, c: float = 10.0,
                          scheme: str = "exact") -> SamplingPlan:
    """Plan a round that samples each of ``population`` clients with rate
    ``expected / population`` by contacting ``s = m + c sqrt(m)`` of them.

    Args:
        population: ``n >= 1``.
        expected: ``m`` with ``0 < m <= n``.
        c: slack constant (Cormode suggests 10), ``c >= 0``.
        scheme: ``"exact"`` or ``"cormode"``.

    Raises:
        SamplingError: ``n < 1``, ``m`` outside ``(0, n]``, ``c < 0`` or an unknown
            scheme.
    """
    if not isinstance(population, (int, np.integer)) or population < 1:
        raise SamplingError(f"population must be a positive integer, got {population!r}")
    if not (math.isfinite(expected) and 0 < expected <= population):
        raise SamplingError(f"expected sample size m must satisfy 0 < m <= n, got {expected!r}")
    if not (math.isfinite(c) and c >= 0):
        raise SamplingError(f"slack constant c must be >= 0, got {c!r}")
    if scheme not in SCHEMES:
        raise SamplingError(f"unknown sampling scheme {scheme!r} (expected {SCHEMES})")
    s = min(int(population), int(math.ceil(expected + c * math.sqrt(expected))))
    return SamplingPlan(int(population), float(expected), float(c), max(s, 1), scheme)


def sample_round(plan: SamplingPlan, rng: np.random.Generator) -> SampledRound:
    """Draw the contacted clients and which of them take part.

    Exact scheme: ``K ~ Bin(n, m/n)``, a uniform ``s``-subset is contacted and a uniform
    ``min(K, s)`` of those take part. Cormode's scheme: each contacted client takes
    part independently with probability ``m / s``.
    """
    n, s = plan.population, plan.contacted
    # Generator.choice without replacement returns the sample in random order, so
    # any fixed-size prefix of it is itself a uniformly random subset.
    contacted = rng.choice(n, size=s, replace=False, shuffle=True).astype(np.int64)
    if plan.scheme == "exact":
        needed = int(rng.binomial(n, plan.rate))
        participates = np.zeros(s, dtype=bool)
        participates[:min(needed, s)] = True
    else:
        participates = rng.random(s) < plan.expected / s
        needed = int(participates.sum())
    return SampledRound(contacted, participates, needed)


def participant_count_pmf(plan: SamplingPlan, k: np.ndarray | int) -> np.ndarray:
    """Exact law of the number of participants under ``plan``.

    Exact scheme: ``Bin(n, m/n)`` truncated at ``s`` (all mass above ``s`` sits on
    ``s``). Cormode's scheme: ``Bin(s, m/s)``.
    """
    k = np.asarray(k)
    n, s = plan.population, plan.contacted
    if plan.scheme == "cormode":
        return stats.binom.pmf(k, s, plan.expected / s)
    out = np.where(k < s, stats.binom.pmf(k, n, plan.rate), 0.0)
    return np.where(k == s, stats.binom.sf(s - 1, n, plan.rate), out)


def sample_participant_counts(plan: SamplingPlan, rng: np.random.Generator,
                              size: int) -> np.ndarray:
    """Vectorised draw of ``size`` participant counts (what :func:`sample_round`
    yields as ``participates.sum()``), for fast statistical studies."""
    if plan.scheme == "cormode":
        return rng.binomial(plan.contacted, plan.expected / plan.contacted, size=size)
    return np.minimum(rng.binomial(plan.population, plan.rate, size=size), plan.contacted)


def votes_with_abstentions(choice: np.ndarray, participates: np.ndarray) -> np.ndarray:
    """One vote per contacted client: its choice if it takes part, else ``ABSTAIN``.

    Raises:
        SamplingError: the arrays do not have the same shape.
    """
    choice = np.asarray(choice, dtype=np.int64)
    participates = np.asarray(participates, dtype=bool)
    if choice.shape != participates.shape:
        raise SamplingError("choice and participates must have the same shape")
    return np.where(participates, choice, ABSTAIN).astype(np.int64)
