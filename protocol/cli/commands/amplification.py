"""``fedhh privacy shuffle``: central (epsilon, delta) of n shuffled epsilon0-LDP reports.

Forward: ``fedhh privacy shuffle --users 659380 --epsilon0 4.96 --delta 1/n^2`` prints the
central epsilon each bound in :mod:`shuffler.amplification` certifies.
Inverse: ``fedhh privacy shuffle --users 659380 --inverse --central-epsilon 1 --delta 1/n^2``
prints the largest local epsilon0 each bound allows for that central target.
See docs/amplification.md; the table is
:func:`protocol.studies.runners.amplification.bound_table`.
"""
from __future__ import annotations

import argparse
import json
import math


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand(
        "privacy", "shuffle",
        "central epsilon of n shuffled epsilon0-LDP reports (or the inverse), per bound",
        run)
    p.add_argument("--n", type=int, required=True, help="number of shuffled reports")
    p.add_argument("--epsilon0", type=float, default=None,
                   help="local epsilon of each report (forward direction)")
    p.add_argument("--delta", type=str, required=True,
                   help="central delta, a number or the literal 1/n^2")
    p.add_argument("--bound", default=None,
                   help="one bound name (default: all of them, which the output lists by name)")
    p.add_argument("--inverse", action="store_true",
                   help="find the largest epsilon0 meeting --central-epsilon instead")
    p.add_argument("--central-epsilon", type=float, default=None,
                   help="central epsilon target (with --inverse)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _parse_delta(text: str, n: int) -> float:
    from protocol.cli import UsageError

    t = text.strip().replace(" ", "").lower()
    if t in ("1/n^2", "1/n**2", "n^-2"):
        return 1.0 / float(n) ** 2
    try:
        value = float(t)
    except ValueError:
        raise UsageError(f"--delta must be a number or 1/n^2, got {text!r}") from None
    if not (0.0 < value < 1.0):
        raise UsageError(f"--delta must satisfy 0 < delta < 1, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.studies.runners.amplification import bound_table
    from shuffler import amplification as amp

    if args.n is None or args.n < 1:
        raise UsageError(f"--n must be a positive integer, got {args.n!r}")
    delta = _parse_delta(args.delta, args.n)
    if args.bound is not None and args.bound not in amp.BOUNDS:
        raise UsageError(f"unknown --bound {args.bound!r}; choose from {', '.join(amp.BOUNDS)}")
    names = [args.bound] if args.bound else list(amp.BOUNDS)
    if args.inverse:
        if args.central_epsilon is None:
            raise UsageError("--inverse needs --central-epsilon")
        if args.epsilon0 is not None:
            raise UsageError("--epsilon0 is the output of --inverse; do not pass it")
        x, x_name, y_name = args.central_epsilon, "central_epsilon", "epsilon0"
    else:
        if args.epsilon0 is None:
            raise UsageError("give --epsilon0 (or --inverse --central-epsilon E)")
        if args.central_epsilon is not None:
            raise UsageError("--central-epsilon is only used with --inverse")
        x, x_name, y_name = args.epsilon0, "epsilon0", "central_epsilon"
    if not math.isfinite(x) or x < 0:
        raise UsageError(f"--{x_name.replace('_', '-')} must be finite and >= 0, got {x!r}")

    rows = bound_table(args.n, x, delta, names, inverse=args.inverse)
    if args.json:
        print(json.dumps({"n": args.n, "delta": delta, x_name: x,
                          "direction": "inverse" if args.inverse else "forward",
                          "results": rows}, indent=2))
    else:
        head = (f"n = {args.n}, delta = {delta:.6g}, "
                f"{'central epsilon' if args.inverse else 'local epsilon0'} = {x:g}")
        print(head)
        label = "largest epsilon0" if args.inverse else "central epsilon"
        print(f"{'bound':<20} {label:>16} {'seconds':>8}  source")
        for r in rows:
            v = r[y_name]
            shown = f"{v:.6f}" if v is not None else "n/a"
            mark = " *" if r["trivial"] else "  "
            print(f"{r['bound']:<20} {shown:>16}{mark}{r['seconds']:>8.3f}  {r['source']}")
            if r["error"]:
                print(f"{'':<20} {r['error']}")
        if any(r["trivial"] for r in rows):
            print("* no amplification certified: only the trivial (epsilon0, 0) guarantee")
    return 0 if any(r[y_name] is not None for r in rows) else 1
