from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from protocol.core import codec
from protocol.core.codec import CodecError


@dataclass(frozen=True, slots=True)
class _Ping:
    TAG: ClassVar[int] = 65000
    seq: int
    payload: bytes

    def __post_init__(self) -> None:
        if type(self.seq) is not int or not 0 <= self.seq < 2**32:
            raise ValueError("seq out of range")
        if type(self.payload) is not bytes or len(self.payload) > 64:
            raise ValueError("payload must be at most 64 bytes")

    def to_wire(self) -> list[Any]:
        return [self.seq, self.payload]

    @classmethod
    def from_wire(cls, fields: list[Any]) -> "_Ping":
        seq, payload = fields  # wrong arity raises ValueError -> CodecError
        return cls(seq, payload)


_PING_SHAPE = codec.Record((codec.Int(0, 2**32 - 1), codec.Bin(0, 64)))


@pytest.fixture(autouse=True, scope="module")
def _registered_ping():
    # register the test message only while this module runs, so fuzzers that walk
    # the registry in the same process never meet it
    codec.register(_Ping, _PING_SHAPE)
    yield
    codec.unregister(_Ping.TAG)


@given(st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_round_trip(seq: int, payload: bytes) -> None:
    msg = _Ping(seq, payload)
    assert codec.decode(codec.encode(msg), _Ping) == msg


@pytest.mark.parametrize("raw", [
    b"", b"\xc1", msgpack.packb([1]), msgpack.packb([2, 65000, 1, b"x"]),
    msgpack.packb([1, 64999, 1, b"x"]), msgpack.packb([1, 65000, 1]),
    msgpack.packb([1, 65000, -1, b"x"]), msgpack.packb([1, 65000, 1, "x"]),
    msgpack.packb([1, 65000, 1, b"x"]) + b"\x00", msgpack.packb({"a": 1}),
    msgpack.packb([True, 65000, 1, b"x"]), msgpack.packb([1, 65000, 1, b"x" * 65]),
    msgpack.packb([1, 65000, 1, msgpack.ExtType(1, b"x")]),
])
def test_malformed_inputs_raise_codec_error(raw: bytes) -> None:
    with pytest.raises(CodecError):
        codec.decode(raw)


def test_expected_type_enforced() -> None:
    with pytest.raises(CodecError):
        codec.decode(codec.encode(_Ping(1, b"")), expected=int)


def test_size_limit() -> None:
    limits = codec.Limits(max_message_bytes=10)
    with pytest.raises(CodecError):
        codec.decode(codec.encode(_Ping(1, b"x" * 20)), limits=limits)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_fuzzed_bytes_only_raise_codec_error(raw: bytes) -> None:
    try:
        codec.decode(raw)
    except CodecError:
        pass
