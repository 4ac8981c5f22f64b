"""``fedhh eval triehh``: repeated TrieHH runs, CSV results and plots.

Writes into ``--out DIR``:

* ``discovery.csv``: one row per run and per word (the ``--csv-top`` most frequent
  words plus every discovered word): true rank, holders, true frequency, whether it
  was discovered, its released count, and the Proposition 1 worst-case bound;
* ``metrics.csv``: precision, recall and F1 at K for every run and K = 1..``--kmax``;
* ``summary.json``: parameters, guarantee, mean metrics at K = 10, 50, 100 and the
  checks (every released word occurs; words with a worst-case rate >= 0.9 found);
* ``discovery.png`` (Figure 3 style) and ``recall.png`` (Figure 4 style).

The population is drawn once (from ``--seed``); the runs use independent streams.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.commands.triehh import add_common_args

    p = cli.subcommand("eval", "triehh", "repeat TrieHH runs; write CSV results and plots", run)
    add_common_args(p)
    p.add_argument("--runs", type=int, default=10, help="number of runs (default 10)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--csv-top", type=int, default=2000, dest="csv_top",
                   help="most frequent words written per run (default 2000)")
    p.add_argument("--kmax", type=int, default=200, help="largest K for recall at K (default 200)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mechanisms.triehh_privacy import discovery_rate
    from protocol.cli.benchutil import print_json, progress
    from protocol.cli import UsageError, output_dir
    from protocol.cli.commands.triehh import prepare, run_once
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.evaluation import (
        plot_discovery_rate, plot_recall_at_k, precision, topk_metrics,
    )

    if args.runs < 1:
        raise UsageError("--runs must be >= 1")
    if args.kmax < 1 or args.csv_top < 1:
        raise UsageError("--kmax and --csv-top must be >= 1")
    out_dir = output_dir(args.out)

    transport = transport_from_args(args)  # refuse bad options before loading data
    prep, run_rng = prepare(args)
    pop = prep.population
    n, theta, L = prep.n, int(prep.config.theta), int(prep.config.max_levels)
    ranking = pop.ranking()
    truth = [pop.vocabulary[i] for i in ranking]
    words_in_pop = set(truth)
    freq = pop.frequency()
    holders = pop.holders()
    single = prep.data.one_per_user
    U = prep.alphabet.unit_size

    results = []
    seconds = []
    for rng in progress(run_rng.spawn(args.runs), total=args.runs, desc="runs",
                        enabled=not args.json):
        t0 = time.perf_counter()
        results.append(run_once(prep, transport, rng, show_progress=False))
        seconds.append(time.perf_counter() - t0)
    m = results[0].m

    def bound_for(word_ids: np.ndarray) -> np.ndarray:
        if not single:
            return np.full(word_ids.size, np.nan)
        lengths = np.array([len(pop.vocabulary[i]) for i in word_ids])
        fits = (lengths + U) // U <= L
        b = np.asarray(discovery_rate(holders[word_ids], n, m, theta, L), dtype=float)
        return np.where(fits, b, 0.0)

    index = {w: i for i, w in enumerate(pop.vocabulary)}
    top_ids = ranking[:args.csv_top]
    rank_pos = {int(w): r + 1 for r, w in enumerate(ranking)}
    extra = sorted({w for r in results for w in r.heavy_hitters if w in index}
                   - {pop.vocabulary[i] for i in top_ids})
    ids = np.concatenate([top_ids, np.array([index[w] for w in extra], dtype=np.int64)])
    bounds = bound_for(ids)
    found = np.array([[pop.vocabulary[i] in r.heavy_hitters for i in ids] for r in results])
    with open(out_dir / "discovery.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["run", "word", "true_rank", "holders", "true_frequency", "discovered",
                     "released_count", "prop1_bound"])
        for r_i, res in enumerate(results):
            for j, wid in enumerate(ids):
                word = pop.vocabulary[wid]
                wr.writerow([r_i, word, rank_pos.get(int(wid), ""), int(holders[wid]),
                             f"{freq[wid]:.6g}", int(found[r_i, j]),
                             _count(res.heavy_hitters.get(word)),
                             "" if math.isnan(bounds[j]) else f"{bounds[j]:.6g}"])
            for word in res.heavy_hitters:  # released words absent from the population
                if word not in index:
                    wr.writerow([r_i, word, "", 0, 0, 1, _count(res.heavy_hitters[word]), ""])

    ks = np.arange(1, args.kmax + 1)
    rec = np.zeros((len(results), ks.size))
    f1 = np.zeros_like(rec)
    prec = np.zeros_like(rec)
    with open(out_dir / "metrics.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["run", "k", "precision", "recall", "f1"])
        for r_i, res in enumerate(results):
            for j, k in enumerate(ks):
                mt = topk_metrics(res.heavy_hitters, truth, int(k))
                prec[r_i, j], rec[r_i, j], f1[r_i, j] = mt.precision, mt.recall, mt.f1
                wr.writerow([r_i, int(k), f"{mt.precision:.6g}", f"{mt.recall:.6g}",
                             f"{mt.f1:.6g}"])

    rate = found.mean(axis=0)
    g = results[0].guarantee
    title = (f"TrieHH on {pop.name}, n={n:,}, eps={g.epsilon:.2f}, theta={theta}, m={m}, "
             f"L={L}, U={U}, {args.runs} runs" if g else f"TrieHH on {pop.name}, n={n:,}")
    top_mask = np.arange(ids.size) < top_ids.size
    fr = freq[ids][top_mask]
    if single and fr.size:
        grid = np.logspace(math.log10(max(fr.min(), 1.0 / n)), math.log10(fr.max()), 200)
        curve = np.asarray(discovery_rate(np.round(grid * n).astype(np.int64), n, m, theta, L))
    else:
        grid, curve = None, None
    plot_discovery_rate(out_dir / "discovery.png", fr, rate[top_mask], grid, curve, title)
    plot_recall_at_k(out_dir / "recall.png", ks, rec, f1, title)

    def at(k: int) -> dict[str, float]:
        j = min(k, args.kmax) - 1
        return {"k": k, "precision": float(prec[:, j].mean()), "recall": float(rec[:, j].mean()),
                "f1": float(f1[:, j].mean()), "recall_min": float(rec[:, j].min())}

    all_real = all(w in words_in_pop for r in results for w in r.heavy_hitters)
    summary: dict[str, object] = {
        "dataset": pop.name, "n": n, "runs": args.runs, "unit_size": U,
        "multi_word": not single, "transport": args.transport,
        "privacy": g.as_dict() if g else results[0].guarantee_note,
        "theta": theta, "gamma": float(prep.config.gamma), "m": m, "L": L,
        "seconds_per_run_mean": float(np.mean(seconds)),
        "discovered_per_run_mean": float(np.mean([len(r.heavy_hitters) for r in results])),
        "precision_mean": float(np.mean([precision(r.heavy_hitters, words_in_pop)
                                         for r in results])),
        "all_released_in_population": all_real,
        "at_k": [at(k) for k in (10, 50, 100) if k <= args.kmax],
        "out": str(out_dir),
    }
    if single:
        sure = np.flatnonzero(top_mask & (bounds >= 0.9))
        summary["prop1_bound_ge_0.9"] = {
            "words": int(sure.size),
            "min_discovery_rate": float(rate[sure].min()) if sure.size else None,
            "words_below_0.85": [pop.vocabulary[ids[j]] for j in sure if rate[j] < 0.85],
        }
    with open(out_dir / "summary.json", "w") as fh:
        json.dump(summary, fh, indent=2)
    if args.json:
        print_json(summary)
        return 0
    w = sys.stdout.write
    w(f"{args.runs} TrieHH runs on {pop.name} (n = {n:,}), theta = {theta}, m = {m}, L = {L}\n")
    if g:
        w(f"guarantee: ({g.epsilon:.4f}, {g.delta:.3g})-DP, {g.theorem}\n")
    w(f"every released heavy hitter occurs in the population: {all_real}\n")
    if single:
        s = summary["prop1_bound_ge_0.9"]
        w(f"words with Proposition 1 bound >= 0.9: {s['words']}, lowest empirical discovery "
          f"rate {s['min_discovery_rate']}, below 0.85: {s['words_below_0.85']}\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9} {'F1@K':>6}   (mean over runs)\n")
    for a in summary["at_k"]:
        w(f"{a['k']:>5} {a['precision']:>12.3f} {a['recall']:>9.3f} {a['f1']:>6.3f}\n")
    w(f"wrote {out_dir}/discovery.csv, metrics.csv, summary.json, discovery.png, recall.png\n")
    return 0


def _count(c: int | None) -> str | int:
    """A released count for the CSV: empty when counts were not released."""
    return "" if c is None else c
