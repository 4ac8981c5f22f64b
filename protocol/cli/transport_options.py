"""Command-line options that choose and configure an aggregation transport.

One set of options for every command that runs a mechanism over a transport
(``fedhh triehh``, ``eval triehh``, ``bench triehh``, ``triehhpp``, ``ldp``):

* ``--transport plain|secagg|shuffler|threshold`` (``threshold``: secure aggregation
  into a three-member committee that opens only the release, ``docs/threshold.md``;
  it takes the secure-aggregation options);
* secure aggregation: ``--secagg-graph harary|complete`` (SecAgg+ or Bonawitz et al.),
  ``--threat malicious|semi-honest`` (the threat model the session is built for;
  ``malicious``, the default, means Ed25519-signed keys, the consistency round and the
  threshold and degree of :func:`secagg.params.find_params` for a server that may
  equivocate, choose which clients drop and collude with 5% of the clients;
  ``--secagg-malicious`` is kept as an alias of ``--threat malicious``), ``--dropout P`` (each sampled client drops before a random round),
  ``--secagg-grinding-bits B`` (parameters that keep their security bound when the
  server may choose among ``2^B`` graph seeds);
* shuffler: ``--min-batch N`` (the shuffler's minimum batch), ``--workers W``
  (processes for the public-key work) and ``--blinded-crowds`` (two shufflers and
  blinded crowd ids, :mod:`shuffler.blinded`);
* secure aggregation, where its clients run: ``--workers W`` (Dask worker processes,
  :mod:`protocol.core.cluster`) or ``--cluster ADDRESS`` (an existing Dask scheduler);
* both: ``--os-keys``. Keys and protocol randomness come from the operating system
  unless the command was given ``--seed``: then they derive from the seed (a
  reproducible simulation whose keys anyone with the seed can recompute), and
  ``--os-keys`` takes them from the operating system anyway. Sampling and the
  release depend only on the seed, never on where the keys come from;
* threshold: ``--committee-input reports|secagg`` (under ``--threat malicious`` the
  committee takes each device's validated report by default; ``secagg`` feeds it a
  secure-aggregation sum, whose client inputs nobody checks) and
  ``--min-valid-fraction F`` (a validated round aborts with fewer valid reports than
  that fraction of its sample; default 0.5).

Corrupted clients of a simulation (:func:`add_corrupt_args`, the vote mechanisms'
commands: ``fedhh triehh``, ``triehhpp``, ``quantiles``, ``eval triehh``, ``demo``):
who (``--corrupt-clients K`` per round, ``--corrupt-users 3,17``, ``--corrupt-share
F``: exactly one), what (``--corrupt-strategy``, default ``theta-at-target``; the
strategies of :data:`protocol.core.corruption.STRATEGIES`), at which word
(``--corrupt-target``, default: a word nobody in the dataset holds, chosen by the
runner and printed as an ``input:`` line) and ``--corrupt-seed``
(:func:`corrupt_from_args`).

An option that the chosen transport does not take is an error, not silently ignored.
"""
from __future__ import annotations

import argparse
from typing import Any

from protocol.core.contract import Transport

__all__ = ["TRANSPORTS", "THREATS", "add_threat_arg", "add_transport_args",
           "transport_from_args", "transport_options", "add_committee_args",
           "committee_options", "add_corrupt_args", "corrupt_from_args", "CORRUPT_FLAGS"]

#: threat models by name, the default first (secagg.params.THREATS)
THREATS = ("malicious", "semi-honest")
_THREAT_HELP = ("secagg: the threat model the session is built for (default malicious: "
                "signed keys, consistency round, parameters for a server that may "
                "equivocate, choose which clients drop and collude with 5%% of the "
                "clients; semi-honest: smaller parameters that hold only while the server "
                "follows the protocol)")


def add_threat_arg(p: argparse.ArgumentParser | Any, default: str | None = None) -> None:
    """Add ``--threat malicious|semi-honest`` (dest ``threat``) to a parser or group.

    ``default=None`` leaves the choice to the transport (malicious); commands that
    build a session themselves pass ``default="malicious"``.
    """
    p.add_argument("--threat", choices=THREATS, default=default, dest="threat",
                   help=_THREAT_HELP)

TRANSPORTS = ("plain", "secagg", "shuffler", "threshold")
# option attribute -> (transports that take it, transport keyword, command-line flag)
_OPTIONS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "secagg_graph": (("secagg", "threshold"), "graph", "--secagg-graph"),
    "threat": (("secagg", "threshold"), "threat", "--threat"),
    "secagg_malicious": (("secagg", "threshold"), "threat", "--secagg-malicious"),
    "dropout": (("secagg", "threshold"), "dropout", "--dropout"),
    "secagg_grinding_bits": (("secagg", "threshold"), "grinding_bits", "--secagg-grinding-bits"),
    "min_batch": (("shuffler",), "min_batch_size", "--min-batch"),
    "workers": (("shuffler", "secagg", "threshold"), "workers", "--workers"),
    "cluster": (("secagg", "threshold"), "cluster", "--cluster"),
    "blinded_crowds": (("shuffler",), "blinded_crowds", "--blinded-crowds"),
    "os_keys": (("secagg", "shuffler", "threshold"), "simulate", "--os-keys"),
}


def add_transport_args(p: argparse.ArgumentParser, default: str = "plain",
                       extra_choices: tuple[str, ...] = (), help: str | None = None) -> None:
    """Add ``--transport`` and the per-transport options to ``p``.

    ``extra_choices`` are further ``--transport`` values the command handles itself
    (``fedhh ldp``'s ``none``); no transport option applies to them.
    """
    p.add_argument("--transport", default=default, choices=extra_choices + TRANSPORTS,
                   help=help or f"how contributions are aggregated (default {default})")
    g = p.add_argument_group("transport options")
    g.add_argument("--secagg-graph", choices=("harary", "complete"), default=None,
                   dest="secagg_graph",
                   help="secagg: Harary graph (SecAgg+, default) or complete graph")
    add_threat_arg(g)
    g.add_argument("--secagg-malicious", action="store_const", const="malicious",
                   default=None, dest="secagg_malicious",
                   help="secagg: alias of --threat malicious (the default)")
    g.add_argument("--dropout", type=float, default=None,
                   help="secagg: probability that a sampled client drops (default 0)")
    g.add_argument("--secagg-grinding-bits", type=int, default=None,
                   dest="secagg_grinding_bits",
                   help="secagg: the server may choose among 2^B graph seeds; parameters "
                        "keep their bound after that choice (default 0)")
    g.add_argument("--min-batch", type=int, default=None, dest="min_batch",
                   help="shuffler: smallest batch the shuffler forwards (default 1)")
    g.add_argument("--workers", type=int, default=None,
                   help="shuffler: processes for the public-key work (default 1); "
                        "secagg/threshold: Dask worker processes for the clients of each "
                        "session (default: all cores for sessions of 5,000 clients or more "
                        "when 'fedhh[cluster]' is installed, else this process; 1: this "
                        "process)")
    g.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="secagg/threshold: run the clients on the Dask scheduler at "
                        "ADDRESS (tcp://host:8786)")
    g.add_argument("--blinded-crowds", action="store_const", const=True, default=None,
                   dest="blinded_crowds",
                   help="shuffler: Prochlo's blinded crowd ids (two shufflers, no key shared "
                        "by the clients) instead of keyed ones")
    g.add_argument("--os-keys", action="store_const", const=True, default=None,
                   dest="os_keys",
                   help="secagg/shuffler: keys from the OS even with --seed (they come "
                        "from the OS anyway without --seed)")


def add_committee_args(g: argparse.ArgumentParser | Any) -> None:
    """``--committee-input`` and ``--min-valid-fraction`` (the threshold transport's
    input under the malicious model, :func:`committee_options`) on a parser or group
    of a vote mechanism's command. A parser that already has ``--committee-input``
    (``fedhh triehh``: the network job's, :mod:`protocol.cli.net_args`, the same dest
    and choices) keeps it."""
    if "--committee-input" not in getattr(g, "_option_string_actions", {}):
        from protocol.cli.net_args import add_committee_input_arg

        add_committee_input_arg(g)
    g.add_argument("--min-valid-fraction", type=float, default=None,
                   dest="min_valid_fraction",
                   help="threshold with validated reports: a round aborts with fewer valid "
                        "reports than this fraction of its sample (default 0.5)")


def committee_options(args: argparse.Namespace, name: str,
                      options: dict[str, Any]) -> dict[str, Any]:
    """The threshold transport's ``committee_input`` and ``min_valid_fraction`` from
    ``--committee-input`` / ``--min-valid-fraction`` (absent: the transport's defaults),
    checked against the transport ``name`` and its other ``options``.

    Raises:
        protocol.cli.UsageError: either option with another transport, ``reports``
            under ``--threat semi-honest``, or ``--min-valid-fraction`` without the
            validated reports.
    """
    from protocol.cli import UsageError

    out: dict[str, Any] = {}
    for dest, flag in (("committee_input", "--committee-input"),
                       ("min_valid_fraction", "--min-valid-fraction")):
        value = getattr(args, dest, None)
        if value is None:
            continue
        if name != "threshold":
            raise UsageError(f"{flag} applies to --transport threshold, not {name}")
        out[dest] = value
    if not out:
        return out
    semi = options.get("threat") == "semi-honest"
    if semi and out.get("committee_input") == "reports":
        raise UsageError("--committee-input reports needs --threat malicious: the "
                         "semi-honest committee takes a secure-aggregation sum")
    if "min_valid_fraction" in out:
        if semi or out.get("committee_input") == "secagg":
            raise UsageError("--min-valid-fraction applies to the committee's validated "
                             "reports (--committee-input reports, --threat malicious)")
        if not 0.0 <= out["min_valid_fraction"] <= 1.0:
            raise UsageError("--min-valid-fraction must be in [0, 1]")
    return out


#: the corrupted-client options: dest -> flag
CORRUPT_FLAGS = {"corrupt_clients": "--corrupt-clients", "corrupt_users": "--corrupt-users",
                 "corrupt_share": "--corrupt-share", "corrupt_strategy": "--corrupt-strategy",
                 "corrupt_target": "--corrupt-target", "corrupt_seed": "--corrupt-seed"}
_WHO = ("corrupt_clients", "corrupt_users", "corrupt_share")


def _user_list(text: str) -> tuple[int, ...]:
    """``3,17,40``: distinct non-negative user indices.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    parts = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated user indices, got "
                                         f"{text!r}")
    out = []
    for x in parts:
        try:
            u = int(x)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a user index: {x!r} in {text!r}") from None
        if u < 0:
            raise argparse.ArgumentTypeError(f"user indices are >= 0, got {u}")
        out.append(u)
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"a user is named twice in {text!r}")
    return tuple(out)


_user_list.__name__ = "user list"


def add_corrupt_args(p: argparse.ArgumentParser) -> None:
    """The corrupted clients of a simulated vote mechanism (see the module docstring;
    :func:`corrupt_from_args` turns them into a ``CorruptClients``)."""
    from protocol.core.corruption import REPORT_STRATEGIES, STRATEGIES

    g = p.add_argument_group(
        "corrupted clients (simulation: who is corrupted and what they enter instead of "
        "their vote; the result gets a 'corrupted' section)")
    g.add_argument("--corrupt-clients", type=int, default=None, dest="corrupt_clients",
                   metavar="K", help="corrupt K of each round's clients (drawn uniformly)")
    g.add_argument("--corrupt-users", type=_user_list, default=None, dest="corrupt_users",
                   metavar="LIST",
                   help="corrupt these population indices (3,17,...) whenever sampled")
    g.add_argument("--corrupt-share", type=float, default=None, dest="corrupt_share",
                   metavar="F",
                   help="corrupt each population index with probability F (not secure "
                        "aggregation's corrupt_fraction, its threat-model parameter)")
    g.add_argument("--corrupt-strategy", choices=tuple(STRATEGIES), default=None,
                   dest="corrupt_strategy",
                   help="what they enter (default theta-at-target: theta votes for the "
                        "target, a forged heavy hitter); "
                        + ", ".join(sorted(REPORT_STRATEGIES))
                        + " attack the committee's validated reports (--transport "
                          "threshold only)")
    g.add_argument("--corrupt-target", default=None, dest="corrupt_target", metavar="WORD",
                   help="the word they aim at (default: a word nobody in the dataset "
                        "holds, chosen by the run and printed as an input: line)")
    g.add_argument("--corrupt-seed", type=int, default=None, dest="corrupt_seed",
                   help="seed of the draw of corrupted clients (default 0; its own "
                        "generator, so the samples are the same with and without "
                        "corruption)")


def corrupt_from_args(args: argparse.Namespace, transport: str | None = None,
                      options: dict[str, Any] | None = None):  # noqa: ANN201
    """The ``CorruptClients`` the corrupted-client options describe, or ``None`` when
    none is given. ``transport`` (default ``args.transport``) and its ``options``
    (default :func:`transport_options`) decide whether a report strategy can run.

    Raises:
        protocol.cli.UsageError: two ways of naming who is corrupted, a strategy,
            target or seed without one, a report strategy over a transport without
            validated reports, or a value ``CorruptClients`` refuses.
    """
    from protocol.cli import UsageError
    from protocol.core.corruption import REPORT_STRATEGIES, CorruptClients
    from protocol.studies.corrupted import DEFAULT_STRATEGY

    given = [d for d in _WHO if getattr(args, d, None) is not None]
    if len(given) > 1:
        raise UsageError(f"name the corrupted clients one way: {CORRUPT_FLAGS[given[0]]} "
                         f"or {CORRUPT_FLAGS[given[1]]}, not both")
    others = [d for d in ("corrupt_strategy", "corrupt_target", "corrupt_seed")
              if getattr(args, d, None) is not None]
    if not given:
        if others:
            raise UsageError(f"{CORRUPT_FLAGS[others[0]]} needs who is corrupted: "
                             "--corrupt-clients K, --corrupt-users LIST or --corrupt-share F")
        return None
    strategy = getattr(args, "corrupt_strategy", None) or DEFAULT_STRATEGY
    name = transport if transport is not None else getattr(args, "transport", None)
    if strategy in REPORT_STRATEGIES:
        if options is None:
            opts = transport_options(args) if name in TRANSPORTS else {}
            if name in TRANSPORTS:
                opts.update(committee_options(args, name, opts))
        else:
            opts = options
        validated = (name == "threshold" and opts.get("threat", "malicious") == "malicious"
                     and opts.get("committee_input", "reports") == "reports")
        if not validated:
            this = f"--transport {name}"
            if name == "threshold":
                this += (" --threat semi-honest" if opts.get("threat") == "semi-honest"
                         else " --committee-input secagg")
            raise UsageError(
                f"--corrupt-strategy {strategy} attacks the committee's validated reports: "
                "it needs --transport threshold with --committee-input reports and --threat "
                f"malicious (the defaults), not {this}")
    target = getattr(args, "corrupt_target", None)
    if target is not None and not target:
        raise UsageError("--corrupt-target must not be empty")
    try:
        return CorruptClients(strategy, users=getattr(args, "corrupt_users", None),
                              per_round=getattr(args, "corrupt_clients", None),
                              fraction=getattr(args, "corrupt_share", None), target=target,
                              seed=getattr(args, "corrupt_seed", None) or 0)
    except ValueError as exc:
        raise UsageError(f"corrupted clients: {exc}") from None


def transport_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments for the chosen transport.

    Raises:
        protocol.cli.UsageError: an option the transport does not take, or a bad value.
    """
    from protocol.cli import UsageError

    name = args.transport
    opts: dict[str, Any] = {}
    for attr, (takers, keyword, flag) in _OPTIONS.items():
        value = getattr(args, attr, None)
        if value is None:
            continue
        if name not in takers:
            raise UsageError(f"{flag} applies to --transport {' or '.join(takers)}, "
                             f"not {name}")
        if keyword in opts and opts[keyword] != value:
            raise UsageError(f"{flag} contradicts --threat {opts[keyword]}")
        opts[keyword] = (not value) if attr == "os_keys" else value
    if name in _OPTIONS["os_keys"][0] and "simulate" not in opts:
        # seeded keys only behind the explicit switch --seed
        opts["simulate"] = getattr(args, "seed", None) is not None
    if "dropout" in opts and not 0.0 <= opts["dropout"] < 1.0:
        raise UsageError("--dropout must be in [0, 1)")
    for key, flag in (("min_batch_size", "--min-batch"), ("workers", "--workers")):
        if key in opts and opts[key] < 1:
            raise UsageError(f"{flag} must be >= 1")
    if "grinding_bits" in opts and not 0 <= opts["grinding_bits"] <= 128:
        raise UsageError("--secagg-grinding-bits must be in [0, 128]")
    return opts


def transport_from_args(args: argparse.Namespace) -> Transport:
    """The transport the options describe, with the corrupted clients of
    :func:`corrupt_from_args` set on it (``transport.corrupt``; a runner aims them at
    their target).

    Raises:
        protocol.cli.UsageError: as :func:`transport_options` and
            :func:`corrupt_from_args`, or the transport's module cannot be imported or
            refuses the options.
    """
    from protocol.cli import UsageError
    from protocol.core.transports import get_transport

    opts = transport_options(args)
    opts.update(committee_options(args, args.transport, opts))
    corrupt = corrupt_from_args(args, args.transport, opts)
    try:
        transport = get_transport(args.transport, corrupt=corrupt, **opts)
    except ImportError as exc:
        raise UsageError(f"transport {args.transport!r} is not available: {exc}. "
                         "Use --transport plain") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"transport {args.transport!r}: {exc}") from None
    quiet = getattr(args, "quiet", False)
    if hasattr(transport, "client_progress"):
        # progress inside a secure-aggregation round (clients served, rate, time left)
        # on stderr, unless the command was given --quiet
        from protocol.cli.output import ClientProgress

        transport.client_progress = ClientProgress(
            enabled=not quiet, label=getattr(transport, "progress_label", "secure aggregation"))
    if hasattr(transport, "estimate_say") and not quiet:
        # a one-line estimate before a session predicted to take more than a minute
        from protocol.cli.output import say

        transport.estimate_say = say(True)
    return transport
