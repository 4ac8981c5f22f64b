"""``fedhh helper``: a helper of the thresholding committee (``fedhh serve --transport
threshold``).

Helper ``--index 1`` or ``2`` joins the round's secure-aggregation session as the
position after the clients (``--clients`` and ``--clients`` + 1), inputs a blinding
vector (under the malicious default derived, with its whole client, from a seed it
hands its auditor), and then runs the three-party comparison with the server and the
other helper. The link between the helpers is its
own TLS connection at ``--link HOST:PORT`` (helper 2 listens there, helper 1 connects),
each end pinning the other's certificate from ``--keys`` (``fedhh keys --committee``).
Prints one JSON line: what was opened (only what passed the threshold). The round's
options must be the server's. See docs/network.md.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import (
        add_session_args, add_shuffle_round_args, host_port, listen_address,
    )

    p = cli.command("helper", "run a helper of the thresholding committee", run)
    p.add_argument("--index", type=int, choices=(1, 2), required=True, help="helper 1 or 2")
    p.add_argument("--keys", required=True,
                   help="directory from 'fedhh keys --committee' (server.crt pinned, the "
                        "roster, signing keys, the helpers' certificates)")
    p.add_argument("--connect", type=host_port, required=True, help="server HOST:PORT")
    p.add_argument("--link", type=listen_address, required=True,
                   help="the helpers' link: helper 2 listens on HOST:PORT, helper 1 "
                        "connects to it")
    p.add_argument("--wait-seconds", type=float, default=300.0, dest="wait_seconds",
                   help="give up when a peer is silent this long (default 300)")
    p.add_argument("--fault", default=None,
                   choices=("shift-blind", "other-seed", "other-blind"),
                   help="make this helper deviate (malicious model; for fault tests): "
                        "shift its share, hand its auditor another seed, or enter another "
                        "blinding vector")
    add_session_args(p)
    add_shuffle_round_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import threshold_round_from_args
    from protocol.core.net.processes import helper_process

    rnd = threshold_round_from_args(args)
    if args.fault is not None and not rnd.verified:
        raise UsageError("--fault needs the malicious model (--threat malicious)")
    host, port = args.connect
    if args.index == 1 and args.link[1] == 0:
        raise UsageError("helper 1 needs helper 2's --link port")
    try:
        result = helper_process(args.index, rnd, args.keys, host, port, args.link,
                                wait_seconds=args.wait_seconds, fault=args.fault)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    return exit_status(result["status"] == "completed", result, f"helper {args.index}")
