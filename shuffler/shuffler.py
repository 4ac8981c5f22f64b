"""The shuffler of ESA (Bittau et al., "Prochlo", SOSP 2017, sections 3.3-3.5).

Theory of operation
-------------------
The shuffler is a sans-I/O object: the caller hands it envelope bytes and asks it to
close a batch; it never reads a clock, a socket or global randomness.

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
   envelopes were accepted: below it :class:`BatchTooSmall` is raised and the batch is
   *held* unchanged (more envelopes may arrive; ``discard_batch`` drops it). Otherwise:
   crowds are thresholded, the survivors are put in uniformly random order and only
   their inner ciphertexts are forwarded, with a :class:`ShuffleReceipt`.

Thresholds (:class:`HardThreshold`, :class:`NoisyThreshold`): a crowd of ``c``
reports is forwarded whole if ``c >= T``. Prochlo's noisy threshold first removes
``d = max(0, round(N(D, sigma^2)))`` random reports from each crowd and forwards the
remaining ``c - d`` only if ``c - d >= T``. Its privacy towards the analyzer, for one
report added to or removed from one crowd, is computed exactly for the released count
``c - d`` (thresholding is post-processing) by :func:`noisy_threshold_delta`:

    p_j = P[d = j],  p_0 = Phi((0.5 - D) / sigma)     (all mass below 0.5 clipped to 0)
    delta(eps) = max( p_0 + sum_{j>=1} (p_j - e^eps p_{j-1})^+ ,
                      sum_{j>=0} (p_j - e^eps p_{j+1})^+ )

The first term of the first line is a floor: with ``c + 1`` reports, "nothing was
removed" (probability ``p_0``) shows ``c + 1`` copies, which ``c`` reports can never
show, so ``delta >= p_0 = Phi((0.5 - D)/sigma)`` for *every* epsilon. Any scheme that
only removes reports has this floor; choose ``D / sigma`` large enough.

Shuffle: each survivor gets a 128-bit tag from the injected randomness and the batch
is sorted by tag; if two tags collide (probability below ``n^2 / 2^129``) all tags are
redrawn. Sorting i.i.d. uniform distinct tags yields every permutation with equal
probability (exchangeability), so the order is uniform and independent of arrival.
Noise for the noisy threshold is drawn by Box-Muller from 53-bit uniforms of the same
randomness; the privacy computation assumes an exact rounded Gaussian (floating-point
effects on the drop count are far below the stated delta for the documented ranges).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .blinded import BlindedCrowdError, check_ciphertext
from .errors import BatchTooSmall, EnvelopeRejected, RejectReason, ShufflerError
from .keys import KEY_BYTES, TAG_BYTES, KeyPair, OsRandom, RandomSource, open_sealed
from .messages import (
    LABEL_OUTER, BlindedBatch, Context, ShuffledBatch, ShuffleReceipt, ShufflerEnvelope,
    crowd_field_bytes, envelope_size,
)

__all__ = [
    "MapFn", "open_outer_chunk", "HardThreshold", "NoisyThreshold", "Shuffler", "ShuffleOutput",
    "BlindedOutput", "threshold_and_shuffle", "uniform_permutation",
    "noisy_threshold_delta", "noisy_threshold_epsilon", "noisy_threshold_delta_floor",
]


# ---------------------------------------------------------------- threshold rules
@dataclass(frozen=True, slots=True)
class HardThreshold:
    """Forward a crowd whole iff it holds at least ``T`` reports.

    Raises:
        ShufflerError: if ``T < 1``.
    """

    T: int = 1

    def __post_init__(self) -> None:
        if type(self.T) is not int or self.T < 1:
            raise ShufflerError("threshold T must be an int >= 1")

    def describe(self) -> str:
        return f"hard(T={self.T})"


@dataclass(frozen=True, slots=True)
class NoisyThreshold:
    """Prochlo's noisy threshold: drop ``max(0, round(N(D, sigma^2)))`` reports per crowd,
    then forward the rest iff at least ``T`` remain.

    Raises:
        ShufflerError: for ``T < 1``, ``D < 0`` or ``sigma <= 0``.
    """

    T: int
    D: float
    sigma: float

    def __post_init__(self) -> None:
        if type(self.T) is not int or self.T < 1:
            raise ShufflerError("threshold T must be an int >= 1")
        if not (math.isfinite(self.D) and self.D >= 0):
            raise ShufflerError("mean drop D must be finite and >= 0")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ShufflerError("sigma must be finite and > 0")

    def describe(self) -> str:
        return f"noisy(T={self.T},D={self.D:g},sigma={self.sigma:g})"

    def delta(self, epsilon: float) -> float:
        """See :func:`noisy_threshold_delta`."""
        return noisy_threshold_delta(self.D, self.sigma, epsilon)

    def epsilon(self, delta: float) -> float:
        """See :func:`noisy_threshold_epsilon`."""
        return noisy_threshold_epsilon(self.D, self.sigma, delta)


ThresholdRule = HardThreshold | NoisyThreshold


def _drop_pmf(D: float, sigma: float) -> np.ndarray:
    """P[d = j] for d = max(0, round(N(D, sigma^2))), j = 0..J (tail beyond J < 1e-30)."""
    hi = int(math.ceil(D + 40.0 * sigma)) + 2
    j = np.arange(hi + 1, dtype=float)
    # survival function of the normal via erfc (accurate in both tails)
    sf = np.array([0.5 * math.erfc((x - D) / (sigma * math.sqrt(2.0))) for x in j + 0.5])
    pmf = np.empty(hi + 1)
    pmf[0] = 0.5 * math.erfc(-(0.5 - D) / (sigma * math.sqrt(2.0)))  # Phi((0.5 - D)/sigma)
    # P[j - 0.5 <= X < j + 0.5] = sf(j - 0.5) - sf(j + 0.5), computed from sf for accuracy
    pmf[1:] = sf[:-1] - sf[1:]
    return np.clip(pmf, 0.0, 1.0)


def noisy_threshold_delta_floor(D: float, sigma: float) -> float:
    """``P[d = 0] = Phi((0.5 - D)/sigma)``: no epsilon gives a smaller delta."""
    return 0.5 * math.erfc((D - 0.5) / (sigma * math.sqrt(2.0)))


def noisy_threshold_delta(D: float, sigma: float, epsilon: float) -> float:
    """Exact delta(epsilon) of the noisy-drop count for one report added/removed.

    Computes the hockey-stick divergence of ``c + 1 - d`` versus ``c - d`` in both
    directions (see module docstring); the hard threshold afterwards is
    post-processing, so this is a sound bound for what the analyzer sees per crowd.

    Raises:
        ShufflerError: for negative epsilon or invalid D, sigma.
    """
    NoisyThreshold(1, D, sigma)  # validates
    if not epsilon >= 0:
        raise ShufflerError("epsilon must be >= 0")
    p = _drop_pmf(D, sigma)
    e = math.exp(min(epsilon, 700.0))
    up = p[0] + np.maximum(p[1:] - e * p[:-1], 0.0).sum()
    down = np.maximum(p[:-1] - e * p[1:], 0.0).sum() + p[-1]
    return float(min(1.0, max(up, down)))


def noisy_threshold_epsilon(D: float, sigma: float, delta: float) -> float:
    """Smallest epsilon with ``delta(epsilon) <= delta`` (bisection); ``inf`` below the floor.

    Raises:
        ShufflerError: for delta outside (0, 1).
    """
    if not 0 < delta < 1:
        raise ShufflerError("delta must be in (0, 1)")
    if noisy_threshold_delta(D, sigma, 60.0) > delta:
        return math.inf
    lo, hi = 0.0, 60.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if noisy_threshold_delta(D, sigma, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


# ---------------------------------------------------------------- randomness helpers
def uniform_permutation(n: int, rand: RandomSource) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from cryptographic randomness.

    Sorts ``n`` i.i.d. 128-bit tags; redraws all tags on a collision, so the result is
    exactly uniform.
    """
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    while True:
        tags = np.frombuffer(rand.token_bytes(16 * n), dtype=">u8").reshape(n, 2)
        order = np.lexsort((tags[:, 1], tags[:, 0]))
        s = tags[order]
        if not np.any((s[1:, 0] == s[:-1, 0]) & (s[1:, 1] == s[:-1, 1])):
            return order.astype(np.int64)


def _normal(n: int, rand: RandomSource) -> np.ndarray:
    """``n`` standard normal samples (Box-Muller on 53-bit uniforms from ``rand``)."""
    raw = np.frombuffer(rand.token_bytes(16 * n), dtype="<u8").reshape(n, 2) >> np.uint64(11)
    u1 = (raw[:, 0].astype(float) + 1.0) / 2.0**53  # (0, 1]
    u2 = raw[:, 1].astype(float) / 2.0**53          # [0, 1)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


# ---------------------------------------------------------------- the shuffler
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


def threshold_and_shuffle(context: Context, crowds: Sequence[bytes], inner: Sequence[bytes],
                          rejected: Mapping[RejectReason, int], rule: ThresholdRule,
                          rand: RandomSource) -> "ShuffleOutput":
    """Apply ``rule`` to the crowds of accepted reports, shuffle, and build the release.

    ``crowds[i]`` is the crowd id of ``inner[i]``; ``rejected`` counts refusals by
    reason (for the receipt). Used by :class:`Shuffler` and by the second shuffler of
    the blinded pipeline (:class:`shuffler.blinded.CrowdShuffler`).
    """
    n = len(inner)
    index: dict[bytes, int] = {}
    labels = np.fromiter((index.setdefault(c, len(index)) for c in crowds),
                         dtype=np.int64, count=n)
    sizes = np.bincount(labels, minlength=len(index))
    order = uniform_permutation(n, rand)
    dropped = {"below_threshold": 0, "noise_drop": 0}
    if isinstance(rule, HardThreshold):
        keep_crowd = sizes >= rule.T
        keep = keep_crowd[labels[order]]
        dropped["below_threshold"] = int(n - keep.sum())
    else:
        drop = np.maximum(0, np.rint(rule.D + rule.sigma * _normal(len(sizes), rand)))
        drop = drop.astype(np.int64)
        remaining = sizes - np.minimum(drop, sizes)
        keep_crowd = remaining >= rule.T
        lab = labels[order]
        # rank of each report within its crowd, in shuffled (uniformly random) order:
        # the first ``drop`` of every crowd are the uniformly chosen ones removed
        srt = np.argsort(lab, kind="stable")
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        rank = np.empty(n, dtype=np.int64)
        rank[srt] = np.arange(n) - starts[lab[srt]]
        keep = keep_crowd[lab] & (rank >= drop[lab])
        dropped["below_threshold"] = int(sizes[~keep_crowd].sum())
        dropped["noise_drop"] = int(np.minimum(drop, sizes)[keep_crowd].sum())
    forwarded = tuple(inner[i] for i in order[keep].tolist())
    rej = {r.value: c for r, c in rejected.items() if c}
    receipt = ShuffleReceipt(
        context, n + sum(rej.values()), rej, {k: v for k, v in dropped.items() if v},
        len(forwarded), len(index), int(keep_crowd.sum()), rule.describe())
    crowd_sizes = dict(zip(index.keys(), sizes.tolist()))
    return ShuffleOutput(ShuffledBatch(context, forwarded), receipt, crowd_sizes)


@dataclass(slots=True)
class _Batch:
    context: Context
    length: int
    crowds: list[bytes] = field(default_factory=list)
    inner: list[bytes] = field(default_factory=list)
    seen_outer: set[bytes] = field(default_factory=set)
    seen_inner: set[bytes] = field(default_factory=set)
    rejected: Counter = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class ShuffleOutput:
    """Result of closing a batch.

    Attributes:
        batch: what goes to the analyzer (inner ciphertexts, shuffled).
        receipt: counts of what happened.
        crowd_sizes: crowd id -> number of accepted reports (the shuffler's own
            knowledge; *not* sent to the analyzer).
    """

    batch: ShuffledBatch
    receipt: ShuffleReceipt
    crowd_sizes: dict[bytes, int]


@dataclass(frozen=True, slots=True)
class BlindedOutput:
    """Result of closing a blinded batch at shuffler 1: what goes to shuffler 2, and
    counts (no crowd data: shuffler 1 cannot tell crowds apart)."""

    batch: BlindedBatch
    receipt: ShuffleReceipt


class Shuffler:
    """The sans-I/O shuffler.

    Args:
        keys: the shuffler's key pair.
        rand: randomness for shuffling and noise (OS randomness by default).
        min_batch_size: a batch with fewer accepted envelopes is held, not released.
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
        self._batches: dict[bytes, _Batch] = {}          # header -> batch
        self._by_task_epoch: dict[tuple[str, int], bytes] = {}
        self._closed: set[tuple[str, int]] = set()  # never reopened: no cross-batch replay
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
        self._batches[context.header] = _Batch(context, envelope_size(context))

    def pending(self, context: Context) -> int:
        """Accepted envelopes held for ``context``. Raises: ShufflerError if not open."""
        return len(self._get(context).inner)

    def _get(self, context: Context) -> _Batch:
        b = self._batches.get(context.header) if isinstance(context, Context) else None
        if b is None:
            raise ShufflerError("no open batch for this context")
        return b

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
            self._accept(batch, data, plain)
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

    def _lookup(self, data: bytes) -> _Batch:
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

    def _accept(self, batch: _Batch, data: bytes, plain: object = _MISSING) -> None:
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
        """Threshold, shuffle and release one batch; the context is closed afterwards.

        Raises:
            ShufflerError: if no batch is open for ``context``, or it is blinded (use
                :meth:`close_blinded_batch`).
            BatchTooSmall: below ``min_batch_size`` (the batch stays open and held).
        """
        b = self._get(context)
        if b.context.blinded:
            raise ShufflerError("a blinded batch is released by close_blinded_batch: "
                                "shuffler 2 thresholds it")
        n = len(b.inner)
        if n < self.min_batch_size:
            raise BatchTooSmall(n, self.min_batch_size)
        out = threshold_and_shuffle(b.context, b.crowds, b.inner, dict(b.rejected),
                                    self.threshold, self._rand)
        self._close(b)
        return out

    def close_blinded_batch(self, context: Context, blinder: Any) -> "BlindedOutput":
        """Shuffler 1 of the blinded-crowd pipeline: blind every crowd ciphertext with
        ``blinder`` (a :class:`shuffler.blinded.Blinder` for shuffler 2's key), shuffle,
        and release every accepted report to shuffler 2 (which thresholds); the
        context is closed afterwards.

        Raises:
            ShufflerError: no batch open for ``context``, or it is not blinded.
            BatchTooSmall: below ``min_batch_size`` (the batch stays open and held).
        """
        b = self._get(context)
        if not b.context.blinded:
            raise ShufflerError("close_blinded_batch needs a blinded context")
        n = len(b.inner)
        if n < self.min_batch_size:
            raise BatchTooSmall(n, self.min_batch_size)
        key = b.context.header
        blinded = [blinder.blind_validated(c, key) for c in b.crowds]  # checked at intake
        blinder.forget(key)  # this context's ids can never be produced again
        order = uniform_permutation(n, self._rand).tolist()
        batch = BlindedBatch(b.context, tuple(blinded[i] for i in order),
                             tuple(b.inner[i] for i in order))
        rejected = {r.value: c for r, c in b.rejected.items() if c}
        receipt = ShuffleReceipt(b.context, n + sum(rejected.values()), rejected, {}, n, 0, 0,
                                 "blinded: thresholded by shuffler 2")
        self._close(b)
        return BlindedOutput(batch, receipt)

    def discard_batch(self, context: Context) -> ShuffleReceipt:
        """Drop a held batch without releasing anything; the context is closed.

        Raises:
            ShufflerError: if no batch is open for ``context``.
        """
        b = self._get(context)
        n = len(b.inner)
        rejected = {r.value: c for r, c in b.rejected.items() if c}
        receipt = ShuffleReceipt(b.context, n + sum(rejected.values()), rejected,
                                 {"batch_discarded": n} if n else {}, 0,
                                 0 if b.context.blinded else len(set(b.crowds)), 0,
                                 self.threshold.describe())
        self._close(b)
        return receipt

    def _close(self, b: _Batch) -> None:
        del self._batches[b.context.header]
        del self._by_task_epoch[(b.context.task, b.context.epoch)]
        self._closed.add((b.context.task, b.context.epoch))
