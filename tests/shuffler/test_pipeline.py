"""End-to-end ESA pipeline: nothing valid lost, nothing duplicated, crowd ids opaque."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from protocol.core.randomness import insecure_deterministic_randomness
from shuffler import (
    Analyzer, CrowdKey, HardThreshold, Shuffler, ShufflerError, random_crowd_ids,
)

from shuffler_support import Setup


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bb", b"", b"ccc", b"dddd"]), min_size=1, max_size=40),
       st.integers(1, 6), st.integers(0, 2**32))
def test_round_trip_exactly_once(items: list[bytes], T: int, seed: int) -> None:
    su = Setup(seed=seed)
    s = Shuffler(su.s_keys, su.rand, threshold=HardThreshold(T))
    s.open_batch(su.context)
    assert s.submit_many(su.encoder.encode_batch(items, su.crowd.crowd_ids(items))) == len(items)
    out = s.close_batch(su.context)
    got = Analyzer(su.a_keys).open_batch(out.batch)
    want = Counter({k: c for k, c in Counter(items).items() if c >= T})
    assert got.multiset() == want
    assert out.receipt.forwarded == sum(want.values())
    assert out.receipt.received == len(items)
    assert out.receipt.dropped_by_threshold.get("below_threshold", 0) == len(items) - sum(
        want.values())


def test_crowd_ids() -> None:
    k = CrowdKey(b"m" * 32, "task", 1)
    assert k.crowd_id(b"x") == k.crowd_id(b"x") != k.crowd_id(b"y")
    assert len(k.crowd_id(b"x")) == 16
    assert CrowdKey(b"m" * 32, "task", 2).crowd_id(b"x") != k.crowd_id(b"x")
    assert CrowdKey(b"m" * 32, "task2", 1).crowd_id(b"x") != k.crowd_id(b"x")
    assert CrowdKey(b"n" * 32, "task", 1).crowd_id(b"x") != k.crowd_id(b"x")
    # the id is not the item, nor an unkeyed hash of it
    import hashlib

    assert hashlib.sha256(b"x").digest()[:16] != k.crowd_id(b"x")
    assert k.crowd_ids([b"x", b"y", b"x"]) == [k.crowd_id(b"x"), k.crowd_id(b"y"),
                                               k.crowd_id(b"x")]
    ids = random_crowd_ids(100, insecure_deterministic_randomness(1))
    assert len(set(ids)) == 100 and all(len(i) == 16 for i in ids)
    with pytest.raises(ShufflerError):
        CrowdKey(b"short", "t", 0)


def test_abstentions_look_like_small_crowds_to_the_shuffler() -> None:
    """The shuffler sees crowd sizes only; an abstention is a crowd of one, like a lone vote."""
    su = Setup(seed=11)
    items = [b"v"] * 5 + [b"lonely"]
    ids = su.crowd.crowd_ids(items) + random_crowd_ids(1, su.rand)
    s = Shuffler(su.s_keys, su.rand, threshold=HardThreshold(2))
    s.open_batch(su.context)
    s.submit_many(su.encoder.encode_batch(items + [b""], ids))
    out = s.close_batch(su.context)
    assert sorted(out.crowd_sizes.values()) == [1, 1, 5]
    res = Analyzer(su.a_keys).open_batch(out.batch)
    assert res.multiset() == Counter({b"v": 5})


def test_numpy_scale_smoke() -> None:
    su = Setup(seed=5, psize=4)
    rng = np.random.default_rng(0)
    votes = rng.integers(0, 10, size=2000)
    items = [int(v).to_bytes(4, "big") for v in votes]
    s = Shuffler(su.s_keys, su.rand, threshold=HardThreshold(150))
    s.open_batch(su.context)
    s.submit_many(su.encoder.encode_batch(items, su.crowd.crowd_ids(items)))
    hist = Analyzer(su.a_keys).open_batch(s.close_batch(su.context).batch).histogram(10)
    full = np.bincount(votes, minlength=10)
    assert hist.tolist() == np.where(full >= 150, full, 0).tolist()
