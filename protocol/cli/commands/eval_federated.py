"""``fedhh eval federated``: repeated runs of the federated mechanisms, CSV and PNG.

Experiments (seed 004, section 7):

* ``figures``: F1 and NCR against epsilon for TAPS, TAP, FedPEM and GTF (Figures 4, 5
  and 7); writes ``federated_runs.csv``, ``federated_summary.csv``,
  ``federated_f1.png`` and ``federated_ncr.png``;
* ``extension``: TAPS with fixed extension numbers ``floor(k/2), k, 2k, 3k`` and the
  adaptive one at one epsilon (Table 5); ``federated_extension.csv``;
* ``shared``: TAPS with and without the shared shallow trie (Table 6);
  ``federated_shared.csv``;
* ``beta``: the four mechanisms on SYN with Dirichlet beta 0.2, 0.5, 0.8 (Table 8);
  ``federated_beta.csv``;
* ``all``: everything above.

Each cell is the mean over ``--runs`` runs (simulation seeds ``seed .. seed+runs-1``)
on one fixed population (``--data-seed``).
"""
from __future__ import annotations

import argparse
import csv
import pathlib

MECHS = ("taps", "tap", "fedpem", "gtf")


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("eval", "federated", "F1/NCR of TAPS, TAP, FedPEM, GTF (CSV + PNG)", run)
    p.add_argument("--experiment", choices=["figures", "extension", "shared", "beta", "all"],
                   default="figures")
    p.add_argument("--dataset", default="syn", help="syn, words or a CSV party,user,item")
    p.add_argument("--epsilons", default="1,2,3,4,5", help="comma-separated budgets")
    p.add_argument("--epsilon", type=float, default=4.0, help="budget of the table experiments")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--oracle", choices=["grr", "oue", "olh"], default="grr")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="first simulation seed")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--out", required=True, help="output directory")


def _evaluate(pop, name, cfg, runs, seed):  # noqa: ANN001, ANN202
    import numpy as np

    from mechanisms.federated import f1_at_k, local_recall, ncr
    from mechanisms.federated import run as run_mechanism

    truth = pop.true_top_k(cfg.k)
    rows = []
    for r in range(runs):
        res = run_mechanism(name, pop, cfg, np.random.default_rng(seed + r))
        up = sum(c["upload_bits"] for c in res.communication().values())
        rows.append({"f1": f1_at_k(truth, res.heavy_hitters), "ncr": ncr(truth, res.heavy_hitters),
                     "local_recall": local_recall(truth, [p.heavy_hitters for p in res.parties]),
                     "seconds": res.seconds, "upload_bits": up, "run": r})
    return rows


def _mean(rows, key):  # noqa: ANN001, ANN202
    return sum(r[key] for r in rows) / len(rows)


def _write(path: pathlib.Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _plot(path: pathlib.Path, eps: list[float], series: dict[str, list[float]], ylabel: str,
          title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    marks = {"taps": "o-", "tap": "s--", "fedpem": "^-.", "gtf": "v:"}
    for name, ys in series.items():
        ax.plot(eps, ys, marks.get(name, "o-"), label=name.upper() if name != "fedpem" else "FedPEM",
                linewidth=1.8, markersize=6)
    ax.set_xlabel("privacy budget epsilon")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(eps)
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from mechanisms.federated import FederatedConfig, FederatedError
    from protocol.cli import UsageError, output_dir
    from protocol.studies.datasets_federated import load_population

    if args.runs < 1:
        raise UsageError("--runs must be >= 1")
    try:
        eps = [float(x) for x in args.epsilons.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--epsilons must be comma-separated numbers") from None
    out = output_dir(args.out)
    try:
        base = FederatedConfig(epsilon=args.epsilon, k=args.k, oracle=args.oracle)
        pop = load_population(args.dataset, seed=args.data_seed, scale=args.scale)
        exps = ["figures", "extension", "shared", "beta"] if args.experiment == "all" else [args.experiment]
        tag = f"{args.dataset if args.dataset in ('syn', 'words') else pathlib.Path(args.dataset).stem}"
        for exp in exps:
            if exp == "figures":
                runs_rows, summary = [], []
                f1s = {m: [] for m in MECHS}
                ncrs = {m: [] for m in MECHS}
                for e in eps:
                    cfg = replace(base, epsilon=e)
                    for m in MECHS:
                        rows = _evaluate(pop, m, cfg, args.runs, args.seed)
                        for r in rows:
                            runs_rows.append([m, e, r["run"], r["f1"], r["ncr"], r["local_recall"],
                                              r["seconds"], r["upload_bits"]])
                        f1s[m].append(_mean(rows, "f1"))
                        ncrs[m].append(_mean(rows, "ncr"))
                        summary.append([m, e, _mean(rows, "f1"), _mean(rows, "ncr"),
                                        _mean(rows, "local_recall"), _mean(rows, "seconds"),
                                        _mean(rows, "upload_bits")])
                        print(f"{m:>7} eps={e:g}: F1={f1s[m][-1]:.3f} NCR={ncrs[m][-1]:.3f}", flush=True)
                _write(out / "federated_runs.csv", ["mechanism", "epsilon", "run", "f1", "ncr",
                                                    "local_recall", "seconds", "upload_bits"], runs_rows)
                _write(out / "federated_summary.csv", ["mechanism", "epsilon", "f1", "ncr", "local_recall",
                                                       "seconds", "upload_bits"], summary)
                title = f"{tag}, k={args.k}, {args.oracle.upper()}, mean of {args.runs} runs"
                _plot(out / "federated_f1.png", eps, f1s, "F1", title)
                _plot(out / "federated_ncr.png", eps, ncrs, "NCR", title)
            elif exp == "extension":
                k = args.k
                rows = []
                for label, ext in [("k/2", max(1, k // 2)), ("k", k), ("2k", 2 * k), ("3k", 3 * k),
                                   ("adaptive", "adaptive")]:
                    r = _evaluate(pop, "taps", replace(base, extension=ext), args.runs, args.seed)
                    rows.append([label, ext, _mean(r, "f1"), _mean(r, "ncr")])
                    print(f"TAPS extension {label:>8}: F1={rows[-1][2]:.3f}", flush=True)
                _write(out / "federated_extension.csv", ["extension", "t", "f1", "ncr"], rows)
            elif exp == "shared":
                rows = []
                for label, flag in [("without shared trie", False), ("with shared trie", True)]:
                    for m in ("taps", "tap"):
                        r = _evaluate(pop, m, replace(base, shared_trie=flag), args.runs, args.seed)
                        rows.append([m, label, _mean(r, "f1"), _mean(r, "ncr")])
                        print(f"{m:>5} {label}: F1={rows[-1][2]:.3f}", flush=True)
                _write(out / "federated_shared.csv", ["mechanism", "variant", "f1", "ncr"], rows)
            elif exp == "beta":
                if args.dataset != "syn":
                    raise UsageError("the beta experiment needs --dataset syn")
                rows = []
                for b in (0.2, 0.5, 0.8):
                    pb = load_population("syn", seed=args.data_seed, beta=b, scale=args.scale)
                    for m in MECHS:
                        r = _evaluate(pb, m, base, args.runs, args.seed)
                        rows.append([b, m, _mean(r, "f1"), _mean(r, "ncr"), _mean(r, "local_recall")])
                        print(f"beta={b}: {m:>7} F1={rows[-1][2]:.3f}", flush=True)
                _write(out / "federated_beta.csv", ["beta", "mechanism", "f1", "ncr", "local_recall"], rows)
    except FederatedError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {out}")
    return 0
