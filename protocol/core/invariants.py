"""Invariants every simulated secure-aggregation transcript must satisfy.

Theory of operation
-------------------
Bonawitz et al. (CCS 2017, section 4 and Fig. 4) protect an honest client's input with
two secrets: the self-mask seed ``b_u`` (revealed to the server only while ``u`` is in
the survivor set ``U3``) and the mask key ``s_u^SK`` (revealed only when ``u`` dropped
after sharing it). The security argument rests on three per-run facts that hold
*whatever the server does*, and that :func:`check_secagg_transcript` checks on a
:class:`protocol.core.secagg_engine.SecAggRun`:

1. **No honest client reveals both shares of one peer** (the double-unmask attack is
   impossible): for every client ``c`` and peer ``v``, ``c`` never sent a ``b``-share
   and an ``s^SK``-share of ``v`` (Fig. 4, round 4: "abort if U4 and U2-U3 intersect").
2. **No honest client sends after aborting**: an aborted client's messages are a
   prefix of its round sequence ``0, 1, 2, (3,) 4`` (:func:`client_rounds`, from the
   messages' ``ROUND``) that stops *before* the answer to the message that made it
   abort (the abort reason names that message; the answer's round is that message's
   ``ROUND``); an aborted
   client never sends its round-4 shares; a completed client sent every round once.
3. **Releases equal the plaintext reference on the surviving set**: a completed
   session's result is ``sum_{u in U3} x_u mod R`` (correctness, Theorem 1 of
   Bonawitz et al.); the caller passes the inputs.

A fourth, collective, check is optional (``collective=True``, the default): no peer
has ``t`` revealed shares of *both* its secrets across all clients. It holds for the
malicious-server variant and for every honest server; it fails for a
semi-honest-variant run under a split-view server (the known limit of that variant,
see docs/security.md), so attacks that demonstrate the limit turn it off.

A violated invariant raises :class:`InvariantViolation` naming the invariant and the
parties; the checks only read the run.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from secagg.messages import (
    CLIENT_MESSAGES, ConsistencyRequest, KeyList, RoutedShares, UnmaskRequest,
)
from secagg.server import SERVER_TRANSITIONS
from secagg.state import AbortReason, ClientState

__all__ = ["InvariantViolation", "check_secagg_transcript", "check_no_double_reveal",
           "check_no_send_after_abort", "check_release_matches_reference",
           "check_no_unmaskable_peer", "TRIGGER_OF_REASON", "client_rounds"]


class InvariantViolation(Exception):
    """A simulated run broke a protocol invariant.

    Attributes:
        invariant: short name of the broken invariant.
        details: what was observed (parties, rounds, values).
    """

    def __init__(self, invariant: str, details: str) -> None:
        super().__init__(f"{invariant}: {details}")
        self.invariant = invariant
        self.details = details


R = AbortReason
#: which server message a client abort reason is raised on
TRIGGER_OF_REASON: dict[AbortReason, tuple[type, ...]] = {
    R.TOO_FEW_KEYS: (KeyList,), R.KEY_FROM_NON_NEIGHBOUR: (KeyList,),
    R.DUPLICATE_KEYS: (KeyList,), R.INVALID_PUBLIC_KEY: (KeyList,),
    R.INVALID_KEY_SIGNATURE: (KeyList,), R.OWN_KEYS_ALTERED: (KeyList,),
    R.TOO_FEW_SHARES: (RoutedShares,), R.SHARES_FROM_UNKNOWN_PEER: (RoutedShares,),
    R.DECRYPTION_FAILED: (RoutedShares,), R.MALFORMED_SHARE: (RoutedShares,),
    R.SELF_NOT_ALIVE: (ConsistencyRequest, UnmaskRequest),
    R.UNKNOWN_PEER_IN_SET: (ConsistencyRequest, UnmaskRequest),
    R.TOO_FEW_SURVIVORS: (ConsistencyRequest, UnmaskRequest),
    R.ALIVE_AND_DROPPED: (UnmaskRequest,), R.DROPPED_SET_MISMATCH: (UnmaskRequest,),
    R.CONSISTENCY_SET_CHANGED: (UnmaskRequest,),
    R.INVALID_CONSISTENCY_SIGNATURE: (UnmaskRequest,),
    R.SIGNER_NOT_ALLOWED: (UnmaskRequest,), R.TOO_FEW_SIGNATURES: (UnmaskRequest,),
    R.STALE_SESSION: (KeyList, ConsistencyRequest, UnmaskRequest),
    R.SERVER_ABORTED: (KeyList, RoutedShares, ConsistencyRequest, UnmaskRequest),
}


def client_rounds(malicious: bool) -> list[int]:
    """The rounds a client sends in, in order: the ``ROUND`` of every client message
    the server's transition table of that variant collects."""
    table = SERVER_TRANSITIONS[malicious]
    return sorted({event.ROUND for (_, event) in table if event in CLIENT_MESSAGES})


def check_no_double_reveal(run: Any) -> None:
    """Invariant 1. Raises: InvariantViolation naming the client and the peer."""
    for c, (b, s) in run.transcript.reveals.items():
        both = set(b) & set(s)
        if both:
            raise InvariantViolation(
                "no_double_reveal", f"client {c} revealed both shares of peers {sorted(both)}")


def _rounds_sent(run: Any) -> dict[int, list[int]]:
    sent: dict[int, list[int]] = {}
    for e in run.transcript.envelopes:
        if e.sender >= 0:
            sent.setdefault(e.sender, []).append(e.round)
    return sent


def check_no_send_after_abort(run: Any) -> None:
    """Invariant 2 (see the module docstring).

    Raises:
        InvariantViolation: an aborted client sent the answer to the message it aborted
            on (or anything later), sent a round twice or out of order, or a completed
            client skipped a round.
    """
    sequence = client_rounds(bool(run.config.malicious))
    sent = _rounds_sent(run)
    for c, state in enumerate(run.client_states):
        rounds = sent.get(c, [])
        if rounds != sequence[:len(rounds)]:
            raise InvariantViolation(
                "no_send_after_abort", f"client {c} sent rounds {rounds}, not a prefix of "
                f"{sequence}")
        if state is ClientState.ABORTED:
            reason = run.client_abort_reasons.get(c)
            if 4 in rounds:
                raise InvariantViolation(
                    "no_send_after_abort", f"client {c} aborted ({reason}) after sending its "
                    "round-4 shares")
            triggers = TRIGGER_OF_REASON.get(reason) if reason is not None else None
            if triggers:
                # a server message's ROUND is the round of the answer it asks for
                limit = max(k.ROUND for k in triggers)
                if rounds and rounds[-1] >= limit:
                    raise InvariantViolation(
                        "no_send_after_abort", f"client {c} aborted with {reason.value} (on "
                        f"{'/'.join(k.__name__ for k in triggers)}) but sent round "
                        f"{rounds[-1]}")
        elif state is ClientState.COMPLETED and rounds != sequence:
            raise InvariantViolation(
                "no_send_after_abort", f"completed client {c} sent rounds {rounds}")


def check_release_matches_reference(run: Any, inputs: np.ndarray) -> None:
    """Invariant 3: a completed run's sum equals the plaintext sum over ``U3``.

    Raises:
        InvariantViolation: the sums differ (first differing coordinate reported).
    """
    if not run.completed or run.result is None:
        return
    x = np.asarray(inputs)
    u3 = sorted(run.survivors)
    modulus = run.config.modulus
    ref = np.zeros(x.shape[1], dtype=object)
    for u in u3:
        ref = ref + x[u].astype(object)
    ref = np.array([int(v) % modulus for v in ref], dtype=object)
    got = np.array([int(v) for v in np.asarray(run.result)], dtype=object)
    if got.shape != ref.shape or not (got == ref).all():
        bad = int(np.flatnonzero(got != ref)[0]) if got.shape == ref.shape else -1
        raise InvariantViolation(
            "release_equals_reference", f"coordinate {bad}: released "
            f"{got[bad] if bad >= 0 else got.shape}, plaintext over U3={u3} gives "
            f"{ref[bad] if bad >= 0 else ref.shape}")


def check_no_unmaskable_peer(run: Any, peers: Iterable[int] | None = None) -> None:
    """Collective check: no peer had ``t`` shares of both its secrets revealed.

    Raises:
        InvariantViolation: naming the peer the server could fully unmask.
    """
    t = run.transcript
    for v in (range(run.config.n) if peers is None else peers):
        if t.server_could_unmask(v):
            raise InvariantViolation(
                "no_unmaskable_peer", f"peer {v}: b-shares from {sorted(t.b_share_holders(v))}"
                f" and s-shares from {sorted(t.s_share_holders(v))} (threshold {t.threshold})")


def check_secagg_transcript(run: Any, inputs: np.ndarray | None = None, *,
                            collective: bool = True) -> None:
    """Run every invariant on one simulated session.

    Args:
        run: a :class:`protocol.core.secagg_engine.SecAggRun`.
        inputs: the ``(n, dim)`` plaintext inputs (checks invariant 3 when given).
        collective: also check that no peer is unmaskable from all reveals together.

    Raises:
        InvariantViolation: the first broken invariant.
    """
    check_no_double_reveal(run)
    check_no_send_after_abort(run)
    if inputs is not None:
        check_release_matches_reference(run, inputs)
    if collective:
        check_no_unmaskable_peer(run)
