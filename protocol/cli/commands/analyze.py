"""``fedhh analyze``: the analyzer of a shuffled round (``fedhh serve --transport
shuffler``).

Connects to the shuffler at ``--connect HOST:PORT`` (pinning the certificate in
``--keys``), receives the thresholded, shuffled batch of the round the options name,
opens it with ``analyzer.x25519`` and prints the release (candidate counts, or which
candidates passed with ``--membership-only``) as one JSON line. It never learns who
sent what, nor anything about the crowds below the threshold. See docs/network.md.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli import count
    from protocol.cli.net_args import add_shuffle_round_args, host_port

    p = cli.command("analyze", "receive and open a shuffled batch (the analyzer)", run)
    p.add_argument("--keys", required=True,
                   help="directory with server.crt (pinned), analyzer.x25519 and "
                        "shuffle-public.json")
    p.add_argument("--connect", type=host_port, required=True, help="shuffler HOST:PORT")
    p.add_argument("--clients", type=count, required=True, help="clients in the round")
    p.add_argument("--wait-seconds", type=float, default=300.0, dest="wait_seconds",
                   help="give up when the shuffler is silent this long (default 300)")
    add_shuffle_round_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import shuffle_round_from_args
    from protocol.core.net.processes import analyzer_process

    rnd = shuffle_round_from_args(args)
    host, port = args.connect
    try:
        result = analyzer_process(rnd, args.keys, host, port, wait_seconds=args.wait_seconds)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    return exit_status(result["status"] == "completed", result, f"the analyzer of {host}:{port}")
