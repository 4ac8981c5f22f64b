"""The client side of a simulated secure-aggregation session, in shards on an engine.

Theory of operation
-------------------
:class:`ShardedSecAggSimulation` is :class:`protocol.core.secagg_engine.SecAggSimulation`
with the clients moved out: the server, the dropout schedule, the adversary hook, the
transcript and every decode of a client message stay in the driver; the clients live in
:class:`ClientShard` objects, one per contiguous batch of roster positions, held by an
:class:`~protocol.core.cluster.Engine` (this process, or actors on Dask workers). Per
protocol step the driver encodes the server's messages, packs those for each shard into
one msgpack blob (positions and encoded frames), calls every shard at once, and unpacks
their replies the same way: encoded messages cross process boundaries, never per-client
Python objects.

The run is the same as the in-process simulation's: each client gets the same input
and, with a deterministic source, the same randomness (the driver derives the
per-client child seeds in the order :class:`SecAggSimulation` does and ships them), so a
seeded sharded run gives the same transcript and release as a seeded local one (tested).

A shard whose worker dies (:class:`~protocol.core.cluster.ShardLost`) turns its clients
into dropouts from that step on: the server closes its rounds without them, as it would
for clients that went offline, and the session completes exactly over the survivors or
aborts with the state machine's reason.
"""
from __future__ import annotations

import os
import pickle
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import msgpack
import numpy as np

from protocol.core import codec, wire_secagg
from protocol.core.cluster import Engine, LocalEngine, ShardLost
from protocol.core.randomness import SEED_BYTES, OsRandom
from protocol.core.secagg_engine import (
    SERVER, Dropout, Envelope, Hook, SecAggRun, SecAggSimulation, drain,
)
from secagg import crypto, graph as graph_mod
from secagg.client import SecAggClient
from secagg.errors import ParameterError, SecAggError
from secagg.memo import SessionMemo
from secagg.messages import UnmaskShares
from secagg.server import SecAggServer
from secagg.state import AbortReason, ClientState, ModAccumulator, SessionConfig

__all__ = ["ClientShard", "ShardedSecAggSimulation", "SeededRows", "shard_bounds",
           "run_secagg_sharded"]


class SeededRows:
    """Inputs drawn per client from ``default_rng([seed, i])`` (benchmarks): picklable,
    so a shard computes its own clients' rows instead of receiving them."""

    def __init__(self, seed: int, dim: int, modulus: int) -> None:
        self.seed, self.dim, self.modulus = int(seed), int(dim), int(modulus)

    def __call__(self, i: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, i])
        if self.modulus == 1 << 64:
            return rng.integers(0, 1 << 64, self.dim, dtype=np.uint64, endpoint=False)
        return rng.integers(0, self.modulus, self.dim, dtype=np.uint64)

    def total(self, clients: Iterable[int]) -> np.ndarray:
        """The plaintext sum of these clients' rows mod the modulus: what a round over
        them must output."""
        acc = ModAccumulator(self.dim, self.modulus)
        for i in clients:
            acc.add(self(i))
        return acc.value()


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous ranges covering ``0..n-1`` (sizes differ by at most 1)."""
    edges = np.linspace(0, n, shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


#: about the most bytes of one shard's messages in one step (its reply, or the
#: messages it is sent): the driver holds a few shards' at once (the engine's window)
SHARD_STEP_BYTES = 32 << 20
#: the bytes of a key-list entry on the wire, rounded up (position, two X25519 keys,
#: nonce, Ed25519 signature, msgpack framing)
_KEY_ENTRY_BYTES = 160


def shards_for_bytes(config: SessionConfig) -> int:
    """How many shards keep each shard's largest step under :data:`SHARD_STEP_BYTES`:
    its clients' masked inputs (``ceil(dim b / 8)`` bytes each, ``b`` the bit width
    of the modulus) or their key lists (about 160 bytes per neighbour). A 10^6-user
    TrieHH round of 21,980 clients with 7,224 candidates sends 1.2 GB of masked inputs
    up: in 8 shards, 150 MB a reply."""
    per_client = max((config.dim * (config.modulus - 1).bit_length() + 7) // 8,
                     config.degree * _KEY_ENTRY_BYTES)
    return -(-config.n * per_client // SHARD_STEP_BYTES)


def _pack(pairs: Sequence[tuple[int, bytes]]) -> bytes:
    return msgpack.packb([[p for p, _ in pairs], [d for _, d in pairs]], use_bin_type=True)


def _unpack(blob: bytes, max_items: int) -> list[tuple[int, bytes]]:
    positions, frames = msgpack.unpackb(blob, raw=False, max_array_len=max_items,
                                        max_bin_len=1 << 31)
    return list(zip(positions, frames))


class _RowOf:
    """Client ``i``'s input, computed when the client needs it: ``inputs(i)``."""

    __slots__ = ("inputs", "i")

    def __init__(self, inputs: Callable[[int], np.ndarray], i: int) -> None:
        self.inputs, self.i = inputs, i

    def __call__(self) -> np.ndarray:
        return self.inputs(self.i)


def _portable(value: Any, i: int) -> Any:
    """What a moved client takes of its input: the row itself if it has one; of a
    shard's inputs that can be cut (``shard(lo, hi)``: a vote round's choices) only its
    own part, still computed when needed (a vote is one integer where its row has an
    entry per candidate); inputs that cannot be cut are small picklable functions of
    ``i`` (:class:`SeededRows`) and go whole; anything else is computed now."""
    if not isinstance(value, _RowOf):
        return value() if callable(value) else value
    if hasattr(value.inputs, "shard"):
        return _RowOf(value.inputs.shard(i, i + 1), i)
    if isinstance(value.inputs, SeededRows):
        return value
    return value()


#: a client's slots, and those a shard holds for all its clients (set on arrival)
_CLIENT_SLOTS = tuple(k for k in SecAggClient.__slots__ if k != "__weakref__")
_SHARED_SLOTS = frozenset({"config", "_verify_keys", "_memo", "_table"})


#: the session memos of this process, by session token, held only by the shards that
#: use them: a memo goes when the last shard of its session is dropped
_SESSION_MEMOS: "weakref.WeakValueDictionary[bytes, SessionMemo]" = weakref.WeakValueDictionary()


def session_memo(token: bytes) -> SessionMemo:
    """The :class:`secagg.memo.SessionMemo` of the session ``token`` names, in this
    process: every shard of one session on one worker shares it (a Harary neighbour
    is in another shard more often than not, and the pairwise key it would share is
    then computed twice); shards of other sessions never see it."""
    memo = _SESSION_MEMOS.get(token)
    if memo is None:
        memo = SessionMemo(clock=time.thread_time)
        _SESSION_MEMOS[token] = memo
    return memo


class ClientShard:
    """Clients ``lo..hi-1`` of one session, as one stateful object (an actor).

    Args:
        config: the session.
        lo, hi: the roster positions held.
        inputs: ``(hi - lo, dim)`` rows, or a picklable ``i -> row`` for global ``i``.
        seeds: per-client 32-byte child seeds (deterministic runs, and auditable
            clients in any run) or ``None`` (each client draws from the operating
            system); a ``None`` entry also means the operating system.
        signing_keys: the held clients' Ed25519 seeds (malicious variant) or ``None``.
        verify_keys: all ``n`` verification keys (malicious variant) or ``None``.
        share_work: a token naming this session (bytes the driver drew for it): the
            shard's clients use the :class:`secagg.memo.SessionMemo` of that token in
            this process, shared with the session's other shards on the same worker
            and dropped when the last of them goes (:func:`session_memo`); ``True``: a
            memo of this shard's own; ``False`` or ``None``: none.
    """

    def __init__(self, config: SessionConfig, lo: int, hi: int, inputs: Any,
                 seeds: Sequence[bytes] | None, signing_keys: Sequence[bytes] | None,
                 verify_keys: Sequence[bytes] | None,
                 share_work: bool | bytes | None = True) -> None:
        from protocol.core.randomness import _DeterministicRandom

        self.lo, self.hi, self.config = lo, hi, config
        if verify_keys is not None:
            verify_keys = tuple(verify_keys)  # one tuple, shared by the shard's clients
        self.limits = wire_secagg.client_limits(config)
        self.cpu: dict[int, float] = {}
        self.spared: dict[int, float] = {}
        self.memo = (session_memo(share_work) if isinstance(share_work, bytes)
                     else SessionMemo(clock=time.thread_time) if share_work else None)
        self.rejected: list[tuple[int, int, str]] = []
        clients = []
        for j, i in enumerate(range(lo, hi)):
            if isinstance(inputs, np.ndarray):
                value: Any = inputs[j]
            else:
                value = _RowOf(inputs, i)
            rand = (_DeterministicRandom(seeds[j], f"client-{i}")
                    if seeds is not None and seeds[j] is not None else OsRandom())
            clients.append(SecAggClient(
                config, i, value, rand,
                signing_key=signing_keys[j] if signing_keys is not None else None,
                verify_keys=verify_keys, memo=self.memo))
        #: the clients held, by roster position (a regrouping moves some in and out)
        self.clients: dict[int, SecAggClient] = {c.index: c for c in clients}
        self.verify_keys = verify_keys

    def _call(self, i: int, fn: Callable[[], list[Any]]) -> list[Any]:
        memo = self.memo
        charged = memo.charged if memo is not None else 0.0
        t0 = time.thread_time()
        try:
            return fn()
        except SecAggError as exc:
            self.rejected.append((i, -1, f"{type(exc).__name__}: {exc}"))
            return []
        finally:
            self.cpu[i] = self.cpu.get(i, 0.0) + time.thread_time() - t0
            if memo is not None:
                self.spared[i] = self.spared.get(i, 0.0) + memo.charged - charged

    def start(self, positions: Sequence[int]) -> bytes:
        """Round 0 for the given (live) positions: their encoded messages, packed."""
        out = []
        for i in positions:
            for m in self._call(i, self.clients[i].start):
                out.append((i, codec.encode(m)))
        return _pack(out)

    def deliver(self, blob: bytes) -> bytes:
        """Decode each packed server message for its recipient, run the client, and
        return the replies packed the same way."""
        out = []
        clients, limits = self.clients, self.limits
        for i, data in _unpack(blob, 2 * len(clients) + 2):
            client = clients.get(i)
            if client is None:
                continue
            try:
                msg = codec.decode(data, limits=limits)
            except codec.CodecError as exc:
                self.rejected.append((i, -2, f"CodecError: {exc}"))
                continue
            for m in self._call(i, lambda: client.receive(msg)):
                out.append((i, codec.encode(m)))
        return _pack(out)

    # -- regrouping (ShardedSecAggSimulation._regroup) ---------------------------------
    def export(self, moves: Mapping[int, Sequence[int]]) -> dict[int, bytes]:
        """Hand over the clients ``moves`` names (destination shard -> positions): each
        destination's clients as one pickle of their state, their input row and their
        CPU so far; they leave this shard. What a shard's clients share (the session
        config, the verification keys, the memo, the transition table) stays behind and
        is the destination's own on arrival (:meth:`adopt`). The states cross between
        the simulation's own processes only (never a protocol party)."""
        out: dict[int, bytes] = {}
        shared = _SHARED_SLOTS
        for dest, positions in moves.items():
            batch = []
            for i in positions:
                c = self.clients.pop(i, None)
                if c is None:
                    continue
                state = {k: getattr(c, k) for k in _CLIENT_SLOTS if k not in shared}
                state["_value"] = _portable(state["_value"], i)
                batch.append((i, state, self.cpu.pop(i, 0.0), self.spared.pop(i, 0.0)))
            out[int(dest)] = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        return out

    def adopt(self, blobs: Sequence[bytes]) -> int:
        """Take in clients another shard exported to this one; returns how many."""
        from secagg.client import CLIENT_TRANSITIONS

        config, table = self.config, CLIENT_TRANSITIONS[bool(self.config.malicious)]
        count = 0
        for blob in blobs:
            for i, state, cpu, spared in pickle.loads(blob):
                c = SecAggClient.__new__(SecAggClient)
                for k, v in state.items():
                    setattr(c, k, v)
                c.config, c._verify_keys, c._memo, c._table = \
                    config, self.verify_keys, self.memo, table
                self.clients[i] = c
                self.cpu[i], self.spared[i] = cpu, spared
                count += 1
        return count

    def finish(self, _unused: Any = None) -> dict[str, Any]:
        """Every held client's end state and abort reason, their CPU time, and the
        server messages this shard refused."""
        held = sorted(self.clients)
        return {
            "indices": held,
            "states": [self.clients[i].state.value for i in held],
            "reasons": {i: c.abort_reason.value for i, c in self.clients.items()
                        if c.abort_reason is not None},
            "cpu": np.array([self.cpu.get(i, 0.0) for i in held]),
            "spared": np.array([self.spared.get(i, 0.0) for i in held]),
            "rejected": self.rejected,
            # shards of one worker share their session's memo: its statistics once
            "memo": self.memo.stats() if self.memo is not None else None,
            "memo_id": f"{os.getpid()}:{id(self.memo)}" if self.memo is not None else None,
        }


class ShardedSecAggSimulation(SecAggSimulation):
    """:class:`SecAggSimulation` with the clients in shards on an engine.

    Args:
        config, inputs, rand, dropout, adversary, signing_keys, verify_keys, server,
            progress, client_seeds: as for :class:`SecAggSimulation`; ``inputs`` is an ``(n, dim)``
            array (each shard receives its rows), a picklable ``i -> row`` with a
            ``shard(lo, hi)`` method that keeps only those rows
            (:class:`~protocol.core.transports.secagg_transport.VoteRows`), or any
            picklable ``i -> row`` (:class:`SeededRows`; shipped whole to every shard).
        engine: where the shards live (default: this process).
        shards: how many (default: ``4 x engine.workers``, or more when a shard's
            messages of one step would exceed :data:`SHARD_STEP_BYTES`
            (:func:`shards_for_bytes`); at most ``n``).
    """

    def __init__(self, config: SessionConfig, inputs: np.ndarray | Callable[[int], np.ndarray],
                 *, engine: Engine | None = None, shards: int | None = None,
                 rand: Any = None, dropout: Dropout | None = None,
                 adversary: Hook | None = None, signing_keys: Sequence[bytes] | None = None,
                 verify_keys: Sequence[bytes] | None = None,
                 server: SecAggServer | None = None,
                 progress: Callable[[int, int, int], None] | None = None,
                 client_seeds: Mapping[int, bytes] | None = None,
                 share_work: bool = True, regroup: bool | None = None) -> None:
        n = config.n
        rand = self._begin(config, rand, dropout, adversary, progress, share_work)
        if not callable(inputs):
            inputs = np.asarray(inputs)
            if inputs.shape != (n, config.dim):
                raise ParameterError(f"inputs must have shape ({n}, {config.dim})")
        # the same order of draws as SecAggSimulation: keys first, then one child per client
        if config.malicious and (signing_keys is None or verify_keys is None):
            pairs = [crypto.ed25519_keypair(rand) for _ in range(n)]
            signing_keys = [sk for sk, _ in pairs]
            verify_keys = [pk for _, pk in pairs]
        seeds: list[bytes | None] | None = (
            [rand.token_bytes(32) for _ in range(n)]
            if getattr(rand, "child", None) is not None else None)
        if client_seeds:
            seeds = seeds if seeds is not None else [None] * n
            for i, seed in client_seeds.items():
                if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
                    raise ParameterError(f"an auditable client's seed is {SEED_BYTES} bytes")
                seeds[i] = seed   # the shard derives seeded_randomness(seed, "client-i")
        self.engine = engine or LocalEngine()
        # one memo per session and worker process: the shards get the session's token
        token = os.urandom(16) if share_work else None
        count = shards or max(4 * self.engine.workers, shards_for_bytes(config))
        self.bounds = shard_bounds(n, max(1, min(n, count)))

        def rows(lo: int, hi: int) -> Any:
            if isinstance(inputs, np.ndarray):
                return inputs[lo:hi]
            return inputs.shard(lo, hi) if hasattr(inputs, "shard") else inputs

        args = [(config, lo, hi, rows(lo, hi),
                 seeds[lo:hi] if seeds is not None else None,
                 list(signing_keys[lo:hi]) if signing_keys is not None else None,
                 list(verify_keys) if verify_keys is not None else None, token)
                for lo, hi in self.bounds]
        self.handles: list[Any] = self.engine.start_shards(ClientShard, args)
        self.lost: dict[int, str] = {}
        self.clients: list[SecAggClient] = []
        self._driver_state(config, server, verify_keys)
        self._registry = codec.registered()  # a copy: taken once, not per envelope
        self._shard_of = np.repeat(np.arange(len(self.bounds)),
                                   [hi - lo for lo, hi in self.bounds])
        #: each shard's clients (the bounds' ranges until a regrouping moves them)
        self.members: list[np.ndarray] = [np.arange(lo, hi) for lo, hi in self.bounds]
        #: the worker process of each shard
        self.workers_of = [int(self.engine.worker_of(h)) for h in self.handles]
        if regroup is None:
            regroup = share_work and len(set(self.workers_of)) > 1
        self.regroup = bool(regroup) and config.graph == "harary" and len(self.bounds) > 1
        #: clients moved by each regrouping (one per attempt whose round 0 closed)
        self.regrouped: list[int] = []

    # -- the shards -------------------------------------------------------------------
    def _lose(self, shard: int, detail: str) -> None:
        """A shard's worker died: its clients are dropouts from now on."""
        if shard in self.lost:
            return
        self.lost[shard] = detail
        self.alive[self.members[shard]] = False
        self.transcript.rejected.append((SERVER, -1, f"shard {shard} lost: {detail}"[:300]))

    def _replies(self, s: int, res: Any) -> list[Envelope]:
        """Unpack shard ``s``'s reply into upward envelopes (sizes and kinds recorded;
        reveals are noted when the driver decodes them, :meth:`note_up`)."""
        if isinstance(res, ShardLost):
            self._lose(s, res.detail)
            return []
        envs = []
        registry, shard_of, n = self._registry, self._shard_of, self.config.n
        for i, data in _unpack(res, 2 * len(self.members[s]) + 2):
            if type(i) is not int or not 0 <= i < n or shard_of[i] != s or not self.alive[i]:
                continue
            tag = data[2] if len(data) > 2 else -1  # [VERSION, tag, ...] fixarray
            cls = registry.get(tag)
            env = Envelope(i, SERVER, getattr(cls, "ROUND", -1) or 0, data)
            self.up[i] += len(data)
            self.transcript.record(env, cls.__name__ if cls else "?")
            envs.append(env)
        return envs

    def _call_shards(self, method: str, per_shard: dict[int, Any],
                     prepare: Callable[[Any], Any] | None = None
                     ) -> Iterator[tuple[int, Any]]:
        """``(shard, result)`` for every live shard in ``per_shard``, in shard order, each
        as soon as its call returns (the calls run in parallel on a cluster). With
        ``prepare``, a shard's argument is ``prepare(per_shard.pop(s))``, made when its
        call is (the engine keeps a few calls in flight): what is left of a step's
        messages in this process is the shards not yet called."""
        live = [s for s in sorted(per_shard) if s not in self.lost]
        if not live:
            return iter(())
        args: Iterable[tuple[Any]] = (
            ((per_shard[s],) for s in live) if prepare is None
            else ((prepare(per_shard.pop(s)),) for s in live))
        return zip(live, self.engine.imap([self.handles[s] for s in live], method, args))

    def note_up(self, env: Envelope, msg: Any) -> None:
        """Note round-4 reveals (the base class notes them when its local clients
        encode them; here the clients are elsewhere, so the driver reads them)."""
        if isinstance(msg, UnmaskShares):
            self.transcript.note_reveal(env.sender, msg.b_owners, msg.s_owners)

    def _deliver_down(self, envs: list[Envelope]) -> Iterator[tuple[int, list[Envelope]]]:
        """Send each shard its clients' envelopes; yield, shard by shard as the replies
        come, how many clients were served and their encoded replies."""
        per_shard: dict[int, list[tuple[int, bytes]]] = {}
        skipped = 0
        # envs is consumed (popped): once grouped, a message is held by its shard's
        # list only, and that list is packed and dropped when the shard's call is made
        envs.reverse()
        while envs:
            env = envs.pop()
            c = env.recipient
            if not 0 <= c < self.config.n or not self.alive[c]:
                skipped += 1  # served at once, as the in-process simulation does
                continue
            self.down[c] += len(env.data)
            per_shard.setdefault(int(self._shard_of[c]), []).append((c, env.data))
        return self._serve(per_shard, _pack, skipped)

    def _serve(self, per_shard: dict[int, Any], prepare: Callable[[Any], bytes],
               skipped: int) -> Iterator[tuple[int, list[Envelope]]]:
        """Yield the ``skipped`` recipients served at once, then, shard by shard as the
        replies come, how many of its clients were served and their replies (each
        shard's argument is ``prepare(per_shard[s])``, made when its call is)."""
        if skipped:
            yield skipped, []
        served = {s: len(v) for s, v in per_shard.items()}
        for s, res in self._call_shards("deliver", per_shard, prepare):
            replies = self._replies(s, res)
            del res  # the shard's packed reply, unpacked: not kept beside its messages
            yield served[s], replies

    def _deliver_lazily(self, out: Any, round_no: int
                        ) -> Iterator[tuple[int, list[Envelope]]]:
        """:meth:`_deliver_down` for a round whose replies the server builds when they
        are taken (``out.reply_to(u)``): each shard's are built, encoded, recorded and
        packed when its call is made, so that the driver holds a few shards' encoded
        replies at a time (a round's key lists are about ``150 k`` bytes a client).
        Each shard takes its clients' replies in the order the server sends them; the
        transcript holds the same envelopes as when they are encoded all at once,
        recorded shard by shard."""
        n, alive, shard_of = self.config.n, self.alive, self._shard_of
        per_shard: dict[int, list[int]] = {}
        skipped = 0
        t0 = time.thread_time()
        for c in out.order:
            if not 0 <= c < n or not alive[c]:
                # encoded and recorded, but served at once (as _deliver_down does)
                msg = out.reply_to(c)
                self.transcript.record(Envelope(SERVER, c, round_no, codec.encode(msg)),
                                       type(msg).__name__)
                skipped += 1
                continue
            per_shard.setdefault(int(shard_of[c]), []).append(c)
        self.codec_cpu += time.thread_time() - t0

        def prepare(clients: list[int]) -> bytes:
            t0 = time.thread_time()
            items = []
            for c in clients:
                msg = out.reply_to(c)
                data = codec.encode(msg)
                self.transcript.record(Envelope(SERVER, c, round_no, data),
                                       type(msg).__name__)
                self.down[c] += len(data)
                items.append((c, data))
            blob = _pack(items)
            self.codec_cpu += time.thread_time() - t0
            return blob

        return self._serve(per_shard, prepare, skipped)

    def _hand_up(self, replies: Iterator[tuple[int, list[Envelope]]], step: int,
                 total: int) -> None:
        """Give each shard's replies to the server as they come (or hold them for the
        adversary hook): the driver decodes one shard's messages while the workers still
        compute the next ones'. Progress is reported as the step starts (0 served, so
        that a display times the step from here) and after each shard."""
        done = 0
        if self.progress is not None and total:
            self.progress(step, 0, total)
        for served, envs in replies:
            if self.adversary is None:
                # each envelope dropped once the server has it (popped, not iterated)
                envs.reverse()
                while envs:
                    self.deliver_up(envs.pop())
            else:
                self.pending.extend(envs)
            del envs
            done += served
            if self.progress is not None:
                self.progress(step, done, total)

    # -- phases -----------------------------------------------------------------------
    def start(self) -> None:
        """Round 0 on every shard at once."""
        self.drop(0)
        per_shard: dict[int, list[int]] = {}
        for c in np.flatnonzero(self.alive):
            per_shard.setdefault(int(self._shard_of[c]), []).append(int(c))
        replies = ((len(per_shard[s]), self._replies(s, res))
                   for s, res in self._call_shards("start", per_shard))
        self._hand_up(replies, 0, sum(len(v) for v in per_shard.values()))

    def step(self) -> None:
        """One server round, the replies computed by all shards at once."""
        if self.finished:
            raise SecAggError("the session is over: no round to close")
        srv, adversary = self.server, self.adversary
        round_no = srv.round
        if adversary is not None:
            for e in adversary(round_no, "up", self.pending):
                self.deliver_up(e)
            self.pending = []
        t0 = time.thread_time()
        out = srv.close_round()
        self.srv_cpu += time.thread_time() - t0
        if self.regroup and round_no == 0 and srv.round == 1 and srv.transcript_root:
            self._regroup()
        if srv.round is not None:
            self.drop(srv.round)
        if adversary is None and hasattr(out, "reply_to"):
            # a lazy round (key lists, routed ciphertexts): each shard's replies are
            # built and encoded when its call is made, not the whole round's at once
            self._hand_up(self._deliver_lazily(out, round_no), round_no + 1, len(out))
            return
        downs = []
        t0 = time.thread_time()
        # each message dropped once its envelope exists
        for recipient, msg in drain(out):
            env = Envelope(SERVER, recipient, round_no, codec.encode(msg))
            self.transcript.record(env, type(msg).__name__)
            downs.append(env)
        # the replies are all encoded: whatever the server kept for building them
        # (round 1's ciphertext buffer) goes now, not after the step
        del out
        self.codec_cpu += time.thread_time() - t0
        if adversary is not None:
            # a copy: the hook may keep the list it returned, and _deliver_down empties it
            downs = list(adversary(round_no, "down", downs))
        total = len(downs)
        self._hand_up(self._deliver_down(downs), round_no + 1, total)

    def _regroup(self) -> None:
        """Move the clients so that each worker holds one stretch of the neighbour
        graph's ring, once round 0 has fixed the graph (its seed is the round-0
        transcript root's, so nobody could place them by it earlier).

        A Harary graph joins each client to its ``k / 2`` nearest on each side of a
        pseudorandom ring. Placed by roster position, about half of a client's
        neighbours are on another worker, and each such pair's agreements and keys are
        derived on both (each worker's memo serves only its own clients); placed by the
        ring, only the pairs that straddle a boundary between two workers' stretches
        are (about ``k^2 / 4`` per boundary). The shards keep their sizes; the ring's
        stretches go to the shards worker by worker, so a worker's shards hold
        consecutive stretches. Every client keeps its own state, keys, randomness and
        input (:meth:`ClientShard.export`); no message, and no decision of any party,
        changes: only which process computes it."""
        n, live = self.config.n, [s for s in range(len(self.handles)) if s not in self.lost]
        if len(live) < 2:
            return
        ring = graph_mod.ring_order(n, self.config.graph_seed(self.server.transcript_root))
        # the lost shards' clients stay where they are (gone); the others are dealt out
        held_live = np.isin(self._shard_of[ring], live)
        order = sorted(live, key=lambda s: (self.workers_of[s], s))
        sizes = [len(self.members[s]) for s in order]
        new_of = self._shard_of.copy()
        at, movable = 0, ring[held_live]
        for s, size in zip(order, sizes):
            new_of[movable[at:at + size]] = s
            at += size
        moves: dict[int, dict[int, list[int]]] = {}
        for c in np.flatnonzero(new_of != self._shard_of):
            moves.setdefault(int(self._shard_of[c]), {}).setdefault(
                int(new_of[c]), []).append(int(c))
        if not moves:
            return
        inbound: dict[int, list[bytes]] = {}
        moved = 0
        for s, res in self._call_shards("export", moves):
            if isinstance(res, ShardLost):
                self._lose(s, res.detail)  # its clients stay with it: gone
                continue
            for dest, positions in moves[s].items():
                self._shard_of[positions] = dest
                moved += len(positions)
                inbound.setdefault(dest, []).append(res[dest])
        self.members = [np.flatnonzero(self._shard_of == s) for s in range(len(self.handles))]
        for s, res in self._call_shards("adopt", inbound):
            if isinstance(res, ShardLost):
                self._lose(s, res.detail)
        self.regrouped.append(moved)

    def result(self, check_invariants: bool = True) -> SecAggRun:
        """As :meth:`SecAggSimulation.result`; client states come from the shards (a lost
        shard's clients are reported as they were last seen: not finished)."""
        states = [ClientState.INIT] * self.config.n
        reasons: dict[int, AbortReason] = {}
        shard_memos: dict[str, dict[str, Any]] = {}
        for s, res in self._call_shards("finish", {s: None for s in range(len(self.bounds))}):
            if isinstance(res, ShardLost):
                self._lose(s, res.detail)
                continue
            held = res["indices"]
            for i, v in zip(held, res["states"]):
                states[i] = ClientState(v)
            reasons.update({int(i): AbortReason(r) for i, r in res["reasons"].items()})
            self.cpu[held] = res["cpu"]
            self.spared[held] = res["spared"]
            if res["memo"] is not None:
                shard_memos[res["memo_id"]] = res["memo"]
            self.transcript.rejected.extend(tuple(r) for r in res["rejected"])
        srv = self.server
        run = SecAggRun(
            config=self.config, result=srv.result, server_state=srv.state,
            server_abort_reason=srv.abort_reason, client_states=states,
            client_abort_reasons=reasons, sets=dict(srv.sets), transcript=self.transcript,
            client_seconds=self.cpu, server_seconds=self.srv_cpu, codec_seconds=self.codec_cpu,
            bytes_up=self.up, bytes_down=self.down,
            wall_seconds=time.perf_counter() - self.wall0,
            input_digests=dict(srv.input_digests), clients=[], server=srv,
            **self._device_figures())
        if run.memo_stats is not None:
            run.memo_stats = _merge_stats([run.memo_stats, *shard_memos.values()])
        if check_invariants:
            from protocol.core.invariants import check_no_double_reveal, check_no_send_after_abort

            lost = {int(c) for s in self.lost for c in self.members[s]}
            check_no_double_reveal(run)
            if not lost:  # a lost shard's client states are unknown
                check_no_send_after_abort(run)
        self.engine.drop(self.handles)
        return run


def _merge_stats(stats: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The memo statistics of the driver's memo and every shard's, summed."""
    out: dict[str, Any] = {"hits": {}, "misses": {}, "seconds": {}, "charged_seconds": 0.0}
    for st in stats:
        for part in ("hits", "misses", "seconds"):
            for k, v in st[part].items():
                out[part][k] = out[part].get(k, 0) + v
        out["charged_seconds"] += st["charged_seconds"]
    out["seconds"] = {k: round(v, 4) for k, v in out["seconds"].items()}
    out["charged_seconds"] = round(out["charged_seconds"], 4)
    return out


def run_secagg_sharded(config: SessionConfig, inputs: np.ndarray | Callable[[int], np.ndarray],
                       *, engine: Engine | None = None, shards: int | None = None,
                       check_invariants: bool = True, **kwargs: Any) -> SecAggRun:
    """:func:`protocol.core.secagg_engine.run_secagg` with the clients on ``engine``."""
    from protocol.core.memory import release_freed_memory

    sim = ShardedSecAggSimulation(config, inputs, engine=engine, shards=shards, **kwargs)
    sim.run()
    run = sim.result(check_invariants)
    del sim  # the session's server, replica and buffers: freed, and their pages returned
    release_freed_memory()
    return run
