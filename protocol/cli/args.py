"""Argument sets that several commands share, and the bridge from parsed arguments to a
runner's options.

* :func:`add_triehh_args`: dataset, privacy target, transport and corrupted clients
  of a TrieHH run (``fedhh triehh``, ``eval triehh``; ``bench triehh`` without the
  corrupted clients);
* :func:`add_privacy_args`: TrieHH++'s privacy target (``fedhh triehhpp``,
  ``quantiles``, ``privacy triehhpp``);
* :func:`options_from`: a runner's options dataclass filled from the parsed
  arguments of the same names.

The transport options live in :mod:`protocol.cli.transport_options`.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Sequence, TypeVar

T = TypeVar("T")

__all__ = ["add_triehh_args", "add_triehh_data_args", "add_privacy_args", "options_from"]


def options_from(cls: type[T], args: argparse.Namespace, **overrides: Any) -> T:
    """An instance of the dataclass ``cls`` whose fields come from the arguments of the
    same name (fields the command does not define keep their defaults)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)  # type: ignore[arg-type]
              if hasattr(args, f.name)}
    values.update(overrides)
    return cls(**values)


def add_quiet_arg(p: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars, estimates or in-round progress on stderr."""
    p.add_argument("--quiet", action="store_true",
                   help="no progress, estimate or in-round secure-aggregation progress on "
                        "stderr")


def add_alphabet_args(p: argparse.ArgumentParser) -> None:
    """``--alphabet`` and ``--drop-unencodable`` for commands that read a word file
    (:func:`protocol.studies.datasets.resolve_alphabet`)."""
    p.add_argument("--alphabet", default=None,
                   help="public alphabet of a word file: auto (default: the smallest of "
                        "lower = a-z and ', lower-digits = a-z 0-9 ' . _ -, printable = "
                        "printable ASCII without whitespace and $, that encodes every "
                        "word), one of those names, data (the characters that occur), or "
                        "the characters themselves; a word with other characters is an "
                        "error naming file, line and word")
    p.add_argument("--drop-unencodable", action="store_true", dest="drop_unencodable",
                   help="drop (and count) words with characters outside the alphabet "
                        "instead; users left without a word are removed")


def add_triehh_args(p: argparse.ArgumentParser, corrupt: bool = True,
                    committee: bool = True) -> None:
    """Dataset, target and transport of one TrieHH run
    (:class:`protocol.studies.runners.triehh.TrieHHOptions`); with ``committee`` the
    threshold transport's input options
    (:func:`protocol.cli.transport_options.add_committee_args`; ``fedhh triehh`` adds
    them after its network options, which hold ``--committee-input``), with
    ``corrupt`` the corrupted-client options
    (:func:`protocol.cli.transport_options.add_corrupt_args`)."""
    add_triehh_data_args(p)
    p.add_argument("--seed", type=int, default=None,
                   help="simulation seed (default: fresh OS randomness)")
    from protocol.cli.transport_options import (
        add_committee_args, add_corrupt_args, add_transport_args,
    )

    add_transport_args(p)
    if committee:
        add_committee_args(p)
    if corrupt:
        add_corrupt_args(p)
    p.add_argument("--release-counts", action="store_true", dest="release_counts",
                   help="also release each prefix's vote count (diagnostics only: Theorem 1 "
                        "does not cover counts)")
    p.add_argument("--max-candidates", type=int, default=1 << 21, dest="max_candidates",
                   help="cap on one round's candidate set (default 2097152)")


def add_triehh_data_args(p: argparse.ArgumentParser | Any) -> None:
    """The population and parameters of a TrieHH run, without seed and transport
    (also what ``fedhh client --job triehh`` needs to hold the same data)."""
    p.add_argument("--dataset", default="en",
                   help="en (embedded English, default), en-oov, zipf, or a PATH (text: "
                   "one user per line, words separated by spaces; .csv: user,item rows)")
    p.add_argument("--users", type=int, default=None,
                   help="population size n (embedded default 100000; a file: all its users)")
    p.add_argument("--epsilon", type=float, default=4.0, help="target epsilon (default 4)")
    p.add_argument("--delta", type=float, default=None, help="target delta (default 1/n^2)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="L, the maximum number of trie levels/rounds (default 10)")
    p.add_argument("--multi-word", action="store_true", dest="multi_word",
                   help="several words per user (Algorithm 3)")
    p.add_argument("--unit-size", type=int, default=1, dest="unit_size",
                   help="characters per trie level, 1-4 (default 1)")
    p.add_argument("--theta", type=int, default=None,
                   help="override theta (the guarantee is then Theorem 1 at these values)")
    p.add_argument("--gamma", type=float, default=None, help="override gamma")
    add_alphabet_args(p)


def add_privacy_args(p: argparse.ArgumentParser, epsilon: float = 1.0,
                     delta: float | None = None) -> None:
    """TrieHH++'s privacy target
    (:class:`protocol.studies.runners.triehhpp.PrivacyTarget`)."""
    p.add_argument("--epsilon", type=float, default=epsilon,
                   help=f"target epsilon (default {epsilon:g})")
    p.add_argument("--delta", type=float, default=None,
                   help="target delta (default " + ("1/n^2" if delta is None else f"{delta:g}")
                   + "; with --theta and no --delta: whatever delta theta gives)")
    p.add_argument("--max-length", type=int, default=10, dest="max_length",
                   help="L, the number of trie levels (default 10)")
    p.add_argument("--composition", choices=("basic", "advanced"), default="basic",
                   help="composition over levels (default basic)")
    p.add_argument("--bound", choices=("paper", "eq3"), default="paper",
                   help="per-level epsilon: paper = Lemma 3 eq. (4), needs m <= n/(10 theta); "
                   "eq3 = the tight ratio n/(n - theta m) of eq. (3) (default paper)")
    p.add_argument("--theta", type=int, default=None,
                   help="fix theta instead of the smallest one meeting delta")
    p.add_argument("--slack", type=float, default=10.0,
                   help="c in s = m + c sqrt(m) contacted clients (default 10)")


#: users of the federated datasets at scale 1 (protocol.studies.datasets_federated)
FEDERATED_USERS = {"syn": 780_000, "words": 200_000, "regime": 390_000}


def add_population_scale(p: argparse.ArgumentParser) -> None:
    """``--users N`` for the federated datasets (every party's users and items scale
    together, :func:`resolve_scale`); ``--scale`` stays as a deprecated alias."""
    from protocol.cli import count

    p.add_argument("--users", type=count, default=None,
                   help="population size; every party's users and items scale with it "
                        "(syn: 780000 at the paper's size, words: 200000, regime: 390000; "
                        "default those)")
    p.add_argument("--scale", type=float, default=None,
                   help="deprecated: the population as a multiple of the default (use "
                        "--users)")


def resolve_scale(args: argparse.Namespace) -> None:
    """Set ``args.scale`` from ``--users`` (or the deprecated ``--scale``, with a line
    saying so).

    Raises:
        protocol.cli.UsageError: both given, or ``--users`` with a CSV dataset.
    """
    import sys

    from protocol.cli import UsageError

    if args.scale is not None:
        print("fedhh: --scale is deprecated, use --users", file=sys.stderr)
        if args.users is not None:
            raise UsageError("give --users or --scale, not both")
        if args.dataset not in FEDERATED_USERS:
            raise UsageError(f"--scale scales the synthetic datasets "
                             f"({', '.join(FEDERATED_USERS)}); {args.dataset} holds the "
                             "users it holds")
        return
    if args.users is None:
        args.scale = 1.0
        return
    base = FEDERATED_USERS.get(args.dataset)
    if base is None:
        raise UsageError(f"--users scales the synthetic datasets ({', '.join(FEDERATED_USERS)})"
                         f"; {args.dataset} holds the users it holds")
    args.scale = args.users / base


def refuse_unused(args: argparse.Namespace,
                  rules: Sequence[tuple[str, str, Any, bool, str]]) -> None:
    """Refuse an option the run would ignore: each rule is ``(flag, dest, default,
    applies, why)``; an option set to anything but its ``default`` where it does not
    ``apply`` is one line naming it and why (``"--g is OLH's hash range: it applies to
    --mechanism olh only"``), never silently dropped.

    Raises:
        protocol.cli.UsageError: the first option set where it does not apply.
    """
    from protocol.cli import UsageError

    for flag, dest, default, applies, why in rules:
        if not applies and getattr(args, dest, default) != default:
            raise UsageError(f"{flag} {why}")


def corollary_target_rules(args: argparse.Namespace) -> list[tuple[str, str, Any, bool, str]]:
    """:func:`refuse_unused`'s rules for TrieHH's ``--epsilon``/``--delta``: Corollary 1's
    target, which ``--theta`` and ``--gamma`` given together replace."""
    fixed = args.theta is not None and args.gamma is not None
    return [
        ("--epsilon", "epsilon", 4.0, not fixed,
         "is Corollary 1's target, which --theta and --gamma together replace: the "
         "guarantee is Theorem 1's at those two; leave one of them out to use it"),
        ("--delta", "delta", None, not fixed,
         "is Corollary 1's target, which --theta and --gamma together replace (Theorem "
         "1's delta follows from theta); leave one of them out to use it"),
    ]
