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
  release depend only on the seed, never on where the keys come from.

An option that the chosen transport does not take is an error, not silently ignored.
"""
from __future__ import annotations

import argparse
from typing import Any

from protocol.core.contract import Transport

__all__ = ["TRANSPORTS", "THREATS", "add_threat_arg", "add_transport_args",
           "transport_from_args", "transport_options"]

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
    """The transport the options describe.

    Raises:
        protocol.cli.UsageError: as :func:`transport_options`, or the transport's
            module cannot be imported or refuses the options.
    """
    from protocol.cli import UsageError
    from protocol.core.transports import get_transport

    opts = transport_options(args)
    try:
        transport = get_transport(args.transport, **opts)
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
