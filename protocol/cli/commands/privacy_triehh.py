"""``fedhh privacy triehh``: TrieHH parameter and guarantee calculators.

* default: Corollary 1 (theta, gamma, m for a target epsilon, delta, n, L) and the
  Theorem 1 guarantee at the integer batch size;
* ``--theta T --gamma G``: Theorem 1 directly;
* ``--frequency F``: Proposition 1's worst-case discovery rate of a word held by a
  fraction ``F`` of the users, and Figure 2's minimum population for a rate of 0.9
  (delta = 1/n^2).
"""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("privacy", "triehh", "TrieHH parameters and (epsilon, delta) "
                       "(Zhu et al. 2020, Theorem 1, Corollaries 1-2, Proposition 1)", run)
    p.add_argument("--users", type=int, required=True, help="population size n")
    p.add_argument("--epsilon", type=float, default=None, help="target epsilon")
    p.add_argument("--delta", type=float, default=None, help="target delta (default 1/n^2)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="L, the maximum number of trie levels (default 10)")
    p.add_argument("--theta", type=int, default=None, help="evaluate Theorem 1 at this theta")
    p.add_argument("--gamma", type=float, default=None, help="evaluate Theorem 1 at this gamma")
    p.add_argument("--multi-word", action="store_true", dest="multi_word",
                   help="report Corollary 2 (several words per user)")
    p.add_argument("--frequency", type=float, default=None,
                   help="also report Proposition 1 for a word held by this fraction of users")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.output import print_json
    from protocol.studies.runners.triehh import parameters

    n = args.users
    out = parameters(n, epsilon=args.epsilon, delta=args.delta, max_length=args.max_length,
                     theta=args.theta, gamma=args.gamma, multi_word=args.multi_word,
                     frequency=args.frequency)
    if args.json:
        print_json(out)
        return 0
    w_ = sys.stdout.write
    w_(f"n = {n:,}, L = {args.max_length}\n")
    if out["mode"] == "corollary1":
        w_(f"Corollary 1 for epsilon = {args.epsilon:g}, delta = {out['target_delta']:.3g}:\n")
    w_(f"  theta = {out['theta']}, gamma = {out['gamma']:.4f}, m = {out['m']}\n")
    w_(f"  guarantee: ({out['epsilon']:.6f}, {out['delta']:.4g})-DP ({out['theorem']})\n")
    if "proposition1" in out:
        p1 = out["proposition1"]
        w_(f"Proposition 1: a word held by {p1['holders']} users (frequency {args.frequency:g})"
           f" is discovered with probability >= {p1['worst_case_discovery_rate']:.4f}\n")
        w_(f"Figure 2: minimum n for rate 0.9 at this frequency (delta = 1/n^2): "
           f"{p1['min_population_rate_0.9']:,}\n")
    return 0
