"""Strict msgpack codec for every typed protocol message.

Theory of operation
-------------------
A wire message is ``msgpack([VERSION, tag, field_0, field_1, ...])``. Each message
type is a frozen, slotted dataclass that lives next to the state machine that uses it
(``secagg.messages``, ``shuffler.messages``); the pure packages cannot import msgpack,
so a message type only knows how to turn itself into a list of msgpack-native values
(``to_wire``) and how to rebuild and *fully validate* itself from such a list
(``from_wire``). This module owns the framing, the tag registry, the size limits and
the error discipline:

* decoding never uses pickle, extension types or non-string map keys;
* every message type is registered with a **shape** (:class:`Shape`): the exact
  structure of its fields (``Int``, ``Bin``, ``Str``, ``Bool``, ``Array``, ``Record``,
  ``Map``) with a bound on every length and integer. A party that knows its session
  passes a :class:`SessionLimits` (built by ``wire_secagg.session_limits`` or
  ``wire_shuffler.session_limits`` from the session's dimension, modulus, roster,
  degree, context and batch size) whose shapes pin those sizes;
* decoding happens in three steps, each bounded by the frame's length:

  1. *framing*: the frame is refused if it is longer than the largest legal message
     of its tag (:meth:`Shape.max_bytes`, the exact size of the largest value the
     shape admits, encoded as msgpack encodes it) -- before anything else;
  2. *walk*: the frame's bytes are checked against the tag's shape by reading type
     bytes and headers only (no Python object per element; arrays of equal-sized
     ``bin`` are checked with one vectorised comparison). A nested array where a
     scalar belongs, a length over its bound, a count mismatch between parallel
     arrays or a trailing byte is refused here, having allocated nothing
     proportional to the input;
  3. *unpack*: ``msgpack.unpackb`` builds the values with its own limits
     (``max_bin_len``, ``max_str_len``, ``max_array_len``, ``max_map_len``) set to the
     shape's bounds, and ``from_wire`` validates semantics.

  Since step 3 only ever sees a frame of the expected structure, the objects it
  builds are those of a legal message: memory is a small constant times the frame's
  size (plus, for a masked input, the session's own ``dim``-entry vector) and time is
  linear in it.
* whatever goes wrong while decoding -- bad msgpack, trailing bytes, wrong version,
  unknown tag, wrong arity, a size over the session's bound, a value the message
  constructor rejects -- surfaces as a single exception type, :class:`CodecError`.
  No other exception escapes ``decode``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Protocol, TypeVar, runtime_checkable

import msgpack
import numpy as np

VERSION = 1

__all__ = ["CodecError", "Limits", "SessionLimits", "WireMessage", "register", "encode",
           "decode", "registered", "shape_of", "VERSION", "Shape", "Int", "Bin", "Str",
           "Bool", "Array", "Record", "Map", "frame_max_bytes"]


class CodecError(Exception):
    """Raised for any malformed, oversized or unknown wire input."""


@runtime_checkable
class WireMessage(Protocol):
    """What a message type must provide to be carried by the codec."""

    TAG: ClassVar[int]

    def to_wire(self) -> list[Any]: ...

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "WireMessage": ...


# ------------------------------------------------------------------ msgpack sizes
def _uint_bytes(v: int) -> int:
    """Bytes of msgpack's shortest encoding of the non-negative int ``v``."""
    if v < 0x80:
        return 1
    if v <= 0xFF:
        return 2
    if v <= 0xFFFF:
        return 3
    if v <= 0xFFFFFFFF:
        return 5
    return 9


def _bin_header(n: int) -> int:
    return 2 if n <= 0xFF else 3 if n <= 0xFFFF else 5


def _str_header(n: int) -> int:
    return 1 if n < 32 else 2 if n <= 0xFF else 3 if n <= 0xFFFF else 5


def _container_header(n: int) -> int:
    return 1 if n < 16 else 3 if n <= 0xFFFF else 5


#: arrays of bin at least this long are checked with numpy (below, a loop is cheaper)
_VECTORISE = 48


def _truncated() -> CodecError:
    return CodecError("malformed msgpack: truncated frame")


def _read_len(buf: bytes, pos: int, size: int) -> tuple[int, int]:
    end = pos + size
    if end > len(buf):
        raise _truncated()
    return int.from_bytes(buf[pos:end], "big"), end


def _read_container_header(buf: bytes, pos: int, fix: int, tag16: int, what: str
                           ) -> tuple[int, int]:
    """``(length, next position)`` of the msgpack array or map header at ``pos``:
    fix form ``fix..fix+15``, 16-bit length form ``tag16``, 32-bit form ``tag16 + 1``."""
    if pos >= len(buf):
        raise _truncated()
    b = buf[pos]
    if fix <= b <= fix + 0x0F:
        return b & 0x0F, pos + 1
    if b == tag16:
        return _read_len(buf, pos + 1, 2)
    if b == tag16 + 1:
        return _read_len(buf, pos + 1, 4)
    raise CodecError(f"expected {what} at byte {pos}")


def _array_header(buf: bytes, pos: int) -> tuple[int, int]:
    return _read_container_header(buf, pos, 0x90, 0xDC, "an array")


def _map_header(buf: bytes, pos: int) -> tuple[int, int]:
    return _read_container_header(buf, pos, 0x80, 0xDE, "a map")


def _walk_ints(buf: bytes, pos: int, n: int, lo: int, hi: int) -> int:
    """Walk ``n`` integers in ``[lo, hi]`` (the common encodings inline: a hot path)."""
    try:
        for _ in range(n):
            b = buf[pos]
            if b < 0x80:
                v = b
                pos += 1
            elif b == 0xCC:
                v = buf[pos + 1]
                pos += 2
            elif b == 0xCD:
                v = buf[pos + 1] << 8 | buf[pos + 2]
                pos += 3
            else:
                v, pos = _read_int(buf, pos)
            if v < lo or v > hi:
                raise CodecError(f"integer {v} outside [{lo}, {hi}]")
    except IndexError:
        raise _truncated() from None
    return pos


def _read_int(buf: bytes, pos: int) -> tuple[int, int]:
    """The integer at ``pos`` (any msgpack int encoding) and the offset after it."""
    if pos >= len(buf):
        raise _truncated()
    b = buf[pos]
    if b <= 0x7F:
        return b, pos + 1
    if 0xCC <= b <= 0xCF:
        return _read_len(buf, pos + 1, 1 << (b - 0xCC))
    if 0xD0 <= b <= 0xD3:
        size = 1 << (b - 0xD0)
        if pos + 1 + size > len(buf):
            raise _truncated()
        return int.from_bytes(buf[pos + 1:pos + 1 + size], "big", signed=True), pos + 1 + size
    if b >= 0xE0:
        return b - 0x100, pos + 1
    raise CodecError(f"expected an integer at byte {pos}")


# ------------------------------------------------------------------ shapes
class Shape:
    """The structure of one msgpack value, with a bound on every size.

    ``walk`` checks the encoding at ``buf[pos:]`` and returns the offset after it,
    reading headers only; ``max_bytes`` is the size of the largest value the shape
    admits in msgpack's shortest encoding; ``limits`` the largest bin, str, array and
    map length inside it (for msgpack's own limits).
    """

    def walk(self, buf: bytes, pos: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def max_bytes(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def limits(self) -> tuple[int, int, int, int]:
        """``(bin, str, array, map)`` maximum lengths inside this shape."""
        return (0, 0, 0, 0)


def _max4(*ts: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return tuple(max(t[i] for t in ts) for i in range(4)) if ts else (0, 0, 0, 0)  # type: ignore[return-value]


@dataclass(frozen=True)
class Int(Shape):
    """A non-negative integer in ``[lo, hi]`` (``hi <= 2**64 - 1``)."""

    lo: int = 0
    hi: int = (1 << 64) - 1

    def __post_init__(self) -> None:
        if not 0 <= self.lo <= self.hi < 1 << 64:
            raise ValueError("Int bounds must satisfy 0 <= lo <= hi < 2**64")

    def walk(self, buf: bytes, pos: int) -> int:
        v, pos = _read_int(buf, pos)
        if not self.lo <= v <= self.hi:
            raise CodecError(f"integer {v} outside [{self.lo}, {self.hi}]")
        return pos

    def max_bytes(self) -> int:
        return _uint_bytes(self.hi)


@dataclass(frozen=True)
class Bin(Shape):
    """A byte string of length in ``[lo, hi]``."""

    lo: int = 0
    hi: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.lo <= self.hi < 1 << 32:
            raise ValueError("Bin bounds must satisfy 0 <= lo <= hi < 2**32")

    def header(self, buf: bytes, pos: int) -> tuple[int, int]:
        """Length and offset of the payload of the bin at ``pos``."""
        try:
            b = buf[pos]
            if b == 0xC4:
                n, start = buf[pos + 1], pos + 2
            elif b == 0xC5:
                n, start = buf[pos + 1] << 8 | buf[pos + 2], pos + 3
            elif b == 0xC6:
                n, start = _read_len(buf, pos + 1, 4)
            else:
                raise CodecError(f"expected bytes at byte {pos}")
        except IndexError:
            raise _truncated() from None
        if n < self.lo or n > self.hi:
            raise CodecError(f"{n} bytes outside [{self.lo}, {self.hi}]")
        return n, start

    def walk(self, buf: bytes, pos: int) -> int:
        try:  # header() inlined: this runs once per bin of every message
            b = buf[pos]
            if b == 0xC4:
                n, start = buf[pos + 1], pos + 2
            elif b == 0xC5:
                n, start = buf[pos + 1] << 8 | buf[pos + 2], pos + 3
            else:
                n, start = self.header(buf, pos)
        except IndexError:
            raise _truncated() from None
        if n < self.lo or n > self.hi:
            raise CodecError(f"{n} bytes outside [{self.lo}, {self.hi}]")
        end = start + n
        if end > len(buf):
            raise _truncated()
        return end

    def max_bytes(self) -> int:
        return _bin_header(self.hi) + self.hi

    def limits(self) -> tuple[int, int, int, int]:
        return (self.hi, 0, 0, 0)


@dataclass(frozen=True)
class Str(Shape):
    """A UTF-8 string of ``lo..hi`` bytes (validity checked by msgpack when unpacking)."""

    lo: int = 0
    hi: int = 0

    def walk(self, buf: bytes, pos: int) -> int:
        if pos >= len(buf):
            raise _truncated()
        b = buf[pos]
        if 0xA0 <= b <= 0xBF:
            n, start = b & 0x1F, pos + 1
        elif 0xD9 <= b <= 0xDB:
            n, start = _read_len(buf, pos + 1, 1 << (b - 0xD9))
        else:
            raise CodecError(f"expected a string at byte {pos}")
        if not self.lo <= n <= self.hi:
            raise CodecError(f"string of {n} bytes outside [{self.lo}, {self.hi}]")
        if start + n > len(buf):
            raise _truncated()
        return start + n

    def max_bytes(self) -> int:
        return _str_header(self.hi) + self.hi

    def limits(self) -> tuple[int, int, int, int]:
        return (0, self.hi, 0, 0)


@dataclass(frozen=True)
class Bool(Shape):
    """``true`` or ``false``."""

    def walk(self, buf: bytes, pos: int) -> int:
        if pos >= len(buf):
            raise _truncated()
        if buf[pos] not in (0xC2, 0xC3):
            raise CodecError(f"expected a bool at byte {pos}")
        return pos + 1

    def max_bytes(self) -> int:
        return 1


@dataclass(frozen=True)
class Array(Shape):
    """An array of ``lo..hi`` values of one shape.

    An array of ``Bin`` whose elements all carry the same header (the common case:
    fixed-size ciphertexts) is checked with one vectorised comparison.
    """

    item: Shape
    hi: int
    lo: int = 0

    def count(self, buf: bytes, pos: int) -> tuple[int, int]:
        n, pos = _array_header(buf, pos)
        if not self.lo <= n <= self.hi:
            raise CodecError(f"array of {n} entries outside [{self.lo}, {self.hi}]")
        return n, pos

    def walk(self, buf: bytes, pos: int) -> int:
        n, pos = self.count(buf, pos)
        if n == 0:
            return pos
        item = self.item
        if isinstance(item, Int):
            return _walk_ints(buf, pos, n, item.lo, item.hi)
        if isinstance(item, Bin) and n >= _VECTORISE:
            size, start = item.header(buf, pos)
            stride = start - pos + size
            end = pos + n * stride
            if end <= len(buf):
                rows = np.frombuffer(buf, np.uint8, n * stride, pos).reshape(n, stride)
                hdr = rows[:, :start - pos]
                if (hdr == hdr[0]).all():
                    return end
        if isinstance(item, Record) and not item.equal and len(item.fields) < 16:
            head, walks = 0x90 | len(item.fields), item._walks  # type: ignore[attr-defined]
            left, tries = n, _ALIKE_TRIES
            # records led by an integer that may take three bytes, but takes fewer here,
            # are walked: sorted by it (a key list by sender), they are a short first run
            narrow = (type(item.fields[0]) is Int and item.fields[0].hi >= 256)
            while left:
                if tries and left >= _VECTORISE_RECORDS and not (
                        narrow and pos + 1 < len(buf) and buf[pos + 1] < 0xCD):
                    # runs of records laid out alike (a key list sorted by sender has
                    # at most three: senders below 128, below 256, the rest)
                    tries -= 1
                    done, stride = _alike_records(item, buf, pos, left)
                    if done > 1:
                        pos += done * stride
                        left -= done
                        continue
                # one record, Record.walk inlined (a key list: one per neighbour)
                if pos >= len(buf) or buf[pos] != head:
                    pos = item.walk(buf, pos)
                else:
                    pos += 1
                    for w in walks:
                        pos = w(buf, pos)
                left -= 1
            return pos
        walk = item.walk
        for _ in range(n):
            pos = walk(buf, pos)
        return pos

    def max_bytes(self) -> int:
        return _container_header(self.hi) + self.hi * self.item.max_bytes()

    def limits(self) -> tuple[int, int, int, int]:
        b, s, a, m = self.item.limits()
        return (b, s, max(a, self.hi), m)


@dataclass(frozen=True)
class Map(Shape):
    """A map of at most ``hi`` entries with string keys (at most ``key_bytes``)."""

    value: Shape
    hi: int
    key_bytes: int = 64

    def walk(self, buf: bytes, pos: int) -> int:
        n, pos = _map_header(buf, pos)
        if n > self.hi:
            raise CodecError(f"map of {n} entries over {self.hi}")
        key = Str(0, self.key_bytes)
        for _ in range(n):
            pos = self.value.walk(buf, key.walk(buf, pos))
        return pos

    def max_bytes(self) -> int:
        return _container_header(self.hi) + self.hi * (
            _str_header(self.key_bytes) + self.key_bytes + self.value.max_bytes())

    def limits(self) -> tuple[int, int, int, int]:
        b, s, a, m = self.value.limits()
        return (b, max(s, self.key_bytes), a, max(m, self.hi))


@dataclass(frozen=True)
class Record(Shape):
    """A fixed-arity array of differently shaped fields (a message's field list).

    Attributes:
        fields: one shape per field.
        equal: pairs of field indexes (both ``Array``) that must have equal lengths
            (parallel lists such as recipients and ciphertexts).
    """

    fields: tuple[Shape, ...]
    equal: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        for i, j in self.equal:
            if not (isinstance(self.fields[i], Array) and isinstance(self.fields[j], Array)):
                raise ValueError("Record.equal names Array fields")
        object.__setattr__(self, "_walks", tuple(f.walk for f in self.fields))

    def walk_fields(self, buf: bytes, pos: int) -> int:
        """Walk the fields (the array header has been read)."""
        if not self.equal:
            for walk in self._walks:  # type: ignore[attr-defined]
                pos = walk(buf, pos)
            return pos
        counts: dict[int, int] = {}
        for i, f in enumerate(self.fields):
            if self.equal and isinstance(f, Array):
                counts[i] = _array_header(buf, pos)[0]
            pos = f.walk(buf, pos)
        for i, j in self.equal:
            if counts[i] != counts[j]:
                raise CodecError(f"fields {i} and {j} must have the same length")
        return pos

    def walk(self, buf: bytes, pos: int) -> int:
        if pos < len(buf) and buf[pos] == 0x90 | len(self.fields) and len(self.fields) < 16:
            return self.walk_fields(buf, pos + 1)
        n, pos = _array_header(buf, pos)
        if n != len(self.fields):
            raise CodecError(f"expected {len(self.fields)} fields, got {n}")
        return self.walk_fields(buf, pos)

    def max_bytes(self) -> int:
        return _container_header(len(self.fields)) + sum(f.max_bytes() for f in self.fields)

    def limits(self) -> tuple[int, int, int, int]:
        b, s, a, m = _max4(*(f.limits() for f in self.fields))
        return (b, s, max(a, len(self.fields)), m)


#: arrays of at least this many records of integers and byte strings (a key list: one
#: per neighbour) are checked with numpy, a run of records laid out alike at a time
#: (:func:`_alike_records`), at most ``_ALIKE_TRIES`` runs an array (records whose
#: layouts keep changing are walked one by one)
_VECTORISE_RECORDS = 16
_ALIKE_TRIES = 4


def _alike_records(rec: Record, buf: bytes, pos: int, n: int) -> tuple[int, int]:
    """``(count, size)``: how many of the ``n`` encodings of ``rec`` (fields of
    :class:`Int` and :class:`Bin` only) at ``pos`` are, from the first on, laid out like
    the first, and the size of one. The first is checked field by field; each next one
    must repeat its every header byte (so every byte string has the checked length) and
    carry each integer in the same form, within its bounds: one numpy comparison over
    the ``(n, size)`` bytes checks them all. ``(0, 0)`` when the first is not of that
    kind or is malformed: the caller walks it, which accepts any other legal encoding
    and reports the first bad field."""
    fields = rec.fields
    if pos >= len(buf) or buf[pos] != 0x90 | len(fields):
        return 0, 0
    shared = [0]                           # offsets of bytes all records must repeat
    ints: list[tuple[int, int, Int]] = []  # (offset of the value, bytes, shape)
    p = pos + 1
    try:
        for f in fields:
            if type(f) is Int:
                b = buf[p]
                if b < 0x80:             # positive fixint: the byte is the value
                    ints.append((p - pos, 0, f))
                    p += 1
                elif 0xCC <= b <= 0xCF:       # uint 8 to 64, as _read_int reads them
                    width = 1 << (b - 0xCC)
                    shared.append(p - pos)
                    ints.append((p + 1 - pos, width, f))
                    p += 1 + width
                else:
                    return 0, 0
            elif type(f) is Bin:
                size, start = f.header(buf, p)
                shared.extend(range(p - pos, start - pos))
                p = start + size
            else:
                return 0, 0
    except (IndexError, CodecError):
        return 0, 0
    stride = p - pos
    n = min(n, (len(buf) - pos) // stride)
    if n < 1:
        return 0, 0
    rows = np.frombuffer(buf, np.uint8, n * stride, pos).reshape(n, stride)
    cols = rows[:, shared]
    ok = (cols == cols[0]).all(axis=1)
    for off, width, f in ints:
        if width == 0:
            values = rows[:, off].astype(np.uint64)
            ok &= values < 0x80
        else:
            values = np.zeros(n, np.uint64)
            for i in range(width):
                values = (values << np.uint64(8)) | rows[:, off + i]
        ok &= (values >= np.uint64(f.lo)) & (values <= np.uint64(f.hi))
    return (n if ok.all() else int(np.argmin(ok))), stride


def frame_max_bytes(tag: int, shape: Record) -> int:
    """Size of the largest legal frame ``[VERSION, tag, fields...]`` of ``shape``."""
    return (_container_header(2 + len(shape.fields)) + _uint_bytes(VERSION) + _uint_bytes(tag)
            + sum(f.max_bytes() for f in shape.fields))


# ------------------------------------------------------------------ limits
@dataclass(frozen=True, slots=True)
class Limits:
    """Global ceilings, applied to every frame whatever the session."""

    max_message_bytes: int = 512 * 1024 * 1024
    max_bin_len: int = 512 * 1024 * 1024
    max_str_len: int = 1 << 20
    max_array_len: int = 1 << 22
    max_map_len: int = 1 << 22


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class _TagBound:
    shape: Record
    max_frame: int
    bin_len: int
    str_len: int
    array_len: int
    map_len: int

    @classmethod
    def of(cls, tag: int, shape: Record) -> "_TagBound":
        b, s, a, m = shape.limits()
        return cls(shape, frame_max_bytes(tag, shape), b, s, max(a, 2 + len(shape.fields)), m)


@dataclass(frozen=True)
class SessionLimits:
    """What one party of one session may receive: a shape per accepted tag.

    Built from the session's parameters (``protocol.core.wire_secagg.session_limits``,
    ``protocol.core.wire_shuffler.session_limits``); a tag without a shape here is
    refused, a frame longer than its tag's :attr:`max_frame` is refused before it is
    parsed.

    Raises:
        ValueError: a shape is not a :class:`Record` or names an unregistered tag.
    """

    shapes: Mapping[int, Record]
    _bounds: dict[int, _TagBound] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bounds = {}
        for tag, shape in self.shapes.items():
            if not isinstance(shape, Record):
                raise ValueError(f"the shape of tag {tag} must be a Record")
            bounds[tag] = _TagBound.of(tag, shape)
        object.__setattr__(self, "_bounds", bounds)

    def max_frame(self, tag: int) -> int:
        """The largest legal frame of ``tag`` in this session (bytes).

        Raises:
            KeyError: the tag is not accepted in this session.
        """
        return self._bounds[tag].max_frame

    def bound(self, tag: int) -> "_TagBound | None":
        return self._bounds.get(tag)

    def merged(self, other: "SessionLimits") -> "SessionLimits":
        """Both sets of shapes (``other`` wins on a shared tag)."""
        return SessionLimits({**self.shapes, **other.shapes})


_REGISTRY: dict[int, type] = {}
_DEFAULT_BOUNDS: dict[int, _TagBound] = {}

M = TypeVar("M")


def register(cls: type[M], shape: Record) -> type[M]:
    """Add a message type to the registry, with the shape of its fields when no
    session is known (global bounds; a session narrows them with
    :class:`SessionLimits`).

    Raises:
        ValueError: if the tag is taken by another class, is not a small int, or the
            shape is not a :class:`Record`.
    """
    tag = getattr(cls, "TAG", None)
    if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < 1 << 16:
        raise ValueError(f"{cls.__name__}.TAG must be an int in [0, 65536)")
    if not isinstance(shape, Record):
        raise ValueError("a message's shape is a Record of its fields")
    other = _REGISTRY.get(tag)
    if other is not None and other is not cls:
        raise ValueError(f"tag {tag} already used by {other.__name__}")
    _REGISTRY[tag] = cls
    _DEFAULT_BOUNDS[tag] = _TagBound.of(tag, shape)
    return cls


def unregister(tag: int) -> None:
    """Remove a tag (tests that register throw-away types)."""
    _REGISTRY.pop(tag, None)
    _DEFAULT_BOUNDS.pop(tag, None)


def registered() -> dict[int, type]:
    """A copy of the tag registry (for tests and fuzzers)."""
    return dict(_REGISTRY)


def shape_of(tag: int) -> Record:
    """The session-free shape a tag was registered with.

    Raises:
        KeyError: unknown tag.
    """
    return _DEFAULT_BOUNDS[tag].shape


def encode(msg: Any) -> bytes:
    """Serialise a registered message.

    Raises:
        CodecError: if the message type is not registered or holds unpackable values.
    """
    cls = type(msg)
    if _REGISTRY.get(getattr(cls, "TAG", -1)) is not cls:
        raise CodecError(f"{cls.__name__} is not a registered message type")
    try:
        return msgpack.packb([VERSION, cls.TAG, *msg.to_wire()], use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - programming error
        raise CodecError(f"cannot encode {cls.__name__}: {exc}") from exc


def _no_ext(code: int, data: bytes) -> Any:
    raise CodecError("msgpack extension types are not accepted")


def decode(data: bytes, expected: type | tuple[type, ...] | None = None,
           limits: Limits | SessionLimits = DEFAULT_LIMITS) -> Any:
    """Parse and fully validate one message, bounded by the session if one is given.

    Args:
        data: the bytes received.
        expected: if given, the message must be an instance of this type (or types).
        limits: a :class:`SessionLimits` (the tags this party accepts in its session,
            with the session's sizes), or the global :class:`Limits` for a party that
            knows no session (each tag's registered shape applies).

    Raises:
        CodecError: for anything malformed or larger than the session allows; no other
            exception type escapes.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError("wire data must be bytes")
    buf = bytes(data)
    ceil = limits if isinstance(limits, Limits) else DEFAULT_LIMITS
    if len(buf) > ceil.max_message_bytes:
        raise CodecError(f"message of {len(buf)} bytes exceeds the limit")
    # framing: [version, tag, ...] header, then the tag's bound, before anything else
    n, pos = _array_header(buf, 0) if buf else (0, 0)
    if n < 2:
        raise CodecError("a message is a list [version, tag, fields...]")
    version, pos = _read_int(buf, pos)
    if version != VERSION:
        raise CodecError(f"unsupported version {version!r}")
    tag, pos = _read_int(buf, pos)
    cls = _REGISTRY.get(tag)
    if cls is None:
        raise CodecError(f"unknown message tag {tag!r}")
    if isinstance(limits, SessionLimits):
        bound = limits.bound(tag)
        if bound is None:
            raise CodecError(f"tag {tag} ({cls.__name__}) is not accepted in this session")
    else:
        bound = _DEFAULT_BOUNDS[tag]
    if expected is not None and not issubclass(cls, expected):
        raise CodecError(f"expected {expected}, got {cls.__name__}")
    if len(buf) > bound.max_frame:
        raise CodecError(f"{cls.__name__} of {len(buf)} bytes exceeds the largest legal "
                         f"one ({bound.max_frame} bytes)")
    # walk: structure and every length, from headers only
    if n != 2 + len(bound.shape.fields):
        raise CodecError(f"{cls.__name__} has {len(bound.shape.fields)} fields, got {n - 2}")
    if bound.shape.walk_fields(buf, pos) != len(buf):
        raise CodecError("trailing bytes after the message")
    # unpack: the structure is known, msgpack's limits are the shape's (and the
    # global ceilings, if tighter)
    try:
        obj = msgpack.unpackb(
            buf, raw=False, strict_map_key=True, use_list=True, ext_hook=_no_ext,
            max_bin_len=min(bound.bin_len, ceil.max_bin_len),
            max_str_len=min(bound.str_len, ceil.max_str_len),
            max_array_len=min(bound.array_len, ceil.max_array_len),
            max_map_len=min(bound.map_len, ceil.max_map_len), max_ext_len=0,
        )
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises many types (ExtraData, ValueError, ...)
        raise CodecError(f"malformed msgpack: {type(exc).__name__}") from None
    try:
        return cls.from_wire(obj[2:])
    except CodecError:
        raise
    except Exception as exc:  # constructor validation: ValueError, TypeError, ...
        raise CodecError(f"invalid {cls.__name__}: {exc}") from None
