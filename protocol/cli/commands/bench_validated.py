"""``fedhh bench validated``: TrieHH over the committee's validated reports against the
committee fed by secure aggregation and secure aggregation alone, interleaved
(:func:`protocol.studies.runners.validated_bench.bench_validated`)."""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.studies.runners.validated_bench import CONFIGS

    p = cli.subcommand("bench", "validated",
                       "TrieHH over validated reports vs the secure-aggregation-fed "
                       "committee vs secure aggregation", run)
    p.add_argument("--users", type=int, default=100_000,
                   help="population (default 100000)")
    p.add_argument("--seed", type=int, default=1, help="seed of every run (default 1)")
    p.add_argument("--repeats", type=int, default=1,
                   help="interleaved repeats of the configurations (default 1)")
    p.add_argument("--dataset", default="en", choices=("en", "en-oov", "zipf"),
                   help="an embedded TrieHH dataset (default en)")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"comma-separated, from {', '.join(CONFIGS)} (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    import sys

    from protocol.cli import UsageError
    from protocol.cli.output import print_json
    from protocol.studies.errors import StudyError
    from protocol.studies.runners.validated_bench import bench_validated

    if args.users < 1 or args.repeats < 1:
        raise UsageError("--users and --repeats must be >= 1")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        out = bench_validated(args.users, args.seed, args.repeats, args.dataset,
                              [c.strip() for c in args.configs.split(",") if c.strip()], say)
    except StudyError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    print(f"TrieHH, {out['users']:,} users, seed {out['seed']}, {out['repeats']} repeat(s), "
          "medians:")
    print(f"  {'configuration':<22} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} "
          f"{'B/device':>9} {'HH':>4}  same HH")
    for name, c in out["configs"].items():
        print(f"  {name:<22} {c['wall_s']:>8.1f} {c['cpu_s']:>8.1f} {c['peak_rss_mb']:>8.0f} "
              f"{c['bytes_per_device']:>9,} {c['heavy_hitters']:>4}  "
              f"{c['same_heavy_hitters_as_validated']}")
    for name, r in out["ratios_to_validated"].items():
        print(f"  {name} / validated: CPU {r['cpu']}x, wall {r['wall']}x")
    return 0
