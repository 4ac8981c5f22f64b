"""Quantiles and range queries from the TrieHH++ trie.

Source: G. Cormode, "Federated heavy hitters revisited" (2021), section 4.

Encoding
--------
A value ``v`` in the stated range ``[lo, hi]`` is mapped to ``u = (v - lo) / (hi - lo)``
in ``[0, 1]`` (values outside are clipped) and then to its base-``alpha`` digits
``d_1 d_2 ... d_L``: the level-``l`` prefix is the cell ``floor(u alpha^l)``, the
interval ``[x / alpha^l, (x + 1) / alpha^l)`` (``u = 1`` goes to the last cell). With
``alpha = 4``, ``1/3`` has digit 1 at level 1 (``[0.25, 0.5)``) and cell 5 at level 2
(``[5/16, 6/16)``). The digit strings are items of length ``L`` (no end-of-sequence
unit) and TrieHH++ (:mod:`mechanisms.triehhpp`) builds the released trie with counts.

Range counts
------------
``[lo, r]`` is decomposed greedily into the canonical alpha-adic cells below
``u_r``: at level ``l`` the cells ``alpha x_{l-1}, ..., x_l - 1`` with
``x_l = floor(u_r alpha^l)`` (at most ``alpha - 1`` per level). Each cell contributes
its released count, or 0 if it was not released (pruned at the threshold). The rank
estimate is the sum divided by ``m`` (a node's count is ``Bin(W, m/n)``). The part
of ``[lo, r]`` inside the level-``L`` cell containing ``r`` is not counted (at most one
leaf cell, width ``(hi - lo) / alpha^L``).

Error bound (section 4): each pruned cell hides less than ``theta`` sampled votes, at
most ``alpha - 1`` cells per level are used, so pruning loses at most
``L (alpha - 1) theta / m`` of rank; with ``m`` about ``eps n / (L theta)`` this is
``(alpha - 1)(L theta)^2 / (eps n)`` (0.015 for ``theta = L = 10, alpha = 4, eps = 2,
n = 10^6``). Every answer carries this bound and, separately, the sampling standard
error ``sqrt(sum of used counts (1 - p)) / m``, which the paper's bound omits.

Quantiles
---------
The ``q``-quantile is found by descending the trie: at each node its children are
scanned in order, accumulating counts, and the search descends into the first child
at which the accumulated rank reaches ``q``; this is exactly the smallest cell
boundary whose greedy-decomposition rank reaches ``q``. The answer is interpolated
linearly inside the last cell reached.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mechanisms.prefix_tree import PrefixTrie
from mechanisms.triehhpp import TrieHHPPParams, TrieHHPPResult, run_triehhpp
from protocol.core.contract import Transport, plaintext_transport

__all__ = [
    "QuantileError", "AlphaAdicEncoder", "RangeAnswer", "QuantileAnswer", "QuantileSketch",
    "pruning_error_bound",
]

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


class QuantileError(ValueError):
    """Invalid quantile or range-query input."""


def pruning_error_bound(max_levels: int, alpha: int, theta: float, m: float) -> float:
    """Section 4: rank error at most ``L (alpha - 1) theta / m`` (fraction of clients)."""
    return max_levels * (alpha - 1) * theta / m


@dataclass(frozen=True, slots=True)
class AlphaAdicEncoder:
    """Maps values in ``[lo, hi]`` to base-``alpha`` prefixes of length ``L``.

    Raises:
        QuantileError: ``lo >= hi``, ``alpha`` outside ``[2, 36]``, ``L < 1`` or
            ``alpha^L > 2^62``.
    """

    lo: float
    hi: float
    alpha: int = 4
    max_levels: int = 10

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise QuantileError(f"need finite lo < hi, got [{self.lo}, {self.hi}]")
        if not isinstance(self.alpha, int) or not 2 <= self.alpha <= len(_DIGITS):
            raise QuantileError(f"alpha must be an integer in [2, 36], got {self.alpha!r}")
        if not isinstance(self.max_levels, int) or self.max_levels < 1:
            raise QuantileError(f"max_levels must be an integer >= 1, got {self.max_levels!r}")
        if self.alpha ** self.max_levels > 1 << 62:
            raise QuantileError("alpha^L must not exceed 2^62")

    @property
    def unit_labels(self) -> tuple[str, ...]:
        return tuple(_DIGITS[: self.alpha])

    @property
    def cells(self) -> int:
        return self.alpha ** self.max_levels

    def to_unit(self, values: np.ndarray | float) -> np.ndarray:
        """``(v - lo) / (hi - lo)`` clipped to ``[0, 1]``.

        Raises:
            QuantileError: a NaN value.
        """
        v = np.asarray(values, dtype=np.float64)
        if np.isnan(v).any():
            raise QuantileError("values must not be NaN")
        return np.clip((v - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def leaf_cells(self, values: np.ndarray) -> np.ndarray:
        """Level-``L`` cell index of each value (``u = 1`` in the last cell)."""
        u = self.to_unit(values)
        return np.minimum(np.floor(u * self.cells), self.cells - 1).astype(np.int64)

    def prefix_cell(self, values: np.ndarray | float, level: int) -> np.ndarray:
        """Level-``level`` cell index of each value."""
        return self.leaf_cells(np.atleast_1d(values)) // self.alpha ** (self.max_levels - level)

    def unit_matrix(self, values: np.ndarray) -> np.ndarray:
        """``(N, L)`` digits (int8 for alpha <= 127), most significant first; vectorised."""
        x = self.leaf_cells(values)
        powers = self.alpha ** np.arange(self.max_levels - 1, -1, -1, dtype=np.int64)
        return ((x[:, None] // powers[None, :]) % self.alpha).astype(np.int8)

    def cell_interval(self, level: int, cell: int) -> tuple[float, float]:
        """The value interval ``[a, b)`` of a cell."""
        w = (self.hi - self.lo) / self.alpha ** level
        return self.lo + cell * w, self.lo + (cell + 1) * w


@dataclass(frozen=True, slots=True)
class RangeAnswer:
    """Estimated rank of ``r``: the fraction of clients with value in ``[lo, r]``.

    Attributes:
        r: the query point.
        rank: estimated fraction.
        count: estimated number of clients (``rank * n``).
        error_bound: ``L (alpha - 1) theta / m`` (pruning, section 4).
        sampling_se: standard error from sampling.
    """

    r: float
    rank: float
    count: float
    error_bound: float
    sampling_se: float


@dataclass(frozen=True, slots=True)
class QuantileAnswer:
    """Estimated ``q``-quantile with the rank error bound of section 4."""

    q: float
    value: float
    error_bound: float


class QuantileSketch:
    """Range and quantile queries over a released TrieHH++ trie of alpha-adic digits.

    Args:
        result: a TrieHH++ run on ``encoder.unit_matrix(values)``.
        encoder: the encoder used.

    Raises:
        QuantileError: the trie's unit count does not match ``alpha``.
    """

    def __init__(self, result: TrieHHPPResult, encoder: AlphaAdicEncoder) -> None:
        trie: PrefixTrie = result.trie
        if trie.num_units != encoder.alpha:
            raise QuantileError("trie units do not match the encoder's alpha")
        self.encoder = encoder
        self.m = float(result.params.m)
        self.n = int(result.params.population)
        self.rate = result.params.rate
        self.theta = result.params.theta
        self.error_bound = pruning_error_bound(encoder.max_levels, encoder.alpha,
                                               self.theta, self.m)
        parent, unit, depth, count = trie.parent, trie.unit, trie.depth, trie.count
        survival = np.ones(encoder.max_levels, dtype=np.float64)
        surv = result.survival()
        survival[:min(surv.size, survival.size)] = surv[:survival.size]
        cell = np.zeros(len(trie), dtype=np.int64)
        self._cells: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        self._cum: list[np.ndarray] = [np.zeros(2, dtype=np.float64)]
        self._counts: list[np.ndarray] = [np.array([self.m])]
        for lev in range(1, encoder.max_levels + 1):
            ids = np.flatnonzero(depth == lev)
            cell[ids] = cell[parent[ids]] * encoder.alpha + unit[ids]
            order = np.argsort(cell[ids], kind="stable")
            c = cell[ids][order]
            # counts of a level where clients dropped out are scaled back up to the
            # sampling rate m/n the estimates assume (LevelStats.survival)
            k = count[ids][order].astype(np.float64) / survival[lev - 1]
            self._cells.append(c)
            self._counts.append(k)
            self._cum.append(np.concatenate([[0.0], np.cumsum(k)]))

    @classmethod
    def collect(cls, values: np.ndarray, encoder: AlphaAdicEncoder, params: TrieHHPPParams,
                sampling_rng: np.random.Generator, transport_rng: np.random.Generator,
                transport: Transport | None = None) -> "QuantileSketch":
        """Build the sketch from the clients' values: TrieHH++ vote rounds over
        ``transport`` (default: plaintext; any transport that takes votes: plaintext,
        secure aggregation, shuffler), then the sketch of the released trie.

        The release depends only on ``sampling_rng`` (the samples) and the vote
        counts, so it is the same on every transport without dropouts.

        Raises:
            QuantileError: ``params.population`` is not the number of values.
            mechanisms.triehhpp.TrieHHPPError: parameters that do not fit.
            protocol.core.contract.AggregationAborted: a round could not complete.
        """
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or params.population != values.size:
            raise QuantileError("params.population must equal the number of values")
        result = run_triehhpp(encoder.unit_matrix(values), encoder.alpha, encoder.unit_labels,
                              params, transport if transport is not None
                              else plaintext_transport(), sampling_rng, transport_rng)
        return cls(result, encoder)

    # -- released cells --------------------------------------------------------
    def _sum_cells(self, level: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Sum of released counts of level-``level`` cells with index in ``[a, b)``."""
        c, cum = self._cells[level], self._cum[level]
        return cum[np.searchsorted(c, b)] - cum[np.searchsorted(c, a)]

    def _count_of(self, level: int, cell: int) -> float:
        c = self._cells[level]
        j = int(np.searchsorted(c, cell))
        return float(self._counts[level][j]) if j < c.size and c[j] == cell else 0.0

    # -- queries ------------------------------------------------------------------
    def rank_counts(self, r: np.ndarray | Sequence[float] | float) -> np.ndarray:
        """Sum of released counts over the greedy decomposition of ``[lo, r]``
        (vectorised over ``r``)."""
        enc = self.encoder
        u = enc.to_unit(np.atleast_1d(np.asarray(r, dtype=np.float64)))
        total = np.zeros(u.shape, dtype=np.float64)
        prev = np.zeros(u.shape, dtype=np.int64)
        for lev in range(1, enc.max_levels + 1):
            x = np.minimum(np.floor(u * enc.alpha ** lev), enc.alpha ** lev).astype(np.int64)
            total += self._sum_cells(lev, prev * enc.alpha, x)
            prev = x
        return total

    def range_query(self, r: np.ndarray | Sequence[float] | float) -> list[RangeAnswer]:
        """Estimated fraction of clients with value in ``[lo, r]`` for each ``r``."""
        rs = np.atleast_1d(np.asarray(r, dtype=np.float64))
        s = self.rank_counts(rs)
        rank = s / self.m
        se = np.sqrt(s * (1.0 - self.rate)) / self.m
        return [RangeAnswer(float(a), float(b), float(b * self.n), self.error_bound, float(c))
                for a, b, c in zip(rs, rank, se)]

    def ranks(self, r: np.ndarray | Sequence[float] | float) -> np.ndarray:
        """Estimated ranks (fractions) as an array, vectorised over ``r``."""
        return self.rank_counts(r) / self.m

    def quantile(self, q: float) -> QuantileAnswer:
        """The estimated ``q``-quantile, ``0 <= q <= 1``.

        Raises:
            QuantileError: ``q`` outside ``[0, 1]``.
        """
        if not (isinstance(q, (int, float)) and 0.0 <= q <= 1.0):
            raise QuantileError(f"q must be in [0, 1], got {q!r}")
        enc = self.encoder
        target = q * self.m
        acc = 0.0
        cell, level, own = 0, 0, self.m
        while level < enc.max_levels:
            base = cell * enc.alpha
            kids = [self._count_of(level + 1, base + d) for d in range(enc.alpha)]
            nxt = None
            for d, k in enumerate(kids):
                if k > 0 and acc + k >= target:
                    nxt = d
                    break
                acc += k
            if nxt is None:  # the pruned remainder holds the quantile: stay in this cell
                acc -= sum(kids)
                break
            cell, level, own = base + nxt, level + 1, kids[nxt]
        a, b = enc.cell_interval(level, cell)
        frac = min(max((target - acc) / own, 0.0), 1.0) if own > 0 else 0.0
        return QuantileAnswer(float(q), float(a + frac * (b - a)), self.error_bound)

    def quantiles(self, qs: Sequence[float]) -> list[QuantileAnswer]:
        return [self.quantile(float(q)) for q in qs]
