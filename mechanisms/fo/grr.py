"""Generalised randomised response (k-RR, "direct encoding").

Wang, Blocki, Li, Jha, USENIX Security 2017, section 4.1 (DE). A user holding ``v`` in a
domain of ``D`` categories reports ``v`` with probability ``p`` and each other category
with probability ``q``:

    p = e^eps / (e^eps + D - 1),   q = (1 - p) / (D - 1) = 1 / (e^eps + D - 1)

A report supports exactly the category it names, so ``p* = p`` and ``q* = q``;
``Var[f_hat] = q(1-q)/(n (p-q)^2)`` at ``f = 0``, i.e. ``(e^eps + D - 2)/(n (e^eps-1)^2)``.
Privacy: every output has probability ``p`` or ``q``, so the ratio is at most
``p/q = e^eps``. The implementation rounds ``p`` *down* to a multiple of 2^-32 and sets
``q = (1 - p)/(D - 1)`` exactly (the other categories are drawn by an exact uniform
integer), so ``p/q <= e^eps``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import (FrequencyOracle, OracleInputError, ReportError, check_int_array, coin,
                   coin_probability, coin_threshold, split_payloads)

__all__ = ["GRR", "GRRReports"]


@dataclass(frozen=True, slots=True)
class GRRReports:
    """One reported category per user."""

    values: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", check_int_array("GRR reports", self.values))

    @property
    def n(self) -> int:
        return int(self.values.shape[0])


@dataclass(frozen=True)
class GRR(FrequencyOracle):
    """k-ary randomised response over ``domain_size`` items (+ a dummy item if asked)."""

    epsilon: float
    domain_size: int
    dummy: bool = False

    name: ClassVar[str] = "grr"
    source: ClassVar[str] = ("Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 4.1 "
                             "(direct encoding); Warner 1965")

    def __post_init__(self) -> None:
        self._validate_common()
        if self.n_categories < 2:
            raise OracleInputError("GRR needs at least 2 categories")
        if not self.p_keep > self.q_other:
            raise OracleInputError(
                f"GRR over {self.n_categories} categories at epsilon {self.epsilon}: the keep "
                "probability rounds to at most the others' (domain too large; use OLH)")

    @property
    def keep_threshold(self) -> int:
        """Coin threshold of 'report the true value' (rounded down)."""
        d = self.n_categories
        return coin_threshold(1.0 / (1.0 + (d - 1) * math.exp(-self.epsilon)), round_up=False)

    @property
    def p_keep(self) -> float:
        """Implemented probability of reporting the true category."""
        return coin_probability(self.keep_threshold)

    @property
    def q_other(self) -> float:
        """Implemented probability of reporting one particular other category."""
        return (1.0 - self.p_keep) / (self.n_categories - 1)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        return self.p_keep, self.q_other

    def randomize(self, values: Any, rng: np.random.Generator) -> GRRReports:
        """See :meth:`FrequencyOracle.randomize`.

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        d = self.n_categories
        keep = coin(rng, self.keep_threshold, v.shape[0])
        other = (v + 1 + rng.integers(0, d - 1, size=v.shape[0])) % d
        return GRRReports(np.where(keep, v, other))

    def support_counts(self, reports: GRRReports, candidates: Any = None) -> np.ndarray:
        """See :meth:`FrequencyOracle.support_counts`.

        Raises:
            ReportError: on reports that are not GRR reports in ``[0, n_categories)``.
            OracleInputError: on bad candidates.
        """
        if not isinstance(reports, GRRReports):
            raise ReportError(f"expected GRRReports, got {type(reports).__name__}")
        c = self.candidates_or_domain(candidates)
        y = reports.values
        if y.size and (int(y.min()) < 0 or int(y.max()) >= self.n_categories):
            raise ReportError(f"GRR report outside [0, {self.n_categories})")
        if self.n_categories <= max(1 << 20, 4 * y.shape[0]):
            return np.bincount(y.astype(np.int64), minlength=self.n_categories)[c].astype(np.int64)
        # huge domains (e.g. 48-bit prefixes): count by sorting, never O(D) memory
        ys = np.sort(y.astype(np.int64))
        return (np.searchsorted(ys, c, side="right") - np.searchsorted(ys, c, side="left")
                ).astype(np.int64)

    # -- contributions (see FrequencyOracle) ------------------------------------------
    @property
    def vector_dim(self) -> int:
        """Every category, the dummy item included (its count is dropped)."""
        return self.n_categories

    def _support_vectors(self, reports: GRRReports) -> np.ndarray:
        """The one-hot vector of the reported category."""
        if not isinstance(reports, GRRReports):
            raise ReportError("expected GRRReports")
        out = np.zeros((reports.n, self.n_categories), dtype=np.uint64)
        out[np.arange(reports.n), reports.values.astype(np.int64)] = 1
        return out

    @property
    def report_size(self) -> int:
        """The reported category, big-endian, ``ceil(log2(categories)/8)`` bytes."""
        return max(1, ((self.n_categories - 1).bit_length() + 7) // 8)

    def encode_reports(self, reports: GRRReports) -> tuple[bytes, ...]:
        """See :meth:`FrequencyOracle.encode_reports`.

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, GRRReports):
            raise ReportError("expected GRRReports")
        size = self.report_size
        be = reports.values.astype(">u8").view(np.uint8).reshape(reports.n, 8)
        return split_payloads(np.ascontiguousarray(be[:, 8 - size:]).tobytes(), size)

    def _decode_rows(self, raw: np.ndarray) -> GRRReports:
        n, size = raw.shape
        full = np.zeros((n, 8), dtype=np.uint8)
        full[:, 8 - size:] = raw
        values = full.view(">u8").reshape(n).astype(np.uint64)
        if n and int(values.max()) >= self.n_categories:
            raise ReportError(f"GRR report outside [0, {self.n_categories})")
        return GRRReports(values.astype(np.int64))

    def _effective_epsilon(self) -> float:
        return math.log(self.p_keep / self.q_other)
