"""``fedhh privacy triehhpp``: solve TrieHH++'s sample size and threshold for a target
(epsilon, delta) (Cormode 2021, Lemmas 1 and 3, Remark after Lemma 3;
:func:`protocol.studies.runners.triehhpp.parameters`)."""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_privacy_args

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
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.triehhpp import PrivacyTarget, parameters

    out = parameters(options_from(PrivacyTarget, args), args.users, args.flat)
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    td = "any" if out["target_delta"] is None else f"{out['target_delta']:.3g}"
    par = out["parameters"]
    w(f"TrieHH++{' flat' if args.flat else ''}: n = {args.users:,}, L = {out['L']}, "
      f"target epsilon {args.epsilon:g}, delta {td}\n")
    l1 = "" if out["lemma1_theta"] is None else \
        f"; Lemma 1 closed form 3 + ln(1/delta) = {out['lemma1_theta']:.2f}"
    w(f"  theta = {out['theta']} (p_theta = {out['p_theta']:.3g}{l1})\n")
    w(f"  m = {out['m']:,} per level (sampling rate {out['sampling_rate']:.5g}); contact s = "
      f"{out['contacted']:,} clients (c = {args.slack:g})\n")
    w(f"  guarantee: ({out['epsilon']:.6g}, {out['delta']:.3g})-DP  [{out['theorem']}]\n")
    if "level_epsilon" in par:
        w(f"  per-level epsilon {par['level_epsilon']:.6g}\n")
    if "paper_literal_epsilon" in par:
        w(f"  (paper's literal advanced-composition formula would say "
          f"{par['paper_literal_epsilon']:.6g}; basic composition gives "
          f"{par['basic_epsilon']:.6g})\n")
    w(f"  P[Bin(n, m/n) > s] = {out['truncation_probability']:.3g} (truncation, added to delta);"
      f" Cormode's Bin(s, m/s) scheme is {out['cormode_scheme_tv_distance']:.3f} from Poisson "
      f"in TV\n")
    w(f"  quantile rank-error bound L(alpha-1)theta/m at alpha = 4: "
      f"{out['quantile_rank_error_bound_alpha4']:.4g}\n")
    return 0
