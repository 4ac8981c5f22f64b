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
"""
from __future__ import annotations

import argparse


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

    p = cli.command("client", "run secure-aggregation clients as network peers", run)
    p.add_argument("--transport", choices=("secagg",), default="secagg",
                   help="the transport (secure aggregation)")
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
    from protocol.cli.args import add_triehh_data_args

    p.add_argument("--job", choices=("triehh",), default=None,
                   help="be devices of a job instead of one session (docs/network.md)")
    add_triehh_data_args(p.add_argument_group(
        "--job triehh: the population the devices' words come from (as the server's)"))


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import spec_from_args
    from protocol.core.net.processes import client_process

    if args.stall and args.stall_at is None:
        raise UsageError("--stall needs --stall-at")
    if args.job is not None:
        return _run_job(args)
    spec = spec_from_args(args)
    host, port = args.connect
    ids = args.ids if args.ids is not None else range(spec.n)
    try:
        summary = client_process(spec, args.keys, host, port, ids, seed=args.seed,
                                 wait_seconds=args.wait_seconds, stall=args.stall,
                                 stall_at=args.stall_at)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return 0 if set(summary["status"]) <= {"completed", "stalled"} else 1


def _run_job(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.args import options_from
    from protocol.core.net.job import JobPolicy
    from protocol.core.net.processes import job_client_process
    from protocol.studies.errors import StudyError
    from protocol.studies.runners import triehh

    opts = options_from(triehh.TrieHHOptions, args)
    try:
        prep, _ = triehh.prepare(opts)
        from mechanisms.triehh import ClientVoter, TrieHHError

        ids = args.ids if args.ids is not None else range(prep.n)
        if ids.stop > prep.n:
            raise UsageError(f"--ids must be within the population of {prep.n}")
        voter = ClientVoter(prep.data, list(ids), prep.alphabet, prep.config.max_levels)
        policy = JobPolicy(prep.config.task, prep.n, threat=args.threat, graph=args.graph,
                           dropout=args.dropout_rate)
    except (StudyError, TrieHHError, ValueError) as exc:
        raise UsageError(str(exc)) from None

    def vote_of(member: int, task) -> int:  # noqa: ANN001
        return int(voter.votes([member], task.round, task.candidates)[0])

    host, port = args.connect
    try:
        summary = job_client_process(policy, args.keys, host, port, ids, vote_of,
                                     wait_seconds=args.wait_seconds, stall=args.stall,
                                     stall_at=args.stall_at)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return 0 if set(summary["status"]) <= {"finished", "stalled"} else 1
