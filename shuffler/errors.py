"""Exceptions of the shuffler pipeline (Encode, Shuffle, Analyze).

Every failure the pipeline detects is a :class:`ShufflerError` (a ``ValueError``
subclass) carrying a machine-readable :class:`RejectReason` when it concerns one
envelope. Nothing else escapes the public API for malformed or hostile input.
"""
from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["RejectReason", "ShufflerError", "EnvelopeRejected", "BatchTooSmall"]


class RejectReason(str, Enum):
    """Why one envelope (or one inner report) was refused; receipts count these."""

    MALFORMED = "malformed"                  # bad magic/version/layer, undecodable header
    WRONG_LENGTH = "wrong_length"            # truncated or extended (not the task's one size)
    UNKNOWN_CONTEXT = "unknown_context"      # task/epoch not open here (cross-task, old epoch)
    WRONG_KEY = "wrong_key"                  # sealed to another shuffler or analyzer key id
    AUTHENTICATION_FAILED = "authentication_failed"  # AEAD tag (ciphertext or context) wrong
    DUPLICATE_ENVELOPE = "duplicate_envelope"  # same outer ciphertext seen in this batch
    DUPLICATE_INNER = "duplicate_inner"      # same inner ciphertext re-wrapped (replay),
    #                                          or repeated in a batch given to the analyzer
    BAD_PADDING = "bad_padding"              # analyzer: length prefix / padding invalid
    INVALID_CROWD = "invalid_crowd"          # blinded crowd ciphertext: not two valid points


class ShufflerError(ValueError):
    """Base class of every error raised by :mod:`shuffler`."""


class EnvelopeRejected(ShufflerError):
    """One envelope or inner report was refused; ``reason`` says why."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


class BatchTooSmall(ShufflerError):
    """A batch below the minimum batch size was asked to be released: it was dropped
    whole (nothing released, its context final), as ``receipt`` records.

    Attributes:
        accepted: reports the batch held.
        minimum: the shuffler's ``min_batch_size``.
        receipt: the :class:`shuffler.messages.ShuffleReceipt` of the dropped batch
            (``batch_discarded`` counts the accepted reports, nothing forwarded).
    """

    def __init__(self, accepted: int, minimum: int, receipt: Any = None) -> None:
        super().__init__(f"batch holds {accepted} reports, minimum is {minimum}; "
                         "it was dropped whole")
        self.accepted = accepted
        self.minimum = minimum
        self.receipt = receipt
