"""Local-DP frequency-oracle reports over the aggregation transports.

Theory of operation
-------------------
A pure epsilon-LDP oracle (:mod:`mechanisms.fo`) is a client randomiser plus a linear
server estimator ``f_hat(v) = (C(v)/n - q*) / (p* - q*)``, where ``C(v)`` is the number
of reports *supporting* ``v`` (Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 3).
Transports only carry the reports; whatever carries them, the server needs exactly
``C`` and ``n``. Two encodings:

* **Vectors** (secure aggregation, Bonawitz et al. CCS 2017). Each client turns its
  own report into its *support indicator vector* ``s_i`` (entry ``v`` is 1 iff the
  report supports ``v``), a post-processing of the LDP report, so it is exactly as
  private. Then ``sum_i s_i = C``, which secure aggregation computes without showing
  the server any ``s_i``. For GRR ``s_i`` is the one-hot vector of the reported
  category over the domain plus the dummy item; for OUE it is the perturbed bit vector
  itself; for OLH ``s_i[v] = [H_i(v) = y_i]`` and for AoN ``s_i[v] = [h_i(v) = 0]``
  (the zero vector for a bottom) over the domain items. Entries are summed modulo the
  smallest power of two above ``n`` (at least ``2^8``), so no count wraps.
* **Reports** (the ESA shuffler, Bittau et al. SOSP 2017). Each report becomes one
  fixed-size opaque payload (sizes below), the shuffler forwards the multiset in a
  random order, and the analyzer decodes the payloads back into the oracle's report
  batch and runs the oracle's own estimator:

  ====== =================================================================
  GRR    the reported category, big-endian, ``ceil(log2(D+1)/8)`` bytes
  OUE    the packed perturbed bits, ``ceil(width/8)`` bytes (MSB first)
  OLH    the three 64-bit key words and the 32-bit hashed value: 28 bytes
  AoN    a flag byte (1 = function reported, 0 = bottom) and the three key
         words (all zero for a bottom): 25 bytes
  ====== =================================================================

  Every client sends a payload, bottoms included, so the batch has ``n`` reports.

Because ``C`` is a sum of integers, the order of the reports and the transport do
not change it, and the estimates are *identical* for every transport (the tests
check this to the bit).

Amplified central guarantee (shuffler path). The shuffled multiset of ``n``
``epsilon0``-LDP reports is central ``(epsilon, delta)``-DP with ``epsilon`` from
:func:`shuffler.amplification.central_epsilon`; the default bound is
``fmt23_numerical`` (Feldman, McMillan, Talwar, SODA 2023: the clone reduction with
``p = 2/(e^epsilon0 + 1)``, evaluated exactly), the strongest bound implemented that
holds for any pure LDP randomiser; ``delta`` defaults to ``1/n^2``. The bound assumes a
uniform secret shuffle and one report per user; it says nothing if the shuffler
colludes with the analyzer (then only the local ``epsilon0`` remains).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mechanisms import hashing
from mechanisms.fo import (AoN, AoNReports, FrequencyOracle, GRR, GRRReports, OLH, OLHReports,
                           OUE, OUEReports, ReportError)
from mechanisms.privacy import (PrivacyGuarantee, PrivacyGuaranteeError, local_guarantee,
                                shuffled)
from protocol.core.contract import Cost, Kind, Reports, RoundSpec, Transport, Vectors

__all__ = [
    "DEFAULT_BOUND", "TRANSPORTS", "LDPTransportError", "LDPRun", "support_vectors",
    "vector_modulus", "report_size", "encode_reports", "decode_reports", "estimate_from_counts",
    "shuffled_guarantee", "run_ldp",
]

DEFAULT_BOUND = "fmt23_numerical"
TRANSPORTS = ("plain", "secagg", "shuffler")
MAX_VECTOR_ENTRIES = 1 << 26  #: n x dim cap for building support vectors in memory


class LDPTransportError(ValueError):
    """An oracle / transport combination that cannot carry the reports, or bad options."""


# ----------------------------------------------------------------------------- vectors
def _vector_domain(oracle: FrequencyOracle) -> int:
    """Length of the support vector: every category for GRR/OUE, the domain otherwise."""
    return oracle.n_categories if isinstance(oracle, (GRR, OUE)) else int(oracle.domain_size)


def support_vectors(oracle: FrequencyOracle, reports: Any) -> np.ndarray:
    """Each client's support indicator vector, ``(n, dim)`` uint64 of 0/1.

    Args:
        oracle: the oracle that produced ``reports``.
        reports: its report batch.

    Raises:
        LDPTransportError: the matrix would exceed ``MAX_VECTOR_ENTRIES`` entries or the
            oracle is unknown.
        ReportError: reports of the wrong type.
    """
    dim = _vector_domain(oracle)
    if reports.n * dim > MAX_VECTOR_ENTRIES:
        raise LDPTransportError(f"{reports.n} support vectors of {dim} entries exceed "
                                f"{MAX_VECTOR_ENTRIES} entries")
    if isinstance(oracle, GRR):
        if not isinstance(reports, GRRReports):
            raise ReportError("expected GRRReports")
        out = np.zeros((reports.n, dim), dtype=np.uint64)
        out[np.arange(reports.n), reports.values.astype(np.int64)] = 1
        return out
    if isinstance(oracle, OUE):
        if not isinstance(reports, OUEReports):
            raise ReportError("expected OUEReports")
        return reports.unpacked().astype(np.uint64)
    domain = np.arange(dim, dtype=np.int64)
    if isinstance(oracle, OLH):
        if not isinstance(reports, OLHReports):
            raise ReportError("expected OLHReports")
        return (hashing.hash_outer(reports.keys, domain, oracle.g)
                == reports.y[:, None]).astype(np.uint64)
    if isinstance(oracle, AoN):
        if not isinstance(reports, AoNReports):
            raise ReportError("expected AoNReports")
        hit = hashing.hash_outer(reports.keys, domain, oracle.B) == 0
        return (hit & reports.reported[:, None]).astype(np.uint64)
    raise LDPTransportError(f"no vector encoding for oracle {type(oracle).__name__}")


def vector_modulus(n: int) -> int:
    """Smallest power of two above ``n`` (at least ``2^8``): a count never wraps."""
    return max(1 << 8, 1 << int(n).bit_length())


# ----------------------------------------------------------------------------- reports
def _grr_width(oracle: GRR) -> int:
    return max(1, ((oracle.n_categories - 1).bit_length() + 7) // 8)


def report_size(oracle: FrequencyOracle) -> int:
    """Fixed payload size in bytes of one encoded report (see the module table).

    Raises:
        LDPTransportError: unknown oracle.
    """
    if isinstance(oracle, GRR):
        return _grr_width(oracle)
    if isinstance(oracle, OUE):
        return (oracle.n_categories + 7) // 8
    if isinstance(oracle, OLH):
        return 8 * hashing.KEY_WORDS + 4
    if isinstance(oracle, AoN):
        return 1 + 8 * hashing.KEY_WORDS
    raise LDPTransportError(f"no report encoding for oracle {type(oracle).__name__}")


def _split(blob: bytes, size: int) -> tuple[bytes, ...]:
    return tuple(blob[i:i + size] for i in range(0, len(blob), size))


def encode_reports(oracle: FrequencyOracle, reports: Any) -> tuple[bytes, ...]:
    """One fixed-size payload per report (vectorised; see the module table).

    Raises:
        LDPTransportError: unknown oracle.
        ReportError: reports of the wrong type.
    """
    size = report_size(oracle)
    if isinstance(oracle, GRR):
        if not isinstance(reports, GRRReports):
            raise ReportError("expected GRRReports")
        be = reports.values.astype(">u8").view(np.uint8).reshape(reports.n, 8)
        return _split(np.ascontiguousarray(be[:, 8 - size:]).tobytes(), size)
    if isinstance(oracle, OUE):
        if not isinstance(reports, OUEReports):
            raise ReportError("expected OUEReports")
        return _split(np.ascontiguousarray(reports.bits).tobytes(), size)
    if isinstance(oracle, OLH):
        if not isinstance(reports, OLHReports):
            raise ReportError("expected OLHReports")
        rows = np.empty((reports.n, size), dtype=np.uint8)
        rows[:, :24] = reports.keys.astype(">u8").view(np.uint8).reshape(reports.n, 24)
        rows[:, 24:] = reports.y.astype(">u4").view(np.uint8).reshape(reports.n, 4)
        return _split(rows.tobytes(), size)
    if isinstance(oracle, AoN):
        if not isinstance(reports, AoNReports):
            raise ReportError("expected AoNReports")
        rows = np.empty((reports.n, size), dtype=np.uint8)
        rows[:, 0] = reports.reported
        keys = np.where(reports.reported[:, None], reports.keys, np.uint64(0))
        rows[:, 1:] = keys.astype(">u8").view(np.uint8).reshape(reports.n, 24)
        return _split(rows.tobytes(), size)
    raise LDPTransportError(f"no report encoding for oracle {type(oracle).__name__}")


def decode_reports(oracle: FrequencyOracle, payloads: tuple[bytes, ...] | list[bytes]) -> Any:
    """Parse payloads back into the oracle's report batch, validating every field.

    Raises:
        ReportError: a payload of the wrong size, a GRR category or OLH value out of
            range, nonzero OUE padding bits, an AoN flag other than 0/1 or a bottom
            carrying a key.
        LDPTransportError: unknown oracle.
    """
    size = report_size(oracle)
    if any(not isinstance(p, bytes) or len(p) != size for p in payloads):
        raise ReportError(f"every {oracle.name} report must be {size} bytes")
    n = len(payloads)
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(n, size)
    if isinstance(oracle, GRR):
        full = np.zeros((n, 8), dtype=np.uint8)
        full[:, 8 - size:] = raw
        values = full.view(">u8").reshape(n).astype(np.uint64)
        if n and int(values.max()) >= oracle.n_categories:
            raise ReportError(f"GRR report outside [0, {oracle.n_categories})")
        return GRRReports(values.astype(np.int64))
    if isinstance(oracle, OUE):
        pad = 8 * size - oracle.n_categories
        if pad and n and np.any(raw[:, -1] & np.uint8((1 << pad) - 1)):
            raise ReportError("OUE report with nonzero padding bits")
        return OUEReports(raw.copy(), oracle.n_categories)
    if isinstance(oracle, OLH):
        keys = raw[:, :24].copy().view(">u8").reshape(n, 3).astype(np.uint64)
        y = raw[:, 24:].copy().view(">u4").reshape(n).astype(np.int64)
        if n and int(y.max()) >= oracle.g:
            raise ReportError(f"OLH hashed value outside [0, {oracle.g})")
        return OLHReports(keys, y)
    if isinstance(oracle, AoN):
        flag = raw[:, 0]
        if n and int(flag.max()) > 1:
            raise ReportError("AoN flag must be 0 (bottom) or 1")
        reported = flag == 1
        keys = raw[:, 1:].copy().view(">u8").reshape(n, 3).astype(np.uint64)
        if np.any(keys[~reported]):
            raise ReportError("an AoN bottom must not carry a key")
        return AoNReports(keys, reported)
    raise LDPTransportError(f"no report encoding for oracle {type(oracle).__name__}")


# ----------------------------------------------------------------------------- estimates
def estimate_from_counts(oracle: FrequencyOracle, counts: np.ndarray, n: int) -> np.ndarray:
    """The oracle's unbiased estimator from support counts (the same expression as
    :meth:`mechanisms.fo.FrequencyOracle.estimate`).

    Raises:
        ReportError: ``n < 1``.
    """
    if n < 1:
        raise ReportError("cannot estimate from zero reports")
    p, q = oracle.support_probabilities
    return (np.asarray(counts, dtype=np.int64) / n - q) / (p - q)


def shuffled_guarantee(n: int, epsilon0: float, delta: float | None = None,
                       bound: str = DEFAULT_BOUND,
                       local: PrivacyGuarantee | None = None) -> dict[str, Any]:
    """Central ``(epsilon, delta)`` of ``n`` shuffled ``epsilon0``-LDP reports.

    Args:
        n: reports in the shuffled batch (every user, bottoms included).
        epsilon0: local epsilon of one report.
        delta: central delta (default ``1/n^2``).
        bound: a key of :data:`shuffler.amplification.BOUNDS`.
        local: the local guarantee of one report (default: a pure ``epsilon0``-LDP
            randomiser), which the amplified :class:`mechanisms.privacy.PrivacyGuarantee`
            wraps.

    Returns:
        ``{"n", "local_epsilon", "delta", "bound", "source", "epsilon"}`` (and ``note``)
        followed by the remaining fields of the wrapped guarantee (``theorem``,
        ``parameters``, ``model``, ``protects_against``, ...); when the bound does not
        cover the parameters, ``epsilon`` is ``epsilon0`` (the trivial bound) and
        ``note`` says why.

    Raises:
        LDPTransportError: bad ``n``, ``delta`` or bound name.
    """
    from shuffler.amplification import BOUNDS, AmplificationDomainError, central_epsilon

    if n < 2:
        raise LDPTransportError("amplification needs at least 2 reports")
    d = 1.0 / float(n) ** 2 if delta is None else float(delta)
    if bound not in BOUNDS:
        raise LDPTransportError(f"unknown bound {bound!r}; choose from {sorted(BOUNDS)}")
    out: dict[str, Any] = {"n": int(n), "local_epsilon": float(epsilon0), "delta": d,
                           "bound": bound, "source": BOUNDS[bound].source}
    try:
        out["epsilon"] = central_epsilon(int(n), float(epsilon0), d, bound)
    except AmplificationDomainError as exc:
        out["epsilon"] = float(epsilon0)
        out["note"] = f"outside the bound's theorem ({exc}); trivial bound epsilon0"
    except ValueError as exc:
        raise LDPTransportError(str(exc)) from None
    try:
        if local is None:
            local = local_guarantee("shuffled reports", float(epsilon0),
                                    "any pure epsilon0-LDP randomiser")
        g = shuffled(local, int(n), out["epsilon"], d, bound, BOUNDS[bound].source,
                     out.get("note"))
    except PrivacyGuaranteeError as exc:
        raise LDPTransportError(str(exc)) from None
    return g.to_json(out)


# ----------------------------------------------------------------------------- driver
@dataclass
class LDPRun:
    """Outcome of one oracle round over a transport.

    Attributes:
        transport: transport name.
        n: users whose reports were aggregated, bottoms included (over secure
            aggregation with dropouts: the survivors, fewer than were sent).
        counts: support counts of the domain items (``domain_size`` entries).
        estimates: unbiased frequency estimates of the domain items.
        local: the oracle's local guarantee (epsilon, effective epsilon, source).
        central: the amplified central guarantee (shuffler only, else ``None``).
        encoding: how the reports travelled ("support vectors", "reports of B bytes").
        cost: the transport's CPU seconds and bytes.
    """

    transport: str
    n: int
    counts: np.ndarray
    estimates: np.ndarray
    local: dict[str, Any]
    central: dict[str, Any] | None
    encoding: str
    cost: Cost = field(default_factory=Cost)


def run_ldp(oracle: FrequencyOracle, reports: Any, transport: str | Transport,
            rng: np.random.Generator, *, task: str = "fedhh-ldp", delta: float | None = None,
            bound: str = DEFAULT_BOUND) -> LDPRun:
    """Carry an oracle's reports over a transport and estimate the domain frequencies.

    Args:
        oracle: the oracle that randomised the users' values.
        reports: the batch from ``oracle.randomize`` (one report per user).
        transport: ``plain``, ``secagg``, ``shuffler`` or a transport object.
        rng: the transport's randomness (shuffle, simulated keys).
        task: task name bound into the transport session.
        delta: central delta for the shuffler's amplified guarantee (default ``1/n^2``).
        bound: amplification bound (default ``fmt23_numerical``).

    Raises:
        LDPTransportError: a combination that cannot run (e.g. OUE wider than a
            shuffler payload) or an unknown transport name.
        ReportError: malformed reports.
        protocol.core.contract.AggregationAborted: the transport aborted.
    """
    from protocol.core.contract import ContractError
    from protocol.core.transports import get_transport

    if isinstance(transport, str):
        if transport not in TRANSPORTS:
            raise LDPTransportError(f"unknown transport {transport!r}; choose from {TRANSPORTS}")
        transport = get_transport(transport)
    name = transport.name
    n = int(reports.n)
    if n < 1:
        raise ReportError("no reports")
    d = int(oracle.domain_size)
    priv = oracle.privacy()
    local = priv.to_json({"mechanism": priv.mechanism, "epsilon": priv.epsilon,
                          "delta": priv.delta, "effective_epsilon": priv.effective_epsilon,
                          "source": priv.theorem})
    central = None
    try:
        if name == "secagg":
            vectors = support_vectors(oracle, reports)
            modulus = vector_modulus(n)
            spec = RoundSpec(task, 0, Kind.VECTOR, dim=vectors.shape[1], modulus=modulus)
            result = transport.run_round(spec, Vectors(vectors), rng)
            counts = np.asarray(result.release.vector, dtype=np.int64)[:d]
            # with dropouts the sum covers only the survivors: estimate over them
            n = int(result.release.contributions)
            encoding = f"support vectors of {vectors.shape[1]} entries mod 2^{modulus.bit_length() - 1}"
        else:
            size = report_size(oracle)
            spec = RoundSpec(task, 0, Kind.REPORT, report_size=size)
            result = transport.run_round(spec, Reports(encode_reports(oracle, reports)), rng)
            received = decode_reports(oracle, result.release.reports or ())
            if received.n != n:
                raise ReportError(f"{received.n} reports arrived, {n} sent")
            counts = oracle.support_counts(received)
            encoding = f"reports of {size} bytes"
            if name == "shuffler":
                central = shuffled_guarantee(n, priv.epsilon, delta, bound, local=priv)
    except ContractError as exc:
        raise LDPTransportError(f"{oracle.name} reports cannot travel over {name}: {exc}") \
            from None
    counts = np.asarray(counts, dtype=np.int64)
    return LDPRun(name, n, counts, estimate_from_counts(oracle, counts, n), local, central,
                  encoding, result.cost)
