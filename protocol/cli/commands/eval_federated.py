"""``fedhh eval federated``: repeated runs of the federated mechanisms, CSV and PNG
(:func:`protocol.studies.runners.federated.experiments`, whose docstring lists the
experiments and their files)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("eval", "federated", "F1/NCR of TAPS, TAP, FedPEM, GTF (CSV + PNG)", run)
    p.add_argument("--experiment",
                   choices=["figures", "extension", "shared", "beta", "readings", "all"],
                   default="figures")
    p.add_argument("--dataset", default="syn", help="syn, words or a CSV party,user,item")
    p.add_argument("--epsilons", default="1,2,3,4,5", help="comma-separated budgets")
    p.add_argument("--epsilon", type=float, default=4.0, help="budget of the table experiments")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--oracle", choices=["grr", "oue", "olh"], default="grr")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="first simulation seed")
    p.add_argument("--data-seed", type=int, default=0)
    from protocol.cli.args import add_population_scale

    add_population_scale(p)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs OUT/runs.jsonl already holds (same options) and run "
                        "only the others")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.args import resolve_scale

    resolve_scale(args)
    from protocol.cli.output import say
    from protocol.studies.runners.federated import experiments

    try:
        eps = [float(x) for x in args.epsilons.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--epsilons must be comma-separated numbers") from None
    out = experiments(args.out, experiment=args.experiment, dataset=args.dataset,
                      epsilons=eps, epsilon=args.epsilon, k=args.k, oracle=args.oracle,
                      runs=args.runs, seed=args.seed, data_seed=args.data_seed,
                      scale=args.scale, resume=args.resume, verbose=not args.quiet,
                      say=say(not args.quiet))
    print(f"wrote {out}")
    return 0
