"""``fedhh bench triehh``: time one whole TrieHH run and, over secure aggregation, where
its CPU time goes.

Takes the same dataset and privacy options as ``fedhh triehh`` and prints one object:
the wall and CPU time of loading and of the run, per-round sizes and times, peak memory,
the run's metrics at K, and -- with ``--transport secagg`` or ``threshold`` -- the
simulation's CPU next to the CPU devices of their own would spend (the session memos'
saved work added back), and the per-device time inside each primitive family over all
rounds, counted in the run itself, next to the bare library cost of the same operations
(:mod:`protocol.core.secagg_profile`; the run is
:func:`protocol.studies.runners.triehh.benchmark`), with X25519 singled out: its share of the run's CPU
time and the share the bare scalar multiplications alone would take.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_triehh_args

    p = cli.subcommand("bench", "triehh", "benchmark one whole TrieHH run", run,
                       description="One TrieHH run with timing, memory and (over secure "
                       "aggregation) the per-primitive CPU profile.")
    add_triehh_args(p, corrupt=False)
    p.add_argument("--bare-sample", type=int, default=2000, dest="bare_sample",
                   help="operations per primitive replayed bare (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json, progress_bar
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners import triehh

    transport = transport_from_args(args)  # refuse bad options before loading data
    if hasattr(transport, "estimate_say"):
        # a benchmark measures the run alone: no probe sessions inside the profile
        transport.estimate_say = None
    opts = options_from(triehh.TrieHHOptions, args)
    out = triehh.benchmark(opts, transport, args.bare_sample,
                           progress_bar(opts.max_length, "TrieHH rounds", enabled=not (args.json or args.quiet)))
    if args.json:
        print_json(out)
    else:
        _print_human(out)
    return 0


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
    d = out.get("distributed")
    if d:
        w(f"  on {d['workers']} {d['engine']} workers: {d['seconds']:.2f} s wall vs "
          f"{d['one_worker_seconds']:.2f} s in one process: speedup {d['speedup']}x, "
          f"same heavy hitters: {d['same_heavy_hitters']}\n")
    if out["primitives"] is None:
        return
    w(f"  per device (nothing shared between parties): {out['device_cpu_seconds']:.2f} s CPU; "
      f"the simulation's {out['cpu_seconds']:.2f} s\n")
    w(f"  per-device run CPU / bare X25519 cost (floor ratio): {out['floor_ratio']} (every "
      f"primitive at its bare cost: {out['primitive_floor_ratio']})\n")
    w("  primitives per device, from the run itself (every call counted, every 16th "
      "timed):\n")
    w(f"  {'primitive':<14}{'calls':>10}{'in run s':>10}{'bare s':>10}{'ratio':>8}\n")
    for k, v in out["primitives"].items():
        ratio = "-" if v["overhead_ratio"] is None else f"{v['overhead_ratio']:.2f}"
        w(f"  {k:<14}{v['calls']:>10,}{v['seconds']:>10.3f}{v['bare_seconds']:>10.3f}"
          f"{ratio:>8}\n")
    x = out["x25519"]
    w(f"  X25519 per device: {x['operations']:,} operations, {x['seconds']:.2f} s CPU = "
      f"{100 * x['share_of_run_cpu']:.1f}% of the per-device CPU; the bare scalar "
      f"multiplications take {x['bare_seconds']:.2f} s "
      f"({100 * x['bare_share_of_run_cpu']:.1f}%)\n")
