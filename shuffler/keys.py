"""Key pairs and the one-shot public-key encryption used by every layer.

Theory of operation
-------------------
Each layer of a Prochlo report (Bittau et al., SOSP 2017, section 4) is encrypted to
one party with a *fresh ephemeral* key, in the style of HPKE base mode (RFC 9180)
but written out explicitly:

    esk  <- 32 random bytes (injected randomness),  epk = X25519(esk, 9)
    z    =  X25519(esk, pk_R)                          (rejected if all zero)
    k    =  HKDF-SHA256(salt = label, ikm = z, info = label || epk || pk_R)[:32]
    c    =  ChaCha20-Poly1305(k).encrypt(nonce = 0^12, plaintext, ad)

The key ``k`` is used for exactly one message (``epk`` is fresh), so the fixed zero
nonce never repeats under one key. ``ad`` is the layer's context (task, epoch, key
ids, layer label): a ciphertext moved to another task, epoch, layer or recipient no
longer authenticates. This is why we do not use libsodium's ``crypto_box_seal``
(PyNaCl ``SealedBox``): it has no associated data, so binding the context would need
an extra MAC or putting the context inside the plaintext (checked only after
decryption, and not at all by a party that cannot decrypt), and it draws its
ephemeral key from the OS, which would make deterministic simulations impossible.

X25519 is libsodium's (``crypto_scalarmult``, via PyNaCl: about twice as fast as
OpenSSL through ``cryptography`` for one-shot keys here), the AEAD is OpenSSL's
ChaCha20-Poly1305 (via ``cryptography``). libsodium refuses an all-zero shared
secret (a low-order public key), which we surface as an authentication failure.
HKDF (RFC 5869) is computed with :mod:`hmac` because the output is one SHA-256 block:
``PRK = HMAC(salt, ikm)``, ``OKM = HMAC(PRK, info || 0x01)``. ``tests/shuffler``
checks this against RFC 5869 test case 1 and the X25519 wiring against RFC 7748.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl import bindings as _sodium
from nacl import exceptions as _sodium_exc

from secagg.randomness import OsRandom, RandomSource

from .errors import EnvelopeRejected, RejectReason, ShufflerError

__all__ = [
    "RandomSource", "OsRandom", "KeyPair", "PublicKey", "key_id", "hkdf_sha256",
    "seal", "open_sealed", "KEY_BYTES", "TAG_BYTES", "KEY_ID_BYTES",
]

KEY_BYTES = 32
TAG_BYTES = 16
KEY_ID_BYTES = 8
_ZERO_NONCE = bytes(12)


def key_id(public: bytes) -> bytes:
    """The 8-byte identifier of a public key: SHA-256("fedhh/shuffler/key-id" || pk)[:8]."""
    return hashlib.sha256(b"fedhh/shuffler/key-id\x00" + public).digest()[:KEY_ID_BYTES]


def hkdf_sha256(salt: bytes, ikm: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) with a 32-byte output (one expand block)."""
    prk = hmac.digest(salt, ikm, "sha256")
    return hmac.digest(prk, info + b"\x01", "sha256")


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A recipient's X25519 public key and its key id (what encoders are given)."""

    public: bytes
    key_id: bytes = field(init=False)

    def __post_init__(self) -> None:
        if type(self.public) is not bytes or len(self.public) != KEY_BYTES:
            raise ShufflerError("a public key is 32 bytes")
        object.__setattr__(self, "key_id", key_id(self.public))


@dataclass(frozen=True, slots=True)
class KeyPair:
    """An X25519 key pair of the shuffler or the analyzer.

    Raises:
        ShufflerError: if ``secret`` is not 32 bytes.
    """

    secret: bytes = field(repr=False)
    public_key: PublicKey = field(init=False)

    def __post_init__(self) -> None:
        if type(self.secret) is not bytes or len(self.secret) != KEY_BYTES:
            raise ShufflerError("a secret key is 32 bytes")
        object.__setattr__(self, "public_key",
                           PublicKey(_sodium.crypto_scalarmult_base(self.secret)))

    @classmethod
    def generate(cls, rand: RandomSource | None = None) -> "KeyPair":
        """A fresh key pair from ``rand`` (OS randomness by default)."""
        return cls((rand or OsRandom()).token_bytes(KEY_BYTES))

    @property
    def public(self) -> bytes:
        return self.public_key.public

    @property
    def key_id(self) -> bytes:
        return self.public_key.key_id


def seal(recipient: PublicKey, ephemeral_secret: bytes, label: bytes, plaintext: bytes,
         ad: bytes) -> tuple[bytes, bytes]:
    """Encrypt ``plaintext`` to ``recipient`` under a fresh ephemeral key.

    Args:
        recipient: the recipient's public key.
        ephemeral_secret: 32 fresh random bytes, used for this message only.
        label: layer label (domain separation of the key derivation).
        plaintext: the message.
        ad: associated data (the context) that the tag authenticates.

    Returns:
        ``(epk, ciphertext)``; ``len(ciphertext) == len(plaintext) + 16``.

    Raises:
        ShufflerError: if the shared secret is degenerate (cannot happen for a valid
            recipient key).
    """
    epk = _sodium.crypto_scalarmult_base(ephemeral_secret)
    try:
        z = _sodium.crypto_scalarmult(ephemeral_secret, recipient.public)
    except _sodium_exc.CryptoError as exc:  # all-zero shared secret (low-order key)
        raise ShufflerError(f"degenerate recipient key: {exc}") from None
    k = hkdf_sha256(label, z, label + epk + recipient.public)
    return epk, ChaCha20Poly1305(k).encrypt(_ZERO_NONCE, plaintext, ad)


def open_sealed(keys: KeyPair, label: bytes, epk: bytes, ciphertext: bytes, ad: bytes) -> bytes:
    """Decrypt what :func:`seal` produced for ``keys``.

    Raises:
        EnvelopeRejected: ``AUTHENTICATION_FAILED`` if the ephemeral key is invalid or
            degenerate, or the tag does not verify (wrong key, context, label, or any
            modified byte).
    """
    try:
        z = _sodium.crypto_scalarmult(keys.secret, epk)
        k = hkdf_sha256(label, z, label + epk + keys.public)
        return ChaCha20Poly1305(k).decrypt(_ZERO_NONCE, ciphertext, ad)
    except (InvalidTag, _sodium_exc.CryptoError, ValueError, TypeError):
        raise EnvelopeRejected(RejectReason.AUTHENTICATION_FAILED) from None
