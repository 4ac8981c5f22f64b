"""A whole TrieHH over the thresholding committee between real parties on loopback:
the job server, two helper parties that stay for every round, and devices that check
each round's sample against the helpers' signed beacon. By default each sampled device
sends a validated report; ``committee_input="secagg"`` feeds the committee a
secure-aggregation sum instead. Every deviation the launcher can switch on ends the job
in its named abort, with nothing opened; a corrupted or garbage report is dropped by
name and the job goes on."""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np
import pytest

from mechanisms.triehh import ClientVoter, TrieHH
from mechanisms.triehh_privacy import batch_size
from protocol.core.contract import AggregationAborted
from protocol.core.net import tls
from protocol.core.net.committee_job import (
    JOB_FAULTS, SECAGG_ONLY_FAULTS, CommitteeJobServer, DeviceReports, committee_transcript,
    run_job_helper,
)
from protocol.core.net.job import JobPolicy, _proof_problem, run_job_clients, serving_job
from protocol.core.net.messages import SampleProof, Task
from protocol.core.transports.plain import PlainTransport
from protocol.studies.runners.triehh import TrieHHOptions, prepare

POP = 40


def _prep():
    return prepare(TrieHHOptions(dataset="zipf", users=POP, seed=5, theta=2, gamma=3.0,
                                 max_length=3))


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("committeejob")
    tls.make_party_keys(root, POP, committee=True)
    return root


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(keys, threat="malicious", faults=None, wait=20.0, committee_input="reports",
         reports=None, corrupt=None, ledgers=None, device_ledger=None):
    """Server (thread), helpers and devices (another thread); returns
    (result or the AggregationAborted, device outcomes, helper outcomes, transport).
    The deadlines are long: no path here waits for one (every abort is relayed), and
    on a loaded machine a short one would name a timeout instead of the deviation.
    ``reports(helper_keys, signing_keys)``: the devices' report maker (default
    :class:`DeviceReports` with ``corrupt``). ``ledgers``: helper index -> its
    HelperLedger; ``device_ledger``: the devices' DeviceLedger."""
    faults = faults or {}
    prep, rng = _prep()
    policy = JobPolicy(prep.config.task, prep.n, threat=threat, committee=True,
                       min_theta=int(prep.config.theta),
                       sample_size=batch_size(prep.config.gamma, prep.n),
                       committee_input=committee_input)
    verify, _ = tls.load_pki(keys / "server", signing=False)
    server = CommitteeJobServer(policy, tls.server_context(keys / "server"),
                                verify_keys=verify, stage_seconds=60, join_seconds=60,
                                fault=faults.get("server"))
    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    outcomes: list = []
    helpers: list = []
    link = ("127.0.0.1", _port())

    def start(port: int) -> None:
        async def everyone() -> None:
            tasks = []
            for h in (2, 1):  # helper 2 listens for helper 1
                d = keys / f"helper{h}"
                hv, hs = tls.load_pki(d)
                ctx, pin = tls.client_context(d)
                tasks.append(asyncio.create_task(run_job_helper(
                    h, "127.0.0.1", port, policy, ctx, pin, link,
                    tls.helper_link_contexts(d, h), signing_key=hs[POP + h - 1],
                    verify_keys=hv, wait_seconds=wait, fault=faults.get(f"helper{h}"),
                    report_secret=tls.load_report_secret(d, h) if policy.validated
                    else None, ledger=(ledgers or {}).get(h))))
                await asyncio.sleep(0.1)
            d = keys / "clients"
            cv, cs = tls.load_pki(d)
            ctx, pin = tls.client_context(d)
            maker = None
            if policy.validated:
                maker = (reports or (lambda hk, sk: DeviceReports(hk, sk, corrupt=corrupt)))(
                    tls.load_report_keys(d), cs)
            outcomes.extend(await run_job_clients(
                range(prep.n), "127.0.0.1", port, policy, ctx, pin,
                lambda m, t: int(voter.votes([m], t.round, t.candidates)[0]),
                signing_keys=cs, verify_keys=cv if threat == "malicious" else None,
                wait_seconds=wait, reports=maker,
                corrupt=corrupt if not policy.validated else None, ledger=device_ledger))
            helpers.extend([await t for t in tasks])

        th = threading.Thread(target=lambda: asyncio.run(everyone()))
        th.start()
        start.thread = th

    result: object
    with serving_job(server, start) as transport:
        try:
            result = TrieHH.at_server(prep.n, prep.alphabet, prep.config, transport,
                                      rng).result()
        except AggregationAborted as exc:
            result = exc
    start.thread.join(60)
    assert not start.thread.is_alive()
    return result, outcomes, sorted(helpers, key=lambda h: h["helper"]), transport


@pytest.mark.parametrize("committee_input", ["reports", "secagg"])
def test_triehh_over_the_committee_between_parties(keys, committee_input):
    # the helpers' beacon draws each sample from OS randomness, and about 1% of random
    # samples of this population find no heavy hitter (1,500 plaintext runs: 16): a job
    # that found nothing is checked like the others, then run again, at most 3 times
    for _ in range(3):
        result, outcomes, helpers, transport = _job(keys, committee_input=committee_input)
        assert not isinstance(result, AggregationAborted), result
        # the committee's samples rerun in plaintext: the same trie
        prep, rng = _prep()
        plain = TrieHH(prep.data, prep.alphabet, prep.config,
                       PlainTransport(samples=transport.samples), rng).result()
        assert (plain.heavy_hitters == result.heavy_hitters
                and plain.prefixes == result.prefixes)
        if result.heavy_hitters:
            break
    assert result.heavy_hitters, "the setting must find something"
    assert {o.status for o in outcomes} == {"finished"}
    assert [h["status"] for h in helpers] == ["finished", "finished"]
    rounds = committee_transcript(transport)
    assert len(rounds) == len(result.rounds) >= 2
    for r, h1, h2 in zip(rounds, helpers[0]["rounds"], helpers[1]["rounds"]):
        assert r["status"] == "completed" and h1["status"] == h2["status"] == "completed"
        assert h1["passed"] == h2["passed"]
        # the sample is the beacon's: the seed the helpers signed selects it
        assert r["sample"] == transport.samples[(prep.config.task, r["round"])].users.tolist()
    # the server saw which candidates passed (TrieHH releases membership only), never
    # a count
    assert all(r["counts"] is None for r in rounds) and any(r["passed"] for r in rounds)
    # every device that was sampled contributed at most once per round, and the
    # samples differ from round to round (fresh beacons)
    seeds = [s for _, s in transport.server.beacons]
    assert len(set(seeds)) == len(seeds) == len(rounds)
    if committee_input == "reports":
        # every sampled device's report was valid and counted, at all three members
        for r, h1, h2 in zip(rounds, helpers[0]["rounds"], helpers[1]["rounds"]):
            assert r["committee_input"] == "reports" and r["dropped"] == {}
            assert r["in_sum"] == r["sample"]
            assert h1["valid"] == h2["valid"] == len(r["sample"])
        assert all(o.sessions == {"reported": o.votes} for o in outcomes if o.votes)
    else:
        assert all(r["committee_input"] is None for r in rounds)


_SHIFTED = {"committee_verification_failed", "committee_open_mismatch"}


@pytest.mark.parametrize("member, fault, reasons, committee_input", [
    ("server", "force-sample", {"committee_sample_not_from_beacon"}, "reports"),
    ("server", "redraw-sample", {"committee_sample_redrawn"}, "reports"),
    ("server", "shift-sum", _SHIFTED, "reports"),
    ("server", "shift-sum", _SHIFTED, "secagg"),
    ("server", "equivocate-commitment", {"committee_sample_equivocated"}, "reports"),
    ("helper2", "bad-signature", {"committee_sample_not_endorsed"}, "reports"),
    ("helper1", "bad-reveal", {"committee_sample_commitment_mismatch"}, "reports"),
    ("helper2", "shift-blind", _SHIFTED, "reports"),
    ("helper1", "shift-blind", _SHIFTED, "secagg"),
    # a helper's seed and blinding vector exist only in the secure-aggregation session
    ("helper1", "other-seed", {"committee_helper_audit_failed"}, "secagg"),
    ("helper2", "other-blind", {"committee_helper_audit_failed"}, "secagg"),
])
def test_a_deviating_member_ends_the_job_in_its_named_abort(keys, member, fault, reasons,
                                                            committee_input):
    assert fault in JOB_FAULTS["server" if member == "server" else "helper"]
    result, outcomes, helpers, transport = _job(keys, faults={member: fault}, wait=90.0,
                                                committee_input=committee_input)
    assert isinstance(result, AggregationAborted)
    assert result.reason in reasons, result
    # nothing of the round was opened to anyone
    assert all(r.get("passed") is None for r in committee_transcript(transport)
               if r["status"] != "completed")
    assert all(h["status"] != "finished" for h in helpers)
    if fault in ("force-sample", "redraw-sample", "bad-reveal", "equivocate-commitment",
                 "bad-signature"):
        # refused before any device was asked: no device contributed
        assert sum(o.votes for o in outcomes) == 0


@pytest.mark.parametrize("strategy, reason, accuser", [
    ("theta-at-target", "invalid_vote", "all"),     # checked on shares by all three
    ("replay-job", "replayed_report", "all"),       # bound to another job of the task
    ("wrong-helper", "undecryptable_part", "helper1"),  # helper 1's own accusation
    ("inconsistent", "inconsistent_part", "helper2"),   # its copy of c0 is not the server's
    ("wrong-length", "malformed_part", "server"),       # the server's part is too short
])
def test_a_corrupted_device_per_round_is_dropped_and_the_release_is_the_honest_one(
        keys, strategy, reason, accuser):
    import dataclasses

    from protocol.core.corruption import CorruptClients, corrupt_positions

    corrupt = CorruptClients(strategy, per_round=1, seed=7)
    result, outcomes, helpers, transport = _job(keys, corrupt=corrupt)
    assert not isinstance(result, AggregationAborted), result
    prep, rng = _prep()
    rounds = committee_transcript(transport)
    assert len(rounds) >= 2
    for r, h1, h2 in zip(rounds, helpers[0]["rounds"], helpers[1]["rounds"]):
        sample = np.asarray(r["sample"])
        bad = sample[corrupt_positions(corrupt, prep.config.task, r["round"], sample)]
        assert r["status"] == "completed" and len(bad) == 1
        # the corrupted device is dropped by name, at every member, and nobody else
        assert r["drops"] == [[int(bad[0]), reason, accuser]]
        assert r["dropped"] == h1["dropped"] == h2["dropped"] == {reason: 1}
        assert r["in_sum"] == sorted(set(r["sample"]) - {int(bad[0])})
    # the release is plaintext TrieHH's over the honest devices' votes (the corrupted
    # ones abstain) on the committee's samples
    plain = PlainTransport(samples=transport.samples)
    plain.corrupt = dataclasses.replace(corrupt, strategy="abstain")
    honest = TrieHH(prep.data, prep.alphabet, prep.config, plain, rng).result()
    assert honest.heavy_hitters == result.heavy_hitters
    assert honest.prefixes == result.prefixes
    assert {o.status for o in outcomes} == {"finished"}


class _Garbage(DeviceReports):
    """The round's first sampled device sends bytes that are no report, in a frame of
    the report's tag and a legal length."""

    def frames(self, member, task, seed, vote):  # noqa: ANN001, ANN201
        if member != task.sample[0]:
            return super().frames(member, task, seed, vote)
        from protocol.core.net.frames import HEADER

        body = b"\x93\x01\xd2" + bytes(range(40))
        return [HEADER.pack(len(body), 210) + body]


def test_a_device_that_sends_garbage_as_its_report_is_dropped(keys):
    result, outcomes, helpers, transport = _job(
        keys, reports=lambda hk, sk: _Garbage(hk, sk))
    assert not isinstance(result, AggregationAborted), result
    rounds = committee_transcript(transport)
    assert len(rounds) >= 2
    for r, h in zip(rounds, helpers[0]["rounds"]):
        # the server could not decode it: its own word, which every member records
        assert r["drops"] == [[r["sample"][0], "malformed_report", "server"]]
        assert h["dropped"] == {"malformed_report": 1}
        assert r["sample"][0] not in r["in_sum"] and len(r["in_sum"]) == len(r["sample"]) - 1
    # nothing crashed: every device and both helpers saw the job to its end
    assert {o.status for o in outcomes} == {"finished"}
    assert [h["status"] for h in helpers] == ["finished", "finished"]


def test_the_semi_honest_committee_job(keys):
    result, outcomes, helpers, transport = _job(keys, threat="semi-honest")
    assert not isinstance(result, AggregationAborted), result
    assert result.heavy_hitters
    assert [h["status"] for h in helpers] == ["finished", "finished"]
    assert not transport.server.beacons   # no beacon: the server draws


def test_a_device_refuses_a_sample_the_helpers_did_not_sign(keys):
    from protocol.core.sample_beacon import beacon_context, endorsement, sample_users
    from secagg.crypto import ed25519_sign

    verify, signing = tls.load_pki(keys / "helper1")
    policy = JobPolicy("t", POP, committee=True)
    seed = bytes(range(32))
    users = sample_users(seed, POP, 5).tolist()
    task = Task("t", 1, ("a", "b"), 2, True, 1, 0, 0, users)
    inst = bytes(range(16))
    statement = endorsement(beacon_context("t", 1, POP, 5), seed, inst)
    good1 = ed25519_sign(signing[POP], statement)
    forged = bytes(64)
    assert "sample_not_endorsed" in _proof_problem(
        SampleProof("t", 1, seed, (good1, forged), inst), task, policy, verify)
    assert "sample_not_endorsed" in _proof_problem(None, task, policy, verify)
    assert "another round" in _proof_problem(
        SampleProof("t", 2, seed, (good1, forged), inst), task, policy, verify)
    good2 = ed25519_sign(signing[POP + 1], statement) if signing[POP + 1] else None
    if good2 is None:  # helper 1's directory holds only its own key: sign as helper 2
        _, s2 = tls.load_pki(keys / "helper2")
        good2 = ed25519_sign(s2[POP + 1], statement)
    proof = SampleProof("t", 1, seed, (good1, good2), inst)
    assert _proof_problem(proof, task, policy, verify) is None
    # the same signatures do not vouch for the seed in another job instance
    other = SampleProof("t", 1, seed, (good1, good2), bytes(16))
    assert "sample_not_endorsed" in _proof_problem(other, task, policy, verify)
    # a device forced into the round: the seed selects another sample
    outside = next(u for u in range(POP) if u not in users)
    forced = Task("t", 1, ("a", "b"), 2, True, 1, 0, 0, sorted(users[1:] + [outside]))
    assert "sample_not_from_seed" in _proof_problem(proof, forced, policy, verify)


# ---------------------------------------------------------------- real processes
@pytest.mark.parametrize("fault, committee_input, corrupt", [
    (None, "reports", None),
    # one corrupted device per round, whose theta votes for one candidate the committee
    # drops as an invalid vote
    (None, "reports", "theta-at-target"),
    # the secure-aggregation-fed committee between processes: tested between parties
    # above; over processes on demand
    pytest.param(None, "secagg", None, marks=pytest.mark.slow),
    # the same refusal is tested between parties above; over processes it is on demand
    pytest.param(("server", "force-sample"), "reports", None, marks=pytest.mark.slow),
])
def test_net_run_committee_job_processes(fault, committee_input, corrupt):
    """``fedhh net run --job triehh --transport threshold``: the server, two helper
    processes and four device processes; honest, the release is plaintext TrieHH's on
    the committee's samples and every opened round is exactly the threshold rule over
    the devices' recomputed votes (with a corrupted device per round: over the honest
    devices' votes, the corrupted one dropped as ``invalid_vote`` in every round); with
    a deviating server the job ends in the named abort and no helper opened anything."""
    from protocol.core.corruption import CorruptClients
    from protocol.studies.runners.net_jobs import JobLoopbackOptions, run_job_loopback

    out = run_job_loopback(JobLoopbackOptions(
        dataset="zipf", users=200, processes=4, seed=3, theta=3, gamma=3.0, max_length=4,
        compare=fault is None, stage_seconds=10, join_seconds=90, timeout=400,
        transport="threshold", fault=fault, committee_input=committee_input,
        corrupt=None if corrupt is None else CorruptClients(corrupt, per_round=1)))
    assert out["left_behind"] == 0
    helpers = out["helpers"]
    if corrupt is not None:
        per_round = out["dropped_per_round"]
        assert len(per_round) >= 2
        for r in per_round:
            assert len(r["corrupted"]) == 1 and r["corrupted_counted"] == 0
            assert r["dropped"] == r["dropped_corrupted"] == {"invalid_vote": 1}
        assert out["simulation"]["honest_only"] is True
    if fault is None:
        assert out["server_error"] is None, out["server_error"]
        rounds = out["result"]["network"]["rounds"]
        assert len(rounds) >= 2 and all(r["status"] == "completed" for r in rounds)
        assert out["rounds_exact"] == [True] * len(rounds) and out["wrong_results"] == 0
        assert out["simulation"]["release_equal"] is True
        assert [h["status"] for h in helpers] == ["finished", "finished"]
        assert [r["passed"] for r in helpers[0]["rounds"]] == \
            [r["passed"] for r in helpers[1]["rounds"]]
    else:
        assert out["result"] is None
        assert [a["reason"] for a in out["aborted_rounds"]] == \
            ["committee_sample_not_from_beacon"]
        assert all(h["status"] == "aborted" and not h["rounds"] for h in helpers)


def test_the_committee_input_of_a_job_and_its_reports_binding():
    from protocol.core.net.committee_job import report_context, report_job_id

    assert JobPolicy("t", POP, committee=True).validated      # the default
    assert not JobPolicy("t", POP, committee=True, committee_input="secagg").validated
    assert not JobPolicy("t", POP, committee=True, threat="semi-honest").validated
    assert not JobPolicy("t", POP).validated                 # no committee, no reports
    with pytest.raises(ValueError):
        JobPolicy("t", POP, committee=True, committee_input="plain")
    with pytest.raises(ValueError):
        JobPolicy("t", POP, committee=True, min_valid_fraction=1.5)
    # the job instance: the round's beacon seed and the task, 16 bytes
    a, b = bytes(32), bytes([1]) + bytes(31)
    assert len(report_job_id("t", a)) == 16
    assert len({report_job_id("t", a), report_job_id("t", b), report_job_id("u", a)}) == 3
    ctx = report_context("t", 3, ("a", "b"), a)
    assert (ctx.task, ctx.job, ctx.round, ctx.d) == ("t", report_job_id("t", a), 3, 2)
    assert ctx.digest != report_context("t", 3, ("a", "c"), a).digest
    assert ctx.digest != report_context("t", 4, ("a", "b"), a).digest
    # a helper of a job with validated reports needs its report key; the seed and
    # blinding faults belong to the secure-aggregation-fed committee
    policy = JobPolicy("t", POP, committee=True)
    verify = [bytes(32)] * (POP + 2)
    for kwargs in ({}, {"report_secret": bytes(32), "fault": "other-seed"}):
        with pytest.raises(ValueError):
            asyncio.run(run_job_helper(1, "127.0.0.1", 1, policy, None, b"", ("127.0.0.1", 1),
                                       None, signing_key=bytes(32), verify_keys=verify,
                                       **kwargs))


def test_a_task_below_the_jobs_theta_or_with_another_sample_size_is_refused():
    from protocol.core.net.job import _task_problem

    policy = JobPolicy("t", POP, committee=True, min_theta=3, sample_size=5)
    ok = Task("t", 1, ("a", "b"), 3, False, 1, 0, 0, [1, 2, 3, 4, 5])
    assert _task_problem(ok, policy, 0) is None
    low = Task("t", 1, ("a", "b"), 2, False, 1, 0, 0, [1, 2, 3, 4, 5])
    assert _task_problem(low, policy, 0).startswith("theta_too_low")
    big = Task("t", 1, ("a", "b"), 3, False, 1, 0, 0, list(range(6)))
    assert _task_problem(big, policy, 0).startswith("sample_size_mismatch")


@pytest.mark.parametrize("reply, reason", [
    (("b-commit", b"short"), "committee_malformed_message"),   # a commitment's size
    (("b-sig", bytes(64)), "committee_malformed_message"),     # another step than due
    (("abort", "\u00ff bad".encode()), "committee_peer_aborted"),  # not a reason's name
    (("abort", b"sample_redrawn"), "committee_sample_redrawn"),  # a helper's own claim
])
def test_whatever_a_helper_connection_sends_the_server_names_the_abort(keys, reply, reason):
    """Two rogue helper connections answer the beacon's start with ``reply``: the
    server ends the job with a named reason, never an unexpected exception."""
    from protocol.core.net.client import connect
    from protocol.core.net.committee_net import CommitteeMessage
    from protocol.core.net.frames import close_writer, frame, read_message
    from protocol.core.net.messages import PROTOCOL_VERSION, Hello
    from protocol.core.net.committee_job import _helper_limits

    prep, rng = _prep()
    policy = JobPolicy(prep.config.task, prep.n, committee=True)
    verify, _ = tls.load_pki(keys / "server", signing=False)
    server = CommitteeJobServer(policy, tls.server_context(keys / "server"),
                                verify_keys=verify, stage_seconds=10, join_seconds=3)

    def start(port: int) -> None:
        async def rogue(index: int) -> None:
            ctx, pin = tls.client_context(keys / f"helper{index}")
            reader, writer, _ = await connect("127.0.0.1", port, ctx, pin,
                                              Hello(PROTOCOL_VERSION, POP + index - 1), 10)
            try:
                await read_message(reader, _helper_limits(policy))      # b-start
                writer.write(frame(CommitteeMessage(*reply)))
                await writer.drain()
                await asyncio.sleep(1)
            finally:
                await close_writer(writer)

        async def both() -> None:
            await asyncio.gather(rogue(1), rogue(2), return_exceptions=True)

        th = threading.Thread(target=lambda: asyncio.run(both()))
        th.start()
        start.thread = th

    # no device connects: the join window closes, the first beacon meets the rogues
    with pytest.raises(AggregationAborted) as err:
        with serving_job(server, start) as transport:
            TrieHH.at_server(prep.n, prep.alphabet, prep.config, transport, rng).result()
    start.thread.join(30)
    assert err.value.reason == reason


def test_the_named_abort_survives_a_slow_server(keys, monkeypatch):
    """Helper 1's audit of helper 2 fails while the server is still auditing helper 1;
    helper 1 relays its reason and leaves, so the server's next send meets a closed
    link. The server (and the job) still end in the helper's reason, the deviation,
    not in the broken link that followed it."""
    from protocol.core.net import threshold_net

    real = threshold_net.audit_helper
    slowed = []

    def slow_for_helper1(config, position, *args, **kwargs):
        if position == config.params.n - 2:  # the server auditing helper 1
            slowed.append(position)
            time.sleep(3.0)  # blocks the server's loop, as a loaded machine would
        return real(config, position, *args, **kwargs)

    monkeypatch.setattr(threshold_net, "audit_helper", slow_for_helper1)
    result, _, helpers, _ = _job(keys, faults={"helper2": "other-blind"}, wait=90.0,
                                 committee_input="secagg")
    assert slowed, "the server must have audited helper 1"
    assert isinstance(result, AggregationAborted)
    assert result.reason == "committee_helper_audit_failed", result
    assert [h["reason"] for h in helpers] == ["committee_helper_audit_failed"] * 2


@pytest.mark.parametrize("round_no", [1 << 63, (1 << 64) - 1])
def test_a_b_start_beyond_the_wires_round_range_is_a_named_refusal(round_no: int) -> None:
    """A b-start naming a round of 2^63 or more (which the beacon's context cannot hold)
    ends the helper with a named refusal, not a struct.error."""
    import struct as _struct

    from protocol.core.net.committee_job import _helper_beacon
    from protocol.core.sample_beacon import beacon_context

    class _Silent:
        async def send(self, *a):  # noqa: ANN002, ANN202 - never reached
            raise AssertionError("the helper must refuse before it sends")

        async def receive(self, *a):  # noqa: ANN002, ANN202
            raise AssertionError("the helper must refuse before it reads")

    policy = JobPolicy("t", POP, committee=True)
    start = _struct.pack(">QQ", round_no, 5) + bytes(32)
    with pytest.raises(AggregationAborted) as err:
        asyncio.run(_helper_beacon(1, start, policy, _Silent(), _Silent(), 0, bytes(32),
                                   None, None))
    assert err.value.reason == "committee_malformed_message"
    with pytest.raises(ValueError):
        beacon_context("t", round_no, POP, 5)


def test_a_server_that_leaves_after_the_beacon_is_named_and_cannot_restart(keys, tmp_path):
    """The server sees round 1's beacon and leaves the helpers without a word: each
    helper names it ``committee_job_abandoned_after_beacon`` (round 1) in its view and
    counts it in its ledger on disk; the next job of the task, with a new server and the
    helpers' ledgers read back from disk, is refused before any beacon (the default
    budget is 0), and no device votes."""
    from protocol.core.job_ledger import DeviceLedger, HelperLedger

    prep, _ = _prep()
    task = prep.config.task
    paths = {h: tmp_path / f"helper{h}" / "ledger.json" for h in (1, 2)}
    devices = DeviceLedger(tmp_path / "devices")
    result, outcomes, helpers, _ = _job(
        keys, faults={"server": "abandon-after-beacon"},
        ledgers={h: HelperLedger(p) for h, p in paths.items()}, device_ledger=devices)
    assert isinstance(result, AggregationAborted)
    assert result.reason == "committee_job_abandoned_after_beacon"
    for h in helpers:
        assert h["status"] == "aborted"
        assert h["reason"].startswith("committee_job_abandoned_after_beacon: round 1")
        (event,) = h["events"]
        assert event["event"] == "committee_job_abandoned_after_beacon"
        assert event["round"] == 1 and event["task"] == task
    assert sum(o.votes for o in outcomes) == 0
    for p in paths.values():  # on disk, as a restarted helper reads it
        back = HelperLedger(p)
        assert back.abandoned(task) == 1
        assert [j["status"] for j in back.jobs(task)] == ["abandoned"]
        assert back.jobs(task)[0]["beacons"] == {"1": "revealed"}
    result, outcomes, helpers, _ = _job(
        keys, ledgers={h: HelperLedger(p) for h, p in paths.items()},
        device_ledger=devices)
    assert isinstance(result, AggregationAborted)
    assert result.reason == "committee_abandon_budget_spent", result
    assert [h["reason"] for h in helpers] == ["committee_abandon_budget_spent"] * 2
    assert sum(o.votes for o in outcomes) == 0
    # with a budget of 1 the job opens, but round 1's sample may not be drawn again
    result, _, helpers, _ = _job(
        keys, ledgers={h: HelperLedger(p, max_abandoned=1) for h, p in paths.items()})
    assert isinstance(result, AggregationAborted)
    assert result.reason == "committee_sample_redrawn", result


def test_a_completed_job_is_recorded_and_the_devices_ledgers_hold_their_votes(keys,
                                                                              tmp_path):
    """An honest job over on-disk ledgers: both helpers record it completed with every
    beacon's round completed; every device that voted has its file, with its votes in
    the job's instance; a second connection cannot replay that instance to a device."""
    from protocol.core.job_ledger import DeviceLedger, HelperLedger

    prep, _ = _prep()
    task = prep.config.task
    devices = DeviceLedger(tmp_path / "devices")
    ledgers = {h: HelperLedger(tmp_path / f"h{h}.json") for h in (1, 2)}
    result, outcomes, helpers, transport = _job(keys, ledgers=ledgers,
                                                device_ledger=devices)
    assert not isinstance(result, AggregationAborted), result
    assert [h["status"] for h in helpers] == ["finished", "finished"]
    for h in (1, 2):
        (job,) = HelperLedger(tmp_path / f"h{h}.json").jobs(task)
        assert job["status"] == "completed" and job["instance"] == \
            transport.server.instance.hex()
        assert set(job["beacons"].values()) == {"completed"}
    voted = [o for o in outcomes if o.votes]
    assert voted
    fresh = DeviceLedger(tmp_path / "devices")
    for o in voted:
        assert fresh.votes(o.member, task) == o.votes
        assert fresh.known_instance(o.member, task, transport.server.instance)
