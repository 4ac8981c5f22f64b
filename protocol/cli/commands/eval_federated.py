"""``fedhh eval federated``: repeated runs of the federated mechanisms, CSV and PNG
(:func:`protocol.studies.runners.federated.experiments`, whose docstring lists the
experiments and their files)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("eval", "federated", "F1/NCR of TAPS, TAP, FedPEM, GTF (CSV + PNG)", run)
    p.add_argument("--experiment",
                   choices=["figures", "extension", "shared", "beta", "readings", "all",
                            "regime"],
                   default="figures",
                   help="regime: the map of where each method wins, over the hard-regime "
                        "generator's knob (not part of all)")
    p.add_argument("--dataset", default="syn", help="syn, words or a CSV party,user,item")
    p.add_argument("--epsilons", default=None,
                   help="comma-separated budgets (default 1,2,3,4,5; the regime map 1,2,4)")
    p.add_argument("--ks", default="10,20", help="regime map: comma-separated k")
    p.add_argument("--owns", default=None,
                   help="regime map: comma-separated knob values (the share of a party's "
                        "users holding its own items; default 0,0.25,0.5)")
    p.add_argument("--rules", default="adaptive,floor,k",
                   help="regime map: extension rules for TAPS (adaptive: equations "
                        "2-3 as printed; floor: never below k; k: fixed t = k)")
    p.add_argument("--tap-rules", default="adaptive,floor", dest="tap_rules",
                   help="regime map: extension rules for TAP (default adaptive,floor)")
    p.add_argument("--extension", default=None,
                   help="extension rule of TAP and TAPS in the SYN experiments: floor (the "
                        "default), adaptive (equations 2-3 as printed), k or a number")
    p.add_argument("--jobs", type=int, default=1,
                   help="regime map: worker processes (the result does not depend on it)")
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
    from protocol.cli.args import resolve_scale

    resolve_scale(args)
    from protocol.cli.output import say
    from protocol.studies.runners.federated import experiments

    regime = args.experiment == "regime"
    eps_text = args.epsilons or ("1,2,4" if regime else "1,2,3,4,5")
    eps = _numbers(eps_text, float, "--epsilons")
    ks = _numbers(args.ks, int, "--ks")
    owns = _numbers(args.owns, float, "--owns") if args.owns else None
    rules = [x.strip() for x in args.rules.split(",") if x.strip()]
    tap_rules = [x.strip() for x in args.tap_rules.split(",") if x.strip()]
    out = experiments(args.out, experiment=args.experiment, dataset=args.dataset,
                      epsilons=eps, epsilon=args.epsilon, k=args.k, oracle=args.oracle,
                      runs=args.runs, seed=args.seed, data_seed=args.data_seed,
                      scale=args.scale, resume=args.resume, verbose=not args.quiet,
                      say=say(not args.quiet), ks=ks, owns=owns, rules=rules,
                      tap_rules=tap_rules, jobs=args.jobs, extension=args.extension)
    if regime:
        print((out / "federated_regime.md").read_text())
    print(f"wrote {out}")
    return 0


def _numbers(text: str, kind, flag: str) -> list:  # noqa: ANN001
    from protocol.cli import UsageError

    try:
        vals = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated numbers") from None
    if not vals:
        raise UsageError(f"{flag} is empty")
    return vals
