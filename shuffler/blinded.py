"""Blinded crowd ids: two shufflers count equal items with no key held by the clients.

Theory of operation
-------------------
The keyed crowd ids of :mod:`shuffler.crowd` need a key shared by every client and the
analyzer; one client colluding with the shuffler names every crowd. Prochlo's blinded
crowd IDs (Bittau et al., SOSP 2017) remove that key with two shufflers and ElGamal
encryption, whose ciphertexts can be multiplied by a secret scalar (raised to a secret
power, in multiplicative notation) without decrypting them. This module implements
that scheme over the prime-order subgroup of edwards25519 (order
``L = 2^252 + 27742317777372353535851937790883648493``), with libsodium's group
operations (``crypto_core_ed25519_*``, ``crypto_scalarmult_ed25519_*noclamp``):

* **Hash to the group.** ``P(x) = from_uniform(SHA-512("fedhh/blinded-crowd/v1" 0x00 ||
  u32 len(ctx) || ctx || u32 len(x) || x)[:32])`` (libsodium's Elligator 2 map, which
  lands in the prime-order subgroup); ``ctx`` binds the task and epoch.
* **Client** (knows only shuffler 2's public key ``Y = y B``): draws ``r`` and sends
  the ciphertext ``(C1, C2) = (r B, P(x) + r Y)`` (64 bytes) in place of a crowd id.
  Two ciphertexts of the same item are unlinkable (fresh ``r``).
* **Shuffler 1** (the blinder; holds a secret ``a`` drawn afresh for each context, never
  ``y``): checks both points, and replaces each ciphertext by
  ``(a C1 + s B, a C2 + s Y)`` with a fresh ``s``, an encryption of ``a P(x)`` that
  shares no value with its input; then shuffles the batch.
* **Shuffler 2** (the decryptor; holds ``y``): decrypts ``M = C2 - y C1 = a P(x)`` and
  uses ``crowd_id = SHA-256("fedhh/blinded-crowd/v1/id" 0x00 || M)[:16]`` to count and
  threshold crowds. Equal items in one context give equal ids; shuffler 2 cannot
  test a guess ``x'`` (it would need ``a P(x')``, i.e. ``a``), and ids of different
  contexts are unrelated because ``a`` is fresh per context.

What each party learns (if the two shufflers do not collude):

* client: nothing about other clients; it holds no secret;
* shuffler 1: senders and ciphertexts, never an item or a crowd id;
* shuffler 2: crowd ids and crowd sizes, never an item, and no sender (shuffler 1
  shuffled and re-randomized);
* shuffler 1 + shuffler 2 colluding: ``a`` and ``y`` together turn every id back into a
  dictionary test for any candidate item; the scheme does not protect against it.

Every point that arrives from another party is checked with
``crypto_core_ed25519_is_valid_point`` (canonical encoding, on the curve, in the
prime-order subgroup, not of small order) before it is used; a malformed ciphertext
raises :class:`BlindedCrowdError` and nothing else.

The whole pipeline: an :class:`shuffler.encoder.Encoder` with ``blinded=True`` puts
the ciphertext in the envelope's crowd field (the context's header says so); shuffler
1 is a :class:`shuffler.shuffler.Shuffler` that checks both points at intake and
releases with :meth:`~shuffler.shuffler.Shuffler.close_blinded_batch` (blind, shuffle,
a :class:`~shuffler.messages.BlindedBatch` of ciphertext and inner-layer pairs);
shuffler 2 is a :class:`CrowdShuffler`, which decrypts the ids, thresholds, shuffles
again and hands the analyzer an ordinary :class:`~shuffler.messages.ShuffledBatch`.
:func:`two_shuffler_crowd_counts` runs the crowd-id part alone.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from nacl import bindings as _na
from nacl import exceptions as _na_exc

from .errors import BatchTooSmall, RejectReason, ShufflerError
from .keys import OsRandom, RandomSource
from .lifecycle import (
    BatchEvent, BatchRecord, BatchState, close_event, dropped_receipt, release_rule, step,
)
from .messages import BlindedBatch, Context, ShuffleReceipt
from .shuffle import ShuffleOutput, threshold_and_shuffle, uniform_permutation

__all__ = [
    "BlindedCrowdError", "CIPHERTEXT_BYTES", "CROWD_ID_BYTES", "DecryptorKey", "Blinder",
    "CrowdShuffler", "check_ciphertext", "hash_to_group", "encrypt_crowd",
    "two_shuffler_crowd_counts",
]

POINT_BYTES = 32
CIPHERTEXT_BYTES = 2 * POINT_BYTES
CROWD_ID_BYTES = 16
_LABEL = b"fedhh/blinded-crowd/v1"
_ID_LABEL = b"fedhh/blinded-crowd/v1/id\x00"


class BlindedCrowdError(ShufflerError):
    """A malformed or invalid ciphertext, key or argument."""


def _scalar(rand: RandomSource) -> bytes:
    """A uniformly random non-zero scalar mod L (64 random bytes reduced)."""
    while True:
        s = _na.crypto_core_ed25519_scalar_reduce(rand.token_bytes(64))
        if any(s):
            return s


def _bytes(value: object, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise BlindedCrowdError(f"{name} must be bytes, got {type(value).__name__}")
    return bytes(value)


def _point(data: bytes, name: str) -> bytes:
    if len(data) != POINT_BYTES or not _na.crypto_core_ed25519_is_valid_point(data):
        raise BlindedCrowdError(f"{name} is not a valid point of the prime-order group")
    return data


def check_ciphertext(ciphertext: object) -> None:
    """Check that ``ciphertext`` is two points of the prime-order group (64 bytes).

    Raises:
        BlindedCrowdError: it is not.
    """
    _split(ciphertext)


def _split(ciphertext: object) -> tuple[bytes, bytes]:
    ct = _bytes(ciphertext, "ciphertext")
    if len(ct) != CIPHERTEXT_BYTES:
        raise BlindedCrowdError(f"a ciphertext is {CIPHERTEXT_BYTES} bytes, got {len(ct)}")
    return _point(ct[:POINT_BYTES], "C1"), _point(ct[POINT_BYTES:], "C2")


def _mul(scalar: bytes, point: bytes) -> bytes:
    try:
        return _na.crypto_scalarmult_ed25519_noclamp(scalar, point)
    except (RuntimeError, _na_exc.CryptoError) as exc:  # identity result: negligible
        raise BlindedCrowdError(f"scalar multiplication failed: {exc}") from None


def _base(scalar: bytes) -> bytes:
    return _na.crypto_scalarmult_ed25519_base_noclamp(scalar)


def hash_to_group(context: bytes, item: bytes) -> bytes:
    """``P(item)`` of the module docstring (a point of the prime-order subgroup).

    Raises:
        BlindedCrowdError: ``context`` or ``item`` not bytes.
    """
    context, item = _bytes(context, "context"), _bytes(item, "item")
    h = hashlib.sha512(_LABEL + b"\x00" + struct.pack(">I", len(context)) + context
                       + struct.pack(">I", len(item)) + item).digest()
    return _na.crypto_core_ed25519_from_uniform(h[:32])


def encrypt_crowd(item: bytes, context: bytes, decryptor_public: bytes,
                  rand: RandomSource | None = None) -> bytes:
    """The client's 64-byte ciphertext ``(r B, P(item) + r Y)``.

    Raises:
        BlindedCrowdError: bad arguments or an invalid public key.
    """
    rand = rand or OsRandom()
    y_pub = _point(_bytes(decryptor_public, "public key"), "public key")
    p = hash_to_group(context, item)
    r = _scalar(rand)
    return _base(r) + _na.crypto_core_ed25519_add(p, _mul(r, y_pub))


@dataclass
class DecryptorKey:
    """Shuffler 2's ElGamal key pair ``(y, Y = y B)``."""

    secret: bytes = field(repr=False)
    public: bytes = b""

    def __post_init__(self) -> None:
        self.secret = _bytes(self.secret, "secret")
        if len(self.secret) != 32:
            raise BlindedCrowdError("the secret scalar is 32 bytes")
        self.secret = _na.crypto_core_ed25519_scalar_reduce(self.secret + bytes(32))
        if not any(self.secret):
            raise BlindedCrowdError("the secret scalar is zero")
        self.public = _base(self.secret)

    @classmethod
    def generate(cls, rand: RandomSource | None = None) -> "DecryptorKey":
        return cls(_scalar(rand or OsRandom()))

    def crowd_id(self, ciphertext: bytes) -> bytes:
        """Decrypt ``M = C2 - y C1`` and return its 16-byte crowd id.

        Raises:
            BlindedCrowdError: a malformed ciphertext.
        """
        c1, c2 = _split(ciphertext)
        m = _na.crypto_core_ed25519_sub(c2, _mul(self.secret, c1))
        return hashlib.sha256(_ID_LABEL + m).digest()[:CROWD_ID_BYTES]


class Blinder:
    """Shuffler 1: blinds with a secret drawn afresh for each context, re-randomizes.

    Args:
        decryptor_public: shuffler 2's public key ``Y``.
        rand: randomness source (default the OS).

    Raises:
        BlindedCrowdError: an invalid public key.
    """

    def __init__(self, decryptor_public: bytes, rand: RandomSource | None = None) -> None:
        self._y = _point(_bytes(decryptor_public, "public key"), "public key")
        self._rand = rand or OsRandom()
        self._alpha: dict[bytes, bytes] = {}

    def _secret_for(self, context: bytes) -> bytes:
        context = _bytes(context, "context")
        if context not in self._alpha:
            self._alpha[context] = _scalar(self._rand)
        return self._alpha[context]

    def forget(self, context: bytes) -> None:
        """Drop the context's blinding secret (its ids can never be produced again)."""
        self._alpha.pop(_bytes(context, "context"), None)

    def blind(self, ciphertext: bytes, context: bytes) -> bytes:
        """``(a C1 + s B, a C2 + s Y)`` with this context's ``a`` and a fresh ``s``.

        Raises:
            BlindedCrowdError: a malformed ciphertext.
        """
        c1, c2 = _split(ciphertext)
        return self._blind(c1, c2, context)

    def blind_validated(self, ciphertext: bytes, context: bytes) -> bytes:
        """:meth:`blind` for a ciphertext whose points the caller has already checked
        (shuffler 1 checks them at intake), skipping the second subgroup check."""
        ct = _bytes(ciphertext, "ciphertext")
        if len(ct) != CIPHERTEXT_BYTES:
            raise BlindedCrowdError(f"a ciphertext is {CIPHERTEXT_BYTES} bytes, got {len(ct)}")
        return self._blind(ct[:POINT_BYTES], ct[POINT_BYTES:], context)

    def _blind(self, c1: bytes, c2: bytes, context: bytes) -> bytes:
        a = self._secret_for(context)
        s = _scalar(self._rand)
        return (_na.crypto_core_ed25519_add(_mul(a, c1), _base(s))
                + _na.crypto_core_ed25519_add(_mul(a, c2), _mul(s, self._y)))

    def blind_and_shuffle(self, ciphertexts: Sequence[bytes], context: bytes
                          ) -> tuple[list[bytes], int]:
        """Blind every valid ciphertext, drop the malformed ones, shuffle the rest.

        Returns:
            ``(blinded ciphertexts in a uniformly random order, number dropped)``.
        """
        out: list[bytes] = []
        dropped = 0
        for ct in ciphertexts:
            try:
                out.append(self.blind(ct, context))
            except BlindedCrowdError:
                dropped += 1
        order = uniform_permutation(len(out), self._rand)
        return [out[i] for i in order], dropped


def two_shuffler_crowd_counts(items: Iterable[bytes], context: bytes, threshold: int,
                              rand: RandomSource | None = None
                              ) -> tuple[dict[bytes, int], dict[str, int]]:
    """Run the crowd-id half of the two-shuffler pipeline on ``items`` (one per client).

    Clients encrypt, shuffler 1 blinds and shuffles, shuffler 2 decrypts to crowd ids
    and keeps the crowds with at least ``threshold`` members.

    Returns:
        ``({crowd id: size} of the crowds at or above the threshold, stats)`` where
        ``stats`` counts ``clients``, ``crowds``, ``forwarded`` and ``dropped``.

    Raises:
        BlindedCrowdError: ``threshold < 1`` or an item that is not bytes.
    """
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise BlindedCrowdError("threshold must be an int >= 1")
    rand = rand or OsRandom()
    key = DecryptorKey.generate(rand)
    blinder = Blinder(key.public, rand)
    cts = [encrypt_crowd(x, context, key.public, rand) for x in items]
    blinded, dropped = blinder.blind_and_shuffle(cts, context)
    sizes: dict[bytes, int] = {}
    for ct in blinded:
        cid = key.crowd_id(ct)
        sizes[cid] = sizes.get(cid, 0) + 1
    kept = {c: k for c, k in sizes.items() if k >= threshold}
    return kept, {"clients": len(cts), "crowds": len(sizes),
                  "forwarded": sum(kept.values()), "dropped": dropped}


class CrowdShuffler:
    """Shuffler 2 of the blinded pipeline: decrypts crowd ids, thresholds, shuffles.

    Each batch from shuffler 1 follows the lifecycle table of :mod:`shuffler.lifecycle`:
    decrypted, it is ``received``; then ``forwarded`` or, below ``min_batch_size``,
    ``dropped`` whole (the same too-small rule as :class:`shuffler.shuffler.Shuffler`).

    Args:
        key: shuffler 2's ElGamal key.
        rand: randomness for shuffling and noise (OS by default).
        min_batch_size: fewer accepted reports drop the whole batch and raise
            :class:`BatchTooSmall` carrying the receipt (the context is final: the batch
            cannot be resubmitted).
        threshold: a :class:`~shuffler.thresholds.HardThreshold` or
            :class:`~shuffler.thresholds.NoisyThreshold` (default ``HardThreshold(1)``).

    Raises:
        ShufflerError: invalid arguments.
    """

    def __init__(self, key: DecryptorKey, rand: RandomSource | None = None,
                 min_batch_size: int = 1, threshold: object = None) -> None:
        if not isinstance(key, DecryptorKey):
            raise ShufflerError("key must be a DecryptorKey")
        self.key = key
        self.min_batch_size, self.threshold = release_rule(min_batch_size, threshold)
        self._rand = rand or OsRandom()
        self._final: dict[bytes, BatchRecord] = {}  # a context is processed once, never replayed

    def state(self, context: Context) -> BatchState:
        """The lifecycle state of ``context``'s batch here.

        Raises:
            ShufflerError: this context was never processed.
        """
        b = self._final.get(context.header) if isinstance(context, Context) else None
        if b is None:
            raise ShufflerError("no batch for this context")
        return b.state

    def process(self, batch: BlindedBatch) -> ShuffleOutput:
        """Decrypt, check, threshold and shuffle one batch from shuffler 1.

        Pairs whose ciphertext does not decrypt are counted as ``invalid_crowd``, a
        repeated inner layer as ``duplicate_inner``.

        Raises:
            ShufflerError: not a :class:`BlindedBatch`, or its context was processed
                before (nothing changes).
            BatchTooSmall: fewer accepted reports than ``min_batch_size``: the batch was
                dropped whole (the exception carries the receipt).
        """
        if not isinstance(batch, BlindedBatch):
            raise ShufflerError("shuffler 2 takes a BlindedBatch")
        header = batch.context.header
        if header in self._final:
            raise ShufflerError("this context was already processed "
                                f"({self._final[header].state.value})")
        b = BatchRecord(batch.context, BatchState.RECEIVED)
        for ct, layer in zip(batch.crowds, batch.inner):
            try:
                cid = self.key.crowd_id(ct)
            except BlindedCrowdError:
                b.rejected[RejectReason.INVALID_CROWD] += 1
                continue
            if layer in b.seen_inner:
                b.rejected[RejectReason.DUPLICATE_INNER] += 1
                continue
            b.seen_inner.add(layer)
            b.crowds.append(cid)
            b.inner.append(layer)
        accepted = len(b.inner)
        event = close_event(b, BatchEvent.CLOSE, self.min_batch_size)
        out = step(self, b, event)
        if event is BatchEvent.BELOW_MINIMUM:
            raise BatchTooSmall(accepted, self.min_batch_size, out)
        return out

    # -- lifecycle handlers (named by shuffler.lifecycle.TRANSITIONS) -------------
    def _threshold_and_shuffle(self, b: BatchRecord) -> ShuffleOutput:
        return threshold_and_shuffle(b.context, b.crowds, b.inner, b.rejected,
                                     self.threshold, self._rand)

    def _drop(self, b: BatchRecord) -> ShuffleReceipt:
        return dropped_receipt(b, len(set(b.crowds)), self.threshold)

    def _finished(self, b: BatchRecord) -> None:
        """Lifecycle hook: ``b`` is final; its context is never processed again."""
        self._final[b.context.header] = b
        b.free()
