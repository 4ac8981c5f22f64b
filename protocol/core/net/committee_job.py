"""Jobs over the thresholding committee: a whole TrieHH run between real processes,
the server and two helpers deciding every round together.

A committee job is a job (:mod:`protocol.core.net.job`) whose two helpers connect to
the server once (``Hello`` with roster positions ``N`` and ``N + 1``, ``N`` the
population) and stay for every round, with their own mutually authenticated TLS link
between them (:func:`protocol.core.net.threshold_net.helper_link`). Each round:

1. **Beacon** (malicious model, the default). Server and helpers run the
   commit-then-reveal of :mod:`protocol.core.sample_beacon` over their connections:
   the server sends ``b-start`` (the round, the sample size, its commitment); each
   helper commits to its own OS value, sends the commitment to the server and, over the
   helpers' link, the server's commitment as it received it with its own (so a server
   that showed the helpers different commitments is caught:
   ``committee_sample_equivocated``); then every value is revealed and checked against
   its commitment (``committee_sample_commitment_mismatch``). A helper runs one beacon
   per round, rounds strictly increasing (``committee_sample_redrawn``). Each helper signs
   the round's context and seed (:func:`~protocol.core.sample_beacon.endorsement`) and
   the server checks both signatures.
2. **Task.** Each sampled device gets a
   :class:`~protocol.core.net.messages.SampleProof` (the seed, both signatures) and the
   :class:`~protocol.core.net.messages.Task`; it recomputes the sample from the seed and
   refuses a Task whose sample is another, or whose proof does not verify
   (``sample_not_from_seed``, ``sample_not_endorsed``). The helpers get the same Task
   and refuse it unless its sample is their beacon's (``committee_sample_not_from_beacon``).
3. **Reports** (``JobPolicy.committee_input == "reports"``, the default). Each sampled
   device answers the Task with its validated report (:class:`DeviceReports`: its vote
   shared among the three members, the helpers' parts sealed to their X25519 keys,
   bound to :func:`report_context`, signed); the server collects one frame per device
   until all sent or the stage deadline, then the three run the intake of
   :mod:`protocol.core.committee.intake` batch by batch (the server relays each helper
   its :class:`~protocol.core.committee.intake.ReportBatch`), the validity check and
   the verified comparison on the valid reports' sums
   (:func:`~protocol.core.net.committee_net.run_intake_member`, one member each).
   Every dropped report is named, with its accuser, in every member's record.
4. Or (``committee_input="secagg"``) the **session** among the sample and both helpers
   (required: a device refuses to unmask a sum without them), over ``F_p`` with the
   helpers' blinding inputs, as in :mod:`protocol.core.net.threshold_net`; then the
   **committee**: helper 2 replays the server's journal, helper 1 audits helper 2's
   exchange, the server audits helper 1 from its seed, and the three run the verified
   comparison. Either way only the pass bits (and the passing counts) are opened.

Under the semi-honest option there is no beacon (the server draws the sample), the
input is a secure-aggregation session and the committee compares over ``Z_{2^k}``. Any refusal or abort ends the round with its named
reason; the analyst's mechanism stops there (:class:`AggregationAborted`), and a helper
that refused leaves the job. ``JOB_FAULTS`` are the launcher's switches for a deviating
member.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import math
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from protocol.core import codec, wire_secagg
from protocol.core.codec import Bin, CodecError, Record, SessionLimits, Str
from protocol.core.committee import CommitteeAborted, ring_bits
from protocol.core.committee.intake import IntakeMember, batch_rows, report_limits
from protocol.core.committee.reports import (
    DeviceReport, ReportContext, Verdict, candidates_digest, make_report,
)
from protocol.core.contract import (
    AggregationAborted, AtClients, ContractError, Cost, Kind, Release, RoundResult,
    RoundSpec, Sample, Transport,
)
from protocol.core.job_ledger import HelperLedger, LedgerError, LedgerRefusal
from protocol.core.net.client import NETWORK_FAILURES, ClientOutcome, exchange, failure_outcome
from protocol.core.net.committee_net import (
    ABORT_STEP, MAX_STEP_BYTES, CommitteeLink, CommitteeMessage, intake_limits,
    pending_abort, relayed_reason, run_intake_member, send_abort,
)
from protocol.core.net.frames import HEADER, close_writer, frame, read_message
from protocol.core.net.job import JobPolicy, NetJobServer, _task_problem, round_spec, task_for
from protocol.core.net.messages import (
    JOB_INSTANCE_BYTES, PROTOCOL_VERSION, Bye, Hello, SampleProof, Task, Welcome, bye_limits,
    task_limits, welcome_limits,
)
from protocol.core.net.server import _Conn, _Session, send_and_close
from protocol.core.net.session import SessionRejected
from protocol.core.net.threshold_net import (
    _IgnoresInputCheck, _shifted, as_helper, helper_after_session, helper_client,
    mirrored_server, server_after_session,
)
from protocol.core.randomness import OsRandom
from protocol.core.sample_beacon import (
    MEMBERS, VALUE_BYTES, BeaconTranscript, SampleRejected, beacon_context, beacon_seed,
    check_transcript, commitment, endorsement, sample_users,
)
from protocol.core.net.signals import wait_for
from secagg.crypto import ed25519_sign, ed25519_verify
from secagg.errors import CryptoError
from secagg.server import SecAggServer

__all__ = ["JOB_FAULTS", "SECAGG_ONLY_FAULTS", "CommitteeJobServer",
           "CommitteeNetworkTransport", "run_job_helper", "committee_transcript",
           "report_job_id", "report_context", "DeviceReports"]

#: the launcher's switches for a deviating member of a committee job; each must end the
#: job in its named abort (docs/threshold.md)
JOB_FAULTS = {
    "server": ("shift-sum", "force-sample", "redraw-sample", "equivocate-commitment",
               "abandon-after-beacon"),
    "helper": ("shift-blind", "other-seed", "other-blind", "bad-reveal", "bad-signature"),
}
#: faults of the secure-aggregation-fed committee only (a helper's seed and blinding
#: vector); with validated reports (the default) a helper has neither. ``shift-sum`` and
#: ``shift-blind`` shift the member's first component of the counts either way.
SECAGG_ONLY_FAULTS = ("other-seed", "other-blind")

#: the beacon's messages carry at most this many bytes (a commitment, a value, a
#: signature, an abort reason)
_BEACON_BYTES = 256
#: the highest round a b-start may name: a Task's round field (and a SampleProof's)
#: holds 0..2^32
MAX_ROUND = 1 << 32
#: the job's opening step (server to helper: the job instance) and its answer
OPEN_STEP, OPENED_STEP = "j-open", "j-ok"


def _beacon_limits() -> SessionLimits:
    return SessionLimits({CommitteeMessage.TAG: Record((Str(1, MAX_STEP_BYTES),
                                                        Bin(0, _BEACON_BYTES)))})


def _task_bytes(policy: JobPolicy) -> int:
    """The longest encoded Task of ``policy``'s job (a bound for the helpers' reads)."""
    return 4096 + policy.max_candidates * 260 + min(policy.population, 1 << 22) * 6


def _helper_limits(policy: JobPolicy) -> SessionLimits:
    """What a helper accepts from the server between rounds: a committee message (a
    beacon step or the round's Task) or a Bye."""
    return SessionLimits({CommitteeMessage.TAG: Record((
        Str(1, MAX_STEP_BYTES), Bin(0, max(_BEACON_BYTES, _task_bytes(policy)))))}
    ).merged(bye_limits())


class _Stream:
    """One framed stream of committee messages with a deadline: the server's end of a
    helper connection, or one end of the helpers' link, between sessions."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 limits: SessionLimits, wait_seconds: float, member: str) -> None:
        self.reader, self.writer = reader, writer
        self.limits, self.wait_seconds, self.member = limits, wait_seconds, member

    async def send(self, step: str, payload: bytes = b"") -> None:
        try:
            self.writer.write(frame(CommitteeMessage(step, payload)))
            await wait_for(self.writer.drain(), self.wait_seconds)
        except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError) as exc:
            relayed = await pending_abort(self.reader, self.limits)
            if relayed is not None:  # the peer had stopped, and said why
                raise AggregationAborted(f"committee_{relayed}",
                                         f"{self.member} refused the round") from None
            raise AggregationAborted("committee_missing_message",
                                     f"{step} to {self.member}: {type(exc).__name__}") from None

    async def receive(self, step: str, size: int | None = None) -> bytes:
        """The payload of the next message, which must be ``step`` (or ``abort``: the
        peer refused, with its reason).

        Raises:
            AggregationAborted: the peer refused (``committee_<its reason>``), or sent
                something else, or nothing in time (``committee_missing_message``).
        """
        try:
            msg, _ = await wait_for(read_message(self.reader, self.limits),
                                    self.wait_seconds)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                OSError, ssl.SSLError, CodecError) as exc:
            raise AggregationAborted("committee_missing_message",
                                     f"{step} from {self.member}: {type(exc).__name__}"
                                     ) from None
        if not isinstance(msg, CommitteeMessage):
            raise AggregationAborted("committee_malformed_message",
                                     f"{type(msg).__name__} from {self.member}, {step} expected")
        if msg.step == ABORT_STEP:
            raise AggregationAborted(f"committee_{relayed_reason(msg.payload)}",
                                     f"{self.member} refused the round")
        if msg.step != step or (size is not None and len(msg.payload) != size):
            raise AggregationAborted("committee_malformed_message",
                                     f"{self.member} sent {msg.step!r}, {step!r} expected")
        return msg.payload


def _start_payload(round_no: int, size: int, server_commitment: bytes) -> bytes:
    return struct.pack(">QQ", round_no, size) + server_commitment


# ------------------------------------------------------------ validated reports
def report_job_id(task: str, seed: bytes) -> bytes:
    """The job instance a round's validated reports are bound to
    (:attr:`~protocol.core.committee.reports.ReportContext.job`): 16 bytes of SHA-256
    of a label, the task and the round's beacon seed. Every party of the round holds
    that seed (the server and the helpers ran the beacon, each sampled device checked
    it in its :class:`~protocol.core.net.messages.SampleProof`), and no party can know
    it before the beacon: a report made for any other round or job is refused
    (``replayed_report``)."""
    t = task.encode("utf-8")
    return hashlib.sha256(b"fedhh/net/report-job/v1\x00" + struct.pack(">Q", len(t)) + t
                          + bytes(seed)).digest()[:16]


def report_context(task: str, round_no: int, candidates: Sequence[str], seed: bytes
                   ) -> ReportContext:
    """The round's :class:`~protocol.core.committee.reports.ReportContext`, as the
    server, both helpers and every sampled device derive it."""
    return ReportContext(task, report_job_id(task, seed), int(round_no),
                         candidates_digest(candidates), len(candidates))


class _Roster:
    """``user -> Ed25519 verify key`` of the population (the helpers' positions, and
    anything else, are no device: ``KeyError``)."""

    def __init__(self, verify_keys: Sequence[bytes], population: int) -> None:
        self._keys, self._n = verify_keys, int(population)

    def __getitem__(self, user: int) -> bytes:
        if type(user) is not int or not 0 <= user < self._n:
            raise KeyError(user)
        return self._keys[user]


def _report_problem(body: bytes, user: int, d: int) -> str | None:
    """Why the server refuses the frame body a device sent as its report (``None``: it
    decodes as a report of that device): the server's own word, recorded as
    ``malformed_report``."""
    try:
        report = codec.decode(body, DeviceReport, report_limits(d))
    except CodecError as exc:
        return f"undecodable: {exc}"[:160]
    if report.user != user:
        return f"names device {report.user}, not the connection's"
    return None


class DeviceReports:
    """What the devices of one process send in a validated round: each sampled
    device's :class:`~protocol.core.committee.reports.DeviceReport` of its one-hot vote
    (zero to abstain), bound to the round (:func:`report_context`), its parts for the
    helpers encrypted to ``helper_keys`` (the X25519 keys the roster publishes), signed
    with its roster key.

    ``corrupt`` (:class:`~protocol.core.corruption.CorruptClients`, a simulation's
    attackers): the devices the round's draw corrupts
    (:func:`~protocol.core.corruption.corrupt_positions` over the Task's sample, the
    same on every side) send their strategy's report instead: a vector strategy's
    vector as the vote, a report strategy's frames (:meth:`_attack`). A device can
    replay only what it saw: another device's report of this round made in this
    process (none yet: its own).
    """

    def __init__(self, helper_keys: tuple[bytes, bytes], signing_keys: Sequence[Any], *,
                 rand: Any = None, corrupt: Any = None) -> None:
        if len(helper_keys) != 2 or any(type(k) is not bytes or len(k) != 32
                                        for k in helper_keys):
            raise ValueError("the helpers' report keys are two 32-byte X25519 keys")
        self.helper_keys = (helper_keys[0], helper_keys[1])
        self.signing_keys = signing_keys
        self.rand = rand if rand is not None else OsRandom()
        self.corrupt = corrupt
        self._made: dict[tuple[str, int], list[DeviceReport]] = {}

    def corrupted(self, task: Task) -> frozenset[int]:
        """The devices of ``task``'s round that the draw corrupts."""
        if self.corrupt is None:
            return frozenset()
        from protocol.core.corruption import corrupt_positions

        sample = np.asarray(task.sample, dtype=np.int64)
        return frozenset(int(u) for u in sample[corrupt_positions(
            self.corrupt, task.job, task.round, sample)])

    def frames(self, member: int, task: Task, seed: bytes, vote: np.ndarray) -> list[bytes]:
        """The frames ``member`` sends the server (tag 210 each) for ``vote``, its
        one-hot vector over ``task``'s candidates.

        Raises:
            ValueError: no signing key for ``member``, or a vote of the wrong shape.
        """
        sk = self.signing_keys[member] if 0 <= member < len(self.signing_keys) else None
        if sk is None:
            raise ValueError(f"no signing key for device {member}")
        ctx = report_context(task.job, task.round, task.candidates, seed)
        vote = np.asarray(vote, dtype=np.uint64)
        c = self.corrupt
        bad = member in self.corrupted(task)
        if bad and not c.on_reports:
            from protocol.core.corruption import P61, corrupt_vector

            vote = (corrupt_vector(c, task.candidates, task.theta or None) % P61
                    ).astype(np.uint64)
        report = make_report(ctx, member, vote, sk, self.helper_keys, self.rand)
        key = (task.job, int(task.round))
        if key not in self._made:  # only this round's reports are kept
            self._made = {key: []}
        made = self._made[key]
        if bad and c.on_reports:
            bodies = self._attack(ctx, task, report, vote, sk, made)
        else:
            bodies = [codec.encode(report)]
        made.append(report)
        return [HEADER.pack(len(b), DeviceReport.TAG) + b for b in bodies]

    def _attack(self, ctx: ReportContext, task: Task, honest: DeviceReport,
                vote: np.ndarray, sk: bytes, made: list[DeviceReport]) -> list[bytes]:
        """A report strategy's frame bodies, as the in-process transport's corrupted
        devices make them (:func:`protocol.core.corruption.forge_reports`; a device
        replays only reports its own process made)."""
        from protocol.core.corruption import forge_reports

        return [codec.encode(r) for r in forge_reports(
            self.corrupt.strategy, ctx, honest, vote, sk, self.helper_keys, self.rand, made)]


# ---------------------------------------------------------------------------- server
@dataclass
class _Helper:
    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    open: bool = True
    gone: asyncio.Event = field(default_factory=asyncio.Event)


class CommitteeJobServer(NetJobServer):
    """A job server whose rounds run with the committee's two helpers
    (:mod:`protocol.core.net.committee_job`).

    Args:
        policy: the job, with ``committee=True``.
        verify_keys: the roster's ``N + 2`` Ed25519 keys (the helpers' last).
        fault: one of ``JOB_FAULTS["server"]`` (the launcher's deviating server).
        Others as :class:`~protocol.core.net.job.NetJobServer`.

    Raises:
        ValueError: not a committee policy, or a roster of another size.
    """

    def __init__(self, policy: JobPolicy, ssl_context: ssl.SSLContext, *,
                 verify_keys: Sequence[bytes] | None = None, fault: str | None = None,
                 **kwargs: Any) -> None:
        if not policy.committee:
            raise ValueError("a committee job server needs a committee policy")
        n = policy.population
        if verify_keys is None or len(verify_keys) != n + 2:
            raise ValueError(f"the committee job needs the roster's {n + 2} verification "
                             "keys (the population's and the two helpers')")
        if fault is not None and fault not in JOB_FAULTS["server"]:
            raise ValueError(f"server faults are {', '.join(JOB_FAULTS['server'])}")
        super().__init__(policy, ssl_context,
                         verify_keys=list(verify_keys[:n]) if policy.threat == "malicious"
                         else None, **kwargs)
        self.roster = tuple(verify_keys)
        self.helper_keys = (verify_keys[n], verify_keys[n + 1])
        self.fault = fault
        self._helpers: dict[int, _Helper] = {}
        #: (round, 32-byte seed) of every beacon this server ran, in order
        self.beacons: list[tuple[int, bytes]] = []
        #: this job's instance id: the helpers record it in their ledgers when the job
        #: opens and sign it with every seed; a device refuses a SampleProof of another
        self.instance = bytes(self.rand.token_bytes(JOB_INSTANCE_BYTES))
        self._opened = False

    def _everyone_here(self) -> bool:
        return super()._everyone_here() and len(self._helpers) == 2

    async def _join(self, hello: Hello, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        n = self.policy.population
        if hello.client not in (n, n + 1):
            await super()._join(hello, reader, writer)
            return
        index = hello.client - n + 1
        reason = None
        if not self._joining:
            reason = "the job is running; it accepts no new parties"
        elif hello.version != PROTOCOL_VERSION:
            reason = "version_mismatch"
        elif index in self._helpers:
            reason = f"helper {index} is connected already"
        if reason is not None:
            self.refused.append((hello.client, reason))
            await send_and_close(writer, Bye("refused", reason))
            return
        helper = _Helper(index, reader, writer)
        self._helpers[index] = helper
        self.events({"event": "helper", "helper": index, "phase": "joined"})
        if self._everyone_here() and self._all_joined is not None:
            self._all_joined.set()
        await helper.gone.wait()  # the stream is the committee's until the job ends

    def _helper(self, index: int) -> _Helper:
        h = self._helpers.get(index)
        if h is None or not h.open:
            raise AggregationAborted("threshold_helper_missing",
                                     f"helper {index} is not connected")
        return h

    def _stream(self, index: int, limits: SessionLimits) -> _Stream:
        h = self._helper(index)
        return _Stream(h.reader, h.writer, limits, self.stage_seconds, f"helper {index}")

    async def _lose_helpers(self, reason: str = "", detail: str = "",
                            round_no: int | None = None) -> None:
        """Close both helpers' connections (the job cannot go on). When the abort
        (``reason``, ``detail``) is a member that left, the one still connected is told
        so first (:func:`protocol.core.net.departures.departure`)."""
        from protocol.core.net.departures import departure

        left = departure(reason, detail, round_no)
        for h in self._helpers.values():
            if h.open:
                h.open = False
                if left is not None:
                    await send_and_close(h.writer, Bye("aborted", left.bye()))
                await close_writer(h.writer)
                h.gone.set()

    # ---------------------------------------------------------------- the job
    async def open_job(self) -> None:
        """Open the job with both helpers (once, before its first round): ``j-open``
        with the job instance, each helper records it in its ledger and answers
        ``j-ok`` -- or refuses (``committee_abandon_budget_spent``,
        ``committee_job_still_open``, ``committee_job_reused``, ``committee_ledger_...``).

        Raises:
            AggregationAborted: a helper missing or refusing; the helpers are dropped.
        """
        if self._opened:
            return
        try:
            streams = {i: self._stream(i, _beacon_limits()) for i in (1, 2)}
            for s in streams.values():
                await s.send(OPEN_STEP, self.instance)
            await asyncio.gather(*(s.receive(OPENED_STEP, 0) for s in streams.values()))
        except AggregationAborted as exc:
            await self._lose_helpers(exc.reason, exc.detail)
            self.events({"event": "job", "phase": "refused", "reason": exc.reason})
            raise
        self._opened = True
        self.events({"event": "job", "phase": "opened", "instance": self.instance.hex()})

    async def abandon(self) -> None:
        """Leave the helpers without a Bye (the deviating server's restart: the
        helpers record ``committee_job_abandoned_after_beacon``)."""
        await self._lose_helpers()

    # ---------------------------------------------------------------- beacon
    async def beacon(self, task: str, round_no: int, size: int) -> tuple[Sample, SampleProof]:
        """Run the round's beacon with both helpers; the sample and its proof.

        Raises:
            AggregationAborted: a helper missing or refusing, a commitment that does not
                open, a signature that does not verify (``committee_...``). The helpers
                are dropped from the job: it cannot go on.
        """
        n = self.policy.population
        await self.open_job()
        try:
            return await self._beacon(task, round_no, size, n)
        except AggregationAborted as exc:
            await self._lose_helpers(exc.reason, exc.detail, round_no)
            self._ended({"round": round_no, "status": "aborted", "reason": exc.reason})
            raise

    async def _beacon(self, task: str, round_no: int, size: int, n: int
                      ) -> tuple[Sample, SampleProof]:
        ctx = beacon_context(task, round_no, n, size)
        v0 = bytes(self.rand.token_bytes(VALUE_BYTES))
        c0 = commitment(ctx, "server", v0)
        streams = {i: self._stream(i, _beacon_limits()) for i in (1, 2)}
        for i, s in streams.items():
            shown = c0
            if self.fault == "equivocate-commitment" and i == 2:
                # the deviating server shows helper 2 another commitment than helper 1
                shown = commitment(ctx, "server", bytes(self.rand.token_bytes(VALUE_BYTES)))
            await s.send("b-start", _start_payload(round_no, size, shown))
        c1, c2 = await asyncio.gather(streams[1].receive("b-commit", 32),
                                      streams[2].receive("b-commit", 32))
        for s in streams.values():
            await s.send("b-reveal", v0)
        v1, v2 = await asyncio.gather(streams[1].receive("b-reveal", VALUE_BYTES),
                                      streams[2].receive("b-reveal", VALUE_BYTES))
        values = (v0, v1, v2)
        t = BeaconTranscript(ctx, (c0, c1, c2), values,
                             beacon_seed(ctx, dict(zip(MEMBERS, values))))
        try:
            check_transcript(t, ctx)
        except SampleRejected as exc:
            raise AggregationAborted(f"committee_{exc.reason}", exc.detail) from None
        sigs = await asyncio.gather(streams[1].receive("b-sig", 64),
                                    streams[2].receive("b-sig", 64))
        for i, (key, sig) in enumerate(zip(self.helper_keys, sigs), start=1):
            try:
                ed25519_verify(key, endorsement(ctx, t.seed, self.instance), sig)
            except CryptoError:
                raise AggregationAborted("committee_sample_not_endorsed",
                                         f"helper {i}'s signature does not verify") from None
        self.beacons.append((round_no, t.seed))
        self.events({"event": "beacon", "round": round_no, "size": size,
                     "seed": t.seed.hex()})
        return (Sample(sample_users(t.seed, n, size), t, n, committee=True),
                SampleProof(task, round_no, t.seed, tuple(sigs), self.instance))

    # ---------------------------------------------------------------- a round
    async def run_committee_round(self, spec: RoundSpec, sample: Sequence[int],
                                  proof: SampleProof | None) -> dict[str, Any]:
        """One round: Tasks (with the proof) to the sampled devices and to the helpers,
        the session among them, the committee's comparison. A JSON-ready report with
        ``passed`` and ``counts`` (candidate indices and their opened counts) when it
        completed. Never raises for anything a device or helper does."""
        wall0, cpu0 = time.perf_counter(), time.process_time()
        sample = [int(s) for s in sample]
        m = len(sample)
        out: dict[str, Any] = {"round": spec.round, "status": "aborted", "reason": "",
                               "sample": sample, "candidates": list(spec.candidates)}
        try:
            await self.open_job()
            task = task_for(spec, sample)
            netspec = self.policy.session(spec, sample)
            params = netspec.params()
            streams = {i: self._stream(i, _helper_limits(self.policy)) for i in (1, 2)}
        except AggregationAborted as exc:
            out["reason"] = exc.reason
            return self._ended(out)
        try:  # the helpers check the Task first: a round they refuse reaches no device
            for s in streams.values():
                await s.send("task", codec.encode(task))
            await asyncio.gather(*(s.receive("t-ok", 0) for s in streams.values()))
        except AggregationAborted as exc:
            await self._lose_helpers(exc.reason, exc.detail, spec.round)
            out["reason"], out["detail"] = exc.reason, exc.detail
            return self._ended(out)
        if self.policy.validated:
            return await self._report_round(spec, sample, proof, task, out, wall0, cpu0)
        head = (frame(proof) if proof is not None else b"") + frame(task)
        session, config, welcome, task_bytes = await self._open_round(netspec, params, sample,
                                                                      head)
        helper_conns = []
        for i in (1, 2):
            h = self._helpers[i]
            hc = _Conn(m + i - 1, h.reader, h.writer)
            session.conns[m + i - 1] = hc
            helper_conns.append(hc)
        self._current = session
        for hc in helper_conns:
            hc.task = asyncio.ensure_future(self._read_loop(hc))
        joined = sorted(session.conns)
        self.events({"event": "session", "phase": "round", "round": spec.round,
                     "sample": m, "connected": len(joined) - 2,
                     "session": config.session.hex()})
        await self._write_all([session.conns[j] for j in joined], welcome)
        malicious = netspec.malicious
        verify = self.policy.session_keys(self.roster, sample) if malicious else None
        srv = (mirrored_server(m)(config, verify) if malicious
               else SecAggServer(config, verify_keys=None))

        async def stop_helper_readers() -> None:  # the committee reads their streams next
            for hc in helper_conns:
                hc.kept = True
                if hc.task is not None:
                    hc.task.cancel()
            await asyncio.gather(*(hc.task for hc in helper_conns if hc.task is not None),
                                 return_exceptions=True)

        status, reason, stages = await self._session_stages(session, srv, stop_helper_readers)
        for i, hc in zip((1, 2), helper_conns):
            if not hc.open:  # its reader closed it: the helper is gone for the job
                self._helpers[i].open = False
                self._helpers[i].gone.set()
        in_sum = sorted(srv.sets.get("U3", ()))
        out.update({"status": status, "reason": reason, "degree": params.degree,
                    "threshold": params.threshold, "joined": len(joined) - 2,
                    "in_sum": [sample[j] for j in in_sum if j < m],
                    "stages": [vars(s) for s in stages],
                    "refused": [[c, why] for c, why in session.refused][:20]})
        cpu_committee = 0.0
        lost = helper_lost_in_session(srv.sets, helper_conns, m)
        if lost is not None and (status != "completed" or not {m, m + 1} <= set(in_sum)):
            # the session went on (or aborted) without a helper: that is the round's
            # cause, named with the step (the devices abort at the survivor set)
            out["status"], out["reason"] = "aborted", "threshold_helper_missing"
            out["detail"] = (lost + (f"; the session: {reason}" if reason else ""))[:200]
        elif status == "completed" and not {m, m + 1} <= set(in_sum):
            out["status"], out["reason"] = "aborted", "threshold_helper_missing"
        elif status == "completed":
            assert srv.result is not None
            t0 = time.process_time()
            kept = {m + i - 1: (self._helpers[i].reader, self._helpers[i].writer)
                    for i in (1, 2)}
            theta = int(spec.theta or 0)
            try:
                member = await server_after_session(
                    srv, srv.result, m, spec.domain_size, theta, bool(spec.reveal_counts),
                    malicious, ring_bits(m, theta), kept, verify,
                    self.fault if self.fault == "shift-sum" else None, self.stage_seconds)
            except CommitteeAborted as exc:
                out["status"], out["reason"] = "aborted", f"committee_{exc.reason}"
                for _, w in kept.values():
                    await send_abort(w, exc.reason)
            else:
                out["passed"] = [int(i) for i in np.flatnonzero(member.passed)]
                out["counts"] = (None if member.counts is None
                                 else [int(c) for c in member.counts])
                out["committee_bytes_sent"] = member.bytes_sent
            cpu_committee = time.process_time() - t0
        if out["status"] != "completed" or any(not h.open for h in self._helpers.values()):
            await self._lose_helpers(out["reason"], out.get("detail", ""), spec.round)
        out.update({
            "wall_seconds": time.perf_counter() - wall0,
            "server_cpu_seconds": time.process_time() - cpu0,
            "committee_cpu_seconds": cpu_committee,
            "bytes_up": sum(s.bytes_up for s in stages),
            "bytes_down": sum(s.bytes_down for s in stages) + len(welcome) * len(joined)
            + task_bytes})
        return self._ended(out)

    async def _report_round(self, spec: RoundSpec, sample: list[int],
                            proof: SampleProof | None, task: Task, out: dict[str, Any],
                            wall0: float, cpu0: float) -> dict[str, Any]:
        """A round whose input is the devices' validated reports (the default under
        the malicious model): the SampleProof and Task to the sampled devices, their
        reports collected until each sent one or the stage deadline passed, then the
        committee's intake, validity check and comparison as member 0
        (:func:`~protocol.core.net.committee_net.run_intake_member`) over the helpers'
        connections. The report adds who was counted (``in_sum``) and every dropped
        report (``drops``: device, reason, accuser; ``dropped``: by reason)."""
        out["committee_input"] = "reports"
        if proof is None:
            out["reason"] = "committee_sample_not_from_beacon"
            await self._lose_helpers()
            return self._ended(out)
        m, d = len(sample), spec.domain_size
        ctx = report_context(spec.task, int(spec.round), spec.candidates, proof.seed)
        bodies, collect, task_bytes = await self._collect_reports(
            spec, sample, frame(proof) + frame(task), d)
        rows = batch_rows(d, m)
        refusals: list[list[Any]] = []

        def relay(number: int) -> tuple[list[bytes], list[tuple[int, int]]]:
            raw, refused = [], []
            for user in sample[number * rows:(number + 1) * rows]:
                body = bodies.get(user)
                if body is None:
                    continue  # missing: every member records it at the end
                why = _report_problem(body, user, d)
                if why is None:
                    raw.append(body)
                else:
                    refused.append((user, Verdict.MALFORMED_REPORT))
                    refusals.append([user, why])
            return raw, refused

        member = IntakeMember(0, ctx, sample, _Roster(self.roster, self.policy.population))
        limits = intake_limits(rows)
        h1, h2 = self._helpers.get(1), self._helpers.get(2)
        theta = int(spec.theta or 0)
        t0 = time.process_time()
        try:
            if h1 is None or h2 is None or not (h1.open and h2.open):
                raise CommitteeAborted("threshold_helper_missing", 0, "a helper left")
            to_h1 = CommitteeLink(0, 1, h1.reader, h1.writer, limits, self.stage_seconds)
            to_h2 = CommitteeLink(0, 2, h2.reader, h2.writer, limits, self.stage_seconds)
            shift = self.fault == "shift-sum"
            res = await run_intake_member(
                member, theta, reveal_counts=bool(spec.reveal_counts),
                batches=math.ceil(m / rows), rows=rows,
                min_valid=self.policy.min_valid(spec, m), prev=to_h2, next=to_h1,
                relay=relay, rand=self.rand,
                components=(lambda a, b: (_shifted(a, theta), b)) if shift else None,
                party_class=_IgnoresInputCheck if shift else None)
        except CommitteeAborted as exc:
            out["status"] = "aborted"
            out["reason"] = (exc.reason if exc.reason in ("too_few_valid_reports",
                                                          "threshold_helper_missing")
                             else f"committee_{exc.reason}")
            out["detail"] = str(exc)[:200]
            for h in (h1, h2):
                if h is not None and h.open:
                    await send_abort(h.writer, exc.reason)
        else:
            out["status"] = "completed"
            out["passed"] = [int(i) for i in np.flatnonzero(res.passed)]
            out["counts"] = None if res.counts is None else [int(c) for c in res.counts]
            out["committee_bytes_sent"] = res.bytes_sent
            out["in_sum"] = res.view["valid_users"]
        cpu_committee = time.process_time() - t0
        out.update({
            "joined": collect["connected"], "reports": collect["received"],
            "dropped": member.drop_summary(),
            "drops": [[int(u), r, a] for u, r, a in member.dropped],
            "refused": ([[c, why] for c, why in collect["refused"]] + refusals)[:20],
            "stages": [collect["stage"]], "degree": None, "threshold": None,
            "in_sum": out.get("in_sum", []),
        })
        if out["status"] != "completed":
            await self._lose_helpers(out["reason"], out.get("detail", ""), spec.round)
        out.update({
            "wall_seconds": time.perf_counter() - wall0,
            "server_cpu_seconds": time.process_time() - cpu0,
            "committee_cpu_seconds": cpu_committee,
            "bytes_up": collect["stage"]["bytes_up"],
            "bytes_down": task_bytes,
            "committee_bytes_sent": out.get("committee_bytes_sent", 0)})
        return self._ended(out)

    async def _collect_reports(self, spec: RoundSpec, sample: list[int], head: bytes,
                               d: int) -> tuple[dict[int, bytes], dict[str, Any], int]:
        """``head`` (the round's SampleProof and Task) to the sampled devices that are
        connected, then one frame from each (tag 210, bounded by the round's report
        size before its body is read; the body undecoded, for the committee to judge)
        until all sent or the stage deadline passed. A device that is late or sends a
        second frame has its connection closed and stays out of the job. Returns
        ``(device -> frame body, what happened, bytes of head written)``."""
        t0 = time.perf_counter()
        # the stage opens before the Task goes out: a device answers the Task at once
        session = _Session(None, report_limits(d), b"", raw=True)  # type: ignore[arg-type]
        for j, user in enumerate(sample):
            conn = self._members.get(user)
            if conn is not None and conn.open:
                conn.client, conn.may_send = j, True
                session.conns[j] = conn
        self._current = session
        bodies: dict[int, bytes] = {}
        size_up, task_bytes, expected = 0, 0, len(session.conns)
        try:
            task_bytes = await self._write_all(list(session.conns.values()), head)
            self.events({"event": "session", "phase": "reports", "round": spec.round,
                         "sample": len(sample), "connected": len(session.conns)})
            waiting = {j for j, c in session.conns.items() if c.open}
            deadline = t0 + self.stage_seconds
            while waiting:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    conn, body, size = await wait_for(session.queue.get(), left)
                except asyncio.TimeoutError:
                    break
                j = conn.client
                if session.conns.get(j) is not conn:
                    continue
                waiting.discard(j)
                if body is None:  # disconnected (or refused by its reader)
                    continue
                bodies[sample[j]] = bytes(body)
                size_up += size
            for j in sorted(waiting):  # past the deadline: out of the job
                await self._drop_member(session.conns[j])
        finally:
            self._current = None
            for c in session.conns.values():
                c.client, c.may_send = -1, False
        stage = {"round": 0, "name": "reports", "expected": expected,
                 "received": len(bodies), "seconds": time.perf_counter() - t0,
                 "bytes_up": size_up, "bytes_down": task_bytes}
        self.events({"event": "stage", **stage})
        return bodies, {"connected": len(session.conns), "received": len(bodies),
                        "refused": session.refused, "stage": stage}, task_bytes

    def _ended(self, out: dict[str, Any]) -> dict[str, Any]:
        self.events({"event": "done", "round": out["round"], "status": out["status"],
                     "reason": out["reason"]})
        return out

    async def finish(self, status: str = "finished", reason: str = "") -> None:
        for h in self._helpers.values():
            if h.open:
                with contextlib.suppress(Exception):
                    h.writer.write(frame(Bye(status, reason[:120])))
                    await wait_for(h.writer.drain(), 5)
        await self._lose_helpers()
        await super().finish(status, reason)

    def transport(self, loop: asyncio.AbstractEventLoop) -> "CommitteeNetworkTransport":
        return CommitteeNetworkTransport(self, loop)


def helper_lost_in_session(sets: dict[str, Any], conns: Sequence[_Conn], m: int
                           ) -> str | None:
    """Which helper a committee round's secure-aggregation session lost, and at which
    step, as the members name a peer that stopped (``"masked_input from helper 1:
    IncompleteReadError"``, read back by :func:`protocol.core.net.departures.
    departure`); ``None``: both helpers took part in every stage that ran.

    ``sets``: the session's survivor sets (``U1`` .. ``U5``: who sent its message in
    each stage); ``conns``: helper 1's and helper 2's connections in the session
    (positions ``m`` and ``m + 1``). The step is the first stage whose set lacks the
    helper, or, for a helper whose connection closed during a stage that did not
    finish, that stage; how: its connection closed (it left, or said why in its Bye),
    or the server dropped it at the deadline (silent)."""
    from protocol.core.net.server import STAGE_NAMES

    names = [f"U{k}" for k in range(1, 6) if f"U{k}" in sets]
    for i, conn in zip((1, 2), conns):
        pos = m + i - 1
        stage = next((k for k, name in enumerate(names) if pos not in sets[name]), None)
        if stage is None and conn.open:
            continue  # in every set that exists, still connected
        if stage is None:
            stage = min(len(names), 4)
        how = ("IncompleteReadError" if conn.left_at is not None or conn.gave_up
               else "TimeoutError" if not conn.open else "NotInSurvivorSet")
        return f"{STAGE_NAMES[stage]} from helper {i}: {how}"
    return None


class CommitteeNetworkTransport(Transport):
    """The thresholding committee with real device and helper processes, as a transport
    whose devices vote themselves. :meth:`draw_sample` runs the committee's beacon
    (malicious model); :meth:`run_round` takes :class:`~protocol.core.contract.AtClients`
    and refuses users that are not the beacon's sample; the release is what the
    committee opened."""

    name = "threshold-network"
    kinds = frozenset({Kind.VOTE})
    contributions_at_clients = True

    def __init__(self, server: CommitteeJobServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop
        self._proofs: dict[tuple[str, int], tuple[Sample, SampleProof]] = {}
        #: per round: the server's report (JSON-ready)
        self.reports: list[dict[str, Any]] = []

    @property
    def samples(self) -> dict[tuple[str, int], Sample]:
        """``(task, round) -> Sample`` the committee's beacon drew (to rerun the job in
        plaintext on the same samples: :class:`~protocol.core.transports.plain.
        PlainTransport`)."""
        return {k: v[0] for k, v in self._proofs.items()}

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def draw_sample(self, task: str, round_no: int, population: int, size: int,
                    rng: np.random.Generator) -> Sample:
        if population != self.server.policy.population:
            raise ContractError(f"the job's population is {self.server.policy.population}")
        if self.server.policy.threat != "malicious":
            # the semi-honest option: the server draws (it picks the sample)
            return super().draw_sample(task, round_no, population, size, rng)
        drawn = self._call(self.server.beacon(task, round_no, size))
        if self.server.fault == "abandon-after-beacon":
            # the deviating server has seen the sample and leaves to start again
            self._call(self.server.abandon())
            raise AggregationAborted("committee_job_abandoned_after_beacon",
                                     f"the server left after round {round_no}'s beacon")
        if self.server.fault == "redraw-sample":
            # the deviating server asks for a second draw of the same round
            drawn = self._call(self.server.beacon(task, round_no, size))
        self._proofs[(task, int(round_no))] = drawn
        return drawn[0]

    def run_round(self, spec: RoundSpec, contributions: Any,
                  rng: np.random.Generator) -> RoundResult:
        if not isinstance(contributions, AtClients):
            raise ContractError("the committee's devices compute their own contributions: "
                                f"give it AtClients, not {type(contributions).__name__}")
        policy = self.server.policy
        users = np.sort(contributions.validate(spec, policy.population))
        need = max(spec.min_participants, policy.min_clients)
        if users.size < need:
            raise AggregationAborted("too_few_participants",
                                     f"{users.size} sampled, the round needs {need}")
        proof = None
        if policy.sample_proof:
            drawn = self._proofs.get((spec.task, int(spec.round)))
            if drawn is None:
                raise AggregationAborted("committee_sample_not_from_beacon",
                                         "no beacon was run for this round")
            proof = drawn[1]
            if self.server.fault == "force-sample":
                users = _forced(users, policy.population)
            elif not np.array_equal(users, drawn[0].users):
                raise AggregationAborted("committee_sample_not_from_beacon",
                                         "the round's users are not the beacon's sample")
        report = self._call(self.server.run_committee_round(spec, users.tolist(), proof))
        self.reports.append(report)
        if report["status"] != "completed":
            reason = report["reason"] or "aborted"
            if not reason.startswith(("committee_", "threshold_", "too_few_valid")):
                reason = f"secagg_{reason}"
            detail = f"over the network, round {spec.round}"
            if report.get("dropped"):
                detail += "; dropped: " + ", ".join(
                    f"{v} {k}" for k, v in sorted(report["dropped"].items()))
            raise AggregationAborted(reason, detail)
        contributed = len(report["in_sum"])
        if contributed < spec.min_participants:
            raise AggregationAborted("too_few_participants",
                                     f"{contributed} contributions, {spec.min_participants} "
                                     "required")
        passed, counts = report["passed"], report["counts"]
        if spec.reveal_counts:
            released = {spec.candidates[i]: int(c) for i, c in zip(passed, counts)}
        else:
            released = {spec.candidates[i]: int(spec.theta or 0) for i in passed}
        release = Release(spec, contributed, counts=released)
        view = {k: report[k] for k in ("sample", "in_sum", "passed", "counts")}
        if proof is not None:
            view["sample_seed"] = proof.seed.hex()
        views: dict[str, Any] = {"server": view}
        if report.get("committee_input") == "reports":
            # what every member saw of the intake: each dropped report, its reason and
            # the member whose check it was ("all": a check every member made)
            view["input"] = "reports"
            view["intake"] = {"dropped": report["drops"], "reports": report["reports"]}
            views["clients"] = {"dropped": dict(report["dropped"]), "sampled": len(users),
                                "valid": contributed}
        cost = Cost({"server": report["server_cpu_seconds"]}, bytes_up=report["bytes_up"],
                    bytes_down=report["bytes_down"])
        return RoundResult(release, views, cost)


def _forced(users: np.ndarray, population: int) -> np.ndarray:
    """The deviating server's sample: its first user replaced by the lowest position
    outside the sample (a device it wants in the round)."""
    outside = np.setdiff1d(np.arange(min(population, users.size + 1)), users)
    forced = users.copy()
    forced[0] = outside[0]
    return np.sort(forced)


def committee_transcript(transport: CommitteeNetworkTransport) -> list[dict[str, Any]]:
    """What the server learned in each round, JSON-ready: the sample, the devices in the
    sum (with validated reports: whose report was valid), the passing candidates and
    their opened counts (never a count below theta), and with validated reports every
    dropped report (``drops``: device, reason, accuser; ``dropped``: by reason)."""
    return [{k: r.get(k) for k in ("round", "status", "reason", "candidates", "sample",
                                   "in_sum", "passed", "counts", "committee_input",
                                   "dropped", "drops")} for r in transport.reports]


# ---------------------------------------------------------------------------- helpers
async def run_job_helper(index: int, host: str, port: int, policy: JobPolicy,
                         ssl_context: ssl.SSLContext, pin: bytes, link: tuple[str, int],
                         link_context: ssl.SSLContext, *, signing_key: bytes | None = None,
                         verify_keys: Sequence[bytes] | None = None, rand: Any = None,
                         wait_seconds: float = 300.0, fault: str | None = None,
                         report_secret: bytes | None = None,
                         ledger: HelperLedger | None = None) -> dict[str, Any]:
    """Helper ``index`` of a committee job: the link to the other helper, one connection
    to the server, then every round (beacon, Task check, then the validated reports'
    intake, validity check and comparison, or with ``committee_input="secagg"`` the
    session and comparison) until the server's ``Bye("finished")``. A JSON-ready
    outcome: ``status``, ``reason`` and per round what this helper saw opened (and the
    reports dropped). ``report_secret``: this helper's X25519 report key (validated
    reports). ``ledger``: the helper's :class:`~protocol.core.job_ledger.HelperLedger`
    (its jobs and beacons per task, on disk in a deployment; default: one in memory for
    this call). The outcome's ``events`` name a job the server abandoned after a beacon
    (``committee_job_abandoned_after_beacon``, with the round). Never raises for
    anything the server, the other helper or the network does.

    Raises:
        ValueError: bad arguments (not a committee policy, a missing key, a fault of
            the other committee input).
    """
    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    if not policy.committee:
        raise ValueError("a job helper needs a committee policy")
    malicious = policy.threat == "malicious"
    n = policy.population
    if verify_keys is None or len(verify_keys) != n + 2:
        raise ValueError(f"a job helper needs the roster's {n + 2} verification keys")
    if malicious and signing_key is None:
        raise ValueError("a helper signs under the malicious model: give its signing key")
    if fault is not None and fault not in JOB_FAULTS["helper"]:
        raise ValueError(f"helper faults are {', '.join(JOB_FAULTS['helper'])}")
    if policy.validated:
        if type(report_secret) is not bytes or len(report_secret) != 32:
            raise ValueError("a helper of a job with validated reports needs its 32-byte "
                             "X25519 report key")
        if fault in SECAGG_ONLY_FAULTS:
            raise ValueError(f"{fault} needs the secure-aggregation-fed committee "
                             "(committee_input='secagg')")
    rand = rand if rand is not None else OsRandom()
    ledger = ledger if ledger is not None else HelperLedger()
    out: dict[str, Any] = {"helper": index, "status": "disconnected", "reason": "",
                           "committee_input": "reports" if policy.validated else "secagg",
                           "rounds": [], "events": []}
    return await as_helper(
        index, n + index - 1, host, port, ssl_context, pin, link, link_context, wait_seconds,
        out, lambda l_reader, l_writer, reader, writer: _helper_rounds(
            index, policy, reader, writer, l_reader, l_writer, verify_keys, signing_key, rand,
            wait_seconds, fault, out, report_secret, ledger))


async def _helper_rounds(index: int, policy: JobPolicy, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter, l_reader: asyncio.StreamReader,
                         l_writer: asyncio.StreamWriter, verify_keys: Sequence[bytes],
                         signing_key: bytes | None, rand: Any, wait_seconds: float,
                         fault: str | None, out: dict[str, Any],
                         report_secret: bytes | None = None,
                         ledger: HelperLedger | None = None) -> dict[str, Any]:
    """The job's opening (``j-open``: the instance into the ledger), then every round,
    until the server's Bye or an abort (``out`` filled). However the job ends it is
    closed in the ledger; one that ends with a revealed beacon whose round did not
    complete is recorded (and returned in ``out["events"]``) as
    ``committee_job_abandoned_after_beacon``. Network failures are named in ``out``;
    nothing else escapes but the project's own exceptions."""
    ledger = ledger if ledger is not None else HelperLedger()
    out.setdefault("events", [])
    peer = _Stream(l_reader, l_writer, _beacon_limits(), wait_seconds,
                   f"helper {3 - index}")
    between = _helper_limits(policy)
    try:
        instance = await _helper_open(reader, between, policy, ledger, wait_seconds)
        if isinstance(instance, Bye):  # the server's Bye before the job opened
            return _bye(out, instance)
        try:
            await wait_for(_send_step(writer, OPENED_STEP), wait_seconds)
        except BaseException:
            ledger.close_job(policy.job, "aborted", "", "the server left at the opening")
            raise
    except AggregationAborted as exc:
        out["status"], out["reason"] = "aborted", exc.reason
        why = exc.reason.removeprefix("committee_")
        await send_abort(writer, why)
        await send_abort(l_writer, why)
        return out
    except (LedgerError, *NETWORK_FAILURES) as exc:
        if isinstance(exc, LedgerError):
            out["status"], out["reason"] = "aborted", str(exc)[:200]
        else:
            out["status"], out["reason"] = failure_outcome(exc, wait_seconds)
        return out
    out["job"] = instance.hex()
    status, how = "aborted", ""
    last_round = -1
    try:
        while True:
            msg, _ = await wait_for(read_message(reader, between), wait_seconds)
            if isinstance(msg, Bye):
                status = "completed" if msg.status == "finished" else "aborted"
                how = f"the server's Bye {msg.status}"
                return _bye(out, msg)
            server = _Stream(reader, writer, _beacon_limits(), wait_seconds, "the server")
            try:
                rnd = await _helper_round(index, msg, policy, server, peer, reader, writer,
                                          (l_reader, l_writer), last_round, verify_keys,
                                          signing_key, rand, wait_seconds, fault,
                                          report_secret, ledger, instance)
            except AggregationAborted as exc:
                out["status"], out["reason"] = "aborted", exc.reason
                how = exc.reason
                why = exc.reason.removeprefix("committee_")
                await send_abort(writer, why)
                await send_abort(l_writer, why)
                return out
            out["rounds"].append(rnd)
            if rnd["status"] != "completed":
                out["status"], out["reason"] = "aborted", rnd["reason"]
                how = rnd["reason"]
                return out
            if policy.sample_proof:
                _ledger_call(ledger.round_completed, policy.job, rnd["round"])
            last_round = rnd["round"]
    except AggregationAborted as exc:  # the ledger could not record a completed round
        out["status"], out["reason"] = "aborted", exc.reason
        how = exc.reason
        return out
    except NETWORK_FAILURES as exc:
        out["status"], out["reason"] = failure_outcome(exc, wait_seconds)
        how = f"the server's connection: {out['status']} ({out['reason']})"
        return out
    finally:
        _close_job(ledger, policy.job, status, how, out)


def _bye(out: dict[str, Any], msg: Bye) -> dict[str, Any]:
    out["status"], out["reason"] = msg.status, msg.reason
    return out


def _close_job(ledger: HelperLedger, task: str, status: str, how: str,
               out: dict[str, Any]) -> None:
    """Close the job in the ledger; an abandoned-after-beacon event goes into ``out``
    (and names the outcome when the server simply left)."""
    try:
        event = ledger.close_job(task, status, out.get("reason", ""), how)
    except LedgerError as exc:
        out["status"], out["reason"] = "aborted", str(exc)[:200]
        return
    if event is not None:
        out["events"].append(event)
        if out["status"] in ("disconnected", "server_silent", "finished"):
            # the server simply left (or said it finished): that is the event
            out["reason"] = (f"committee_job_abandoned_after_beacon: round {event['round']} "
                             f"({out['status']}: {out['reason']})")[:200]
            out["status"] = "aborted"


async def _send_step(writer: asyncio.StreamWriter, step: str, payload: bytes = b"") -> None:
    writer.write(frame(CommitteeMessage(step, payload)))
    await writer.drain()


async def _helper_open(reader: asyncio.StreamReader, between: SessionLimits,
                       policy: JobPolicy, ledger: HelperLedger, wait_seconds: float
                       ) -> bytes | Bye:
    """The job's first message, ``j-open`` with the 16-byte instance, recorded in the
    ledger (or the server's Bye, if it ended the job before it opened).

    Raises:
        AggregationAborted: another message (``committee_malformed_message``), or the
            ledger refuses (``committee_abandon_budget_spent``, ``committee_job_reused``,
            ``committee_job_still_open``) or cannot be used (``ledger_...``).
    """
    msg, _ = await wait_for(read_message(reader, between), wait_seconds)
    if isinstance(msg, Bye):
        return msg
    if not isinstance(msg, CommitteeMessage) or msg.step != OPEN_STEP \
            or len(msg.payload) != JOB_INSTANCE_BYTES:
        step = getattr(msg, "step", type(msg).__name__)
        raise _refuse("malformed_message", f"{step!r} where the job's opening (j-open with "
                      f"a {JOB_INSTANCE_BYTES}-byte instance) was expected")
    _ledger_call(ledger.open_job, policy.job, bytes(msg.payload))
    return bytes(msg.payload)


def _ledger_call(fn: Any, *args: Any) -> None:
    """A ledger step; its refusal or failure as the round's named abort."""
    try:
        fn(*args)
    except LedgerRefusal as exc:
        raise _refuse(exc.reason, exc.detail) from None
    except LedgerError as exc:
        raise AggregationAborted(exc.reason, str(exc)[:200]) from None


def _refuse(reason: str, detail: str) -> AggregationAborted:
    return AggregationAborted(f"committee_{reason}", detail)


async def _helper_beacon(index: int, start: bytes, policy: JobPolicy, server: _Stream,
                         peer: _Stream, last_round: int, signing_key: bytes, rand: Any,
                         fault: str | None, ledger: HelperLedger | None = None,
                         instance: bytes = bytes(JOB_INSTANCE_BYTES)
                         ) -> tuple[int, np.ndarray, bytes]:
    """This helper's part of a round's beacon; ``(round, sample, seed)``. Every field
    of ``b-start`` is checked before use (48 bytes: a round in ``0..2^32``, what a
    Task can name; a size the job allows; a commitment), the beacon is recorded in the
    ledger before this helper commits (one per task and round) and its reveal before
    the value goes out.

    Raises:
        AggregationAborted: a check failed (the reason names it).
    """
    if type(start) is not bytes or len(start) != 16 + 32:
        raise _refuse("malformed_message", "b-start is round, size and a commitment")
    round_no, size = struct.unpack(">QQ", start[:16])
    c0 = start[16:]
    if not 0 <= round_no <= MAX_ROUND:  # a round no Task or SampleProof can name
        raise _refuse("malformed_message",
                      f"b-start names round {round_no}, beyond 2^32 (a Task's round range)")
    if round_no <= last_round:
        raise _refuse("sample_redrawn", f"a beacon for round {last_round} was already run")
    if not policy.min_clients <= size <= policy.population or (
            policy.sample_size and size != policy.sample_size):
        raise _refuse("sample_size_mismatch",
                      f"a sample of {size} of {policy.population}"
                      + (f", the job's is {policy.sample_size}" if policy.sample_size else ""))
    ctx = beacon_context(policy.job, round_no, policy.population, size)
    if ledger is not None:
        _ledger_call(ledger.begin_beacon, policy.job, int(round_no))
    me = MEMBERS[index]
    mine = bytes(rand.token_bytes(VALUE_BYTES))
    c_mine = commitment(ctx, me, mine)
    await server.send("b-commit", c_mine)
    await peer.send("b-peer", c0 + c_mine)
    got = await peer.receive("b-peer", 64)
    if not hmac.compare_digest(got[:32], c0):
        raise _refuse("sample_equivocated",
                      "the server showed the helpers different commitments")
    c_other = got[32:]
    v0 = await server.receive("b-reveal", VALUE_BYTES)
    revealed = bytes(rand.token_bytes(VALUE_BYTES)) if fault == "bad-reveal" else mine
    if ledger is not None:  # from here on the server can compute the sample
        _ledger_call(ledger.revealed, policy.job, int(round_no))
    await server.send("b-reveal", revealed)
    await peer.send("b-reveal", revealed)
    v_other = await peer.receive("b-reveal", VALUE_BYTES)
    commits = {"server": c0, me: c_mine, MEMBERS[3 - index]: c_other}
    values = {"server": v0, me: mine, MEMBERS[3 - index]: v_other}
    t = BeaconTranscript(ctx, tuple(commits[k] for k in MEMBERS),
                         tuple(values[k] for k in MEMBERS),
                         beacon_seed(ctx, values))
    try:
        check_transcript(t, ctx)
    except SampleRejected as exc:
        raise _refuse(exc.reason, exc.detail) from None
    signed = bytes(32) if fault == "bad-signature" else t.seed  # a helper signing garbage
    await server.send("b-sig", ed25519_sign(signing_key, endorsement(ctx, signed, instance)))
    return int(round_no), sample_users(t.seed, policy.population, size), t.seed


async def _helper_round(index: int, first: Any, policy: JobPolicy, server: _Stream,
                        peer: _Stream, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter, link: tuple[Any, Any], last_round: int,
                        verify_keys: Sequence[bytes], signing_key: bytes | None, rand: Any,
                        wait_seconds: float, fault: str | None,
                        report_secret: bytes | None = None,
                        ledger: HelperLedger | None = None,
                        instance: bytes = bytes(JOB_INSTANCE_BYTES)) -> dict[str, Any]:
    """One round as helper ``index``: the beacon (malicious model), the Task's check,
    the session, the comparison. A JSON-ready record of the round.

    Raises:
        AggregationAborted: a refusal before the session (the reason names it).
    """
    if not isinstance(first, CommitteeMessage):
        raise _refuse("malformed_message", "a committee message was expected")
    malicious = policy.threat == "malicious"
    beacon_round, users, seed = -1, None, b""
    if malicious:
        if first.step != "b-start":
            raise _refuse("sample_not_from_beacon", "a round without the committee's beacon")
        assert signing_key is not None
        beacon_round, users, seed = await _helper_beacon(index, first.payload, policy,
                                                         server, peer, last_round,
                                                         signing_key, rand, fault, ledger,
                                                         instance)
        task_payload = await _receive_task(reader, policy, wait_seconds)
    elif first.step == "task":
        task_payload = first.payload
    else:
        raise _refuse("malformed_message", f"{first.step!r} where a Task was expected")
    try:
        task = codec.decode(task_payload, limits=task_limits(
            policy.population, policy.max_candidates, policy.max_dim))
    except CodecError as exc:
        raise _refuse("malformed_message", f"the Task: {exc}") from None
    if not isinstance(task, Task):
        raise _refuse("malformed_message", "not a Task")
    problem = _task_problem(task, policy, last_round)
    if problem is not None:
        raise _refuse(problem.split(":")[0], problem)
    if malicious and (task.round != beacon_round or not np.array_equal(
            np.asarray(task.sample, dtype=np.int64), users)):
        raise _refuse("sample_not_from_beacon",
                      "the Task's sample is not the one this round's beacon selected")
    try:
        spec = round_spec(task)
        netspec = policy.session(spec, task.sample)
    except ContractError as exc:
        raise _refuse("bad_task", str(exc)) from None
    m = len(task.sample)
    await server.send("t-ok")
    record: dict[str, Any] = {"round": task.round, "status": "aborted", "reason": "",
                              "sample": len(task.sample)}
    if policy.validated:
        assert report_secret is not None
        return await _helper_report_round(index, task, spec, policy, seed, reader, writer,
                                          link, verify_keys, report_secret, rand,
                                          wait_seconds, fault, record)
    welcome, _ = await wait_for(read_message(reader, welcome_limits()), wait_seconds)
    if isinstance(welcome, Bye):
        record["reason"] = f"server_{welcome.status}: {welcome.reason}"
        return record
    assert isinstance(welcome, Welcome)
    try:
        config = netspec.accept(welcome)
    except (SessionRejected, AggregationAborted) as exc:
        raise _refuse("session_rejected", str(exc)) from None
    theta = int(spec.theta or 0)
    k = ring_bits(m, theta)
    keys = policy.session_keys(verify_keys, task.sample) if malicious else None
    machine, seed, blind = helper_client(config, m + index - 1, malicious, spec.domain_size,
                                         k, rand, signing_key if malicious else None, keys,
                                         fault)
    session = ClientOutcome(m + index - 1, "disconnected")
    await exchange(reader, writer, machine, wire_secagg.client_limits(config), session,
                   wait_seconds=wait_seconds)
    if session.status != "completed":
        from protocol.core.net.job import missing_helpers

        record["reason"] = missing_helpers(machine) or session.reason or session.status
        return record
    try:
        member = await helper_after_session(
            index, m, spec.domain_size, theta, bool(spec.reveal_counts), malicious, k, config,
            machine, seed, blind, (reader, writer), link, keys,
            fault if fault in ("shift-blind", "other-seed") else None, rand, wait_seconds)
    except CommitteeAborted as exc:
        raise _refuse(exc.reason, str(exc)) from None
    names = spec.candidates
    idx = np.flatnonzero(member.passed)
    record.update({"status": "completed", "passed": sorted(names[i] for i in idx),
                   "release": None if member.counts is None else
                   {names[i]: int(c) for i, c in zip(idx, member.counts)}})
    return record


async def _helper_report_round(index: int, task: Task, spec: RoundSpec, policy: JobPolicy,
                               seed: bytes, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter, link: tuple[Any, Any],
                               verify_keys: Sequence[bytes], report_secret: bytes, rand: Any,
                               wait_seconds: float, fault: str | None,
                               record: dict[str, Any]) -> dict[str, Any]:
    """Helper ``index``'s part of a validated round after it accepted the Task: the
    intake of the server's report batches, the validity check and the comparison
    (:func:`~protocol.core.net.committee_net.run_intake_member`), its links the server's
    connection and the helpers' own. The round's record: what was opened, and every
    report dropped (by reason; ``drops``: device, reason, accuser).

    Raises:
        AggregationAborted: a check failed (the reason names it).
    """
    m, d = len(task.sample), spec.domain_size
    ctx = report_context(spec.task, int(spec.round), spec.candidates, seed)
    member = IntakeMember(index, ctx, task.sample, _Roster(verify_keys, policy.population),
                          report_secret)
    rows = batch_rows(d, m)
    limits = intake_limits(rows)
    server_link = CommitteeLink(index, 0, reader, writer, limits, wait_seconds)
    helper_link = CommitteeLink(index, 3 - index, *link, limits, wait_seconds)
    prev, next_ = (server_link, helper_link) if index == 1 else (helper_link, server_link)
    theta = int(spec.theta or 0)
    shift = fault == "shift-blind"
    try:
        res = await run_intake_member(
            member, theta, reveal_counts=bool(spec.reveal_counts),
            batches=math.ceil(m / rows), rows=rows, min_valid=policy.min_valid(spec, m),
            prev=prev, next=next_, rand=rand,
            components=(lambda a, b: (_shifted(a, theta), b)) if shift else None,
            party_class=_IgnoresInputCheck if shift else None)
    except CommitteeAborted as exc:
        reason = exc.reason if exc.reason == "too_few_valid_reports" else \
            f"committee_{exc.reason}"
        raise AggregationAborted(reason, str(exc)) from None
    names = spec.candidates
    idx = np.flatnonzero(res.passed)
    record.update({"status": "completed", "passed": sorted(names[i] for i in idx),
                   "release": None if res.counts is None else
                   {names[i]: int(c) for i, c in zip(idx, res.counts)},
                   "valid": member.valid_count, "dropped": member.drop_summary(),
                   "accusations": dict(member.view["accusations"]),
                   "bytes_sent": res.bytes_sent})
    return record


async def _receive_task(reader: asyncio.StreamReader, policy: JobPolicy,
                        wait_seconds: float) -> bytes:
    try:
        msg, _ = await wait_for(read_message(reader, _helper_limits(policy)),
                                wait_seconds)
    except CodecError as exc:
        raise _refuse("malformed_message", f"the Task: {exc}") from None
    if isinstance(msg, CommitteeMessage) and msg.step == "task":
        return msg.payload
    if isinstance(msg, CommitteeMessage) and msg.step in ("b-start",):
        raise _refuse("sample_redrawn", "a second beacon before the round's Task")
    if isinstance(msg, CommitteeMessage) and msg.step == ABORT_STEP:
        raise _refuse(relayed_reason(msg.payload), "the server stopped the round")
    raise _refuse("malformed_message", "the round's Task was expected")

