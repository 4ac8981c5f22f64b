"""``fedhh flower new|keys|triehh``: fedhh inside Flower (docs/flower.md; needs the
``fedhh[flower]`` extra to run an app, not to write a project or keys).

* ``fedhh flower new DIR``: a runnable Flower project (FedAvg with our secure
  aggregation, or ``--app triehh`` / ``--app triehhpp``) with the PKI of its simulated
  nodes (the TrieHH++ nodes' shared participation key included);
* ``fedhh flower keys DIR --nodes N``: a PKI for the malicious-server variant;
* ``fedhh flower triehh``: TrieHH as a Flower app, one node per user, compared with
  ``fedhh triehh``'s run of the same options and seed.
"""
from __future__ import annotations

import argparse
import sys

#: the default population of ``fedhh flower triehh`` and ``new --app triehh``: at
#: epsilon 4 Corollary 1 samples 274 users per level with theta 12, and TrieHH finds
#: ``the`` in the embedded English population (every seed of 0..9 finds one or two
#: heavy hitters; 1000 users sample 32 per level and find none)
TRIEHH_USERS = 10000


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("flower", "new", "write a runnable Flower project using fedhh", _new)
    p.add_argument("directory", help="where to write the project (created; must be empty)")
    p.add_argument("--app", choices=("fedavg", "triehh", "triehhpp"), default="fedavg",
                   help="FedAvg with our secure aggregation (default), TrieHH or TrieHH++")
    p.add_argument("--nodes", type=int, default=None,
                   help="simulated nodes (default 10 for fedavg, 10000 for triehh: one "
                        "per user, the population at which TrieHH finds heavy hitters at "
                        "epsilon 4; 1000 for triehhpp)")
    p.add_argument("--threat", choices=("malicious", "semi-honest"), default="malicious",
                   help="the threat model (malicious: a PKI is written into DIR/pki)")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory")

    p = cli.subcommand("flower", "keys", "write a PKI for fedhh's Flower nodes", _keys)
    p.add_argument("directory", help="where to write roster.json and node-<i>.key")
    p.add_argument("--nodes", type=int, required=True, help="number of node identities")
    p.add_argument("--force", action="store_true", help="replace an existing PKI")

    p = cli.subcommand("flower", "triehh",
                       "TrieHH as a Flower app (one node per user) against fedhh triehh",
                       _triehh)
    p.add_argument("--dataset", default="en", help="as fedhh triehh (default en)")
    p.add_argument("--users", type=int, default=TRIEHH_USERS,
                   help=f"population = Flower nodes (default {TRIEHH_USERS}: at epsilon 4 "
                        "TrieHH finds heavy hitters in the embedded English population; "
                        "1000 users are too few)")
    p.add_argument("--epsilon", type=float, default=4.0, help="target epsilon")
    p.add_argument("--max-length", type=int, default=10, dest="max_length")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (as fedhh triehh)")
    p.add_argument("--threat", choices=("malicious", "semi-honest"), default="malicious")
    p.add_argument("--dropout", type=float, default=0.05,
                   help="the dropout budget of both sides' policy")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: Flower's apps on fedhh's in-process grid; ray: Flower's "
                        "simulation engine")
    p.add_argument("--no-compare", action="store_true", dest="no_compare",
                   help="skip fedhh triehh's own run")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _new(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.flower.session import FlowerSecAggError, write_pki
    from protocol.flower.template import write_project

    nodes = args.nodes if args.nodes is not None else {
        "fedavg": 10, "triehh": TRIEHH_USERS, "triehhpp": 1000}[args.app]
    if nodes < 2:
        raise UsageError("--nodes must be at least 2")
    if args.app == "triehh":  # TrieHH's parameters for this population, before writing
        from protocol.studies.errors import StudyError
        from protocol.studies.runners import triehh
        from protocol.studies.runners.triehh import TrieHHOptions

        try:
            triehh.prepare(TrieHHOptions(dataset="en", users=nodes, epsilon=4.0, seed=0))
        except StudyError as exc:
            raise UsageError(f"--nodes {nodes}: {exc}") from None
    try:
        files = write_project(args.directory, app=args.app, nodes=nodes, threat=args.threat,
                              overwrite=args.force)
        keys = args.threat == "malicious" or args.app == "triehhpp"  # its participation key
        if keys:
            import pathlib

            write_pki(pathlib.Path(args.directory) / "pki", nodes, overwrite=args.force)
    except (ValueError, FlowerSecAggError, OSError) as exc:
        raise UsageError(str(exc)) from None
    private = f'flwr run . --federation-config "num-supernodes={nodes}"'
    lines = [f"wrote a {args.app} Flower project for {nodes} nodes into {args.directory} "
             f"({len(files)} files{', PKI in pki/' if keys else ''}); run it from there:"]
    if args.app == "fedavg":  # Flower's 2 local nodes host the devices secure aggregation needs
        lines.append("  flwr run .   # Flower's 2 local nodes host the devices: a try, no privacy")
    lines.append(f"  {private}   # one device a node")
    lines.append("  python run.py --local   # the same apps on fedhh's in-process grid (no Ray)")
    print("\n".join(lines))
    return 0


def _keys(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.flower.session import FlowerSecAggError, write_pki

    try:
        write_pki(args.directory, args.nodes, overwrite=args.force)
    except (FlowerSecAggError, OSError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote a PKI of {args.nodes} identities into {args.directory}")
    return 0


def _triehh(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.studies.runners.triehh import TrieHHOptions

    if args.users < 2:
        raise UsageError("--users must be at least 2")
    try:
        from protocol.flower.session import FlowerSecAggError
        from protocol.flower.triehh_app import run_app
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError(f"fedhh flower triehh needs Flower ({exc}); install fedhh[flower]") \
            from None
    opts = TrieHHOptions(dataset=args.dataset, users=args.users, epsilon=args.epsilon,
                         max_length=args.max_length, seed=args.seed,
                         transport="secagg-flower")
    try:
        out = run_app(opts, engine=args.engine, threat=args.threat,
                      compare=not args.no_compare, dropout_rate=args.dropout)
    except (FlowerSecAggError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        from protocol.cli.output import print_json

        out.pop("flower_summary", None)
        print_json(out)
        return 0
    w = sys.stdout.write
    w(f"TrieHH as a Flower app: {out['users']} nodes, {out['threat']} server, engine "
      f"{out['engine']}: {out['wall_seconds']} s\n")
    for lv in out["levels"]:
        w(f"  level {lv['level']}: {lv['in_sum']} of {lv['sampled']} sampled nodes in the "
          f"sum, {lv['wall_seconds']} s\n")
    if out["heavy_hitters"]:
        w(f"  heavy hitters: {', '.join(out['heavy_hitters'])}\n")
    else:
        w(f"  {out['none_reason']}\n")
    if "same_heavy_hitters" in out:
        w(f"  fedhh triehh (same seed): {', '.join(out['fedhh_triehh_heavy_hitters']) or '(none)'}"
          f" -> {'the same' if out['same_heavy_hitters'] else 'DIFFERENT'}\n")
    return 0
