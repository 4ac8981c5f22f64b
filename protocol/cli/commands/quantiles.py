"""``fedhh quantiles``: quantiles and range queries from the TrieHH++ trie
(Cormode 2021, section 4).

Values in a public range ``[lo, hi]`` become base-``alpha`` prefixes of length ``L``;
TrieHH++ releases the trie with counts; quantiles and the rank of every grid point are
answered from it and compared with the truth. The embedded default population is
log-normal "session lengths in seconds" (median 300 s, sigma 1, range [0, 3600],
generated from a fixed public seed so it is the same on every run;
:mod:`protocol.studies.runners.quantiles`).
"""
from __future__ import annotations

import argparse
import sys

def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_privacy_args

    p = cli.command("quantiles", "quantiles and range queries from the TrieHH++ trie", run,
                    description="Cormode 2021 section 4: values -> base-alpha prefixes -> "
                    "TrieHH++ trie with counts -> ranks by greedy decomposition, quantiles "
                    "by rank search; every answer carries the bound L(alpha-1)theta/m.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--values", default=None,
                     help="file of numbers (one per line, or .npy); needs --lo and --hi")
    src.add_argument("--synthetic", choices=("lognormal",), default=None,
                     help="embedded log-normal session lengths in seconds (the default)")
    p.add_argument("--users", type=int, default=None,
                   help="population size (synthetic default 1000000; a file: subsample)")
    p.add_argument("--lo", type=float, default=None, help="public lower end of the range")
    p.add_argument("--hi", type=float, default=None, help="public upper end of the range")
    p.add_argument("--clip", action="store_true",
                   help="clip values outside [--lo, --hi] to the range, counted and "
                        "reported (default: such values are an error)")
    p.add_argument("--alpha", type=int, default=4, help="alphabet size (default 4)")
    add_privacy_args(p, epsilon=1.0, delta=1e-6)
    p.add_argument("--quantiles", default="0.1,0.25,0.5,0.75,0.9",
                   help="comma-separated quantiles (default 0.1,0.25,0.5,0.75,0.9)")
    p.add_argument("--grid", type=int, default=2001,
                   help="points r in [lo, hi] for the range-query error summary (default 2001)")
    p.add_argument("--seed", type=int, default=None,
                   help="mechanism seed (default: fresh OS randomness)")
    from protocol.cli.transport_options import (
        add_committee_args, add_corrupt_args, add_transport_args,
    )

    add_transport_args(p, help="how each level's votes are aggregated (default plain; any "
                               "transport that takes votes gives the same release)")
    add_committee_args(p)
    add_corrupt_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json, progress_bar
    from protocol.studies.runners.quantiles import QuantileOptions
    from protocol.studies.runners.quantiles import run as run_quantiles

    from protocol.cli.output import print_corrupted, print_input
    from protocol.cli.transport_options import transport_from_args

    try:
        qs = tuple(float(x) for x in args.quantiles.split(",") if x.strip())
    except ValueError:
        raise UsageError("--quantiles must be comma-separated numbers") from None
    from protocol.cli.args import refuse_unused

    refuse_unused(args, [("--clip", "clip", False, args.lo is not None or args.hi is not None,
                          "clips values outside a range you give (--lo, --hi); the "
                          "embedded population lies in its own range [0, 3600]")])
    transport = transport_from_args(args)  # refuse bad options before loading data
    out = run_quantiles(options_from(QuantileOptions, args, quantiles=qs),
                        progress_bar(args.max_length, "TrieHH++ levels", enabled=not (args.json or args.quiet)),
                        transport=transport)
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    lo, hi = out["range"]
    g = out["privacy"]
    w(f"quantiles from TrieHH++ on {out['source']}: n = {out['n']:,}, range [{lo:g}, {hi:g}], "
      f"alpha = {args.alpha}, L = {args.max_length}, transport {out['transport']}\n")
    sys.stdout.flush()
    print_input(out.get("input"))
    w(f"privacy: ({g['epsilon']:.4f}, {g['delta']:.3g})-DP, {g['theorem']}\n")
    w(f"m = {out['m']:,} per level, theta = {out['theta']}, {out['trie_nodes']} released nodes; "
      f"rank error bound L(alpha-1)theta/m = {out['error_bound']:.4g}\n")
    if out["error_bound"] >= 1:
        w("  (vacuous: a rank error is never above 1; the bound falls like 1/m, so raise "
          "--users or --epsilon; --bound eq3 allows a larger epsilon per level)\n")
    w("\n")
    w(f"{'q':>6} {'estimate':>12} {'true':>12} {'true rank':>10} {'rank err':>9} {'bound':>7}\n")
    for r in out["quantiles"]:
        w(f"{r['q']:>6.3f} {r['estimate']:>12.4g} {r['true_quantile']:>12.4g} "
          f"{r['true_rank_of_estimate']:>10.4f} {r['rank_error']:>+9.4f} "
          f"{r['error_bound']:>7.4f}\n")
    e = out["range_query_rank_error"]
    w(f"\nrange queries [lo, r] at {e['points']} points r: |rank error| median "
      f"{e['median']:.4f}, 95th percentile {e['p95']:.4f}, max {e['max']:.4f}; "
      f"{100 * e['fraction_within_bound']:.1f}% within the bound\n")
    print_corrupted(out.get("corrupted"), "level")
    return 0
