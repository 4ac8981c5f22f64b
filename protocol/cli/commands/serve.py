"""``fedhh serve``: a secure-aggregation server process (TLS 1.3, per-stage deadlines).

Listens on ``--host``/``--port`` (``--port 0``: any free port, printed in the first
event), runs ``--sessions`` sessions one after the other and prints one JSON line per
event (``listening``, ``session``, ``joined``, ``stage``, ``done``, ``report``). Clients
that are late past ``--stage-seconds`` or silent are dropouts. See docs/network.md.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import add_server_args, add_session_args

    p = cli.command("serve", "run a secure-aggregation server process", run)
    p.add_argument("--transport", choices=("secagg",), default="secagg",
                   help="the transport to serve (secure aggregation)")
    p.add_argument("--keys", required=True, help="directory made by 'fedhh keys'")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8443, help="port (0: any free one)")
    add_server_args(p)
    add_session_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import spec_from_args
    from protocol.core.net.processes import serve_process

    spec = spec_from_args(args)
    if args.sessions < 1:
        raise UsageError("--sessions must be at least 1")
    try:
        reports = serve_process(spec, args.keys, host=args.host, port=args.port,
                                sessions=args.sessions, stage_seconds=args.stage_seconds,
                                join_seconds=args.join_seconds)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise UsageError(str(exc)) from None
    return 0 if all(r["status"] == "completed" for r in reports) else 1
