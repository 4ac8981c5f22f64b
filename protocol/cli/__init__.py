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
import typing
from typing import Any, Callable, Sequence


class UsageError(Exception):
    """Bad command-line input; printed without a traceback, exit status 2."""


class OperationalError(Exception):
    """The input was fine but the run could not complete: a server that cannot be
    reached, a peer that left, a session that aborted. Printed as one line without a
    traceback, exit status 1 (:data:`EXIT_CODES`)."""


#: What ``fedhh`` exits with (docs/api.md, "Exit status").
EXIT_CODES = {
    0: "success",
    1: "the run could not complete (cannot connect, a peer left, a session aborted, an "
       "audit or attack check failed); one line on stderr says what happened",
    2: "bad input (an option, a file, a combination of options); one line on stderr "
       "names it",
    130: "interrupted (Ctrl-C, SIGINT); one line on stderr",
    143: "terminated (SIGTERM); one line on stderr",
}


from protocol.core.net.signals import Terminated  # noqa: E402  (re-exported)


#: the one line and the exit status of a process stopped by a signal
INTERRUPTED = {"SIGINT": ("fedhh: interrupted (Ctrl-C)", 130),
               "SIGTERM": ("fedhh: terminated (SIGTERM)", 143)}


def _raise_terminated(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise Terminated()


def handle_termination() -> None:
    """Turn SIGTERM into :class:`Terminated` in this process (main thread only; a
    process started with SIGTERM ignored keeps ignoring it)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGTERM, _raise_terminated)


def _quiet_shutdown() -> None:
    """After an interrupt: nothing more on stderr from this process's exit (a thread's
    or an event loop's complaint about what the signal cut short, an unraisable
    exception in a finaliser). The one line was printed."""
    import os

    sys.stderr.flush()
    sys.unraisablehook = lambda _u: None
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    except OSError:
        pass


class _Refused(SystemExit):
    """An argument the parser refused (already printed); :func:`main` returns 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line (no usage block), exit 2."""

    def error(self, message: str) -> typing.NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see: {self.prog} --help)\n")
        raise _Refused(2)


class CommandRegistry:
    """Builds the argparse tree: top-level commands and command groups."""

    def __init__(self) -> None:
        self.parser = _Parser(
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


def _checked(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """``parse`` followed by the rule of parameter ``name``
    (:mod:`protocol.studies.validation`): NaN, infinities and values out of range are
    refused by argparse with one line naming the option."""
    from protocol.studies.validation import problem

    def typed(text: str) -> Any:
        try:
            value = parse(text)
        except (ValueError, TypeError, OverflowError):
            kind = "an integer" if parse is int else "a number"
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        what = problem(name, value) if isinstance(value, (int, float)) else None
        if what is not None:
            raise argparse.ArgumentTypeError(what)
        return value

    typed.__name__ = getattr(parse, "__name__", "value")
    typed.checked = True  # type: ignore[attr-defined]
    return typed


#: options that name a directory (``out``) or a file (``server_view``) to write
_OUTPUTS = {"out": "directory", "server_view": "file"}


def _writable(kind: str) -> Callable[[str], str]:
    """A path the command will write (a ``kind``: directory or file), refused at once
    when it cannot be: it names an existing thing of the other kind, or its nearest
    existing ancestor is not a directory this process may write into."""
    import os
    import pathlib

    def typed(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError("an empty path")
        p = pathlib.Path(text)
        if kind == "directory" and p.exists() and not p.is_dir():
            raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
        if kind == "file" and p.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
        probe = p if kind == "directory" and p.is_dir() else p.parent
        while not probe.exists():
            probe = probe.parent
        verb = "create" if kind == "directory" else "write"
        if not probe.is_dir():
            raise argparse.ArgumentTypeError(f"cannot {verb} {text}: {probe} is not a "
                                             "directory")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"cannot {verb} {text}: no permission to "
                                             f"write in {probe}")
        return text

    typed.__name__ = f"writable {kind}"
    return typed


#: old spellings of options that now have the shared name: each stays an alias of the
#: new one and prints a deprecation line when used
_RENAMED = {"--n": "--users"}


def _deprecated(action: argparse.Action, old: str, new: str) -> None:
    """Make ``old`` an alias of ``new`` on ``action``: both parse the same; ``old``
    prints one deprecation line on stderr."""
    base = type(action)

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001, N807
        if option_string == old:
            print(f"fedhh: {old} is deprecated, use {new}", file=sys.stderr)
        base.__call__(self, parser, namespace, values, option_string)

    action.__class__ = type(f"Deprecated{base.__name__}", (base,), {"__call__": __call__})


#: comma-separated list options, by dest: the rule each element follows
_LISTS = {"epsilons": "epsilon", "Ts": "T", "quantiles": "quantile"}


def _checked_list(name: str) -> Callable[[str], str]:
    """A comma-separated list whose every element follows the rule of ``name``; the
    text itself is returned (the command splits it), only checked."""
    from protocol.studies.validation import Rule, problem

    rule = Rule(lo=0.0, hi=1.0) if name == "quantile" else None

    def typed(text: str) -> str:
        parts = [x.strip() for x in text.split(",")]
        if not text.strip() or any(not x for x in parts):
            raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
        for x in parts:
            try:
                value: float = float(x)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a number: {x!r} in {text!r}") from None
            if value.is_integer() and name == "T":
                value = int(value)
            what = problem(name, value, rule)
            if what is not None:
                raise argparse.ArgumentTypeError(f"{x!r}: {what}")
        return text

    typed.__name__ = "list"
    typed.checked = True  # type: ignore[attr-defined]
    return typed


def _harden(parser: argparse.ArgumentParser) -> None:
    """Give every ``--users`` and ``--seed`` of every command the shared parsing
    (``2e5`` accepted, negative seeds refused), every numeric option the range
    of its name in :data:`protocol.studies.validation.RULES`, and the population the
    one name ``--users`` (``--n`` stays as a deprecated alias)."""
    for action in list(parser._actions):
        for old, new in _RENAMED.items():
            if new and old in action.option_strings \
                    and new not in parser._option_string_actions:
                action.option_strings.insert(0, new)
                parser._option_string_actions[new] = action
                _deprecated(action, old, new)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _harden(sub)
            continue
        if not action.option_strings or action.nargs not in (None, "?"):
            continue
        if action.dest in _SHARED_TYPES and action.type in (int, None):
            action.type = _SHARED_TYPES[action.dest]
        if action.type in (int, float, count, seed) and action.choices is None:
            action.type = _checked(action.type, action.dest)
        elif action.type is None and action.dest in _LISTS:
            action.type = _checked_list(_LISTS[action.dest])
        elif action.type is None and action.dest in _OUTPUTS:
            action.type = _writable(_OUTPUTS[action.dest])


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


_PARSER: argparse.ArgumentParser | None = None


def main(argv: Sequence[str] | None = None) -> int:
    """``fedhh``: the command's exit status (:data:`EXIT_CODES`). SIGINT and SIGTERM end
    it, wherever it is, with one line and 130 or 143 (:data:`INTERRUPTED`). Called with
    ``argv`` (a test, a caller in Python) it leaves the process's signal handlers and
    stderr alone."""
    own_process = argv is None
    if own_process:
        handle_termination()
    try:
        return _main(argv)
    except KeyboardInterrupt as exc:
        line, status = INTERRUPTED["SIGTERM" if isinstance(exc, Terminated) else "SIGINT"]
        print(line, file=sys.stderr, flush=True)
        if own_process:
            _quiet_shutdown()
        return status


def _main(argv: Sequence[str] | None) -> int:
    from protocol.core.cluster import ClusterUnavailable
    from protocol.studies.errors import StudyError

    global _PARSER
    if _PARSER is None:  # built once per process (parsing never changes it)
        _PARSER = build_parser()
    parser = _PARSER
    try:
        args = parser.parse_args(argv)
    except _Refused:
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, StudyError) as exc:
        print(f"fedhh: error: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(f"fedhh: failed: {exc}", file=sys.stderr)
        return 1
    except ClusterUnavailable as exc:  # --cluster: not installed, or not reachable
        print(f"fedhh: failed: {exc}", file=sys.stderr)
        return 1
    except (ConnectionError, TimeoutError) as exc:
        print(f"fedhh: failed: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if not exc.filename:
            raise
        # a path the user named (or one below it) cannot be read or written
        print(f"fedhh: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("fedhh: error: out of memory: the requested size does not fit in this "
              "machine's memory; lower it", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
