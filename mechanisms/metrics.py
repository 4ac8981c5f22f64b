"""Utility metrics of heavy-hitter discovery: the one place they are defined.

Two families of papers score heavy hitters slightly differently; both are here, named
for what they compute, and share :func:`f1_score`.

Set scores (Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with Local Differential
Privacy", 2024, section 7.1, after Wang, Li, Jha, "Locally Differentially Private Heavy
Hitter Identification", TDSC 2019), on integer items:

* :func:`f1_at_k`: ``p = |R_T ∩ R| / |R|``, ``r = |R_T ∩ R| / |R_T|``,
  ``F1 = 2pr / (p + r)`` (0 when nothing is right), where ``R_T`` is the true top-k and
  ``R`` the estimate.
* :func:`ncr` (normalised cumulative rank): ``NCR = sum_{v in R} q(v) / sum_{v in R_T}
  q(v)`` with ``q(v) = k - rank(v)`` for ``v`` in the true top-k, 0 otherwise. ``rank`` is
  0-based (the most frequent item has quality ``k``, the k-th has quality 1), Wang et
  al.'s reading; with a 1-based rank the k-th true heavy hitter would carry no weight.
  The denominator is ``k (k + 1) / 2``.
* :func:`local_recall` (Zhang, Ye, Hu, Table 7): the mean over parties of
  ``|R_T ∩ C^i| / |R_T|`` where ``C^i`` is the set of local heavy hitters party ``i``
  uploaded.

Ranked scores (Zhu, Kairouz, McMahan, Sun, Li, "Federated Heavy Hitters Discovery with
Differential Privacy", AISTATS 2020, Figures 4, 5 and 7 and Table 2), on words, with
``T_K`` the ``K`` most frequent words, ``D`` the discovered words and ``D_K`` the ``K``
discovered words with the largest released counts:

* :func:`recall_at_k` = ``|D ∩ T_K| / K``;
* precision at K = ``|D_K ∩ T_K| / |D_K|`` (1 when nothing is discovered), in
  :func:`topk_metrics` with recall and F1 at K;
* :func:`precision` = ``|D ∩ population| / |D|``: the fraction of discovered words that
  really occur (TrieHH's is 1 by construction).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "MetricError", "f1_score", "f1_at_k", "ncr", "local_recall", "TopKMetrics",
    "topk_metrics", "recall_at_k", "precision", "rank_of",
]


class MetricError(ValueError):
    """Invalid metric input (empty ground truth, duplicates in the ground truth, k < 1)."""


def f1_score(precision_value: float, recall_value: float) -> float:
    """Harmonic mean ``2pr / (p + r)``; 0 when both are 0."""
    total = precision_value + recall_value
    return 0.0 if total == 0 else 2 * precision_value * recall_value / total


# ----------------------------------------------------------------------------- sets of items
def _as_set(a: Sequence[int] | np.ndarray) -> set[int]:
    return {int(x) for x in np.asarray(a, dtype=np.uint64).ravel()}


def f1_at_k(truth: Sequence[int] | np.ndarray, estimate: Sequence[int] | np.ndarray) -> float:
    """F1 score of an estimated heavy-hitter set against the true top-k.

    Raises:
        MetricError: if ``truth`` is empty.
    """
    t, e = _as_set(truth), _as_set(estimate)
    if not t:
        raise MetricError("the ground truth is empty")
    hit = len(t & e)
    if hit == 0:
        return 0.0
    return f1_score(hit / len(e), hit / len(t))


def ncr(truth_ranked: Sequence[int] | np.ndarray, estimate: Sequence[int] | np.ndarray) -> float:
    """Normalised cumulative rank.

    Args:
        truth_ranked: the true top-k, most frequent first (``k = len(truth_ranked)``).
        estimate: the estimated heavy hitters (order irrelevant; duplicates ignored).

    Raises:
        MetricError: if ``truth_ranked`` is empty or has duplicates.
    """
    truth = [int(x) for x in np.asarray(truth_ranked, dtype=np.uint64).ravel()]
    k = len(truth)
    if k == 0:
        raise MetricError("the ground truth is empty")
    if len(set(truth)) != k:
        raise MetricError("the ground truth has duplicates")
    quality = {v: k - r for r, v in enumerate(truth)}
    got = sum(quality.get(v, 0) for v in _as_set(estimate))
    return got / (k * (k + 1) / 2)


def local_recall(truth: Sequence[int] | np.ndarray,
                 local_sets: Sequence[Sequence[int] | np.ndarray]) -> float:
    """Mean over parties of the recall of the global top-k among local heavy hitters.

    Raises:
        MetricError: if ``truth`` or ``local_sets`` is empty.
    """
    t = _as_set(truth)
    if not t or len(local_sets) == 0:
        raise MetricError("need a non-empty ground truth and at least one party")
    return float(np.mean([len(t & _as_set(c)) / len(t) for c in local_sets]))


# ----------------------------------------------------------------------------- ranked words
@dataclass(frozen=True)
class TopKMetrics:
    """Precision, recall and F1 at ``k``."""

    k: int
    precision: float
    recall: float
    f1: float

    def as_dict(self) -> dict[str, float]:
        """``{"k", "precision", "recall", "f1"}``."""
        return {"k": self.k, "precision": self.precision, "recall": self.recall, "f1": self.f1}


def recall_at_k(discovered: Iterable[str], top: Sequence[str], k: int | None = None) -> float:
    """``|D ∩ top| / k`` with ``k = len(top)`` by default (0 when ``k`` is 0).

    Args:
        discovered: the discovered words (duplicates ignored).
        top: the true top words, most frequent first.
        k: the denominator (the cut-off), default ``len(top)``.
    """
    k = len(top) if k is None else k
    return len(set(discovered) & set(top)) / k if k else 0.0


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
        MetricError: ``k < 1`` (a ``ValueError``).
    """
    if k < 1:
        raise MetricError("k must be >= 1")
    top = set(truth[:k])
    recall = recall_at_k(discovered, truth[:k], k)
    if any(v is None for v in discovered.values()):
        dk = list(discovered)
    else:
        dk = sorted(discovered, key=lambda w: (-discovered[w], w))[:k]
    prec = (sum(1 for w in dk if w in top) / len(dk)) if dk else 1.0
    return TopKMetrics(k, prec, recall, f1_score(prec, recall))


def precision(discovered: Iterable[str], population_words: Collection[str],
              empty: float = 1.0) -> float:
    """Fraction of discovered words that occur in the population (``empty`` if none)."""
    d = list(discovered)
    return sum(1 for w in d if w in population_words) / len(d) if d else empty


def rank_of(words: Sequence[str], truth: Sequence[str]) -> dict[str, int | None]:
    """1-based true rank of each word (``None`` when it does not occur)."""
    pos = {w: i + 1 for i, w in enumerate(truth)}
    return {w: pos.get(w) for w in words}
