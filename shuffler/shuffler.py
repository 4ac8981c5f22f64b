"""The shuffler of ESA (Bittau et al., "Prochlo", SOSP 2017, sections 3.3-3.5).

Theory of operation
-------------------
The shuffler is a sans-I/O object: the caller hands it envelope bytes and asks it to
close a batch; it never reads a clock, a socket or global randomness. Every batch
follows the lifecycle table of :mod:`shuffler.lifecycle` (``open`` or ``open_blinded``,
then ``forwarded`` or ``dropped``); this module is the intake and the handlers.

1. ``open_batch(context)`` starts a batch for one (task, epoch). Envelopes whose clear
   header names no open batch are rejected (``UNKNOWN_CONTEXT``: another task, an old
   or future epoch), as are envelopes sealed for another shuffler key (``WRONG_KEY``).
2. ``submit(data)`` checks, *before changing any state*: magic and header
   (``MALFORMED``), the context's one envelope length (``WRONG_LENGTH``: truncated or
   padded), a repeat of an already accepted outer ciphertext (``DUPLICATE_ENVELOPE``),
   the outer AEAD tag, which also authenticates the header (``AUTHENTICATION_FAILED``:
   tampering, cross-task replay with an edited header), and a repeat of an already
   accepted inner ciphertext re-wrapped in a new outer layer (``DUPLICATE_INNER``).
   Each refusal raises :class:`EnvelopeRejected` and is counted. An accepted envelope
   leaves only ``(crowd id, inner ciphertext)`` behind: no sender, no arrival order (the
   order is destroyed by the shuffle), no time (the shuffler has no clock).
3. ``close_batch(context)`` releases nothing unless at least ``min_batch_size``
   envelopes were accepted: below it the whole batch is *dropped* (the lifecycle's one
   too-small rule) and :class:`BatchTooSmall` is raised carrying the receipt. Otherwise:
   crowds are thresholded (:mod:`shuffler.thresholds`), the survivors are put in
   uniformly random order and only their inner ciphertexts are forwarded, with a
   :class:`ShuffleReceipt` (:func:`shuffler.shuffle.threshold_and_shuffle`).
   ``close_blinded_batch`` is shuffler 1 of the blinded-crowd pipeline
   (:mod:`shuffler.blinded`); ``discard_batch`` drops an open batch. A closed
   (task, epoch) is never reopened.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from .blinded import BlindedCrowdError, check_ciphertext
from .errors import BatchTooSmall, EnvelopeRejected, RejectReason, ShufflerError
from .keys import KEY_BYTES, KeyPair, OsRandom, RandomSource, open_sealed
from .lifecycle import (
    BatchEvent, BatchRecord, BatchState, close_event, dropped_receipt, release_rule, step,
)
from .messages import (
    LABEL_OUTER, BlindedBatch, Context, ShuffleReceipt, ShufflerEnvelope, crowd_field_bytes,
    envelope_size,
)
from .shuffle import BlindedOutput, ShuffleOutput, threshold_and_shuffle, uniform_permutation
from .thresholds import (
    HardThreshold, NoisyThreshold, ThresholdRule, noisy_threshold_delta,
    noisy_threshold_delta_floor, noisy_threshold_epsilon,
)

__all__ = [
    "MapFn", "open_outer_chunk", "HardThreshold", "NoisyThreshold", "Shuffler", "ShuffleOutput",
    "BlindedOutput", "threshold_and_shuffle", "uniform_permutation", "release_rule",
    "noisy_threshold_delta", "noisy_threshold_epsilon", "noisy_threshold_delta_floor",
]


#: ``map``-like callable (e.g. ``concurrent.futures.Executor.map``) used to spread the
#: pure decryption work of a batch over the caller's workers.
MapFn = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]

_MISSING = object()


def open_outer_chunk(args: tuple[bytes, bytes, int, list[bytes]]) -> list[bytes | None]:
    """Open the outer layer of envelopes of one context (pure; picklable for workers).

    Args:
        args: ``(shuffler secret key, outer associated data, header length, envelopes)``;
            every envelope must already have the context's length.

    Returns:
        The outer plaintext (``crowd id || inner``) of each envelope, or ``None`` where
        authentication fails. State checks (duplicates) stay with :class:`Shuffler`.
    """
    secret, ad, hlen, chunk = args
    keys = KeyPair(secret)
    out: list[bytes | None] = []
    for data in chunk:
        try:
            out.append(open_sealed(keys, LABEL_OUTER, data[hlen:hlen + KEY_BYTES],
                                   data[hlen + KEY_BYTES:], ad))
        except EnvelopeRejected:
            out.append(None)
    return out


class Shuffler:
    """The sans-I/O shuffler.

    Args:
        keys: the shuffler's key pair.
        rand: randomness for shuffling and noise (OS randomness by default).
        min_batch_size: a batch closed with fewer accepted envelopes is dropped whole.
        threshold: the crowd threshold rule.

    Raises:
        ShufflerError: for invalid arguments.
    """

    def __init__(self, keys: KeyPair, rand: RandomSource | None = None, min_batch_size: int = 1,
                 threshold: ThresholdRule | None = None) -> None:
        if not isinstance(keys, KeyPair):
            raise ShufflerError("keys must be a shuffler.keys.KeyPair")
        self.keys = keys
        self.min_batch_size, self.threshold = release_rule(min_batch_size, threshold)
        self._rand = rand or OsRandom()
        self._batches: dict[bytes, BatchRecord] = {}     # header -> open batch
        self._by_task_epoch: dict[tuple[str, int], bytes] = {}
        self._closed: set[tuple[str, int]] = set()  # never reopened: no cross-batch replay
        self._final: dict[bytes, BatchRecord] = {}       # header -> final batch (freed)
        #: rejections that cannot be attributed to an open batch
        self.unattributed: Counter = Counter()

    # -- batches ----------------------------------------------------------------
    def open_batch(self, context: Context) -> None:
        """Start accepting envelopes for ``context``.

        Raises:
            ShufflerError: if the context names another shuffler key, or its
                (task, epoch) already has an open batch or was closed (a closed
                epoch is never reopened, so its envelopes cannot be replayed into a
                second batch).
        """
        if not isinstance(context, Context):
            raise ShufflerError("context must be a Context")
        if context.shuffler_key_id != self.keys.key_id:
            raise ShufflerError("the context names another shuffler key")
        te = (context.task, context.epoch)
        if te in self._by_task_epoch:
            raise ShufflerError(f"a batch for task {context.task!r} epoch {context.epoch} is open")
        if te in self._closed:
            raise ShufflerError(f"task {context.task!r} epoch {context.epoch} was closed")
        self._by_task_epoch[te] = context.header
        state = BatchState.OPEN_BLINDED if context.blinded else BatchState.OPEN
        self._batches[context.header] = BatchRecord(context, state, envelope_size(context))

    def pending(self, context: Context) -> int:
        """Accepted envelopes held for ``context``. Raises: ShufflerError if not open."""
        b = self._batches.get(context.header) if isinstance(context, Context) else None
        if b is None:
            raise ShufflerError("no open batch for this context")
        return len(b.inner)

    def state(self, context: Context) -> BatchState:
        """The lifecycle state of ``context``'s batch. Raises: ShufflerError if unknown."""
        return self._get(context).state

    def _get(self, context: Context) -> BatchRecord:
        """The open or final batch of ``context``.

        Raises:
            ShufflerError: no batch was ever opened for ``context``.
        """
        if not isinstance(context, Context):
            raise ShufflerError("context must be a Context")
        b = self._batches.get(context.header) or self._final.get(context.header)
        if b is None:
            raise ShufflerError("no batch for this context")
        return b

    def _finished(self, b: BatchRecord) -> None:
        """Lifecycle hook: ``b`` reached a final state; close its (task, epoch) for good."""
        del self._batches[b.context.header]
        del self._by_task_epoch[(b.context.task, b.context.epoch)]
        self._closed.add((b.context.task, b.context.epoch))
        self._final[b.context.header] = b
        b.free()

    # -- intake -----------------------------------------------------------------
    def submit(self, data: bytes | ShufflerEnvelope) -> None:
        """Accept one envelope or raise.

        Raises:
            EnvelopeRejected: with the reason (the refusal is counted).
        """
        self._submit(data, _MISSING)

    def _submit(self, data: bytes | ShufflerEnvelope, plain: object) -> None:
        if isinstance(data, ShufflerEnvelope):
            data = data.to_bytes()
        elif type(data) is not bytes:
            if not isinstance(data, (bytearray, memoryview)):
                self.unattributed[RejectReason.MALFORMED] += 1
                raise EnvelopeRejected(RejectReason.MALFORMED, "an envelope is bytes")
            data = bytes(data)
        batch = self._lookup(data)
        try:
            step(self, batch, BatchEvent.SUBMIT, data, plain)
        except EnvelopeRejected as exc:
            batch.rejected[exc.reason] += 1
            raise

    def submit_many(self, envelopes: Iterable[bytes | ShufflerEnvelope],
                    map_fn: MapFn | None = None, chunk_size: int = 4096) -> int:
        """Submit many envelopes; refusals are counted, not raised.

        Args:
            envelopes: envelope bytes (or typed envelopes).
            map_fn: optional ``map``-like callable; when given, the outer layers of
                well-formed envelopes of open batches are first decrypted through it
                with :func:`open_outer_chunk` (e.g. on a process pool), then every
                envelope goes through the same sequential checks as :meth:`submit`,
                in order, so the outcome does not depend on ``map_fn``.
            chunk_size: envelopes per ``map_fn`` task.

        Returns:
            The number of envelopes accepted.
        """
        envs = [e.to_bytes() if isinstance(e, ShufflerEnvelope) else e for e in envelopes]
        pre: dict[int, bytes | None] = {}
        if map_fn is not None:
            groups: dict[bytes, list[int]] = {}
            for i, data in enumerate(envs):
                if type(data) is bytes and len(data) >= 6:
                    hlen = 34 + int.from_bytes(data[4:6], "big")
                    b = self._batches.get(data[:hlen])
                    if b is not None and len(data) == b.length:
                        groups.setdefault(b.context.header, []).append(i)
            for header, idx in groups.items():
                ctx = self._batches[header].context
                parts = [idx[k:k + chunk_size] for k in range(0, len(idx), chunk_size)]
                args = [(self.keys.secret, ctx.outer_ad, len(header), [envs[i] for i in part])
                        for part in parts]
                for part, res in zip(parts, map_fn(open_outer_chunk, args)):
                    pre.update(zip(part, res))
        ok = 0
        for i, env in enumerate(envs):
            try:
                self._submit(env, pre.get(i, _MISSING))
                ok += 1
            except EnvelopeRejected:
                pass
        return ok

    def _lookup(self, data: bytes) -> BatchRecord:
        if len(data) >= 6:
            hlen = 4 + 2 + int.from_bytes(data[4:6], "big") + 28
            batch = self._batches.get(data[:hlen])
            if batch is not None:
                return batch
        try:
            ctx, _ = Context.parse_header(data)
        except EnvelopeRejected as exc:
            self.unattributed[exc.reason] += 1
            raise
        header = self._by_task_epoch.get((ctx.task, ctx.epoch))
        reason = (RejectReason.WRONG_KEY if ctx.shuffler_key_id != self.keys.key_id
                  or header is not None else RejectReason.UNKNOWN_CONTEXT)
        if header is not None:  # same task and epoch, other key ids or payload size
            self._batches[header].rejected[reason] += 1
        else:
            self.unattributed[reason] += 1
        raise EnvelopeRejected(reason, f"task {ctx.task!r} epoch {ctx.epoch}")

    def _accept(self, batch: BatchRecord, data: bytes, plain: object = _MISSING) -> None:
        if len(data) != batch.length:
            raise EnvelopeRejected(RejectReason.WRONG_LENGTH,
                                   f"{len(data)} bytes, expected {batch.length}")
        hlen = len(batch.context.header)
        sealed = data[hlen:]
        if sealed in batch.seen_outer:
            raise EnvelopeRejected(RejectReason.DUPLICATE_ENVELOPE)
        if plain is _MISSING:
            plain = open_sealed(self.keys, LABEL_OUTER, sealed[:KEY_BYTES], sealed[KEY_BYTES:],
                                batch.context.outer_ad)
        elif plain is None:  # decrypted by open_outer_chunk: authentication failed
            raise EnvelopeRejected(RejectReason.AUTHENTICATION_FAILED)
        assert isinstance(plain, bytes)
        cb = crowd_field_bytes(batch.context)
        inner = plain[cb:]
        if inner in batch.seen_inner:
            raise EnvelopeRejected(RejectReason.DUPLICATE_INNER)
        crowd = plain[:cb]
        if batch.context.blinded:
            try:
                check_ciphertext(crowd)
            except BlindedCrowdError as exc:
                raise EnvelopeRejected(RejectReason.INVALID_CROWD, str(exc)) from None
        # validated: now mutate
        batch.seen_outer.add(sealed)
        batch.seen_inner.add(inner)
        batch.crowds.append(crowd)
        batch.inner.append(inner)

    # -- release ----------------------------------------------------------------
    def close_batch(self, context: Context) -> ShuffleOutput:
        """Threshold, shuffle and release one keyed batch; the context is final afterwards.

        Raises:
            ShufflerError: no batch was opened for ``context``, it is final, or it is
                blinded (use :meth:`close_blinded_batch`); nothing changes.
            BatchTooSmall: below ``min_batch_size``: the batch was dropped whole (the
                exception carries the receipt) and the context is final.
        """
        return self._close(self._get(context), BatchEvent.CLOSE)

    def close_blinded_batch(self, context: Context, blinder: Any) -> BlindedOutput:
        """Shuffler 1 of the blinded-crowd pipeline: blind every crowd ciphertext with
        ``blinder`` (a :class:`shuffler.blinded.Blinder` for shuffler 2's key), shuffle,
        and release every accepted report to shuffler 2 (which thresholds); the
        context is final afterwards.

        Raises:
            ShufflerError: no batch was opened for ``context``, it is final, or it is
                not blinded; nothing changes.
            BatchTooSmall: below ``min_batch_size``: the batch was dropped whole (the
                exception carries the receipt) and the context is final.
        """
        return self._close(self._get(context), BatchEvent.CLOSE_BLINDED, blinder)

    def discard_batch(self, context: Context) -> ShuffleReceipt:
        """Drop an open batch without releasing anything; the context is final.

        Raises:
            ShufflerError: no batch was opened for ``context``, or it is final.
        """
        return step(self, self._get(context), BatchEvent.DISCARD)

    def _close(self, b: BatchRecord, requested: BatchEvent, *args: Any) -> Any:
        accepted = len(b.inner)
        event = close_event(b, requested, self.min_batch_size)
        if event is BatchEvent.BELOW_MINIMUM:
            receipt = step(self, b, event)
            raise BatchTooSmall(accepted, self.min_batch_size, receipt)
        return step(self, b, event, *args)

    # -- lifecycle handlers (named by shuffler.lifecycle.TRANSITIONS) -------------
    def _threshold_and_shuffle(self, b: BatchRecord) -> ShuffleOutput:
        return threshold_and_shuffle(b.context, b.crowds, b.inner, dict(b.rejected),
                                     self.threshold, self._rand)

    def _blind_and_shuffle(self, b: BatchRecord, blinder: Any) -> BlindedOutput:
        n = len(b.inner)
        key = b.context.header
        blinded = [blinder.blind_validated(c, key) for c in b.crowds]  # checked at intake
        blinder.forget(key)  # this context's ids can never be produced again
        order = uniform_permutation(n, self._rand).tolist()
        batch = BlindedBatch(b.context, tuple(blinded[i] for i in order),
                             tuple(b.inner[i] for i in order))
        rejected = {r.value: c for r, c in b.rejected.items() if c}
        receipt = ShuffleReceipt(b.context, n + sum(rejected.values()), rejected, {}, n, 0, 0,
                                 "blinded: thresholded by shuffler 2")
        return BlindedOutput(batch, receipt)

    def _drop(self, b: BatchRecord) -> ShuffleReceipt:
        crowds = 0 if b.context.blinded else len(set(b.crowds))
        return dropped_receipt(b, crowds, self.threshold)
