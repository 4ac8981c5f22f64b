"""Encoder, key wiring and the typed layers (byte layouts and codec round trips)."""
from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from protocol.core import codec
from protocol.core import wire_shuffler  # noqa: F401
from protocol.core.codec import CodecError
from protocol.core.randomness import insecure_deterministic_randomness
from shuffler import (
    AnalyzerEnvelope, Context, Encoder, EnvelopeRejected, KeyPair, PlainReport, RejectReason,
    ShuffledBatch, ShuffleReceipt, ShufflerEnvelope, ShufflerError,
)
from shuffler.keys import hkdf_sha256, open_sealed, seal
from shuffler.messages import LABEL_INNER, LABEL_OUTER, envelope_size, inner_size

from shuffler_support import Setup


@pytest.fixture
def setup() -> Setup:
    return Setup()


def test_x25519_rfc7748_section_6_1() -> None:
    # RFC 7748, section 6.1: Alice's and Bob's key pairs and their shared secret
    a = KeyPair(bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
    b = KeyPair(bytes.fromhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
    assert a.public.hex() == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    assert b.public.hex() == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
    # seal with Alice's secret as the ephemeral key; Bob opens: the KDF input is the
    # RFC's shared secret, so opening works exactly when the X25519 wiring is right
    epk, ct = seal(b.public_key, a.secret, LABEL_INNER, b"hello", b"ad")
    assert epk == a.public
    assert open_sealed(b, LABEL_INNER, epk, ct, b"ad") == b"hello"
    shared = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    k = hkdf_sha256(LABEL_INNER, shared, LABEL_INNER + epk + b.public)
    assert ChaCha20Poly1305(k).decrypt(bytes(12), ct, b"ad") == b"hello"


def test_hkdf_rfc5869_case_1() -> None:
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    okm = bytes.fromhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                        "34007208d5b887185865")
    assert hkdf_sha256(salt, ikm, info) == okm[:32]
    assert len(hashlib.sha256().digest()) == 32


def test_every_envelope_of_a_task_has_one_length(setup: Setup) -> None:
    reports = [b"", b"a", b"abcdefgh", b"\x00" * 8]
    envs = setup.encoder.encode_batch(reports, setup.crowd.crowd_ids(reports))
    assert {len(e) for e in envs} == {envelope_size(setup.context)}
    assert envelope_size(setup.context) == len(setup.context.header) + 8 + 114
    assert inner_size(8) == 58


def test_fresh_ephemeral_keys(setup: Setup) -> None:
    cid = setup.crowd.crowd_id(b"x")
    a, b = setup.encoder.encode_batch([b"x", b"x"], [cid, cid])
    assert a != b
    ea, eb = ShufflerEnvelope.from_bytes(a), ShufflerEnvelope.from_bytes(b)
    assert ea.ephemeral_public != eb.ephemeral_public


def test_deterministic_under_the_named_switch() -> None:
    one = Setup(seed=3).encoder.encode(b"r", bytes(16))
    two = Setup(seed=3).encoder.encode(b"r", bytes(16))
    three = Setup(seed=4).encoder.encode(b"r", bytes(16))
    assert one == two != three


def test_bad_encoder_input(setup: Setup) -> None:
    with pytest.raises(ShufflerError, match="at most 8"):
        setup.encoder.encode(b"x" * 9, bytes(16))
    with pytest.raises(ShufflerError, match="crowd id"):
        setup.encoder.encode(b"x", bytes(15))
    with pytest.raises(ShufflerError, match="one crowd id per report"):
        setup.encoder.encode_batch([b"x"], [])
    with pytest.raises(ShufflerError):
        Encoder(setup.s_keys, setup.a_keys.public_key, "t", 0, 8)  # type: ignore[arg-type]


def test_layers_open_with_context_as_associated_data(setup: Setup) -> None:
    env = ShufflerEnvelope.from_bytes(setup.encoder.encode(b"hi", bytes(range(16))))
    ctx = setup.context
    plain = open_sealed(setup.s_keys, LABEL_OUTER, env.ephemeral_public, env.ciphertext,
                        ctx.outer_ad)
    assert plain[:16] == bytes(range(16))
    inner = AnalyzerEnvelope.from_bytes(plain[16:])
    padded = open_sealed(setup.a_keys, LABEL_INNER, inner.ephemeral_public, inner.ciphertext,
                         ctx.inner_ad)
    assert PlainReport.from_bytes(padded, 8) == PlainReport(8, b"hi")
    other = setup.encoder_for("task", ctx.epoch + 1).context
    for keys, label, epk, ct, ad in [
        (setup.s_keys, LABEL_OUTER, env.ephemeral_public, env.ciphertext, other.outer_ad),
        (setup.s_keys, LABEL_INNER, env.ephemeral_public, env.ciphertext, ctx.outer_ad),
        (setup.a_keys, LABEL_OUTER, env.ephemeral_public, env.ciphertext, ctx.outer_ad),
        (setup.a_keys, LABEL_INNER, inner.ephemeral_public, inner.ciphertext, other.inner_ad),
        (setup.a_keys, LABEL_INNER, inner.ephemeral_public, inner.ciphertext, ctx.outer_ad),
    ]:
        with pytest.raises(EnvelopeRejected) as e:
            open_sealed(keys, label, epk, ct, ad)
        assert e.value.reason is RejectReason.AUTHENTICATION_FAILED


def test_low_order_ephemeral_key_is_an_authentication_failure(setup: Setup) -> None:
    with pytest.raises(EnvelopeRejected) as e:
        open_sealed(setup.s_keys, LABEL_OUTER, bytes(32), bytes(40), b"")
    assert e.value.reason is RejectReason.AUTHENTICATION_FAILED


@pytest.mark.parametrize("data", [
    b"\x00\x00", b"\x01\x00x", b"\x00\x02x", b"\x00\x01x\x01", b"\x00\x09" + bytes(8), bytes(9),
])
def test_padding_checked(data: bytes) -> None:
    if len(data) != 10:
        with pytest.raises(EnvelopeRejected) as e:
            PlainReport.from_bytes(data, 8)
        assert e.value.reason is RejectReason.BAD_PADDING
    padded = PlainReport(8, b"abc").to_bytes()
    assert padded == b"\x00\x03abc" + bytes(5)
    bad = padded[:-1] + b"\x01"
    with pytest.raises(EnvelopeRejected):
        PlainReport.from_bytes(bad, 8)


def test_header_layout(setup: Setup) -> None:
    ctx = setup.context
    h = ctx.header
    assert h[:4] == b"FHS\x01" and h[4:6] == (4).to_bytes(2, "big") and h[6:10] == b"task"
    assert int.from_bytes(h[10:18], "big") == 7 and int.from_bytes(h[18:22], "big") == 8
    assert h[22:30] == setup.s_keys.key_id and h[30:38] == setup.a_keys.key_id
    assert Context.parse_header(h + b"rest") == (ctx, len(h))


def _messages(setup: Setup) -> list[object]:
    env_b = setup.encoder.encode(b"abc", setup.crowd.crowd_id(b"abc"))
    env = ShufflerEnvelope.from_bytes(env_b)
    inner = AnalyzerEnvelope(bytes(32), bytes(58 - 32))
    return [
        env, inner, PlainReport(8, b"xyz"),
        ShuffledBatch(setup.context, (inner.to_bytes(), inner.to_bytes())),
        ShuffledBatch(setup.context, ()),
        ShuffleReceipt(setup.context, 10, {"duplicate_inner": 1}, {"below_threshold": 4}, 5, 3,
                       1, "hard(T=5)"),
    ]


def test_codec_round_trips(setup: Setup) -> None:
    for msg in _messages(setup):
        assert codec.decode(codec.encode(msg), type(msg)) == msg
    env = _messages(setup)[0]
    assert ShufflerEnvelope.from_bytes(env.to_bytes()) == env


@given(task=st.text(min_size=1, max_size=40), epoch=st.integers(0, 2**64 - 1),
       psize=st.integers(0, 300), report=st.binary(max_size=300))
@settings(max_examples=60, deadline=None)
def test_codec_round_trip_property(task: str, epoch: int, psize: int, report: bytes) -> None:
    report = report[:psize]
    ctx = Context(task, epoch, psize, b"s" * 8, b"a" * 8)
    for msg in (PlainReport(psize, report),
                ShuffledBatch(ctx, (bytes(inner_size(psize)),)),
                ShufflerEnvelope(ctx, bytes(32), bytes(envelope_size(ctx) - len(ctx.header) - 32))):
        assert codec.decode(codec.encode(msg)) == msg
    assert PlainReport.from_bytes(PlainReport(psize, report).to_bytes(), psize).report == report


def test_constructors_validate(setup: Setup) -> None:
    ctx = setup.context
    with pytest.raises(ShufflerError):
        ShufflerEnvelope(ctx, bytes(32), bytes(10))
    with pytest.raises(ShufflerError):
        ShuffledBatch(ctx, (bytes(10),))
    with pytest.raises(ShufflerError):
        ShuffleReceipt(ctx, 10, {}, {}, 5, 1, 1, "hard(T=1)")  # does not add up
    with pytest.raises(ShufflerError):
        ShuffleReceipt(ctx, 1, {"nonsense": 1}, {}, 0, 0, 0, "x")
    with pytest.raises(ShufflerError):
        Context("", 0, 8, b"s" * 8, b"a" * 8)
    with pytest.raises(ShufflerError):
        Context("t", -1, 8, b"s" * 8, b"a" * 8)
    with pytest.raises(ShufflerError):
        PlainReport(2, b"abc")


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_fuzzed_codec_bytes_only_raise_codec_error(raw: bytes) -> None:
    try:
        codec.decode(raw)
    except CodecError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzzed_wire_fields_only_raise_codec_error(data: st.DataObject) -> None:
    import msgpack

    tag = data.draw(st.sampled_from([100, 101, 102, 103, 104]))
    leaf = st.one_of(st.integers(-2, 2**64 - 1), st.binary(max_size=80), st.text(max_size=8),
                     st.none(), st.booleans(), st.dictionaries(st.text(max_size=20),
                                                               st.integers(-1, 5), max_size=2))
    fields = data.draw(st.lists(st.one_of(leaf, st.lists(leaf, max_size=3)), max_size=13))
    raw = msgpack.packb([1, tag, *fields], use_bin_type=True)
    try:
        codec.decode(raw)
    except CodecError:
        pass


@settings(max_examples=300)
@given(st.binary(max_size=250))
def test_fuzzed_envelope_bytes_only_raise_shuffler_error(raw: bytes) -> None:
    try:
        ShufflerEnvelope.from_bytes(raw)
    except EnvelopeRejected as exc:
        assert exc.reason in (RejectReason.MALFORMED, RejectReason.WRONG_LENGTH)


def test_key_validation() -> None:
    with pytest.raises(ShufflerError):
        KeyPair(b"short")
    k = KeyPair.generate(insecure_deterministic_randomness(1))
    assert len(k.key_id) == 8
    assert k.secret.hex() not in repr(k) and str(k.secret) not in repr(k)
