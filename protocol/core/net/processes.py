"""The two process entry points of the network prototype, as library functions.

:func:`serve_process` is ``fedhh serve``: listen, run ``sessions`` sessions, print one
JSON line per event on ``out`` (the launcher reads them; a person can too). The last
line of each session is ``{"event": "report", ...}`` with the
:class:`~protocol.core.net.server.SessionReport`.

:func:`client_process` is ``fedhh client``: run the clients ``ids`` of one session as
tasks of one event loop, their inputs from :func:`~protocol.core.net.session.demo_input`
(a seeded experiment), and print one JSON summary line.
"""
from __future__ import annotations

import asyncio
import contextlib
import pathlib
import json
import resource
import sys
import time
from collections import Counter
from typing import Any, Awaitable, Callable, Iterable, Sequence, TextIO, TypeVar

from protocol.core.memory import peak_rss_mb
from protocol.core.net import tls
from protocol.core.net.client import run_clients
from protocol.core.net.server import NetSecAggServer
from protocol.core.net.session import NetSessionSpec, demo_input

T = TypeVar("T")

__all__ = ["run_async", "serve_process", "client_process", "raise_open_files_limit", "small_tls_buffers",
           "job_server", "job_client_process", "job_report", "shuffler_serve_process",
           "shuffle_client_process", "analyzer_process", "threshold_serve_process",
           "helper_process", "threshold_client_process"]


#: socket read buffer per TLS connection in the network processes; asyncio's default
#: (``SSLProtocol.max_size``, 256 KiB, allocated and zeroed per connection) made a server
#: of 1000 connections spend 256 MB on buffers. A TLS record carries at most 16 KiB, so
#: 17 KiB still takes a whole record per call. Measured (``fedhh net run``): n = 1000,
#: d = 1000 server peak 207 MB at 64 KiB, 159 MB at 17 KiB, no slower; a TrieHH job of
#: 5000 connected clients 759 MB at 64 KiB, 507 MB at 17 KiB.
TLS_READ_BUFFER = 17 * 1024


def small_tls_buffers() -> None:
    """Lower asyncio's per-connection TLS read buffer in this process (a class attribute
    of ``asyncio.sslproto.SSLProtocol``; left alone where it does not exist)."""
    import asyncio.sslproto as sslproto

    proto = getattr(sslproto, "SSLProtocol", None)
    if proto is not None and isinstance(getattr(proto, "max_size", None), int):
        proto.max_size = min(proto.max_size, TLS_READ_BUFFER)


def raise_open_files_limit(want: int) -> int:
    """Raise the soft limit on open files towards ``want`` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, want)) if hard != resource.RLIM_INFINITY else max(soft, want)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def run_async(main: Awaitable[T]) -> T:
    """``asyncio.run(main)`` for a network process, with SIGINT and SIGTERM handled alike:
    either cancels ``main`` (its ``finally`` blocks run: connections close, a server
    stops listening), every other task of the loop is cancelled and awaited, and then
    ``KeyboardInterrupt`` (SIGINT) or :class:`protocol.core.net.signals.Terminated` (SIGTERM) is
    raised, which ``fedhh`` turns into one line and exit status 130 or 143. Nothing is
    left pending for asyncio to complain about. Outside the main thread (or where the
    loop cannot take signal handlers) it is ``asyncio.run``."""
    import signal
    import threading

    from protocol.core.net.signals import Terminated

    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    stopped: list[int] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            if not stopped:
                stopped.append(signum)
                task.cancel()

        installed = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            before = signal.getsignal(signum)
            if before is signal.SIG_IGN:
                continue
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop, signum)
                installed.append((signum, before))
        try:
            return await main
        except asyncio.CancelledError:
            if not stopped:
                raise
            return None  # type: ignore[return-value]  # raised as the signal below
        finally:
            for signum, before in installed:
                loop.remove_signal_handler(signum)
                with contextlib.suppress(TypeError, ValueError):
                    signal.signal(signum, before)

    result = asyncio.run(guarded())
    if stopped:
        raise Terminated() if stopped[0] == signal.SIGTERM else KeyboardInterrupt()
    return result


def _network_process(connections: int) -> None:
    """Set this process up for ``connections`` TLS connections (file limit, buffers)."""
    raise_open_files_limit(connections + 256)
    small_tls_buffers()


def _roster(keys: str, n: int, signing: bool, what: str = "the session", *,
            party: str, own: Iterable[int] = (), runs: Iterable[int] = ()
            ) -> tuple[list[bytes], list[bytes] | None]:
    """The key directory's verification (and signing) keys, for exactly ``n`` clients,
    after checking that the directory is ``party``'s own (no other party's secret:
    :func:`~protocol.core.net.tls.check_own_keys`, signing keys only of ``own``) and,
    with ``signing``, that it holds the key of every position in ``runs``.

    Raises:
        ValueError: a roster of another size, bad keys, another party's secret key
            (:class:`~protocol.core.net.tls.ForeignKeyError`), or a missing signing key.
    """
    tls.check_own_keys(keys, party, own)
    verify, sign = tls.load_pki(keys, signing=signing)
    if len(verify) != n:
        raise ValueError(f"the roster in {keys} has {len(verify)} clients, {what} {n}")
    if sign is not None:
        missing = [i for i in runs if sign[i] is None]
        if missing:
            raise ValueError(f"{keys} holds no signing key for position {missing[0]} "
                             f"({len(missing)} missing)")
    return verify, sign


def _ids_within(ids: Sequence[int], n: int) -> list[int]:
    """The client ids a process runs, all among the ``n`` positions.

    Raises:
        ValueError: none, or one outside ``[0, n)``.
    """
    ids = list(ids)
    if not ids or min(ids) < 0 or max(ids) >= n:
        raise ValueError(f"client ids must be in [0, {n})")
    return ids


def _clients_summary(outcomes: Sequence[Any], cpu0: float, wall0: float,
                     **extra: Any) -> dict[str, Any]:
    """The one JSON line a client process prints: outcomes by status and reason,
    bytes, CPU (the clients' own, and the whole process's) and wall time."""
    return {
        "event": "clients", "clients": len(outcomes),
        "status": dict(Counter(o.status for o in outcomes)),
        "reasons": dict(Counter(o.reason for o in outcomes if o.reason)),
        **extra,
        "bytes_up": sum(o.bytes_up for o in outcomes),
        "bytes_down": sum(o.bytes_down for o in outcomes),
        "client_cpu_seconds": sum(o.cpu_seconds for o in outcomes),
        "process_cpu_seconds": time.process_time() - cpu0,
        "wall_seconds": time.perf_counter() - wall0,
    }


def _emit(out: TextIO, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


def serve_process(spec: NetSessionSpec, keys: str, *, host: str = "127.0.0.1", port: int = 0,
                  sessions: int = 1, stage_seconds: float = 60.0, join_seconds: float = 60.0,
                  out: TextIO = sys.stdout) -> list[dict[str, Any]]:
    """Serve ``sessions`` sessions; returns their reports (as JSON objects).

    Raises:
        ValueError: bad keys or options.
        OSError: the address cannot be bound.
    """
    verify, _ = _roster(keys, spec.n, False, party="server")
    _network_process(spec.n)
    server = NetSecAggServer(spec, tls.server_context(keys), verify_keys=verify, host=host,
                             port=port, stage_seconds=stage_seconds, join_seconds=join_seconds,
                             events=lambda e: _emit(out, e))

    async def main() -> list[dict[str, Any]]:
        await server.start()
        reports = []
        try:
            for _ in range(sessions):
                report = (await server.run_session()).to_json()
                report["peak_rss_mb"] = peak_rss_mb()
                _emit(out, {"event": "report", **report})
                reports.append(report)
        finally:
            await server.close()
        return reports

    return run_async(main())


def client_process(spec: NetSessionSpec, keys: str, host: str, port: int, ids: Sequence[int],
                   *, seed: int = 0, wait_seconds: float = 300.0, stall: Sequence[int] = (),
                   stall_at: int | None = None, out: TextIO = sys.stdout) -> dict[str, Any]:
    """Run clients ``ids`` of one session; prints and returns a summary.

    Raises:
        ValueError: ids outside the roster, bad keys.
    """
    ids = _ids_within(ids, spec.n)
    verify, signing = _roster(keys, spec.n, spec.malicious, party="clients",
                              own=range(spec.n), runs=ids)
    _network_process(len(ids))
    ctx, pin = tls.client_context(keys)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    outcomes = run_async(run_clients(
        ids, host, port, spec, ctx, pin, lambda c: demo_input(seed, c, spec.dim, spec.modulus),
        signing_keys=signing, verify_keys=verify if spec.malicious else None,
        wait_seconds=wait_seconds, stall=stall, stall_at=stall_at))
    summary = _clients_summary(outcomes, cpu0, wall0)
    _emit(out, summary)
    return summary


def job_server(policy: Any, keys: str, *, host: str = "127.0.0.1", port: int = 0,
               stage_seconds: float = 60.0, join_seconds: float = 60.0,
               out: TextIO = sys.stderr, fault: str | None = None) -> Any:
    """The server of a job (``fedhh triehh --network``): a
    :class:`~protocol.core.net.job.NetJobServer` for ``policy`` with the keys of
    ``keys``, printing one JSON line per event on ``out``; run it with
    :func:`~protocol.core.net.job.serving_job`.

    Raises:
        ValueError: the roster's size is not the population's, or bad keys.
    """
    from protocol.core.net.job import NetJobServer

    if policy.committee:
        from protocol.core.net.committee_job import CommitteeJobServer

        verify, _ = _roster(keys, policy.population + 2, False,
                            "the population and two helpers", party="server")
        _network_process(policy.population + 2)
        return CommitteeJobServer(policy, tls.server_context(keys), verify_keys=verify,
                                  host=host, port=port, stage_seconds=stage_seconds,
                                  join_seconds=join_seconds, fault=fault,
                                  events=lambda e: _emit(out, e))
    if fault is not None:
        raise ValueError("--fault applies to a committee job (--transport threshold)")
    verify, _ = _roster(keys, policy.population, False, "the population", party="server")
    _network_process(policy.population)
    return NetJobServer(policy, tls.server_context(keys), verify_keys=verify, host=host,
                        port=port, stage_seconds=stage_seconds, join_seconds=join_seconds,
                        events=lambda e: _emit(out, e))


def job_report(reports: Sequence[Any]) -> dict[str, Any]:
    """A job's rounds as the server saw them (JSON-ready): outcome, who took part,
    latency per stage and bytes, and the totals."""
    rounds = []
    for r in reports:
        if isinstance(r, dict):  # a committee job's round (committee_job)
            rounds.append({k: r.get(k) for k in (
                "round", "status", "reason", "joined", "degree", "threshold",
                "wall_seconds", "server_cpu_seconds", "committee_cpu_seconds", "bytes_up",
                "bytes_down", "refused", "committee_input", "reports", "dropped",
                "committee_bytes_sent")}
                | {"sampled": len(r["sample"]), "in_sum": len(r.get("in_sum", ()))})
            continue
        rounds.append({
            "status": r.status, "reason": r.reason, "sampled": r.n, "joined": r.joined,
            "in_sum": len(r.sets.get("U3", ())), "degree": r.degree, "threshold": r.threshold,
            "threat": r.threat, "wall_seconds": r.wall_seconds,
            "server_cpu_seconds": r.server_cpu_seconds,
            "bytes_up": r.bytes_up, "bytes_down": r.bytes_down,
            "stages": [{"name": s.name, "expected": s.expected, "received": s.received,
                        "seconds": s.seconds} for s in r.stages],
            "refused": [[c, why] for c, why in r.refused][:20]})
    return {"rounds": rounds,
            "wall_seconds": sum(r["wall_seconds"] for r in rounds),
            "server_cpu_seconds": sum(r["server_cpu_seconds"] for r in rounds),
            "bytes_up": sum(r["bytes_up"] for r in rounds),
            "bytes_down": sum(r["bytes_down"] for r in rounds),
            "server_peak_rss_mb": peak_rss_mb()}


def job_client_process(policy: Any, keys: str, host: str, port: int, ids: Sequence[int],
                       contribution_of: Callable[[int, Any], Any], *,
                       wait_seconds: float = 300.0,
                       stall: Sequence[int] = (), stall_at: int | None = None,
                       corrupt: Any = None, out: TextIO = sys.stdout,
                       ledger: Any = None) -> dict[str, Any]:
    """Run the clients ``ids`` of a job (``fedhh client --job``); ``contribution_of(member,
    task)`` is a client's contribution (a vote, or a vector). With validated reports
    (``policy.validated``) each sampled device sends its report, its helpers' parts
    encrypted to the X25519 keys the roster publishes. ``corrupt``
    (:class:`~protocol.core.corruption.CorruptClients`): the devices each round's draw
    corrupts send their strategy's input. ``ledger``: the devices'
    :class:`~protocol.core.job_ledger.DeviceLedger`. Prints and returns a summary.

    Raises:
        ValueError: ids outside the population, bad keys (a roster without the helpers'
            report keys, for validated reports).
    """
    from protocol.core.net.job import run_job_clients

    ids = _ids_within(ids, policy.population)
    malicious = policy.threat == "malicious"
    roster = policy.population + (2 if policy.committee else 0)
    verify, signing = _roster(keys, roster, malicious,
                              "the population and two helpers" if policy.committee
                              else "the population",
                              party="clients", own=range(policy.population), runs=ids)
    reports = None
    if policy.validated:
        from protocol.core.net.committee_job import DeviceReports

        reports = DeviceReports(tls.load_report_keys(keys), signing or [], corrupt=corrupt)
    _network_process(len(ids))
    ctx, pin = tls.client_context(keys)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    outcomes = run_async(run_job_clients(
        ids, host, port, policy, ctx, pin, contribution_of, signing_keys=signing,
        verify_keys=verify if malicious else None, wait_seconds=wait_seconds, stall=stall,
        stall_at=stall_at, reports=reports, corrupt=None if reports is not None else corrupt,
        ledger=ledger))
    sessions: Counter = Counter()
    for o in outcomes:
        sessions.update(o.sessions)
    summary = _clients_summary(outcomes, cpu0, wall0, sessions=dict(sessions))
    _emit(out, summary)
    return summary


def shuffler_serve_process(round: Any, keys: str, *, host: str = "127.0.0.1", port: int = 0,
                           batch_seconds: float = 60.0, stage_seconds: float = 30.0,
                           out: TextIO = sys.stdout) -> dict[str, Any]:
    """``fedhh serve --transport shuffler``: one batch; one JSON line per event, the last
    ``{"event": "report", ...}`` (the shuffler's own view: who sent, the operator
    receipt).

    Raises:
        ValueError: bad keys.
        OSError: the address cannot be bound.
    """
    from protocol.core.net.shuffle import NetShufflerServer, ShuffleKeys

    files = ShuffleKeys(pathlib.Path(keys))
    _, a_pub = files.public_keys()
    _network_process(round.n)
    server = NetShufflerServer(round, files.secret("shuffler"), a_pub, tls.server_context(keys),
                               host=host, port=port, batch_seconds=batch_seconds,
                               stage_seconds=stage_seconds, events=lambda e: _emit(out, e))

    async def batch() -> dict[str, Any]:
        return (await server.run_batch()).to_json()

    return _serve_one(server, batch, out)


def _serve_one(server: Any, work: Callable[[], Awaitable[dict[str, Any]]],
               out: TextIO) -> dict[str, Any]:
    """Start ``server``, run ``work`` for its one report, close it; the report, with
    the process's peak memory, is printed as ``{"event": "report", ...}`` and returned."""
    async def main() -> dict[str, Any]:
        await server.start()
        try:
            report = await work()
        finally:
            await server.close()
        report["peak_rss_mb"] = peak_rss_mb()
        _emit(out, {"event": "report", **report})
        return report

    return run_async(main())


def shuffle_client_process(round: Any, keys: str, host: str, port: int, ids: Sequence[int],
                           *, seed: int = 0, wait_seconds: float = 60.0,
                           out: TextIO = sys.stdout) -> dict[str, Any]:
    """``fedhh client --transport shuffler``: clients ``ids`` each send their seeded
    vote (:func:`~protocol.core.net.shuffle.demo_vote`); prints and returns a summary.

    Raises:
        ValueError: ids outside the round, bad keys.
    """
    from protocol.core.net.shuffle import ShuffleKeys, demo_vote, run_shuffle_clients

    ids = _ids_within(ids, round.n)
    files = ShuffleKeys(pathlib.Path(keys))
    s_pub, a_pub = files.public_keys()
    master = files.crowd_master()
    _network_process(len(ids))
    ctx, pin = tls.client_context(keys)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    outcomes = run_async(run_shuffle_clients(
        ids, host, port, round, ctx, pin, s_pub, a_pub, master,
        lambda c: demo_vote(seed, c, round.candidates), wait_seconds=wait_seconds))
    summary = {"event": "clients", "clients": len(ids),
               "status": dict(Counter(s for s, _, _ in outcomes)),
               "reasons": dict(Counter(r for _, r, _ in outcomes if r)),
               "bytes_up": sum(b for _, _, b in outcomes),
               "process_cpu_seconds": time.process_time() - cpu0,
               "wall_seconds": time.perf_counter() - wall0}
    _emit(out, summary)
    return summary


def analyzer_process(round: Any, keys: str, host: str, port: int, *,
                     wait_seconds: float = 120.0, out: TextIO = sys.stdout) -> dict[str, Any]:
    """``fedhh analyze``: receive and open the round's batch; prints and returns the
    result as one JSON line (``{"event": "analyzer", ...}``).

    Raises:
        ValueError: bad keys.
    """
    from protocol.core.net.shuffle import ShuffleKeys, run_analyzer

    files = ShuffleKeys(pathlib.Path(keys))
    s_pub, _ = files.public_keys()
    ctx, pin = tls.client_context(keys)
    result = run_async(run_analyzer(host, port, round, ctx, pin, files.secret("analyzer"),
                                      s_pub, wait_seconds=wait_seconds))
    result = {"event": "analyzer", **result}
    _emit(out, result)
    return result


def threshold_serve_process(rnd: Any, keys: str, *, host: str = "127.0.0.1", port: int = 0,
                            stage_seconds: float = 60.0, join_seconds: float = 60.0,
                            out: TextIO = sys.stdout, fault: str | None = None
                            ) -> dict[str, Any]:
    """``fedhh serve --transport threshold``: one committee round as member 0; one JSON
    line per event, the last ``{"event": "report", ...}`` (the release, no blinded sum).

    Raises:
        ValueError: bad keys.
        OSError: the address cannot be bound.
    """
    from protocol.core.net.threshold_net import serve_threshold_round

    spec = rnd.session()
    verify, _ = _roster(keys, spec.n, False, "the session (clients and two helpers)",
                        party="server")
    _network_process(spec.n)
    server = NetSecAggServer(spec, tls.server_context(keys), verify_keys=verify, host=host,
                             port=port, stage_seconds=stage_seconds, join_seconds=join_seconds,
                             events=lambda e: _emit(out, e))

    return _serve_one(server, lambda: serve_threshold_round(server, rnd, stage_seconds,
                                                            fault=fault), out)


def helper_process(index: int, rnd: Any, keys: str, host: str, port: int,
                   link: tuple[str, int], *, wait_seconds: float = 120.0,
                   out: TextIO = sys.stdout, fault: str | None = None) -> dict[str, Any]:
    """``fedhh helper``: committee helper ``index`` of one round; prints and returns its
    outcome as one JSON line (``{"event": "helper", ...}``).

    Raises:
        ValueError: bad keys.
    """
    from protocol.core.net.threshold_net import run_helper

    spec = rnd.session()
    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    position = rnd.vote.n + index - 1
    verify, signing = _roster(keys, spec.n, spec.malicious,
                              "the session (clients and two helpers)",
                              party=f"helper{index}", own={position}, runs={position})
    ctx, pin = tls.client_context(keys)
    result = run_async(run_helper(
        index, host, port, rnd, ctx, pin, link, tls.helper_link_contexts(keys, index),
        signing_key=signing[position] if signing is not None else None,
        verify_keys=verify if spec.malicious else None, wait_seconds=wait_seconds,
        fault=fault))
    result = {"event": "helper", **result}
    _emit(out, result)
    return result


def job_helper_process(index: int, policy: Any, keys: str, host: str, port: int,
                       link: tuple[str, int], *, wait_seconds: float = 300.0,
                       fault: str | None = None, out: TextIO = sys.stdout,
                       ledger: Any = None) -> dict[str, Any]:
    """``fedhh helper --job``: helper ``index`` of a committee job, for every round until
    the server ends the job; prints and returns its outcome as one JSON line
    (``{"event": "helper", ...}``, with what it saw opened per round). ``ledger``: the
    helper's :class:`~protocol.core.job_ledger.HelperLedger`.

    Raises:
        ValueError: bad keys, not a committee policy.
    """
    from protocol.core.net.committee_job import run_job_helper

    if index not in (1, 2):
        raise ValueError("helpers are 1 and 2")
    position = policy.population + index - 1
    malicious = policy.threat == "malicious"
    verify, signing = _roster(keys, policy.population + 2, malicious,
                              "the population and two helpers", party=f"helper{index}",
                              own={position}, runs={position})
    report_secret = tls.load_report_secret(keys, index) if policy.validated else None
    ctx, pin = tls.client_context(keys)
    result = run_async(run_job_helper(
        index, host, port, policy, ctx, pin, link, tls.helper_link_contexts(keys, index),
        signing_key=signing[position] if signing is not None else None, verify_keys=verify,
        wait_seconds=wait_seconds, fault=fault, report_secret=report_secret, ledger=ledger))
    result = {"event": "helper", **result}
    _emit(out, result)
    return result


def threshold_client_process(rnd: Any, keys: str, host: str, port: int, ids: Sequence[int],
                             *, seed: int = 0, wait_seconds: float = 300.0,
                             out: TextIO = sys.stdout) -> dict[str, Any]:
    """``fedhh client --transport threshold``: clients ``ids`` of a committee round, each
    with its seeded one-hot vote; prints and returns a summary.

    Raises:
        ValueError: ids outside the clients, bad keys.
    """
    from protocol.core.net.threshold_net import demo_votes_vector

    ids = _ids_within(ids, rnd.vote.n)
    spec = rnd.session()
    verify, signing = _roster(keys, spec.n, spec.malicious,
                              "the session (clients and two helpers)", party="clients",
                              own=range(rnd.vote.n), runs=ids)
    _network_process(len(ids))
    ctx, pin = tls.client_context(keys)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    outcomes = run_async(run_clients(
        ids, host, port, spec, ctx, pin,
        lambda c: demo_votes_vector(seed, c, rnd.vote.candidates), signing_keys=signing,
        verify_keys=verify if spec.malicious else None, wait_seconds=wait_seconds))
    summary = _clients_summary(outcomes, cpu0, wall0)
    _emit(out, summary)
    return summary
