"""``fedhh eval compare``: TrieHH against Apple's SFP, in the style of Zhu et al. (2020),
Table 2 and Figure 5 (:mod:`protocol.studies.runners.compare`, whose docstring says what
is compared and which files are written)."""
from __future__ import annotations

import argparse
import math
import pathlib
import sys


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("eval", "compare", "TrieHH vs SFP (T = 20, 80): recall, precision, "
                       "F1 at K (Table 2 / Figure 5 of Zhu et al.)", run)
    p.add_argument("--dataset", default="en-oov",
                   help="en-oov (default), en, zipf, zipf32 or PATH")
    p.add_argument("--users", type=str, default="200000",
                   help="population size (default 2e5); with --mechanisms triehh,poplar1 a "
                        "comma-separated list (e.g. 10000,100000,1000000)")
    p.add_argument("--epsilons", default="1,4", help="central epsilons (default 1,4)")
    p.add_argument("--runs", type=int, default=None,
                   help="runs per setting (default 10; 1 with --mechanisms triehh,poplar1)")
    p.add_argument("--Ts", default="20,80", help="SFP thresholds T (default 20,80)")
    p.add_argument("--hash-filter", action="store_true", dest="hash_filter",
                   help="also run SFP with the word-hash filter (not in Apple's algorithm) "
                        "on the same reports, rows sfp_T<T>_filter")
    p.add_argument("--k", type=int, default=50, help="K of recall at K (default 50)")
    p.add_argument("--kmax", type=int, default=100, help="largest K of F1 at K (default 100)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="TrieHH's L (default 10, SFP's word length)")
    p.add_argument("--out", default=None,
                   help="output directory (created if missing; required unless --markdown)")
    p.add_argument("--markdown", default=None, metavar="SUMMARY",
                   help="instead, print the equal-privacy table of a saved summary.json "
                        "(of --mechanisms triehh,poplar1) and write its table.md and "
                        "tradeoff.png beside it again")
    p.add_argument("--seed", type=int, default=None, help="simulation seed")
    from protocol.cli.args import add_alphabet_args, add_quiet_arg

    add_quiet_arg(p)
    add_alphabet_args(p)
    p.add_argument("--resume", action="store_true",
                   help="continue from the runs already in OUT/runs.jsonl (same options and "
                        "--seed); every run is appended there as it finishes")
    p.add_argument("--mechanisms", default=None,
                   help="triehh,poplar1: instead, TrieHH and Poplar1 at equal privacy (every "
                        "--dataset, --users and --epsilons value; recall/precision at --k and "
                        "over the release, bytes, CPU per party, what each party learns; "
                        "table.md, summary.json, tradeoff.png)")
    p.add_argument("--poplar1-mode", choices=("sampled", "plain"), default="sampled",
                   dest="poplar1_mode",
                   help="with --mechanisms: sampled (default: TrieHH's sample size m and "
                        "threshold theta per character, so both carry Theorem 1's (epsilon, "
                        "delta)) or plain (the draft's search over every report, no DP, at "
                        "--threshold; the first --epsilons value for TrieHH)")
    p.add_argument("--threshold", type=int, default=None,
                   help="with --poplar1-mode plain: Poplar1's threshold (default "
                        "max(2, ceil(n/(20K))))")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _floats(text: str, name: str) -> list[float]:
    from protocol.cli import UsageError

    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{name} must be a comma-separated list of numbers") from None
    if not vals or any(not (math.isfinite(v) and v > 0) for v in vals):
        raise UsageError(f"{name} must list positive numbers")
    return vals


def _markdown(path: str) -> int:
    import json

    from protocol.cli import UsageError
    from protocol.studies.runners.compare import equal_privacy_table, tradeoff_plot

    src = pathlib.Path(path)
    try:
        summary = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--markdown: cannot read {path}: {exc}") from None
    if not isinstance(summary, dict) or summary.get("mode") != "equal privacy":
        raise UsageError(f"--markdown: {path} is not the summary.json of an equal-privacy "
                         "comparison")
    lines = equal_privacy_table(summary)
    (src.parent / "table.md").write_text("\n".join(lines) + "\n")
    if summary["rows"]:
        tradeoff_plot(summary, src.parent / "tradeoff.png")
    print("\n".join(lines))
    return 0


def _ints(text: str, name: str) -> list[int]:
    from protocol.cli import UsageError, count

    try:
        vals = [count(x.strip()) for x in str(text).split(",") if x.strip()]
    except argparse.ArgumentTypeError:
        raise UsageError(f"{name} must be a comma-separated list of whole numbers") from None
    if not vals or any(v < 2 for v in vals):
        raise UsageError(f"{name} must list integers >= 2")
    return vals


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.compare import CompareOptions, compare

    if args.markdown is not None:
        return _markdown(args.markdown)
    if args.out is None:
        raise UsageError("--out is required")
    mechs = None if args.mechanisms is None else tuple(
        m.strip() for m in args.mechanisms.split(",") if m.strip())
    users = _ints(args.users, "--users")
    if mechs is None and len(users) != 1:
        raise UsageError("--users takes one value without --mechanisms")
    opts = options_from(CompareOptions, args, epsilons=_floats(args.epsilons, "--epsilons"),
                        Ts=_floats(args.Ts, "--Ts"), mechanisms=mechs,
                        users=users[0] if mechs is None else users)
    summary, lines = compare(opts, (lambda msg: None) if args.quiet
                             else (lambda msg: print(msg, file=sys.stderr)),
                             estimate=not args.quiet)
    if args.json:
        print_json(summary)
    else:
        print("\n".join(lines))
        print(f"written to {pathlib.Path(args.out)} in {summary['seconds']:.0f} s")
    return 0
