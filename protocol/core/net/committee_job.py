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
3. **Session** among the sample and both helpers (required: a device refuses to unmask
   a sum without them), over ``F_p`` with the helpers' blinding inputs, as in
   :mod:`protocol.core.net.threshold_net`.
4. **Committee.** Helper 2 replays the server's journal, helper 1 audits helper 2's
   exchange, the server audits helper 1 from its seed, and the three run the verified
   comparison; only the pass bits (and the passing counts) are opened.

Under the semi-honest option there is no beacon (the server draws the sample) and the
committee compares over ``Z_{2^k}``. Any refusal or abort ends the round with its named
reason; the analyst's mechanism stops there (:class:`AggregationAborted`), and a helper
that refused leaves the job. ``JOB_FAULTS`` are the launcher's switches for a deviating
member.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from protocol.core import codec, wire_secagg
from protocol.core.codec import Bin, CodecError, Record, SessionLimits, Str
from protocol.core.committee import CommitteeAborted, ring_bits
from protocol.core.contract import (
    AggregationAborted, AtClients, ContractError, Cost, Kind, Release, RoundResult,
    RoundSpec, Sample, Transport,
)
from protocol.core.net.client import ClientOutcome, exchange
from protocol.core.net.committee_net import (
    ABORT_STEP, MAX_STEP_BYTES, CommitteeMessage, pending_abort, relayed_reason, send_abort,
)
from protocol.core.net.frames import close_writer, frame, read_message
from protocol.core.net.job import JobPolicy, NetJobServer, _task_problem, round_spec, task_for
from protocol.core.net.messages import (
    PROTOCOL_VERSION, Bye, Hello, SampleProof, Task, Welcome, bye_limits, task_limits,
    welcome_limits,
)
from protocol.core.net.server import _Conn, send_and_close
from protocol.core.net.session import SessionRejected
from protocol.core.net.threshold_net import (
    as_helper, helper_after_session, helper_client, mirrored_server, server_after_session,
)
from protocol.core.randomness import OsRandom
from protocol.core.sample_beacon import (
    MEMBERS, VALUE_BYTES, BeaconTranscript, SampleRejected, beacon_context, beacon_seed,
    check_transcript, commitment, endorsement, sample_users,
)
from secagg.crypto import ed25519_sign, ed25519_verify
from secagg.errors import CryptoError
from secagg.server import SecAggServer

__all__ = ["JOB_FAULTS", "CommitteeJobServer", "CommitteeNetworkTransport",
           "run_job_helper", "committee_transcript"]

#: the launcher's switches for a deviating member of a committee job; each must end the
#: job in its named abort (docs/threshold.md)
JOB_FAULTS = {
    "server": ("shift-sum", "force-sample", "redraw-sample", "equivocate-commitment"),
    "helper": ("shift-blind", "other-seed", "other-blind", "bad-reveal", "bad-signature"),
}

#: the beacon's messages carry at most this many bytes (a commitment, a value, a
#: signature, an abort reason)
_BEACON_BYTES = 256


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
            await asyncio.wait_for(self.writer.drain(), self.wait_seconds)
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
            msg, _ = await asyncio.wait_for(read_message(self.reader, self.limits),
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

    async def _lose_helpers(self) -> None:
        for h in self._helpers.values():
            if h.open:
                h.open = False
                await close_writer(h.writer)
                h.gone.set()

    # ---------------------------------------------------------------- beacon
    async def beacon(self, task: str, round_no: int, size: int) -> tuple[Sample, SampleProof]:
        """Run the round's beacon with both helpers; the sample and its proof.

        Raises:
            AggregationAborted: a helper missing or refusing, a commitment that does not
                open, a signature that does not verify (``committee_...``). The helpers
                are dropped from the job: it cannot go on.
        """
        n = self.policy.population
        try:
            return await self._beacon(task, round_no, size, n)
        except AggregationAborted as exc:
            await self._lose_helpers()
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
                ed25519_verify(key, endorsement(ctx, t.seed), sig)
            except CryptoError:
                raise AggregationAborted("committee_sample_not_endorsed",
                                         f"helper {i}'s signature does not verify") from None
        self.beacons.append((round_no, t.seed))
        self.events({"event": "beacon", "round": round_no, "size": size,
                     "seed": t.seed.hex()})
        return (Sample(sample_users(t.seed, n, size), t, n, committee=True),
                SampleProof(task, round_no, t.seed, tuple(sigs)))

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
            await self._lose_helpers()
            out["reason"] = exc.reason
            return self._ended(out)
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
        if status == "completed" and not {m, m + 1} <= set(in_sum):
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
            await self._lose_helpers()
        out.update({
            "wall_seconds": time.perf_counter() - wall0,
            "server_cpu_seconds": time.process_time() - cpu0,
            "committee_cpu_seconds": cpu_committee,
            "bytes_up": sum(s.bytes_up for s in stages),
            "bytes_down": sum(s.bytes_down for s in stages) + len(welcome) * len(joined)
            + task_bytes})
        return self._ended(out)

    def _ended(self, out: dict[str, Any]) -> dict[str, Any]:
        self.events({"event": "done", "round": out["round"], "status": out["status"],
                     "reason": out["reason"]})
        return out

    async def finish(self, status: str = "finished", reason: str = "") -> None:
        for h in self._helpers.values():
            if h.open:
                with contextlib.suppress(Exception):
                    h.writer.write(frame(Bye(status, reason[:120])))
                    await asyncio.wait_for(h.writer.drain(), 5)
        await self._lose_helpers()
        await super().finish(status, reason)

    def transport(self, loop: asyncio.AbstractEventLoop) -> "CommitteeNetworkTransport":
        return CommitteeNetworkTransport(self, loop)


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
            if not reason.startswith(("committee_", "threshold_")):
                reason = f"secagg_{reason}"
            raise AggregationAborted(reason, f"over the network, round {spec.round}")
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
        cost = Cost({"server": report["server_cpu_seconds"]}, bytes_up=report["bytes_up"],
                    bytes_down=report["bytes_down"])
        return RoundResult(release, {"server": view}, cost)


def _forced(users: np.ndarray, population: int) -> np.ndarray:
    """The deviating server's sample: its first user replaced by the lowest position
    outside the sample (a device it wants in the round)."""
    outside = np.setdiff1d(np.arange(min(population, users.size + 1)), users)
    forced = users.copy()
    forced[0] = outside[0]
    return np.sort(forced)


def committee_transcript(transport: CommitteeNetworkTransport) -> list[dict[str, Any]]:
    """What the server learned in each round, JSON-ready: the sample, the devices in the
    sum, the passing candidates and their opened counts (never a count below theta)."""
    return [{k: r.get(k) for k in ("round", "status", "reason", "candidates", "sample",
                                   "in_sum", "passed", "counts")} for r in transport.reports]


# ---------------------------------------------------------------------------- helpers
async def run_job_helper(index: int, host: str, port: int, policy: JobPolicy,
                         ssl_context: ssl.SSLContext, pin: bytes, link: tuple[str, int],
                         link_context: ssl.SSLContext, *, signing_key: bytes | None = None,
                         verify_keys: Sequence[bytes] | None = None, rand: Any = None,
                         wait_seconds: float = 300.0, fault: str | None = None
                         ) -> dict[str, Any]:
    """Helper ``index`` of a committee job: the link to the other helper, one connection
    to the server, then every round (beacon, Task check, session, comparison) until the
    server's ``Bye("finished")``. A JSON-ready outcome: ``status``, ``reason`` and per
    round what this helper saw opened. Never raises for anything the server, the other
    helper or the network does.

    Raises:
        ValueError: bad arguments (not a committee policy, a missing key).
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
    rand = rand if rand is not None else OsRandom()
    out: dict[str, Any] = {"helper": index, "status": "disconnected", "reason": "",
                           "rounds": []}
    return await as_helper(
        index, n + index - 1, host, port, ssl_context, pin, link, link_context, wait_seconds,
        out, lambda l_reader, l_writer, reader, writer: _helper_rounds(
            index, policy, reader, writer, l_reader, l_writer, verify_keys, signing_key, rand,
            wait_seconds, fault, out))


async def _helper_rounds(index: int, policy: JobPolicy, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter, l_reader: asyncio.StreamReader,
                         l_writer: asyncio.StreamWriter, verify_keys: Sequence[bytes],
                         signing_key: bytes | None, rand: Any, wait_seconds: float,
                         fault: str | None, out: dict[str, Any]) -> dict[str, Any]:
    """Every round of the job, until the server's Bye or an abort (``out`` filled)."""
    peer = _Stream(l_reader, l_writer, _beacon_limits(), wait_seconds,
                   f"helper {3 - index}")
    between = _helper_limits(policy)
    last_round = -1
    while True:
        msg, _ = await asyncio.wait_for(read_message(reader, between), wait_seconds)
        if isinstance(msg, Bye):
            out["status"], out["reason"] = msg.status, msg.reason
            return out
        server = _Stream(reader, writer, _beacon_limits(), wait_seconds, "the server")
        try:
            rnd = await _helper_round(index, msg, policy, server, peer, reader, writer,
                                      (l_reader, l_writer), last_round, verify_keys,
                                      signing_key, rand, wait_seconds, fault)
        except AggregationAborted as exc:
            out["status"], out["reason"] = "aborted", exc.reason
            why = exc.reason.removeprefix("committee_")
            await send_abort(writer, why)
            await send_abort(l_writer, why)
            return out
        out["rounds"].append(rnd)
        if rnd["status"] != "completed":
            out["status"], out["reason"] = "aborted", rnd["reason"]
            return out
        last_round = rnd["round"]


def _refuse(reason: str, detail: str) -> AggregationAborted:
    return AggregationAborted(f"committee_{reason}", detail)


async def _helper_beacon(index: int, start: bytes, policy: JobPolicy, server: _Stream,
                         peer: _Stream, last_round: int, signing_key: bytes, rand: Any,
                         fault: str | None) -> tuple[int, np.ndarray]:
    """This helper's part of a round's beacon; ``(round, sample)``.

    Raises:
        AggregationAborted: a check failed (the reason names it).
    """
    if len(start) != 16 + 32:
        raise _refuse("malformed_message", "b-start is round, size and a commitment")
    round_no, size = struct.unpack(">QQ", start[:16])
    c0 = start[16:]
    if round_no <= last_round:
        raise _refuse("sample_redrawn", f"a beacon for round {last_round} was already run")
    if not policy.min_clients <= size <= policy.population or (
            policy.sample_size and size != policy.sample_size):
        raise _refuse("sample_size_mismatch",
                      f"a sample of {size} of {policy.population}"
                      + (f", the job's is {policy.sample_size}" if policy.sample_size else ""))
    ctx = beacon_context(policy.job, round_no, policy.population, size)
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
    await server.send("b-sig", ed25519_sign(signing_key, endorsement(ctx, signed)))
    return int(round_no), sample_users(t.seed, policy.population, size)


async def _helper_round(index: int, first: Any, policy: JobPolicy, server: _Stream,
                        peer: _Stream, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter, link: tuple[Any, Any], last_round: int,
                        verify_keys: Sequence[bytes], signing_key: bytes | None, rand: Any,
                        wait_seconds: float, fault: str | None) -> dict[str, Any]:
    """One round as helper ``index``: the beacon (malicious model), the Task's check,
    the session, the comparison. A JSON-ready record of the round.

    Raises:
        AggregationAborted: a refusal before the session (the reason names it).
    """
    if not isinstance(first, CommitteeMessage):
        raise _refuse("malformed_message", "a committee message was expected")
    malicious = policy.threat == "malicious"
    beacon_round, users = -1, None
    if malicious:
        if first.step != "b-start":
            raise _refuse("sample_not_from_beacon", "a round without the committee's beacon")
        assert signing_key is not None
        beacon_round, users = await _helper_beacon(index, first.payload, policy, server,
                                                   peer, last_round, signing_key, rand,
                                                   fault)
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
    welcome, _ = await asyncio.wait_for(read_message(reader, welcome_limits()), wait_seconds)
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
        record["reason"] = session.reason or session.status
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


async def _receive_task(reader: asyncio.StreamReader, policy: JobPolicy,
                        wait_seconds: float) -> bytes:
    try:
        msg, _ = await asyncio.wait_for(read_message(reader, _helper_limits(policy)),
                                        wait_seconds)
    except CodecError as exc:
        raise _refuse("malformed_message", f"the Task: {exc}") from None
    if isinstance(msg, CommitteeMessage) and msg.step == "task":
        return msg.payload
    if isinstance(msg, CommitteeMessage) and msg.step in ("b-start",):
        raise _refuse("sample_redrawn", "a second beacon before the round's Task")
    raise _refuse("malformed_message", "the round's Task was expected")

