"""``fedhh bench flower --app``: the same Flower FedAvg app with Flower's SecAgg+ and
with ours, fit rounds alternating between the two in one run (interleaved), in Flower's
simulation engine or on the in-process grid (:mod:`protocol.flower.local`).

Per fit round: CPU seconds of this process and all its descendants (the engine's Ray
workers included: framework overhead counted) and where they went
(:func:`protocol.flower.fedavg_app.cpu_parts`: the ServerApp's thread, the engine's
polling and dispatch threads, the ClientApp workers, Ray's other processes), wall
seconds, and the serialised bytes of every message's content per node (both
directions). The first round of each kind is a warm-up (the engine starts its
workers, first calls import) and is left out of the medians (with two rounds, one of
each, nothing is left out). Flower's side runs with our malicious default's
neighbourhood (its ``num_shares = k + 1``, ``reconstruction_threshold = t``) and
semi-honest (all it has); ours with the malicious default.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any, Callable

__all__ = ["bench_app"]


def bench_app(nodes: int, dim: int, *, rounds: int = 6, engine: str = "ray",
              num_cpus: int = 2, seed: int = 0, window: int | str | None = "auto",
              modes: str = "alternate",
              progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the alternating app and summarise it.

    Args:
        nodes: simulated nodes.
        dim: model parameters (``dim - 1`` features and a bias).
        rounds: fit rounds (even: as many of each kind). With 2 (one of each, ours
            first), nothing is left out as a warm-up: for sizes where a round takes
            many minutes; the warm-up then counts against ours.
        engine: ``"ray"`` (Flower's simulation engine) or ``"local"`` (in process).
        num_cpus: CPUs the engine may use.
        seed: the data's seed.
        window: our workflow's ``window`` (``"auto"``: its default, a sliding window
            in the simulation engine; ``None``: a stage's messages all at once).
        modes: ``"alternate"`` (Flower's and ours, interleaved) or ``"fedhh"`` (ours
            only: a before/after comparison of our side at a size where Flower's
            rounds take an hour; no ratio then).
        progress: called with each fit round's figures as it ends (mode, CPU, its
            parts, wall seconds, bytes per node): a long run's rounds are not lost
            if it is stopped.

    Raises:
        ValueError: bad sizes or engine.
    """
    from protocol.flower.fedavg_app import CPU_PARTS, AppConfig, Recorder, \
        make_client_app, make_server_app, run_app
    from protocol.flower.session import Policy, write_pki

    if nodes < 3 or dim < 2 or rounds < 2 or rounds % 2:
        raise ValueError("need nodes >= 3, dim >= 2 and an even number of rounds >= 2")
    if engine not in ("ray", "local"):
        raise ValueError(f"engine must be ray or local, got {engine!r}")
    if modes not in ("alternate", "fedhh"):
        raise ValueError(f"modes must be alternate or fedhh, got {modes!r}")
    if window not in ("auto", None) and (type(window) is not int or window < 1):
        raise ValueError(f"window must be at least 1, 'auto' or None, got {window!r}")
    params = Policy().params(nodes)
    with tempfile.TemporaryDirectory() as pki:
        write_pki(pki, nodes)
        cfg = AppConfig(nodes=nodes, rounds=rounds, dim=dim - 1, samples=20, seed=seed,
                        mode=modes, pki=pki, flower_shares=params.degree + 1,
                        flower_threshold=params.threshold, window=window)
        rec = Recorder()
        if progress is not None:
            def on_round(mode: str) -> None:
                progress({"round": len(rec.cpu), "mode": mode,
                          "cpu_seconds": round(rec.cpu[-1][1], 3),
                          "cpu_split": {k: round(v, 3) for k, v in rec.cpu_split[-1][1].items()},
                          "wall_seconds": round(rec.wall[-1][1], 3),
                          "bytes_per_node": round(rec.bytes_per_node[-1][1])})
            rec.on_round = on_round
        t0 = time.perf_counter()
        if engine == "ray":
            run_app(cfg, num_cpus=num_cpus, rec=rec)
        else:
            import logging

            from protocol.flower.local import LocalGrid, serve

            logging.getLogger("flwr").setLevel(logging.WARNING)
            serve(make_server_app(cfg, rec), LocalGrid(make_client_app(cfg), nodes))
        wall = time.perf_counter() - t0
    out: dict[str, Any] = {"nodes": nodes, "dim": dim, "rounds": rounds, "engine": engine,
                           "degree": params.degree, "threshold": params.threshold,
                           "flower_share_num": params.degree + 1, "window": window,
                           "modes": modes, "wall_seconds": round(wall, 1)}
    if len(rec.cpu) != rounds:
        raise RuntimeError(f"the app ran {len(rec.cpu)} of {rounds} fit rounds")
    kinds = ("flower", "fedhh") if modes == "alternate" else ("fedhh",)
    per_kind = rounds // len(kinds)
    skip = 1 if per_kind >= 2 else 0  # the warm-up of each kind
    out["warmup_left_out"] = bool(skip)
    for mode in kinds:
        cpu = [c for m, c in rec.cpu if m == mode]
        wl = [c for m, c in rec.wall if m == mode]
        by = [b for m, b in rec.bytes_per_node if m == mode]
        out[f"{mode}_cpu_seconds"] = [round(c, 3) for c in cpu]
        out[f"{mode}_wall_seconds"] = [round(c, 3) for c in wl]
        out[f"{mode}_cpu_median"] = round(statistics.median(cpu[skip:]), 3)
        out[f"{mode}_wall_median"] = round(statistics.median(wl[skip:]), 3)
        out[f"{mode}_bytes_per_node"] = round(statistics.median(by[skip:]))
        split = [d for m, d in rec.cpu_split if m == mode][skip:]
        out[f"{mode}_cpu_split_median"] = {
            part: round(statistics.median(d[part] for d in split), 3) for part in CPU_PARTS}
    if modes == "alternate":
        out["cpu_ratio"] = round(out["flower_cpu_median"]
                                 / max(out["fedhh_cpu_median"], 1e-9), 1)
        out["wall_ratio"] = round(out["flower_wall_median"]
                                  / max(out["fedhh_wall_median"], 1e-9), 1)
    out["rounds_completed"] = {m: sum(1 for mm, _ in rec.cpu if mm == m) for m in kinds}
    out["fedhh_sessions_complete"] = all(o is not None and o.total is not None
                                         for o in rec.outcomes)
    out["params_recorded_rounds"] = sorted(rec.params)
    return out
