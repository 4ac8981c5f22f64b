"""Shared vocabulary of the secure-aggregation state machines.

Theory of operation
-------------------
Both sides of the protocol (:mod:`secagg.client`, :mod:`secagg.server`) are sans-I/O
state machines in the style of h11: each has one transition table keyed by
``(state, event type)``; an event missing from the table is a *local misuse* error
(:class:`UnexpectedEvent`) and leaves the machine untouched. A *remote* inconsistency
(the other side sent something that cannot be part of an honest run) is not an error
the caller must handle: the client moves to the sticky ``ABORTED`` state with an
:class:`AbortReason`, and never sends again.

This module holds what both sides share:

* the states and abort reasons (string enums, so they survive the wire and JSON);
* :class:`Transition`, one table entry: the handler and the next state. The dispatcher,
  not the handler, sets the state, so each side's table reads as its state diagram;
* :class:`SessionConfig`: parameters, the ordered roster, the caller context, the
  server's per-attempt nonce and the round-0 session id
  ``sid_0 = H(SHA-256(params || roster || context), server nonce)``; from round 1 on
  every key derivation, ciphertext and signature is bound to the transcript-bound
  ``sid_1 = H(sid_0, root)``, where ``root`` commits to every client's fresh round-0
  nonce and keys (:meth:`SessionConfig.transcript_session`);
* the public neighbour graph (SecAgg+, Bell et al. CCS 2020): a pure function of the
  parameters and the transcript-bound ``sid_1``, so it is fixed only when round 0
  closes (round 0 does not depend on it) and every client recomputes and checks its own
  neighbourhood from the root it received. With the complete graph the protocol is plain SecAgg (Bonawitz et al.
  CCS 2017). Shamir shares of a client's secrets go to its neighbours ``N(u)`` (as in
  Bell et al.; the client keeps no share of its own), and the threshold ``t`` of
  :mod:`secagg.params` counts shares held by *neighbours*: every secret the server has
  to rebuild needs ``t`` responding neighbours of its owner;
* participant sets on the wire as bitmaps over roster positions;
* :class:`ModAccumulator`: exact vectorised sums modulo any ``R`` in ``[2, 2**64]``.

Participants are named on the wire by their *position* ``0..n-1`` in the ordered roster
(the roster itself -- arbitrary 64-bit ids -- is bound into the session id). Shamir
evaluation points are ``position + 1``.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np

from . import crypto, graph as graph_mod, prg
from .errors import ParameterError, SecAggError

__all__ = [
    "ClientState", "ServerState", "AbortReason", "UnexpectedEvent", "InvalidMessage",
    "SessionConfig", "set_to_bitmap", "bitmap_to_mask", "bitmap_bytes", "ModAccumulator",
    "Start", "CloseRound", "MAX_PARTICIPANTS", "Transition",
]

#: Shamir evaluation points are ``position + 1 < shamir.MAX_X``
MAX_PARTICIPANTS = 65535


class UnexpectedEvent(SecAggError):
    """Local misuse: an event delivered in a state whose transition table lacks it.

    The state machine is left exactly as it was.
    """


class InvalidMessage(SecAggError, ValueError):
    """The server rejected one client's message (unknown sender, duplicate, wrong
    set, bad signature, ...). The server's state is unchanged; the sender is simply
    treated as not having answered this round."""


class ClientState(str, enum.Enum):
    INIT = "init"                              # nothing sent yet
    AWAIT_KEYS = "await_keys"                  # round 0 sent, waiting for the key list
    AWAIT_SHARES = "await_shares"              # round 1 sent, waiting for routed shares
    AWAIT_CONSISTENCY = "await_consistency"    # round 2 sent (malicious variant)
    AWAIT_UNMASK = "await_unmask"              # round 2 (or 3) sent, waiting for the request
    COMPLETED = "completed"                    # round 4 sent; nothing more to do
    ABORTED = "aborted"                        # sticky


class ServerState(str, enum.Enum):
    COLLECT_KEYS = "collect_keys"              # round 0
    COLLECT_SHARES = "collect_shares"          # round 1
    COLLECT_INPUTS = "collect_inputs"          # round 2
    COLLECT_SIGNATURES = "collect_signatures"  # round 3 (malicious variant)
    COLLECT_UNMASK = "collect_unmask"          # round 4
    COMPLETED = "completed"
    ABORTED = "aborted"


class AbortReason(str, enum.Enum):
    """Why a party stopped. Client-side reasons name the check that failed."""

    # raised by the client on the server's messages
    SERVER_ABORTED = "server_aborted"
    TOO_FEW_KEYS = "too_few_keys"                        # round 0 list below threshold
    # a key-list entry outside N(u) of the graph seeded by this key list's own
    # transcript root (also: a graph the server fixed before round 0)
    KEY_FROM_NON_NEIGHBOUR = "key_from_non_neighbour"
    DUPLICATE_KEYS = "duplicate_keys"                    # two equal public keys
    INVALID_PUBLIC_KEY = "invalid_public_key"            # low-order X25519 point
    INVALID_KEY_SIGNATURE = "invalid_key_signature"
    OWN_KEYS_ALTERED = "own_keys_altered"                # the list names us with other keys
    TOO_FEW_SHARES = "too_few_shares"                    # round 1 routing below threshold
    SHARES_FROM_UNKNOWN_PEER = "shares_from_unknown_peer"
    DECRYPTION_FAILED = "decryption_failed"
    MALFORMED_SHARE = "malformed_share"
    SELF_NOT_ALIVE = "self_not_alive"
    ALIVE_AND_DROPPED = "alive_and_dropped"              # double-unmask attack
    UNKNOWN_PEER_IN_SET = "unknown_peer_in_set"
    DROPPED_SET_MISMATCH = "dropped_set_mismatch"
    TOO_FEW_SURVIVORS = "too_few_survivors"
    REQUIRED_PARTICIPANT_MISSING = "required_participant_missing"  # a required position dropped
    CONSISTENCY_SET_CHANGED = "consistency_set_changed"  # unmask set != the one signed
    INVALID_CONSISTENCY_SIGNATURE = "invalid_consistency_signature"
    SIGNER_NOT_ALLOWED = "signer_not_allowed"
    TOO_FEW_SIGNATURES = "too_few_signatures"
    # a message bound to another attempt of this session: a key list whose transcript
    # does not hold this client's fresh nonce and keys, or a request naming another
    # transcript-bound session id (a replay from an earlier attempt)
    STALE_SESSION = "stale_session"
    # raised by the server
    TOO_FEW_ADVERTISED = "too_few_advertised"            # |U1| < t
    TOO_FEW_SHARE_SENDERS = "too_few_share_senders"      # |U2| < t
    TOO_FEW_MASKED_INPUTS = "too_few_masked_inputs"      # |U3| < t (some neighbourhood)
    TOO_FEW_CONSISTENCY_SIGNATURES = "too_few_consistency_signatures"  # |U4| < t
    TOO_FEW_UNMASK_RESPONSES = "too_few_unmask_responses"  # some secret below t shares
    RECONSTRUCTION_FAILED = "reconstruction_failed"      # shares do not match a public key


class Transition(NamedTuple):
    """One edge of a state diagram: the handler that validates the event and computes
    what to send, and the state the dispatcher moves to when the handler returns.

    A handler that finds a remote inconsistency raises the side's abort exception
    instead; the dispatcher then moves to the sticky ``ABORTED`` state."""

    handler: str
    next_state: enum.Enum


class Start:
    """Client event: begin round 0 (``SecAggClient.start``)."""


class CloseRound:
    """Server event: the caller declares the current round closed (``close_round``)."""


def bitmap_bytes(n: int) -> int:
    """Length in bytes of a bitmap over ``n`` participants."""
    return (n + 7) // 8


def set_to_bitmap(members: Sequence[int] | np.ndarray, n: int) -> bytes:
    """Encode a set of positions ``< n`` as a little-endian-bit bitmap.

    Raises:
        ParameterError: a position is out of range.
    """
    mask = np.zeros(bitmap_bytes(n) * 8, dtype=bool)
    idx = np.asarray(list(members) if not isinstance(members, np.ndarray) else members,
                     dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ParameterError("set member out of range")
    mask[idx] = True
    return np.packbits(mask, bitorder="little").tobytes()


def bitmap_to_mask(bitmap: bytes, n: int) -> np.ndarray:
    """Decode a bitmap into a boolean array of length ``n``.

    Raises:
        ValueError: wrong length, or a padding bit is set (non-canonical encoding).
    """
    if len(bitmap) != bitmap_bytes(n):
        raise ValueError(f"bitmap over {n} participants must be {bitmap_bytes(n)} bytes")
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    if bits[n:].any():
        raise ValueError("bitmap padding bits must be zero")
    return bits[:n].astype(bool)


@dataclass(frozen=True)
class SessionConfig:
    """Everything both sides must agree on before round 0.

    Attributes:
        params: the :class:`secagg.params.SecAggParams` (``n``, ``degree``,
            ``threshold``, ``graph``).
        participants: ordered, distinct participant ids (``len == params.n``).
        context: caller binding (e.g. a hash of the task and round specification).
        dim: input vector length.
        modulus: ``R``, inputs and the output are integers mod ``R``, ``2 <= R <= 2**64``.
        malicious: enable the malicious-server variant (signed keys, round 3
            consistency check); needs a PKI of Ed25519 verification keys.
        required: positions that must be in every survivor set: a client aborts with
            ``REQUIRED_PARTICIPANT_MISSING`` rather than help unmask a sum without
            them (a committee whose members' blinding inputs must be in the sum).
            Bound into ``base_session`` (hence every session id) when non-empty.
        server_nonce: 32 bytes of fresh randomness the server draws for this attempt
            (from its injected randomness source) and sends with the configuration.
        base_session: ``SHA-256(params || roster || context)``, the same for every
            attempt of one round specification (derived).
        session: ``sid_0 = H("attempt", base_session, server_nonce)`` (derived), the id
            round 0 is bound to. From round 1 on both sides use the transcript-bound
            id :meth:`transcript_session` that also holds every client's nonce.
    """

    params: object
    participants: tuple[int, ...]
    context: bytes
    dim: int
    modulus: int
    malicious: bool = False
    required: frozenset[int] = frozenset()
    server_nonce: bytes = b""
    base_session: bytes = field(init=False, repr=False)
    session: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        p = self.params
        for name in ("n", "degree", "threshold", "graph"):
            if not hasattr(p, name):
                raise ParameterError(f"params lacks {name!r}")
        n, k, t = p.n, p.degree, p.threshold
        if not isinstance(n, int) or not 2 <= n <= MAX_PARTICIPANTS:
            raise ParameterError(f"n must be in [2, {MAX_PARTICIPANTS}]")
        if p.graph not in ("complete", "harary"):
            raise ParameterError(f"unknown graph {p.graph!r}")
        if not isinstance(k, int) or not 1 <= k <= n - 1:
            raise ParameterError("degree must be in [1, n-1]")
        if p.graph == "complete" and k != n - 1:
            raise ParameterError("the complete graph has degree n-1")
        if not isinstance(t, int) or not 1 <= t <= k:
            raise ParameterError("threshold must be in [1, degree]")
        parts = tuple(self.participants)
        if len(parts) != n:
            raise ParameterError(f"{len(parts)} participants given, params.n = {n}")
        object.__setattr__(self, "participants", parts)
        if not isinstance(self.context, (bytes, bytearray)):
            raise ParameterError("context must be bytes")
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 1:
            raise ParameterError("dim must be a positive int")
        if (not isinstance(self.modulus, int) or isinstance(self.modulus, bool)
                or not 2 <= self.modulus <= 1 << 64):
            raise ParameterError("modulus must be an int in [2, 2**64]")
        req = frozenset(self.required)
        if any(not isinstance(r, int) or not 0 <= r < n for r in req):
            raise ParameterError("required positions must be in [0, n)")
        object.__setattr__(self, "required", req)
        if (type(self.server_nonce) is not bytes
                or len(self.server_nonce) != crypto.FRESH_NONCE_BYTES):
            raise ParameterError(f"server_nonce must be {crypto.FRESH_NONCE_BYTES} bytes of "
                                 "fresh randomness (one per attempt)")
        base = crypto.session_id(self.params_encoding(), parts, bytes(self.context))
        object.__setattr__(self, "base_session", base)
        object.__setattr__(self, "session", crypto.attempt_session_id(base, self.server_nonce))

    @property
    def n(self) -> int:
        return int(self.params.n)  # type: ignore[attr-defined]

    @property
    def degree(self) -> int:
        return int(self.params.degree)  # type: ignore[attr-defined]

    @property
    def threshold(self) -> int:
        return int(self.params.threshold)  # type: ignore[attr-defined]

    @property
    def graph(self) -> str:
        return str(self.params.graph)  # type: ignore[attr-defined]

    def params_encoding(self) -> bytes:
        """Canonical encoding of every parameter both sides must agree on."""
        g = self.graph.encode()
        enc = getattr(self.params, "encode", None)
        base = enc() if callable(enc) else b""
        return (b"secagg-session-params-v1" + struct.pack(">Q", len(base)) + base + struct.pack(
            ">IIIB", self.n, self.degree, self.threshold, len(g)) + g
            + struct.pack(">Q", self.dim) + (self.modulus - 1).to_bytes(8, "big")
            + bytes([1 if self.malicious else 0])
            + (b"required" + set_to_bitmap(sorted(self.required), self.n)
               if self.required else b""))

    def graph_seed(self, root: bytes) -> bytes:
        """The public seed of the neighbour graph of this attempt:
        ``HKDF(sid_1, "neighbour-graph")`` with ``sid_1 = H(sid_0, root)``.

        ``root`` is the round-0 transcript root, which commits to every round-0 client's
        fresh nonce and keys, so the graph is fixed only when round 0 closes: a server
        cannot choose (or grind offline for) a graph before the honest clients' nonces
        are in. What it can still do online (choose which round-0 clients count, pick
        its corrupt clients' nonces) is accounted for by
        :func:`secagg.params.seed_grinding_bits` (docs/secagg-primitives.md,
        "Grinding the graph seed").

        Raises:
            ParameterError: ``root`` is not 32 bytes.
        """
        if type(root) is not bytes or len(root) != 32:
            raise ParameterError("the transcript root must be 32 bytes")
        return crypto.hkdf(self.transcript_session(root), label=b"neighbour-graph",
                           context=b"")

    def neighbours(self, i: int, root: bytes) -> tuple[int, ...]:
        """Open neighbourhood ``N(i)`` (sorted, without ``i``) in the graph of the
        attempt whose round-0 transcript root is ``root``, recomputed locally.

        Raises:
            ParameterError: ``root`` is not 32 bytes.
        """
        if self.graph == "complete":
            return graph_mod.complete_neighbours(i, self.n)
        return graph_mod.neighbours_of(i, self.n, self.degree, self.graph_seed(root))  # sorted

    def all_neighbours(self, root: bytes) -> list[tuple[int, ...]]:
        """``N(i)`` for every ``i`` (what the server uses once round 0 closed).

        Raises:
            ParameterError: ``root`` is not 32 bytes.
        """
        if self.graph == "complete":
            return graph_mod.complete_graph(self.n)
        return graph_mod.harary_graph(self.n, self.degree, self.graph_seed(root))  # sorted

    def transcript_session(self, root: bytes) -> bytes:
        """``sid_1 = H("transcript", sid_0, root)``: the id of this attempt from round 1
        on, where ``root`` is the Merkle root over the round-0 contributions
        (``crypto.transcript_leaf``: position, nonce and keys of every client in U1)."""
        return crypto.transcript_session_id(self.session, root)

    @staticmethod
    def pair_context(session: bytes, u: int, v: int) -> bytes:
        """HKDF context of the pair ``{u, v}``: the (transcript-bound) session id and
        the ordered pair."""
        a, b = (u, v) if u < v else (v, u)
        return session + struct.pack(">QQ", a, b)

    def keys_message(self, sender: int, nonce: bytes, c_pk: bytes, s_pk: bytes) -> bytes:
        """What a client signs in round 0 (malicious variant): ``sid_0``, its position,
        its fresh nonce and its two public keys."""
        return (b"secagg-advertise-keys\x00" + self.session + struct.pack(">Q", sender)
                + nonce + c_pk + s_pk)

    @staticmethod
    def input_message(session: bytes, sender: int, packed_digest: bytes) -> bytes:
        """What a client signs in round 2 (malicious variant): the transcript-bound
        session ``sid_1``, its position and the SHA-256 digest of its packed masked
        input."""
        return b"secagg-masked-input\x00" + session + struct.pack(">Q", sender) + packed_digest

    @staticmethod
    def unmask_message(session: bytes, sender: int, body_digest: bytes) -> bytes:
        """What a client signs in round 4 (malicious variant): ``sid_1``, its position
        and the digest of the shares it reveals (``UnmaskShares.body_digest``)."""
        return b"secagg-unmask\x00" + session + struct.pack(">Q", sender) + body_digest

    @staticmethod
    def consistency_message(session: bytes, alive_bitmap: bytes) -> bytes:
        """What a client signs in round 3: the transcript-bound session ``sid_1`` and
        the survivor set U3."""
        return b"secagg-consistency\x00" + session + alive_bitmap


class ModAccumulator:
    """Exact running sum of ``uint64`` vectors modulo ``R`` (any ``2 <= R <= 2**64``).

    * ``R = 2**64``: native wrapping ``uint64`` arithmetic.
    * ``R`` a power of two: wrapping arithmetic, reduced with a bit mask at the end.
    * ``R <= 2**63``: every operand is ``< R``; subtraction adds ``R - x``; the running
      sum is reduced ``% R`` before it could exceed ``2**64`` (lazy reduction).
    * ``2**63 < R < 2**64`` (rare): overflow is detected per entry.
    """

    def __init__(self, dim: int, modulus: int) -> None:
        self.modulus = modulus
        self.acc = np.zeros(dim, dtype=np.uint64)
        self._pow2 = modulus & (modulus - 1) == 0
        self._small = modulus <= 1 << 63
        self._room = ((1 << 64) - 1) // modulus - 1 if not self._pow2 else 0
        self._pending = 0
        self._r = np.uint64(modulus % (1 << 64))

    def add(self, x: np.ndarray) -> None:
        """acc += x (entries of ``x`` must be ``< R``)."""
        if self._pow2:
            np.add(self.acc, x, out=self.acc)
        elif self._small:
            self._reserve()
            np.add(self.acc, x, out=self.acc)
        else:
            self._add_big(x)

    def sub(self, x: np.ndarray) -> None:
        """acc -= x (entries of ``x`` must be ``< R``)."""
        if self._pow2:
            np.subtract(self.acc, x, out=self.acc)
        elif self._small:
            self._reserve()
            self.acc += self._r
            self.acc -= x          # acc + R - x >= 0 since x < R
        else:
            neg = np.where(x == 0, np.uint64(0), self._r - x)
            self._add_big(neg)

    def add_masks(self, terms: Sequence[tuple[bytes, int]]) -> None:
        """acc += sum(sign * prg.expand_mask(seed)) over ``terms`` of ``(seed, sign)``,
        ``sign`` 1 or -1: with a power-of-two modulus or ``2^61 - 1`` in one
        :func:`secagg.prg.mask_sum` call (the masks summed without a reduction per
        mask), otherwise mask by mask.

        Raises:
            ParameterError: a bad seed or sign.
        """
        dim = len(self.acc)
        if self._pow2 or self.modulus == prg.MERSENNE61:
            self.add(prg.mask_sum(terms, dim, self.modulus))
            return
        for seed, sign in terms:
            if sign not in (1, -1) or type(sign) is not int:
                raise ParameterError(f"a mask's sign must be 1 or -1, got {sign!r}")
            mask = prg.expand_mask(seed, dim, self.modulus)
            if sign == 1:
                self.add(mask)
            else:
                self.sub(mask)

    def _reserve(self) -> None:
        if self._pending >= self._room:
            np.remainder(self.acc, self._r, out=self.acc)
            self._pending = 0
        self._pending += 1

    def _add_big(self, x: np.ndarray) -> None:
        s = self.acc + x
        wrapped = s < self.acc
        fix = wrapped | (s >= self._r)
        s[fix] -= self._r
        self.acc = s

    def value(self) -> np.ndarray:
        """The sum reduced into ``[0, R)`` (a fresh array)."""
        if self.modulus == 1 << 64:
            return self.acc.copy()
        if self._pow2:
            return self.acc & np.uint64(self.modulus - 1)
        if self._small:
            return self.acc % self._r
        return self.acc.copy()
