"""Optimised unary encoding (OUE).

Wang, Blocki, Li, Jha, USENIX Security 2017, section 4.2. The value ``v`` becomes a
one-hot vector of ``D`` bits; bit ``v`` is kept 1 with probability ``p = 1/2`` and every
other bit becomes 1 with probability ``q = 1/(e^eps + 1)``. A report supports every item
whose bit is 1, so ``p* = 1/2``, ``q* = q`` and at ``f = 0``

    Var[f_hat] = q(1-q)/(n (1/2 - q)^2) = 4 e^eps / (n (e^eps - 1)^2).

Privacy: two inputs change two bits; the worst output ratio is
``p(1-q) / ((1-p) q) = (1-q)/q = e^eps``. The implementation uses ``p = 2^31/2^32``
exactly and rounds ``q`` *up* to a multiple of 2^-32, which can only lower the ratio.
Reports are bit matrices packed along the item axis (``numpy.packbits``), 1 bit per
item per user.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import (COIN_BITS, FrequencyOracle, OracleInputError, ReportError, coin,
                   coin_probability, coin_threshold, split_payloads)

__all__ = ["OUE", "OUEReports"]

_BLOCK = 1 << 23  # bits generated / unpacked per block
MAX_WIDTH = 1 << 22  #: largest number of OUE categories (bits per report)


@dataclass(frozen=True, slots=True)
class OUEReports:
    """Packed bit vectors: ``bits`` is ``(n, ceil(width/8))`` uint8, ``width`` bits used."""

    bits: np.ndarray
    width: int

    def __post_init__(self) -> None:
        b = np.asarray(self.bits)
        if b.ndim != 2 or b.dtype != np.uint8 or b.shape[1] != (self.width + 7) // 8:
            raise ReportError(f"OUE reports must be (n, {(self.width + 7) // 8}) uint8, got "
                              f"shape {b.shape} dtype {b.dtype}")
        object.__setattr__(self, "bits", b)

    @property
    def n(self) -> int:
        return int(self.bits.shape[0])

    def unpacked(self) -> np.ndarray:
        """The ``(n, width)`` 0/1 matrix (memory: one byte per bit)."""
        return np.unpackbits(self.bits, axis=1, count=self.width)


@dataclass(frozen=True)
class OUE(FrequencyOracle):
    """Optimised unary encoding over ``domain_size`` items (+ a dummy bit if asked)."""

    epsilon: float
    domain_size: int
    dummy: bool = False

    name: ClassVar[str] = "oue"
    source: ClassVar[str] = "Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 4.2 (OUE)"

    def __post_init__(self) -> None:
        self._validate_common()
        if self.n_categories > MAX_WIDTH:
            raise OracleInputError(f"OUE sends one bit per item: domain above {MAX_WIDTH} "
                                   "is not supported (use OLH)")

    @property
    def one_threshold(self) -> int:
        """Threshold of 'the true bit stays 1': exactly 1/2."""
        return 1 << (COIN_BITS - 1)

    @property
    def flip_threshold(self) -> int:
        """Threshold of 'another bit becomes 1' (rounded up)."""
        return coin_threshold(1.0 / (math.exp(self.epsilon) + 1.0), round_up=True)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        return coin_probability(self.one_threshold), coin_probability(self.flip_threshold)

    def randomize(self, values: Any, rng: np.random.Generator) -> OUEReports:
        """See :meth:`FrequencyOracle.randomize`.

        Raises:
            OracleInputError: on invalid values.
        """
        v = self.encode(values)
        n, width = v.shape[0], self.n_categories
        out = np.empty((n, (width + 7) // 8), dtype=np.uint8)
        rows = max(1, _BLOCK // width)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            bits = coin(rng, self.flip_threshold, (r1 - r0) * width).reshape(r1 - r0, width)
            bits[np.arange(r1 - r0), v[r0:r1]] = coin(rng, self.one_threshold, r1 - r0)
            out[r0:r1] = np.packbits(bits, axis=1)
        return OUEReports(out, width)

    def support_counts(self, reports: OUEReports, candidates: Any = None) -> np.ndarray:
        """See :meth:`FrequencyOracle.support_counts`.

        Raises:
            ReportError: on reports of the wrong type or width.
            OracleInputError: on bad candidates.
        """
        if not isinstance(reports, OUEReports):
            raise ReportError(f"expected OUEReports, got {type(reports).__name__}")
        if reports.width != self.n_categories:
            raise ReportError(f"OUE report width {reports.width} != {self.n_categories}")
        c = self.candidates_or_domain(candidates)
        totals = np.zeros(self.n_categories, dtype=np.int64)
        rows = max(1, _BLOCK // self.n_categories)
        for r0 in range(0, reports.n, rows):
            block = np.unpackbits(reports.bits[r0:r0 + rows], axis=1, count=self.n_categories)
            totals += block.sum(axis=0, dtype=np.int64)
        return totals[c]

    # -- contributions (see FrequencyOracle) ------------------------------------------
    @property
    def vector_dim(self) -> int:
        """Every category, the dummy item included (its count is dropped)."""
        return self.n_categories

    def _support_vectors(self, reports: OUEReports) -> np.ndarray:
        """The perturbed bit vector itself."""
        if not isinstance(reports, OUEReports):
            raise ReportError("expected OUEReports")
        return reports.unpacked().astype(np.uint64)

    @property
    def report_size(self) -> int:
        """The packed perturbed bits, ``ceil(categories/8)`` bytes (MSB first)."""
        return (self.n_categories + 7) // 8

    def encode_reports(self, reports: OUEReports) -> tuple[bytes, ...]:
        """See :meth:`FrequencyOracle.encode_reports`.

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, OUEReports):
            raise ReportError("expected OUEReports")
        return split_payloads(np.ascontiguousarray(reports.bits).tobytes(), self.report_size)

    def _decode_rows(self, raw: np.ndarray) -> OUEReports:
        n, size = raw.shape
        pad = 8 * size - self.n_categories
        if pad and n and np.any(raw[:, -1] & np.uint8((1 << pad) - 1)):
            raise ReportError("OUE report with nonzero padding bits")
        return OUEReports(raw.copy(), self.n_categories)

    def _effective_epsilon(self) -> float:
        p, q = self.support_probabilities
        return math.log(p * (1 - q) / ((1 - p) * q))
