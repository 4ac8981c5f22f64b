"""Apple's Count Mean Sketch (CMS) and Hadamard Count Mean Sketch (HCMS) oracles.

Source: Apple Differential Privacy Team, "Learning with privacy at scale" (2017), as
described in appendix C of Zhu, Kairouz, McMahan, Sun, Li, "Federated heavy hitters
discovery with differential privacy" (AISTATS 2020). :mod:`mechanisms.sfp` builds the
Sequence Fragment Puzzle on CMS.

Count Mean Sketch (client, epsilon-LDP)
---------------------------------------
A public family of ``k`` hash functions ``h_1..h_k : items -> [m]``. The client draws
``j`` uniformly from ``[k]``, builds ``v = -1^m`` with ``v[h_j(d)] = +1``, flips every
coordinate independently with probability ``phi = 1/(1 + e^(eps/2))`` and sends
``(j, v~)``. Two items change at most two coordinates, each by a factor at most
``(1-phi)/phi = e^(eps/2)``, and ``j`` does not depend on the item: eps-LDP. ``phi`` is
rounded *up* to a multiple of 2^-32 (lower privacy loss); ``c = 1/(1 - 2 phi)`` uses
the rounded value, so ``c v~`` is an unbiased estimate of ``v``.

Count Mean Sketch (server)
--------------------------
``M[j, :] += k (c v~ / 2 + 1/2)`` over the reports; for an item ``d``

    n_hat(d) = m/(m-1) * ( (1/k) sum_l M[l, h_l(d)] - n/m )

Averaged over the (pairwise independent, here exactly ``1/m``-colliding) hash family
this is unbiased, with variance (see :meth:`CountMeanSketch.variance`)

    Var[n_hat(d)] = (m/(m-1))^2 * ( n (c^2 - 1)/4 + (n - n_d)(m-1)/m^2 )

when every other user holds a distinct item (more when other items are heavy: their
collisions with ``d`` move together).

(The paper asks for three-wise independent functions; unbiasedness and this variance
need only pairwise independence, which :mod:`mechanisms.hashing` provides exactly.)
The server keeps ``T[l, b] = sum over reports with j = l of v~[b]`` and ``N_l``, from
which ``M = k (c T / 2 + N / 2)``.

Contributions to an aggregation round
-------------------------------------
Like the other oracles, each sketch owns its encodings
(:mod:`mechanisms.fo.rounds` explains the kinds):

* report: CMS sends ``j`` (3 bytes, big-endian) and the packed ``v~`` (``m/8`` bytes);
  HCMS sends ``j`` and ``l`` (3 bytes each) and the bit (1 byte);
* vector: the client's share of the server state. CMS: the bits of ``v~`` in row ``j``
  of a ``k x m`` matrix followed by the one-hot ``j`` (the sum is the matrix of ones and
  ``N``, so ``T = 2 ones - N``); HCMS: ``+-1`` (mod the round's modulus) in cell
  ``(j, l)`` of a ``k x m`` matrix (the sum is the signed sum ``S`` the server
  transforms). Vectors have ``k m`` entries, so they suit small sketches only.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from protocol.core.contract import (ContractError, Cost, Kind, Reports, RoundSpec, Transport,
                                    Vectors, pick_kind)

from .. import hashing
from ..privacy import PrivacyGuarantee, local_guarantee
from .base import (MAX_VECTOR_ENTRIES, OracleInputError, ReportError, check_payloads, coin,
                   coin_probability, coin_threshold, split_payloads)

__all__ = ["CountMeanSketch", "CMSReports", "CMSSketch", "HadamardCountMeanSketch",
           "HCMSReports", "HCMSSketch", "SketchRound", "run_sketch_round"]

_BLOCK_BITS = 1 << 23
_INDEX_BYTES = 3  #: k, m <= 2^20: an index fits in 3 bytes


@dataclass(frozen=True, slots=True)
class CMSReports:
    """``j``: hash index per user; ``bits``: packed ``v~`` (bit 1 = +1), ``(n, m/8)``."""

    j: np.ndarray
    bits: np.ndarray
    m: int

    def __post_init__(self) -> None:
        j = np.asarray(self.j)
        b = np.asarray(self.bits)
        if j.ndim != 1 or (j.size and j.dtype.kind not in "iu"):
            raise ReportError("CMS hash indices must be a 1-D integer array")
        if b.ndim != 2 or b.dtype != np.uint8 or b.shape != (j.shape[0], (self.m + 7) // 8):
            raise ReportError(f"CMS bits must be ({j.shape[0]}, {(self.m + 7) // 8}) uint8")
        object.__setattr__(self, "j", j)
        object.__setattr__(self, "bits", b)

    @property
    def n(self) -> int:
        return int(self.j.shape[0])

    def take(self, mask: np.ndarray) -> "CMSReports":
        return CMSReports(self.j[mask], self.bits[mask], self.m)


@dataclass(frozen=True, slots=True)
class CMSSketch:
    """Server state: ``T[l, b]`` (sum of ``v~`` over reports using ``h_l``), ``N_l``, ``n``."""

    T: np.ndarray
    N: np.ndarray

    @property
    def n(self) -> int:
        return int(self.N.sum())


def _item_ids(item_ids: Any) -> np.ndarray:
    """The ids as a 1-D non-negative integer array.

    Raises:
        OracleInputError: another shape, dtype or a negative id.
    """
    x = np.asarray(item_ids)
    if x.ndim != 1 or (x.size and x.dtype.kind not in "iu"):
        raise OracleInputError("item ids must be a 1-D integer array")
    if x.dtype.kind == "i" and x.size and int(x.min()) < 0:
        raise OracleInputError("item ids must be non-negative")
    return x


class _SketchCoins:
    """Hash keys and flip coins shared by CMS and HCMS (both have ``epsilon``, ``k``,
    ``hash_seed``); the flip probability is ``1/(1 + e^(f eps))`` rounded up, with
    ``f = _flip_exponent_factor``."""

    epsilon: float
    k: int
    m: int
    hash_seed: int
    name: ClassVar[str]
    source: ClassVar[str]
    _flip_exponent_factor: ClassVar[float]

    @functools.cached_property
    def keys(self) -> np.ndarray:
        """The ``k`` public hash keys, derived from ``hash_seed``."""
        return hashing.keys_from_seed(self.hash_seed, self.k)

    @property
    def flip_threshold(self) -> int:
        """Coin threshold of a flip, ``1/(1 + e^(f eps))`` rounded up."""
        return coin_threshold(1.0 / (1.0 + math.exp(self.epsilon * self._flip_exponent_factor)),
                              round_up=True)

    @property
    def flip_probability(self) -> float:
        return coin_probability(self.flip_threshold)

    @property
    def c(self) -> float:
        """Debiasing constant ``1/(1 - 2 phi)``."""
        return 1.0 / (1.0 - 2.0 * self.flip_probability)

    def privacy(self) -> PrivacyGuarantee:
        """Effective epsilon of the rounded coins: ``ln((1 - phi)/phi) / f`` (CMS: ``2
        ln``, two of its ``m`` bits differ between inputs; HCMS: one bit)."""
        phi = self.flip_probability
        return local_guarantee(self.name, float(self.epsilon), self.source, {
            "effective_epsilon": math.log((1 - phi) / phi) / self._flip_exponent_factor})

    def _variance_terms(self, n: int, n_d: Any, sum_sq_others: Any
                        ) -> tuple[np.ndarray, np.ndarray, float]:
        """``(n_d, sum_{d' != d} n_{d'}^2, (1/m)(1 - 1/m))`` for the variance formulas;
        the sum defaults to ``n - n_d`` (every other user holds a distinct item).

        Raises:
            OracleInputError: if ``n < 1``.
        """
        if n < 1:
            raise OracleInputError("n must be >= 1")
        n_d = np.asarray(n_d, dtype=float)
        S = n - n_d if sum_sq_others is None else np.asarray(sum_sq_others, dtype=float)
        m = self.m
        return n_d, S, (1.0 / m) * (1.0 - 1.0 / m)


@dataclass(frozen=True)
class CountMeanSketch(_SketchCoins):
    """Apple's CMS frequency oracle over 64-bit item ids."""

    epsilon: float
    k: int = 2048
    m: int = 1024
    hash_seed: int = 0x5F9_C35

    name: ClassVar[str] = "cms"
    source: ClassVar[str] = ("Apple DP team, 'Learning with privacy at scale' (2017); "
                             "appendix C of Zhu et al., AISTATS 2020")

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon)
                and self.epsilon > 0):
            raise OracleInputError(f"epsilon must be a finite number > 0, got {self.epsilon!r}")
        if not 1 <= self.k <= (1 << 20):
            raise OracleInputError(f"k must be in [1, 2^20], got {self.k}")
        if not 2 <= self.m <= (1 << 20) or self.m & (self.m - 1):
            raise OracleInputError(f"m must be a power of two in [2, 2^20], got {self.m}")

    #: a coordinate flips with probability 1/(1 + e^(eps/2)) (m bits change, 2 of them
    #: between neighbouring inputs)
    _flip_exponent_factor: ClassVar[float] = 0.5

    # -- client -----------------------------------------------------------------------
    def randomize(self, item_ids: Any, rng: np.random.Generator) -> CMSReports:
        """Client algorithm for a batch of item ids (non-negative integers < 2^64).

        Raises:
            OracleInputError: if the ids are not a 1-D non-negative integer array.
        """
        x = _item_ids(item_ids)
        n, m = x.shape[0], self.m
        j = rng.integers(0, self.k, size=n)
        pos = hashing.hash_to_range(self.keys[j], x, m)
        out = np.empty((n, (m + 7) // 8), dtype=np.uint8)
        rows = max(1, _BLOCK_BITS // m)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            flips = coin(rng, self.flip_threshold, (r1 - r0) * m).reshape(r1 - r0, m)
            v = np.zeros((r1 - r0, m), dtype=bool)
            v[np.arange(r1 - r0), pos[r0:r1]] = True
            out[r0:r1] = np.packbits(v ^ flips, axis=1)
        return CMSReports(j, out, m)

    # -- server -----------------------------------------------------------------------
    def sketch(self, reports: CMSReports) -> CMSSketch:
        """Aggregate reports into ``T`` and ``N``.

        Raises:
            ReportError: on malformed reports.
        """
        if not isinstance(reports, CMSReports) or reports.m != self.m:
            raise ReportError(f"expected CMSReports with m = {self.m}")
        j = reports.j
        if j.size and (int(j.min()) < 0 or int(j.max()) >= self.k):
            raise ReportError(f"CMS hash index outside [0, {self.k})")
        N = np.bincount(j, minlength=self.k).astype(np.int64)
        ones = np.zeros((self.k, self.m), dtype=np.int64)
        order = np.argsort(j, kind="stable")
        bounds = np.r_[0, np.cumsum(N)]
        # one group of rows per hash function (rows sorted by j): a plain column sum
        # (np.add.reduceat along axis 0 is ~100x slower)
        for l in np.flatnonzero(N):
            rows = order[bounds[l]:bounds[l + 1]]
            for r0 in range(0, rows.shape[0], 1 << 14):
                block = np.unpackbits(reports.bits[rows[r0:r0 + (1 << 14)]], axis=1,
                                      count=self.m)
                ones[l] += block.sum(axis=0, dtype=np.int64)
        return CMSSketch(2 * ones - N[:, None], N)

    def estimate_counts(self, sketch: CMSSketch | CMSReports, candidates: Any,
                        block: int = 32768) -> np.ndarray:
        """Unbiased count estimates ``n_hat(d)`` for the candidate ids.

        Raises:
            ReportError: on malformed reports.
            OracleInputError: on malformed candidates.
        """
        return self.estimate_counts_multi([sketch], candidates, block)[0]

    def estimate_counts_multi(self, sketches: Sequence[CMSSketch | CMSReports],
                              candidates: Any, block: int = 32768) -> np.ndarray:
        """Count estimates of the same candidates in several sketches that share this
        hash family (hashing once, gathering from all): shape ``(len(sketches), c)``.

        Raises:
            ReportError: on malformed reports.
            OracleInputError: on malformed candidates, or a ``block`` that is not a
                positive integer.
        """
        try:   # checked before any work (sketching reports is the costly part)
            block = operator.index(block)
        except TypeError:
            raise OracleInputError(f"block must be a positive integer, got {block!r}") from None
        if block < 1:
            raise OracleInputError(f"block must be a positive integer, got {block!r}")
        sk = [s if isinstance(s, CMSSketch) else self.sketch(s) for s in sketches]
        for s in sk:
            if s.T.shape != (self.k, self.m):
                raise ReportError(f"sketch shape {s.T.shape} != ({self.k}, {self.m})")
        cand = np.asarray(candidates)
        if cand.ndim != 1 or (cand.size and cand.dtype.kind not in "iu"):
            raise OracleInputError("candidates must be a 1-D integer array")
        S = len(sk)
        # one small table per hash function (m x S, cache resident); loop over the
        # k functions, vectorised over all candidates at once (in blocks)
        # (no copy past np.stack's own for int64 sketches: 84 MB at SFP's sizes)
        tables = np.stack([s.T for s in sk], axis=2).astype(np.int64, copy=False)  # (k, m, S)
        # a candidate's sum takes one entry of each row: bounded by the sum over the rows
        # of their largest magnitude (at most the number of reports for a sketch built
        # from reports). Below 2^31 the gathers and the sums run in int32, half the
        # memory traffic of int64 (about 2x on the SFP's 186,624 tuples); else in int64
        # (in float64: exact far below 2^31, and no overflow for any int64 entry)
        peak = np.maximum(tables.max(axis=1).astype(float), -tables.min(axis=1).astype(float))
        acc_type = np.int32 if float(peak.sum(axis=0).max()) < 2.0 ** 31 else np.int64
        tables = tables.astype(acc_type, copy=False)
        lo, hi = hashing.split_ids(cand.ravel())
        use_hi = bool(hi.any())
        shift = np.uint64(64 - (self.m.bit_length() - 1))  # m = 2^b: h = u >> (64 - b)
        keys = self.keys
        sums = np.zeros((cand.shape[0], S), dtype=np.int64)
        # blocks of candidates sized so that a block's gather (block x S) stays in cache
        block = max(1, min(block, (1 << 20) // S))
        u = np.empty(min(block, cand.shape[0]), dtype=np.uint64)
        gathered = np.empty((u.shape[0], S), dtype=acc_type)
        for c0 in range(0, cand.shape[0], block):
            c1 = min(cand.shape[0], c0 + block)
            uu, got = u[: c1 - c0], gathered[: c1 - c0]
            acc = np.zeros((c1 - c0, S), dtype=acc_type)
            for l in range(self.k):
                np.multiply(keys[l, 0], lo[c0:c1], out=uu)
                uu += keys[l, 2]
                if use_hi:
                    uu += keys[l, 1] * hi[c0:c1]
                uu >>= shift
                np.take(tables[l], uu.view(np.int64), axis=0, out=got)
                acc += got
            sums[c0:c1] = acc
        sums = sums.T
        n = np.array([s.n for s in sk], dtype=float)[:, None]
        mean_row = self.c * sums / 2.0 + n / 2.0  # (1/k) sum_l M[l, h_l(d)]
        return self.m / (self.m - 1.0) * (mean_row - n / self.m)

    def variance(self, n: int, n_d: Any = 0, sum_sq_others: Any = None) -> Any:
        """Variance of :meth:`estimate_counts` over the client coins, the clients' choice
        of ``j`` and the draw of the public hash family:

            (m/(m-1))^2 [ n (c^2-1)/4 + (n - n_d)(1/m)(1-1/m)(1-1/k)
                          + (1/k)(1/m)(1-1/m) sum_{d' != d} n_{d'}^2 ]

        The last term is the hash-collision noise shared by all holders of one item;
        it assumes three-wise independence (the paper's family) so that collisions of
        two other items with ``d`` are uncorrelated. Our family is only pairwise
        independent, so treat the formula as the paper's model (the tests measure it).

        Args:
            n: number of reports in the sketch.
            n_d: true count of the queried item(s).
            sum_sq_others: ``sum n_{d'}^2`` over the other items; default ``n - n_d``
                (every other user holds a distinct item).

        Raises:
            OracleInputError: if ``n < 1``.
        """
        n_d, S, coll = self._variance_terms(n, n_d, sum_sq_others)
        m, k = self.m, self.k
        v = (m / (m - 1.0)) ** 2 * (n * (self.c ** 2 - 1) / 4.0
                                    + (n - n_d) * coll * (1.0 - 1.0 / k) + coll * S / k)
        return float(v) if v.ndim == 0 else v

    # -- contributions to an aggregation round (module docstring) ---------------------
    contribution_kinds: ClassVar[tuple[Kind, ...]] = (Kind.REPORT, Kind.VECTOR)

    @property
    def report_size(self) -> int:
        """``j`` (3 bytes) and the packed ``v~`` (``ceil(m/8)`` bytes)."""
        return _INDEX_BYTES + (self.m + 7) // 8

    def encode_reports(self, reports: CMSReports) -> tuple[bytes, ...]:
        """One fixed-size payload per report.

        Raises:
            ReportError: reports of the wrong type or width.
        """
        if not isinstance(reports, CMSReports) or reports.m != self.m:
            raise ReportError(f"expected CMSReports with m = {self.m}")
        rows = np.empty((reports.n, self.report_size), dtype=np.uint8)
        rows[:, :_INDEX_BYTES] = _index_bytes(reports.j)
        rows[:, _INDEX_BYTES:] = reports.bits
        return split_payloads(rows.tobytes(), self.report_size)

    def decode_reports(self, payloads: Sequence[bytes]) -> CMSReports:
        """Parse payloads, validating ``j < k`` and zero padding bits.

        Raises:
            ReportError: a payload of the wrong size or a field out of range.
        """
        raw = _payload_rows(payloads, self.report_size, self.name)
        j = _index_values(raw[:, :_INDEX_BYTES])
        if j.size and int(j.max()) >= self.k:
            raise ReportError(f"CMS hash index outside [0, {self.k})")
        bits = raw[:, _INDEX_BYTES:].copy()
        pad = 8 * bits.shape[1] - self.m
        if pad and bits.size and np.any(bits[:, -1] & np.uint8((1 << pad) - 1)):
            raise ReportError("CMS report with nonzero padding bits")
        return CMSReports(j, bits, self.m)

    @property
    def vector_dim(self) -> int:
        """``k m`` bits of ``v~`` in row ``j`` and ``k`` entries of the one-hot ``j``."""
        return self.k * self.m + self.k

    def vector_modulus(self, n: int) -> int:
        """Modulus of a vector round of ``n`` clients: every entry sums to at most ``n``."""
        return max(1 << 8, 1 << int(n).bit_length())

    def sketch_vectors(self, reports: CMSReports, modulus: int) -> np.ndarray:
        """Each client's share of the server state, ``(n, vector_dim)`` uint64.

        Raises:
            ReportError: reports of the wrong type, or more than 2^26 entries.
        """
        if not isinstance(reports, CMSReports) or reports.m != self.m:
            raise ReportError(f"expected CMSReports with m = {self.m}")
        _check_vector_size(reports.n, self.vector_dim)
        n, k, m = reports.n, self.k, self.m
        j = reports.j.astype(np.int64)
        if j.size and (int(j.min()) < 0 or int(j.max()) >= k):
            raise ReportError(f"CMS hash index outside [0, {k})")
        out = np.zeros((n, self.vector_dim), dtype=np.uint64)
        bits = np.unpackbits(reports.bits, axis=1, count=m).astype(np.uint64)
        out[np.arange(n)[:, None], j[:, None] * m + np.arange(m)[None, :]] = bits
        out[np.arange(n), k * m + j] = 1
        return out

    def sketch_from_vector(self, total: np.ndarray, modulus: int) -> CMSSketch:
        """The server state from the sum of :meth:`sketch_vectors`.

        Raises:
            ReportError: a vector of the wrong length.
        """
        total = np.asarray(total, dtype=np.int64)
        if total.shape != (self.vector_dim,):
            raise ReportError(f"a CMS sketch vector has {self.vector_dim} entries")
        km = self.k * self.m
        N = total[km:].copy()
        return CMSSketch(2 * total[:km].reshape(self.k, self.m) - N[:, None], N)


@dataclass(frozen=True, slots=True)
class HCMSReports:
    """Hadamard CMS reports: hash index ``j``, coefficient index ``l``, one bit
    (1 = +1, 0 = -1) per user."""

    j: np.ndarray
    l: np.ndarray
    bit: np.ndarray

    def __post_init__(self) -> None:
        arrs = [np.asarray(a) for a in (self.j, self.l, self.bit)]
        if any(a.ndim != 1 or a.shape != arrs[0].shape for a in arrs):
            raise ReportError("HCMS reports need three 1-D arrays of one length")
        if any(a.size and a.dtype.kind not in "iub" for a in arrs):
            raise ReportError("HCMS report fields must be integers")
        object.__setattr__(self, "j", arrs[0])
        object.__setattr__(self, "l", arrs[1])
        object.__setattr__(self, "bit", arrs[2].astype(bool))

    @property
    def n(self) -> int:
        return int(self.j.shape[0])


@dataclass(frozen=True, slots=True)
class HCMSSketch:
    """HCMS server state: signed sums ``S[j, l]`` of the bits (+1 / -1) and ``n``."""

    S: np.ndarray
    n: int


def _index_bytes(x: np.ndarray) -> np.ndarray:
    """Indices below 2^24 as ``(n, 3)`` big-endian bytes."""
    be = np.asarray(x).astype(">u4").view(np.uint8).reshape(-1, 4)
    return be[:, 4 - _INDEX_BYTES:]


def _index_values(raw: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_index_bytes` (int64)."""
    full = np.zeros((raw.shape[0], 4), dtype=np.uint8)
    full[:, 4 - _INDEX_BYTES:] = raw
    return full.view(">u4").reshape(-1).astype(np.int64)


def _payload_rows(payloads: Sequence[bytes], size: int, name: str) -> np.ndarray:
    """Payloads of ``size`` bytes as an ``(n, size)`` uint8 matrix.

    Raises:
        ReportError: a payload of another size or type.
    """
    check_payloads(payloads, size, name)
    return np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), size)


def _check_vector_size(n: int, dim: int) -> None:
    """Raises ReportError for more than ``MAX_VECTOR_ENTRIES`` entries."""
    if n * dim > MAX_VECTOR_ENTRIES:
        raise ReportError(f"{n} sketch vectors of {dim} entries exceed {MAX_VECTOR_ENTRIES} "
                          "entries")


def _walsh_hadamard_rows(a: np.ndarray) -> np.ndarray:
    """``a @ H_m`` for every row (Sylvester ``H_m``, entries ``(-1)^popcount(r & c)``)."""
    a = np.array(a, dtype=np.float64, copy=True)
    rows, m = a.shape
    h = 1
    while h < m:
        v = a.reshape(rows, m // (2 * h), 2, h)
        x, y = v[:, :, 0, :].copy(), v[:, :, 1, :]
        v[:, :, 0, :] += y
        v[:, :, 1, :] = x - y
        h *= 2
    return a


@dataclass(frozen=True)
class HadamardCountMeanSketch(_SketchCoins):
    """Apple's Hadamard Count Mean Sketch (HCMS): one bit per report.

    Client: ``j`` uniform in ``[k]``; ``w = H_m e_{h_j(d)}`` (column ``h_j(d)`` of the
    Sylvester Hadamard matrix, entries +-1); ``l`` uniform in ``[m]``; send ``(j, l, w_l)``
    with ``w_l`` flipped with probability ``phi = 1/(1 + e^eps)`` (rounded up). The pair
    ``(j, l)`` is independent of ``d`` and the bit's ratio is ``(1-phi)/phi <= e^eps``:
    eps-LDP. Server: ``M[j, l] += k c w~`` with ``c = 1/(1-2 phi)``, then
    ``M <- M H_m`` row by row, then the CMS estimate
    ``n_hat(d) = m/(m-1) ((1/k) sum_l M[l, h_l(d)] - n/m)``, unbiased over the family
    because ``H_m H_m = m I``.
    """

    epsilon: float
    k: int = 2048
    m: int = 1024
    hash_seed: int = 0x5F9_C35

    name: ClassVar[str] = "hcms"
    source: ClassVar[str] = "Apple DP team, 'Learning with privacy at scale' (2017), HCMS"

    def __post_init__(self) -> None:
        CountMeanSketch(self.epsilon, self.k, self.m, self.hash_seed)  # same validation

    #: the single bit flips with probability 1/(1 + e^eps)
    _flip_exponent_factor: ClassVar[float] = 1.0

    def randomize(self, item_ids: Any, rng: np.random.Generator) -> HCMSReports:
        """Client algorithm for a batch of item ids.

        Raises:
            OracleInputError: if the ids are not a 1-D non-negative integer array.
        """
        x = _item_ids(item_ids)
        n = x.shape[0]
        j = rng.integers(0, self.k, size=n)
        col = hashing.hash_to_range(self.keys[j], x, self.m)
        l = rng.integers(0, self.m, size=n)
        plus = (np.bitwise_count(l & col) & 1) == 0
        return HCMSReports(j, l, plus ^ coin(rng, self.flip_threshold, n))

    def rows(self, reports: HCMSReports | HCMSSketch) -> np.ndarray:
        """``M / k`` after the inverse transform, shape ``(k, m)``.

        Raises:
            ReportError: on malformed reports.
        """
        sk = reports if isinstance(reports, HCMSSketch) else self.sketch(reports)
        if sk.S.shape != (self.k, self.m):
            raise ReportError(f"sketch shape {sk.S.shape} != ({self.k}, {self.m})")
        return _walsh_hadamard_rows(self.c * sk.S)

    def estimate_counts(self, reports: HCMSReports | HCMSSketch, candidates: Any) -> np.ndarray:
        """Unbiased count estimates for the candidate ids.

        Raises:
            ReportError: on malformed reports.
            OracleInputError: on malformed candidates.
        """
        R = self.rows(reports)
        cand = np.asarray(candidates)
        if cand.ndim != 1 or (cand.size and cand.dtype.kind not in "iu"):
            raise OracleInputError("candidates must be a 1-D integer array")
        total = np.zeros(cand.shape[0])
        for c0 in range(0, cand.shape[0], 4096):
            idx = hashing.hash_outer(self.keys, cand[c0:c0 + 4096], self.m)
            total[c0:c0 + 4096] = np.take_along_axis(R, idx, axis=1).sum(axis=0)
        n = reports.n
        return self.m / (self.m - 1.0) * (total - n / self.m)

    def variance(self, n: int, n_d: Any = 0, sum_sq_others: Any = None) -> Any:
        """Variance over coins, ``(j, l)`` and the hash family (three-wise model as for
        :meth:`CountMeanSketch.variance`): each report adds ``+-c`` to the sum, so

            (m/(m-1))^2 [ n_d (c^2-1) + (n-n_d)(c^2 - 1/m^2 - (1/m)(1-1/m)/k)
                          + (1/k)(1/m)(1-1/m) sum_{d' != d} n_{d'}^2 ]

        Raises:
            OracleInputError: if ``n < 1``.
        """
        n_d, S, coll = self._variance_terms(n, n_d, sum_sq_others)
        m, k, c2 = self.m, self.k, self.c ** 2
        v = (m / (m - 1.0)) ** 2 * (n_d * (c2 - 1) + (n - n_d) * (c2 - 1.0 / m ** 2 - coll / k)
                                    + coll * S / k)
        return float(v) if v.ndim == 0 else v

    # -- contributions to an aggregation round (module docstring) ---------------------
    contribution_kinds: ClassVar[tuple[Kind, ...]] = (Kind.REPORT, Kind.VECTOR)

    def sketch(self, reports: HCMSReports) -> HCMSSketch:
        """The signed sums ``S[j, l]`` of the reports' bits.

        Raises:
            ReportError: on malformed reports.
        """
        if not isinstance(reports, HCMSReports):
            raise ReportError("expected HCMSReports")
        j, l = reports.j, reports.l
        if j.size and (int(j.min()) < 0 or int(j.max()) >= self.k or int(l.min()) < 0
                       or int(l.max()) >= self.m):
            raise ReportError("HCMS report index out of range")
        signs = np.where(reports.bit, 1, -1).astype(np.int64)
        S = np.bincount(j.astype(np.int64) * self.m + l, weights=signs,
                        minlength=self.k * self.m).reshape(self.k, self.m)
        return HCMSSketch(S, reports.n)

    @property
    def report_size(self) -> int:
        """``j`` and ``l`` (3 bytes each, big-endian) and the bit (1 byte)."""
        return 2 * _INDEX_BYTES + 1

    def encode_reports(self, reports: HCMSReports) -> tuple[bytes, ...]:
        """One fixed-size payload per report.

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, HCMSReports):
            raise ReportError("expected HCMSReports")
        rows = np.empty((reports.n, self.report_size), dtype=np.uint8)
        rows[:, :_INDEX_BYTES] = _index_bytes(reports.j)
        rows[:, _INDEX_BYTES:2 * _INDEX_BYTES] = _index_bytes(reports.l)
        rows[:, -1] = reports.bit
        return split_payloads(rows.tobytes(), self.report_size)

    def decode_reports(self, payloads: Sequence[bytes]) -> HCMSReports:
        """Parse payloads, validating ``j < k``, ``l < m`` and a 0/1 bit.

        Raises:
            ReportError: a payload of the wrong size or a field out of range.
        """
        raw = _payload_rows(payloads, self.report_size, self.name)
        j = _index_values(raw[:, :_INDEX_BYTES])
        l = _index_values(raw[:, _INDEX_BYTES:2 * _INDEX_BYTES])
        bit = raw[:, -1]
        if j.size and (int(j.max()) >= self.k or int(l.max()) >= self.m or int(bit.max()) > 1):
            raise ReportError("HCMS report field out of range")
        return HCMSReports(j, l, bit == 1)

    @property
    def vector_dim(self) -> int:
        """One entry per cell ``(j, l)``."""
        return self.k * self.m

    def vector_modulus(self, n: int) -> int:
        """Modulus of a vector round of ``n`` clients: a signed sum lies in ``[-n, n]``."""
        return max(1 << 8, 1 << (2 * int(n)).bit_length())

    def sketch_vectors(self, reports: HCMSReports, modulus: int) -> np.ndarray:
        """Each client's ``+-1`` (mod ``modulus``) in cell ``(j, l)``, ``(n, k m)`` uint64.

        Raises:
            ReportError: malformed reports, or more than 2^26 entries.
        """
        self.sketch(reports)  # validates the indices
        _check_vector_size(reports.n, self.vector_dim)
        out = np.zeros((reports.n, self.vector_dim), dtype=np.uint64)
        cell = reports.j.astype(np.int64) * self.m + reports.l.astype(np.int64)
        out[np.arange(reports.n), cell] = np.where(reports.bit, np.uint64(1),
                                                   np.uint64(modulus - 1))
        return out

    def sketch_from_vector(self, total: np.ndarray, modulus: int, n: int) -> HCMSSketch:
        """The signed sums from the modular sum of :meth:`sketch_vectors` of ``n``
        clients (entries above ``modulus/2`` are negative).

        Raises:
            ReportError: a vector of the wrong length.
        """
        t = np.asarray(total, dtype=np.uint64)
        if t.shape != (self.vector_dim,):
            raise ReportError(f"an HCMS sketch vector has {self.vector_dim} entries")
        neg = t >= np.uint64(modulus // 2)
        signed = np.where(neg, -((np.uint64(modulus) - t).astype(np.int64)), t.astype(np.int64))
        return HCMSSketch(signed.reshape(self.k, self.m), int(n))


@dataclass
class SketchRound:
    """The server state one round of sketch reports produced.

    Attributes:
        sketch: a :class:`CMSSketch` or :class:`HCMSSketch`.
        n: contributions aggregated.
        kind: how they travelled.
        anonymous: reports reached the analyst as an anonymous multiset.
        cost: the transport's CPU seconds and bytes.
    """

    sketch: CMSSketch | HCMSSketch
    n: int
    kind: Kind
    anonymous: bool
    cost: Cost = field(default_factory=Cost)


def run_sketch_round(oracle: CountMeanSketch | HadamardCountMeanSketch, reports: Any,
                     transport: Transport, rng: np.random.Generator, *, task: str,
                     round: int = 0) -> SketchRound:
    """Carry CMS or HCMS reports over ``transport`` (the first of the sketch's
    ``contribution_kinds`` that the transport declares) and build the server state.

    Raises:
        ContractError: the transport takes none of the sketch's kinds, or the
            contributions do not fit it.
        ReportError: malformed reports, or fewer reports released than sent.
        protocol.core.contract.AggregationAborted: the transport aborted.
    """
    n = int(reports.n)
    kind = pick_kind(transport, oracle.contribution_kinds)
    if kind is Kind.VECTOR:
        modulus = oracle.vector_modulus(n)
        spec = RoundSpec(task, round, Kind.VECTOR, dim=oracle.vector_dim, modulus=modulus)
        res = transport.run_round(spec, Vectors(oracle.sketch_vectors(reports, modulus)), rng)
        if res.release.vector is None:
            raise ContractError("a vector round released no vector")
        got = int(res.release.contributions)
        if isinstance(oracle, HadamardCountMeanSketch):
            sketch: CMSSketch | HCMSSketch = oracle.sketch_from_vector(res.release.vector,
                                                                       modulus, got)
        else:
            sketch = oracle.sketch_from_vector(res.release.vector, modulus)
        return SketchRound(sketch, got, kind, False, res.cost)
    spec = RoundSpec(task, round, Kind.REPORT, report_size=oracle.report_size)
    res = transport.run_round(spec, Reports(oracle.encode_reports(reports)), rng)
    received = oracle.decode_reports(res.release.reports or ())
    if received.n != n:
        raise ReportError(f"{received.n} reports arrived, {n} sent")
    return SketchRound(oracle.sketch(received), n, kind, bool(transport.anonymous_reports),
                       res.cost)
