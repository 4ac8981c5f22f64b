"""Local-DP frequency-oracle reports over the aggregation transports.

Theory of operation
-------------------
A pure epsilon-LDP oracle (:mod:`mechanisms.fo`) is a client randomiser plus a linear
server estimator ``f_hat(v) = (C(v)/n - q*) / (p* - q*)``, where ``C(v)`` is the number
of reports *supporting* ``v`` (Wang, Blocki, Li, Jha, USENIX Security 2017, sec. 3).
Transports only carry the reports; whatever carries them, the server needs exactly
``C`` and ``n``. Each oracle owns two encodings (:class:`mechanisms.fo.FrequencyOracle`)
and :func:`mechanisms.fo.run_oracle_round` takes the first of the oracle's preferred
kinds (reports, then vectors) that the transport declares in ``Transport.kinds``; this
runner never looks at a transport's name or class:

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

Amplified central guarantee (only for report rounds over a transport that declares
``anonymous_reports``, i.e. the shuffler). The shuffled multiset of ``n``
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

from mechanisms.fo import (
    FrequencyOracle, ReportError, run_oracle_round, run_oracle_round_at_clients, vector_modulus,
)
from mechanisms.fo.base import MAX_VECTOR_ENTRIES
from mechanisms.privacy import (PrivacyGuarantee, PrivacyGuaranteeError, local_guarantee,
                                shuffled)
from protocol.core.contract import Cost, Transport

__all__ = [
    "DEFAULT_BOUND", "TRANSPORTS", "LDPTransportError", "LDPRun", "support_vectors",
    "vector_modulus", "report_size", "encode_reports", "decode_reports", "estimate_from_counts",
    "shuffled_guarantee", "run_ldp", "support_vectors_fit", "sfp_privacy",
]

DEFAULT_BOUND = "fmt23_numerical"
TRANSPORTS = ("plain", "secagg", "shuffler")


class LDPTransportError(ValueError):
    """An oracle / transport combination that cannot carry the reports, or bad options."""


# ----------------------------------------------------------------------------- encodings
# Each oracle owns its encodings (mechanisms.fo.base.FrequencyOracle); these wrappers
# keep the runner's public names.
def support_vectors(oracle: FrequencyOracle, reports: Any) -> np.ndarray:
    """Each client's support indicator vector, ``(n, dim)`` uint64 of 0/1
    (:meth:`mechanisms.fo.base.FrequencyOracle.support_vectors`).

    Raises:
        LDPTransportError: the matrix would exceed ``MAX_VECTOR_ENTRIES`` entries.
        ReportError: reports of the wrong type.
    """
    support_vectors_fit(oracle, int(reports.n))
    return oracle.support_vectors(reports)


def support_vectors_fit(oracle: FrequencyOracle, n: int) -> None:
    """Check that ``n`` support vectors fit in memory.

    Raises:
        LDPTransportError: they would exceed ``MAX_VECTOR_ENTRIES`` entries.
    """
    if n * oracle.vector_dim > MAX_VECTOR_ENTRIES:
        raise LDPTransportError(f"{n} support vectors of {oracle.vector_dim} entries exceed "
                                f"{MAX_VECTOR_ENTRIES} entries")


def report_size(oracle: FrequencyOracle) -> int:
    """Fixed payload size in bytes of one encoded report (see the module table)."""
    return oracle.report_size


def encode_reports(oracle: FrequencyOracle, reports: Any) -> tuple[bytes, ...]:
    """One fixed-size payload per report (:meth:`FrequencyOracle.encode_reports`).

    Raises:
        ReportError: reports of the wrong type.
    """
    return oracle.encode_reports(reports)


def decode_reports(oracle: FrequencyOracle, payloads: tuple[bytes, ...] | list[bytes]) -> Any:
    """Parse payloads back into the oracle's report batch, validating every field
    (:meth:`FrequencyOracle.decode_reports`).

    Raises:
        ReportError: a payload of the wrong size, a GRR category or OLH value out of
            range, nonzero OUE padding bits, an AoN flag other than 0/1 or a bottom
            carrying a key.
    """
    return oracle.decode_reports(payloads)


# ----------------------------------------------------------------------------- estimates
def estimate_from_counts(oracle: FrequencyOracle, counts: np.ndarray, n: int) -> np.ndarray:
    """The oracle's unbiased estimator from support counts (the same expression as
    :meth:`mechanisms.fo.FrequencyOracle.estimate`).

    Raises:
        ReportError: ``n < 1``.
    """
    return oracle.estimate_from_counts(counts, n)


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


def sfp_privacy(local: PrivacyGuarantee, n: int, anonymous: bool, delta: float | None = None,
                bounds: tuple[str, ...] = ("fmt23_numerical", "bbgn19_triehh")
                ) -> dict[str, Any]:
    """SFP's guarantee for the path its reports actually took.

    Args:
        local: the SFP's local guarantee (:meth:`mechanisms.sfp.SFP.privacy`).
        n: users whose reports were aggregated.
        anonymous: the reports reached the analyst as an anonymous multiset
            (:attr:`mechanisms.sfp.SFPAggregate.anonymous`: a report round over the
            shuffler). Only then is the amplified central epsilon reported, under
            ``central_after_shuffling``; otherwise that entry is ``None`` and the
            guarantee is the local epsilon alone.
        delta: central delta of the amplified guarantee (default ``1/n^2``).
        bounds: amplification bounds to evaluate.

    Returns:
        ``{"kind": "local", "mechanism", "epsilon", "effective_epsilon", "delta",
        "source", "central_after_shuffling"}`` followed by the remaining fields of
        ``local`` (:meth:`mechanisms.privacy.PrivacyGuarantee.to_json`).
    """
    out: dict[str, Any] = {"kind": "local", "mechanism": "sfp", "epsilon": local.epsilon,
                           "effective_epsilon": local.effective_epsilon, "delta": 0.0,
                           "source": local.theorem, "central_after_shuffling": None}
    if not anonymous:
        out["note"] = "reports not shuffled: local epsilon only"
        return local.to_json(out)
    d = 1.0 / n ** 2 if delta is None else delta
    central: dict[str, Any] = {"delta": d}
    for bound in bounds:
        try:
            central[bound] = shuffled_guarantee(n, local.epsilon, d, bound)["epsilon"]
        except LDPTransportError as exc:
            central[bound] = f"unavailable: {exc}"
    out["central_after_shuffling"] = central
    return local.to_json(out)


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
            bound: str = DEFAULT_BOUND, population: int | None = None) -> LDPRun:
    """Carry an oracle's reports over a transport and estimate the domain frequencies.

    Args:
        oracle: the oracle that randomised the users' values.
        reports: the batch from ``oracle.randomize`` (one report per user); ``None``
            over a transport whose clients contribute themselves (the network
            prototype's: each device randomises its own value), with ``population``
            the number of clients.
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
    from protocol.core.contract import ContractError, Kind, pick_kind
    from protocol.core.transports import get_transport

    if isinstance(transport, str):
        if transport not in TRANSPORTS:
            raise LDPTransportError(f"unknown transport {transport!r}; choose from {TRANSPORTS}")
        transport = get_transport(transport)
    name = transport.name
    at_clients = bool(getattr(transport, "contributions_at_clients", False))
    if at_clients != (reports is None):
        raise LDPTransportError(f"transport {name!r} " + (
            "takes no reports: its clients randomise their own values; give population="
            if at_clients else "needs the reports"))
    n = int(population) if at_clients and population is not None else \
        int(reports.n) if reports is not None else 0
    if n < 1:
        raise ReportError("no reports")
    priv = oracle.privacy()
    local = priv.to_json({"mechanism": priv.mechanism, "epsilon": priv.epsilon,
                          "delta": priv.delta, "effective_epsilon": priv.effective_epsilon,
                          "source": priv.theorem})
    try:
        if at_clients:
            rnd = run_oracle_round_at_clients(oracle, n, transport, rng, task=task)
        else:
            if pick_kind(transport, oracle.contribution_kinds) is Kind.VECTOR:
                support_vectors_fit(oracle, n)
            rnd = run_oracle_round(oracle, reports, transport, rng, task=task)
    except ContractError as exc:
        raise LDPTransportError(f"{oracle.name} reports cannot travel over {name}: {exc}") \
            from None
    # amplification only when the reports reached the analyst as an anonymous multiset
    central = (shuffled_guarantee(rnd.n, priv.epsilon, delta, bound, local=priv)
               if rnd.anonymous else None)
    return LDPRun(name, rnd.n, rnd.counts, rnd.estimates(oracle), local, central,
                  rnd.encoding, rnd.cost)
