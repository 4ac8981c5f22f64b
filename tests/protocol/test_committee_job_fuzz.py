"""Random and mutated frames at every step of a committee job: whatever the server
sends a helper, a helper sends the server, the other helper sends over the link, or the
server sends a device, the party ends in a named abort (its outcome's status and
reason, or one of the project's own exceptions), never another exception.

Each party runs its real code (:func:`_helper_rounds`, :class:`CommitteeJobServer`,
:func:`run_job_client`) over in-memory streams that carry an honest job's frames up to
one step, a mutated frame at that step, then the honest rest and the end of the
stream. The default run is bounded (a few seconds); ``-m slow`` runs many more
inputs and prints how many of each message type and step were tried."""
from __future__ import annotations

import asyncio
import collections
import hashlib
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.core import codec
from protocol.core.codec import CodecError
from protocol.core.committee import CommitteeAborted
from protocol.core.contract import AggregationAborted, ContractError, Kind, RoundSpec
from protocol.core.job_ledger import DeviceLedger, HelperLedger, LedgerError, LedgerRefusal
from protocol.core.net import job as job_module
from protocol.core.net.committee_job import (
    CommitteeJobServer, DeviceReports, _Helper, _helper_rounds,
)
from protocol.core.net.committee_net import CommitteeMessage
from protocol.core.net.frames import HEADER, frame
from protocol.core.net.job import JobPolicy, run_job_client
from protocol.core.net.messages import Bye, SampleProof, Task
from protocol.core.sample_beacon import (
    SampleRejected, beacon_context, beacon_seed, commitment, endorsement, sample_users,
)
from secagg import crypto

#: what a party may raise or name: the project's own exceptions
PROJECT = (AggregationAborted, CommitteeAborted, CodecError, SampleRejected, LedgerError,
           LedgerRefusal, ContractError)

POP, M, TASK, THETA = 12, 4, "fuzz", 2
CANDS = ("a", "b", "c")
POLICY = JobPolicy(TASK, POP, committee=True, sample_size=M, min_theta=THETA)


class _Rand:
    """Deterministic token_bytes (each party's values known in advance)."""

    def __init__(self, label: str) -> None:
        self.label, self.count = label, 0

    def token_bytes(self, n: int) -> bytes:
        self.count += 1
        out = b""
        while len(out) < n:
            out += hashlib.sha256(f"{self.label}/{self.count}/{len(out)}".encode()).digest()
        return out[:n]


_KR = _Rand("keys")
SIGN = [crypto.ed25519_keypair(_KR) for _ in range(POP + 2)]
VERIFY = [pk for _, pk in SIGN]
REPORT = [crypto.x25519_keypair(_KR) for _ in range(2)]


class _Writer:
    """The write end of an in-memory stream."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, b: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("closed")
        self.data += b

    async def drain(self) -> None:
        if self.closed:
            raise ConnectionResetError("closed")

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    async def wait_closed(self) -> None:
        return None

    def get_extra_info(self, *_: Any) -> Any:
        return None


def _reader(frames: list[bytes]) -> asyncio.StreamReader:
    r = asyncio.StreamReader()
    r.feed_data(b"".join(frames))
    r.feed_eof()
    return r


def _cm(step: str, payload: bytes = b"") -> bytes:
    return frame(CommitteeMessage(step, payload))


# ------------------------------------------------------------------ an honest round
INSTANCE = _Rand("instance").token_bytes(16)
CTX = beacon_context(TASK, 1, POP, M)
V = {"server": _Rand("server-value").token_bytes(32)}
# each helper's value is the first token_bytes(32) its rand gives
V["helper1"] = _Rand("helper1").token_bytes(32)
V["helper2"] = _Rand("helper2").token_bytes(32)
C = {k: commitment(CTX, k, v) for k, v in V.items()}
SEED = beacon_seed(CTX, V)
SAMPLE = sample_users(SEED, POP, M).tolist()
TASK_MSG = Task(TASK, 1, CANDS, THETA, False, 1, 0, 0, SAMPLE)
SIGS = tuple(crypto.ed25519_sign(SIGN[POP + i][0], endorsement(CTX, SEED, INSTANCE))
             for i in (0, 1))
PROOF = SampleProof(TASK, 1, SEED, SIGS, INSTANCE)

#: helper 1's inputs, in the order it reads them: (stream, step, honest frame)
HELPER_STEPS = [
    ("server", "j-open", _cm("j-open", INSTANCE)),
    ("server", "b-start", _cm("b-start", struct.pack(">QQ", 1, M) + C["server"])),
    ("peer", "b-peer", _cm("b-peer", C["server"] + C["helper2"])),
    ("server", "b-reveal", _cm("b-reveal", V["server"])),
    ("peer", "b-reveal(peer)", _cm("b-reveal", V["helper2"])),
    ("server", "task", _cm("task", codec.encode(TASK_MSG))),
    ("server", "bye", frame(Bye("finished", ""))),
]


def _helper_run(step: int, bad: bytes) -> dict[str, Any]:
    server = [f for s, _, f in HELPER_STEPS if s == "server"]
    peer = [f for s, _, f in HELPER_STEPS if s == "peer"]
    stream, _, honest = HELPER_STEPS[step]
    target = server if stream == "server" else peer
    target[target.index(honest)] = bad
    out: dict[str, Any] = {"helper": 1, "status": "disconnected", "reason": "",
                           "rounds": [], "events": []}

    to_server = _Writer()

    async def go() -> dict[str, Any]:
        return await _helper_rounds(
            1, POLICY, _reader(server), to_server, _reader(peer), _Writer(), VERIFY,
            SIGN[POP][0], _Rand("helper1"), 0.5, None, out, REPORT[0][0], HelperLedger())

    res = asyncio.run(go())
    res["sent"] = bytes(to_server.data)
    return res


# ----------------------------------------------------------- the server's inputs
def _server(rand_label: str = "srv") -> CommitteeJobServer:
    return CommitteeJobServer(POLICY, None, verify_keys=VERIFY, rand=_Rand(rand_label),
                              stage_seconds=0.3, join_seconds=0.3)


_PROBE = _server()
S_INSTANCE = _PROBE.instance
S_V0 = _PROBE.rand.token_bytes(32)
S_VALUES = {"server": S_V0, "helper1": V["helper1"], "helper2": V["helper2"]}
S_SEED = beacon_seed(CTX, S_VALUES)
S_SIG = {i: crypto.ed25519_sign(SIGN[POP + i - 1][0], endorsement(CTX, S_SEED, S_INSTANCE))
         for i in (1, 2)}


def _server_frames(i: int) -> list[tuple[str, bytes]]:
    me = f"helper{i}"
    return [("j-ok", _cm("j-ok")), ("b-commit", _cm("b-commit", C[me])),
            ("b-reveal", _cm("b-reveal", V[me])), ("b-sig", _cm("b-sig", S_SIG[i])),
            ("t-ok", _cm("t-ok"))]


SERVER_STEPS = [(i, name) for i in (1, 2) for name, _ in _server_frames(i)]


def _server_run(step: int, bad: bytes) -> Any:
    helper, name = SERVER_STEPS[step]
    srv = _server()

    async def go() -> Any:
        for i in (1, 2):
            frames = [f for _, f in _server_frames(i)]
            if i == helper:
                frames[[n for n, _ in _server_frames(i)].index(name)] = bad
            srv._helpers[i] = _Helper(i, _reader(frames), _Writer())
        try:
            _, proof = await srv.beacon(TASK, 1, M)
        except AggregationAborted as exc:
            return exc.reason
        spec = RoundSpec(TASK, 1, Kind.VOTE, candidates=CANDS, theta=THETA,
                         reveal_counts=False)
        sample = sample_users(proof.seed, POP, M).tolist()
        return (await srv.run_committee_round(spec, sample, proof))["reason"]

    return asyncio.run(go())


# ----------------------------------------------------------- a device's inputs
DEVICE = SAMPLE[0]
DEVICE_STEPS = [("proof", frame(PROOF)), ("task", frame(TASK_MSG)),
                ("bye", frame(Bye("finished", "")))]


def _device_run(step: int, bad: bytes, monkeypatch: Any, ledger: Any = None,
                policy: JobPolicy = POLICY) -> Any:
    frames = [f for _, f in DEVICE_STEPS]
    frames[step] = bad

    async def fake_connect(*_a: Any, **_k: Any) -> Any:
        return _reader(frames), _Writer(), 0

    monkeypatch.setattr(job_module, "connect", fake_connect)
    reports = DeviceReports((REPORT[0][1], REPORT[1][1]), [sk for sk, _ in SIGN[:POP]],
                            rand=_Rand("device"))
    return asyncio.run(run_job_client(DEVICE, "x", 0, policy, None, b"", lambda t: 0,
                                      signing_key=SIGN[DEVICE][0], verify_keys=VERIFY,
                                      rand=_Rand("dev"), wait_seconds=0.5,
                                      reports=reports,
                                      ledger=ledger if ledger is not None else DeviceLedger()))


# ----------------------------------------------------------------- the mutations
_TAGS = [200, 201, 202, 203, 206, 207, 208, 209, 210, 211, 999, 65535]
_ANY = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1)
                    | st.binary(max_size=80) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4), max_leaves=8)


def _body_frame(tag: int, fields: list[Any]) -> bytes:
    body = msgpack.packb([codec.VERSION, tag, *fields], use_bin_type=True)
    return HEADER.pack(len(body), tag & 0xFFFF) + body


MUTATIONS = st.one_of(
    st.binary(max_size=120).map(lambda b: ("raw", b)),
    st.tuples(st.integers(0, 600), st.integers(1, 255)).map(lambda t: ("flip",) + t),
    st.integers(0, 600).map(lambda n: ("truncate", n)),
    st.binary(min_size=1, max_size=60).map(lambda b: ("append", b)),
    st.tuples(st.sampled_from(["j-open", "j-ok", "b-start", "b-commit", "b-peer",
                               "b-reveal", "b-sig", "task", "t-ok", "abort", "x" * 32]),
              st.binary(max_size=120)).map(lambda t: ("committee",) + t),
    st.tuples(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1),
              st.binary(max_size=40)).map(lambda t: ("b-start-fields",) + t),
    st.tuples(st.sampled_from(_TAGS), st.lists(_ANY, max_size=10)).map(
        lambda t: ("fields",) + t),
    st.tuples(st.text(max_size=12), st.text(max_size=40)).map(lambda t: ("bye",) + t),
    st.binary(max_size=80).map(lambda b: ("same-size-payload", b)),
)


def _mutate(honest: bytes, mutation: tuple) -> bytes:
    kind = mutation[0]
    if kind == "raw":
        return mutation[1]
    if kind == "flip":
        b = bytearray(honest)
        b[mutation[1] % len(b)] ^= mutation[2]
        return bytes(b)
    if kind == "truncate":
        return honest[:mutation[1] % len(honest)]
    if kind == "append":
        return honest + mutation[1]
    if kind == "committee":
        return _body_frame(CommitteeMessage.TAG, [mutation[1], mutation[2]])
    if kind == "b-start-fields":
        return _cm("b-start", struct.pack(">QQ", mutation[1], mutation[2]) + mutation[3])
    if kind == "fields":
        return _body_frame(mutation[1], mutation[2])
    if kind == "bye":
        return _body_frame(Bye.TAG, [mutation[1], mutation[2]])
    # the honest message's fields, each bytes field replaced by as many random bytes
    tag = HEADER.unpack(honest[:HEADER.size])[1]
    fields = msgpack.unpackb(honest[HEADER.size:], raw=False)[2:]
    rnd = (mutation[1] * 64) or b"\x00" * 64
    fields = [rnd[:len(f)].ljust(len(f), b"\x01") if isinstance(f, bytes) else f
              for f in fields]
    return _body_frame(tag, fields)


TRIED: collections.Counter = collections.Counter()
NOT_OURS: list[str] = []


def _check(party: str, step: str, mutation: tuple, run: Any) -> Any:
    TRIED[(party, step, mutation[0])] += 1
    try:
        out = run()
    except PROJECT:
        return None
    except Exception as exc:  # noqa: BLE001 - the finding this test is for
        NOT_OURS.append(f"{party} {step} {mutation[0]}: {type(exc).__name__}: {exc}")
        raise AssertionError(f"{party} at {step} ({mutation!r:.120}) raised "
                             f"{type(exc).__name__}: {exc}") from exc
    return out


def _helper_case(step: int, mutation: tuple) -> None:
    bad = _mutate(HELPER_STEPS[step][2], mutation)
    out = _check("helper", HELPER_STEPS[step][1], mutation, lambda: _helper_run(step, bad))
    if out is not None:
        assert isinstance(out["status"], str) and isinstance(out["reason"], str)
        if out["status"] == "aborted":
            assert out["reason"]


def _server_case(step: int, mutation: tuple) -> None:
    helper, name = SERVER_STEPS[step]
    honest = _server_frames(helper)[[n for n, _ in _server_frames(helper)].index(name)][1]
    bad = _mutate(honest, mutation)
    reason = _check("server", f"helper{helper}:{name}", mutation,
                    lambda: _server_run(step, bad))
    assert reason is None or isinstance(reason, str)


def _device_case(step: int, mutation: tuple, monkeypatch: Any) -> None:
    bad = _mutate(DEVICE_STEPS[step][1], mutation)
    out = _check("device", DEVICE_STEPS[step][0], mutation,
                 lambda: _device_run(step, bad, monkeypatch))
    assert out is None or isinstance(out.status, str)


# ------------------------------------------------------------------------- tests
def test_the_honest_frames_make_an_honest_round() -> None:
    """The fuzzed inputs start from frames the parties accept: the helper gets through
    the beacon and the Task (then meets the end of the server's stream in the
    intake), the server gets through the beacon and the helpers' Task checks, the
    device answers the Task and finishes."""
    out = _helper_run(len(HELPER_STEPS) - 1, HELPER_STEPS[-1][2])
    assert out["job"] == INSTANCE.hex()
    assert _cm("t-ok") in out["sent"], out  # it accepted the Task
    (event,) = out["events"]  # the server's stream ended in the round: named
    assert event["event"] == "committee_job_abandoned_after_beacon" and event["round"] == 1
    reason = _server_run(len(SERVER_STEPS) - 1, _server_frames(2)[-1][1])
    assert reason in ("committee_missing_message", "too_few_valid_reports"), reason


def test_the_honest_device_votes(monkeypatch: Any) -> None:
    out = _device_run(2, DEVICE_STEPS[2][1], monkeypatch)
    assert (out.status, out.votes) == ("finished", 1), out


def test_a_device_ledger_refuses_an_earlier_jobs_proof_and_a_spent_budget(
        monkeypatch: Any, tmp_path: Any) -> None:
    """The same job instance replayed to a device on a new connection (it voted in it
    before) is refused, as is a vote past the task's budget over all its jobs; the
    vote is on disk before the report goes out."""
    led = DeviceLedger(tmp_path)
    assert _device_run(2, DEVICE_STEPS[2][1], monkeypatch, led).votes == 1
    assert DeviceLedger(tmp_path).known_instance(DEVICE, TASK, INSTANCE)
    again = _device_run(2, DEVICE_STEPS[2][1], monkeypatch, DeviceLedger(tmp_path))
    assert again.status == "aborted" and again.reason.startswith("sample_wrong_job"), again
    assert again.votes == 0
    import dataclasses

    capped = dataclasses.replace(POLICY, max_votes=1)
    other = DeviceLedger(tmp_path / "other")
    other.record_vote(DEVICE, TASK, bytes(16), 3)  # a vote in an earlier job of the task
    spent = _device_run(2, DEVICE_STEPS[2][1], monkeypatch, other, capped)
    assert spent.status == "aborted" and spent.reason.startswith("budget_spent"), spent


FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=30000, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


@FAST
@given(st.integers(0, len(HELPER_STEPS) - 1), MUTATIONS)
def test_a_helper_names_every_malformed_frame(step: int, mutation: tuple) -> None:
    _helper_case(step, mutation)


@FAST
@given(st.integers(0, len(SERVER_STEPS) - 1), MUTATIONS)
def test_the_server_names_every_malformed_helper_frame(step: int, mutation: tuple) -> None:
    _server_case(step, mutation)


@FAST
@given(st.integers(0, len(DEVICE_STEPS) - 1), MUTATIONS)
def test_a_device_names_every_malformed_frame(monkeypatch: Any, step: int,
                                              mutation: tuple) -> None:
    _device_case(step, mutation, monkeypatch)


@pytest.mark.parametrize("round_no, size, reason", [
    ((1 << 32) + 1, M, "committee_malformed_message"),   # beyond a Task's round range
    (1 << 63, M, "committee_malformed_message"),         # beyond the beacon's context
    ((1 << 64) - 1, M, "committee_malformed_message"),
    (1, 0, "committee_sample_size_mismatch"),
    (1, POP + 1, "committee_sample_size_mismatch"),
    (1, (1 << 64) - 1, "committee_sample_size_mismatch"),
    (1 << 32, M, "committee_sample_commitment_mismatch"),  # in range: the beacon runs
])
def test_a_b_start_outside_the_wires_ranges_is_a_named_refusal(round_no: int, size: int,
                                                               reason: str) -> None:
    bad = _cm("b-start", struct.pack(">QQ", round_no, size) + C["server"])
    out = _helper_run(1, bad)
    assert (out["status"], out["reason"]) == ("aborted", reason), out


@pytest.mark.slow
@SLOW
@given(st.sampled_from(["helper", "server", "device"]), st.integers(0, 20), MUTATIONS)
def test_many_malformed_frames_at_every_step(monkeypatch: Any, party: str, step: int,
                                            mutation: tuple) -> None:
    if party == "helper":
        _helper_case(step % len(HELPER_STEPS), mutation)
    elif party == "server":
        _server_case(step % len(SERVER_STEPS), mutation)
    else:
        _device_case(step % len(DEVICE_STEPS), mutation, monkeypatch)


@pytest.mark.slow
def test_zz_report_the_slow_fuzz_run() -> None:
    """Prints what the slow run tried (run with -s): inputs per party, step and kind of
    mutation, and the exceptions not of the project's own (0)."""
    by_step: collections.Counter = collections.Counter()
    for (party, step, _), n in TRIED.items():
        by_step[(party, step)] += n
    print("\nfuzz inputs by party and step:")
    for (party, step), n in sorted(by_step.items()):
        print(f"  {party:7s} {step:22s} {n}")
    kinds: collections.Counter = collections.Counter()
    for (_, _, kind), n in TRIED.items():
        kinds[kind] += n
    print("by mutation:", dict(sorted(kinds.items())))
    print("total:", sum(TRIED.values()), "not the project's own:", len(NOT_OURS))
    assert not NOT_OURS
