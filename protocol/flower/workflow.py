"""The ServerApp side: :class:`FedhhSecAggWorkflow` in place of Flower's
``SecAggPlusWorkflow``, and :class:`SessionDriver`, which runs one session of our
state machines over a Flower ``Grid``.

Switching an app over is one line::

    workflow = DefaultWorkflow(fit_workflow=FedhhSecAggWorkflow())
    # was: fit_workflow=SecAggPlusWorkflow(num_shares=..., reconstruction_threshold=...)

The degree and threshold follow from the threat model (malicious server by default,
:class:`~protocol.flower.session.Policy`), not from ``num_shares`` and
``reconstruction_threshold``; the quantisation options are Flower's.

How a session runs (:meth:`SessionDriver.run`): the sampled nodes (with the malicious
variant: each asked once for its PKI identity, cached) are offered the session
(:class:`~protocol.flower.session.Offer`); each reply's frame goes to our
:class:`secagg.server.SecAggServer` after a check that the frame's sender is the
position of the node Flower says sent it; the server's round closes when Flower has
every reply or the ``timeout`` passed; its messages go to their nodes, one Flower
message each. A node whose reply is an error (its ClientApp raised, it aborted, Flower
lost it) or that does not reply in time has dropped out: our protocol recovers its
masks, or aborts if too few nodes are left. Nothing is retried.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core import codec, wire_secagg
from protocol.flower.session import (
    RECORD, FlowerSecAggError, Offer, Policy, Quantiser, _pack_ids, device_layout,
    devices_for, load_roster, pki_dir_of,
)
from secagg.errors import SecAggError
from secagg.messages import RoutedShares
from secagg.randomness import OsRandom
from secagg.server import SecAggServer
from secagg.state import ServerState

__all__ = ["FedhhSecAggWorkflow", "SessionDriver", "SessionOutcome", "Reply"]


@dataclass(frozen=True)
class Reply:
    """A node's reply as the driver reads it.

    Attributes:
        error: the error's reason when the node failed (its app raised, it aborted),
            else ``None``.
        record: the session record of the reply (``None`` if it carried none).
        content: the rest of the reply's content (Flower: its ``RecordDict`` without
            the session record), for the application.
    """

    error: str | None
    record: dict[str, Any] | None
    content: Any


@dataclass
class SessionOutcome:
    """One session's result.

    Attributes:
        total: the sum modulo the modulus over ``survivors`` (``None`` if aborted).
        survivors: the node ids whose inputs are in the sum (``U3``).
        dropped: the node ids of the roster that are not.
        input_replies: node id -> the content of its reply to the round that carried
            the application's extra content (FedAvg: its fit reply without arrays).
        abort_reason: why the server aborted, or ``None``.
        bytes_up, bytes_down: frame bytes per node id.
        server_seconds: CPU of our server state machine and codec.
        offer: the session offered.
        rejected: frames refused (node id, reason).
        devices: the session's devices (``offer.n``; more than the nodes when each
            node hosts several, :func:`~protocol.flower.session.device_layout`).
    """

    total: np.ndarray | None
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    input_replies: dict[int, Any]
    abort_reason: str | None
    bytes_up: dict[int, int]
    bytes_down: dict[int, int]
    server_seconds: float
    offer: Offer | None
    rejected: list[tuple[int, str]] = field(default_factory=list)
    devices: int = 0


#: the pull interval of Flower's in-process grid (``InMemoryGrid``) at the size of
#: batch below which it is left alone, the seconds a message adds above that, and the
#: longest interval (see :func:`pull_interval`)
PULL_DEFAULT, PULL_PER_MESSAGE, PULL_MAX = 0.1, 0.0005, 0.5


def pull_interval(messages: int) -> float:
    """Seconds between the ServerApp's asks for a batch's replies in Flower's simulation
    engine: Flower's 0.1 s up to 200 messages, then 0.5 ms a message, at most 0.5 s.

    Each ask of Flower's ``InMemoryGrid`` checks every reply still out under the
    LinkState's lock (which the engine's own sweep for messages to deliver also takes),
    so ten asks a second for 1000 outstanding replies cost the ServerApp about a tenth
    of a core for the whole stage. Scaling the interval with the batch keeps that cost
    flat; a stage ends at most one interval after its last reply, so the interval is
    capped. Deployments (the gRPC grid, which waits seconds between pulls) are not
    touched: only a grid with a ``pull_interval`` shorter than this is."""
    return min(PULL_MAX, max(PULL_DEFAULT, PULL_PER_MESSAGE * messages))


def _grid_pull_interval(grid: Any) -> float | None:
    """The seconds between a grid's own asks for replies: Flower's in-process grid
    (``InMemoryGrid``) has them as ``pull_interval``; other grids have none."""
    value = getattr(grid, "pull_interval", None)
    return value if type(value) in (int, float) else None


class _pulling_every:
    """Context manager: ``grid.pull_interval`` raised to ``seconds`` (never lowered)
    while a batch is out, then put back; a grid without a numeric ``pull_interval``
    is left alone."""

    def __init__(self, grid: Any, seconds: float) -> None:
        self.grid, self.seconds, self.old = grid, seconds, None

    def __enter__(self) -> None:
        old = _grid_pull_interval(self.grid)
        if old is not None and old < self.seconds:
            self.old = old
            self.grid.pull_interval = self.seconds

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            self.grid.pull_interval = self.old


#: the sliding window of the ``"auto"`` default in Flower's simulation engine: enough
#: messages out to keep its workers busy (its two default workers take a message in a
#: few to tens of milliseconds), few enough that its sweeps stay cheap
SIMULATION_WINDOW = 8
#: seconds between asks for the replies of a sliding window (each ask checks at most
#: the window's messages)
SLIDE_PULL_SECONDS = 0.02


def _in_process_grid(grid: Any) -> bool:
    """A grid that polls its LinkState in this process (Flower's ``InMemoryGrid``, the
    simulation engine's, or a wrapper that forwards its ``pull_interval``)."""
    return (_grid_pull_interval(grid) is not None
            and callable(getattr(grid, "push_messages", None))
            and callable(getattr(grid, "pull_messages", None)))


def _slide(grid: Any, msgs: list[Any], window: int, deadline: float | None
           ) -> list[Any] | None:
    """Send ``msgs`` with at most ``window`` of them awaiting a reply at once; return
    the replies (those in by ``deadline``). ``None`` if the grid cannot push (the
    caller then sends in batches); nodes not yet sent to when the deadline passes
    drop out, as with batches."""
    todo = list(reversed(msgs))
    out: set[str] = set()
    got: list[Any] = []
    while todo or out:
        if todo and len(out) < window:
            batch = [todo.pop() for _ in range(min(window - len(out), len(todo)))]
            try:
                out.update(grid.push_messages(batch))
            except NotImplementedError:
                if got or out:
                    raise
                return None
        if deadline is not None and time.monotonic() >= deadline:
            break
        res = list(grid.pull_messages(out))
        for r in res:
            out.discard(r.metadata.reply_to_message_id)
        got.extend(res)
        if not res:
            time.sleep(SLIDE_PULL_SECONDS)
    return got


class SessionDriver:
    """Runs sessions of our protocol over a Flower ``Grid``.

    Args:
        policy: the threat model the parameters come from.
        pki: the PKI directory whose public roster the server uses (malicious variant;
            default ``FEDHH_FLOWER_PKI``).
        timeout: seconds Flower waits for a stage's replies (``None``: every reply).
        window: at most this many messages of a stage in Flower's LinkState at once.
            Flower's simulation engine moves messages to its workers by sweeping, ten
            times a second, every stored message for every node: a sweep costs
            ``nodes x stored messages`` (at 1000 nodes with a stage's 1000 messages
            stored, a core's worth of CPU while the stage lasts). A window bounds that
            to ``nodes x window``. On a grid that can push and pull messages one by one
            and polls in process (Flower's ``InMemoryGrid``: the simulation engine) the
            window slides: a message goes out as soon as a reply makes room. On other
            grids it sends the stage in batches of ``window``. ``"auto"`` (default):
            a sliding window of :data:`SIMULATION_WINDOW` in the simulation engine, the
            stage at once elsewhere (a deployment's nodes poll the SuperLink
            themselves; a window would only delay them). ``None``: the stage at once
            everywhere, as Flower's workflows send. The stage's ``timeout`` covers all
            its messages; the protocol is the same (a stage still ends when every reply
            is in or the timeout passed); only the order in which nodes get their
            messages changes.

    Raises:
        FlowerSecAggError: a window below 1.
    """

    def __init__(self, policy: Policy | None = None, pki: str | None = None,
                 timeout: float | None = None, window: int | str | None = "auto") -> None:
        if window != "auto" and window is not None and (type(window) is not int or window < 1):
            raise FlowerSecAggError(f"window must be a positive int, 'auto' or None, "
                                    f"got {window!r}")
        self.policy = policy or Policy()
        self.pki = pki
        self.timeout = timeout
        self.window = window
        #: Flower node id -> PKI identity, as each node reported it
        self.identities: dict[int, int] = {}

    # -- messaging ------------------------------------------------------------------
    def _send(self, grid: Any, group: str, payloads: dict[int, Any]) -> dict[int, "Reply"]:
        """Send ``node id -> (config dict, extra content or None)``; return the replies
        by node id (error replies included). A Flower ``Grid`` carries them as
        ``Message``s; :class:`protocol.flower.plain.PlainGrid` (no Flower) as plain
        records."""
        from protocol.flower.plain import PlainGrid

        if isinstance(grid, PlainGrid):
            return grid.exchange(group, payloads, timeout=self.timeout)
        from flwr.app import ConfigRecord, Message, RecordDict
        from flwr.app.message_type import MessageType

        msgs = []
        for nid, (cfg, extra) in payloads.items():
            content = extra if extra is not None else RecordDict()
            content.config_records[RECORD] = ConfigRecord(cfg)
            msgs.append(Message(content=content, dst_node_id=nid,
                                message_type=MessageType.TRAIN, group_id=group))
        replies: dict[int, Reply] = {}
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        window = self.window
        sliding = _in_process_grid(grid)
        if window == "auto":
            window = SIMULATION_WINDOW if sliding else None
        got: list[Any] | None = None
        if sliding and window is not None:
            got = _slide(grid, msgs, int(window), deadline)
        if got is None:  # batches (of the window, or the whole stage)
            got = []
            step = int(window or len(msgs) or 1)
            for at in range(0, len(msgs), step):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break  # the stage's time is up: the nodes not yet asked drop out
                batch = msgs[at:at + step]
                with _pulling_every(grid, pull_interval(len(batch))):
                    got.extend(grid.send_and_receive(batch, timeout=left))
        for r in got:
            src = r.metadata.src_node_id
            if src in payloads and src not in replies:
                if r.has_error():
                    replies[src] = Reply(str(r.error.reason), None, None)
                else:
                    rec = r.content.config_records.pop(RECORD, None)
                    replies[src] = Reply(None, None if rec is None else dict(rec),
                                         r.content)
        return replies

    def _offer(self, **fields: Any) -> Offer:
        """The session's offer (the attack catalogue overrides this to play a server
        that offers something else)."""
        return Offer(**fields)

    def identify(self, grid: Any, group: str, nodes: Sequence[int]) -> list[int]:
        """Learn the PKI identity of the nodes not yet known; returns the nodes with one."""
        ask = [n for n in nodes if n not in self.identities]
        if ask:
            for nid, r in self._send(grid, group, {n: ({"stage": "identify"}, None)
                                                   for n in ask}).items():
                if r.error is not None:
                    continue
                ident = r.record.get("identity") if r.record is not None else None
                if type(ident) is int and ident >= 0:
                    self.identities[nid] = ident
        known = [n for n in nodes if n in self.identities]
        # two nodes claiming one identity: neither takes part
        seen: dict[int, int] = {}
        for n in known:
            seen[self.identities[n]] = seen.get(self.identities[n], 0) + 1
        return [n for n in known if seen[self.identities[n]] == 1]

    def run(self, grid: Any, nodes: Sequence[int], *, label: str, group: str, dim: int,
            modulus: int, app: str,
            extra: Callable[[int], Any] | None = None,
            check_nodes: Callable[[int], None] | None = None,
            host_devices: bool = False) -> SessionOutcome:
        """One session among ``nodes``; ``extra(node id)`` is the content (a
        ``RecordDict``) sent with the routed shares (the round after which the node's
        input is needed), ``check_nodes(n)`` refuses a number of nodes.

        With ``host_devices``, fewer nodes than the policy has parameters for run the
        session with :func:`~protocol.flower.session.devices_for` devices, node ``i``
        hosting devices ``j = i mod nodes`` (its input on its first device, zeros on
        the others); each message to a node carries its devices' frames, so a node
        that drops drops all its devices. The sum is the nodes' sum. A node hosting
        ``k`` devices that is corrupted is ``k`` corrupt devices.

        Raises:
            FlowerSecAggError: no parameters for this many nodes, a missing PKI, or
                fewer than two nodes; hosted devices whose PKI identities the nodes'
                do not give (the nodes' identities must be ``0 .. nodes - 1``) or the
                PKI does not hold.
        """
        policy = self.policy
        nodes = list(dict.fromkeys(nodes))
        verify = None
        identities: tuple[int, ...] = ()
        if policy.malicious:
            where = pki_dir_of({}, self.pki)
            if where is None:
                raise FlowerSecAggError("the malicious-server variant needs the PKI's "
                                        "public roster (pki= or FEDHH_FLOWER_PKI)")
            roster = load_roster(where)
            nodes = [n for n in self.identify(grid, group, nodes)
                     if self.identities[n] < len(roster)]
            identities = tuple(self.identities[n] for n in nodes)
            verify = tuple(roster[i] for i in identities)
        if len(nodes) < 2:
            raise FlowerSecAggError(f"a session needs at least 2 nodes, {len(nodes)} left")
        if check_nodes is not None:
            check_nodes(len(nodes))
        m = len(nodes)
        devices = devices_for(policy, m) if host_devices else m
        layout = device_layout(m, devices)
        if devices > m and policy.malicious:
            identities = tuple(identities[j % m] + (j // m) * m for j in range(devices))
            if len(set(identities)) != devices or max(identities) >= len(roster):
                raise FlowerSecAggError(
                    f"{m} nodes hosting {devices} devices need the nodes' PKI identities "
                    f"0 to {m - 1} and a PKI of at least {devices}; the nodes have "
                    f"{sorted(identities[:m])}, the PKI {len(roster)}")
            verify = tuple(roster[i] for i in identities)
        params = policy.params(devices)
        offer = self._offer(label=label, node_ids=tuple(nodes[h] for h in layout),
                            identities=identities,
                            degree=params.degree, threshold=params.threshold,
                            graph=params.graph, malicious=params.malicious, dim=dim,
                            modulus=modulus, server_nonce=OsRandom().token_bytes(32),
                            app=app)
        config = offer.session_config()
        cpu0 = time.process_time()
        server = SecAggServer(config, verify_keys=verify)
        up_limits = wire_secagg.server_limits(config)
        # node id -> the positions of its devices (node i: devices i, i + m, ...)
        hosted = {nid: tuple(range(i, devices, m)) for i, nid in enumerate(nodes)}
        multi = devices > m
        up = dict.fromkeys(nodes, 0)
        down = dict.fromkeys(nodes, 0)
        rejected: list[tuple[int, str]] = []
        input_replies: dict[int, Any] = {}
        srv_cpu = time.process_time() - cpu0

        def deliver(replies: dict[int, Any], keep: bool) -> float:
            spent = 0.0
            for nid, r in replies.items():
                if r.error is not None:
                    rejected.append((nid, f"error: {r.error}"[:200]))
                    continue
                frames = r.record.get("frames") if r.record is not None else None
                if (not isinstance(frames, list) or len(frames) > len(hosted[nid])
                        or any(type(f) is not bytes for f in frames)):
                    rejected.append((nid, "a reply without one frame list"))
                    continue
                t0 = time.process_time()
                msgs, senders, bad = [], set(), None
                for f in frames:
                    up[nid] += len(f)
                    try:
                        msg = codec.decode(f, limits=up_limits)
                    except codec.CodecError as exc:
                        bad = f"CodecError: {exc}"
                        break
                    sender = getattr(msg, "sender", None)
                    if sender not in hosted[nid] or sender in senders:
                        bad = "sender does not match the node"
                        break
                    senders.add(sender)
                    msgs.append(msg)
                if bad is not None:  # the node's devices go together: none is taken
                    rejected.append((nid, bad))
                    spent += time.process_time() - t0
                    continue
                for msg in msgs:
                    try:
                        server.receive(msg)
                    except SecAggError as exc:
                        rejected.append((nid, f"{type(exc).__name__}: {exc}"))
                spent += time.process_time() - t0
                if keep and frames:
                    input_replies[nid] = r.content
            return spent

        setup = {"stage": "setup", **offer.to_record()}
        srv_cpu += deliver(self._send(grid, group, {n: (dict(setup), None) for n in nodes}),
                           False)
        while server.state not in (ServerState.COMPLETED, ServerState.ABORTED):
            t0 = time.process_time()
            out = server.close_round()
            payloads: dict[int, Any] = {}
            carries_input = False
            for pos, msg in out:
                nid = nodes[layout[pos]]
                frame = codec.encode(msg)
                down[nid] += len(frame)
                if nid not in payloads:
                    more = None
                    if isinstance(msg, RoutedShares) and extra is not None:
                        more, carries_input = extra(nid), True
                    payloads[nid] = ({"stage": "round", "frames": []}, more)
                payloads[nid][0]["frames"].append(frame)
                if multi:
                    payloads[nid][0].setdefault("to", []).append(pos)
            if multi:
                for cfg, _ in payloads.values():
                    cfg["to"] = _pack_ids(cfg["to"])
            srv_cpu += time.process_time() - t0
            if not payloads:
                break
            replies = self._send(grid, group, payloads)
            if server.state is ServerState.ABORTED:
                break  # the ServerAbort messages went out; nothing comes back
            srv_cpu += deliver(replies, carries_input)
        done = server.state is ServerState.COMPLETED
        u3 = server.sets.get("U3", frozenset())
        # a node's input is on its first device (position i < m); its other devices
        # add zeros
        survivors = tuple(nodes[i] for i in sorted(u3) if i < m) if done else ()
        return SessionOutcome(
            total=server.result if done else None, survivors=survivors,
            dropped=tuple(n for n in nodes if n not in set(survivors)),
            input_replies={n: input_replies[n] for n in survivors if n in input_replies},
            abort_reason=None if done else str(getattr(server.abort_reason, "value",
                                                       server.abort_reason)),
            bytes_up=up, bytes_down=down, server_seconds=srv_cpu, offer=offer,
            rejected=rejected, devices=devices)


class FedhhSecAggWorkflow:
    """A Flower fit workflow (``DefaultWorkflow(fit_workflow=...)``) that aggregates
    the sampled nodes' updates with our secure aggregation.

    Args:
        threat: ``"malicious"`` (default) or ``"semi-honest"``.
        corrupt_fraction, dropout_rate, graph, sigma, eta: the rest of the
            :class:`~protocol.flower.session.Policy` (the ClientApps must hold the same).
        max_weight, clipping_range, quantization_range, modulus_range: Flower's
            quantisation options, same meaning (:class:`~protocol.flower.session.Quantiser`;
            ``modulus_range`` may be up to ``2**64``).
        timeout: seconds to wait for each stage's replies (``None``: all of them).
        window: at most this many of a stage's messages in Flower's LinkState at once
            (default ``"auto"``: a sliding window in Flower's simulation engine, the
            stage at once elsewhere; ``None``: the stage at once; :class:`SessionDriver`):
            lowers the simulation engine's polling cost at hundreds of nodes.
        pki: the PKI directory (its public roster; default ``FEDHH_FLOWER_PKI``).
        host_devices: when the round has fewer nodes than the policy has parameters
            for (Flower's local simulation has 2; the malicious default needs 5), each
            node hosts several devices of the session (:meth:`SessionDriver.run`);
            default on. The sum is the same; each node then sees the sum of the others.

    Raises:
        FlowerSecAggError: bad options.
    """

    def __init__(self, *, threat: str = "malicious", max_weight: float = 1000.0,
                 clipping_range: float = 8.0, quantization_range: int = 1 << 22,
                 modulus_range: int = 1 << 32, timeout: float | None = None,
                 pki: str | None = None, window: int | str | None = "auto",
                 host_devices: bool = True, **policy: Any) -> None:
        self.policy = Policy(threat=threat, **policy)
        self.quantiser = Quantiser(clipping_range=clipping_range,
                                   quantization_range=quantization_range,
                                   modulus_range=modulus_range, max_weight=max_weight)
        self.driver = SessionDriver(self.policy, pki, timeout, window)
        self.host_devices = bool(host_devices)
        #: the last round's session (for measurements and tests)
        self.last: SessionOutcome | None = None

    def __call__(self, grid: Any, context: Any) -> None:
        """Run one fit round."""
        from logging import ERROR, INFO

        import flwr.compat.common.recorddict_compat as compat
        from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
        from flwr.server.compat.legacy_context import LegacyContext
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
        from flwr.server.workflow.constant import Key as WorkflowKey
        from flwr.supercore import log

        if not isinstance(context, LegacyContext):
            raise TypeError(f"Expect a LegacyContext, but get {type(context).__name__}.")
        cfg = context.state.config_records[MAIN_CONFIGS_RECORD]
        current_round = int(cfg[WorkflowKey.CURRENT_ROUND])
        parameters = compat.arrayrecord_to_parameters(
            context.state.array_records[MAIN_PARAMS_RECORD], keep_input=True)
        chosen = context.strategy.configure_fit(current_round, parameters,
                                                context.client_manager)
        if not chosen:
            log(INFO, "configure_fit: no clients selected, cancel")
            return
        fitins = {proxy.node_id: compat.fitins_to_recorddict(ins, True) for proxy, ins in chosen}
        proxies = {proxy.node_id: proxy for proxy, _ in chosen}
        shapes = [list(a.shape) for a in parameters_to_ndarrays(parameters)]
        dim = 1 + sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
        q = self.quantiser
        app = json.dumps({"kind": "fedavg", "shapes": shapes, "quantiser": q.to_json()},
                         sort_keys=True)
        log(INFO, "fedhh secure aggregation (%s server) among %s nodes",
            self.policy.threat, len(fitins))
        try:
            outcome = self.driver.run(grid, list(fitins), label=f"fit round {current_round}",
                                      group=str(current_round), dim=dim,
                                      modulus=q.modulus_range, app=app,
                                      extra=lambda nid: fitins[nid], check_nodes=q.check_nodes,
                                      host_devices=self.host_devices)
        except FlowerSecAggError as exc:
            log(ERROR, "fedhh secure aggregation not started: %s", exc)
            return
        self.last = outcome
        if outcome.devices > len(fitins):
            log(INFO, "fedhh secure aggregation: %s nodes host %s devices (device j on "
                "node j mod %s); a corrupted node is as many corrupt devices as it hosts",
                len(fitins), outcome.devices, len(fitins))
        if outcome.total is None:
            log(ERROR, "fedhh secure aggregation aborted: %s", outcome.abort_reason)
            return
        aggregated = q.decode(outcome.total, [tuple(s) for s in shapes],
                              len(outcome.survivors))
        agg_params = ndarrays_to_parameters(aggregated)
        results = []
        failures: list[Any] = [Exception(f"node {nid} dropped out") for nid in outcome.dropped]
        for nid in outcome.survivors:
            content = outcome.input_replies.get(nid)
            try:
                # the node's own record of its fit (num_examples, metrics): untrusted
                fitres = compat.recorddict_to_fitres(content, keep_input=True)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                failures.append(Exception(f"node {nid}: a malformed fit reply ({exc})"))
                continue
            fitres.parameters = agg_params
            results.append((proxies[nid], fitres))
        log(INFO, "aggregate_fit: %s nodes in the secure sum, %s dropped",
            len(outcome.survivors), len(outcome.dropped))
        params_agg, metrics_agg = context.strategy.aggregate_fit(current_round, results,
                                                                 failures)
        if params_agg:
            context.state.array_records[MAIN_PARAMS_RECORD] = \
                compat.parameters_to_arrayrecord(params_agg, True)
            context.history.add_metrics_distributed_fit(server_round=current_round,
                                                        metrics=metrics_agg)
