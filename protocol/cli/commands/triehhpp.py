"""``fedhh triehhpp``: TrieHH++ (Cormode 2021) heavy hitters with estimated frequencies.

The population comes from :mod:`protocol.studies.datasets` (one word per user). ``m`` and
``theta`` are solved from the target ``(epsilon, delta)`` by
:func:`mechanisms.triehhpp_privacy.solve_sample_size`; the trie grows over the chosen
transport, and every released heavy hitter is compared with the ground truth.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

KS = (10, 50, 100)


def register(cli) -> None:  # noqa: ANN001
    p = cli.command(
        "triehhpp", "heavy hitters with counts by TrieHH++ (Cormode 2021)", run,
        description="Run TrieHH++: each level Poisson-samples clients (rate m/n, by "
        "contacting m + c sqrt(m)), released prefixes carry their sampled counts "
        "(frequency estimate count*n/m). m and theta come from Lemma 3 (or the Remark "
        "with --flat) for the target (epsilon, delta).")
    p.add_argument("--dataset", default="en",
                   help="en (default), en-oov, zipf, or a PATH (one word per user)")
    p.add_argument("--users", type=int, default=None,
                   help="population size n (embedded default 100000; a file: all users)")
    add_privacy_args(p)
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p)
    p.add_argument("--flat", action="store_true",
                   help="one thresholded round over a public candidate list, no trie "
                   "(Remark after Lemma 3); embedded datasets use their public vocabulary")
    p.add_argument("--candidates", default=None,
                   help="with --flat: file of public candidate items, one per line "
                   "(required for a file dataset)")
    p.add_argument("--alphabet", default=None, help="public alphabet for a file dataset")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--show", type=int, default=25, help="heavy hitters to list (default 25)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_privacy_args(p: argparse.ArgumentParser, epsilon: float = 1.0,
                     delta: float | None = None) -> None:
    """Arguments shared by ``triehhpp``, ``quantiles`` and ``privacy triehhpp``."""
    p.add_argument("--epsilon", type=float, default=epsilon,
                   help=f"target epsilon (default {epsilon:g})")
    p.add_argument("--delta", type=float, default=None,
                   help="target delta (default " + ("1/n^2" if delta is None else f"{delta:g}")
                   + "; with --theta and no --delta: whatever delta theta gives)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="L, the number of trie levels (default 10)")
    p.add_argument("--composition", choices=("basic", "advanced"), default="basic",
                   help="composition over levels (default basic)")
    p.add_argument("--bound", choices=("paper", "eq3"), default="paper",
                   help="per-level epsilon: paper = Lemma 3 eq. (4), needs m <= n/(10 theta); "
                   "eq3 = the tight ratio n/(n - theta m) of eq. (3) (default paper)")
    p.add_argument("--theta", type=int, default=None,
                   help="fix theta instead of the smallest one meeting delta")
    p.add_argument("--slack", type=float, default=10.0,
                   help="c in s = m + c sqrt(m) contacted clients (default 10)")


def solve(args: argparse.Namespace, n: int, flat: bool,
          default_delta: float | None = None):  # noqa: ANN201
    """Solve (m, theta) for the command-line target (``--delta`` defaults to
    ``default_delta`` or ``1/n^2``; with ``--theta`` and no ``--delta`` any delta).

    Raises:
        UsageError: a condition of the theorem fails (the message names it).
    """
    from mechanisms.triehhpp_privacy import PrivacyConditionError, solve_sample_size
    from protocol.cli import UsageError

    if args.max_length < 1:
        raise UsageError("--max-length must be >= 1")
    delta = args.delta
    if delta is None and args.theta is None:
        delta = default_delta if default_delta is not None else 1.0 / float(n) ** 2
    try:
        return solve_sample_size(n, args.epsilon, delta, args.max_length, flat=flat,
                                 composition=args.composition, bound=args.bound,
                                 c=args.slack, theta=args.theta)
    except PrivacyConditionError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mechanisms.prefix_tree import PrefixTreeError, UnitAlphabet
    from mechanisms.triehhpp import TrieHHPPParams, run_flat, run_triehhpp, spawn_rngs
    from protocol.core.contract import AggregationAborted
    from protocol.cli.benchutil import print_json, progress
    from protocol.cli import UsageError
    from protocol.studies.datasets import DatasetError, load_dataset
    from protocol.cli.transport_options import transport_from_args

    t0 = time.perf_counter()
    if args.users is not None and args.users < 1:
        raise UsageError("--users must be >= 1")
    transport = transport_from_args(args)  # refuse bad options before loading data
    data_seq, run_seq = np.random.SeedSequence(args.seed).spawn(2)
    try:
        pop = load_dataset(args.dataset, args.users, np.random.default_rng(data_seq),
                           False, args.alphabet)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    if not pop.single_word:
        raise UsageError("TrieHH++ takes exactly one item per client; this population has "
                         "users with several (or no) words")
    n = pop.n
    sol = solve(args, n, args.flat)
    params = TrieHHPPParams(n, float(sol.m), sol.theta, 1 if args.flat else args.max_length,
                            c=args.slack)
    sr, tr = spawn_rngs(int(np.random.default_rng(run_seq).integers(2**63)))
    user_item = pop.items  # single word per user: entry i is user i's word
    t1 = time.perf_counter()
    try:
        if args.flat:
            cands = _flat_candidates(args, pop)
            pos = {w: i for i, w in enumerate(cands)}
            vocab_pos = np.array([pos.get(w, -1) for w in pop.vocabulary], dtype=np.int64)
            res = run_flat(vocab_pos[user_item], cands, params, transport, sr, tr)
            hh = res.heavy_hitters()
            levels = [res.stats]
        else:
            alpha = UnitAlphabet(pop.alphabet)
            um = alpha.encode(list(pop.vocabulary), args.max_length)[user_item]
            bar = lambda it: progress(it, total=args.max_length, desc="TrieHH++ levels",  # noqa: E731
                                      enabled=not args.json)
            res = run_triehhpp(um, alpha.num_units, alpha.labels, params, transport, sr, tr,
                               terminal=alpha.terminal, progress=bar)
            hh = res.heavy_hitters(strip=alpha.eos)
            levels = res.levels
    except (PrefixTreeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except AggregationAborted as exc:
        raise UsageError(f"the {args.transport} transport aborted a round: {exc}") from None
    t2 = time.perf_counter()
    out = _summary(args, pop, sol, params, hh, levels)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3)}
    if args.json:
        print_json(out)
    else:
        _print_human(out, args.show)
    return 0


def _flat_candidates(args: argparse.Namespace, pop) -> tuple[str, ...]:  # noqa: ANN001
    import pathlib

    from protocol.cli import UsageError

    if args.candidates:
        try:
            lines = pathlib.Path(args.candidates).read_text(encoding="utf-8").split()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --candidates: {exc}") from None
        return tuple(dict.fromkeys(lines))
    if args.dataset not in ("en", "en-oov", "zipf"):
        raise UsageError("--flat on a file dataset needs a public --candidates list "
                         "(the file's own vocabulary is private)")
    return tuple(pop.vocabulary)


def _summary(args, pop, sol, params, hh, levels) -> dict[str, Any]:  # noqa: ANN001
    import numpy as np

    from mechanisms.metrics import topk_metrics

    holders = pop.holders()
    index = {w: i for i, w in enumerate(pop.vocabulary)}
    ranking = [pop.vocabulary[i] for i in pop.ranking()]
    rank = {w: r + 1 for r, w in enumerate(ranking[:100_000])}
    rows = []
    for e in hh:
        true = int(holders[index[e.label]]) if e.label in index else 0
        rows.append({"item": e.label, "count": e.count, "estimate": round(e.estimate, 1),
                     "estimate_se": round(e.estimate_se, 1), "true": true,
                     "true_rank": rank.get(e.label),
                     "relative_error": (e.estimate - true) / true if true else None,
                     "z": (e.estimate - true) / e.estimate_se if e.estimate_se > 0 else None})
    rel = np.array([abs(r["relative_error"]) for r in rows if r["relative_error"] is not None])
    z = np.array([abs(r["z"]) for r in rows if r["z"] is not None])
    discovered = {e.label: float(e.count) for e in hh}
    g = sol.guarantee
    return {
        "dataset": pop.name, "n": pop.n, "transport": args.transport, "flat": args.flat,
        "privacy": g.as_dict(),
        "parameters": {"m": sol.m, "theta": sol.theta, "rate": sol.rate,
                       "contacted": params.plan().contacted, "L": params.max_levels,
                       "slack_c": params.c},
        "levels": [{"level": s.level, "candidates": s.candidates, "released": s.released,
                    "contacted": s.contacted, "participants_sim_only": s.participants,
                    "voters_sim_only": s.voters, "truncated": s.truncated} for s in levels],
        "heavy_hitters": rows,
        "estimation": {
            "median_abs_relative_error": float(np.median(rel)) if rel.size else None,
            "max_abs_relative_error": float(rel.max()) if rel.size else None,
            "within_2se": float((z <= 2).mean()) if z.size else None,
        },
        "at_k": [topk_metrics(discovered, ranking, k).as_dict() for k in KS],
    }


def _print_human(out: dict[str, Any], show: int) -> None:
    w = sys.stdout.write
    pv, pa = out["privacy"], out["parameters"]
    w(f"TrieHH++{' (flat)' if out['flat'] else ''} on {out['dataset']}: n = {out['n']:,}, "
      f"transport {out['transport']}\n")
    w(f"privacy: ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}\n")
    w(f"parameters: m = {pa['m']:,} (rate {pa['rate']:.4g}), theta = {pa['theta']}, "
      f"L = {pa['L']}, contacted s = {pa['contacted']:,}\n\n")
    w(f"{'level':>5} {'candidates':>10} {'released':>8} {'contacted':>9} "
      f"{'voters (sim)':>12}\n")
    for s in out["levels"]:
        w(f"{s['level']:>5} {s['candidates']:>10} {s['released']:>8} {s['contacted']:>9} "
          f"{s['voters_sim_only']:>12}\n")
    hh = out["heavy_hitters"]
    w(f"\n{len(hh)} heavy hitters; showing {min(show, len(hh))}\n")
    w(f"{'item':<18} {'count':>6} {'estimate':>10} {'+/- se':>8} {'true':>9} {'rel.err':>8}\n")
    for r in hh[:show]:
        re_ = "-" if r["relative_error"] is None else f"{r['relative_error']:+.3f}"
        w(f"{r['item'][:18]:<18} {r['count']:>6} {r['estimate']:>10,.0f} "
          f"{r['estimate_se']:>8,.0f} {r['true']:>9,} {re_:>8}\n")
    e = out["estimation"]
    if e["median_abs_relative_error"] is not None:
        w(f"\nmedian |relative error| {e['median_abs_relative_error']:.3f}, max "
          f"{e['max_abs_relative_error']:.3f}; within 2 se: {e['within_2se']:.2f}\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9}\n")
    for m in out["at_k"]:
        w(f"{m['k']:>5} {m['precision']:>12.3f} {m['recall']:>9.3f}\n")
    w(f"time: load {out['seconds']['load']:.2f} s, run {out['seconds']['run']:.2f} s\n")
