"""``fedhh attack list`` and ``fedhh attack run NAME|all [--json]``: the attack catalogue.

Each attack (``protocol/studies/attacks/``) drives the honest clients, shuffler or TrieHH code
as an adversary would, and reports what every honest party did and what the adversary
measurably learned; ``run all`` prints the table of expected vs observed outcomes with
PASS/FAIL and exits non-zero if any attack missed its expectation.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    cli.subcommand("attack", "list", "list the attacks of the security test harness", run_list)
    p = cli.subcommand("attack", "run", "run one attack (or 'all') and report its outcome",
                       run_attack)
    p.add_argument("name", help="attack name from 'fedhh attack list', 'all', or a group "
                                "such as 'client.*'")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--markdown", action="store_true",
                   help="print the outcomes as the rows of docs/security.md's table")


def _load_catalogue() -> None:
    """The studies' catalogue and the Flower adapter's attacks (the adapter sits beside
    the CLI, so the studies cannot load it themselves; it runs without Flower)."""
    import protocol.flower.attacks  # noqa: F401  (registers the flower.* attacks)
    from protocol.studies.attacks import load_catalogue

    load_catalogue()


def run_list(args: argparse.Namespace) -> int:
    from protocol.studies.attacks import ATTACKS

    _load_catalogue()
    width = max(len(n) for n in ATTACKS)
    for name, info in ATTACKS.items():
        print(f"{name:<{width}}  [{info.kind}] {info.summary}")
        print(f"{'':<{width}}  targets: {info.target}")
        print(f"{'':<{width}}  expected: {info.expected}")
    return 0


def run_attack(args: argparse.Namespace) -> int:
    from protocol.studies.attacks import ATTACKS, UnknownAttack
    from protocol.studies.attacks import run_attack as run_one
    from protocol.cli.output import print_json
    from protocol.cli import UsageError

    _load_catalogue()
    if args.json and args.markdown:
        raise UsageError("choose one of --json and --markdown")
    group = args.name[:-1] if args.name.endswith(".*") else None
    if args.name == "all" or group is not None:
        from protocol.cli.output import progress

        names = [n for n in ATTACKS if group is None or n.startswith(group)]
        if not names:
            raise UsageError(f"no attack in the group {args.name!r}; groups: "
                             f"{', '.join(sorted({n.split('.')[0] + '.*' for n in ATTACKS}))}")
        # one attack after the other, in registration order (as run_all), with progress
        outcomes = [run_one(name, args.seed) for name in progress(
            names, total=len(names), desc="attacks",
            enabled=not (args.json or args.markdown))]
    else:
        try:
            outcomes = [run_one(args.name, args.seed)]
        except UnknownAttack:
            raise UsageError(f"unknown attack {args.name!r}; choose from: all, "
                             f"{', '.join(ATTACKS)}") from None
    failed = sum(not o.passed for o in outcomes)
    if args.json:
        print_json({"seed": args.seed, "attacks": [
            {**o.as_dict(), "system": ATTACKS[o.name].system, "kind": ATTACKS[o.name].kind,
             "target": ATTACKS[o.name].target} for o in outcomes],
            "passed": len(outcomes) - failed, "failed": failed})
        return 1 if failed else 0
    if args.markdown:
        print("| attack | targets | expected | observed | result |")
        print("| --- | --- | --- | --- | --- |")
        for o in outcomes:
            info = ATTACKS[o.name]
            kind = " (measured)" if info.kind == "measured" else ""
            cells = [f"{o.name}{kind}", info.target, info.expected, o.observed,
                     "PASS" if o.passed else "FAIL"]
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return 1 if failed else 0
    if len(outcomes) == 1:
        o = outcomes[0]
        print(f"attack:   {o.name}  ({ATTACKS[o.name].target})")
        print(f"expected: {ATTACKS[o.name].expected}")
        print(f"observed: {o.observed}")
        print(f"result:   {'PASS' if o.passed else 'FAIL'}  ({o.seconds:.2f} s)")
        if o.parties:
            print("honest parties:")
            for k, v in o.parties.items():
                print(f"  {k}: {v}")
        if o.leakage:
            print("measured:")
            for k, v in o.leakage.items():
                print(f"  {k}: {v}")
        return 0 if o.passed else 1
    width = max(len(o.name) for o in outcomes)
    print(f"{'attack':<{width}}  result  seconds  observed")
    for o in outcomes:
        print(f"{o.name:<{width}}  {'PASS' if o.passed else 'FAIL':<6}  {o.seconds:7.2f}  "
              f"{o.observed}")
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0
