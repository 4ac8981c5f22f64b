"""The thresholding committee as network processes: server, two helpers, clients.

The in-process transport (:mod:`protocol.core.transports.threshold`) as it would be
deployed:

1. **Secure aggregation with the helpers in the roster.** The session has the ``n``
   clients at positions ``0..n-1`` and the helpers at ``n`` and ``n+1``, both
   *required* (:class:`secagg.state.SessionConfig`): a client refuses to unmask a sum
   without them. Helper ``h`` inputs a blinding vector ``R_h``, so the server unmasks
   only ``S = sum + R_1 + R_2``. Every party derives the session (threshold, degree,
   modulus, context, the required positions) from the round's options and refuses
   anything else, as in any networked session.
2. **Malicious model (the default):** the session is over ``F_p``; each helper derives
   its whole client and ``R_h`` from a 32-byte OS seed. After the session the server
   forwards helper 2 the journal of client messages (helper 2's replica unmasks its own
   ``S``, :func:`~protocol.core.committee.binding.replay_journal`) and helper 1 the
   messages it exchanged with helper 2; helper 1 hands the server its seed, helper 2
   hands helper 1 its seed, and each auditor replays the helper
   (:func:`~protocol.core.committee.binding.audit_helper`). The three then run the
   verified comparison (:func:`~protocol.core.net.committee_net.run_verified_member`)
   on ``(S, -R1), (-R1, -R2), (-R2, S)``. ``FAULTS`` are the launcher's switches for a
   deviating member.
3. **Semi-honest option:** the ring ``Z_{2^k}``, OS blinding vectors, and the
   replicated-sharing comparison (:func:`~protocol.core.net.committee_net.run_member`)
   on ``(S, -R_1, -R_2)``.

In both, only the pass bits are opened and, with counts, only the counts of the passing
candidates. The link between the helpers is its own TLS connection with both ends pinned
(mutual authentication, :func:`~protocol.core.net.tls.helper_link_contexts`): it must
not pass through the server, which with what it carries would hold every share.

Clients vote with the seeded experiment's votes (:func:`~protocol.core.net.shuffle.
demo_vote`), so a launcher can check the release exactly.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import ssl
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import numpy as np

from protocol.core import wire_secagg
from protocol.core.committee import CommitteeAborted, ring_bits
from protocol.core.contract import AggregationAborted
from protocol.core.net.client import (
    NETWORK_FAILURES, ClientOutcome, connect, exchange, failure_outcome,
)
from protocol.core.net.committee_net import CommitteeLink, committee_limits, run_member, send_abort
from protocol.core.net.frames import close_writer, read_message
from protocol.core.net.messages import PROTOCOL_VERSION, Bye, Hello, Welcome, welcome_limits
from protocol.core.net.server import NetSecAggServer
from protocol.core.net.session import NetSessionSpec, SessionRejected
from protocol.core.net.shuffle import ShuffleRound, demo_vote
from protocol.core.randomness import OsRandom
from protocol.core import codec
from protocol.core.committee import field as F
from protocol.core.committee.binding import (
    AuditFailed, MirroredServer, audit_helper, helper_blind, replay_journal,
)
from protocol.core.committee.verified import VerifiedParty
from protocol.core.net.committee_net import run_verified_member, verified_limits
from protocol.core.randomness import SEED_BYTES, seeded_randomness
from protocol.core.transports.threshold import uniform_mod
from protocol.core.net.signals import wait_for
from secagg.client import SecAggClient
from secagg.state import SessionConfig

__all__ = ["ThresholdRound", "serve_threshold_round", "run_helper", "demo_votes_vector",
           "HELPERS", "FAULTS", "helper_link", "helper_client", "helper_after_session",
           "server_after_session", "mirrored_server", "helper_streams", "HelperLinkFailed",
           "as_helper"]

#: the launcher's fault switches: what a deviating member does (``serve --fault``,
#: ``helper --fault``); each must end the round in its named abort
FAULTS = {
    "server": ("shift-sum",),
    "helper": ("shift-blind", "other-seed", "other-blind"),
}

#: the committee's helpers
HELPERS = 2


@dataclass(frozen=True)
class ThresholdRound:
    """One committee round, as every party configures it: the vote round (``n``
    clients, candidates, ``theta``, whether counts are revealed) and the session's
    threat model, graph, dropout tolerance and label.

    Raises:
        ValueError: bad values.
    """

    vote: ShuffleRound
    threat: str = "malicious"
    graph: str = "harary"
    dropout: float = 0.0
    label: str = "fedhh committee round"

    @property
    def k(self) -> int:
        return ring_bits(self.vote.n, self.vote.theta)

    @property
    def verified(self) -> bool:
        """The malicious model (the default): the verified committee over ``F_p``, the
        replica of the server at helper 2 and the helpers' replay audits."""
        return self.threat == "malicious"

    def session(self) -> NetSessionSpec:
        """The secure-aggregation session: ``n + 2`` positions, the helpers last and
        required, vote vectors modulo ``p = 2^61 - 1`` (malicious model) or ``2^k``
        (semi-honest), the context binding the round."""
        v = self.vote
        ctx = hashlib.sha256(b"fedhh/net/committee-round/v1\x00" + self.label.encode()
                             + b"\x00" + repr((v.candidates, v.theta, v.reveal_counts,
                                               v.round)).encode()).digest()
        return NetSessionSpec(v.n + HELPERS, dim=v.candidates,
                              modulus=F.P if self.verified else 1 << self.k,
                              threat=self.threat, graph=self.graph, dropout=self.dropout,
                              context_digest=ctx, required=HELPERS)

    def release(self, passed: np.ndarray, counts: np.ndarray | None) -> dict[str, Any]:
        names = self.vote.spec().candidates
        idx = np.flatnonzero(passed)
        return {"passed": sorted(names[i] for i in idx),
                "release": None if counts is None else
                {names[i]: int(c) for i, c in zip(idx, counts)}}


def demo_votes_vector(seed: int, client: int, candidates: int) -> np.ndarray:
    """Client ``client``'s one-hot vote of the seeded experiment."""
    v = np.zeros(candidates, dtype=np.uint64)
    v[demo_vote(seed, client, candidates)] = 1
    return v


# ---------------------------------------------------------------------------- server
async def _committee_session(server: NetSecAggServer, rnd: ThresholdRound,
                             server_factory: Any = None) -> tuple[Any, dict[str, Any], bool]:
    """The round's session, keeping both helpers' connections: ``(report, the JSON-ready
    report without the blinded sum, whether the committee can go on)``."""
    n = rnd.vote.n
    report = await server.run_session(keep=frozenset({n, n + 1}),
                                      server_factory=server_factory)
    out = report.to_json()
    out.pop("result", None)  # the blinded sum stays with the server
    out["committee"] = None
    ready = report.status == "completed"
    if ready and (not {n, n + 1} <= set(report.sets.get("U3", ()))
                  or len(server.kept) != HELPERS):
        out["status"], out["reason"] = "aborted", "threshold_helper_missing"
        ready = False
    return report, out, ready


def _served(out: dict[str, Any], report: Any, rnd: ThresholdRound, member: Any,
            cpu_seconds: float, verified: bool) -> dict[str, Any]:
    """The server's report of a completed comparison: its cost, the release, the
    clients in the sum."""
    out["committee"] = {"cpu_seconds": cpu_seconds, "bytes_sent": member.bytes_sent,
                        "comparisons": int(member.passed.size), "verified": verified}
    out.update(rnd.release(member.passed, member.counts))
    out["in_sum"] = [c for c in report.sets.get("U3", ()) if c < rnd.vote.n]
    return out


async def serve_threshold_round(server: NetSecAggServer, rnd: ThresholdRound,
                                wait_seconds: float, *, fault: str | None = None
                                ) -> dict[str, Any]:
    """Run one round on a started server whose spec is ``rnd.session()``: the session
    (keeping the helpers' connections), then the comparison as member 0. A JSON-ready
    report: the session's (without the blinded sum), the committee's outcome, the
    release. Never raises for anything a client or helper does. ``fault``: one of
    ``FAULTS["server"]`` (the launcher's switch for a deviating server)."""
    n, v = rnd.vote.n, rnd.vote
    report, out, ready = await _committee_session(
        server, rnd, mirrored_server(n) if rnd.verified else None)
    kept = server.kept
    try:
        if not ready:
            return out
        assert report.result is not None
        t0 = time.process_time()
        try:
            member = await server_after_session(
                server.last_server, report.result, n, v.candidates, v.theta,
                v.reveal_counts, rnd.verified, rnd.k, kept, server.verify_keys, fault,
                wait_seconds)
        except CommitteeAborted as exc:
            out["status"], out["reason"] = "aborted", f"committee_{exc.reason}"
            for _, writer in kept.values():  # the helpers learn why (they stop too)
                await send_abort(writer, exc.reason)
            return out
        return _served(out, report, rnd, member, time.process_time() - t0, rnd.verified)
    finally:
        for _, writer in kept.values():
            await close_writer(writer)


def mirrored_server(n: int) -> Callable[[SessionConfig, Any], MirroredServer]:
    """The committee server's state machine under the malicious model, for a session of
    ``n`` clients and the helpers at ``n`` and ``n + 1``: it records the journal and the
    helpers' exchanges that the replica and the audits replay."""
    def make(config: SessionConfig, verify_keys: Any) -> MirroredServer:
        return MirroredServer(config, verify_keys=verify_keys, watched=(n, n + 1),
                              replica=False)
    return make


async def server_after_session(srv: Any, result: np.ndarray, n: int, candidates: int,
                               theta: int | None, reveal_counts: bool, verified: bool, k: int,
                               kept: dict[int, tuple[asyncio.StreamReader,
                                                     asyncio.StreamWriter]],
                               verify_keys: Sequence[bytes] | None, fault: str | None,
                               wait_seconds: float) -> Any:
    """Member 0's part after a completed session of ``n`` clients and the helpers at
    ``n`` and ``n + 1`` (their streams in ``kept``): under the malicious model helper 2
    handed the journal of client messages (its replica), helper 1 handed helper 2's
    exchange (its audit), helper 1 audited from its seed, then the verified comparison
    on ``(S, -R1)``; semi-honest, the replicated-sharing comparison on ``S``. The
    member's outcome (pass bits, opened counts, bytes sent).

    Raises:
        CommitteeAborted: the comparison or an audit failed (named reason).
    """
    h1, h2 = n, n + 1
    if not verified:
        limits = committee_limits(candidates)
        to_h1 = CommitteeLink(0, 1, *kept[h1], limits, wait_seconds)
        to_h2 = CommitteeLink(0, 2, *kept[h2], limits, wait_seconds)
        return await run_member(0, result.astype(np.uint64), k, theta,
                                reveal_counts=reveal_counts, prev=to_h2, next=to_h1)
    assert isinstance(srv, MirroredServer)
    config = srv.config
    limits = verified_limits(candidates, theta, _relay_bytes(config))
    to_h1 = CommitteeLink(0, 1, *kept[h1], limits, wait_seconds)
    to_h2 = CommitteeLink(0, 2, *kept[h2], limits, wait_seconds)
    journal = [("j-close", b"") if ev == "close" else ("j-msg", codec.encode(msg))
               for msg, ev in srv.journal] + [("j-end", b"")]
    await _send_all(to_h2, journal)
    exchange_items = ([("x-in", codec.encode(m)) for m in srv.inbound[h2]]
                      + [("x-out", codec.encode(m)) for m in srv.outbound[h2]]
                      + [("x-end", b"")])
    await _send_all(to_h1, exchange_items)
    seed1 = await to_h1.receive("seed")
    try:
        r1 = audit_helper(config, h1, seed1, F.P, srv.inbound[h1], srv.outbound[h1],
                          verify_keys)
    except AuditFailed as exc:
        raise CommitteeAborted("helper_audit_failed", 0, f"helper 1: {exc.detail}") from None
    s_copy = result.astype(np.uint64)
    party_class = None
    if fault == "shift-sum":
        s_copy, party_class = _shifted(s_copy, theta), _IgnoresInputCheck
    return await run_verified_member(0, s_copy, F.neg(r1), theta,
                                     context=_context(config, srv.session),
                                     reveal_counts=reveal_counts, prev=to_h2, next=to_h1,
                                     party_class=party_class)


# ---------------------------------------------------------------------------- helpers
async def helper_link(index: int, link: tuple[str, int], context: ssl.SSLContext,
                       wait_seconds: float
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Any]:
    """Helper 2 listens for helper 1 (one connection, mutual TLS); helper 1 connects,
    retrying until helper 2 is up. ``(reader, writer, listener or None)``."""
    host, port = link
    if index == 2:
        got: asyncio.Future = asyncio.get_running_loop().create_future()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if got.done():
                await close_writer(writer)
            else:
                got.set_result((reader, writer))

        listener = await asyncio.start_server(accept, host, port, ssl=context,
                                              ssl_handshake_timeout=wait_seconds)
        reader, writer = await wait_for(got, wait_seconds)
        return reader, writer, listener
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            reader, writer = await wait_for(asyncio.open_connection(
                host, port, ssl=context, server_hostname="fedhh-helper2"), wait_seconds)
            return reader, writer, None
        except (ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def run_helper(index: int, host: str, port: int, rnd: ThresholdRound,
                     ssl_context: ssl.SSLContext, pin: bytes, link: tuple[str, int],
                     link_context: ssl.SSLContext, *, signing_key: bytes | None = None,
                     verify_keys: Sequence[bytes] | None = None, rand: Any = None,
                     wait_seconds: float = 120.0, fault: str | None = None
                     ) -> dict[str, Any]:
    """Helper ``index`` (1 or 2) of one round: the link to the other helper, the
    session as position ``n + index - 1`` with a uniform blinding input, then the
    comparison. A JSON-ready outcome (``status``, ``reason``, what was opened). Never
    raises for anything the server, the other helper or the network does."""
    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    rand = rand if rand is not None else OsRandom()
    spec, n = rnd.session(), rnd.vote.n
    position = n + index - 1
    out: dict[str, Any] = {"helper": index, "status": "disconnected", "reason": ""}
    return await as_helper(
        index, position, host, port, ssl_context, pin, link, link_context, wait_seconds, out,
        lambda l_reader, l_writer, reader, writer: _helper_round(
            index, rnd, spec, position, reader, writer, l_reader, l_writer, signing_key,
            verify_keys, rand, wait_seconds, fault, out))


async def as_helper(index: int, position: int, host: str, port: int,
                    ssl_context: ssl.SSLContext, pin: bytes, link: tuple[str, int],
                    link_context: ssl.SSLContext, wait_seconds: float, out: dict[str, Any],
                    work: Callable[..., Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """Run a helper's ``work(link reader, link writer, server reader, server writer)``
    over its two connections (:func:`helper_streams`); a link or network failure is
    written into ``out`` (``status``, ``reason``), which is returned. Never raises for
    anything the peers or the network do."""
    try:
        async with helper_streams(index, position, host, port, ssl_context, pin, link,
                                  link_context, wait_seconds) as streams:
            return await work(*streams)
    except HelperLinkFailed as exc:
        out["status"], out["reason"] = "aborted", str(exc)
        return out
    except NETWORK_FAILURES as exc:
        out["status"], out["reason"] = failure_outcome(exc, wait_seconds)
        return out


class HelperLinkFailed(Exception):
    """The helpers' own link could not be set up (``no helper link: ...``)."""


@contextlib.asynccontextmanager
async def helper_streams(index: int, position: int, host: str, port: int,
                         ssl_context: ssl.SSLContext, pin: bytes, link: tuple[str, int],
                         link_context: ssl.SSLContext, wait_seconds: float
                         ) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                                  asyncio.StreamReader, asyncio.StreamWriter]]:
    """A helper's two connections, closed on leaving: the link to the other helper
    (:func:`helper_link`), then the server's (``Hello`` as ``position``). Yields
    ``(link reader, link writer, server reader, server writer)``.

    Raises:
        HelperLinkFailed: no link to the other helper.
        NETWORK_FAILURES: the server's connection failed.
    """
    writers: list[asyncio.StreamWriter] = []
    listener = None
    try:
        try:
            l_reader, l_writer, listener = await helper_link(index, link, link_context,
                                                              wait_seconds)
        except (asyncio.TimeoutError, ConnectionError, OSError, ssl.SSLError) as exc:
            raise HelperLinkFailed(f"no helper link: {type(exc).__name__}") from None
        writers.append(l_writer)
        reader, writer, _ = await connect(host, port, ssl_context, pin,
                                          Hello(PROTOCOL_VERSION, position), wait_seconds)
        writers.append(writer)
        yield l_reader, l_writer, reader, writer
    finally:
        for w in writers:
            await close_writer(w)
        if listener is not None:
            listener.close()


async def _helper_round(index: int, rnd: ThresholdRound, spec: NetSessionSpec, position: int,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        l_reader: asyncio.StreamReader, l_writer: asyncio.StreamWriter,
                        signing_key: bytes | None, verify_keys: Sequence[bytes] | None,
                        rand: Any, wait_seconds: float, fault: str | None,
                        out: dict[str, Any]) -> dict[str, Any]:
    """The one round of :func:`run_helper` over its open connections."""
    first, _ = await wait_for(read_message(reader, welcome_limits()), wait_seconds)
    if isinstance(first, Bye):
        out["status"], out["reason"] = first.status, first.reason
        return out
    assert isinstance(first, Welcome)
    try:
        config = spec.accept(first)
    except (SessionRejected, AggregationAborted) as exc:
        out["status"], out["reason"] = "refused", str(exc)
        return out
    v = rnd.vote
    machine, seed, blind = helper_client(config, position, rnd.verified, v.candidates,
                                         rnd.k, rand, signing_key, verify_keys, fault)
    session = ClientOutcome(position, "disconnected")
    await exchange(reader, writer, machine, wire_secagg.client_limits(config), session,
                   wait_seconds=wait_seconds)
    if session.status != "completed":
        out["status"], out["reason"] = session.status, session.reason
        return out
    try:
        member = await helper_after_session(
            index, v.n, v.candidates, v.theta, v.reveal_counts, rnd.verified, rnd.k,
            config, machine, seed, blind, (reader, writer), (l_reader, l_writer),
            verify_keys, fault, rand, wait_seconds)
    except CommitteeAborted as exc:
        out["status"], out["reason"] = "aborted", f"committee_{exc.reason}"
        await send_abort(writer, exc.reason)  # the server and the other helper learn why
        await send_abort(l_writer, exc.reason)
        return out
    out.update({"status": "completed", **rnd.release(member.passed, member.counts),
                "bytes_sent": member.bytes_sent})
    return out


def helper_client(config: SessionConfig, position: int, verified: bool, candidates: int,
                  k: int, rand: Any, signing_key: bytes | None,
                  verify_keys: Sequence[bytes] | None, fault: str | None
                  ) -> tuple[SecAggClient, bytes | None, np.ndarray]:
    """A helper's secure-aggregation client and blinding vector: ``(machine, seed,
    blind)``. Malicious model: every random choice from one 32-byte OS seed (handed to
    the helper's auditor after the session), the blinding uniform over ``F_p``;
    semi-honest: an OS blinding vector over ``Z_{2^k}`` (``seed`` None)."""
    keys = tuple(verify_keys) if verify_keys else None
    if verified:
        seed = bytes(rand.token_bytes(SEED_BYTES))
        blind = helper_blind(seed, candidates, F.P)
        entered = blind
        if fault == "other-blind":
            entered = blind.copy()
            entered[0] = F.add(entered[:1], np.array([1], np.uint64))[0]
        machine = SecAggClient(config, position, entered,
                               seeded_randomness(seed, f"client-{position}"),
                               signing_key=signing_key, verify_keys=keys)
        return machine, seed, blind
    blind = uniform_mod(rand, candidates, 1 << k)
    return (SecAggClient(config, position, blind, rand, signing_key=signing_key,
                         verify_keys=keys), None, blind)


async def helper_after_session(index: int, n: int, candidates: int, theta: int | None,
                               reveal_counts: bool, verified: bool, k: int,
                               config: SessionConfig, machine: SecAggClient,
                               seed: bytes | None, blind: np.ndarray,
                               server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                               link: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                               verify_keys: Sequence[bytes] | None, fault: str | None,
                               rand: Any, wait_seconds: float) -> Any:
    """Helper ``index``'s comparison after a completed session of ``n`` clients (the
    helpers at ``n`` and ``n + 1``) over the streams to the server and to the other
    helper: the verified committee (malicious model) or the replicated-sharing one.

    Raises:
        CommitteeAborted: the comparison or an audit failed (named reason).
    """
    if verified:
        assert seed is not None
        server_link = CommitteeLink(index, 0, *server,
                                    verified_limits(candidates, theta, _relay_bytes(config)),
                                    wait_seconds)
        helper_link = CommitteeLink(index, 3 - index, *link,
                                    verified_limits(candidates, theta), wait_seconds)
        return await _helper_verified(index, n, theta, reveal_counts, config, machine, seed,
                                      blind, server_link, helper_link, verify_keys, fault)
    limits = committee_limits(candidates)
    server_link = CommitteeLink(index, 0, *server, limits, wait_seconds)
    helper_link = CommitteeLink(index, 3 - index, *link, limits, wait_seconds)
    share = (np.uint64(0) - blind) & np.uint64((1 << k) - 1)
    prev, next_ = ((server_link, helper_link) if index == 1 else (helper_link, server_link))
    return await run_member(index, share, k, theta, reveal_counts=reveal_counts, prev=prev,
                            next=next_, rand=rand)


# ------------------------------------------------ the verified committee (malicious)

def _relay_bytes(config: SessionConfig) -> int:
    """The largest secure-aggregation frame of the session, either way: the bound of a
    forwarded message."""
    up, down = wire_secagg.server_limits(config), wire_secagg.client_limits(config)
    return max([up.max_frame(t) for t in up.shapes] + [down.max_frame(t) for t in down.shapes])


def _context(config: SessionConfig, machine_session: bytes) -> bytes:
    return hashlib.sha256(b"fedhh threshold committee\x00net\x00" + machine_session
                          + config.context).digest()


class _IgnoresInputCheck(VerifiedParty):
    """The launcher's deviating member: it computes with the copies it likes and does
    not check its own (a cheater would not)."""

    def receive_setup(self, key: Any, digest: Any) -> None:
        self._prev_key = self._take(key, "key", self.prev, nbytes=32)


def _shifted(v: np.ndarray, theta: int) -> np.ndarray:
    out = v.copy()
    if out.size:
        out[0] = F.add(out[:1], np.array([max(int(theta), 1)], np.uint64))[0]
    return out


async def _send_all(link: CommitteeLink, items: list[tuple[str, bytes]]) -> None:
    for step, payload in items:
        await link.send(step, payload)


async def _receive_items(link: CommitteeLink, steps: frozenset[str], end: str
                         ) -> list[tuple[str, bytes]]:
    items = []
    while True:
        step, payload = await link.receive_any(steps | {end})
        if step == end:
            return items
        items.append((step, payload))


def _decode_secagg(payload: bytes, limits: Any, member: int) -> Any:
    try:
        return codec.decode(payload, limits=limits)
    except codec.CodecError as exc:
        raise CommitteeAborted("malformed_message", member, f"forwarded: {exc}") from None


async def _helper_verified(index: int, n: int, theta: int | None, reveal_counts: bool,
                           config: SessionConfig, machine: SecAggClient, seed: bytes,
                           blind: np.ndarray,
                           server_link: CommitteeLink, helper_link: CommitteeLink,
                           verify_keys: Sequence[bytes] | None, fault: str | None) -> Any:
    """Helper ``index``'s part after the session: hand its seed to its auditor, derive
    its second component (helper 1: audit helper 2; helper 2: replay the server's
    journal), then the comparison."""
    up, down = wire_secagg.server_limits(config), wire_secagg.client_limits(config)
    handed = os.urandom(SEED_BYTES) if fault == "other-seed" else seed
    own = F.neg(blind)
    party_class = None
    if fault == "shift-blind":
        own, party_class = _shifted(own, theta), _IgnoresInputCheck
    context = _context(config, machine.session)
    if index == 1:
        await server_link.send("seed", handed)
        seed2 = await helper_link.receive("seed")
        items = await _receive_items(server_link, frozenset({"x-in", "x-out"}), "x-end")
        inbound = [_decode_secagg(p, down, index) for s, p in items if s == "x-in"]
        outbound = [_decode_secagg(p, up, index) for s, p in items if s == "x-out"]
        try:
            r2 = audit_helper(config, n + 1, seed2, F.P, inbound, outbound, verify_keys)
        except AuditFailed as exc:
            raise CommitteeAborted("helper_audit_failed", 1, f"helper 2: {exc.detail}"
                                   ) from None
        return await run_verified_member(1, own, F.neg(r2), theta,
                                         context=context,
                                         reveal_counts=reveal_counts,
                                         prev=server_link, next=helper_link,
                                         party_class=party_class)
    await helper_link.send("seed", handed)
    items = await _receive_items(server_link, frozenset({"j-msg", "j-close"}), "j-end")
    journal = [(None, "close") if s == "j-close" else (_decode_secagg(p, up, index), None)
               for s, p in items]
    try:
        s_replica = replay_journal(config, verify_keys, journal)
    except AuditFailed as exc:
        raise CommitteeAborted("replica_failed", 2, exc.detail) from None
    return await run_verified_member(2, own, s_replica, theta, context=context,
                                     reveal_counts=reveal_counts,
                                     prev=helper_link, next=server_link,
                                     party_class=party_class)
