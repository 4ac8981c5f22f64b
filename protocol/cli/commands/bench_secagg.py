"""``fedhh bench secagg``: one full secure-aggregation round on random inputs.

Prints (``--json``) one object with the configuration -- the threat model (``--threat
malicious|semi-honest``, default ``malicious``; ``--malicious`` is an alias of
``--threat malicious``), ``k``, ``t``, the minimum honest set ``min_honest`` (``alpha n``:
the fewest honest clients in any sum the server can learn under that threat model,
``alpha = min_honest / n``) and the ``log2`` failure bounds of the parameters --, whether the unmasked result equals
the plaintext sum over the clients whose masked input arrived (``correct``), wall time of
the round (``seconds``), CPU time of this process during the round (``cpu_seconds``; the
wall time exceeds it when other processes share the cores), CPU time per party, bytes
per client, and for each primitive family (key agreement, PRG, Shamir, AEAD, signatures,
KDF) the CPU time spent inside it during the round next to the bare cost of the same
operations (:mod:`protocol.core.secagg_profile`). The bare cost is timed on up to
``--bare-sample`` operations of each kind and scaled to the round's count
(``--bare-sample 0`` replays every operation; slow for large rounds). The round runs
once; its primitives are counted on every call and timed on every
``--profile-every``-th. Two CPU figures are reported and never mixed: the simulation's
(``cpu_seconds``, this process, which does pure work shared by the parties it plays
once: :mod:`secagg.memo`) and the devices' (``device_cpu_seconds``: nothing shared);
the primitive table and the floor ratios are the devices'.
The round is :func:`protocol.studies.runners.benchmarks.bench_secagg`.
"""
from __future__ import annotations

import argparse
from typing import Any


def register(cli) -> None:  # noqa: ANN001
    p = cli.subcommand("bench", "secagg", "benchmark one secure-aggregation round", run)
    p.add_argument("--clients", type=int, default=100, help="number of clients n")
    p.add_argument("--dim", type=int, default=1000, help="vector length")
    p.add_argument("--graph", choices=("complete", "harary"), default="harary",
                   help="complete graph (SecAgg) or Harary graph (SecAgg+)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="probability that a client drops, before a uniformly random round")
    from protocol.cli.transport_options import add_threat_arg

    add_threat_arg(p)
    p.add_argument("--malicious", action="store_const", const="malicious", default=None,
                   help="alias of --threat malicious (the default)")
    p.add_argument("--seed", type=int, default=None,
                   help="deterministic simulation seed (INSECURE keys; default: OS randomness)")
    p.add_argument("--modulus", type=int, default=1 << 32, help="arithmetic modulus R")
    p.add_argument("--grinding-bits", type=int, default=None, dest="grinding_bits",
                   help="parameters that keep their bound when the server may choose among "
                        "2^B graph seeds (default: secagg.params.default_grinding_bits, "
                        "0 unless --graph harary under the malicious threat model)")
    p.add_argument("--bare-sample", type=int, default=2000,
                   help="operations per primitive replayed bare (0: all)")
    p.add_argument("--profile-every", type=int, default=16, dest="profile_every",
                   help="time every N-th call of each primitive (all are counted; "
                        "1: time every call)")
    p.add_argument("--no-share-work", action="store_false", dest="share_work",
                   help="simulate without the session memo (every party computes "
                        "everything itself, as devices do)")
    p.add_argument("--compare-threats", action="store_true", dest="compare_threats",
                   help="the price of the malicious default in one run: semi-honest, "
                        "malicious, and semi-honest at the malicious (k, t), interleaved "
                        "--repeats times; prints medians and their ratios")
    p.add_argument("--repeats", type=int, default=1,
                   help="with --compare-threats: interleaved repetitions (medians); with "
                        "--workers/--cluster: pairs of runs (one process, then the "
                        "workers), alternating, for the median speedup")
    p.add_argument("--workers", type=int, default=1,
                   help="run the clients on N Dask worker processes, and the same round "
                        "on one worker for the speedup (default 1: this process only)")
    p.add_argument("--no-regroup", action="store_false", dest="regroup", default=None,
                   help="with --workers/--cluster: keep the clients on the shards of their "
                        "roster positions (default: regroup them by the neighbour graph's "
                        "ring once round 0 closes, so that fewer pairs span two workers)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run the clients on the Dask scheduler at ADDRESS")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _physical_memory() -> int | None:
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError

    from secagg.state import MAX_PARTICIPANTS

    if not 2 <= args.clients <= MAX_PARTICIPANTS:
        raise UsageError(f"--clients must be in [2, {MAX_PARTICIPANTS}] (the most "
                         f"participants of one session)")
    if args.dim < 1:
        raise UsageError("--dim must be at least 1")
    need = 4 * 8 * args.dim  # accumulator, input, mask and its expansion: uint64 each
    mem = _physical_memory()
    if mem is not None and need > mem:
        raise UsageError(f"--dim {args.dim} needs at least {need / 2**30:.1f} GiB "
                         f"(4 vectors of 8-byte entries); this machine has "
                         f"{mem / 2**30:.1f} GiB")
    if not 2 <= args.modulus <= 1 << 64:
        raise UsageError("--modulus must be in [2, 2**64]")
    if not 0.0 <= args.dropout < 1.0:
        raise UsageError("--dropout must be in [0, 1)")
    if args.grinding_bits is not None and not 0 <= args.grinding_bits <= 128:
        raise UsageError("--grinding-bits must be in [0, 128]")
    if args.malicious and args.threat not in (None, "malicious"):
        raise UsageError(f"--malicious contradicts --threat {args.threat}")
    threat = args.threat or args.malicious or "malicious"
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.profile_every < 1:
        raise UsageError("--profile-every must be at least 1")
    if args.repeats > 1 and not (args.compare_threats or args.workers > 1 or args.cluster):
        raise UsageError("--repeats repeats --compare-threats or the --workers/--cluster "
                         "comparison; give one of them")
    if args.compare_threats and (args.workers > 1 or args.cluster):
        raise UsageError("--compare-threats runs in this process; drop --workers/--cluster")
    if args.compare_threats:
        if args.threat is not None or args.malicious:
            raise UsageError("--compare-threats runs both threat models; drop --threat")
        return _compare_threats(args)
    from protocol.studies.runners.benchmarks import bench_secagg

    out = bench_secagg(args.clients, args.dim, graph=args.graph, dropout=args.dropout,
                       threat=threat, seed=args.seed, modulus=args.modulus,
                       bare_sample=args.bare_sample, grinding_bits=args.grinding_bits,
                       workers=args.workers, cluster=args.cluster,
                       profile_every=args.profile_every, share_work=args.share_work,
                       regroup=args.regroup, repeats=args.repeats)
    if args.json:
        from protocol.cli.output import print_json

        print_json(out)
    else:
        _print_table(out)
    return 0


def _compare_threats(args: argparse.Namespace) -> int:
    import sys

    from protocol.studies.runners.benchmarks import bench_threat_price

    def progress(name: str, row: dict[str, Any]) -> None:
        if not args.json:
            print(f"  {name}: k={row['degree']} t={row['threshold']} "
                  f"CPU {row['cpu_seconds']:.2f} s", file=sys.stderr)

    out = bench_threat_price(args.clients, args.dim, graph=args.graph,
                             dropout=args.dropout, seed=args.seed, modulus=args.modulus,
                             repeats=args.repeats, bare_sample=args.bare_sample,
                             grinding_bits=args.grinding_bits, progress=progress)
    if args.json:
        from protocol.cli.output import print_json

        print_json(out)
        return 0
    print(f"price of the malicious default: n={out['clients']} dim={out['dim']} "
          f"graph={out['graph']} dropout={out['dropout']} "
          f"({out['repeats']} interleaved repetitions, medians of process CPU)")
    print(f"  {'session':<38}{'k / t':>10}{'min honest':>12}{'CPU s':>9}{'sign. s':>9}"
          f"{'correct':>9}")
    for name, v in out["sessions"].items():
        print(f"  {name:<38}{str(v['degree']) + ' / ' + str(v['threshold']):>10}"
              f"{v['min_honest']:>12}{v['cpu_seconds_median']:>9.2f}"
              f"{v['signature_seconds_median']:>9.2f}{str(v['correct']):>9}")
    r = out["ratios"]
    print(f"  malicious / semi-honest {r['malicious_over_semi_honest']}x "
          f"(goal <= {out['goal']}x) = parameters {r['parameters']}x "
          f"x protocol {r['protocol']}x")
    return 0


def _print_table(out: dict[str, Any]) -> None:
    print(f"secagg round: n={out['clients']} dim={out['dim']} graph={out['graph']} "
          f"k={out['degree']} t={out['threshold']} R={out['modulus']} "
          f"dropout={out['dropout']} threat={out['threat']}")
    print(f"  the server learns only sums over >= {out['min_honest']} honest clients "
          f"(alpha = {out['alpha']}) with gamma = {out['corrupt_fraction']}, "
          f"delta = {out['dropout_budget']}; log2 P(security fails) "
          f"<= {out['log2_security_failure']}")
    print(f"  correct={out['correct']}  survivors={out['survivors']}  "
          f"abort={out['abort_reason']}")
    print(f"  wall {out['seconds']:.3f} s (process CPU {out['cpu_seconds']:.3f} s)   client CPU mean {out['client_seconds_mean']:.4f} s"
          f"   server CPU {out['server_seconds']:.3f} s   codec {out['codec_seconds']:.3f} s")
    print(f"  per device (nothing shared between parties): CPU {out['device_cpu_seconds']:.3f} s"
          f"   client CPU mean {out['device_client_seconds_mean']:.4f} s   over the bare "
          f"primitives {out['device_over_bare']}x")
    print(f"  bytes per client: up {out['bytes_up_per_client']:.0f}  "
          f"down {out['bytes_down_per_client']:.0f}  (expansion {out['expansion_up']}x)")
    print(f"  per-device round CPU / bare X25519 cost (floor ratio): {out['floor_ratio']} "
          f"(every primitive at its bare cost: {out['primitive_floor_ratio']})   peak memory "
          f"growth per client: {out['memory_per_client_kb']} KiB")
    d = out.get("distributed")
    if d:
        print(f"  on {d['workers']} {d['engine']} workers: wall {d['seconds']:.3f} s (CPU "
              f"{d['cpu_seconds']:.3f} s) vs {d['one_worker_seconds']:.3f} s on one: speedup "
              f"{d['speedup']}x, same release: {d['release_equal']}")
        if d.get("pairs"):
            print(f"  {d['repeats']} pairs, one process then the workers, alternating: "
                  f"speedups {', '.join(str(p['speedup']) for p in d['pairs'])}, median "
                  f"{d['speedup_median']}x, same release: {d['pairs_release_equal']}")
        moved = sum(d.get("regrouped_clients") or [])
        print(f"  clients regrouped by the graph's ring: {moved or 'none'}; pair "
              f"derivations on the workers: {d.get('pair_derivations')}")
    print(f"  primitives per device, from the round itself (every call counted, every "
          f"{out['profile_every']}th timed; simulation calls in brackets):")
    print(f"  {'primitive':<14}{'calls':>9}{'(sim.)':>9}{'in round s':>12}{'bare s':>10}"
          f"{'ratio':>8}")
    for k, v in out["primitives"].items():
        ratio = "-" if v["overhead_ratio"] is None else f"{v['overhead_ratio']:.2f}"
        sim = out["simulation_primitives"][k]["calls"]
        print(f"  {k:<14}{v['calls']:>9}{sim:>9}{v['seconds']:>12.4f}"
              f"{v['bare_seconds']:>10.4f}{ratio:>8}")
