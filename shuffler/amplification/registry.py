"""The amplification bounds by name, and the two questions asked of them.

:data:`BOUNDS` names every bound with its source and validity range;
:func:`central_epsilon` (forward: the central epsilon of ``n`` shuffled
``epsilon0``-LDP reports) and :func:`local_epsilon` (inverse: the largest ``epsilon0``
meeting a central target) dispatch on that name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .blanket import (
    blanket_hoeffding_epsilon, blanket_hoeffding_epsilon0, triehh_blanket_epsilon,
    triehh_blanket_epsilon0,
)
from .clones import clone_epsilon, clone_epsilon0
from .efmrtt19 import efmrtt19_epsilon, efmrtt19_epsilon0
from .fmt21_closed_form import fmt21_closed_form_epsilon, fmt21_closed_form_epsilon0

__all__ = ["BoundInfo", "BOUNDS", "central_epsilon", "local_epsilon"]

@dataclass(frozen=True)
class BoundInfo:
    """One amplification bound: where it comes from and how to evaluate it both ways."""

    name: str
    source: str
    validity: str
    forward: Callable[[int, float, float], float]
    inverse: Callable[[int, float, float], float]


BOUNDS: dict[str, BoundInfo] = {
    b.name: b for b in (
        BoundInfo("efmrtt19", "Erlingsson et al., SODA 2019",
                  "epsilon0 <= 1/2, n >= 1000, delta <= 1/100",
                  efmrtt19_epsilon, efmrtt19_epsilon0),
        BoundInfo("bbgn19_hoeffding", "Balle, Bell, Gascon, Nissim, CRYPTO 2019 (Hoeffding)",
                  "any pure epsilon0-LDP randomiser",
                  blanket_hoeffding_epsilon, blanket_hoeffding_epsilon0),
        BoundInfo("bbgn19_triehh", "TrieHH code's closed form (cites BBGN19 Thm 5.3)",
                  "any pure epsilon0-LDP randomiser (constants unverified)",
                  triehh_blanket_epsilon, triehh_blanket_epsilon0),
        BoundInfo("fmt21_closed_form", "Feldman, McMillan, Talwar, FOCS 2021, Thm 3.1",
                  "epsilon0 <= ln(n / (16 ln(2/delta)))",
                  fmt21_closed_form_epsilon, fmt21_closed_form_epsilon0),
        BoundInfo("fmt21_numerical", "Feldman, McMillan, Talwar, FOCS 2021 (clones, numerical)",
                  "any pure epsilon0-LDP randomiser",
                  lambda n, e0, d: clone_epsilon(n, e0, d, "fmt21"),
                  lambda n, e, d: clone_epsilon0(n, e, d, "fmt21")),
        BoundInfo("fmt23_numerical", "Feldman, McMillan, Talwar, SODA 2023 (stronger clones)",
                  "any pure epsilon0-LDP randomiser",
                  lambda n, e0, d: clone_epsilon(n, e0, d, "fmt23"),
                  lambda n, e, d: clone_epsilon0(n, e, d, "fmt23")),
    )
}


def _bound(name: str) -> BoundInfo:
    try:
        return BOUNDS[name]
    except KeyError:
        raise ValueError(f"unknown bound {name!r}; choose from {sorted(BOUNDS)}") from None


def central_epsilon(n: int, epsilon0: float, delta: float,
                    bound: str = "fmt23_numerical") -> float:
    """Central epsilon (at ``delta``) of ``n`` shuffled ``epsilon0``-LDP reports.

    Args:
        n: number of shuffled reports.
        epsilon0: local epsilon of each report.
        delta: central delta.
        bound: a key of :data:`BOUNDS`.

    Returns:
        The bound's central epsilon, at most ``epsilon0``.

    Raises:
        ValueError: malformed arguments or unknown bound.
        AmplificationDomainError: outside the bound's theorem.
    """
    return float(_bound(bound).forward(n, epsilon0, delta))


def local_epsilon(n: int, epsilon: float, delta: float,
                  bound: str = "fmt23_numerical") -> float:
    """Largest local epsilon0 whose shuffled output is central (epsilon, delta)-DP.

    Args:
        n: number of shuffled reports.
        epsilon: central epsilon target.
        delta: central delta target.
        bound: a key of :data:`BOUNDS`.

    Raises:
        ValueError: malformed arguments or unknown bound.
        AmplificationDomainError: outside the bound's theorem.
    """
    return float(_bound(bound).inverse(n, epsilon, delta))
