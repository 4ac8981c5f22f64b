"""``fedhh demo``: TrieHH over the thresholding committee (secure aggregation, then a
secure comparison by the server and two helpers) on the embedded English population
(:mod:`protocol.studies.runners.demo`)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command(
        "demo", "TrieHH over secure aggregation and a thresholding committee on the "
        "embedded default data", run,
        description="Discover the most frequent English words held by simulated users "
        "with TrieHH, every vote counted by SecAgg+ secure aggregation into a committee "
        "(the server and two helpers) that opens only which prefixes reach theta; print "
        "what each party learned, read from the recorded views; then check the release "
        "against a plaintext trusted aggregator run with the same seed.")
    p.add_argument("--users", type=int, default=20_000,
                   help="population size (default 20000; the run takes about a minute)")
    p.add_argument("--epsilon", type=float, default=4.0, help="target epsilon (default 4)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: drawn from the OS and printed)")
    from protocol.cli.transport_options import add_committee_args, add_corrupt_args, \
        add_threat_arg

    add_threat_arg(p, default="malicious")
    add_committee_args(p)
    add_corrupt_args(p)
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    import secrets
    import sys
    import textwrap

    from protocol.cli import UsageError
    from protocol.cli.output import print_triehh, progress_bar, say
    from protocol.studies.runners.demo import run_demo

    from protocol.cli.transport_options import corrupt_from_args

    if args.users < 100:
        raise UsageError("--users must be at least 100")
    semi = args.threat == "semi-honest"
    if semi and args.committee_input == "reports":
        raise UsageError("--committee-input reports needs --threat malicious: the "
                         "semi-honest committee takes a secure-aggregation sum")
    validated = not semi and args.committee_input != "secagg"
    if args.min_valid_fraction is not None and not validated:
        raise UsageError("--min-valid-fraction applies to the committee's validated reports "
                         "(--committee-input reports, --threat malicious)")
    corrupt = corrupt_from_args(args, "threshold", {
        "threat": args.threat, "committee_input": "reports" if validated else "secagg"})
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    w = sys.stdout.write
    if validated:
        how = ("validated reports (each device's vote secret-shared among the server and 2 "
               "helpers, checked one-hot-or-zero on the shares) into a thresholding "
               "committee")
    else:
        how = (f"SecAgg+ secure aggregation ({args.threat} server) into a thresholding "
               "committee (server + 2 helpers)")
    w(f"fedhh demo (seed {seed}): TrieHH over {how}, {args.users:,} simulated users "
      f"holding English words\n\n")
    res = run_demo(args.users, args.epsilon, seed,
                   progress_bar(10, "TrieHH rounds", enabled=not args.quiet),
                   threat=args.threat, say=say(not args.quiet),
                   committee_input=args.committee_input,
                   min_valid_fraction=args.min_valid_fraction, corrupt=corrupt)
    print_triehh(res["threshold"], show=20)
    w("\nwhat each party learned (from the recorded views):\n")
    for line in res["learned"]:
        w(f"  {line}\n")
    label = "validated reports: " if res["input"] == "reports" else "secure aggregation: "
    w(textwrap.fill(label + res["guarantee"], 88, initial_indent="  ",
                    subsequent_indent="    ") + "\n")
    reference = ("the honest clients' votes alone (a plaintext trusted aggregator asking "
                 "the same sampled users, the corrupted ones abstaining)" if corrupt
                 else "a plaintext trusted aggregator asking the same sampled users")
    w(f"  check: {reference} releases "
      f"{'the same' if res['same'] else 'a DIFFERENT'} trie "
      f"({res['plain_heavy_hitters']} heavy hitters, {res['plain_prefixes']} prefixes)\n")
    if not res["same"] and corrupt is None:
        print("fedhh demo: the committee's release differs from the plaintext "
              "reference", file=sys.stderr)
        return 1
    return 0
