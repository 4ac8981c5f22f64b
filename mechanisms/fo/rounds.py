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

from protocol.core.contract import (AtClients, ContractError, Cost, Kind, Reports, RoundSpec,
                                    Transport, Vectors, pick_kind)

from .base import FrequencyOracle, ReportError

__all__ = ["OracleRound", "run_oracle_round", "vector_modulus", "run_oracle_round_at_clients",
           "ClientReporter"]


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


def run_oracle_round_at_clients(oracle: FrequencyOracle, population: int, transport: Transport,
                                rng: np.random.Generator, *, task: str,
                                round: int = 0) -> OracleRound:
    """One round in which every client randomises its own value and contributes its
    support vector itself (a transport that declares ``contributions_at_clients``, the
    network prototype's; the devices run :class:`ClientReporter`). The analyst's side
    sends only who takes part (all ``population`` clients) and counts the support from
    the sum, as :func:`run_oracle_round` does for a vector round.

    Raises:
        ContractError: the transport does not take client contributions or vectors.
        protocol.core.contract.AggregationAborted: the transport aborted.
    """
    if not getattr(transport, "contributions_at_clients", False) \
            or Kind.VECTOR not in transport.kinds:
        raise ContractError(f"transport {transport.name!r} does not take vectors its "
                            "clients compute")
    n = int(population)
    modulus = vector_modulus(n)
    spec = RoundSpec(task, round, Kind.VECTOR, dim=oracle.vector_dim, modulus=modulus)
    result = transport.run_round(spec, AtClients(np.arange(n)), rng)
    if result.release.vector is None:
        raise ContractError("a vector round released no vector")
    counts = oracle.counts_from_vector(result.release.vector)
    return OracleRound(Kind.VECTOR, int(result.release.contributions), counts,
                       f"support vectors of {oracle.vector_dim} entries mod "
                       f"2^{modulus.bit_length() - 1}, computed by the clients", False,
                       result.cost)


class ClientReporter:
    """A device's side of :func:`run_oracle_round_at_clients`: randomise its own value
    with its own randomness and contribute the support vector of its report.

    Args:
        oracle: the public oracle (mechanism, epsilon, domain, hash range).
        values: the values of the users this party holds (``values[i]`` is user
            ``held[i]``'s; out-of-domain values as the oracle takes them).
        held: their population indices.
        rng_for: ``rng_for(user, round)``, the generator of one user's report in one
            round (fresh OS entropy on a device; a seeded stream in a simulation that
            must be checked).

    **Ledger.** A device randomises its value once per job: its first report is kept
    and every later round of the job gets the support vector of that same report. A
    server that asks the same device again (another round number, the same task)
    learns nothing new: it cannot average fresh noise away, and the device's epsilon
    is spent once (:attr:`reports_drawn` counts the randomisations).

    Raises:
        ValueError: ``values`` and ``held`` of different lengths.
    """

    def __init__(self, oracle: FrequencyOracle, values: np.ndarray, held: Any,
                 rng_for: Any) -> None:
        held = [int(u) for u in held]
        if len(held) != len(values):
            raise ValueError("one value per held user")
        self.oracle = oracle
        self._value = dict(zip(held, np.asarray(values).tolist()))
        self._rng_for = rng_for
        self._reports: dict[int, Any] = {}
        #: how many reports were randomised (at most one per held user)
        self.reports_drawn = 0

    @staticmethod
    def seeded(seed: int):  # noqa: ANN205
        """``rng_for`` of a checkable simulation: user ``u``'s report in round ``r``
        comes from the stream ``(seed, u, r)``, so anyone with the seed can recompute
        every device's vector (never for a deployment: the noise is then public)."""
        def rng_for(user: int, round: int) -> np.random.Generator:
            return np.random.default_rng([int(seed), int(user), int(round), 0x6C6470])
        return rng_for

    @staticmethod
    def os_entropy(user: int, round: int) -> np.random.Generator:
        """``rng_for`` of a device: a generator seeded with fresh entropy from the
        operating system for every report."""
        return np.random.default_rng()

    def vector(self, user: int, round: int, dim: int, modulus: int,
               participants: int) -> np.ndarray:
        """User ``user``'s support vector for a round of ``participants`` clients.

        Raises:
            ValueError: a user not held here, or a round that is not this oracle's
                (another vector length, or a modulus other than
                :func:`vector_modulus` of the participants).
        """
        if int(user) not in self._value:
            raise ValueError(f"user {user} is not held here")
        if dim != self.oracle.vector_dim:
            raise ValueError(f"the round takes {dim} entries, {self.oracle.name} vectors "
                             f"have {self.oracle.vector_dim}")
        if modulus != vector_modulus(participants):
            raise ValueError(f"modulus {modulus} is not the one for {participants} "
                             "participants")
        report = self._reports.get(int(user))
        if report is None:
            value = np.asarray([self._value[int(user)]])
            report = self.oracle.randomize(value, self._rng_for(int(user), int(round)))
            self._reports[int(user)] = report
            self.reports_drawn += 1
        return self.oracle.support_vectors(report)[0]
