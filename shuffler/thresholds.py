"""Crowd thresholds of the shuffler (Bittau et al., "Prochlo", SOSP 2017, section 3.5).

A crowd of ``c`` reports is forwarded whole if ``c >= T`` (:class:`HardThreshold`).
Prochlo's noisy threshold (:class:`NoisyThreshold`) first removes
``d = max(0, round(N(D, sigma^2)))`` random reports from each crowd and forwards the
remaining ``c - d`` only if ``c - d >= T``. Its privacy towards the analyzer, for one
report added to or removed from one crowd, is computed exactly for the released count
``c - d`` (thresholding is post-processing) by :func:`noisy_threshold_delta`:

    p_j = P[d = j],  p_0 = Phi((0.5 - D) / sigma)     (all mass below 0.5 clipped to 0)
    delta(eps) = max( p_0 + sum_{j>=1} (p_j - e^eps p_{j-1})^+ ,
                      sum_{j>=0} (p_j - e^eps p_{j+1})^+ )

The first term of the first line is a floor: with ``c + 1`` reports, "nothing was
removed" (probability ``p_0``) shows ``c + 1`` copies, which ``c`` reports can never
show, so ``delta >= p_0 = Phi((0.5 - D)/sigma)`` for *every* epsilon. Any scheme that
only removes reports has this floor; choose ``D / sigma`` large enough.

The rules are applied to a batch by :func:`shuffler.shuffle.threshold_and_shuffle`.

**Membership-only release** (``HardThreshold(T, membership_only=True)``): when a round
releases only *which* crowds pass (TrieHH), the shuffler forwards one representative
report per passing crowd (the first in the uniformly shuffled order), so the analyzer
learns the passing crowds and not their sizes.

**Receipts.** The shuffler's :class:`~shuffler.messages.ShuffleReceipt` is the
*operator* receipt: it counts crowds and below-threshold reports, which pin the sizes of
sub-threshold crowds (with no abstentions, "2 crowds, 3 reports dropped" at ``T = 3``
means sizes {2, 1}). It stays with the shuffler's operator. What the analyzer may see is
:func:`analyzer_receipt`: the context, the reports accepted (the round's participants,
abstentions included), the reports forwarded (which the analyzer counts in the batch
anyway) and the rule -- nothing about crowds that did not pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ShufflerError
from .messages import Context, ShuffleReceipt

__all__ = [
    "HardThreshold", "NoisyThreshold", "ThresholdRule", "noisy_threshold_delta",
    "noisy_threshold_epsilon", "noisy_threshold_delta_floor", "AnalyzerReceipt",
    "analyzer_receipt",
]


@dataclass(frozen=True, slots=True)
class HardThreshold:
    """Forward a crowd whole iff it holds at least ``T`` reports.

    Attributes:
        T: the threshold.
        membership_only: forward one representative report per passing crowd instead
            of the whole crowd (rounds that release membership, not counts).

    Raises:
        ShufflerError: if ``T < 1`` or ``membership_only`` is not a bool.
    """

    T: int = 1
    membership_only: bool = False

    def __post_init__(self) -> None:
        if type(self.T) is not int or self.T < 1:
            raise ShufflerError("threshold T must be an int >= 1")
        if type(self.membership_only) is not bool:
            raise ShufflerError("membership_only must be a bool")

    def describe(self) -> str:
        return f"hard(T={self.T},membership)" if self.membership_only else f"hard(T={self.T})"


@dataclass(frozen=True, slots=True)
class NoisyThreshold:
    """Prochlo's noisy threshold: drop ``max(0, round(N(D, sigma^2)))`` reports per crowd,
    then forward the rest iff at least ``T`` remain.

    Raises:
        ShufflerError: for ``T < 1``, ``D < 0`` or ``sigma <= 0``.
    """

    T: int
    D: float
    sigma: float

    def __post_init__(self) -> None:
        if type(self.T) is not int or self.T < 1:
            raise ShufflerError("threshold T must be an int >= 1")
        if not (math.isfinite(self.D) and self.D >= 0):
            raise ShufflerError("mean drop D must be finite and >= 0")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ShufflerError("sigma must be finite and > 0")

    def describe(self) -> str:
        return f"noisy(T={self.T},D={self.D:g},sigma={self.sigma:g})"

    def delta(self, epsilon: float) -> float:
        """See :func:`noisy_threshold_delta`."""
        return noisy_threshold_delta(self.D, self.sigma, epsilon)

    def epsilon(self, delta: float) -> float:
        """See :func:`noisy_threshold_epsilon`."""
        return noisy_threshold_epsilon(self.D, self.sigma, delta)


ThresholdRule = HardThreshold | NoisyThreshold


def _drop_pmf(D: float, sigma: float) -> np.ndarray:
    """P[d = j] for d = max(0, round(N(D, sigma^2))), j = 0..J (tail beyond J < 1e-30)."""
    hi = int(math.ceil(D + 40.0 * sigma)) + 2
    j = np.arange(hi + 1, dtype=float)
    # survival function of the normal via erfc (accurate in both tails)
    sf = np.array([0.5 * math.erfc((x - D) / (sigma * math.sqrt(2.0))) for x in j + 0.5])
    pmf = np.empty(hi + 1)
    pmf[0] = 0.5 * math.erfc(-(0.5 - D) / (sigma * math.sqrt(2.0)))  # Phi((0.5 - D)/sigma)
    # P[j - 0.5 <= X < j + 0.5] = sf(j - 0.5) - sf(j + 0.5), computed from sf for accuracy
    pmf[1:] = sf[:-1] - sf[1:]
    return np.clip(pmf, 0.0, 1.0)


def noisy_threshold_delta_floor(D: float, sigma: float) -> float:
    """``P[d = 0] = Phi((0.5 - D)/sigma)``: no epsilon gives a smaller delta."""
    return 0.5 * math.erfc((D - 0.5) / (sigma * math.sqrt(2.0)))


def noisy_threshold_delta(D: float, sigma: float, epsilon: float) -> float:
    """Exact delta(epsilon) of the noisy-drop count for one report added/removed.

    Computes the hockey-stick divergence of ``c + 1 - d`` versus ``c - d`` in both
    directions (see module docstring); the hard threshold afterwards is
    post-processing, so this is a sound bound for what the analyzer sees per crowd.

    Raises:
        ShufflerError: for negative epsilon or invalid D, sigma.
    """
    NoisyThreshold(1, D, sigma)  # validates
    if not epsilon >= 0:
        raise ShufflerError("epsilon must be >= 0")
    p = _drop_pmf(D, sigma)
    e = math.exp(min(epsilon, 700.0))
    up = p[0] + np.maximum(p[1:] - e * p[:-1], 0.0).sum()
    down = np.maximum(p[:-1] - e * p[1:], 0.0).sum() + p[-1]
    return float(min(1.0, max(up, down)))


def noisy_threshold_epsilon(D: float, sigma: float, delta: float) -> float:
    """Smallest epsilon with ``delta(epsilon) <= delta`` (bisection); ``inf`` below the floor.

    Raises:
        ShufflerError: for delta outside (0, 1).
    """
    if not 0 < delta < 1:
        raise ShufflerError("delta must be in (0, 1)")
    if noisy_threshold_delta(D, sigma, 60.0) > delta:
        return math.inf
    lo, hi = 0.0, 60.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if noisy_threshold_delta(D, sigma, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, slots=True)
class AnalyzerReceipt:
    """The part of a shuffle receipt the analyzer may see: nothing about crowds that
    did not pass the threshold.

    Attributes:
        context: the batch's context.
        accepted: reports accepted by the shuffler (the round's participants,
            abstentions included).
        forwarded: reports forwarded (the length of the batch the analyzer receives).
        threshold_rule: the rule's description.

    Raises:
        ShufflerError: for a non-Context context, negative counts, ``forwarded >
            accepted`` or a rule description that is not a short string.
    """

    context: Context
    accepted: int
    forwarded: int
    threshold_rule: str

    def __post_init__(self) -> None:
        if not isinstance(self.context, Context):
            raise ShufflerError("context must be a Context")
        for name in ("accepted", "forwarded"):
            v = getattr(self, name)
            if type(v) is not int or not 0 <= v < 1 << 63:
                raise ShufflerError(f"{name} must be an int in [0, 2^63)")
        if self.forwarded > self.accepted:
            raise ShufflerError("forwarded exceeds accepted")
        if type(self.threshold_rule) is not str or len(self.threshold_rule) > 256:
            raise ShufflerError("threshold_rule must be a short string")


def analyzer_receipt(receipt: ShuffleReceipt) -> AnalyzerReceipt:
    """Split the analyzer-visible part off an operator receipt.

    Drops ``crowds``, ``crowds_forwarded``, ``dropped_by_threshold`` and ``rejected``
    (the operator's totals; with ``accepted`` and the forwarded crowds they would pin
    the sizes of sub-threshold crowds).

    Raises:
        ShufflerError: if ``receipt`` is not a ShuffleReceipt.
    """
    if not isinstance(receipt, ShuffleReceipt):
        raise ShufflerError("receipt must be a ShuffleReceipt")
    return AnalyzerReceipt(receipt.context, receipt.accepted, receipt.forwarded,
                           receipt.threshold_rule)
