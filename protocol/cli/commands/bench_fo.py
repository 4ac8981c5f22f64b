"""``fedhh bench fo``: time a frequency oracle's randomisation and its estimation over
the whole domain on a synthetic Zipf(1.1) population
(:func:`protocol.studies.runners.benchmarks.bench_fo`)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.studies.runners.ldp import MECHANISMS

    p = cli.subcommand("bench", "fo", "time a local-DP frequency oracle", run)
    p.add_argument("--mechanism", choices=MECHANISMS, default="olh")
    p.add_argument("--users", type=int, default=100_000)
    p.add_argument("--domain", type=int, default=1000)
    p.add_argument("--epsilon", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.output import print_json
    from protocol.studies.runners.benchmarks import bench_fo

    out = bench_fo(args.mechanism, args.users, args.domain, args.epsilon, args.seed)
    if args.json:
        print_json(out)
    else:
        print(f"{out['mechanism']}: randomize {out['randomize_seconds']} s, estimate "
              f"{out['estimate_seconds']} s, total {out['seconds']} s")
    return 0
