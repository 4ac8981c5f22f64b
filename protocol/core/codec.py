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
* every size is bounded before allocation (``Limits``);
* whatever goes wrong while decoding -- bad msgpack, trailing bytes, wrong version,
  unknown tag, wrong arity, a value the message constructor rejects -- surfaces as a
  single exception type, :class:`CodecError`. No other exception escapes ``decode``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import msgpack

VERSION = 1

__all__ = ["CodecError", "Limits", "WireMessage", "register", "encode", "decode", "VERSION"]


class CodecError(Exception):
    """Raised for any malformed, oversized or unknown wire input."""


@runtime_checkable
class WireMessage(Protocol):
    """What a message type must provide to be carried by the codec."""

    TAG: ClassVar[int]

    def to_wire(self) -> list[Any]: ...

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "WireMessage": ...


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds applied while unpacking, before anything is allocated."""

    max_message_bytes: int = 512 * 1024 * 1024
    max_bin_len: int = 512 * 1024 * 1024
    max_str_len: int = 1 << 20
    max_array_len: int = 1 << 22
    max_map_len: int = 1 << 22


DEFAULT_LIMITS = Limits()

_REGISTRY: dict[int, type] = {}

M = TypeVar("M")


def register(cls: type[M]) -> type[M]:
    """Class decorator (or plain call) adding a message type to the registry.

    Raises:
        ValueError: if the tag is taken by another class or is not a small int.
    """
    tag = getattr(cls, "TAG", None)
    if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < 1 << 16:
        raise ValueError(f"{cls.__name__}.TAG must be an int in [0, 65536)")
    other = _REGISTRY.get(tag)
    if other is not None and other is not cls:
        raise ValueError(f"tag {tag} already used by {other.__name__}")
    _REGISTRY[tag] = cls
    return cls


def registered() -> dict[int, type]:
    """A copy of the tag registry (for tests and fuzzers)."""
    return dict(_REGISTRY)


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
           limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse and fully validate one message.

    Args:
        data: the bytes received.
        expected: if given, the message must be an instance of this type (or types).
        limits: size bounds.

    Raises:
        CodecError: for anything malformed; no other exception type escapes.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError("wire data must be bytes")
    if len(data) > limits.max_message_bytes:
        raise CodecError(f"message of {len(data)} bytes exceeds the limit")
    try:
        obj = msgpack.unpackb(
            bytes(data), raw=False, strict_map_key=True, use_list=True,
            ext_hook=_no_ext, max_bin_len=limits.max_bin_len,
            max_str_len=limits.max_str_len, max_array_len=limits.max_array_len,
            max_map_len=limits.max_map_len, max_ext_len=0,
        )
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises many types (ExtraData, ValueError, ...)
        raise CodecError(f"malformed msgpack: {type(exc).__name__}") from None
    if not isinstance(obj, list) or len(obj) < 2:
        raise CodecError("a message is a list [version, tag, fields...]")
    version, tag = obj[0], obj[1]
    if type(version) is not int or version != VERSION:
        raise CodecError(f"unsupported version {version!r}")
    if type(tag) is not int or tag not in _REGISTRY:
        raise CodecError(f"unknown message tag {tag!r}")
    cls = _REGISTRY[tag]
    if expected is not None and not issubclass(cls, expected):
        raise CodecError(f"expected {expected}, got {cls.__name__}")
    try:
        return cls.from_wire(obj[2:])
    except CodecError:
        raise
    except Exception as exc:  # constructor validation: ValueError, TypeError, ...
        raise CodecError(f"invalid {cls.__name__}: {exc}") from None
