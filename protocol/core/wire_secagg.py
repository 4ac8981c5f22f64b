"""Registers the secure-aggregation messages (``secagg.messages``, tags 1..99) with the
strict codec of :mod:`protocol.core.codec`, with the shape of each message's fields.

Importing this module is enough; it is idempotent. ``secagg`` itself cannot import
msgpack or the codec (the pure core stays wire-agnostic), so the registration lives here.

Two sets of shapes exist (:func:`shapes`):

* registered (no session known): positions below ``MAX_PARTICIPANTS``, lists of at
  most that many entries, ``dim <= MAX_DIM``;
* :func:`session_limits` (what every party of a session decodes with): from the
  :class:`secagg.state.SessionConfig`, with ``n`` the roster size and ``k`` the
  neighbourhood size (``n - 1`` on the complete graph):

  ====================  =========================================================
   message               bound
  ====================  =========================================================
   AdvertiseKeys         sender < n; keys and nonce 32 bytes; signature 64 bytes
                         (malicious) or empty
   ShareKeys             <= k recipients < n, as many ciphertexts of exactly
                         SHARE_CIPHERTEXT_BYTES (104: nonce, two shares, tag)
   MaskedInput           dim and R - 1 equal to the session's; packed exactly
                         ceil(dim * bits(R - 1) / 8) bytes; a signature as for
                         AdvertiseKeys
   ConsistencySignature  64 bytes
   UnmaskShares          <= k owners of each kind, shares of 35 bytes, one per owner;
                         a signature as for AdvertiseKeys
   KeyList               <= k entries (AdvertiseKeys), a 32-byte root, a path of
                         exactly transcript_depth(n) 32-byte hashes
   RoutedShares          <= k senders, as many ciphertexts
   ConsistencyRequest    32-byte session id, n equal to the session's, bitmap of
                         ceil(n / 8) bytes
   UnmaskRequest         as above, <= min(n, k + 1) signers and 64-byte signatures
   ServerAbort           a reason of at most 64 bytes
  ====================  =========================================================

The largest legal frame of each tag (``SessionLimits.max_frame``) follows from these
bounds; a larger frame is refused before it is parsed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from protocol.core import codec
from protocol.core.codec import Array, Bin, Int, Record, SessionLimits, Str
from secagg.messages import (
    ALL_MESSAGES, CLIENT_MESSAGES, HASH_BYTES, MAX_CIPHERTEXT_BYTES, MAX_DEPTH, MAX_DIM,
    NONCE_BYTES, PUBLIC_KEY_BYTES, SERVER_MESSAGES, SIGNATURE_BYTES,
    AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList, MaskedInput,
    RoutedShares, ServerAbort, ShareKeys, UnmaskRequest, UnmaskShares,
)
from secagg import crypto
from secagg.shamir import SHARE_WIRE_BYTES
from secagg.state import MAX_PARTICIPANTS

if TYPE_CHECKING:  # pragma: no cover
    from secagg.state import SessionConfig

__all__ = ["SECAGG_MESSAGES", "shapes", "session_limits", "server_limits",
           "client_limits", "MAX_REASON_BYTES", "SHARE_CIPHERTEXT_BYTES"]

#: longest abort reason on the wire (the longest ``AbortReason`` value is shorter)
MAX_REASON_BYTES = 64
#: a share ciphertext in a session: nonce, the two encoded shares (b_u, s_u^SK), tag
SHARE_CIPHERTEXT_BYTES = crypto.NONCE_BYTES + 2 * SHARE_WIRE_BYTES + crypto.TAG_BYTES


def shapes(n: int = MAX_PARTICIPANTS, degree: int | None = None, dim: int | None = None,
           modulus: int | None = None, malicious: bool | None = None) -> dict[int, Record]:
    """The shape of every secure-aggregation message for a roster of ``n`` positions.

    Args:
        n: roster size (positions ``0..n-1``).
        degree: neighbourhood size ``k`` (default ``n - 1``).
        dim: the input dimension (``None``: any in ``[1, MAX_DIM]``).
        modulus: ``R`` (``None``: any in ``[2, 2**64]``). With both ``dim`` and
            ``modulus`` given (a session), share ciphertexts have their one size.
        malicious: whether keys carry a signature (``None``: either).

    Raises:
        ValueError: parameters out of range.
    """
    if not 1 <= n <= MAX_PARTICIPANTS:
        raise ValueError(f"n must be in [1, {MAX_PARTICIPANTS}]")
    k = n - 1 if degree is None else degree
    if not 0 <= k < n:
        raise ValueError("degree must be in [0, n)")
    pos = Int(0, n - 1)
    if malicious is None:
        sig = Bin(0, SIGNATURE_BYTES)
    else:
        sig = Bin(SIGNATURE_BYTES, SIGNATURE_BYTES) if malicious else Bin(0, 0)
    in_session = dim is not None and modulus is not None
    if not in_session:
        dim_s, rm1_s = Int(1, MAX_DIM), Int(1, (1 << 64) - 1)
        packed = Bin(0, min((MAX_DIM * 64 + 7) // 8, codec.DEFAULT_LIMITS.max_bin_len))
    else:
        packed_len = (dim * (modulus - 1).bit_length() + 7) // 8
        dim_s, rm1_s, packed = Int(dim, dim), Int(modulus - 1, modulus - 1), \
            Bin(packed_len, packed_len)
    keys = Record((pos, Bin(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES),
                   Bin(PUBLIC_KEY_BYTES, PUBLIC_KEY_BYTES), Bin(NONCE_BYTES, NONCE_BYTES), sig))
    digest = Bin(HASH_BYTES, HASH_BYTES)
    depth = crypto.transcript_depth(n)
    path = Array(digest, depth, depth) if in_session else Array(digest, MAX_DEPTH, 1)
    ct = Bin(SHARE_CIPHERTEXT_BYTES, SHARE_CIPHERTEXT_BYTES) if in_session else \
        Bin(1, MAX_CIPHERTEXT_BYTES)
    share = Bin(SHARE_WIRE_BYTES, SHARE_WIRE_BYTES)
    n_s = Int(1, MAX_PARTICIPANTS) if n == MAX_PARTICIPANTS else Int(n, n)
    bitmap = Bin(1, (MAX_PARTICIPANTS + 7) // 8) if n == MAX_PARTICIPANTS else \
        Bin((n + 7) // 8, (n + 7) // 8)
    signers = min(n, k + 1)
    return {
        AdvertiseKeys.TAG: keys,
        ShareKeys.TAG: Record((pos, Array(pos, k), Array(ct, k)), equal=((1, 2),)),
        MaskedInput.TAG: Record((pos, dim_s, rm1_s, packed, sig)),
        ConsistencySignature.TAG: Record((pos, Bin(SIGNATURE_BYTES, SIGNATURE_BYTES))),
        UnmaskShares.TAG: Record((pos, Array(pos, k), Array(share, k), Array(pos, k),
                                  Array(share, k), sig), equal=((1, 2), (3, 4))),
        KeyList.TAG: Record((Array(keys, k), digest, path)),
        RoutedShares.TAG: Record((Array(pos, k), Array(ct, k)), equal=((0, 1),)),
        ConsistencyRequest.TAG: Record((digest, n_s, bitmap)),
        UnmaskRequest.TAG: Record((digest, n_s, bitmap, bitmap, Array(pos, signers),
                                   Array(Bin(SIGNATURE_BYTES, SIGNATURE_BYTES), signers)),
                                  equal=((4, 5),)),
        ServerAbort.TAG: Record((Str(1, MAX_REASON_BYTES),)),
    }


def session_limits(config: "SessionConfig",
                   accept: Iterable[type] = ALL_MESSAGES) -> SessionLimits:
    """What a party of the session ``config`` accepts: the tags of ``accept`` (the
    server: ``CLIENT_MESSAGES``, a client: ``SERVER_MESSAGES``), bounded by the
    session's roster, degree, dimension, modulus and variant.

    Raises:
        ValueError: a configuration outside the codec's ranges.
    """
    every = shapes(config.n, config.degree, config.dim, config.modulus, config.malicious)
    return SessionLimits({cls.TAG: every[cls.TAG] for cls in accept})


def server_limits(config: "SessionConfig") -> SessionLimits:
    """What the server of ``config`` accepts: the client messages (tags 1..5)."""
    return session_limits(config, CLIENT_MESSAGES)


def client_limits(config: "SessionConfig") -> SessionLimits:
    """What a client of ``config`` accepts: the server messages (tags 11..15)."""
    return session_limits(config, SERVER_MESSAGES)


_DEFAULT = shapes()
for _cls in ALL_MESSAGES:
    assert 1 <= _cls.TAG <= 99, _cls
    # round numbers are the messages' own ROUND (no table of rounds here)
    assert _cls.ROUND is None or 0 <= _cls.ROUND <= 4, _cls
    codec.register(_cls, _DEFAULT[_cls.TAG])

SECAGG_MESSAGES = ALL_MESSAGES
