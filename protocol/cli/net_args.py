"""Options shared by the network commands (``fedhh serve``, ``fedhh client``,
``fedhh net run``): the session both sides derive their parameters from."""
from __future__ import annotations

import argparse
from typing import Any, Callable, TypeVar

from protocol.cli import count

T = TypeVar("T")

__all__ = ["add_session_args", "add_server_args", "spec_from_args", "host_port",
           "resolve_session_args", "resolve_job_session_args",
           "resolve_shuffler_session_args", "SESSION_DEFAULTS",
           "add_shuffle_round_args",
           "shuffle_round_from_args",
           "listen_address", "add_network_server_args", "job_policy_from_args", "serve_job",
           "add_job_args", "threshold_round_from_args", "add_committee_input_arg",
           "committee_input_from_args", "job_corrupt_from_args"]


#: the secure-aggregation session options and their defaults (the parsers leave them
#: None so that a command can tell which were given: :func:`resolve_session_args`)
SESSION_DEFAULTS = {"dim": 1000, "modulus": 1 << 32, "graph": "harary",
                    "label": "fedhh network session", "dropout_rate": 0.0,
                    "threat": "malicious"}
_SESSION_FLAGS = {"dim": "--dim", "modulus": "--modulus", "graph": "--graph",
                  "label": "--label", "dropout_rate": "--dropout-rate", "threat": "--threat"}


def add_session_args(p: argparse.ArgumentParser) -> None:
    from protocol.cli.transport_options import add_threat_arg

    g = p.add_argument_group("session (server and clients must give the same)")
    g.add_argument("--clients", type=count, default=100, help="roster size n (default 100)")
    g.add_argument("--dim", type=count, default=None, help="secagg: vector length (default 1000)")
    g.add_argument("--modulus", type=count, default=None,
                   help="secagg: modulus R (default 2^32)")
    g.add_argument("--graph", choices=("harary", "complete"), default=None,
                   help="secagg: SecAgg+ Harary graph (default) or the complete graph")
    g.add_argument("--label", default=None,
                   help="secagg: the session's label (its context is SHA-256 of it)")
    g.add_argument("--dropout-rate", type=float, default=None, dest="dropout_rate",
                   help="secagg: the fraction of dropouts the parameters must tolerate "
                        "(delta; at least the default of secagg.params)")
    add_threat_arg(g, default=None)


#: session options a job does not take: each round's session follows from its sample
#: and contributions
JOB_REFUSES = ("--dim", "--modulus", "--label")
#: session options the committee does not take: the vector length is the candidates',
#: the modulus the committee's ring
THRESHOLD_REFUSES = ("--dim", "--modulus")
#: every session option (the shuffler takes none)
SECAGG_ONLY = tuple(_SESSION_FLAGS.values())


def resolve_session_args(args: argparse.Namespace, refuse: tuple[str, ...] = (),
                         why: str = "") -> None:
    """Fill the secure-aggregation session options the command was not given with
    their defaults.

    Raises:
        protocol.cli.UsageError: an option in ``refuse`` was given (``why`` says why it
            does not apply).
    """
    from protocol.cli import UsageError

    refuse_job_options_without_job(args)
    wrong = [flag for name, flag in _SESSION_FLAGS.items()
             if flag in refuse and getattr(args, name, None) is not None]
    if wrong:
        raise UsageError(f"{', '.join(wrong)} {why}")
    for name, value in SESSION_DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def resolve_job_session_args(args: argparse.Namespace) -> None:
    """:func:`resolve_session_args` for a job (threat model, graph and dropout rate
    apply; :data:`JOB_REFUSES` does not)."""
    resolve_session_args(args, JOB_REFUSES, "does not apply to a job: each round's session "
                         "follows from its sample and contributions")


def resolve_shuffler_session_args(args: argparse.Namespace) -> None:
    """:func:`resolve_session_args` for the shuffler, which takes none of them."""
    resolve_session_args(args, SECAGG_ONLY, "applies to secure aggregation only")


def add_server_args(p: argparse.ArgumentParser) -> None:
    """``--sessions``, ``--stage-seconds``, ``--join-seconds`` (the server's schedule)."""
    p.add_argument("--sessions", type=int, default=1, help="sessions in a row (default 1)")
    p.add_argument("--stage-seconds", type=float, default=60.0, dest="stage_seconds",
                   help="the server's per-stage deadline (default 60)")
    p.add_argument("--join-seconds", type=float, default=60.0, dest="join_seconds",
                   help="how long a session waits for all its clients (default 60)")


def spec_from_args(args: argparse.Namespace):  # noqa: ANN201
    from protocol.cli import UsageError

    resolve_session_args(args)
    from protocol.core.net.session import NetSessionSpec

    try:
        return NetSessionSpec(args.clients, dim=args.dim, modulus=args.modulus,
                              threat=args.threat, graph=args.graph, label=args.label,
                              dropout=args.dropout_rate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def host_port(text: str, listen: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too; port 0 only where one listens)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not (0 if listen else 1) <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` to listen on (port 0: any free one)."""
    return host_port(text, listen=True)


def add_network_server_args(p: argparse.ArgumentParser) -> None:
    """``--network HOST:PORT`` and what a job's server needs (``fedhh triehh``)."""
    g = p.add_argument_group("network: run as the server of a job that client processes "
                             "join ('fedhh client --job ...'; docs/network.md)")
    g.add_argument("--network", type=listen_address, default=None, metavar="HOST:PORT",
                   help="listen on HOST:PORT (port 0: any free one, printed in the first "
                        "event on stderr); needs --transport secagg and --keys")
    g.add_argument("--keys", default=None,
                   help="directory made by 'fedhh keys' (its roster size is the population)")
    g.add_argument("--stage-seconds", type=float, default=60.0, dest="stage_seconds",
                   help="the server's per-stage deadline (default 60)")
    g.add_argument("--join-seconds", type=float, default=60.0, dest="join_seconds",
                   help="how long the job waits for the whole population (default 60)")
    g.add_argument("--server-view", default=None, dest="server_view", metavar="FILE",
                   help="write what the server learned in each round (candidates, sample, "
                        "who is in the sum, the sum) to FILE as JSON")
    from protocol.core.net.committee_job import JOB_FAULTS

    g.add_argument("--fault", default=None, choices=JOB_FAULTS["server"],
                   help="--transport threshold (malicious model): make this server deviate "
                        "(fault tests; each ends the job in its named abort)")


#: where a committee job's input comes from, the default first
COMMITTEE_INPUTS = ("reports", "secagg")


def add_committee_input_arg(p: argparse.ArgumentParser | Any) -> None:
    """``--committee-input reports|secagg`` (dest ``committee_input``, None when not
    given: the default, reports under the malicious model), the same option in a
    simulation (``ThresholdTransport(committee_input=)``) and in a committee job."""
    p.add_argument("--committee-input", choices=COMMITTEE_INPUTS, default=None,
                   dest="committee_input",
                   help="--transport threshold: what the committee counts: reports (the "
                        "default under the malicious model: each sampled device's vote "
                        "secret-shared among the three members, checked one-hot-or-zero on "
                        "the shares before it counts; an invalid one is dropped by name) or "
                        "secagg (the sum of a secure-aggregation session among the sample "
                        "and both helpers: no device's input is checked; the only one under "
                        "--threat semi-honest). In a job every party must give the same")


def committee_input_from_args(args: argparse.Namespace, committee: bool,
                              threat: str) -> str:
    """The committee input the arguments name: ``reports`` under the malicious model
    and ``secagg`` under the semi-honest one when none is given.

    Raises:
        protocol.cli.UsageError: given without a committee job, or ``reports`` under
            the semi-honest model.
    """
    from protocol.cli import UsageError

    given = getattr(args, "committee_input", None)
    if given is not None and not committee:
        raise UsageError("--committee-input applies to a committee job (--transport "
                         "threshold, --job triehh)")
    if given is None:
        return "reports" if threat == "malicious" else "secagg"
    if given == "reports" and threat != "malicious":
        raise UsageError("--committee-input reports needs the malicious model (--threat "
                         "malicious, the default): the semi-honest committee takes a "
                         "secure-aggregation sum")
    return given


def job_corrupt_from_args(args: argparse.Namespace, committee: bool,
                          committee_input: str, threat: str):  # noqa: ANN201
    """The corrupted devices of a committee job from the corrupted-client options
    (:func:`protocol.cli.transport_options.add_corrupt_args`, the same flags as the
    in-process commands'), or ``None``.

    Raises:
        protocol.cli.UsageError: given outside a committee job, or as
            :func:`~protocol.cli.transport_options.corrupt_from_args` (a report strategy
            without validated reports, two ways of naming who, bad values).
    """
    from protocol.cli import UsageError
    from protocol.cli.transport_options import CORRUPT_FLAGS, corrupt_from_args

    given = [f for d, f in CORRUPT_FLAGS.items() if getattr(args, d, None) is not None]
    if not given:
        return None
    if not committee:
        raise UsageError(f"{given[0]}: corrupted devices run in a committee job (--job "
                         "triehh --transport threshold)")
    return corrupt_from_args(args, "threshold", {"threat": threat,
                                                 "committee_input": committee_input})


#: the transport options a job takes (the others mean nothing over the network; keys
#: and protocol randomness always come from the OS there, so "simulate" is ignored)
_JOB_OPTIONS = {"graph", "threat", "dropout", "simulate", "committee_input"}


def job_policy_from_args(args: argparse.Namespace, job: str, population: int, *,
                         min_theta: int = 0, committee_ok: bool = False,
                         sample_size: int = 0):  # noqa: ANN201
    """The :class:`~protocol.core.net.job.JobPolicy` of ``fedhh triehh --network`` and
    ``fedhh client --job``: the threat model, graph and dropout rate of the secure
    aggregation options; with ``committee_ok``, ``--transport threshold`` makes it a
    committee job (:mod:`protocol.core.net.committee_job`).

    Raises:
        protocol.cli.UsageError: another transport, an option that does not apply over
            the network, or missing ``--keys``.
    """
    from protocol.cli import UsageError
    from protocol.cli.transport_options import transport_options
    from protocol.core.net.job import JobPolicy

    transport = getattr(args, "transport", "secagg")
    committee = transport == "threshold" and committee_ok
    if transport != "secagg" and not committee:
        raise UsageError("--network runs secure aggregation: give --transport secagg"
                         + (" or threshold" if committee_ok else ""))
    if getattr(args, "committee_input", None) is not None and not committee:
        raise UsageError("--committee-input applies to a committee job (--transport "
                         "threshold)")
    if getattr(args, "fault", None) is not None and not committee:
        raise UsageError("--fault applies to --transport threshold")
    if not args.keys:
        raise UsageError("--network needs --keys (a directory made by 'fedhh keys')")
    opts = transport_options(args)
    extra = sorted(set(opts) - _JOB_OPTIONS)
    if extra:
        raise UsageError(f"over the network, {', '.join(extra)} does not apply: the "
                         "clients run in their own processes")
    if getattr(args, "seed", None) is None:
        raise UsageError("--network needs --seed: the simulated devices' data (in the "
                         "client processes) and the scoring here come from that seed")
    threat = opts.get("threat", "malicious")
    committee_input = committee_input_from_args(args, committee, threat) if committee \
        else "reports"
    try:
        return JobPolicy(job, population, threat=threat,
                         graph=opts.get("graph", "harary"),
                         dropout=opts.get("dropout", 0.0), committee=committee,
                         min_theta=min_theta, sample_size=sample_size,
                         committee_input=committee_input)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def add_shuffle_round_args(p: argparse.ArgumentParser) -> None:
    """The shuffled vote round every party of ``--transport shuffler`` configures alike."""
    g = p.add_argument_group("shuffler round (clients, shuffler and analyzer must give "
                             "the same; --clients is the number of clients)")
    g.add_argument("--candidates", type=count, default=20,
                   help="shuffler: public candidates c0..c{C-1} (default 20)")
    g.add_argument("--threshold", type=count, default=3, dest="shuffle_threshold",
                   help="shuffler: the crowd threshold theta (default 3)")
    g.add_argument("--membership-only", action="store_true", dest="membership_only",
                   help="shuffler: release which candidates passed, not their counts "
                        "(one representative report per passing crowd)")
    g.add_argument("--round", type=int, default=0, dest="shuffle_round",
                   help="shuffler: the round (epoch) number (default 0)")
    g.add_argument("--min-batch", type=count, default=1, dest="min_batch",
                   help="shuffler: the smallest batch it forwards (default 1)")


def shuffle_round_from_args(args: argparse.Namespace):  # noqa: ANN201
    from protocol.cli import UsageError
    from protocol.core.net.shuffle import ShuffleRound

    try:
        return ShuffleRound(args.clients, candidates=args.candidates, theta=args.shuffle_threshold,
                            reveal_counts=not args.membership_only, round=args.shuffle_round,
                            min_batch=args.min_batch)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def serve_job(args: argparse.Namespace, job: str, population: int,
              run: Callable[[Any], T], *, min_theta: int = 0,
              committee_ok: bool = False, sample_size: int = 0
              ) -> tuple[T, dict[str, Any]]:
    """``--network``: listen, admit the population, call ``run(transport)`` (the
    mechanism's server side over :class:`~protocol.core.net.job.NetworkTransport`),
    end the job; ``(run's result, the network report)``. With ``--server-view FILE``
    the server's view of every round is written to FILE, also when the run fails.

    Raises:
        protocol.cli.UsageError: bad network options, keys, or the address cannot be
            served.
    """
    from protocol.cli import UsageError
    from protocol.core.net.committee_job import committee_transcript
    from protocol.core.net.job import server_transcript, serving_job
    from protocol.core.net.processes import job_report, job_server

    policy = job_policy_from_args(args, job, population, min_theta=min_theta,
                                  committee_ok=committee_ok, sample_size=sample_size)
    host, port = args.network
    try:
        server = job_server(policy, args.keys, host=host, port=port,
                            stage_seconds=args.stage_seconds, join_seconds=args.join_seconds,
                            fault=getattr(args, "fault", None))
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    transport = None
    try:
        with serving_job(server) as transport:
            result = run(transport)
            report = job_report(transport.reports)
            report["joined"] = len(server.connected)
    except Exception as exc:
        from protocol.cli import OperationalError
        from protocol.core.net.departures import aborted_in

        # a round that aborted over the network is a run that could not complete
        # (exit 1), said in one line that names who left and where when someone did
        if aborted_in(exc) is not None and getattr(server, "ending", None):
            raise OperationalError(str(server.ending)) from None
        if isinstance(exc, TimeoutError):  # an OSError in Python 3.11: not an address
            raise UsageError(f"the job timed out: {exc or 'a deadline passed'}") from None
        if isinstance(exc, OSError):
            raise UsageError(f"cannot serve on {host}:{port}: {exc}") from None
        raise
    finally:
        if args.server_view and transport is not None:
            import json

            with open(args.server_view, "w", encoding="utf-8") as f:
                json.dump(committee_transcript(transport) if policy.committee
                          else server_transcript(transport), f)
    return result, report


def add_job_args(p: argparse.ArgumentParser, job_help: str, mechanism: str = "olh",
                 domain: int | None = None) -> argparse._ArgumentGroup:
    """``--job triehh|ldp`` with what a job's parties must give alike: the TrieHH
    population and parameters, and the frequency oracle (``--dataset`` and
    ``--epsilon`` are left None: each job takes its own command's default). Returns the
    oracle's group, for options of one command only."""
    from protocol.cli.args import add_triehh_data_args
    from protocol.studies.runners.ldp import MECHANISMS

    p.add_argument("--job", choices=("triehh", "ldp"), default=None, help=job_help)
    before = len(p._actions)
    add_triehh_data_args(p.add_argument_group(
        "--job triehh and ldp: the population and parameters, as the server's (--dataset "
        "and --epsilon default to the mechanism's command's defaults)"))
    p.set_defaults(dataset=None, epsilon=None)
    for a in p._actions[before:]:
        if a.dest in ("dataset", "epsilon"):
            a.default = None
    g = p.add_argument_group("--job ldp: the oracle (as 'fedhh ldp')")
    g.add_argument("--mechanism", choices=MECHANISMS, default=mechanism,
                   help=f"the oracle (default {mechanism})")
    g.add_argument("--domain", type=int, default=domain,
                   help="domain size" + (f" (default {domain})" if domain else ""))
    g.add_argument("--zipf-s", type=float, default=1.1, dest="zipf_s", help="Zipf exponent")
    g.add_argument("--g", type=int, default=0, help="OLH hash range")
    g.add_argument("--B", type=int, default=0, help="AoN hash range")
    # every option above belongs to a job: given without --job it would be ignored
    p.set_defaults(job_options={a.dest: (a.option_strings[-1], a.default)
                                for a in p._actions[before:]})
    return g


def job_options(cls: type, args: argparse.Namespace) -> Any:
    """A job's options (``cls``, e.g. :class:`~protocol.studies.runners.triehh.
    TrieHHOptions`) from the arguments given; unset ones keep the job's defaults, so
    every party of a job derives the same job from the same flags."""
    import dataclasses

    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
                  if getattr(args, f.name, None) is not None})


def refuse_job_options_without_job(args: argparse.Namespace) -> None:
    """A job's option (``--dataset``, ``--users``, ``--mechanism``, ...) given without
    ``--job`` is an error rather than silently ignored.

    Raises:
        protocol.cli.UsageError: naming the first such option.
    """
    from protocol.cli import UsageError

    if getattr(args, "job", None) is not None:
        return
    for dest, (flag, default) in getattr(args, "job_options", {}).items():
        if getattr(args, dest, default) != default:
            raise UsageError(f"{flag} belongs to a job: add --job triehh or --job ldp, or "
                             "leave it out")
    from protocol.cli.transport_options import CORRUPT_FLAGS

    for dest, flag in {"committee_input": "--committee-input", **CORRUPT_FLAGS}.items():
        if getattr(args, dest, None) is not None:
            raise UsageError(f"{flag} belongs to a committee job: add --job triehh "
                             "--transport threshold, or leave it out")


def threshold_round_from_args(args: argparse.Namespace):  # noqa: ANN201
    """The committee round of ``--transport threshold``: the vote round of
    :func:`add_shuffle_round_args` (``--min-batch`` does not apply) and the session's
    ``--threat``, ``--graph``, ``--dropout-rate``, ``--label`` (``--dim`` and
    ``--modulus`` follow from the candidates and the committee's ring).

    Raises:
        protocol.cli.UsageError: an option that does not apply, or bad values.
    """
    from protocol.cli import UsageError
    from protocol.core.net.threshold_net import ThresholdRound

    resolve_session_args(args, THRESHOLD_REFUSES, "does not apply to --transport threshold: "
                         "the vector length is the candidates', the modulus the committee's "
                         "ring")
    if getattr(args, "min_batch", 1) != 1:
        raise UsageError("--min-batch applies to the shuffler, not to --transport threshold")
    try:
        return ThresholdRound(shuffle_round_from_args(args), threat=args.threat,
                              graph=args.graph, dropout=args.dropout_rate, label=args.label)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


#: why the server ended a job early, as its Bye says (protocol.core.net.departures)
_ENDINGS = {
    "member_left": "a committee member left",
    "devices_left": "devices the round needed left",
    "analyst_stopped": "the analyst stopped the job",
    "round_aborted": "the round aborted",
}

#: what a client's or server's failure reason means, for the one line on stderr
_REASONS = {
    "ConnectionRefusedError": "connection refused: nothing listens at that address (is the "
                              "server running?)",
    "ConnectionResetError": "the peer closed the connection",
    "closed_before_admission": "the server closed the connection before sending the "
                               "device anything (it stopped before admitting it, or died)",
    "TimeoutError": "timed out waiting for the peer",
    "gaierror": "the host name does not resolve",
    "SSLCertVerificationError": "the server's certificate does not match the pinned one",
}


def exit_status(ok: bool, report: Any, who: str) -> int:
    """0 when ``ok``; else one line on stderr saying what happened (the statuses and
    reasons of ``report``, a network summary) and 1, the exit status of a run that
    could not complete (:data:`protocol.cli.EXIT_CODES`)."""
    import sys

    if ok:
        return 0

    def said(k: Any) -> str:
        k = str(k)
        kind, _, rest = k.partition(": ")
        if rest and kind in _ENDINGS:  # why the server ended the job (its Bye)
            return f"{_ENDINGS[kind]}: {rest}"
        return _REASONS.get(k, k)

    def words(x: Any) -> str:
        if isinstance(x, dict):
            return ", ".join(f"{v} {said(k)}" if isinstance(v, int)
                             else f"{k}: {v}" for k, v in x.items())
        return said(x)

    status = report.get("status") if isinstance(report, dict) else None
    reason = (report.get("reasons") or report.get("reason")) if isinstance(report, dict) \
        else None
    line = f"{who}: " + (words(status) if status is not None else "did not complete")
    if reason:
        line += f" ({words(reason)})"
    print(f"fedhh: failed: {line}", file=sys.stderr, flush=True)
    return 1



#: ``--max-abandoned``'s default: no job of a task may end abandoned after a beacon
#: before the helper refuses the task (docs/threshold.md, "Restarts")
DEFAULT_MAX_ABANDONED = 0


def add_ledger_args(p: argparse.ArgumentParser, helper: bool) -> None:
    """``--state-dir`` (where the party's ledger lives; default the ``--keys``
    directory) and, for a helper, ``--max-abandoned``."""
    g = p.add_argument_group("--job over the committee: the ledger that outlives a "
                             "restart (docs/threshold.md)")
    g.add_argument("--state-dir", default=None, dest="state_dir",
                   help="directory of this party's ledger (ledger/ inside it; default: "
                        "the --keys directory)")
    if helper:
        g.add_argument("--max-abandoned", type=int, default=None, dest="max_abandoned",
                       help="refuse further jobs of a task once more than this many of "
                            "its jobs ended after a beacon whose round did not complete "
                            f"(default {DEFAULT_MAX_ABANDONED}: a server sees at most one "
                            "sample it does not then use)")


def refuse_ledger_args_without_job(args: argparse.Namespace) -> None:
    from protocol.cli import UsageError

    for opt, dest in (("--state-dir", "state_dir"), ("--max-abandoned", "max_abandoned")):
        if getattr(args, dest, None) is not None:
            raise UsageError(f"{opt} belongs to a job's ledger: add --job triehh, or leave "
                             "it out")


def ledger_directory(args: argparse.Namespace) -> str:
    import os

    return os.path.join(args.state_dir if args.state_dir is not None else args.keys,
                        "ledger")


def helper_ledger_from_args(args: argparse.Namespace):  # noqa: ANN201
    """Helper ``--index``'s on-disk ledger (``<state>/ledger/helper<i>.json``).

    Raises:
        UsageError: a negative ``--max-abandoned``, or a ledger that cannot be read.
    """
    import os

    from protocol.cli import UsageError
    from protocol.core.job_ledger import HelperLedger, LedgerError

    budget = DEFAULT_MAX_ABANDONED if args.max_abandoned is None else args.max_abandoned
    if budget < 0:
        raise UsageError("--max-abandoned must be 0 or more")
    try:
        return HelperLedger(os.path.join(ledger_directory(args), f"helper{args.index}.json"),
                            max_abandoned=budget)
    except LedgerError as exc:
        raise UsageError(str(exc)) from None


def device_ledger_from_args(args: argparse.Namespace):  # noqa: ANN201
    """The devices' on-disk ledger (``<state>/ledger/devices/device-<id>.json``)."""
    import os

    from protocol.core.job_ledger import DeviceLedger

    return DeviceLedger(os.path.join(ledger_directory(args), "devices"))
