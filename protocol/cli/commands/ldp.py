"""``fedhh ldp``: run one local-DP frequency oracle on a population and compare the
estimates with the truth.

The population is either a synthetic Zipf(s) population of ``--users`` users over
``--domain`` items (generated here; item 0 is the most likely) or a text file with one
item per line. For a file, the ``--domain`` most frequent items form the domain (all
distinct items by default) and the rest are out-of-domain values, which the oracle maps
to its dummy item.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import numpy as np

MECHANISMS = ("grr", "oue", "olh", "aon")


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("ldp", "estimate item frequencies with a local-DP frequency oracle", run)
    p.add_argument("--mechanism", choices=MECHANISMS, default="olh")
    p.add_argument("--dataset", default="zipf",
                   help="'zipf' (synthetic) or PATH of a file with one item per line")
    p.add_argument("--users", type=int, default=None,
                   help="number of users (zipf default 100000; file default: every line)")
    p.add_argument("--domain", type=int, default=None,
                   help="domain size (zipf default 1000; file default: all distinct items)")
    p.add_argument("--epsilon", type=float, default=2.0, help="local epsilon (default 2)")
    p.add_argument("--zipf-s", type=float, default=1.1, help="Zipf exponent (default 1.1)")
    p.add_argument("--g", type=int, default=0, help="OLH hash range (default round(e^eps)+1)")
    p.add_argument("--B", type=int, default=0, help="AoN hash range (default ceil(e^(eps/2)+1))")
    p.add_argument("--top", type=int, default=10, help="rows in the table (default 10)")
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    from protocol.cli.transport_options import add_transport_args

    add_transport_args(p, default="none", extra_choices=("none",), help=(
        "carry the reports over a transport (protocol.studies.ldp_runner): plain, secagg (support "
        "vectors; keep --users small) or shuffler (opaque reports; prints the amplified "
        "central guarantee). Default none: estimate in process"))
    p.add_argument("--delta", type=float, default=None,
                   help="central delta of the shuffler's amplified guarantee (default 1/n^2)")
    p.add_argument("--bound", default="fmt23_numerical",
                   help="amplification bound for --transport shuffler (default fmt23_numerical)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def zipf_population(users: int, domain: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """``users`` values in ``[0, domain)`` with ``P[i] proportional to 1/(i+1)^s``.

    Raises:
        ValueError: on non-positive sizes or a negative exponent.
    """
    if users < 1 or domain < 1:
        raise ValueError(f"need users >= 1 and domain >= 1, got {users}, {domain}")
    if s < 0 or not math.isfinite(s):
        raise ValueError(f"Zipf exponent must be finite and >= 0, got {s}")
    w = 1.0 / np.arange(1, domain + 1, dtype=float) ** s
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(users), side="right").astype(np.int64)


def file_population(path: str, domain: int | None, users: int | None,
                    rng: np.random.Generator) -> tuple[np.ndarray, list[str], int]:
    """Read one item per line; return (values, names of the domain items, domain size).

    Items are ranked by frequency; values outside the top ``domain`` become ``-1``.

    Raises:
        ValueError: on an empty file or bad sizes.
        OSError: if the file cannot be read.
    """
    with open(path, encoding="utf-8") as fh:
        items = [line.rstrip("\n") for line in fh if line.strip()]
    if not items:
        raise ValueError(f"{path}: no items")
    names, inverse, counts = np.unique(np.array(items, dtype=object), return_inverse=True,
                                       return_counts=True)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    values = rank[inverse].astype(np.int64)
    d = int(names.size) if domain is None else int(domain)
    if d < 1:
        raise ValueError("domain must be >= 1")
    values[values >= d] = -1
    if users is not None:
        if users < 1:
            raise ValueError("users must be >= 1")
        values = rng.choice(values, size=users, replace=users > values.size)
    return values, [str(names[i]) for i in order[:d]], d


def build_population(args: argparse.Namespace, rng: np.random.Generator
                     ) -> tuple[np.ndarray, list[str] | None, int]:
    from protocol.cli import UsageError

    try:
        if args.dataset == "zipf":
            users = 100_000 if args.users is None else args.users
            domain = 1000 if args.domain is None else args.domain
            return zipf_population(users, domain, args.zipf_s, rng), None, domain
        return file_population(args.dataset, args.domain, args.users, rng)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from mechanisms.fo import OracleInputError, make_oracle
    from protocol.cli.benchutil import print_json
    from protocol.cli import UsageError
    from protocol.cli.transport_options import transport_from_args, transport_options

    # refuse options the transport does not take before building anything
    if args.transport == "none":
        transport_options(args)  # any transport option is an error here
        transport = None
    else:
        transport = transport_from_args(args)
    rng = np.random.default_rng(args.seed)
    values, names, domain = build_population(args, rng)
    n = values.shape[0]
    extra: dict[str, Any] = {}
    if args.mechanism == "olh" and args.g:
        extra["g"] = args.g
    if args.mechanism == "aon" and args.B:
        extra["B"] = args.B
    try:
        oracle = make_oracle(args.mechanism, args.epsilon, domain,
                             dummy=bool((values < 0).any()), **extra)
    except OracleInputError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    reports = oracle.randomize(values, rng)
    t1 = time.perf_counter()
    if args.transport == "none":
        est, carried = oracle.estimate(reports), None
    else:
        from protocol.core.contract import AggregationAborted
        from mechanisms.fo import ReportError
        from protocol.studies.ldp_runner import LDPTransportError, run_ldp

        try:
            carried = run_ldp(oracle, reports, transport, rng, delta=args.delta,
                              bound=args.bound)
        except (LDPTransportError, AggregationAborted, ReportError) as exc:
            raise UsageError(str(exc)) from None
        est = carried.estimates
    t2 = time.perf_counter()
    inside = values[values >= 0]
    truth = np.bincount(inside, minlength=domain)[:domain] / n
    err = est - truth
    std = np.sqrt(oracle.variance(n, truth))
    mse = float(np.mean(err ** 2))
    order = np.argsort(-truth, kind="stable")[: max(0, args.top)]
    rows = [{"item": int(i) if names is None else names[i], "true": float(truth[i]),
             "estimate": float(est[i]), "error": float(err[i]), "std": float(std[i]),
             "z": float(err[i] / std[i])} for i in order]
    priv = oracle.privacy()
    params = {k: getattr(oracle, k) for k in ("g", "B") if hasattr(oracle, k)}
    summary = {
        "mechanism": oracle.name, "epsilon": priv.epsilon,
        "effective_epsilon": priv.effective_epsilon, "delta": priv.delta,
        "source": priv.theorem, "users": n, "domain": domain, "dummy": oracle.dummy,
        "params": params, "support_probabilities": list(oracle.support_probabilities),
        "mse": mse, "mean_analytical_variance": float(np.mean(std ** 2)),
        "variance_at_f0": oracle.variance(n, 0.0),
        "max_abs_z": float(np.max(np.abs(err / std))),
        "seconds": {"randomize": t1 - t0, "estimate": t2 - t1},
        "seed": args.seed, "top": rows,
        "transport": args.transport,
        "guarantee": priv.to_json(),
    }
    if carried is not None:
        summary["transport_encoding"] = carried.encoding
        summary["central"] = carried.central
    if args.json:
        print_json(summary)
        return 0
    out = sys.stdout
    print(f"{oracle.name.upper()}  epsilon={priv.epsilon:g} (exact {priv.effective_epsilon:.9f}), "
          f"users={n}, domain={domain}{' + dummy' if oracle.dummy else ''}"
          f"{''.join(f', {k}={v}' for k, v in params.items())}", file=out)
    if carried is not None:
        print(f"transport {carried.transport}: {carried.encoding}", file=out)
        c = carried.central
        if c is not None:
            print(f"central guarantee after shuffling {n} reports: ({c['epsilon']:.4f}, "
                  f"{c['delta']:.3g})-DP by {c['bound']} ({c['source']})"
                  f"{'; ' + c['note'] if 'note' in c else ''}", file=out)
    print(f"{'item':>16} {'true':>10} {'estimate':>10} {'error':>10} {'std':>9} {'z':>6}", file=out)
    for r in rows:
        print(f"{str(r['item'])[:16]:>16} {r['true']:10.5f} {r['estimate']:10.5f} "
              f"{r['error']:+10.5f} {r['std']:9.5f} {r['z']:+6.2f}", file=out)
    print(f"MSE over the domain {mse:.3e} (analytical mean variance "
          f"{summary['mean_analytical_variance']:.3e}); randomize {t1 - t0:.3f} s, "
          f"estimate {t2 - t1:.3f} s", file=out)
    return 0
