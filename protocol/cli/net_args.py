"""Options shared by the network commands (``fedhh serve``, ``fedhh client``,
``fedhh net run``): the session both sides derive their parameters from."""
from __future__ import annotations

import argparse

from protocol.cli import count

__all__ = ["add_session_args", "add_server_args", "spec_from_args", "host_port"]


def add_session_args(p: argparse.ArgumentParser) -> None:
    from protocol.cli.transport_options import add_threat_arg

    g = p.add_argument_group("session (server and clients must give the same)")
    g.add_argument("--clients", type=count, default=100, help="roster size n (default 100)")
    g.add_argument("--dim", type=count, default=1000, help="vector length (default 1000)")
    g.add_argument("--modulus", type=count, default=1 << 32, help="modulus R (default 2^32)")
    g.add_argument("--graph", choices=("harary", "complete"), default="harary",
                   help="SecAgg+ Harary graph (default) or the complete graph")
    g.add_argument("--label", default="fedhh network session",
                   help="the session's label (its context is SHA-256 of it)")
    g.add_argument("--dropout-rate", type=float, default=0.0, dest="dropout_rate",
                   help="the fraction of dropouts the parameters must tolerate (delta; at "
                        "least the default of secagg.params)")
    add_threat_arg(g, default="malicious")


def add_server_args(p: argparse.ArgumentParser) -> None:
    """``--sessions``, ``--stage-seconds``, ``--join-seconds`` (the server's schedule)."""
    p.add_argument("--sessions", type=int, default=1, help="sessions in a row (default 1)")
    p.add_argument("--stage-seconds", type=float, default=60.0, dest="stage_seconds",
                   help="the server's per-stage deadline (default 60)")
    p.add_argument("--join-seconds", type=float, default=60.0, dest="join_seconds",
                   help="how long a session waits for all its clients (default 60)")


def spec_from_args(args: argparse.Namespace):  # noqa: ANN201
    from protocol.cli import UsageError
    from protocol.core.net.session import NetSessionSpec

    try:
        return NetSessionSpec(args.clients, dim=args.dim, modulus=args.modulus,
                              threat=args.threat, graph=args.graph, label=args.label,
                              dropout=args.dropout_rate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)
