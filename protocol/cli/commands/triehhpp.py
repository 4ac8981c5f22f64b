"""``fedhh triehhpp``: TrieHH++ (Cormode 2021) heavy hitters with estimated frequencies.

The population comes from :mod:`protocol.studies.datasets` (one word per user). ``m`` and
``theta`` are solved from the target ``(epsilon, delta)`` by
:func:`mechanisms.triehhpp_privacy.solve_sample_size`; the trie grows over the chosen
transport, and every released heavy hitter is compared with the ground truth
(:mod:`protocol.studies.runners.triehhpp`).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    p = cli.command(
        "triehhpp", "heavy hitters with counts by TrieHH++ (Cormode 2021)", run,
        description="Run TrieHH++: each level Poisson-samples clients (rate m/n, by "
        "contacting m + c sqrt(m)), released prefixes carry their sampled counts "
        "(frequency estimate count*n/m). m and theta come from Lemma 3 (or the Remark "
        "with --flat) for the target (epsilon, delta).")
    p.add_argument("--dataset", default="en",
                   help="en (default), en-oov, zipf, or a PATH (one word per user)")
    p.add_argument("--users", type=int, default=None,
                   help="population size n (embedded default 1000000; a file: all users)")
    from protocol.cli.args import add_privacy_args
    from protocol.cli.transport_options import add_transport_args

    add_privacy_args(p)
    add_transport_args(p)
    from protocol.cli.transport_options import add_committee_args, add_corrupt_args

    add_committee_args(p)
    add_corrupt_args(p)
    p.add_argument("--flat", action="store_true",
                   help="one thresholded round over a public candidate list, no trie "
                   "(Remark after Lemma 3); embedded datasets use their public vocabulary")
    p.add_argument("--candidates", default=None,
                   help="with --flat: file of public candidate items, one per line "
                   "(required for a file dataset)")
    p.add_argument("--alphabet", default=None, help="public alphabet for a file dataset")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--show", type=int, default=25, help="heavy hitters to list (default 25)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json, progress_bar
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners import triehhpp

    from protocol.cli.args import refuse_unused

    refuse_unused(args, [("--composition", "composition", "basic", not args.flat,
                          "composes the levels' guarantees; --flat runs one level"),
                         ("--show", "show", 25, not args.json,
                          "limits the heavy hitters printed; --json holds them all")])
    transport = transport_from_args(args)  # refuse bad options before loading data
    out = triehhpp.run(options_from(triehhpp.TrieHHPPOptions, args), transport,
                       progress_bar(args.max_length, "TrieHH++ levels", enabled=not (args.json or args.quiet)))
    if args.json:
        print_json(out)
    else:
        _print_human(out, args.show)
    return 0


def _print_human(out: dict[str, Any], show: int) -> None:
    w = sys.stdout.write
    pv, pa = out["privacy"], out["parameters"]
    w(f"TrieHH++{' (flat)' if out['flat'] else ''} on {out['dataset']}: n = {out['n']:,}, "
      f"transport {out['transport']}\n")
    from protocol.cli.output import print_input

    sys.stdout.flush()
    print_input(out.get("input"))
    w(f"privacy: ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}\n")
    w(f"parameters: m = {pa['m']:,} (rate {pa['rate']:.4g}), theta = {pa['theta']}, "
      f"L = {pa['L']}, contacted s = {pa['contacted']:,}\n\n")
    w(f"{'level':>5} {'candidates':>10} {'released':>8} {'contacted':>9} "
      f"{'voters (sim)':>12}\n")
    for s in out["levels"]:
        w(f"{s['level']:>5} {s['candidates']:>10} {s['released']:>8} {s['contacted']:>9} "
          f"{s['voters_sim_only']:>12}\n")
    hh = out["heavy_hitters"]
    w(f"\n{len(hh)} heavy hitters; showing {min(show, len(hh))}\n")
    if not hh:
        from protocol.studies.runners.triehh import why_none

        w("heavy hitters: " + why_none(pa["theta"], pa["m"], out["n"], "expected sample",
                                       "raise --users, or --epsilon with --bound eq3") + "\n")
    w(f"{'item':<18} {'count':>6} {'estimate':>10} {'+/- se':>8} {'true':>9} {'rel.err':>8}\n")
    for r in hh[:show]:
        re_ = "-" if r["relative_error"] is None else f"{r['relative_error']:+.3f}"
        w(f"{r['item'][:18]:<18} {r['count']:>6} {r['estimate']:>10,.0f} "
          f"{r['estimate_se']:>8,.0f} {r['true']:>9,} {re_:>8}\n")
    e = out["estimation"]
    if e["median_abs_relative_error"] is not None:
        w(f"\nmedian |relative error| {e['median_abs_relative_error']:.3f}, max "
          f"{e['max_abs_relative_error']:.3f}; within 2 se: {e['within_2se']:.2f}\n")
    w("precision@K = found words among the true top K / the K found words with the "
      "largest counts (1.000 when none is found); recall@K = found among the true top K / K\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9}\n")
    for m in out["at_k"]:
        w(f"{m['k']:>5} {m['precision']:>12.3f} {m['recall']:>9.3f}\n")
    from protocol.cli.output import print_corrupted

    print_corrupted(out.get("corrupted"), "level")
    w(f"time: load {out['seconds']['load']:.2f} s, run {out['seconds']['run']:.2f} s\n")
