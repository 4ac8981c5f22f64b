"""Optimised local hashing (OLH).

Wang, Blocki, Li, Jha, USENIX Security 2017, section 4.4. Each user draws a fresh hash
function ``H`` from a pairwise-independent family onto ``[g]`` (its key travels in the
report, see :mod:`mechanisms.hashing`), hashes its value ``x = H(v)`` and applies
``g``-ary randomised response to ``x``:

    P[y = x] = p = e^eps / (e^eps + g - 1),   P[y = x'] = (1 - p)/(g - 1)   (x' != x)

The report ``(H, y)`` supports every item ``w`` with ``H(w) = y``. With ``c_y`` the
exact bucket sizes of the family and ``s2 = sum_y c_y^2 / 2^64`` its collision
probability (``1/g`` up to 2^-32):

    p* = p,     q* = p s2 + (1 - p)/(g - 1) (1 - s2)     (= 1/g when s2 = 1/g)

so that ``Var[f_hat] = q*(1-q*)/(n (p - q*)^2)`` at ``f = 0``; with ``g = e^eps + 1``
this is Wang et al.'s ``4 e^eps / (n (e^eps - 1)^2)``. The default ``g`` is
``round(e^eps) + 1`` (at least 2).

Privacy: for every fixed key the output distribution over ``y`` is ``g``-ary randomised
response with ratio ``p / ((1-p)/(g-1)) = e^eps``, and the key is independent of ``v``,
so the report is eps-LDP. ``p`` is rounded *down* to a multiple of 2^-32.

Server cost: ``n x |candidates|`` hash evaluations, vectorised in bounded blocks by
:func:`mechanisms.hashing.count_matches` (one multiply, add and compare per pair).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .. import hashing
from .base import (FrequencyOracle, OracleInputError, ReportError, check_int_array, coin,
                   coin_probability, coin_threshold, split_payloads)

__all__ = ["OLH", "OLHReports"]


@dataclass(frozen=True, slots=True)
class OLHReports:
    """``keys``: ``(n, 3)`` uint64 hash keys; ``y``: ``(n,)`` perturbed hash values."""

    keys: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        k = np.asarray(self.keys)
        if k.ndim != 2 or k.shape[1] != hashing.KEY_WORDS or k.dtype != np.uint64:
            raise ReportError(f"OLH keys must be (n, 3) uint64, got {k.shape} {k.dtype}")
        y = check_int_array("OLH values", self.y)
        if y.shape[0] != k.shape[0]:
            raise ReportError("OLH reports need one key per value")
        object.__setattr__(self, "keys", k)
        object.__setattr__(self, "y", y)

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


@dataclass(frozen=True)
class OLH(FrequencyOracle):
    """Optimised local hashing; ``g = 0`` selects the default ``round(e^eps) + 1``."""

    epsilon: float
    domain_size: int
    dummy: bool = False
    g: int = 0
    chunk_elements: int = hashing.DEFAULT_CHUNK_ELEMENTS

    name: ClassVar[str] = "olh"
    source: ClassVar[str] = "Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 4.4 (OLH)"

    def __post_init__(self) -> None:
        self._validate_common()
        if self.g == 0:
            object.__setattr__(self, "g", max(2, int(round(math.exp(min(self.epsilon, 21.0)))) + 1))
        if not 2 <= int(self.g) <= (1 << 31):
            raise OracleInputError(f"hash range g must be in [2, 2^31], got {self.g}")
        if self.chunk_elements < 1:
            raise OracleInputError("chunk_elements must be >= 1")

    @property
    def keep_threshold(self) -> int:
        """Threshold of 'report the true hash value' (rounded down)."""
        return coin_threshold(1.0 / (1.0 + (self.g - 1) * math.exp(-self.epsilon)),
                              round_up=False)

    @property
    def p_keep(self) -> float:
        return coin_probability(self.keep_threshold)

    @property
    def q_other(self) -> float:
        """Probability of reporting one particular wrong hash value."""
        return (1.0 - self.p_keep) / (self.g - 1)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        s2 = hashing.collision_probability(self.g)
        return self.p_keep, self.p_keep * s2 + self.q_other * (1.0 - s2)

    def perturb(self, values: Any, keys: np.ndarray, rng: np.random.Generator) -> OLHReports:
        """Randomise with given keys (the step after drawing the keys; for tests).

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        x = hashing.hash_to_range(keys, v, self.g)
        keep = coin(rng, self.keep_threshold, v.shape[0])
        other = (x + 1 + rng.integers(0, self.g - 1, size=v.shape[0])) % self.g
        return OLHReports(keys, np.where(keep, x, other))

    def randomize(self, values: Any, rng: np.random.Generator) -> OLHReports:
        """See :meth:`FrequencyOracle.randomize`.

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        return self.perturb(v, hashing.draw_keys(rng, v.shape[0]), rng)

    def support_counts(self, reports: OLHReports, candidates: Any = None) -> np.ndarray:
        """See :meth:`FrequencyOracle.support_counts`.

        Raises:
            ReportError: on reports of the wrong type or values outside ``[0, g)``.
            OracleInputError: on bad candidates.
        """
        if not isinstance(reports, OLHReports):
            raise ReportError(f"expected OLHReports, got {type(reports).__name__}")
        c = self.candidates_or_domain(candidates)
        try:
            return hashing.count_matches(reports.keys, reports.y, self.g, c,
                                         self.chunk_elements)
        except hashing.HashInputError as exc:
            raise ReportError(f"malformed OLH reports: {exc}") from exc

    # -- contributions (see FrequencyOracle) ------------------------------------------
    def _support_vectors(self, reports: OLHReports) -> np.ndarray:
        """``s[v] = [H(v) = y]`` over the domain items."""
        if not isinstance(reports, OLHReports):
            raise ReportError("expected OLHReports")
        domain = np.arange(int(self.domain_size), dtype=np.int64)
        return (hashing.hash_outer(reports.keys, domain, self.g)
                == reports.y[:, None]).astype(np.uint64)

    @property
    def report_size(self) -> int:
        """The three 64-bit key words and the 32-bit hashed value: 28 bytes."""
        return 8 * hashing.KEY_WORDS + 4

    def encode_reports(self, reports: OLHReports) -> tuple[bytes, ...]:
        """See :meth:`FrequencyOracle.encode_reports`.

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, OLHReports):
            raise ReportError("expected OLHReports")
        size = self.report_size
        rows = np.empty((reports.n, size), dtype=np.uint8)
        rows[:, :24] = reports.keys.astype(">u8").view(np.uint8).reshape(reports.n, 24)
        rows[:, 24:] = reports.y.astype(">u4").view(np.uint8).reshape(reports.n, 4)
        return split_payloads(rows.tobytes(), size)

    def _decode_rows(self, raw: np.ndarray) -> OLHReports:
        n = raw.shape[0]
        keys = raw[:, :24].copy().view(">u8").reshape(n, 3).astype(np.uint64)
        y = raw[:, 24:].copy().view(">u4").reshape(n).astype(np.int64)
        if n and int(y.max()) >= self.g:
            raise ReportError(f"OLH hashed value outside [0, {self.g})")
        return OLHReports(keys, y)

    def _effective_epsilon(self) -> float:
        return math.log(self.p_keep / self.q_other)
