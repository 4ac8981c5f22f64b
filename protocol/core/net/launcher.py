"""Loopback experiments with real processes: one server, client processes, 127.0.0.1.

:func:`run_loopback` makes keys (``fedhh keys``) in a fresh directory unless given one,
starts ``fedhh serve`` and, for each session, ``processes`` ``fedhh client`` processes
(the roster split into contiguous ranges), follows the server's JSON events, applies
the faults it was asked for, and reports per session:

* the outcome (``completed`` / ``aborted`` with the reason), the sets and whether the
  release is **exact**: the sum, modulo ``R``, of the seeded inputs
  (:func:`~protocol.core.net.session.demo_input`) of exactly the clients in ``U3``;
* per-stage latency, bytes on the wire (frames, counted by the server), the clients'
  outcomes as their processes report them.

Faults: ``kill`` client processes per session get ``SIGKILL`` (kill -9) during stage
``kill_at`` (right after the server has sent that stage's requests; ``0``: as soon as
they are started; ``None``: a random stage per session); ``stall`` clients hang before their ``stall_at`` message. With
``compare``, the same session also runs in this process
(:func:`protocol.core.secagg_engine.run_secagg`, the same seed's inputs, no dropouts)
and the report gives its release, CPU and bytes beside the network's.

Every process is waited for with a deadline and killed if it outlives it; the report
says how many had to be (``left_behind`` counts processes still running when the
launcher returned: always 0 unless the operating system refused to kill one).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator

import numpy as np

from protocol.core.net import tls
from protocol.core.net.session import NetSessionSpec, demo_input
from protocol.core.net.shuffle import expected_release
from protocol.core.net.signals import wait_for

__all__ = ["LoopbackOptions", "run_loopback", "expected_sum", "release_digest", "fedhh_command",
           "client_summaries", "kill_all", "next_before",
           "ShuffleLoopbackOptions", "run_shuffle_loopback", "ThresholdLoopbackOptions",
           "run_threshold_loopback",
           "read_json_lines", "stop_process"]


@dataclass(frozen=True)
class LoopbackOptions:
    """One loopback experiment (see the module docstring)."""

    clients: int = 100
    dim: int = 1000
    processes: int = 4
    sessions: int = 1
    seed: int = 0
    threat: str = "malicious"
    graph: str = "harary"
    modulus: int = 1 << 32
    #: the fraction of dropouts the parameters must tolerate (``NetSessionSpec.dropout``)
    dropout_rate: float = 0.0
    stage_seconds: float = 60.0
    join_seconds: float = 60.0
    kill: int = 0
    #: the round during which processes are killed; ``None``: a random round per session
    kill_at: int | None = 2
    stall: int = 0
    stall_at: int = 2
    compare: bool = False
    keys: str | None = None
    #: the whole experiment's time limit (processes are killed past it)
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        if self.processes < 1 or self.processes > self.clients:
            raise ValueError("processes must be in [1, clients]")
        if self.sessions < 1:
            raise ValueError("sessions must be >= 1")
        if not 0 <= self.kill <= self.processes:
            raise ValueError("kill must be in [0, processes]")
        if not 0 <= self.stall <= self.clients:
            raise ValueError("stall must be in [0, clients]")
        if self.kill_at not in (None, 0, 1, 2, 3, 4) or self.stall_at not in (0, 1, 2, 3, 4):
            raise ValueError("kill_at and stall_at are rounds 0..4")
        if self.stage_seconds <= 0 or self.join_seconds <= 0 or self.timeout <= 0:
            raise ValueError("deadlines must be positive")

    def spec(self) -> NetSessionSpec:
        return NetSessionSpec(self.clients, dim=self.dim, modulus=self.modulus,
                              threat=self.threat, graph=self.graph, dropout=self.dropout_rate)


def expected_sum(seed: int, clients: list[int], dim: int, modulus: int) -> np.ndarray:
    """The sum mod ``modulus`` of the seeded inputs of ``clients`` (exact, any modulus)."""
    if modulus <= 1 << 32:
        acc = np.zeros(dim, dtype=np.uint64)
        for c in clients:
            acc = (acc + demo_input(seed, c, dim, modulus)) % np.uint64(modulus)
        return acc
    acc_o = np.zeros(dim, dtype=object)
    for c in clients:
        acc_o = (acc_o + demo_input(seed, c, dim, modulus).astype(object)) % modulus
    return acc_o.astype(np.uint64)


def release_digest(vector: np.ndarray) -> str:
    """SHA-256 of a release as little-endian uint64 (to compare releases compactly)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(vector, dtype="<u8").tobytes()).hexdigest()


def fedhh_command(*args: str) -> list[str]:
    """``python -m protocol.cli ARGS`` with this interpreter."""
    return [sys.executable, "-m", "protocol.cli", *args]


@contextlib.contextmanager
def key_directory(given: Any, make: Callable[[str], None]) -> Iterator[str]:
    """The directory of an experiment's keys: ``given`` when it is not ``None``, else
    a fresh temporary directory that ``make`` fills and that is removed afterwards."""
    if given is not None:
        yield str(given)
        return
    keys = tempfile.mkdtemp(prefix="fedhh-keys-")
    try:
        make(keys)
        yield keys
    finally:
        shutil.rmtree(keys, ignore_errors=True)


def options_report(o: Any) -> dict[str, Any]:
    """An experiment's options for its report (the key directory left out)."""
    return {k: v for k, v in asdict(o).items() if k != "keys"}


def _spec_args(o: LoopbackOptions) -> list[str]:
    return ["--clients", str(o.clients), "--dim", str(o.dim), "--modulus", str(o.modulus),
            "--threat", o.threat, "--graph", o.graph, "--dropout-rate", str(o.dropout_rate)]


async def read_json_lines(stream: asyncio.StreamReader, sink: asyncio.Queue,
                           other: list[str] | None = None) -> None:
    """JSON objects of ``stream``'s lines into ``sink`` (``None`` at the end); other
    lines into ``other`` (the last 50)."""
    while True:
        line = await stream.readline()
        if not line:
            await sink.put(None)
            return
        try:
            await sink.put(json.loads(line))
        except ValueError:
            if other is not None:
                other.append(line.decode(errors="replace").rstrip())
                del other[:-50]


async def stop_process(proc: asyncio.subprocess.Process, grace: float) -> bool:
    """Wait ``grace`` seconds, then SIGKILL; True if it had to be killed."""
    try:
        await wait_for(proc.wait(), grace)
        return False
    except asyncio.TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return True


async def next_before(events: asyncio.Queue, deadline: float, limit: float
                      ) -> dict[str, Any] | None:
    """The next event, waiting at most until ``deadline`` (``time.monotonic()``).

    Raises:
        RuntimeError: the experiment passed its time limit of ``limit`` seconds.
    """
    try:
        return await wait_for(events.get(), max(0.1, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        raise RuntimeError(f"the experiment passed its time limit of {limit:g} s") from None


async def _last_json(proc: asyncio.subprocess.Process) -> dict[str, Any] | None:
    """A finished process's last stdout line as a JSON object (``None``: there is none)."""
    lines = (await proc.stdout.read()).decode(errors="replace").strip().splitlines()
    with contextlib.suppress(ValueError, IndexError):
        out = json.loads(lines[-1])
        if isinstance(out, dict):
            return out
    return None


async def _failure(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    """A process that printed no result: its exit status and the end of its stderr."""
    return {"exit": proc.returncode,
            "stderr": (await proc.stderr.read()).decode(errors="replace")[-600:]}


async def client_summaries(procs: list[asyncio.subprocess.Process], killed: Any,
                           grace: float) -> tuple[list[dict[str, Any]], int]:
    """Wait for each client process (killed past ``grace`` seconds) and read its JSON
    summary (its last line, ``{"event": "clients", ...}``; for a process that printed
    none, its exit status and the end of its stderr); processes in ``killed`` are
    skipped. Returns the summaries and how many had to be killed."""
    summaries: list[dict[str, Any]] = []
    stuck = 0
    for i, p in enumerate(procs):
        stuck += await stop_process(p, grace)
        if i in killed:
            continue
        summary = await _last_json(p)
        if summary is None or summary.get("event") != "clients":
            summary = {"process": i, **await _failure(p)}
        summaries.append(summary)
    return summaries, stuck


async def kill_all(procs: list[asyncio.subprocess.Process]) -> int:
    """SIGKILL every process still running and reap it; how many are still running
    afterwards (0 unless the system refused)."""
    for p in procs:
        if p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            with contextlib.suppress(Exception):
                await wait_for(p.wait(), 10)
    return sum(p.returncode is None for p in procs)


async def _loopback(o: LoopbackOptions, keys: str, say: Callable[[str], None]
                    ) -> dict[str, Any]:
    rng = np.random.default_rng([o.seed, 0x6E6574])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    server = await asyncio.create_subprocess_exec(
        *fedhh_command("serve", "--transport", "secagg", "--keys", os.path.join(keys, "server"),
                       "--port", "0",
                  "--sessions", str(o.sessions), "--stage-seconds", str(o.stage_seconds),
                  "--join-seconds", str(o.join_seconds), *_spec_args(o)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    events: asyncio.Queue = asyncio.Queue()
    reader = asyncio.create_task(read_json_lines(server.stdout, events))
    everything: list[asyncio.subprocess.Process] = [server]
    sessions: list[dict[str, Any]] = []
    killed_late = 0
    deadline = time.monotonic() + o.timeout

    async def next_event() -> dict[str, Any] | None:
        return await next_before(events, deadline, o.timeout)

    try:
        ev = await next_event()
        if not ev or ev.get("event") != "listening":
            err = (await server.stderr.read()).decode(errors="replace")[-2000:]
            raise RuntimeError(f"the server did not start: {err or ev}")
        port = int(ev["port"])
        ranges = np.array_split(np.arange(o.clients), o.processes)
        for s in range(o.sessions):
            ev = await next_event()
            while ev is not None and not (ev.get("event") == "session"):
                ev = await next_event()
            if ev is None:
                raise RuntimeError("the server stopped before the session")
            stall = sorted(int(c) for c in rng.choice(o.clients, size=o.stall, replace=False))
            to_kill = set(int(p) for p in rng.choice(o.processes, size=o.kill, replace=False))
            kill_at = int(rng.integers(0, 5)) if o.kill_at is None else o.kill_at
            procs = []
            t0 = time.perf_counter()
            for i, ids in enumerate(ranges):
                args = ["client", "--transport", "secagg", "--keys",
                        os.path.join(keys, "clients"),
                        "--connect", f"127.0.0.1:{port}", "--ids", f"{ids[0]}:{ids[-1] + 1}",
                        "--seed", str(o.seed), "--wait-seconds",
                        str(o.join_seconds + 5 * o.stage_seconds), *_spec_args(o)]
                mine = [c for c in stall if ids[0] <= c <= ids[-1]]
                if mine:
                    args += ["--stall", ",".join(map(str, mine)), "--stall-at", str(o.stall_at)]
                p = await asyncio.create_subprocess_exec(
                    *fedhh_command(*args), stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, env=env)
                procs.append(p)
                everything.append(p)
            killed: list[int] = []

            def kill_now() -> None:
                for i in sorted(to_kill):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(procs[i].pid, signal.SIGKILL)
                    killed.append(i)
                to_kill.clear()

            if kill_at == 0:
                kill_now()
            report = None
            while report is None:
                ev = await next_event()
                if ev is None:
                    raise RuntimeError("the server stopped in the middle of a session")
                kind = ev.get("event")
                if kind == "stage" and to_kill and ev.get("round") == kill_at - 1:
                    kill_now()
                elif kind == "report":
                    report = ev
            wall = time.perf_counter() - t0
            summaries, stuck = await client_summaries(procs, killed, o.stage_seconds + 10)
            killed_late += stuck
            sessions.append(_session_report(o, report, summaries, killed, stall, wall))
            sessions[-1]["kill_at"] = kill_at if killed else None
            say(f"session {s + 1}/{o.sessions}: {report['status']}"
                f"{' (' + report['reason'] + ')' if report['reason'] else ''}, "
                f"{len(report['sets'].get('U3', []))} of {o.clients} in the sum, "
                f"exact: {sessions[-1]['exact']}, {wall:.1f} s")
        server_killed = await stop_process(server, 30)
    finally:
        left = await kill_all(everything)
        reader.cancel()
    return {"sessions": sessions, "server_exit": server.returncode,
            "server_killed": server_killed, "clients_killed_at_deadline": killed_late,
            "left_behind": left}


def _session_report(o: LoopbackOptions, report: dict[str, Any], summaries: list[dict[str, Any]],
                    killed: list[int], stall: list[int], wall: float) -> dict[str, Any]:
    u3 = report["sets"].get("U3", [])
    exact = digest = None
    if report["status"] == "completed":
        got = np.asarray(report["result"], dtype=np.uint64)
        exact = bool(np.array_equal(got, expected_sum(o.seed, u3, o.dim, o.modulus)))
        digest = release_digest(got)
    status: dict[str, int] = {}
    for sm in summaries:
        for k, v in sm.get("status", {}).items():
            status[k] = status.get(k, 0) + v
    client_cpu = sum(sm.get("process_cpu_seconds", 0.0) for sm in summaries)
    return {
        "status": report["status"], "reason": report["reason"],
        "n": report["n"], "degree": report["degree"], "threshold": report["threshold"],
        "threat": report["threat"], "joined": report["joined"], "in_sum": len(u3),
        "exact": exact, "release_sha256": digest, "wall_seconds": wall,
        "server_cpu_seconds": report["server_cpu_seconds"],
        "client_processes_cpu_seconds": client_cpu,
        "stages": [{k: s[k] for k in ("name", "expected", "received", "seconds", "bytes_up",
                                      "bytes_down")} for s in report["stages"]],
        "bytes_up_per_client": report["bytes_up"] / max(1, report["joined"]),
        "bytes_down_per_client": report["bytes_down"] / max(1, report["joined"]),
        "server_peak_rss_mb": report.get("peak_rss_mb"),
        "killed_processes": killed, "stalled_clients": stall,
        "client_outcomes": status,
        "client_errors": [sm for sm in summaries if "exit" in sm],
        "refused": report["refused"][:20],
    }


def _simulate(o: LoopbackOptions) -> dict[str, Any]:
    from protocol.core.randomness import insecure_deterministic_randomness
    from protocol.core.secagg_engine import run_secagg
    from secagg.crypto import FRESH_NONCE_BYTES

    spec = o.spec()
    rand = insecure_deterministic_randomness(o.seed, "net-compare")
    config = spec.config(rand.token_bytes(FRESH_NONCE_BYTES))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    run = run_secagg(config, lambda c: demo_input(o.seed, c, o.dim, o.modulus), rand=rand)
    return {"status": "completed" if run.completed else "aborted",
            "result": None if run.result is None else run.result,
            "wall_seconds": time.perf_counter() - wall0,
            "cpu_seconds": time.process_time() - cpu0,
            "bytes_up_per_client": float(run.bytes_up.mean()),
            "bytes_down_per_client": float(run.bytes_down.mean())}


def run_loopback(o: LoopbackOptions, say: Callable[[str], None] | None = None
                 ) -> dict[str, Any]:
    """Run the experiment; returns a JSON-ready report (see the module docstring).

    Raises:
        ValueError: bad options.
        RuntimeError: the server process failed to start or died mid-session.
    """
    say = say or (lambda _line: None)
    spec = o.spec()
    params = spec.params()
    with key_directory(o.keys, lambda d: tls.make_party_keys(d, o.clients)) as keys:
        say(f"loopback: {o.clients} clients in {o.processes} processes, {o.sessions} "
            f"session(s), {o.threat}, k = {params.degree}, t = {params.threshold}")
        out = asyncio.run(_loopback(o, keys, say))
    out = {"options": options_report(o), **out}
    out["wrong_results"] = sum(s["exact"] is False for s in out["sessions"])
    if o.compare:
        sim = _simulate(o)
        first = out["sessions"][0]
        sim_digest = None if sim["result"] is None else release_digest(sim["result"])
        # comparable when the network session lost nobody (the simulation has no dropouts)
        sim_equal = (sim_digest == first["release_sha256"]
                     if first["in_sum"] == o.clients and sim_digest else None)
        net_cpu = first["server_cpu_seconds"] + first["client_processes_cpu_seconds"]
        out["simulation"] = {
            "status": sim["status"], "release_sha256": sim_digest, "release_equal": sim_equal,
            "wall_seconds": sim["wall_seconds"], "cpu_seconds": sim["cpu_seconds"],
            "bytes_up_per_client": sim["bytes_up_per_client"],
            "bytes_down_per_client": sim["bytes_down_per_client"],
            "wall_ratio": first["wall_seconds"] / max(sim["wall_seconds"], 1e-9),
            "cpu_ratio": net_cpu / max(sim["cpu_seconds"], 1e-9),
        }
    return out


@dataclass(frozen=True)
class _RoundOptions:
    """What a one-round loopback experiment takes (the shuffler's and the committee's)."""

    clients: int = 100
    processes: int = 4
    seed: int = 0
    candidates: int = 20
    theta: int = 3
    membership_only: bool = False
    stage_seconds: float = 60.0
    kill: int = 0
    keys: str | None = None
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        if self.processes < 1 or self.processes > self.clients:
            raise ValueError("processes must be in [1, clients]")
        if not 0 <= self.kill <= self.processes:
            raise ValueError("kill must be in [0, processes]")
        if self.stage_seconds <= 0 or self.timeout <= 0:
            raise ValueError("deadlines must be positive")

    def vote_args(self) -> list[str]:
        """The vote round's options, as every process of the round is given them."""
        return (["--clients", str(self.clients), "--candidates", str(self.candidates),
                 "--threshold", str(self.theta)]
                + (["--membership-only"] if self.membership_only else []))


@dataclass(frozen=True)
class ShuffleLoopbackOptions(_RoundOptions):
    """One shuffled vote round on loopback: ``fedhh serve --transport shuffler``,
    ``fedhh analyze`` and ``processes`` ``fedhh client --transport shuffler`` processes
    (each client sends its seeded vote, :func:`~protocol.core.net.shuffle.demo_vote`).
    ``kill`` client processes get SIGKILL as soon as they are started."""

    min_batch: int = 1
    batch_seconds: float = 60.0
    stage_seconds: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_seconds <= 0:
            raise ValueError("deadlines must be positive")
        self.round()

    def round(self):  # noqa: ANN201
        from protocol.core.net.shuffle import ShuffleRound

        return ShuffleRound(self.clients, candidates=self.candidates, theta=self.theta,
                            reveal_counts=not self.membership_only, min_batch=self.min_batch)

    def round_args(self) -> list[str]:
        return [*self.vote_args(), "--min-batch", str(self.min_batch)]


async def _one_round(o: Any, what: str, server_args: list[str],
                     peers: list[Callable[[int], list[str]]],
                     client_args: Callable[[int, np.ndarray], list[str]]
                     ) -> dict[str, Any]:
    """One round with real processes: the server (``fedhh SERVER_ARGS --port 0``, JSON
    events on stdout), then ``peers`` (commands given the server's port: analyzer,
    helpers; started in order), then ``o.processes`` client processes
    (``client_args(port, ids)``), ``o.kill`` of them SIGKILLed at start. Waits for the
    server's ``report`` event and every process; nothing is left running."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    wall0 = time.perf_counter()
    server = await asyncio.create_subprocess_exec(
        *fedhh_command(*server_args, "--port", "0"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    events: asyncio.Queue = asyncio.Queue()
    reader = asyncio.create_task(read_json_lines(server.stdout, events))
    everything: list[asyncio.subprocess.Process] = [server]
    deadline = time.monotonic() + o.timeout
    rng = np.random.default_rng([o.seed, 0x726F756E64])
    to_kill = set(int(p) for p in rng.choice(o.processes, size=o.kill, replace=False))
    report: dict[str, Any] | None = None
    peer_out: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    left = 0
    try:
        ev = await next_before(events, deadline, o.timeout)
        if not ev or ev.get("event") != "listening":
            err = (await server.stderr.read()).decode(errors="replace")[-2000:]
            raise RuntimeError(f"the {what} did not start: {err or ev}")
        port = int(ev["port"])
        peer_procs = []
        for args in peers:
            peer = await asyncio.create_subprocess_exec(
                *fedhh_command(*args(port)), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env)
            peer_procs.append(peer)
            everything.append(peer)
        procs = []
        for i, ids in enumerate(np.array_split(np.arange(o.clients), o.processes)):
            p = await asyncio.create_subprocess_exec(
                *fedhh_command(*client_args(port, ids)), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env)
            procs.append(p)
            everything.append(p)
            if i in to_kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
        while report is None:
            ev = await next_before(events, deadline, o.timeout)
            if ev is None:
                raise RuntimeError(f"the {what} stopped before its report")
            if ev.get("event") == "report":
                report = ev
        await stop_process(server, 30)
        for peer in peer_procs:
            await stop_process(peer, o.stage_seconds + 10)
            peer_out.append(await _last_json(peer) or {"status": "failed",
                                                        **await _failure(peer)})
        summaries, _ = await client_summaries(procs, to_kill, o.stage_seconds + 10)
    finally:
        left = await kill_all(everything)
        reader.cancel()
    assert report is not None
    return {"server": report, "peers": peer_out, "clients": summaries,
            "killed_processes": sorted(to_kill), "wall_seconds": time.perf_counter() - wall0,
            "left_behind": left}


async def _shuffle_loopback(o: ShuffleLoopbackOptions, keys: str, say: Callable[[str], None]
                            ) -> dict[str, Any]:
    wait = str(o.batch_seconds + 2 * o.stage_seconds + 30)
    run = await _one_round(
        o, "shuffler",
        ["serve", "--transport", "shuffler", "--keys", keys, "--batch-seconds",
         str(o.batch_seconds), "--stage-seconds", str(o.stage_seconds), *o.round_args()],
        [lambda port: ["analyze", "--keys", keys, "--connect", f"127.0.0.1:{port}",
                       "--wait-seconds", wait, *o.round_args()]],
        lambda port, ids: ["client", "--transport", "shuffler", "--keys", keys, "--connect",
                           f"127.0.0.1:{port}", "--ids", f"{ids[0]}:{ids[-1] + 1}",
                           "--seed", str(o.seed), "--wait-seconds", wait, *o.round_args()])
    report, analysis = run.pop("server"), run.pop("peers")[0]
    say(f"batch: {report['status']}{' (' + report['reason'] + ')' if report['reason'] else ''}"
        f", {len(report['accepted'])} of {o.clients} envelopes accepted")
    exact = None
    if report["status"] == "completed" and analysis.get("status") == "completed":
        want = expected_release(o.round(), o.seed, sorted(report["accepted"]))
        exact = analysis["passed"] == want["passed"] and analysis["release"] == want["release"]
    return {"shuffler": report, "analyzer": analysis, **run, "exact": exact}


def run_shuffle_loopback(o: ShuffleLoopbackOptions, say: Callable[[str], None] | None = None
                         ) -> dict[str, Any]:
    """Run the round; a JSON-ready report: the shuffler's report (who sent, the
    operator receipt), the analyzer's result, the clients' summaries and ``exact``
    (the analyzer's release is the threshold rule over the seeded votes of exactly the
    accepted clients).

    Raises:
        ValueError: bad options.
        RuntimeError: the shuffler failed to start or died.
    """
    from protocol.core.net.shuffle import make_shuffle_keys

    say = say or (lambda _line: None)

    def make(d: str) -> None:
        tls.make_keys(d, 1)
        make_shuffle_keys(d)

    with key_directory(o.keys, make) as keys:
        say(f"loopback shuffler: {o.clients} clients in {o.processes} processes, "
            f"{o.candidates} candidates, theta {o.theta}")
        out = asyncio.run(_shuffle_loopback(o, keys, say))
    out = {"options": options_report(o), **out}
    out["wrong_results"] = int(out["exact"] is False)
    return out


@dataclass(frozen=True)
class ThresholdLoopbackOptions(_RoundOptions):
    """One committee round on loopback: ``fedhh serve --transport threshold``, the two
    ``fedhh helper`` processes and ``processes`` ``fedhh client --transport threshold``
    processes (seeded votes). ``kill`` client processes get SIGKILL at start."""

    threat: str = "malicious"
    graph: str = "harary"
    dropout_rate: float = 0.0
    join_seconds: float = 60.0
    #: ``(member, what)``: one member deviates (``threshold_net.FAULTS``)
    fault: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.join_seconds <= 0:
            raise ValueError("deadlines must be positive")
        self.round().session()

    def round(self):  # noqa: ANN201
        from protocol.core.net.shuffle import ShuffleRound
        from protocol.core.net.threshold_net import ThresholdRound

        return ThresholdRound(ShuffleRound(self.clients, candidates=self.candidates,
                                           theta=self.theta,
                                           reveal_counts=not self.membership_only),
                              threat=self.threat, graph=self.graph, dropout=self.dropout_rate)

    def round_args(self) -> list[str]:
        return [*self.vote_args(), "--threat", self.threat, "--graph", self.graph,
                "--dropout-rate", str(self.dropout_rate)]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _threshold_loopback(o: ThresholdLoopbackOptions, keys: str,
                              say: Callable[[str], None]) -> dict[str, Any]:
    link = f"127.0.0.1:{_free_port()}"
    wait = str(o.join_seconds + 5 * o.stage_seconds)

    def fault_of(member: str) -> list[str]:
        return ["--fault", o.fault[1]] if o.fault is not None and o.fault[0] == member else []

    def helper(index: int) -> Callable[[int], list[str]]:
        return lambda port: ["helper", "--index", str(index), "--keys",
                             os.path.join(keys, f"helper{index}"), "--connect",
                             f"127.0.0.1:{port}", "--link", link, "--wait-seconds", wait,
                             *o.round_args(), *fault_of(f"helper{index}")]

    run = await _one_round(
        o, "committee server",
        ["serve", "--transport", "threshold", "--keys", os.path.join(keys, "server"),
         "--stage-seconds",
         str(o.stage_seconds), "--join-seconds", str(o.join_seconds), *o.round_args(),
         *fault_of("server")],
        [helper(2), helper(1)],  # helper 2 listens on the link, helper 1 connects
        lambda port, ids: ["client", "--transport", "threshold", "--keys",
                           os.path.join(keys, "clients"), "--connect",
                           f"127.0.0.1:{port}", "--ids", f"{ids[0]}:{ids[-1] + 1}",
                           "--seed", str(o.seed), "--wait-seconds", wait, *o.round_args()])
    report, helpers = run["server"], run.pop("peers")
    say(f"round: {report['status']}{' (' + report['reason'] + ')' if report['reason'] else ''}")
    exact = None
    if report["status"] == "completed":
        want = expected_release(o.round().vote, o.seed, report["in_sum"])
        exact = (report["passed"] == want["passed"] and report["release"] == want["release"]
                 and all(h.get("passed") == want["passed"]
                         and h.get("release") == want["release"] for h in helpers))
    return {**run, "helpers": helpers, "exact": exact}


def run_threshold_loopback(o: ThresholdLoopbackOptions,
                           say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the committee round; a JSON-ready report: the server's (the release, the
    session's stages), both helpers' outcomes, the clients' summaries and ``exact``
    (server and helpers opened exactly the threshold rule over the seeded votes of the
    clients in the sum).

    Raises:
        ValueError: bad options.
        RuntimeError: the server failed to start, died, or the time limit passed.
    """
    say = say or (lambda _line: None)

    def make(d: str) -> None:
        tls.make_party_keys(d, o.clients, committee=True)

    with key_directory(o.keys, make) as keys:
        rnd = o.round()
        params = rnd.session().params()
        field = "verified committee over F_p" if rnd.verified else f"ring 2^{rnd.k}"
        say(f"loopback committee: {o.clients} clients in {o.processes} processes and 2 "
            f"helpers, {o.threat}, k = {params.degree}, t = {params.threshold}, {field}, "
            f"theta {o.theta}"
            + (f"; fault: {o.fault[0]} {o.fault[1]}" if o.fault else ""))
        out = asyncio.run(_threshold_loopback(o, keys, say))
    out = {"options": options_report(o), **out}
    out["wrong_results"] = int(out["exact"] is False)
    return out
