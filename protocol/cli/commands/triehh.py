"""``fedhh triehh``: run TrieHH (Zhu et al. 2020) on a dataset over a transport
(:mod:`protocol.studies.runners.triehh`).

With ``--network HOST:PORT`` the command is the server of a TrieHH job that client
processes (``fedhh client --job triehh``) join over TLS: it samples, sends each round's
candidates, runs one secure-aggregation session per round with the sampled clients
and learns each round's sum, never a vote (:mod:`protocol.core.net.job`). With
``--transport threshold`` the job runs over the thresholding committee: two ``fedhh
helper --job triehh`` processes join every round, each round's sample comes from the
committee's beacon, and the server learns only which prefixes passed
(:mod:`protocol.core.net.committee_job`). It reads
the dataset only for the population's size, the alphabet and to score the result
against the truth; the votes come from the clients.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.args import add_triehh_args
    from protocol.cli.net_args import add_network_server_args

    p = cli.command("triehh", "discover heavy hitters with TrieHH (Zhu et al. 2020)", run,
                    description="Run TrieHH: sampled users vote on prefix extensions; "
                    "prefixes with at least theta votes grow the trie. theta and gamma "
                    "come from Corollary 1 for the target (epsilon, delta).")
    add_triehh_args(p, committee=False)
    p.add_argument("--show", type=int, default=30,
                   help="heavy hitters to list in the human-readable output (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from protocol.cli.args import add_quiet_arg

    add_quiet_arg(p)
    add_network_server_args(p)
    from protocol.cli.transport_options import add_committee_args

    # --committee-input comes with the network options (the same for a job); this
    # adds --min-valid-fraction, which only the simulation takes
    add_committee_args(p)


def run(args: argparse.Namespace) -> int:
    from protocol.cli.args import options_from
    from protocol.cli.output import ClientProgress, print_json, print_triehh, progress_bar, say
    from protocol.cli.transport_options import transport_from_args
    from protocol.studies.runners import triehh

    from protocol.cli.args import corollary_target_rules, refuse_unused

    refuse_unused(args, [
        *corollary_target_rules(args),
        ("--show", "show", 30, not args.json,
         "limits the words printed; --json holds every heavy hitter"),
    ])
    if args.network is not None:
        from protocol.cli import UsageError
        from protocol.cli.transport_options import CORRUPT_FLAGS

        given = [f for d, f in CORRUPT_FLAGS.items() if getattr(args, d, None) is not None]
        if given:
            raise UsageError(f"{given[0]} simulates corrupted clients; over --network the "
                             "devices vote themselves")
        if args.min_valid_fraction is not None:
            raise UsageError("--min-valid-fraction applies to a simulated committee, not "
                             "to --network")
        return _run_network(args)
    transport = transport_from_args(args)  # refuse bad options before loading data
    opts = options_from(triehh.TrieHHOptions, args)
    chatty = not args.quiet
    out = triehh.run(opts, transport,
                     progress_bar(opts.max_length, "TrieHH rounds",
                                  enabled=chatty and not args.json),
                     client_progress=ClientProgress(
                         enabled=chatty,
                         label=getattr(transport, "progress_label", "secure aggregation")),
                     say=say(chatty))
    if args.json:
        print_json(out)
    else:
        print_triehh(out, args.show)
    return 0


def _run_network(args: argparse.Namespace) -> int:
    from mechanisms.triehh_privacy import batch_size
    from protocol.cli.args import options_from
    from protocol.cli.net_args import serve_job
    from protocol.cli.output import print_json, print_triehh, progress_bar
    from protocol.studies.runners import triehh

    committee = getattr(args, "transport", "secagg") == "threshold"
    opts = options_from(triehh.TrieHHOptions, args,
                        transport="threshold-network" if committee else "secagg-network")
    prepared = triehh.prepare(opts)
    prep = prepared[0]
    bar = progress_bar(opts.max_length, "TrieHH rounds", enabled=not args.quiet and not args.json)
    out, network = serve_job(args, prep.config.task, prep.n,
                             lambda transport: triehh.run(opts, transport, bar,
                                                          prepared=prepared),
                             min_theta=int(prep.config.theta), committee_ok=True,
                             sample_size=batch_size(prep.config.gamma, prep.n))
    out["network"] = network
    if args.json:
        print_json(out)
    else:
        print_triehh(out, args.show)
        net = out["network"]
        print(f"network: {len(net['rounds'])} rounds, {net['joined']} of {prep.n} clients "
              f"connected, {net['wall_seconds']:.1f} s in sessions, "
              f"{net['bytes_up']:,} B up, {net['bytes_down']:,} B down")
    return 0
