"""A Flower ``Grid`` that runs a ClientApp's nodes in this process, one after the other:
Flower's messages, records and ClientApp (mods included), without the simulation
engine's Ray workers.

Every message and reply goes through Flower's protobuf serialisation (as it does
between a SuperLink and a SuperNode), each node keeps its own ``Context`` between
messages, and a ClientApp that raises yields an error reply, as Flower's engine gives.
``fail(node index, message)`` makes a node fail on chosen messages (its reply is an
error) and ``gone`` nodes never answer: the failures our protocol must recover from.

It is for tests and for measurements at sizes the engine cannot hold on a small
machine (``fedhh bench flower --app`` at 1000 nodes); the engine itself runs in
:func:`protocol.flower.fedavg_app.run_app`.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable

from secagg.randomness import OsRandom

__all__ = ["LocalGrid", "serve"]


def _grid_base() -> type:
    from flwr.serverapp import Grid

    return Grid


class LocalGrid(_grid_base()):  # type: ignore[misc]
    """``nodes`` nodes running ``client_app``; node ``i`` has ``partition-id`` ``i``
    (plus ``node_config``) and a random 64-bit node id.

    Args:
        client_app: the ``flwr.clientapp.ClientApp``.
        nodes: how many.
        node_config: extra node-config entries for every node.
        fail: ``fail(i, message) -> bool``: node ``i`` raises on this message.
        silent: ``silent(i, message) -> bool``: node ``i`` stops answering from this
            message on (it joins :attr:`gone`).
    """

    def __init__(self, client_app: Any, nodes: int, *, node_config: dict | None = None,
                 fail: Callable[[int, Any], bool] | None = None,
                 silent: Callable[[int, Any], bool] | None = None) -> None:
        from flwr.app import Context, RecordDict
        from flwr.supercore.run import Run

        self.client_app = client_app
        rand = OsRandom()
        ids: list[int] = []
        while len(ids) < nodes:
            nid = int.from_bytes(rand.token_bytes(8), "big")
            if nid > 1 and nid not in ids:  # 0 and 1 are Flower's reserved ids
                ids.append(nid)
        self.node_ids = ids
        self.index = {nid: i for i, nid in enumerate(ids)}
        self.contexts = {
            nid: Context(run_id=1, node_id=nid,
                         node_config={"partition-id": i, "num-partitions": nodes,
                                      **(node_config or {})},
                         state=RecordDict(), run_config={})
            for i, nid in enumerate(ids)}
        self.fail = fail
        self.silent = silent
        #: nodes that never answer
        self.gone: set[int] = set()
        self._run = Run.create_empty(1)
        self.messages = 0

    def set_run(self, run: Any) -> None:
        self._run = run

    @property
    def run(self) -> Any:
        return self._run

    def create_message(self, content: Any, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Any:
        from flwr.app import Message

        return Message(content=content, dst_node_id=dst_node_id,
                       message_type=message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.node_ids)

    def get_nodes(self) -> Iterable[Any]:  # pragma: no cover - not used by the workflows
        return []

    def push_messages(self, messages: Iterable[Any]) -> Iterable[str]:
        raise NotImplementedError("LocalGrid answers through send_and_receive only")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Any]:
        raise NotImplementedError("LocalGrid answers through send_and_receive only")

    def send_and_receive(self, messages: Iterable[Any], *,
                         timeout: float | None = None) -> Iterable[Any]:
        """Deliver each message to its node and return the replies (errors included;
        nothing from a node in :attr:`gone`)."""
        return [r for r in (self._deliver(m) for m in messages) if r is not None]

    def _deliver(self, msg: Any) -> Any:
        from flwr.app import Error, Message
        from flwr.common.serde import message_from_proto, message_to_proto

        self.messages += 1
        msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
        msg.metadata.__dict__["_src_node_id"] = 1
        nid = msg.metadata.dst_node_id
        if nid not in self.contexts or nid in self.gone:
            return None
        msg.metadata.__dict__["_run_id"] = 1
        wire = message_from_proto(message_to_proto(msg))
        if self.silent is not None and self.silent(self.index[nid], wire):
            self.gone.add(nid)
            return None
        try:
            if self.fail is not None and self.fail(self.index[nid], wire):
                raise RuntimeError(f"node {self.index[nid]} fails")
            reply = self.client_app(wire, self.contexts[nid])
        except Exception as exc:  # what Flower's engine does with a ClientApp's exception
            reply = Message(Error(code=2, reason=f"{type(exc).__name__}: {exc}"),
                            reply_to=wire)
        reply.metadata.__dict__["_message_id"] = uuid.uuid4().hex
        return message_from_proto(message_to_proto(reply))


def serve(server_app: Any, grid: LocalGrid) -> None:
    """Run ``server_app`` (a ``flwr.serverapp.ServerApp`` with a ``main``) against
    ``grid`` in this thread."""
    from flwr.app import Context, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    # what a ServerApp process has set before its main runs (its messages carry them)
    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 1
    ctx = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    main = getattr(server_app, "_main", None)
    if main is None:
        raise ValueError("the ServerApp has no main function")
    main(grid, ctx)
