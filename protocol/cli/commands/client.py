"""``fedhh client``: one process running many secure-aggregation clients.

Runs the clients ``--ids A:B`` (roster positions A..B-1) of one session as asyncio
tasks, each with its own TLS connection to ``--connect HOST:PORT``, pinning the
certificate in ``--keys``. Inputs are the seeded experiment's (``--seed``). Prints one
JSON line: the clients' outcomes, bytes and CPU. ``--stall`` / ``--stall-at`` make the
named clients hang before that round's message (a fault for experiments).
"""
from __future__ import annotations

import argparse


def _ids(text: str) -> range:
    a, sep, b = text.partition(":")
    if not sep or not a.isdigit() or not b.isdigit() or int(a) >= int(b):
        raise argparse.ArgumentTypeError(f"expected A:B with A < B, got {text!r}")
    return range(int(a), int(b))


def _list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ids, got {text!r}") from None


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import add_session_args, host_port

    p = cli.command("client", "run secure-aggregation clients as network peers", run)
    p.add_argument("--transport", choices=("secagg",), default="secagg",
                   help="the transport (secure aggregation)")
    p.add_argument("--keys", required=True,
                   help="directory with server.crt (pinned), roster.json, signing.keys")
    p.add_argument("--connect", type=host_port, required=True, help="server HOST:PORT")
    p.add_argument("--ids", type=_ids, default=None,
                   help="roster positions A:B to run (default: all of them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the experiment's inputs")
    p.add_argument("--wait-seconds", type=float, default=300.0, dest="wait_seconds",
                   help="give up when the server is silent this long (default 300)")
    p.add_argument("--stall", type=_list, default=[], help="clients that hang (fault)")
    p.add_argument("--stall-at", type=int, choices=range(5), default=None, dest="stall_at",
                   help="the round before which --stall clients hang")
    add_session_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import spec_from_args
    from protocol.core.net.processes import client_process

    spec = spec_from_args(args)
    if args.stall and args.stall_at is None:
        raise UsageError("--stall needs --stall-at")
    host, port = args.connect
    ids = args.ids if args.ids is not None else range(spec.n)
    try:
        summary = client_process(spec, args.keys, host, port, ids, seed=args.seed,
                                 wait_seconds=args.wait_seconds, stall=args.stall,
                                 stall_at=args.stall_at)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return 0 if set(summary["status"]) <= {"completed", "stalled"} else 1
