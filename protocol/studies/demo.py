"""What ``fedhh demo`` runs: TrieHH over secure aggregation, checked against plaintext.

The secure aggregation runs under the threat model of ``--threat`` (default
``malicious``: signed keys, the consistency round, and parameters for a server that may
equivocate, choose which clients drop and collude with 5% of the sampled users); the
demo prints the smallest number of honest users whose votes any total the server can
learn must cover (:attr:`secagg.params.SecAggParams.min_honest`).

The demo is a simulation: every client's keys come from a seeded generator so the
run is reproducible (``--seed``), which is only acceptable because no real data is
protected (see ``protocol.core.randomness``).
"""
from __future__ import annotations

import argparse
import copy
import secrets
import sys
import textwrap
import time


def run_demo(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.commands import triehh as cmd

    if args.users < 100:
        raise UsageError("--users must be at least 100")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    parser = argparse.ArgumentParser(add_help=False)
    cmd.add_common_args(parser)
    threat = getattr(args, "threat", None) or "malicious"
    targs = parser.parse_args(["--users", str(args.users), "--epsilon", str(args.epsilon),
                               "--transport", "secagg", "--seed", str(seed),
                               "--threat", threat])
    w = sys.stdout.write
    w(f"fedhh demo (seed {seed}): TrieHH over SecAgg+ secure aggregation ({threat} "
      f"server), {args.users:,} simulated users holding English words\n\n")
    t0 = time.perf_counter()
    prep, rng = cmd.prepare(targs)
    rng_plain = copy.deepcopy(rng)
    # the seed drives sampling and choices; the protocol's keys come from the OS
    from protocol.cli.transport_options import transport_from_args

    transport = transport_from_args(argparse.Namespace(transport="secagg", threat=threat))
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
      "totals\n")
    w(textwrap.fill(_server_guarantee(threat, secagg.m), 88, initial_indent=" " * 11,
                    subsequent_indent=" " * 11) + "\n")
    w(f"  check:   a plaintext trusted aggregator with the same seed releases "
      f"{'the same' if same else 'a DIFFERENT'} trie "
      f"({len(plain.heavy_hitters)} heavy hitters, {len(plain.prefixes)} prefixes)\n")
    if not same:
        print("fedhh demo: the secure-aggregation release differs from the plaintext "
              "reference", file=sys.stderr)
        return 1
    return 0


def _server_guarantee(threat: str, m: int) -> str:
    """What the secure aggregation guarantees about the vote totals, for ``m`` users a
    round under ``threat`` (printed by the demo)."""
    from secagg.params import DEFAULT_CORRUPT_FRACTION, find_params

    p = find_params(m, threat=threat) if m >= 3 else None
    if p is None:
        return "(rounds too small for secure aggregation)"
    gamma = f"{100 * DEFAULT_CORRUPT_FRACTION:g}%"
    if threat == "malicious":
        return (f"any total it can learn covers at least {p.min_honest:,} honest "
                f"users of the {m:,} sampled (k = {p.degree}, t = {p.threshold}), even if it "
                f"equivocates, chooses who drops and colludes with {gamma} of them; with "
                f"more colluders or sybils a total over few users can reveal a vote")
    return (f"while it follows the protocol and dropouts are random, each total "
            f"covers at least {p.min_honest:,} honest users of the {m:,} sampled (k = "
            f"{p.degree}, t = {p.threshold}); a server that sends different survivor lists "
            f"to different users can recover an individual vote (use --threat malicious)")
