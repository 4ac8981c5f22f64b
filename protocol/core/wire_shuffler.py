"""Registers the shuffler's message types with :mod:`protocol.core.codec` (tags 100..199).

=====  =======================  ==========================================
 tag    type                     direction
=====  =======================  ==========================================
 100    ShufflerEnvelope         client -> shuffler (outer layer)
 101    AnalyzerEnvelope         inner layer (inside 100, forwarded in 103)
 102    PlainReport              innermost layer (inside 101)
 103    ShuffledBatch            shuffler -> analyzer
 104    ShuffleReceipt           shuffler -> operator / auditor
 105    BlindedBatch             shuffler 1 -> shuffler 2 (blinded crowd ids)
=====  =======================  ==========================================

Importing this module is enough; registration is idempotent.
"""
from __future__ import annotations

from protocol.core import codec
from shuffler.messages import (
    AnalyzerEnvelope, BlindedBatch, PlainReport, ShuffledBatch, ShuffleReceipt,
    ShufflerEnvelope,
)

MESSAGE_TYPES = (ShufflerEnvelope, AnalyzerEnvelope, PlainReport, ShuffledBatch, ShuffleReceipt,
                 BlindedBatch)

for _cls in MESSAGE_TYPES:
    assert 100 <= _cls.TAG < 200
    codec.register(_cls)

__all__ = ["MESSAGE_TYPES"]
