"""In-memory simulation engine for one secure-aggregation session.

Theory of operation
-------------------
A :class:`SecAggSimulation` builds ``n`` :class:`secagg.client.SecAggClient` objects and
one :class:`secagg.server.SecAggServer` (:meth:`~SecAggSimulation.__init__`), starts the
clients (:meth:`~SecAggSimulation.start`, round 0), drives the server one round at a time
(:meth:`~SecAggSimulation.step`: deliver the round's messages, close it, deliver the
replies) until it completes or aborts, and reports a :class:`SecAggRun`
(:meth:`~SecAggSimulation.result`). :func:`run_secagg` does all of it in one call. Every message goes
through the wire format: encoded with :func:`protocol.core.codec.encode` into an
:class:`Envelope`, and decoded with :func:`protocol.core.codec.decode` before it reaches the
recipient, so every simulation exercises the codec.

* **Dropouts** (:class:`Dropout`): a client listed for round ``r`` stops before it would
  send its round-``r`` message (it computes nothing more and receives nothing more). A
  schedule that names neighbours is a function of the graph, evaluated once round 0 has
  fixed it (the graph seed comes from the round-0 transcript).
  Without the consistency check there is no round 3; clients listed for it drop
  before round 4.
* **Adversary hook**: a callable ``hook(round_no, direction, envelopes) -> envelopes``
  sees each round's batch of envelopes (``direction`` ``"up"``: clients to server,
  ``"down"``: server to clients) and may inspect, modify, drop, reorder or inject
  envelopes. Channels are modelled as authenticated: an upward message whose
  ``sender`` field differs from its envelope's sender is refused. Without a hook, messages are streamed one at a time so that memory stays
  ``O(dim)`` whatever ``n`` is.
* **Transcript** (:class:`Transcript`): one record per envelope (sender, recipient,
  round, type, size), every client's round-4 reveal, rejected messages, and queries such
  as :meth:`Transcript.revealed_both` and :meth:`Transcript.server_could_unmask`.
* **Shared work** (:class:`secagg.memo.SessionMemo`, on unless ``share_work=False``):
  one memo per session, given to every simulated client and to the server, so a
  signature check or a pairwise key derivation of the very same bytes is done once in
  this process; keyed by those exact bytes, so every party still decides on what it
  received. It is created with the session and dropped with it.
* **Cost**: CPU seconds of the calling thread (``time.thread_time``; the process's
  clock sums every thread's, and read beside a busy thread on another core, a Dask
  worker's event loop, one reading took about 60 us) around every state-machine call, per
  party (``client_seconds``, ``server_seconds``: what the simulation spent), and
  separately what each party would spend on a device of its own, with no work shared
  across parties (``device_client_seconds``, ``device_server_seconds``: the same, plus
  every memo hit charged at the mean cost of its kind); bytes up and down per client;
  and, inside a :func:`profile_primitives` block
  (:mod:`protocol.core.secagg_profile`, re-exported here), the time spent in each
  cryptographic primitive, compared there with the bare library cost.
* **Invariants**: every run ends by checking that no honest client revealed both
  shares of a peer and that no client sent after aborting
  (:mod:`protocol.core.invariants`), whatever the server or the hook did.

Randomness: each client gets an independent child stream of ``rand``; pass
``protocol.core.randomness.insecure_deterministic_randomness(seed)`` for a reproducible run,
the default is ``OsRandom``.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from protocol.core import codec
from protocol.core import wire_secagg  # registers the message types; session limits
from protocol.core.randomness import OsRandom, seeded_randomness
from protocol.core.secagg_profile import (  # noqa: F401  (re-exported)
    PrimitiveProfile, category_seconds, profile_primitives,
)
from protocol.core.secagg_transcript import EnvelopeRecord, Transcript
from secagg import crypto
from secagg.client import SecAggClient
from secagg.errors import ParameterError, SecAggError
from secagg.memo import SessionMemo
from secagg.messages import UnmaskShares
from secagg.server import SecAggServer
from secagg.state import AbortReason, ClientState, ServerState, SessionConfig

__all__ = ["Envelope", "EnvelopeRecord", "Dropout", "GraphRule", "Transcript", "SecAggRun", "make_config",
           "SecAggSimulation", "run_secagg", "SERVER", "PrimitiveProfile", "profile_primitives"]

#: the sender/recipient name of the server in envelopes
SERVER = -1



@dataclass(frozen=True)
class Envelope:
    """One encoded message in flight."""

    sender: int
    recipient: int
    round: int
    data: bytes

    @classmethod
    def of(cls, sender: int, recipient: int, round_no: int, message: Any) -> "Envelope":
        """Encode ``message`` into an envelope (for adversaries that inject)."""
        return cls(sender, recipient, round_no, codec.encode(message))

    def message(self) -> Any:
        """Decode the payload (raises ``CodecError`` if it is malformed)."""
        return codec.decode(self.data)

    def replace(self, **changes: Any) -> "Envelope":
        return dataclasses.replace(self, **changes)


#: a dropout rule that names clients through the neighbour graph: called with the
#: server's ``N(u)`` for every ``u`` once round 0 has fixed the graph
GraphRule = Callable[[Sequence[tuple[int, ...]]], Iterable[int]]


@dataclass
class Dropout:
    """Which clients drop before each round.

    Attributes:
        schedule: round -> clients that stop before sending that round's message, or
            (rounds ``>= 1`` only) a :data:`GraphRule` returning them: the neighbour
            graph is derived from the round-0 transcript (``SessionConfig.graph_seed``),
            so a schedule that names neighbours can only be evaluated once round 0 has
            closed.
    """

    schedule: Mapping[int, Iterable[int] | GraphRule] = field(default_factory=dict)

    @classmethod
    def none(cls) -> "Dropout":
        return cls({})

    @classmethod
    def random(cls, n: int, probability: float, rng: np.random.Generator,
               rounds: Sequence[int] = (0, 1, 2, 3, 4)) -> "Dropout":
        """Each client drops with ``probability``, before a uniformly chosen round.

        Raises:
            ValueError: probability outside ``[0, 1]``.
        """
        if not 0.0 <= probability <= 1.0:
            raise ValueError("dropout probability must be in [0, 1]")
        drops = np.flatnonzero(rng.random(n) < probability)
        when = rng.choice(np.asarray(rounds), size=drops.size) if drops.size else []
        sched: dict[int, set[int]] = {}
        for c, r in zip(drops, when):
            sched.setdefault(int(r), set()).add(int(c))
        return cls(sched)

    def named(self) -> int | None:
        """How many distinct clients the schedule drops in all (``None`` when a
        round's entry is a :data:`GraphRule`, known only once the graph is)."""
        clients: set[int] = set()
        for entry in self.schedule.values():
            if callable(entry):
                return None
            clients.update(int(c) for c in entry)
        return len(clients)

    def before(self, round_no: int,
               neighbours: Sequence[tuple[int, ...]] | None = None) -> set[int]:
        """The clients that drop before ``round_no``.

        Args:
            round_no: the round.
            neighbours: the session's graph (``N(u)`` for every ``u``), needed by a
                :data:`GraphRule`.

        Raises:
            ParameterError: a graph rule for round 0, or without the graph.
        """
        entry = self.schedule.get(round_no, ())
        if callable(entry):
            if round_no < 1 or not neighbours:
                raise ParameterError("a dropout rule that names neighbours needs the graph, "
                                     "which exists only once round 0 has closed")
            entry = entry(neighbours)
        return {int(c) for c in entry}


@dataclass
class SecAggRun:
    """Outcome of one simulated session."""

    config: SessionConfig
    result: np.ndarray | None
    server_state: ServerState
    server_abort_reason: AbortReason | None
    client_states: list[ClientState]
    client_abort_reasons: dict[int, AbortReason]
    sets: dict[str, frozenset[int]]
    transcript: Transcript
    client_seconds: np.ndarray
    server_seconds: float
    codec_seconds: float
    bytes_up: np.ndarray
    bytes_down: np.ndarray
    wall_seconds: float
    input_digests: dict[int, bytes]
    clients: list[SecAggClient] = field(repr=False, default_factory=list)
    server: SecAggServer | None = field(repr=False, default=None)
    #: CPU seconds per client as a device of its own would spend them: the
    #: simulation's ``client_seconds`` plus the work the session's memo saved it
    #: (``None``: not measured, e.g. a run without the memo, where the two agree)
    device_client_seconds: np.ndarray | None = None
    #: the server's CPU seconds likewise
    device_server_seconds: float | None = None
    #: the session memo's hits, misses and seconds (``SessionMemo.stats``), or ``None``
    memo_stats: dict[str, Any] | None = None

    @property
    def device_seconds(self) -> float:
        """The round's CPU on devices of their own: every client's and the server's,
        nothing shared between parties (codec time included; it is per party too)."""
        clients = (self.device_client_seconds if self.device_client_seconds is not None
                   else self.client_seconds)
        server = (self.device_server_seconds if self.device_server_seconds is not None
                  else self.server_seconds)
        return float(np.sum(clients)) + float(server) + float(self.codec_seconds)

    @property
    def completed(self) -> bool:
        return self.server_state is ServerState.COMPLETED

    @property
    def survivors(self) -> frozenset[int]:
        """``U3``: the clients whose masked input is in the sum."""
        return self.sets.get("U3", frozenset())


Hook = Callable[[int, str, list[Envelope]], list[Envelope]]


class _InputOf:
    """``source(i)``, called when client ``i`` needs its input (a closure would cost
    four times the memory, per simulated client)."""

    __slots__ = ("source", "i")

    def __init__(self, source: Callable[[int], np.ndarray], i: int) -> None:
        self.source, self.i = source, i

    def __call__(self) -> np.ndarray:
        return self.source(self.i)


def drain(out: Sequence[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """The server's replies of one round, each dropped once taken: a list is popped
    (its messages would otherwise all stay alive beside what the clients keep from
    them until the last client was served); a lazy sequence (round 1's routed
    ciphertexts, :class:`secagg.server.SecAggServer`) builds each as it is taken."""
    if isinstance(out, list):
        out = list(out)
        out.reverse()
        while out:
            yield out.pop()
    else:
        yield from out


class SecAggSimulation:
    """One session in this process, driven a phase at a time.

    ``SecAggSimulation(...)`` sets the session up (clients, server, counters);
    :meth:`start` runs round 0 (every client advertises its keys); each :meth:`step`
    delivers the current round's messages to the server, closes the round and delivers
    the replies; :meth:`run` does both until :attr:`finished`; :meth:`result` reports.

    Args:
        config: the session.
        inputs: ``(n, dim)`` integers in ``[0, R)``, row ``i`` is client ``i``'s input;
            or a function ``i -> input`` called when client ``i`` needs it (round 2).
        rand: randomness source (default ``OsRandom``); with a deterministic source
            (one having ``child``) every client gets its own labelled child stream.
        dropout: which clients drop before which round.
        adversary: envelope hook (see the module docstring).
        signing_keys, verify_keys: Ed25519 PKI for the malicious-server variant
            (generated from ``rand`` when omitted).
        server: a server object to use instead of a fresh honest one (tests may
            pass a subclass that misbehaves; the threshold transport passes one that
            a committee helper replicates).
        client_seeds: ``position -> 32-byte seed`` for clients whose randomness must
            be re-derivable (``protocol.core.randomness.seeded_randomness(seed,
            "client-<i>")``): the threshold transport's helpers, whose auditors replay
            them.
        progress: called as ``progress(step, done, total)`` after each client has been
            served in protocol step ``step`` (0: advertise keys, then one step per
            server round), ``total`` being the clients served in that step.
        share_work: one :class:`secagg.memo.SessionMemo` for the session's clients
            and server (default); ``False``: every party computes everything itself.

    Raises:
        ParameterError: inputs of the wrong shape or range.
    """

    def __init__(self, config: SessionConfig, inputs: np.ndarray | Callable[[int], np.ndarray],
                 *, rand: Any = None, dropout: Dropout | None = None,
                 adversary: Hook | None = None, signing_keys: Sequence[bytes] | None = None,
                 verify_keys: Sequence[bytes] | None = None,
                 server: SecAggServer | None = None,
                 progress: Callable[[int, int, int], None] | None = None,
                 client_seeds: Mapping[int, bytes] | None = None,
                 share_work: bool = True) -> None:
        n = config.n
        rand = self._begin(config, rand, dropout, adversary, progress, share_work)
        if callable(inputs):
            source = inputs

            def value_of(i: int) -> Any:
                return _InputOf(source, i)
        else:
            inputs = np.asarray(inputs)
            if inputs.shape != (n, config.dim):
                raise ParameterError(f"inputs must have shape ({n}, {config.dim})")

            def value_of(i: int) -> Any:
                return inputs[i]
        if config.malicious and (signing_keys is None or verify_keys is None):
            pairs = [crypto.ed25519_keypair(rand) for _ in range(n)]
            signing_keys = [sk for sk, _ in pairs]
            verify_keys = [pk for _, pk in pairs]
        if verify_keys is not None:
            verify_keys = tuple(verify_keys)  # one tuple, shared by every client
        child = getattr(rand, "child", None)
        seeded = dict(client_seeds or {})

        def rand_of(i: int) -> Any:
            own = child(f"client-{i}") if child else rand  # the same draws either way
            return seeded_randomness(seeded[i], f"client-{i}") if i in seeded else own

        self.clients = [SecAggClient(config, i, value_of(i), rand_of(i),
                                     signing_key=signing_keys[i] if signing_keys else None,
                                     verify_keys=verify_keys, memo=self.memo)
                        for i in range(n)]
        self._driver_state(config, server, verify_keys)

    def _begin(self, config: SessionConfig, rand: Any, dropout: Dropout | None,
               adversary: Hook | None, progress: Callable[[int, int, int], None] | None,
               share_work: bool = True) -> Any:
        """Record the session's settings and clocks; returns the randomness source."""
        self.wall0 = time.perf_counter()
        #: this session's memo of pure cryptographic work (``None``: none shared)
        self.memo = SessionMemo(clock=time.thread_time) if share_work else None
        self.progress = progress
        self.config = config
        self.dropout = dropout or Dropout.none()
        self.adversary = adversary
        return rand if rand is not None else OsRandom()

    def _driver_state(self, config: SessionConfig, server: SecAggServer | None,
                      verify_keys: Sequence[bytes] | None) -> None:
        """The server, transcript, counters and limits (everything but the clients)."""
        n = config.n
        self.server = (server if server is not None
                       else SecAggServer(config, verify_keys=verify_keys, memo=self.memo))
        self.transcript = Transcript(threshold=config.threshold)
        self.cpu = np.zeros(n)
        #: per client: the memo's charges for work it was spared (device cost = cpu + this)
        self.spared = np.zeros(n)
        self.srv_spared = 0.0
        self.up = np.zeros(n, dtype=np.int64)
        self.down = np.zeros(n, dtype=np.int64)
        self.srv_cpu = 0.0
        self.codec_cpu = 0.0
        self.up_limits = wire_secagg.server_limits(config)
        self.down_limits = wire_secagg.client_limits(config)
        self.alive = np.ones(n, dtype=bool)
        #: upward envelopes held for the adversary hook until the round closes
        self.pending: list[Envelope] = []

    # -- the parties' calls, timed and through the codec -------------------------
    def drop(self, round_no: int) -> None:
        """Mark the clients scheduled to drop before ``round_no`` as gone."""
        dropout, config, alive, n = self.dropout, self.config, self.alive, self.config.n
        graph = self.server.neighbours if round_no >= 1 else None
        scheduled = dropout.before(round_no, graph)
        if round_no == 4 and not config.malicious:
            scheduled |= dropout.before(3, graph)  # no round 3 without the consistency check
        for c in scheduled:
            if 0 <= c < n:
                alive[c] = False

    def client_call(self, c: int, fn: Callable[[], list[Any]]) -> list[Any]:
        """Run one call of client ``c``'s state machine; a misuse error is recorded."""
        memo = self.memo
        charged = memo.charged if memo is not None else 0.0
        t0 = time.thread_time()
        try:
            return fn()
        except SecAggError as exc:  # misuse (e.g. an injected message): recorded
            self.transcript.rejected.append((c, -1, f"{type(exc).__name__}: {exc}"))
            return []
        finally:
            self.cpu[c] += time.thread_time() - t0
            if memo is not None:
                self.spared[c] += memo.charged - charged

    def encode_up(self, c: int, msgs: list[Any]) -> list[Envelope]:
        """Encode client ``c``'s messages to the server, recording reveals and sizes."""
        transcript = self.transcript
        out = []
        for m in msgs:
            t0 = time.thread_time()
            env = Envelope(c, SERVER, type(m).ROUND, codec.encode(m))
            self.codec_cpu += time.thread_time() - t0
            self.up[c] += len(env.data)
            if isinstance(m, UnmaskShares):
                transcript.note_reveal(c, m.b_owners, m.s_owners)
            transcript.record(env, type(m).__name__)
            out.append(env)
        return out

    def deliver_up(self, env: Envelope) -> None:
        """Decode an upward envelope and hand it to the server (refusals recorded)."""
        transcript, srv = self.transcript, self.server
        t0 = time.thread_time()
        try:
            msg = codec.decode(env.data, limits=self.up_limits)
        except codec.CodecError as exc:
            transcript.rejected.append((SERVER, env.round, f"CodecError: {exc}"))
            return
        finally:
            self.codec_cpu += time.thread_time() - t0
        if getattr(msg, "sender", None) != env.sender:
            # channels are authenticated: a message cannot claim another client's name
            transcript.rejected.append((SERVER, env.round, "sender does not match channel"))
            return
        self.note_up(env, msg)
        memo = self.memo
        charged = memo.charged if memo is not None else 0.0
        t0 = time.thread_time()
        try:
            srv.receive(msg)
        except SecAggError as exc:
            transcript.rejected.append((SERVER, env.round, f"{type(exc).__name__}: {exc}"))
        finally:
            self.srv_cpu += time.thread_time() - t0
            if memo is not None:
                self.srv_spared += memo.charged - charged

    def note_up(self, env: Envelope, msg: Any) -> None:
        """Called with each decoded upward message before the server gets it (the local
        clients' reveals are noted when they are encoded, in :meth:`encode_up`)."""

    def deliver_down(self, env: Envelope) -> list[Envelope]:
        """Decode a downward envelope for a live client; return its encoded replies."""
        c = env.recipient
        if not 0 <= c < self.config.n or not self.alive[c]:
            return []
        self.down[c] += len(env.data)
        t0 = time.thread_time()
        try:
            msg = codec.decode(env.data, limits=self.down_limits)
        except codec.CodecError as exc:
            self.transcript.rejected.append((c, env.round, f"CodecError: {exc}"))
            return []
        finally:
            self.codec_cpu += time.thread_time() - t0
        clients, encode_up, client_call = self.clients, self.encode_up, self.client_call
        return encode_up(c, client_call(c, lambda: clients[c].receive(msg)))

    # -- phases -----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """Has the server completed or aborted?"""
        return self.server.state in (ServerState.COMPLETED, ServerState.ABORTED)

    def start(self) -> None:
        """Round 0: every live client starts and sends its keys."""
        n, alive, adversary, clients = self.config.n, self.alive, self.adversary, self.clients
        encode_up, client_call, deliver_up = self.encode_up, self.client_call, self.deliver_up
        drop = self.drop
        # round 0
        drop(0)
        pending: list[Envelope] = self.pending
        progress, starting, done = self.progress, int(alive.sum()), 0
        for c in range(n):
            if alive[c]:
                envs = encode_up(c, client_call(c, clients[c].start))
                if adversary is None:
                    for e in envs:
                        deliver_up(e)
                else:
                    pending.extend(envs)
                done += 1
                if progress is not None:
                    progress(0, done, starting)

    def step(self) -> None:
        """One server round: deliver what is pending, close the round, deliver the replies.

        Raises:
            SecAggError: the server has already completed or aborted.
        """
        if self.finished:
            raise SecAggError("the session is over: no round to close")
        srv, adversary, transcript, drop = self.server, self.adversary, self.transcript, self.drop
        deliver_up, deliver_down, pending = self.deliver_up, self.deliver_down, self.pending
        round_no = srv.round  # the round being closed (messages' ROUND, see secagg.messages)
        if adversary is not None:
            for e in adversary(round_no, "up", pending):
                deliver_up(e)
            self.pending = pending = []
        t0 = time.thread_time()
        out = srv.close_round()
        self.srv_cpu += time.thread_time() - t0
        next_round = srv.round
        if next_round is not None:
            drop(next_round)
        downs = []
        progress = self.progress
        total = len(out)
        for served, (recipient, msg) in enumerate(drain(out), 1):
            t0 = time.thread_time()
            env = Envelope(SERVER, recipient, round_no, codec.encode(msg))
            self.codec_cpu += time.thread_time() - t0
            transcript.record(env, type(msg).__name__)
            if adversary is None:
                for e in deliver_down(env):
                    deliver_up(e)
            else:
                downs.append(env)
            if progress is not None:
                progress(round_no + 1, served, total)
        if adversary is not None:
            for env in adversary(round_no, "down", downs):
                pending.extend(deliver_down(env))

    def run(self) -> None:
        """Round 0, then every server round until the session completes or aborts."""
        self.start()
        while not self.finished:
            self.step()

    def _device_figures(self) -> dict[str, Any]:
        """The per-device CPU figures and the memo's statistics, for :class:`SecAggRun`."""
        if self.memo is None:
            return {}
        return {"device_client_seconds": self.cpu + self.spared,
                "device_server_seconds": self.srv_cpu + self.srv_spared,
                "memo_stats": self.memo.stats()}

    def result(self, check_invariants: bool = True) -> SecAggRun:
        """The outcome so far (normally after :meth:`run`).

        Args:
            check_invariants: check the per-client invariants that hold whatever the
                server does (:func:`protocol.core.invariants.check_no_double_reveal` and
                :func:`~protocol.core.invariants.check_no_send_after_abort`).

        Raises:
            protocol.core.invariants.InvariantViolation: an honest client broke an
                invariant (a bug in the client state machine; never a server's doing).
        """
        srv, clients = self.server, self.clients
        run = SecAggRun(
            config=self.config, result=srv.result, server_state=srv.state,
            server_abort_reason=srv.abort_reason,
            client_states=[c.state for c in clients],
            client_abort_reasons={i: c.abort_reason for i, c in enumerate(clients)
                                  if c.abort_reason is not None},
            sets=dict(srv.sets), transcript=self.transcript, client_seconds=self.cpu,
            server_seconds=self.srv_cpu, codec_seconds=self.codec_cpu, bytes_up=self.up,
            bytes_down=self.down, wall_seconds=time.perf_counter() - self.wall0,
            input_digests=dict(srv.input_digests), clients=clients, server=srv,
            **self._device_figures())
        if check_invariants:
            from protocol.core.invariants import check_no_double_reveal, check_no_send_after_abort

            check_no_double_reveal(run)
            check_no_send_after_abort(run)
        return run


def run_secagg(config: SessionConfig, inputs: np.ndarray | Callable[[int], np.ndarray], *, rand: Any = None,
               dropout: Dropout | None = None, adversary: Hook | None = None,
               signing_keys: Sequence[bytes] | None = None,
               verify_keys: Sequence[bytes] | None = None,
               server: SecAggServer | None = None,
               check_invariants: bool = True,
               progress: Callable[[int, int, int], None] | None = None,
               client_seeds: Mapping[int, bytes] | None = None,
               share_work: bool = True) -> SecAggRun:
    """Run one full session in this process (a :class:`SecAggSimulation` from start to end).

    Args:
        config, inputs, rand, dropout, adversary, signing_keys, verify_keys, server,
            progress, client_seeds, share_work: as for :class:`SecAggSimulation`.
        check_invariants: as for :meth:`SecAggSimulation.result`.

    Returns:
        A :class:`SecAggRun`; an aborted session is a normal outcome, not an exception.

    Raises:
        ParameterError: inputs of the wrong shape or range.
        protocol.core.invariants.InvariantViolation: an honest client broke an invariant
            (a bug in the client state machine; never a server's doing).
    """
    sim = SecAggSimulation(config, inputs, rand=rand, dropout=dropout, adversary=adversary,
                           signing_keys=signing_keys, verify_keys=verify_keys, server=server,
                           progress=progress, client_seeds=client_seeds,
                           share_work=share_work)
    sim.run()
    return sim.result(check_invariants)


def make_config(n: int, dim: int, *, graph: str = "complete", degree: int | None = None,
                threshold: int | None = None, modulus: int = 1 << 32,
                malicious: bool = False, context: bytes = b"fedhh test session",
                participants: Sequence[int] | None = None, rand: Any = None,
                server_nonce: bytes | None = None) -> SessionConfig:
    """A session with explicit parameters (tests, small simulations).

    ``degree`` defaults to ``n - 1`` (complete) and ``threshold`` to a strict majority
    of the degree; use :func:`secagg.params.find_params` for parameters derived from a
    threat model. Every call is a fresh attempt: the server nonce is drawn from ``rand``
    (default ``OsRandom``) unless ``server_nonce`` is given (tests that replay an
    attempt).

    Raises:
        ParameterError: inconsistent parameters.
    """
    from secagg.params import SecAggParams

    k = n - 1 if degree is None else degree
    t = k // 2 + 1 if threshold is None else threshold
    params = SecAggParams(n=n, degree=k, threshold=t, graph=graph, malicious=malicious)
    if server_nonce is None:
        server_nonce = (rand if rand is not None else OsRandom()).token_bytes(
            crypto.FRESH_NONCE_BYTES)
    return SessionConfig(params, tuple(participants) if participants is not None
                         else tuple(range(n)), context, dim, modulus, malicious=malicious,
                         server_nonce=server_nonce)
