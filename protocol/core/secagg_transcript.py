"""The transcript of a simulated secure-aggregation session: what happened on the wire.

:class:`protocol.core.secagg_engine.SecAggSimulation` records one
:class:`EnvelopeRecord` per envelope (sender, recipient, round, message type, size), every
client's round-4 reveal, and the messages a party refused; tests and attacks query it
(:meth:`Transcript.revealed_both`, :meth:`Transcript.server_could_unmask`).
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, overload

__all__ = ["EnvelopeRecord", "EnvelopeLog", "Transcript"]


@dataclass(frozen=True, slots=True)
class EnvelopeRecord:
    """One envelope as the transcript keeps it (no payload)."""

    sender: int
    recipient: int
    round: int
    kind: str
    size: int


class EnvelopeLog:
    """A list of :class:`EnvelopeRecord` kept in columns: 19 bytes an envelope (sender,
    recipient, round, message type code, size) instead of a record object's 100 or so,
    for a simulation that logs five envelopes per client. Reads (iteration, indexing,
    ``len``) give :class:`EnvelopeRecord` objects; :meth:`append` takes one."""

    __slots__ = ("_sender", "_recipient", "_round", "_kind", "_size", "_kinds", "_codes")

    def __init__(self, records: Iterable[EnvelopeRecord] = ()) -> None:
        self._sender = array("i")
        self._recipient = array("i")
        self._round = array("h")
        self._kind = array("B")
        self._size = array("q")
        self._kinds: list[str] = []
        self._codes: dict[str, int] = {}
        for r in records:
            self.append(r)

    def add(self, sender: int, recipient: int, round_no: int, kind: str, size: int) -> None:
        """Log one envelope."""
        code = self._codes.get(kind)
        if code is None:
            if len(self._kinds) > 255:
                raise ValueError("more than 256 message types in one transcript")
            code = self._codes[kind] = len(self._kinds)
            self._kinds.append(kind)
        self._sender.append(sender)
        self._recipient.append(recipient)
        self._round.append(round_no)
        self._kind.append(code)
        self._size.append(size)

    def append(self, record: EnvelopeRecord) -> None:
        """Log ``record``."""
        self.add(record.sender, record.recipient, record.round, record.kind, record.size)

    def __len__(self) -> int:
        return len(self._size)

    def _record(self, i: int) -> EnvelopeRecord:
        return EnvelopeRecord(self._sender[i], self._recipient[i], self._round[i],
                              self._kinds[self._kind[i]], self._size[i])

    @overload
    def __getitem__(self, i: int) -> EnvelopeRecord: ...
    @overload
    def __getitem__(self, i: slice) -> list[EnvelopeRecord]: ...

    def __getitem__(self, i: int | slice) -> EnvelopeRecord | list[EnvelopeRecord]:
        if isinstance(i, slice):
            return [self._record(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("envelope index out of range")
        return self._record(i % n)

    def __iter__(self) -> Iterator[EnvelopeRecord]:
        kinds = self._kinds
        for s, r, rn, k, z in zip(self._sender, self._recipient, self._round, self._kind,
                                  self._size):
            yield EnvelopeRecord(s, r, rn, kinds[k], z)


@dataclass
class Transcript:
    """What happened on the wire, queryable by tests."""

    envelopes: EnvelopeLog = field(default_factory=EnvelopeLog)
    #: client -> (peers whose b-share it sent, peers whose s_sk-share it sent), each
    #: sorted (tuples, not sets: a simulation keeps one pair per client)
    reveals: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    #: messages the server or a client refused: (recipient, round, reason text)
    rejected: list[tuple[int, int, str]] = field(default_factory=list)
    threshold: int = 0

    def record(self, env: Any, kind: str) -> None:
        """Record one :class:`~protocol.core.secagg_engine.Envelope` of type ``kind``."""
        self.envelopes.add(env.sender, env.recipient, env.round, kind, len(env.data))

    def note_reveal(self, client: int, b_owners: Any, s_owners: Any) -> None:
        """Record that ``client`` sent the ``b``-shares of ``b_owners`` and the
        ``s^SK``-shares of ``s_owners`` (its round-4 message)."""
        b, s = self.reveals.get(client, ((), ()))
        if b or s:  # a second message of the same client (tests and attacks): merge
            self.reveals[client] = (tuple(sorted({*b, *b_owners})),
                                    tuple(sorted({*s, *s_owners})))
        else:
            self.reveals[client] = (tuple(sorted(b_owners)), tuple(sorted(s_owners)))

    def revealed_both(self, client: int, peer: int) -> bool:
        """Did ``client`` ever send both a ``b``-share and an ``s_sk``-share of ``peer``?"""
        b, s = self.reveals.get(client, (set(), set()))
        return peer in b and peer in s

    def b_share_holders(self, peer: int) -> set[int]:
        return {c for c, (b, _) in self.reveals.items() if peer in b}

    def s_share_holders(self, peer: int) -> set[int]:
        return {c for c, (_, s) in self.reveals.items() if peer in s}

    def server_could_unmask(self, peer: int) -> bool:
        """Did the clients, together, reveal ``t`` shares of *both* secrets of ``peer``
        (enough to strip every mask off its input)?"""
        t = self.threshold
        return len(self.b_share_holders(peer)) >= t and len(self.s_share_holders(peer)) >= t
