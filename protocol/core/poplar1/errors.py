"""The typed errors of the Poplar1 core.

Every malformed encoding (wrong length, trailing bits or bytes, a field element at or
above its modulus, an out-of-range level or prefix) raises :class:`Poplar1DecodeError`;
a sketch that does not verify raises :class:`Poplar1VerificationError` in the
one-report API and marks the report rejected in the batch API. Both derive from
:class:`Poplar1Error`, the one exception a caller of this package has to catch.
"""
from __future__ import annotations

__all__ = ["Poplar1Error", "Poplar1DecodeError", "Poplar1VerificationError",
           "Poplar1UsageError"]


class Poplar1Error(Exception):
    """Anything the Poplar1 core refuses."""


class Poplar1DecodeError(Poplar1Error):
    """A share, message or parameter whose encoding is malformed."""


class Poplar1VerificationError(Poplar1Error):
    """A report whose sketch does not verify (the aggregators reject it)."""


class Poplar1UsageError(Poplar1Error):
    """A call that breaks the VDAF's rules (aggregation parameter order, sizes)."""
