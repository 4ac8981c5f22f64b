"""Typed layers of a shuffler report and the shuffler's outputs.

Theory of operation
-------------------
Prochlo (Bittau et al., SOSP 2017; ``lib/data.h`` in google/prochlo) names each layer
of a report as its own type. We keep that shape:

* :class:`PlainReport` -- the client's report, padded to the task's fixed payload
  size ``P`` with a 2-byte length prefix, so every report of a task has one length;
* :class:`AnalyzerEnvelope` -- the inner layer: the padded report sealed to the
  analyzer, associated data = ``"fedhh/shuffler/v1/inner" || header(context)``;
* :class:`ShufflerEnvelope` -- the outer layer: ``crowd_id || inner`` sealed to the
  shuffler, associated data = ``"fedhh/shuffler/v1/outer" || header(context)``;
  the header travels in the clear so the shuffler can batch by (task, epoch);
* :class:`ShuffledBatch` -- what the shuffler forwards: the context and the inner
  envelopes only, in shuffled order;
* :class:`ShuffleReceipt` -- what the shuffler did (counts only, no per-crowd data).

Byte layouts (integers big-endian)::

    header(context) = "FHS\\x01" | u16 len(task) | task (UTF-8) | u64 epoch
                      | u32 payload_size P | shuffler key id (8) | analyzer key id (8)
    PlainReport     = u16 len(report) | report | zero bytes up to P        (P + 2)
    AnalyzerEnvelope= epk_A (32) | ChaCha20-Poly1305 ciphertext of PlainReport  (P + 50)
    outer plaintext = crowd id (16) | AnalyzerEnvelope                     (P + 66)
    ShufflerEnvelope= header | epk_S (32) | ciphertext of outer plaintext  (H + P + 114)

with ``H = 34 + len(task)``. Every message type is a frozen, slotted dataclass that
validates itself in its constructor and converts to and from msgpack-native lists
(``to_wire``/``from_wire``) for :mod:`protocol.core.codec` (tags 100..199, registered in
``protocol/core/wire_shuffler.py``), and to and from the byte layouts above.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .errors import EnvelopeRejected, RejectReason, ShufflerError
from .keys import KEY_BYTES, KEY_ID_BYTES, TAG_BYTES

__all__ = [
    "Context", "PlainReport", "AnalyzerEnvelope", "ShufflerEnvelope", "ShuffledBatch",
    "ShuffleReceipt", "BlindedBatch", "CROWD_ID_BYTES", "BLINDED_CROWD_BYTES", "MAGIC",
    "MAGIC_BLINDED", "LABEL_INNER", "LABEL_OUTER", "MAX_PAYLOAD", "MAX_TASK_BYTES",
    "inner_size", "envelope_size", "crowd_field_bytes",
]

MAGIC = b"FHS\x01"          # keyed crowd ids (16 bytes)
MAGIC_BLINDED = b"FHS\x02"  # blinded crowd ids: a 64-byte ElGamal ciphertext
LABEL_INNER = b"fedhh/shuffler/v1/inner"
LABEL_OUTER = b"fedhh/shuffler/v1/outer"
CROWD_ID_BYTES = 16
BLINDED_CROWD_BYTES = 64
LEN_PREFIX = 2
MAX_PAYLOAD = (1 << 16) - 1
MAX_TASK_BYTES = 1024
_HEAD = struct.Struct(">4sH")
_TAIL = struct.Struct(">QI8s8s")


def inner_size(payload_size: int) -> int:
    """Bytes of an :class:`AnalyzerEnvelope` for payload size ``P``: ``P + 50``."""
    return KEY_BYTES + LEN_PREFIX + payload_size + TAG_BYTES


def crowd_field_bytes(context: "Context") -> int:
    """The crowd field of the outer plaintext: a 16-byte keyed id, or in a blinded
    context the 64-byte ciphertext of :mod:`shuffler.blinded`."""
    return BLINDED_CROWD_BYTES if context.blinded else CROWD_ID_BYTES


def envelope_size(context: "Context") -> int:
    """Bytes of a :class:`ShufflerEnvelope` in ``context``: ``H + P + 114`` (``+ 48``
    when blinded)."""
    return len(context.header) + KEY_BYTES + crowd_field_bytes(context) \
        + inner_size(context.payload_size) + TAG_BYTES


def _check_bytes(name: str, value: object, size: int | None = None) -> None:
    if type(value) is not bytes:
        raise ShufflerError(f"{name} must be bytes")
    if size is not None and len(value) != size:
        raise ShufflerError(f"{name} must be {size} bytes, got {len(value)}")


def _check_uint(name: str, value: object, bits: int) -> None:
    if type(value) is not int or not 0 <= value < 1 << bits:
        raise ShufflerError(f"{name} must be an int in [0, 2**{bits})")


@dataclass(frozen=True, slots=True)
class Context:
    """What every layer is bound to: task, epoch, payload size, both key ids and the
    crowd-id scheme (``blinded``: the header's magic is ``FHS\x02`` and the crowd field
    is a blinded-crowd ciphertext, see :mod:`shuffler.blinded`).

    Raises:
        ShufflerError: for an empty or over-long task name, or out-of-range fields.
    """

    task: str
    epoch: int
    payload_size: int
    shuffler_key_id: bytes
    analyzer_key_id: bytes
    blinded: bool = False
    header: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.task) is not str or not self.task:
            raise ShufflerError("task must be a non-empty string")
        task_b = self.task.encode("utf-8")
        if len(task_b) > MAX_TASK_BYTES:
            raise ShufflerError(f"task name longer than {MAX_TASK_BYTES} bytes")
        _check_uint("epoch", self.epoch, 64)
        if type(self.payload_size) is not int or not 0 <= self.payload_size <= MAX_PAYLOAD:
            raise ShufflerError(f"payload_size must be in [0, {MAX_PAYLOAD}]")
        _check_bytes("shuffler_key_id", self.shuffler_key_id, KEY_ID_BYTES)
        _check_bytes("analyzer_key_id", self.analyzer_key_id, KEY_ID_BYTES)
        if type(self.blinded) is not bool:
            raise ShufflerError("blinded must be a bool")
        header = (_HEAD.pack(MAGIC_BLINDED if self.blinded else MAGIC, len(task_b)) + task_b
                  + _TAIL.pack(self.epoch, self.payload_size, self.shuffler_key_id,
                               self.analyzer_key_id))
        object.__setattr__(self, "header", header)

    @property
    def inner_ad(self) -> bytes:
        return LABEL_INNER + self.header

    @property
    def outer_ad(self) -> bytes:
        return LABEL_OUTER + self.header

    @classmethod
    def parse_header(cls, data: bytes) -> tuple["Context", int]:
        """Parse a header at the start of ``data``; returns the context and its length.

        Raises:
            EnvelopeRejected: ``MALFORMED`` for a wrong magic or undecodable header.
        """
        if len(data) < _HEAD.size:
            raise EnvelopeRejected(RejectReason.MALFORMED, "shorter than a header")
        magic, tlen = _HEAD.unpack_from(data, 0)
        end = _HEAD.size + tlen + _TAIL.size
        if magic not in (MAGIC, MAGIC_BLINDED) or len(data) < end:
            raise EnvelopeRejected(RejectReason.MALFORMED, "bad magic or short header")
        try:
            task = bytes(data[_HEAD.size:_HEAD.size + tlen]).decode("utf-8")
            epoch, psize, skid, akid = _TAIL.unpack_from(data, _HEAD.size + tlen)
            return cls(task, epoch, psize, skid, akid, magic == MAGIC_BLINDED), end
        except (UnicodeDecodeError, ShufflerError) as exc:
            raise EnvelopeRejected(RejectReason.MALFORMED, str(exc)) from None

    #: fields of a context inside a wire message
    WIRE_FIELDS: ClassVar[int] = 6

    def to_wire(self) -> list[Any]:
        return [self.task, self.epoch, self.payload_size, self.shuffler_key_id,
                self.analyzer_key_id, self.blinded]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "Context":
        task, epoch, psize, skid, akid, blinded = fields
        return cls(task, epoch, psize, skid, akid, blinded)


@dataclass(frozen=True, slots=True)
class PlainReport:
    """The innermost layer: a report of at most ``payload_size`` bytes.

    Raises:
        ShufflerError: if the report is longer than the payload size.
    """

    TAG: ClassVar[int] = 102
    payload_size: int
    report: bytes

    def __post_init__(self) -> None:
        if type(self.payload_size) is not int or not 0 <= self.payload_size <= MAX_PAYLOAD:
            raise ShufflerError(f"payload_size must be in [0, {MAX_PAYLOAD}]")
        _check_bytes("report", self.report)
        if len(self.report) > self.payload_size:
            raise ShufflerError(
                f"report of {len(self.report)} bytes exceeds payload size {self.payload_size}")

    def to_bytes(self) -> bytes:
        """``u16 length || report || zero padding`` (exactly ``payload_size + 2`` bytes)."""
        n = len(self.report)
        return n.to_bytes(2, "big") + self.report + bytes(self.payload_size - n)

    @classmethod
    def from_bytes(cls, data: bytes, payload_size: int) -> "PlainReport":
        """Strip and check the padding.

        Raises:
            EnvelopeRejected: ``BAD_PADDING`` for a wrong size, a length beyond the
                payload size, or non-zero padding bytes.
        """
        if len(data) != payload_size + LEN_PREFIX:
            raise EnvelopeRejected(RejectReason.BAD_PADDING, "wrong padded size")
        n = int.from_bytes(data[:2], "big")
        if n > payload_size or data[2 + n:].count(0) != payload_size - n:
            raise EnvelopeRejected(RejectReason.BAD_PADDING, "bad length prefix or padding")
        return cls(payload_size, bytes(data[2:2 + n]))

    def to_wire(self) -> list[Any]:
        return [self.payload_size, self.report]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "PlainReport":
        psize, report = fields
        return cls(psize, report)


@dataclass(frozen=True, slots=True)
class AnalyzerEnvelope:
    """Inner layer: a padded report sealed to the analyzer (``P + 50`` bytes).

    Raises:
        ShufflerError: for a wrong-sized ephemeral key or a ciphertext shorter than a tag.
    """

    TAG: ClassVar[int] = 101
    ephemeral_public: bytes
    ciphertext: bytes

    def __post_init__(self) -> None:
        _check_bytes("ephemeral_public", self.ephemeral_public, KEY_BYTES)
        _check_bytes("ciphertext", self.ciphertext)
        if not TAG_BYTES + LEN_PREFIX <= len(self.ciphertext) <= MAX_PAYLOAD + LEN_PREFIX + TAG_BYTES:
            raise ShufflerError("inner ciphertext size out of range")

    def to_bytes(self) -> bytes:
        return self.ephemeral_public + self.ciphertext

    @classmethod
    def from_bytes(cls, data: bytes) -> "AnalyzerEnvelope":
        """Raises: EnvelopeRejected (``MALFORMED``) for a short or oversized blob."""
        try:
            return cls(bytes(data[:KEY_BYTES]), bytes(data[KEY_BYTES:]))
        except ShufflerError as exc:
            raise EnvelopeRejected(RejectReason.MALFORMED, str(exc)) from None

    def to_wire(self) -> list[Any]:
        return [self.ephemeral_public, self.ciphertext]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "AnalyzerEnvelope":
        epk, ct = fields
        return cls(epk, ct)


@dataclass(frozen=True, slots=True)
class ShufflerEnvelope:
    """Outer layer: ``crowd_id || inner`` sealed to the shuffler, with its clear header.

    Raises:
        ShufflerError: if the ciphertext length is not the one length of the context.
    """

    TAG: ClassVar[int] = 100
    context: Context
    ephemeral_public: bytes
    ciphertext: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.context, Context):
            raise ShufflerError("context must be a Context")
        _check_bytes("ephemeral_public", self.ephemeral_public, KEY_BYTES)
        want = crowd_field_bytes(self.context) + inner_size(self.context.payload_size) \
            + TAG_BYTES
        _check_bytes("ciphertext", self.ciphertext, want)

    def to_bytes(self) -> bytes:
        return self.context.header + self.ephemeral_public + self.ciphertext

    @classmethod
    def from_bytes(cls, data: bytes) -> "ShufflerEnvelope":
        """Parse the byte layout.

        Raises:
            EnvelopeRejected: ``MALFORMED`` (header) or ``WRONG_LENGTH`` (truncated or
                extended body).
        """
        ctx, off = Context.parse_header(data)
        if len(data) != envelope_size(ctx):
            raise EnvelopeRejected(RejectReason.WRONG_LENGTH,
                                   f"{len(data)} bytes, expected {envelope_size(ctx)}")
        return cls(ctx, bytes(data[off:off + KEY_BYTES]), bytes(data[off + KEY_BYTES:]))

    def to_wire(self) -> list[Any]:
        return [*self.context.to_wire(), self.ephemeral_public, self.ciphertext]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ShufflerEnvelope":
        c = Context.WIRE_FIELDS
        if len(fields) != c + 2:
            raise ShufflerError(f"ShufflerEnvelope has {c + 2} fields")
        return cls(Context.from_wire(fields[:c]), fields[c], fields[c + 1])


@dataclass(frozen=True, slots=True)
class ShuffledBatch:
    """What the shuffler forwards to the analyzer: context and inner envelopes only.

    Raises:
        ShufflerError: if an inner envelope does not have the context's one size.
    """

    TAG: ClassVar[int] = 103
    context: Context
    inner: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.context, Context):
            raise ShufflerError("context must be a Context")
        if type(self.inner) is not tuple:
            raise ShufflerError("inner must be a tuple of bytes")
        size = inner_size(self.context.payload_size)
        if self.inner and ({type(x) for x in self.inner} != {bytes}
                           or {len(x) for x in self.inner} != {size}):
            raise ShufflerError(f"every inner envelope must be bytes of length {size}")

    def to_wire(self) -> list[Any]:
        return [*self.context.to_wire(), list(self.inner)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ShuffledBatch":
        c = Context.WIRE_FIELDS
        if len(fields) != c + 1 or type(fields[c]) is not list:
            raise ShufflerError(f"ShuffledBatch has {c} context fields and a list")
        return cls(Context.from_wire(fields[:c]), tuple(fields[c]))


def _check_counts(name: str, m: object, keys: set[str] | None) -> None:
    if not isinstance(m, Mapping):
        raise ShufflerError(f"{name} must be a mapping")
    for k, v in m.items():
        if type(k) is not str or (keys is not None and k not in keys):
            raise ShufflerError(f"{name} has an unknown key {k!r}")
        _check_uint(f"{name}[{k}]", v, 63)


@dataclass(frozen=True, slots=True)
class ShuffleReceipt:
    """The shuffler's account of one batch: counts only, never per-crowd data.

    Attributes:
        context: the batch's context.
        received: envelopes submitted for this context (accepted + rejected).
        rejected: reason value -> count.
        dropped_by_threshold: rule part -> count: ``"below_threshold"`` (whole crowds
            under T), ``"noise_drop"`` (reports removed by the noisy threshold from
            crowds that were forwarded), ``"batch_discarded"`` (a held batch dropped),
            ``"membership_only"`` (reports of passing crowds beyond the one
            representative a membership-only rule forwards).
        forwarded: inner envelopes released to the analyzer.
        crowds: distinct crowd ids among accepted envelopes.
        crowds_forwarded: crowds that passed the threshold.
        threshold_rule: a description of the rule used (e.g. ``"hard(T=20)"``).

    Raises:
        ShufflerError: for inconsistent counts.
    """

    TAG: ClassVar[int] = 104
    context: Context
    received: int
    rejected: Mapping[str, int]
    dropped_by_threshold: Mapping[str, int]
    forwarded: int
    crowds: int
    crowds_forwarded: int
    threshold_rule: str

    def __post_init__(self) -> None:
        if not isinstance(self.context, Context):
            raise ShufflerError("context must be a Context")
        for name in ("received", "forwarded", "crowds", "crowds_forwarded"):
            _check_uint(name, getattr(self, name), 63)
        _check_counts("rejected", self.rejected, {r.value for r in RejectReason})
        _check_counts("dropped_by_threshold", self.dropped_by_threshold,
                      {"below_threshold", "noise_drop", "batch_discarded",
                       "membership_only"})
        if type(self.threshold_rule) is not str or len(self.threshold_rule) > 256:
            raise ShufflerError("threshold_rule must be a short string")
        total = (sum(self.rejected.values()) + sum(self.dropped_by_threshold.values())
                 + self.forwarded)
        if total != self.received or self.crowds_forwarded > self.crowds:
            raise ShufflerError("receipt counts do not add up")

    @property
    def accepted(self) -> int:
        return self.received - sum(self.rejected.values())

    def to_wire(self) -> list[Any]:
        return [*self.context.to_wire(), self.received, dict(self.rejected),
                dict(self.dropped_by_threshold), self.forwarded, self.crowds,
                self.crowds_forwarded, self.threshold_rule]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "ShuffleReceipt":
        c = Context.WIRE_FIELDS
        if len(fields) != c + 7:
            raise ShufflerError(f"ShuffleReceipt has {c + 7} fields")
        return cls(Context.from_wire(fields[:c]), *fields[c:])


@dataclass(frozen=True, slots=True)
class BlindedBatch:
    """Shuffler 1 to shuffler 2 (blinded crowd ids): for each accepted report, its
    blinded crowd ciphertext and its inner layer, in shuffled order.

    Raises:
        ShufflerError: a context that is not blinded, or a field of the wrong size.
    """

    TAG: ClassVar[int] = 105
    context: Context
    crowds: tuple[bytes, ...]
    inner: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.context, Context) or not self.context.blinded:
            raise ShufflerError("a BlindedBatch needs a blinded context")
        if type(self.crowds) is not tuple or type(self.inner) is not tuple:
            raise ShufflerError("crowds and inner must be tuples of bytes")
        if len(self.crowds) != len(self.inner):
            raise ShufflerError("one crowd ciphertext per inner envelope")
        size = inner_size(self.context.payload_size)
        if self.inner and ({type(x) for x in self.inner} != {bytes}
                           or {len(x) for x in self.inner} != {size}):
            raise ShufflerError(f"every inner envelope must be bytes of length {size}")
        if self.crowds and ({type(x) for x in self.crowds} != {bytes}
                            or {len(x) for x in self.crowds} != {BLINDED_CROWD_BYTES}):
            raise ShufflerError(f"every crowd ciphertext must be {BLINDED_CROWD_BYTES} bytes")

    def to_wire(self) -> list[Any]:
        return [*self.context.to_wire(), list(self.crowds), list(self.inner)]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "BlindedBatch":
        c = Context.WIRE_FIELDS
        if len(fields) != c + 2 or type(fields[c]) is not list or \
                type(fields[c + 1]) is not list:
            raise ShufflerError(f"BlindedBatch has {c} context fields and two lists")
        return cls(Context.from_wire(fields[:c]), tuple(fields[c]), tuple(fields[c + 1]))
