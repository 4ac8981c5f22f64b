"""Secure-aggregation clients as network peers (asyncio, TLS 1.3, pinned server).

:func:`run_client` is one client: connect, check the pin, say Hello, check the
Welcome against its own :class:`~protocol.core.net.session.NetSessionSpec` (refusing a
session that is not exactly the one its threat model requires), then feed every server
frame to its :class:`secagg.client.SecAggClient` and send what that returns, until a
:class:`~protocol.core.net.messages.Bye`, an abort, or silence. :func:`run_clients` runs
many of them as tasks of one event loop (one process, many devices).

A client never waits forever: a server silent for longer than ``wait_seconds`` closes
the connection (outcome ``server_silent``). Every outcome is one
:class:`ClientOutcome`; no exception escapes :func:`run_client` for anything the server
or the network does.

``stall_at`` is a fault for experiments and tests: the client stops answering before it
would send its message of that round (it keeps the connection open, like a device
that hangs), so the server's deadline is what ends it.
"""
from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from protocol.core import wire_secagg
from protocol.core.codec import CodecError
from protocol.core.contract import AggregationAborted
from protocol.core.net.frames import close_writer, frame, read_message
from protocol.core.net.messages import PROTOCOL_VERSION, Bye, Hello, Welcome, bye_limits, welcome_limits
from protocol.core.net.session import NetSessionSpec, SessionRejected
from protocol.core.net.tls import SERVER_NAME, PinError, check_pin
from protocol.core.net.signals import wait_for
from secagg.client import SecAggClient
from secagg.errors import SecAggError
from secagg.randomness import OsRandom

__all__ = ["ClientOutcome", "run_client", "run_clients", "exchange", "connect",
           "NETWORK_FAILURES",
           "failure_outcome"]

#: what a peer of a server can run into that is the server's or the network's doing
NETWORK_FAILURES = (asyncio.TimeoutError, CodecError, asyncio.IncompleteReadError,
                    ConnectionError, OSError, ssl.SSLError)


def failure_outcome(exc: BaseException, wait_seconds: float) -> tuple[str, str]:
    """``(status, reason)`` of a client that met one of :data:`NETWORK_FAILURES`:
    ``server_silent`` (nothing for ``wait_seconds``), ``refused`` (not the pinned
    certificate), ``aborted`` (a frame refused by this client's framing) or
    ``disconnected``."""
    if isinstance(exc, asyncio.TimeoutError):
        return "server_silent", f"nothing for {wait_seconds:g} s"
    if isinstance(exc, PinError):
        return "refused", str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "refused", f"server certificate rejected: {exc.verify_message}"
    if isinstance(exc, CodecError):
        return "aborted", f"refused frame from the server: {exc}"[:200]
    return "disconnected", type(exc).__name__


@dataclass
class ClientOutcome:
    """How one client's session ended, from its side."""

    client: int
    #: ``completed``, ``aborted`` (the client or the server gave up; see ``reason``),
    #: ``refused`` (not admitted, or it refused the session), ``server_silent``,
    #: ``disconnected``, ``stalled`` (the ``stall_at`` fault)
    status: str
    reason: str = ""
    bytes_up: int = 0
    bytes_down: int = 0
    cpu_seconds: float = 0.0


async def run_client(client: int, host: str, port: int, spec: NetSessionSpec,
                     ssl_context: ssl.SSLContext, pin: bytes,
                     value: np.ndarray | Callable[[], np.ndarray], *,
                     signing_key: bytes | None = None,
                     verify_keys: Sequence[bytes] | None = None, rand: Any = None,
                     wait_seconds: float = 300.0, stall_at: int | None = None
                     ) -> ClientOutcome:
    """One client's whole session; see the module docstring."""
    out = ClientOutcome(client, "disconnected")
    writer = None
    try:
        reader, writer, sent = await connect(host, port, ssl_context, pin,
                                             Hello(PROTOCOL_VERSION, client), wait_seconds)
        out.bytes_up += sent
        first, size = await wait_for(read_message(reader, welcome_limits()), wait_seconds)
        out.bytes_down += size
        if isinstance(first, Bye):
            out.status, out.reason = "refused", first.reason
            return out
        assert isinstance(first, Welcome)
        try:
            config = spec.accept(first)
        except (SessionRejected, AggregationAborted) as exc:  # incl. no parameters
            out.status, out.reason = "refused", str(exc)
            return out
        machine = SecAggClient(config, client, value, rand if rand is not None else OsRandom(),
                               signing_key=signing_key, verify_keys=verify_keys)
        await exchange(reader, writer, machine, wire_secagg.client_limits(config), out,
                       wait_seconds=wait_seconds, stall_at=stall_at)
    except NETWORK_FAILURES as exc:
        out.status, out.reason = failure_outcome(exc, wait_seconds)
    finally:
        await close_writer(writer)
    return out


async def connect(host: str, port: int, ssl_context: ssl.SSLContext, pin: bytes,
                  hello: Any, wait_seconds: float
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
    """Open a TLS connection to the server, check its certificate against ``pin`` and
    send the first frame; ``(reader, writer, bytes sent)``.

    Raises:
        as :data:`NETWORK_FAILURES` (the caller maps them with :func:`failure_outcome`).
    """
    reader, writer = await wait_for(asyncio.open_connection(
        host, port, ssl=ssl_context, server_hostname=SERVER_NAME), wait_seconds)
    try:
        check_pin(writer.get_extra_info("ssl_object"), pin)
        data = frame(hello)
        writer.write(data)
    except BaseException:
        await close_writer(writer)
        raise
    return reader, writer, len(data)


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   machine: SecAggClient, limits: Any, out: ClientOutcome, *,
                   wait_seconds: float, stall_at: int | None = None) -> None:
    """Run one session's rounds: start ``machine``, send what it returns, feed it every
    server frame (read with ``limits``, a Bye accepted too), until the server's Bye or
    the machine's abort; sets ``out``'s status and reason.

    Raises:
        asyncio.TimeoutError: the server was silent for ``wait_seconds``.
        CodecError: a frame this client does not accept.
        asyncio.IncompleteReadError, ConnectionError, OSError: the connection broke.
    """
    t0 = time.process_time()
    to_send = machine.start()
    out.cpu_seconds += time.process_time() - t0
    limits = limits.merged(bye_limits())
    while True:
        if to_send and stall_at is not None and type(to_send[0]).ROUND == stall_at:
            out.status = "stalled"
            with contextlib.suppress(Exception):  # hang until the server gives up on us
                await wait_for(reader.read(), wait_seconds)
            return
        for m in to_send:
            data = frame(m)
            writer.write(data)
            out.bytes_up += len(data)
        await writer.drain()
        if machine.aborted:
            out.status = "aborted"
            out.reason = machine.abort_reason.value if machine.abort_reason else ""
            return
        msg, size = await wait_for(read_message(reader, limits), wait_seconds)
        out.bytes_down += size
        if isinstance(msg, Bye):
            out.status, out.reason = msg.status, msg.reason
            return
        t0 = time.process_time()
        try:
            to_send = machine.receive(msg)
        except SecAggError as exc:  # a message not legal now: the server misbehaves
            out.status, out.reason = "aborted", f"unexpected {type(msg).__name__}: {exc}"
            return
        finally:
            out.cpu_seconds += time.process_time() - t0


async def run_clients(clients: Sequence[int], host: str, port: int, spec: NetSessionSpec,
                      ssl_context: ssl.SSLContext, pin: bytes,
                      value_of: Callable[[int], np.ndarray], *,
                      signing_keys: Sequence[bytes] | None = None,
                      verify_keys: Sequence[bytes] | None = None,
                      wait_seconds: float = 300.0, stall: Sequence[int] = (),
                      stall_at: int | None = None) -> list[ClientOutcome]:
    """Run ``clients`` concurrently in this event loop (``stall``: the clients that
    carry the ``stall_at`` fault)."""
    stalling = set(stall)
    if verify_keys is not None:
        verify_keys = tuple(verify_keys)  # one tuple, shared by every client
    tasks = [run_client(c, host, port, spec, ssl_context, pin,
                        (lambda c=c: value_of(c)),
                        signing_key=signing_keys[c] if signing_keys is not None else None,
                        verify_keys=verify_keys, wait_seconds=wait_seconds,
                        stall_at=stall_at if c in stalling else None)
             for c in clients]
    return list(await asyncio.gather(*tasks))
