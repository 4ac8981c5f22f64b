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

__all__ = ["plot_discovery_rate", "plot_recall_at_k", "pyplot", "output_dir"]


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
