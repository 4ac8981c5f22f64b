"""The ``fedhh`` command line.

Commands live in ``protocol/cli/commands/<name>.py``; each module defines
``register(cli: CommandRegistry) -> None`` and is discovered automatically, so a new
command never edits this file. A command's parser sets ``func(args) -> int``.
Heavy imports belong inside ``func`` so that ``fedhh --help`` stays fast.

The CLI parses and prints only: what a command runs lives in :mod:`protocol.studies`
(one runner per mechanism in :mod:`protocol.studies.runners`). Printing helpers that
several commands share are in :mod:`protocol.cli.output`, shared argument sets in
:mod:`protocol.cli.args` and :mod:`protocol.cli.transport_options`. A study refuses bad
input with :class:`protocol.studies.errors.StudyError`; :func:`main` prints it like a
:class:`UsageError`.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Callable, Sequence


class UsageError(Exception):
    """Bad command-line input; printed without a traceback, exit status 2."""


class CommandRegistry:
    """Builds the argparse tree: top-level commands and command groups."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(
            prog="fedhh",
            description="Private federated heavy hitters: mechanisms, secure aggregation, shuffling.",
        )
        self.parser.add_argument("--version", action="version", version=f"fedhh {_version()}")
        self._sub = self.parser.add_subparsers(dest="command", metavar="COMMAND")
        self._groups: dict[str, argparse._SubParsersAction] = {}

    def command(self, name: str, help: str, func: Callable[[argparse.Namespace], int],
                description: str | None = None) -> argparse.ArgumentParser:
        """Add a top-level command ``fedhh NAME``."""
        p = self._sub.add_parser(name, help=help, description=description or help)
        p.set_defaults(func=func)
        return p

    def subcommand(self, group: str, name: str, help: str,
                   func: Callable[[argparse.Namespace], int],
                   description: str | None = None) -> argparse.ArgumentParser:
        """Add ``fedhh GROUP NAME`` (the group is created on first use)."""
        if group not in self._groups:
            gp = self._sub.add_parser(group, help=f"{group} commands")
            gp.set_defaults(func=lambda args, gp=gp: (gp.print_help(), 2)[1])
            self._groups[group] = gp.add_subparsers(dest=f"{group}_command", metavar="NAME")
        p = self._groups[group].add_parser(name, help=help, description=description or help)
        p.set_defaults(func=func)
        return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fedhh")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown (not installed)"


def count(text: str) -> int:
    """A count on the command line: ``200000``, ``200_000`` or ``2e5`` (the form the
    help prints defaults in); anything that is not a whole number is refused.

    Raises:
        argparse.ArgumentTypeError: not a whole number.
    """
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return int(value)


def seed(text: str) -> int:
    """A simulation seed: a non-negative integer.

    Raises:
        argparse.ArgumentTypeError: negative or not an integer.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


#: Options that mean the same in every command, parsed the same everywhere.
_SHARED_TYPES = {"users": count, "seed": seed}


def _harden(parser: argparse.ArgumentParser) -> None:
    """Give every ``--users`` and ``--seed`` of every command the shared parsing
    (``2e5`` accepted, negative seeds refused with a one-line error)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _harden(sub)
        elif action.dest in _SHARED_TYPES and action.option_strings \
                and action.type in (int, None) and action.nargs is None:
            action.type = _SHARED_TYPES[action.dest]


def build_parser() -> argparse.ArgumentParser:
    from protocol.cli import commands

    reg = CommandRegistry()
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"protocol.cli.commands.{mod.name}")
        module.register(reg)
    _harden(reg.parser)
    return reg.parser


def main(argv: Sequence[str] | None = None) -> int:
    from protocol.studies.errors import StudyError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, StudyError) as exc:
        print(f"fedhh: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("fedhh: error: out of memory: the requested size does not fit in this "
              "machine's memory; lower it", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedhh: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
