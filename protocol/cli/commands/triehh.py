"""``fedhh triehh``: run TrieHH (Zhu et al. 2020) on a dataset over a transport
(:mod:`protocol.studies.runners.triehh`)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_triehh_args

    p = cli.command("triehh", "discover heavy hitters with TrieHH (Zhu et al. 2020)", run,
                    description="Run TrieHH: sampled users vote on prefix extensions; "
                    "prefixes with at least theta votes grow the trie. theta and gamma "
                    "come from Corollary 1 for the target (epsilon, delta).")
    add_triehh_args(p)
    p.add_argument("--show", type=int, default=30,
                   help="heavy hitters to list in the human-readable output (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import ClientProgress, print_json, print_triehh, progress_bar, say
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners import triehh

    transport = transport_from_args(args)  # refuse bad options before loading data
    opts = options_from(triehh.TrieHHOptions, args)
    chatty = not args.quiet
    out = triehh.run(opts, transport,
                     progress_bar(opts.max_length, "TrieHH rounds",
                                  enabled=chatty and not args.json),
                     client_progress=ClientProgress(enabled=chatty), say=say(chatty))
    if args.json:
        print_json(out)
    else:
        print_triehh(out, args.show)
    return 0
