"""``fedhh hh``: discover heavy hitters with PEM, AoN, Apple's SFP or TrieHH
(:mod:`protocol.studies.runners.hh`, whose docstring describes the mechanisms, the item
encodings and the ``zipf32`` dataset)."""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    from protocol.studies.runners.hh import MECHANISMS

    p = cli.command("hh", "discover heavy hitters with PEM, AoN, SFP, TrieHH or Poplar1", run)
    p.add_argument("--mechanism", choices=MECHANISMS, default="pem")
    p.add_argument("--dataset", default="zipf32",
                   help="en, en-oov, zipf, zipf32 (32-bit items, default) or PATH")
    p.add_argument("--users", type=int, default=None, help="population size (default 100000)")
    p.add_argument("--epsilon", type=float, default=4.0,
                   help="local epsilon (pem, aon, sfp) or central target (triehh); default 4")
    p.add_argument("--delta", type=float, default=None,
                   help="central delta (triehh target; sfp's amplified equivalent); default 1/n^2")
    p.add_argument("--oracle", choices=("grr", "oue", "olh", "aon"), default=None,
                   help="PEM's frequency oracle (default olh; aon for --mechanism aon)")
    p.add_argument("--k", type=int, default=10, help="K: heavy hitters wanted (default 10)")
    p.add_argument("--levels", type=int, default=None,
                   help="PEM/AoN groups (default bits/8: 8 bits per level)")
    p.add_argument("--extension", type=int, default=None,
                   help="PEM/AoN prefixes kept per level (default K, as in PEM)")
    p.add_argument("--word-bytes", type=int, default=6, dest="word_bytes",
                   help="bytes of a word kept by PEM/AoN (default 6, i.e. 48-bit items)")
    p.add_argument("--T", type=int, default=20, help="SFP tuples per position (default 20)")
    p.add_argument("--hash-filter", action="store_true", dest="hash_filter",
                   help="SFP: drop assembled words whose own hash is not their bucket (not in "
                        "Apple's algorithm; default off)")
    p.add_argument("--support", type=int, default=10_000,
                   help="zipf32: distinct items (default 10000)")
    p.add_argument("--zipf-s", type=float, default=1.1, dest="zipf_s",
                   help="zipf32 exponent (default 1.1)")
    p.add_argument("--threshold", type=int, default=None,
                   help="poplar1: clients a prefix needs to be extended (default "
                        "max(2, ceil(n / (20 K))))")
    p.add_argument("--max-length", type=int, default=None, dest="max_length",
                   help="poplar1: characters of a word kept (default 10, TrieHH's L)")
    p.add_argument("--poplar1-mode", choices=("plain", "sampled"), default="plain",
                   dest="poplar1_mode",
                   help="poplar1: plain (default, the draft's search over every report, no "
                        "DP, at --threshold) or sampled (TrieHH's sample of m clients and "
                        "threshold theta per character for the central target --epsilon, "
                        "--delta: the release carries TrieHH's Theorem 1 guarantee)")
    p.add_argument("--show", type=int, default=20, help="items listed (default 20)")
    p.add_argument("--seed", type=int, default=None, help="simulation seed")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_alphabet_args, add_quiet_arg

    add_quiet_arg(p)
    add_alphabet_args(p)
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p, default="auto", extra_choices=("auto",), help=(
        "how contributions reach the server: auto (default: plain; SFP sums in process), "
        "plain, shuffler (reports; SFP then also states its shuffle-amplified central "
        "epsilon), secagg or threshold (PEM/AoN support vectors, TrieHH votes)"))


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.hh import HHOptions
    from protocol.studies.runners.hh import run as run_hh

    from protocol.cli.transport_options import transport_from_args, transport_options

    from protocol.cli.args import refuse_unused

    m, data = args.mechanism, args.dataset
    pem_like, embedded = m in ("pem", "aon"), data in ("en", "en-oov", "zipf", "zipf32")
    refuse_unused(args, [
        ("--epsilon", "epsilon", 4.0,
         m != "poplar1" or getattr(args, "poplar1_mode", "plain") == "sampled",
         "does not apply to --mechanism poplar1 in the plain mode (no differential "
         "privacy; --threshold sets what a prefix needs; --poplar1-mode sampled takes it)"),
        ("--delta", "delta", None, m in ("triehh", "sfp")
         or (m == "poplar1" and getattr(args, "poplar1_mode", "plain") == "sampled"),
         "is TrieHH's central target or SFP's amplified equivalent: it applies to "
         "--mechanism triehh or sfp, or poplar1 with --poplar1-mode sampled"),
        ("--oracle", "oracle", None, pem_like, "is PEM's frequency oracle: it applies to "
         "--mechanism pem only"),
        ("--levels", "levels", None, pem_like, "is PEM/AoN's groups: it applies to "
         "--mechanism pem or aon only"),
        ("--extension", "extension", None, pem_like, "is PEM/AoN's prefixes kept per level: "
         "it applies to --mechanism pem or aon only"),
        ("--word-bytes", "word_bytes", 6, pem_like and data != "zipf32",
         "is how PEM/AoN encode a word: it applies to --mechanism pem or aon on a word "
         "dataset (zipf32 items are 32-bit numbers)"),
        ("--T", "T", 20, m == "sfp", "is SFP's tuples per position: it applies to "
         "--mechanism sfp only"),
        ("--support", "support", 10_000, data == "zipf32",
         "is the zipf32 dataset's distinct items: it applies to --dataset zipf32 only"),
        ("--zipf-s", "zipf_s", 1.1, data == "zipf32",
         "is the zipf32 dataset's exponent: it applies to --dataset zipf32 only"),
        ("--show", "show", 20, not args.json,
         "limits the items printed; --json holds every discovered item"),
        ("--drop-unencodable", "drop_unencodable", False, not embedded,
         "applies to a word file (--dataset PATH); the embedded datasets hold only "
         "characters of their own alphabet"),
    ])
    if args.transport == "auto":
        transport_options(args)  # any transport option is an error here
        transport = None
    else:
        transport = transport_from_args(args)  # refuse bad options before loading data
    out = run_hh(options_from(HHOptions, args), transport)
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    pv = out["privacy"]
    k = args.k
    w(f"{out['mechanism'].upper()} on {out['dataset']}: n = {out['n']:,}, K = {k}, "
      f"transport {out['transport']}\n")
    cut = out.get("details", {}).get("truncated") or {}
    if cut.get("words"):
        w(f"warning: {cut['words']} distinct words longer than {cut['bytes']} bytes, held by "
          f"{cut['users']} users, are cut to their first {cut['bytes']} (--word-bytes) and "
          "counted as their prefix\n")
    if pv["kind"] == "central" and pv.get("mechanism") == "poplar1":
        w(f"privacy: central ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP for the released "
          f"trie, {pv['theorem']}; theta {pv['parameters']['theta']}, m "
          f"{pv['parameters']['m']:,}\n")
    elif pv["kind"] == "none":
        w(f"privacy: none by itself ({pv['note']})\n")
    elif pv["kind"] == "local":
        w(f"privacy: local {pv['epsilon']:g}-LDP per user ({pv['source']})\n")
        c = pv.get("central_after_shuffling")
        if c:
            w(f"  central equivalent after shuffling the n reports, delta {c['delta']:.3g}: "
              + ", ".join(f"{b} {v:.4f}" if isinstance(v, float) else f"{b} {v}"
                          for b, v in c.items() if b != "delta") + "\n")
    else:
        w(f"privacy: central ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}\n")
    w(f"{len(out['discovered'])} items discovered; precision {out['precision']:.3f}, "
      f"recall@{k} {out[f'recall_at_{k}']:.3f}, precision@{k} "
      f"{out[f'precision_at_{k}']:.3f}, F1@{k} {out[f'f1_at_{k}']:.3f}\n")
    if not out["discovered"] and pv.get("theta") is not None and pv.get("m") is not None:
        from protocol.studies.runners.triehh import why_none

        w(f"heavy hitters: {why_none(pv['theta'], pv['m'], out['n'])}\n")
    w(f"{'item':<16} {'count':>12} {'true rank':>9}\n")
    for d in out["discovered"][:args.show]:
        cnt = "-" if d["count"] is None else f"{d['count']:.0f}"
        rank = "-" if d["true_rank"] is None else str(d["true_rank"])
        w(f"{d['item']:<16} {cnt:>12} {rank:>9}\n")
    s = out["seconds"]
    w(f"time: load {s['load']:.2f} s, run {s['run']:.2f} s\n")
    return 0
