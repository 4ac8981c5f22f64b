"""Who ended a job early, and at which step: the one line each process prints.

When a job between processes stops before its end, three kinds of cause are told
apart, on the analyst's side (the server's last line, exit status 1) and in the
``Bye`` every device and helper still connected receives (their last line):

* ``member_left``: a committee member (helper 1 or 2) closed its connection, or was
  silent past the deadline, at a named step of a named round; ``devices_left``: the
  devices a round needed left (their positions, as ranges).
* ``analyst_stopped``: the analyst's process was interrupted (SIGINT, SIGTERM) or
  failed; the devices and helpers did nothing wrong.
* ``round_aborted``: a round ended in a named abort that is neither (a deviation a
  member detected, too few valid reports, ...).

The committee's members name a peer that stopped answering in their abort's detail
(``"<step> to|from <peer>: <exception>"``, :class:`~protocol.core.net.committee_job.
_Stream` and :class:`~protocol.core.net.committee_net.CommitteeLink`);
:func:`departure` reads that detail back. A closed connection (end of stream, reset,
broken pipe) is a party that left; a timeout one that was silent.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["Departure", "departure", "positions", "stop_reason", "aborted_in"]

#: exception names that mean the peer's connection closed (it left)
CLOSED = frozenset({"IncompleteReadError", "ConnectionResetError", "BrokenPipeError",
                    "ConnectionAbortedError", "ConnectionError", "SSLError", "SSLEOFError",
                    "OSError", "RuntimeError", "EOFError"})
#: exception names that mean the peer said nothing in time
SILENT = frozenset({"TimeoutError"})

_PEER = re.compile(r"(?P<step>[\w-]+|a message) (?:to|from) "
                   r"(?P<who>helper [12]|member [012]|the server): (?P<exc>\w+)")
_MEMBERS = {"member 0": "the server", "member 1": "helper 1", "member 2": "helper 2"}


@dataclass(frozen=True)
class Departure:
    """A party that left (or fell silent) during a job."""

    #: ``helper 1``, ``helper 2``, ``the server``, or ``devices 0-99, 150`` ...
    party: str
    #: ``left`` (its connection closed) or ``silent`` (nothing before the deadline)
    how: str
    #: the protocol step it was due at (``b-start``, ``verdicts``, ``reports`` ...)
    step: str = ""
    round: int | None = None
    #: for devices: how many left, of how many the job had
    count: int = 0
    of: int = 0

    def line(self) -> str:
        """One line: who, how, where."""
        what = ("left (its connection closed)" if self.how == "left"
                else "was silent past the deadline")
        if self.party.startswith("devices"):
            what = (f"left ({self.count} of {self.of} device connections closed)"
                    if self.how == "left" else "were silent past the deadline")
        where = []
        if self.step:
            where.append(f"at step {self.step}")
        if self.round is not None:
            where.append(f"of round {self.round}" if self.step else f"by round {self.round}")
        return " ".join([self.party, what, *where])

    def bye(self) -> str:
        """The reason a ``Bye`` carries to the parties still connected (at most 120
        characters)."""
        return f"member_left: {self.line()}"[:120]


def positions(members: Iterable[int], limit: int = 6) -> str:
    """Positions as ranges: ``0-99, 150, 170-199`` (at most ``limit`` ranges, then
    ``...``)."""
    xs = sorted(set(int(m) for m in members))
    runs: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        runs.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(runs[:limit]) + (", ..." if len(runs) > limit else "")


def departure(reason: str, detail: str, round_no: int | None = None) -> Departure | None:
    """The committee member that left or fell silent, from an abort's ``reason`` and
    ``detail`` as the members write them (``None``: the abort names no departure)."""
    if not reason.endswith(("missing_message", "helper_missing")):
        return None
    m = _PEER.search(detail or "")
    if m is None:
        return None
    exc = m.group("exc")
    how = "left" if exc in CLOSED else "silent" if exc in SILENT else None
    if how is None:
        return None
    who = _MEMBERS.get(m.group("who"), m.group("who"))
    step = m.group("step")
    return Departure(who, how, "" if step == "a message" else step, round_no)


def aborted_in(exc: BaseException | None) -> Any:
    """The :class:`~protocol.core.contract.AggregationAborted` behind ``exc`` (itself,
    or one it was raised from or during; ``None``: none)."""
    from protocol.core.contract import AggregationAborted

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, AggregationAborted):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def stop_reason(exc: BaseException | None, line: str | None = None,
                kind: str = "member_left") -> str:
    """The ``Bye`` reason for the parties still connected when the analyst's side ends
    a job because of ``exc``: ``<kind>: <line>`` when ``line`` names a departure
    (``member_left``, or ``devices_left`` for devices), ``analyst_stopped: ...`` for an interrupt or a failure of the analyst's own,
    ``round_aborted: <reason>`` for another abort (at most 120 characters)."""
    from protocol.core.net.signals import Terminated

    if line is not None:
        return f"{kind}: {line}"[:120]
    if isinstance(exc, Terminated):
        return "analyst_stopped: the analyst's process was terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return "analyst_stopped: the analyst interrupted the job (SIGINT)"
    aborted = aborted_in(exc)
    if aborted is not None:
        return f"round_aborted: {aborted.reason}"[:120]
    return f"analyst_stopped: the analyst's process failed ({type(exc).__name__})"[:120]
