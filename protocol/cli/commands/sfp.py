"""``fedhh sfp``: Apple's Sequence Fragment Puzzle on a word population.

The local epsilon of the fragment report is either given (``--local-epsilon``) or
derived from a central target ``(--epsilon, --delta)`` by amplification by shuffling,
with the closed form the TrieHH authors used for their SFP comparison
(:func:`shuffler.amplification.triehh_blanket_epsilon0`; central 1 and 4 at
n = 659,380, delta = 1/n^2 give local 4.29 and 4.96). The optional word report
(``--word-epsilon``) adds its own local epsilon by basic composition; amplification is
applied to the fragment report only, as in the paper's discovery-only comparison
(:mod:`protocol.studies.runners.sfp`). The assembly is Appendix C's by default;
``--hash-filter`` adds the word-hash filter (:class:`mechanisms.sfp.SFP`).
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("sfp", "discover heavy hitters with Apple's Sequence Fragment Puzzle", run)
    p.add_argument("--dataset", default="zipf", help="en, en-oov, zipf or PATH")
    p.add_argument("--users", type=int, default=None, help="number of users (default 100000)")
    p.add_argument("--epsilon", type=float, default=4.0,
                   help="central epsilon after shuffling (default 4)")
    p.add_argument("--delta", type=float, default=None, help="central delta (default 1/n^2)")
    p.add_argument("--local-epsilon", type=float, default=None,
                   help="local epsilon of the fragment report (skips the conversion)")
    p.add_argument("--word-epsilon", type=float, default=0.0,
                   help="local epsilon of the word report (0 = no word report, the paper's "
                        "discovery-only comparison)")
    p.add_argument("--T", type=int, default=20, help="tuples kept per position (20 or 80)")
    p.add_argument("--k", type=int, default=2048, help="CMS hash functions (default 2048)")
    p.add_argument("--m", type=int, default=1024, help="CMS buckets (default 1024)")
    p.add_argument("--top", type=int, default=50, help="K for recall at K (default 50)")
    p.add_argument("--hash-filter", action="store_true", dest="hash_filter",
                   help="drop assembled words whose own hash is not their bucket (a step "
                        "Apple's algorithm, Appendix C of Zhu et al. 2020, does not have; "
                        "default off)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_alphabet_args, add_quiet_arg

    add_quiet_arg(p)
    add_alphabet_args(p)
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p, default="auto", extra_choices=("auto",), help=(
        "how the reports reach the server: auto (default: the shuffler for a central "
        "target, in-process sums with --local-epsilon), shuffler, plain, or secagg / "
        "threshold (sketch vectors; only with --local-epsilon and small --k x --m)"))


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.sfp import SFPOptions
    from protocol.studies.runners.sfp import run as run_sfp

    from protocol.cli.transport_options import transport_from_args, transport_options

    from protocol.cli.args import refuse_unused

    refuse_unused(args, [("--epsilon", "epsilon", 4.0, args.local_epsilon is None,
                          "is the central target SFP converts to a local epsilon; "
                          "--local-epsilon gives the local epsilon itself: give one of "
                          "them")])
    if args.transport == "auto":
        transport_options(args)  # any transport option is an error here
        transport = None
    else:
        transport = transport_from_args(args)
    out = run_sfp(options_from(SFPOptions, args), transport)
    if args.json:
        print_json(out)
        return 0
    s = out["seconds"]
    print(f"SFP on {out['dataset']}: n={out['users']}, local epsilon "
          f"{out['local_epsilon_fragment']:.4f} (fragment) + "
          f"{args.word_epsilon:g} (word), {out['conversion']}; "
          f"hash filter {'on' if out['hash_filter'] else 'off'}; transport "
          f"{out['transport']}")
    from protocol.cli.output import print_input

    print_input(out.get("input"))
    print(f"discovered {out['discovered']} words; recall@{args.top} "
          f"{out[f'recall_at_{args.top}']:.3f}, precision {out['precision']:.3f}; "
          f"randomize {s['randomize']:.1f} s, discover {s['discover']:.1f} s")
    for w, c in out["words"][:20]:
        print(f"  {w:12s} {c:12.0f}")
    return 0
