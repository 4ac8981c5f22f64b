"""The seeded streams of simulations: one ChaCha20 context open at a time, the same
bytes as a context kept open per stream."""
from __future__ import annotations

import gc
import pickle

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core import randomness
from protocol.core.randomness import insecure_deterministic_randomness, seeded_randomness


def _keystream(stream: object, length: int) -> bytes:
    """The stream's bytes from its start, from one context kept open."""
    key = stream.__getstate__()[0]  # type: ignore[attr-defined]
    return Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor().update(
        bytes(length))


def test_known_answer() -> None:
    """The first bytes of a labelled stream (fixed: seeded simulations replay them)."""
    s = insecure_deterministic_randomness(7, "x")
    assert s.token_bytes(5).hex() == "4bf63f0701"
    assert s.token_bytes(70).hex()[-16:] == "cc8e0442986e0361"
    assert s.child("c").token_bytes(8).hex() == "2bc208314e568355"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 200)), max_size=40))
def test_interleaved_draws_are_each_streams_own_keystream(draws: list[tuple[int, int]]) -> None:
    """Streams drawn in any interleaving (each draw reopening the context of its stream
    where it stopped, at any byte of a 64-byte block) give exactly the bytes of one
    context per stream read in order."""
    streams = [insecure_deterministic_randomness(i, "interleave") for i in range(4)]
    got = [b""] * 4
    for which, n in draws:
        got[which] += streams[which].token_bytes(n)
    for s, g in zip(streams, got):
        assert g == _keystream(s, len(g))


def test_a_moved_stream_resumes_where_it_stopped() -> None:
    """Pickled mid-block (a client moved to another worker), the copy continues the
    stream; a state that is not a key and an offset is refused."""
    a = seeded_randomness(bytes(range(32)), "client-3")
    head = a.token_bytes(37)
    b = pickle.loads(pickle.dumps(a))
    assert head + b.token_bytes(100) == _keystream(a, 137)
    with pytest.raises(ValueError):
        b.__setstate__((b"short", 0))
    with pytest.raises(ValueError):
        b.__setstate__((bytes(32), -1))


def test_one_context_is_open_and_goes_with_its_stream() -> None:
    """Only the last stream that drew holds an open context; when it is collected, the
    context (which holds its key) is dropped too."""
    a = insecure_deterministic_randomness(1, "a")
    b = insecure_deterministic_randomness(1, "b")
    a.token_bytes(3)
    b.token_bytes(3)
    assert randomness._OPEN[0]() is b
    assert not hasattr(a, "__dict__")  # no per-stream context or attribute
    del b
    gc.collect()
    assert randomness._OPEN == (None, None)
