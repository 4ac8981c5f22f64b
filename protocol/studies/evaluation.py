"""Plots (and output directories) of heavy-hitter discovery after Zhu, Kairouz, McMahan, Sun, Li, "Federated Heavy
Hitters Discovery with Differential Privacy" (AISTATS 2020).

The metrics themselves (precision, recall and F1 at K, precision, ranks) are defined once,
in :mod:`mechanisms.metrics`.

Plots use matplotlib with the Agg backend (no display needed): discovery rate
against true frequency with the Proposition 1 worst-case curve (Figure 3 style) and
recall/F1 at K against K (Figure 4 style).
"""
from __future__ import annotations

import pathlib

import numpy as np

__all__ = ["plot_discovery_rate", "plot_recall_at_k", "pyplot", "output_dir", "Journal",
           "JOURNAL", "mean_ci", "ci_text"]

#: the journal file every repeated evaluation writes into its output directory
JOURNAL = "runs.jsonl"


def output_dir(path: str | pathlib.Path) -> pathlib.Path:
    """Create the output directory ``path`` (and its parents) if needed.

    Raises:
        protocol.studies.errors.StudyError: it cannot be created (a file in the way,
            no permission).
    """
    from protocol.studies.errors import StudyError

    out = pathlib.Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StudyError(f"cannot create {out}: {exc.strerror}") from None
    return out


def mean_ci(values: object) -> tuple[float, float | None]:
    """Mean and half-width of the 95% Student-t confidence interval (``None`` for one
    run: one run says nothing about the spread, and 0 would claim certainty)."""
    import math

    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), None
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return float(v.mean()), float(half)


def ci_text(ci: float | None, digits: int = 3) -> str:
    """A confidence half-width as printed: ``n/a`` when there is none (one run)."""
    return "n/a" if ci is None else f"{ci:.{digits}f}"


class Journal:
    """The finished repetitions of a long evaluation, one JSON line each, written (and
    flushed) as each finishes, so that a killed evaluation loses at most the
    repetition it was running.

    The first line holds the evaluation's options (``config``); every other line is
    ``{"key": [...], "value": ...}``. With ``resume`` the repetitions of an existing
    journal written with the same options are kept (:meth:`get`), a last line cut short
    by a kill is dropped, and the file is rewritten from them; without it the journal
    starts afresh. Used as a context manager (the file is closed on exit).

    Args:
        path: the journal file (usually ``OUT/runs.jsonl``).
        config: the options, JSON-serialisable; a resumed journal must hold the same.
        resume: continue from an existing journal.
        say: receives one line when repetitions are resumed.

    Raises:
        protocol.studies.errors.StudyError: a journal written with other options, a
            line that is not JSON (other than a cut last one), or the file cannot be
            written.
    """

    def __init__(self, path: str | pathlib.Path, config: dict, *, resume: bool = False,
                 say=lambda _msg: None) -> None:  # noqa: ANN001
        import json

        from protocol.studies.errors import StudyError

        self.path = pathlib.Path(path)
        self.config = json.loads(json.dumps(config))  # as it reads back
        self._done: dict[str, object] = {}
        if resume and self.path.exists():
            self._read()
            say(f"resuming: {len(self._done)} finished repetitions in {self.path}")
        try:
            self.path.write_text("".join(
                [json.dumps({"config": self.config}) + "\n"]
                + [json.dumps({"key": json.loads(k), "value": v}) + "\n"
                   for k, v in self._done.items()]), encoding="utf-8")
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - close()
        except OSError as exc:
            raise StudyError(f"cannot write {self.path}: {exc.strerror}") from None

    @staticmethod
    def _key(key: object) -> str:
        import json

        return json.dumps(json.loads(json.dumps(key)))

    def _read(self) -> None:
        import json

        from protocol.studies.errors import StudyError

        lines = self.path.read_text(encoding="utf-8").splitlines()
        for no, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if no == len(lines) - 1:
                    break  # the repetition being written when the process was killed
                raise StudyError(f"{self.path}:{no + 1}: not a JSON line") from None
            if no == 0:
                if not isinstance(rec, dict) or rec.get("config") != self.config:
                    got = rec.get("config") if isinstance(rec, dict) else rec
                    raise StudyError(f"{self.path} was written with other options ({got}); "
                                     "use the same options or another --out to start afresh")
                continue
            if not isinstance(rec, dict) or "key" not in rec or "value" not in rec:
                raise StudyError(f"{self.path}:{no + 1}: not a journal entry")
            self._done[self._key(rec["key"])] = rec["value"]

    def __len__(self) -> int:
        return len(self._done)

    def get(self, key: object) -> object | None:
        """The value recorded for ``key`` (a JSON-serialisable list), or ``None``."""
        return self._done.get(self._key(key))

    def record(self, key: object, value: object) -> None:
        """Append one finished repetition and flush it to disk."""
        import json

        k = self._key(key)
        self._done[k] = json.loads(json.dumps(value))
        self._fh.write(json.dumps({"key": json.loads(k), "value": self._done[k]}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pyplot():  # noqa: ANN201
    """``matplotlib.pyplot`` on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_discovery_rate(path: str | pathlib.Path, frequency: np.ndarray, rate: np.ndarray,
                        bound_frequency: np.ndarray | None, bound: np.ndarray | None,
                        title: str) -> None:
    """Scatter of empirical discovery rate against true frequency (log x axis) with
    the Proposition 1 worst-case curve (dashed)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    ax.scatter(frequency, rate, s=10, alpha=0.6, label="empirical (fraction of runs)")
    if bound is not None and bound_frequency is not None:
        ax.plot(bound_frequency, bound, "k--", lw=1.5, label="Proposition 1 worst case")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("true frequency of the word (fraction of users)")
    ax.set_ylabel("discovery rate")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_recall_at_k(path: str | pathlib.Path, ks: np.ndarray, recall: np.ndarray,
                     f1: np.ndarray, title: str) -> None:
    """Recall and F1 at K against K: mean over runs with a min-max band.

    ``recall`` and ``f1`` have shape ``(runs, len(ks))``.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for arr, name in ((recall, "recall at K"), (f1, "F1 at K")):
        mean = arr.mean(axis=0)
        ax.plot(ks, mean, label=f"{name} (mean)")
        ax.fill_between(ks, arr.min(axis=0), arr.max(axis=0), alpha=0.2)
    ax.set_xlabel("K (top K most frequent words)")
    ax.set_ylabel("score")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
