"""Whole mechanism runs with real processes on loopback (``fedhh net run --job triehh|ldp``).

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

:func:`run_ldp_loopback` does the same for one frequency-oracle round (``fedhh ldp
--network`` and ``fedhh client --job ldp``): each device randomises its own value, with
noise seeded by ``(seed, user, round)`` so that ``rounds_exact`` can recompute every
device's support vector (a deployment draws it from the OS), and ``compare`` runs the
oracle in this process over the in-process transport (its own noise) for the errors
side by side.

Every process is waited for with a deadline and killed past it (``left_behind``
counts the ones still running at the end: 0 unless the system refused a kill).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mechanisms.triehh import ClientVoter
from protocol.core.net import tls
from protocol.core.net.launcher import (
    client_summaries, fedhh_command, key_directory, kill_all, next_before, options_report,
    read_json_lines, stop_process,
)
from protocol.studies.runners import ldp, triehh

__all__ = ["JobLoopbackOptions", "run_job_loopback", "LDPLoopbackOptions", "run_ldp_loopback"]


@dataclass(frozen=True)
class _ProcessOptions:
    """What every loopback job experiment takes: processes, faults, deadlines, the
    threat model, graph and dropout tolerance of its sessions."""

    processes: int = 4
    seed: int = 0
    threat: str = "malicious"
    graph: str = "harary"
    dropout_rate: float = 0.0
    stage_seconds: float = 60.0
    join_seconds: float = 60.0
    kill: int = 0
    compare: bool = False
    keys: str | None = None
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be >= 1")
        if not 0 <= self.kill <= self.processes:
            raise ValueError("kill must be in [0, processes]")
        if self.stage_seconds <= 0 or self.join_seconds <= 0 or self.timeout <= 0:
            raise ValueError("deadlines must be positive")


@dataclass(frozen=True)
class JobLoopbackOptions(_ProcessOptions):
    """A whole TrieHH run on loopback: ``fedhh triehh --network`` as the server and
    ``processes`` ``fedhh client --job triehh`` processes holding the population's words.

    ``kill`` client processes get SIGKILL when round ``kill_round``'s session starts;
    their clients are dropouts from then on. ``compare`` also runs the same TrieHH in
    this process over the in-process secure aggregation transport (same seed) and
    reports whether the releases are the same.
    """

    dataset: str = "en"
    users: int | None = 1000
    epsilon: float = 4.0
    max_length: int = 10
    unit_size: int = 1
    theta: int | None = None
    gamma: float | None = None
    alphabet: str | None = None
    kill_round: int = 2
    #: ``secagg`` (the default) or ``threshold``: a committee job, with two ``fedhh helper
    #: --job triehh`` processes (:mod:`protocol.core.net.committee_job`)
    transport: str = "secagg"
    #: a committee job's deviating member: ``(member, what)``, ``member`` one of
    #: ``server``, ``helper1``, ``helper2``, ``what`` one of its ``JOB_FAULTS``
    fault: tuple[str, str] | None = None
    #: a committee job's input under the malicious model: ``reports`` (the default:
    #: the devices' validated reports) or ``secagg`` (a secure-aggregation session);
    #: the semi-honest committee always takes ``secagg``
    committee_input: str = "reports"
    #: a committee job's corrupted devices (a simulation's attackers): each round every
    #: device process draws them as :func:`protocol.core.corruption.corrupt_positions`
    #: does over the round's sample, and they send their strategy's input
    corrupt: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.kill_round <= self.max_length:
            raise ValueError("kill_round must be a TrieHH round, 1..L")
        if self.transport not in ("secagg", "threshold"):
            raise ValueError("a TrieHH job runs over secagg or threshold")
        if self.committee_input not in ("reports", "secagg"):
            raise ValueError("committee_input is reports or secagg")
        if self.fault is not None:
            from protocol.core.net.committee_job import JOB_FAULTS, SECAGG_ONLY_FAULTS

            member, what = self.fault
            kinds = JOB_FAULTS["server"] if member == "server" else (
                JOB_FAULTS["helper"] if member in ("helper1", "helper2") else ())
            if self.transport != "threshold" or self.threat != "malicious":
                raise ValueError("a fault needs --transport threshold, malicious model")
            if what not in kinds:
                raise ValueError(f"{member}: faults are {', '.join(kinds) or 'none'}")
            if what in SECAGG_ONLY_FAULTS and self.validated:
                raise ValueError(f"{member}:{what} deviates in the secure-aggregation-fed "
                                 "committee: give committee_input='secagg'")
        if self.corrupt is not None:
            from protocol.core.corruption import CorruptClients

            c = self.corrupt
            if not isinstance(c, CorruptClients):
                raise ValueError("corrupt must be a CorruptClients")
            if not self.committee:
                raise ValueError("corrupted devices run in a committee job (--transport "
                                 "threshold)")
            if c.on_reports and not self.validated:
                raise ValueError(f"{c.strategy} attacks validated reports: it needs "
                                 "committee_input='reports' under the malicious model")

    @property
    def committee(self) -> bool:
        return self.transport == "threshold"

    @property
    def validated(self) -> bool:
        """A committee job whose input is the devices' validated reports."""
        return self.committee and self.threat == "malicious" and \
            self.committee_input == "reports"


    def triehh_options(self):  # noqa: ANN201
        return triehh.TrieHHOptions(dataset=self.dataset, users=self.users, epsilon=self.epsilon,
                             max_length=self.max_length, unit_size=self.unit_size,
                             seed=self.seed, theta=self.theta, gamma=self.gamma,
                             alphabet=self.alphabet, transport=self.transport)

    def data_args(self) -> list[str]:
        args = ["--dataset", self.dataset, "--epsilon", repr(self.epsilon),
                "--max-length", str(self.max_length), "--unit-size", str(self.unit_size),
                "--seed", str(self.seed)]
        for flag, value in (("--users", self.users), ("--theta", self.theta),
                            ("--gamma", self.gamma), ("--alphabet", self.alphabet)):
            if value is not None:
                args += [flag, str(value)]
        return args

    def client_extra(self) -> list[str]:
        args = self.committee_args()
        c = self.corrupt
        if c is not None:  # the corrupted-client options, as fedhh client reads them
            if c.per_round is not None:
                args += ["--corrupt-clients", str(c.per_round)]
            elif c.users is not None:
                args += ["--corrupt-users", ",".join(str(u) for u in c.users)]
            else:
                args += ["--corrupt-share", repr(float(c.fraction))]
            args += ["--corrupt-strategy", c.strategy, "--corrupt-seed", str(c.seed)]
            if c.target is not None:
                args += ["--corrupt-target", c.target]
        return args

    def committee_args(self) -> list[str]:
        """``--committee-input`` as every party of a committee job is given it."""
        if not self.committee:
            return []
        return ["--committee-input", "reports" if self.validated else "secagg"]


@dataclass(frozen=True)
class LDPLoopbackOptions(_ProcessOptions):
    """One frequency-oracle round on loopback: ``fedhh ldp --network`` as the server
    and ``processes`` ``fedhh client --job ldp`` processes, each device randomising its
    own value with seeded noise (so that the sum can be checked) and contributing its
    support vector. ``kill`` client processes get SIGKILL when the round's session
    starts. ``compare`` also runs the oracle in this process over the in-process secure
    aggregation transport (its own noise) and reports both errors."""

    mechanism: str = "grr"
    users: int | None = 1000
    domain: int | None = 50
    epsilon: float = 2.0
    zipf_s: float = 1.1
    g: int = 0
    B: int = 0
    kill_round: int = 0

    def ldp_options(self, transport: str = "secagg"):  # noqa: ANN201
        return ldp.LDPOptions(mechanism=self.mechanism, users=self.users, domain=self.domain,
                              epsilon=self.epsilon, zipf_s=self.zipf_s, g=self.g, B=self.B,
                              seed=self.seed, transport=transport)

    def data_args(self) -> list[str]:
        args = ["--mechanism", self.mechanism, "--epsilon", repr(self.epsilon),
                "--zipf-s", repr(self.zipf_s), "--g", str(self.g), "--B", str(self.B),
                "--seed", str(self.seed)]
        for flag, value in (("--users", self.users), ("--domain", self.domain)):
            if value is not None:
                args += [flag, str(value)]
        return args

    def client_extra(self) -> list[str]:
        return ["--seeded-noise"]


def _committee(o: Any) -> bool:
    return bool(getattr(o, "committee", False))


def _fault_of(o: Any, member: str) -> list[str]:
    fault = getattr(o, "fault", None)
    return ["--fault", fault[1]] if fault is not None and fault[0] == member else []


def _server_args(o: Any, command: str, keys: str, view: str) -> list[str]:
    transport = ["--transport", "threshold", "--threat", o.threat] if _committee(o) else [
        "--transport", "secagg", "--threat", o.threat, "--secagg-graph", o.graph,
        "--dropout", str(o.dropout_rate)]
    return [command, *transport, "--network", "127.0.0.1:0", "--keys",
            os.path.join(keys, "server"), "--json", "--quiet",
            "--stage-seconds", str(o.stage_seconds), "--join-seconds", str(o.join_seconds),
            "--server-view", view, *o.data_args(), *_fault_of(o, "server"),
            *_committee_args(o)]


def _committee_args(o: Any) -> list[str]:
    return o.committee_args() if hasattr(o, "committee_args") else []


def _client_args(o: Any, job: str, keys: str, port: int, ids: np.ndarray) -> list[str]:
    return ["client", "--job", job, "--keys", os.path.join(keys, "clients"),
            "--connect", f"127.0.0.1:{port}",
            *(["--transport", "threshold"] if _committee(o) else []),
            "--ids", f"{ids[0]}:{ids[-1] + 1}", "--threat", o.threat, "--graph", o.graph,
            "--dropout-rate", str(o.dropout_rate), "--wait-seconds",
            str(o.join_seconds + 5 * o.stage_seconds), *o.data_args(), *o.client_extra()]


def _helper_args(o: Any, job: str, keys: str, port: int, index: int, link: int
                 ) -> list[str]:
    return ["helper", "--index", str(index), "--job", job, "--keys",
            os.path.join(keys, f"helper{index}"), "--connect", f"127.0.0.1:{port}",
            "--link", f"127.0.0.1:{link}", "--threat", o.threat, "--graph", o.graph,
            "--dropout-rate", str(o.dropout_rate), "--wait-seconds",
            str(o.join_seconds + 5 * o.stage_seconds), *o.data_args(),
            *_fault_of(o, f"helper{index}"), *_committee_args(o)]


async def _job_processes(o: Any, job: str, command: str, keys: str, n: int, view: str,
                         say: Callable[[str], None]) -> dict[str, Any]:
    """Start the server (``fedhh COMMAND --network``) and the client processes, follow
    the server's events, kill when asked, collect everything, leave nothing running."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    wall0 = time.perf_counter()
    server = await asyncio.create_subprocess_exec(
        *fedhh_command(*_server_args(o, command, keys, view)),
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
    aborted: list[dict[str, Any]] = []

    async def next_event() -> dict[str, Any] | None:
        return await next_before(events, deadline, o.timeout)

    try:
        ev = await next_event()
        while ev is not None and ev.get("event") != "listening":
            ev = await next_event()
        if ev is None:
            await server.wait()
            raise RuntimeError(f"the {command} server did not start: "
                               + "\n".join(stderr_lines)[-1500:])
        port = int(ev["port"])
        helpers: list[asyncio.subprocess.Process] = []
        if _committee(o):
            from protocol.core.net.launcher import _free_port

            link = _free_port()
            for index in (2, 1):  # helper 2 listens on the link, helper 1 connects
                h = await asyncio.create_subprocess_exec(
                    *fedhh_command(*_helper_args(o, job, keys, port, index, link)),
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    env=env)
                helpers.append(h)
                everything.append(h)
        ranges = [r for r in np.array_split(np.arange(n), o.processes) if r.size]
        for ids in ranges:
            p = await asyncio.create_subprocess_exec(
                *fedhh_command(*_client_args(o, job, keys, port, ids)),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env)
            procs.append(p)
            everything.append(p)
        while True:
            ev = await next_event()
            if ev is None:
                break
            if (ev.get("event") == "session" and ev.get("round") == o.kill_round
                    and to_kill):  # the round's Task and Welcome are out
                for i in sorted(to_kill):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(procs[i].pid, signal.SIGKILL)
                    killed.append(i)
                to_kill.clear()
            elif ev.get("event") == "done":
                if ev.get("status") != "completed":
                    aborted.append({"round": ev.get("round"), "reason": ev.get("reason")})
                say(f"round {ev.get('round')}: {ev.get('status')}"
                    f"{' (' + ev['reason'] + ')' if ev.get('reason') else ''}")
        stuck = await stop_process(server, 30)
        text = (await result_text).decode(errors="replace")
        wall = time.perf_counter() - wall0
        summaries, late = await client_summaries(procs, killed, o.stage_seconds + 10)
        stuck += late
        helper_outs = []
        for h in helpers:
            stuck += await stop_process(h, o.stage_seconds + 10)
            helper_outs.append(await _last_json_line(h))
    finally:
        left = await kill_all(everything)
        reader.cancel()
    result = None
    with contextlib.suppress(ValueError):
        result = json.loads(text)
    extra = {"helpers": sorted(helper_outs, key=lambda h: h.get("helper", 0))} \
        if _committee(o) else {}
    return {"result": result, "server_exit": server.returncode, **extra,
            "aborted_rounds": aborted,
            "server_error": None if result is not None else
            "\n".join(stderr_lines)[-1500:] or text[-1500:],
            "wall_seconds": wall, "killed_processes": killed, "client_processes": summaries,
            "killed_at_deadline": stuck, "left_behind": left}


async def _last_json_line(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    """The last JSON line a finished process printed on stdout (its outcome)."""
    assert proc.stdout is not None
    text = (await proc.stdout.read()).decode(errors="replace")
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            got = json.loads(line)
            if isinstance(got, dict):
                return got
    return {"status": "no output", "exit": proc.returncode}


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


def _corrupted_users(corrupt: Any, task: str, r: dict[str, Any]) -> list[int]:
    """The devices of round ``r`` that the corruption draw corrupts (as every device
    computes it from the round's sample)."""
    if corrupt is None:
        return []
    from protocol.core.corruption import corrupt_positions

    sample = np.asarray(r["sample"], dtype=np.int64)
    return sorted(int(u) for u in sample[corrupt_positions(corrupt, task, int(r["round"]),
                                                           sample)])


def _check_committee_rounds(prep: Any, view: list[dict[str, Any]],
                            corrupt: Any = None) -> list[bool | None]:
    """For each round the committee completed: are the candidates it opened exactly
    those with at least theta votes among the devices in the sum (with validated
    reports: whose reports were valid), each vote recomputed here from the seeded
    population, a corrupted device's as its vector strategy's (modulo ``p``, as the
    committee counts)? ``None`` for an aborted round."""
    from protocol.core.corruption import P61, corrupt_vector

    voter = ClientVoter(prep.data, np.arange(prep.n), prep.alphabet, prep.config.max_levels)
    exact: list[bool | None] = []
    for r in view:
        if r["status"] != "completed":
            exact.append(None)
            continue
        d = len(r["candidates"])
        bad = set(_corrupted_users(corrupt, prep.config.task, r))
        votes = voter.votes(r["in_sum"], r["round"], r["candidates"])
        counts = [0] * d
        for u, v in zip(r["in_sum"], votes.tolist()):
            if u in bad and not corrupt.on_reports:
                for i, x in enumerate(corrupt_vector(corrupt, r["candidates"],
                                                     prep.config.theta).tolist()):
                    counts[i] = (counts[i] + x) % P61
            elif v >= 0:
                counts[v] += 1
        counts = np.asarray([c % P61 for c in counts], dtype=np.int64)
        want = np.flatnonzero(counts >= prep.config.theta).tolist()
        ok = want == sorted(r["passed"])
        if r.get("counts") is not None:
            ok = ok and [int(counts[i]) for i in sorted(r["passed"])] == r["counts"]
        exact.append(bool(ok))
    return exact


def _orchestrate(o: Any, job: str, command: str, n: int, say: Callable[[str], None]
                 ) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """Keys (unless given), the processes, the server's view; ``(report, view)``."""
    view = None
    committee = _committee(o)
    with key_directory(o.keys, lambda d: tls.make_party_keys(d, n, committee=committee)
                       ) as keys, \
            tempfile.TemporaryDirectory(prefix="fedhh-job-",
                                        ignore_cleanup_errors=True) as scratch:
        view_path = os.path.join(scratch, "server-view.json")
        out = asyncio.run(_job_processes(o, job, command, keys, n, view_path, say))
        with contextlib.suppress(OSError, ValueError):
            with open(view_path, encoding="utf-8") as f:
                view = json.load(f)
    out = {"options": options_report(o), "n": n, **out}
    return out, view


def run_job_loopback(o: JobLoopbackOptions, say: Callable[[str], None] | None = None
                     ) -> dict[str, Any]:
    """Run a whole TrieHH on loopback with real processes; a JSON-ready report: the
    TrieHH summary the server printed (with its ``network`` block: per round outcome,
    stages, bytes), the client processes' summaries, ``rounds_exact``, and with
    ``compare`` the in-process run's heavy hitters, wall time and whether they are the
    same.

    Raises:
        ValueError: bad options.
        protocol.studies.errors.StudyError: the population cannot be prepared.
        RuntimeError: the server process failed to start.
    """
    say = say or (lambda _line: None)
    prep, _ = triehh.prepare(o.triehh_options())
    n = prep.n
    say(f"loopback TrieHH: {n} clients in {o.processes} processes, {o.threat}, "
        f"theta {prep.config.theta}, L {prep.config.max_levels}"
        + (", over the committee (server and two helper processes)" if o.committee else "")
        + (f"; fault: {o.fault[0]} {o.fault[1]}" if o.fault else ""))
    out, view = _orchestrate(o, "triehh", "triehh", n, say)
    corrupt = o.corrupt
    if o.committee:
        out["rounds_exact"] = None if view is None else \
            _check_committee_rounds(prep, view, corrupt)
    else:
        out["rounds_exact"] = None if view is None else _check_rounds(prep, view)
    out["wrong_results"] = sum(e is False for e in out["rounds_exact"] or ())
    if o.committee:
        out["server_view"] = view
        out["committee_input"] = "reports" if o.validated else "secagg"
        if view is not None and (o.validated or corrupt is not None):
            out["dropped_per_round"] = _drops_per_round(prep, view, corrupt)
        if o.compare and view is not None:
            out["simulation"] = _plain_on_the_same_samples(o, prep, view, out["result"])
        return out
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


def _drops_per_round(prep: Any, view: list[dict[str, Any]], corrupt: Any
                     ) -> list[dict[str, Any]]:
    """Per round: the reports dropped by reason (as the server's view records them, the
    accuser with each), the corrupted devices, theirs dropped by reason and how many of
    them were counted."""
    out = []
    for r in view:
        bad = _corrupted_users(corrupt, prep.config.task, r)
        drops = r.get("drops") or []
        mine: dict[str, int] = {}
        for u, reason, _ in drops:
            if u in bad:
                mine[reason] = mine.get(reason, 0) + 1
        counted = len(set(bad) & set(r.get("in_sum") or ()))
        out.append({"round": r["round"], "status": r["status"],
                    "validated": r.get("committee_input") == "reports",
                    "dropped": dict(r.get("dropped") or {}), "drops": drops,
                    "corrupted": bad, "dropped_corrupted": mine,
                    "corrupted_counted": counted})
    return out


def _plain_on_the_same_samples(o: JobLoopbackOptions, prep: Any, view: list[dict[str, Any]],
                               result: dict[str, Any] | None) -> dict[str, Any]:
    """The committee job's comparison: the same TrieHH in this process in plaintext,
    asking the users the committee's beacons drew (its seeds come from the three
    members' OS randomness, so no seeded run could draw them). With corrupted devices,
    over the honest devices' votes alone (the corrupted ones abstain)."""
    from protocol.core.contract import Sample
    from protocol.core.transports.plain import PlainTransport

    samples = {(prep.config.task, int(r["round"])): Sample(
        np.asarray(r["sample"], dtype=np.int64), None, prep.n, committee=False)
        for r in view}
    plain = PlainTransport(samples=samples)
    c = o.corrupt
    if c is not None:  # the same draw, the corrupted devices' votes left out
        plain.corrupt = dataclasses.replace(c, strategy="abstain", target=None)
    wall0 = time.perf_counter()
    opts = dataclasses.replace(o.triehh_options(), transport="plain")
    if c is None:
        sim = triehh.run(opts, plain)
    else:  # the plaintext transport drops the draw's votes itself (they abstain)
        prep_plain, rng = triehh.prepare(opts)
        sim = triehh.summarize(prep_plain, triehh.run_once(prep_plain, plain, rng))
    net_hh = _heavy_hitters(result)
    return {"heavy_hitters": _heavy_hitters(sim),
            "honest_only": c is not None,
            "wall_seconds": time.perf_counter() - wall0,
            "release_equal": None if net_hh is None else net_hh == _heavy_hitters(sim)}


def _check_ldp(o: LDPLoopbackOptions, view: list[dict[str, Any]]) -> list[bool | None]:
    """Is the round's sum exactly the sum of the support vectors of the clients in it,
    each recomputed here from the seeded noise the devices used?"""
    from mechanisms.fo import ClientReporter, vector_modulus

    values, _, oracle, _ = ldp.population_and_oracle(o.ldp_options())
    n = int(values.shape[0])
    reporter = ClientReporter(oracle, values, range(n), ClientReporter.seeded(o.seed))
    exact: list[bool | None] = []
    for r in view:
        if r["sum"] is None:
            exact.append(None)
            continue
        modulus = vector_modulus(len(r["sample"]))
        want = np.zeros(r["dim"], dtype=np.int64)
        for u in r["in_sum"]:
            want += reporter.vector(u, r["round"], r["dim"], modulus,
                                    len(r["sample"])).astype(np.int64)
        exact.append(bool(np.array_equal(want % modulus, np.asarray(r["sum"]))))
    return exact


def run_ldp_loopback(o: LDPLoopbackOptions, say: Callable[[str], None] | None = None
                     ) -> dict[str, Any]:
    """One frequency-oracle round on loopback with real processes; a JSON-ready report:
    the ``fedhh ldp`` summary the server printed (estimates, MSE, its ``network``
    block), ``rounds_exact`` (the sum against the devices' recomputed vectors) and with
    ``compare`` the in-process run's MSE.

    Raises:
        ValueError: bad options.
        protocol.studies.errors.StudyError: the population or oracle cannot be built.
        RuntimeError: the server process failed to start.
    """
    say = say or (lambda _line: None)
    values, _, oracle, _ = ldp.population_and_oracle(o.ldp_options())
    n = int(values.shape[0])
    say(f"loopback {oracle.name.upper()}: {n} clients in {o.processes} processes, "
        f"{o.threat}, epsilon {o.epsilon:g}, {oracle.vector_dim}-entry support vectors")
    out, view = _orchestrate(o, "ldp", "ldp", n, say)
    out["rounds_exact"] = None if view is None else _check_ldp(o, view)
    out["wrong_results"] = sum(e is False for e in out["rounds_exact"] or ())
    if o.compare:
        from protocol.core.transports.secagg_transport import SecAggTransport

        wall0 = time.perf_counter()
        sim, _ = ldp.run(o.ldp_options(), SecAggTransport(graph=o.graph, threat=o.threat,
                                                          simulate=True, workers=1))
        out["simulation"] = {
            "mse": sim["mse"], "mean_analytical_variance": sim["mean_analytical_variance"],
            "wall_seconds": time.perf_counter() - wall0,
            "mse_network": None if out["result"] is None else out["result"]["mse"],
        }
    return out
