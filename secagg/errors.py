"""Exception hierarchy of :mod:`secagg`.

Every error the secure-aggregation core raises on purpose derives from
:class:`SecAggError`, so a caller (the protocol layer) can catch one type and be sure
nothing else escapes for malformed input:

* :class:`CryptoError` -- a decryption, signature or key check failed. Verification
  functions raise it; they never return ``False``.
* :class:`ParameterError` -- parameters are malformed or infeasible. It is also a
  :class:`ValueError`, and its message names the condition that failed.
"""
from __future__ import annotations

__all__ = ["SecAggError", "CryptoError", "ParameterError"]


class SecAggError(Exception):
    """Base class of every error raised by :mod:`secagg`."""


class CryptoError(SecAggError):
    """A cryptographic check failed (bad tag, bad signature, invalid or low-order key)."""


class ParameterError(SecAggError, ValueError):
    """Bad or infeasible parameters; the message states the failing condition."""
