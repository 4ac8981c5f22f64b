"""Utility metrics for heavy-hitter discovery and the plots of Zhu et al. (2020).

Definitions (``T_K``: the ``K`` most frequent words of the population by
population frequency, ties broken alphabetically; ``D``: the discovered words;
``D_K``: the ``K`` discovered words with the largest released counts):

* recall at K     = ``|D ∩ T_K| / K``  (the fraction of the true top K found;
  "recall of the top K words", Figures 4 and 7);
* precision at K  = ``|D_K ∩ T_K| / |D_K|`` (1 when nothing is discovered);
* F1 at K         = harmonic mean of the two (Figures 4 and 5);
* precision       = ``|D ∩ population| / |D|``: the fraction of discovered words that
  really occur (Table 2's "precision"; TrieHH's is 1 by construction).

Plots use matplotlib with the Agg backend (no display needed): discovery rate
against true frequency with the Proposition 1 worst-case curve (Figure 3 style) and
recall/F1 at K against K (Figure 4 style).
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "TopKMetrics", "topk_metrics", "precision", "rank_of", "plot_discovery_rate",
    "plot_recall_at_k", "pyplot", "output_dir",
]


@dataclass(frozen=True)
class TopKMetrics:
    k: int
    precision: float
    recall: float
    f1: float

    def as_dict(self) -> dict[str, float]:
        return {"k": self.k, "precision": self.precision, "recall": self.recall, "f1": self.f1}


def topk_metrics(discovered: Mapping[str, float | None], truth: Sequence[str], k: int) -> TopKMetrics:
    """Precision, recall and F1 at ``k``.

    Recall is ``|D & T_K| / K``. Precision is taken over ``D_K``, the ``K``
    discovered words with the largest released counts; when the mechanism released
    no counts (any value ``None``, as TrieHH by default), ``D_K`` is the whole
    discovered set, as in the TrieHH paper's evaluation.

    Args:
        discovered: discovered word -> released count, or ``None`` when unknown.
        truth: the population's words, most frequent first.
        k: the cut-off (>= 1).

    Raises:
        ValueError: ``k < 1``.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    top = set(truth[:k])
    found = sum(1 for w in discovered if w in top)
    recall = found / k
    if any(v is None for v in discovered.values()):
        dk = list(discovered)
    else:
        dk = sorted(discovered, key=lambda w: (-discovered[w], w))[:k]
    prec = (sum(1 for w in dk if w in top) / len(dk)) if dk else 1.0
    f1 = 0.0 if prec + recall == 0 else 2 * prec * recall / (prec + recall)
    return TopKMetrics(k, prec, recall, f1)


def precision(discovered: Sequence[str] | Mapping[str, float], population_words: set[str]) -> float:
    """Fraction of discovered words that occur in the population (1 if none)."""
    d = list(discovered)
    return sum(1 for w in d if w in population_words) / len(d) if d else 1.0


def rank_of(words: Sequence[str], truth: Sequence[str]) -> dict[str, int | None]:
    """1-based true rank of each word (``None`` when it does not occur)."""
    pos = {w: i + 1 for i, w in enumerate(truth)}
    return {w: pos.get(w) for w in words}


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
