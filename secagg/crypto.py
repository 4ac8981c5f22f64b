"""Cryptographic building blocks of secure aggregation (Bonawitz et al., CCS 2017).

Theory of operation
-------------------
Each client ``u`` holds two X25519 key pairs (RFC 7748): ``(c_u^SK, c_u^PK)`` for
encrypting Shamir shares to its peers and ``(s_u^SK, s_u^PK)`` for pairwise masks.
For a pair ``u, v`` both sides compute the same Diffie-Hellman value
``X25519(s_u^SK, s_v^PK) = X25519(s_v^SK, s_u^PK)`` and expand it with HKDF-SHA256
(RFC 5869) into a key that is bound to one purpose and one session::

    key = HKDF-Expand(HKDF-Extract(salt = "", ikm = dh),
                      info = "fedhh/secagg/v1" || 0x00 || label || 0x00 || context, L)

``label`` is one of the ``LABEL_*`` constants below (domain separation: a mask seed can
never equal a share-encryption key), ``context`` is normally the session id followed by
the pair's identities. Labels contain no zero byte, so ``info`` parses uniquely.

The session id (:func:`session_id`) is SHA-256 over a length-prefixed encoding of the
protocol parameters, the ordered list of participant ids and a caller context (the task
binding), so two sessions with different parameters, rosters or tasks never share a key.

Shares travel encrypted with ChaCha20-Poly1305 (RFC 8439); the associated data
(:func:`routing_ad`) binds each ciphertext to ``(session, round, sender, recipient)``, so
a server cannot replay a ciphertext into another session, round or pair. The malicious
server variant signs messages with Ed25519 (RFC 8032).

All checks raise :class:`~secagg.errors.CryptoError`; none returns ``False``. Secrets are
compared with :func:`hmac.compare_digest`. Randomness is injected: every function that
needs it takes an object with ``token_bytes(n)`` (``secagg.randomness.OsRandom`` in
production).
"""
from __future__ import annotations

from nacl.bindings import crypto_scalarmult as _nacl_scalarmult
from nacl.bindings import crypto_scalarmult_base as _nacl_scalarmult_base
from nacl.bindings import crypto_sign as _nacl_sign
from nacl.bindings import crypto_sign_open as _nacl_sign_open
from nacl.bindings import crypto_sign_seed_keypair as _nacl_sign_seed_keypair
from nacl.exceptions import BadSignatureError as _NaclBadSignature

try:  # libsodium's ChaCha20-Poly1305 (IETF, RFC 8439) itself, as PyNaCl builds it
    from nacl._sodium import ffi as _sodium_ffi
    from nacl._sodium import lib as _sodium_lib
    _SODIUM_AEAD = (_sodium_lib.crypto_aead_chacha20poly1305_ietf_encrypt,
                    _sodium_lib.crypto_aead_chacha20poly1305_ietf_decrypt)
except (ImportError, AttributeError):  # pragma: no cover - another PyNaCl build
    _SODIUM_AEAD = None

import hashlib
import hmac
import struct
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from .errors import CryptoError, ParameterError
from .randomness import RandomSource

__all__ = [
    "KEY_BYTES", "NONCE_BYTES", "TAG_BYTES", "SIGNATURE_BYTES", "PROTOCOL_PREFIX",
    "LABEL_MASK_SEED", "LABEL_SHARE_KEY", "LABEL_SELF_MASK", "LABEL_SESSION",
    "x25519_keypair", "x25519_public", "x25519_shared", "hkdf", "hkdf_info", "session_id",
    "aead_encrypt", "aead_encrypt_many", "aead_decrypt", "aead_decrypt_many",
    "AeadBatchError", "routing_ad", "routing_ads", "ed25519_keypair", "ed25519_public",
    "ed25519_sign", "ed25519_verify", "constant_time_equal", "FRESH_NONCE_BYTES",
    "attempt_session_id", "transcript_leaf", "transcript_depth", "transcript_tree",
    "TranscriptLevel",
    "transcript_path", "transcript_root_from_path", "transcript_session_id",
]

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
SIGNATURE_BYTES = 64
#: Version prefix of every HKDF ``info`` and every hash input defined here.
PROTOCOL_PREFIX = b"fedhh/secagg/v1\x00"

LABEL_MASK_SEED = b"pairwise-mask-seed"
LABEL_SHARE_KEY = b"share-encryption-key"
LABEL_SELF_MASK = b"self-mask"
LABEL_SESSION = b"session-id"
_LABEL_ROUTING = b"routing-ad"

_U64 = 1 << 64
_HKDF_MAX = 255 * 32


def _as_bytes(value: object, name: str, length: int | None = None) -> bytes:
    """Return ``value`` as ``bytes``, checking type and (optionally) exact length.

    Raises:
        CryptoError: not bytes-like or of the wrong length.
    """
    if isinstance(value, bytes):
        out = value
    elif isinstance(value, (bytearray, memoryview)):
        out = bytes(value)
    else:
        raise CryptoError(f"{name} must be bytes, got {type(value).__name__}")
    if length is not None and len(out) != length:
        raise CryptoError(f"{name} must be {length} bytes, got {len(out)}")
    return out


def _random(rand: RandomSource, n: int) -> bytes:
    out = rand.token_bytes(n)
    if not isinstance(out, (bytes, bytearray)) or len(out) != n:
        raise ParameterError(f"randomness source returned {type(out).__name__} "
                             f"instead of {n} bytes")
    return bytes(out)


def _check_int(value: object, name: str, lo: int, hi: int) -> int:
    """Check ``lo <= value < hi`` for a genuine int (bool excluded)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParameterError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value < hi:
        raise ParameterError(f"{name} must satisfy {lo} <= {name} < {hi}, got {value}")
    return value


# --------------------------------------------------------------------------- X25519

def x25519_keypair(rand: RandomSource) -> tuple[bytes, bytes]:
    """Generate an X25519 key pair from 32 bytes of injected randomness.

    Args:
        rand: randomness source with ``token_bytes(n)``.

    Returns:
        ``(secret, public)``, both 32 bytes. The secret is the raw scalar string of
        RFC 7748 (clamping happens inside the scalar multiplication).

    Raises:
        ParameterError: the randomness source misbehaved.
    """
    secret = _random(rand, KEY_BYTES)
    return secret, x25519_public(secret)


def x25519_public(secret: bytes) -> bytes:
    """Return the X25519 public key ``X25519(secret, 9)`` of a 32-byte secret.

    Raises:
        CryptoError: ``secret`` is not 32 bytes.
    """
    secret = _as_bytes(secret, "X25519 secret", KEY_BYTES)
    # libsodium's fixed-base multiplication: half the cost of a private-key object's
    # public_key() (19.7 against 37.9 us here), the same RFC 7748 output (tested)
    return _nacl_scalarmult_base(secret)


def x25519_shared(secret: bytes, peer_public: bytes) -> bytes:
    """Diffie-Hellman: ``X25519(secret, peer_public)`` (RFC 7748 section 6.1).

    Raw DH output; always pass it through :func:`hkdf` before use.

    Raises:
        CryptoError: a key has the wrong length, or the output is all zero (the peer
            sent a low-order point, RFC 7748 section 6.1's check).
    """
    secret = _as_bytes(secret, "X25519 secret", KEY_BYTES)
    peer_public = _as_bytes(peer_public, "X25519 public key", KEY_BYTES)
    # libsodium's scalar multiplication directly: going through a private-key object
    # would recompute the public key (a second scalar multiplication) on every call
    try:
        shared = _nacl_scalarmult(secret, peer_public)
    except Exception as exc:  # libsodium refuses the all-zero output
        raise CryptoError("X25519 produced the all-zero value (low-order public key)") from exc
    if hmac.compare_digest(shared, bytes(KEY_BYTES)):  # belt and braces
        raise CryptoError("X25519 produced the all-zero value (low-order public key)")
    return shared


# --------------------------------------------------------------------------- HKDF

def hkdf_info(label: bytes, context: bytes) -> bytes:
    """The HKDF ``info`` string: ``PROTOCOL_PREFIX || label || 0x00 || context``.

    Raises:
        ParameterError: ``label`` is empty or contains a zero byte (the encoding would
            become ambiguous).
    """
    prefix = _INFO_PREFIXES.get(label) if type(label) is bytes else None
    if prefix is None:
        label = _param_bytes(label, "label")
        if not label or b"\x00" in label:
            raise ParameterError("HKDF label must be non-empty and contain no zero byte")
        prefix = PROTOCOL_PREFIX + label + b"\x00"
    return prefix + (context if type(context) is bytes else _param_bytes(context, "context"))


#: the ``info`` prefixes of the protocol's own labels, checked once here
_INFO_PREFIXES = {lab: PROTOCOL_PREFIX + lab + b"\x00" for lab in (
    LABEL_MASK_SEED, LABEL_SHARE_KEY, LABEL_SELF_MASK, LABEL_SESSION)}


def _param_bytes(value: object, name: str) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ParameterError(f"{name} must be bytes, got {type(value).__name__}")


def hkdf(ikm: bytes, *, label: bytes, context: bytes, length: int = 32) -> bytes:
    """HKDF-SHA256 (RFC 5869) with an empty salt and a labelled ``info``.

    Args:
        ikm: input key material (e.g. an X25519 output).
        label: one of the ``LABEL_*`` constants (domain separation).
        context: binding data, e.g. session id and the pair of participant ids.
        length: output length in bytes, ``1 <= length <= 8160``.

    Returns:
        ``length`` bytes of output key material.

    Raises:
        CryptoError: ``ikm`` is not bytes.
        ParameterError: bad label, context or length.
    """
    ikm = _as_bytes(ikm, "HKDF input key material")
    info = hkdf_info(label, context)
    _check_int(length, "length", 1, _HKDF_MAX + 1)
    return _hkdf_sha256(ikm, info, length)


# HMAC-SHA256 (RFC 2104) written on hashlib: the extract step's key is the empty salt,
# i.e. 32 zero bytes padded to the block, so its inner and outer states are computed
# once here and copied per call; the expand step's key is the 32-byte PRK, padded and
# XORed with the pads by ``bytes.translate``. The same function as ``cryptography``'s
# HKDF (a test compares them, and checks RFC 5869's test vectors), at a third of the
# cost of building an HKDF object per call (63,000 calls per 1000-client round).
_BLOCK = 64
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_EXTRACT_INNER = hashlib.sha256(bytes(_BLOCK).translate(_IPAD))
_EXTRACT_OUTER = hashlib.sha256(bytes(_BLOCK).translate(_OPAD))
_PRK_PAD = bytes(_BLOCK - 32)


def _hkdf_sha256(ikm: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 with an empty salt on checked arguments (``1 <= length <= 8160``)."""
    inner = _EXTRACT_INNER.copy()
    inner.update(ikm)
    outer = _EXTRACT_OUTER.copy()
    outer.update(inner.digest())
    key = outer.digest() + _PRK_PAD            # the PRK, padded to the block
    ipad, opad = key.translate(_IPAD), key.translate(_OPAD)
    out, block, i = b"", b"", 1
    while len(out) < length:                   # T(i) = HMAC(PRK, T(i-1) || info || i)
        block = hashlib.sha256(
            opad + hashlib.sha256(ipad + block + info + bytes((i,))).digest()).digest()
        out += block
        i += 1
    return out[:length]


def _lp(data: bytes) -> bytes:
    """Length-prefix: 8-byte big-endian length, then the bytes."""
    return struct.pack(">Q", len(data)) + data


def session_id(params_encoding: bytes, participants: Sequence[int], context: bytes) -> bytes:
    """The 32-byte session identifier bound into every key and ciphertext.

    ``SHA-256(PROTOCOL_PREFIX || "session-id" || 0x00 || LP(params_encoding) ||
    u64(len(participants)) || u64(id_1) || ... || u64(id_n) || LP(context))`` where ``LP``
    is an 8-byte big-endian length followed by the bytes and ``u64`` is 8-byte big-endian.
    The participant list is hashed in the given order (callers pass it sorted if they
    want order independence); every field is length-delimited, so distinct inputs give
    distinct encodings.

    Args:
        params_encoding: a canonical encoding of the protocol parameters.
        participants: ordered, distinct participant ids in ``[0, 2**64)``.
        context: caller binding (task id, round of the outer protocol, ...).

    Raises:
        ParameterError: bad types, an id out of range, or a repeated id.
    """
    params_encoding = _param_bytes(params_encoding, "params_encoding")
    context = _param_bytes(context, "context")
    ids = list(participants)
    for p in ids:
        _check_int(p, "participant id", 0, _U64)
    if len(set(ids)) != len(ids):
        raise ParameterError("participant ids must be distinct")
    h = hashlib.sha256()
    h.update(PROTOCOL_PREFIX + LABEL_SESSION + b"\x00")
    h.update(_lp(params_encoding))
    h.update(struct.pack(">Q", len(ids)))
    if ids:
        h.update(struct.pack(f">{len(ids)}Q", *ids))
    h.update(_lp(context))
    return h.digest()


# --------------------------------------------------------------------------- AEAD

def aead_encrypt(key: bytes, plaintext: bytes, associated_data: bytes,
                 rand: RandomSource) -> bytes:
    """ChaCha20-Poly1305 encryption with a fresh random 96-bit nonce.

    Returns:
        ``nonce (12) || ciphertext || tag (16)``.

    Raises:
        CryptoError: the key is not 32 bytes, or plaintext/associated data not bytes.
    """
    key = _as_bytes(key, "AEAD key", KEY_BYTES)
    plaintext = _as_bytes(plaintext, "plaintext")
    associated_data = _as_bytes(associated_data, "associated data")
    return _seal(key, plaintext, associated_data, _random(rand, NONCE_BYTES))


def aead_encrypt_many(keys: Sequence[bytes], plaintexts: Sequence[bytes],
                      associated_data: Sequence[bytes], rand: RandomSource) -> list[bytes]:
    """:func:`aead_encrypt` of each ``(key, plaintext, associated data)``, in order,
    the nonces drawn from ``rand`` in one call (the same bytes, in the same order, as
    one draw per ciphertext from a stream): a client's round-1 ciphertexts.

    Raises:
        CryptoError: as :func:`aead_encrypt`, for any item (nothing is returned then).
        ParameterError: the three sequences differ in length.
    """
    keys = [_as_bytes(k, "AEAD key", KEY_BYTES) for k in keys]
    plaintexts = [_as_bytes(p, "plaintext") for p in plaintexts]
    associated_data = [_as_bytes(a, "associated data") for a in associated_data]
    if not len(keys) == len(plaintexts) == len(associated_data):
        raise ParameterError("keys, plaintexts and associated data differ in number")
    nonces = _random(rand, NONCE_BYTES * len(keys))
    return [_seal(k, p, a, nonces[i:i + NONCE_BYTES])
            for i, k, p, a in zip(range(0, len(nonces), NONCE_BYTES), keys, plaintexts,
                                  associated_data)]


def _seal(key: bytes, plaintext: bytes, associated_data: bytes, nonce: bytes) -> bytes:
    """``nonce || ChaCha20-Poly1305(key, nonce, plaintext, associated_data)`` (checked
    arguments)."""
    if _SODIUM_AEAD is None:  # pragma: no cover - another PyNaCl build
        return nonce + ChaCha20Poly1305(key).encrypt(nonce, plaintext, associated_data)
    n = len(plaintext) + TAG_BYTES
    out = _sodium_ffi.new("unsigned char[]", n)
    _SODIUM_AEAD[0](out, _sodium_ffi.NULL, plaintext, len(plaintext), associated_data,
                    len(associated_data), _sodium_ffi.NULL, nonce, key)
    return nonce + _sodium_ffi.buffer(out, n)[:]


def aead_decrypt(key: bytes, blob: bytes, associated_data: bytes) -> bytes:
    """Inverse of :func:`aead_encrypt`; authenticates before returning anything.

    Raises:
        CryptoError: wrong key length, truncated blob, or authentication failure
            (wrong key, tampered ciphertext, or different associated data).
    """
    key = _as_bytes(key, "AEAD key", KEY_BYTES)
    blob = _as_bytes(blob, "ciphertext")
    associated_data = _as_bytes(associated_data, "associated data")
    return _open(key, blob, associated_data, None)


def _open(key: bytes, blob: bytes, associated_data: bytes, buf: Any) -> bytes:
    """Authenticate and decrypt ``blob = nonce || ct || tag`` (checked ``bytes``
    arguments) into ``buf`` (a libsodium output buffer at least as long as the
    plaintext, or ``None`` for a new one).

    Raises:
        CryptoError: a truncated blob or an authentication failure.
    """
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise CryptoError(f"ciphertext too short: {len(blob)} < {NONCE_BYTES + TAG_BYTES} bytes")
    if _SODIUM_AEAD is None:  # pragma: no cover - another PyNaCl build
        try:
            return ChaCha20Poly1305(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:],
                                                 associated_data)
        except InvalidTag as exc:
            raise CryptoError("AEAD authentication failed") from exc
    body = blob[NONCE_BYTES:]
    size = len(body) - TAG_BYTES
    if buf is None or len(buf) < size:   # never a buffer shorter than the plaintext
        buf = _sodium_ffi.new("unsigned char[]", max(1, size))
    # libsodium checks the tag before it writes any plaintext (it returns -1 and
    # leaves nothing in ``buf``)
    if _SODIUM_AEAD[1](buf, _sodium_ffi.NULL, _sodium_ffi.NULL, body, len(body),
                       associated_data, len(associated_data), blob[:NONCE_BYTES], key) != 0:
        raise CryptoError("AEAD authentication failed")
    return _sodium_ffi.buffer(buf, size)[:]


def aead_decrypt_many(keys: Sequence[bytes], blobs: Sequence[bytes],
                      associated_data: Sequence[bytes]) -> list[bytes]:
    """:func:`aead_decrypt` of each ``(key, blob, associated data)``, in order.

    Raises:
        AeadBatchError: the first item that does not decrypt (its position is
            ``index``; the plaintexts before it are ``done``, none is returned).
        ParameterError: the three sequences differ in length.
    """
    if not len(keys) == len(blobs) == len(associated_data):
        raise ParameterError("keys, ciphertexts and associated data differ in number")
    longest = max((len(b) for b in blobs if type(b) is bytes), default=0)
    # one output buffer for the batch (each plaintext is copied out of it; _open makes
    # a larger one for an item that would not fit)
    buf = (_sodium_ffi.new("unsigned char[]", max(1, longest))
           if _SODIUM_AEAD is not None else None)
    out = []
    for i, (k, b, a) in enumerate(zip(keys, blobs, associated_data)):
        try:
            if type(k) is not bytes or len(k) != KEY_BYTES or type(b) is not bytes \
                    or type(a) is not bytes:
                k = _as_bytes(k, "AEAD key", KEY_BYTES)
                b = _as_bytes(b, "ciphertext")
                a = _as_bytes(a, "associated data")
            out.append(_open(k, b, a, buf))
        except CryptoError as exc:
            raise AeadBatchError(i, str(exc), out) from None
    return out


class AeadBatchError(CryptoError):
    """An item of :func:`aead_decrypt_many` did not decrypt: ``index`` is its place,
    ``done`` the plaintexts of the items before it (authenticated)."""

    def __init__(self, index: int, detail: str, done: list[bytes]) -> None:
        super().__init__(f"item {index}: {detail}")
        self.index = index
        self.done = done


def routing_ad(session: bytes, round_no: int, sender: int, recipient: int) -> bytes:
    """Canonical associated data of a routed ciphertext.

    ``PROTOCOL_PREFIX || "routing-ad" || 0x00 || session (32) || u32(round_no) ||
    u64(sender) || u64(recipient)`` (big-endian), 86 bytes in total.

    Raises:
        ParameterError: session not 32 bytes, or an integer out of range.
    """
    if type(session) is not bytes:
        session = _param_bytes(session, "session")
    if len(session) != 32:
        raise ParameterError(f"session id must be 32 bytes, got {len(session)}")
    if type(round_no) is int and type(sender) is int and type(recipient) is int:
        try:
            return _ROUTING_PREFIX + session + _ROUTING_INTS.pack(round_no, sender, recipient)
        except struct.error:
            pass  # out of range: the checks below say which
    _check_int(round_no, "round_no", 0, 1 << 32)
    _check_int(sender, "sender", 0, _U64)
    _check_int(recipient, "recipient", 0, _U64)
    return _ROUTING_PREFIX + session + _ROUTING_INTS.pack(int(round_no), int(sender),
                                                          int(recipient))


_ROUTING_PREFIX = PROTOCOL_PREFIX + _LABEL_ROUTING + b"\x00"
_ROUTING_INTS = struct.Struct(">IQQ")


def routing_ads(session: bytes, round_no: int,
                pairs: Sequence[tuple[int, int]]) -> list[bytes]:
    """:func:`routing_ad` for each ``(sender, recipient)`` pair of one session and
    round: the same bytes.

    Raises:
        ParameterError: as :func:`routing_ad`, for any pair.
    """
    if not pairs:
        return []
    first = routing_ad(session, round_no, *pairs[0])   # checks the session and round
    head = first[:-16]
    pack = _PAIR_INTS.pack
    out = [first]
    for sender, recipient in pairs[1:]:
        if type(sender) is int and type(recipient) is int \
                and 0 <= sender < _U64 and 0 <= recipient < _U64:
            out.append(head + pack(sender, recipient))
        else:
            out.append(routing_ad(session, round_no, sender, recipient))  # raises
    return out


_PAIR_INTS = struct.Struct(">QQ")


# --------------------------------------------------------------------------- Ed25519

def ed25519_keypair(rand: RandomSource) -> tuple[bytes, bytes]:
    """Generate an Ed25519 key pair (RFC 8032) from a 32-byte random seed.

    Returns:
        ``(secret_seed, public)``, both 32 bytes.

    Raises:
        ParameterError: the randomness source misbehaved.
    """
    seed = _random(rand, KEY_BYTES)
    return seed, ed25519_public(seed)


def ed25519_public(secret: bytes) -> bytes:
    """The Ed25519 public key of a 32-byte secret seed.

    Raises:
        CryptoError: ``secret`` is not 32 bytes.
    """
    secret = _as_bytes(secret, "Ed25519 secret", KEY_BYTES)
    # libsodium, as for verification: 34 against 60 us through ``cryptography`` here,
    # the same RFC 8032 key (the section 7.1 vectors and a comparison are tested)
    return _nacl_sign_seed_keypair(secret)[0]


def ed25519_sign(secret: bytes, message: bytes) -> bytes:
    """Sign ``message`` with the 32-byte Ed25519 seed ``secret``; returns 64 bytes.

    Raises:
        CryptoError: ``secret`` is not 32 bytes or ``message`` not bytes.
    """
    secret = _as_bytes(secret, "Ed25519 secret", KEY_BYTES)
    message = _as_bytes(message, "message")
    # libsodium: 67 against 88 us through ``cryptography`` here (key expansion and
    # signature); Ed25519 signatures are deterministic (RFC 8032), so the bytes are the
    # same (tested)
    return _nacl_sign(message, _nacl_sign_seed_keypair(secret)[1])[:SIGNATURE_BYTES]


def ed25519_expanded(secret: bytes) -> bytes:
    """The 64-byte expanded signing key of a 32-byte Ed25519 seed (libsodium's form),
    for a signer that signs many messages: :func:`ed25519_sign_expanded` then skips
    the key expansion :func:`ed25519_sign` does on every call.

    Raises:
        CryptoError: ``secret`` is not 32 bytes.
    """
    secret = _as_bytes(secret, "Ed25519 secret", KEY_BYTES)
    return _nacl_sign_seed_keypair(secret)[1]


def ed25519_sign_expanded(expanded: bytes, message: bytes) -> bytes:
    """:func:`ed25519_sign` with the key of :func:`ed25519_expanded` (the same
    deterministic signature).

    Raises:
        CryptoError: ``expanded`` is not 64 bytes or ``message`` not bytes.
    """
    expanded = _as_bytes(expanded, "Ed25519 expanded key", 2 * KEY_BYTES)
    message = _as_bytes(message, "message")
    return _nacl_sign(message, expanded)[:SIGNATURE_BYTES]


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> None:
    """Verify an Ed25519 signature; returns only if it is valid.

    Raises:
        CryptoError: wrong lengths, a public key that does not decode, or an invalid
            signature.
    """
    public = _as_bytes(public, "Ed25519 public key", KEY_BYTES)
    message = _as_bytes(message, "message")
    signature = _as_bytes(signature, "Ed25519 signature", SIGNATURE_BYTES)
    # libsodium's verification: 2.2x faster than OpenSSL's through ``cryptography`` here
    # (39.6 vs 85.8 us per call), and stricter: it also rejects small-order public keys,
    # non-canonical S and non-canonical R encodings (RFC 8032 section 5.1.7 leaves these
    # checks to the implementation; libsodium applies them).
    try:
        _nacl_sign_open(signature + message, public)
    except _NaclBadSignature as exc:
        raise CryptoError("Ed25519 signature verification failed") from exc
    except (ValueError, TypeError) as exc:
        raise CryptoError(f"invalid Ed25519 public key: {exc}") from exc


def constant_time_equal(a: bytes, b: bytes) -> bool:
    """Compare two byte strings in time independent of where they differ.

    Raises:
        CryptoError: an argument is not bytes-like.
    """
    return hmac.compare_digest(_as_bytes(a, "a"), _as_bytes(b, "b"))


# ------------------------------------------------------------------ per-attempt freshness

#: bytes of the server's and each client's per-attempt nonce
FRESH_NONCE_BYTES = 32
_ABSENT_LEAF = bytes(32)


def _tagged_hash(tag: bytes, *parts: bytes) -> bytes:
    h = hashlib.sha256(PROTOCOL_PREFIX + tag + b"\x00")
    for p in parts:
        h.update(struct.pack(">Q", len(p)))
        h.update(p)
    return h.digest()


def attempt_session_id(base_session: bytes, server_nonce: bytes) -> bytes:
    """Round-0 id of one attempt: ``H("attempt", base sid, server nonce)``.

    Raises:
        ParameterError: an argument of the wrong length.
    """
    if len(base_session) != 32 or len(server_nonce) != FRESH_NONCE_BYTES:
        raise ParameterError("base session must be 32 bytes, server nonce 32 bytes")
    return _tagged_hash(b"attempt", base_session, server_nonce)


def transcript_leaf(position: int, nonce: bytes, c_pk: bytes, s_pk: bytes) -> bytes:
    """Leaf of the round-0 transcript tree: ``H("transcript-leaf", u64(u), r_u, c_pk, s_pk)``."""
    return _tagged_hash(b"transcript-leaf", struct.pack(">Q", position), nonce, c_pk, s_pk)


def _node(left: bytes, right: bytes) -> bytes:
    return _tagged_hash(b"transcript-node", left, right)


def transcript_depth(n: int) -> int:
    """Height of the transcript tree over ``n`` positions (``ceil(log2 n)``, at least 1)."""
    return max(1, (n - 1).bit_length())


class TranscriptLevel(Sequence[bytes]):
    """One level of the transcript tree: its 32-byte nodes, left to right, in one
    buffer (``level[i]`` is node ``i``). A server holds the tree from round 0's close
    until the last key list is built; as one ``bytes`` object per node it took about
    two and a half times the memory of the hashes themselves."""

    __slots__ = ("_buf",)

    def __init__(self, buf: bytes) -> None:
        self._buf = buf

    def __len__(self) -> int:
        return len(self._buf) >> 5

    def __getitem__(self, i: Any) -> Any:
        if type(i) is not int:
            raise TypeError("a transcript level is indexed by node position")
        count = len(self._buf) >> 5
        if i < 0:
            i += count
        if not 0 <= i < count:
            raise IndexError("no such node in this level")
        return self._buf[i << 5:(i + 1) << 5]


def transcript_tree(n: int, leaves: dict[int, bytes]) -> list[TranscriptLevel]:
    """All levels of the Merkle tree over positions ``0..n-1`` (``2**depth`` slots;
    an absent position holds 32 zero bytes). ``levels[0]`` are the leaves,
    ``levels[-1][0]`` is the root."""
    width = 1 << transcript_depth(n)
    buf = b"".join([leaves.get(i, _ABSENT_LEAF) for i in range(width)])
    if len(buf) != width << 5:
        raise ParameterError("every transcript leaf is a 32-byte hash")
    levels = [TranscriptLevel(buf)]
    while len(buf) > 32:
        buf = b"".join([_node(buf[i:i + 32], buf[i + 32:i + 64])
                        for i in range(0, len(buf), 64)])
        levels.append(TranscriptLevel(buf))
    return levels


def transcript_path(levels: Sequence[Sequence[bytes]], position: int) -> tuple[bytes, ...]:
    """The authentication path (siblings, leaf level first) of ``position``."""
    return tuple(levels[h][(position >> h) ^ 1] for h in range(len(levels) - 1))


def transcript_root_from_path(leaf: bytes, position: int, path: Sequence[bytes]) -> bytes:
    """The root implied by ``leaf`` at ``position`` and its authentication path."""
    node = leaf
    for h, sibling in enumerate(path):
        node = _node(sibling, node) if (position >> h) & 1 else _node(node, sibling)
    return node


def transcript_session_id(attempt_session: bytes, root: bytes) -> bytes:
    """The session id used from round 1 on: ``H("transcript", sid_0, root)``."""
    return _tagged_hash(b"transcript", attempt_session, root)
