"""``fedhh bench blinded``: the blinded crowd-id pipeline (two shufflers) on Zipf items.

Clients encrypt their item's crowd point to shuffler 2, shuffler 1 blinds and shuffles,
shuffler 2 decrypts to crowd ids and thresholds (:mod:`shuffler.blinded`). Prints the
CPU seconds of each party, per client, whether the forwarded crowd sizes equal the
plaintext counts of the items at or above the threshold (``correct``), and peak memory.
"""
from __future__ import annotations

import argparse
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "blinded", "time blinded crowd ids (two shufflers)", run)
    p.add_argument("--clients", type=int, default=10_000, help="clients (default 10000)")
    p.add_argument("--items", type=int, default=1_000, help="Zipf(1.1) domain size")
    p.add_argument("--threshold", type=int, default=20, help="crowd threshold T")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError

    if args.clients < 1 or args.items < 1 or args.threshold < 1:
        raise UsageError("--clients, --items and --threshold must be >= 1")
    out = bench_blinded(args.clients, args.items, args.threshold, args.seed)
    if args.json:
        print_json(out)
    else:
        print(f"blinded crowd ids: {out['clients']:,} clients, {out['crowds']:,} crowds, "
              f"T = {out['threshold']}, correct = {out['correct']}")
        for party, sec in out["cpu_seconds"].items():
            print(f"  {party:<10} {sec:8.3f} s CPU  "
                  f"({1e6 * out['cpu_seconds_per_client'][party]:.0f} us per client)")
    return 0


def bench_blinded(clients: int, items: int, threshold: int, seed: int | None
                  ) -> dict[str, Any]:
    import collections
    import time

    import numpy as np

    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from shuffler.blinded import Blinder, DecryptorKey, encrypt_crowd

    rand = insecure_deterministic_randomness(seed) if seed is not None else OsRandom()
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, items + 1) ** 1.1
    draws = rng.choice(items, size=clients, p=p / p.sum())
    values = [int(v).to_bytes(4, "big") for v in draws]
    ctx = b"fedhh bench blinded"
    cpu: dict[str, float] = {}
    t = time.process_time()
    key = DecryptorKey.generate(rand)
    blinder = Blinder(key.public, rand)
    cts = [encrypt_crowd(v, ctx, key.public, rand) for v in values]
    cpu["clients"] = time.process_time() - t
    t = time.process_time()
    blinded, dropped = blinder.blind_and_shuffle(cts, ctx)
    cpu["shuffler1"] = time.process_time() - t
    t = time.process_time()
    sizes = collections.Counter(key.crowd_id(c) for c in blinded)
    kept = sorted(k for k in sizes.values() if k >= threshold)
    cpu["shuffler2"] = time.process_time() - t
    plain = collections.Counter(values)
    expected = sorted(k for k in plain.values() if k >= threshold)
    return {
        "clients": clients, "items": items, "threshold": threshold, "seed": seed,
        "crowds": len(sizes), "forwarded_crowds": len(kept), "dropped": dropped,
        "correct": kept == expected and len(sizes) == len(plain),
        "cpu_seconds": {k: round(v, 3) for k, v in cpu.items()},
        "cpu_seconds_per_client": {k: v / clients for k, v in cpu.items()},
        # one process plays every party, so the run's time is their CPU time summed
        "seconds": round(sum(cpu.values()), 3),
    }
