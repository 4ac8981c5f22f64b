"""The client of secure aggregation as a sans-I/O state machine.

Theory of operation (Bonawitz et al., CCS 2017, Fig. 4; SecAgg+ of Bell et al., CCS 2020)
------------------------------------------------------------------------------------------
Client ``u`` (roster position) with input ``x_u`` in ``Z_R^m`` and neighbours ``N(u)``:

* **Round 0, AdvertiseKeys.** Draw two X25519 key pairs ``(c_u^SK, c_u^PK)`` (share
  encryption) and ``(s_u^SK, s_u^PK)`` (mask agreement), a 32-byte self-mask seed
  ``b_u`` and a fresh 32-byte nonce ``r_u``; send both public keys and ``r_u`` (signed
  with Ed25519 over ``sid_0`` in the malicious-server variant).
* **Round 1, ShareKeys.** On the key list of ``U1 & N(u)`` (its transcript root holds
  ``u``'s own fresh leaf, else ``STALE_SESSION``; ``N(u)`` recomputed from the graph
  seeded by ``sid_1``, so fixed only now; at least ``t`` peers, all neighbours,
  all keys distinct, signatures valid): set ``sid = sid_1 = H(sid_0, root)`` (fresh
  sessions, docs/secagg-primitives.md) and derive for every peer ``v``
  ``k_uv = HKDF(X25519(c_u^SK, c_v^PK), "share-encryption-key", sid || u,v)`` and the
  mask seed ``s_uv = HKDF(X25519(s_u^SK, s_v^PK), "pairwise-mask-seed", sid || u,v)``;
  Shamir-share ``b_u`` and ``s_u^SK`` t-out-of-``|U1 & N(u)|`` and send to each peer
  ``AEAD(k_uv, share_v(b_u) || share_v(s_u^SK), ad = (sid, 1, u, v))``.
* **Round 2, MaskedInputCollection.** On the ciphertexts from ``U2 & N(u)`` (at least
  ``t``, all from peers of the key list, all authentic): send
  ``y_u = x_u + PRG(b_u) + sum_{v in U2&N(u), u<v} PRG(s_uv) - sum_{v<u} PRG(s_uv) mod R``.
* **Round 3, ConsistencyCheck** (malicious variant). On ``(sid_1, U3)``: check the
  session id, ``u in U3``, ``U3 & N(u)`` only names peers still ``ALIVE`` and has at
  least ``t`` members; mark the neighbours left out ``DROPPED_AT_ROUND_2``; sign
  ``(sid, U3)``.
* **Round 4, Unmasking.** On ``(sid_1, alive, dropped, signatures)``: check the
  session id (a request of another attempt is ``STALE_SESSION``), that no peer is
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
changes nothing. Each handler validates everything first, mutates its own data last and
returns what to send; the dispatcher sets the next state the table names.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
from bisect import bisect_left
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import crypto, shamir
from .errors import CryptoError, ParameterError
from .memo import SessionMemo
from .messages import (
    AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList, MaskedInput,
    RoutedShares, ServerAbort, ShareKeys, UnmaskRequest, UnmaskShares,
)
from .state import (
    AbortReason, ClientState, ModAccumulator, SessionConfig, Start, Transition,
    UnexpectedEvent, bitmap_to_mask,
)

__all__ = ["SecAggClient", "PeerStatus", "CLIENT_TRANSITIONS", "SHARE_CIPHERTEXT_BYTES"]

_SHARE_PLAINTEXT = 2 * shamir.SHARE_WIRE_BYTES
#: length of a round-1 ciphertext: nonce, the two encoded shares, tag
SHARE_CIPHERTEXT_BYTES = crypto.NONCE_BYTES + _SHARE_PLAINTEXT + crypto.TAG_BYTES
_SHARE = shamir.SHARE_WIRE_BYTES
#: a held share without its x coordinate: every share a client holds is at its own
#: point ``x = u + 1`` (checked when the shares arrive), so only the ``y`` lanes are kept
_HELD_Y = shamir.SHARE_BYTES
_X_BYTES = _SHARE - _HELD_Y
#: bytes per neighbour of the pairwise keys kept from round 1 to round 2: the share
#: encryption key, then the mask seed
_PAIR = 2 * crypto.KEY_BYTES
#: a neighbour slot's record: its pairwise keys (``_PAIR`` bytes), later the ``y``
#: lanes of the two shares held for it (``2 * _HELD_Y``), in the same place
_SLOT = max(_PAIR, 2 * _HELD_Y)
#: what the records hold
_NOTHING, _KEYS, _HELD = 0, 1, 2


class PeerStatus(str, enum.Enum):
    """What this client knows about one neighbour (decides which share may go out)."""

    ALIVE = "alive"
    DROPPED_AT_ROUND_0 = "dropped_at_round_0"  # no keys advertised
    DROPPED_AT_ROUND_1 = "dropped_at_round_1"  # no shares received
    DROPPED_AT_ROUND_2 = "dropped_at_round_2"  # shares received, no masked input


# the per-neighbour status is kept as one byte per neighbour (in the order of the
# sorted neighbourhood), not as a dict of enum members: a dict costs about 1 KiB per
# client at k = 30, and a simulation holds every client at once
_ALIVE, _DROPPED_0, _DROPPED_1, _DROPPED_2 = 0, 1, 2, 3
_STATUS = (PeerStatus.ALIVE, PeerStatus.DROPPED_AT_ROUND_0, PeerStatus.DROPPED_AT_ROUND_1,
           PeerStatus.DROPPED_AT_ROUND_2)
_CODE = {st: code for code, st in enumerate(_STATUS)}


class _Abort(Exception):
    def __init__(self, reason: AbortReason) -> None:
        self.reason = reason


_S = ClientState
_T = Transition
_ABORT_ON_SERVER_ABORT = {(st, ServerAbort): _T("_on_server_abort", _S.ABORTED)
                          for st in (_S.AWAIT_KEYS, _S.AWAIT_SHARES, _S.AWAIT_CONSISTENCY,
                                     _S.AWAIT_UNMASK)}
#: The client's state diagram, one table per variant: ``(state, event type) ->
#: Transition(handler, next state)``. The dispatcher sets the next state when the
#: handler returns; a handler that detects a remote inconsistency aborts instead (sticky
#: ``ABORTED`` with an :class:`AbortReason`). Every pair not listed is local misuse
#: (:class:`UnexpectedEvent`, state unchanged).
CLIENT_TRANSITIONS: dict[bool, dict[tuple[ClientState, type], Transition]] = {
    False: {   # honest-but-curious server: no consistency round
        (_S.INIT, Start): _T("_on_start", _S.AWAIT_KEYS),
        (_S.AWAIT_KEYS, KeyList): _T("_on_keys", _S.AWAIT_SHARES),
        (_S.AWAIT_SHARES, RoutedShares): _T("_on_shares", _S.AWAIT_UNMASK),
        (_S.AWAIT_UNMASK, UnmaskRequest): _T("_on_unmask", _S.COMPLETED),
        **{k: v for k, v in _ABORT_ON_SERVER_ABORT.items()
           if k[0] is not _S.AWAIT_CONSISTENCY},
    },
    True: {    # malicious server: signed keys and the round-3 consistency check
        (_S.INIT, Start): _T("_on_start", _S.AWAIT_KEYS),
        (_S.AWAIT_KEYS, KeyList): _T("_on_keys", _S.AWAIT_SHARES),
        (_S.AWAIT_SHARES, RoutedShares): _T("_on_shares", _S.AWAIT_CONSISTENCY),
        (_S.AWAIT_CONSISTENCY, ConsistencyRequest): _T("_on_consistency", _S.AWAIT_UNMASK),
        (_S.AWAIT_UNMASK, UnmaskRequest): _T("_on_unmask", _S.COMPLETED),
        **_ABORT_ON_SERVER_ABORT,
    },
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
        memo: a simulation's :class:`~secagg.memo.SessionMemo` of this session, shared
            by the clients it plays: signature checks and pairwise key derivations of
            the very same bytes are done once (the client still decides on exactly the
            bytes it received). ``None`` (a real device): everything computed here.

    Raises:
        ParameterError: bad index, input or keys.
    """

    # no per-instance dict: a simulation holds one client object per participant
    __slots__ = ("config", "index", "_value", "_rand", "_signing_key", "_verify_keys",
                 "neighbours", "_table", "state", "abort_reason", "server_abort_reason",
                 "missing_required", "_status", "_c_sk", "_s_sk", "_b", "_c_pk", "_s_pk",
                 "_nonce", "session",
                 "_records", "_records_hold", "_signed_alive", "_revealed", "_memo",
                 "__weakref__")

    def __init__(self, config: SessionConfig, index: int, value: np.ndarray, rand: Any, *,
                 signing_key: bytes | None = None,
                 verify_keys: Sequence[bytes] | None = None,
                 memo: SessionMemo | None = None) -> None:
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
        # a tuple given by the caller is shared, not copied: n clients holding their own
        # n-entry copy would be O(n^2) memory
        self._verify_keys = (verify_keys if isinstance(verify_keys, tuple) or verify_keys is None
                             else tuple(verify_keys))
        #: ``N(u)``: fixed in round 1 from the key list's transcript root (the graph
        #: seed is derived from ``sid_1``, see :meth:`SessionConfig.graph_seed`)
        # kept as a tuple only: a set (or an n-entry mask) per client costs several KiB
        # per client at rest; the rounds that test membership build a set for the call
        self.neighbours: tuple[int, ...] = ()
        self._table = CLIENT_TRANSITIONS[bool(config.malicious)]
        self.state = ClientState.INIT
        self.abort_reason: AbortReason | None = None
        self.server_abort_reason: AbortReason | None = None
        #: the required positions the server's survivor set left out, when that is the
        #: abort (``REQUIRED_PARTICIPANT_MISSING``): who the client would not unmask
        #: without
        self.missing_required: tuple[int, ...] = ()
        #: one status code per neighbour, in the order of ``neighbours`` (see
        #: :attr:`peer_status` for the readable form)
        self._status = bytearray()
        # secrets
        self._c_sk = self._s_sk = self._b = b""
        self._c_pk = self._s_pk = self._nonce = b""
        #: the transcript-bound session id ``sid_1`` (set in round 1)
        self.session = b""
        # per-neighbour material, one fixed-size record per neighbour slot (the slot of
        # ``v`` is its index in ``neighbours``) in one buffer: from round 1 to round 2
        # the pairwise keys (``_PAIR`` bytes: share key, mask seed; zeros for a
        # neighbour without keys), from round 2 on, written over them, the encoded shares
        # held for each peer (``Share.to_bytes`` of the b-share, then of the s-share;
        # zeros where none were received). One buffer per client, not four dicts of small
        # bytes objects; reused in place, so that a simulation of many clients does not
        # leave each client's freed keys as a hole too small for its shares; and zeroed
        # when dropped (``_forget``).
        self._records = bytearray()
        self._records_hold = _NOTHING
        self._signed_alive: bytes | None = None
        # what this client revealed in round 4 (sorted owners; see revealed_b/revealed_s)
        self._revealed: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        self._memo = memo

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

    @property
    def revealed_b(self) -> frozenset[int]:
        """The peers whose b-share this client revealed in round 4."""
        return frozenset(self._revealed[0])

    @property
    def revealed_s(self) -> frozenset[int]:
        """The peers whose s-share this client revealed in round 4."""
        return frozenset(self._revealed[1])

    @property
    def peer_status(self) -> dict[int, PeerStatus]:
        """What this client knows about each neighbour (a fresh dict; empty before
        round 1)."""
        return {v: _STATUS[code] for v, code in zip(self.neighbours, self._status)}

    def _slot(self, v: int) -> int:
        """Index of ``v`` in the sorted neighbourhood, or -1 for a non-neighbour."""
        nb = self.neighbours
        i = bisect_left(nb, v)
        return i if i < len(nb) and nb[i] == v else -1

    def _keys_of(self, slot: int) -> tuple[bytes, bytes]:
        """The share key and mask seed of the neighbour in ``slot``."""
        assert self._records_hold == _KEYS
        start, r = slot * _SLOT, self._records
        mid = start + crypto.KEY_BYTES
        return bytes(r[start:mid]), bytes(r[mid:start + _PAIR])

    def _held_share(self, slot: int, which: int) -> bytes:
        """The encoded b-share (``which = 0``) or s-share (1) held for ``slot``."""
        assert self._records_hold == _HELD
        start = slot * _SLOT + which * _HELD_Y
        return (self.index + 1).to_bytes(_X_BYTES, "big") + self._records[start:start + _HELD_Y]

    # read-only views of the compact records (for transcripts and tests)
    def _keys_by_peer(self, which: int) -> dict[int, bytes]:
        return {v: self._keys_of(i)[which] for i, v in enumerate(self.neighbours)
                if self._records_hold == _KEYS and self._status[i] == _ALIVE}

    @property
    def _share_keys(self) -> dict[int, bytes]:
        return self._keys_by_peer(0)

    @property
    def _mask_seeds(self) -> dict[int, bytes]:
        return self._keys_by_peer(1)

    def _held_by_owner(self, which: int) -> dict[int, bytes]:
        return {v: self._held_share(i, which) for i, v in enumerate(self.neighbours)
                if self._records_hold == _HELD and self._status[i] in (_ALIVE, _DROPPED_2)}

    @property
    def _held_b(self) -> dict[int, bytes]:
        return self._held_by_owner(0)

    @property
    def _held_s(self) -> dict[int, bytes]:
        return self._held_by_owner(1)

    def _dispatch(self, event: Any) -> list[Any]:
        edge = self._table.get((self.state, type(event)))
        if edge is None:
            raise UnexpectedEvent(
                f"client {self.index}: {type(event).__name__} is not legal in state "
                f"{self.state.value}")
        handler: Callable[[Any], list[Any]] = getattr(self, edge.handler)
        try:
            out = handler(event)
        except _Abort as a:
            self.state = ClientState.ABORTED
            self.abort_reason = a.reason
            self._forget(shares=True)
            return []
        self.state = edge.next_state  # type: ignore[assignment]
        return out

    def _forget(self, *, shares: bool) -> None:
        """Drop secrets no later step needs: the self-mask seed and the pairwise keys
        once the masked input is out (the key pairs went after round 1; here too, for
        a client that aborts before), and (``shares``) the shares held
        for peers once round 4 is answered or the client aborted. The records buffer
        is zeroed before it is dropped; Python cannot wipe ``bytes`` (the keys and the
        copies taken from the records), so for them dropping the references is all:
        it keeps a finished client from carrying them (and memory at what the
        remaining rounds need)."""
        self._c_sk = self._s_sk = self._b = b""
        if shares or self._records_hold == _KEYS:
            records = self._records
            records[:] = bytes(len(records))
            self._records = bytearray()
            self._records_hold = _NOTHING

    # ------------------------------------------------------------------ round 0

    def _on_start(self, _: Start) -> list[Any]:
        c_sk, c_pk = crypto.x25519_keypair(self._rand)
        s_sk, s_pk = crypto.x25519_keypair(self._rand)
        b = self._rand.token_bytes(crypto.KEY_BYTES)
        nonce = self._rand.token_bytes(crypto.FRESH_NONCE_BYTES)
        sig = b""
        if self.config.malicious:
            assert self._signing_key is not None
            sig = crypto.ed25519_sign(self._signing_key,
                                      self.config.keys_message(self.index, nonce, c_pk, s_pk))
        msg = AdvertiseKeys(self.index, c_pk, s_pk, nonce, sig)
        self._c_sk, self._c_pk, self._s_sk, self._s_pk, self._b = c_sk, c_pk, s_sk, s_pk, b
        self._nonce = nonce
        return [msg]

    # ------------------------------------------------------------------ round 1

    def _on_keys(self, msg: KeyList) -> list[Any]:
        cfg, u = self.config, self.index
        # the transcript must hold this attempt's fresh nonce and keys of this client
        if len(msg.path) != crypto.transcript_depth(cfg.n) or not crypto.constant_time_equal(
                crypto.transcript_root_from_path(
                    crypto.transcript_leaf(u, self._nonce, self._c_pk, self._s_pk), u,
                    msg.path), msg.transcript):
            raise _Abort(AbortReason.STALE_SESSION)
        sid = cfg.transcript_session(msg.transcript)
        # the graph of this attempt follows from the root just checked: a key list
        # routed by any other graph (one the server fixed before round 0, or derived
        # from another root) names a non-neighbour
        neighbours = cfg.neighbours(u, msg.transcript)
        neighbour_set = frozenset(neighbours)
        peers = tuple(e.sender for e in msg.entries)
        for e in msg.entries:
            if e.sender == u and (e.c_pk != self._c_pk or e.s_pk != self._s_pk):
                raise _Abort(AbortReason.OWN_KEYS_ALTERED)
            if e.sender not in neighbour_set:
                raise _Abort(AbortReason.KEY_FROM_NON_NEIGHBOUR)
        if len(peers) < cfg.threshold:
            raise _Abort(AbortReason.TOO_FEW_KEYS)
        keys = [self._c_pk, self._s_pk]
        for e in msg.entries:
            keys += (e.c_pk, e.s_pk)
        if len(set(keys)) != len(keys):
            raise _Abort(AbortReason.DUPLICATE_KEYS)
        memo = self._memo
        if cfg.malicious:
            assert self._verify_keys is not None
            verify = memo.verify if memo is not None else crypto.ed25519_verify
            for e in msg.entries:
                try:
                    verify(self._verify_keys[e.sender],
                           cfg.keys_message(e.sender, e.nonce, e.c_pk, e.s_pk), e.signature)
                except CryptoError:
                    raise _Abort(AbortReason.INVALID_KEY_SIGNATURE) from None
        # one record per neighbour slot: the keys of a peer, zeros for a neighbour that
        # advertised none (its status says so)
        status = bytearray([_DROPPED_0]) * len(neighbours)
        records = bytearray(_SLOT * len(neighbours))
        share_keys: list[bytes] = []
        c_sk, c_pk, s_sk, s_pk = self._c_sk, self._c_pk, self._s_sk, self._s_pk
        try:
            for e in msg.entries:
                pc = cfg.pair_context(sid, u, e.sender)
                if memo is not None:
                    share_key, mask_seed = memo.pairwise_keys(pc, c_sk, c_pk, e.c_pk,
                                                              s_sk, s_pk, e.s_pk)
                else:
                    share_key = crypto.hkdf(crypto.x25519_shared(c_sk, e.c_pk),
                                            label=crypto.LABEL_SHARE_KEY, context=pc)
                    mask_seed = crypto.hkdf(crypto.x25519_shared(s_sk, e.s_pk),
                                            label=crypto.LABEL_MASK_SEED, context=pc)
                start = bisect_left(neighbours, e.sender) * _SLOT
                records[start:start + _PAIR] = share_key + mask_seed
                status[start // _SLOT] = _ALIVE
                share_keys.append(share_key)
        except CryptoError:
            raise _Abort(AbortReason.INVALID_PUBLIC_KEY) from None
        xs = [v + 1 for v in peers]
        b_shares, s_shares = shamir.split_encoded_many((self._b, self._s_sk), xs,
                                                       cfg.threshold, self._rand)
        # one ciphertext per peer, in the key list's order (the nonces drawn in one call)
        cts = tuple(crypto.aead_encrypt_many(
            share_keys, [bs + ss for bs, ss in zip(b_shares, s_shares)],
            crypto.routing_ads(sid, 1, [(u, v) for v in peers]), self._rand))
        out = ShareKeys(u, peers, cts)
        # mutate
        self.session = sid
        self.neighbours = neighbours
        self._records, self._records_hold = records, _KEYS
        self._status = status
        # no later step needs the key pairs (the pairwise keys are derived, s_sk is
        # shared) or the nonce: only b, for the self-mask
        self._c_sk = self._s_sk = b""
        self._c_pk = self._s_pk = self._nonce = b""
        return [out]

    # ------------------------------------------------------------------ round 2

    def _on_shares(self, msg: RoutedShares) -> list[Any]:
        cfg, u = self.config, self.index
        slots = [self._slot(v) for v in msg.senders]
        for slot in slots:
            # only a peer of the key list holds a share key (its status is ALIVE)
            if slot < 0 or self._status[slot] != _ALIVE:
                raise _Abort(AbortReason.SHARES_FROM_UNKNOWN_PEER)
        if len(msg.senders) < cfg.threshold:
            raise _Abort(AbortReason.TOO_FEW_SHARES)
        held = [bytes(_SLOT)] * len(self.neighbours)  # the y lanes of each slot's shares
        halves = []
        assert self._records_hold == _KEYS
        records = self._records
        try:
            pts = crypto.aead_decrypt_many(
                [bytes(records[slot * _SLOT:slot * _SLOT + crypto.KEY_BYTES])
                 for slot in slots],
                msg.ciphertexts,
                crypto.routing_ads(self.session, 1, [(v, u) for v in msg.senders]))
            failed = len(pts)
        except crypto.AeadBatchError as exc:
            # the shares before the first that does not decrypt are read as before it
            # (a malformed one among them is that abort's reason, as when one by one)
            pts, failed = exc.done, exc.index
        for slot, pt in zip(slots, pts):
            if len(pt) != _SHARE_PLAINTEXT:
                raise _Abort(AbortReason.MALFORMED_SHARE)
            halves += (pt[:_SHARE], pt[_SHARE:])
            held[slot] = pt[_X_BYTES:_SHARE] + pt[_SHARE + _X_BYTES:]
        if failed < len(slots):
            raise _Abort(AbortReason.DECRYPTION_FAILED)
        # every half the encoding of Share(x = u + 1, lanes < PRIME), checked together
        try:
            shamir.check_encodings(halves, u + 1)
        except ParameterError:
            raise _Abort(AbortReason.MALFORMED_SHARE) from None
        y = self._masked_input(msg.senders, slots)
        out = MaskedInput.from_vector(u, y, cfg.modulus)
        if cfg.malicious:
            assert self._signing_key is not None
            out = out.signed(crypto.ed25519_sign(self._signing_key, cfg.input_message(
                self.session, u, hashlib.sha256(out.packed).digest())))
        # mutate: a peer of the key list whose shares did not come is dead from now on
        received = set(slots)
        for slot, code in enumerate(self._status):
            if code == _ALIVE and slot not in received:
                self._status[slot] = _DROPPED_1
        # the shares over the keys, in place: every slot written (zeros where no share
        # came), so no key is left
        if _SLOT > 2 * _HELD_Y:  # pragma: no cover - pairwise records are shorter
            held = [y.ljust(_SLOT, b"\0") for y in held]
        self._records[:] = b"".join(held)
        self._records_hold = _HELD
        self._forget(shares=False)
        return [out]

    def _input(self) -> np.ndarray:
        value = self._value
        return _check_input(self.config, value()) if callable(value) else value

    def _masked_input(self, peers: Sequence[int], slots: Sequence[int]) -> np.ndarray:
        """``x_u + PRG(b_u) + sum_{u<v} PRG(s_uv) - sum_{v<u} PRG(s_uv) mod R`` over
        ``peers`` (in neighbour ``slots``)."""
        cfg, u = self.config, self.index
        acc = ModAccumulator(cfg.dim, cfg.modulus)
        acc.add(self._input())
        terms = [(self_mask_seed(self.session, self._b), 1)]
        terms += [(self._keys_of(slot)[1], 1 if u < v else -1)
                  for v, slot in zip(peers, slots)]
        acc.add_masks(terms)
        return acc.value()

    # ------------------------------------------------------------------ round 3

    def _on_consistency(self, msg: ConsistencyRequest) -> list[Any]:
        cfg, u = self.config, self.index
        self._check_session(msg.session)
        alive = self._decode_set(msg.n, msg.alive)
        status = self._status_after(alive)
        assert self._signing_key is not None
        sig = crypto.ed25519_sign(self._signing_key,
                                  cfg.consistency_message(self.session, msg.alive))
        out = ConsistencySignature(u, sig)
        # mutate: the peers left out of the signed U3 are dead from now on
        self._status = status
        self._signed_alive = msg.alive
        return [out]

    def _check_session(self, session: bytes) -> None:
        """A request names the transcript-bound session id it belongs to; another id is
        a message of another attempt (a replay)."""
        if not crypto.constant_time_equal(session, self.session):
            raise _Abort(AbortReason.STALE_SESSION)

    def _decode_set(self, n: int, bitmap: bytes) -> np.ndarray:
        if n != self.config.n:
            raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)
        return bitmap_to_mask(bitmap, n)

    def _status_after(self, alive: np.ndarray) -> bytearray:
        """The per-peer status codes (one per neighbour slot) once the server announced
        the survivor set ``alive``.

        Status only ever moves from ``ALIVE`` to a ``DROPPED_AT_ROUND_k``, never back:
        a neighbour named alive must still be ``ALIVE`` here (it sent us its shares and
        was never announced dropped), and an ``ALIVE`` neighbour left out of ``alive``
        becomes ``DROPPED_AT_ROUND_2`` (shares received, no masked input).

        Raises:
            _Abort: ``u`` itself is not alive; a neighbour named alive is already
                dead for this client; fewer than ``t`` neighbours alive.
        """
        if not alive[self.index]:
            raise _Abort(AbortReason.SELF_NOT_ALIVE)
        if any(not alive[r] for r in self.config.required):
            self.missing_required = tuple(int(r) for r in self.config.required
                                          if not alive[r])
            raise _Abort(AbortReason.REQUIRED_PARTICIPANT_MISSING)
        status = bytearray(self._status)
        survivors = 0
        for slot, v in enumerate(self.neighbours):
            if alive[v]:
                if status[slot] != _ALIVE:
                    raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)
                survivors += 1
            elif status[slot] == _ALIVE:
                status[slot] = _DROPPED_2
        if survivors < self.config.threshold:
            raise _Abort(AbortReason.TOO_FEW_SURVIVORS)
        return status

    # ------------------------------------------------------------------ round 4

    def _on_unmask(self, msg: UnmaskRequest) -> list[Any]:
        cfg, u = self.config, self.index
        self._check_session(msg.session)
        alive = self._decode_set(msg.n, msg.alive)
        dropped = self._decode_set(msg.n, msg.dropped)
        if (alive & dropped).any():
            raise _Abort(AbortReason.ALIVE_AND_DROPPED)
        if cfg.malicious:
            if self._signed_alive is None or msg.alive != self._signed_alive:
                raise _Abort(AbortReason.CONSISTENCY_SET_CHANGED)
            assert self._verify_keys is not None
            valid = 0
            neighbour_set = frozenset(self.neighbours)
            verify = self._memo.verify if self._memo is not None else crypto.ed25519_verify
            signed = cfg.consistency_message(self.session, msg.alive)
            for w, sig in zip(msg.signers, msg.signatures):
                if w != u and not (w in neighbour_set and alive[w]):
                    raise _Abort(AbortReason.SIGNER_NOT_ALLOWED)
                try:
                    verify(self._verify_keys[w], signed, sig)
                except CryptoError:
                    raise _Abort(AbortReason.INVALID_CONSISTENCY_SIGNATURE) from None
                if w != u:
                    valid += 1
            if valid < cfg.threshold:
                raise _Abort(AbortReason.TOO_FEW_SIGNATURES)
        status = self._status_after(alive)
        # the server's dropped set must be exactly the peers now DROPPED_AT_ROUND_2
        named = [slot for slot, v in enumerate(self.neighbours) if dropped[v]]
        if named != [slot for slot, code in enumerate(status) if code == _DROPPED_2]:
            if any(status[slot] != _DROPPED_2 for slot in named):
                raise _Abort(AbortReason.UNKNOWN_PEER_IN_SET)  # dropped before sharing
            raise _Abort(AbortReason.DROPPED_SET_MISMATCH)
        out = self._unmask_shares(status)
        if cfg.malicious:
            assert self._signing_key is not None
            out = dataclasses.replace(out, signature=crypto.ed25519_sign(
                self._signing_key, cfg.unmask_message(self.session, u, out.body_digest())))
        # mutate
        self._status = status
        self._revealed = (out.b_owners, out.s_owners)
        self._forget(shares=True)
        return [out]

    def _unmask_shares(self, status: bytearray | Mapping[int, PeerStatus]) -> UnmaskShares:
        """The round-4 answer, decided by per-peer status alone (the single decision
        point, as in Google's fcp/secagg client): the ``b``-share of an ``ALIVE`` peer,
        the ``s^SK``-share of a ``DROPPED_AT_ROUND_2`` peer, nothing for a peer dropped
        earlier (this client holds no share of it). Status never returns to ``ALIVE``,
        so a peer once dead never gets its self-mask share revealed, and a surviving
        peer never gets its mask-key share revealed.

        ``status`` is one code per neighbour slot (or, for tests, a mapping from peer
        to :class:`PeerStatus`)."""
        if not isinstance(status, bytearray):
            status = bytearray(_CODE[status[v]] for v in self.neighbours)
        nb = self.neighbours
        b_slots = [slot for slot, code in enumerate(status) if code == _ALIVE]
        s_slots = [slot for slot, code in enumerate(status) if code == _DROPPED_2]
        return UnmaskShares(self.index, tuple(nb[i] for i in b_slots),
                            tuple(self._held_share(i, 0) for i in b_slots),
                            tuple(nb[i] for i in s_slots),
                            tuple(self._held_share(i, 1) for i in s_slots))

    # ------------------------------------------------------------------ abort

    def _on_server_abort(self, msg: ServerAbort) -> list[Any]:
        self.server_abort_reason = AbortReason(msg.reason)
        raise _Abort(AbortReason.SERVER_ABORTED)


def self_mask_seed(session: bytes, b: bytes) -> bytes:
    """PRG seed of the self mask: ``HKDF(b_u, "self-mask", sid_1)`` (``session`` is the
    transcript-bound session id of the attempt)."""
    return crypto.hkdf(b, label=crypto.LABEL_SELF_MASK, context=session)


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
