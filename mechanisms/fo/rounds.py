"""One aggregation round of frequency-oracle reports over any transport.

Theory of operation
-------------------
A pure epsilon-LDP oracle's server estimator is linear in the *support counts*
``C(v)`` (the number of reports supporting ``v``) and ``n`` (Wang, Blocki, Li, Jha,
USENIX Security 2017, sec. 3), so whatever carries the reports, the server needs only
``C`` and ``n``. Each oracle owns two encodings (:class:`~mechanisms.fo.base.FrequencyOracle`):

* a **report** round carries one fixed-size opaque payload per client
  (:meth:`~mechanisms.fo.base.FrequencyOracle.encode_reports`); the analyst decodes the
  released multiset and counts the support itself;
* a **vector** round carries each client's support indicator vector (a
  post-processing of her report, so exactly as private); the release, their sum
  modulo a power of two above ``n``, is ``C``.

The oracle states which kinds it prefers (``contribution_kinds``: reports first); the
round takes the first one the transport declares in ``Transport.kinds``. The plain
transport and the shuffler therefore carry reports, secure aggregation carries
vectors. ``C`` is a sum of integers, so neither the order of the reports nor the
transport changes it: the estimates are identical to the bit on every transport.

Accounting. :attr:`OracleRound.anonymous` is true only when the round carried reports
over a transport that declares ``anonymous_reports`` (the shuffler): only then may the
caller claim amplification by shuffling (Erlingsson et al., SODA 2019; Feldman,
McMillan, Talwar, SODA 2023); otherwise the guarantee is the oracle's local epsilon.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocol.core.contract import (ContractError, Cost, Kind, Reports, RoundSpec, Transport,
                                    Vectors, pick_kind)

from .base import FrequencyOracle, ReportError

__all__ = ["OracleRound", "run_oracle_round", "vector_modulus"]


def vector_modulus(n: int) -> int:
    """Smallest power of two above ``n`` (at least ``2^8``): a count never wraps."""
    return max(1 << 8, 1 << int(n).bit_length())


@dataclass
class OracleRound:
    """What the analyst learnt from one round of oracle reports.

    Attributes:
        kind: the contribution kind the reports travelled as.
        n: contributions aggregated (over secure aggregation with dropouts: the
            survivors, fewer than were sent).
        counts: support counts of the domain items (int64, ``domain_size`` entries).
        encoding: how the reports travelled, for humans.
        anonymous: the reports reached the analyst as an anonymous multiset (report
            round over a transport declaring ``anonymous_reports``).
        cost: the transport's CPU seconds and bytes.
    """

    kind: Kind
    n: int
    counts: np.ndarray
    encoding: str
    anonymous: bool
    cost: Cost = field(default_factory=Cost)

    def estimates(self, oracle: FrequencyOracle) -> np.ndarray:
        """The oracle's unbiased frequency estimates of the domain items.

        Raises:
            ReportError: no contribution arrived.
        """
        return oracle.estimate_from_counts(self.counts, self.n)


def run_oracle_round(oracle: FrequencyOracle, reports: Any, transport: Transport,
                     rng: np.random.Generator, *, task: str, round: int = 0) -> OracleRound:
    """Carry one batch of ``oracle``'s reports over ``transport`` and count the support.

    Args:
        oracle: the oracle that randomised the users' values.
        reports: its report batch (one report per user).
        transport: any transport whose ``kinds`` include one of the oracle's
            ``contribution_kinds``.
        rng: the transport's randomness (shuffle, simulated keys, dropouts).
        task: task name bound into the transport session.
        round: round number within the task.

    Raises:
        ContractError: the transport takes none of the oracle's kinds, or the
            contributions do not fit it (e.g. OUE wider than a shuffler payload).
        ReportError: malformed reports, or fewer reports released than were sent.
        protocol.core.contract.AggregationAborted: the transport aborted.
    """
    n = int(reports.n)
    if n < 1:
        raise ReportError("no reports")
    kind = pick_kind(transport, oracle.contribution_kinds)
    if kind is Kind.VECTOR:
        vectors = oracle.support_vectors(reports)
        modulus = vector_modulus(n)
        spec = RoundSpec(task, round, Kind.VECTOR, dim=oracle.vector_dim, modulus=modulus)
        result = transport.run_round(spec, Vectors(vectors), rng)
        if result.release.vector is None:
            raise ContractError("a vector round released no vector")
        counts = oracle.counts_from_vector(result.release.vector)
        return OracleRound(kind, int(result.release.contributions), counts,
                           f"support vectors of {oracle.vector_dim} entries mod "
                           f"2^{modulus.bit_length() - 1}", False, result.cost)
    if kind is not Kind.REPORT:
        raise ContractError(f"an oracle cannot send {kind.value} contributions")
    size = oracle.report_size
    spec = RoundSpec(task, round, Kind.REPORT, report_size=size)
    result = transport.run_round(spec, Reports(oracle.encode_reports(reports)), rng)
    received = oracle.decode_reports(result.release.reports or ())
    if received.n != n:
        raise ReportError(f"{received.n} reports arrived, {n} sent")
    counts = np.asarray(oracle.support_counts(received), dtype=np.int64)
    return OracleRound(kind, n, counts, f"reports of {size} bytes",
                       bool(transport.anonymous_reports), result.cost)
