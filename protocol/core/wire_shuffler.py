"""Registers the shuffler's message types with :mod:`protocol.core.codec` (tags 100..199),
with the shape of each message's fields.

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

Registered shapes (no session known) bound the context fields by their types (task of
at most ``MAX_TASK_BYTES``, payload of at most ``MAX_PAYLOAD``) and a batch by
``MAX_BATCH`` envelopes. :func:`session_limits` pins them to one batch: the context's
fields equal the task's, every envelope, inner layer and report has the one size the
context's payload size gives (:func:`shuffler.messages.envelope_size`,
:func:`shuffler.messages.inner_size`), and a batch holds at most ``max_batch``
envelopes.

Importing this module is enough; registration is idempotent.
"""
from __future__ import annotations

from protocol.core import codec
from protocol.core.codec import Array, Bin, Bool, Int, Map, Record, SessionLimits, Shape, Str
from shuffler.errors import RejectReason
from shuffler.keys import KEY_BYTES, KEY_ID_BYTES, TAG_BYTES
from shuffler.messages import (
    BLINDED_CROWD_BYTES, CROWD_ID_BYTES, MAX_PAYLOAD, MAX_TASK_BYTES, AnalyzerEnvelope, BlindedBatch, Context,
    PlainReport, ShuffledBatch, ShuffleReceipt, ShufflerEnvelope, crowd_field_bytes, inner_size,
)

MESSAGE_TYPES = (ShufflerEnvelope, AnalyzerEnvelope, PlainReport, ShuffledBatch, ShuffleReceipt,
                 BlindedBatch)

#: most envelopes in one batch when no session bounds it
MAX_BATCH = 1 << 22
_U63 = Int(0, (1 << 63) - 1)
_LEN_PREFIX = 2

__all__ = ["MESSAGE_TYPES", "MAX_BATCH", "shapes", "session_limits"]


def _context_shape(context: Context | None) -> tuple[Shape, ...]:
    if context is None:
        return (Str(1, MAX_TASK_BYTES), Int(), Int(0, MAX_PAYLOAD), Bin(KEY_ID_BYTES, KEY_ID_BYTES),
                Bin(KEY_ID_BYTES, KEY_ID_BYTES), Bool())
    task = len(context.task.encode("utf-8"))
    return (Str(task, task), Int(context.epoch, context.epoch),
            Int(context.payload_size, context.payload_size),
            Bin(KEY_ID_BYTES, KEY_ID_BYTES), Bin(KEY_ID_BYTES, KEY_ID_BYTES), Bool())


def shapes(context: Context | None = None, max_batch: int = MAX_BATCH) -> dict[int, Record]:
    """The shape of every shuffler message, for one context and batch size (or none).

    Raises:
        ValueError: ``max_batch`` outside ``[0, MAX_BATCH]``.
    """
    if not 0 <= max_batch <= MAX_BATCH:
        raise ValueError(f"max_batch must be in [0, {MAX_BATCH}]")
    ctx = _context_shape(context)
    if context is None:
        inner = Bin(inner_size(0), inner_size(MAX_PAYLOAD))
        outer = Bin(CROWD_ID_BYTES + inner_size(0) + TAG_BYTES,
                    BLINDED_CROWD_BYTES + inner_size(MAX_PAYLOAD) + TAG_BYTES)
        inner_ct = Bin(TAG_BYTES + _LEN_PREFIX, MAX_PAYLOAD + _LEN_PREFIX + TAG_BYTES)
        psize, report = Int(0, MAX_PAYLOAD), Bin(0, MAX_PAYLOAD)
    else:
        p = context.payload_size
        size = inner_size(p)
        inner = Bin(size, size)
        o = crowd_field_bytes(context) + size + TAG_BYTES
        outer = Bin(o, o)
        inner_ct = Bin(p + _LEN_PREFIX + TAG_BYTES, p + _LEN_PREFIX + TAG_BYTES)
        psize, report = Int(p, p), Bin(0, p)
    key = Bin(KEY_BYTES, KEY_BYTES)
    return {
        ShufflerEnvelope.TAG: Record((*ctx, key, outer)),
        AnalyzerEnvelope.TAG: Record((key, inner_ct)),
        PlainReport.TAG: Record((psize, report)),
        ShuffledBatch.TAG: Record((*ctx, Array(inner, max_batch))),
        ShuffleReceipt.TAG: Record((*ctx, _U63, Map(_U63, len(RejectReason)),
                                    Map(_U63, 3), _U63, _U63, _U63, Str(0, 256))),
        BlindedBatch.TAG: Record((*ctx, Array(Bin(BLINDED_CROWD_BYTES, BLINDED_CROWD_BYTES),
                                              max_batch), Array(inner, max_batch)),
                                 equal=((len(ctx), len(ctx) + 1),)),
    }


def session_limits(context: Context, max_batch: int) -> SessionLimits:
    """What a party of one shuffler batch accepts: every shuffler tag with the context's
    fields and sizes, and at most ``max_batch`` envelopes in a batch.

    Raises:
        ValueError: ``max_batch`` out of range.
    """
    return SessionLimits(shapes(context, max_batch))


_DEFAULT = shapes()
for _cls in MESSAGE_TYPES:
    assert 100 <= _cls.TAG < 200
    codec.register(_cls, _DEFAULT[_cls.TAG])
