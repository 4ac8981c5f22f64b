"""Local-DP frequency oracles with one interface (see :mod:`mechanisms.fo.base`).

``make_oracle("olh", epsilon=2.0, domain_size=1000)`` builds any of them by name.
"""
from __future__ import annotations

from typing import Any

from .aon import AoN, AoNReports, default_buckets
from .base import (FrequencyOracle, OracleInputError, PrivacyGuarantee, ReportError,
                   coin, coin_probability, coin_threshold)
from .grr import GRR, GRRReports
from .oue import OUE, OUEReports
from .olh import OLH, OLHReports
from .rounds import (
    ClientReporter, OracleRound, run_oracle_round, run_oracle_round_at_clients, vector_modulus,
)

__all__ = [
    "AoN", "AoNReports", "GRR", "GRRReports", "OUE", "OUEReports", "OLH", "OLHReports",
    "FrequencyOracle", "OracleInputError", "PrivacyGuarantee", "ReportError", "ORACLES",
    "make_oracle", "default_buckets", "coin", "coin_probability", "coin_threshold",
    "OracleRound", "run_oracle_round", "vector_modulus", "run_oracle_round_at_clients",
    "ClientReporter",
]

ORACLES: dict[str, type[FrequencyOracle]] = {"grr": GRR, "oue": OUE, "olh": OLH, "aon": AoN}


def make_oracle(name: str, epsilon: float, domain_size: int, dummy: bool = False,
                **params: Any) -> FrequencyOracle:
    """Build an oracle by name (``grr``, ``oue``, ``olh``, ``aon``).

    Extra ``params`` go to the constructor (``g`` for OLH, ``B`` for AoN).

    Raises:
        OracleInputError: on an unknown name or invalid parameters.
    """
    try:
        cls = ORACLES[name.lower()]
    except KeyError:
        raise OracleInputError(f"unknown oracle {name!r}; choose from {sorted(ORACLES)}") from None
    try:
        return cls(epsilon=epsilon, domain_size=domain_size, dummy=dummy, **params)
    except TypeError as exc:
        raise OracleInputError(f"bad parameters for {name}: {exc}") from None
