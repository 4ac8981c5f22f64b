"""The node side of a secure-aggregation session over Flower messages, shared by the
FedAvg mod (:mod:`protocol.flower.secagg_mod`) and the TrieHH ClientApp.

A session's messages arrive as Flower ``TRAIN`` messages carrying the ConfigRecord
:data:`~protocol.flower.session.RECORD` with a ``stage``:

* ``identify`` (malicious variant): reply with this node's PKI identity;
* ``setup``: an :class:`~protocol.flower.session.Offer`, checked completely (fields,
  this node's place and identity in the roster, the parameters against this node's own
  :class:`~protocol.flower.session.Policy`, the application's description); the node
  builds its :class:`secagg.client.SecAggClient` (OS randomness) and replies with its
  round-0 frame;
* ``round``: one frame of the server (``protocol.core.codec``, decoded with the
  session's limits), handed to the state machine; the reply holds its frames. When the
  frame is the routed shares (round 2 is next), the application computes the node's
  input first (FedAvg: trains and quantises; TrieHH: votes).

Between messages the client's state lives in the node's own Flower ``Context``
(``context.state``, kept by the node, never sent to the server), pickled: it holds the
node's secret keys, as Flower's own SecAgg+ mod keeps its private keys there. A client
that aborts (a check on the server's messages failed) raises
:class:`NodeAborted`, so Flower replies with an error and the server sees the node fail.
"""
from __future__ import annotations

import functools
import pickle
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from protocol.core import codec, wire_secagg
from protocol.flower.session import (
    RECORD, FlowerSecAggError, Offer, Policy, _unpack_ids, identity_of, load_roster,
    load_signing_key, pki_dir_of,
)
from secagg.client import SecAggClient
from secagg.messages import RoutedShares
from secagg.randomness import OsRandom
from secagg.state import ClientState

__all__ = ["NodeAborted", "LateInput", "NodeSession", "handle", "respond", "session_record",
           "STATE_RECORD"]

#: the ConfigRecord of the node's Context that holds the session between messages
STATE_RECORD = "fedhh.secagg.state"


class NodeAborted(FlowerSecAggError):
    """This node's client aborted the session (a check on the server failed)."""


class LateInput:
    """The client's input, known only when round 2 comes (after training)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        if self.value is None:
            raise FlowerSecAggError("the node's input is not known yet")
        return self.value


@dataclass
class NodeSession:
    """What a node keeps between the messages of one session: one client per device it
    hosts (:func:`~protocol.flower.session.device_layout`; one unless the federation
    has fewer nodes than the policy needs devices), by position."""

    offer: Offer
    clients: dict[int, SecAggClient]
    lates: dict[int, LateInput]
    app: Any  # what the application's check of the offer returned

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(self.clients)

    @property
    def client(self) -> SecAggClient:
        """The client of this node's first device (the one whose input is the node's)."""
        return self.clients[self.positions[0]]

    @property
    def late(self) -> LateInput:
        return self.lates[self.positions[0]]


#: ``check_app(offer, node_config) -> app state`` (raises FlowerSecAggError)
CheckApp = Callable[[Offer, Any], Any]
#: ``make_input(session, message, context) -> (input vector, reply content or None)``
MakeInput = Callable[[NodeSession, Any, Any], tuple[np.ndarray, Any]]


@functools.lru_cache(maxsize=64)
def _limits_for(n: int, degree: int, dim: int, modulus: int, malicious: bool) -> Any:
    every = wire_secagg.shapes(n, degree, dim, modulus, malicious)
    return codec.SessionLimits({cls.TAG: every[cls.TAG]
                                for cls in wire_secagg.SERVER_MESSAGES})


def _client_limits(config: Any) -> Any:
    """:func:`protocol.core.wire_secagg.client_limits` of ``config``, computed once per
    session shape in a process (they depend on the roster size, degree, dimension,
    modulus and variant only; computing them took about as long as decoding the
    frame)."""
    return _limits_for(config.n, config.degree, config.dim, config.modulus,
                       bool(config.malicious))


def _load(ctxt: Any) -> NodeSession | None:
    rec = ctxt.state.config_records.get(STATE_RECORD)
    if rec is None or "blob" not in rec:
        return None
    return pickle.loads(rec["blob"])  # the node's own state, written below


def _save(ctxt: Any, sess: NodeSession | None) -> None:
    from flwr.app import ConfigRecord

    if sess is None:
        ctxt.state.config_records.pop(STATE_RECORD, None)
    else:
        ctxt.state.config_records[STATE_RECORD] = ConfigRecord(
            {"blob": pickle.dumps(sess, protocol=pickle.HIGHEST_PROTOCOL)})


def session_record(records: Any, allow_plaintext: bool = False) -> Any:
    """The session's record among a message's config records, or ``None`` when the
    message carries none and ``allow_plaintext`` lets it pass to the application.

    Raises:
        FlowerSecAggError: no session record and plaintext is not allowed (a server
            cannot make this node send its input in the clear by leaving secure
            aggregation out).
    """
    if RECORD in records:
        return records[RECORD]
    if allow_plaintext:
        return None
    raise FlowerSecAggError("this node sends its input only through secure aggregation: "
                            "a request without a session is refused")


def respond(rec: Any, node_id: int, state: dict[str, Any], node_config: Any, *,
            policy: Policy, pki: str | None, check_app: CheckApp, make_input: MakeInput,
            msg: Any = None, ctxt: Any = None) -> tuple[dict[str, Any], Any]:
    """Handle one session record addressed to ``node_id`` (Flower or not): returns the
    reply record and the application's reply content (or ``None``). ``state`` is the
    node's own store between messages (its key ``"session"``); ``msg`` and ``ctxt`` go
    to ``make_input`` as they are.

    Raises:
        FlowerSecAggError: a malformed or refused message.
        NodeAborted: the client aborted.
    """
    stage = rec.get("stage")
    reply_content = None
    if stage == "identify":
        if len(rec) != 1:
            raise FlowerSecAggError("an identify request has only its stage")
        return {"identity": identity_of(node_config)}, None
    if stage == "setup":
        state.pop("session", None)  # a new offer ends whatever session was under way
        sess = _setup(rec, node_id, node_config, policy, pki, check_app)
        frames = [m for c in sess.clients.values() for m in c.start()]
        state["session"] = sess
        return {"frames": [codec.encode(m) for m in frames]}, None
    if stage != "round":
        raise FlowerSecAggError(f"unknown stage {stage!r}")
    sess = state.get("session")
    if sess is None:
        raise FlowerSecAggError("a round message without a session under way")
    to = _round_targets(rec, sess)
    limits = _client_limits(sess.client.config)
    decoded = []
    for pos, frame in zip(to, rec["frames"]):
        try:
            decoded.append((pos, codec.decode(frame, limits=limits)))
        except codec.CodecError as exc:
            raise FlowerSecAggError(f"a malformed frame: {exc}") from None
    if any(isinstance(m, RoutedShares) and sess.clients[pos].state is ClientState.AWAIT_SHARES
           for pos, m in decoded) and sess.late.value is None:
        # the node's input goes on its first device; the others it hosts add zeros, so
        # the sum over devices is the sum over nodes
        vec, reply_content = make_input(sess, msg, ctxt)
        for pos in sess.positions:
            sess.lates[pos].value = vec if pos == sess.positions[0] else \
                np.zeros(sess.offer.dim, dtype=np.uint64)
    replies = []
    for pos, m in decoded:
        client = sess.clients[pos]
        replies.extend(client.receive(m))
        if client.state is ClientState.ABORTED:
            state.pop("session", None)
            raise NodeAborted(f"node {node_id} aborted the session: "
                              f"{client.abort_reason.value}")
    for pos, client in sess.clients.items():
        if client.state is not ClientState.AWAIT_SHARES:
            # the masked input is out: the plaintext input leaves the node's stored
            # state (and the state kept between messages is a tenth of the size)
            sess.lates[pos].value = None
    if all(c.state is ClientState.COMPLETED for c in sess.clients.values()):
        state.pop("session", None)
    return {"frames": [codec.encode(r) for r in replies]}, reply_content


def _round_targets(rec: Any, sess: NodeSession) -> tuple[int, ...]:
    """The device positions a round message's frames are for: its ``to`` (packed
    positions, when the node hosts several devices), else the node's one device.

    Raises:
        FlowerSecAggError: a malformed message, or a frame for a device this node does
            not host (or for one twice).
    """
    frames = rec.get("frames")
    if not isinstance(frames, list) or any(type(f) is not bytes for f in frames):
        raise FlowerSecAggError("a round message holds a list of frames")
    if "to" not in rec:
        if set(rec) != {"stage", "frames"} or len(frames) != 1 or len(sess.clients) != 1:
            raise FlowerSecAggError("a round message holds exactly one frame")
        return sess.positions
    if set(rec) != {"stage", "frames", "to"}:
        raise FlowerSecAggError("a round message holds its stage, frames and devices only")
    to = _unpack_ids(rec["to"], "to")
    if (not 1 <= len(to) == len(frames) or len(set(to)) != len(to)
            or not set(to) <= set(sess.clients)):
        raise FlowerSecAggError("a round message's frames must go to distinct devices "
                                "this node hosts, one frame each")
    return to


def handle(msg: Any, ctxt: Any, *, policy: Policy, pki: str | None,
           check_app: CheckApp, make_input: MakeInput) -> Any:
    """Handle one Flower message of a session (:func:`respond` with the session kept in
    the node's ``Context``); returns the reply ``Message``.

    Raises:
        FlowerSecAggError: a malformed or refused message (Flower replies with an error).
        NodeAborted: the client aborted.
    """
    from flwr.app import ConfigRecord, Message, RecordDict

    rec = msg.content.config_records[RECORD]
    state: dict[str, Any] = {}
    if rec.get("stage") == "round":
        sess = _load(ctxt)
        if sess is not None:
            state["session"] = sess
    try:
        out, reply_content = respond(dict(rec), msg.metadata.dst_node_id, state,
                                     ctxt.node_config, policy=policy, pki=pki,
                                     check_app=check_app, make_input=make_input,
                                     msg=msg, ctxt=ctxt)
    finally:
        if rec.get("stage") in ("setup", "round"):
            _save(ctxt, state.get("session"))
    content = reply_content if reply_content is not None else RecordDict()
    content.config_records[RECORD] = ConfigRecord(out)
    return Message(content, reply_to=msg)


def _setup(rec: Any, node_id: int, node_config: Any, policy: Policy, pki: str | None,
           check_app: CheckApp) -> NodeSession:
    offer = Offer.from_record(dict(rec))
    offer.check_policy(policy)
    signing = verify = None
    identity = None
    if offer.malicious:
        where = pki_dir_of(node_config, pki)
        if where is None:
            raise FlowerSecAggError("the malicious-server variant needs this node's PKI "
                                    "(node config fedhh-pki, the mod's pki= or "
                                    "FEDHH_FLOWER_PKI)")
        identity = identity_of(node_config)
        roster = load_roster(where)
        if max(offer.identities) >= len(roster):
            raise FlowerSecAggError(f"the roster names PKI identities beyond the "
                                    f"{len(roster)} of this node's PKI")
        verify = tuple(roster[i] for i in offer.identities)
    positions = offer.positions_of(node_id, identity)
    if offer.malicious:
        # one signing key per hosted device (in a deployment a node holds the keys of
        # the devices it hosts: its identity plus multiples of the number of nodes)
        signing = {p: load_signing_key(where, offer.identities[p]) for p in positions}
    app = check_app(offer, node_config)
    config = offer.session_config()
    lates = {p: LateInput() for p in positions}
    clients = {p: SecAggClient(config, p, lates[p], OsRandom(),
                               signing_key=None if signing is None else signing[p],
                               verify_keys=verify) for p in positions}
    return NodeSession(offer, clients, lates, app)
