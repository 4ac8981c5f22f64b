"""Common interface of the local-DP frequency oracles (GRR, OUE, OLH, AoN).

Theory of operation
-------------------
Every oracle here is a *pure* epsilon-LDP randomiser plus an unbiased linear estimator
(Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
estimation", USENIX Security 2017, section 3: "pure" protocols). A report *supports*
a set of items; for every item ``v``

    P[report of a user holding v supports v]      = p*
    P[report of a user holding u != v supports v] = q*

independently across users. With ``C(v)`` the number of the ``n`` reports supporting
``v`` and ``f(v)`` the true frequency, ``E[C(v)] = n (f p* + (1 - f) q*)``, so

    f_hat(v) = (C(v)/n - q*) / (p* - q*)                          (unbiased)
    Var[f_hat(v)] = (f p*(1-p*) + (1-f) q*(1-q*)) / (n (p* - q*)^2)

which at ``f = 0`` is Wang et al.'s ``q*(1-q*) / (n (p*-q*)^2)``. ``n`` is always the
number of *users* (reports), including reports that say nothing (AoN's bottom).

Implemented probabilities
-------------------------
Every biased coin is a 32-bit uniform word compared with an integer threshold ``T``,
so a coin's probability is exactly ``T / 2^32``. Each oracle rounds its thresholds in the
direction that can only *lower* the privacy loss, and its estimator uses the implemented
(rounded) probabilities, so the estimator stays exactly unbiased and the exact privacy
loss (``effective_epsilon``) never exceeds the nominal ``epsilon``.

Out-of-domain values
--------------------
An oracle covers items ``0 .. domain_size - 1``. With ``dummy=True`` one extra category
``domain_size`` exists: every value outside the domain (negative or ``>= domain_size``)
is mapped to it and randomised like any other item (TAP/TAPS, Zhang, Ye, Hu: "we assign
a dummy item to out-of-domain items"), so a user whose value is not a candidate still
sends an ordinary-looking report. With ``dummy=False`` such a value raises.
"""
from __future__ import annotations

import abc
import math
import struct
from typing import Any, ClassVar, Sequence

import numpy as np

from protocol.core.contract import Kind

from ..privacy import PrivacyGuarantee, local_guarantee

__all__ = [
    "COIN_BITS", "OracleInputError", "ReportError", "PrivacyGuarantee", "FrequencyOracle",
    "coin_threshold", "coin", "coin_probability", "MAX_VECTOR_ENTRIES", "split_payloads",
    "check_payloads",
]

COIN_BITS = 32
_COIN_ONE = 1 << COIN_BITS
MAX_DEFAULT_CANDIDATES = 1 << 24
MAX_VECTOR_ENTRIES = 1 << 26  #: n x dim cap for building support vectors in memory


class OracleInputError(ValueError):
    """Invalid oracle parameters, user values or candidate lists."""


class ReportError(ValueError):
    """A report batch that is malformed for the oracle that should read it."""


def coin_threshold(prob: float, round_up: bool) -> int:
    """Integer threshold ``T`` in ``[0, 2^32]`` with ``T / 2^32`` rounding ``prob``.

    Raises:
        OracleInputError: if ``prob`` is not in ``[0, 1]``.
    """
    if not 0.0 <= prob <= 1.0 or math.isnan(prob):
        raise OracleInputError(f"probability must be in [0, 1], got {prob}")
    x = prob * _COIN_ONE
    t = math.ceil(x) if round_up else math.floor(x)
    return int(min(max(t, 0), _COIN_ONE))


def coin_probability(threshold: int) -> float:
    """The exact probability ``T / 2^32`` of :func:`coin` with threshold ``T``."""
    return threshold / _COIN_ONE


def coin(rng: np.random.Generator, threshold: int, size: int) -> np.ndarray:
    """``size`` independent coins, each ``True`` with probability exactly ``T / 2^32``.

    Raises:
        OracleInputError: if the threshold is outside ``[0, 2^32]``.
    """
    if not 0 <= threshold <= _COIN_ONE:
        raise OracleInputError(f"coin threshold outside [0, 2^32]: {threshold}")
    if threshold == _COIN_ONE:
        return np.ones(size, dtype=bool)
    if threshold == 0 or size == 0:
        return np.zeros(size, dtype=bool)
    raw = rng.bit_generator.random_raw((size + 1) // 2)
    words = np.asarray(raw, dtype=np.uint64).view(np.uint32)[:size]
    return words < np.uint32(threshold)


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise OracleInputError(f"epsilon must be a finite number > 0, got {epsilon!r}")


class FrequencyOracle(abc.ABC):
    """Interface shared by every oracle (implemented by frozen dataclasses).

    Subclasses define ``epsilon``, ``domain_size`` and ``dummy`` fields, the support
    probabilities and the three mechanism-specific methods ``randomize``,
    ``support_counts`` and ``_effective_epsilon``.
    """

    name: ClassVar[str]
    source: ClassVar[str]
    epsilon: float
    domain_size: int
    dummy: bool

    # -- parameters -------------------------------------------------------------------
    def _validate_common(self) -> None:
        _check_epsilon(self.epsilon)
        if not isinstance(self.domain_size, (int, np.integer)) or self.domain_size < 1:
            raise OracleInputError(f"domain_size must be an integer >= 1, got {self.domain_size!r}")
        if self.domain_size + int(self.dummy) > (1 << 63):
            raise OracleInputError("domain_size must be below 2^63")

    @property
    def n_categories(self) -> int:
        """Number of perturbed categories: the domain plus the dummy item, if any."""
        return int(self.domain_size) + int(bool(self.dummy))

    @property
    @abc.abstractmethod
    def support_probabilities(self) -> tuple[float, float]:
        """``(p*, q*)``: probability that a report supports its own value / another value."""

    # -- client -----------------------------------------------------------------------
    def encode(self, values: Any) -> np.ndarray:
        """Validate user values and map out-of-domain ones to the dummy item.

        Returns:
            int64 array with entries in ``[0, n_categories)``.

        Raises:
            OracleInputError: if values are not a 1-D integer array, or (without a
                dummy) a value lies outside ``[0, domain_size)``.
        """
        v = np.asarray(values)
        if v.ndim != 1:
            raise OracleInputError(f"values must be a 1-D array, got shape {v.shape}")
        if v.size == 0:
            return v.astype(np.int64)
        if v.dtype.kind not in "iu":
            raise OracleInputError(f"values must be integers, got dtype {v.dtype}")
        d = int(self.domain_size)
        if v.dtype.kind == "u":
            outside = v >= np.uint64(d)
        else:
            outside = (v < 0) | (v >= d)
        if outside.any():
            if not self.dummy:
                bad = v[outside][0]
                raise OracleInputError(f"value {bad} outside the domain [0, {d}) and the "
                                       "oracle has no dummy item")
            v = np.where(outside, d, v)
        return v.astype(np.int64)

    @abc.abstractmethod
    def randomize(self, values: Any, rng: np.random.Generator) -> Any:
        """Randomise one value per user (vectorised).

        Args:
            values: 1-D integer array, one item per user.
            rng: explicit randomness (``np.random.default_rng()`` for production, a
                seeded generator for simulations).

        Returns:
            A report batch (a frozen dataclass of numpy arrays).
        """

    # -- server -----------------------------------------------------------------------
    def candidates_or_domain(self, candidates: Any) -> np.ndarray:
        """Validate candidates, defaulting to the whole domain (dummy excluded).

        Raises:
            OracleInputError: on non-integer or out-of-range candidates, or when the
                domain is too large to enumerate by default.
        """
        if candidates is None:
            if self.domain_size > MAX_DEFAULT_CANDIDATES:
                raise OracleInputError("domain too large to enumerate: pass candidates")
            return np.arange(int(self.domain_size), dtype=np.int64)
        c = np.asarray(candidates)
        if c.ndim != 1:
            raise OracleInputError(f"candidates must be 1-D, got shape {c.shape}")
        if c.size == 0:
            return c.astype(np.int64)
        if c.dtype.kind not in "iu":
            raise OracleInputError(f"candidates must be integers, got dtype {c.dtype}")
        if (c.dtype.kind == "i" and int(c.min()) < 0) or int(c.max()) >= self.n_categories:
            raise OracleInputError(f"candidates must lie in [0, {self.n_categories})")
        return c.astype(np.int64)

    @abc.abstractmethod
    def support_counts(self, reports: Any, candidates: Any = None) -> np.ndarray:
        """Number of reports supporting each candidate (int64).

        Raises:
            ReportError: if the reports are malformed for this oracle.
            OracleInputError: on bad candidates.
        """

    def estimate(self, reports: Any, candidates: Any = None) -> np.ndarray:
        """Unbiased frequency estimates ``f_hat`` (fractions of the users), one per candidate.

        Args:
            reports: the batch returned by :meth:`randomize` (or several concatenated).
            candidates: item indices to estimate; default the whole domain.

        Raises:
            ReportError: if the reports are malformed or empty.
            OracleInputError: on bad candidates.
        """
        counts = self.support_counts(reports, candidates)
        n = reports.n
        if n == 0:
            raise ReportError("cannot estimate from zero reports")
        p, q = self.support_probabilities
        return (counts / n - q) / (p - q)

    def estimate_counts(self, reports: Any, candidates: Any = None) -> np.ndarray:
        """Unbiased estimates of the number of users holding each candidate.

        Raises:
            ReportError: if the reports are malformed or empty.
            OracleInputError: on bad candidates.
        """
        return self.estimate(reports, candidates) * reports.n

    def variance(self, n: int, f: Any = 0.0) -> Any:
        """Exact variance of :meth:`estimate` for ``n`` users and true frequency ``f``.

        Raises:
            OracleInputError: if ``n < 1`` or ``f`` is outside ``[0, 1]``.
        """
        if n < 1:
            raise OracleInputError(f"n must be >= 1, got {n}")
        f = np.asarray(f, dtype=float)
        if np.any((f < 0) | (f > 1)):
            raise OracleInputError("frequencies must lie in [0, 1]")
        p, q = self.support_probabilities
        var = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)
        return float(var) if var.ndim == 0 else var

    # -- privacy ----------------------------------------------------------------------
    @abc.abstractmethod
    def _effective_epsilon(self) -> float:
        """Exact worst-case log-ratio of the implemented output probabilities."""

    def privacy(self) -> PrivacyGuarantee:
        """The pure local-DP guarantee of one report: nominal ``epsilon``, with the exact
        ``effective_epsilon`` of the rounded coins in its parameters."""
        return local_guarantee(self.name, float(self.epsilon), self.source,
                               {"effective_epsilon": float(self._effective_epsilon())})

    # -- contributions to an aggregation round ----------------------------------------
    #: the contribution kinds a report batch can travel as, preferred first: a report
    #: round carries the reports themselves; a vector round carries each client's
    #: support indicator vector (a post-processing of her report, exactly as private)
    contribution_kinds: ClassVar[tuple[Kind, ...]] = (Kind.REPORT, Kind.VECTOR)

    @property
    def vector_dim(self) -> int:
        """Length of a support vector: the domain items (GRR and OUE: every category)."""
        return int(self.domain_size)

    def support_vectors(self, reports: Any) -> np.ndarray:
        """Each client's support indicator vector, ``(n, vector_dim)`` uint64 of 0/1:
        entry ``v`` is 1 iff the report supports ``v``, so their sum is the support
        counts (Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 3).

        Raises:
            ReportError: reports of the wrong type, or a matrix above
                ``MAX_VECTOR_ENTRIES`` entries.
        """
        n = int(reports.n)
        if n * self.vector_dim > MAX_VECTOR_ENTRIES:
            raise ReportError(f"{n} support vectors of {self.vector_dim} entries exceed "
                              f"{MAX_VECTOR_ENTRIES} entries")
        return self._support_vectors(reports)

    def counts_from_vector(self, total: np.ndarray) -> np.ndarray:
        """Support counts of the domain items from the sum of support vectors."""
        return np.asarray(total, dtype=np.int64)[:int(self.domain_size)]

    @property
    @abc.abstractmethod
    def report_size(self) -> int:
        """Bytes of one report encoded by :meth:`encode_reports`."""

    @abc.abstractmethod
    def encode_reports(self, reports: Any) -> tuple[bytes, ...]:
        """One fixed-size payload of :attr:`report_size` bytes per report (vectorised).

        Raises:
            ReportError: reports of the wrong type.
        """

    def decode_reports(self, payloads: tuple[bytes, ...] | list[bytes]) -> Any:
        """Parse payloads back into a report batch, validating every field.

        Raises:
            ReportError: a payload of the wrong size or a field out of range.
        """
        size = self.report_size
        check_payloads(payloads, size, self.name)
        n = len(payloads)
        return self._decode_rows(np.frombuffer(b"".join(payloads), dtype=np.uint8
                                               ).reshape(n, size))

    @abc.abstractmethod
    def _support_vectors(self, reports: Any) -> np.ndarray:
        """See :meth:`support_vectors` (size already checked)."""

    @abc.abstractmethod
    def _decode_rows(self, raw: np.ndarray) -> Any:
        """Reports from an ``(n, report_size)`` uint8 matrix; raises ReportError."""

    def estimate_from_counts(self, counts: np.ndarray, n: int) -> np.ndarray:
        """The unbiased estimator from support counts of ``n`` reports (the same
        expression as :meth:`estimate`).

        Raises:
            ReportError: ``n < 1``.
        """
        if n < 1:
            raise ReportError("cannot estimate from zero reports")
        p, q = self.support_probabilities
        return (np.asarray(counts, dtype=np.int64) / n - q) / (p - q)


def check_int_array(name: str, a: Any, ndim: int = 1) -> np.ndarray:
    """Reports arrive from clients: accept only integer arrays of the right rank.

    Raises:
        ReportError: otherwise.
    """
    a = np.asarray(a)
    if a.ndim != ndim or (a.size and a.dtype.kind not in "iu"):
        raise ReportError(f"{name} must be a {ndim}-D integer array, got shape {a.shape} "
                          f"dtype {a.dtype}")
    return a


def split_payloads(blob: bytes, size: int) -> tuple[bytes, ...]:
    """Cut a contiguous buffer into payloads of ``size`` bytes (``len(blob)`` must be a
    multiple of ``size``)."""
    return tuple(t[0] for t in struct.iter_unpack(f"{size}s", blob))


def check_payloads(payloads: Sequence[bytes], size: int, name: str) -> None:
    """Every payload is a ``bytes`` of exactly ``size`` bytes.

    Raises:
        ReportError: otherwise.
    """
    if payloads and (set(map(type, payloads)) != {bytes} or set(map(len, payloads)) != {size}):
        raise ReportError(f"every {name} report must be {size} bytes")
