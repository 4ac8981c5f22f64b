"""The aggregation contract: the one interface every mechanism uses and every
transport fulfils.

Theory of operation
-------------------
A mechanism describes one aggregation round with a :class:`RoundSpec` (what is
aggregated and what may be released), hands the transport a batch of client
contributions, and receives a :class:`RoundResult`:

* ``release``: only what the release rule lets the analyst see (for a thresholded
  vote round: the candidates with at least ``theta`` votes and their counts);
* ``views``: what each party of the transport saw, keyed by party name, so that
  adversarial studies can inspect it (a plaintext server sees every vote; a
  secure-aggregation server sees masked vectors and the sum; a shuffler sees opaque
  envelopes);
* ``cost``: CPU seconds per party and bytes moved.

Contributions are *batches* (numpy arrays), never one Python object per client, so
that 10^6-client simulations stay fast. Three kinds exist:

* votes: ``Votes.choice[i]`` is the index of client ``i``'s candidate in
  ``spec.candidates`` or ``ABSTAIN`` (-1). An abstention looks like any other
  contribution to every party but the client (a zero vector under secure
  aggregation, a dummy report under the shuffler);
* vectors: ``Vectors.values`` is an ``(n, dim)`` array of integers mod
  ``spec.modulus``; the release is their modular sum;
* reports: ``Reports.payloads`` are opaque byte strings of one fixed size; the
  release is the shuffled multiset.

A transport run with the same ``rng`` seed releases the same thing as the plaintext
reference: the contract test suite checks this for every transport. (A committee that
draws a mechanism's samples with its beacon, :meth:`Transport.draw_sample`, does so from
``rng`` only in its deterministic-simulation mode; with OS randomness nobody can predict
its samples, so the release is the plaintext one on the samples it drew.)
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Mapping

import numpy as np

from protocol.core.sample_beacon import (
    Sample, SampleRejected, beacon_context, run_beacon, sample_users, server_drawn,
)

ABSTAIN = -1

__all__ = [
    "ABSTAIN", "ContractError", "AggregationAborted", "Kind", "RoundSpec", "Votes",
    "Vectors", "Reports", "AtClients", "Release", "Cost", "RoundResult", "Transport",
    "threshold_counts", "pick_kind", "plaintext_transport", "Sample", "SampleRejected",
    "SamplesThroughInner",
]


class ContractError(ValueError):
    """A round specification or contribution batch that violates the contract."""


class AggregationAborted(RuntimeError):
    """The transport could not produce a release (too few participants, an attack
    detected, ...). ``reason`` is a short machine-readable string."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Kind(str, Enum):
    VOTE = "vote"
    VECTOR = "vector"
    REPORT = "report"


@dataclass(frozen=True, slots=True)
class RoundSpec:
    """Public description of one aggregation round.

    Attributes:
        task: name of the computation (bound into every transport's session).
        round: round number within the task.
        kind: votes, vectors or reports.
        candidates: for votes, the public candidate items (strings).
        theta: for votes, release only candidates with at least ``theta`` votes;
            ``None`` releases every candidate's count (for mechanisms that add
            their own noise).
        reveal_counts: for votes, whether the release carries the count of each
            released candidate (TrieHH++) or only which candidates passed the
            rule (TrieHH: Theorem 1 covers membership only).
        dim: for vectors, the vector length.
        modulus: for vectors, the arithmetic modulus (2 <= modulus <= 2**64).
        report_size: for reports, the fixed payload size in bytes.
        min_participants: the round aborts with fewer contributions.
    """

    task: str
    round: int
    kind: Kind
    candidates: tuple[str, ...] = ()
    theta: int | None = None
    reveal_counts: bool = True
    dim: int = 0
    modulus: int = 1 << 32
    report_size: int = 0
    min_participants: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Kind):
            raise ContractError(f"kind must be a Kind, not {self.kind!r}")
        if not self.task or not isinstance(self.task, str):
            raise ContractError("task must be a non-empty string")
        if not isinstance(self.round, int) or self.round < 0:
            raise ContractError("round must be a non-negative int")
        if self.min_participants < 1:
            raise ContractError("min_participants must be >= 1")
        if self.kind is Kind.VOTE:
            if not self.candidates:
                raise ContractError("a vote round needs at least one candidate")
            if len(set(self.candidates)) != len(self.candidates):
                raise ContractError("candidates must be distinct")
            if self.theta is not None and self.theta < 1:
                raise ContractError("theta must be >= 1 or None")
        elif self.kind is Kind.VECTOR:
            if self.dim < 1:
                raise ContractError("a vector round needs dim >= 1")
            if not 2 <= self.modulus <= 1 << 64:
                raise ContractError("modulus must be in [2, 2**64]")
        elif self.kind is Kind.REPORT:
            if self.report_size < 1:
                raise ContractError("a report round needs report_size >= 1")

    @property
    def domain_size(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True, slots=True)
class Votes:
    """One vote per client: an index into ``spec.candidates``, or ``ABSTAIN``.

    ``sample``: when the voters are a sample the mechanism drew with
    :meth:`Transport.draw_sample`, that sample (``choice[i]`` is the vote of
    ``sample.users[i]``); a transport with a committee checks it as the devices would
    (:func:`protocol.core.sample_beacon.check_sample`)."""

    choice: np.ndarray
    sample: Sample | None = None

    def validate(self, spec: RoundSpec) -> np.ndarray:
        c = np.asarray(self.choice)
        if spec.kind is not Kind.VOTE:
            raise ContractError("votes given to a non-vote round")
        if c.ndim != 1 or not np.issubdtype(c.dtype, np.integer):
            raise ContractError("Votes.choice must be a 1-d integer array")
        if self.sample is not None and np.asarray(self.sample.users).shape != c.shape:
            raise ContractError("Votes.sample must name one user per vote")
        if c.size and (c.min() < ABSTAIN or c.max() >= spec.domain_size):
            raise ContractError("a vote index is outside the candidate set")
        return c.astype(np.int64, copy=False)


@dataclass(frozen=True, slots=True)
class Vectors:
    """One integer vector per client, entries in ``[0, spec.modulus)``."""

    values: np.ndarray

    def validate(self, spec: RoundSpec) -> np.ndarray:
        v = np.asarray(self.values)
        if spec.kind is not Kind.VECTOR:
            raise ContractError("vectors given to a non-vector round")
        if v.ndim != 2 or v.shape[1] != spec.dim or not np.issubdtype(v.dtype, np.integer):
            raise ContractError(f"Vectors.values must be an (n, {spec.dim}) integer array")
        if v.size and (v.min() < 0 or int(v.max()) >= spec.modulus):
            raise ContractError("a vector entry is outside [0, modulus)")
        return v.astype(np.uint64, copy=False)


@dataclass(frozen=True, slots=True)
class Reports:
    """One opaque fixed-size report per client."""

    payloads: tuple[bytes, ...]

    def validate(self, spec: RoundSpec) -> tuple[bytes, ...]:
        if spec.kind is not Kind.REPORT:
            raise ContractError("reports given to a non-report round")
        payloads = tuple(self.payloads)
        # C-level passes over the batch (10^6 reports): exact type bytes, one size
        if payloads and (set(map(type, payloads)) != {bytes}
                         or set(map(len, payloads)) != {spec.report_size}):
            raise ContractError(f"every report must be {spec.report_size} bytes")
        return payloads


@dataclass(frozen=True, slots=True)
class AtClients:
    """Contributions the clients compute themselves: ``users`` are the sampled clients
    (distinct indices into the population); each computes its own vote on
    ``spec.candidates`` (a vote round) or its own vector (a vector round) from data
    only it holds, so the mechanism's side of the round never sees one. Only a
    transport that declares :attr:`Transport.contributions_at_clients` takes them (the
    network prototype's)."""

    users: np.ndarray

    def validate(self, spec: RoundSpec, population: int) -> np.ndarray:
        u = np.asarray(self.users)
        if spec.kind is Kind.REPORT:
            raise ContractError("clients compute votes or vectors here, not reports")
        if u.ndim != 1 or not np.issubdtype(u.dtype, np.integer):
            raise ContractError("AtClients.users must be a 1-d integer array")
        if u.size and (u.min() < 0 or u.max() >= population):
            raise ContractError(f"a sampled user is outside the population of {population}")
        if np.unique(u).size != u.size:
            raise ContractError("sampled users must be distinct")
        return u.astype(np.int64, copy=False)


Contributions = Votes | Vectors | Reports | AtClients


@dataclass(frozen=True, slots=True)
class Release:
    """What the analyst learns from one round, and nothing more.

    The release enforces the round's rule itself, whichever transport built it:
    a vote release keeps only candidates at or above ``theta``, and drops the counts
    when ``spec.reveal_counts`` is false, so no transport can hand the analyst more
    than the specification allows.

    Attributes:
        spec: the round.
        contributions: how many contributions (votes and abstentions alike) were
            aggregated; abstentions are not distinguishable from votes.
        counts: vote rounds with ``reveal_counts``: candidate -> count, only for
            candidates that pass the release rule; otherwise ``None``.
        items: vote rounds: the candidates that pass the release rule, sorted.
        vector: vector rounds: the modular sum.
        reports: report rounds: the payloads in shuffled order.

    Raises:
        ContractError: a released candidate that is not one of the round's, or a
            count below ``theta``.
    """

    spec: RoundSpec
    contributions: int
    counts: Mapping[str, int] | None = None
    vector: np.ndarray | None = None
    reports: tuple[bytes, ...] | None = None
    items: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.spec.kind is not Kind.VOTE or self.counts is None:
            return
        theta = self.spec.theta
        allowed = set(self.spec.candidates)
        for cand, count in self.counts.items():
            if cand not in allowed:
                raise ContractError(f"released {cand!r}, which is not a candidate")
            if theta is not None and int(count) < theta:
                raise ContractError(f"released {cand!r} with {int(count)} votes, below "
                                    f"theta = {theta}")
        object.__setattr__(self, "items", tuple(sorted(self.counts)))
        if not self.spec.reveal_counts:
            object.__setattr__(self, "counts", None)

    def same_as(self, other: "Release") -> bool:
        """Equality of released content (report order is ignored)."""
        if self.spec != other.spec or self.contributions != other.contributions:
            return False
        if dict(self.counts or {}) != dict(other.counts or {}) or self.items != other.items:
            return False
        if (self.vector is None) != (other.vector is None):
            return False
        if self.vector is not None and not np.array_equal(self.vector, other.vector):
            return False
        return sorted(self.reports or ()) == sorted(other.reports or ())


@dataclass(slots=True)
class Cost:
    """CPU seconds per party and bytes on the wire for one round: ``bytes_up`` from the
    clients, ``bytes_down`` to them, ``bytes_members`` between the members of a
    committee (the server's relays to the helpers included) and ``bytes_sent`` by each
    member, where a transport counts them apart."""

    cpu_seconds: dict[str, float] = field(default_factory=dict)
    bytes_up: int = 0
    bytes_down: int = 0
    bytes_members: int = 0
    #: bytes each committee member sent the others (where a transport counts them)
    bytes_sent: dict[str, int] = field(default_factory=dict)

    def add(self, other: "Cost") -> None:
        for k, v in other.cpu_seconds.items():
            self.cpu_seconds[k] = self.cpu_seconds.get(k, 0.0) + v
        self.bytes_up += other.bytes_up
        self.bytes_down += other.bytes_down
        self.bytes_members += other.bytes_members
        for k, b in other.bytes_sent.items():
            self.bytes_sent[k] = self.bytes_sent.get(k, 0) + b


@dataclass(slots=True)
class RoundResult:
    release: Release
    views: dict[str, dict[str, Any]]
    cost: Cost


def threshold_counts(spec: RoundSpec, counts: np.ndarray) -> dict[str, int]:
    """Apply a vote round's release rule to a full count vector."""
    counts = np.asarray(counts)
    if spec.theta is None:
        keep = np.arange(spec.domain_size)
    else:
        keep = np.flatnonzero(counts >= spec.theta)
    return {spec.candidates[i]: int(counts[i]) for i in keep}


class Transport(abc.ABC):
    """One way of aggregating contributions. Implementations live in
    ``protocol.core.transports``; mechanisms only ever see this interface."""

    name: ClassVar[str]
    #: the contribution kinds :meth:`run_round` accepts; a mechanism chooses its
    #: encoding from this declaration (:func:`pick_kind`), never from the name
    kinds: ClassVar[frozenset[Kind]] = frozenset()
    #: report rounds reach the analyst as an anonymous multiset: no party that sees
    #: which client sent which report is needed to compute the release (a shuffler
    #: that does not collude with the analyst). Only then may a mechanism claim
    #: privacy amplification by shuffling for its report rounds.
    anonymous_reports: ClassVar[bool] = False
    #: vote and vector rounds take :class:`AtClients` (who is sampled) instead of
    #: :class:`Votes` or :class:`Vectors`: the clients hold the data and compute their
    #: contributions themselves
    contributions_at_clients: ClassVar[bool] = False
    #: corrupted clients of a simulation (:class:`protocol.core.corruption.
    #: CorruptClients`), ``None`` for none; what they did is logged per round in
    #: ``corruption_log`` (:class:`protocol.core.corruption.CorruptionRecord`)
    corrupt: Any = None
    corruption_log: Any = None

    @abc.abstractmethod
    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        """Aggregate one round.

        Args:
            spec: the public round description.
            contributions: one batch matching ``spec.kind``.
            rng: randomness for the simulation (sampling, shuffling, keys when the
                transport is in deterministic-simulation mode).

        Raises:
            ContractError: the contributions do not fit the spec.
            AggregationAborted: the round could not complete.
        """

    def start_job(self, task: str) -> None:
        """A mechanism starts a new run (a job) of ``task``: its rounds count from the
        start again. Nothing to do here; a committee forgets the beacons of the task's
        earlier job (and counts the jobs started: a server that restarts a job to redraw
        a sample is in every member's view)."""

    def draw_sample(self, task: str, round_no: int, population: int, size: int,
                    rng: np.random.Generator) -> Sample:
        """A uniform ``size``-subset of ``range(population)`` for round ``round_no`` of
        ``task`` (:mod:`protocol.core.sample_beacon`). Here the server draws every
        beacon value from ``rng``: it picks the sample. A transport with a committee
        overrides this so that the server, committing before it sees the helpers'
        values, cannot; with the same ``rng`` both give the same sample in simulation.

        Raises:
            ValueError: ``size`` not in ``1..population``.
            AggregationAborted: a committee member refused the beacon.
        """
        context = beacon_context(task, round_no, population, size)
        beacon = run_beacon(context, server_drawn(rng))
        return Sample(sample_users(beacon.seed, population, size), beacon, population,
                      committee=False)


class SamplesThroughInner:
    """For a transport that wraps another (``inner``): draw each round's sample through
    the inner transport -- over a committee, its beacon -- and keep it in ``samples``,
    keyed by ``(task, round)``."""

    inner: Transport
    samples: dict[tuple[str, int], Sample]

    def start_job(self, task: str) -> None:
        self.inner.start_job(task)

    def draw_sample(self, task: str, round_no: int, population: int, size: int,
                    rng: np.random.Generator) -> Sample:
        drawn = self.inner.draw_sample(task, round_no, population, size, rng)
        self.samples[(task, int(round_no))] = drawn
        return drawn


def pick_kind(transport: Transport, preferred: "tuple[Kind, ...] | list[Kind]") -> Kind:
    """The first of a mechanism's ``preferred`` contribution kinds that ``transport``
    declares in :attr:`Transport.kinds`.

    Raises:
        ContractError: the transport takes none of them.
    """
    for kind in preferred:
        if kind in transport.kinds:
            return kind
    offered = ", ".join(sorted(k.value for k in transport.kinds)) or "none"
    wanted = ", ".join(k.value for k in preferred)
    raise ContractError(f"transport {transport.name!r} takes {offered}; "
                        f"the mechanism can send {wanted}")


def plaintext_transport() -> Transport:
    """The plaintext reference transport (a trusted aggregator that sees every
    contribution): the default of every mechanism that takes a transport, so that
    mechanisms need import nothing from ``protocol`` but this contract."""
    from protocol.core.transports.plain import PlainTransport

    return PlainTransport()
