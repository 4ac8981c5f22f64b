"""Length-prefixed frames over a byte stream, bounded before they are read.

A frame is a 6-byte header -- the body's length (4 bytes, big-endian) and its tag
(2 bytes) -- followed by the body, one codec message ``msgpack([VERSION, tag, ...])``.
The reader knows what it accepts at this point of its session (a
:class:`~protocol.core.codec.SessionLimits`): it reads the header, refuses a tag it does
not accept and a length above the largest legal message of that tag
(:meth:`SessionLimits.max_frame`) **before reading the body**, then reads exactly the
body and decodes it with the same limits (which also checks that the body's own tag
is the header's). So a peer can make a party buffer at most the largest legal frame of
the current stage, whatever it sends.

Every failure is a :class:`FrameError` (a :class:`~protocol.core.codec.CodecError`),
except the end of the stream, :class:`asyncio.IncompleteReadError`, which callers treat
as a disconnect.
"""
from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any, Callable

from protocol.core import codec
from protocol.core.codec import CodecError, SessionLimits
from protocol.core.net.signals import wait_for

__all__ = ["HEADER", "FrameError", "frame", "read_message", "read_frame", "decode_frame",
           "parse_header", "close_writer"]

#: body length (u32) and tag (u16), big-endian
HEADER = struct.Struct(">IH")


class FrameError(CodecError):
    """A frame that this party does not accept here: unknown tag, oversized, malformed."""


def frame(msg: Any) -> bytes:
    """The frame of one registered message (header and body).

    Raises:
        CodecError: the message is not registered.
    """
    body = codec.encode(msg)
    return HEADER.pack(len(body), type(msg).TAG) + body


def parse_header(header: bytes, limits: SessionLimits) -> tuple[int, int]:
    """``(length, tag)`` of a frame header, checked against ``limits``.

    Raises:
        FrameError: a tag not accepted here, or a length over that tag's largest legal
            frame.
    """
    length, tag = HEADER.unpack(header)
    bound = limits.bound(tag)
    if bound is None:
        raise FrameError(f"tag {tag} is not accepted at this point of the session")
    if length > bound.max_frame:
        raise FrameError(f"frame of {length} bytes for tag {tag}; the largest legal one "
                         f"is {bound.max_frame}")
    return length, tag


async def read_message(reader: asyncio.StreamReader,
                       limits: SessionLimits | Callable[[], SessionLimits]
                       ) -> tuple[Any, int]:
    """Read one frame and decode it: ``(message, bytes read)``. ``limits`` may be a
    function, called when the header has arrived (a long-lived connection whose
    session changes while it waits).

    Raises:
        FrameError: refused (see :func:`parse_header`) or undecodable.
        asyncio.IncompleteReadError: the stream ended (a disconnect).
    """
    tag, body, size, limits = await read_frame(reader, limits)
    return decode_frame(tag, body, limits), size


async def read_frame(reader: asyncio.StreamReader,
                     limits: SessionLimits | Callable[[], SessionLimits]
                     ) -> tuple[int, bytes, int, SessionLimits]:
    """Read one frame without decoding its body: ``(tag, body, bytes read, the limits
    it was checked against)``. The header is checked as :func:`read_message` checks it
    (the tag accepted here, the length within that tag's largest legal frame) before a
    byte of the body is read; the body is the caller's to decode
    (:func:`decode_frame`), or to hand on to whoever must judge it (a device's
    validated report, which the committee refuses by name).

    Raises:
        FrameError: refused by its header.
        asyncio.IncompleteReadError: the stream ended (a disconnect).
    """
    header = await reader.readexactly(HEADER.size)
    if callable(limits):
        limits = limits()
    length, tag = parse_header(header, limits)
    body = await reader.readexactly(length)
    return tag, body, HEADER.size + length, limits


def decode_frame(tag: int, body: bytes, limits: SessionLimits) -> Any:
    """The message of a frame read by :func:`read_frame`.

    Raises:
        FrameError: undecodable, or its body's tag is not the header's.
    """
    try:
        msg = codec.decode(body, limits=limits)
    except CodecError as exc:
        raise FrameError(str(exc)) from None
    if type(msg).TAG != tag:
        raise FrameError(f"header says tag {tag}, body holds tag {type(msg).TAG}")
    return msg


async def close_writer(writer: asyncio.StreamWriter | None) -> None:
    """Close a connection (if any), waiting at most 2 seconds; never raises."""
    if writer is None:
        return
    with contextlib.suppress(Exception):
        writer.close()
        await wait_for(writer.wait_closed(), 2)
