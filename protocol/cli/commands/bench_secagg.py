"""``fedhh bench secagg``: one full secure-aggregation round on random inputs.

Prints (``--json``) one object with the configuration -- the threat model (``--threat
malicious|semi-honest``, default ``malicious``; ``--malicious`` is an alias of
``--threat malicious``), ``k``, ``t``, the minimum honest set ``min_honest`` (``alpha n``:
the fewest honest clients in any sum the server can learn under that threat model,
``alpha = min_honest / n``) and the ``log2`` failure bounds of the parameters --, whether the unmasked result equals
the plaintext sum over the clients whose masked input arrived (``correct``), wall time of
the round (``seconds``), CPU time of this process during the round (``cpu_seconds``; the
wall time exceeds it when other processes share the cores), CPU time per party, bytes
per client, and for each primitive family (key agreement, PRG, Shamir, AEAD, signatures,
KDF) the CPU time spent inside it during the round next to the bare cost of the same
operations (:mod:`protocol.core.secagg_profile`). The bare cost is timed on up to
``--bare-sample`` operations of each kind and scaled to the round's count
(``--bare-sample 0`` replays every operation; slow for large rounds).
"""
from __future__ import annotations

import argparse
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "secagg", "benchmark one secure-aggregation round", run)
    p.add_argument("--clients", type=int, default=100, help="number of clients n")
    p.add_argument("--dim", type=int, default=1000, help="vector length")
    p.add_argument("--graph", choices=("complete", "harary"), default="harary",
                   help="complete graph (SecAgg) or Harary graph (SecAgg+)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="probability that a client drops, before a uniformly random round")
    from protocol.cli.transport_options import add_threat_arg

    add_threat_arg(p)
    p.add_argument("--malicious", action="store_const", const="malicious", default=None,
                   help="alias of --threat malicious (the default)")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS randomness)")
    p.add_argument("--modulus", type=int, default=1 << 32, help="arithmetic modulus R")
    p.add_argument("--grinding-bits", type=int, default=0, dest="grinding_bits",
                   help="parameters that keep their bound when the server may choose among "
                        "2^B graph seeds (default 0)")
    p.add_argument("--bare-sample", type=int, default=2000,
                   help="operations per primitive replayed bare (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError

    if args.clients < 2:
        raise UsageError("--clients must be at least 2")
    if args.dim < 1:
        raise UsageError("--dim must be at least 1")
    if not 2 <= args.modulus <= 1 << 64:
        raise UsageError("--modulus must be in [2, 2**64]")
    if not 0.0 <= args.dropout < 1.0:
        raise UsageError("--dropout must be in [0, 1)")
    if not 0 <= args.grinding_bits <= 128:
        raise UsageError("--grinding-bits must be in [0, 128]")
    if args.malicious and args.threat not in (None, "malicious"):
        raise UsageError(f"--malicious contradicts --threat {args.threat}")
    threat = args.threat or args.malicious or "malicious"
    out = bench_secagg(args.clients, args.dim, graph=args.graph, dropout=args.dropout,
                       threat=threat, seed=args.seed, modulus=args.modulus,
                       bare_sample=args.bare_sample, grinding_bits=args.grinding_bits)
    if args.json:
        from protocol.cli.benchutil import print_json

        print_json(out)
    else:
        _print_table(out)
    return 0


def bench_secagg(clients: int, dim: int, *, graph: str = "harary", dropout: float = 0.0,
                 threat: str = "malicious", seed: int | None = None,
                 modulus: int = 1 << 32, bare_sample: int = 2000, grinding_bits: int = 0,
                 malicious: bool | None = None) -> dict[str, Any]:
    """Run one round and return the figures (see the module docstring).

    Args:
        threat: ``"malicious"`` or ``"semi-honest"``; ``malicious`` is its boolean
            alias (an error if they disagree).

    Raises:
        protocol.cli.UsageError: no parameters satisfy the threat model for this
            ``n``, or ``threat`` and ``malicious`` disagree.
    """
    import secrets
    import time

    import numpy as np

    from protocol.cli import UsageError
    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from protocol.core.secagg_engine import (
        Dropout, category_seconds, profile_primitives, run_secagg,
    )
    from protocol.core.secagg_profile import primitive_table
    from secagg.errors import ParameterError
    from secagg.params import DEFAULT_DROPOUT_RATE, find_params, threat_of
    from secagg.state import ModAccumulator, SessionConfig

    try:
        threat = threat_of(threat, malicious)
        params = find_params(clients, graph=graph,
                             dropout_rate=max(DEFAULT_DROPOUT_RATE, dropout),
                             threat=threat, grinding_bits=grinding_bits)
    except ParameterError as exc:
        raise UsageError(f"no SecAgg parameters for this setting: {exc}") from None
    malicious = threat == "malicious"
    config = SessionConfig(params, tuple(range(clients)), b"fedhh bench secagg", dim,
                           modulus, malicious=malicious)
    data_seed = seed if seed is not None else secrets.randbits(64)
    rand = insecure_deterministic_randomness(seed) if seed is not None else OsRandom()

    def input_of(i: int) -> np.ndarray:
        rng = np.random.default_rng([data_seed, i])
        if modulus == 1 << 64:
            return rng.integers(0, 1 << 64, dim, dtype=np.uint64, endpoint=False)
        return rng.integers(0, modulus, dim, dtype=np.uint64)

    rounds = (0, 1, 2, 3, 4) if malicious else (0, 1, 2, 4)
    drop = Dropout.random(clients, dropout, np.random.default_rng([data_seed, 1 << 40]),
                          rounds=rounds)
    cpu0 = time.process_time()
    with profile_primitives() as prof:
        res = run_secagg(config, input_of, rand=rand, dropout=drop)
    cpu_round = time.process_time() - cpu0
    correct = False
    if res.completed and res.result is not None:
        acc = ModAccumulator(dim, modulus)
        for i in sorted(res.survivors):
            acc.add(input_of(i))
        correct = bool(np.array_equal(acc.value(), res.result))
    took_part = res.bytes_up > 0
    cats = category_seconds(prof)
    primitives = primitive_table(prof, bare_sample)
    bits = (modulus - 1).bit_length()
    plain_bytes = dim * bits / 8
    up_mean = float(res.bytes_up[took_part].mean()) if took_part.any() else 0.0
    return {
        "clients": clients, "dim": dim, "graph": graph, "degree": config.degree,
        "threshold": config.threshold, "modulus": modulus, "dropout": dropout,
        "threat": threat, "malicious": malicious, "grinding_bits": grinding_bits,
        "seed": seed, "correct": correct,
        "corrupt_fraction": params.corrupt_fraction, "dropout_budget": params.dropout_rate,
        "min_honest": params.min_honest, "alpha": round(float(params.alpha or 0.0), 4),
        "log2_security_failure": params.log2_security_failure,
        "log2_correctness_failure": params.log2_correctness_failure,
        "aborted": not res.completed,
        "abort_reason": res.server_abort_reason.value if res.server_abort_reason else None,
        "survivors": len(res.survivors),
        "dropped": clients - len(res.survivors),
        "seconds": round(res.wall_seconds, 3),
        "cpu_seconds": round(cpu_round, 3),
        "client_seconds_mean": round(float(res.client_seconds[took_part].mean()), 5),
        "client_seconds_max": round(float(res.client_seconds.max()), 5),
        "server_seconds": round(res.server_seconds, 3),
        "codec_seconds": round(res.codec_seconds, 3),
        "bytes_up_per_client": round(up_mean, 1),
        "bytes_down_per_client": round(float(res.bytes_down[took_part].mean()), 1),
        "expansion_up": round(up_mean / plain_bytes, 3),
        "primitives": primitives,
        "primitive_seconds_total": round(sum(cats.values()), 3),
    }



def _print_table(out: dict[str, Any]) -> None:
    print(f"secagg round: n={out['clients']} dim={out['dim']} graph={out['graph']} "
          f"k={out['degree']} t={out['threshold']} R={out['modulus']} "
          f"dropout={out['dropout']} threat={out['threat']}")
    print(f"  the server learns only sums over >= {out['min_honest']} honest clients "
          f"(alpha = {out['alpha']}) with gamma = {out['corrupt_fraction']}, "
          f"delta = {out['dropout_budget']}; log2 P(security fails) "
          f"<= {out['log2_security_failure']}")
    print(f"  correct={out['correct']}  survivors={out['survivors']}  "
          f"abort={out['abort_reason']}")
    print(f"  wall {out['seconds']:.3f} s (process CPU {out['cpu_seconds']:.3f} s)   client CPU mean {out['client_seconds_mean']:.4f} s"
          f"   server CPU {out['server_seconds']:.3f} s   codec {out['codec_seconds']:.3f} s")
    print(f"  bytes per client: up {out['bytes_up_per_client']:.0f}  "
          f"down {out['bytes_down_per_client']:.0f}  (expansion {out['expansion_up']}x)")
    print(f"  {'primitive':<14}{'calls':>9}{'in round s':>12}{'bare s':>10}{'ratio':>8}")
    for k, v in out["primitives"].items():
        ratio = "-" if v["overhead_ratio"] is None else f"{v['overhead_ratio']:.2f}"
        print(f"  {k:<14}{v['calls']:>9}{v['seconds']:>12.4f}{v['bare_seconds']:>10.4f}"
              f"{ratio:>8}")
