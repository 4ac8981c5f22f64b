"""The client side of ESA: Encode (Bittau et al., "Prochlo", SOSP 2017, section 3.2).

Theory of operation
-------------------
For one report ``r`` (at most ``P`` bytes) with crowd id ``cid`` in context ``ctx``:

    padded = PlainReport(P, r).to_bytes()                      # u16 len || r || 0*
    inner  = epk_A || Seal(pk_A, esk_A, "…/inner", padded, "…/inner" || header(ctx))
    outer  = header(ctx) || epk_S || Seal(pk_S, esk_S, "…/outer", cid || inner,
                                          "…/outer" || header(ctx))

with two fresh ephemeral keys ``esk_A``, ``esk_S`` per report drawn from the injected
randomness (see :mod:`shuffler.keys` for ``Seal``). Every envelope of a context has
exactly one length (``H + P + 114`` bytes), so its size reveals nothing about the
report. In a blinded context (``blinded=True``) ``cid`` is the 64-byte crowd
ciphertext of :func:`shuffler.blinded.encrypt_crowd` (envelopes ``H + P + 162`` bytes). The batch path draws all ephemeral secrets with one ``token_bytes`` call and
otherwise does only the two seals per report.
"""
from __future__ import annotations

from typing import Sequence

from .errors import ShufflerError
from .keys import KEY_BYTES, OsRandom, PublicKey, RandomSource, seal
from .messages import (
    LABEL_INNER, LABEL_OUTER, Context, ShufflerEnvelope, crowd_field_bytes,
)

__all__ = ["Encoder"]


class Encoder:
    """Encodes reports of one context into shuffler envelopes.

    Args:
        shuffler_key: the shuffler's public key.
        analyzer_key: the analyzer's public key.
        task: task name.
        epoch: epoch (round) number.
        payload_size: the fixed maximum report size ``P`` of this task.
        rand: randomness (OS randomness by default).
        blinded: blinded crowd ids (two shufflers; crowd fields are 64-byte
            ciphertexts) instead of keyed ones.

    Raises:
        ShufflerError: for invalid keys or context fields.
    """

    def __init__(self, shuffler_key: PublicKey, analyzer_key: PublicKey, task: str,
                 epoch: int, payload_size: int, rand: RandomSource | None = None,
                 blinded: bool = False) -> None:
        if not isinstance(shuffler_key, PublicKey) or not isinstance(analyzer_key, PublicKey):
            raise ShufflerError("keys must be shuffler.keys.PublicKey")
        self.shuffler_key = shuffler_key
        self.analyzer_key = analyzer_key
        self.context = Context(task, epoch, payload_size, shuffler_key.key_id,
                               analyzer_key.key_id, blinded)
        self._rand = rand or OsRandom()
        self._inner_ad = self.context.inner_ad
        self._outer_ad = self.context.outer_ad
        self._header = self.context.header

    def encode(self, report: bytes, crowd_id: bytes) -> bytes:
        """One envelope (bytes). Raises: ShufflerError for an oversized report or bad id."""
        return self.encode_batch([report], [crowd_id])[0]

    def encode_envelope(self, report: bytes, crowd_id: bytes) -> ShufflerEnvelope:
        """One envelope as a typed :class:`ShufflerEnvelope` (for the codec)."""
        return ShufflerEnvelope.from_bytes(self.encode(report, crowd_id))

    def encode_batch(self, reports: Sequence[bytes], crowd_ids: Sequence[bytes]) -> list[bytes]:
        """Encode many reports (each with its crowd id) into envelopes.

        Raises:
            ShufflerError: if the sequences differ in length, a report is not bytes or
                exceeds the payload size, or a crowd field is not the context's size
                (16 bytes, or 64 when blinded).
        """
        n = len(reports)
        if len(crowd_ids) != n:
            raise ShufflerError("one crowd id per report")
        psize = self.context.payload_size
        if n and ({type(r) for r in reports} != {bytes} or max(map(len, reports)) > psize):
            raise ShufflerError(f"every report must be bytes of at most {psize} bytes")
        cb = crowd_field_bytes(self.context)
        if n and ({type(c) for c in crowd_ids} != {bytes}
                  or {len(c) for c in crowd_ids} != {cb}):
            raise ShufflerError(f"every crowd id (crowd field) must be {cb} bytes")
        secrets = self._rand.token_bytes(2 * KEY_BYTES * n)
        akey, skey = self.analyzer_key, self.shuffler_key
        iad, oad, header = self._inner_ad, self._outer_ad, self._header
        out = []
        zeros = bytes(psize)
        off = 0
        for r, cid in zip(reports, crowd_ids):
            k = len(r)
            padded = k.to_bytes(2, "big") + r + zeros[k:]
            epk_a, ct_a = seal(akey, secrets[off:off + KEY_BYTES], LABEL_INNER, padded, iad)
            epk_s, ct_s = seal(skey, secrets[off + KEY_BYTES:off + 2 * KEY_BYTES], LABEL_OUTER,
                               cid + epk_a + ct_a, oad)
            out.append(header + epk_s + ct_s)
            off += 2 * KEY_BYTES
        return out
