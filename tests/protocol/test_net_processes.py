"""The network prototype with real processes on loopback: ``fedhh net run``, kill -9 of
client processes at every stage, stalls, a server restarted between sessions. Every
test bounds its own time (the launcher's ``timeout`` and deadlines) and checks that no
process is left behind."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from protocol.cli import main
from protocol.core.net import tls
from protocol.core.net.launcher import LoopbackOptions, expected_sum, run_loopback

# 40 clients in 8 processes: killing one process drops 12.5% of them, within what
# parameters for a 20% dropout rate tolerate (k = 20, t = 12)
# (the join window closes as soon as every client is there; 15 s lets eight processes
# start on a loaded machine)
SMALL = dict(clients=40, dim=16, dropout_rate=0.2, stage_seconds=3.0, join_seconds=15.0,
             timeout=120.0)


def _outcome_ok(session: dict) -> None:
    """Each session ends in an exact release or an abort with a reason."""
    if session["status"] == "completed":
        assert session["exact"] is True
    else:
        assert session["status"] == "aborted" and session["reason"]


def test_net_run_matches_the_simulation(capsys):
    assert main(["net", "run", "--clients", "24", "--dim", "16", "--processes", "3",
                 "--seed", "5", "--compare", "--json", "--quiet", "--timeout", "120"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["sessions"][0]
    assert s["status"] == "completed" and s["exact"] is True and s["in_sum"] == 24
    assert out["simulation"]["release_equal"] is True
    assert out["left_behind"] == 0 and out["wrong_results"] == 0
    assert s["client_outcomes"] == {"completed": 24}
    # the network adds only the handshake and frame headers to the simulation's bytes
    sim = out["simulation"]
    assert 0 < s["bytes_up_per_client"] - sim["bytes_up_per_client"] < 64
    assert [st["name"] for st in s["stages"]] == ["advertise_keys", "share_keys",
                                                  "masked_input", "consistency", "unmask"]


@pytest.mark.parametrize("kill_at", [
    0, 2, 4,
    # the other stages on demand (the default run keeps before joining, mid-session and
    # at the unmasking)
    pytest.param(1, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_kill_minus_nine_at_each_stage(kill_at):
    # killed before joining, its clients never come: the server waits out the join
    # window, here 10 s (the others connect within about 4 s on an idle machine)
    opts = {**SMALL, "join_seconds": 10.0} if kill_at == 0 else SMALL
    out = run_loopback(LoopbackOptions(processes=8, kill=1, kill_at=kill_at, seed=kill_at,
                                       **opts))
    s = out["sessions"][0]
    _outcome_ok(s)
    assert len(s["killed_processes"]) == 1
    assert out["left_behind"] == 0 and out["server_exit"] is not None
    assert s["status"] == "completed"  # within the tolerated dropout rate
    if kill_at == 0:  # killed before they connected: never in the session
        assert s["joined"] == 35
    if kill_at <= 1:  # killed before their masked input could be asked for
        assert s["in_sum"] == 35
    assert s["client_outcomes"] == {"completed": 35}


def test_stalled_client_is_cut_at_the_deadline():
    out = run_loopback(LoopbackOptions(processes=2, stall=1, stall_at=2, seed=2,
                                       **{**SMALL, "stage_seconds": 1.5}))
    s = out["sessions"][0]
    _outcome_ok(s)
    assert s["stalled_clients"] and s["client_outcomes"].get("stalled") == 1
    masked = [st for st in s["stages"] if st["name"] == "masked_input"][0]
    assert masked["received"] == masked["expected"] - 1 and masked["seconds"] >= 1.4
    assert out["left_behind"] == 0


# slow (18 s): kills at stages 0, 2 and 4 and a restarted server stay in the default run
@pytest.mark.slow
def test_several_sessions_in_a_row_with_kills():
    out = run_loopback(LoopbackOptions(processes=8, sessions=3, kill=1, kill_at=2, seed=9,
                                       **SMALL))
    assert len(out["sessions"]) == 3 and out["wrong_results"] == 0
    for s in out["sessions"]:
        _outcome_ok(s)
    assert out["left_behind"] == 0 and out["server_exit"] in (0, 1)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "protocol.cli", *args]


def _spec(n: int) -> list[str]:
    return ["--clients", str(n), "--dim", "16"]


def _start_server(args: list[str], log, env) -> tuple[subprocess.Popen, int]:  # noqa: ANN001
    """Start ``fedhh serve`` with its events going to the file ``log``; wait (at most
    30 s) for the port it listens on."""
    import time

    server = subprocess.Popen(_cli("serve", *args), stdout=open(log, "w"),
                              stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                return server, int(json.loads(line)["port"])
        if server.poll() is not None:
            break
        time.sleep(0.05)
    server.kill()
    raise AssertionError(f"the server did not start: {log.read_text()[-1500:]}")


def _events(server: subprocess.Popen, log) -> list[dict]:  # noqa: ANN001
    server.wait(timeout=60)
    lines = log.read_text().splitlines()
    return [json.loads(x) for x in lines if x.startswith("{")]


def test_server_restarted_between_sessions(tmp_path):
    n = 12
    tls.make_party_keys(tmp_path, n)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs: list[subprocess.Popen] = []
    try:
        port, sessions = 0, []
        for attempt in range(2):
            log = tmp_path / f"server-{attempt}.log"
            server, port = _start_server(["--keys", str(tmp_path / "server"), "--port", str(port),
                                          "--stage-seconds", "5", "--join-seconds", "10",
                                          *_spec(n)], log, env)
            procs.append(server)  # the restarted server takes the same port
            client = subprocess.Popen(_cli("client", "--keys", str(tmp_path / "clients"), "--connect",
                                           f"127.0.0.1:{port}", "--seed", "4", *_spec(n)),
                                      stdout=subprocess.PIPE, text=True, env=env)
            procs.append(client)
            events = _events(server, log)
            reports = [e for e in events if e["event"] == "report"]
            assert reports, f"server exit {server.returncode}: {log.read_text()[-1500:]}"
            report = reports[0]
            session = [e for e in events if e["event"] == "session"][0]["session"]
            summary = json.loads(client.communicate(timeout=30)[0].splitlines()[-1])
            assert server.returncode == 0 and client.returncode == 0
            assert summary["status"] == {"completed": n}
            np.testing.assert_array_equal(np.asarray(report["result"], dtype=np.uint64),
                                          expected_sum(4, list(range(n)), 16, 1 << 32))
            sessions.append(session)
        assert sessions[0] != sessions[1]  # a fresh attempt: a fresh session id
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def test_a_client_of_a_dead_server_gives_up(tmp_path):
    n = 4
    tls.make_party_keys(tmp_path, n)
    # nothing listens on this port: the client process exits promptly with a reason
    proc = subprocess.run(_cli("client", "--keys", str(tmp_path / "clients"), "--connect", "127.0.0.1:9",
                               "--wait-seconds", "5", *_spec(n)), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["status"] == {"disconnected": n}


@pytest.mark.slow
def test_soak_fifty_sessions_with_five_percent_kills():
    """50 sessions in a row, 40 clients in 20 processes, one process (5% of the clients)
    killed per session at a random stage: no wrong result, no process left behind."""
    out = run_loopback(LoopbackOptions(clients=40, dim=100, processes=20, sessions=50,
                                       kill=1, kill_at=None, seed=1, stage_seconds=5.0,
                                       join_seconds=20.0, timeout=3000.0))
    assert len(out["sessions"]) == 50
    for s in out["sessions"]:
        _outcome_ok(s)
        assert len(s["killed_processes"]) == 1
    assert out["wrong_results"] == 0 and out["left_behind"] == 0


def test_server_process_survives_garbage_and_oversized_frames(tmp_path):
    """A real `fedhh serve`: raw TLS peers send an oversized header, garbage and a
    plaintext Hello; the server refuses them, stays bounded, and completes the session
    of the honest client process exactly."""
    import socket
    import ssl

    from protocol.core.net.frames import HEADER, frame
    from protocol.core.net.messages import PROTOCOL_VERSION, Hello

    n = 20
    tls.make_party_keys(tmp_path, n)
    spec = [*_spec(n), "--dropout-rate", "0.3"]  # 3 of 20 dropped by the server
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = tmp_path / "server.log"
    server, port = _start_server(["--keys", str(tmp_path / "server"), "--port", "0",
                                  "--stage-seconds", "5", "--join-seconds", "6", *spec],
                                 log, env)
    client = None
    try:
        ctx, _ = tls.client_context(tmp_path / "clients")
        for position, payload in ((17, HEADER.pack(0xFFFFFFF0, 1)),
                                  (18, HEADER.pack(64, 1) + os.urandom(64)),
                                  (19, b"\x00" * 4096)):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    ctx.wrap_socket(raw, server_hostname=tls.SERVER_NAME) as s:
                s.sendall(frame(Hello(PROTOCOL_VERSION, position)))
                s.sendall(payload)
                s.settimeout(10)
                data = b""
                while chunk := s.recv(65536):  # the server closes the connection
                    data += chunk
                    assert len(data) < 1 << 20
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(frame(Hello(PROTOCOL_VERSION, 16)))  # no TLS: the handshake fails
            raw.settimeout(10)
            with pytest.raises((ConnectionError, socket.timeout, OSError)):
                while raw.recv(65536):
                    pass
                raise ConnectionError("closed")
        client = subprocess.Popen(_cli("client", "--keys", str(tmp_path / "clients"), "--connect",
                                       f"127.0.0.1:{port}", "--ids", "0:16", "--seed", "6",
                                       *spec), stdout=subprocess.PIPE, text=True, env=env)
        events = _events(server, log)
        report = [e for e in events if e["event"] == "report"][0]
        assert report["status"] == "completed" and report["sets"]["U3"] == list(range(16))
        np.testing.assert_array_equal(np.asarray(report["result"], dtype=np.uint64),
                                      expected_sum(6, list(range(16)), 16, 1 << 32))
        assert {c for c, r in report["refused"] if "refused frame" in r} == {17, 18, 19}
        assert report["peak_rss_mb"] < 200
        client.communicate(timeout=30)
    finally:
        for p in (server, client):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
