"""``fedhh ldp``: run one local-DP frequency oracle on a population and compare the
estimates with the truth.

The population is either a synthetic Zipf(s) population of ``--users`` users over
``--domain`` items (generated here; item 0 is the most likely) or a text file with one
item per line. For a file, the ``--domain`` most frequent items form the domain (all
distinct items by default) and the rest are out-of-domain values, which the oracle maps
to its dummy item (:mod:`protocol.studies.runners.ldp`).

With ``--transport secagg --network HOST:PORT`` the command is the server of a
one-round job that client processes (``fedhh client --job ldp``) join over TLS: every
device randomises its own value and contributes its support vector; the server learns
only the sum (docs/network.md).
"""
from __future__ import annotations

import argparse
import sys


def register(cli) -> None:  # noqa: ANN001
    from protocol.studies.runners.ldp import MECHANISMS

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
    p.add_argument("--bound", default=None,
                   help="amplification bound for --transport shuffler (default fmt23_numerical)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)
    from protocol.cli.net_args import add_network_server_args

    add_network_server_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.args import options_from
    from protocol.cli.output import print_json
    from protocol.cli.transport_options import transport_from_args, transport_options
    from protocol.studies.runners.ldp import LDPOptions
    from protocol.studies.runners.ldp import run as run_ldp

    from protocol.cli.args import refuse_unused

    network = None
    refuse_unused(args, [
        ("--g", "g", 0, args.mechanism == "olh",
         "is OLH's hash range: it applies to --mechanism olh only"),
        ("--B", "B", 0, args.mechanism == "aon",
         "is All-or-Nothing's bucket count: it applies to --mechanism aon only"),
        ("--zipf-s", "zipf_s", 1.1, args.dataset == "zipf",
         "is the synthetic Zipf population's exponent: it applies to --dataset zipf only"),
    ])
    for flag, value in (("--bound", args.bound), ("--delta", args.delta)):
        if value is not None and args.transport != "shuffler":
            raise UsageError(f"{flag} is the shuffler's amplified guarantee: it applies to "
                             "--transport shuffler only")
    args.bound = args.bound or "fmt23_numerical"
    # refuse options the transport does not take before building anything
    if args.network is not None:
        network = _serve(args)
        summary, carried = network
    elif args.transport == "none":
        transport_options(args)  # any transport option is an error here
        transport = None
    else:
        transport = transport_from_args(args)
    if network is None:
        summary, carried = run_ldp(options_from(LDPOptions, args), transport)
    if args.json:
        print_json(summary)
        return 0
    out = sys.stdout
    n, s = summary["users"], summary
    print(f"{s['mechanism'].upper()}  epsilon={s['epsilon']:g} (exact {s['effective_epsilon']:.9f}), "
          f"users={n}, domain={s['domain']}{' + dummy' if s['dummy'] else ''}"
          f"{''.join(f', {k}={v}' for k, v in s['params'].items())}", file=out)
    from protocol.studies.runners.ldp import choice_lines, input_lines

    for line in choice_lines(summary.get("input", {})):
        print(line, file=out)
    for line in input_lines(summary.get("input", {})):
        print(f"warning: {line}", file=out)
    if carried is not None:
        print(f"transport {carried.transport}: {carried.encoding}", file=out)
        c = carried.central
        if c is not None:
            print(f"central guarantee after shuffling {n} reports: ({c['epsilon']:.4f}, "
                  f"{c['delta']:.3g})-DP by {c['bound']} ({c['source']})"
                  f"{'; ' + c['note'] if 'note' in c else ''}", file=out)
    print(f"{'item':>16} {'true':>10} {'estimate':>10} {'error':>10} {'std':>9} {'z':>6}", file=out)
    for r in summary["top"]:
        print(f"{str(r['item'])[:16]:>16} {r['true']:10.5f} {r['estimate']:10.5f} "
              f"{r['error']:+10.5f} {r['std']:9.5f} {r['z']:+6.2f}", file=out)
    sec = summary["seconds"]
    print(f"MSE over the domain {summary['mse']:.3e} (analytical mean variance "
          f"{summary['mean_analytical_variance']:.3e}); randomize {sec['randomize']:.3f} s, "
          f"estimate {sec['estimate']:.3f} s", file=out)
    if "network" in summary:
        net = summary["network"]
        r = net["rounds"][0] if net["rounds"] else None
        if r is not None:
            print(f"network: {r['in_sum']} of {net['joined']} connected clients in the sum "
                  f"(k = {r['degree']}, t = {r['threshold']}, {r['threat']}), "
                  f"{r['wall_seconds']:.2f} s, {net['bytes_up']:,} B up, "
                  f"{net['bytes_down']:,} B down", file=out)
    return 0


def _serve(args: argparse.Namespace):  # noqa: ANN202
    """``--network``: serve the round to client processes; ``(summary, carried)``."""
    from protocol.cli import UsageError
    from protocol.cli.args import options_from
    from protocol.cli.net_args import serve_job
    from protocol.studies.errors import StudyError
    from protocol.studies.runners.ldp import LDPOptions, job_name, population_and_oracle
    from protocol.studies.runners.ldp import run as run_ldp

    opts = options_from(LDPOptions, args, transport="secagg-network")
    try:
        values, _, oracle, _ = population_and_oracle(opts)
    except StudyError as exc:
        raise UsageError(str(exc)) from None
    (summary, carried), network = serve_job(args, job_name(oracle), int(values.shape[0]),
                                            lambda transport: run_ldp(opts, transport))
    summary["network"] = network
    return summary, carried
