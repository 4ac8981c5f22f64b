"""The network layer's own messages (tags 200..209): the handshake around a session,
and the :class:`Task` that opens each round of a job (a whole mechanism run).

A client opens a TLS connection and says :class:`Hello` (who it is); the server answers
:class:`Welcome` (the whole session configuration, including this attempt's fresh
server nonce) or :class:`Bye` (refused, with a reason). Every session ends with a
:class:`Bye` naming its outcome. Between the two, the connection carries the
secure-aggregation messages of :mod:`secagg.messages`, framed by
:mod:`protocol.core.net.frames`.

The client never trusts the Welcome's parameters: it derives the parameters its own
threat model requires (:class:`protocol.core.net.session.NetSessionSpec`) and refuses a
session that differs (``session_parameters_rejected``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.core import codec
from protocol.core.codec import Array, Bin, Bool, Int, Record, SessionLimits, Str
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.state import MAX_PARTICIPANTS

__all__ = ["PROTOCOL_VERSION", "Hello", "Welcome", "Bye", "MAX_CONTEXT_BYTES",
           "MAX_REASON_BYTES", "hello_limits", "welcome_limits", "bye_limits", "BYE_STATUSES",
           "Task", "task_limits", "AnalyzerHello", "BatchReceipt", "analyzer_limits",
           "hello_or_analyzer_limits", "SampleProof", "JOB_INSTANCE_BYTES"]

#: the network protocol's version (a client and server of different versions refuse
#: each other with ``version_mismatch``)
PROTOCOL_VERSION = 1
MAX_CONTEXT_BYTES = 64
MAX_REASON_BYTES = 160
MAX_GRAPH_BYTES = 16
#: ``completed``: the server released the sum; ``aborted``: the session ended without
#: one (reason given); ``refused``: this connection was not admitted (reason given)
#: ``finished``: a job (several sessions on one connection) is over
BYE_STATUSES = ("completed", "aborted", "refused", "finished")
MAX_TASK_NAME_BYTES = 64
#: the longest candidate string a Task may carry (bytes of UTF-8)
MAX_CANDIDATE_BYTES = 256
#: bytes of a committee job's instance id (:class:`SampleProof`)
JOB_INSTANCE_BYTES = 16


def _int(v: Any, name: str, lo: int = 0, hi: int = (1 << 64) - 1) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise ValueError(f"{name} must be an int in [{lo}, {hi}]")
    return v


@dataclass(frozen=True, slots=True)
class Hello:
    """Client to server, first frame: protocol version and roster position."""

    TAG: ClassVar[int] = 200
    version: int
    client: int

    def __post_init__(self) -> None:
        _int(self.version, "version", 0, 255)
        _int(self.client, "client", 0, MAX_PARTICIPANTS - 1)

    def to_wire(self) -> list[Any]:
        return [self.version, self.client]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "Hello":
        if len(fields) != 2:
            raise ValueError("Hello has 2 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class Welcome:
    """Server to client: the session this connection joins.

    ``modulus_minus_one`` carries ``R - 1`` (``R`` may be ``2**64``, which msgpack's
    unsigned integers cannot hold). ``stage_ms`` is the server's per-stage deadline.
    """

    TAG: ClassVar[int] = 201
    version: int
    n: int
    degree: int
    threshold: int
    graph: str
    malicious: bool
    dim: int
    modulus_minus_one: int
    context: bytes
    server_nonce: bytes
    stage_ms: int

    def __post_init__(self) -> None:
        _int(self.version, "version", 0, 255)
        _int(self.n, "n", 2, MAX_PARTICIPANTS)
        _int(self.degree, "degree", 1, MAX_PARTICIPANTS)
        _int(self.threshold, "threshold", 1, MAX_PARTICIPANTS)
        if type(self.graph) is not str or self.graph not in ("complete", "harary"):
            raise ValueError("graph must be 'complete' or 'harary'")
        if type(self.malicious) is not bool:
            raise ValueError("malicious must be a bool")
        _int(self.dim, "dim", 1, 1 << 40)
        _int(self.modulus_minus_one, "modulus_minus_one", 1)
        if type(self.context) is not bytes or len(self.context) > MAX_CONTEXT_BYTES:
            raise ValueError(f"context must be at most {MAX_CONTEXT_BYTES} bytes")
        if type(self.server_nonce) is not bytes or len(self.server_nonce) != FRESH_NONCE_BYTES:
            raise ValueError(f"server_nonce must be {FRESH_NONCE_BYTES} bytes")
        _int(self.stage_ms, "stage_ms", 1, 1 << 32)

    @property
    def modulus(self) -> int:
        return self.modulus_minus_one + 1

    def to_wire(self) -> list[Any]:
        return [self.version, self.n, self.degree, self.threshold, self.graph, self.malicious,
                self.dim, self.modulus_minus_one, self.context, self.server_nonce,
                self.stage_ms]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "Welcome":
        if len(fields) != 11:
            raise ValueError("Welcome has 11 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class Bye:
    """Either side, last frame: the outcome and, unless completed, why."""

    TAG: ClassVar[int] = 202
    status: str
    reason: str

    def __post_init__(self) -> None:
        if type(self.status) is not str or self.status not in BYE_STATUSES:
            raise ValueError(f"status must be one of {BYE_STATUSES}")
        if type(self.reason) is not str or len(self.reason.encode()) > MAX_REASON_BYTES:
            raise ValueError(f"reason must be a string of at most {MAX_REASON_BYTES} bytes")

    def to_wire(self) -> list[Any]:
        return [self.status, self.reason]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "Bye":
        if len(fields) != 2:
            raise ValueError("Bye has 2 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class Task:
    """Server to each sampled client of a job, opening one round: the round's public
    specification and the sampled clients (population positions, ascending), which fix
    the session's roster and positions. A vote round names its candidate strings
    (``dim`` 0); a vector round has no candidates and names ``dim`` and ``R - 1``
    (``modulus_minus_one``). A sampled client computes its own contribution and joins
    the round's session, whose Welcome follows. ``theta`` 0 means no threshold.
    """

    TAG: ClassVar[int] = 203
    job: str
    round: int
    candidates: tuple[str, ...]
    theta: int
    reveal_counts: bool
    min_participants: int
    dim: int
    modulus_minus_one: int
    sample: tuple[int, ...]

    def __post_init__(self) -> None:
        if type(self.job) is not str or not 0 < len(self.job.encode()) <= MAX_TASK_NAME_BYTES:
            raise ValueError(f"job must be a name of 1..{MAX_TASK_NAME_BYTES} bytes")
        _int(self.round, "round", 0, 1 << 32)
        object.__setattr__(self, "candidates", tuple(self.candidates))
        object.__setattr__(self, "sample", tuple(self.sample))
        if any(type(c) is not str or len(c.encode()) > MAX_CANDIDATE_BYTES
               for c in self.candidates):
            raise ValueError(f"candidates must be strings of at most {MAX_CANDIDATE_BYTES} "
                             "bytes")
        if len(set(self.candidates)) != len(self.candidates):
            raise ValueError("candidates must be distinct")
        _int(self.dim, "dim", 0, 1 << 40)
        _int(self.modulus_minus_one, "modulus_minus_one", 0)
        if bool(self.candidates) == bool(self.dim):
            raise ValueError("a round has candidates (a vote round) or dim >= 1 (a vector "
                             "round), not both or neither")
        if self.dim and self.modulus_minus_one < 1:
            raise ValueError("a vector round needs a modulus >= 2")
        _int(self.theta, "theta", 0, 1 << 32)
        if type(self.reveal_counts) is not bool:
            raise ValueError("reveal_counts must be a bool")
        _int(self.min_participants, "min_participants", 1, MAX_PARTICIPANTS)
        for c in self.sample:
            _int(c, "sample entry", 0, (1 << 32) - 1)
        if any(a >= b for a, b in zip(self.sample, self.sample[1:])):
            raise ValueError("the sample must be strictly ascending")

    def to_wire(self) -> list[Any]:
        return [self.job, self.round, list(self.candidates), self.theta, self.reveal_counts,
                self.min_participants, self.dim, self.modulus_minus_one, list(self.sample)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "Task":
        if len(fields) != 9:
            raise ValueError("Task has 9 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class SampleProof:
    """Server to each sampled device of a committee job, right before the round's
    :class:`Task`: the seed the committee's beacon produced for this round and both
    helpers' Ed25519 signatures on it
    (:func:`protocol.core.sample_beacon.endorsement`), which bind the job instance
    (``instance``, 16 bytes: the job the helpers joined, so a proof of an earlier job of
    the same task and round is refused). The device recomputes the sample from the seed
    and refuses a Task whose sample is another
    (:func:`protocol.core.sample_beacon.check_endorsed_sample`)."""

    TAG: ClassVar[int] = 207
    job: str
    round: int
    seed: bytes
    signatures: tuple[bytes, ...]
    instance: bytes

    def __post_init__(self) -> None:
        if type(self.job) is not str or not 0 < len(self.job.encode()) <= MAX_TASK_NAME_BYTES:
            raise ValueError(f"job must be a name of 1..{MAX_TASK_NAME_BYTES} bytes")
        _int(self.round, "round", 0, 1 << 32)
        if type(self.seed) is not bytes or len(self.seed) != 32:
            raise ValueError("seed must be 32 bytes")
        if type(self.signatures) not in (tuple, list):
            raise ValueError("signatures must be two 64-byte Ed25519 signatures")
        object.__setattr__(self, "signatures", tuple(self.signatures))
        if len(self.signatures) != 2 or any(type(g) is not bytes or len(g) != 64
                                            for g in self.signatures):
            raise ValueError("signatures must be two 64-byte Ed25519 signatures")
        if type(self.instance) is not bytes or len(self.instance) != JOB_INSTANCE_BYTES:
            raise ValueError(f"instance must be {JOB_INSTANCE_BYTES} bytes")

    def to_wire(self) -> list[Any]:
        return [self.job, self.round, self.seed, list(self.signatures), self.instance]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "SampleProof":
        if len(fields) != 5:
            raise ValueError("SampleProof has 5 fields")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class AnalyzerHello:
    """Analyzer to shuffler, first frame: the analyzer waits for the batch."""

    TAG: ClassVar[int] = 204
    version: int

    def __post_init__(self) -> None:
        _int(self.version, "version", 0, 255)

    def to_wire(self) -> list[Any]:
        return [self.version]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "AnalyzerHello":
        if len(fields) != 1:
            raise ValueError("AnalyzerHello has 1 field")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class BatchReceipt:
    """Shuffler to analyzer, after the batch: the analyzer's part of the receipt
    (:func:`shuffler.analyzer_receipt`: reports accepted and forwarded, the rule), never
    anything about crowds below the threshold."""

    TAG: ClassVar[int] = 205
    accepted: int
    forwarded: int
    rule: str

    def __post_init__(self) -> None:
        _int(self.accepted, "accepted", 0, 1 << 40)
        _int(self.forwarded, "forwarded", 0, 1 << 40)
        if self.forwarded > self.accepted:
            raise ValueError("forwarded exceeds accepted")
        if type(self.rule) is not str or len(self.rule.encode()) > MAX_REASON_BYTES:
            raise ValueError(f"rule must be a string of at most {MAX_REASON_BYTES} bytes")

    def to_wire(self) -> list[Any]:
        return [self.accepted, self.forwarded, self.rule]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "BatchReceipt":
        if len(fields) != 3:
            raise ValueError("BatchReceipt has 3 fields")
        return cls(*fields)


_U8 = Int(0, 255)
_HELLO = Record((_U8, Int(0, MAX_PARTICIPANTS - 1)))
_WELCOME = Record((_U8, Int(2, MAX_PARTICIPANTS), Int(1, MAX_PARTICIPANTS),
                   Int(1, MAX_PARTICIPANTS), Str(1, MAX_GRAPH_BYTES), Bool(), Int(1, 1 << 40),
                   Int(1), Bin(0, MAX_CONTEXT_BYTES), Bin(FRESH_NONCE_BYTES, FRESH_NONCE_BYTES),
                   Int(1, 1 << 32)))
_BYE = Record((Str(1, 16), Str(0, MAX_REASON_BYTES)))

codec.register(Hello, _HELLO)
codec.register(Welcome, _WELCOME)
codec.register(Bye, _BYE)
_ANALYZER_HELLO = Record((_U8,))
_BATCH_RECEIPT = Record((Int(0, 1 << 40), Int(0, 1 << 40), Str(0, MAX_REASON_BYTES)))
codec.register(AnalyzerHello, _ANALYZER_HELLO)
codec.register(BatchReceipt, _BATCH_RECEIPT)


def _task_shape(population: int, max_candidates: int, max_dim: int) -> Record:
    return Record((Str(1, MAX_TASK_NAME_BYTES), Int(0, 1 << 32),
                   Array(Str(0, MAX_CANDIDATE_BYTES), max_candidates), Int(0, 1 << 32),
                   Bool(), Int(1, MAX_PARTICIPANTS), Int(0, max_dim), Int(0),
                   Array(Int(0, max(population - 1, 0)), min(population, MAX_PARTICIPANTS))))


codec.register(Task, _task_shape(1 << 32, 1 << 21, 1 << 40))
_SAMPLE_PROOF = Record((Str(1, MAX_TASK_NAME_BYTES), Int(0, 1 << 32), Bin(32, 32),
                        Array(Bin(64, 64), 2, 2),
                        Bin(JOB_INSTANCE_BYTES, JOB_INSTANCE_BYTES)))
codec.register(SampleProof, _SAMPLE_PROOF)


def task_limits(population: int, max_candidates: int, max_dim: int = 1 << 24, *,
                proof: bool = False) -> SessionLimits:
    """What a client of a job accepts between rounds: a Task for a population of
    ``population`` with at most ``max_candidates`` candidates or vectors of at most
    ``max_dim`` entries, or a Bye; with ``proof`` (a committee job under the malicious
    model) also the :class:`SampleProof` that precedes each Task."""
    shapes = {Task.TAG: _task_shape(population, max_candidates, max_dim), Bye.TAG: _BYE}
    if proof:
        shapes[SampleProof.TAG] = _SAMPLE_PROOF
    return SessionLimits(shapes)


def hello_limits() -> SessionLimits:
    """What a server accepts before a client has said who it is: a Hello only."""
    return SessionLimits({Hello.TAG: _HELLO})


def welcome_limits() -> SessionLimits:
    """What a client accepts as the server's first frame: a Welcome or a Bye."""
    return SessionLimits({Welcome.TAG: _WELCOME, Bye.TAG: _BYE})


def bye_limits() -> SessionLimits:
    """The Bye alone (merged into each side's session limits)."""
    return SessionLimits({Bye.TAG: _BYE})


def analyzer_limits(batch_shape: Record) -> SessionLimits:
    """What an analyzer accepts from the shuffler: the batch (its shape pinned to the
    round by :func:`protocol.core.wire_shuffler.session_limits`), the receipt, a Bye."""
    from shuffler.messages import ShuffledBatch

    return SessionLimits({ShuffledBatch.TAG: batch_shape, BatchReceipt.TAG: _BATCH_RECEIPT,
                          Bye.TAG: _BYE})


def hello_or_analyzer_limits() -> SessionLimits:
    """What a shuffler accepts first on a connection: a client's Hello or an analyzer's."""
    return SessionLimits({Hello.TAG: _HELLO, AnalyzerHello.TAG: _ANALYZER_HELLO})
