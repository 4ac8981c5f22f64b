"""``fedhh audit MECHANISM``: empirical lower bound on a mechanism's epsilon.

Runs the mechanism's own randomiser on two neighbouring inputs and reports a
Clopper-Pearson lower bound on epsilon (:mod:`protocol.studies.audit`), which must never
exceed the claimed epsilon; the exit status is 1 if it does. For TrieHH the claim is
Theorem 1 for one level (``--theta``, ``--gamma``, ``--n``) and the exact tight value
is reported too.
"""
from __future__ import annotations

import argparse

AUDITABLE = ("grr", "oue", "olh", "aon", "triehh")  # protocol.studies.audit.AUDITABLE (lazy import)


def register(cli) -> None:  # noqa: ANN001
    p = cli.command("audit", "empirical lower bound on a mechanism's epsilon (privacy audit)",
                    run)
    p.add_argument("mechanism", choices=AUDITABLE)
    p.add_argument("--epsilon", type=float, default=1.0,
                   help="claimed local epsilon of an LDP oracle (default 1)")
    p.add_argument("--samples", type=int, default=None,
                   help="runs per input (default 1000000)")
    p.add_argument("--domain", type=int, default=2, help="oracle domain size (default 2)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="probability that the bound is valid (default 0.95)")
    p.add_argument("--theta", type=int, default=10, help="TrieHH threshold (default 10)")
    p.add_argument("--gamma", type=float, default=2.0, help="TrieHH gamma (default 2)")
    p.add_argument("--n", type=int, default=10_000, help="TrieHH population (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.output import print_json
    from protocol.studies.audit import audit_mechanism
    from protocol.studies.measure import Timer

    samples = args.samples if args.samples is not None else 1_000_000
    timer = Timer()
    try:
        with timer.phase("audit"):
            out, bound, claim, ok = audit_mechanism(
                args.mechanism, epsilon=args.epsilon, samples=samples, seed=args.seed,
                domain_size=args.domain, confidence=args.confidence, theta=args.theta,
                gamma=args.gamma, n=args.n)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = {"mechanism": args.mechanism, **out, "seconds": timer.seconds.get("audit")}
    if args.json:
        print_json(out)
    else:
        print(f"{args.mechanism}: claimed epsilon {claim:.4f}, empirical lower bound "
              f"{bound:.4f} (confidence {args.confidence}, {samples} samples per input)")
        if args.mechanism == "triehh":
            print(f"  exact tight epsilon of one level: {out['exact_epsilon']:.4f} (word held "
                  f"by {out['worst_holders']} users); delta = {out['delta']:.3g}")
        print("  consistent with the claim" if ok else "  BOUND EXCEEDS THE CLAIM")
    return 0 if ok else 1
