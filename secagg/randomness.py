"""The one randomness interface of the project, and its production implementation.

Every party that needs randomness (secure-aggregation clients and server, Shamir
sharing, the shuffler's encoders and shufflers, the transports) takes a
:class:`RandomSource`: an object with ``token_bytes(n)``. :class:`OsRandom` reads the
operating system's CSPRNG and is the default everywhere; reproducible simulations opt in,
by name, to ``protocol.core.randomness.insecure_deterministic_randomness``.

It lives in ``secagg/`` because the pure cores may not import ``protocol/``; ``shuffler/``
imports this one module of ``secagg/`` and nothing else from it (see
docs/architecture.md).
"""
from __future__ import annotations

import os
from typing import Protocol

__all__ = ["RandomSource", "OsRandom"]


class RandomSource(Protocol):
    """Anything with ``token_bytes(n)`` returning ``n`` uniformly random bytes."""

    def token_bytes(self, n: int) -> bytes: ...


class OsRandom:
    """The operating system's CSPRNG (``os.urandom``). The default everywhere."""

    deterministic = False

    def token_bytes(self, n: int) -> bytes:
        """``n`` bytes from ``os.urandom``."""
        return os.urandom(n)
