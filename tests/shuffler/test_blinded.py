"""Blinded crowd ids (shuffler/blinded.py): correctness, unlinkability, hostile input."""
from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings, strategies as st
from nacl import bindings as na

from protocol.core.randomness import insecure_deterministic_randomness
from shuffler.blinded import (
    CIPHERTEXT_BYTES, Blinder, BlindedCrowdError, DecryptorKey, encrypt_crowd,
    hash_to_group, two_shuffler_crowd_counts,
)

CTX = b"task=words;epoch=3"


@pytest.fixture()
def parties():
    rand = insecure_deterministic_randomness(11)
    key = DecryptorKey.generate(rand)
    return rand, key, Blinder(key.public, rand)


def _id(parties, item: bytes, ctx: bytes = CTX) -> bytes:
    rand, key, blinder = parties
    return key.crowd_id(blinder.blind(encrypt_crowd(item, ctx, key.public, rand), ctx))


def test_equal_items_share_an_id_and_different_items_do_not(parties) -> None:
    a1, a2, b = _id(parties, b"apple"), _id(parties, b"apple"), _id(parties, b"banana")
    assert a1 == a2 and a1 != b and len(a1) == 16


def test_the_id_is_the_blinded_hash_point(parties) -> None:
    rand, key, blinder = parties
    alpha = blinder._secret_for(CTX)
    p = hash_to_group(CTX, b"apple")
    import hashlib

    expected = hashlib.sha256(b"fedhh/blinded-crowd/v1/id\x00"
                              + na.crypto_scalarmult_ed25519_noclamp(alpha, p)).digest()[:16]
    assert _id(parties, b"apple") == expected
    # without the blinding secret, shuffler 2 cannot test a guess: the unblinded
    # point of the right item gives another id
    assert hashlib.sha256(b"fedhh/blinded-crowd/v1/id\x00" + p).digest()[:16] != expected


def test_contexts_and_blinders_give_unrelated_ids(parties) -> None:
    rand, key, blinder = parties
    assert _id(parties, b"apple") != _id(parties, b"apple", b"task=words;epoch=4")
    other = Blinder(key.public, rand)  # another blinding secret for the same context
    ct = encrypt_crowd(b"apple", CTX, key.public, rand)
    assert key.crowd_id(other.blind(ct, CTX)) != _id(parties, b"apple")
    # forgetting the context's secret means its ids can never be produced again
    before = _id(parties, b"apple")
    blinder.forget(CTX)
    assert _id(parties, b"apple") != before


def test_ciphertexts_are_fresh_and_blinding_rerandomizes(parties) -> None:
    rand, key, blinder = parties
    c1 = encrypt_crowd(b"apple", CTX, key.public, rand)
    c2 = encrypt_crowd(b"apple", CTX, key.public, rand)
    assert c1 != c2 and len(c1) == CIPHERTEXT_BYTES
    b1, b2 = blinder.blind(c1, CTX), blinder.blind(c1, CTX)
    # no half of the output repeats an input half or another output's half
    halves = {c1[:32], c1[32:], b1[:32], b1[32:], b2[:32], b2[32:]}
    assert len(halves) == 6
    assert key.crowd_id(b1) == key.crowd_id(b2)


def test_two_shuffler_counts_equal_plain_counts_above_the_threshold() -> None:
    rand = insecure_deterministic_randomness(4)
    items = [b"a"] * 30 + [b"b"] * 12 + [b"c"] * 5 + [bytes([i]) * 3 for i in range(20)]
    kept, stats = two_shuffler_crowd_counts(items, CTX, threshold=10, rand=rand)
    assert sorted(kept.values()) == [12, 30]
    assert stats == {"clients": len(items), "crowds": 23, "forwarded": 42, "dropped": 0}
    with pytest.raises(BlindedCrowdError):
        two_shuffler_crowd_counts(items, CTX, threshold=0)


def test_blind_and_shuffle_drops_malformed_and_permutes(parties) -> None:
    rand, key, blinder = parties
    cts = [encrypt_crowd(bytes([i % 3]), CTX, key.public, rand) for i in range(30)]
    out, dropped = blinder.blind_and_shuffle(cts + [b"\x00" * 64, b"short"], CTX)
    assert dropped == 2 and len(out) == 30
    sizes = collections.Counter(key.crowd_id(c) for c in out)
    assert sorted(sizes.values()) == [10, 10, 10]


# a point of order 8 (small order) and the identity, canonical encodings
SMALL_ORDER = bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
IDENTITY = b"\x01" + bytes(31)


@pytest.mark.parametrize("bad", [
    bytes(64), IDENTITY + IDENTITY, SMALL_ORDER * 2, b"\xff" * 64, b"x" * 63, b"x" * 65,
])
def test_invalid_points_are_refused_by_both_shufflers(parties, bad: bytes) -> None:
    _, key, blinder = parties
    with pytest.raises(BlindedCrowdError):
        blinder.blind(bad, CTX)
    with pytest.raises(BlindedCrowdError):
        key.crowd_id(bad)


def test_bad_keys_and_types(parties) -> None:
    rand, key, _ = parties
    for bad in (IDENTITY, SMALL_ORDER, b"\x00" * 32, b"k" * 31):
        with pytest.raises(BlindedCrowdError):
            Blinder(bad)
        with pytest.raises(BlindedCrowdError):
            encrypt_crowd(b"x", CTX, bad, rand)
    with pytest.raises(BlindedCrowdError):
        encrypt_crowd("text", CTX, key.public, rand)  # type: ignore[arg-type]
    with pytest.raises(BlindedCrowdError):
        DecryptorKey(bytes(32))
    with pytest.raises(BlindedCrowdError):
        key.crowd_id(None)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=80))
def test_arbitrary_bytes_raise_only_blinded_crowd_error(data: bytes) -> None:
    rand = insecure_deterministic_randomness(1)
    key = DecryptorKey.generate(rand)
    for fn in (lambda d: Blinder(key.public, rand).blind(d, CTX), key.crowd_id):
        try:
            fn(data)
        except BlindedCrowdError:
            pass


def test_bench_command(capsys) -> None:
    import json

    from protocol.cli import main

    assert main(["bench", "blinded", "--clients", "300", "--items", "20", "--threshold", "5",
                 "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["correct"] and out["dropped"] == 0 and out["forwarded_crowds"] >= 1
    assert set(out["cpu_seconds"]) == {"clients", "shuffler1", "shuffler2"}
    assert main(["bench", "blinded", "--clients", "0"]) == 2


# ---------------------------------------------------------------- the whole pipeline
def _pipeline(items: list[bytes], T: int, seed: int = 5, tamper=None):  # noqa: ANN001, ANN202
    from protocol.core import codec
    from protocol.core import wire_shuffler  # noqa: F401
    from shuffler import Analyzer, Encoder, HardThreshold, KeyPair, Shuffler
    from shuffler.blinded import CrowdShuffler
    from shuffler.messages import BlindedBatch

    rand = insecure_deterministic_randomness(seed)
    s1, a = KeyPair.generate(rand), KeyPair.generate(rand)
    s2 = DecryptorKey.generate(rand)
    enc = Encoder(s1.public_key, a.public_key, "words", 7, 8, rand, blinded=True)
    ctx = enc.context
    crowds = [encrypt_crowd(x, ctx.header, s2.public, rand) for x in items]
    envs = enc.encode_batch(list(items), crowds)
    if tamper:
        envs = tamper(envs, enc, s2)
    first = Shuffler(s1, rand)
    first.open_batch(ctx)
    first.submit_many(envs)
    out1 = first.close_blinded_batch(ctx, Blinder(s2.public, rand))
    wire = codec.encode(out1.batch)
    second = CrowdShuffler(s2, rand, threshold=HardThreshold(T))
    out2 = second.process(codec.decode(wire, BlindedBatch))
    res = Analyzer(a).open_batch(out2.batch)
    return out1, out2, res, second


def test_blinded_pipeline_releases_exactly_the_crowds_at_the_threshold() -> None:
    items = [b"apple"] * 12 + [b"pear"] * 7 + [b"fig"] * 3 + [b"kiwi"]
    out1, out2, res, _ = _pipeline(items, T=5)
    assert sorted(collections.Counter(res.multiset()).items()) == [(b"apple", 12), (b"pear", 7)]
    # shuffler 1 forwards everything and cannot count crowds
    assert out1.receipt.forwarded == len(items) and out1.receipt.crowds == 0
    assert out1.batch.context.blinded and len(out1.batch.crowds) == len(items)
    # shuffler 2 counts crowds under blinded ids
    r = out2.receipt
    assert (r.crowds, r.crowds_forwarded, r.forwarded) == (4, 2, 19)
    assert sorted(out2.crowd_sizes.values()) == [1, 3, 7, 12]
    assert r.dropped_by_threshold == {"below_threshold": 4}


def test_blinded_pipeline_refuses_bad_crowds_and_replays() -> None:
    from shuffler import Encoder

    def tamper(envs, enc, s2):  # noqa: ANN001, ANN202
        # a client that puts the identity point in its crowd field is refused at intake
        bad = Encoder(enc.shuffler_key, enc.analyzer_key, "words", 7, 8,
                      insecure_deterministic_randomness(9), blinded=True)
        return envs + bad.encode_batch([b"evil"], [b"\x01" + bytes(31) + b"\x01" + bytes(31)])

    out1, out2, res, second = _pipeline([b"a"] * 6, T=2, tamper=tamper)
    assert out1.receipt.rejected == {"invalid_crowd": 1}
    assert collections.Counter(res.multiset()) == {b"a": 6}
    with pytest.raises(Exception, match="already processed"):
        second.process(out1.batch)  # shuffler 2 never processes a context twice


def test_keyed_and_blinded_contexts_do_not_mix() -> None:
    from shuffler import Encoder, KeyPair, Shuffler, ShufflerError

    rand = insecure_deterministic_randomness(3)
    s1, a = KeyPair.generate(rand), KeyPair.generate(rand)
    keyed = Encoder(s1.public_key, a.public_key, "words", 7, 8, rand)
    blinded = Encoder(s1.public_key, a.public_key, "words", 7, 8, rand, blinded=True)
    assert keyed.context.header[:4] == b"FHS\x01" and blinded.context.header[:4] == b"FHS\x02"
    with pytest.raises(ShufflerError, match="64 bytes"):
        blinded.encode_batch([b"x"], [bytes(16)])
    shuf = Shuffler(s1, rand)
    shuf.open_batch(keyed.context)
    with pytest.raises(ShufflerError, match="no transition for 'close_blinded'"):
        shuf.close_blinded_batch(keyed.context, Blinder(DecryptorKey.generate(rand).public))
    shuf2 = Shuffler(s1, rand)
    shuf2.open_batch(blinded.context)
    with pytest.raises(ShufflerError, match="no transition for 'close' from a batch that is 'open_blinded'"):
        shuf2.close_batch(blinded.context)
    # a keyed envelope does not reach a blinded batch of the same task and epoch
    shuf2.submit_many(keyed.encode_batch([b"x"], [bytes(16)]))
    assert shuf2.pending(blinded.context) == 0


def test_crowd_shuffler_arguments_and_minimum_batch() -> None:
    from shuffler import BatchTooSmall, ShufflerError
    from shuffler.blinded import CrowdShuffler

    rand = insecure_deterministic_randomness(8)
    key = DecryptorKey.generate(rand)
    for bad in ({"min_batch_size": 0}, {"threshold": 5}):
        with pytest.raises(ShufflerError):
            CrowdShuffler(key, rand, **bad)
    with pytest.raises(ShufflerError, match="DecryptorKey"):
        CrowdShuffler(b"k" * 32)  # type: ignore[arg-type]
    with pytest.raises(ShufflerError, match="BlindedBatch"):
        CrowdShuffler(key).process(b"not a batch")  # type: ignore[arg-type]
    out1, _, _, _ = _pipeline([b"a"] * 4, T=1)
    # the minimum batch applies to what shuffler 2 accepted (4 reports here)
    with pytest.raises(BatchTooSmall) as e:
        CrowdShuffler(key, rand, min_batch_size=10).process(out1.batch)
    assert e.value.accepted == 4 and e.value.receipt.forwarded == 0
