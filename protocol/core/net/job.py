"""Jobs: a whole mechanism run between real processes (TrieHH over the network).

A *job* keeps one TLS connection per client open for all its rounds. Each vote round
is one secure-aggregation session among the clients the mechanism sampled:

1. **Join.** Clients connect and say :class:`~protocol.core.net.messages.Hello` with
   their population position, as for a single session; nothing is sent back until
   the first round. The join window closes when the whole population is there or
   after ``join_seconds``.
2. **Task.** For each round the server sends each sampled client that is connected a
   :class:`~protocol.core.net.messages.Task`: the round's public specification (job
   name, round, candidate strings, threshold, release rule) and the sample (which
   fixes the session's roster and positions). The other clients hear nothing that
   round.
3. **Session.** A sampled client computes its own contribution from data only it
   holds (``contribution_of``): in a vote round its vote on the candidates (for
   TrieHH :class:`mechanisms.triehh.ClientVoter`), in a vector round its vector (for
   a frequency oracle its randomised report's support vector). It checks the round's
   :class:`~protocol.core.net.messages.Welcome` against the parameters its own policy
   derives (the threat model's threshold and degree for the sample's size, the vector
   length and modulus, the context binding the Task: :func:`round_context`) and runs
   the session as session position ``j``, its rank in the sample. The server runs the
   stages with deadlines exactly as :class:`~protocol.core.net.server.NetSecAggServer`
   does and ends the session with a Bye (``completed`` or ``aborted``) that leaves the
   connection open.
4. **End.** ``Bye("finished")`` to everyone.

The server's side of the mechanism runs in the analyst's process
(:meth:`mechanisms.triehh.TrieHH.at_server` over :class:`NetworkTransport`): it
samples, sends Tasks, and learns each round's sum, never a client's contribution.

**The client's policy** (:class:`JobPolicy`): it answers Tasks of one job name only,
with round numbers strictly increasing (an old round is not answered twice), a sample
of at least ``min_clients`` that contains it, and a Welcome exactly as its own
derivation requires; its ledger (``max_votes``) caps the rounds it contributes to in
the job (a TrieHH device: the ``L`` levels its privacy analysis counts), and it leaves
the job (``budget_spent``) when sampled once more. A client whose state machine aborts (it detected the server
misbehaving) leaves the job. A client that is late or silent in a stage is dropped by
the server and stays out of the job: the server closes its connection.

A job over the thresholding committee (``JobPolicy(committee=True)``: two helpers in
every round, each round's sample from the committee's beacon, checked by every device)
is :mod:`protocol.core.net.committee_job`; under the malicious model its sampled
devices answer the Task with one validated report each instead of joining a session
(``JobPolicy.committee_input``, ``reports`` by default).
"""
from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import ssl
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Sequence

import numpy as np

from protocol.core import wire_secagg
from protocol.core.contract import (
    AggregationAborted, AtClients, ContractError, Cost, Kind, RoundResult, RoundSpec, Transport,
)
from protocol.core.net.client import (
    NETWORK_FAILURES, ClientOutcome, connect, exchange, failure_outcome,
)
from protocol.core.net.frames import close_writer, frame, read_message
from protocol.core.net.messages import (
    PROTOCOL_VERSION, Bye, Hello, SampleProof, Task, Welcome, hello_limits, task_limits,
    welcome_limits,
)
from protocol.core.sample_beacon import SampleRejected, check_endorsed_sample
from protocol.core.net.server import (
    NetSecAggServer, SessionReport, StageReport, _Conn, _Session, end_all,
    read_first, send_and_close,
)
from protocol.core.net.session import NetSessionSpec, SessionRejected
from protocol.core.transports.secagg_transport import spec_context, sum_release, vote_modulus
from protocol.core.net.signals import wait_for
from secagg.client import SecAggClient
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.randomness import OsRandom
from secagg.server import SecAggServer

__all__ = ["JobPolicy", "round_context", "round_spec", "NetJobServer", "NetworkTransport",
           "JobOutcome", "run_job_client", "run_job_clients", "serving_job",
           "server_transcript"]

#: at most this many candidates in one round of a job (TrieHH's own cap is larger;
#: a round above this one is refused by the clients' framing)
MAX_JOB_CANDIDATES = 1 << 16
#: at most this many entries in a vector round of a job
MAX_JOB_DIM = 1 << 20


@dataclass(frozen=True)
class JobPolicy:
    """What a job's rounds must look like, derived the same way on both sides.

    Raises:
        ValueError: bad values.
    """

    job: str
    population: int
    threat: str = "malicious"
    graph: str = "harary"
    dropout: float = 0.0
    #: a client refuses a round whose sample is smaller
    min_clients: int = 3
    max_candidates: int = MAX_JOB_CANDIDATES
    #: the longest vector a client accepts to contribute
    max_dim: int = MAX_JOB_DIM
    #: the device's ledger: it contributes to at most this many rounds of the job and
    #: leaves it (``budget_spent``) when sampled once more; ``None``: no cap (a device
    #: whose contribution is memoised, as the frequency oracles' reports are)
    max_votes: int | None = None
    #: a job over the thresholding committee (:mod:`protocol.core.net.committee_job`):
    #: the two helpers join every round's session at the positions after the sample
    #: (population positions ``population`` and ``population + 1`` in the roster), vote
    #: rounds only; under the malicious model each round's sample comes from the
    #: committee's beacon and a device checks both helpers' signatures on it
    committee: bool = False
    #: a vote round's threshold must be at least this (the mechanism's public theta: a
    #: server that lowers it to learn rarer counts is refused); 0: no floor
    min_theta: int = 0
    #: every round's sample has exactly this many devices (TrieHH's public ``m``: a
    #: server that samples more raises the sampling rate the privacy analysis uses);
    #: 0: no check
    sample_size: int = 0
    #: a committee job's input under the malicious model: ``reports`` (the default),
    #: each sampled device's validated report, checked on shares by the committee
    #: before it counts (:mod:`protocol.core.committee.intake`); ``secagg``, the sum of
    #: a secure-aggregation session among the sample and both helpers (no device's
    #: input is checked). The semi-honest committee always takes ``secagg``.
    committee_input: str = "reports"
    #: a validated round needs valid reports from at least this fraction of its sample
    #: (and at least the round's ``min_participants``): every member refuses to count
    #: a round the server thinned out (``too_few_valid_reports``)
    min_valid_fraction: float = 0.5

    def __post_init__(self) -> None:
        if type(self.population) is not int or not 3 <= self.population < 1 << 32:
            raise ValueError("a job needs a population of at least 3")
        if type(self.min_clients) is not int or self.min_clients < 3:
            raise ValueError("min_clients must be an int >= 3 (secure aggregation needs 3)")
        if not 1 <= self.max_candidates <= MAX_JOB_CANDIDATES:
            raise ValueError(f"max_candidates must be in [1, {MAX_JOB_CANDIDATES}]")
        if not 1 <= self.max_dim <= MAX_JOB_DIM:
            raise ValueError(f"max_dim must be in [1, {MAX_JOB_DIM}]")
        if type(self.min_theta) is not int or self.min_theta < 0:
            raise ValueError("min_theta must be a non-negative int")
        if type(self.sample_size) is not int or not 0 <= self.sample_size <= self.population:
            raise ValueError("sample_size must be an int in [0, population]")
        if self.max_votes is not None and (type(self.max_votes) is not int
                                           or self.max_votes < 1):
            raise ValueError("max_votes must be a positive int or None")
        if self.committee_input not in ("reports", "secagg"):
            raise ValueError("committee_input must be 'reports' or 'secagg'")
        if not 0.0 <= float(self.min_valid_fraction) <= 1.0:
            raise ValueError("min_valid_fraction must be in [0, 1]")
        NetSessionSpec(3, threat=self.threat, graph=self.graph, dropout=self.dropout)

    @property
    def validated(self) -> bool:
        """Whether each round's input is the devices' validated reports (a committee
        job under the malicious model with ``committee_input="reports"``, the
        default) rather than a secure-aggregation session."""
        return self.sample_proof and self.committee_input == "reports"

    def min_valid(self, spec: RoundSpec, sampled: int) -> int:
        """The fewest valid reports a validated round of ``sampled`` devices counts."""
        import math

        return max(int(spec.min_participants),
                   math.ceil(float(self.min_valid_fraction) * int(sampled)))

    @property
    def sample_proof(self) -> bool:
        """Whether each round's sample comes with the helpers' signed seed (a committee
        job under the malicious model)."""
        return self.committee and self.threat == "malicious"

    def session(self, spec: RoundSpec, sample: Sequence[int]) -> NetSessionSpec:
        """The secure-aggregation session of one round: ``n`` the sample's size; in a
        vote round a one-hot vote vector per client modulo :func:`vote_modulus` (as the
        in-process transport), in a vector round the spec's ``dim`` and modulus; the
        context binding the round (:func:`round_context`). A committee job's session
        has the two helpers after the sample, both required, and the committee's
        modulus (``p = 2^61 - 1`` under the malicious model, ``2^k`` semi-honest).

        Raises:
            ContractError: a committee job's round that is not a vote round with a
                threshold.
        """
        m = len(sample)
        if self.committee:
            return self._committee_session(spec, sample)
        if spec.kind is Kind.VOTE:
            dim, modulus = spec.domain_size, vote_modulus(m)
        else:
            dim, modulus = spec.dim, spec.modulus
        return NetSessionSpec(m, dim=dim, modulus=modulus, threat=self.threat,
                              graph=self.graph, dropout=self.dropout,
                              context_digest=round_context(spec, sample))

    def _committee_session(self, spec: RoundSpec, sample: Sequence[int]) -> NetSessionSpec:
        from protocol.core.committee import field as F
        from protocol.core.committee import ring_bits

        if spec.kind is not Kind.VOTE or not spec.theta:
            raise ContractError("the committee runs vote rounds with a threshold")
        m = len(sample)
        modulus = F.P if self.threat == "malicious" else 1 << ring_bits(m, spec.theta)
        ctx = hashlib.sha256(b"fedhh/net/committee-job-round/v1\x00"
                             + round_context(spec, sample)).digest()
        return NetSessionSpec(m + 2, dim=spec.domain_size, modulus=modulus,
                              threat=self.threat, graph=self.graph, dropout=self.dropout,
                              context_digest=ctx, required=2)

    def session_keys(self, verify_keys: Sequence[bytes], sample: Sequence[int]
                     ) -> tuple[bytes, ...]:
        """The verification keys of a round's session, by session position: the
        sample's, then (a committee job) the helpers' at ``population`` and
        ``population + 1`` of the roster."""
        keys = [verify_keys[m] for m in sample]
        if self.committee:
            keys += [verify_keys[self.population], verify_keys[self.population + 1]]
        return tuple(keys)


def round_context(spec: RoundSpec, sample: Sequence[int]) -> bytes:
    """SHA-256 binding a round's specification and its sample: every key, ciphertext
    and signature of the round's session depends on it."""
    h = hashlib.sha256(b"fedhh/net/job-round/v1\x00")
    h.update(spec_context(spec))
    h.update(struct.pack(">Q", len(sample)))
    h.update(np.asarray(sample, dtype=">u4").tobytes())
    return h.digest()


def round_spec(task: Task) -> RoundSpec:
    """The round a Task announces (a vote round if it names candidates, else a vector
    round).

    Raises:
        ContractError: not a valid round.
    """
    if task.candidates:
        return RoundSpec(task.job, task.round, Kind.VOTE, candidates=task.candidates,
                         theta=task.theta or None, reveal_counts=task.reveal_counts,
                         min_participants=task.min_participants)
    return RoundSpec(task.job, task.round, Kind.VECTOR, dim=task.dim,
                     modulus=task.modulus_minus_one + 1,
                     min_participants=task.min_participants)


def task_for(spec: RoundSpec, sample: Sequence[int]) -> Task:
    """The Task that announces ``spec`` to ``sample``."""
    vector = spec.kind is Kind.VECTOR
    return Task(spec.task, spec.round, spec.candidates, spec.theta or 0,
                bool(spec.reveal_counts), spec.min_participants,
                spec.dim if vector else 0, spec.modulus - 1 if vector else 0,
                tuple(int(s) for s in sample))


# ---------------------------------------------------------------------------- server
@dataclass(eq=False)
class _JobConn(_Conn):
    #: population position (``client`` is the position in the current session, -1 outside)
    member: int = -1

    @property
    def who(self) -> int:
        return self.member


class NetJobServer(NetSecAggServer):
    """A TLS server that keeps a population connected and runs one secure-aggregation
    session per round (:meth:`run_round`) among the clients a mechanism sampled.

    Args:
        policy: the job (name, population, threat model, graph, dropout rate).
        ssl_context: from :func:`protocol.core.net.tls.server_context`.
        verify_keys: the population's Ed25519 keys (malicious-server variant).
        host, port, stage_seconds, join_seconds, rand, events: as
            :class:`~protocol.core.net.server.NetSecAggServer`.
    """

    def __init__(self, policy: JobPolicy, ssl_context: ssl.SSLContext, *,
                 verify_keys: Sequence[bytes] | None = None, host: str = "127.0.0.1",
                 port: int = 0, stage_seconds: float = 60.0, join_seconds: float = 60.0,
                 rand: Any = None, events: Callable[[dict[str, Any]], None] | None = None
                 ) -> None:
        malicious = policy.threat == "malicious"
        if malicious and (verify_keys is None or len(verify_keys) != policy.population):
            raise ValueError(f"the malicious-server variant needs {policy.population} "
                             "verification keys")
        self.policy = policy
        self._configure(ssl_context, verify_keys, host, port, stage_seconds, join_seconds, rand,
                        events)
        self._server = None
        self._members: dict[int, _JobConn] = {}
        self._joining = True
        self._current: _Session | None = None
        self._all_joined: asyncio.Event | None = None
        self.refused: list[tuple[int | None, str]] = []

    @property
    def connected(self) -> list[int]:
        return sorted(m for m, c in self._members.items() if c.open)

    async def admit(self) -> int:
        """Wait for the whole population or the join window; the number connected."""
        if self._all_joined is None:
            self._all_joined = asyncio.Event()
            if self._everyone_here():
                self._all_joined.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(self._all_joined.wait(), self.join_seconds)
        self._joining = False
        joined = len(self.connected)
        self.events({"event": "joined", "clients": joined})
        return joined

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = await read_first(reader, writer, hello_limits(), self.stage_seconds,
                                 self.refused)
        if hello is None:
            return
        assert isinstance(hello, Hello)
        await self._join(hello, reader, writer)

    def _everyone_here(self) -> bool:
        """Whether the join window can close early: the whole population is connected."""
        return len(self.connected) == self.policy.population

    async def _join(self, hello: Hello, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        """Admit a population member (or refuse it with a Bye) and read its frames."""
        reason = None
        if not self._joining:
            reason = "the job is running; it accepts no new clients"
        elif hello.version != PROTOCOL_VERSION:
            reason = "version_mismatch"
        elif not 0 <= hello.client < self.policy.population:
            reason = f"position {hello.client} is not in the population of " \
                     f"{self.policy.population}"
        elif hello.client in self._members and self._members[hello.client].open:
            reason = f"position {hello.client} is taken"
        if reason is not None:
            self.refused.append((hello.client, reason))
            await send_and_close(writer, Bye("refused", reason))
            return
        conn = _JobConn(-1, reader, writer, may_send=False, member=hello.client)
        conn.task = asyncio.current_task()
        self._members[hello.client] = conn
        if self._everyone_here() and self._all_joined is not None:
            self._all_joined.set()
        await self._read_loop(conn)

    def _current_of(self, conn: _Conn) -> _Session | None:
        session = self._current
        if session is not None and session.conns.get(conn.client) is conn:
            return session
        return None

    async def _write_all(self, conns: Sequence[_JobConn], data: bytes) -> int:
        """Write ``data`` to each connection and drain; a connection that fails is
        closed (a dropout from then on). Returns the bytes written."""
        total = 0
        live = []
        for conn in conns:
            try:
                conn.writer.write(data)
            except (ConnectionError, OSError, RuntimeError):
                await self._drop_member(conn)
                continue
            conn.bytes_down += len(data)
            total += len(data)
            live.append(conn)

        async def drain(conn: _JobConn) -> None:
            try:
                await wait_for(conn.writer.drain(), self.stage_seconds)
            except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError):
                await self._drop_member(conn)

        await asyncio.gather(*(drain(c) for c in live))
        return total

    async def _drop_member(self, conn: _JobConn) -> None:
        if conn.open:
            conn.open = False
            if conn.task is not None and conn.task is not asyncio.current_task():
                conn.task.cancel()
            await close_writer(conn.writer)

    async def _open_round(self, netspec: NetSessionSpec, params: Any, sample: list[int],
                          head: bytes) -> tuple[_Session, Any, bytes, int]:
        """``head`` (the round's Task, with what precedes it) to the sampled members
        that are connected, and the round's session with them at their sample ranks:
        ``(session, config, the Welcome frame, bytes of head written)``."""
        members = [c for c in (self._members.get(m) for m in sample)
                   if c is not None and c.open]
        task_bytes = await self._write_all(members, head)
        nonce = self.rand.token_bytes(FRESH_NONCE_BYTES)
        config = netspec.config(nonce, params)
        welcome = frame(netspec.welcome(nonce, self.stage_seconds, params))
        session = _Session(netspec, wire_secagg.server_limits(config), welcome)
        for j, member in enumerate(sample):
            conn = self._members.get(member)
            if conn is not None and conn.open:
                conn.client, conn.may_send = j, True
                session.conns[j] = conn
        return session, config, welcome, task_bytes

    async def _session_stages(self, session: _Session, srv: SecAggServer,
                              before_bye: Callable[[], Any] | None = None
                              ) -> tuple[str, str, list[StageReport]]:
        """Run the round's session to its end and say the ``Bye`` (after awaiting
        ``before_bye()``, if given) to its connections, which stay open for the next
        round: ``(status, reason, stages)``."""
        stages: list[StageReport] = []
        status, reason = "aborted", ""
        try:
            status, reason = await self._run_stages(session, srv, stages)
        finally:
            self._current = None
            if before_bye is not None:
                await before_bye()
            ending = [c for c in session.conns.values() if c.open]
            await self._write_all(ending, frame(Bye(status, reason[:120])))
            for c in session.conns.values():
                c.client, c.may_send = -1, False
        return status, reason, stages

    async def run_round(self, spec: RoundSpec, sample: Sequence[int]) -> SessionReport:
        """One round: the Task to the sampled clients that are connected, then the
        session among them (sampled clients not connected are round-0 dropouts).

        Raises:
            AggregationAborted: ``no_secagg_parameters`` (none exist for the sample's
                size under the threat model).
        """
        wall0, cpu0 = time.perf_counter(), time.process_time()
        sample = [int(s) for s in sample]
        netspec = self.policy.session(spec, sample)
        params = netspec.params()
        session, config, welcome, task_bytes = await self._open_round(
            netspec, params, sample, frame(task_for(spec, sample)))
        self._current = session
        joined = sorted(session.conns)
        self.events({"event": "session", "phase": "round", "round": spec.round,
                     "sample": len(sample), "connected": len(joined),
                     "session": config.session.hex()})
        await self._write_all([session.conns[j] for j in joined], welcome)
        verify = ([self.verify_keys[m] for m in sample] if self.verify_keys is not None
                  and netspec.malicious else None)
        srv = SecAggServer(config, verify_keys=verify)
        status, reason, stages = await self._session_stages(session, srv)
        report = SessionReport(
            status=status, reason=reason, n=len(sample), degree=params.degree,
            threshold=params.threshold, threat=netspec.threat, joined=len(joined),
            result=srv.result, sets={k: sorted(v) for k, v in srv.sets.items()},
            stages=stages, refused=session.refused,
            wall_seconds=time.perf_counter() - wall0,
            server_cpu_seconds=time.process_time() - cpu0,
            bytes_up=sum(s.bytes_up for s in stages),
            bytes_down=sum(s.bytes_down for s in stages) + len(welcome) * len(joined)
            + task_bytes)
        self.events({"event": "done", "round": spec.round, "status": status, "reason": reason})
        return report

    def transport(self, loop: asyncio.AbstractEventLoop) -> "Transport":
        """The mechanism's transport over this server, whose event loop is ``loop``."""
        return NetworkTransport(self, loop)

    async def finish(self, status: str = "finished", reason: str = "") -> None:
        """``Bye(status)`` to every connected client; close the connections."""
        await end_all(self._members.values(), Bye(status, reason[:120]))


class NetworkTransport(Transport):
    """Secure aggregation with real client processes, as a transport whose clients vote
    themselves (:attr:`~protocol.core.contract.Transport.contributions_at_clients`).

    :meth:`run_round` takes :class:`~protocol.core.contract.AtClients` (who is
    sampled), runs the round on a :class:`NetJobServer` whose event loop runs in
    another thread (see :func:`serving_job`), and releases as the in-process secure
    aggregation transport does: the thresholded counts of the sum over the clients
    whose masked input counted.
    """

    name = "secagg-network"
    kinds = frozenset({Kind.VOTE, Kind.VECTOR})
    contributions_at_clients = True

    def __init__(self, server: NetJobServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop
        self.reports: list[SessionReport] = []
        #: per round: its specification, the sample (population positions) and report
        self.rounds: list[tuple[RoundSpec, list[int], SessionReport]] = []

    def run_round(self, spec: RoundSpec, contributions: Any,
                  rng: np.random.Generator) -> RoundResult:
        if not isinstance(contributions, AtClients):
            raise ContractError("the network transport's clients compute their own "
                                "contributions: give it "
                                "AtClients (who is sampled), not "
                                f"{type(contributions).__name__}")
        users = np.sort(contributions.validate(spec, self.server.policy.population))
        need = max(spec.min_participants, self.server.policy.min_clients)
        if users.size < need:
            raise AggregationAborted("too_few_participants",
                                     f"{users.size} sampled, the round needs {need}")
        report = asyncio.run_coroutine_threadsafe(
            self.server.run_round(spec, users.tolist()), self.loop).result()
        self.reports.append(report)
        self.rounds.append((spec, users.tolist(), report))
        if report.status != "completed" or report.result is None:
            raise AggregationAborted(f"secagg_{report.reason or 'aborted'}",
                                     f"over the network, round {spec.round}")
        release = sum_release(spec, report.result, len(report.sets.get("U3", ())))
        views = {"server": {"sum": report.result.copy(), **report.sets,
                            "stages": [vars(s) for s in report.stages]}}
        cost = Cost({"server": report.server_cpu_seconds}, bytes_up=report.bytes_up,
                    bytes_down=report.bytes_down)
        return RoundResult(release, views, cost)


def server_transcript(transport: NetworkTransport) -> list[dict[str, Any]]:
    """What the server learned in each round, JSON-ready: the round, its candidates,
    the sample, the clients (population positions) whose masked input is in the sum,
    and the sum itself (``None`` for an aborted round). This is the server's view, not
    more: it is what an experiment checks the release against."""
    out = []
    for spec, sample, report in transport.rounds:
        in_sum = [sample[j] for j in report.sets.get("U3", ())]
        out.append({"round": spec.round, "kind": spec.kind.value,
                    "candidates": list(spec.candidates), "dim": spec.dim,
                    "sample": sample, "in_sum": in_sum, "status": report.status,
                    "sum": None if report.result is None else [int(v) for v in report.result]})
    return out


@contextlib.contextmanager
def serving_job(server: NetJobServer, on_listening: Callable[[int], None] | None = None
                ) -> Iterator[NetworkTransport]:
    """Run ``server``'s event loop in a thread: listen (then ``on_listening(port)``),
    admit the population, hand out the transport; on leaving, ``Bye("finished")`` to
    every client and close.

    Left early (an exception, Ctrl-C or SIGTERM in the analyst's thread, during the
    join window or a round), what runs in the loop is cancelled first, then every
    party still connected gets ``Bye("aborted", why)``, ``why`` telling a member that
    left (``member_left: helper 1 left ... at step b-start of round 1``) from the
    analyst's own stop (``analyst_stopped: ...``) or another abort
    (:mod:`protocol.core.net.departures`); the same account, as one line, is
    ``server.ending`` (``None`` after a job that finished). Every task of the loop has
    ended before the loop closes."""
    from protocol.core.net.departures import stop_reason
    from protocol.core.net.server import TlsListener, stop_tasks

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fedhh-job-server", daemon=True)
    thread.start()
    server.ending = None
    rounds: list[int] = []
    aborted_at: list[float] = []
    emit = server.events

    def events(e: dict[str, Any]) -> None:  # the round each event is of, for the account
        if e.get("round") and e.get("event") in ("session", "beacon", "done"):
            rounds.append(int(e["round"]))
        if e.get("event") == "done" and e.get("status") != "completed":
            aborted_at.append(time.monotonic())
        emit(e)

    server.events = events

    def call(coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    def quietly(coro: Any, timeout: float) -> None:
        try:
            call(coro, timeout)
        except BaseException:  # noqa: BLE001  # cleaning up: a second Ctrl-C, a timeout
            pass

    try:
        call(server.start())
        if on_listening is not None:
            on_listening(server.port)
        ok = False
        transport = None
        try:
            call(server.admit())
            transport = server.transport(loop)
            yield transport
            ok = True
        except BaseException as exc:
            # stop listening first: a loop still accepting and handshaking the devices
            # that keep arriving (thousands queued while the population joins) runs
            # everything below seconds late; then stop what the analyst's thread left
            # in the loop (a round an interrupt cut short), and say why to everyone
            # still connected
            quietly(TlsListener.close(server), 6)
            quietly(_stop_all_but_handlers(), 15)
            server.events({"event": "stopping", "connected": len(server.connected)})
            line = ending_line(server, transport, exc, rounds[-1] if rounds else None,
                               aborted_at[0] if aborted_at else None)
            server.ending = line
            why = stop_reason(exc, line.bye if line and line.departed else None,
                              line.kind if line else "member_left")
            try:
                call(server.finish("aborted", why), 60)
                # and those still joining (not admitted yet) hear the same
                call(server.bye_everyone(Bye("aborted", why[:120])), 30)
            except BaseException:  # noqa: BLE001
                server.events({"event": "finish_timed_out"})
            raise
        else:
            try:
                call(server.finish("finished", ""), 120)
            except TimeoutError:  # the Byes could not all be written in time: the
                # run's result stands; the connections are closed below
                server.events({"event": "finish_timed_out"})
    finally:
        quietly(server.close(), 10)
        quietly(stop_tasks(timeout=10), 15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()


async def _stop_all_but_handlers() -> None:
    """:func:`~protocol.core.net.server.stop_tasks`, sparing the connections' handlers
    (:meth:`~protocol.core.net.server.TlsListener._tracked`), those that run and those
    asyncio created for a handshake that just completed but that have not started yet:
    each gets the stopping server's ``Bye`` afterwards (``bye_everyone``) instead of a
    connection closed without a word."""
    from protocol.core.net.server import stop_tasks

    handlers = [t for t in asyncio.all_tasks()
                if getattr(t.get_coro(), "__qualname__", "").endswith("._tracked")]
    await stop_tasks(handlers)


class Ending(str):
    """The analyst's one line about a job that ended early; ``departed``: it names a
    party that left (a committee member, devices), not the analyst's own stop; ``bye``:
    the shorter account the parties still connected get."""

    departed: bool = False
    bye: str = ""
    kind: str = "member_left"


def ending_line(server: NetJobServer, transport: Any, exc: BaseException | None,
                round_no: int | None, aborted_at: float | None = None) -> Ending | None:
    """Who ended the job, for the analyst's last line: a committee member that left or
    fell silent (named by the abort it caused, :func:`protocol.core.net.departures.
    departure`), or the devices that left when a round aborted for want of them
    (their positions); ``None`` when the exception is no aborted round."""
    from protocol.core.net.departures import Departure, aborted_in, departure, positions

    aborted = aborted_in(exc)
    if aborted is None:
        return None
    detail = aborted.detail
    last = getattr(transport, "reports", None) or []
    if last and isinstance(last[-1], dict) and last[-1].get("detail"):
        detail = f"{detail}; {last[-1]['detail']}"
    left = departure(aborted.reason, aborted.detail, round_no) or \
        departure(aborted.reason, detail, round_no)
    if left is None and last and isinstance(last[-1], dict):
        left = departure(str(last[-1].get("reason", "")), str(last[-1].get("detail", "")),
                         round_no)
    if left is not None:
        out = Ending(f"{left.line()} ({aborted.reason})")
        out.departed, out.bye = True, left.line()
        return out
    # devices whose connections closed before the round aborted (not those that left
    # because it did, nor those the server dropped at a deadline): those that closed
    # without a word (their process died or was killed) left; those that sent their
    # Bye first gave up, saying why (a state machine's abort, a Task refused), and are
    # counted apart by their reasons
    members = getattr(server, "_members", {})
    closed = {m: c for m, c in members.items() if getattr(c, "left_at", None) is not None
              and (aborted_at is None or c.left_at <= aborted_at)}
    gone = sorted(m for m, c in closed.items() if getattr(c, "gave_up", None) is None)
    gave = Counter(c.gave_up.partition(": ")[0] for c in closed.values()
                   if getattr(c, "gave_up", None) is not None)
    never = server.policy.population - len(members)
    if (gone or never or gave) and ("too_few" in aborted.reason or
                                    "missing" in aborted.reason):
        n = server.policy.population
        dev = Departure(f"devices {positions(gone)}", "left", round=round_no,
                        count=len(gone), of=n)
        said = [dev.line()] if gone else []
        if gave:
            said.append(gave_up_line(gave, round_no if not gone else None))
        if never:
            said.append(f"{never} of {n} devices never connected")
        out = Ending("; ".join(said) + f"; the round aborted: {aborted}")
        out.departed, out.kind = True, "devices_left"
        out.bye = (f"{len(gone)} of {n} devices left" if gone else
                   f"{sum(gave.values())} of {n} devices gave up" if gave else
                   f"{never} of {n} devices never connected") + \
            f" by round {round_no} ({aborted.reason})"
        return out
    return Ending(f"round {round_no} aborted: {aborted}" if round_no else str(aborted))


def gave_up_line(reasons: Counter, round_no: int | None = None, limit: int = 4) -> str:
    """``19 devices gave up (17 too_few_keys, 2 server_aborted)``: the devices that
    said why they left, by reason (the most frequent ``limit`` reasons, then
    ``...``)."""
    total = sum(reasons.values())
    top = reasons.most_common()
    why = ", ".join(f"{k} {r}" for r, k in top[:limit]) + (", ..." if len(top) > limit
                                                            else "")
    when = f" by round {round_no}" if round_no is not None else ""
    return f"{total} device{'s' if total != 1 else ''} gave up{when} ({why})"


# ---------------------------------------------------------------------------- clients
@dataclass
class JobOutcome:
    """How one client's job ended, from its side."""

    member: int
    #: ``finished`` (the server ended the job), ``aborted`` (this client left: its state
    #: machine detected misbehaviour, or a Task broke its policy), ``refused``,
    #: ``server_silent``, ``disconnected``, ``stalled``
    status: str
    reason: str = ""
    #: sessions by how they ended (``completed``, ``aborted``)
    sessions: Counter = field(default_factory=Counter)
    rounds_seen: int = 0
    #: rounds this client contributed to (its ledger, checked against ``max_votes``)
    votes: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    cpu_seconds: float = 0.0


async def run_job_client(member: int, host: str, port: int, policy: JobPolicy,
                         ssl_context: ssl.SSLContext, pin: bytes,
                         contribution_of: Callable[[Task], Any], *,
                         signing_key: bytes | None = None,
                         verify_keys: Sequence[bytes] | None = None, rand: Any = None,
                         wait_seconds: float = 300.0, stall_at: int | None = None,
                         reports: Any = None, corrupt: Any = None,
                         ledger: Any = None) -> JobOutcome:
    """One client's whole job (see the module docstring). ``contribution_of(task)`` is
    this client's contribution to a round it is sampled in: in a vote round its vote on
    the Task's candidates (an index, or -1 to abstain), in a vector round its vector
    (it may raise ValueError to refuse the round: the client leaves the job with
    ``cannot_contribute``). No exception escapes for anything the server or the network
    does.

    In a job with validated reports (``policy.validated``) a sampled device sends, right
    after the Task, the frames ``reports.frames(member, task, seed, vote)`` makes (its
    :class:`~protocol.core.committee.reports.DeviceReport`, bound to the round's
    beacon ``seed``: :class:`protocol.core.net.committee_job.DeviceReports`) instead of
    joining a session. ``corrupt`` (a :class:`~protocol.core.corruption.CorruptClients`
    with a vector strategy) makes this device enter its strategy's vector in a
    secure-aggregation round when the round's draw corrupts it (a simulation's
    attacker; validated reports take theirs from ``reports``).

    ``ledger`` (:class:`~protocol.core.job_ledger.DeviceLedger`, on disk in a
    deployment; default one in memory for this call): the device's votes per task and
    the job instances and rounds it voted in, which outlive the connection. A device
    refuses to vote past ``max_votes`` of the task over all its jobs
    (``budget_spent``), twice in a round of one job (``already_voted``), or on a
    SampleProof of a job instance it voted in under an earlier connection or of another
    instance than its connection's first (``sample_wrong_job``); the vote is on disk
    before it is sent."""
    from protocol.core.job_ledger import DeviceLedger, LedgerError, LedgerRefusal

    out = JobOutcome(member, "disconnected")
    writer = None
    ended_by_server = False  # the outcome is the server's Bye (else this device left)
    rand = rand if rand is not None else OsRandom()
    ledger = ledger if ledger is not None else DeviceLedger()
    instance: bytes | None = None  # the job instance of this connection's first proof
    try:
        reader, writer, sent = await connect(host, port, ssl_context, pin,
                                             Hello(PROTOCOL_VERSION, member), wait_seconds)
        out.bytes_up += sent
        between = task_limits(policy.population, policy.max_candidates, policy.max_dim,
                              proof=policy.sample_proof)
        last_round = -1
        proof: SampleProof | None = None
        while True:
            msg, size = await wait_for(read_message(reader, between), wait_seconds)
            out.bytes_down += size
            if isinstance(msg, Bye):
                out.status, out.reason = msg.status, msg.reason
                ended_by_server = True
                return out
            if isinstance(msg, SampleProof):
                if proof is not None:
                    out.status, out.reason = "aborted", "bad_task: two sample proofs"
                    return out
                proof = msg
                continue
            assert isinstance(msg, Task)
            out.rounds_seen += 1
            try:
                voted = ledger.votes(member, msg.job)
            except LedgerError as exc:
                out.status, out.reason = "aborted", str(exc)[:200]
                return out
            problem = _task_problem(msg, policy, last_round, member, voted)
            if problem is None and policy.sample_proof:
                problem = _proof_problem(proof, msg, policy, verify_keys)
            seed = proof.seed if proof is not None else None
            job_instance = proof.instance if proof is not None else b""
            proof = None
            if problem is None and policy.sample_proof and _sampled(msg, member):
                if instance is None and ledger.known_instance(member, msg.job, job_instance):
                    problem = ("sample_wrong_job: the sample proof names a job instance this "
                               "device voted in under an earlier connection")
                elif instance is not None and job_instance != instance:
                    problem = ("sample_wrong_job: the sample proof names another job "
                               "instance than this connection's")
                instance = job_instance if problem is None else instance
            if problem is None and _sampled(msg, member):
                try:
                    ledger.check_vote(member, msg.job, job_instance, msg.round,
                                      policy.max_votes)
                except LedgerRefusal as exc:
                    problem = str(exc)[:200]
            if problem is not None:
                out.status, out.reason = "aborted", problem
                return out
            last_round = msg.round
            if not _sampled(msg, member):
                continue  # not sampled this round
            pos = bisect.bisect_left(msg.sample, member)
            spec = round_spec(msg)
            record = _ledger_vote(ledger, member, msg, job_instance)
            if policy.validated:
                assert seed is not None  # the proof was checked
                why = await _send_report(writer, reports, member, msg, seed,
                                         lambda: contribution_of(msg), spec, out,
                                         wait_seconds, record)
                if why is not None:
                    out.status, out.reason = "aborted", why
                    return out
                continue
            netspec = policy.session(spec, msg.sample)
            first, size = await wait_for(read_message(reader, welcome_limits()),
                                         wait_seconds)
            out.bytes_down += size
            if isinstance(first, Bye):
                out.status, out.reason = first.status, first.reason
                ended_by_server = True
                return out
            assert isinstance(first, Welcome)
            try:
                config = netspec.accept(first)
            except (SessionRejected, AggregationAborted) as exc:  # incl. no parameters
                out.status, out.reason = "refused", str(exc)
                return out
            try:
                value = _contribution(contribution_of(msg), spec, netspec)
                value = _corrupted(corrupt, msg, member, value, netspec.modulus)
            except (ValueError, TypeError, ContractError) as exc:
                out.status, out.reason = "aborted", f"cannot_contribute: {exc}"[:200]
                return out
            why = await record()
            if why is not None:
                out.status, out.reason = "aborted", why
                return out
            out.votes += 1   # counted once the contribution exists, whatever follows
            keys = (policy.session_keys(verify_keys, msg.sample)
                    if verify_keys is not None and netspec.malicious else None)
            machine = SecAggClient(config, pos, value, rand, signing_key=signing_key,
                                   verify_keys=keys)
            session = ClientOutcome(pos, "disconnected")
            await exchange(reader, writer, machine, wire_secagg.client_limits(config), session,
                           wait_seconds=wait_seconds, stall_at=stall_at)
            out.bytes_up += session.bytes_up
            out.bytes_down += session.bytes_down
            out.cpu_seconds += session.cpu_seconds
            if session.status == "stalled" or machine.aborted:
                out.status, out.reason = session.status, \
                    missing_helpers(machine) or session.reason
                return out
            out.sessions[session.status] += 1
    except NETWORK_FAILURES as exc:
        out.status, out.reason = failure_outcome(exc, wait_seconds)
        if out.bytes_down == 0 and isinstance(exc, (
                ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                asyncio.IncompleteReadError, ssl.SSLEOFError)):
            # the connection closed before the server sent this device a single frame
            # (during the TLS handshake, or before the server read its Hello): a server
            # that stops tells the devices it admitted why, so this one was not yet
            # admitted (or the server's process died)
            out.reason = "closed_before_admission"
    finally:
        if not ended_by_server and out.status not in ("disconnected", "stalled"):
            await _say_bye(writer, out)
        await close_writer(writer)
    return out


def missing_helpers(machine: Any) -> str | None:
    """Why a participant of a committee round's session left, when its state machine
    aborted because a committee helper (a required position: the session's last two)
    is not among the server's survivors: ``member_left: helper 1 is not among the
    session's survivors (required_participant_missing)``; ``None``: another abort."""
    missing = getattr(machine, "missing_required", ())
    if not missing:
        return None
    n = machine.config.n
    who = " and ".join(f"helper {p - n + 3}" for p in missing)
    return (f"member_left: {who} {'is' if len(missing) == 1 else 'are'} not among the "
            "session's survivors (required_participant_missing)")


async def _say_bye(writer: asyncio.StreamWriter | None, out: JobOutcome) -> None:
    """A device that leaves the job on its own (its state machine aborted, it refused
    a Task, the server fell silent) says so before it closes: ``Bye("aborted",
    reason)``, so that the server tells a device that gave up from one whose connection
    closed without a word (its process died). Never raises."""
    if writer is None or writer.is_closing():
        return
    reason = (out.reason or out.status).encode()[:120].decode(errors="ignore")
    with contextlib.suppress(Exception):
        data = frame(Bye("aborted", reason))
        writer.write(data)
        await wait_for(writer.drain(), 2.0)
        out.bytes_up += len(data)


def _ledger_vote(ledger: Any, member: int, task: Task, instance: bytes
                 ) -> Callable[[], Awaitable[str | None]]:
    """The step that writes ``member``'s vote in ``task``'s round into its ledger (on
    disk, off the event loop) before the vote goes out; it returns ``None`` or why the
    device leaves (the ledger could not be written)."""
    async def record() -> str | None:
        from protocol.core.job_ledger import LedgerError

        try:
            if getattr(ledger, "directory", None) is None:
                ledger.record_vote(member, task.job, instance, task.round)
            else:
                await asyncio.to_thread(ledger.record_vote, member, task.job, instance,
                                        task.round)
        except LedgerError as exc:
            return str(exc)[:200]
        return None
    return record


async def _send_report(writer: asyncio.StreamWriter, reports: Any, member: int, task: Task,
                       seed: bytes, vote_of: Callable[[], Any], spec: RoundSpec,
                       out: JobOutcome, wait_seconds: float,
                       record: Callable[[], Awaitable[str | None]] | None = None
                       ) -> str | None:
    """A sampled device's validated report, sent right after the round's Task (one
    frame, or what a corrupted device's strategy sends); ``None``, or why the device
    leaves the job (``cannot_contribute``).

    Raises:
        NETWORK_FAILURES: the report could not be sent.
    """
    if reports is None:
        return "cannot_contribute: no helper report keys for a validated round"
    t0 = time.process_time()
    try:
        value = _contribution(vote_of(), spec, None)
        data = b"".join(reports.frames(member, task, seed, value))
    except (ValueError, TypeError, ContractError) as exc:
        return f"cannot_contribute: {exc}"[:200]
    finally:
        out.cpu_seconds += time.process_time() - t0
    if record is not None:
        why = await record()  # on disk before it is sent
        if why is not None:
            return why
    out.votes += 1   # counted once the report exists, whatever follows
    writer.write(data)
    await wait_for(writer.drain(), wait_seconds)
    out.bytes_up += len(data)
    out.sessions["reported"] += 1
    return None


def _corrupted(corrupt: Any, task: Task, member: int, value: np.ndarray,
               modulus: int) -> np.ndarray:
    """``value``, or the corrupted device's vector (modulo the session's modulus) when
    this round's draw (:func:`protocol.core.corruption.corrupt_positions`, the same on
    every side) corrupts ``member``.

    Raises:
        ValueError: a strategy without a vector form (it attacks validated reports).
    """
    if corrupt is None or not task.candidates:
        return value
    from protocol.core.corruption import corrupt_positions, corrupt_vector

    sample = np.asarray(task.sample, dtype=np.int64)
    bad = sample[corrupt_positions(corrupt, task.job, task.round, sample)]
    if member not in set(bad.tolist()):
        return value
    vec = corrupt_vector(corrupt, task.candidates, task.theta or None)
    return (vec % modulus).astype(np.uint64) if modulus < 1 << 63 else \
        np.asarray([int(v) % modulus for v in vec], dtype=np.uint64)


def _contribution(c: Any, spec: RoundSpec, netspec: NetSessionSpec | None) -> np.ndarray:
    """This client's secure-aggregation input: the one-hot vector of its vote (zero to
    abstain) in a vote round, its own vector in a vector round.

    Raises:
        ValueError: a vote outside the candidates, or a vector of the wrong length or
            with entries outside ``[0, modulus)``.
    """
    if spec.kind is Kind.VOTE:
        choice = int(c)
        if not -1 <= choice < spec.domain_size:
            raise ValueError(f"vote {choice} is not a candidate index")
        value = np.zeros(spec.domain_size, dtype=np.uint64)
        if choice >= 0:
            value[choice] = 1
        return value
    v = np.asarray(c)
    assert netspec is not None  # a vector round has its session
    if v.shape != (netspec.dim,) or not np.issubdtype(v.dtype, np.integer):
        raise ValueError(f"the round takes {netspec.dim} integers, this client has "
                         f"{v.shape}")
    if v.size and (int(v.min()) < 0 or int(v.max()) >= netspec.modulus):
        raise ValueError("a vector entry is outside [0, modulus)")
    return v.astype(np.uint64)


def _sampled(task: Task, member: int) -> bool:
    """Whether ``member`` is in the Task's (ascending) sample."""
    pos = bisect.bisect_left(task.sample, member)
    return pos < len(task.sample) and task.sample[pos] == member


def _proof_problem(proof: SampleProof | None, task: Task, policy: JobPolicy,
                   verify_keys: Sequence[bytes] | None) -> str | None:
    """Why a device of a committee job refuses ``task``'s sample (``None``: it is the
    one this round's beacon selected, endorsed by both helpers)."""
    if proof is None:
        return "sample_not_endorsed: the Task came without the committee's sample proof"
    if proof.job != task.job or proof.round != task.round:
        return "sample_not_endorsed: the sample proof is for another round"
    if verify_keys is None or len(verify_keys) != policy.population + 2:
        return "sample_not_endorsed: this device holds no roster with the helpers' keys"
    helpers = (verify_keys[policy.population], verify_keys[policy.population + 1])
    try:
        check_endorsed_sample(proof.seed, proof.signatures, helpers, task.job, task.round,
                              policy.population, np.asarray(task.sample, dtype=np.int64),
                              proof.instance)
    except SampleRejected as exc:
        return str(exc)[:200]
    return None


def _task_problem(task: Task, policy: JobPolicy, last_round: int, member: int = -1,
                  votes: int = 0) -> str | None:
    """Why client ``member``, having contributed to ``votes`` rounds, will not answer
    ``task`` (``None``: it will)."""
    if task.job != policy.job:
        return f"job_mismatch: the server runs {task.job!r}, this client {policy.job!r}"
    if task.round <= last_round:
        return f"stale_round: round {task.round} after round {last_round}"
    if policy.max_votes is not None and votes >= policy.max_votes and _sampled(task, member):
        return (f"budget_spent: sampled for round {task.round} after contributing to "
                f"{votes} rounds, the most this job allows")
    if task.candidates and task.theta < policy.min_theta:
        return (f"theta_too_low: round {task.round} has theta {task.theta}, the job's is "
                f"{policy.min_theta}")
    if policy.sample_size and len(task.sample) != policy.sample_size:
        return (f"sample_size_mismatch: round {task.round} samples {len(task.sample)}, the "
                f"job {policy.sample_size}")
    if len(task.sample) < policy.min_clients:
        return f"sample_too_small: {len(task.sample)} < {policy.min_clients}"
    try:
        round_spec(task)
    except ContractError as exc:
        return f"bad_task: {exc}"
    return None


async def run_job_clients(members: Sequence[int], host: str, port: int, policy: JobPolicy,
                          ssl_context: ssl.SSLContext, pin: bytes,
                          contribution_of: Callable[[int, Task], Any], *,
                          signing_keys: Sequence[bytes] | None = None,
                          verify_keys: Sequence[bytes] | None = None,
                          wait_seconds: float = 300.0, stall: Sequence[int] = (),
                          stall_at: int | None = None, reports: Any = None,
                          corrupt: Any = None, ledger: Any = None) -> list[JobOutcome]:
    """Run the clients ``members`` of a job concurrently in this event loop;
    ``contribution_of(member, task)``; ``reports``, ``corrupt`` and ``ledger`` (one
    :class:`~protocol.core.job_ledger.DeviceLedger` for all of them) as
    :func:`run_job_client`'s."""
    stalling = set(stall)
    if verify_keys is not None:
        verify_keys = tuple(verify_keys)
    tasks = [run_job_client(m, host, port, policy, ssl_context, pin,
                            (lambda t, m=m: contribution_of(m, t)),
                            signing_key=signing_keys[m] if signing_keys is not None else None,
                            verify_keys=verify_keys, wait_seconds=wait_seconds,
                            stall_at=stall_at if m in stalling else None,
                            reports=reports, corrupt=corrupt, ledger=ledger)
             for m in members]
    return list(await asyncio.gather(*tasks))
