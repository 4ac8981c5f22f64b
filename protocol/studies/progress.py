"""Where a long run is: the round (or level, or run) it is in, the clients served
inside the current round, and the time left for the whole run.

:class:`RunProgress` is the display the command line and the Python API install
(``fedhh`` commands unless ``--quiet``; :mod:`protocol.studies.api` unless
``progress=False``). Runners never print: they take it as their ``progress``
callable (it wraps the iterable of rounds) and as the transport's
``client_progress(step, done, total)`` (which a transport calls inside a round:
secure aggregation and the thresholding committee once per client and protocol step,
the shuffler per chunk of encoded reports and per party).

On a terminal it is a tqdm bar over the rounds whose postfix shows the clients done in
the current round and whose time left is the whole run's; elsewhere (a log file, a CI
job) it writes one plain line at most every ``log_interval`` seconds, so a long run is
never silent and a short one prints nothing.

``total`` is the most rounds a run can take (TrieHH's ``L``): a trie mechanism stops as
soon as a round releases nothing left to extend. The time left is therefore stated as
a bound ("at most ~40 s left"), the mean round so far times the rounds that can still
run, never as if every one of them will; and a run that stops early completes its bar
(``4/4``, the total lowered to the rounds it ran) and, in a log that showed a line,
ends with one line saying after how many of how many rounds it stopped.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

__all__ = ["RunProgress", "active", "duration"]

#: the run whose rounds are being iterated now (a transport's client progress that
#: was installed separately forwards to it, so one line shows both)
_ACTIVE: list["RunProgress"] = []


def active() -> "RunProgress | None":
    """The :class:`RunProgress` whose rounds are running, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def duration(seconds: float) -> str:
    """``42 s``, ``3 min``, ``1.5 h``."""
    if seconds != seconds or seconds < 0:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class RunProgress:
    """Progress of a run of ``total`` rounds called ``desc`` (``"TrieHH rounds"``).

    ``run(iterable)`` (or calling the object on an iterable) wraps the rounds;
    ``client(step, done, total)`` reports clients served inside the current round.
    ``label`` names what serves the clients (``"secure aggregation"``).
    """

    def __init__(self, total: int | None, desc: str, enabled: bool = True,
                 stream: Any = None, interval: float = 0.5, log_interval: float = 15.0,
                 label: str = "secure aggregation",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.desc = desc
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else log_interval
        self.label = label
        self._clock = clock
        self._start = clock()
        self._last = self._start
        self._round_start = self._start
        self.rounds_done = 0
        self.in_round = ""
        self._bar: Any = None

    # -------------------------------------------------------------- rounds
    def __call__(self, iterable: Iterable[T]) -> Iterable[T]:
        return self.run(iterable)

    def run(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield the rounds of ``iterable``, reporting each (a generator: the mechanism
        runs a round when the next one is asked for)."""
        if not self.enabled:
            yield from iterable
            return
        self._start = self._round_start = self._last = self._clock()
        if self.tty:
            from tqdm import tqdm

            # tqdm's own time left assumes every round of the total runs: shown as the
            # bound it is
            fmt = ("{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, at most {remaining} "
                   "left{postfix}]") if self.total else None
            self._bar = tqdm(total=self.total, desc=self.desc, file=self.stream,
                             leave=False, dynamic_ncols=True, bar_format=fmt)
        _ACTIVE.append(self)
        try:
            for item in iterable:
                self.rounds_done += 1
                self.in_round = ""
                self._round_start = self._clock()
                if self._bar is not None:
                    self._bar.set_postfix_str("", refresh=False)
                    self._bar.update(1)
                else:
                    self._log()
                yield item
            self._finish()
        finally:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def _finish(self) -> None:
        """The rounds ran out: a run that stopped before ``total`` completes its bar
        (the total becomes the rounds it ran); a log that showed a line gets a last
        one, so it never ends on a stale time left."""
        planned = self.total
        if planned and self.rounds_done < planned:
            self.total = self.rounds_done
            if self._bar is not None:
                self._bar.total = self.rounds_done
                self._bar.set_postfix_str(f"stopped early: {self.rounds_done} of at most "
                                          f"{planned}", refresh=False)
                self._bar.refresh()
        if self._bar is None and getattr(self, "_wrote", False):
            head = f"{self.desc}: {self.rounds_done}/{self.rounds_done} done"
            if planned and self.rounds_done < planned:
                head += (f" (stopped after {self.rounds_done} of at most {planned}: nothing "
                         "left to extend)")
            text = f"{head}, {duration(self._clock() - self._start)} elapsed"
            self.stream.write(("\r\x1b[K" + text + "\n") if self.tty else text + "\n")
            self.stream.flush()
            self._drawn = False

    # ---------------------------------------------------------- in a round
    def client(self, step: int, done: int, total: int) -> None:
        """``done`` of ``total`` clients served in protocol step ``step`` of the
        current round."""
        if not self.enabled:
            return
        self.in_round = f"{self.label} step {step}: {done}/{total} clients"
        now = self._clock()
        if now - self._last < self.interval:
            return
        if self._bar is not None:
            self._last = now
            self._bar.set_postfix_str(self.in_round, refresh=True)
        else:
            self._log(force=True)

    # ------------------------------------------------------------ printing
    def eta(self) -> float:
        """Seconds left for the whole run at most: the mean round so far times the
        rounds that can still run, less the time already spent in the current one (a
        bound, printed as one: a run may stop before its last round); NaN before the
        first round ends or without a total."""
        if not self.total or not self.rounds_done:
            return float("nan")
        per = (self._round_start - self._start) / self.rounds_done
        return max(0.0, per * (self.total - self.rounds_done)
                   - (self._clock() - self._round_start))

    def line(self) -> str:
        """The plain progress line."""
        now = self._clock()
        current = self.rounds_done + 1 if self.total is None or \
            self.rounds_done < self.total else self.total
        head = (f"{self.desc}: {current}/{self.total}" if self.total
                else f"{self.desc}: {self.rounds_done} done" if self.rounds_done
                else self.desc)
        parts = [head]
        if self.in_round:
            parts.append(self.in_round)
        parts.append(f"{duration(now - self._start)} elapsed")
        left = self.eta()
        if left == left:
            parts.append(f"at most ~{duration(left)} left for the run")
        return ", ".join(parts)

    def _log(self, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self._wrote = True
        if self.tty:  # no bar (no rounds to count): one line, redrawn
            self.stream.write("\r\x1b[K" + self.line())
            self._drawn = True
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear a line drawn on a terminal (a run without rounds to count)."""
        if getattr(self, "_drawn", False):
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
