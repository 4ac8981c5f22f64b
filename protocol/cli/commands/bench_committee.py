"""``fedhh bench committee``: the thresholding committee's comparison, verified (the
malicious default) against semi-honest, on the same counts.

Runs both committees alternately (``--runs`` times each) on ``--candidates`` counts at
``--theta`` and prints medians: CPU per candidate and member, bytes each member sends
per candidate, their ratios, the statistical security of the verified one, and whether
both opened exactly the plaintext rule
(:func:`protocol.studies.runners.benchmarks.bench_committee`).
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "committee",
                       "time the committee's comparison: verified vs semi-honest", run)
    p.add_argument("--candidates", type=int, default=2000,
                   help="counts compared (default 2000)")
    p.add_argument("--theta", type=int, default=12, help="the threshold (default 12)")
    p.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    p.add_argument("--clients", type=int, default=10_000,
                   help="clients of the round: sets the semi-honest ring (default 10000)")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json
    from protocol.studies.errors import StudyError
    from protocol.studies.runners.benchmarks import bench_committee

    for name in ("candidates", "theta", "runs", "clients"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1")
    if args.candidates > 1 << 20 or args.theta > 1 << 12:
        raise UsageError("--candidates is at most 2^20 and --theta at most 4096 here")
    try:
        out = bench_committee(args.candidates, args.theta, args.runs, args.seed,
                              args.clients)
    except StudyError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    print(f"committee: {out['candidates']:,} candidates, theta {out['theta']}, "
          f"{out['runs']} runs each, correct = {out['correct']}")
    for name in ("verified", "semi_honest"):
        r = out[name]
        print(f"  {name:<12} {r['cpu_us_per_candidate_and_member']:8.2f} us CPU and "
              f"{r['bytes_per_candidate_and_member']:7.1f} bytes per candidate and member")
    ratio = out["verified_over_semi_honest"]
    print(f"  verified / semi-honest: CPU {ratio['cpu']}x, bytes {ratio['bytes']}x; "
          f"statistical security {out['statistical_security_bits']} bits")
    return 0
