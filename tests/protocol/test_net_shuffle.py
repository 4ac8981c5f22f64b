"""The shuffler as network processes: clients, shuffler and analyzer over TLS (real
sockets, one event loop), what each refuses, and the loopback launcher with real
processes."""
from __future__ import annotations

import asyncio
import os
import stat

import numpy as np
import pytest

from protocol.core.contract import threshold_counts
from protocol.core.net import tls
from protocol.core.net.frames import HEADER, frame
from protocol.core.net.messages import PROTOCOL_VERSION, AnalyzerHello, Bye, Hello
from protocol.core.net.shuffle import (
    NetShufflerServer, ShuffleRound, demo_vote, make_shuffle_keys, run_analyzer,
    run_shuffle_client, run_shuffle_clients,
)
from shuffler import ShufflerEnvelope

SEED = 5


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("shufflekeys")
    tls.make_keys(root, 1)
    return root, make_shuffle_keys(root)


def _round_trip(keys, rnd, clients=None, extra=None, analyzer=True, batch_seconds=10.0,
                stage_seconds=5.0):
    """Shuffler, analyzer and clients in one loop; ``extra(port)`` runs alongside."""
    root, files = keys
    s_pub, a_pub = files.public_keys()

    async def main():
        srv = NetShufflerServer(rnd, files.secret("shuffler"), a_pub, tls.server_context(root),
                                batch_seconds=batch_seconds, stage_seconds=stage_seconds)
        await srv.start()
        ctx, pin = tls.client_context(root)
        an = (asyncio.create_task(run_analyzer("127.0.0.1", srv.port, rnd, ctx, pin,
                                               files.secret("analyzer"), s_pub,
                                               wait_seconds=30)) if analyzer else None)
        batch = asyncio.create_task(srv.run_batch())
        outs = await run_shuffle_clients(
            list(range(rnd.n)) if clients is None else clients, "127.0.0.1", srv.port, rnd,
            ctx, pin, s_pub, a_pub, files.crowd_master(),
            lambda c: demo_vote(SEED, c, rnd.candidates), wait_seconds=20)
        more = await extra(srv.port, ctx, pin) if extra is not None else None
        report = await batch
        result = await an if an is not None else None
        await srv.close()
        return outs, report, result, more

    return asyncio.run(main())


def _expected(rnd, accepted):
    votes = np.array([demo_vote(SEED, c, rnd.candidates) for c in accepted])
    return threshold_counts(rnd.spec(), np.bincount(votes, minlength=rnd.candidates))


@pytest.mark.parametrize("reveal", [True, False])
def test_a_shuffled_round_releases_the_thresholded_votes(keys, reveal):
    rnd = ShuffleRound(50, candidates=8, theta=4, reveal_counts=reveal)
    outs, report, result, _ = _round_trip(keys, rnd)
    assert {o[0] for o in outs} == {"completed"}
    assert report.status == "completed" and sorted(report.accepted) == list(range(50))
    want = _expected(rnd, range(50))
    assert result["status"] == "completed" and result["passed"] == sorted(want)
    assert result["release"] == (want if reveal else None)
    # below-threshold candidates exist, and nothing about them reaches the analyzer
    assert report.receipt["dropped_by_threshold"].get("below_threshold", 0) > 0
    assert set(result["receipt"]) == {"accepted", "forwarded", "rule"}
    if not reveal:  # one representative per passing crowd
        assert result["receipt"]["forwarded"] == len(want)


def test_a_replayed_envelope_and_a_second_send_are_refused(keys):
    root, files = keys
    s_pub, a_pub = files.public_keys()
    rnd = ShuffleRound(7, candidates=3, theta=1)  # 6 positions send: open until the deadline

    async def replay(port, ctx, pin):
        # position 0 tries again first: a repeat must not count as a position's attempt
        again = await run_shuffle_client(0, "127.0.0.1", port, rnd, ctx, pin, s_pub, a_pub,
                                         files.crowd_master(), 1)
        envelope = rnd.encoder(s_pub, a_pub).encode_envelope(b"\0\0\0\1", b"\1" * 16)
        outcomes = []
        for position in (4, 5):  # the same envelope from two positions
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                 server_hostname=tls.SERVER_NAME)
            w.write(frame(Hello(PROTOCOL_VERSION, position)) + frame(envelope))
            await w.drain()
            outcomes.append(await r.read())
            w.close()
        return outcomes, again

    _, report, result, (raw, again) = _round_trip(keys, rnd, clients=[0, 1, 2, 3],
                                                  extra=replay, batch_seconds=3)
    assert again[0] == "refused" and "already sent" in again[1]
    # 6 of 7 positions had their attempt: the repeat did not close the batch early
    assert report.wall_seconds >= 2.5
    assert 4 in report.accepted and 5 not in report.accepted
    assert (5, "duplicate_envelope") in report.refused
    assert result["status"] == "completed" and result["contributions"] == 5


def test_garbage_an_oversized_header_and_another_rounds_envelope_are_refused(keys):
    root, files = keys
    s_pub, a_pub = files.public_keys()
    rnd = ShuffleRound(4, candidates=3, theta=1)
    other = ShuffleRound(4, candidates=3, theta=1, round=1)

    async def attack(port, ctx, pin):
        async def send(position, data):
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                 server_hostname=tls.SERVER_NAME)
            w.write(frame(Hello(PROTOCOL_VERSION, position)) + data)
            await w.drain()
            got = await asyncio.wait_for(r.read(), 10)
            w.close()
            return got

        oversized = HEADER.pack(0xFFFFFFFF, ShufflerEnvelope.TAG)
        wrong_round = frame(other.encoder(s_pub, a_pub).encode_envelope(b"\0\0\0\0",
                                                                        b"\2" * 16))
        garbage = HEADER.pack(40, ShufflerEnvelope.TAG) + os.urandom(40)
        return [await send(1, oversized), await send(2, wrong_round), await send(3, garbage)]

    outs, report, result, raw = _round_trip(keys, rnd, clients=[0], extra=attack,
                                            batch_seconds=3)
    assert report.accepted == [0]
    reasons = dict((c, r) for c, r in report.refused if c is not None)
    assert set(reasons) == {1, 2, 3} and all(r.startswith("no envelope") for r in reasons.values())
    assert "largest legal" in reasons[1]
    assert result["status"] == "completed" and result["contributions"] == 1


def test_a_batch_below_its_minimum_is_dropped_and_the_analyzer_told(keys):
    rnd = ShuffleRound(10, candidates=3, theta=1, min_batch=8)
    _, report, result, _ = _round_trip(keys, rnd, clients=[0, 1, 2], batch_seconds=2)
    assert report.status == "aborted" and report.reason.startswith("batch_too_small")
    assert result["status"] == "aborted" and result["release"] is None


def test_without_an_analyzer_the_shuffler_aborts(keys):
    rnd = ShuffleRound(3, candidates=3, theta=1)
    _, report, _, _ = _round_trip(keys, rnd, analyzer=False, stage_seconds=1)
    assert report.status == "aborted" and report.reason == "no analyzer connected"


def test_the_analyzer_refuses_a_batch_for_another_round(keys):
    """A shuffler that forwards another round's batch: the analyzer's limits pin the
    context, so the batch is refused before it is opened."""
    root, files = keys
    s_pub, a_pub = files.public_keys()
    rnd = ShuffleRound(3, candidates=3, theta=1)
    other = ShuffleRound(3, candidates=3, theta=1, round=7)

    async def main():
        from shuffler import Shuffler

        sh = Shuffler(files.secret("shuffler"))
        ctx_other = other.encoder(s_pub, a_pub).context
        sh.open_batch(ctx_other)
        enc = other.encoder(s_pub, a_pub)
        for i in range(3):
            sh.submit(enc.encode_envelope(b"\0\0\0\1", bytes([i]) * 16))
        out = sh.close_batch(ctx_other)

        async def handle(reader, writer):
            await reader.readexactly(HEADER.size + 2)
            writer.write(frame(out.batch))
            await writer.drain()
            await asyncio.sleep(2)
            writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls.server_context(root))
        port = srv.sockets[0].getsockname()[1]
        ctx, pin = tls.client_context(root)
        res = await run_analyzer("127.0.0.1", port, rnd, ctx, pin, files.secret("analyzer"),
                                 s_pub, wait_seconds=5)
        srv.close()
        return res

    res = asyncio.run(main())
    assert res["status"] == "aborted" and res["release"] is None


def test_shuffle_keys_are_private_and_not_overwritten(tmp_path):
    files = make_shuffle_keys(tmp_path)
    for path in (files.shuffler, files.analyzer, files.crowd):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    s_pub, a_pub = files.public_keys()
    assert s_pub == files.secret("shuffler").public_key
    assert a_pub == files.secret("analyzer").public_key
    with pytest.raises(FileExistsError):
        make_shuffle_keys(tmp_path)
    files.public.write_text("{}")
    with pytest.raises(ValueError, match="fedhh-shuffle/1"):
        files.public_keys()


def test_analyzer_hello_and_round_values():
    with pytest.raises(ValueError):
        AnalyzerHello(300)
    with pytest.raises(ValueError):
        ShuffleRound(0)
    with pytest.raises(ValueError):
        ShuffleRound(5, theta=0)
    assert Bye("finished", "").status == "finished"


def test_net_run_shuffler_with_a_killed_client_process():
    from protocol.core.net.launcher import ShuffleLoopbackOptions, run_shuffle_loopback

    out = run_shuffle_loopback(ShuffleLoopbackOptions(
        # the batch waits for the killed process's clients until it closes: 15 s lets
        # the other processes start and send on a loaded machine
        clients=120, processes=4, seed=3, candidates=8, theta=4, kill=1, batch_seconds=15,
        stage_seconds=5, timeout=120))
    assert out["left_behind"] == 0 and out["killed_processes"]
    assert out["shuffler"]["status"] == "completed"
    assert len(out["shuffler"]["accepted"]) == 90
    assert out["exact"] is True and out["wrong_results"] == 0
