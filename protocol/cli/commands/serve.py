"""``fedhh serve``: a secure-aggregation server or a shuffler process (TLS 1.3).

Listens on ``--host``/``--port`` (``--port 0``: any free port, printed in the first
event) and prints one JSON line per event. ``--transport secagg`` (the default) runs
``--sessions`` sessions one after the other (events ``listening``, ``session``,
``joined``, ``stage``, ``done``, ``report``); clients that are late past
``--stage-seconds`` or silent are dropouts. ``--transport shuffler`` is the shuffler of
one batch (:mod:`protocol.core.net.shuffle`): clients send one envelope each until all
``--clients`` have or ``--batch-seconds`` passed, then the thresholded, shuffled batch
goes to the analyzer (``fedhh analyze``). ``--transport threshold`` runs one vote
round into the thresholding committee: a secure-aggregation session of the
``--clients`` clients and the two helpers (``fedhh helper``), then the three-party
comparison; the report holds only what passed the threshold. See docs/network.md.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import add_server_args, add_session_args, add_shuffle_round_args

    p = cli.command("serve", "run a secure-aggregation server or a shuffler process", run)
    p.add_argument("--transport", choices=("secagg", "shuffler", "threshold"), default="secagg",
                   help="the transport to serve (default secagg; threshold: one vote round "
                        "into the thresholding committee, with 'fedhh helper' processes)")
    p.add_argument("--keys", required=True, help="directory made by 'fedhh keys'")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8443, help="port (0: any free one)")
    add_server_args(p)
    p.add_argument("--batch-seconds", type=float, default=60.0, dest="batch_seconds",
                   help="shuffler: how long the batch stays open (default 60)")
    p.add_argument("--fault", default=None, choices=("shift-sum",),
                   help="threshold, malicious model (for fault tests): the server computes "
                        "with its blinded sum shifted and skips its own check")
    add_session_args(p)
    add_shuffle_round_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import spec_from_args
    from protocol.core.net.processes import serve_process

    if args.transport == "shuffler":
        return _serve_shuffler(args)
    if args.transport == "threshold":
        return _serve_threshold(args)
    if args.fault is not None:
        raise UsageError("--fault applies to --transport threshold")
    spec = spec_from_args(args)
    if args.sessions < 1:
        raise UsageError("--sessions must be at least 1")
    try:
        reports = serve_process(spec, args.keys, host=args.host, port=args.port,
                                sessions=args.sessions, stage_seconds=args.stage_seconds,
                                join_seconds=args.join_seconds)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    failed = next((r for r in reports if r["status"] != "completed"), {})
    return exit_status(not failed, failed, f"the server at {args.host}:{args.port}")


def _serve_shuffler(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import resolve_shuffler_session_args, shuffle_round_from_args
    from protocol.core.net.processes import shuffler_serve_process

    resolve_shuffler_session_args(args)
    if args.sessions != 1:
        raise UsageError("--sessions applies to secure aggregation; the shuffler serves one "
                         "batch")
    rnd = shuffle_round_from_args(args)
    try:
        report = shuffler_serve_process(rnd, args.keys, host=args.host, port=args.port,
                                        batch_seconds=args.batch_seconds,
                                        stage_seconds=args.stage_seconds)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    return exit_status(report["status"] == "completed", report, "the shuffler")


def _serve_threshold(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import threshold_round_from_args
    from protocol.core.net.processes import threshold_serve_process

    if args.sessions != 1:
        raise UsageError("--sessions: the committee serves one round")
    rnd = threshold_round_from_args(args)
    if args.fault is not None and not rnd.verified:
        raise UsageError("--fault needs the malicious model (--threat malicious)")
    try:
        report = threshold_serve_process(rnd, args.keys, host=args.host, port=args.port,
                                         stage_seconds=args.stage_seconds,
                                         join_seconds=args.join_seconds, fault=args.fault)
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    return exit_status(report["status"] == "completed", report, "the committee's server")
