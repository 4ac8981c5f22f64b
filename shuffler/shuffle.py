"""Thresholding and shuffling of one batch, and what a release holds.

Shuffle: each survivor gets a 128-bit tag from the injected randomness and the batch
is sorted by tag; if two tags collide (probability below ``n^2 / 2^129``) all tags are
redrawn. Sorting i.i.d. uniform distinct tags yields every permutation with equal
probability (exchangeability), so the order is uniform and independent of arrival.
Noise for the noisy threshold (:class:`shuffler.thresholds.NoisyThreshold`) is drawn by
Box-Muller from 53-bit uniforms of the same randomness; the privacy computation assumes
an exact rounded Gaussian (floating-point effects on the drop count are far below the
stated delta for the documented ranges).

:func:`threshold_and_shuffle` is the release step of both shufflers that threshold:
:class:`shuffler.shuffler.Shuffler` (keyed crowd ids) and
:class:`shuffler.blinded.CrowdShuffler` (shuffler 2 of the blinded pipeline).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .errors import RejectReason
from .keys import RandomSource
from .messages import BlindedBatch, Context, ShuffledBatch, ShuffleReceipt
from .thresholds import HardThreshold, ThresholdRule

__all__ = ["uniform_permutation", "threshold_and_shuffle", "ShuffleOutput", "BlindedOutput"]


def uniform_permutation(n: int, rand: RandomSource) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from cryptographic randomness.

    Sorts ``n`` i.i.d. 128-bit tags; redraws all tags on a collision, so the result is
    exactly uniform.
    """
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    while True:
        tags = np.frombuffer(rand.token_bytes(16 * n), dtype=">u8").reshape(n, 2)
        order = np.lexsort((tags[:, 1], tags[:, 0]))
        s = tags[order]
        if not np.any((s[1:, 0] == s[:-1, 0]) & (s[1:, 1] == s[:-1, 1])):
            return order.astype(np.int64)


def _normal(n: int, rand: RandomSource) -> np.ndarray:
    """``n`` standard normal samples (Box-Muller on 53-bit uniforms from ``rand``)."""
    raw = np.frombuffer(rand.token_bytes(16 * n), dtype="<u8").reshape(n, 2) >> np.uint64(11)
    u1 = (raw[:, 0].astype(float) + 1.0) / 2.0**53  # (0, 1]
    u2 = raw[:, 1].astype(float) / 2.0**53          # [0, 1)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@dataclass(frozen=True, slots=True)
class ShuffleOutput:
    """Result of closing a batch.

    Attributes:
        batch: what goes to the analyzer (inner ciphertexts, shuffled).
        receipt: counts of what happened.
        crowd_sizes: crowd id -> number of accepted reports (the shuffler's own
            knowledge; *not* sent to the analyzer).
    """

    batch: ShuffledBatch
    receipt: ShuffleReceipt
    crowd_sizes: dict[bytes, int]


@dataclass(frozen=True, slots=True)
class BlindedOutput:
    """Result of closing a blinded batch at shuffler 1: what goes to shuffler 2, and
    counts (no crowd data: shuffler 1 cannot tell crowds apart)."""

    batch: BlindedBatch
    receipt: ShuffleReceipt


def threshold_and_shuffle(context: Context, crowds: Sequence[bytes], inner: Sequence[bytes],
                          rejected: Mapping[RejectReason, int], rule: ThresholdRule,
                          rand: RandomSource) -> ShuffleOutput:
    """Apply ``rule`` to the crowds of accepted reports, shuffle, and build the release.

    ``crowds[i]`` is the crowd id of ``inner[i]``; ``rejected`` counts refusals by
    reason (for the receipt). Used by :class:`shuffler.shuffler.Shuffler` and by the second shuffler of
    the blinded pipeline (:class:`shuffler.blinded.CrowdShuffler`).
    """
    n = len(inner)
    index: dict[bytes, int] = {}
    labels = np.fromiter((index.setdefault(c, len(index)) for c in crowds),
                         dtype=np.int64, count=n)
    sizes = np.bincount(labels, minlength=len(index))
    order = uniform_permutation(n, rand)
    dropped = {"below_threshold": 0, "noise_drop": 0, "membership_only": 0}
    if isinstance(rule, HardThreshold):
        keep_crowd = sizes >= rule.T
        keep = keep_crowd[labels[order]]
        dropped["below_threshold"] = int(n - keep.sum())
        if rule.membership_only:  # one representative per passing crowd
            first = np.zeros(n, dtype=bool)
            first[np.unique(labels[order], return_index=True)[1]] = True
            collapsed = keep & ~first
            dropped["membership_only"] = int(collapsed.sum())
            keep &= first
    else:
        drop = np.maximum(0, np.rint(rule.D + rule.sigma * _normal(len(sizes), rand)))
        drop = drop.astype(np.int64)
        remaining = sizes - np.minimum(drop, sizes)
        keep_crowd = remaining >= rule.T
        lab = labels[order]
        # rank of each report within its crowd, in shuffled (uniformly random) order:
        # the first ``drop`` of every crowd are the uniformly chosen ones removed
        srt = np.argsort(lab, kind="stable")
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        rank = np.empty(n, dtype=np.int64)
        rank[srt] = np.arange(n) - starts[lab[srt]]
        keep = keep_crowd[lab] & (rank >= drop[lab])
        dropped["below_threshold"] = int(sizes[~keep_crowd].sum())
        dropped["noise_drop"] = int(np.minimum(drop, sizes)[keep_crowd].sum())
    forwarded = tuple(inner[i] for i in order[keep].tolist())
    rej = {r.value: c for r, c in rejected.items() if c}
    receipt = ShuffleReceipt(
        context, n + sum(rej.values()), rej, {k: v for k, v in dropped.items() if v},
        len(forwarded), len(index), int(keep_crowd.sum()), rule.describe())
    crowd_sizes = dict(zip(index.keys(), sizes.tolist()))
    return ShuffleOutput(ShuffledBatch(context, forwarded), receipt, crowd_sizes)
