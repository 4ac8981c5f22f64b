"""``fedhh triehh``: run TrieHH (Zhu et al. 2020) on a dataset over a transport.

The helpers here (argument set, population loading, parameter choice, one run and
its metrics) are shared with ``fedhh eval triehh``.
"""
from __future__ import annotations

import math

import argparse
import sys
from dataclasses import dataclass
from typing import Any

KS = (10, 50, 100)


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("triehh", "discover heavy hitters with TrieHH (Zhu et al. 2020)", run,
                    description="Run TrieHH: sampled users vote on prefix extensions; "
                    "prefixes with at least theta votes grow the trie. theta and gamma "
                    "come from Corollary 1 for the target (epsilon, delta).")
    add_common_args(p)
    p.add_argument("--show", type=int, default=30,
                   help="heavy hitters to list in the human-readable output (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="en",
                   help="en (embedded English, default), en-oov, zipf, or a PATH (text: "
                   "one user per line, words separated by spaces; .csv: user,item rows)")
    p.add_argument("--users", type=int, default=None,
                   help="population size n (embedded default 100000; a file: all its users)")
    p.add_argument("--epsilon", type=float, default=4.0, help="target epsilon (default 4)")
    p.add_argument("--delta", type=float, default=None, help="target delta (default 1/n^2)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="L, the maximum number of trie levels/rounds (default 10)")
    p.add_argument("--multi-word", action="store_true", dest="multi_word",
                   help="several words per user (Algorithm 3)")
    p.add_argument("--unit-size", type=int, default=1, dest="unit_size",
                   help="characters per trie level, 1-4 (default 1)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    p.add_argument("--theta", type=int, default=None,
                   help="override theta (the guarantee is then Theorem 1 at these values)")
    p.add_argument("--gamma", type=float, default=None, help="override gamma")
    p.add_argument("--alphabet", default=None,
                   help="public alphabet for a file dataset (default: printable ASCII "
                   "without whitespace and '$'); words with other characters are dropped")
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p)
    p.add_argument("--release-counts", action="store_true", dest="release_counts",
                   help="also release each prefix's vote count (diagnostics only: Theorem 1 "
                        "does not cover counts)")
    p.add_argument("--max-candidates", type=int, default=1 << 21, dest="max_candidates",
                   help="cap on one round's candidate set (default 2097152)")


@dataclass
class Prepared:
    population: Any
    alphabet: Any
    data: Any
    config: Any
    n: int
    delta: float
    params: Any  # TrieHHParameters or None when overridden
    transport_name: str
    target_epsilon: float


def load_transport(name: str):  # noqa: ANN201
    """The named transport with its default options.

    Raises:
        UsageError: the transport is unknown or not importable.
    """
    from protocol.cli.transport_options import transport_from_args

    return transport_from_args(argparse.Namespace(transport=name))


def prepare(args: argparse.Namespace, population=None):  # noqa: ANN001, ANN201
    """Load the population (or use ``population``, e.g. from ``fedhh hh``) and choose
    the parameters.

    Raises:
        UsageError: bad dataset, parameters or privacy target.
    """
    import numpy as np

    from mechanisms.prefix_tree import PrefixTreeError, UnitAlphabet
    from mechanisms.triehh import TrieHHConfig, TrieHHError, encode_population
    from mechanisms.triehh_privacy import TrieHHPrivacyError, corollary1
    from protocol.cli import UsageError
    from protocol.studies.datasets import DatasetError, load_dataset

    if not 1 <= args.unit_size <= 4:
        raise UsageError("--unit-size must be between 1 and 4")
    if args.max_length < 1:
        raise UsageError("--max-length must be >= 1")
    if args.users is not None and args.users < 1:
        raise UsageError("--users must be >= 1")
    root = np.random.default_rng(args.seed)
    data_rng, run_rng = root.spawn(2)
    try:
        pop = (population if population is not None else
               load_dataset(args.dataset, args.users, data_rng, args.multi_word,
                            args.alphabet)).compact()
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    n = pop.n
    delta = args.delta if args.delta is not None else 1.0 / float(n) ** 2
    params = None
    try:
        if args.theta is None or args.gamma is None:
            params = corollary1(args.epsilon, delta, n, args.max_length, args.multi_word)
        theta = args.theta if args.theta is not None else params.theta
        gamma = args.gamma if args.gamma is not None else params.gamma
        alphabet = UnitAlphabet(pop.alphabet, args.unit_size)
        config = TrieHHConfig(theta, gamma, args.max_length, max_candidates=args.max_candidates,
                              release_counts=bool(getattr(args, "release_counts", False)))
        data = encode_population(pop.vocabulary, pop.offsets, pop.items, pop.counts, alphabet,
                                 args.max_length)
    except (TrieHHPrivacyError, TrieHHError, PrefixTreeError) as exc:
        raise UsageError(str(exc)) from None
    return Prepared(pop, alphabet, data, config, n, delta, params, args.transport,
                    args.epsilon), run_rng


def run_once(prep: Prepared, transport, rng, show_progress: bool = True):  # noqa: ANN001, ANN201
    """One TrieHH run; returns the result.

    Raises:
        UsageError: the candidate set exceeds the cap or the transport aborts.
    """
    from mechanisms.triehh import TrieHH, TrieHHError
    from protocol.core.contract import AggregationAborted
    from protocol.cli.benchutil import progress
    from protocol.cli import UsageError

    mech = TrieHH(prep.data, prep.alphabet, prep.config, transport, rng)
    try:
        for _ in progress(mech.rounds(), total=prep.config.max_levels, desc="TrieHH rounds",
                          enabled=show_progress):
            pass
        return mech.result()
    except TrieHHError as exc:
        raise UsageError(str(exc)) from None
    except AggregationAborted as exc:
        raise UsageError(f"the {prep.transport_name} transport aborted a round: {exc}") from None


def summarize(prep: Prepared, result, ks=KS) -> dict[str, Any]:  # noqa: ANN001
    """Metrics and per-word details of one run as a JSON-ready dict."""
    from mechanisms.metrics import precision, rank_of, topk_metrics

    pop = prep.population
    ranking = pop.ranking()
    truth = [pop.vocabulary[i] for i in ranking]
    freq = pop.frequency()
    words_in_pop = set(truth)
    hh = result.heavy_hitters
    ranks = rank_of(list(hh), truth)
    index = {w: i for i, w in enumerate(pop.vocabulary)}
    discovered = [
        {"word": w, "released_count": c, "true_rank": ranks[w],
         "true_frequency": float(freq[index[w]]) if w in index else 0.0}
        # by released count when counts were released, else by true rank
        for w, c in sorted(hh.items(), key=lambda kv: (
            -kv[1] if kv[1] is not None else 0,
            ranks[kv[0]] if ranks[kv[0]] is not None else math.inf, kv[0]))
    ]
    g = result.guarantee
    total = result.total_cost
    return {
        "dataset": pop.name,
        "description": pop.description,
        "n": prep.n,
        "multi_word": not prep.data.one_per_user,
        "unit_size": prep.alphabet.unit_size,
        "transport": prep.transport_name,
        "privacy": _with_guarantee(g, {
            "epsilon": g.epsilon if g else None, "delta": g.delta if g else None,
            "theorem": g.theorem if g else result.guarantee_note,
            "target_epsilon": prep.target_epsilon,
            "theta": int(prep.config.theta), "gamma": float(prep.config.gamma),
            "m": result.m, "L": int(prep.config.max_levels),
            "target_delta": prep.delta,
        }),
        "rounds": [
            {"round": r.round, "candidates": r.candidates, "sampled": r.sampled,
             "released": r.released, "seconds": round(r.seconds, 6),
             "cpu_seconds": {k: round(v, 6) for k, v in r.cost.cpu_seconds.items()},
             "bytes_up": r.cost.bytes_up, "bytes_down": r.cost.bytes_down}
            for r in result.rounds
        ],
        "total_bytes_up": total.bytes_up,
        "total_bytes_down": total.bytes_down,
        "heavy_hitters": discovered,
        "frequent_prefixes": len(result.prefixes),
        "precision": precision(hh, words_in_pop),
        "at_k": [topk_metrics(hh, truth, k).as_dict() for k in ks],
    }


def _with_guarantee(g, legacy: dict[str, Any]) -> dict[str, Any]:  # noqa: ANN001
    """The privacy block: the keys printed so far, then the guarantee's own fields."""
    return g.to_json(legacy) if g is not None else legacy


def run(args: argparse.Namespace) -> int:
    import time

    from protocol.cli.benchutil import print_json

    t0 = time.perf_counter()
    from protocol.cli.transport_options import transport_from_args

    transport = transport_from_args(args)  # refuse bad options before loading data
    prep, rng = prepare(args)
    t1 = time.perf_counter()
    result = run_once(prep, transport, rng, show_progress=not args.json)
    t2 = time.perf_counter()
    out = summarize(prep, result)
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    if args.json:
        print_json(out)
        return 0
    _print_human(out, args.show)
    return 0


def _print_human(out: dict[str, Any], show: int) -> None:
    w = sys.stdout.write
    pv = out["privacy"]
    w(f"TrieHH on {out['dataset']}: n = {out['n']:,} users "
      f"({'several words' if out['multi_word'] else 'one word'} each), "
      f"unit size {out['unit_size']}, transport {out['transport']}\n")
    if pv["epsilon"] is not None:
        w(f"privacy: ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}; "
          f"target epsilon {pv['target_epsilon']:g}, delta {pv['target_delta']:.3g}\n")
    else:
        w(f"privacy: {pv['theorem']}\n")
    w(f"parameters: theta = {pv['theta']}, gamma = {pv['gamma']:.4f}, m = {pv['m']}, "
      f"L = {pv['L']}\n\n")
    w(f"{'round':>5} {'candidates':>10} {'sampled':>8} {'released':>8} {'seconds':>8} "
      f"{'bytes up':>12}\n")
    for r in out["rounds"]:
        w(f"{r['round']:>5} {r['candidates']:>10} {r['sampled']:>8} {r['released']:>8} "
          f"{r['seconds']:>8.3f} {r['bytes_up']:>12,}\n")
    hh = out["heavy_hitters"]
    w(f"\n{len(hh)} heavy hitters discovered (+ {out['frequent_prefixes']} frequent prefixes)"
      f"; showing {min(show, len(hh))}\n")
    w(f"{'word':<16} {'votes':>6} {'true rank':>9} {'true freq':>10}\n")
    for d in hh[:show]:
        rank = "-" if d["true_rank"] is None else str(d["true_rank"])
        votes = "-" if d["released_count"] is None else str(d["released_count"])
        w(f"{d['word']:<16} {votes:>6} {rank:>9} {d['true_frequency']:>10.2e}\n")
    w(f"\nprecision (discovered words that occur): {out['precision']:.3f}\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9} {'F1@K':>6}\n")
    for m in out["at_k"]:
        w(f"{m['k']:>5} {m['precision']:>12.3f} {m['recall']:>9.3f} {m['f1']:>6.3f}\n")
    s = out["seconds"]
    w(f"\ntime: load {s['load']:.2f} s, run {s['run']:.2f} s\n")
