"""``fedhh client``: one process running many secure-aggregation clients.

Runs the clients ``--ids A:B`` (roster positions A..B-1) of one session as asyncio
tasks, each with its own TLS connection to ``--connect HOST:PORT``, pinning the
certificate in ``--keys``. Inputs are the seeded experiment's (``--seed``). Prints one
JSON line: the clients' outcomes, bytes and CPU. ``--stall`` / ``--stall-at`` make the
named clients hang before that round's message (a fault for experiments).

``--job triehh``: the clients are devices of a TrieHH job served by ``fedhh triehh
--transport secagg --network HOST:PORT``. Each holds its own word of the seeded
population (the dataset options, the same as the server's) and votes on each round's
candidates itself (:class:`mechanisms.triehh.ClientVoter`); the session options
(``--threat``, ``--graph``, ``--dropout-rate``) must match the server's
(``--threat``, ``--secagg-graph``, ``--dropout``). ``--clients``, ``--dim``,
``--modulus`` and ``--label`` do not apply: each round's session follows from its
sample and candidates.

``--job triehh --transport threshold``: devices of a committee job (``fedhh triehh
--transport threshold --network``): each round's Task comes with the committee's signed
sample seed, which the device checks before it votes
(:mod:`protocol.core.net.committee_job`); the roster holds the two helpers' keys last,
and their X25519 report keys. Under the malicious model each sampled device sends its
validated report (its vote shared among the three members, the helpers' parts
encrypted to their keys, signed with its roster key); ``--committee-input secagg``
joins a secure-aggregation session instead (as the server and helpers must be told).
The corrupted-client options of the in-process commands (``--corrupt-clients K``,
``--corrupt-users``, ``--corrupt-share``, ``--corrupt-strategy``, ``--corrupt-target``,
``--corrupt-seed``) make the devices each round's draw corrupts (the same draw on every
side: :func:`protocol.core.corruption.corrupt_positions` over the round's sample) send
their strategy's input.

``--job ldp``: devices of ``fedhh ldp --transport secagg --network HOST:PORT``. Each
holds its own value of the seeded population (the oracle and population options, the
same as the server's), randomises it itself (:class:`mechanisms.fo.ClientReporter`;
fresh OS entropy per report, or ``--seeded-noise`` for a checkable simulation) and
contributes its report's support vector. The round's task name binds the oracle's
public parameters, so a device configured differently refuses it.

Every job device keeps its ledger in ``--state-dir`` (default the ``--keys`` directory;
``ledger/devices/device-<id>.json``, written once it votes): its votes per task over all
jobs (the budget), and the job instances and rounds it voted in, so a restarted job
cannot make it vote past its budget or on a sample proof of an earlier job.
"""
from __future__ import annotations

import argparse

from protocol.cli.net_args import exit_status


def _ids(text: str) -> range:
    a, sep, b = text.partition(":")
    if not sep or not a.isdigit() or not b.isdigit() or int(a) >= int(b):
        raise argparse.ArgumentTypeError(f"expected A:B with A < B, got {text!r}")
    return range(int(a), int(b))


def _list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ids, got {text!r}") from None


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import add_session_args, host_port

    p = cli.command("client", "run secure-aggregation or shuffler clients as network peers",
                    run)
    p.add_argument("--transport", choices=("secagg", "shuffler", "threshold"),
                   default="secagg",
                   help="the transport (default secagg; shuffler: each client sends its "
                        "seeded vote through the shuffler; threshold: its seeded vote into "
                        "the committee's session)")
    p.add_argument("--keys", required=True,
                   help="directory with server.crt (pinned), roster.json, signing.keys")
    p.add_argument("--connect", type=host_port, required=True, help="server HOST:PORT")
    p.add_argument("--ids", type=_ids, default=None,
                   help="roster positions A:B to run (default: all of them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the experiment's inputs")
    p.add_argument("--wait-seconds", type=float, default=300.0, dest="wait_seconds",
                   help="give up when the server is silent this long (default 300)")
    p.add_argument("--stall", type=_list, default=[], help="clients that hang (fault)")
    p.add_argument("--stall-at", type=int, choices=range(5), default=None, dest="stall_at",
                   help="the round before which --stall clients hang")
    add_session_args(p)
    from protocol.cli.net_args import add_shuffle_round_args

    add_shuffle_round_args(p)
    from protocol.cli.net_args import add_job_args

    g = add_job_args(p, "be devices of a job instead of one session (docs/network.md)")
    g.add_argument("--seeded-noise", action="store_true", dest="seeded_noise",
                   help="draw each device's LDP noise from --seed and its index (a "
                        "simulation whose sums can be checked; default: fresh OS entropy)")
    from protocol.cli.net_args import add_committee_input_arg
    from protocol.cli.transport_options import add_corrupt_args

    add_committee_input_arg(p)
    add_corrupt_args(p)
    from protocol.cli.net_args import add_ledger_args

    add_ledger_args(p, helper=False)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import spec_from_args
    from protocol.core.net.processes import client_process

    from protocol.cli.net_args import resolve_job_session_args, resolve_session_args

    if args.stall and args.stall_at is None:
        raise UsageError("--stall needs --stall-at")
    if args.job is None:
        from protocol.cli.net_args import refuse_ledger_args_without_job

        refuse_ledger_args_without_job(args)
    if args.transport == "shuffler":
        return _run_shuffler(args)
    if args.transport == "threshold" and args.job is None:
        return _run_threshold(args)
    if args.job is not None:
        resolve_job_session_args(args)
        return _run_job(args)
    resolve_session_args(args)
    spec = spec_from_args(args)
    host, port = args.connect
    ids = args.ids if args.ids is not None else range(spec.n)
    try:
        summary = client_process(spec, args.keys, host, port, ids, seed=args.seed,
                                 wait_seconds=args.wait_seconds, stall=args.stall,
                                 stall_at=args.stall_at)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return exit_status(set(summary["status"]) <= {"completed", "stalled"}, summary,
                       f"clients of {host}:{port}")


def _run_job(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.core.net.job import JobPolicy
    from protocol.core.net.processes import job_client_process
    from protocol.studies.errors import StudyError

    from protocol.cli.net_args import committee_input_from_args, job_corrupt_from_args

    committee = args.transport == "threshold"
    if committee and args.job != "triehh":
        raise UsageError("a committee job (--transport threshold) runs --job triehh: the "
                         "committee thresholds vote rounds")
    committee_input = committee_input_from_args(args, committee, args.threat)
    corrupt = job_corrupt_from_args(args, committee, committee_input, args.threat)
    try:
        min_theta, m = 0, 0
        if args.job == "triehh":
            population, job, contribution_of, ids, max_votes, min_theta, m = \
                _triehh_devices(args)
        else:
            population, job, contribution_of, ids, max_votes = _ldp_devices(args)
        policy = JobPolicy(job, population, threat=args.threat, graph=args.graph,
                           dropout=args.dropout_rate, max_votes=max_votes,
                           committee=committee, min_theta=min_theta, sample_size=m,
                           committee_input=committee_input)
    except (StudyError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    host, port = args.connect
    from protocol.cli.net_args import device_ledger_from_args

    try:
        summary = job_client_process(policy, args.keys, host, port, ids, contribution_of,
                                     wait_seconds=args.wait_seconds, stall=args.stall,
                                     stall_at=args.stall_at, corrupt=corrupt,
                                     ledger=device_ledger_from_args(args))
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return exit_status(set(summary["status"]) <= {"finished", "stalled"}, summary,
                       f"devices of the job at {host}:{port}")


def _held(args: argparse.Namespace, population: int) -> range:
    ids = args.ids if args.ids is not None else range(population)
    if ids.stop > population:
        raise ValueError(f"--ids must be within the population of {population}")
    return ids


def _triehh_devices(args: argparse.Namespace):  # noqa: ANN202
    """TrieHH devices: each votes for its own word's prefix (ClientVoter)."""
    from mechanisms.triehh import ClientVoter, TrieHHError
    from protocol.cli.net_args import job_options
    from protocol.studies.runners import triehh

    prep, _ = triehh.prepare(job_options(triehh.TrieHHOptions, args))
    ids = _held(args, prep.n)
    try:
        voter = ClientVoter(prep.data, list(ids), prep.alphabet, prep.config.max_levels)
    except TrieHHError as exc:
        raise ValueError(str(exc)) from None

    def contribution_of(member: int, task) -> int:  # noqa: ANN001
        return int(voter.votes([member], task.round, task.candidates)[0])

    # the ledger: at most one vote per level, L levels (the rounds TrieHH's analysis
    # composes over); the stale-round rule keeps it to one per level
    from mechanisms.triehh_privacy import batch_size

    # theta and m are public parameters of the job: a Task with a lower theta or
    # another sample size is refused
    return (prep.n, prep.config.task, contribution_of, ids, prep.config.max_levels,
            int(prep.config.theta), batch_size(prep.config.gamma, prep.n))


def _ldp_devices(args: argparse.Namespace):  # noqa: ANN202
    """Frequency-oracle devices: each randomises its own value (ClientReporter)."""
    from mechanisms.fo import ClientReporter
    from protocol.cli.net_args import job_options
    from protocol.studies.runners import ldp

    opts = job_options(ldp.LDPOptions, args)
    values, _, oracle, _ = ldp.population_and_oracle(opts)
    n = int(values.shape[0])
    ids = _held(args, n)
    rng_for = (ClientReporter.seeded(args.seed) if args.seeded_noise
               else ClientReporter.os_entropy)
    reporter = ClientReporter(oracle, values[ids.start:ids.stop], ids, rng_for)

    def contribution_of(member: int, task):  # noqa: ANN001, ANN202
        return reporter.vector(member, task.round, task.dim, task.modulus_minus_one + 1,
                               len(task.sample))

    # no cap: the reporter memoises each device's report for the job (one epsilon)
    return n, ldp.job_name(oracle), contribution_of, ids, None


def _run_shuffler(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import resolve_shuffler_session_args, shuffle_round_from_args
    from protocol.core.net.processes import shuffle_client_process

    resolve_shuffler_session_args(args)
    if args.job is not None or args.stall:
        raise UsageError("--job and --stall apply to secure aggregation")
    rnd = shuffle_round_from_args(args)
    host, port = args.connect
    ids = args.ids if args.ids is not None else range(rnd.n)
    try:
        summary = shuffle_client_process(rnd, args.keys, host, port, ids, seed=args.seed,
                                         wait_seconds=args.wait_seconds)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return exit_status(set(summary["status"]) <= {"completed"}, summary,
                       f"clients of {host}:{port}")


def _run_threshold(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import threshold_round_from_args
    from protocol.core.net.processes import threshold_client_process

    if args.job is not None or args.stall:
        raise UsageError("--job and --stall apply to --transport secagg")
    rnd = threshold_round_from_args(args)
    host, port = args.connect
    ids = args.ids if args.ids is not None else range(rnd.vote.n)
    try:
        summary = threshold_client_process(rnd, args.keys, host, port, ids, seed=args.seed,
                                           wait_seconds=args.wait_seconds)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return exit_status(set(summary["status"]) <= {"completed"}, summary,
                       f"clients of {host}:{port}")
