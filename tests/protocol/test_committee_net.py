"""The committee's comparison with each member on its own, over real byte streams:
the same release as the in-process committee, and every deviation detected."""
from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from protocol.core.committee import CommitteeAborted, ring_bits, run_committee
from protocol.core.net.committee_net import (
    CommitteeLink, CommitteeMessage, committee_limits, run_member,
)
from protocol.core.randomness import insecure_deterministic_randomness


def _shares(counts, k, seed=1):
    rng = np.random.default_rng(seed)
    mask = np.uint64((1 << k) - 1)
    x = np.asarray(counts, dtype=np.uint64)
    v1 = rng.integers(0, 1 << k, x.size, dtype=np.uint64)
    v2 = rng.integers(0, 1 << k, x.size, dtype=np.uint64)
    return [(x - v1 - v2) & mask, v1, v2]


async def _links(m, wait=5.0, hooks=None):
    """links[i] = (prev, next) for member i, over socket pairs."""
    hooks = hooks or {}
    limits = committee_limits(m)
    ends: dict[tuple[int, int], tuple] = {}
    for a, b in ((0, 1), (1, 2), (2, 0)):
        sa, sb = socket.socketpair()
        ends[(a, b)] = await asyncio.open_connection(sock=sa)
        ends[(b, a)] = await asyncio.open_connection(sock=sb)

    def link(me, peer):
        r, w = ends[(me, peer)]
        return CommitteeLink(me, peer, r, w, limits, wait, hooks.get((me, peer)))

    return [(link(i, (i - 1) % 3), link(i, (i + 1) % 3)) for i in range(3)], ends


def _run(counts, theta, reveal, hooks=None, absent=(), wait=5.0):
    k = ring_bits(max(counts), theta)
    shares = _shares(counts, k)

    async def main():
        links, ends = await _links(len(counts), wait, hooks)
        tasks = [run_member(i, shares[i], k, theta, reveal_counts=reveal, prev=links[i][0],
                            next=links[i][1],
                            rand=insecure_deterministic_randomness(i, "committee-net-test"))
                 for i in range(3) if i not in absent]
        out = await asyncio.gather(*tasks, return_exceptions=True)
        for _, w in ends.values():
            w.close()
        return out

    return asyncio.run(main()), shares, k


@pytest.mark.parametrize("reveal", [False, True])
def test_three_members_release_what_the_in_process_committee_releases(reveal):
    counts = [10, 2, 1, 0, 5, 3, 300, 2]
    outs, shares, k = _run(counts, 3, reveal)
    ref = run_committee(shares, k, 3, reveal_counts=reveal)
    for o in outs:
        np.testing.assert_array_equal(o.passed, ref.passed)
        np.testing.assert_array_equal(o.passed, np.asarray(counts) >= 3)
        if reveal:
            np.testing.assert_array_equal(o.counts, [10, 5, 3, 300])
        else:
            assert o.counts is None
    # each member saw nothing but masked words and the opened output
    assert all(o.bytes_sent > 0 and o.view["opened_bits"] is not None for o in outs)


def test_without_a_threshold_every_count_is_opened():
    outs, _, _ = _run([4, 0, 9], None, True)
    for o in outs:
        assert o.passed.all() and o.counts.tolist() == [4, 0, 9]


def test_a_member_that_opens_a_wrong_value_is_caught():
    def flip(step, payload):
        if step == "open-bits":
            words = bytearray(payload)
            words[0] ^= 1
            return bytes(words)
        return payload

    outs, _, _ = _run([10, 2, 1], 3, False, hooks={(1, 2): flip}, wait=1.0)
    reasons = {o.reason for o in outs if isinstance(o, CommitteeAborted)}
    assert "open_mismatch" in reasons


def test_malformed_and_out_of_order_messages_abort_with_a_reason():
    def short(step, payload):
        return payload[:-3] if step == "input" else payload

    outs, _, _ = _run([10, 2, 1], 3, False, hooks={(0, 2): short}, wait=1.0)
    assert any(isinstance(o, CommitteeAborted) and o.reason == "malformed_message"
               for o in outs)

    async def wrong_step():
        links, ends = await _links(3)
        await links[1][1].send("input", b"\0" * 24)   # member 1 -> 2, where a key is due
        try:
            await links[2][0].receive("key")
        finally:
            for _, w in ends.values():
                w.close()

    with pytest.raises(CommitteeAborted) as exc:
        asyncio.run(wrong_step())
    assert exc.value.reason == "malformed_message" and "expected key" in str(exc.value)


def test_a_silent_member_ends_the_others_with_missing_message():
    outs, _, _ = _run([10, 2, 1], 3, False, absent=(2,), wait=0.5)
    assert all(isinstance(o, CommitteeAborted) and o.reason == "missing_message"
               for o in outs)


class _BrokenWriter:
    """A writer whose peer has gone: every drain fails as a reset link does."""

    def write(self, data):
        pass

    async def drain(self):
        raise ConnectionResetError("peer closed")


def _feeding(*messages, eof=True, raw=b""):
    """A reader (made inside the running loop) holding ``messages``, then ``raw``."""
    from protocol.core.net.frames import frame

    def make():
        reader = asyncio.StreamReader()
        for msg in messages:
            reader.feed_data(frame(msg))
        if raw:
            reader.feed_data(raw)
        if eof:
            reader.feed_eof()
        return reader

    return make


def test_a_failed_send_names_the_abort_the_peer_sent_before_leaving():
    """A peer that refused relays its reason and closes; a send to it then fails. The
    member ends in the peer's reason (the deviation), not in the broken link, even
    behind the peer's earlier unread messages."""
    limits = committee_limits(4)

    def reason_of(make_reader):
        async def send():
            link = CommitteeLink(0, 1, make_reader(), _BrokenWriter(), limits, 1.0)
            await link.send("key", b"\0" * 32)

        with pytest.raises(CommitteeAborted) as exc:
            asyncio.run(send())
        return exc.value.reason

    key = CommitteeMessage("key", b"\1" * 32)
    abort = CommitteeMessage("abort", b"helper_audit_failed")
    assert reason_of(_feeding(abort)) == "helper_audit_failed"
    assert reason_of(_feeding(key, abort)) == "helper_audit_failed"
    # no abort waiting (the peer only vanished, went silent or sent garbage): the
    # broken link
    assert reason_of(_feeding()) == "missing_message"
    assert reason_of(_feeding(key)) == "missing_message"
    assert reason_of(_feeding(eof=False)) == "missing_message"
    assert reason_of(_feeding(raw=b"\xff" * 40)) == "missing_message"
    # a reason that is not a name is relayed as peer_aborted
    assert reason_of(_feeding(CommitteeMessage("abort", b"Not A Name!"))) == "peer_aborted"


def test_messages_are_bounded_by_the_round():
    limits = committee_limits(4)
    ok = CommitteeMessage("and-3", b"\0" * 64)
    assert codec_roundtrip(ok, limits) == ok
    from protocol.core.codec import CodecError

    with pytest.raises(CodecError):
        codec_roundtrip(CommitteeMessage("and-3", b"\0" * 72), limits)
    with pytest.raises(ValueError):
        CommitteeMessage("", b"")
    with pytest.raises(ValueError):
        committee_limits(0)


def codec_roundtrip(msg, limits):
    from protocol.core import codec

    return codec.decode(codec.encode(msg), limits=limits)
