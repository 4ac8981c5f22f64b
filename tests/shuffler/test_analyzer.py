"""The analyzer: opening inner layers bound to their context, multiset and histogram."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shuffler import (
    Analyzer, EnvelopeRejected, HardThreshold, KeyPair, RejectReason, ShuffledBatch, Shuffler,
    ShufflerError, encode_index,
)
from shuffler.keys import seal
from shuffler.messages import LABEL_INNER

from shuffler_support import Setup


@pytest.fixture
def setup() -> Setup:
    return Setup()


def _inner(setup: Setup, padded: bytes, ad: bytes | None = None) -> bytes:
    epk, ct = seal(setup.a_keys.public_key, setup.rand.token_bytes(32), LABEL_INNER, padded,
                   setup.context.inner_ad if ad is None else ad)
    return epk + ct


def test_open_batch_returns_reports(setup: Setup) -> None:
    items = [encode_index(i) for i in (0, 1, 1, 3)] + [b""]
    s = Shuffler(setup.s_keys)
    s.open_batch(setup.context)
    s.submit_many(setup.encoder.encode_batch(items, setup.crowd.crowd_ids(items)))
    res = Analyzer(setup.a_keys).open_batch(s.close_batch(setup.context).batch)
    assert res.multiset() == Counter(items)
    assert res.histogram(4).tolist() == [1, 2, 0, 1]
    assert res.histogram(2).tolist() == [1, 2]  # out-of-domain index ignored
    assert not res.rejected


def test_bad_inner_layers_are_counted_not_fatal(setup: Setup) -> None:
    ctx = setup.context
    good = _inner(setup, b"\x00\x01z" + bytes(7))
    wrong_ctx = _inner(setup, b"\x00\x01z" + bytes(7), ad=setup.encoder_for("t2", 7).context.inner_ad)
    bad_pad = _inner(setup, b"\x00\x01z" + bytes(6) + b"\x01")
    bad_len = _inner(setup, b"\x00\x09z" + bytes(7))
    tampered = bytearray(good)
    tampered[-1] ^= 1
    batch = ShuffledBatch(ctx, (good, wrong_ctx, bad_pad, bad_len, bytes(tampered), good, good))
    res = Analyzer(setup.a_keys).open_batch(batch)
    assert res.reports == [b"z"]  # copies made by a dishonest shuffler count once
    assert res.rejected == {RejectReason.AUTHENTICATION_FAILED: 2, RejectReason.BAD_PADDING: 2,
                            RejectReason.DUPLICATE_INNER: 2}


def test_open_one_raises_with_reason(setup: Setup) -> None:
    a = Analyzer(setup.a_keys)
    good = _inner(setup, b"\x00\x02ok" + bytes(6))
    assert a.open_one(setup.context, good) == b"ok"
    for data, reason in [(good[:-1], RejectReason.WRONG_LENGTH),
                         (good[:-1] + bytes([good[-1] ^ 1]), RejectReason.AUTHENTICATION_FAILED)]:
        with pytest.raises(EnvelopeRejected) as e:
            a.open_one(setup.context, data)
        assert e.value.reason is reason
    other = Analyzer(KeyPair.generate(setup.rand))
    with pytest.raises(EnvelopeRejected) as e:
        other.open_one(setup.context, good)
    assert e.value.reason is RejectReason.WRONG_KEY
    with pytest.raises(ShufflerError):
        other.open_batch(ShuffledBatch(setup.context, (good,)))


def test_histogram_domain_checked(setup: Setup) -> None:
    res = Analyzer(setup.a_keys).open_batch(ShuffledBatch(setup.context, ()))
    assert res.histogram(3).tolist() == [0, 0, 0]
    with pytest.raises(ShufflerError):
        res.histogram(0)
    assert isinstance(res.histogram(1), np.ndarray)


def test_threshold_then_analyze_gives_full_counts_of_large_crowds(setup: Setup) -> None:
    rng = np.random.default_rng(3)
    votes = rng.integers(0, 6, size=300)
    items = [encode_index(int(v)) for v in votes]
    s = Shuffler(setup.s_keys, threshold=HardThreshold(50))
    s.open_batch(setup.context)
    s.submit_many(setup.encoder.encode_batch(items, setup.crowd.crowd_ids(items)))
    hist = Analyzer(setup.a_keys).open_batch(s.close_batch(setup.context).batch).histogram(6)
    full = np.bincount(votes, minlength=6)
    assert hist.tolist() == np.where(full >= 50, full, 0).tolist()


def test_open_batch_with_map_fn_matches_sequential(setup: Setup) -> None:
    good = [_inner(setup, b"\x00\x01" + bytes([i]) + bytes(7)) for i in range(5)]
    bad = _inner(setup, b"\x00\x01z" + bytes(6) + b"\x01")
    batch = ShuffledBatch(setup.context, tuple(good + [bad, good[0]]))
    a = Analyzer(setup.a_keys)
    seq = a.open_batch(batch)
    par = a.open_batch(batch, map_fn=lambda fn, xs: list(map(fn, xs)), chunk_size=2)
    assert seq.reports == par.reports and seq.rejected == par.rejected
    assert par.rejected == {RejectReason.BAD_PADDING: 1, RejectReason.DUPLICATE_INNER: 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=58, max_size=58), max_size=5, unique=True))
def test_fuzzed_inner_layers_are_counted(inners: list[bytes]) -> None:
    su = Setup(seed=4)
    res = Analyzer(su.a_keys).open_batch(ShuffledBatch(su.context, tuple(inners)))
    assert res.reports == [] and sum(res.rejected.values()) == len(inners)
