"""Codec round trips (property tests) for every secure-aggregation message, and fuzzing:
malformed bytes and mutated valid encodings raise only ``CodecError``."""
from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from protocol.core import codec, wire_secagg  # noqa: F401
from protocol.core.codec import CodecError
from secagg import prg
from secagg.messages import (
    ALL_MESSAGES, AdvertiseKeys, ConsistencyRequest, ConsistencySignature, KeyList,
    MaskedInput, RoutedShares, ServerAbort, ShareKeys, UnmaskRequest, UnmaskShares,
)
from secagg.shamir import SHARE_WIRE_BYTES
from secagg.state import AbortReason, set_to_bitmap

pos = st.integers(0, 5000)
key = st.binary(min_size=32, max_size=32)
sig = st.binary(min_size=64, max_size=64)
share = st.binary(min_size=SHARE_WIRE_BYTES, max_size=SHARE_WIRE_BYTES)
ct = st.binary(min_size=1, max_size=120)
_N = b"n" * 32
positions = st.lists(pos, max_size=12, unique=True).map(sorted).map(tuple)


@st.composite
def advertise(draw):
    return AdvertiseKeys(draw(pos), draw(key), draw(key), draw(key),
                         draw(st.sampled_from([b""]) | sig))


@st.composite
def share_keys(draw):
    sender = draw(pos)
    rec = tuple(r for r in draw(positions) if r != sender)
    return ShareKeys(sender, rec, tuple(draw(ct) for _ in rec))


@st.composite
def masked(draw):
    modulus = draw(st.sampled_from([2, 3, 255, 256, 1000003, 1 << 32, (1 << 63) + 5,
                                    1 << 64]))
    dim = draw(st.integers(1, 40))
    seed = draw(st.binary(min_size=32, max_size=32))
    return MaskedInput.from_vector(draw(pos), prg.expand_mask(seed, dim, modulus), modulus)


@st.composite
def unmask_shares(draw):
    owners = draw(positions)
    split = draw(st.integers(0, len(owners)))
    b, s = owners[:split], owners[split:]
    return UnmaskShares(draw(pos), b, tuple(draw(share) for _ in b), s,
                        tuple(draw(share) for _ in s))


@st.composite
def key_list(draw):
    ents = {e.sender: e for e in draw(st.lists(advertise(), max_size=6))}
    path = tuple(draw(st.lists(key, min_size=1, max_size=16)))
    return KeyList(tuple(ents[k] for k in sorted(ents)), draw(key), path)


@st.composite
def routed(draw):
    s = draw(positions)
    return RoutedShares(s, tuple(draw(ct) for _ in s))


@st.composite
def bitmap_msgs(draw):
    n = draw(st.integers(1, 300))
    members = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=20))
    alive = set_to_bitmap(members, n)
    dropped = set_to_bitmap([m for m in range(n) if m not in members][:5], n)
    signers = tuple(sorted(set(members)))[:4]
    sid = draw(key)
    return draw(st.sampled_from([
        ConsistencyRequest(sid, n, alive),
        UnmaskRequest(sid, n, alive, dropped),
        UnmaskRequest(sid, n, alive, dropped, signers,
                      tuple(bytes([i % 256]) * 64 for i in signers)),
    ]))


any_message = st.one_of(
    advertise(), share_keys(), masked(), unmask_shares(), key_list(), routed(),
    bitmap_msgs(), st.builds(ConsistencySignature, pos, sig),
    st.sampled_from([ServerAbort(r.value) for r in AbortReason]))


@settings(max_examples=150, deadline=None)
@given(any_message)
def test_round_trip(msg) -> None:
    data = codec.encode(msg)
    back = codec.decode(data)
    assert type(back) is type(msg) and back == msg
    if isinstance(msg, MaskedInput):
        assert np.array_equal(back.vector(), msg.vector())


def test_every_message_type_is_covered_and_registered() -> None:
    reg = codec.registered()
    for cls in ALL_MESSAGES:
        assert reg[cls.TAG] is cls and 1 <= cls.TAG <= 99


@settings(max_examples=150, deadline=None)
@given(any_message, st.data())
def test_mutated_encodings_raise_only_codec_error(msg, data) -> None:
    raw = bytearray(codec.encode(msg))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        codec.decode(bytes(raw[:cut]) if data.draw(st.booleans()) else bytes(raw))
    except CodecError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([c.TAG for c in ALL_MESSAGES]),
       st.lists(st.one_of(st.integers(-2, 2**64 - 1), st.binary(max_size=40),
                          st.text(max_size=5), st.none(), st.booleans(),
                          st.lists(st.integers(0, 10), max_size=3)), max_size=6))
def test_fuzzed_fields_raise_only_codec_error(tag, fields) -> None:
    try:
        codec.decode(msgpack.packb([codec.VERSION, tag, *fields], use_bin_type=True))
    except CodecError:
        pass


@pytest.mark.parametrize("build", [
    lambda: ShareKeys(1, (3, 2), (b"a", b"b")),                 # unsorted
    lambda: ShareKeys(1, (2, 2), (b"a", b"b")),                 # duplicate
    lambda: ShareKeys(2, (2, 3), (b"a", b"b")),                 # to itself
    lambda: ShareKeys(1, (2,), (b"a", b"b")),                   # arity
    lambda: ShareKeys(1, (2,), (b"x" * 300,)),                  # oversized ciphertext
    lambda: AdvertiseKeys(1, b"x" * 31, b"y" * 32, _N),
    lambda: AdvertiseKeys(-1, b"x" * 32, b"y" * 32, _N),
    lambda: AdvertiseKeys(True, b"x" * 32, b"y" * 32, _N),
    lambda: AdvertiseKeys(1, b"x" * 32, b"y" * 32, _N, b"s" * 10),
    lambda: AdvertiseKeys(1, b"x" * 32, b"y" * 32, b"n" * 31),   # short nonce
    lambda: AdvertiseKeys(1, b"x" * 32, b"y" * 32, "n" * 32),    # nonce not bytes
    lambda: UnmaskShares(1, (2,), (b"s" * SHARE_WIRE_BYTES,), (2,), (b"s" * SHARE_WIRE_BYTES,)),
    lambda: UnmaskShares(1, (2,), (b"s" * 10,), (), ()),
    lambda: ConsistencyRequest(_N, 7, b"\xff"),                 # padding bit
    lambda: ConsistencyRequest(_N, 9, b"\xff"),                 # short bitmap
    lambda: ConsistencyRequest(b"s" * 31, 8, b"\x01"),          # short session id
    lambda: UnmaskRequest(_N, 8, b"\x01", b"\x00", (9,), (b"s" * 64,)),
    lambda: UnmaskRequest(b"s" * 33, 8, b"\x01", b"\x00"),      # long session id
    lambda: ServerAbort("no such reason"),
    lambda: MaskedInput(1, 4, 1 << 8, b"\x00" * 3),             # wrong packed length
    lambda: MaskedInput(1, 1, 3, b"\x03"),                      # entry >= modulus
    lambda: MaskedInput(1, 1, 1, b"\x00"),                      # modulus < 2
    lambda: KeyList((AdvertiseKeys(2, b"x" * 32, b"y" * 32, _N),
                     AdvertiseKeys(1, b"x" * 32, b"y" * 32, _N)), _N, (_N,)),  # unsorted
    lambda: KeyList((), b"t" * 31, (_N,)),                      # short root
    lambda: KeyList((), _N, ()),                                # empty path
    lambda: KeyList((), _N, (_N,) * 17),                        # path too long
    lambda: KeyList((), _N, (b"p" * 31,)),                      # short path node
])
def test_constructors_validate(build) -> None:
    with pytest.raises((ValueError, TypeError)):
        build()


def test_masked_input_carries_two_to_the_64() -> None:
    v = np.array([0, 1, (1 << 64) - 1], dtype=np.uint64)
    m = MaskedInput.from_vector(3, v, 1 << 64)
    assert m.to_wire()[2] == (1 << 64) - 1
    back = codec.decode(codec.encode(m))
    assert back.modulus == 1 << 64 and np.array_equal(back.vector(), v)
    assert len(m.packed) == 24
    assert len(MaskedInput.from_vector(0, np.zeros(10, np.uint64), 1 << 10).packed) == 13


@pytest.mark.parametrize("modulus", [2, 1 << 10, 1000, 1 << 32, 1 << 64])
def test_masked_input_from_a_vector_is_the_checked_message(modulus: int) -> None:
    """Built from a vector (packed once, not unpacked again) it equals the message the
    constructor checks in full, keeps a read-only copy, and refuses what it refuses."""
    rng = np.random.default_rng(modulus % 97)
    v = rng.integers(0, modulus, 37, dtype=np.uint64, endpoint=False) if modulus < 1 << 64 \
        else rng.integers(0, 1 << 63, 37, dtype=np.uint64) * np.uint64(2)
    m = MaskedInput.from_vector(5, v, modulus)
    checked = MaskedInput(5, 37, modulus, m.packed)
    assert m == checked and np.array_equal(m.vector(), checked.vector())
    assert np.array_equal(m.vector(), v) and not m.vector().flags.writeable
    v[0] ^= np.uint64(1)  # the caller's array is not the message's
    assert np.array_equal(m.vector(), checked.vector())
    if modulus < 1 << 64:
        with pytest.raises(ValueError):
            MaskedInput.from_vector(5, np.full(3, modulus, np.uint64), modulus)
    for bad in ((-1, v, modulus), (True, v, modulus), (5, v[:0], modulus),
                (5, v, 1), (5, v, (1 << 64) + 1), (5, v[:36].reshape(6, 6), modulus)):
        with pytest.raises((ValueError, TypeError)):
            MaskedInput.from_vector(*bad)


@st.composite
def long_key_list(draw):
    """A key list of 16 to 90 entries (a neighbourhood), laid out alike or not: senders
    in one or in several integer forms, signatures present, absent or mixed."""
    count = draw(st.integers(16, 90))
    first = draw(st.sampled_from([0, 100, 200, 300, 65_534 - 270]))
    step = draw(st.integers(1, 3))
    signed = draw(st.sampled_from(["all", "none", "mixed"]))
    ents = []
    for i in range(count):
        with_sig = signed == "all" or (signed == "mixed" and i % 5 == 0)
        ents.append(AdvertiseKeys(first + step * i, bytes([i % 256]) * 32,
                                  bytes([(i + 1) % 256]) * 32, draw(key),
                                  bytes([i % 256]) * 64 if with_sig else b""))
    return KeyList(tuple(ents), draw(key), tuple(draw(st.lists(key, min_size=1,
                                                                max_size=16))))


def _decoded(raw: bytes, vectorise: int) -> object:
    """``codec.decode(raw)`` (or ``CodecError``) with arrays of at least ``vectorise``
    records checked with numpy."""
    saved = codec._VECTORISE_RECORDS
    codec._VECTORISE_RECORDS = vectorise
    try:
        return codec.decode(raw)
    except CodecError:
        return CodecError
    finally:
        codec._VECTORISE_RECORDS = saved


@settings(max_examples=200, deadline=None)
@given(long_key_list(), st.data())
def test_key_lists_checked_with_numpy_as_entry_by_entry(msg, data) -> None:
    """A long key list is checked with one numpy comparison when its entries are laid
    out alike, else entry by entry: over valid lists and lists with bytes changed (a
    header, a length, a sender out of bounds) or cut short, both checks accept and
    refuse the same frames, and decode them to the same message."""
    raw = bytearray(codec.encode(msg))
    if data.draw(st.booleans()):
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    assert _decoded(bytes(raw), 16) == _decoded(bytes(raw), 1 << 30)


def test_key_list_entries_are_checked_a_run_of_alike_entries_at_a_time(monkeypatch) -> None:
    """Entries laid out alike are checked in one numpy pass. In a key list whose senders
    change integer form (below 128, below 256, the rest), the entries with one- and
    two-byte senders (a short first run, sorted) are walked and the rest take one pass;
    entries whose signatures come and go are left to the entry-by-entry walk after a
    few tries.
    A later entry whose sender is out of bounds or whose key length byte is changed is
    refused either way."""
    outcomes: list[tuple[int, int]] = []
    real = codec._alike_records

    def watched(*args):  # type: ignore[no-untyped-def]
        outcomes.append(real(*args))
        return outcomes[-1]

    monkeypatch.setattr(codec, "_alike_records", watched)

    def key_list_of(senders: list[int], sigs: list[bytes]) -> KeyList:
        return KeyList(tuple(AdvertiseKeys(s, bytes([i]) * 32, bytes([i + 1]) * 32, _N, g)
                             for i, (s, g) in enumerate(zip(senders, sigs))), _N, (_N,))

    # one entry: 1 header byte, a sender, four byte strings with their 2-byte headers
    alike = key_list_of(list(range(300, 340)), [b"\x01" * 64] * 40)
    assert codec.decode(codec.encode(alike)) == alike
    assert outcomes == [(40, 1 + 3 + 3 * 34 + 66)]
    outcomes.clear()
    senders = list(range(100, 120)) + list(range(128, 148)) + list(range(300, 320))
    forms = key_list_of(senders, [b"\x01" * 64] * 60)    # fixint, 0xCC, 0xCD
    assert codec.decode(codec.encode(forms)) == forms
    assert [done for done, _ in outcomes] == [20]
    outcomes.clear()
    mixed = key_list_of(list(range(300, 340)), [b"\x01" * 64, b""] * 20)
    assert codec.decode(codec.encode(mixed)) == mixed
    assert [done for done, _ in outcomes] == [1] * codec._ALIKE_TRIES
    raw = bytearray(codec.encode(alike))
    at = raw.index(bytes([0x95, 0xCD]) + (339).to_bytes(2, "big"))   # the last entry
    bad_sender = bytearray(raw)
    bad_sender[at + 2:at + 4] = (0xFFFF).to_bytes(2, "big")   # over the roster's bound
    with pytest.raises(CodecError):
        codec.decode(bytes(bad_sender))
    bad_length = bytearray(raw)
    bad_length[at + 5] = 31                                    # c_pk's length byte
    with pytest.raises(CodecError):
        codec.decode(bytes(bad_length))
