"""Frequency-oracle lookup by name for the federated mechanisms.

The oracles themselves live in :mod:`mechanisms.fo` (GRR, OUE, OLH); this module only
maps the names used on the command line to their classes, with the dummy item turned on
for out-of-domain prefixes.
"""
from __future__ import annotations

import importlib
from typing import Any

from .parties import FederatedError

__all__ = ["ORACLES", "make_oracle"]

ORACLES: dict[str, tuple[str, str]] = {
    "grr": ("mechanisms.fo.grr", "GRR"),
    "oue": ("mechanisms.fo.oue", "OUE"),
    "olh": ("mechanisms.fo.olh", "OLH"),
}


def make_oracle(name: str, epsilon: float, domain_size: int, dummy: bool = True) -> Any:
    """Instantiate the oracle ``name`` over ``domain_size`` items (plus a dummy item).

    Raises:
        FederatedError: for an unknown oracle name.
    """
    try:
        module, cls = ORACLES[name]
    except KeyError:
        raise FederatedError(f"unknown frequency oracle {name!r}; choose from {sorted(ORACLES)}") from None
    return getattr(importlib.import_module(module), cls)(epsilon=epsilon, domain_size=domain_size,
                                                        dummy=dummy)
