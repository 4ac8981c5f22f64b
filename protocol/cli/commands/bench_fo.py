"""``fedhh bench fo``: time a frequency oracle's randomisation and its estimation over
the whole domain on a synthetic Zipf(1.1) population."""
from __future__ import annotations

import argparse

from protocol.cli.commands.ldp import MECHANISMS


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "fo", "time a local-DP frequency oracle", run)
    p.add_argument("--mechanism", choices=MECHANISMS, default="olh")
    p.add_argument("--users", type=int, default=100_000)
    p.add_argument("--domain", type=int, default=1000)
    p.add_argument("--epsilon", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mechanisms.fo import OracleInputError, make_oracle
    from protocol.cli.benchutil import Timer, print_json
    from protocol.cli import UsageError
    from protocol.cli.commands.ldp import zipf_population

    try:
        oracle = make_oracle(args.mechanism, args.epsilon, args.domain)
        rng = np.random.default_rng(args.seed)
        values = zipf_population(args.users, args.domain, 1.1, rng)
    except (OracleInputError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    timer = Timer()
    with timer.phase("randomize"):
        reports = oracle.randomize(values, rng)
    with timer.phase("estimate"):
        est = oracle.estimate(reports)
    truth = np.bincount(values, minlength=args.domain) / args.users
    z = (est - truth) / np.sqrt(oracle.variance(args.users, truth))
    out = {
        "bench": "fo", "mechanism": oracle.name, "users": args.users, "domain": args.domain,
        "epsilon": args.epsilon,
        "params": {k: getattr(oracle, k) for k in ("g", "B") if hasattr(oracle, k)},
        "randomize_seconds": round(timer.seconds["randomize"], 4),
        "estimate_seconds": round(timer.seconds["estimate"], 4),
        "seconds": round(sum(timer.seconds.values()), 4),
        "max_abs_z": round(float(np.max(np.abs(z))), 3),
    }
    if args.json:
        print_json(out)
    else:
        print(f"{oracle.name}: randomize {out['randomize_seconds']} s, estimate "
              f"{out['estimate_seconds']} s, total {out['seconds']} s")
    return 0
