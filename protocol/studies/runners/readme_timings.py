"""The README's timing table, measured: every command it quotes is run here, one after
the other, and the table is written from the measurements (``fedhh bench readme``).

Each command runs as its own process with its stdout and stderr on a pseudo-terminal,
as a person at a terminal would see it. For each one this records the wall time, the
peak memory of the process, and the longest silence: the most seconds between two
writes to the terminal (from the start to the first line, between progress updates, to
the end), so the table shows both how long a command takes and whether it says where
it is while it runs. The table states when it was measured and the machine's load.

The table lives in ``README.md`` between ``<!-- timings:begin -->`` and
``<!-- timings:end -->``; :func:`rewrite` replaces the rows that were measured and
keeps the others (the long rows are measured only when asked: they take from minutes
to half an hour).
"""
from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from protocol.studies.errors import StudyError

__all__ = ["Row", "ROWS", "measure", "measure_rows", "render", "rewrite", "BEGIN", "END"]

BEGIN = "<!-- timings:begin -->"
END = "<!-- timings:end -->"


@dataclass(frozen=True)
class Row:
    """One command of the table: its arguments after ``fedhh``, and whether it is long
    (measured only with ``--all``)."""

    args: tuple[str, ...]
    long: bool = False

    @property
    def command(self) -> str:
        return "fedhh " + " ".join(self.args)


ROWS: tuple[Row, ...] = (
    Row(("demo", "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "1000000", "--transport", "plain",
         "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "100000", "--transport", "shuffler",
         "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "100000", "--transport", "secagg",
         "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "100000", "--transport", "threshold",
         "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "1000000", "--transport", "threshold",
         "--seed", "1")),
    Row(("triehh", "--dataset", "en", "--users", "1000000", "--transport", "secagg",
         "--threat", "semi-honest", "--seed", "1"), long=True),
    Row(("triehh", "--dataset", "en", "--users", "1000000", "--transport", "secagg",
         "--workers", "2", "--seed", "1"), long=True),
    Row(("triehhpp", "--seed", "1")),
    Row(("quantiles", "--seed", "1")),
    Row(("ldp", "--mechanism", "olh", "--seed", "1")),
    Row(("hh", "--mechanism", "pem", "--seed", "1")),
    Row(("federated", "--mechanism", "taps", "--seed", "1")),
    Row(("privacy", "triehh", "--users", "1000000", "--epsilon", "4")),
    Row(("bench", "secagg", "--seed", "1")),
    Row(("attack", "run", "all")),
)


def _clock(seconds: float) -> str:
    if round(seconds) < 60:
        return f"{seconds:.0f} s" if seconds >= 1 else "under 1 s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s"


def measure(row: Row, timeout: float | None = None,
            python: str = sys.executable) -> dict[str, Any]:
    """Run ``row``'s command once on a pseudo-terminal; its wall seconds,
    peak memory (MB), exit status and longest silence (seconds between two writes).

    A command still running after ``timeout`` seconds is stopped and recorded as
    such (``wall_time`` says so).

    Raises:
        StudyError: the command cannot be started.
    """
    import pty
    import tempfile

    master, slave = pty.openpty()
    try:  # a terminal of 40 x 120 (a new pseudo-terminal has 0 columns: no bar fits)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    except (ImportError, OSError):  # pragma: no cover - not a POSIX terminal
        pass
    peak_file = tempfile.NamedTemporaryFile(prefix="fedhh-peak-", delete=False)
    peak_file.close()
    env = dict(os.environ, COLUMNS="120", FEDHH_PEAK_FILE=peak_file.name)
    cmd = [python, "-c", _CHILD, *row.args]
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=slave, stderr=slave,
                                stdin=subprocess.DEVNULL, env=env)
    except OSError as exc:
        os.close(master)
        os.close(slave)
        raise StudyError(f"cannot run {row.command}: {exc}") from None
    os.close(slave)
    last, silence = t0, 0.0
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            now = time.monotonic()
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    break
                silence, last = max(silence, now - last), now
            elif proc.poll() is not None:
                break
            if timeout is not None and now - t0 > timeout:
                proc.kill()  # recorded as over the timeout; the other rows still run
                break
        code = proc.wait()
    finally:
        os.close(master)
    end = time.monotonic()
    timed_out = timeout is not None and end - t0 > timeout
    silence = max(silence, end - last)
    try:
        with open(peak_file.name, encoding="ascii") as f:
            peak = round(int(f.read() or 0) / 1024, 1)
    except (OSError, ValueError):
        peak = float("nan")
    finally:
        os.unlink(peak_file.name)
    return {"command": row.command, "seconds": round(end - t0, 2), "exit": code,
            "peak_rss_mb": peak, "longest_silence_seconds": round(silence, 1),
            "wall_time": f"over {_clock(timeout)} (stopped)" if timed_out
            else _clock(end - t0)}


#: the child: run fedhh, then write its own peak memory (KB on Linux) to the file the
#: parent names
_CHILD = ("import os, sys, resource; from protocol.cli import main; "
          "code = main(sys.argv[1:]); "
          "open(os.environ['FEDHH_PEAK_FILE'], 'w').write("
          "str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); sys.exit(code)")


def measure_rows(rows: Sequence[Row], include_long: bool = False,
                 only: str | None = None, timeout: float | None = None,
                 say: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Measure ``rows`` one after the other (the long ones only with
    ``include_long``; ``only``: those whose command contains one of its
    comma-separated parts)."""
    out = []
    wanted = [w.strip() for w in only.split(",")] if only else []
    for row in rows:
        if (row.long and not include_long) or \
                (wanted and not any(w in row.command for w in wanted)):
            continue
        say(f"measuring {row.command}")
        out.append(measure(row, timeout))
    return out


def render(results: Sequence[dict[str, Any]], previous: dict[str, list[str]]) -> str:
    """The table: one row per :data:`ROWS` entry, measured cells from ``results``, the
    others kept from ``previous`` (command -> cells) or marked not measured."""
    by_command = {r["command"]: r for r in results}
    lines = [BEGIN,
             "| command | wall time | peak memory | longest silence on a terminal |",
             "| --- | --- | --- | --- |"]
    for row in ROWS:
        key = f"`{row.command}`"
        r = by_command.get(row.command)
        if r is not None:
            failed = "" if r["exit"] == 0 else f" (exit {r['exit']})"
            cells = [r["wall_time"] + failed, f"{r['peak_rss_mb']:.0f} MB",
                     f"{r['longest_silence_seconds']:.0f} s"]
        else:
            cells = previous.get(key, ["not measured yet (`--all`)", "", ""])
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    if results:
        import datetime

        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        lines.append("")
        lines.append(f"Measured by `fedhh bench readme` on "
                     f"{datetime.date.today().isoformat()} ({len(by_command)} of "
                     f"{len(ROWS)} rows in that run; the others are earlier figures), "
                     f"{os.cpu_count()} cores, load average {load:.1f} at the end (other "
                     "work on the machine slows every figure alike).")
    else:
        lines += [line for line in previous.get("_note", [])]
    lines.append(END)
    return "\n".join(lines)


def _previous(block: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {"_note": [""] + [ln for ln in block.splitlines()
                                                   if ln.startswith("Measured by")]}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`fedhh"):
            rows[cells[0]] = cells[1:]
    return rows


def rewrite(readme: str, results: Sequence[dict[str, Any]]) -> str:
    """``readme`` with its timing table rewritten from ``results``.

    Raises:
        StudyError: the README has no table between the markers.
    """
    m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), readme, flags=re.S)
    if m is None:
        raise StudyError(f"the README has no timing table between {BEGIN} and {END}")
    table = render(results, _previous(m.group(0)))
    return readme[:m.start()] + table + readme[m.end():]
