"""``fedhh bench triehh``: time one whole TrieHH run and, over secure aggregation, where
its CPU time goes.

Takes the same dataset and privacy options as ``fedhh triehh`` and prints one object:
the wall and CPU time of loading and of the run, per-round sizes and times, peak memory,
the run's metrics at K, and -- with ``--transport secagg`` -- the time spent inside each
primitive family over all rounds next to the bare library cost of the same operations
(:mod:`protocol.core.secagg_profile`), with X25519 singled out: its share of the run's CPU
time and the share the bare scalar multiplications alone would take.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.commands.triehh import add_common_args

    p = cli.subcommand("bench", "triehh", "benchmark one whole TrieHH run", run,
                       description="One TrieHH run with timing, memory and (over secure "
                       "aggregation) the per-primitive CPU profile.")
    add_common_args(p)
    p.add_argument("--bare-sample", type=int, default=2000, dest="bare_sample",
                   help="operations per primitive replayed bare (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli.benchutil import print_json

    out = bench_triehh(args, show_progress=not args.json)
    if args.json:
        print_json(out)
    else:
        _print_human(out)
    return 0


def bench_triehh(args: argparse.Namespace, show_progress: bool = False) -> dict[str, Any]:
    """Run TrieHH once as ``fedhh triehh`` would and return the figures.

    Raises:
        protocol.cli.UsageError: as ``fedhh triehh`` (bad dataset, target, abort).
    """
    import contextlib
    import time

    from protocol.cli.commands.triehh import prepare, run_once, summarize
    from protocol.cli.transport_options import transport_from_args

    wall0, cpu0 = time.perf_counter(), time.process_time()
    transport = transport_from_args(args)  # refuse bad options before loading data
    prep, rng = prepare(args)
    wall1, cpu1 = time.perf_counter(), time.process_time()
    profiling = args.transport == "secagg"
    if profiling:
        from protocol.core.secagg_engine import profile_primitives

        ctx: Any = profile_primitives()
    else:
        ctx = contextlib.nullcontext(None)
    with ctx as prof:
        result = run_once(prep, transport, rng, show_progress=show_progress)
    wall2, cpu2 = time.perf_counter(), time.process_time()
    summary = summarize(prep, result)
    run_wall, run_cpu = wall2 - wall1, cpu2 - cpu1
    out: dict[str, Any] = {
        "dataset": summary["dataset"], "n": summary["n"], "transport": args.transport,
        "multi_word": summary["multi_word"], "unit_size": summary["unit_size"],
        "seed": args.seed, "privacy": summary["privacy"],
        "rounds": [{k: r[k] for k in ("round", "candidates", "sampled", "released",
                                      "seconds", "bytes_up")} for r in summary["rounds"]],
        "clients_per_round": result.m,
        "heavy_hitters": len(summary["heavy_hitters"]),
        "precision": summary["precision"], "at_k": summary["at_k"],
        "seconds": round(run_wall, 3),
        "cpu_seconds": round(run_cpu, 3),
        "load_seconds": round(wall1 - wall0, 3),
        "load_cpu_seconds": round(cpu1 - cpu0, 3),
        "primitives": None, "x25519": None,
    }
    if prof is not None:
        from protocol.core.secagg_profile import primitive_table

        table = primitive_table(prof, args.bare_sample)
        ka = table["key_agreement"]
        out["primitives"] = table
        out["primitive_seconds_total"] = round(sum(v["seconds"] for v in table.values()), 3)
        out["x25519"] = {
            "operations": ka["calls"],
            "shared_secrets": prof.calls.get("x25519_shared", 0),
            "key_generations": prof.calls.get("x25519_keypair", 0)
            + prof.calls.get("x25519_public", 0),
            "seconds": ka["seconds"],
            "bare_seconds": ka["bare_seconds"],
            "overhead_ratio": ka["overhead_ratio"],
            "share_of_run_cpu": round(ka["seconds"] / run_cpu, 4) if run_cpu > 0 else None,
            "bare_share_of_run_cpu":
                round(ka["bare_seconds"] / run_cpu, 4) if run_cpu > 0 else None,
        }
    return out


def _print_human(out: dict[str, Any]) -> None:
    w = sys.stdout.write
    pv = out["privacy"]
    w(f"TrieHH bench on {out['dataset']}: n = {out['n']:,}, transport {out['transport']}, "
      f"theta {pv['theta']}, m = {out['clients_per_round']:,} per round\n")
    w(f"  run: {out['seconds']:.2f} s wall, {out['cpu_seconds']:.2f} s CPU "
      f"(loading {out['load_seconds']:.2f} s); {len(out['rounds'])} rounds, "
      f"{out['heavy_hitters']} heavy hitters\n")
    w(f"  {'round':>5}{'candidates':>12}{'sampled':>9}{'released':>10}{'seconds':>10}\n")
    for r in out["rounds"]:
        w(f"  {r['round']:>5}{r['candidates']:>12,}{r['sampled']:>9,}{r['released']:>10,}"
          f"{r['seconds']:>10.2f}\n")
    if out["primitives"] is None:
        return
    w(f"  {'primitive':<14}{'calls':>10}{'in run s':>10}{'bare s':>10}{'ratio':>8}\n")
    for k, v in out["primitives"].items():
        ratio = "-" if v["overhead_ratio"] is None else f"{v['overhead_ratio']:.2f}"
        w(f"  {k:<14}{v['calls']:>10,}{v['seconds']:>10.3f}{v['bare_seconds']:>10.3f}"
          f"{ratio:>8}\n")
    x = out["x25519"]
    w(f"  X25519: {x['operations']:,} operations, {x['seconds']:.2f} s CPU = "
      f"{100 * x['share_of_run_cpu']:.1f}% of the run's CPU time; the bare scalar "
      f"multiplications take {x['bare_seconds']:.2f} s "
      f"({100 * x['bare_share_of_run_cpu']:.1f}%)\n")
