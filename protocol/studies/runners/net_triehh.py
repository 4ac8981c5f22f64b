"""A whole TrieHH run with real processes on loopback (``fedhh net run --job triehh``).

:func:`run_job_loopback` makes keys for the population, starts ``fedhh triehh
--transport secagg --network 127.0.0.1:0`` (the server of the job, which also writes
what it learned per round with ``--server-view``) and ``processes`` ``fedhh client --job
triehh`` processes, each holding the seeded population's words of a contiguous range
of users (:class:`mechanisms.triehh.ClientVoter`). It follows the server's JSON events
on stderr, kills client processes when asked, and reports:

* the TrieHH summary the server printed, with its ``network`` block (per round: the
  outcome, sample, who is in the sum, ``k``, ``t``, latency per stage, bytes);
* ``rounds_exact``: for every completed round, whether its sum is exactly the vote
  count of the clients in it, each vote recomputed here from the seeded population;
* with ``compare``, the same TrieHH in this process over the in-process secure
  aggregation transport (the same seed): its heavy hitters, wall time, and whether
  the releases are the same (they must be when no client was lost).

Every process is waited for with a deadline and killed past it (``left_behind``
counts the ones still running at the end: 0 unless the system refused a kill).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from mechanisms.triehh import ClientVoter
from protocol.core.net import tls
from protocol.core.net.launcher import fedhh_command, read_json_lines, stop_process
from protocol.studies.runners import triehh

__all__ = ["JobLoopbackOptions", "run_job_loopback"]


@dataclass(frozen=True)
class JobLoopbackOptions:
    """A whole TrieHH run on loopback: ``fedhh triehh --network`` as the server and
    ``processes`` ``fedhh client --job triehh`` processes holding the population's words.

    ``kill`` client processes get SIGKILL when round ``kill_round``'s session starts;
    their clients are dropouts from then on. ``compare`` also runs the same TrieHH in
    this process over the in-process secure aggregation transport (same seed) and
    reports whether the releases are the same.
    """

    dataset: str = "en"
    users: int | None = 1000
    processes: int = 4
    seed: int = 0
    threat: str = "malicious"
    graph: str = "harary"
    dropout_rate: float = 0.0
    epsilon: float = 4.0
    max_length: int = 10
    unit_size: int = 1
    theta: int | None = None
    gamma: float | None = None
    alphabet: str | None = None
    stage_seconds: float = 60.0
    join_seconds: float = 60.0
    kill: int = 0
    kill_round: int = 2
    compare: bool = False
    keys: str | None = None
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be >= 1")
        if not 0 <= self.kill <= self.processes:
            raise ValueError("kill must be in [0, processes]")
        if not 1 <= self.kill_round <= self.max_length:
            raise ValueError("kill_round must be a TrieHH round, 1..L")
        if self.stage_seconds <= 0 or self.join_seconds <= 0 or self.timeout <= 0:
            raise ValueError("deadlines must be positive")

    def triehh_options(self):  # noqa: ANN201
        return triehh.TrieHHOptions(dataset=self.dataset, users=self.users, epsilon=self.epsilon,
                             max_length=self.max_length, unit_size=self.unit_size,
                             seed=self.seed, theta=self.theta, gamma=self.gamma,
                             alphabet=self.alphabet, transport="secagg")

    def data_args(self) -> list[str]:
        args = ["--dataset", self.dataset, "--epsilon", repr(self.epsilon),
                "--max-length", str(self.max_length), "--unit-size", str(self.unit_size),
                "--seed", str(self.seed)]
        for flag, value in (("--users", self.users), ("--theta", self.theta),
                            ("--gamma", self.gamma), ("--alphabet", self.alphabet)):
            if value is not None:
                args += [flag, str(value)]
        return args


async def _job_loopback(o: JobLoopbackOptions, keys: str, n: int, view: str,
                        say: Callable[[str], None]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    wall0 = time.perf_counter()
    server = await asyncio.create_subprocess_exec(
        *fedhh_command("triehh", "--transport", "secagg", "--network", "127.0.0.1:0",
                  "--keys", keys, "--json", "--quiet", "--threat", o.threat,
                  "--secagg-graph", o.graph, "--dropout", str(o.dropout_rate),
                  "--stage-seconds", str(o.stage_seconds),
                  "--join-seconds", str(o.join_seconds), "--server-view", view,
                  *o.data_args()),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    events: asyncio.Queue = asyncio.Queue()
    stderr_lines: list[str] = []
    reader = asyncio.create_task(read_json_lines(server.stderr, events, stderr_lines))
    result_text = asyncio.create_task(server.stdout.read())
    everything: list[asyncio.subprocess.Process] = [server]
    deadline = time.monotonic() + o.timeout
    rng = np.random.default_rng([o.seed, 0x6A6F62])
    to_kill = set(int(p) for p in rng.choice(o.processes, size=o.kill, replace=False))
    killed: list[int] = []
    procs: list[asyncio.subprocess.Process] = []

    async def next_event() -> dict[str, Any] | None:
        return await asyncio.wait_for(events.get(), max(0.1, deadline - time.monotonic()))

    try:
        ev = await next_event()
        while ev is not None and ev.get("event") != "listening":
            ev = await next_event()
        if ev is None:
            await server.wait()
            raise RuntimeError("the TrieHH server did not start: "
                               + "\n".join(stderr_lines)[-1500:])
        port = int(ev["port"])
        ranges = [r for r in np.array_split(np.arange(n), o.processes) if r.size]
        for ids in ranges:
            args = ["client", "--job", "triehh", "--keys", keys,
                    "--connect", f"127.0.0.1:{port}", "--ids", f"{ids[0]}:{ids[-1] + 1}",
                    "--threat", o.threat, "--graph", o.graph,
                    "--dropout-rate", str(o.dropout_rate), "--wait-seconds",
                    str(o.join_seconds + 5 * o.stage_seconds), *o.data_args()]
            p = await asyncio.create_subprocess_exec(
                *fedhh_command(*args), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env)
            procs.append(p)
            everything.append(p)
        while True:
            ev = await next_event()
            if ev is None:
                break
            if (ev.get("event") == "session" and ev.get("round") == o.kill_round
                    and to_kill):
                for i in sorted(to_kill):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(procs[i].pid, signal.SIGKILL)
                    killed.append(i)
                to_kill.clear()
            elif ev.get("event") == "done":
                say(f"round {ev.get('round')}: {ev.get('status')}"
                    f"{' (' + ev['reason'] + ')' if ev.get('reason') else ''}")
        stuck = await stop_process(server, 30)
        text = (await result_text).decode(errors="replace")
        wall = time.perf_counter() - wall0
        summaries = []
        for i, p in enumerate(procs):
            stuck += await stop_process(p, o.stage_seconds + 10)
            if i in killed:
                continue
            out = (await p.stdout.read()).decode(errors="replace").strip().splitlines()
            summary = None
            with contextlib.suppress(ValueError, IndexError):
                summary = json.loads(out[-1])
            if not isinstance(summary, dict) or summary.get("event") != "clients":
                err = (await p.stderr.read()).decode(errors="replace")[-600:]
                summaries.append({"process": i, "exit": p.returncode, "stderr": err})
            else:
                summaries.append(summary)
    finally:
        for p in everything:
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(p.wait(), 10)
        reader.cancel()
    result = None
    with contextlib.suppress(ValueError):
        result = json.loads(text)
    left = sum(p.returncode is None for p in everything)
    return {"result": result, "server_exit": server.returncode,
            "server_error": None if result is not None else
            "\n".join(stderr_lines)[-1500:] or text[-1500:],
            "wall_seconds": wall, "killed_processes": killed, "client_processes": summaries,
            "killed_at_deadline": stuck, "left_behind": left}


def _heavy_hitters(out: dict[str, Any] | None) -> list[str] | None:
    if not out:
        return None
    return sorted(h["word"] for h in out["heavy_hitters"])


def _check_rounds(prep: Any, view: list[dict[str, Any]]) -> list[bool | None]:
    """For each round the server completed: is its sum exactly the vote count of the
    clients in the sum (each vote recomputed here from the seeded population, as the
    client computed it)? ``None`` for an aborted round."""
    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    exact: list[bool | None] = []
    for r in view:
        if r["sum"] is None:
            exact.append(None)
            continue
        votes = voter.votes(r["in_sum"], r["round"], r["candidates"])
        want = np.bincount(votes[votes >= 0], minlength=len(r["candidates"]))
        exact.append(bool(np.array_equal(want, np.asarray(r["sum"], dtype=np.int64))))
    return exact


def run_job_loopback(o: JobLoopbackOptions, say: Callable[[str], None] | None = None
                     ) -> dict[str, Any]:
    """Run a whole TrieHH on loopback with real processes; a JSON-ready report: the
    TrieHH summary the server printed (with its ``network`` block: per round outcome,
    stages, bytes), the client processes' summaries, and with ``compare`` the
    in-process run's heavy hitters, wall time and whether they are the same.

    Raises:
        ValueError: bad options.
        protocol.studies.errors.StudyError: the population cannot be prepared.
        RuntimeError: the server process failed to start.
    """
    say = say or (lambda _line: None)
    prep, _ = triehh.prepare(o.triehh_options())
    n = prep.n
    made = o.keys is None
    keys = tempfile.mkdtemp(prefix="fedhh-keys-") if made else str(o.keys)
    scratch = tempfile.mkdtemp(prefix="fedhh-job-")
    view_path = os.path.join(scratch, "server-view.json")
    try:
        if made:
            tls.make_keys(keys, n)
        say(f"loopback TrieHH: {n} clients in {o.processes} processes, {o.threat}, "
            f"theta {prep.config.theta}, L {prep.config.max_levels}")
        out = asyncio.run(_job_loopback(o, keys, n, view_path, say))
        view = None
        with contextlib.suppress(OSError, ValueError):
            with open(view_path, encoding="utf-8") as f:
                view = json.load(f)
    finally:
        if made:
            shutil.rmtree(keys, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    out = {"options": {k: v for k, v in asdict(o).items() if k != "keys"}, "n": n, **out}
    out["rounds_exact"] = None if view is None else _check_rounds(prep, view)
    out["wrong_results"] = sum(e is False for e in out["rounds_exact"] or ())
    if o.compare:
        from protocol.core.transports.secagg_transport import SecAggTransport

        transport = SecAggTransport(graph=o.graph, threat=o.threat, simulate=True,
                                    workers=1)
        wall0 = time.perf_counter()
        sim = triehh.run(o.triehh_options(), transport)
        net_hh = _heavy_hitters(out["result"])
        out["simulation"] = {
            "heavy_hitters": _heavy_hitters(sim),
            "released_per_round": [r["released"] for r in sim["rounds"]],
            "wall_seconds": time.perf_counter() - wall0,
            "release_equal": None if net_hh is None else (
                net_hh == _heavy_hitters(sim) and
                [r["released"] for r in out["result"]["rounds"]]
                == [r["released"] for r in sim["rounds"]]),
        }
        out["simulation"]["wall_ratio"] = out["wall_seconds"] / max(
            out["simulation"]["wall_seconds"], 1e-9)
        # the mechanism's run alone (rounds, not process start and joining)
        out["simulation"]["run_seconds"] = sim["seconds"]["run"]
        out["simulation"]["run_ratio"] = None if out["result"] is None else \
            out["result"]["seconds"]["run"] / max(sim["seconds"]["run"], 1e-9)
    return out
