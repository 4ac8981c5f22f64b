"""Typed messages of the secure-aggregation protocol (Bonawitz et al., CCS 2017).

Theory of operation
-------------------
One frozen, slotted dataclass per message. Every constructor validates types, lengths,
ranges, ordering and uniqueness, so an instance that exists is well formed; what a
message *means* (is this sender my neighbour? is this the set I signed?) is checked by
the state machines. ``to_wire()`` returns msgpack-native values and ``from_wire()``
rebuilds (and so re-validates) the message; ``protocol.core.wire_secagg`` registers the
types with the strict codec of ``protocol.core.codec``.

Participants are roster positions ``0..n-1``; sets of participants travel as bitmaps
(``secagg.state.set_to_bitmap``), lists of addressed items as strictly increasing
position tuples with parallel payload tuples.

=====  =====  ==========================  ==========================================
 tag   ROUND   message                     content
=====  =====  ==========================  ==========================================
  1      0     AdvertiseKeys (u->S)        c_pk, s_pk (X25519), nonce, Ed25519 signature
  2      1     ShareKeys (u->S)            one AEAD ciphertext per neighbour in U1
  3      2     MaskedInput (u->S)          y_u packed at the bit width of R-1
  4      3     ConsistencySignature (u->S) Ed25519 signature over (session, U3)
  5      4     UnmaskShares (u->S)         b-shares of survivors, s_sk-shares of dropped
 11      1     KeyList (S->u)              the AdvertiseKeys of u's neighbours in U1; root, path
 12      2     RoutedShares (S->u)         the ciphertexts addressed to u
 13      3     ConsistencyRequest (S->u)   sid_1, U3 as a bitmap (malicious variant)
 14      4     UnmaskRequest (S->u)        sid_1, U3 (alive), U2 minus U3 (dropped); signatures
 15      --    ServerAbort (S->u)          the server's abort reason
=====  =====  ==========================  ==========================================

``ROUND`` (a class attribute, the one source of round numbers: the engine, the
invariants and the tests derive theirs from it) is, for a client message, the protocol
round in which the client sends it and, for a server message, the round whose client
message it asks for (the client answers a ``KeyList`` with its round-1 ``ShareKeys``).
``ServerAbort`` belongs to no round. A test checks this table against the attributes.
"""
from __future__ import annotations

import hashlib
import struct

from dataclasses import dataclass, field
from operator import lt as _lt
from typing import Any, ClassVar

import numpy as np

from . import prg
from .shamir import SHARE_WIRE_BYTES
from .state import MAX_PARTICIPANTS, AbortReason, bitmap_to_mask

__all__ = [
    "AdvertiseKeys", "ShareKeys", "MaskedInput", "ConsistencySignature", "UnmaskShares",
    "KeyList", "RoutedShares", "ConsistencyRequest", "UnmaskRequest", "ServerAbort",
    "CLIENT_MESSAGES", "SERVER_MESSAGES", "ALL_MESSAGES",
    "PUBLIC_KEY_BYTES", "SIGNATURE_BYTES", "MAX_CIPHERTEXT_BYTES",
]

PUBLIC_KEY_BYTES = 32
#: per-attempt client nonce, and hashes (transcript root, path nodes, session ids)
NONCE_BYTES = HASH_BYTES = 32
#: transcript tree height for MAX_PARTICIPANTS positions
MAX_DEPTH = 16
SIGNATURE_BYTES = 64
#: nonce (12) + two encoded shares (2 * 35) + tag (16) = 98; generous bound, exact check by AEAD
MAX_CIPHERTEXT_BYTES = 256
MAX_DIM = 1 << 28


def _pos(value: Any, name: str) -> int:
    if type(value) is not int or not 0 <= value < MAX_PARTICIPANTS:
        raise ValueError(f"{name} must be an int in [0, {MAX_PARTICIPANTS})")
    return value


def _bytes(value: Any, name: str, length: int | None = None,
           lo: int = 0, hi: int | None = None) -> bytes:
    if type(value) is not bytes:
        raise TypeError(f"{name} must be bytes")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must be {length} bytes")
    if len(value) < lo or (hi is not None and len(value) > hi):
        raise ValueError(f"{name} length {len(value)} outside [{lo}, {hi}]")
    return value


def _positions(values: Any, name: str) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{name} must be a sequence of positions")
    out = tuple(values)
    # the checks of _pos on every entry, as C-level passes (a key list or a routed
    # round carries one entry per neighbour, and every message is checked)
    if out and (not _all_of_type(out, int) or min(out) < 0
                or max(out) >= MAX_PARTICIPANTS):
        raise ValueError(f"{name} must be an int in [0, {MAX_PARTICIPANTS})")
    if not all(map(_lt, out, out[1:])):
        raise ValueError(f"{name} must be strictly increasing (sorted, no duplicates)")
    return out


def _all_of_type(values: tuple[Any, ...], kind: type) -> bool:
    """Is every entry exactly of type ``kind`` (not a subclass: ``bool`` is no
    position)?"""
    return set(map(type, values)) == {kind}


def _blobs(values: Any, name: str, count: int, length: int | None = None,
           lo: int = 0, hi: int | None = None) -> tuple[bytes, ...]:
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{name} must be a sequence of bytes")
    if len(values) != count:
        raise ValueError(f"{name} must have {count} entries")
    out = tuple(values)
    if not out:
        return out
    # _bytes on every entry, as C-level passes; any failure is reported by _bytes
    # itself on the first offending entry (the same error as entry by entry)
    lengths = set(map(len, out)) if _all_of_type(out, bytes) else None
    if lengths is None or not _lengths_ok(lengths, length, lo, hi):
        for v in out:
            _bytes(v, name, length, lo, hi)
    return out


def _lengths_ok(lengths: set[int], length: int | None, lo: int, hi: int | None) -> bool:
    if length is not None and lengths != {length}:
        return False
    return min(lengths) >= lo and (hi is None or max(lengths) <= hi)


def _fields(fields: list[Any], n: int) -> list[Any]:
    if not isinstance(fields, list) or len(fields) != n:
        raise ValueError(f"expected {n} fields")
    return fields


def _bitmap(value: Any, n: int, name: str) -> bytes:
    _bytes(value, name)
    bitmap_to_mask(value, n)  # raises ValueError on length or padding
    return value


# ------------------------------------------------------------------ client -> server

@dataclass(frozen=True, slots=True)
class AdvertiseKeys:
    """Round 0: ``u`` advertises ``c_pk`` (share encryption) and ``s_pk`` (masks).

    ``nonce`` is 32 bytes of fresh randomness of this client for this attempt (hashed
    into the transcript-bound session id). ``signature`` is empty (honest-but-curious)
    or an Ed25519 signature over ``SessionConfig.keys_message`` (malicious-server
    variant).
    """

    TAG: ClassVar[int] = 1
    ROUND: ClassVar[int] = 0
    sender: int
    c_pk: bytes
    s_pk: bytes
    nonce: bytes
    signature: bytes = b""

    def __post_init__(self) -> None:
        _pos(self.sender, "sender")
        _bytes(self.c_pk, "c_pk", PUBLIC_KEY_BYTES)
        _bytes(self.s_pk, "s_pk", PUBLIC_KEY_BYTES)
        _bytes(self.nonce, "nonce", NONCE_BYTES)
        _bytes(self.signature, "signature")
        if len(self.signature) not in (0, SIGNATURE_BYTES):
            raise ValueError("signature must be empty or 64 bytes")

    def to_wire(self) -> list[Any]:
        return [self.sender, self.c_pk, self.s_pk, self.nonce, self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "AdvertiseKeys":
        return cls(*_fields(fields, 5))


@dataclass(frozen=True, slots=True)
class ShareKeys:
    """Round 1: one ciphertext per recipient (``recipients`` strictly increasing)."""

    TAG: ClassVar[int] = 2
    ROUND: ClassVar[int] = 1
    sender: int
    recipients: tuple[int, ...]
    ciphertexts: tuple[bytes, ...]

    def __post_init__(self) -> None:
        _pos(self.sender, "sender")
        object.__setattr__(self, "recipients", _positions(self.recipients, "recipients"))
        if self.sender in self.recipients:
            raise ValueError("a client does not send shares to itself")
        object.__setattr__(self, "ciphertexts", _blobs(
            self.ciphertexts, "ciphertexts", len(self.recipients), lo=1,
            hi=MAX_CIPHERTEXT_BYTES))

    def to_wire(self) -> list[Any]:
        return [self.sender, list(self.recipients), list(self.ciphertexts)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ShareKeys":
        return cls(*_fields(fields, 3))


@dataclass(frozen=True, slots=True)
class MaskedInput:
    """Round 2: ``y_u`` mod ``R``, packed at the bit width of ``R - 1``.

    ``signature`` is empty (honest-but-curious) or, in the malicious-server variant, an
    Ed25519 signature over ``SessionConfig.input_message`` (the session, the sender and
    a digest of ``packed``): a replica of the server or an auditor that is handed the
    masked inputs by the server can check that none was altered.

    On the wire ``R - 1`` is carried (so that ``R = 2**64`` fits a msgpack uint64).
    The constructor unpacks once (validating every entry is ``< R``) and keeps the
    vector, read-only, for :meth:`vector`.
    """

    TAG: ClassVar[int] = 3
    ROUND: ClassVar[int] = 2
    sender: int
    dim: int
    modulus: int
    packed: bytes
    signature: bytes = b""
    _vector: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_header()
        _bytes(self.packed, "packed")
        _bytes(self.signature, "signature")
        vec = prg.unpack_uints(self.packed, self.dim, self.modulus)
        vec.setflags(write=False)
        object.__setattr__(self, "_vector", vec)

    def _check_header(self) -> None:
        _pos(self.sender, "sender")
        if type(self.dim) is not int or not 1 <= self.dim <= MAX_DIM:
            raise ValueError(f"dim must be in [1, {MAX_DIM}]")
        if type(self.modulus) is not int or not 2 <= self.modulus <= 1 << 64:
            raise ValueError("modulus must be in [2, 2**64]")

    @classmethod
    def from_vector(cls, sender: int, vector: np.ndarray, modulus: int) -> "MaskedInput":
        """Pack a vector of entries in ``[0, R)``.

        Packing checks every entry once; the packed bytes are not unpacked again (the
        vector kept is a read-only copy of the one packed; a received message is
        checked in full when it is decoded).

        Raises:
            ValueError: an entry is out of range, or a bad sender, length or modulus.
        """
        vec = np.array(vector, dtype=np.uint64)  # pack_uints refuses anything not 1-D
        msg = object.__new__(cls)
        for name, value in (("sender", sender), ("dim", int(vec.size)),
                            ("modulus", modulus)):
            object.__setattr__(msg, name, value)
        msg._check_header()
        object.__setattr__(msg, "packed", prg.pack_uints(vec, modulus))
        object.__setattr__(msg, "signature", b"")
        vec.setflags(write=False)
        object.__setattr__(msg, "_vector", vec)
        return msg

    def signed(self, signature: bytes) -> "MaskedInput":
        """The same message carrying ``signature`` (the vector is shared, not copied).

        Raises:
            ValueError: a signature that is not bytes.
        """
        _bytes(signature, "signature")
        msg = object.__new__(type(self))
        for name in ("sender", "dim", "modulus", "packed", "_vector"):
            object.__setattr__(msg, name, getattr(self, name))
        object.__setattr__(msg, "signature", signature)
        return msg

    def vector(self) -> np.ndarray:
        """The masked vector (read-only ``uint64``)."""
        return self._vector

    def to_wire(self) -> list[Any]:
        return [self.sender, self.dim, self.modulus - 1, self.packed, self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "MaskedInput":
        sender, dim, rm1, packed, signature = _fields(fields, 5)
        if type(rm1) is not int:
            raise TypeError("modulus must be an int")
        return cls(sender, dim, rm1 + 1, packed, signature)


@dataclass(frozen=True, slots=True)
class ConsistencySignature:
    """Round 3 (malicious variant): Ed25519 signature over ``(session, U3)``."""

    TAG: ClassVar[int] = 4
    ROUND: ClassVar[int] = 3
    sender: int
    signature: bytes

    def __post_init__(self) -> None:
        _pos(self.sender, "sender")
        _bytes(self.signature, "signature", SIGNATURE_BYTES)

    def to_wire(self) -> list[Any]:
        return [self.sender, self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ConsistencySignature":
        return cls(*_fields(fields, 2))


@dataclass(frozen=True, slots=True)
class UnmaskShares:
    """Round 4: shares of ``b_v`` for survivors and of ``s_v^SK`` for dropped peers.

    The two owner lists are disjoint by construction: no message can reveal both
    kinds of share of one peer. ``signature`` is empty (honest-but-curious) or, in the
    malicious-server variant, an Ed25519 signature over ``SessionConfig.unmask_message``
    (the session, the sender and :meth:`body_digest`), so that a replica of the server
    handed the reveals can check none was forged.
    """

    TAG: ClassVar[int] = 5
    ROUND: ClassVar[int] = 4
    sender: int
    b_owners: tuple[int, ...]
    b_shares: tuple[bytes, ...]
    s_owners: tuple[int, ...]
    s_shares: tuple[bytes, ...]
    signature: bytes = b""

    def __post_init__(self) -> None:
        _pos(self.sender, "sender")
        object.__setattr__(self, "b_owners", _positions(self.b_owners, "b_owners"))
        object.__setattr__(self, "s_owners", _positions(self.s_owners, "s_owners"))
        if set(self.b_owners) & set(self.s_owners):
            raise ValueError("a peer cannot have both its self-mask and its key revealed")
        object.__setattr__(self, "b_shares", _blobs(self.b_shares, "b_shares",
                                                    len(self.b_owners), length=SHARE_WIRE_BYTES))
        object.__setattr__(self, "s_shares", _blobs(self.s_shares, "s_shares",
                                                    len(self.s_owners), length=SHARE_WIRE_BYTES))
        _bytes(self.signature, "signature")

    def body_digest(self) -> bytes:
        """SHA-256 of the owners and shares (everything but the sender and signature),
        each list length-prefixed."""
        h = hashlib.sha256()
        for owners, shares in ((self.b_owners, self.b_shares), (self.s_owners, self.s_shares)):
            h.update(struct.pack(">I", len(owners)))
            for v in owners:
                h.update(struct.pack(">I", v))
            h.update(b"".join(shares))
        return h.digest()

    def to_wire(self) -> list[Any]:
        return [self.sender, list(self.b_owners), list(self.b_shares),
                list(self.s_owners), list(self.s_shares), self.signature]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "UnmaskShares":
        return cls(*_fields(fields, 6))


# ------------------------------------------------------------------ server -> client

@dataclass(frozen=True, slots=True)
class KeyList:
    """Closes round 0, opens round 1: the advertised keys of the recipient's neighbours
    in U1, the root of the round-0 transcript tree (``crypto.transcript_tree`` over every
    client of U1: position, nonce, keys) and the recipient's authentication path in it
    (siblings, leaf level first; ``crypto.transcript_depth(n)`` of them)."""

    TAG: ClassVar[int] = 11
    ROUND: ClassVar[int] = 1
    entries: tuple[AdvertiseKeys, ...]
    transcript: bytes
    path: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.entries, (tuple, list)):
            raise TypeError("entries must be a sequence")
        ents = tuple(self.entries)
        for e in ents:
            if type(e) is not AdvertiseKeys:
                raise TypeError("entries must be AdvertiseKeys")
        _positions([e.sender for e in ents], "entry senders")
        object.__setattr__(self, "entries", ents)
        _bytes(self.transcript, "transcript", HASH_BYTES)
        if not isinstance(self.path, (tuple, list)) or not 1 <= len(self.path) <= MAX_DEPTH:
            raise ValueError(f"path must be a sequence of 1..{MAX_DEPTH} hashes")
        object.__setattr__(self, "path", _blobs(self.path, "path", len(self.path),
                                                length=HASH_BYTES))

    def to_wire(self) -> list[Any]:
        return [[e.to_wire() for e in self.entries], self.transcript, list(self.path)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "KeyList":
        raw, transcript, path = _fields(fields, 3)
        if not isinstance(raw, list):
            raise TypeError("entries must be a list")
        entries = _advertised_columns(raw)
        if entries is None:   # some entry is malformed: each one checked, the first named
            entries = tuple(AdvertiseKeys.from_wire(e) for e in raw)
        return cls(entries, transcript, path)


def _advertised_columns(raw: list[Any]) -> tuple[AdvertiseKeys, ...] | None:
    """The entries of a key list, their fields checked column by column (C-level passes
    over every entry's sender, keys, nonce and signature: exactly the checks of
    :meth:`AdvertiseKeys.__post_init__`), then built without checking each again; or
    ``None`` if any entry fails a check (the caller then builds them one by one, which
    raises the entry's own error). A key list holds one entry per neighbour, and every
    client decodes one per session."""
    if not raw:
        return ()
    if not _all_of_type(tuple(raw), list) or set(map(len, raw)) != {5}:
        return None
    senders, c_pks, s_pks, nonces, sigs = zip(*raw)
    if not (_all_of_type(senders, int) and min(senders) >= 0
            and max(senders) < MAX_PARTICIPANTS):
        return None
    for column, length in ((c_pks, PUBLIC_KEY_BYTES), (s_pks, PUBLIC_KEY_BYTES),
                           (nonces, NONCE_BYTES)):
        if not _all_of_type(column, bytes) or set(map(len, column)) != {length}:
            return None
    if not _all_of_type(sigs, bytes) or not set(map(len, sigs)) <= {0, SIGNATURE_BYTES}:
        return None
    new, put = AdvertiseKeys.__new__, object.__setattr__
    out = []
    for sender, c_pk, s_pk, nonce, sig in raw:
        e = new(AdvertiseKeys)
        put(e, "sender", sender)
        put(e, "c_pk", c_pk)
        put(e, "s_pk", s_pk)
        put(e, "nonce", nonce)
        put(e, "signature", sig)
        out.append(e)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RoutedShares:
    """Closes round 1, opens round 2: the ciphertexts addressed to the recipient, by
    sender."""

    TAG: ClassVar[int] = 12
    ROUND: ClassVar[int] = 2
    senders: tuple[int, ...]
    ciphertexts: tuple[bytes, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "senders", _positions(self.senders, "senders"))
        object.__setattr__(self, "ciphertexts", _blobs(
            self.ciphertexts, "ciphertexts", len(self.senders), lo=1,
            hi=MAX_CIPHERTEXT_BYTES))

    def to_wire(self) -> list[Any]:
        return [list(self.senders), list(self.ciphertexts)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "RoutedShares":
        return cls(*_fields(fields, 2))


@dataclass(frozen=True, slots=True)
class ConsistencyRequest:
    """Closes round 2, opens round 3 (malicious variant): the survivor set U3 to be
    signed, and the transcript-bound session id ``sid_1`` of the attempt (the client
    aborts with ``stale_session`` on any other)."""

    TAG: ClassVar[int] = 13
    ROUND: ClassVar[int] = 3
    session: bytes
    n: int
    alive: bytes

    def __post_init__(self) -> None:
        _bytes(self.session, "session", HASH_BYTES)
        if type(self.n) is not int or not 1 <= self.n <= MAX_PARTICIPANTS:
            raise ValueError("n out of range")
        _bitmap(self.alive, self.n, "alive")

    def to_wire(self) -> list[Any]:
        return [self.session, self.n, self.alive]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ConsistencyRequest":
        return cls(*_fields(fields, 3))


@dataclass(frozen=True, slots=True)
class UnmaskRequest:
    """Closes round 2 (round 3 in the malicious variant), opens round 4: survivors U3
    (``alive``), ``dropped`` = U2 minus U3, and (malicious variant) the round-3
    signatures of the recipient's neighbours, by signer; ``session`` is the
    transcript-bound session id ``sid_1`` of the attempt."""

    TAG: ClassVar[int] = 14
    ROUND: ClassVar[int] = 4
    session: bytes
    n: int
    alive: bytes
    dropped: bytes
    signers: tuple[int, ...] = ()
    signatures: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        _bytes(self.session, "session", HASH_BYTES)
        if type(self.n) is not int or not 1 <= self.n <= MAX_PARTICIPANTS:
            raise ValueError("n out of range")
        _bitmap(self.alive, self.n, "alive")
        _bitmap(self.dropped, self.n, "dropped")
        object.__setattr__(self, "signers", _positions(self.signers, "signers"))
        if self.signers and self.signers[-1] >= self.n:
            raise ValueError("signer out of range")
        object.__setattr__(self, "signatures", _blobs(self.signatures, "signatures",
                                                      len(self.signers),
                                                      length=SIGNATURE_BYTES))

    def to_wire(self) -> list[Any]:
        return [self.session, self.n, self.alive, self.dropped, list(self.signers),
                list(self.signatures)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "UnmaskRequest":
        return cls(*_fields(fields, 6))


@dataclass(frozen=True, slots=True)
class ServerAbort:
    """The server gave up; ``reason`` is an :class:`~secagg.state.AbortReason` value."""

    TAG: ClassVar[int] = 15
    ROUND: ClassVar[int | None] = None
    reason: str

    def __post_init__(self) -> None:
        if type(self.reason) is not str:
            raise TypeError("reason must be a string")
        AbortReason(self.reason)  # ValueError for an unknown reason

    def to_wire(self) -> list[Any]:
        return [self.reason]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ServerAbort":
        return cls(*_fields(fields, 1))


CLIENT_MESSAGES: tuple[type, ...] = (AdvertiseKeys, ShareKeys, MaskedInput,
                                     ConsistencySignature, UnmaskShares)
SERVER_MESSAGES: tuple[type, ...] = (KeyList, RoutedShares, ConsistencyRequest,
                                     UnmaskRequest, ServerAbort)
ALL_MESSAGES: tuple[type, ...] = CLIENT_MESSAGES + SERVER_MESSAGES
