"""In-memory simulation engine for one secure-aggregation session.

Theory of operation
-------------------
:func:`run_secagg` builds ``n`` :class:`secagg.client.SecAggClient` objects and one
:class:`secagg.server.SecAggServer` and drives them round by round. Every message goes
through the wire format: encoded with :func:`protocol.core.codec.encode` into an
:class:`Envelope`, and decoded with :func:`protocol.core.codec.decode` before it reaches the
recipient, so every simulation exercises the codec.

* **Dropouts** (:class:`Dropout`): a client listed for round ``r`` stops before it would
  send its round-``r`` message (it computes nothing more and receives nothing more).
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
* **Cost**: CPU seconds (``time.process_time``) around every state-machine call, per
  party; bytes up and down per client; and, inside a :func:`profile_primitives` block,
  the time spent in each cryptographic primitive (the primitive functions are wrapped
  for the duration of the block; :mod:`protocol.core.secagg_profile` compares it with the
  bare library cost).
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
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from protocol.core import codec
from protocol.core import wire_secagg  # noqa: F401  (registers the message types)
from protocol.core.randomness import OsRandom
from secagg import crypto, prg, shamir
from secagg.client import SecAggClient
from secagg.errors import ParameterError, SecAggError
from secagg.messages import UnmaskShares
from secagg.server import SecAggServer
from secagg.state import AbortReason, ClientState, ServerState, SessionConfig

__all__ = ["Envelope", "EnvelopeRecord", "Dropout", "Transcript", "SecAggRun", "make_config",
           "run_secagg", "SERVER", "PrimitiveProfile", "profile_primitives"]

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


@dataclass(frozen=True, slots=True)
class EnvelopeRecord:
    sender: int
    recipient: int
    round: int
    kind: str
    size: int


@dataclass
class Dropout:
    """Which clients drop before each round.

    Attributes:
        schedule: round -> clients that stop before sending that round's message.
    """

    schedule: Mapping[int, Iterable[int]] = field(default_factory=dict)

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

    def before(self, round_no: int) -> set[int]:
        return {int(c) for c in self.schedule.get(round_no, ())}


@dataclass
class Transcript:
    """What happened on the wire, queryable by tests."""

    envelopes: list[EnvelopeRecord] = field(default_factory=list)
    #: client -> (peers whose b-share it sent, peers whose s_sk-share it sent)
    reveals: dict[int, tuple[set[int], set[int]]] = field(default_factory=dict)
    #: messages the server or a client refused: (recipient, round, reason text)
    rejected: list[tuple[int, int, str]] = field(default_factory=list)
    threshold: int = 0

    def record(self, env: Envelope, kind: str) -> None:
        self.envelopes.append(EnvelopeRecord(env.sender, env.recipient, env.round, kind,
                                             len(env.data)))

    def revealed_both(self, client: int, peer: int) -> bool:
        """Did ``client`` ever send both a ``b``-share and an ``s_sk``-share of ``peer``?"""
        b, s = self.reveals.get(client, (set(), set()))
        return peer in b and peer in s

    def b_share_holders(self, peer: int) -> set[int]:
        return {c for c, (b, _) in self.reveals.items() if peer in b}

    def s_share_holders(self, peer: int) -> set[int]:
        return {c for c, (_, s) in self.reveals.items() if peer in s}

    def server_could_unmask(self, peer: int) -> bool:
        """Did the clients, together, reveal ``t`` shares of *both* secrets of ``peer``
        (enough to strip every mask off its input)?"""
        t = self.threshold
        return len(self.b_share_holders(peer)) >= t and len(self.s_share_holders(peer)) >= t

    def bytes_by_round(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.envelopes:
            out[e.round] = out.get(e.round, 0) + e.size
        return out


@dataclass
class PrimitiveProfile:
    """Calls and CPU seconds (``time.process_time``) spent inside each wrapped primitive
    during a run. A primitive called from inside another wrapped one (``x25519_keypair``
    computing its public key with ``x25519_public``) counts as part of the outer call
    only."""

    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: argument shapes needed to replay the same work bare (kept small)
    shapes: dict[str, dict[Any, int]] = field(default_factory=dict)


_CATEGORY = {
    ("crypto", "x25519_shared"): "key_agreement", ("crypto", "x25519_keypair"): "key_agreement",
    ("crypto", "x25519_public"): "key_agreement", ("prg", "expand_mask"): "prg",
    ("shamir", "split"): "shamir", ("shamir", "combine"): "shamir",
    ("crypto", "aead_encrypt"): "aead", ("crypto", "aead_decrypt"): "aead",
    ("crypto", "ed25519_sign"): "signature", ("crypto", "ed25519_verify"): "signature",
    ("crypto", "hkdf"): "kdf",
}


def _shape(name: str, args: tuple[Any, ...]) -> Any:
    if name == "expand_mask":
        return (args[1], args[2])
    if name == "split":
        return (len(args[1]), args[2])
    if name == "combine":
        return args[1]
    if name in ("aead_encrypt", "aead_decrypt"):
        return (len(args[1]), len(args[2]))
    return None


@contextmanager
def profile_primitives() -> Iterator[PrimitiveProfile]:
    """Wrap the secagg primitives with timers for the duration of the block.

    The state machines call the primitives through their modules
    (``crypto.x25519_shared(...)``), so replacing the module attributes is enough.
    Not thread-safe; meant for benchmarks.
    """
    prof = PrimitiveProfile()
    mods = {"crypto": crypto, "prg": prg, "shamir": shamir}
    saved = []
    # only the outermost wrapped call is counted: x25519_keypair calls x25519_public
    # through the module, and counting both would count its time twice
    depth = [0]
    for (mod_name, fn_name), cat in _CATEGORY.items():
        mod = mods[mod_name]
        orig = getattr(mod, fn_name)
        saved.append((mod, fn_name, orig))

        def wrapper(*args: Any, __orig: Callable[..., Any] = orig, __name: str = fn_name,
                    **kw: Any) -> Any:
            if depth[0]:
                return __orig(*args, **kw)
            depth[0] += 1
            t0 = time.process_time()
            try:
                return __orig(*args, **kw)
            finally:
                dt = time.process_time() - t0
                depth[0] -= 1
                prof.calls[__name] = prof.calls.get(__name, 0) + 1
                prof.seconds[__name] = prof.seconds.get(__name, 0.0) + dt
                sh = _shape(__name, args)
                if sh is not None:
                    d = prof.shapes.setdefault(__name, {})
                    d[sh] = d.get(sh, 0) + 1

        setattr(mod, fn_name, wrapper)
    try:
        yield prof
    finally:
        for mod, fn_name, orig in saved:
            setattr(mod, fn_name, orig)


def category_seconds(prof: PrimitiveProfile) -> dict[str, float]:
    """Seconds per category (key_agreement, prg, shamir, aead, signature, kdf)."""
    out: dict[str, float] = {}
    for (_, fn), cat in _CATEGORY.items():
        out[cat] = out.get(cat, 0.0) + prof.seconds.get(fn, 0.0)
    return out


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

    @property
    def completed(self) -> bool:
        return self.server_state is ServerState.COMPLETED

    @property
    def survivors(self) -> frozenset[int]:
        """``U3``: the clients whose masked input is in the sum."""
        return self.sets.get("U3", frozenset())


Hook = Callable[[int, str, list[Envelope]], list[Envelope]]


def run_secagg(config: SessionConfig, inputs: np.ndarray | Callable[[int], np.ndarray], *, rand: Any = None,
               dropout: Dropout | None = None, adversary: Hook | None = None,
               signing_keys: Sequence[bytes] | None = None,
               verify_keys: Sequence[bytes] | None = None,
               server: SecAggServer | None = None,
               check_invariants: bool = True,
               progress: Callable[[int, int, int], None] | None = None) -> SecAggRun:
    """Run one full session in this process.

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
            pass a subclass that misbehaves).
        check_invariants: check, before returning, the per-client invariants that hold
            whatever the server does (:func:`protocol.core.invariants.check_no_double_reveal`
            and :func:`~protocol.core.invariants.check_no_send_after_abort`).
        progress: called as ``progress(step, done, total)`` after each client has been
            served in protocol step ``step`` (0: advertise keys, then one step per
            server round), ``total`` being the clients served in that step.

    Returns:
        A :class:`SecAggRun`; an aborted session is a normal outcome, not an exception.

    Raises:
        ParameterError: inputs of the wrong shape or range.
        protocol.core.invariants.InvariantViolation: an honest client broke an invariant
            (a bug in the client state machine; never a server's doing).
    """
    wall0 = time.perf_counter()
    n = config.n
    rand = rand if rand is not None else OsRandom()
    dropout = dropout or Dropout.none()
    if callable(inputs):
        source = inputs

        def value_of(i: int) -> Any:
            return lambda: source(i)
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
    child = getattr(rand, "child", None)
    clients = [SecAggClient(config, i, value_of(i),
                            child(f"client-{i}") if child else rand,
                            signing_key=signing_keys[i] if signing_keys else None,
                            verify_keys=verify_keys) for i in range(n)]
    srv = server if server is not None else SecAggServer(config, verify_keys=verify_keys)
    transcript = Transcript(threshold=config.threshold)
    cpu = np.zeros(n)
    up = np.zeros(n, dtype=np.int64)
    down = np.zeros(n, dtype=np.int64)
    srv_cpu = 0.0
    codec_cpu = 0.0
    alive = np.ones(n, dtype=bool)

    def drop(round_no: int) -> None:
        scheduled = dropout.before(round_no)
        if round_no == 4 and not config.malicious:
            scheduled |= dropout.before(3)  # no round 3 without the consistency check
        for c in scheduled:
            if 0 <= c < n:
                alive[c] = False

    def client_call(c: int, fn: Callable[[], list[Any]]) -> list[Any]:
        t0 = time.process_time()
        try:
            return fn()
        except SecAggError as exc:  # misuse (e.g. an injected message): recorded
            transcript.rejected.append((c, -1, f"{type(exc).__name__}: {exc}"))
            return []
        finally:
            cpu[c] += time.process_time() - t0

    def encode_up(c: int, msgs: list[Any]) -> list[Envelope]:
        nonlocal codec_cpu
        out = []
        for m in msgs:
            t0 = time.process_time()
            env = Envelope(c, SERVER, type(m).ROUND, codec.encode(m))
            codec_cpu += time.process_time() - t0
            up[c] += len(env.data)
            if isinstance(m, UnmaskShares):
                b, s = transcript.reveals.setdefault(c, (set(), set()))
                b.update(m.b_owners)
                s.update(m.s_owners)
            transcript.record(env, type(m).__name__)
            out.append(env)
        return out

    def deliver_up(env: Envelope) -> None:
        nonlocal srv_cpu, codec_cpu
        t0 = time.process_time()
        try:
            msg = codec.decode(env.data)
        except codec.CodecError as exc:
            transcript.rejected.append((SERVER, env.round, f"CodecError: {exc}"))
            return
        finally:
            codec_cpu += time.process_time() - t0
        if getattr(msg, "sender", None) != env.sender:
            # channels are authenticated: a message cannot claim another client's name
            transcript.rejected.append((SERVER, env.round, "sender does not match channel"))
            return
        t0 = time.process_time()
        try:
            srv.receive(msg)
        except SecAggError as exc:
            transcript.rejected.append((SERVER, env.round, f"{type(exc).__name__}: {exc}"))
        finally:
            srv_cpu += time.process_time() - t0

    def deliver_down(env: Envelope) -> list[Envelope]:
        nonlocal codec_cpu
        c = env.recipient
        if not 0 <= c < n or not alive[c]:
            return []
        down[c] += len(env.data)
        t0 = time.process_time()
        try:
            msg = codec.decode(env.data)
        except codec.CodecError as exc:
            transcript.rejected.append((c, env.round, f"CodecError: {exc}"))
            return []
        finally:
            codec_cpu += time.process_time() - t0
        return encode_up(c, client_call(c, lambda: clients[c].receive(msg)))

    # round 0
    drop(0)
    pending: list[Envelope] = []
    starting = int(alive.sum())
    done = 0
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
    while srv.state not in (ServerState.COMPLETED, ServerState.ABORTED):
        round_no = srv.round  # the round being closed (messages' ROUND, see secagg.messages)
        if adversary is not None:
            for e in adversary(round_no, "up", pending):
                deliver_up(e)
            pending = []
        t0 = time.process_time()
        out = srv.close_round()
        srv_cpu += time.process_time() - t0
        next_round = srv.round
        if next_round is not None:
            drop(next_round)
        downs = []
        for served, (recipient, msg) in enumerate(out, start=1):
            t0 = time.process_time()
            env = Envelope(SERVER, recipient, round_no, codec.encode(msg))
            codec_cpu += time.process_time() - t0
            transcript.record(env, type(msg).__name__)
            if adversary is None:
                for e in deliver_down(env):
                    deliver_up(e)
            else:
                downs.append(env)
            if progress is not None:
                progress(round_no + 1, served, len(out))
        if adversary is not None:
            for env in adversary(round_no, "down", downs):
                pending.extend(deliver_down(env))
    run = SecAggRun(
        config=config, result=srv.result, server_state=srv.state,
        server_abort_reason=srv.abort_reason,
        client_states=[c.state for c in clients],
        client_abort_reasons={i: c.abort_reason for i, c in enumerate(clients)
                              if c.abort_reason is not None},
        sets=dict(srv.sets), transcript=transcript, client_seconds=cpu,
        server_seconds=srv_cpu, codec_seconds=codec_cpu, bytes_up=up, bytes_down=down,
        wall_seconds=time.perf_counter() - wall0, input_digests=dict(srv.input_digests),
        clients=clients, server=srv)
    if check_invariants:
        from protocol.core.invariants import check_no_double_reveal, check_no_send_after_abort

        check_no_double_reveal(run)
        check_no_send_after_abort(run)
    return run


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
