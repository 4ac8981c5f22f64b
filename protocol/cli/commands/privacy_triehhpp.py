"""``fedhh privacy triehhpp``: solve TrieHH++'s sample size and threshold for a target
(epsilon, delta) (Cormode 2021, Lemmas 1 and 3, Remark after Lemma 3)."""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.commands.triehhpp import add_privacy_args

    p = cli.subcommand(
        "privacy", "triehhpp", "TrieHH++ sample size m and threshold theta for (epsilon, delta)",
        run, description="Smallest integer theta with L*p_theta <= delta (2*L*p_theta for "
        "advanced composition), then the largest expected sample m per level meeting "
        "epsilon. Fails with the name of the theorem condition that does not hold.")
    p.add_argument("--users", type=int, required=True, help="population size n")
    add_privacy_args(p)
    p.add_argument("--flat", action="store_true",
                   help="one thresholded histogram, no trie (Remark after Lemma 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from mechanisms.sampling import plan_poisson_sampling
    from mechanisms.triehhpp_privacy import lemma1_theta, p_theta
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError
    from protocol.cli.commands.triehhpp import solve

    if args.users < 1:
        raise UsageError("--users must be >= 1")
    sol = solve(args, args.users, args.flat)
    g = sol.guarantee
    plan = plan_poisson_sampling(args.users, float(sol.m), args.slack)
    target_delta = args.delta if args.delta is not None or args.theta is not None \
        else 1.0 / float(args.users) ** 2
    out = {
        "n": args.users, "target_epsilon": args.epsilon, "target_delta": target_delta,
        "L": 1 if args.flat else args.max_length, "flat": args.flat,
        "m": sol.m, "theta": sol.theta, "sampling_rate": sol.rate,
        "contacted": plan.contacted,
        "epsilon": g.epsilon, "delta": g.delta, "theorem": g.theorem,
        "p_theta": p_theta(sol.theta),
        "lemma1_theta": lemma1_theta(target_delta) if target_delta else None,
        "truncation_probability": plan.truncation_probability,
        "cormode_scheme_tv_distance": plan.cormode_tv_distance(),
        "quantile_rank_error_bound_alpha4": (1 if args.flat else args.max_length) * 3
        * sol.theta / sol.m,
        "parameters": dict(g.parameters),
        "guarantee": g.to_json(),
    }
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    td = "any" if target_delta is None else f"{target_delta:.3g}"
    w(f"TrieHH++{' flat' if args.flat else ''}: n = {args.users:,}, L = {out['L']}, "
      f"target epsilon {args.epsilon:g}, delta {td}\n")
    l1 = "" if out["lemma1_theta"] is None else \
        f"; Lemma 1 closed form 3 + ln(1/delta) = {out['lemma1_theta']:.2f}"
    w(f"  theta = {sol.theta} (p_theta = {out['p_theta']:.3g}{l1})\n")
    w(f"  m = {sol.m:,} per level (sampling rate {sol.rate:.5g}); contact s = "
      f"{plan.contacted:,} clients (c = {args.slack:g})\n")
    w(f"  guarantee: ({g.epsilon:.6g}, {g.delta:.3g})-DP  [{g.theorem}]\n")
    if "level_epsilon" in g.parameters:
        w(f"  per-level epsilon {g.parameters['level_epsilon']:.6g}\n")
    if "paper_literal_epsilon" in g.parameters:
        w(f"  (paper's literal advanced-composition formula would say "
          f"{g.parameters['paper_literal_epsilon']:.6g}; basic composition gives "
          f"{g.parameters['basic_epsilon']:.6g})\n")
    w(f"  P[Bin(n, m/n) > s] = {plan.truncation_probability:.3g} (truncation, added to delta);"
      f" Cormode's Bin(s, m/s) scheme is {plan.cormode_tv_distance():.3f} from Poisson in TV\n")
    w(f"  quantile rank-error bound L(alpha-1)theta/m at alpha = 4: "
      f"{out['quantile_rank_error_bound_alpha4']:.4g}\n")
    return 0
