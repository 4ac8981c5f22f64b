"""A validated round with each committee member on its own, over real byte streams
(:func:`protocol.core.net.committee_net.run_intake_member`): the release is the
threshold rule over exactly the valid reports, every dropped report is named alike at
all three members, and every deviation or broken message ends each member in a named
:class:`~protocol.core.committee.CommitteeAborted`."""
from __future__ import annotations

import asyncio
import math
import socket

import numpy as np
import pytest

from protocol.core import codec
from protocol.core.committee import CommitteeAborted
from protocol.core.committee.intake import IntakeMember, ReportBatch
from protocol.core.committee.reports import (
    ReportContext, Verdict, candidates_digest, make_reports,
)
from protocol.core.net.committee_net import (
    CommitteeLink, intake_limits, run_intake_member, send_abort,
)
from protocol.core.randomness import insecure_deterministic_randomness
from secagg import crypto

N, D, THETA = 30, 4, 3
INVALID, GARBAGE = 3, 5   # a device that votes theta for one candidate, one that sends junk


def _setup(seed: int = 1):
    rand = insecure_deterministic_randomness(seed, "intake-net-test")
    helpers = [crypto.x25519_keypair(rand) for _ in range(2)]
    devices = [crypto.ed25519_keypair(rand) for _ in range(N)]
    ctx = ReportContext("intake-net-test", bytes(range(16)), 2,
                        candidates_digest([f"c{i}" for i in range(D)]), D)
    choice = np.random.default_rng(seed).integers(-1, D, N)
    votes = np.zeros((N, D), dtype=np.uint64)
    for u, c in enumerate(choice):
        if c >= 0:
            votes[u, c] = 1
    votes[INVALID] = 0
    votes[INVALID, 0] = THETA
    reports = make_reports(ctx, list(range(N)), votes, [sk for sk, _ in devices],
                           (helpers[0][1], helpers[1][1]), rand)
    frames = [codec.encode(r) for r in reports]
    frames[GARBAGE] = b"\x93\x01\xd2 not a report"
    valid = [u for u in range(N) if u not in (INVALID, GARBAGE)]
    counts = np.bincount(choice[valid][choice[valid] >= 0], minlength=D)
    return {"ctx": ctx, "roster": [pk for _, pk in devices], "helpers": helpers,
            "frames": frames, "valid": valid, "counts": counts}


def _relay(frames, rows):
    """The server's input per batch: the decodable frames, and its own refusals (the
    job server refuses a frame it cannot decode as its device's report)."""
    def relay(number):
        raw, refused = [], []
        for u in range(number * rows, min(N, (number + 1) * rows)):
            if frames[u].startswith(b"\x93\x01\xd2"):
                refused.append((u, Verdict.MALFORMED_REPORT))
            else:
                raw.append(frames[u])
        return raw, refused
    return relay


def _run(setup, *, rows=8, hooks=None, lies=None, absent=(), wait=3.0, min_valid=10,
         server_class=IntakeMember):
    """The three members over socket pairs; each that stops relays its reason to both
    others, as the job's server and helpers do. Returns ``(outcomes or exceptions,
    members)``."""
    hooks, lies = hooks or {}, lies or {}
    ctx, roster, helpers = setup["ctx"], setup["roster"], setup["helpers"]
    members = [server_class(0, ctx, range(N), roster),
               IntakeMember(1, ctx, range(N), roster, helpers[0][0]),
               IntakeMember(2, ctx, range(N), roster, helpers[1][0])]

    async def main():
        ends = {}
        for a, b in ((0, 1), (1, 2), (2, 0)):
            sa, sb = socket.socketpair()
            ends[(a, b)] = await asyncio.open_connection(sock=sa)
            ends[(b, a)] = await asyncio.open_connection(sock=sb)
        limits = intake_limits(rows)

        def link(me, peer):
            r, w = ends[(me, peer)]
            return CommitteeLink(me, peer, r, w, limits, wait, hooks.get((me, peer)))

        async def member(i):
            prev, nxt = link(i, (i - 1) % 3), link(i, (i + 1) % 3)
            try:
                return await run_intake_member(
                    members[i], THETA, reveal_counts=True, batches=math.ceil(N / rows),
                    rows=rows, min_valid=min_valid, prev=prev, next=nxt,
                    relay=_relay(setup["frames"], rows) if i == 0 else None,
                    rand=insecure_deterministic_randomness(i, "intake-net-member"),
                    lie=lies.get(i))
            except CommitteeAborted as exc:
                for peer in (prev, nxt):
                    await send_abort(peer.writer, exc.reason)
                raise

        out = await asyncio.gather(*(member(i) for i in range(3) if i not in absent),
                                   return_exceptions=True)
        for _, w in ends.values():
            w.close()
        return out

    return asyncio.run(main()), members


def _reasons(outs):
    assert all(isinstance(o, CommitteeAborted) for o in outs), outs
    return {o.reason for o in outs}


def test_three_members_count_exactly_the_valid_reports():
    setup = _setup()
    outs, members = _run(setup)
    assert not any(isinstance(o, BaseException) for o in outs), outs
    want = setup["counts"]
    for o, m in zip(outs, members):
        assert np.array_equal(o.passed, want >= THETA)
        assert o.counts.tolist() == want[want >= THETA].tolist()
        # the same drops, named alike, at every member; the valid devices counted
        assert sorted(m.dropped) == [(INVALID, "invalid_vote", "all"),
                                     (GARBAGE, "malformed_report", "server")]
        assert o.view["valid_users"] == setup["valid"]
        assert len(o.view["validity"]) == math.ceil(N / 8) and o.bytes_sent > 0


def test_a_member_that_lies_about_a_public_check_aborts_the_round():
    def lie(codes):
        codes[0] = Verdict.BAD_SIGNATURE   # a valid report called badly signed
        return codes

    outs, _ = _run(_setup(), lies={1: lie})
    assert _reasons(outs) == {"verdict_mismatch"}


def test_a_server_that_tells_the_helpers_different_verdicts_is_caught():
    def accuse(step, payload):  # to helper 2 only: report 0 accused by the server
        if step == "verdicts" and len(payload) > 64:
            payload = payload[:64] + bytes([Verdict.INCONSISTENT_PART]) + payload[65:]
        return payload

    outs, _ = _run(_setup(), hooks={(0, 2): accuse})
    assert "verdict_equivocation" in _reasons(outs)


class _TwoFaced(IntakeMember):
    """A server that relays helper 2 the batch's reports in another order."""

    def relay(self, raw, limits=None):  # noqa: ANN001, ANN201
        reports, to1, to2 = super().relay(raw, limits)
        swapped = (to2.reports[1], to2.reports[0], *to2.reports[2:])
        return reports, to1, ReportBatch(to2.context, to2.batch, to2.refused, swapped)


def test_a_server_that_shows_the_helpers_different_reports_is_caught():
    outs, _ = _run(_setup(), server_class=_TwoFaced)
    assert "report_set_mismatch" in _reasons(outs)


@pytest.mark.parametrize("cut, reason", [
    (lambda p: p[:-1], "malformed_message"),          # verdicts one code short
    (lambda p: bytes(32) + p[32:], "replayed_message"),  # another round's context
])
def test_a_broken_verdicts_message_ends_the_round_in_its_named_abort(cut, reason):
    def hook(step, payload):
        return cut(payload) if step == "verdicts" else payload

    outs, _ = _run(_setup(), hooks={(1, 2): hook})
    assert reason in _reasons(outs)


def test_a_silent_helper_ends_the_others_with_missing_message():
    outs, _ = _run(_setup(), absent=(2,), wait=0.5)
    assert _reasons(outs) == {"missing_message"}


def test_too_few_valid_reports_abort_at_every_member():
    outs, _ = _run(_setup(), min_valid=N - 1)
    assert _reasons(outs) == {"too_few_valid_reports"}


def test_posted_messages_never_deadlock_members_that_all_write_at_once():
    """Three members each write 4 MiB to the next and then read from the previous: a
    blocking send would wait for a peer that is itself blocked sending; posting first
    and flushing after the reads cannot."""
    from protocol.core.codec import Bin, Record, SessionLimits, Str
    from protocol.core.net.committee_net import CommitteeMessage

    big = bytes(4 << 20)
    limits = SessionLimits({CommitteeMessage.TAG: Record((Str(1, 32), Bin(0, len(big))))})

    async def main():
        ends = {}
        for a, b in ((0, 1), (1, 2), (2, 0)):
            sa, sb = socket.socketpair()
            ends[(a, b)] = await asyncio.open_connection(sock=sa)
            ends[(b, a)] = await asyncio.open_connection(sock=sb)

        async def member(i):
            to_next = CommitteeLink(i, (i + 1) % 3, *ends[(i, (i + 1) % 3)], limits, 20)
            from_prev = CommitteeLink(i, (i - 1) % 3, *ends[(i, (i - 1) % 3)], limits, 20)
            to_next.post("big", big)
            got = await from_prev.receive("big")
            await to_next.flush()
            return len(got)

        try:
            return await asyncio.wait_for(asyncio.gather(*(member(i) for i in range(3))),
                                          30)
        finally:
            for _, w in ends.values():
                w.close()

    assert asyncio.run(main()) == [len(big)] * 3


def test_intake_messages_are_bounded_by_the_batch():
    from protocol.core.codec import CodecError
    from protocol.core.net.committee_net import CommitteeMessage

    limits = intake_limits(8)
    ok = CommitteeMessage("mult-0", bytes(32 + 16 * 8))
    assert codec.decode(codec.encode(ok), limits=limits) == ok
    with pytest.raises(CodecError):
        codec.decode(codec.encode(CommitteeMessage("mult-0", bytes(32 + 16 * 8 + 1))),
                     limits=limits)
    with pytest.raises(ValueError):
        intake_limits(0)


_STEPS = ("verdicts", "verdicts-echo", "key", "open-sketch", "mult-0", "mult-1", "mult-2",
          "open-coins", "check-zero", "open-check", "open-valid", "input-check", "open-bits",
          "open-counts")
_MUTATIONS = {"short": lambda p: p[:-1], "empty": lambda p: b"",
              "junk": lambda p: bytes(range(41)), "flip": lambda p: p[:-1] + bytes([p[-1] ^ 1])}


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
def test_every_broken_message_ends_a_member_in_a_named_abort_and_nothing_else(mutation):
    """Each step's messages from helper 1 broken in one way, one run per step:
    every member ends with its outcome or a named CommitteeAborted, never another
    exception, and a member that opened something opened the right thing."""
    setup = _setup()
    want = setup["counts"] >= THETA
    for step in _STEPS:
        def hook(s, payload, step=step):
            return _MUTATIONS[mutation](payload) if s == step and payload else payload

        outs, _ = _run(setup, hooks={(1, 2): hook, (1, 0): hook}, wait=2.0)
        for o in outs:
            if isinstance(o, BaseException):
                assert isinstance(o, CommitteeAborted), (step, o)
            else:
                assert np.array_equal(o.passed, want), step
        assert any(isinstance(o, CommitteeAborted) for o in outs), (step, mutation)
