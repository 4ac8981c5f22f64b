"""Utility metrics of Zhang, Ye, Hu (2024), section 7.1 (after Wang et al., PEM, TDSC 2019).

* F1 at k: ``p = |R_T ∩ R| / |R|``, ``r = |R_T ∩ R| / |R_T|``, ``F1 = 2pr / (p + r)``
  (0 when nothing is right), where ``R_T`` is the true top-k and ``R`` the estimate.
* NCR (normalised cumulative rank): ``NCR = sum_{v in R} q(v) / sum_{v in R_T} q(v)``
  with ``q(v) = k - rank(v)`` for ``v`` in the true top-k, 0 otherwise. We read
  ``rank`` as 0-based (the most frequent item has rank 0 and quality ``k``, the k-th has
  quality 1), which is Wang et al.'s reading; with a 1-based rank the k-th true heavy
  hitter would carry no weight at all. The denominator is ``k (k + 1) / 2``.
* Local recall (Table 7): the mean over parties of ``|R_T ∩ C^i| / |R_T|`` where
  ``C^i`` is the set of local heavy hitters party ``i`` uploaded.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["MetricError", "f1_at_k", "ncr", "local_recall"]


class MetricError(ValueError):
    """Invalid metric input (empty ground truth, duplicates in the ground truth)."""


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
    p, r = hit / len(e), hit / len(t)
    return 2 * p * r / (p + r)


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
