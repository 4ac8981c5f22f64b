"""Malformed input to the committee's intake of validated reports: every frame a device
or a member sends, random or mutated, ends in a named refusal (a dropped report, a
CodecError, a CommitteeAborted), never another exception."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.core import codec
from protocol.core.committee import CommitteeAborted
from protocol.core.committee.intake import IntakeMember, ReportBatch, batch_limits
from protocol.core.committee.reports import (
    DeviceReport, ReportContext, Verdict, candidates_digest, make_reports,
)
from protocol.core.committee.verified import CommitteeMessage
from protocol.core.randomness import insecure_deterministic_randomness
from secagg import crypto

D = 4
CTX = ReportContext("fuzz", bytes(16), 1, candidates_digest(["a", "b", "c", "d"]), D)
_R = insecure_deterministic_randomness(7, "intake-fuzz")
HELPERS = [crypto.x25519_keypair(_R) for _ in range(2)]
DEVICES = {u: crypto.ed25519_keypair(_R) for u in range(6)}
ROSTER = {u: pk for u, (_, pk) in DEVICES.items()}
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def _reports() -> list[DeviceReport]:
    votes = np.zeros((6, D), dtype=np.uint64)
    votes[np.arange(6), np.arange(6) % D] = 1
    return make_reports(CTX, list(range(6)), votes, [DEVICES[u][0] for u in range(6)],
                        (HELPERS[0][1], HELPERS[1][1]), _R)


def _members() -> list[IntakeMember]:
    return [IntakeMember(0, CTX, range(6), ROSTER),
            IntakeMember(1, CTX, range(6), ROSTER, HELPERS[0][0]),
            IntakeMember(2, CTX, range(6), ROSTER, HELPERS[1][0])]


HONEST = [codec.encode(r) for r in _reports()]


def test_honest_batch_is_kept_whole() -> None:
    m = _members()
    reports, to1, to2 = m[0].relay(HONEST)
    out = [m[0].take_batch(reports, to1.refused), m[1].take_batch(to1), m[2].take_batch(to2)]
    box = {(x.sender, x.recipient): x for msgs in out for x in msgs}
    echo = [p.agree(box[(p.prev, p.index)], box[(p.next, p.index)]) for p in m]
    box = {(x.sender, x.recipient): x for msgs in echo for x in msgs}
    assert [p.confirm(box[(p.prev, p.index)], box[(p.next, p.index)]) for p in m] == [6] * 3


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_random_device_frames_are_refused_by_name(frames: list[bytes]) -> None:
    m = _members()[0]
    reports, to1, _ = m.relay(frames + HONEST[:1])
    assert len(reports) + len(to1.refused) == len(frames) + 1
    assert all(code == Verdict.MALFORMED_REPORT for _, code in to1.refused)
    m.take_batch(reports, to1.refused)  # verdicts for what decoded, no exception


@FUZZ
@given(st.integers(0, 7), st.integers(0, 2000), st.integers(0, 255))
def test_mutated_device_frames_are_dropped_or_refused(which: int, at: int, flip: int) -> None:
    """A byte of one honest frame changed: refused by the codec, or decoded and dropped
    (a public or private verdict), never a crash; the other reports are kept."""
    frames = list(HONEST)
    f = bytearray(frames[which % len(frames)])
    f[at % len(f)] ^= flip or 1
    frames[which % len(frames)] = bytes(f)
    m = _members()
    reports, to1, to2 = m[0].relay(frames)
    try:
        out = [m[0].take_batch(reports, to1.refused), m[1].take_batch(to1),
               m[2].take_batch(to2)]
    except CommitteeAborted as exc:  # e.g. the context of the whole batch
        assert exc.reason
        return
    box = {(x.sender, x.recipient): x for msgs in out for x in msgs}
    echo = [p.agree(box[(p.prev, p.index)], box[(p.next, p.index)]) for p in m]
    box = {(x.sender, x.recipient): x for msgs in echo for x in msgs}
    kept = [p.confirm(box[(p.prev, p.index)], box[(p.next, p.index)]) for p in m]
    assert kept[0] == kept[1] == kept[2] and kept[0] >= 5


@FUZZ
@given(st.binary(max_size=2000))
def test_random_batches_at_a_helper_are_codec_errors(data: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(data, ReportBatch, batch_limits(D, 8))


@FUZZ
@given(st.integers(0, 5), st.sampled_from(["user", "context", "ephemeral", "commitments",
                                          "own_ct", "ct0", "digests", "signature"]),
       st.binary(min_size=0, max_size=80))
def test_a_helper_takes_any_well_formed_relayed_report(row: int, name: str,
                                                       value: bytes) -> None:
    """A relayed report with one field replaced (as a deviating server could): the
    helper gives a verdict, or refuses the value at construction; never crashes."""
    m = _members()
    _, to1, _ = m[0].relay(HONEST)
    reps = list(to1.reports)
    try:
        new = (int.from_bytes(value[:8] or b"\x00", "big") >> 1) if name == "user" else value
        reps[row] = dataclasses.replace(reps[row], **{name: new})
    except ValueError:
        return
    msgs = m[1].take_batch(dataclasses.replace(to1, reports=tuple(reps)))
    assert len(msgs) == 2 and all(isinstance(x, CommitteeMessage) for x in msgs)


@FUZZ
@given(st.binary(max_size=80), st.sampled_from(["verdicts", "verdicts-echo", "mult-0", ""]),
       st.integers(-1, 3), st.booleans())
def test_malformed_verdict_messages_abort_by_name(payload: bytes, step: str, sender: int,
                                                  same_context: bool) -> None:
    m = _members()
    reports, to1, to2 = m[0].relay(HONEST)
    m[0].take_batch(reports, to1.refused)
    out1 = m[1].take_batch(to1)
    m[2].take_batch(to2)
    good = {x.recipient: x for x in out1}[0]   # helper 1 -> server, honest
    bad = CommitteeMessage(CTX.digest if same_context else bytes(32), step or "x",
                           sender, 0, payload)   # in place of helper 2's
    with pytest.raises(CommitteeAborted) as err:
        m[0].agree(bad, good)
    assert err.value.reason in {"malformed_message", "replayed_message", "unexpected_message",
                                "report_set_mismatch", "verdict_mismatch", "missing_message"}
