"""The secure-aggregation server as a network process (asyncio, TLS 1.3).

Theory of operation
-------------------
:class:`NetSecAggServer` listens on a TCP port with TLS and runs one session
(:meth:`~NetSecAggServer.run_session`) or several in a row
(:meth:`~NetSecAggServer.serve`), each a fresh attempt with a fresh nonce.

1. **Join.** A connection must send a :class:`~protocol.core.net.messages.Hello` within
   ``stage_seconds``, naming a free roster position (a position whose connection
   closed may reconnect while the session is joining; the new connection replaces the
   old one and anything the old one sent is ignored); it gets the session's
   :class:`~protocol.core.net.messages.Welcome`, or a ``refused``
   :class:`~protocol.core.net.messages.Bye` (position taken, out of the roster, session
   already running, wrong version). The join window closes when all ``n`` positions are
   taken or after ``join_seconds``; positions still free are round-0 dropouts.
2. **Stages.** For each round the server waits until every client it expects (those it
   sent something to in the previous stage and that are still connected) has sent its
   message, or until the stage deadline (``stage_seconds``). Late, silent and
   disconnected clients are dropouts: the state machine
   (:class:`secagg.server.SecAggServer`) closes the round with what arrived, exactly as
   in the simulation, and either goes on with the survivors or aborts with a reason.
3. **Per connection**, a reader task reads frames bounded by the session's limits
   (:mod:`protocol.core.net.frames`): anything refused there (unknown tag, oversized,
   malformed), a message whose ``sender`` is not the connection's position, or a
   second message in one stage, closes that connection; the client becomes a dropout.
   Nothing a client sends can make the server buffer more than the largest legal
   frame of the current stage per connection.
4. **End.** Every connection gets a :class:`~protocol.core.net.messages.Bye`
   (``completed`` or ``aborted`` with the reason) and is closed; the report
   (:class:`SessionReport`) gives the outcome, the sets, per-stage latency and bytes.

Time is only ever read here (the state machines never see a clock).
"""
from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from protocol.core import wire_secagg
from protocol.core.codec import CodecError, SessionLimits
from protocol.core.net.frames import close_writer, decode_frame, frame, read_frame, read_message
from protocol.core.net.messages import PROTOCOL_VERSION, Bye, Hello, bye_limits, hello_limits
from protocol.core.net.session import NetSessionSpec
from protocol.core.net.signals import wait_for
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.errors import SecAggError
from secagg.randomness import OsRandom
from secagg.server import SecAggServer
from secagg.state import ServerState

_NOTHING = SessionLimits({})
#: what a connection may send outside any session: its own Bye (a device leaving)
_LEAVING = bye_limits()

__all__ = ["TlsListener", "NetSecAggServer", "SessionReport", "StageReport", "send_and_close",
           "end_all", "read_first"]

STAGE_NAMES = {0: "advertise_keys", 1: "share_keys", 2: "masked_input",
               3: "consistency", 4: "unmask"}


@dataclass
class StageReport:
    """One stage as the server saw it."""

    round: int
    name: str
    expected: int
    received: int
    seconds: float
    bytes_up: int
    bytes_down: int = 0


@dataclass
class SessionReport:
    """What one networked session did (the server's view; no input ever appears)."""

    status: str
    reason: str
    n: int
    degree: int
    threshold: int
    threat: str
    joined: int
    result: np.ndarray | None
    sets: dict[str, list[int]]
    stages: list[StageReport]
    refused: list[tuple[int | None, str]]
    wall_seconds: float
    server_cpu_seconds: float
    bytes_up: int
    bytes_down: int

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "n": self.n,
            "degree": self.degree, "threshold": self.threshold, "threat": self.threat,
            "joined": self.joined,
            "result": None if self.result is None else [int(v) for v in self.result],
            "sets": self.sets,
            "stages": [vars(s) for s in self.stages],
            "refused": [[c, r] for c, r in self.refused],
            "wall_seconds": self.wall_seconds, "server_cpu_seconds": self.server_cpu_seconds,
            "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
        }


@dataclass(eq=False)
class _Conn:
    client: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    task: asyncio.Task | None = None
    open: bool = True
    bytes_down: int = 0
    #: a client speaks only when spoken to: one message after each server frame
    may_send: bool = True
    #: handed on after the session (its reader stopped, the stream left open)
    kept: bool = False
    #: ``time.monotonic()`` when the peer closed the connection (``None``: it did not,
    #: or the server closed it): who left, and when (:mod:`protocol.core.net.departures`)
    left_at: float | None = None
    #: the reason of the ``Bye`` the peer sent before it closed (it gave up, saying
    #: why: a device whose state machine aborted, a Task it refused); ``None``: it
    #: said nothing (its connection closed abruptly: the process died or was killed)
    gave_up: str | None = None

    @property
    def who(self) -> int:
        """The client as refusals name it."""
        return self.client


@dataclass
class _Session:
    spec: NetSessionSpec
    limits: SessionLimits
    welcome_frame: bytes
    conns: dict[int, _Conn] = field(default_factory=dict)
    joining: bool = True
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    refused: list[tuple[int | None, str]] = field(default_factory=list)
    all_joined: asyncio.Event = field(default_factory=asyncio.Event)
    #: ``limits`` and the Bye a client leaving sends (built once, on first read)
    with_bye: SessionLimits | None = None
    #: a stage whose frames are queued undecoded (``(conn, body, size)``): a committee
    #: job's validated reports, whose decoding the committee judges
    #: (:mod:`protocol.core.net.committee_job`); one frame per connection still
    raw: bool = False


class TlsListener:
    """A TLS server socket: :meth:`start` listens on ``host``/``port`` (port 0: any free
    one; :attr:`port` is the bound port afterwards) and reports a ``listening`` event;
    each connection is handed to ``_handle``. Subclasses set ``host``, ``port``,
    ``ssl_context``, ``stage_seconds`` (the TLS handshake's deadline) and ``events``."""

    host: str
    port: int
    ssl_context: ssl.SSLContext
    stage_seconds: float
    events: Callable[[dict[str, Any]], None]
    _server: Any = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def _tracked(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        """One connection's handler, in :attr:`handlers` (task -> writer) while it
        runs."""
        task = asyncio.current_task()
        handlers = self.__dict__.setdefault("handlers", {})
        handlers[task] = writer
        try:
            await self._handle(reader, writer)
        except asyncio.CancelledError:
            # the server is stopping (:func:`stop_tasks`): end as a finished handler,
            # since asyncio's stream protocol reports a cancelled one as an error
            await close_writer(writer)
        finally:
            handlers.pop(task, None)

    async def bye_everyone(self, bye: Bye, skip: Iterable[asyncio.StreamWriter] = ()
                           ) -> int:
        """Stop listening and send ``bye`` to every connection still being handled
        (one that has not said Hello yet included) but those of ``skip``, and close
        them; how many were told. What a stopping server says to the parties it has not
        admitted yet."""
        await TlsListener.close(self)
        await asyncio.sleep(0)  # connections accepted just now start their handlers
        skip = {id(w) for w in skip}
        writers = [w for w in dict(self.__dict__.get("handlers", {})).values()
                   if id(w) not in skip and not w.is_closing()]
        await asyncio.gather(*(send_and_close(w, bye, 2.0) for w in writers),
                             return_exceptions=True)
        return len(writers)

    async def start(self) -> None:
        """Open the listening socket (:attr:`port` is the bound port afterwards)."""
        self.__dict__.setdefault("handlers", {})
        self._server = await asyncio.start_server(
            self._tracked, self.host, self.port, ssl=self.ssl_context, backlog=4096,
            ssl_handshake_timeout=self.stage_seconds)
        self.port = self._server.sockets[0].getsockname()[1]
        self.events({"event": "listening", "host": self.host, "port": self.port})

    async def close(self) -> None:
        """Stop listening (open connections are the subclass's)."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await wait_for(self._server.wait_closed(), 5)
            self._server = None


class NetSecAggServer(TlsListener):
    """A TLS server that runs secure-aggregation sessions of one spec.

    Args:
        spec: the session (parameters derived from its threat model).
        ssl_context: from :func:`protocol.core.net.tls.server_context`.
        verify_keys: the clients' Ed25519 keys (malicious-server variant).
        host, port: where to listen (``port=0``: any free port; see :attr:`port`).
        stage_seconds: per-stage deadline (also the time a new connection has to say
            Hello).
        join_seconds: how long a session waits for all ``n`` clients.
        rand: randomness for the server nonce (default ``OsRandom``).
        events: called with a dict per event (``listening``, ``joined``, ``stage``,
            ``session``) for launchers and logs.
    """

    def __init__(self, spec: NetSessionSpec, ssl_context: ssl.SSLContext, *,
                 verify_keys: Sequence[bytes] | None = None, host: str = "127.0.0.1",
                 port: int = 0, stage_seconds: float = 60.0, join_seconds: float = 60.0,
                 rand: Any = None, events: Callable[[dict[str, Any]], None] | None = None
                 ) -> None:
        if spec.malicious and (verify_keys is None or len(verify_keys) != spec.n):
            raise ValueError(f"the malicious-server variant needs {spec.n} verification keys")
        self.spec = spec
        self.params = spec.params()
        self._configure(ssl_context, verify_keys, host, port, stage_seconds, join_seconds, rand,
                        events)
        self._session: _Session | None = None
        self._server: asyncio.base_events.Server | None = None
        #: refusals outside any session (a message between sessions)
        self.refused: list[tuple[int | None, str]] = []

    def _configure(self, ssl_context: ssl.SSLContext, verify_keys: Sequence[bytes] | None,
                   host: str, port: int, stage_seconds: float, join_seconds: float,
                   rand: Any, events: Callable[[dict[str, Any]], None] | None) -> None:
        """What every secure-aggregation server keeps (a job server too).

        Raises:
            ValueError: deadlines that are not positive.
        """
        if stage_seconds <= 0 or join_seconds <= 0:
            raise ValueError("deadlines must be positive")
        self.ssl_context = ssl_context
        self.verify_keys = list(verify_keys) if verify_keys is not None else None
        self.host, self.port = host, port
        self.stage_seconds, self.join_seconds = float(stage_seconds), float(join_seconds)
        self.rand = rand if rand is not None else OsRandom()
        self.events = events or (lambda _e: None)

    # ------------------------------------------------------------------ listening
    async def serve(self, sessions: int = 1) -> list[SessionReport]:
        """Listen, run ``sessions`` sessions one after the other, close."""
        await self.start()
        try:
            return [await self.run_session() for _ in range(sessions)]
        finally:
            await self.close()

    # ------------------------------------------------------------------ connections
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = self._session
        hello = await read_first(reader, writer, hello_limits(), self.stage_seconds,
                                 session.refused if session is not None else None)
        if hello is None:
            return
        assert isinstance(hello, Hello)
        reason = None
        if session is None or not session.joining:
            reason = "no session is accepting clients"
        elif hello.version != PROTOCOL_VERSION:
            reason = "version_mismatch"
        elif not 0 <= hello.client < self.spec.n:
            reason = f"position {hello.client} is not in the roster of {self.spec.n}"
        elif hello.client in session.conns and session.conns[hello.client].open:
            reason = f"position {hello.client} is taken in this session"
        if reason is not None:
            if session is not None:
                session.refused.append((hello.client, reason))
            await send_and_close(writer, Bye("refused", reason))
            return
        assert session is not None
        conn = _Conn(hello.client, reader, writer)
        session.conns[hello.client] = conn
        writer.write(session.welcome_frame)
        conn.bytes_down += len(session.welcome_frame)
        conn.task = asyncio.current_task()
        if sum(c.open for c in session.conns.values()) == self.spec.n:
            session.all_joined.set()
        await self._read_loop(conn)

    def _current_of(self, conn: _Conn) -> "_Session | None":
        """The session whose messages ``conn`` may send now (``None``: none)."""
        session = self._session
        if session is not None and session.conns.get(conn.client) is conn:
            return session
        return None

    async def _read_loop(self, conn: _Conn) -> None:
        """Read this client's frames into its current session's queue until it closes:
        bounded by that session's limits (nothing is accepted outside a session), from
        its own position only, one message per server frame."""
        checked: list[_Session | None] = [None]

        def limits() -> SessionLimits:  # the session's, and a client's Bye at any time
            session = self._current_of(conn)
            checked[0] = session
            if session is None:
                return _LEAVING
            if session.with_bye is None:
                session.with_bye = session.limits.merged(_LEAVING)
            return session.with_bye

        def refuse(why: str) -> None:  # logged with the session the client is in
            session = self._current_of(conn)
            (session.refused if session is not None else self.refused).append((conn.who, why))

        try:
            while conn.open:
                tag, body, size, used = await read_frame(conn.reader, limits)
                if tag == Bye.TAG:  # the client leaves and says why (it gave up)
                    bye = decode_frame(tag, body, used)
                    conn.gave_up = bye.reason or bye.status
                    break
                session = self._current_of(conn)
                if session is None or session is not checked[0]:
                    refuse("message outside its sessions")
                    break
                msg: Any = body
                if not session.raw:
                    msg = decode_frame(tag, body, used)
                    if getattr(msg, "sender", None) != conn.client:
                        refuse("message names another sender")
                        break
                if not conn.may_send:  # bounds what one client can queue to one message
                    refuse("message sent out of turn")
                    break
                conn.may_send = False
                await session.queue.put((conn, msg, size))
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
            pass
        except CodecError as exc:
            refuse(f"refused frame: {exc}"[:200])
        except asyncio.CancelledError:
            pass
        finally:
            if conn.open and not conn.kept:
                conn.open = False
                conn.left_at = time.monotonic()
                session = self._current_of(conn)
                if session is not None:
                    await session.queue.put((conn, None, 0))
                await close_writer(conn.writer)

    # ------------------------------------------------------------------ one session
    async def run_session(self, keep: frozenset[int] = frozenset(),
                          server_factory: Callable[..., SecAggServer] | None = None
                          ) -> SessionReport:
        """Admit clients, run the rounds with deadlines, say Bye, report.

        ``keep``: positions whose connections stay open after a completed session (the
        committee's helpers, who go on to the comparison with the server): their readers
        are stopped before the Bye, and the streams are in :attr:`kept` afterwards.
        ``server_factory(config, verify_keys)``: the state machine to run (the
        committee's server records the messages its helpers replay and audit); it is
        :attr:`last_server` afterwards.

        Never raises for anything a client does; a server-side failure is reported as
        status ``aborted``.
        """
        self.kept: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        wall0, cpu0 = time.perf_counter(), time.process_time()
        spec, params = self.spec, self.params
        nonce = self.rand.token_bytes(FRESH_NONCE_BYTES)
        config = spec.config(nonce, params)
        welcome = spec.welcome(nonce, self.stage_seconds, params)
        session = _Session(spec, wire_secagg.server_limits(config), frame(welcome))
        self._session = session
        self.events({"event": "session", "phase": "joining", "session": config.session.hex()})
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(session.all_joined.wait(), self.join_seconds)
        session.joining = False
        joined = sorted(session.conns)
        self.events({"event": "joined", "clients": len(joined)})
        srv = (server_factory(config, self.verify_keys) if server_factory is not None
               else SecAggServer(config, verify_keys=self.verify_keys))
        self.last_server = srv
        stages: list[StageReport] = []
        status, reason = "aborted", ""
        try:
            status, reason = await self._run_stages(session, srv, stages)
        finally:
            bye = Bye(status, reason[:120])
            handed = [c for p, c in session.conns.items()
                      if p in keep and c.open and status == "completed"]
            for conn in handed:  # stop its reader first: nothing of the next step is read
                conn.kept = True
                if conn.task is not None and conn.task is not asyncio.current_task():
                    conn.task.cancel()
            await asyncio.gather(*(c.task for c in handed if c.task is not None
                                   and c.task is not asyncio.current_task()),
                                 return_exceptions=True)
            for conn in handed:
                with contextlib.suppress(Exception):
                    conn.writer.write(frame(bye))
                    await wait_for(conn.writer.drain(), self.stage_seconds)
                self.kept[conn.client] = (conn.reader, conn.writer)
            await end_all([c for c in session.conns.values() if not c.kept], bye)
            self._session = None
        report = SessionReport(
            status=status, reason=reason, n=spec.n, degree=params.degree,
            threshold=params.threshold, threat=spec.threat, joined=len(joined),
            result=srv.result, sets={k: sorted(v) for k, v in srv.sets.items()},
            stages=stages, refused=session.refused,
            wall_seconds=time.perf_counter() - wall0,
            server_cpu_seconds=time.process_time() - cpu0,
            bytes_up=sum(s.bytes_up for s in stages),
            bytes_down=sum(c.bytes_down for c in session.conns.values()))
        self.events({"event": "done", "status": status, "reason": reason})
        return report

    async def _run_stages(self, session: _Session, srv: SecAggServer,
                          stages: list[StageReport]) -> tuple[str, str]:
        """Run the state machine's rounds with deadlines over the session's connections
        (appending to ``stages``); ``(status, reason)``."""
        expected = {c for c, conn in session.conns.items() if conn.open}
        try:
            while srv.state not in (ServerState.COMPLETED, ServerState.ABORTED):
                round_no = srv.round
                assert round_no is not None
                stage = await self._collect(session, srv, round_no, expected)
                out = srv.close_round()
                expected = await self._send(session, out, stage)
                stages.append(stage)
                self.events({"event": "stage", **vars(stage)})
        except SecAggError as exc:  # a state-machine misuse here is a server bug: report it
            return "aborted", f"server error: {exc}"
        if srv.state is ServerState.COMPLETED:
            return "completed", ""
        return "aborted", srv.abort_reason.value if srv.abort_reason else "aborted"

    async def _collect(self, session: _Session, srv: SecAggServer, round_no: int,
                       expected: set[int]) -> StageReport:
        """Feed the server this stage's messages until all expected arrived or the
        deadline passed."""
        t0 = time.perf_counter()
        deadline = t0 + self.stage_seconds
        waiting = {c for c in expected if session.conns[c].open}
        got: set[int] = set()
        size_up = 0
        queue = session.queue
        while waiting:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                conn, msg, size = await wait_for(queue.get(), left)
            except asyncio.TimeoutError:
                break
            client = conn.client
            if session.conns.get(client) is not conn:
                continue  # from a connection this position replaced while joining
            if msg is None:  # disconnected
                waiting.discard(client)
                continue
            # at most one message per client per stage: its reader refuses a message sent
            # out of turn (before the server's next frame), and late clients are dropped
            got.add(client)
            waiting.discard(client)
            size_up += size
            try:
                srv.receive(msg)
            except SecAggError as exc:
                session.refused.append((client, f"{type(exc).__name__}: {exc}"[:200]))
        late = [c for c in waiting if session.conns[c].open]
        for c in late:  # past the deadline: a dropout from now on
            await self._drop(session, c)
        return StageReport(round_no, STAGE_NAMES.get(round_no, str(round_no)), len(expected),
                           len(got), time.perf_counter() - t0, size_up)

    async def _drop(self, session: _Session, client: int) -> None:
        conn = session.conns[client]
        if conn.open:
            conn.open = False
            if conn.task is not None:
                conn.task.cancel()
            await close_writer(conn.writer)

    async def _send(self, session: _Session, out: Sequence[tuple[int, Any]],
                    stage: StageReport) -> set[int]:
        """Write the round's replies; the recipients still connected are expected next."""
        sent: set[int] = set()
        writers = []
        for recipient, msg in out:
            conn = session.conns.get(recipient)
            if conn is None or not conn.open:
                continue
            data = frame(msg)
            try:
                conn.writer.write(data)
            except (ConnectionError, OSError, RuntimeError):
                await self._drop(session, recipient)
                continue
            conn.bytes_down += len(data)
            conn.may_send = True
            stage.bytes_down += len(data)
            sent.add(recipient)
            writers.append((recipient, conn.writer))

        async def drain(recipient: int, writer: asyncio.StreamWriter) -> None:
            try:
                await wait_for(writer.drain(), self.stage_seconds)
            except (asyncio.TimeoutError, ConnectionError, OSError, RuntimeError):
                sent.discard(recipient)
                await self._drop(session, recipient)

        await asyncio.gather(*(drain(r, w) for r, w in writers))
        return sent


async def read_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     limits: SessionLimits, seconds: float,
                     refused: list[tuple[int | None, str]] | None) -> Any:
    """A new connection's first frame, read within ``seconds`` with ``limits``; on any
    failure (silence, a refused or broken frame) the connection is closed, the reason
    recorded in ``refused``, and ``None`` returned."""
    try:
        msg, _ = await wait_for(read_message(reader, limits), seconds)
        return msg
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, CodecError, OSError,
            ssl.SSLError) as exc:
        if refused is not None:
            refused.append((None, f"no valid Hello: {type(exc).__name__}"))
        await close_writer(writer)
        return None


async def stop_tasks(keep: Iterable[asyncio.Task] = (), timeout: float = 10.0) -> None:
    """Cancel every task of the running loop but this one and ``keep``, and wait (at
    most ``timeout`` seconds) until they have ended: what an interrupt leaves running
    ends here, not in asyncio's "Task was destroyed but it is pending" when the loop
    closes."""
    me = asyncio.current_task()
    keep = set(keep)
    loop = asyncio.get_running_loop()
    if not getattr(loop, "_fedhh_quiet", False):
        # a handler cancelled before it ever ran is reported by asyncio's stream
        # protocol as an error ("Exception in callback"): a cancellation is none
        default = loop.get_exception_handler()

        def handler(lp: Any, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if isinstance(exc, asyncio.CancelledError):
                return
            (default or (lambda lp, c: lp.default_exception_handler(c)))(lp, context)

        loop.set_exception_handler(handler)
        loop._fedhh_quiet = True  # type: ignore[attr-defined]
    tasks = [t for t in asyncio.all_tasks() if t is not me and t not in keep and not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)


async def end_all(conns: Iterable[_Conn], bye: Bye) -> None:
    """``bye`` to every open connection of ``conns``, close them, stop their readers."""
    conns = list(conns)
    await asyncio.gather(*(send_and_close(c.writer, bye) for c in conns if c.open),
                         return_exceptions=True)
    for c in conns:
        c.open = False
        if c.task is not None and c.task is not asyncio.current_task():
            c.task.cancel()


async def send_and_close(writer: asyncio.StreamWriter, bye: Bye, timeout: float = 2.0) -> None:
    """Send ``bye`` (flushing what was written before it, for up to ``timeout``
    seconds) and close."""
    with contextlib.suppress(Exception):
        writer.write(frame(bye))
        await wait_for(writer.drain(), timeout)
    await close_writer(writer)
