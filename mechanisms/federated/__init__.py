"""Federated heavy hitters under local differential privacy (Zhang, Ye, Hu, "Federated Heavy Hitter
Analytics with Local Differential Privacy", 2024).

Mechanisms: :func:`tap`, :func:`taps` (the paper's), :func:`fedpem` and :func:`gtf`
(its baselines). Every user sends exactly one epsilon-LDP frequency-oracle report.
"""
from __future__ import annotations

from .common import FederatedConfig, FederatedResult, PartyReport, aggregate_counts
from .fedpem import fedpem, gtf
from .metrics import f1_at_k, local_recall, ncr
from .parties import FederatedError, Party, Population, PrivacyBudgetError
from .tap import tap, taps

MECHANISMS = {"taps": taps, "tap": tap, "fedpem": fedpem, "gtf": gtf}

__all__ = ["FederatedConfig", "FederatedResult", "PartyReport", "aggregate_counts", "fedpem",
           "gtf", "tap", "taps", "f1_at_k", "ncr", "local_recall", "FederatedError", "Party",
           "Population", "PrivacyBudgetError", "MECHANISMS", "run"]


def run(name: str, pop: Population, cfg: FederatedConfig, rng) -> FederatedResult:  # noqa: ANN001
    """Run the mechanism ``name`` ("taps", "tap", "fedpem", "gtf").

    Raises:
        FederatedError: for an unknown name or invalid inputs.
    """
    try:
        fn = MECHANISMS[name]
    except KeyError:
        raise FederatedError(f"unknown mechanism {name!r}; choose from {sorted(MECHANISMS)}") from None
    return fn(pop, cfg, rng)
