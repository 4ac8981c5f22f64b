"""``fedhh demo``: TrieHH over secure aggregation on the embedded English population."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command(
        "demo", "TrieHH over secure aggregation on the embedded default data", run,
        description="Discover the most frequent English words held by simulated users "
        "with TrieHH, every vote counted by SecAgg+ secure aggregation, then check the "
        "release against a plaintext trusted aggregator run with the same seed.")
    p.add_argument("--users", type=int, default=20_000,
                   help="population size (default 20000; the run takes about a minute)")
    p.add_argument("--epsilon", type=float, default=4.0, help="target epsilon (default 4)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: drawn from the OS and printed)")
    from protocol.cli.transport_options import add_threat_arg

    add_threat_arg(p, default="malicious")


def run(args: argparse.Namespace) -> int:
    from protocol.studies.demo import run_demo

    return run_demo(args)
