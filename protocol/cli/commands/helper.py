"""``fedhh helper``: a helper of the thresholding committee (``fedhh serve --transport
threshold``).

Helper ``--index 1`` or ``2`` joins the round's secure-aggregation session as the
position after the clients (``--clients`` and ``--clients`` + 1), inputs a blinding
vector (under the malicious default derived, with its whole client, from a seed it
hands its auditor), and then runs the three-party comparison with the server and the
other helper. With ``--job triehh`` it is the helper of a whole committee job (``fedhh
triehh --transport threshold --network``): it stays connected for every round, runs each
round's sample beacon with the server and the other helper, signs the seed, checks the
round's Task and takes part in the intake of the devices' validated reports (decrypting
its parts with its X25519 report key from ``--keys``), their validity check and the
comparison, or with ``--committee-input secagg`` in the round's secure-aggregation
session and the comparison (:mod:`protocol.core.net.committee_job`). The link between the helpers is its
own TLS connection at ``--link HOST:PORT`` (helper 2 listens there, helper 1 connects),
each end pinning the other's certificate from ``--keys`` (``fedhh keys --committee``).
Prints one JSON line: what was opened (only what passed the threshold). The round's
options must be the server's. A job helper keeps its ledger in ``--state-dir`` (default
the ``--keys`` directory; ``ledger/helper<i>.json``): the jobs it joined and the beacons
it took part in per task, one beacon per task and round, and the jobs the server
abandoned after a beacon (``committee_job_abandoned_after_beacon``); past
``--max-abandoned`` (default 0) it refuses the task's further jobs. See docs/network.md
and docs/threshold.md.
"""
from __future__ import annotations

import argparse


def register(cli) -> None:  # noqa: ANN001
    from protocol.cli.net_args import (
        add_session_args, add_shuffle_round_args, host_port, listen_address,
    )

    p = cli.command("helper", "run a helper of the thresholding committee", run)
    p.add_argument("--index", type=int, choices=(1, 2), required=True, help="helper 1 or 2")
    p.add_argument("--keys", required=True,
                   help="directory from 'fedhh keys --committee' (server.crt pinned, the "
                        "roster, signing keys, the helpers' certificates)")
    p.add_argument("--connect", type=host_port, required=True, help="server HOST:PORT")
    p.add_argument("--link", type=listen_address, required=True,
                   help="the helpers' link: helper 2 listens on HOST:PORT, helper 1 "
                        "connects to it")
    p.add_argument("--wait-seconds", type=float, default=300.0, dest="wait_seconds",
                   help="give up when a peer is silent this long (default 300)")
    from protocol.core.net.committee_job import JOB_FAULTS

    p.add_argument("--fault", default=None, choices=JOB_FAULTS["helper"],
                   help="make this helper deviate (malicious model; for fault tests): "
                        "shift its share, hand its auditor another seed, enter another "
                        "blinding vector, or (--job only) reveal a beacon value its "
                        "commitment does not open or sign another seed")
    add_session_args(p)
    add_shuffle_round_args(p)
    from protocol.cli.net_args import add_job_args

    p.add_argument("--seed", type=int, default=None,
                   help="--job: the seed of the job's population, as the server's")
    add_job_args(p, "be a helper of a committee job (fedhh triehh --transport threshold "
                    "--network) for all its rounds, instead of one round; only triehh")
    from protocol.cli.net_args import add_committee_input_arg, add_ledger_args

    add_committee_input_arg(p)
    add_ledger_args(p, helper=True)


def run(args: argparse.Namespace) -> int:
    from protocol.cli import UsageError
    from protocol.cli.net_args import refuse_job_options_without_job, threshold_round_from_args
    from protocol.core.net.processes import helper_process

    if args.index == 1 and args.link[1] == 0:
        raise UsageError("helper 1 needs helper 2's --link port")
    if args.job is not None:
        return _run_job(args)
    refuse_job_options_without_job(args)
    from protocol.cli.net_args import refuse_ledger_args_without_job

    refuse_ledger_args_without_job(args)
    if args.seed is not None:
        raise UsageError("--seed belongs to a job: add --job triehh, or leave it out")
    from protocol.core.net.threshold_net import FAULTS

    if args.fault is not None and args.fault not in FAULTS["helper"]:
        raise UsageError(f"--fault {args.fault} applies to a job's beacon (--job triehh)")
    rnd = threshold_round_from_args(args)
    if args.fault is not None and not rnd.verified:
        raise UsageError("--fault needs the malicious model (--threat malicious)")
    host, port = args.connect
    try:
        result = helper_process(args.index, rnd, args.keys, host, port, args.link,
                                wait_seconds=args.wait_seconds, fault=args.fault)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    from protocol.cli.net_args import exit_status

    return exit_status(result["status"] == "completed", result, f"helper {args.index}")


def _run_job(args: argparse.Namespace) -> int:
    """``--job triehh``: the helper of every round of a committee job."""
    from protocol.cli import UsageError
    from protocol.cli.net_args import (
        committee_input_from_args, exit_status, job_options, resolve_job_session_args,
    )
    from protocol.core.net.committee_job import SECAGG_ONLY_FAULTS
    from protocol.core.net.job import JobPolicy
    from protocol.core.net.processes import job_helper_process
    from protocol.studies.errors import StudyError
    from mechanisms.triehh_privacy import batch_size
    from protocol.studies.runners import triehh

    if args.job != "triehh":
        raise UsageError("a committee job runs --job triehh (the committee thresholds "
                         "vote rounds)")
    resolve_job_session_args(args)
    if args.fault is not None and args.threat != "malicious":
        raise UsageError("--fault needs the malicious model (--threat malicious)")
    committee_input = committee_input_from_args(args, True, args.threat)
    if args.fault in SECAGG_ONLY_FAULTS and committee_input != "secagg":
        raise UsageError(f"--fault {args.fault} deviates in the secure-aggregation-fed "
                         "committee: add --committee-input secagg")
    try:
        prep, _ = triehh.prepare(job_options(triehh.TrieHHOptions, args))
        policy = JobPolicy(prep.config.task, prep.n, threat=args.threat, graph=args.graph,
                           dropout=args.dropout_rate, committee=True,
                           min_theta=int(prep.config.theta),
                           sample_size=batch_size(prep.config.gamma, prep.n),
                           committee_input=committee_input)
    except (StudyError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    host, port = args.connect
    from protocol.cli.net_args import helper_ledger_from_args

    ledger = helper_ledger_from_args(args)
    try:
        result = job_helper_process(args.index, policy, args.keys, host, port, args.link,
                                    wait_seconds=args.wait_seconds, fault=args.fault,
                                    ledger=ledger)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    return exit_status(result["status"] == "finished", result,
                       f"helper {args.index} of the job at {host}:{port}")
