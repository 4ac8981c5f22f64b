"""Frequency-oracle lookup for the federated mechanisms.

The oracles live in :mod:`mechanisms.fo` (GRR, OUE, OLH, AoN); this wrapper only turns
their input errors into :class:`FederatedError` and keeps one place to choose the dummy
item for out-of-domain prefixes.
"""
from __future__ import annotations

from typing import Any

from mechanisms.fo import ORACLES as FO_ORACLES
from mechanisms.fo import OracleInputError
from mechanisms.fo import make_oracle as fo_make_oracle

from .parties import FederatedError

__all__ = ["ORACLES", "make_oracle"]

ORACLES = tuple(sorted(FO_ORACLES))


def make_oracle(name: str, epsilon: float, domain_size: int, dummy: bool = True) -> Any:
    """Instantiate the oracle ``name`` over ``domain_size`` items (plus a dummy item).

    Raises:
        FederatedError: for an unknown oracle name or invalid parameters.
    """
    if name not in FO_ORACLES:
        raise FederatedError(f"unknown frequency oracle {name!r}; choose from {list(ORACLES)}")
    try:
        return fo_make_oracle(name, epsilon=epsilon, domain_size=domain_size, dummy=dummy)
    except OracleInputError as exc:
        raise FederatedError(str(exc)) from exc
