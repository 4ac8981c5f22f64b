"""The transcript of a simulated secure-aggregation session: what happened on the wire.

:class:`protocol.core.secagg_engine.SecAggSimulation` records one
:class:`EnvelopeRecord` per envelope (sender, recipient, round, message type, size), every
client's round-4 reveal, and the messages a party refused; tests and attacks query it
(:meth:`Transcript.revealed_both`, :meth:`Transcript.server_could_unmask`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EnvelopeRecord", "Transcript"]


@dataclass(frozen=True, slots=True)
class EnvelopeRecord:
    """One envelope as the transcript keeps it (no payload)."""

    sender: int
    recipient: int
    round: int
    kind: str
    size: int


@dataclass
class Transcript:
    """What happened on the wire, queryable by tests."""

    envelopes: list[EnvelopeRecord] = field(default_factory=list)
    #: client -> (peers whose b-share it sent, peers whose s_sk-share it sent), each
    #: sorted (tuples, not sets: a simulation keeps one pair per client)
    reveals: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    #: messages the server or a client refused: (recipient, round, reason text)
    rejected: list[tuple[int, int, str]] = field(default_factory=list)
    threshold: int = 0

    def record(self, env: Any, kind: str) -> None:
        """Record one :class:`~protocol.core.secagg_engine.Envelope` of type ``kind``."""
        self.envelopes.append(EnvelopeRecord(env.sender, env.recipient, env.round, kind,
                                             len(env.data)))

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
