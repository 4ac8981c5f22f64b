"""The analyzer of ESA (Bittau et al., "Prochlo", SOSP 2017, section 3.4).

Theory of operation
-------------------
The analyzer receives a :class:`~shuffler.messages.ShuffledBatch` (context + inner
envelopes in random order) and opens every inner layer with its key, with associated
data ``"fedhh/shuffler/v1/inner" || header(context)``: an inner ciphertext made for
another task, epoch or analyzer key fails to authenticate. Since the inner layer is
opaque to the shuffler, a malicious *client* can make one inner layer invalid; that
report is refused and counted (not the whole batch). Repeated inner ciphertexts are
refused too (``DUPLICATE_INNER``): a shuffler that copied one report of a small crowd
``T`` times to push it over the threshold gains nothing by exact copies. The reports are returned as a
list, a :class:`collections.Counter` (multiset), or a numpy histogram over a domain.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from .errors import EnvelopeRejected, RejectReason, ShufflerError
from .keys import KEY_BYTES, KeyPair, open_sealed
from .messages import LABEL_INNER, Context, PlainReport, ShuffledBatch

__all__ = ["Analyzer", "AnalyzedBatch", "open_inner_chunk", "INDEX_BYTES", "encode_index", "decode_indices"]

INDEX_BYTES = 4


def encode_index(i: int) -> bytes:
    """A candidate index as a 4-byte big-endian report (vote rounds)."""
    return int(i).to_bytes(INDEX_BYTES, "big")


def decode_indices(reports: list[bytes]) -> np.ndarray:
    """Indices from 4-byte reports; other lengths (e.g. empty abstention reports) are skipped."""
    good = [r for r in reports if len(r) == INDEX_BYTES]
    return np.frombuffer(b"".join(good), dtype=">u4").astype(np.int64)


def open_inner_chunk(args: tuple[bytes, bytes, int, list[bytes]]) -> list[bytes | str]:
    """Open inner envelopes of one context (pure; picklable for workers).

    Args:
        args: ``(analyzer secret key, inner associated data, payload size, inner layers)``.

    Returns:
        Per inner layer, the report, or the :class:`RejectReason` value (a str) why not.
    """
    secret, ad, psize, chunk = args
    keys = KeyPair(secret)
    out: list[bytes | str] = []
    for inner in chunk:
        try:
            padded = open_sealed(keys, LABEL_INNER, inner[:KEY_BYTES], inner[KEY_BYTES:], ad)
            n = int.from_bytes(padded[:2], "big")
            if n > psize or padded[2 + n:].count(0) != psize - n:
                raise EnvelopeRejected(RejectReason.BAD_PADDING)
            out.append(padded[2:2 + n])
        except EnvelopeRejected as exc:
            out.append(exc.reason.value)
    return out


@dataclass(frozen=True, slots=True)
class AnalyzedBatch:
    """Decoded reports of one batch and the inner layers refused (reason -> count)."""

    context: Context
    reports: list[bytes]
    rejected: Counter = field(default_factory=Counter)

    def multiset(self) -> Counter:
        """The reports as a multiset."""
        return Counter(self.reports)

    def histogram(self, domain_size: int) -> np.ndarray:
        """Counts of 4-byte index reports over ``range(domain_size)``.

        Reports that are not 4 bytes (abstentions) and indices outside the domain
        (a malformed client) are ignored.

        Raises:
            ShufflerError: for a non-positive domain size.
        """
        if type(domain_size) is not int or domain_size < 1:
            raise ShufflerError("domain_size must be an int >= 1")
        idx = decode_indices(self.reports)
        idx = idx[idx < domain_size]
        return np.bincount(idx, minlength=domain_size)


class Analyzer:
    """Opens inner envelopes sealed to ``keys``.

    Raises:
        ShufflerError: for a non-KeyPair key.
    """

    def __init__(self, keys: KeyPair) -> None:
        if not isinstance(keys, KeyPair):
            raise ShufflerError("keys must be a shuffler.keys.KeyPair")
        self.keys = keys

    def open_one(self, context: Context, inner: bytes) -> bytes:
        """Open one inner envelope and strip its padding.

        Raises:
            EnvelopeRejected: ``WRONG_KEY`` (context for another analyzer key),
                ``WRONG_LENGTH``, ``AUTHENTICATION_FAILED`` or ``BAD_PADDING``.
        """
        if context.analyzer_key_id != self.keys.key_id:
            raise EnvelopeRejected(RejectReason.WRONG_KEY)
        psize = context.payload_size
        if type(inner) is not bytes or len(inner) != KEY_BYTES + psize + 18:
            raise EnvelopeRejected(RejectReason.WRONG_LENGTH)
        padded = open_sealed(self.keys, LABEL_INNER, inner[:KEY_BYTES], inner[KEY_BYTES:],
                             context.inner_ad)
        return PlainReport.from_bytes(padded, psize).report

    def open_batch(self, batch: ShuffledBatch,
                   map_fn: Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]
                   | None = None, chunk_size: int = 4096) -> AnalyzedBatch:
        """Open every inner envelope of a batch; refused ones are counted, not raised.

        Args:
            batch: the shuffler's output.
            map_fn: optional ``map``-like callable (e.g. a process pool's) over which
                :func:`open_inner_chunk` runs; the result does not depend on it.
            chunk_size: inner layers per ``map_fn`` task.

        Raises:
            ShufflerError: if ``batch`` is not a ShuffledBatch or names another analyzer key.
        """
        if not isinstance(batch, ShuffledBatch):
            raise ShufflerError("batch must be a ShuffledBatch")
        ctx = batch.context
        if ctx.analyzer_key_id != self.keys.key_id:
            raise ShufflerError("the batch was sealed for another analyzer key")
        keys, ad, psize = self.keys, ctx.inner_ad, ctx.payload_size
        reports: list[bytes] = []
        rejected: Counter = Counter()
        inner_all = list(dict.fromkeys(batch.inner))  # first occurrences, in order
        if len(inner_all) != len(batch.inner):
            rejected[RejectReason.DUPLICATE_INNER] = len(batch.inner) - len(inner_all)
        if map_fn is not None:
            args = [(keys.secret, ad, psize, list(inner_all[k:k + chunk_size]))
                    for k in range(0, len(inner_all), chunk_size)]
            for res in map_fn(open_inner_chunk, args):
                for item in res:
                    if type(item) is bytes:
                        reports.append(item)
                    else:
                        rejected[RejectReason(item)] += 1
            return AnalyzedBatch(ctx, reports, rejected)
        for inner in inner_all:
            try:
                padded = open_sealed(keys, LABEL_INNER, inner[:KEY_BYTES], inner[KEY_BYTES:], ad)
                n = int.from_bytes(padded[:2], "big")
                if n > psize or padded[2 + n:].count(0) != psize - n:
                    raise EnvelopeRejected(RejectReason.BAD_PADDING)
                reports.append(padded[2:2 + n])
            except EnvelopeRejected as exc:
                rejected[exc.reason] += 1
        return AnalyzedBatch(ctx, reports, rejected)
