"""``fedhh federated``: one run of TAPS, TAP, FedPEM or GTF on a multi-party population
(:mod:`protocol.studies.runners.federated`)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("federated", "federated heavy hitters under LDP (TAPS, TAP, FedPEM, GTF)", run)
    p.add_argument("--mechanism", choices=["taps", "tap", "fedpem", "gtf"], default="taps")
    p.add_argument("--dataset", default="syn",
                   help="syn (Table 2 regenerated), regime (the hard regime, knob --own), "
                        "words, or a CSV file party,user,item")
    p.add_argument("--epsilon", type=float, default=4.0, help="per-report privacy budget")
    p.add_argument("--k", type=int, default=10, help="number of heavy hitters")
    p.add_argument("--oracle", choices=["grr", "oue", "olh"], default="grr")
    p.add_argument("--levels", type=int, default=24, help="granularity g (step = 48 / g bits)")
    p.add_argument("--extension", default="floor",
                   help="extension number rule: floor (default: equations 2-3, never below "
                        "k), adaptive (equations 2-3 as printed), k (fixed t = k) or a "
                        "fixed number t")
    p.add_argument("--no-shared-trie", action="store_true", help="skip Phase I (ablation)")
    p.add_argument("--drift", choices=["printed", "normalised", "counts", "variance"],
                   default="variance",
                   help="how the adaptive extension reads equation 3's E[x]: variance "
                        "(default: the oracle's variance in place of its standard "
                        "deviation, as the paper's analysis of the extension names it), "
                        "printed (the standard deviation, as the text under equation 3 "
                        "says), normalised (sum x Pr / sum Pr) or counts (estimates as "
                        "counts against a fraction's sigma)")
    p.add_argument("--fedpem-upload", choices=["counts", "frequencies"], default="counts",
                   dest="fedpem_upload",
                   help="what a FedPEM party uploads with its local top-k: counts "
                        "(default, the paper's section 7.1) or frequencies (the text of its "
                        "Algorithm 1: parties weighted equally)")
    p.add_argument("--phase-one-fraction", type=float, default=None,
                   help="share of each party's users for Phase I (default g_s/g; the paper's "
                        "section 7.1 mentions 0.1)")
    p.add_argument("--beta", type=float, default=0.5, help="SYN Dirichlet concentration")
    from protocol.cli.args import add_population_scale

    add_population_scale(p)
    p.add_argument("--data-seed", type=int, default=0,
                   help="seed of the SYN or regime generator")
    p.add_argument("--own", type=float, default=0.3,
                   help="regime: share of each party's users holding the party's own items "
                        "(the knob: 0 gives local recall about 1, 0.5 about 0.1)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--describe", action="store_true",
                   help="print the population's statistics (users, distinct and common "
                        "items per party; the exact local-top-k recall of the global "
                        "top-k at --k beside the paper's Table 7; for syn and regime the "
                        "generator, for syn Table 2's figures) and run nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p, help="how each party's oracle rounds are aggregated: plain "
                               "(default) or shuffler carry reports; secagg and threshold "
                               "carry support vectors (same estimates, same release)")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.federated import FederatedOptions
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners.federated import run as run_federated

    from protocol.cli.args import resolve_scale

    resolve_scale(args)
    from protocol.cli.args import refuse_unused

    tap, ext = args.mechanism in ("tap", "taps"), str(args.extension)
    refuse_unused(args, [
        ("--no-shared-trie", "no_shared_trie", False, tap,
         "skips TAP/TAPS's Phase I: it applies to --mechanism tap or taps only"),
        ("--phase-one-fraction", "phase_one_fraction", None, tap,
         "is TAP/TAPS's Phase I share: it applies to --mechanism tap or taps only"),
        ("--fedpem-upload", "fedpem_upload", "counts", args.mechanism == "fedpem",
         "is what a FedPEM party uploads: it applies to --mechanism fedpem only"),
        ("--extension", "extension", "floor", tap or ext.strip().isdigit(),
         f"{ext} does not apply to --mechanism {args.mechanism}: its local PEM extends "
         "t = k prefixes per level; give a number t, or leave it out"),
        ("--drift", "drift", "variance", tap and ext in ("floor", "adaptive"),
         "is how the adaptive extension reads equation 3: it applies to --mechanism tap "
         "or taps with --extension floor or adaptive"),
        ("--beta", "beta", 0.5, args.dataset == "syn",
         "is the SYN generator's Dirichlet concentration: it applies to --dataset syn only"),
        ("--own", "own", 0.3, args.dataset == "regime",
         "is the regime generator's knob: it applies to --dataset regime only"),
        ("--data-seed", "data_seed", 0, args.dataset in ("syn", "regime", "words"),
         "seeds the synthetic populations: it applies to --dataset syn, regime or words, "
         "not to a file"),
    ])
    if args.describe:
        return _describe(args)

    transport = transport_from_args(args)  # refuse bad options before loading data
    out = run_federated(options_from(FederatedOptions, args), transport)
    if args.json:
        print_json(out)
        return 0
    print(f"{out['mechanism']} on {out['dataset']}: {out['parties']} parties, {out['users']} users, "
          f"epsilon={out['epsilon']}, k={out['k']}, oracle={out['oracle']}, "
          f"transport={out['transport']}")
    print(f"F1={out['f1']}  NCR={out['ncr']}  local recall={out['local_recall']}  "
          f"time={out['seconds']} s  max reports/user={out['max_reports_per_user']}")
    print("communication per party (pairs up/down, kbit up/down):")
    for name, c in out["communication"].items():
        print(f"  {name:>10}: {c['uploaded_pairs']:6d} / {c['downloaded_pairs']:6d}   "
              f"{c['upload_bits'] / 1000:8.1f} / {c['download_bits'] / 1000:8.1f}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.studies.runners.federated import FederatedOptions, describe

    out = describe(options_from(FederatedOptions, args))
    if args.json:
        print_json(out)
        return 0
    syn = "paper_common" in out
    print(f"{out['dataset']}: {len(out['parties'])} parties, {out['users']:,} users, "
          f"{out['distinct']:,} distinct items, {out['common']:,} common to every party"
          + (f" (paper {out['paper_common']:,})" if syn else ""))
    loc, t7 = out["local"], out["local"]["paper_table7"]
    print(f"local recall of the global top-{loc['k']} in each party's exact top-{loc['k']}: "
          f"{loc['local_recall']:.3f} (mean over parties); paper, Table 7 (SYN, epsilon 4, "
          f"k 10, under LDP): FedPEM {t7['fedpem']}, GTF {t7['gtf']}, TAPS {t7['taps']}")
    print(f"summing the parties' exact top-{loc['k']} counts finds the global top-{loc['k']} "
          f"with F1 {loc['sum_of_local_top_k_f1']:.2f}; {100 * loc['global_in_some_local']:.0f}% "
          "of it is in some party's top-k")
    if out["dataset"] == "regime":
        g = out["generator"]
        print("generator: " + ", ".join(f"{k} {v}" for k, v in g.items()))
    if syn:
        g = out["generator"]
        print(f"generator: seed {g['seed']}, Dirichlet beta {g['beta']}, scale {g['scale']}, "
              f"{g['groups']} groups of {g['group_size']} items, {g['common']} common items, "
              f"taste {g['taste']}, {g['bits']}-bit items ({out['source']})")
        print(f"  {'party':<6} {'law':<13} {'users':>9} {'paper':>9} {'distinct':>9} "
              f"{'paper':>7} {'diff':>7}")
        for r in out["parties"]:
            print(f"  {r['name']:<6} {r['law']:<13} {r['users']:>9,} {r['paper_users']:>9,} "
                  f"{r['distinct']:>9,} {r['paper_distinct']:>7,} "
                  f"{100 * r['distinct_vs_paper']:>6.1f}%")
    else:
        for r in out["parties"]:
            print(f"  {r['name']:<12} users {r['users']:>9,}  distinct {r['distinct']:>9,}")
    return 0
