"""What ``fedhh demo`` runs: TrieHH over secure aggregation, checked against plaintext.

The demo is a simulation: every client's keys come from a seeded generator so the
run is reproducible (``--seed``), which is only acceptable because no real data is
protected (see ``protocol.core.randomness``).
"""
from __future__ import annotations

import argparse
import copy
import secrets
import sys
import time


def run_demo(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.commands import triehh as cmd

    if args.users < 100:
        raise UsageError("--users must be at least 100")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    parser = argparse.ArgumentParser(add_help=False)
    cmd.add_common_args(parser)
    targs = parser.parse_args(["--users", str(args.users), "--epsilon", str(args.epsilon),
                               "--transport", "secagg", "--seed", str(seed)])
    w = sys.stdout.write
    w(f"fedhh demo (seed {seed}): TrieHH over SecAgg+ secure aggregation, "
      f"{args.users:,} simulated users holding English words\n\n")
    t0 = time.perf_counter()
    prep, rng = cmd.prepare(targs)
    rng_plain = copy.deepcopy(rng)
    # the seed drives sampling and choices; the protocol's keys come from the OS
    transport = cmd.load_transport("secagg")
    t1 = time.perf_counter()
    secagg = cmd.run_once(prep, transport, rng)
    t2 = time.perf_counter()
    out = cmd.summarize(prep, secagg)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    cmd._print_human(out, show=20)
    plain = cmd.run_once(prep, cmd.load_transport("plain"), rng_plain, show_progress=False)
    same = (set(plain.heavy_hitters) == set(secagg.heavy_hitters)
            and set(plain.prefixes) == set(secagg.prefixes))
    w("\nwhat each party learned:\n")
    w("  analyst: only the prefixes with at least theta votes (membership, no counts)\n")
    w("  server:  one masked vector per sampled user per round, and each round's vote "
      "totals; never an individual vote\n")
    w(f"  check:   a plaintext trusted aggregator with the same seed releases "
      f"{'the same' if same else 'a DIFFERENT'} trie "
      f"({len(plain.heavy_hitters)} heavy hitters, {len(plain.prefixes)} prefixes)\n")
    if not same:
        print("fedhh demo: the secure-aggregation release differs from the plaintext "
              "reference", file=sys.stderr)
        return 1
    return 0
