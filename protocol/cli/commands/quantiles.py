"""``fedhh quantiles``: quantiles and range queries from the TrieHH++ trie
(Cormode 2021, section 4).

Values in a public range ``[lo, hi]`` become base-``alpha`` prefixes of length ``L``;
TrieHH++ releases the trie with counts; quantiles and the rank of every grid point are
answered from it and compared with the truth. The embedded default population is
log-normal "session lengths in seconds" (median 300 s, sigma 1, range [0, 3600],
generated from a fixed public seed so it is the same on every run).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

SYNTHETIC_SEED = 20210714  # public: the embedded population is the same for every run
SESSION_MEDIAN_SECONDS = 300.0
SESSION_SIGMA = 1.0
SESSION_RANGE = (0.0, 3600.0)


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.commands.triehhpp import add_privacy_args

    p = cli.command("quantiles", "quantiles and range queries from the TrieHH++ trie", run,
                    description="Cormode 2021 section 4: values -> base-alpha prefixes -> "
                    "TrieHH++ trie with counts -> ranks by greedy decomposition, quantiles "
                    "by rank search; every answer carries the bound L(alpha-1)theta/m.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--values", default=None,
                     help="file of numbers (one per line, or .npy); needs --lo and --hi")
    src.add_argument("--synthetic", choices=("lognormal",), default=None,
                     help="embedded log-normal session lengths in seconds (the default)")
    p.add_argument("--users", type=int, default=None,
                   help="population size (synthetic default 1000000; a file: subsample)")
    p.add_argument("--lo", type=float, default=None, help="public lower end of the range")
    p.add_argument("--hi", type=float, default=None, help="public upper end of the range")
    p.add_argument("--alpha", type=int, default=4, help="alphabet size (default 4)")
    add_privacy_args(p, epsilon=1.0, delta=1e-6)
    p.add_argument("--quantiles", default="0.1,0.25,0.5,0.75,0.9",
                   help="comma-separated quantiles (default 0.1,0.25,0.5,0.75,0.9)")
    p.add_argument("--grid", type=int, default=2001,
                   help="points r in [lo, hi] for the range-query error summary (default 2001)")
    p.add_argument("--seed", type=int, default=None,
                   help="mechanism seed (default: fresh OS randomness)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def synthetic_sessions(n: int) -> Any:
    """The embedded population: ``n`` log-normal session lengths (seconds)."""
    import numpy as np

    rng = np.random.default_rng(SYNTHETIC_SEED)
    return rng.lognormal(np.log(SESSION_MEDIAN_SECONDS), SESSION_SIGMA, n)


def _load_values(args: argparse.Namespace):  # noqa: ANN202
    import pathlib

    import numpy as np

    from protocol.cli import UsageError

    if args.values is None:
        n = 1_000_000 if args.users is None else args.users
        if n < 1:
            raise UsageError("--users must be >= 1")
        lo = SESSION_RANGE[0] if args.lo is None else args.lo
        hi = SESSION_RANGE[1] if args.hi is None else args.hi
        return synthetic_sessions(n), lo, hi, "synthetic log-normal session lengths (s)"
    if args.lo is None or args.hi is None:
        raise UsageError("--values needs the public range --lo and --hi (deriving it from "
                         "the data would leak the minimum and maximum)")
    path = pathlib.Path(args.values)
    try:
        v = np.load(path) if path.suffix == ".npy" else np.loadtxt(path, dtype=np.float64, ndmin=1)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    v = np.asarray(v, dtype=np.float64).ravel()
    if v.size == 0 or not np.isfinite(v).all():
        raise UsageError(f"{path}: need at least one value, all finite")
    if args.users is not None:
        if not 1 <= args.users <= v.size:
            raise UsageError(f"--users must be in [1, {v.size}]")
        v = np.random.default_rng(SYNTHETIC_SEED).choice(v, args.users, replace=False)
    return v, args.lo, args.hi, f"file {path}"


def run(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from mechanisms.quantiles import AlphaAdicEncoder, QuantileError, QuantileSketch
    from mechanisms.triehhpp import TrieHHPPParams, run_triehhpp, spawn_rngs
    from protocol.core.contract import AggregationAborted
    from protocol.cli.benchutil import print_json, progress
    from protocol.cli import UsageError
    from protocol.cli.commands.triehhpp import solve
    from protocol.core.transports.plain import PlainTransport

    t0 = time.perf_counter()
    try:
        qs = [float(x) for x in args.quantiles.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--quantiles must be comma-separated numbers") from None
    if not qs or any(not 0 <= q <= 1 for q in qs):
        raise UsageError("--quantiles must be in [0, 1]")
    if args.grid < 2:
        raise UsageError("--grid must be >= 2")
    values, lo, hi, source = _load_values(args)
    n = int(values.size)
    try:
        enc = AlphaAdicEncoder(float(lo), float(hi), args.alpha, args.max_length)
    except QuantileError as exc:
        raise UsageError(str(exc)) from None
    sol = solve(args, n, flat=False, default_delta=1e-6)
    params = TrieHHPPParams(n, float(sol.m), sol.theta, args.max_length, c=args.slack,
                            task="quantiles")
    um = enc.unit_matrix(values)
    sr, tr = spawn_rngs(args.seed)
    t1 = time.perf_counter()
    bar = lambda it: progress(it, total=args.max_length, desc="TrieHH++ levels",  # noqa: E731
                              enabled=not args.json)
    try:
        res = run_triehhpp(um, enc.alpha, enc.unit_labels, params, PlainTransport(), sr, tr,
                           progress=bar)
    except AggregationAborted as exc:
        raise UsageError(f"a round aborted: {exc}") from None
    sketch = QuantileSketch(res, enc)
    answers = sketch.quantiles(qs)
    t2 = time.perf_counter()
    sv = np.sort(np.clip(values, lo, hi))
    grid = np.linspace(lo, hi, args.grid)
    err = np.abs(sketch.ranks(grid) - np.searchsorted(sv, grid, side="right") / n)
    rows = []
    for a in answers:
        true_rank = float(np.searchsorted(sv, a.value, side="right") / n)
        rows.append({"q": a.q, "estimate": a.value, "true_quantile": float(np.quantile(sv, a.q)),
                     "true_rank_of_estimate": true_rank, "rank_error": true_rank - a.q,
                     "error_bound": a.error_bound})
    g = sol.guarantee
    out = {
        "source": source, "n": n, "range": [lo, hi], "alpha": args.alpha, "L": args.max_length,
        "privacy": g.as_dict(), "m": sol.m, "theta": sol.theta,
        "contacted": params.plan().contacted,
        "error_bound": sketch.error_bound,
        "trie_nodes": len(res.trie) - 1,
        "levels": [{"level": s.level, "candidates": s.candidates, "released": s.released}
                   for s in res.levels],
        "quantiles": rows,
        "range_query_rank_error": {
            "points": int(args.grid), "median": float(np.median(err)),
            "p95": float(np.quantile(err, 0.95)), "max": float(err.max()),
            "fraction_within_bound": float((err <= sketch.error_bound).mean()),
        },
        "seconds": {"load": round(t1 - t0, 3), "run_and_query": round(t2 - t1, 3)},
    }
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    w(f"quantiles from TrieHH++ on {source}: n = {n:,}, range [{lo:g}, {hi:g}], "
      f"alpha = {args.alpha}, L = {args.max_length}\n")
    w(f"privacy: ({g.epsilon:.4f}, {g.delta:.3g})-DP, {g.theorem}\n")
    w(f"m = {sol.m:,} per level, theta = {sol.theta}, {out['trie_nodes']} released nodes; "
      f"rank error bound L(alpha-1)theta/m = {sketch.error_bound:.4g}\n\n")
    w(f"{'q':>6} {'estimate':>12} {'true':>12} {'true rank':>10} {'rank err':>9} {'bound':>7}\n")
    for r in rows:
        w(f"{r['q']:>6.3f} {r['estimate']:>12.4g} {r['true_quantile']:>12.4g} "
          f"{r['true_rank_of_estimate']:>10.4f} {r['rank_error']:>+9.4f} "
          f"{r['error_bound']:>7.4f}\n")
    e = out["range_query_rank_error"]
    w(f"\nrange queries [lo, r] at {e['points']} points r: |rank error| median "
      f"{e['median']:.4f}, 95th percentile {e['p95']:.4f}, max {e['max']:.4f}; "
      f"{100 * e['fraction_within_bound']:.1f}% within the bound\n")
    return 0
