"""Printing shared by several commands: one JSON object, a progress bar, and the
human-readable TrieHH report (``fedhh triehh`` and ``fedhh demo``)."""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")

__all__ = ["print_json", "progress", "progress_bar", "print_triehh", "ClientProgress", "say",
           "print_input", "print_corrupted", "corrupt_target_line"]


def print_json(obj: dict[str, Any]) -> None:
    """Print one JSON object with the peak memory added (``peak_rss_mb``); the
    warnings of its ``input`` report (:func:`print_input`) go to stderr."""
    from protocol.studies.measure import peak_rss_mb

    out = dict(obj)
    out.setdefault("peak_rss_mb", round(peak_rss_mb(), 1))
    print(json.dumps(out, indent=2, sort_keys=False, default=_default))
    if isinstance(out.get("input"), dict):
        print_input(out["input"], json_mode=True)


def _default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "",
             enabled: bool = True) -> Iterable[T]:
    """Progress over ``iterable`` on stderr (:class:`protocol.studies.progress.RunProgress`):
    a tqdm bar on a terminal, a plain line at most every 15 s elsewhere; nothing when
    disabled."""
    if not enabled:
        return iterable
    from protocol.studies.progress import RunProgress

    return RunProgress(total, desc)(iterable)


def say(enabled: bool = True) -> Callable[[str], None]:
    """A ``say`` callable for runners: one line on stderr (nothing when disabled)."""
    def _say(line: str) -> None:
        if enabled:
            print(line, file=sys.stderr, flush=True)
    return _say


class ClientProgress:
    """``client_progress(step, done, total)`` for secure aggregation: clients served in
    the current protocol step, their rate and the step's time left, on stderr.

    On a terminal the line is redrawn at most every ``interval`` seconds; otherwise
    (a log file) one line is written at most every ``log_interval`` seconds, so a long
    run is never silent while a short one prints nothing. Disabled, it does nothing.
    """

    def __init__(self, enabled: bool = True, stream: Any = None, interval: float = 0.5,
                 log_interval: float = 15.0, label: str = "secure aggregation") -> None:
        import time

        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else log_interval
        self._clock = time.monotonic
        self._step = -1
        self._done = 0
        self._start = 0.0
        self._last = self._clock()

    def line(self, step: int, done: int, total: int, elapsed: float) -> str:
        """The progress line for ``done`` of ``total`` clients after ``elapsed`` s."""
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (total - done) / rate if rate > 0 else float("nan")
        eta = f"~{left:.0f} s left" if left == left else "time left unknown"
        return (f"{self.label} step {step}: {done}/{total} clients, "
                f"{rate:.0f} clients/s, {eta} in this step")

    def __call__(self, step: int, done: int, total: int) -> None:
        if not self.enabled:
            return
        from protocol.studies.progress import active

        run = active()
        if run is not None and run.enabled:  # one line for the round and its clients
            run.label = self.label
            run.client(step, done, total)
            return
        now = self._clock()
        if step != self._step or done < self._done:  # a new step, or a new round's
            self._step, self._start = step, now
        self._done = done
        if now - self._last < self.interval or now - self._start < 0.5:
            return  # not yet: a line needs a rate
        self._last = now
        text = self.line(step, done, total, now - self._start)
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def progress_bar(total: int | None, desc: str, enabled: bool = True
                 ) -> Callable[[Iterable[T]], Iterable[T]]:
    """The ``progress`` callable a runner takes (it wraps the rounds): a
    :class:`protocol.studies.progress.RunProgress` of ``total`` rounds, which also
    shows the clients served inside the current round when a transport reports them
    (:class:`ClientProgress` forwards to it) and the time left for the whole run."""
    from protocol.studies.progress import RunProgress

    return RunProgress(total, desc, enabled=enabled)


def print_input(report: dict[str, Any] | None, json_mode: bool = False) -> None:
    """What loading the data chose and changed
    (:func:`protocol.studies.datasets.input_report`): in human output an ``input:``
    line and a ``warning:`` line for everything dropped, truncated or chosen from the
    data, on stdout; with ``--json`` (where the report is in the object) the warnings
    alone, on stderr, so that they are never silent."""
    if not report:
        return
    from protocol.studies.datasets import input_warnings

    warnings = input_warnings(report)
    if json_mode:
        for line in warnings:
            print(f"warning: {line}", file=sys.stderr)
        return
    if "alphabet" in report:
        alpha = report.get("alphabet", "")
        shown = alpha if len(alpha) <= 40 else alpha[:37] + "..."
        print(f"input: alphabet {report['alphabet_chosen']}: {shown!r}")
    target = corrupt_target_line(report)
    if target:
        print(target)
    for line in warnings:
        print(f"warning: {line}")


def corrupt_target_line(report: dict[str, Any] | None) -> str | None:
    """The ``input:`` line of the corrupted clients' target (``report["corrupt_target"]``),
    or ``None`` without one."""
    t = (report or {}).get("corrupt_target")
    if not t:
        return None
    return f"input: corrupted clients' target {t['word']!r} ({t['how']})"


def _reasons(d: dict[str, int] | None) -> str:
    return ", ".join(f"{reason} {k:,}" for reason, k in sorted((d or {}).items())) or "-"


def print_corrupted(c: dict[str, Any] | None, rounds_name: str = "round") -> None:
    """A short table of what the corrupted clients did and achieved (a result's
    ``corrupted`` section, :func:`protocol.studies.corrupted.section`): per round who
    was corrupted, how many of them were counted, the reports dropped by reason, and
    whether the round released what the honest clients alone release; the totals; and
    for TrieHH the whole-run comparison with plain TrieHH over the honest votes."""
    if not c:
        return
    w = sys.stdout.write
    who = c["who"]
    if "per_round" in who:
        whom = f"{who['per_round']} per {rounds_name}"
    elif "users" in who:
        us = who["users"]
        whom = "users " + ", ".join(str(u) for u in us[:8]) + (", ..." if len(us) > 8 else "")
    else:
        whom = f"each user with probability {who['share']:g}"
    w(f"\ncorrupted clients: {c['strategy']} ({c['description']}); {whom}, seed "
      f"{c['seed']}; target {c['target']!r}\n")
    if c.get("note"):
        w(f"({c['note']})\n")
    if c.get("rounds"):
        w(f"{rounds_name:>5} {'corrupted':>9} {'counted':>7} {'honest':>6}  "
          f"dropped: corrupted clients' / all\n")
        for r in c["rounds"]:
            w(f"{r.get(rounds_name, r.get('round')):>5} {r['corrupted']:>9} {r['counted']:>7} "
              f"{'yes' if r['matches_honest'] else 'NO':>6}  {_reasons(r['dropped_corrupted'])}"
              f" / {_reasons(r['dropped'])}\n")
        w(f"('honest': the {rounds_name} released what the honest clients' votes alone "
          "release)\n")
    t = c["totals"]
    if "runs" in t:
        w(f"total over {t['runs']} runs: {t['corrupted_reports']:,} corrupted reports, "
          f"{t['counted']:,} counted, dropped {_reasons(t['dropped_corrupted'])}; release "
          f"equals the honest one in {t['runs_release_equals_honest']} of {t['runs']} runs, "
          f"target released in {t['runs_target_released']}\n")
        return
    w(f"total: {t['corrupted_reports']:,} corrupted reports over {t['rounds']} "
      f"{rounds_name}s, {t['counted']:,} counted, dropped {_reasons(t['dropped_corrupted'])}"
      f"; {t['rounds_matching_honest']} of {t['rounds']} {rounds_name}s released what the "
      "honest clients alone release\n")
    if "release_equals_honest" in c:
        added = c.get("added_heavy_hitters") or []
        removed = c.get("removed_heavy_hitters") or []
        w(f"whole run against {c['honest_comparison']}: release "
          f"{'EQUALS' if c['release_equals_honest'] else 'DIFFERS FROM'} it "
          f"({len(c['honest_heavy_hitters'])} honest heavy hitters"
          + (f"; added {', '.join(map(repr, added[:10]))}" if added else "")
          + (f"; removed {', '.join(map(repr, removed[:10]))}" if removed else "")
          + f"); target {c['target']!r} released: "
          f"{'YES' if c['target_released'] else 'no'}\n")
    elif "target_released" in c:
        w(f"target {c['target']!r} released: {'YES' if c['target_released'] else 'no'}\n")


def print_triehh(out: dict[str, Any], show: int) -> None:
    """The human-readable report of one TrieHH run
    (:func:`protocol.studies.runners.triehh.summarize` plus ``seconds``)."""
    w = sys.stdout.write
    pv = out["privacy"]
    w(f"TrieHH on {out['dataset']}: n = {out['n']:,} users "
      f"({'several words' if out['multi_word'] else 'one word'} each), "
      f"unit size {out['unit_size']}, transport {out['transport']}\n")
    sys.stdout.flush()
    print_input(out.get("input"))
    if pv["epsilon"] is not None:
        w(f"privacy: ({pv['epsilon']:.4f}, {pv['delta']:.3g})-DP, {pv['theorem']}; "
          f"target epsilon {pv['target_epsilon']:g}, delta {pv['target_delta']:.3g}\n")
    else:
        w(f"privacy: {pv['theorem']}\n")
    w(f"parameters: theta = {pv['theta']}, gamma = {pv['gamma']:.4f}, m = {pv['m']}, "
      f"L = {pv['L']}\n\n")
    w(f"{'round':>5} {'candidates':>10} {'sampled':>8} {'released':>8} {'seconds':>8} "
      f"{'bytes up':>12}\n")
    for r in out["rounds"]:
        w(f"{r['round']:>5} {r['candidates']:>10} {r['sampled']:>8} {r['released']:>8} "
          f"{r['seconds']:>8.3f} {r['bytes_up']:>12,}\n")
    hh = out["heavy_hitters"]
    w(f"\n{len(hh)} heavy hitters discovered (+ {out['frequent_prefixes']} frequent prefixes)"
      f"; showing {min(show, len(hh))}\n")
    if not hh:
        from protocol.studies.runners.triehh import why_none

        w(f"heavy hitters: {why_none(pv['theta'], pv['m'], out['n'])}\n")
    counts = any(d["released_count"] is not None for d in hh)
    if hh and not counts:
        w("(vote counts are not released: Theorem 1 covers which words pass theta, not "
          "their counts; --release-counts shows them for diagnostics)\n")
    votes_head = f" {'votes':>6}" if counts else ""
    w(f"{'word':<16}{votes_head} {'true rank':>9} {'true freq':>10}\n")
    for d in hh[:show]:
        rank = "-" if d["true_rank"] is None else str(d["true_rank"])
        votes = (" " + format("-" if d["released_count"] is None else d["released_count"], ">6")
                 if counts else "")
        w(f"{d['word']:<16}{votes} {rank:>9} {d['true_frequency']:>10.2e}\n")
    w(f"\nprecision = discovered words that occur in the data at all: "
      f"{out['precision']:.3f}\n")
    w("precision@K = discovered words among the true top K / discovered words"
      + (" (the K with the largest counts)" if counts else "") + "; recall@K = discovered "
      "words among the true top K / K\n")
    w(f"{'K':>5} {'precision@K':>12} {'recall@K':>9} {'F1@K':>6}\n")
    for m in out["at_k"]:
        w(f"{m['k']:>5} {m['precision']:>12.3f} {m['recall']:>9.3f} {m['f1']:>6.3f}\n")
    print_corrupted(out.get("corrupted"))
    s = out["seconds"]
    w(f"\ntime: load {s['load']:.2f} s, run {s['run']:.2f} s"
      + (" (with the honest clients' plain run)" if out.get("corrupted") else "") + "\n")
