"""``fedhh bench blinded``: the blinded crowd-id pipeline (two shufflers) on Zipf items.

Clients encrypt their item's crowd point to shuffler 2, shuffler 1 blinds and shuffles,
shuffler 2 decrypts to crowd ids and thresholds (:mod:`shuffler.blinded`). Prints the
CPU seconds of each party, per client, whether the forwarded crowd sizes equal the
plaintext counts of the items at or above the threshold (``correct``), and peak memory
(:func:`protocol.studies.runners.benchmarks.bench_blinded`).
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "blinded", "time blinded crowd ids (two shufflers)", run)
    p.add_argument("--clients", type=int, default=10_000, help="clients (default 10000)")
    p.add_argument("--items", type=int, default=1_000, help="Zipf(1.1) domain size")
    p.add_argument("--threshold", type=int, default=20, help="crowd threshold T")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json
    from protocol.studies.runners.benchmarks import bench_blinded

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
