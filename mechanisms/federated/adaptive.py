"""Adaptive trie extension (Zhang, Ye, Hu 2024, section 5.4, equations 2 and 3).

Given the estimated frequencies of the ``pi`` candidates of a level sorted in
decreasing order ``f_1 >= f_2 >= ... >= f_pi`` (1-based ranks), the query ``k`` and the
oracle's standard deviation ``sigma``:

Anchor (equation 2)::

    k* = argmax_{1 < k* <= k}  (sum_{1 < j <= k*} f_j) / k*  -  (sum_{k* < s <= k+1} f_s) / (k + 1 - k*)

The LaTeX divides the first sum (which has ``k* - 1`` terms, the largest frequency is
left out because it is always kept) by ``k*``; we follow the formula as printed.

Drift (equation 3)::

    eta  = min(k, E[x])
    E[x] = sum_{x = k* - k + 1}^{min(k, pi - k)}  x * Pr(X_{k*} <= X_{k*+x})
    Pr(X_{k*} <= X_{k*+x}) = (1 / sqrt(4 pi)) int_{-inf}^0 (1/sigma)
                              exp(-(t - (f_{k*} - f_{k*+x}))^2 / (4 sigma^2)) dt
                           = Phi( -(f_{k*} - f_{k*+x}) / (sqrt(2) sigma) )

i.e. the difference of two independent Gaussians of variance ``sigma^2`` centred on the
observed frequencies. The extension number is ``t = k* + eta``.

Resolved ambiguities (see docs/federated.md): terms whose rank ``k* + x`` is below 1
are skipped (the printed lower limit ``k* - k + 1`` can be negative); ``eta`` is rounded
to the nearest integer and clipped to ``[0, k]``; ``t`` never exceeds ``pi``. With at
most ``k`` candidates every candidate is extended (equation 2 needs ``k + 1`` ranks).

Readings of ``E[x]`` (:data:`DRIFT_READINGS`; :class:`~mechanisms.federated.common.FederatedConfig`
uses ``"variance"`` by default, :func:`drift` the literal ``"printed"``):

* ``"printed"``: the sum above, as printed (not an expectation: the probabilities do
  not sum to 1, so at large ``sigma``, where every one tends to 1/2, it grows with k);
* ``"normalised"``: ``sum x Pr / sum Pr``, an expectation over the drift positions;
* ``"counts"``: the frequencies taken as counts of the level's group (``f n``) against
  the oracle's standard deviation of a *fraction* -- the units a reader may assume the
  printed formula mixes; the drift then vanishes unless two estimates are within a few
  ``sigma / n`` of each other, and ``t`` is about ``k*``;
* ``"variance"``: the sum as printed with the oracle's *variance* ``sigma^2`` in place
  of ``sigma``. The text under equation 3 calls ``sigma`` the standard deviation, the
  utility analysis of the adaptive extension calls it the variance; for a frequency
  estimate (``sigma < 1``) the variance is the smaller scale, so fewer ranks look
  likely to overtake the anchor.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

__all__ = ["anchor", "drift", "extension_number", "DRIFT_READINGS"]

#: the readings of equation 3's ``E[x]`` (module docstring)
DRIFT_READINGS = ("printed", "normalised", "counts", "variance")


def anchor(f_desc: np.ndarray, k: int) -> int:
    """Equation 2: the anchor rank ``k*`` in ``2..k`` (1-based).

    Args:
        f_desc: estimated frequencies sorted in decreasing order, at least ``k + 1``.
        k: the query size, ``k >= 2``.

    Raises:
        ValueError: if ``k < 2`` or fewer than ``k + 1`` frequencies are given.
    """
    f = np.asarray(f_desc, dtype=float)
    if k < 2 or f.size < k + 1:
        raise ValueError(f"anchor needs k >= 2 and at least k + 1 frequencies (k={k}, got {f.size})")
    head = np.cumsum(f[:k + 1])  # head[i] = f_1 + ... + f_{i+1}
    ks = np.arange(2, k + 1)  # candidate k*
    first = (head[ks - 1] - f[0]) / ks  # sum_{1<j<=k*} f_j / k*
    second = (head[k] - head[ks - 1]) / (k + 1 - ks)  # mean of f_{k*+1} .. f_{k+1}
    return int(ks[int(np.argmax(first - second))])


def drift(f_desc: np.ndarray, k: int, k_star: int, sigma: float,
          reading: str = "printed", n: int = 1) -> float:
    """Equation 3: the expected drift ``E[x]`` of the anchor under LDP noise (unclipped),
    under one of :data:`DRIFT_READINGS` (``n``: the level's group size, used by
    ``"counts"``).

    Raises:
        ValueError: an unknown reading or ``n < 1``.
    """
    if reading not in DRIFT_READINGS:
        raise ValueError(f"unknown drift reading {reading!r}; choose from {DRIFT_READINGS}")
    if n < 1:
        raise ValueError("n must be >= 1")
    f = np.asarray(f_desc, dtype=float) * (n if reading == "counts" else 1)
    pi = f.size
    lo = max(k_star - k + 1, 1 - k_star)  # rank k*+x must be >= 1
    hi = min(k, pi - k)
    if hi < lo:
        return 0.0
    x = np.arange(lo, hi + 1)
    x = x[x != 0]
    if x.size == 0:
        return 0.0
    gap = f[k_star - 1] - f[k_star - 1 + x]
    if reading == "variance":
        sigma = sigma * sigma
    if sigma <= 0:
        prob = (gap <= 0).astype(float)
    else:
        prob = ndtr(-gap / (math.sqrt(2.0) * sigma))
    if reading == "normalised":
        total = float(np.sum(prob))
        return float(np.sum(x * prob)) / total if total > 0 else 0.0
    return float(np.sum(x * prob))


def extension_number(f_desc: np.ndarray, k: int, sigma: float, reading: str = "printed",
                     n: int = 1) -> int:
    """The adaptive extension number ``t = k* + eta`` (equations 2 and 3).

    Args:
        f_desc: estimated frequencies sorted in decreasing order.
        k: the query size.
        sigma: standard deviation of one estimate (same unit as ``f_desc``).
        reading: how ``E[x]`` is read (:data:`DRIFT_READINGS`).
        n: the level's group size (for the ``"counts"`` reading).

    Raises:
        ValueError: if ``k < 1``, ``sigma < 0`` or an unknown reading.
    """
    if k < 1 or sigma < 0:
        raise ValueError("need k >= 1 and sigma >= 0")
    pi = int(np.asarray(f_desc).size)
    if pi <= k or k < 2:
        return min(pi, k)
    ks = anchor(f_desc, k)
    eta = min(float(k), drift(f_desc, k, ks, sigma, reading, n))
    eta_i = int(min(k, max(0, math.floor(eta + 0.5))))
    return int(min(pi, ks + eta_i))
