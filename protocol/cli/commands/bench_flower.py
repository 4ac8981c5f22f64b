"""``fedhh bench flower``: our SecAgg+ round against Flower's, same n, vector length, k
and t, interleaved, process CPU time (medians).

Needs Flower (``pip install 'flwr==1.42.0'``, best in its own environment: it is a
large install and not a dependency of fedhh). Flower's side runs its client stage
functions and its server's unmasking steps without its message framework, so the
speedup printed is a lower bound on the speedup over a Flower simulation
(:mod:`protocol.studies.runners.flower_compare`, ``docs/scaling.md``).

With ``--app``: the same Flower FedAvg app with Flower's SecAgg+ and with ours, fit
rounds alternating in one run, in Flower's simulation engine (``--engine ray``, needs
``flwr[simulation]``) or on fedhh's in-process grid (``--engine local``): CPU per round
of every process of the run, framework included, and bytes per node
(:mod:`protocol.flower.bench`, ``docs/flower.md``).
"""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "flower", "our SecAgg+ round against Flower's (needs flwr)",
                       run)
    p.add_argument("--clients", type=int, default=1000, help="number of clients n")
    p.add_argument("--dim", type=int, default=1000, help="vector length")
    p.add_argument("--degree", type=int, default=None,
                   help="neighbours per client k (even; default: our semi-honest k for n)")
    p.add_argument("--threshold", type=int, default=None,
                   help="shares needed t (default: our semi-honest t for n)")
    p.add_argument("--repeats", type=int, default=3,
                   help="interleaved repetitions of each round (medians)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs (keys: OS)")
    p.add_argument("--bare-sample", type=int, default=200, dest="bare_sample",
                   help="operations per primitive timed bare")
    p.add_argument("--allow-other-version", action="store_true", dest="allow_other_version",
                   help="run against a Flower version other than the one the driver was "
                        "written for")
    p.add_argument("--app", action="store_true",
                   help="whole Flower apps (secaggplus_mod vs fedhh_secagg_mod), rounds "
                        "interleaved, instead of the bare rounds")
    p.add_argument("--engine", choices=("ray", "local"), default="ray",
                   help="with --app: Flower's simulation engine or the in-process grid")
    p.add_argument("--rounds", type=int, default=6,
                   help="with --app: fit rounds, alternating, even (the first of each kind "
                        "is a warm-up left out; with 2, one of each, nothing is left out)")
    p.add_argument("--window", default="auto",
                   help="with --app: our workflow's window: at most N of a stage's "
                        "messages in Flower's LinkState at once, 'auto' (default: the "
                        "workflow's own, a sliding window of 8 in the simulation engine, "
                        "the stage at once on the in-process grid) or 'all' (a stage's "
                        "messages at once, as Flower's workflows send)")
    p.add_argument("--fedhh-only", action="store_true", dest="fedhh_only",
                   help="with --app: our rounds only (no Flower rounds, no ratio): to "
                        "compare our side before and after a change at large n")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.studies.runners.flower_compare import bench_flower

    if args.clients < 3:
        raise UsageError("--clients must be at least 3")
    if args.dim < 1:
        raise UsageError("--dim must be at least 1")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.bare_sample < 1:
        raise UsageError("--bare-sample must be at least 1")
    if args.app:
        return _app(args)

    def progress(name: str, r: int, cpu: float) -> None:
        if not args.json:
            print(f"  repeat {r + 1}/{args.repeats}: {name} {cpu:.2f} s CPU", file=sys.stderr,
                  flush=True)

    out = bench_flower(args.clients, args.dim, degree=args.degree, threshold=args.threshold,
                       repeats=args.repeats, seed=args.seed, bare_sample=args.bare_sample,
                       allow_other_version=args.allow_other_version, progress=progress)
    if args.json:
        from protocol.cli.output import print_json

        print_json(out)
        return 0
    w = sys.stdout.write
    w(f"SecAgg+ round, n = {out['clients']}, dim = {out['dim']}, k = {out['degree']}, "
      f"t = {out['threshold']} (Flower {out['flower_version']}, share_num "
      f"{out['flower_share_num']}); medians of {out['repeats']} interleaved runs, CPU s\n")
    w(f"  Flower (semi-honest)        {out['flower_cpu_median']:>9.2f}   "
      f"P-384 bare {out['flower_p384_ecdh_bare_seconds'] + out['flower_p384_keygen_bare_seconds']:.2f} s"
      f" (floor ratio {out['flower_floor_ratio']})\n")
    w(f"  fedhh semi-honest           {out['ours_cpu_median']:>9.2f}   "
      f"speedup {out['speedup']}x (X25519 bare {out['ours_x25519_bare_seconds']:.2f} s: "
      f"at most {out['speedup_if_ours_were_its_x25519']}x)\n")
    w(f"  fedhh malicious default     {out['ours_malicious_cpu_median']:>9.2f}   "
      f"speedup {out['speedup_malicious_default']}x (k = {out['malicious_degree']}, "
      f"t = {out['malicious_threshold']})\n")
    w(f"  Flower side: {out['what_flower_runs']}\n")
    return 0


def _app(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError

    if args.rounds < 2 or args.rounds % 2:
        raise UsageError("--rounds must be even and at least 2 with --app (2: one round "
                         "of each kind, no warm-up left out)")
    if args.dim < 2:
        raise UsageError("--dim must be at least 2 with --app")
    if args.window == "all":
        args.window = None
    elif args.window != "auto":
        try:
            args.window = int(args.window)
        except ValueError:
            raise UsageError(f"--window must be a number, auto or all, got "
                             f"{args.window!r}") from None
        if args.window < 1:
            raise UsageError("--window must be at least 1")
    try:
        from protocol.flower.bench import bench_app
        from protocol.flower.session import FlowerSecAggError

        def progress(row: dict) -> None:
            import json

            print(json.dumps(row, sort_keys=True), file=sys.stderr, flush=True)

        out = bench_app(args.clients, args.dim, rounds=args.rounds, engine=args.engine,
                        seed=args.seed, window=args.window,
                        modes="fedhh" if args.fedhh_only else "alternate",
                        progress=progress)
    except ImportError as exc:
        raise UsageError(f"fedhh bench flower --app needs Flower ({exc}); install "
                         "fedhh[flower] and, for --engine ray, flwr[simulation]") from None
    except (FlowerSecAggError, ValueError, RuntimeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        from protocol.cli.output import print_json

        print_json(out)
        return 0
    w = sys.stdout.write
    if args.fedhh_only:
        w(f"Flower FedAvg app with fedhh only, n = {out['nodes']}, d = {out['dim']}, "
          f"engine {out['engine']}, window {out['window']}: "
          f"{out['fedhh_cpu_median']:.2f} s CPU per round, "
          f"{out['fedhh_bytes_per_node']} B/node\n")
        return 0
    w(f"Flower FedAvg app, n = {out['nodes']}, d = {out['dim']}, engine {out['engine']}, "
      f"{out['rounds']} fit rounds alternating "
      f"({'first of each kind left out' if out['warmup_left_out'] else 'none left out'})\n")
    w(f"  Flower SecAgg+ (semi-honest, share_num {out['flower_share_num']}, "
      f"t {out['threshold']}): {out['flower_cpu_median']:.2f} s CPU, "
      f"{out['flower_bytes_per_node']} B/node\n")
    w(f"  fedhh (malicious, k {out['degree']}, t {out['threshold']}): "
      f"{out['fedhh_cpu_median']:.2f} s CPU, {out['fedhh_bytes_per_node']} B/node\n")
    w(f"  CPU ratio {out['cpu_ratio']}x, wall ratio {out['wall_ratio']}x\n")
    return 0
