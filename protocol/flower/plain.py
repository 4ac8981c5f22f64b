"""A grid of in-process nodes that carries our protocol's records without Flower: the
server side is :class:`~protocol.flower.workflow.SessionDriver` (through
:meth:`PlainGrid.exchange`), each node runs :func:`protocol.flower.node.respond`, the
code a Flower node runs inside its ClientApp, with its own state between messages.

What Flower adds around these records (its ``Message``, protobuf serialisation, the
engine) is left out, so the adapter's own checks -- the offer, the node's policy, the
codec's frames, the ledger, the refusal of plaintext requests -- run and are attacked
(:mod:`protocol.studies.attacks.flower_attacks`) where Flower is not installed. Records
are copied through msgpack on the way to a node and back (a node never shares an object
with the server). Hooks play a server that changes what it sends: ``down(index,
node id, records) -> records`` before a node sees a message, ``up(index, node id,
record) -> record`` before the driver sees a reply.

A node's exception becomes an error reply, as Flower's engine makes it; the reply keeps
the exception's type (:attr:`PlainGrid.errors`), so a check that crashes with anything
but :class:`~protocol.flower.session.FlowerSecAggError` is visible.
"""
from __future__ import annotations

from typing import Any, Callable

import msgpack

from protocol.flower.session import RECORD
from protocol.flower.workflow import Reply
from secagg.randomness import OsRandom

__all__ = ["PlainGrid", "NodeFn"]

#: ``node(records, node id, state, node config) -> (reply record, reply content)``
NodeFn = Callable[[dict[str, Any], int, dict[str, Any], dict[str, Any]],
                  tuple[dict[str, Any], Any]]


def _copy(doc: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(doc, use_bin_type=True), raw=False,
                           strict_map_key=False)


class PlainGrid:
    """``nodes`` in-process nodes running ``node``; node ``i`` has ``partition-id`` ``i``
    (plus ``node_config``) and a random 64-bit node id.

    Attributes:
        errors: per node id, the exception types its replies raised, in order.
        sent: per node id, the stages of the records it was sent, in order.
    """

    def __init__(self, node: NodeFn, nodes: int, *, node_config: dict | None = None,
                 down: Callable[[int, int, dict], dict] | None = None,
                 up: Callable[[int, int, dict], dict] | None = None) -> None:
        rand = OsRandom()
        ids: list[int] = []
        while len(ids) < nodes:
            nid = int.from_bytes(rand.token_bytes(8), "big")
            if nid > 1 and nid not in ids:
                ids.append(nid)
        self.node, self.node_ids = node, ids
        self.index = {nid: i for i, nid in enumerate(ids)}
        self.configs = {nid: {"partition-id": i, "num-partitions": nodes,
                              **(node_config or {})} for i, nid in enumerate(ids)}
        self.state: dict[int, dict[str, Any]] = {nid: {} for nid in ids}
        self.down, self.up = down, up
        self.errors: dict[int, list[str]] = {nid: [] for nid in ids}
        self.sent: dict[int, list[Any]] = {nid: [] for nid in ids}
        self.messages = 0

    def get_node_ids(self) -> list[int]:
        return list(self.node_ids)

    def exchange(self, group: str, payloads: dict[int, Any],
                 timeout: float | None = None) -> dict[int, Reply]:
        """Deliver ``node id -> (session record, extra records or None)`` and return
        the replies by node id."""
        out: dict[int, Reply] = {}
        for nid, (cfg, extra) in payloads.items():
            if nid not in self.state:
                continue
            self.messages += 1
            records = _copy({**(extra or {}), RECORD: cfg})
            if self.down is not None:
                records = self.down(self.index[nid], nid, records)
            self.sent[nid].append(records.get(RECORD, {}).get("stage"))
            try:
                rec, content = self.node(records, nid, self.state[nid], self.configs[nid])
            except Exception as exc:  # what Flower's engine does with a ClientApp's exception
                self.errors[nid].append(type(exc).__name__)
                out[nid] = Reply(f"{type(exc).__name__}: {exc}", None, None)
                continue
            rec = _copy(rec)
            if self.up is not None:
                rec = self.up(self.index[nid], nid, rec)
            out[nid] = Reply(None, rec, content)
        return out
