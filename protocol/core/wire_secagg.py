"""Registers the secure-aggregation messages (``secagg.messages``, tags 1..99) with the
strict codec of :mod:`protocol.core.codec`.

Importing this module is enough; it is idempotent. ``secagg`` itself cannot import
msgpack or the codec (the pure core stays wire-agnostic), so the registration lives here.
"""
from __future__ import annotations

from protocol.core import codec
from secagg.messages import ALL_MESSAGES

__all__ = ["SECAGG_MESSAGES"]

for _cls in ALL_MESSAGES:
    assert 1 <= _cls.TAG <= 99, _cls
    # round numbers are the messages' own ROUND (no table of rounds here)
    assert _cls.ROUND is None or 0 <= _cls.ROUND <= 4, _cls
    codec.register(_cls)

SECAGG_MESSAGES = ALL_MESSAGES
