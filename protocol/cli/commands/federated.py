"""``fedhh federated``: one run of TAPS, TAP, FedPEM or GTF on a multi-party population."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("federated", "federated heavy hitters under LDP (TAPS, TAP, FedPEM, GTF)", run)
    p.add_argument("--mechanism", choices=["taps", "tap", "fedpem", "gtf"], default="taps")
    p.add_argument("--dataset", default="syn",
                   help="syn (Table 2 regenerated), words, or a CSV file party,user,item")
    p.add_argument("--epsilon", type=float, default=4.0, help="per-report privacy budget")
    p.add_argument("--k", type=int, default=10, help="number of heavy hitters")
    p.add_argument("--oracle", choices=["grr", "oue", "olh"], default="grr")
    p.add_argument("--levels", type=int, default=24, help="granularity g (step = 48 / g bits)")
    p.add_argument("--extension", default="adaptive",
                   help="'adaptive' (equations 2-3) or a fixed extension number t")
    p.add_argument("--no-shared-trie", action="store_true", help="skip Phase I (ablation)")
    p.add_argument("--phase-one-fraction", type=float, default=None,
                   help="share of each party's users for Phase I (default g_s/g; the paper's "
                        "section 7.1 mentions 0.1)")
    p.add_argument("--beta", type=float, default=0.5, help="SYN Dirichlet concentration")
    p.add_argument("--scale", type=float, default=1.0, help="SYN/words population scale")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the SYN generator")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def config_from_args(args: argparse.Namespace):  # noqa: ANN201
    """Build a FederatedConfig from parsed arguments (raises UsageError on bad values)."""
    from mechanisms.federated import FederatedConfig, FederatedError
    from protocol.cli import UsageError

    ext: str | int = args.extension
    if ext != "adaptive":
        try:
            ext = int(ext)
        except ValueError:
            raise UsageError("--extension must be 'adaptive' or an integer") from None
    try:
        return FederatedConfig(epsilon=args.epsilon, k=args.k, levels=args.levels,
                               oracle=args.oracle, extension=ext,
                               shared_trie=not args.no_shared_trie,
                               shared_fraction=getattr(args, "phase_one_fraction", None))
    except FederatedError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mechanisms.federated import FederatedError, f1_at_k, local_recall, ncr
    from mechanisms.federated import privacy
    from mechanisms.federated import run as run_mechanism
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError
    from protocol.studies.datasets_federated import decode_item, load_population

    cfg = config_from_args(args)
    try:
        pop = load_population(args.dataset, seed=args.data_seed, beta=args.beta, scale=args.scale)
        rng = np.random.default_rng(args.seed)
        res = run_mechanism(args.mechanism, pop, cfg, rng)
    except FederatedError as exc:
        raise UsageError(str(exc)) from None
    truth = pop.true_top_k(cfg.k)
    out = {
        "mechanism": args.mechanism, "dataset": args.dataset, "epsilon": cfg.epsilon,
        "k": cfg.k, "oracle": cfg.oracle, "parties": len(pop.parties), "users": pop.total_users,
        "f1": round(f1_at_k(truth, res.heavy_hitters), 4),
        "ncr": round(ncr(truth, res.heavy_hitters), 4),
        "local_recall": round(local_recall(truth, [p.heavy_hitters for p in res.parties]), 4),
        "max_reports_per_user": res.max_reports_per_user(),
        "seconds": round(res.seconds, 3),
        "communication": res.communication(),
        "heavy_hitters": [f"{int(x):012x}" for x in res.heavy_hitters],
        "privacy": privacy(args.mechanism, cfg).to_json(),
    }
    if args.dataset == "words" or args.dataset.endswith(".csv"):
        out["heavy_hitter_words"] = [decode_item(int(x)) for x in res.heavy_hitters]
    if args.json:
        print_json(out)
        return 0
    print(f"{out['mechanism']} on {out['dataset']}: {out['parties']} parties, {out['users']} users, "
          f"epsilon={cfg.epsilon}, k={cfg.k}, oracle={cfg.oracle}")
    print(f"F1={out['f1']}  NCR={out['ncr']}  local recall={out['local_recall']}  "
          f"time={out['seconds']} s  max reports/user={out['max_reports_per_user']}")
    print("communication per party (pairs up/down, kbit up/down):")
    for name, c in out["communication"].items():
        print(f"  {name:>10}: {c['uploaded_pairs']:6d} / {c['downloaded_pairs']:6d}   "
              f"{c['upload_bits'] / 1000:8.1f} / {c['download_bits'] / 1000:8.1f}")
    return 0
