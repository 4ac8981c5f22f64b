"""The thresholding committee as network processes: server, two helpers, clients.

The in-process transport (:mod:`protocol.core.transports.threshold`) as it would be
deployed:

1. **Secure aggregation with the helpers in the roster.** The session has the ``n``
   clients at positions ``0..n-1`` and the helpers at ``n`` and ``n+1``, both
   *required* (:class:`secagg.state.SessionConfig`): a client refuses to unmask a sum
   without them. Helper ``h`` inputs a uniform vector ``R_h`` modulo ``2^k`` (``k`` the
   committee's ring, :func:`protocol.core.committee.ring_bits` of ``n`` and ``theta``),
   so the server unmasks only ``S = sum + R_1 + R_2``. Every party derives the session
   (threshold, degree, ring, context, the required positions) from the round's options
   and refuses anything else, as in any networked session.
2. **Comparison.** The server keeps the helpers' connections open
   (:meth:`~protocol.core.net.server.NetSecAggServer.run_session` with ``keep``), and
   the three run the replicated-sharing comparison (:func:`~protocol.core.net.
   committee_net.run_member`) on ``(S, -R_1, -R_2)``: only the pass bits are opened,
   and with counts, only the counts of the passing candidates. The link between the
   helpers is its own TLS connection with both ends pinned (mutual authentication,
   :func:`~protocol.core.net.tls.helper_link_contexts`): helper 1's key to helper 2
   must not pass through the server, which with it would hold every key.

Clients vote with the seeded experiment's votes (:func:`~protocol.core.net.shuffle.
demo_vote`), so a launcher can check the release exactly.
"""
from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from protocol.core import wire_secagg
from protocol.core.committee import CommitteeAborted, ring_bits
from protocol.core.contract import AggregationAborted
from protocol.core.net.client import (
    NETWORK_FAILURES, ClientOutcome, connect, exchange, failure_outcome,
)
from protocol.core.net.committee_net import CommitteeLink, committee_limits, run_member
from protocol.core.net.frames import close_writer, read_message
from protocol.core.net.messages import PROTOCOL_VERSION, Bye, Hello, Welcome, welcome_limits
from protocol.core.net.server import NetSecAggServer
from protocol.core.net.session import NetSessionSpec, SessionRejected
from protocol.core.net.shuffle import ShuffleRound, demo_vote
from protocol.core.randomness import OsRandom
from protocol.core.transports.threshold import uniform_mod
from secagg.client import SecAggClient

__all__ = ["ThresholdRound", "serve_threshold_round", "run_helper", "demo_votes_vector",
           "HELPERS"]

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

    def session(self) -> NetSessionSpec:
        """The secure-aggregation session: ``n + 2`` positions, the helpers last and
        required, vote vectors modulo ``2^k``, the context binding the round."""
        v = self.vote
        ctx = hashlib.sha256(b"fedhh/net/committee-round/v1\x00" + self.label.encode()
                             + b"\x00" + repr((v.candidates, v.theta, v.reveal_counts,
                                               v.round)).encode()).digest()
        return NetSessionSpec(v.n + HELPERS, dim=v.candidates, modulus=1 << self.k,
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
async def serve_threshold_round(server: NetSecAggServer, rnd: ThresholdRound,
                                wait_seconds: float) -> dict[str, Any]:
    """Run one round on a started server whose spec is ``rnd.session()``: the session
    (keeping the helpers' connections), then the comparison as member 0. A JSON-ready
    report: the session's (without the blinded sum), the committee's outcome, the
    release. Never raises for anything a client or helper does."""
    n = rnd.vote.n
    report = await server.run_session(keep=frozenset({n, n + 1}))
    out = report.to_json()
    out.pop("result", None)  # the blinded sum stays with the server
    out["committee"] = None
    kept = server.kept
    try:
        if report.status != "completed":
            return out
        if not {n, n + 1} <= set(report.sets.get("U3", ())) or len(kept) != HELPERS:
            out["status"], out["reason"] = "aborted", "threshold_helper_missing"
            return out
        assert report.result is not None
        limits = committee_limits(rnd.vote.candidates)
        to_h1 = CommitteeLink(0, 1, *kept[n], limits, wait_seconds)
        to_h2 = CommitteeLink(0, 2, *kept[n + 1], limits, wait_seconds)
        t0 = time.process_time()
        try:
            member = await run_member(0, report.result.astype(np.uint64), rnd.k,
                                      rnd.vote.theta, reveal_counts=rnd.vote.reveal_counts,
                                      prev=to_h2, next=to_h1)
        except CommitteeAborted as exc:
            out["status"], out["reason"] = "aborted", f"committee_{exc.reason}"
            return out
        out["committee"] = {"cpu_seconds": time.process_time() - t0,
                            "bytes_sent": member.bytes_sent,
                            "comparisons": int(member.passed.size)}
        out.update(rnd.release(member.passed, member.counts))
        out["in_sum"] = [c for c in report.sets.get("U3", ()) if c < n]
        return out
    finally:
        for _, writer in kept.values():
            await close_writer(writer)


# ---------------------------------------------------------------------------- helpers
async def _helper_link(index: int, link: tuple[str, int], context: ssl.SSLContext,
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
        reader, writer = await asyncio.wait_for(got, wait_seconds)
        return reader, writer, listener
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
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
                     wait_seconds: float = 120.0) -> dict[str, Any]:
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
    writers: list[asyncio.StreamWriter] = []
    listener = None
    try:
        try:
            l_reader, l_writer, listener = await _helper_link(index, link, link_context,
                                                              wait_seconds)
        except (asyncio.TimeoutError, ConnectionError, OSError, ssl.SSLError) as exc:
            out["status"], out["reason"] = "aborted", f"no helper link: {type(exc).__name__}"
            return out
        writers.append(l_writer)
        reader, writer, _ = await connect(host, port, ssl_context, pin,
                                          Hello(PROTOCOL_VERSION, position), wait_seconds)
        writers.append(writer)
        first, _ = await asyncio.wait_for(read_message(reader, welcome_limits()), wait_seconds)
        if isinstance(first, Bye):
            out["status"], out["reason"] = first.status, first.reason
            return out
        assert isinstance(first, Welcome)
        try:
            config = spec.accept(first)
        except (SessionRejected, AggregationAborted) as exc:
            out["status"], out["reason"] = "refused", str(exc)
            return out
        blind = uniform_mod(rand, rnd.vote.candidates, 1 << rnd.k)
        machine = SecAggClient(config, position, blind, rand, signing_key=signing_key,
                               verify_keys=tuple(verify_keys) if verify_keys else None)
        session = ClientOutcome(position, "disconnected")
        await exchange(reader, writer, machine, wire_secagg.client_limits(config), session,
                       wait_seconds=wait_seconds)
        if session.status != "completed":
            out["status"], out["reason"] = session.status, session.reason
            return out
        limits = committee_limits(rnd.vote.candidates)
        server_link = CommitteeLink(index, 0, reader, writer, limits, wait_seconds)
        helper_link = CommitteeLink(index, 3 - index, l_reader, l_writer, limits, wait_seconds)
        share = (np.uint64(0) - blind) & np.uint64((1 << rnd.k) - 1)
        prev, next_ = ((server_link, helper_link) if index == 1
                       else (helper_link, server_link))
        try:
            member = await run_member(index, share, rnd.k, rnd.vote.theta,
                                      reveal_counts=rnd.vote.reveal_counts, prev=prev,
                                      next=next_, rand=rand)
        except CommitteeAborted as exc:
            out["status"], out["reason"] = "aborted", f"committee_{exc.reason}"
            return out
        out.update({"status": "completed", **rnd.release(member.passed, member.counts),
                    "bytes_sent": member.bytes_sent})
        return out
    except NETWORK_FAILURES as exc:
        out["status"], out["reason"] = failure_outcome(exc, wait_seconds)
        return out
    finally:
        for w in writers:
            await close_writer(w)
        if listener is not None:
            listener.close()
