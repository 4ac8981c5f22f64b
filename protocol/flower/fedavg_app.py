"""A small Flower FedAvg app (numpy logistic regression on synthetic data) with its fit
rounds aggregated in the clear, by Flower's SecAgg+, by ours, or alternately by Flower's
and ours: what the tests compare and ``fedhh bench flower --app`` measures.

Each node's data is a deterministic function of its partition id and the seed (so two
runs see the same data); one local step of gradient descent per fit round. The
ServerApp records the global parameters after each round (:class:`Recorder`), the CPU
of each fit round (this process and every child process: the simulation engine's
workers included) and the bytes of every message's content per node.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AppConfig", "CPU_PARTS", "Recorder", "cpu_parts", "make_client_app",
           "make_server_app", "node_data", "run_app", "MODES"]

MODES = ("plain", "flower", "fedhh", "alternate")


@dataclass(frozen=True)
class AppConfig:
    """One run of the app.

    Attributes:
        nodes: simulated nodes (all sampled every round).
        rounds: fit rounds.
        dim: features (the model has ``dim + 1`` parameters).
        samples: examples per node.
        seed: the data's seed.
        mode: one of :data:`MODES`.
        fail: partition ids whose training raises in every round ``>= fail_from``
            (nodes failing mid-round: after the key exchange, before the masked input).
        fail_from: the first round in which they fail.
        threat: our side's threat model.
        dropout_rate: our side's dropout budget (both sides' policy).
        pki: our PKI directory (malicious variant).
        flower_shares, flower_threshold: Flower's ``num_shares`` and
            ``reconstruction_threshold`` (``0``: ours at ``n`` mapped to Flower's ring).
        lr: the learning rate.
        window: our workflow's ``window`` (at most this many of a stage's messages
            in Flower's LinkState at once; ``"auto"``: the workflow's default, a
            sliding window in the simulation engine; ``None``: all at once).
    """

    nodes: int = 10
    rounds: int = 3
    dim: int = 5
    samples: int = 20
    seed: int = 0
    mode: str = "fedhh"
    fail: tuple[int, ...] = ()
    fail_from: int = 1
    threat: str = "malicious"
    dropout_rate: float = 0.05
    pki: str | None = None
    flower_shares: int = 0
    flower_threshold: int = 0
    lr: float = 0.5
    window: int | str | None = "auto"


@functools.lru_cache(maxsize=256)
def node_data(cfg: AppConfig, pid: int) -> tuple[np.ndarray, np.ndarray]:
    """Node ``pid``'s synthetic examples: features and 0/1 labels of a fixed linear
    model with noise (made once per process and node: a node keeps its data)."""
    rng = np.random.default_rng([cfg.seed, pid])
    w_true = np.random.default_rng([cfg.seed, 1 << 30]).normal(size=cfg.dim)
    x = rng.normal(size=(cfg.samples, cfg.dim))
    y = (x @ w_true + 0.3 * rng.normal(size=cfg.samples) > 0).astype(np.float64)
    return x, y


def local_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray,
               lr: float) -> list[np.ndarray]:
    """One gradient step of logistic regression on ``(x, y)``."""
    w, b = params
    p = 1.0 / (1.0 + np.exp(-(x @ w + b[0])))
    g = p - y
    return [w - lr * (x.T @ g) / len(y), b - lr * np.array([g.mean()])]


def make_client_app(cfg: AppConfig) -> Any:
    """The ClientApp: a NumPyClient with the mods of ``cfg.mode``."""
    from flwr.client import ClientApp, NumPyClient

    class LogReg(NumPyClient):
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def fit(self, parameters: list[np.ndarray], config: dict) -> tuple:
            rnd = int(config.get("server_round", 0))
            if self.pid in cfg.fail and rnd >= cfg.fail_from:
                raise RuntimeError(f"node {self.pid} fails in round {rnd}")
            x, y = node_data(cfg, self.pid)
            return local_step([np.asarray(p) for p in parameters], x, y, cfg.lr), len(y), {}

    def client_fn(context: Any) -> Any:
        return LogReg(int(context.node_config["partition-id"])).to_client()

    return ClientApp(client_fn=client_fn, mods=_mods(cfg))


def _mods(cfg: AppConfig) -> list:
    if cfg.mode == "plain":
        return []
    from flwr.client.mod import secaggplus_mod

    from protocol.flower.secagg_mod import make_secagg_mod
    from protocol.flower.session import RECORD

    ours = make_secagg_mod(threat=cfg.threat, pki=cfg.pki,
                           dropout_rate=cfg.dropout_rate)
    if cfg.mode == "flower":
        return [secaggplus_mod]
    if cfg.mode == "fedhh":
        return [ours]

    def either(msg: Any, ctxt: Any, call_next: Any) -> Any:
        mod = ours if RECORD in msg.content.config_records else secaggplus_mod
        return mod(msg, ctxt, call_next)

    return [either]


@dataclass
class Recorder:
    """What the ServerApp saw: the global parameters after each round, CPU per round
    (``(mode, seconds)``) and where it went (``cpu_split``), content bytes per node
    and direction per round, and our sessions' outcomes."""

    params: dict[int, list[np.ndarray]] = field(default_factory=dict)
    cpu: list[tuple[str, float]] = field(default_factory=list)
    #: ``(mode, {part: CPU seconds})`` per round: where the round's CPU went
    #: (:func:`cpu_parts`)
    cpu_split: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    wall: list[tuple[str, float]] = field(default_factory=list)
    bytes_per_node: list[tuple[str, float]] = field(default_factory=list)
    outcomes: list[Any] = field(default_factory=list)
    #: called with the round's mode after each fit round is recorded (progress of a
    #: long run)
    on_round: Any = None


#: the parts of a run's CPU that :func:`cpu_parts` tells apart
CPU_PARTS = ("server_app", "engine_poll", "engine_dispatch", "driver_other",
             "clientapp_workers", "ray_other")


def cpu_parts() -> dict[str, float]:
    """CPU seconds so far of this process and all its descendants (the engine's Ray
    processes), by part:

    * ``server_app``: the ServerApp's thread (the workflow: our ``SessionDriver`` and
      server state machine, or Flower's ``SecAggPlusWorkflow``; the grid's polling for
      replies);
    * ``engine_poll``: the simulation engine's thread that moves messages from the
      LinkState to its queue (Flower's ``add_messages_to_queue``);
    * ``engine_dispatch``: the engine's worker threads (Flower's ``vce_api.worker``:
      they pickle each message and its node's ``Context`` for a Ray actor and unpickle
      the reply);
    * ``driver_other``: the rest of this process (its other threads, threads that
      have ended);
    * ``clientapp_workers``: the Ray workers that run the ClientApp (Flower's
      ``ClientAppActor``: the mods, the training, Ray's (de)serialisation);
    * ``ray_other``: Ray's other processes (raylet, GCS, dashboard, agents).

    A thread's part is read from its Python name and target, a process's from its
    command line (Ray names its workers ``ray::ClientAppActor...``, ``ray::IDLE``)."""
    import threading

    import psutil

    out = dict.fromkeys(CPU_PARTS, 0.0)
    me = psutil.Process()
    names = {t.native_id: (t.name, getattr(getattr(t, "_target", None), "__name__", ""))
             for t in threading.enumerate()}
    for th in me.threads():
        name, target = names.get(th.id, ("", ""))
        if "server_th" in name or "server_th" in target:
            part = "server_app"
        elif target == "add_messages_to_queue" or "add_messages_to_queue" in name:
            part = "engine_poll"
        elif name.startswith("ThreadPoolExecutor"):
            part = "engine_dispatch"
        else:
            continue
        out[part] += th.user_time + th.system_time
    # the rest of this process's CPU (its other threads, and threads that have ended)
    out["driver_other"] = sum(me.cpu_times()[:2]) - sum(out.values())
    for ch in me.children(recursive=True):
        try:
            cmd = " ".join(ch.cmdline())
            cpu = sum(ch.cpu_times()[:2])
        except psutil.Error:
            continue
        worker = cmd.startswith("ray::") and not cmd.startswith(
            ("ray::DashboardAgent", "ray::RuntimeEnvAgent")) or "default_worker.py" in cmd
        out["clientapp_workers" if worker else "ray_other"] += cpu
    return out


def _tree_cpu() -> float:
    """CPU seconds of this process and all its descendants (the engine's workers)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for ch in me.children(recursive=True):
        try:
            total += sum(ch.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


class _CountingGrid:
    """A ``Grid`` that counts the serialised bytes of each message's content."""

    def __init__(self, grid: Any) -> None:
        self.grid = grid
        self.bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.grid, name)

    @property
    def pull_interval(self) -> Any:
        """The wrapped grid's (the workflows tune it per batch)."""
        return getattr(self.grid, "pull_interval", None)

    @pull_interval.setter
    def pull_interval(self, value: float) -> None:
        self.grid.pull_interval = value

    def _size(self, msg: Any) -> int:
        from flwr.common.serde import recorddict_to_proto

        return recorddict_to_proto(msg.content).ByteSize() if msg.has_content() else 0

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
        messages = list(messages)
        self.bytes += sum(self._size(m) for m in messages)
        replies = list(self.grid.send_and_receive(messages, timeout=timeout))
        self.bytes += sum(self._size(r) for r in replies)
        return replies

    # the workflows' sliding window pushes and pulls (its counts: the same messages)
    def push_messages(self, messages: Any) -> Any:
        messages = list(messages)
        self.bytes += sum(self._size(m) for m in messages)
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Any) -> Any:
        replies = list(self.grid.pull_messages(message_ids))
        self.bytes += sum(self._size(r) for r in replies)
        return replies


def make_server_app(cfg: AppConfig, rec: Recorder) -> Any:
    """The ServerApp: FedAvg over ``cfg.rounds`` fit rounds, no evaluation."""
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.server import LegacyContext, ServerApp, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

    from protocol.flower.session import devices_for
    from protocol.flower.workflow import FedhhSecAggWorkflow

    class Recording(FedAvg):
        def aggregate_fit(self, rnd: int, results: Any, failures: Any) -> Any:
            out = super().aggregate_fit(rnd, results, failures)
            if out[0] is not None:
                rec.params[rnd] = parameters_to_ndarrays(out[0])
            return out

    init = [np.zeros(cfg.dim), np.zeros(1)]
    ours = FedhhSecAggWorkflow(threat=cfg.threat, pki=cfg.pki,
                               dropout_rate=cfg.dropout_rate, window=cfg.window)
    shares, thr = cfg.flower_shares, cfg.flower_threshold
    if not shares:
        p = ours.policy.params(devices_for(ours.policy, cfg.nodes))
        shares, thr = p.degree + 1, p.threshold
    flower = SecAggPlusWorkflow(num_shares=shares, reconstruction_threshold=thr)

    def fit(grid: Any, context: Any) -> None:
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD

        rnd = int(context.state.config_records[MAIN_CONFIGS_RECORD]["current_round"])
        mode = cfg.mode if cfg.mode != "alternate" else ("flower", "fedhh")[rnd % 2]
        counting = _CountingGrid(grid)
        p0, c0, w0 = cpu_parts(), _tree_cpu(), time.perf_counter()
        if mode == "plain":
            from flwr.server.workflow.default_workflows import default_fit_workflow

            default_fit_workflow(counting, context)
        elif mode == "flower":
            flower(counting, context)
        else:
            ours(counting, context)
            rec.outcomes.append(ours.last)
        rec.cpu.append((mode, _tree_cpu() - c0))
        p1 = cpu_parts()
        rec.cpu_split.append((mode, {k: p1[k] - p0[k] for k in CPU_PARTS}))
        rec.wall.append((mode, time.perf_counter() - w0))
        rec.bytes_per_node.append((mode, counting.bytes / cfg.nodes))
        if rec.on_round is not None:
            rec.on_round(mode)

    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        strategy = Recording(fraction_fit=1.0, fraction_evaluate=0.0,
                             min_fit_clients=cfg.nodes, min_available_clients=cfg.nodes,
                             initial_parameters=ndarrays_to_parameters(init),
                             on_fit_config_fn=lambda r: {"server_round": r})
        ctx = LegacyContext(context=context, config=ServerConfig(num_rounds=cfg.rounds),
                            strategy=strategy)
        DefaultWorkflow(fit_workflow=fit)(grid, ctx)

    return app


def run_app(cfg: AppConfig, *, num_cpus: int = 2, verbose: bool = False,
            rec: Recorder | None = None) -> Recorder:
    """Run the app in Flower's simulation engine (Ray backend) and return what the
    ServerApp recorded (into ``rec`` if given). Flower's telemetry is switched off
    first.

    Raises:
        ValueError: an unknown mode.
    """
    import logging
    import os

    if cfg.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {cfg.mode!r}")
    os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    from flwr.simulation import run_simulation

    rec = rec if rec is not None else Recorder()
    if not verbose:
        logging.getLogger("flwr").setLevel(logging.WARNING)
    run_simulation(make_server_app(cfg, rec), make_client_app(cfg), num_supernodes=cfg.nodes,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": num_cpus,
                                                 "include_dashboard": False}})
    return rec
