"""The thresholding committee as network parties: server, two helpers, clients over TLS
(one event loop), the helpers' mutually authenticated link, and the loopback launcher
with real processes."""
from __future__ import annotations

import asyncio
import socket
import ssl

import pytest

from protocol.core.net import tls
from protocol.core.net.client import run_clients
from protocol.core.net.server import NetSecAggServer
from protocol.core.net.shuffle import ShuffleRound, expected_release
from protocol.core.net.threshold_net import (
    ThresholdRound, demo_votes_vector, run_helper, serve_threshold_round,
)

N = 24
SEED = 4


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("committeekeys")
    tls.make_keys(root, N + 2)
    tls.make_helper_keys(root)
    return root


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _round(keys, rnd, helpers=(1, 2), join=8.0, helper_wait=10.0, faults=None):
    faults = faults or {}
    verify, signing = tls.load_pki(keys)
    spec = rnd.session()
    link = ("127.0.0.1", _port())

    async def main():
        srv = NetSecAggServer(spec, tls.server_context(keys), verify_keys=verify,
                              stage_seconds=5, join_seconds=join)
        await srv.start()
        ctx, pin = tls.client_context(keys)
        served = asyncio.create_task(serve_threshold_round(srv, rnd, 5,
                                                           fault=faults.get("server")))
        tasks = []
        for h in sorted(helpers, reverse=True):  # helper 2 listens first
            tasks.append(asyncio.create_task(run_helper(
                h, "127.0.0.1", srv.port, rnd, ctx, pin, link,
                tls.helper_link_contexts(keys, h), signing_key=signing[N + h - 1],
                verify_keys=verify, wait_seconds=helper_wait,
                fault=faults.get(f"helper{h}"))))
            await asyncio.sleep(0.1)
        outs = await run_clients(range(N), "127.0.0.1", srv.port, spec, ctx, pin,
                                 lambda c: demo_votes_vector(SEED, c, rnd.vote.candidates),
                                 signing_keys=signing, verify_keys=verify, wait_seconds=15)
        report = await served
        helper_outs = [await t for t in tasks]
        await srv.close()
        return outs, report, helper_outs

    return asyncio.run(main())


@pytest.mark.parametrize("reveal", [True, False])
def test_a_committee_round_releases_only_what_passes(keys, reveal):
    rnd = ThresholdRound(ShuffleRound(N, candidates=6, theta=3, reveal_counts=reveal))
    outs, report, helpers = _round(keys, rnd)
    assert {o.status for o in outs} == {"completed"}
    assert report["status"] == "completed", report["reason"]
    want = expected_release(rnd.vote, SEED, range(N))
    assert report["in_sum"] == list(range(N))
    assert report["passed"] == want["passed"] and report["release"] == want["release"]
    assert len(want["passed"]) < rnd.vote.candidates  # some candidates stay below theta
    assert "result" not in report  # the blinded sum stays with the server
    for h in helpers:
        assert h["status"] == "completed"
        assert h["passed"] == want["passed"] and h["release"] == want["release"]


def test_without_a_helper_no_sum_is_released(keys):
    """Helper 2 never comes: the clients refuse to unmask a sum without both required
    helpers, and nothing is released."""
    rnd = ThresholdRound(ShuffleRound(N, candidates=6, theta=3))
    outs, report, helpers = _round(keys, rnd, helpers=(1,), join=2.0, helper_wait=2.0)
    assert report["status"] == "aborted" and report.get("passed") is None
    # every client refused: the survivor set lacks a required helper
    assert {o.reason for o in outs} == {"required_participant_missing"}
    assert helpers[0]["status"] != "completed"


def test_the_helpers_link_is_mutually_authenticated(keys):
    """Only helper 1's certificate opens helper 2's link: a client with the server's
    trust (or none) is refused in the handshake."""
    async def main():
        got = []

        async def accept(reader, writer):
            got.append(writer)

        server = await asyncio.start_server(accept, "127.0.0.1", 0,
                                            ssl=tls.helper_link_contexts(keys, 2))
        port = server.sockets[0].getsockname()[1]
        stranger = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        stranger.load_verify_locations(cafile=str(keys / "helper2.crt"))
        refused = False
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=stranger,
                                                 server_hostname="fedhh-helper2")
            w.write(b"x")
            await w.drain()
            refused = await asyncio.wait_for(r.read(), 5) == b""
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        r1, w1 = await asyncio.open_connection("127.0.0.1", port,
                                               ssl=tls.helper_link_contexts(keys, 1),
                                               server_hostname="fedhh-helper2")
        await asyncio.sleep(0.1)
        w1.close()
        server.close()
        return refused, len(got)

    refused, accepted = asyncio.run(main())
    assert refused and accepted == 1


def test_committee_options_that_do_not_apply_are_errors(capsys):
    from protocol.cli import main

    assert main(["net", "run", "--transport", "threshold", "--dim", "5"]) == 2
    assert "--dim" in capsys.readouterr().err
    assert main(["net", "run", "--transport", "threshold", "--min-batch", "3"]) == 2


# slow (22 s): a killed client process is also in the default run over the job
# (test_net_job) and at stages 0, 2 and 4 of a session (test_net_processes)
@pytest.mark.slow
def test_net_run_threshold_with_a_killed_client_process():
    from protocol.core.net.launcher import ThresholdLoopbackOptions, run_threshold_loopback

    out = run_threshold_loopback(ThresholdLoopbackOptions(
        clients=40, processes=4, seed=3, candidates=8, theta=3, kill=1, dropout_rate=0.3,
        # the join window closes as soon as everyone is there; 20 s lets the processes
        # start on a loaded machine
        stage_seconds=5, join_seconds=20, timeout=120))
    assert out["left_behind"] == 0 and out["killed_processes"]
    assert out["server"]["status"] == "completed"
    assert len(out["server"]["in_sum"]) == 30
    assert [h["status"] for h in out["helpers"]] == ["completed", "completed"]
    assert out["exact"] is True and out["wrong_results"] == 0


@pytest.mark.parametrize("member, fault, reasons", [
    ("server", "shift-sum", {"committee_verification_failed", "committee_open_mismatch"}),
    ("helper1", "shift-blind", {"committee_verification_failed", "committee_open_mismatch"}),
    ("helper2", "shift-blind", {"committee_verification_failed", "committee_open_mismatch"}),
    ("helper1", "other-seed", {"committee_helper_audit_failed"}),
    ("helper2", "other-blind", {"committee_helper_audit_failed"}),
])
def test_a_deviating_member_process_ends_in_its_named_abort(keys, member, fault, reasons):
    """The malicious model over real streams: the member's auditor (or the verified
    comparison) names the deviation, every member relays it, so each one ends in it
    (never in the broken link that follows); no member opens anything."""
    rnd = ThresholdRound(ShuffleRound(N, candidates=6, theta=3))
    assert rnd.verified
    outs, report, helpers = _round(keys, rnd, faults={member: fault})
    assert {o.status for o in outs} == {"completed"}      # secure aggregation finished
    everyone = [report] + helpers
    assert all(p["status"] == "aborted" for p in everyone)
    assert {p["reason"] for p in everyone} <= reasons, everyone
    assert all(p.get("passed") is None and p.get("release") is None for p in everyone)


def test_the_semi_honest_option_keeps_its_committee(keys):
    rnd = ThresholdRound(ShuffleRound(N, candidates=6, theta=3), threat="semi-honest")
    assert not rnd.verified and rnd.session().modulus == 1 << rnd.k
    outs, report, helpers = _round(keys, rnd)
    want = expected_release(rnd.vote, SEED, range(N))
    assert report["status"] == "completed" and report["passed"] == want["passed"]
    assert all(h["passed"] == want["passed"] for h in helpers)
