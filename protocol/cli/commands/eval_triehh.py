"""``fedhh eval triehh``: repeated TrieHH runs, CSV results and plots
(:mod:`protocol.studies.runners.triehh_eval`).

Writes into ``--out DIR``:

* ``discovery.csv``: one row per run and per word (the ``--csv-top`` most frequent
  words plus every discovered word): true rank, holders, true frequency, whether it
  was discovered, its released count, and the Proposition 1 worst-case bound;
* ``metrics.csv``: precision, recall and F1 at K for every run and K = 1..``--kmax``;
* ``summary.json``: parameters, guarantee, mean metrics at K = 10, 50, 100 and the
  checks (every released word occurs; words with a worst-case rate >= 0.9 found);
* ``discovery.png`` (Figure 3 style) and ``recall.png`` (Figure 4 style);
* ``runs.jsonl``: each run as it finishes; ``--resume`` (with the same options and
  ``--seed``) keeps them and runs only the others; after Ctrl-C the files above are
  drawn from the finished runs.

The population is drawn once (from ``--seed``); the runs use independent streams.
"""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_triehh_args

    p = cli.subcommand("eval", "triehh", "repeat TrieHH runs; write CSV results and plots", run)
    add_triehh_args(p)
    p.add_argument("--runs", type=int, default=10, help="number of runs (default 10)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--csv-top", type=int, default=2000, dest="csv_top",
                   help="most frequent words written per run (default 2000)")
    p.add_argument("--kmax", type=int, default=200, help="largest K for recall at K (default 200)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs OUT/runs.jsonl already holds (same options and --seed) "
                        "and run only the others")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json, progress_bar, say
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners.triehh import TrieHHOptions
    from protocol.studies.runners.triehh_eval import evaluate

    from protocol.cli.args import corollary_target_rules, refuse_unused

    refuse_unused(args, corollary_target_rules(args))
    transport = transport_from_args(args)  # refuse bad options before loading data
    chatty = not args.json and not args.quiet
    summary = evaluate(options_from(TrieHHOptions, args), transport, args.out, runs=args.runs,
                       csv_top=args.csv_top, kmax=args.kmax,
                       progress=progress_bar(args.runs, "runs", enabled=chatty),
                       resume=args.resume, say=say(not args.quiet))
    if args.json:
        print_json(summary)
        return 0
    w = sys.stdout.write
    w(f"{args.runs} TrieHH runs on {summary['dataset']} (n = {summary['n']:,}), theta = "
      f"{summary['theta']}, m = {summary['m']}, L = {summary['L']}\n")
    g = summary["privacy"]
    if isinstance(g, dict):
        w(f"guarantee: ({g['epsilon']:.4f}, {g['delta']:.3g})-DP, {g['theorem']}\n")
    w(f"every released heavy hitter occurs in the population: "
      f"{summary['all_released_in_population']}\n")
    if "prop1_bound_ge_0.9" in summary:
        s = summary["prop1_bound_ge_0.9"]
        w(f"words with Proposition 1 bound >= 0.9: {s['words']}, lowest empirical discovery "
          f"rate {s['min_discovery_rate']}, below 0.85: {s['words_below_0.85']}\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9} {'F1@K':>6}   (mean over runs)\n")
    for a in summary["at_k"]:
        w(f"{a['k']:>5} {a['precision']:>12.3f} {a['recall']:>9.3f} {a['f1']:>6.3f}\n")
    from protocol.cli.output import corrupt_target_line, print_corrupted

    if summary.get("corrupted"):
        w(corrupt_target_line(summary.get("input")) + "\n")
        print_corrupted(summary["corrupted"])
    w(f"wrote {summary['out']}/discovery.csv, metrics.csv, summary.json, discovery.png, recall.png\n")
    return 0
