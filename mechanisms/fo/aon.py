"""All-or-Nothing (AoN): a frequency oracle without shared randomness.

Seed paper 001 ("A distributed algorithm for differentially private heavy hitters"),
Algorithms 1 and 2. A user holding ``v`` draws a fresh hash function ``h`` onto ``[B]``
(its key is the report), and

* if ``h(v) = 0`` (the paper's bucket "1") it reports ``h``;
* otherwise it reports ``h`` with probability ``r = e^-eps`` and nothing (bottom) else.

The server counts ``theta(v)`` = number of reported functions with ``h(v) = 0``.

Unbiased estimator for an integer ``B`` (derived here; see docs/ldp.md). With a
pairwise-independent family, ``pi = P[h(v) = 0]`` (``1/B`` up to 2^-32, exactly
``c_0 / 2^32`` for :mod:`mechanisms.hashing`):

    p* = P[counted | v_i = v]  = pi                       (h(v)=0 forces a report)
    q* = P[counted | v_i != v] = P[h(v)=0, h(v_i)=0] + r P[h(v)=0, h(v_i)!=0]
                              = pi^2 + r pi (1 - pi)       (~ 1/B^2 + e^-eps (B-1)/B^2)
    f_hat(v) = (theta(v)/n - q*) / (p* - q*)

where ``n`` is the number of *users*, bottoms included: every user contributes one
Bernoulli(p* or q*) indicator, and a user who sent bottom contributes a 0, not nothing.
(Dividing by the number of non-bottom reports instead would give a ratio estimator
whose expectation is not ``f``.) For the non-integer ``B = e^(eps/2) + 1`` this reduces
to the paper's ``(theta/n - 1/(e^(eps/2)(1+e^(eps/2)))) e^(eps/2)(1+e^(eps/2))/(e^(eps/2)-1)``;
for the integer ``B = ceil(e^(eps/2) + 1)`` of the paper's Algorithm 1 the paper's
formula is biased, ours is not.

Privacy: for a fixed key, ``P[report h | v] = P[h] * (1 if h(v) = 0 else r)``, a ratio of
at most ``1/r = e^eps``; ``P[bottom | v] = (1 - pi)(1 - r)`` is the same for every ``v``
(single-point uniformity of the family). A bottom must carry *no* key: conditioned on a
bottom the key satisfies ``h(v) != 0``, which would leak. ``r`` is rounded *up* to a
multiple of 2^-32. ``B`` is a free parameter: the default minimises the variance only
approximately, and a larger ``B`` lowers ``P[report] = pi + (1-pi) r`` (the expected
upload when a bottom costs nothing) at the price of variance; see docs/ldp.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .. import hashing
from .base import (FrequencyOracle, OracleInputError, ReportError, coin, coin_probability,
                   coin_threshold, split_payloads)

__all__ = ["AoN", "AoNReports"]


@dataclass(frozen=True, slots=True)
class AoNReports:
    """``keys``: ``(n, 3)`` uint64 (all-zero rows for bottom); ``reported``: ``(n,)`` bool."""

    keys: np.ndarray
    reported: np.ndarray

    def __post_init__(self) -> None:
        k = np.asarray(self.keys)
        r = np.asarray(self.reported)
        if k.ndim != 2 or k.shape[1] != hashing.KEY_WORDS or k.dtype != np.uint64:
            raise ReportError(f"AoN keys must be (n, 3) uint64, got {k.shape} {k.dtype}")
        if r.ndim != 1 or r.dtype != np.bool_ or r.shape[0] != k.shape[0]:
            raise ReportError("AoN reported flags must be a bool array, one per key")
        object.__setattr__(self, "keys", k)
        object.__setattr__(self, "reported", r)

    @property
    def n(self) -> int:
        """Number of users, bottoms included."""
        return int(self.reported.shape[0])


def default_buckets(epsilon: float) -> int:
    """The paper's ``B = ceil(e^(eps/2) + 1)``."""
    return int(math.ceil(math.exp(epsilon / 2.0) + 1.0))


@dataclass(frozen=True)
class AoN(FrequencyOracle):
    """All-or-Nothing oracle; ``B = 0`` selects the paper's ``ceil(e^(eps/2) + 1)``."""

    epsilon: float
    domain_size: int
    dummy: bool = False
    B: int = 0
    chunk_elements: int = hashing.DEFAULT_CHUNK_ELEMENTS

    name: ClassVar[str] = "aon"
    source: ClassVar[str] = ("All-or-Nothing ('A Distributed Algorithm For Differentially Private "
                             "Heavy Hitters', anonymous manuscript), Algorithm 1 and Lemma 2; "
                             "estimator re-derived for integer B (docs/ldp.md)")

    def __post_init__(self) -> None:
        self._validate_common()
        if self.B == 0:
            object.__setattr__(self, "B", default_buckets(min(self.epsilon, 40.0)))
        if not 2 <= int(self.B) <= (1 << 31):
            raise OracleInputError(f"B must be in [2, 2^31], got {self.B}")
        if self.chunk_elements < 1:
            raise OracleInputError("chunk_elements must be >= 1")

    @property
    def report_threshold(self) -> int:
        """Threshold of 'report anyway' when ``h(v) != 0`` (``e^-eps``, rounded up)."""
        return coin_threshold(math.exp(-self.epsilon), round_up=True)

    @property
    def r(self) -> float:
        """Implemented probability of reporting when ``h(v) != 0``."""
        return coin_probability(self.report_threshold)

    @property
    def pi(self) -> float:
        """Exact ``P[h(v) = 0]`` for the hash family."""
        return hashing.bucket_size(0, self.B) / float(1 << 32)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        pi, r = self.pi, self.r
        return pi, pi * pi + r * pi * (1.0 - pi)

    def respond(self, values: Any, keys: np.ndarray, rng: np.random.Generator) -> AoNReports:
        """Algorithm 1 with given keys (the step after drawing the keys; for tests).

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        hit = hashing.hash_to_range(keys, v, self.B) == 0
        reported = hit | coin(rng, self.report_threshold, v.shape[0])
        out = np.where(reported[:, None], keys, np.uint64(0))
        return AoNReports(out, reported)

    def randomize(self, values: Any, rng: np.random.Generator) -> AoNReports:
        """See :meth:`FrequencyOracle.randomize`.

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        return self.respond(v, hashing.draw_keys(rng, v.shape[0]), rng)

    def support_counts(self, reports: AoNReports, candidates: Any = None) -> np.ndarray:
        """``theta(v)`` for every candidate (Algorithm 2, vectorised over reports).

        Raises:
            ReportError: on reports of the wrong type.
            OracleInputError: on bad candidates.
        """
        if not isinstance(reports, AoNReports):
            raise ReportError(f"expected AoNReports, got {type(reports).__name__}")
        c = self.candidates_or_domain(candidates)
        keys = reports.keys[reports.reported]
        return hashing.count_matches(keys, np.zeros(keys.shape[0], dtype=np.int64), self.B, c,
                                     self.chunk_elements)

    def lemma4_bound(self, n: int, delta: float) -> float:
        """Hoeffding bound (the paper's Lemma 4 with our exact constants): with probability
        at least ``1 - delta``, ``max_v |f_hat(v) - f(v)| <= sqrt(ln(2d/delta)/(2n)) / (p*-q*)``
        over the ``d`` domain items.

        Raises:
            OracleInputError: if ``n < 1`` or ``delta`` is not in ``(0, 1)``.
        """
        if n < 1 or not 0 < delta < 1:
            raise OracleInputError("need n >= 1 and 0 < delta < 1")
        p, q = self.support_probabilities
        return math.sqrt(math.log(2 * self.n_categories / delta) / (2 * n)) / (p - q)

    # -- contributions (see FrequencyOracle) ------------------------------------------
    def _support_vectors(self, reports: AoNReports) -> np.ndarray:
        """``s[v] = [h(v) = 0]`` over the domain items (the zero vector for a bottom)."""
        if not isinstance(reports, AoNReports):
            raise ReportError("expected AoNReports")
        domain = np.arange(int(self.domain_size), dtype=np.int64)
        hit = hashing.hash_outer(reports.keys, domain, self.B) == 0
        return (hit & reports.reported[:, None]).astype(np.uint64)

    @property
    def report_size(self) -> int:
        """A flag byte (1 = function reported, 0 = bottom) and the three key words
        (all zero for a bottom): 25 bytes."""
        return 1 + 8 * hashing.KEY_WORDS

    def encode_reports(self, reports: AoNReports) -> tuple[bytes, ...]:
        """See :meth:`FrequencyOracle.encode_reports` (bottoms included).

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, AoNReports):
            raise ReportError("expected AoNReports")
        size = self.report_size
        rows = np.empty((reports.n, size), dtype=np.uint8)
        rows[:, 0] = reports.reported
        keys = np.where(reports.reported[:, None], reports.keys, np.uint64(0))
        rows[:, 1:] = keys.astype(">u8").view(np.uint8).reshape(reports.n, 24)
        return split_payloads(rows.tobytes(), size)

    def _decode_rows(self, raw: np.ndarray) -> AoNReports:
        n = raw.shape[0]
        flag = raw[:, 0]
        if n and int(flag.max()) > 1:
            raise ReportError("AoN flag must be 0 (bottom) or 1")
        reported = flag == 1
        keys = raw[:, 1:].copy().view(">u8").reshape(n, 3).astype(np.uint64)
        if np.any(keys[~reported]):
            raise ReportError("an AoN bottom must not carry a key")
        return AoNReports(keys, reported)

    def _effective_epsilon(self) -> float:
        return -math.log(self.r)
