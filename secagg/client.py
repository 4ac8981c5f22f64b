"""The client of secure aggregation as a sans-I/O state machine.

Theory of operation (Bonawitz et al., CCS 2017, Fig. 4; SecAgg+ of Bell et al., CCS 2020)
------------------------------------------------------------------------------------------
Client ``u`` (roster position) with input ``x_u`` in ``Z_R^m`` and neighbours ``N(u)``:

* **Round 0, AdvertiseKeys.** Draw two X25519 key pairs ``(c_u^SK, c_u^PK)`` (share
  encryption) and ``(s_u^SK, s_u^PK)`` (mask agreement) and a 32-byte self-mask seed
  ``b_u``; send both public keys (signed with Ed25519 in the malicious-server variant).
* **Round 1, ShareKeys.** On the key list of ``U1 & N(u)`` (at least ``t`` peers, all
  neighbours, all keys distinct, signatures valid): derive for every peer ``v``
  ``k_uv = HKDF(X25519(c_u^SK, c_v^PK), "share-encryption-key", sid || u,v)`` and the
  mask seed ``s_uv = HKDF(X25519(s_u^SK, s_v^PK), "pairwise-mask-seed", sid || u,v)``;
  Shamir-share ``b_u`` and ``s_u^SK`` t-out-of-``|U1 & N(u)|`` and send to each peer
  ``AEAD(k_uv, share_v(b_u) || share_v(s_u^SK), ad = (sid, 1, u, v))``.
* **Round 2, MaskedInputCollection.** On the ciphertexts from ``U2 & N(u)`` (at least
  ``t``, all from peers of the key list, all authentic): send
  ``y_u = x_u + PRG(b_u) + sum_{v in U2&N(u), u<v} PRG(s_uv) - sum_{v<u} PRG(s_uv) mod R``.
* **Round 3, ConsistencyCheck** (malicious variant). On ``U3``: check ``u in U3``,
  ``U3 & N(u)`` is a subset of what ``u`` saw and has at least ``t`` members; sign
  ``(sid, U3)``.
* **Round 4, Unmasking.** On ``(alive, dropped, signatures)``: check that no peer is
  both alive and dropped, that ``alive`` is the set signed in round 3 with at least
  ``t`` valid neighbour signatures on it, that the neighbourhood part of both sets only
  names peers whose shares ``u`` holds, and that ``dropped`` equals the set ``u``
  computes itself (peers that sent shares but are not alive). Each peer's status
  (``ALIVE`` or ``DROPPED_AT_ROUND_k``) then decides the one share revealed: the
  ``b``-share for a survivor, the ``s^SK``-share for a peer that dropped after sending
  its shares. No peer ever gets both, whatever the server asks.

Any failed check moves the client to the sticky ``ABORTED`` state with an
:class:`~secagg.state.AbortReason`; it sends nothing afterwards. An event that the
transition table does not list raises :class:`~secagg.state.UnexpectedEvent` and
changes nothing. Each handler validates everything first and mutates last.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

from . import crypto, prg, shamir
from .errors import CryptoError, ParameterError
from .messages import (
    AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList, MaskedInput,
    RoutedShares, ServerAbort, ShareKeys, UnmaskRequest, UnmaskShares,
)
from .state import (
    AbortReason, ClientState, ModAccumulator, SessionConfig, Start, UnexpectedEvent,
    bitmap_to_mask,
)

__all__ = ["SecAggClient", "PeerStatus", "CLIENT_TRANSITIONS"]

_SHARE_PLAINTEXT = 2 * shamir.SHARE_WIRE_BYTES


class PeerStatus(str, enum.Enum):
    """What this client knows about one neighbour (decides which share may go out)."""

    ALIVE = "alive"
    DROPPED_AT_ROUND_0 = "dropped_at_round_0"  # no keys advertised
    DROPPED_AT_ROUND_1 = "dropped_at_round_1"  # no shares received
    DROPPED_AT_ROUND_2 = "dropped_at_round_2"  # shares received, no masked input


class _Abort(Exception):
    def __init__(self, reason: AbortReason) -> None:
        self.reason = reason


_S = ClientState
#: (state, event type) -> handler name. Everything else is local misuse.
CLIENT_TRANSITIONS: dict[tuple[ClientState, type], str] = {
    (_S.INIT, Start): "_on_start",
    (_S.AWAIT_KEYS, KeyList): "_on_keys",
    (_S.AWAIT_SHARES, RoutedShares): "_on_shares",
    (_S.AWAIT_CONSISTENCY, ConsistencyRequest): "_on_consistency",
    (_S.AWAIT_UNMASK, UnmaskRequest): "_on_unmask",
    (_S.AWAIT_KEYS, ServerAbort): "_on_server_abort",
    (_S.AWAIT_SHARES, ServerAbort): "_on_server_abort",
    (_S.AWAIT_CONSISTENCY, ServerAbort): "_on_server_abort",
    (_S.AWAIT_UNMASK, ServerAbort): "_on_server_abort",
}


class SecAggClient:
    """One client of one secure-aggregation session.

    Args:
        config: the session (parameters, roster, context, dim, modulus, variant).
        index: this client's roster position ``0 <= index < n``.
        value: the input vector, ``dim`` integers in ``[0, R)``, or a zero-argument
            callable returning it (evaluated and checked in round 2, so that a large
            simulation need not hold every input at once).
        rand: randomness source (``token_bytes``); ``protocol.core.randomness.OsRandom`` in
            production.
        signing_key: Ed25519 secret seed (malicious-server variant).
        verify_keys: Ed25519 public keys of all ``n`` participants, by roster position
            (malicious-server variant; the PKI input).

    Raises:
        ParameterError: bad index, input or keys.
    """

    def __init__(self, config: SessionConfig, index: int, value: np.ndarray, rand: Any, *,
                 signing_key: bytes | None = None,
                 verify_keys: Sequence[bytes] | None = None) -> None:
        if type(index) is not int or not 0 <= index < config.n:
            raise ParameterError(f"index must be in [0, {config.n})")
        if config.malicious:
            if signing_key is None or verify_keys is None or len(verify_keys) != config.n:
                raise ParameterError("the malicious-server variant needs a signing key and "
                                     "n verification keys")
        self.config = config
        self.index = index
        self._value = value if callable(value) else _check_input(config, value)
        self._rand = rand
        self._signing_key = signing_key
        self._verify_keys = tuple(verify_keys) if verify_keys is not None else None
        self.neighbours: tuple[int, ...] = config.neighbours(index)
        # a set, not an n-entry mask: n clients x n entries would be O(n^2) memory
        self._neighbour_set = frozenset(self.neighbours)
        self.state = ClientState.INIT
        self.abort_reason: AbortReason | None = None
        self.server_abort_reason: AbortReason | None = None
        self.peer_status: dict[int, PeerStatus] = {}
        # secrets
        self._c_sk = self._s_sk = self._b = b""
        self._c_pk = self._s_pk = b""
        # per-peer material
        self._share_keys: dict[int, bytes] = {}
        self._mask_seeds: dict[int, bytes] = {}
        #: encoded shares (``Share.to_bytes``) this client holds, by owner
        self._held_b: dict[int, bytes] = {}
        self._held_s: dict[int, bytes] = {}
        self._signed_alive: bytes | None = None
        #: what this client revealed in round 4 (for transcripts and tests)
        self.revealed_b: frozenset[int] = frozenset()
        self.revealed_s: frozenset[int] = frozenset()

    # ------------------------------------------------------------------ driving

    def start(self) -> list[Any]:
        """Begin round 0; returns ``[AdvertiseKeys]``.

        Raises:
            UnexpectedEvent: not in ``INIT``.
        """
        return self._dispatch(Start())

    def receive(self, message: Any) -> list[Any]:
        """Process one server message; returns the messages to send (0 or 1).

        Raises:
            UnexpectedEvent: the message type is not legal in the current state (the
                state is unchanged).
        """
        return self._dispatch(message)

    @property
    def aborted(self) -> bool:
        return self.state is ClientState.ABORTED

    def _dispatch(self, event: Any) -> list[Any]:
        name = CLIENT_TRANSITIONS.get((self.state, type(event)))
        if name is None:
            raise UnexpectedEvent(
                f"client {self.index}: {type(event).__name__} is not legal in state "
                f"{self.state.value}")
        handler: Callable[[Any], list[Any]] = getattr(self, name)
        try:
            return handler(event)
        except _Abort as a:
            self.state = ClientState.ABORTED
            self.abort_reason = a.reason
            self._forget(shares=True)
            return []

    def _forget(self, *, shares: bool) -> None:
        """Drop secrets no later step needs: the secret keys, the self-mask seed and the
        pairwise keys once the masked input is out, and (``shares``) the shares held
        for peers once round 4 is answered or the client aborted. Python cannot wipe
        ``bytes``; dropping the references keeps a finished client from carrying them
        (and keeps memory at what the remaining rounds need)."""
        self._c_sk = self._s_sk = self._b = b""
        self._share_keys, self._mask_seeds = {}, {}
        if shares:
            self._held_b, self._held_s = {}, {}

    # ------------------------------------------------------------------ round 0

    def _on_start(self, _: Start) -> list[Any]:
        c_sk, c_pk = crypto.x25519_keypair(self._rand)
        s_sk, s_pk = crypto.x25519_keypair(self._rand)
        b = self._rand.token_bytes(crypto.KEY_BYTES)
        sig = b""
        if self.config.malicious:
            assert self._signing_key is not None
            sig = crypto.ed25519_sign(self._signing_key,
                                      self.config.keys_message(self.index, c_pk, s_pk))
        msg = AdvertiseKeys(self.index, c_pk, s_pk, sig)
        self._c_sk, self._c_pk, self._s_sk, self._s_pk, self._b = c_sk, c_pk, s_sk, s_pk, b
        self.state = ClientState.AWAIT_KEYS
        return [msg]

    # ------------------------------------------------------------------ round 1

    def _on_keys(self, msg: KeyList) -> list[Any]:
        cfg, u = self.config, self.index
        peers = tuple(e.sender for e in msg.entries)
        for e in msg.entries:
            if e.sender == u and (e.c_pk != self._c_pk or e.s_pk != self._s_pk):
                raise _Abort(AbortReason.OWN_KEYS_ALTERED)
            if e.sender not in self._neighbour_set:
                raise _Abort(AbortReason.KEY_FROM_NON_NEIGHBOUR)
        if len(peers) < cfg.threshold:
            raise _Abort(AbortReason.TOO_FEW_KEYS)
        keys = [self._c_pk, self._s_pk]
        for e in msg.entries:
            keys += (e.c_pk, e.s_pk)
        if len(set(keys)) != len(keys):
            raise _Abort(AbortReason.DUPLICATE_KEYS)
        if cfg.malicious:
            assert self._verify_keys is not None
            for e in msg.entries:
                try:
                    crypto.ed25519_verify(self._verify_keys[e.sender],
                                          cfg.keys_message(e.sender, e.c_pk, e.s_pk),
                                          e.signature)
                except CryptoError:
                    raise _Abort(AbortReason.INVALID_KEY_SIGNATURE) from None
        share_keys: dict[int, bytes] = {}
        mask_seeds: dict[int, bytes] = {}
        try:
            for e in msg.entries:
                pc = cfg.pair_context(u, e.sender)
                share_keys[e.sender] = crypto.hkdf(
                    crypto.x25519_shared(self._c_sk, e.c_pk), label=crypto.LABEL_SHARE_KEY,
                    context=pc)
                mask_seeds[e.sender] = crypto.hkdf(
                    crypto.x25519_shared(self._s_sk, e.s_pk), label=crypto.LABEL_MASK_SEED,
                    context=pc)
        except CryptoError:
            raise _Abort(AbortReason.INVALID_PUBLIC_KEY) from None
        xs = [v + 1 for v in peers]
        b_shares = shamir.split(self._b, xs, cfg.threshold, self._rand)
        s_shares = shamir.split(self._s_sk, xs, cfg.threshold, self._rand)
        cts = tuple(
            crypto.aead_encrypt(share_keys[v], bs.to_bytes() + ss.to_bytes(),
                                crypto.routing_ad(cfg.session, 1, u, v), self._rand)
            for v, bs, ss in zip(peers, b_shares, s_shares))
        out = ShareKeys(u, peers, cts)
        # mutate
        self._share_keys, self._mask_seeds = share_keys, mask_seeds
        for v in self.neighbours:
            self.peer_status[v] = PeerStatus.DROPPED_AT_ROUND_0
        for v in peers:
            self.peer_status[v] = PeerStatus.ALIVE
        self.state = ClientState.AWAIT_SHARES
        return [out]

    # ------------------------------------------------------------------ round 2

    def _on_shares(self, msg: RoutedShares) -> list[Any]:
        cfg, u = self.config, self.index
        for v in msg.senders:
            if v not in self._share_keys:
                raise _Abort(AbortReason.SHARES_FROM_UNKNOWN_PEER)
        if len(msg.senders) < cfg.threshold:
            raise _Abort(AbortReason.TOO_FEW_SHARES)
        held_b: dict[int, bytes] = {}
        held_s: dict[int, bytes] = {}
        x_bytes = (u + 1).to_bytes(2, "big")
        for v, ct in zip(msg.senders, msg.ciphertexts):
            try:
                pt = crypto.aead_decrypt(self._share_keys[v], ct,
                                         crypto.routing_ad(cfg.session, 1, v, u))
            except CryptoError:
                raise _Abort(AbortReason.DECRYPTION_FAILED) from None
            if len(pt) != _SHARE_PLAINTEXT:
                raise _Abort(AbortReason.MALFORMED_SHARE)
            bs, ss = pt[:shamir.SHARE_WIRE_BYTES], pt[shamir.SHARE_WIRE_BYTES:]
            # the encoding of Share(x = u + 1, y < PRIME), checked without decoding
            if (bs[:2] != x_bytes or ss[:2] != x_bytes
                    or int.from_bytes(bs[2:], "big") >= shamir.PRIME
                    or int.from_bytes(ss[2:], "big") >= shamir.PRIME):
                raise _Abort(AbortReason.MALFORMED_SHARE)
            held_b[v], held_s[v] = bs, ss
        y = self._masked_input(msg.senders)
        out = MaskedInput.from_vector(u, y, cfg.modulus)
        # mutate
        self._held_b, self._held_s = held_b, held_s
        for v, st in self.peer_status.items():
            if st is PeerStatus.ALIVE and v not in held_b:
                self.peer_status[v] = PeerStatus.DROPPED_AT_ROUND_1
        self.state = (ClientState.AWAIT_CONSISTENCY if cfg.malicious
                      else ClientState.AWAIT_UNMASK)
        self._forget(shares=False)
        return [out]

    def _input(self) -> np.ndarray:
        value = self._value
        return _check_input(self.config, value()) if callable(value) else value

    def _masked_input(self, peers: Sequence[int]) -> np.ndarray:
        """``x_u + PRG(b_u) + sum_{u<v} PRG(s_uv) - sum_{v<u} PRG(s_uv) mod R``."""
        cfg, u = self.config, self.index
        acc = ModAccumulator(cfg.dim, cfg.modulus)
        acc.add(self._input())
        acc.add(prg.expand_mask(self_mask_seed(cfg, self._b), cfg.dim, cfg.modulus))
        for v in peers:
            mask = prg.expand_mask(self._mask_seeds[v], cfg.dim, cfg.modulus)
            if u < v:
                acc.add(mask)
            else:
                acc.sub(mask)
        return acc.value()

    # ------------------------------------------------------------------ round 3

    def _on_consistency(self, msg: ConsistencyRequest) -> list[Any]:
        cfg, u = self.config, self.index
        alive = self._decode_set(msg.n, msg.alive)
        self._check_alive(alive)
        assert self._signing_key is not None
        sig = crypto.ed25519_sign(self._signing_key, cfg.consistency_message(msg.alive))
        out = ConsistencySignature(u, sig)
        self._signed_alive = msg.alive
        self.state = ClientState.AWAIT_UNMASK
        return [out]

    def _decode_set(self, n: int, bitmap: bytes) -> np.ndarray:
        if n != self.config.n:
            raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)
        return bitmap_to_mask(bitmap, n)

    def _check_alive(self, alive: np.ndarray) -> list[int]:
        """Checks on a survivor set; returns the alive neighbours."""
        if not alive[self.index]:
            raise _Abort(AbortReason.SELF_NOT_ALIVE)
        if any(not alive[r] for r in self.config.required):
            raise _Abort(AbortReason.REQUIRED_PARTICIPANT_MISSING)
        alive_n = [v for v in self.neighbours if alive[v]]
        for v in alive_n:
            if v not in self._held_b:
                raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)
        if len(alive_n) < self.config.threshold:
            raise _Abort(AbortReason.TOO_FEW_SURVIVORS)
        return alive_n

    # ------------------------------------------------------------------ round 4

    def _on_unmask(self, msg: UnmaskRequest) -> list[Any]:
        cfg, u = self.config, self.index
        alive = self._decode_set(msg.n, msg.alive)
        dropped = self._decode_set(msg.n, msg.dropped)
        if (alive & dropped).any():
            raise _Abort(AbortReason.ALIVE_AND_DROPPED)
        if cfg.malicious:
            if self._signed_alive is None or msg.alive != self._signed_alive:
                raise _Abort(AbortReason.CONSISTENCY_SET_CHANGED)
            assert self._verify_keys is not None
            valid = 0
            for w, sig in zip(msg.signers, msg.signatures):
                if w != u and not (w in self._neighbour_set and alive[w]):
                    raise _Abort(AbortReason.SIGNER_NOT_ALLOWED)
                try:
                    crypto.ed25519_verify(self._verify_keys[w],
                                          cfg.consistency_message(msg.alive), sig)
                except CryptoError:
                    raise _Abort(AbortReason.INVALID_CONSISTENCY_SIGNATURE) from None
                if w != u:
                    valid += 1
            if valid < cfg.threshold:
                raise _Abort(AbortReason.TOO_FEW_SIGNATURES)
        alive_n = self._check_alive(alive)
        dropped_n = [v for v in self.neighbours if dropped[v]]
        # the dropped set is computed here, from what this client saw
        my_dropped = [v for v in self.neighbours if v in self._held_s and not alive[v]]
        if dropped_n != my_dropped:
            if any(v not in self._held_s for v in dropped_n):
                raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)
            raise _Abort(AbortReason.DROPPED_SET_MISMATCH)
        # per-peer status decides the single share revealed for each peer
        status = dict(self.peer_status)
        for v in my_dropped:
            status[v] = PeerStatus.DROPPED_AT_ROUND_2
        b_owners = tuple(v for v in alive_n if status[v] is PeerStatus.ALIVE)
        s_owners = tuple(v for v in my_dropped if status[v] is PeerStatus.DROPPED_AT_ROUND_2)
        out = UnmaskShares(u, b_owners, tuple(self._held_b[v] for v in b_owners),
                           s_owners, tuple(self._held_s[v] for v in s_owners))
        # mutate
        self.peer_status = status
        self.revealed_b, self.revealed_s = frozenset(b_owners), frozenset(s_owners)
        self.state = ClientState.COMPLETED
        self._forget(shares=True)
        return [out]

    # ------------------------------------------------------------------ abort

    def _on_server_abort(self, msg: ServerAbort) -> list[Any]:
        self.server_abort_reason = AbortReason(msg.reason)
        raise _Abort(AbortReason.SERVER_ABORTED)


def self_mask_seed(config: SessionConfig, b: bytes) -> bytes:
    """PRG seed of the self mask: ``HKDF(b_u, "self-mask", sid)``."""
    return crypto.hkdf(b, label=crypto.LABEL_SELF_MASK, context=config.session)


def _check_input(config: SessionConfig, value: Any) -> np.ndarray:
    """The input as ``uint64``, checked for shape and range.

    Raises:
        ParameterError: wrong shape or type, or an entry outside ``[0, R)``.
    """
    x = np.asarray(value)
    if x.shape != (config.dim,) or not np.issubdtype(x.dtype, np.integer):
        raise ParameterError(f"input must be a ({config.dim},) integer vector")
    if x.size and (int(x.min()) < 0 or int(x.max()) >= config.modulus):
        raise ParameterError("an input entry is outside [0, modulus)")
    return x.astype(np.uint64, copy=False)
