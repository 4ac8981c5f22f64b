"""``fedhh demo``: the main job on the embedded default."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("demo", "run the main job on the embedded default data", run)
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")


def run(args: argparse.Namespace) -> int:
    from protocol.demo_impl import run_demo

    return run_demo(args)
