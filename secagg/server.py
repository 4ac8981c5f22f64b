"""The server of secure aggregation as a sans-I/O state machine.

Theory of operation (Bonawitz et al., CCS 2017, Fig. 4; SecAgg+ of Bell et al., CCS 2020)
------------------------------------------------------------------------------------------
The server collects one message per client and round; the caller decides when a round
is over (:meth:`SecAggServer.close_round`: the server has no clock). The client sets
are named as in the paper: ``U1`` advertised keys, ``U2`` sent shares, ``U3`` sent a
masked input, ``U4`` signed ``U3`` (malicious variant; ``U4 = U3`` otherwise), ``U5``
sent unmasking shares.

* close round 0: build the transcript tree over ``(v, r_v, c_v^PK, s_v^PK)`` of ``U1``
  (``crypto.transcript_tree``), fix ``sid_1 = H(sid_0, root)`` and with it the
  neighbour graph (seeded by ``sid_1``; round 0 does not depend on it), and send every
  ``u`` in ``U1`` the keys of ``U1 & N(u)``, the root and ``u``'s authentication path.
* close round 1: send every ``u`` in ``U2`` the ciphertexts addressed to it by
  ``U2 & N(u)``.
* close round 2: ``U3`` must leave every secret to be rebuilt (``b_u`` of ``u`` in
  ``U3``; ``s_v^SK`` of a dropped ``v`` in ``U2 - U3`` that has a neighbour in ``U3``,
  i.e. whose pairwise masks are in the sum) at least ``t`` neighbours in ``U3``; send
  ``U3`` for signing (malicious) or the unmasking request ``(U3, U2 - U3)``.
* close round 3 (malicious): the same condition on ``U4``; forward to each ``u`` in
  ``U4`` its own signature and those of exactly ``t`` signing neighbours.
* close round 4: for every ``u`` in ``U3`` rebuild ``b_u`` from ``t`` shares and
  subtract ``PRG(b_u)``; for every dropped ``v`` in ``U2 - U3`` rebuild ``s_v^SK``
  (checked against the advertised ``s_v^PK``), recompute ``s_vw`` with each neighbour
  ``w`` in ``U3`` and cancel the pairwise mask ``w`` added. What is left is
  ``sum_{u in U3} x_u mod R``.

Masked inputs are added to a running sum as they arrive (memory ``O(dim)``, not
``O(n dim)``); only a SHA-256 digest of each is kept, for the server's view.

A client message that does not fit (unknown or duplicate sender, a sender outside the
previous round's set, wrong recipients, a bad signature or share) raises
:class:`~secagg.state.InvalidMessage` and is ignored. If a round closes with too few
clients the server moves to ``ABORTED`` with an :class:`~secagg.state.AbortReason` and
returns a :class:`~secagg.messages.ServerAbort` for every client still in the session.
"""
from __future__ import annotations

import hashlib
from bisect import bisect_left
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import crypto, graph as graph_mod, shamir
from .client import SHARE_CIPHERTEXT_BYTES, self_mask_seed
from .errors import CryptoError, ParameterError
from .memo import SessionMemo
from .messages import (
    CLIENT_MESSAGES, AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList,
    MaskedInput, RoutedShares, ServerAbort, ShareKeys, UnmaskRequest, UnmaskShares,
)
from .state import (
    AbortReason, CloseRound, InvalidMessage, ModAccumulator, ServerState, SessionConfig,
    Transition, UnexpectedEvent, set_to_bitmap,
)

__all__ = ["SecAggServer", "SERVER_TRANSITIONS", "COLLECTING_ROUND"]

_S = ServerState
_T = Transition
_COMMON: dict[tuple[ServerState, type], Transition] = {
    (_S.COLLECT_KEYS, AdvertiseKeys): _T("_on_keys", _S.COLLECT_KEYS),
    (_S.COLLECT_KEYS, CloseRound): _T("_close_keys", _S.COLLECT_SHARES),
    (_S.COLLECT_SHARES, ShareKeys): _T("_on_shares", _S.COLLECT_SHARES),
    (_S.COLLECT_SHARES, CloseRound): _T("_close_shares", _S.COLLECT_INPUTS),
    (_S.COLLECT_INPUTS, MaskedInput): _T("_on_input", _S.COLLECT_INPUTS),
    (_S.COLLECT_UNMASK, UnmaskShares): _T("_on_unmask", _S.COLLECT_UNMASK),
    (_S.COLLECT_UNMASK, CloseRound): _T("_close_unmask", _S.COMPLETED),
}
#: The server's state diagram, one table per variant: ``(state, event type) ->
#: Transition(handler, next state)``. A client message keeps the state (the round stays
#: open until the caller closes it); ``CloseRound`` moves on, or aborts (sticky
#: ``ABORTED`` with an :class:`AbortReason`) when too few clients answered. Every pair not
#: listed is local misuse (:class:`UnexpectedEvent`, state unchanged).
SERVER_TRANSITIONS: dict[bool, dict[tuple[ServerState, type], Transition]] = {
    False: {
        **_COMMON,
        (_S.COLLECT_INPUTS, CloseRound): _T("_close_inputs", _S.COLLECT_UNMASK),
    },
    True: {
        **_COMMON,
        (_S.COLLECT_INPUTS, CloseRound): _T("_close_inputs", _S.COLLECT_SIGNATURES),
        (_S.COLLECT_SIGNATURES, ConsistencySignature): _T("_on_signature",
                                                          _S.COLLECT_SIGNATURES),
        (_S.COLLECT_SIGNATURES, CloseRound): _T("_close_signatures", _S.COLLECT_UNMASK),
    },
}

#: the round each collecting state collects, derived from the tables: the ``ROUND`` of
#: the client message the state takes (the terminal states collect nothing)
COLLECTING_ROUND: dict[ServerState, int] = {
    state: event.ROUND for table in SERVER_TRANSITIONS.values() for (state, event) in table
    if event in CLIENT_MESSAGES}

Outgoing = Sequence[tuple[int, Any]]


class _Abort(Exception):
    def __init__(self, reason: AbortReason, recipients: Sequence[int]) -> None:
        self.reason = reason
        self.recipients = recipients


class _Replies(Sequence[tuple[int, Any]]):
    """A round's replies ``(u, message)`` for ``u`` in ``recipients``, each built by
    ``build(u)`` when it is taken, so that a simulation holds one at a time: the key
    lists and the routed ciphertexts of every client at once would double what the
    server already holds (their material stays in the server's own records until
    then). Taking a reply twice builds it twice (the same message)."""

    def __init__(self, recipients: list[int], build: Callable[[int], Any],
                 order: list[int] | None = None) -> None:
        self._recipients = recipients   # sorted (reply_to looks them up)
        self._order = recipients if order is None else order  # the order they go out
        self._build = build

    def __len__(self) -> int:
        return len(self._recipients)

    @property
    def order(self) -> list[int]:
        """The recipients in the order the replies go out (a copy)."""
        return list(self._order)

    def _item(self, u: int) -> tuple[int, Any]:
        return u, self._build(u)

    def __getitem__(self, i):  # type: ignore[no-untyped-def,override]
        if isinstance(i, slice):
            return [self._item(u) for u in self._order[i]]
        return self._item(self._order[i])

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return map(self._item, self._order)

    def reply_to(self, u: int) -> Any:
        """The message for recipient ``u`` (built now), or ``None`` if it has none."""
        i = bisect_left(self._recipients, u)
        if i < len(self._recipients) and self._recipients[i] == u:
            return self._build(u)
        return None


class SecAggServer:
    """The aggregation server of one session.

    Args:
        config: the session.
        verify_keys: Ed25519 public keys of all participants by roster position
            (malicious-server variant: the server checks signatures too, so that one
            bad client cannot make honest ones abort).
        memo: a :class:`~secagg.memo.SessionMemo` of this session shared with the
            simulated clients, or a dict shared with another server of the same
            session in the same process (a simulation's replica of this server): a
            signature check or a secret reconstruction that was done on the very same
            bytes is not done again (each is a pure function of those bytes; a check
            that failed is remembered as failed and refused again). ``None``: no
            sharing. The graph fixed when round 0 closes is kept there too (a pure
            function of the session and the transcript root), so that a server and
            its replica of one session hold one copy of it.
        routes: route the round-1 ciphertexts (the default). A server that sends
            nothing, such as helper 2's replica of the server (it checks every client
            message as the server does and computes the same sum), passes ``False``:
            it checks each round-1 message's recipients and ciphertext lengths as
            the server does but keeps no ciphertext, and its round 1 closes with no
            messages (the ciphertexts determine no part of the sum).

    Raises:
        ParameterError: missing verification keys in the malicious variant.
    """

    def __init__(self, config: SessionConfig, *,
                 verify_keys: Sequence[bytes] | None = None,
                 memo: SessionMemo | dict[Any, Any] | None = None,
                 routes: bool = True) -> None:
        if config.malicious and (verify_keys is None or len(verify_keys) != config.n):
            raise ParameterError("the malicious-server variant needs n verification keys")
        self.config = config
        self._verify_keys = tuple(verify_keys) if verify_keys is not None else None
        self._memo = SessionMemo(entries=memo) if isinstance(memo, dict) else memo
        self.routes = bool(routes)
        n = config.n
        #: ``N(u)`` for every ``u``: fixed when round 0 closes, from the transcript
        #: root (the graph seed is derived from ``sid_1``); empty before
        self.neighbours: list[tuple[int, ...]] = []
        self._table = SERVER_TRANSITIONS[bool(config.malicious)]
        self.state = ServerState.COLLECT_KEYS
        self.abort_reason: AbortReason | None = None
        self.result: np.ndarray | None = None
        self._keys: dict[int, AdvertiseKeys] = {}
        self._in_u1 = np.zeros(n, dtype=bool)
        self._in_u2 = np.zeros(n, dtype=bool)
        self._in_u3 = np.zeros(n, dtype=bool)
        self._in_u4 = np.zeros(n, dtype=bool)
        self._in_u5 = np.zeros(n, dtype=bool)
        #: the round-1 ciphertexts (all of one length), sender after sender, each
        #: sender's in the order of its recipients from ``_cts_start[sender]`` (in
        #: ciphertexts): one buffer for the round, allocated when round 0 closes (its
        #: pages are touched as ciphertexts arrive), not an object per ciphertext or
        #: per sender scattered over the heap
        self._cts = np.zeros(0, np.uint8)
        self._cts_start = np.zeros(1, np.int64)
        self._acc = ModAccumulator(config.dim, config.modulus)
        self.input_digests: dict[int, bytes] = {}
        self._signatures: dict[int, bytes] = {}
        self._alive_bitmap = b""
        #: the transcript-bound session id ``sid_1`` and the round-0 transcript root
        #: (fixed when round 0 closes)
        self.session = b""
        self.transcript_root = b""
        self._needed_s: list[int] = []
        #: owner -> the first ``t`` checked encodings of its b- (s_sk-) shares, joined
        #: (``shamir.SHARE_WIRE_BYTES`` each; decoded only to rebuild the secret)
        self._b_shares: dict[int, bytearray] = {}
        self._s_shares: dict[int, bytearray] = {}
        #: the last sets fixed by a closed round (for the server's view)
        self.sets: dict[str, frozenset[int]] = {}

    # ------------------------------------------------------------------ driving

    def receive(self, message: Any) -> None:
        """Take one client message of the current round.

        Raises:
            UnexpectedEvent: the message type is not legal in the current state.
            InvalidMessage: the message does not fit this session (ignored; state
                unchanged).
        """
        self._dispatch(message)

    def close_round(self) -> Outgoing:
        """Close the current round; returns ``(recipient position, message)`` pairs.

        On an abort the state becomes ``ABORTED`` (see :attr:`abort_reason`) and the
        returned messages are :class:`ServerAbort` notices. After round 4 the state is
        ``COMPLETED`` and :attr:`result` holds the sum.

        Raises:
            UnexpectedEvent: the session is already completed or aborted.
        """
        return self._dispatch(CloseRound())

    @property
    def round(self) -> int | None:
        """The round being collected (``COLLECTING_ROUND``), ``None`` once finished."""
        return COLLECTING_ROUND.get(self.state)

    def _dispatch(self, event: Any) -> Any:
        edge = self._table.get((self.state, type(event)))
        if edge is None:
            raise UnexpectedEvent(f"server: {type(event).__name__} is not legal in state "
                                  f"{self.state.value}")
        handler: Callable[[Any], Any] = getattr(self, edge.handler)
        try:
            out = handler(event)
        except _Abort as a:
            self.state = ServerState.ABORTED
            self.abort_reason = a.reason
            return [(u, ServerAbort(a.reason.value)) for u in a.recipients]
        self.state = edge.next_state  # type: ignore[assignment]
        return out

    def _graph(self, root: bytes) -> list[tuple[int, ...]]:
        """``config.all_neighbours(root)``, computed once per memo: a server and its
        in-process replica of one session share the same (immutable) lists."""
        memo = self._memo
        if memo is None:
            return self.config.all_neighbours(root)
        cfg = self.config
        key = ("graph", cfg.n, cfg.graph, cfg.degree, cfg.session, root)
        graph = memo.get(key)
        if graph is None:
            graph = cfg.all_neighbours(root)
            memo.put(key, graph)
        return graph

    def _enough(self, owners: list[int], holders: np.ndarray) -> bool:
        """Does every owner have at least ``t`` neighbours in ``holders``?"""
        t = self.config.threshold
        return all(int(holders[list(self.neighbours[v])].sum()) >= t for v in owners)

    @staticmethod
    def _members(mask: np.ndarray) -> list[int]:
        return [int(i) for i in np.flatnonzero(mask)]

    def _sender(self, sender: int, previous: np.ndarray | None, current: np.ndarray) -> int:
        if sender >= self.config.n:
            raise InvalidMessage(f"unknown sender {sender}")
        if current[sender]:
            raise InvalidMessage(f"duplicate message from {sender}")
        if previous is not None and not previous[sender]:
            raise InvalidMessage(f"{sender} did not take part in the previous round")
        return sender

    # ------------------------------------------------------------------ round 0

    def _on_keys(self, msg: AdvertiseKeys) -> None:
        u = self._sender(msg.sender, None, self._in_u1)
        if msg.c_pk == msg.s_pk:
            raise InvalidMessage("the two public keys must differ")
        if self.config.malicious:
            self._check_signature(u, self.config.keys_message(u, msg.nonce, msg.c_pk,
                                                              msg.s_pk),
                                  msg.signature, "key")
        elif msg.signature:
            raise InvalidMessage("unexpected signature in the honest-but-curious variant")
        self._keys[u] = msg
        self._in_u1[u] = True

    def _close_keys(self, _: CloseRound) -> Outgoing:
        u1 = self._members(self._in_u1)
        if len(u1) < self.config.threshold + 1:
            raise _Abort(AbortReason.TOO_FEW_ADVERTISED, u1)
        # the round-0 transcript: one leaf per client of U1 (position, nonce, keys)
        levels = crypto.transcript_tree(self.config.n, {
            v: crypto.transcript_leaf(v, k.nonce, k.c_pk, k.s_pk) for v, k in self._keys.items()})
        root = levels[-1][0]
        # the graph of this attempt: fixed only now, by the root over the fresh nonces
        self.neighbours = self._graph(root)
        keys, neighbours, in_u1 = self._keys, self.neighbours, self._in_u1
        # the key lists go out along the graph's ring (Harary): the order of a round's
        # messages is no part of the protocol, but a simulation answers them in that
        # order, and each pair's keys are then derived by both ends within about k
        # steps of each other instead of half a round apart (what a simulation's memo
        # holds for pairs waiting for their second end: k^2/4 entries, not n k/4)
        order = None
        if self.config.graph != "complete":
            ring = graph_mod.ring_order(self.config.n, self.config.graph_seed(root))
            order = ring[in_u1[ring]].tolist()
        out = _Replies(u1, lambda u: KeyList(
            tuple(keys[v] for v in neighbours[u] if in_u1[v]), root,
            crypto.transcript_path(levels, u)), order)
        # room for round 1: each member of U1 addresses its neighbours in U1
        if self._in_u1.all():
            counts = np.fromiter(map(len, neighbours), np.int64, len(neighbours))
        else:
            counts = np.fromiter((int(in_u1[list(nb)].sum()) if in_u1[u] and nb else 0
                                  for u, nb in enumerate(neighbours)), np.int64,
                                 len(neighbours))
        self._cts_start = np.concatenate([[0], np.cumsum(counts)])
        if self.routes:
            self._cts = np.zeros(int(self._cts_start[-1]) * SHARE_CIPHERTEXT_BYTES,
                                 np.uint8)
        self.session = self.config.transcript_session(root)
        self.transcript_root = root
        self.sets["U1"] = frozenset(u1)
        return out

    # ------------------------------------------------------------------ round 1

    def _on_shares(self, msg: ShareKeys) -> None:
        u = self._sender(msg.sender, self._in_u1, self._in_u2)
        expected = tuple(v for v in self.neighbours[u] if self._in_u1[v])
        if msg.recipients != expected:
            raise InvalidMessage(f"{u} must address exactly its neighbours in U1")
        if any(len(ct) != SHARE_CIPHERTEXT_BYTES for ct in msg.ciphertexts):
            # an honest client's are all this long; a recipient could not decrypt another
            raise InvalidMessage(f"share ciphertexts must be {SHARE_CIPHERTEXT_BYTES} bytes")
        if self.routes:
            size = SHARE_CIPHERTEXT_BYTES
            start = int(self._cts_start[u]) * size
            self._cts[start:start + size * len(msg.ciphertexts)] = np.frombuffer(
                b"".join(msg.ciphertexts), np.uint8)
        self._in_u2[u] = True

    def _close_shares(self, _: CloseRound) -> Outgoing:
        u2 = self._members(self._in_u2)
        if len(u2) < self.config.threshold + 1:
            raise _Abort(AbortReason.TOO_FEW_SHARE_SENDERS, u2)
        out: Outgoing = (_Replies(u2, self._routed_shares(self._cts, self._cts_start))
                         if self.routes else [])
        self._cts, self._cts_start = np.zeros(0, np.uint8), np.zeros(1, np.int64)
        self.sets["U2"] = frozenset(u2)
        return out

    def _routed_shares(self, cts: np.ndarray, first: np.ndarray
                       ) -> Callable[[int], RoutedShares]:
        """``u -> RoutedShares``: the ciphertexts addressed to ``u`` by ``U2 & N(u)``,
        in sender order, cut from the round's buffer (``cts``, sender ``v``'s from
        ciphertext ``first[v]`` on)."""
        size, neighbours = SHARE_CIPHERTEXT_BYTES, self.neighbours
        in_u1, in_u2 = self._in_u1, self._in_u2
        all_u1 = bool(in_u1.all())

        def slot(v: int, u: int) -> int:
            # v addressed its neighbours in U1, in order: u's place among them is its
            # place in N(v) less the neighbours before it outside U1 (none, unless some
            # client did not advertise keys)
            nb = neighbours[v]
            i = bisect_left(nb, u)
            return i if all_u1 else i - sum(1 for w in nb[:i] if not in_u1[w])

        def build(u: int) -> RoutedShares:
            senders = tuple(v for v in neighbours[u] if in_u2[v])
            out = []
            for v in senders:
                start = (int(first[v]) + slot(v, u)) * size
                out.append(cts[start:start + size].tobytes())
            return RoutedShares(senders, tuple(out))

        return build

    # ------------------------------------------------------------------ round 2

    def _on_input(self, msg: MaskedInput) -> None:
        u = self._sender(msg.sender, self._in_u2, self._in_u3)
        if msg.dim != self.config.dim or msg.modulus != self.config.modulus:
            raise InvalidMessage("masked input has the wrong dimension or modulus")
        digest = hashlib.sha256(msg.packed).digest()
        if self.config.malicious:
            self._check_signature(u, self.config.input_message(self.session, u, digest),
                                  msg.signature, "masked-input")
        self._acc.add(msg.vector())
        self.input_digests[u] = digest
        self._in_u3[u] = True

    def _close_inputs(self, _: CloseRound) -> Outgoing:
        cfg = self.config
        u3 = self._members(self._in_u3)
        dropped = self._members(self._in_u2 & ~self._in_u3)
        # a dropped client's key is needed only if a survivor masked with it
        needed = [v for v in dropped if any(self._in_u3[w] for w in self.neighbours[v])]
        if len(u3) < cfg.threshold + 1 or not self._enough(u3 + needed, self._in_u3):
            raise _Abort(AbortReason.TOO_FEW_MASKED_INPUTS, u3)
        alive = set_to_bitmap(u3, cfg.n)
        self._alive_bitmap = alive
        self._needed_s = needed
        self.sets["U3"] = frozenset(u3)
        if cfg.malicious:
            return [(u, ConsistencyRequest(self.session, cfg.n, alive)) for u in u3]
        self._in_u4 = self._in_u3.copy()
        self.sets["U4"] = frozenset(u3)
        drop_map = set_to_bitmap(dropped, cfg.n)
        return [(u, UnmaskRequest(self.session, cfg.n, alive, drop_map)) for u in u3]

    # ------------------------------------------------------------------ round 3

    def _on_signature(self, msg: ConsistencySignature) -> None:
        u = self._sender(msg.sender, self._in_u3, self._in_u4)
        self._check_signature(u, self.config.consistency_message(self.session,
                                                                 self._alive_bitmap),
                              msg.signature, "consistency")
        self._signatures[u] = msg.signature
        self._in_u4[u] = True

    def _close_signatures(self, _: CloseRound) -> Outgoing:
        cfg = self.config
        u4 = self._members(self._in_u4)
        if len(u4) < cfg.threshold + 1 or not self._enough(
                self._members(self._in_u3) + self._needed_s, self._in_u4):
            raise _Abort(AbortReason.TOO_FEW_CONSISTENCY_SIGNATURES, u4)
        dropped = set_to_bitmap(self._members(self._in_u2 & ~self._in_u3), cfg.n)
        in_u4, neighbours, signatures = self._in_u4, self.neighbours, self._signatures

        def build(u: int) -> UnmaskRequest:
            # the client's own signature and exactly t of its signing neighbours: the
            # client needs t (Bonawitz et al. 2017, round 4), and each extra one would cost
            # it an Ed25519 verification and 64 bytes for no added assurance
            signing = [w for w in neighbours[u] if in_u4[w]][:cfg.threshold]
            signers = tuple(sorted([u] + signing))
            return UnmaskRequest(self.session, cfg.n, self._alive_bitmap, dropped, signers,
                                 tuple(signatures[w] for w in signers))

        self.sets["U4"] = frozenset(u4)
        return _Replies(u4, build)

    # ------------------------------------------------------------------ round 4

    def _on_unmask(self, msg: UnmaskShares) -> None:
        u = self._sender(msg.sender, self._in_u4, self._in_u5)
        nb = self.neighbours[u]
        exp_b = tuple(v for v in nb if self._in_u3[v])
        exp_s = tuple(v for v in nb if self._in_u2[v] and not self._in_u3[v])
        if msg.b_owners != exp_b or msg.s_owners != exp_s:
            raise InvalidMessage(f"{u} revealed shares for the wrong peers")
        # every share is checked (the encoding of Share(x = u + 1, lanes < PRIME)) before
        # any is kept; the kept encodings are decoded only to rebuild a secret
        try:
            shamir.check_encodings(msg.b_shares + msg.s_shares, u + 1)
        except ParameterError as exc:
            raise InvalidMessage(f"malformed share from {u}: {exc}") from None
        if self.config.malicious:
            self._check_signature(u, self.config.unmask_message(self.session, u,
                                                                msg.body_digest()),
                                  msg.signature, "unmasking")
        # reconstruction takes the first t shares of each owner; the server keeps no more
        # (each sender's point x = u + 1 is its own, so the kept points are distinct)
        full = self.config.threshold * shamir.SHARE_WIRE_BYTES
        for owners, encs, store in ((msg.b_owners, msg.b_shares, self._b_shares),
                                    (msg.s_owners, msg.s_shares, self._s_shares)):
            for v, enc in zip(owners, encs):
                kept = store.get(v)
                if kept is None:
                    store[v] = bytearray(enc)
                elif len(kept) < full:
                    kept += enc
        self._in_u5[u] = True

    def _check_signature(self, u: int, message: bytes, signature: bytes, what: str) -> None:
        """Verify ``u``'s Ed25519 signature on ``message`` (malicious variant).

        Raises:
            InvalidMessage: it does not verify (now, or when the memo checked these
                exact bytes before).
        """
        assert self._verify_keys is not None
        key = self._verify_keys[u]
        memo = self._memo
        try:
            if memo is not None:
                memo.verify(key, message, signature)
            else:
                crypto.ed25519_verify(key, message, signature)
        except CryptoError:
            raise InvalidMessage(f"bad {what} signature from {u}") from None

    def _combine(self, kept: Sequence[bytearray], t: int) -> list[bytes]:
        """The secrets rebuilt from the ``t`` share encodings kept for each owner, in
        one batch (:func:`secagg.shamir.combine_encoded_many`); a memo shared with a
        replica serves the ones already rebuilt from the very same bytes.

        Raises:
            ParameterError: some owner's encodings do not give a secret.
        """
        w = shamir.SHARE_WIRE_BYTES
        encodings = [bytes(k[:t * w]) for k in kept]
        memo = self._memo
        known: list[Any] = ([memo.get(("shamir", t, e)) for e in encodings]
                            if memo is not None else [None] * len(encodings))
        todo = [i for i, secret in enumerate(known) if secret is None]
        if todo:
            fresh = shamir.combine_encoded_many([encodings[i] for i in todo], t)
            for i, secret in zip(todo, fresh):
                known[i] = secret
                if memo is not None:
                    memo.put(("shamir", t, encodings[i]), secret)
        return known

    def _close_unmask(self, _: CloseRound) -> Outgoing:
        cfg, t = self.config, self.config.threshold
        u3 = self._members(self._in_u3)
        dropped = self._needed_s
        u5 = self._members(self._in_u5)
        full = t * shamir.SHARE_WIRE_BYTES
        if len(u5) < t or any(len(self._b_shares.get(u, b"")) < full for u in u3) or any(
                len(self._s_shares.get(v, b"")) < full for v in dropped):
            raise _Abort(AbortReason.TOO_FEW_UNMASK_RESPONSES, [])
        acc = self._acc
        # the masks to take off, as (seed, sign), for ModAccumulator.add_masks
        terms: list[tuple[bytes, int]] = []
        try:
            for b in self._combine([self._b_shares[u] for u in u3], t):
                terms.append((self_mask_seed(self.session, b), -1))
            s_sks = self._combine([self._s_shares[v] for v in dropped], t)
            for v, s_sk in zip(dropped, s_sks):
                if not crypto.constant_time_equal(crypto.x25519_public(s_sk),
                                                  self._keys[v].s_pk):
                    raise _Abort(AbortReason.RECONSTRUCTION_FAILED, [])
                for w in self.neighbours[v]:
                    if not self._in_u3[w]:
                        continue
                    seed = crypto.hkdf(crypto.x25519_shared(s_sk, self._keys[w].s_pk),
                                       label=crypto.LABEL_MASK_SEED,
                                       context=cfg.pair_context(self.session, v, w))
                    terms.append((seed, -1 if w < v else 1))  # w < v added +PRG(s_wv)
            acc.add_masks(terms)
        except (CryptoError, ParameterError):
            raise _Abort(AbortReason.RECONSTRUCTION_FAILED, []) from None
        self.result = acc.value()
        self.sets["U5"] = frozenset(u5)
        return []
