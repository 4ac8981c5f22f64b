"""Federated heavy hitters under local differential privacy (Zhang, Ye, Hu, "Federated
Heavy Hitter Analytics with Local Differential Privacy", 2024).

Mechanisms: :func:`tap`, :func:`taps` (the paper's), :func:`fedpem` and :func:`gtf`
(its baselines). Every user sends exactly one epsilon-LDP frequency-oracle report.
"""
from __future__ import annotations

from protocol.core.contract import Transport

from .common import FederatedConfig, FederatedResult, PartyReport, aggregate_counts
from .fedpem import fedpem, gtf
from ..metrics import f1_at_k, local_recall, ncr
from .parties import FederatedError, Party, Population, PrivacyBudgetError
from .tap import tap, taps
from ..privacy import PrivacyGuarantee, local_guarantee

MECHANISMS = {"taps": taps, "tap": tap, "fedpem": fedpem, "gtf": gtf}

__all__ = ["FederatedConfig", "FederatedResult", "PartyReport", "aggregate_counts", "fedpem",
           "gtf", "tap", "taps", "f1_at_k", "ncr", "local_recall", "FederatedError", "Party",
           "Population", "PrivacyBudgetError", "MECHANISMS", "run", "privacy"]


def run(name: str, pop: Population, cfg: FederatedConfig, rng,  # noqa: ANN001
        transport: Transport | None = None) -> FederatedResult:
    """Run the mechanism ``name`` ("taps", "tap", "fedpem", "gtf"), each party's oracle
    rounds over ``transport`` (default: plaintext).

    Raises:
        FederatedError: for an unknown name or invalid inputs.
    """
    try:
        fn = MECHANISMS[name]
    except KeyError:
        raise FederatedError(f"unknown mechanism {name!r}; choose from {sorted(MECHANISMS)}") from None
    return fn(pop, cfg, rng, transport)


def privacy(name: str, cfg: FederatedConfig) -> PrivacyGuarantee:
    """The guarantee of mechanism ``name``: every user sends exactly one ``cfg.epsilon``-LDP
    report of ``cfg.oracle`` (the parties' ledgers refuse a second), and everything else is
    post-processing of those reports. It is the same on every transport (no
    amplification is claimed).

    Raises:
        FederatedError: for an unknown name.
    """
    if name not in MECHANISMS:
        raise FederatedError(f"unknown mechanism {name!r}; choose from {sorted(MECHANISMS)}")
    return local_guarantee(name, cfg.epsilon, "Zhang, Ye, Hu 2024: one epsilon-LDP "
                           "frequency-oracle report per user", {"oracle": cfg.oracle,
                                                                "reports_per_user": 1})
