"""The ESA shuffler as network processes: clients, one shuffler, one analyzer.

Bittau et al., "Prochlo: Strong Privacy for Analytics in the Crowd", SOSP 2017: a
client seals its report twice (inner layer to the analyzer, outer layer to the
shuffler, :mod:`shuffler`); the shuffler strips the outer layer, thresholds crowds,
shuffles and forwards only the inner layers; the analyzer opens them. Here each party
is its own process and every hop is TLS 1.3 with the pinned certificate of the
shuffler (the TLS server):

1. **Clients** (:func:`run_shuffle_client`) connect, say
   :class:`~protocol.core.net.messages.Hello` with their position and send one
   :class:`shuffler.messages.ShufflerEnvelope` for the round's context (task, epoch,
   payload size, both key ids): a vote for candidate ``i`` is the 4-byte report ``i``
   in the crowd ``PRF(crowd key, task, round, candidate)``, the crowd key shared by the
   clients and unknown to the shuffler (an abstention is an empty report in a random
   crowd). The shuffler answers ``Bye("completed")`` when it accepted the envelope, or
   ``Bye("refused", reason)``.
2. **The shuffler** (:class:`NetShufflerServer`) runs the sans-I/O
   :class:`shuffler.Shuffler`: it reads one envelope per connection, bounded by the
   round's sizes (:func:`protocol.core.wire_shuffler.session_limits`) before it reads
   the body, and submits it (every refusal of the state machine is a named reason). The
   batch closes when all ``n`` positions have sent or after ``batch_seconds``; below
   ``min_batch`` it is dropped whole. Otherwise the threshold rule runs (crowds of at
   least ``theta``; with ``reveal_counts`` off one representative per passing crowd),
   the survivors are shuffled and the :class:`shuffler.messages.ShuffledBatch` goes to
   the analyzer with the analyzer's part of the receipt
   (:class:`~protocol.core.net.messages.BatchReceipt`). The operator's receipt (crowd
   counts, sub-threshold totals) and who sent stay in the shuffler's report.
3. **The analyzer** (:func:`run_analyzer`) connects, says
   :class:`~protocol.core.net.messages.AnalyzerHello`, receives the batch for exactly
   the context it expects (another task, epoch, payload size or key is refused), opens
   the inner layers and computes the release as the in-process transport does
   (:func:`protocol.core.transports.shuffler_transport.shuffled_release`).

The key material (:func:`make_shuffle_keys`, ``fedhh keys --shuffler``): the
shuffler's and the analyzer's X25519 keys (each mode 0600, for its own process), the
clients' crowd key (mode 0600) and both public keys (``shuffle-public.json``).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core import wire_shuffler
from protocol.core.codec import CodecError, SessionLimits
from protocol.core.contract import Kind, RoundSpec
from protocol.core.net.client import NETWORK_FAILURES, connect, failure_outcome
from protocol.core.net.frames import close_writer, frame, read_message
from protocol.core.net.messages import (
    PROTOCOL_VERSION, AnalyzerHello, BatchReceipt, Bye, Hello, analyzer_limits,
    bye_limits, hello_or_analyzer_limits,
)
from protocol.core.net.server import TlsListener, read_first, send_and_close
from protocol.core.randomness import OsRandom
from protocol.core.transports.shuffler_transport import shuffled_release
from protocol.core.net.signals import wait_for
from shuffler import (
    Analyzer, BatchTooSmall, CrowdKey, Encoder, EnvelopeRejected, HardThreshold, KeyPair,
    ShuffledBatch, Shuffler, ShufflerEnvelope, ShufflerError, encode_index,
    random_crowd_ids,
)
from shuffler.keys import PublicKey
from shuffler.thresholds import AnalyzerReceipt

__all__ = ["make_shuffle_keys", "ShuffleKeys", "ShuffleRound", "demo_vote", "expected_release",
           "NetShufflerServer", "run_shuffle_client", "run_shuffle_clients", "run_analyzer"]

#: bytes of a vote report (a candidate index)
VOTE_REPORT_BYTES = 4


def _write_private(path: pathlib.Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@dataclass(frozen=True)
class ShuffleKeys:
    """Where the shuffle key files of a key directory are."""

    root: pathlib.Path

    @property
    def shuffler(self) -> pathlib.Path:
        return self.root / "shuffler.x25519"

    @property
    def analyzer(self) -> pathlib.Path:
        return self.root / "analyzer.x25519"

    @property
    def crowd(self) -> pathlib.Path:
        return self.root / "crowd.key"

    @property
    def public(self) -> pathlib.Path:
        return self.root / "shuffle-public.json"

    def public_keys(self) -> tuple[PublicKey, PublicKey]:
        """``(shuffler, analyzer)`` public keys.

        Raises:
            ValueError: a missing or malformed file.
        """
        try:
            doc = json.loads(self.public.read_text())
            if doc.get("format") != "fedhh-shuffle/1":
                raise ValueError("not a fedhh-shuffle/1 file")
            return (PublicKey(bytes.fromhex(doc["shuffler"])),
                    PublicKey(bytes.fromhex(doc["analyzer"])))
        except (OSError, KeyError, TypeError, ValueError, ShufflerError) as exc:
            raise ValueError(f"{self.public}: {exc}") from None

    def secret(self, role: str) -> KeyPair:
        """The ``shuffler``'s or ``analyzer``'s key pair.

        Raises:
            ValueError: a missing or malformed file.
        """
        path = self.shuffler if role == "shuffler" else self.analyzer
        try:
            return KeyPair(path.read_bytes())
        except (OSError, ShufflerError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    def crowd_master(self) -> bytes:
        try:
            master = self.crowd.read_bytes()
        except OSError as exc:
            raise ValueError(f"{self.crowd}: {exc}") from None
        if len(master) != 32:
            raise ValueError(f"{self.crowd} must hold 32 bytes")
        return master


def make_shuffle_keys(root: str | os.PathLike[str], *, rand: Any = None,
                      overwrite: bool = False) -> ShuffleKeys:
    """Write the shuffler's and the analyzer's X25519 keys, the clients' crowd key and
    the public keys into ``root``.

    Raises:
        FileExistsError: the files exist and ``overwrite`` is false.
    """
    keys = ShuffleKeys(pathlib.Path(root))
    keys.root.mkdir(parents=True, exist_ok=True)
    existing = [p for p in (keys.shuffler, keys.analyzer, keys.crowd, keys.public) if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{existing[0]} exists (pass overwrite to replace the keys)")
    rand = rand if rand is not None else OsRandom()
    s, a = KeyPair.generate(rand), KeyPair.generate(rand)
    _write_private(keys.shuffler, s.secret)
    _write_private(keys.analyzer, a.secret)
    _write_private(keys.crowd, rand.token_bytes(32))
    keys.public.write_text(json.dumps({"format": "fedhh-shuffle/1", "shuffler": s.public.hex(),
                                       "analyzer": a.public.hex()}))
    return keys


@dataclass(frozen=True)
class ShuffleRound:
    """One shuffled vote round, as every party configures it: ``candidates`` public
    candidates ``c0 .. c{C-1}``, the crowd threshold ``theta``, whether the release
    carries counts (else one representative per passing crowd), ``n`` clients.

    Raises:
        ValueError: bad values.
    """

    n: int
    candidates: int = 20
    theta: int = 3
    reveal_counts: bool = True
    task: str = "fedhh-shuffle"
    round: int = 0
    min_batch: int = 1

    def __post_init__(self) -> None:
        for name, lo in (("n", 1), ("candidates", 1), ("theta", 1), ("min_batch", 1)):
            v = getattr(self, name)
            if type(v) is not int or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}")
        if type(self.round) is not int or self.round < 0:
            raise ValueError("round must be a non-negative int")

    def spec(self) -> RoundSpec:
        return RoundSpec(self.task, self.round, Kind.VOTE,
                         candidates=tuple(f"c{i}" for i in range(self.candidates)),
                         theta=self.theta, reveal_counts=self.reveal_counts)

    def encoder(self, s_pub: PublicKey, a_pub: PublicKey, rand: Any = None) -> Encoder:
        return Encoder(s_pub, a_pub, self.task, self.round, VOTE_REPORT_BYTES, rand)

    def limits(self, s_pub: PublicKey, a_pub: PublicKey) -> SessionLimits:
        """Every shuffler message pinned to this round's context and ``n`` reports."""
        return wire_shuffler.session_limits(self.encoder(s_pub, a_pub).context, self.n)

    def rule(self) -> HardThreshold:
        return HardThreshold(self.theta, membership_only=not self.reveal_counts)


def demo_vote(seed: int, client: int, candidates: int) -> int:
    """Client ``client``'s vote in a seeded experiment: candidate ``i`` with probability
    proportional to ``1 / (i + 1)^1.2`` (a Zipf-like popularity), from its own stream."""
    rng = np.random.default_rng([int(seed), int(client), 0x73687566])
    w = 1.0 / np.arange(1, candidates + 1) ** 1.2
    return int(rng.choice(candidates, p=w / w.sum()))


def expected_release(vote: ShuffleRound, seed: int, clients: Sequence[int]
                     ) -> dict[str, Any]:
    """What a vote round must release from exactly ``clients``' seeded votes
    (:func:`demo_vote`): ``passed`` (the candidates at or above ``theta``) and
    ``release`` (their counts; ``None`` in a membership-only round). The loopback
    experiments check the shuffler's and the committee's releases against it."""
    from protocol.core.contract import threshold_counts

    votes = np.array([demo_vote(seed, c, vote.candidates) for c in clients], dtype=np.int64)
    counts = threshold_counts(vote.spec(), np.bincount(votes, minlength=vote.candidates))
    return {"passed": sorted(counts), "release": counts if vote.reveal_counts else None}


# ---------------------------------------------------------------------------- shuffler
@dataclass
class ShuffleReport:
    """What the shuffler saw of one batch (its own view, never sent to the analyzer)."""

    status: str
    reason: str
    accepted: list[int] = field(default_factory=list)
    refused: list[tuple[int | None, str]] = field(default_factory=list)
    receipt: dict[str, Any] = field(default_factory=dict)
    analyzers: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    bytes_up: int = 0
    bytes_to_analyzer: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: (list(map(list, v)) if k == "refused" else v) for k, v in vars(self).items()}


class NetShufflerServer(TlsListener):
    """The shuffler of one round as a TLS server (see the module docstring).

    Args:
        round: the round.
        keys: the shuffler's X25519 key pair; ``s_pub``/``a_pub`` both public keys.
        ssl_context: :func:`protocol.core.net.tls.server_context`.
        batch_seconds: how long the batch stays open for clients.
        stage_seconds: how long a connection has for each of its frames, and how long
            the closed batch waits for an analyzer.
        rand: the shuffler's randomness (the shuffle; OS by default).
    """

    def __init__(self, round: ShuffleRound, keys: KeyPair, a_pub: PublicKey,
                 ssl_context: ssl.SSLContext, *, host: str = "127.0.0.1", port: int = 0,
                 batch_seconds: float = 60.0, stage_seconds: float = 30.0, rand: Any = None,
                 events: Callable[[dict[str, Any]], None] | None = None) -> None:
        if batch_seconds <= 0 or stage_seconds <= 0:
            raise ValueError("deadlines must be positive")
        self.round = round
        self.keys, self.a_pub = keys, a_pub
        self.context = round.encoder(keys.public_key, a_pub).context
        self.limits = round.limits(keys.public_key, a_pub)
        self.ssl_context = ssl_context
        self.host, self.port = host, port
        self.batch_seconds, self.stage_seconds = float(batch_seconds), float(stage_seconds)
        self.events = events or (lambda _e: None)
        self.shuffler = Shuffler(keys, rand if rand is not None else OsRandom(),
                                 round.min_batch, round.rule())
        self.shuffler.open_batch(self.context)
        self._open = True
        self._server: Any = None
        self._seen: set[int] = set()     # positions that said Hello
        self._done: set[int] = set()     # positions whose one attempt is over
        self._analyzers: list[asyncio.StreamWriter] = []
        self._analyzer_joined: asyncio.Event | None = None
        self._all_sent: asyncio.Event | None = None
        self.report = ShuffleReport("open", "")
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._analyzer_joined, self._all_sent = asyncio.Event(), asyncio.Event()
        await super().start()

    async def close(self) -> None:
        await super().close()
        for w in self._analyzers:
            await close_writer(w)
        for t in list(self._tasks):
            t.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve_connection(reader, writer)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _serve_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        report = self.report
        first = await read_first(reader, writer, hello_or_analyzer_limits(),
                                 self.stage_seconds, report.refused)
        if first is None:
            return
        if first.version != PROTOCOL_VERSION:
            await send_and_close(writer, Bye("refused", "version_mismatch"))
            return
        if isinstance(first, AnalyzerHello):
            self._analyzers.append(writer)
            assert self._analyzer_joined is not None
            self._analyzer_joined.set()
            return  # kept open until the batch is sent
        client = first.client
        reason = None
        if not self._open:
            reason = "the batch is closed"
        elif not 0 <= client < self.round.n:
            reason = f"position {client} is not among the {self.round.n} clients"
        elif client in self._seen:
            reason = f"position {client} already sent"
        if reason is not None:
            report.refused.append((client, reason))
            await send_and_close(writer, Bye("refused", reason))
            return
        self._seen.add(client)
        try:
            env, size = await wait_for(
                read_message(reader, SessionLimits({ShufflerEnvelope.TAG:
                                                    self.limits.shapes[ShufflerEnvelope.TAG]})),
                self.stage_seconds)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, CodecError, OSError,
                ssl.SSLError) as exc:
            report.refused.append((client, f"no envelope: {type(exc).__name__}: {exc}"[:200]))
            self._count_done(client)
            await close_writer(writer)
            return
        report.bytes_up += size
        if not self._open:
            report.refused.append((client, "the batch closed while it sent"))
            await send_and_close(writer, Bye("refused", "the batch is closed"))
            return
        try:
            self.shuffler.submit(env)
        except EnvelopeRejected as exc:
            report.refused.append((client, exc.reason.value))
            self._count_done(client)
            await send_and_close(writer, Bye("refused", exc.reason.value))
            return
        report.accepted.append(client)
        self._count_done(client)
        await send_and_close(writer, Bye("completed", ""))

    def _count_done(self, client: int) -> None:
        """Position ``client`` has had its one attempt; the batch closes early once
        every position has (counted by position, so no peer can close it by repeating
        itself)."""
        self._done.add(client)
        if len(self._done) >= self.round.n and self._all_sent is not None:
            self._all_sent.set()

    async def run_batch(self) -> ShuffleReport:
        """Keep the batch open until every client sent or ``batch_seconds`` passed,
        close it and send the result to the analyzer. Never raises for anything a
        client or the analyzer does."""
        wall0, cpu0 = time.perf_counter(), time.process_time()
        report = self.report
        assert self._all_sent is not None and self._analyzer_joined is not None
        self.events({"event": "batch", "phase": "open", "context": self.context.task})
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(self._all_sent.wait(), self.batch_seconds)
        self._open = False
        try:
            out = self.shuffler.close_batch(self.context)
        except BatchTooSmall as exc:
            report.status, report.reason = "aborted", f"batch_too_small: {exc}"[:160]
            out = None
        if out is not None:
            r = out.receipt
            report.receipt = {"accepted": r.accepted, "forwarded": r.forwarded,
                              "crowds": r.crowds, "crowds_forwarded": r.crowds_forwarded,
                              "dropped_by_threshold": dict(r.dropped_by_threshold),
                              "rule": r.threshold_rule}
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_for(self._analyzer_joined.wait(), self.stage_seconds)
            if not self._analyzers:
                report.status, report.reason = "aborted", "no analyzer connected"
            else:
                data = frame(out.batch) + frame(BatchReceipt(r.accepted, r.forwarded,
                                                            r.threshold_rule))
                report.bytes_to_analyzer = len(data)
                report.analyzers = len(self._analyzers)
                for w in self._analyzers:
                    with contextlib.suppress(Exception):
                        w.write(data)
                report.status = "completed"
        bye = Bye(report.status, report.reason)
        # the batch was written before the Bye: give it time to reach the analyzer
        await asyncio.gather(*(send_and_close(w, bye, self.stage_seconds)
                               for w in self._analyzers), return_exceptions=True)
        self._analyzers.clear()
        report.wall_seconds = time.perf_counter() - wall0
        report.cpu_seconds = time.process_time() - cpu0
        self.events({"event": "done", "status": report.status, "reason": report.reason})
        return report


# ---------------------------------------------------------------------------- clients
async def run_shuffle_client(client: int, host: str, port: int, round: ShuffleRound,
                             ssl_context: ssl.SSLContext, pin: bytes, s_pub: PublicKey,
                             a_pub: PublicKey, crowd_master: bytes, vote: int, *,
                             rand: Any = None, wait_seconds: float = 60.0
                             ) -> tuple[str, str, int]:
    """Send one vote (a candidate index, or -1 to abstain) through the shuffler;
    ``(status, reason, bytes up)`` with status ``completed`` (accepted), ``refused``,
    or as :func:`~protocol.core.net.client.failure_outcome`. Never raises for anything
    the network does.

    Raises:
        ValueError: a vote outside the candidates (this client's own error).
    """
    if not -1 <= vote < round.candidates:
        raise ValueError(f"vote {vote} is not a candidate index")
    rand = rand if rand is not None else OsRandom()
    spec = round.spec()
    if vote >= 0:
        report = encode_index(vote)
        crowd = CrowdKey(crowd_master, round.task, round.round).crowd_id(
            spec.candidates[vote].encode("utf-8"))
    else:
        report, crowd = b"", random_crowd_ids(1, rand)[0]
    envelope = round.encoder(s_pub, a_pub, rand).encode_envelope(report, crowd)
    writer = None
    sent = 0
    try:
        reader, writer, sent = await connect(host, port, ssl_context, pin,
                                             Hello(PROTOCOL_VERSION, client), wait_seconds)
        data = frame(envelope)
        writer.write(data)
        sent += len(data)
        await writer.drain()
        bye, _ = await wait_for(read_message(reader, bye_limits()), wait_seconds)
        return bye.status, bye.reason, sent
    except NETWORK_FAILURES as exc:
        return (*failure_outcome(exc, wait_seconds), sent)
    finally:
        await close_writer(writer)


async def run_shuffle_clients(clients: Sequence[int], host: str, port: int,
                              round: ShuffleRound, ssl_context: ssl.SSLContext, pin: bytes,
                              s_pub: PublicKey, a_pub: PublicKey, crowd_master: bytes,
                              vote_of: Callable[[int], int], *, wait_seconds: float = 60.0
                              ) -> list[tuple[str, str, int]]:
    """Run ``clients`` concurrently in this event loop."""
    return list(await asyncio.gather(*(
        run_shuffle_client(c, host, port, round, ssl_context, pin, s_pub, a_pub, crowd_master,
                           vote_of(c), wait_seconds=wait_seconds) for c in clients)))


# ---------------------------------------------------------------------------- analyzer
async def run_analyzer(host: str, port: int, round: ShuffleRound,
                       ssl_context: ssl.SSLContext, pin: bytes, keys: KeyPair,
                       s_pub: PublicKey, *, wait_seconds: float = 120.0) -> dict[str, Any]:
    """Receive the round's batch from the shuffler, open it, release; a JSON-ready
    result (``status``, ``reason``, ``passed``: the candidates that passed, ``release``:
    candidate -> count, ``None`` in a membership-only round; the receipt, rejected
    inner layers). Never raises for anything the shuffler or the network does.
    """
    spec = round.spec()
    limits = round.limits(s_pub, keys.public_key)
    expected = round.encoder(s_pub, keys.public_key).context
    out: dict[str, Any] = {"status": "disconnected", "reason": "", "release": None}
    writer = None
    try:
        reader, writer, _ = await connect(host, port, ssl_context, pin,
                                          AnalyzerHello(PROTOCOL_VERSION), wait_seconds)
        await writer.drain()
        accepted = analyzer_limits(limits.shapes[ShuffledBatch.TAG])
        msg, size = await wait_for(read_message(reader, accepted), wait_seconds)
        if isinstance(msg, Bye):
            out["status"], out["reason"] = msg.status if msg.status != "completed" \
                else "aborted", msg.reason or "no batch"
            return out
        if not isinstance(msg, ShuffledBatch):
            out["status"], out["reason"] = "aborted", "the receipt came before the batch"
            return out
        if msg.context != expected:
            out["status"], out["reason"] = "aborted", "the batch is for another round or key"
            return out
        receipt_msg, _ = await wait_for(read_message(reader, accepted), wait_seconds)
        if not isinstance(receipt_msg, BatchReceipt) \
                or receipt_msg.forwarded != len(msg.inner):
            out["status"], out["reason"] = "aborted", "no receipt matching the batch"
            return out
        t0 = time.process_time()
        analyzed = Analyzer(keys).open_batch(msg)
        receipt = AnalyzerReceipt(msg.context, receipt_msg.accepted, receipt_msg.forwarded,
                                  receipt_msg.rule)
        release, view = shuffled_release(spec, receipt, analyzed.reports)
        out.update({
            "status": "completed", "contributions": release.contributions,
            "passed": list(release.items or ()),
            "release": None if release.counts is None else dict(release.counts),
            "receipt": {
                "accepted": receipt.accepted, "forwarded": receipt.forwarded,
                "rule": receipt.threshold_rule},
            "rejected": {r.value: c for r, c in analyzed.rejected.items()},
            "bytes_down": size, "cpu_seconds": time.process_time() - t0})
        return out
    except ShufflerError as exc:
        out["status"], out["reason"] = "aborted", f"refused from the shuffler: {exc}"[:200]
    except NETWORK_FAILURES as exc:
        out["status"], out["reason"] = failure_outcome(exc, wait_seconds)
    finally:
        await close_writer(writer)
    return out
