"""Apple's Count Mean Sketch (CMS) and Sequence Fragment Puzzle (SFP).

Sources: Apple Differential Privacy Team, "Learning with privacy at scale" (2017), as
described in appendix C of Zhu, Kairouz, McMahan, Sun, Li, "Federated heavy hitters
discovery with differential privacy" (AISTATS 2020; seeds 000/002), which compares
TrieHH with SFP at k = 2048, m = 1024, a 256-bucket word hash, fragments of 2 characters
at positions 1, 3, 5, 7, 9 and T = 20 or 80.

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

Sequence Fragment Puzzle
------------------------
Words are padded with ``$`` / truncated to ``L = 10`` characters over an alphabet of at
most 64 symbols (so a word is an injective 64-bit id). A public hash ``H`` maps words to
``[256]``. A client holding ``s``:

* picks a position ``l`` uniformly from ``{1, 3, 5, 7, 9}`` and sends ``l`` with a CMS
  report (``epsilon_fragment``) of the tuple ``(H(s), s[l:l+1])``;
* optionally (``epsilon_word > 0``) sends a CMS report of the whole word
  (``epsilon_word``), used to rank and count the reconstructed words.

The position is independent of the data; by basic (sequential) composition each user's
two reports are ``(epsilon_fragment + epsilon_word)``-LDP. The TrieHH paper compares
discovery only, i.e. ``epsilon_word = 0`` and the whole local budget on the fragment.

Server: for each position, estimate the count of every tuple ``(w, xy)`` for
``w in [256]`` and ``x, y`` in the alphabet; keep the ``T`` largest (``Q_l``); for each
``w``, the Cartesian product of the fragments with hash ``w`` over the five positions
gives candidate words; candidates whose own hash is not ``w`` or whose padding is not a
suffix are dropped; the survivors are ranked by their word-CMS estimate (or, without
word reports, by the smallest of their fragment estimates).

What it does not protect against: see docs/ldp.md (LDP hides one report's input, not
the population's heavy hitters, and not a user who sends many reports).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from . import hashing
from .privacy import PrivacyGuarantee, local_guarantee
from .fo.base import (OracleInputError, ReportError, coin, coin_probability,
                      coin_threshold)

__all__ = ["CountMeanSketch", "CMSReports", "CMSSketch", "HadamardCountMeanSketch",
           "HCMSReports", "SFP", "SFPReports", "SFPResult",
           "DEFAULT_ALPHABET", "PAD"]

PAD = "$"
DEFAULT_ALPHABET = PAD + "abcdefghijklmnopqrstuvwxyz"
_BLOCK_BITS = 1 << 23


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
                        block: int = 8192) -> np.ndarray:
        """Unbiased count estimates ``n_hat(d)`` for the candidate ids.

        Raises:
            ReportError: on malformed reports.
            OracleInputError: on malformed candidates.
        """
        return self.estimate_counts_multi([sketch], candidates, block)[0]

    def estimate_counts_multi(self, sketches: Sequence[CMSSketch | CMSReports],
                              candidates: Any, block: int = 8192) -> np.ndarray:
        """Count estimates of the same candidates in several sketches that share this
        hash family (hashing once, gathering from all): shape ``(len(sketches), c)``.

        Raises:
            ReportError: on malformed reports.
            OracleInputError: on malformed candidates.
        """
        sk = [s if isinstance(s, CMSSketch) else self.sketch(s) for s in sketches]
        for s in sk:
            if s.T.shape != (self.k, self.m):
                raise ReportError(f"sketch shape {s.T.shape} != ({self.k}, {self.m})")
        cand = np.asarray(candidates)
        if cand.ndim != 1 or (cand.size and cand.dtype.kind not in "iu"):
            raise OracleInputError("candidates must be a 1-D integer array")
        S = len(sk)
        # one small table per hash function (m x S int32, cache resident); loop over the
        # k functions, vectorised over all candidates at once (in blocks)
        tables = np.stack([s.T for s in sk], axis=2).astype(np.int32)  # (k, m, S)
        lo, hi = hashing.split_ids(cand.ravel())
        use_hi = bool(hi.any())
        shift = np.uint64(64 - (self.m.bit_length() - 1))  # m = 2^b: h = u >> (64 - b)
        keys = self.keys
        sums = np.zeros((cand.shape[0], S), dtype=np.int64)
        u = np.empty(min(block, cand.shape[0]), dtype=np.uint64)
        for c0 in range(0, cand.shape[0], block):
            c1 = min(cand.shape[0], c0 + block)
            uu = u[: c1 - c0]
            acc = np.zeros((c1 - c0, S), dtype=np.int64)
            for l in range(self.k):
                np.multiply(keys[l, 0], lo[c0:c1], out=uu)
                uu += keys[l, 2]
                if use_hi:
                    uu += keys[l, 1] * hi[c0:c1]
                uu >>= shift
                acc += tables[l][uu.view(np.int64)]
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

    def rows(self, reports: HCMSReports) -> np.ndarray:
        """``M / k`` after the inverse transform, shape ``(k, m)``.

        Raises:
            ReportError: on malformed reports.
        """
        if not isinstance(reports, HCMSReports):
            raise ReportError("expected HCMSReports")
        j, l = reports.j, reports.l
        if j.size and (int(j.min()) < 0 or int(j.max()) >= self.k or int(l.min()) < 0
                       or int(l.max()) >= self.m):
            raise ReportError("HCMS report index out of range")
        signs = np.where(reports.bit, 1.0, -1.0)
        S = np.bincount(j.astype(np.int64) * self.m + l, weights=signs,
                        minlength=self.k * self.m).reshape(self.k, self.m)
        return _walsh_hadamard_rows(self.c * S)

    def estimate_counts(self, reports: HCMSReports, candidates: Any) -> np.ndarray:
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



@dataclass(frozen=True, slots=True)
class SFPReports:
    """Per user: the fragment position index (0..4 for 1,3,5,7,9), the fragment CMS
    report and, if enabled, the word CMS report."""

    position: np.ndarray
    fragment: CMSReports
    word: CMSReports | None

    def __post_init__(self) -> None:
        p = np.asarray(self.position)
        if p.ndim != 1 or p.shape[0] != self.fragment.n or (p.size and p.dtype.kind not in "iu"):
            raise ReportError("SFP positions must be one integer per fragment report")
        if self.word is not None and self.word.n != self.fragment.n:
            raise ReportError("SFP word and fragment reports must have the same length")
        object.__setattr__(self, "position", p)

    @property
    def n(self) -> int:
        return int(self.position.shape[0])


@dataclass(frozen=True, slots=True)
class SFPResult:
    """Discovered words, best first, with their estimated counts (word CMS if available,
    else the smallest fragment estimate), and the per-position top tuples ``Q_l`` as
    ``(word_hash, fragment)`` pairs."""

    words: list[str]
    counts: np.ndarray
    top_tuples: list[list[tuple[int, str]]] = field(default_factory=list)


@dataclass(frozen=True)
class SFP:
    """Sequence Fragment Puzzle with Count Mean Sketch reports (local epsilons given)."""

    epsilon_fragment: float
    epsilon_word: float = 0.0
    threshold: int = 20
    k: int = 2048
    m: int = 1024
    word_buckets: int = 256
    length: int = 10
    fragment_length: int = 2
    alphabet: str = DEFAULT_ALPHABET
    hash_seed: int = 0x5F9_C35

    name: ClassVar[str] = "sfp"

    def __post_init__(self) -> None:
        if not self.alphabet or self.alphabet[0] != PAD or len(set(self.alphabet)) != len(self.alphabet):
            raise OracleInputError(f"alphabet must start with {PAD!r} and have distinct symbols")
        if not all(ord(ch) < 128 for ch in self.alphabet):
            raise OracleInputError("alphabet must be ASCII")
        if self.length % self.fragment_length or self.fragment_length < 1:
            raise OracleInputError("length must be a multiple of fragment_length")
        if self.length * self.bits_per_symbol > 64:
            raise OracleInputError("length * bits per symbol must fit in 64 bits")
        if self.threshold < 1:
            raise OracleInputError("threshold T must be >= 1")
        if not 2 <= self.word_buckets <= (1 << 16):
            raise OracleInputError("word_buckets must be in [2, 2^16]")
        if not (math.isfinite(self.epsilon_word) and self.epsilon_word >= 0):
            raise OracleInputError("epsilon_word must be >= 0")
        _ = self.fragment_cms  # validates epsilon_fragment, k and m

    # -- parameters -------------------------------------------------------------------
    @property
    def bits_per_symbol(self) -> int:
        return max(1, (len(self.alphabet) - 1).bit_length())

    @property
    def positions(self) -> list[int]:
        """0-based fragment starts (the paper's 1, 3, 5, 7, 9 for L = 10)."""
        return list(range(0, self.length, self.fragment_length))

    @functools.cached_property
    def fragment_cms(self) -> CountMeanSketch:
        return CountMeanSketch(self.epsilon_fragment, self.k, self.m, self.hash_seed)

    @functools.cached_property
    def word_cms(self) -> CountMeanSketch | None:
        if self.epsilon_word == 0:
            return None
        return CountMeanSketch(self.epsilon_word, self.k, self.m, self.hash_seed + 1)

    @functools.cached_property
    def word_hash_key(self) -> np.ndarray:
        return hashing.keys_from_seed(self.hash_seed + 2, 1)

    def privacy(self) -> PrivacyGuarantee:
        """Per-user guarantee: sum of the two reports' epsilons (basic composition)."""
        eff = self.fragment_cms.privacy().effective_epsilon
        if self.word_cms is not None:
            eff += self.word_cms.privacy().effective_epsilon
        return local_guarantee(self.name, float(self.epsilon_fragment + self.epsilon_word),
                               "Apple SFP via CMS; basic composition of the fragment and word "
                               "reports", {"effective_epsilon": eff,
                                           "epsilon_fragment": float(self.epsilon_fragment),
                                           "epsilon_word": float(self.epsilon_word)})

    # -- encoding ---------------------------------------------------------------------
    def encode_words(self, words: Sequence[str]) -> np.ndarray:
        """Pad/truncate words to ``length`` and map symbols to codes: ``(n, L)`` uint8.

        Raises:
            OracleInputError: if a word contains a symbol outside the alphabet (the pad
                symbol inside a word also counts as invalid).
        """
        L = self.length
        table = np.full(256, 255, dtype=np.uint8)
        for i, ch in enumerate(self.alphabet):
            table[ord(ch)] = i
        fixed = []
        for w in words:
            if PAD in w:
                raise OracleInputError(f"word {w!r} contains the pad symbol {PAD!r}")
            fixed.append(w[:L].ljust(L, PAD))
        try:
            raw = "".join(fixed).encode("ascii")
        except UnicodeEncodeError:
            bad = next(w for w in words if not w.isascii())
            raise OracleInputError(f"word {bad!r} is not in the alphabet") from None
        codes = table[np.frombuffer(raw, dtype=np.uint8)].reshape(len(fixed), L)
        if (codes == 255).any():
            r = int(np.flatnonzero((codes == 255).any(axis=1))[0])
            raise OracleInputError(f"word {words[r]!r} has symbols outside {self.alphabet!r}")
        return codes

    def decode(self, codes: np.ndarray) -> str:
        return "".join(self.alphabet[int(c)] for c in codes).rstrip(PAD)

    def word_ids(self, codes: np.ndarray) -> np.ndarray:
        """Injective 64-bit ids of padded words (``bits_per_symbol`` bits per symbol)."""
        codes = np.asarray(codes)
        ids = np.zeros(codes.shape[0], dtype=np.uint64)
        b = np.uint64(self.bits_per_symbol)
        for i in range(self.length):
            ids = (ids << b) | codes[:, i].astype(np.uint64)
        return ids

    def word_hash(self, ids: np.ndarray) -> np.ndarray:
        """The public word hash ``H`` into ``[word_buckets]``."""
        keys = np.broadcast_to(self.word_hash_key, (ids.shape[0], hashing.KEY_WORDS))
        return hashing.hash_to_range(np.ascontiguousarray(keys), ids, self.word_buckets)

    def _tuple_ids(self, w: np.ndarray, frag_codes: np.ndarray) -> np.ndarray:
        A = len(self.alphabet)
        fid = np.zeros(w.shape[0], dtype=np.int64)
        for i in range(self.fragment_length):
            fid = fid * A + frag_codes[:, i].astype(np.int64)
        return w.astype(np.int64) * A ** self.fragment_length + fid

    # -- client -----------------------------------------------------------------------
    def randomize(self, codes: np.ndarray, rng: np.random.Generator) -> SFPReports:
        """Client algorithm for a batch of encoded words (see :meth:`encode_words`).

        Raises:
            OracleInputError: on codes of the wrong shape or outside the alphabet.
        """
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != self.length or codes.dtype != np.uint8:
            raise OracleInputError(f"codes must be (n, {self.length}) uint8")
        if codes.size and int(codes.max()) >= len(self.alphabet):
            raise OracleInputError("codes outside the alphabet")
        n = codes.shape[0]
        ids = self.word_ids(codes)
        w = self.word_hash(ids)
        pos = rng.integers(0, len(self.positions), size=n)
        starts = np.asarray(self.positions)[pos]
        frag = codes[np.arange(n)[:, None], starts[:, None] + np.arange(self.fragment_length)]
        fragment = self.fragment_cms.randomize(self._tuple_ids(w, frag), rng)
        word = self.word_cms.randomize(ids, rng) if self.word_cms is not None else None
        return SFPReports(pos, fragment, word)

    # -- server -----------------------------------------------------------------------
    def discover(self, reports: SFPReports, max_candidates: int = 100_000) -> SFPResult:
        """Server algorithm: top-``T`` tuples per position, puzzle assembly, ranking.

        Raises:
            ReportError: on malformed reports.
        """
        if not isinstance(reports, SFPReports):
            raise ReportError("expected SFPReports")
        P = len(self.positions)
        if reports.n and (int(reports.position.min()) < 0 or int(reports.position.max()) >= P):
            raise ReportError(f"SFP position outside [0, {P})")
        if (reports.word is None) != (self.word_cms is None):
            raise ReportError("word reports present/absent contrary to epsilon_word")
        cms = self.fragment_cms
        sketches = [cms.sketch(reports.fragment.take(reports.position == l)) for l in range(P)]
        A = len(self.alphabet)
        n_frag = A ** self.fragment_length
        all_tuples = np.arange(self.word_buckets * n_frag, dtype=np.int64)
        est = cms.estimate_counts_multi(sketches, all_tuples)  # (P, buckets * A^2)
        T = min(self.threshold, all_tuples.shape[0])
        top = np.argpartition(-est, T - 1, axis=1)[:, :T]
        frag_strings = ["".join(t) for t in itertools.product(self.alphabet,
                                                             repeat=self.fragment_length)]
        per_pos: list[dict[int, list[int]]] = []
        top_tuples = []
        for l in range(P):
            d: dict[int, list[int]] = {}
            ordered = top[l][np.argsort(-est[l, top[l]], kind="stable")]
            for t in ordered:
                d.setdefault(int(t) // n_frag, []).append(int(t) % n_frag)
            per_pos.append(d)
            top_tuples.append([(int(t) // n_frag, frag_strings[int(t) % n_frag]) for t in ordered])
        cand_words: list[str] = []
        cand_bucket: list[int] = []
        cand_score: list[float] = []
        common = set(per_pos[0]).intersection(*per_pos[1:])
        for w in sorted(common):
            for combo in itertools.product(*(per_pos[l][w] for l in range(P))):
                if len(cand_words) >= max_candidates:
                    break
                word = "".join(frag_strings[f] for f in combo).rstrip(PAD)
                if not word or PAD in word:
                    continue  # padding must be a non-empty word's suffix
                cand_words.append(word)
                cand_bucket.append(w)
                cand_score.append(min(float(est[l, w * n_frag + f]) for l, f in enumerate(combo)))
        if cand_words:
            ids = self.word_ids(self.encode_words(cand_words))
            # the pieces came from bucket w: the assembled word must itself hash to w
            ok = np.flatnonzero(self.word_hash(ids) == np.array(cand_bucket))
        else:
            ids, ok = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        words = [cand_words[i] for i in ok]
        if not words:
            return SFPResult([], np.zeros(0), top_tuples)
        if self.word_cms is not None:
            counts = self.word_cms.estimate_counts(reports.word, ids[ok])  # type: ignore[arg-type]
        else:
            counts = np.array(cand_score)[ok] * P  # a fragment is sent by ~1/P of the holders
        order = np.argsort(-counts, kind="stable")
        return SFPResult([words[i] for i in order], counts[order], top_tuples)
