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
import math
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
    from mechanisms.triehh_privacy import (
        TrieHHPrivacyError, batch_size, corollary1, discovery_rate,
        min_population_for_discovery, theorem1,
    )
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError

    n = args.users
    delta = args.delta if args.delta is not None else (1.0 / float(n) ** 2 if n > 0 else 0.0)
    out: dict[str, object] = {"n": n, "L": args.max_length}
    try:
        if args.theta is not None or args.gamma is not None:
            if args.theta is None or args.gamma is None:
                raise UsageError("--theta and --gamma go together")
            g = theorem1(args.theta, args.gamma, n, args.max_length, args.multi_word)
            theta, gamma, m = args.theta, args.gamma, batch_size(args.gamma, n)
            out.update({"mode": "theorem1", "theta": theta, "gamma": gamma, "m": m})
        else:
            if args.epsilon is None:
                raise UsageError("give --epsilon (Corollary 1) or --theta and --gamma (Theorem 1)")
            p = corollary1(args.epsilon, delta, n, args.max_length, args.multi_word)
            g = p.guarantee
            theta, gamma, m = p.theta, p.gamma, p.m
            out.update({"mode": "corollary1", "target_epsilon": args.epsilon,
                        "target_delta": delta, "theta": theta, "gamma": gamma,
                        "gamma_2dp": math.floor(gamma * 100) / 100, "m": m})
        out.update({"epsilon": g.epsilon, "delta": g.delta, "theorem": g.theorem,
                    "conditions": {"theta_min": 4, "theta_max": math.sqrt(n), "gamma_min": 1,
                                   "gamma_max": math.sqrt(n) / (theta + 1)},
                    "guarantee": g.to_json()})
        if args.frequency is not None:
            if not 0 < args.frequency <= 1:
                raise UsageError("--frequency must be in (0, 1]")
            w = int(round(args.frequency * n))
            rate = discovery_rate(w, n, m, theta, args.max_length)
            eps = args.epsilon if args.epsilon is not None else g.epsilon
            out["proposition1"] = {
                "frequency": args.frequency, "holders": w, "worst_case_discovery_rate": rate,
                "min_population_rate_0.9": min_population_for_discovery(
                    args.frequency, eps, args.max_length),
            }
    except TrieHHPrivacyError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    w_ = sys.stdout.write
    w_(f"n = {n:,}, L = {args.max_length}\n")
    if out["mode"] == "corollary1":
        w_(f"Corollary 1 for epsilon = {args.epsilon:g}, delta = {delta:.3g}:\n")
    w_(f"  theta = {theta}, gamma = {gamma:.4f}, m = {m}\n")
    w_(f"  guarantee: ({g.epsilon:.6f}, {g.delta:.4g})-DP ({g.theorem})\n")
    if "proposition1" in out:
        p1 = out["proposition1"]
        w_(f"Proposition 1: a word held by {p1['holders']} users (frequency {args.frequency:g})"
           f" is discovered with probability >= {p1['worst_case_discovery_rate']:.4f}\n")
        w_(f"Figure 2: minimum n for rate 0.9 at this frequency (delta = 1/n^2): "
           f"{p1['min_population_rate_0.9']:,}\n")
    return 0
