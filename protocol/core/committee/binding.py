"""Binding the committee's inputs to what the clients sent: a replica of the
secure-aggregation server, and the replay audit of a helper.

Theory of operation
-------------------
In the threshold transport's malicious-model rounds the committee holds the replicated
sharing ``x = S - R1 - R2`` over ``F_p`` with components ``c0 = S`` (held by the server
and helper 2), ``c1 = -R1`` (server and helper 1), ``c2 = -R2`` (helper 1 and helper 2).
Each party that holds a component derives it *itself* from data bound to the clients'
messages, so the copies of the honest parties -- which define ``x`` in the verified
comparison (:mod:`protocol.core.committee.verified`) -- are the true ones whatever a
corrupted member does:

* ``S``: the server unmasks it; helper 2 runs a **replica** of the secure-aggregation
  server (:class:`MirroredServer`) that takes the same client messages and closes the
  same rounds, and unmasks ``S`` itself. Both copies enter the committee; if the server
  computes with anything else, the verified comparison aborts. Every client message
  that determines ``S`` is checked by the replica as by the server.
* ``R_h``: helper ``h`` draws a 32-byte seed ``sigma_h`` from the OS and derives from it
  every random choice of its secure-aggregation client (key pairs, nonces, Shamir
  polynomials, its self-mask seed) and its blinding vector ``R_h``
  (:func:`helper_blind`). It hands ``sigma_h`` to its **auditor** (helper 1 to the
  server, helper 2 to helper 1), who replays the helper's client state machine on the
  messages the server sent it and checks that every message it produces is the one the
  server received (:func:`audit_helper`; signatures are left out of the comparison:
  the auditor never holds the helper's signing key). A helper that entered anything
  but ``R_h`` into the sum, or shared a different self-mask seed, fails its audit:
  ``helper_audit_failed``. The auditor then knows ``R_h``, which it is allowed to: the
  server knows ``S`` and ``R1`` (their difference ``x + R2`` is uniform), helper 1
  knows ``R1`` and ``R2`` but not ``S``.

Every client message that determines ``S`` is signed by its sender in the malicious
variant (key advertisements, masked inputs, the round-3 consistency signature, the
unmasking answers), so a server that forwards the replica an altered message makes the
replica refuse it, and the replica cannot complete (``replica_failed``).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core.randomness import seeded_randomness
from secagg.client import SecAggClient
from secagg.errors import SecAggError
from secagg.messages import AdvertiseKeys, ConsistencySignature, MaskedInput, UnmaskShares
from secagg.server import SecAggServer
from secagg.state import SessionConfig

__all__ = ["AuditFailed", "MirroredServer", "audit_helper", "helper_blind", "replay_journal",
           "uniform_mod"]

#: the replaying auditor's stand-in signing key (signatures are not compared)
_AUDIT_SIGNING_KEY = b"\x5a" * 32


class AuditFailed(Exception):
    """A helper's replay did not reproduce what it sent. ``detail`` says where."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def uniform_mod(rand: Any, dim: int, modulus: int) -> np.ndarray:
    """``dim`` uniform integers mod ``modulus`` (rejection sampling, no bias)."""
    if modulus & (modulus - 1) == 0:
        w = np.frombuffer(rand.token_bytes(8 * dim), dtype=np.uint64)
        return (w & np.uint64(modulus - 1)) if modulus < 1 << 64 else w.copy()
    out = np.empty(0, dtype=np.uint64)
    limit = ((1 << 64) // modulus) * modulus
    while out.size < dim:
        w = np.frombuffer(rand.token_bytes(8 * dim), dtype=np.uint64)
        out = np.concatenate([out, w[w < np.uint64(limit)] % np.uint64(modulus)])
    return out[:dim].copy()


def helper_blind(seed: bytes, dim: int, modulus: int) -> np.ndarray:
    """Helper's blinding vector ``R_h``, derived from its seed."""
    return uniform_mod(seeded_randomness(seed, "blind"), dim, modulus)


class MirroredServer(SecAggServer):
    """The secure-aggregation server, with helper 2's replica beside it.

    Every client message the server takes is given to :attr:`replica` too, and every
    round the server closes the replica closes; the replica's result is helper 2's own
    ``S``. It also keeps the messages exchanged with the ``watched`` positions (the
    helpers), which their auditors replay.

    Args:
        config, verify_keys: as for :class:`~secagg.server.SecAggServer`.
        watched: the positions whose messages are kept.
        feed: ``feed(message) -> message``: what the replica is given in place of each
            client message (the attack catalogue models a server that forwards altered
            messages to helper 2); the message itself by default.
        replica: run helper 2's replica here (a simulation); without it (a server
            process), :attr:`journal` keeps every client message taken and every round
            closed, in order, for the server to forward to helper 2, who replays it
            (:func:`replay_journal`).
    """

    def __init__(self, config: SessionConfig, *, verify_keys: Sequence[bytes] | None,
                 watched: Sequence[int], feed: Callable[[Any], Any] | None = None,
                 replica: bool = True) -> None:
        # in one process the replica reuses the server's signature checks and share
        # reconstructions of the very same bytes (pure functions of them); altered
        # bytes are checked afresh. A deployed helper 2 pays about the server's CPU.
        memo: dict[Any, Any] | None = {} if replica else None
        super().__init__(config, verify_keys=verify_keys, memo=memo)
        self._feed = feed
        # the replica sends nothing: it keeps no round-1 ciphertexts (routes=False)
        self.replica = (SecAggServer(config, verify_keys=verify_keys, memo=memo,
                                     routes=False)
                        if replica else None)
        self.replica_seconds = 0.0
        #: ``(message, None)`` for a client message taken, ``(None, "close")`` for a
        #: round closed (kept only without an in-process replica)
        self.journal: list[tuple[Any, str | None]] = []
        self.inbound: dict[int, list[Any]] = {int(u): [] for u in watched}
        self.outbound: dict[int, list[Any]] = {int(u): [] for u in watched}

    def receive(self, message: Any) -> None:
        sender = getattr(message, "sender", None)
        if sender in self.outbound:
            self.outbound[sender].append(message)
        try:
            super().receive(message)
        finally:
            forwarded = self._feed(message) if self._feed else message
            if self.replica is None:
                self.journal.append((forwarded, None))
            else:
                t0 = time.thread_time()
                try:
                    self.replica.receive(forwarded)
                except SecAggError:
                    pass        # refused alike by the server (the engine records it)
                self.replica_seconds += time.thread_time() - t0

    def close_round(self) -> Any:
        out = super().close_round()
        if self.replica is None:
            self.journal.append((None, "close"))
        else:
            t0 = time.thread_time()
            try:
                self.replica.close_round()
            except SecAggError:
                pass            # the replica is over: its state says so
            self.replica_seconds += time.thread_time() - t0
        for u, msg in _replies_for(out, self.inbound):
            self.inbound[u].append(msg)
        return out


def replay_journal(config: SessionConfig, verify_keys: Sequence[bytes] | None,
                   journal: Sequence[tuple[Any, str | None]]) -> np.ndarray:
    """Helper 2's replica over a forwarded journal: every client message in order (each
    checked as the server checks it, signatures included), every round closed where
    the server closed it. Returns ``S``.

    Raises:
        AuditFailed: the replica did not complete (a forged, missing or reordered
            message, or rounds closed where they should not be).
    """
    replica = SecAggServer(config, verify_keys=verify_keys, routes=False)
    for message, event in journal:
        try:
            if event == "close":
                replica.close_round()
            else:
                replica.receive(message)
        except SecAggError:
            continue        # refused as the server refuses it; the outcome tells
    if replica.result is None:
        raise AuditFailed(f"the replica ended {replica.state.value}"
                          + (f" ({replica.abort_reason.value})" if replica.abort_reason
                             else ""))
    return replica.result.astype(np.uint64)


def _replies_for(out: Any, targets: dict[int, Any]) -> list[tuple[int, Any]]:
    """The messages of a round's replies addressed to ``targets``, without building
    every other recipient's (the server builds its replies lazily)."""
    pick = getattr(out, "reply_to", None)
    if pick is not None:
        return [(u, m) for u in targets if (m := pick(u)) is not None]
    return [(u, m) for u, m in out if u in targets]


def _same(produced: Any, received: Any) -> bool:
    if type(produced) is not type(received):
        return False
    if isinstance(produced, ConsistencySignature):
        return bool(produced.sender == received.sender)
    if isinstance(produced, MaskedInput):
        return bool(produced.signed(received.signature) == received)
    if isinstance(produced, (AdvertiseKeys, UnmaskShares)):
        # the auditor replays with a stand-in key: everything but the signature must
        # match (the server checked the signature with the helper's verification key)
        return bool(dataclasses.replace(produced, signature=received.signature) == received)
    return bool(produced == received)


def audit_helper(config: SessionConfig, position: int, seed: bytes, modulus: int,
                 inbound: Sequence[Any], outbound: Sequence[Any],
                 verify_keys: Sequence[bytes] | None) -> np.ndarray:
    """Replay a helper's secure-aggregation client from its seed and check that it
    sends exactly what the server received from it.

    Args:
        config: the session.
        position: the helper's roster position.
        seed: the helper's 32-byte seed, handed to its auditor.
        modulus: the session's modulus (``R_h`` is uniform mod it).
        inbound: every message the server sent the helper, in order.
        outbound: every message the server received from it, in order.
        verify_keys: the roster's verification keys (malicious variant).

    Returns:
        ``R_h``, now known to the auditor.

    Raises:
        AuditFailed: a message differs, one is missing or extra, or the seed is bad.
    """
    try:
        blind = helper_blind(seed, config.dim, modulus)
        client = SecAggClient(config, position, blind,
                              seeded_randomness(seed, f"client-{position}"),
                              signing_key=_AUDIT_SIGNING_KEY if config.malicious else None,
                              verify_keys=verify_keys if config.malicious else None)
        produced = list(client.start())
        for msg in inbound:
            produced.extend(client.receive(msg))
    except (SecAggError, ValueError) as exc:
        raise AuditFailed(f"the replay stopped: {type(exc).__name__}: {exc}") from None
    if len(produced) != len(outbound):
        raise AuditFailed(f"{len(produced)} messages replayed, {len(outbound)} received")
    for k, (a, b) in enumerate(zip(produced, outbound)):
        if not _same(a, b):
            raise AuditFailed(f"message {k} ({type(b).__name__}) differs from the replay")
    return blind
