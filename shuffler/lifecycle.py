"""The lifecycle of a batch in both shufflers, as one transition table.

Theory of operation
-------------------
Every batch a shuffler holds is a :class:`BatchRecord` in one :class:`BatchState`. The
only way to change that state is :func:`step`, which looks ``(state, event)`` up in
:data:`TRANSITIONS`, runs the handler the entry names (a method of the shuffler that
holds the batch) and then, once the handler has returned, sets the entry's next state.
So the table reads as the state diagram; a pair that is not in it is a local misuse
(:class:`~shuffler.errors.ShufflerError`) that changes nothing, and a handler that
raises (an envelope refused at intake) leaves the state as it was.

States and who holds them:

* ``OPEN``: a keyed batch at :class:`shuffler.shuffler.Shuffler`, collecting envelopes;
* ``OPEN_BLINDED``: a blinded batch at shuffler 1 (the same class), collecting
  envelopes whose crowd field is an ElGamal ciphertext;
* ``RECEIVED``: a blinded batch from shuffler 1, decrypted to crowd ids by shuffler 2
  (:class:`shuffler.blinded.CrowdShuffler`);
* ``FORWARDED`` (final): released, with a receipt;
* ``DROPPED`` (final): dropped whole, nothing released, with a receipt.

A final batch is never reopened, so its envelopes cannot be replayed into a second batch.

The too-small rule (one rule, both shufflers): a close request for a batch holding
fewer accepted reports than the shuffler's ``min_batch_size`` becomes the event
``BELOW_MINIMUM`` (:func:`close_event`), whose every entry drops the whole batch: nothing
is released, the context is final, the receipt counts the accepted reports as
``batch_discarded``, and the caller gets :class:`~shuffler.errors.BatchTooSmall`
carrying that receipt. Dropping (rather than holding the batch open for more reports)
is the safe choice: a release can never depend on how long a caller waits or how often it
retries, and shuffler 2, which receives a batch whole, could not hold one anyway.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, NamedTuple

from .errors import ShufflerError
from .messages import Context, ShuffleReceipt
from .thresholds import HardThreshold, NoisyThreshold, ThresholdRule

__all__ = [
    "BatchState", "BatchEvent", "Transition", "TRANSITIONS", "FINAL_STATES", "BatchRecord",
    "step", "close_event", "release_rule", "dropped_receipt",
]


class BatchState(str, Enum):
    """Where a batch is in its lifecycle (see the module docstring)."""

    OPEN = "open"
    OPEN_BLINDED = "open_blinded"
    RECEIVED = "received"
    FORWARDED = "forwarded"
    DROPPED = "dropped"


class BatchEvent(str, Enum):
    """What is asked of a batch."""

    SUBMIT = "submit"                # one envelope that passes every intake check
    CLOSE = "close"                  # threshold, shuffle, release (keyed, or shuffler 2)
    CLOSE_BLINDED = "close_blinded"  # shuffler 1: blind, shuffle, release to shuffler 2
    BELOW_MINIMUM = "below_minimum"  # a close with fewer than min_batch_size reports
    DISCARD = "discard"              # the operator drops the batch


class Transition(NamedTuple):
    """A table entry: the shuffler method that does the work, and the state after it."""

    handler: str
    next_state: BatchState


_S, _E = BatchState, BatchEvent

#: (state, event) -> (handler, next state); anything missing is a misuse.
TRANSITIONS: Mapping[tuple[BatchState, BatchEvent], Transition] = {
    # keyed batch (Shuffler.close_batch)
    (_S.OPEN, _E.SUBMIT): Transition("_accept", _S.OPEN),
    (_S.OPEN, _E.CLOSE): Transition("_threshold_and_shuffle", _S.FORWARDED),
    (_S.OPEN, _E.BELOW_MINIMUM): Transition("_drop", _S.DROPPED),
    (_S.OPEN, _E.DISCARD): Transition("_drop", _S.DROPPED),
    # blinded batch at shuffler 1 (Shuffler.close_blinded_batch)
    (_S.OPEN_BLINDED, _E.SUBMIT): Transition("_accept", _S.OPEN_BLINDED),
    (_S.OPEN_BLINDED, _E.CLOSE_BLINDED): Transition("_blind_and_shuffle", _S.FORWARDED),
    (_S.OPEN_BLINDED, _E.BELOW_MINIMUM): Transition("_drop", _S.DROPPED),
    (_S.OPEN_BLINDED, _E.DISCARD): Transition("_drop", _S.DROPPED),
    # blinded batch at shuffler 2 (CrowdShuffler.process)
    (_S.RECEIVED, _E.CLOSE): Transition("_threshold_and_shuffle", _S.FORWARDED),
    (_S.RECEIVED, _E.BELOW_MINIMUM): Transition("_drop", _S.DROPPED),
}

FINAL_STATES = frozenset({BatchState.FORWARDED, BatchState.DROPPED})


@dataclass(slots=True)
class BatchRecord:
    """One batch: its context, state and what was accepted (freed once final).

    Attributes:
        context: the batch's context.
        state: its lifecycle state; set only by :func:`step` (and at creation).
        length: the context's one envelope length (intake at shuffler 1; 0 at shuffler 2).
        crowds: crowd field of each accepted report (crowd id or blinded ciphertext).
        inner: inner ciphertext of each accepted report, in arrival order.
        seen_outer: outer ciphertexts accepted (duplicate detection).
        seen_inner: inner ciphertexts accepted (duplicate detection).
        rejected: refusals by reason, for the receipt.
    """

    context: Context
    state: BatchState
    length: int = 0
    crowds: list[bytes] = field(default_factory=list)
    inner: list[bytes] = field(default_factory=list)
    seen_outer: set[bytes] = field(default_factory=set)
    seen_inner: set[bytes] = field(default_factory=set)
    rejected: Counter = field(default_factory=Counter)

    def free(self) -> None:
        """Forget the reports of a final batch (its state and context stay)."""
        self.crowds, self.inner = [], []
        self.seen_outer, self.seen_inner = set(), set()


def _transition(state: BatchState, event: BatchEvent) -> Transition:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise ShufflerError(f"no transition for {event.value!r} from a batch that is "
                            f"{state.value!r}") from None


def step(owner: Any, batch: BatchRecord, event: BatchEvent, *args: Any) -> Any:
    """The dispatcher: run the handler of ``(batch.state, event)``, then set the next state.

    Args:
        owner: the shuffler holding ``batch`` (the handler is its method of that name;
            it is told about a final state through ``owner._finished(batch)``).
        batch: the batch.
        event: what is asked.
        *args: passed on to the handler after ``batch``.

    Returns:
        What the handler returns.

    Raises:
        ShufflerError: ``(state, event)`` is not in :data:`TRANSITIONS` (nothing changes);
            or whatever the handler raises (the state does not change).
    """
    handler, next_state = _transition(batch.state, event)
    result = getattr(owner, handler)(batch, *args)
    batch.state = next_state
    if next_state in FINAL_STATES:
        owner._finished(batch)
    return result


def close_event(batch: BatchRecord, requested: BatchEvent, minimum: int) -> BatchEvent:
    """The too-small rule: ``BELOW_MINIMUM`` when ``batch`` holds fewer than ``minimum``
    accepted reports, else ``requested``.

    Raises:
        ShufflerError: ``requested`` is not allowed in the batch's state (checked first,
            so a misuse never turns into a drop).
    """
    _transition(batch.state, requested)
    return BatchEvent.BELOW_MINIMUM if len(batch.inner) < minimum else requested


def release_rule(min_batch_size: object, threshold: object) -> tuple[int, ThresholdRule]:
    """Checked ``(min_batch_size, threshold)`` of a shuffler (default ``HardThreshold(1)``).

    Raises:
        ShufflerError: ``min_batch_size`` not an int >= 1, or another threshold type.
    """
    if type(min_batch_size) is not int or min_batch_size < 1:
        raise ShufflerError("min_batch_size must be an int >= 1")
    threshold = threshold if threshold is not None else HardThreshold(1)
    if not isinstance(threshold, (HardThreshold, NoisyThreshold)):
        raise ShufflerError("threshold must be a HardThreshold or NoisyThreshold")
    return min_batch_size, threshold


def dropped_receipt(batch: BatchRecord, crowds: int, rule: ThresholdRule) -> ShuffleReceipt:
    """The receipt of a batch dropped whole: every accepted report counted as
    ``batch_discarded``, nothing forwarded.

    Args:
        batch: the batch (before it is freed).
        crowds: distinct crowd ids the dropping shuffler can tell apart (0 at shuffler 1
            of the blinded pipeline, which sees only ciphertexts).
        rule: the shuffler's threshold rule (for the receipt's description).
    """
    n = len(batch.inner)
    rejected = {r.value: c for r, c in batch.rejected.items() if c}
    return ShuffleReceipt(batch.context, n + sum(rejected.values()), rejected,
                          {"batch_discarded": n} if n else {}, 0, crowds, 0, rule.describe())
