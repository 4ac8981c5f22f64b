from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

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


# ------------------------------------------------------------------ session bounds
from protocol.core import wire_secagg, wire_shuffler  # noqa: E402
from protocol.core.secagg_engine import make_config  # noqa: E402
from protocol.studies.attacks.decode_attacks import (  # noqa: E402
    MAX_CPU_SECONDS, MAX_FIXED_BYTES, MAX_MEMORY_RATIO, masked_input_bomb, measure_decode,
    nested_batch_bomb,
)
from shuffler.messages import Context  # noqa: E402


def _largest(shape: codec.Shape) -> Any:
    """The value of ``shape`` with every integer, length and count at its maximum."""
    if isinstance(shape, codec.Int):
        return shape.hi
    if isinstance(shape, codec.Bin):
        return b"\x00" * shape.hi
    if isinstance(shape, codec.Str):
        return "a" * shape.hi
    if isinstance(shape, codec.Bool):
        return False
    if isinstance(shape, codec.Array):
        return [_largest(shape.item)] * shape.hi
    if isinstance(shape, codec.Map):
        return {f"{i:0{shape.key_bytes}d}": _largest(shape.value) for i in range(shape.hi)}
    return [_largest(f) for f in shape.fields]


def _grow(value: Any) -> Any:
    """The same value with one more byte in its first bin or string."""
    if isinstance(value, bytes):
        return value + b"\x00"
    if isinstance(value, str):
        return value + "a"
    if isinstance(value, list):
        for i, v in enumerate(value):
            g = _grow(v)
            if g is not None:
                return value[:i] + [g] + value[i + 1:]
    return None


SECAGG_CFGS = [make_config(6, 10, modulus=1 << 32, malicious=True),
               make_config(300, 1000, graph="harary", degree=40, threshold=21, modulus=1 << 20),
               make_config(5, 3, modulus=3)]
CTX = Context("task", 7, 16, b"\x01" * 8, b"\x02" * 8)
CTX_B = Context("t" * 40, 1 << 40, 300, b"\x01" * 8, b"\x02" * 8, blinded=True)


def _session_limits() -> list[tuple[str, codec.SessionLimits]]:
    return ([(f"secagg-{c.n}-{c.dim}", wire_secagg.session_limits(c)) for c in SECAGG_CFGS]
            + [("shuffler", wire_shuffler.session_limits(CTX, 50)),
               ("shuffler-blinded", wire_shuffler.session_limits(CTX_B, 7))])


@pytest.mark.parametrize("name,limits", _session_limits(), ids=lambda x: x if
                         isinstance(x, str) else "")
def test_largest_legal_frame_fits_and_one_byte_more_is_refused(name, limits) -> None:
    for tag, shape in limits.shapes.items():
        value = _largest(shape)
        blob = msgpack.packb([codec.VERSION, tag, *value], use_bin_type=True)
        assert len(blob) == limits.max_frame(tag), (name, tag)
        try:  # passes framing and the walk; only from_wire may object to the values
            codec.decode(blob, limits=limits)
        except CodecError as exc:
            assert str(exc).startswith("invalid "), (name, tag, str(exc))
        for bigger in (blob + b"\x00",
                       msgpack.packb([codec.VERSION, tag, *_grow(value)], use_bin_type=True)):
            with pytest.raises(CodecError, match="exceeds the largest legal"):
                codec.decode(bigger, limits=limits)


def test_largest_real_messages_decode_at_the_limit() -> None:
    """Real maximal messages (not just maximal shapes) decode with exactly max_frame bytes."""
    from protocol.core.wire_secagg import SHARE_CIPHERTEXT_BYTES
    from secagg.messages import MaskedInput, ShareKeys
    from shuffler.messages import ShuffledBatch, inner_size
    cfg = SECAGG_CFGS[0]
    lim = wire_secagg.server_limits(cfg)
    mi = MaskedInput.from_vector(cfg.n - 1, np.full(cfg.dim, cfg.modulus - 1, np.uint64),
                                 cfg.modulus)
    if cfg.malicious:   # the malicious variant signs its masked inputs
        mi = mi.signed(b"\x01" * 64)
    sk = ShareKeys(cfg.n - 1, tuple(range(cfg.n - 1)),
                   tuple(b"\x07" * SHARE_CIPHERTEXT_BYTES for _ in range(cfg.n - 1)))
    for m in (mi, sk):
        blob = codec.encode(m)
        assert len(blob) == lim.max_frame(m.TAG)
        assert codec.decode(blob, limits=lim) == m
    batch = ShuffledBatch(CTX, tuple(bytes([i]) * inner_size(16) for i in range(50)))
    blob = codec.encode(batch)
    slim = wire_shuffler.session_limits(CTX, 50)
    assert len(blob) == slim.max_frame(ShuffledBatch.TAG)
    assert codec.decode(blob, ShuffledBatch, slim) == batch
    with pytest.raises(CodecError, match="exceeds"):
        codec.decode(blob, ShuffledBatch, wire_shuffler.session_limits(CTX, 49))


def test_session_refuses_other_tags_and_other_sizes() -> None:
    from secagg.messages import MaskedInput, ServerAbort
    cfg = SECAGG_CFGS[0]
    with pytest.raises(CodecError, match="not accepted in this session"):
        codec.decode(codec.encode(ServerAbort("too_few_keys")), limits=wire_secagg.server_limits(cfg))
    wrong_dim = MaskedInput.from_vector(0, np.zeros(cfg.dim - 1, np.uint64), cfg.modulus)
    with pytest.raises(CodecError):
        codec.decode(codec.encode(wrong_dim), limits=wire_secagg.server_limits(cfg))
    # without a session the same message is well formed
    assert codec.decode(codec.encode(wrong_dim)) == wrong_dim


@pytest.mark.parametrize("raw", [
    # nested arrays where scalars and bytes belong, maps, floats, nil: refused by the walk
    msgpack.packb([1, 65000, [1], b"x"]), msgpack.packb([1, 65000, 1, [b"x"]]),
    msgpack.packb([1, 65000, None, b""]), msgpack.packb([1, 65000, 1.0, b""]),
    msgpack.packb([1, 65000, {"a": 1}, b""]), msgpack.packb([1, 65000, 1, b"x", 2]),
    b"\x94\x01\xcd\xfd\xe8\x01\xc4\x05ab",  # bin header longer than the frame
    b"\x94\x01\xcd\xfd\xe8\x01",             # fewer fields than the header says
])
def test_walk_refuses_wrong_structure(raw: bytes) -> None:
    with pytest.raises(CodecError):
        codec.decode(raw)


def _bounded(cost) -> None:
    assert cost.refused_by_codec, cost.error
    assert cost.peak_bytes <= MAX_MEMORY_RATIO * cost.frame_bytes + MAX_FIXED_BYTES, cost
    assert cost.cpu_seconds <= MAX_CPU_SECONDS, cost


def test_masked_input_decode_bomb_is_bounded() -> None:
    """8 MiB claiming dim 2^26 (a 512 MiB vector unpacked): refused with CodecError, at
    most 4x the frame in memory and 0.1 s of CPU; also a bomb under the frame limit."""
    cfg = make_config(8, 50_000, threshold=3, modulus=1 << 16)
    lim = wire_secagg.server_limits(cfg)
    bomb = masked_input_bomb()
    assert len(bomb) > 8 << 20
    _bounded(measure_decode(bomb, lim))
    small = masked_input_bomb(dim=(lim.max_frame(3) - 24) * 8)
    assert len(small) <= lim.max_frame(3)
    _bounded(measure_decode(small, lim))


def test_nested_array_decode_bomb_is_bounded() -> None:
    """36 MB of nested empty arrays in a ShuffledBatch: CodecError within the bounds,
    with the batch's session limits, a frame cut to the legal size, and no session."""
    lim = wire_shuffler.session_limits(CTX, 10_000)
    bomb = nested_batch_bomb(CTX)
    assert len(bomb) > 36_000_000
    _bounded(measure_decode(bomb, lim))
    _bounded(measure_decode(bomb, codec.DEFAULT_LIMITS))
    head = len(nested_batch_bomb(CTX, 0))
    fits = nested_batch_bomb(CTX, 10_000, (lim.max_frame(103) - head) // 10_000 - 3)
    assert len(fits) <= lim.max_frame(103)
    _bounded(measure_decode(fits, lim))


def test_shape_max_bytes_matches_msgpack() -> None:
    for hi in (0, 1, 15, 16, 31, 32, 127, 128, 255, 256, 65535, 65536, 1 << 32):
        assert codec.Int(0, min(hi, (1 << 64) - 1)).max_bytes() == len(msgpack.packb(hi))
        if hi < 1 << 17:
            assert codec.Bin(0, hi).max_bytes() == len(msgpack.packb(b"\x00" * hi, use_bin_type=True))
            assert codec.Str(0, hi).max_bytes() == len(msgpack.packb("a" * hi, use_bin_type=True))
            assert codec.Array(codec.Bool(), hi).max_bytes() == len(msgpack.packb([False] * hi))
