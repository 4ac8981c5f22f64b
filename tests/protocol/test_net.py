"""The network prototype in one event loop: framing bounds, the handshake, TLS pinning,
deadlines, and what a misbehaving peer can and cannot do (real sockets, real TLS)."""
from __future__ import annotations

import asyncio
import struct

import numpy as np
import pytest

from protocol.core import codec
from protocol.core.net import tls
from protocol.core.net.client import run_client, run_clients
from protocol.core.net.frames import HEADER, FrameError, frame, parse_header, read_message
from protocol.core.net.launcher import expected_sum
from protocol.core.net.messages import (
    PROTOCOL_VERSION, Bye, Hello, Welcome, hello_limits, welcome_limits,
)
from protocol.core.net.server import NetSecAggServer
from protocol.core.net.session import NetSessionSpec, SessionRejected, demo_input
from protocol.core import wire_secagg
from secagg.messages import AdvertiseKeys

SEED = 3


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    tls.make_keys(root, 12)
    return root


def _read(data: bytes, limits):
    """``read_message`` on a stream holding exactly ``data``."""
    async def main():
        r = asyncio.StreamReader()
        r.feed_data(data)
        r.feed_eof()
        return await read_message(r, limits)
    return asyncio.run(main())


# ------------------------------------------------------------------ frames and messages
def test_frame_roundtrip_and_header_tag():
    f = frame(Hello(PROTOCOL_VERSION, 7))
    msg, size = _read(f, hello_limits())
    assert msg == Hello(PROTOCOL_VERSION, 7) and size == len(f)


def test_oversized_frame_is_refused_from_its_header_alone():
    limits = hello_limits()
    biggest = limits.max_frame(Hello.TAG)
    with pytest.raises(FrameError, match="largest legal"):
        parse_header(HEADER.pack(biggest + 1, Hello.TAG), limits)
    # a header claiming 4 GiB: refused without waiting for (or buffering) any body
    with pytest.raises(FrameError):
        _read(HEADER.pack(0xFFFFFFFF, Hello.TAG), limits)


def test_unaccepted_tag_and_mismatched_body_are_refused():
    with pytest.raises(FrameError, match="not accepted"):
        parse_header(HEADER.pack(10, Welcome.TAG), hello_limits())
    body = codec.encode(Bye("refused", "x"))
    # header says Welcome, body holds a Bye: both accepted by the client's limits
    bad = HEADER.pack(len(body), Welcome.TAG) + body
    with pytest.raises(FrameError, match="header says tag"):
        _read(bad, welcome_limits())


def test_garbage_body_is_a_frame_error():
    bad = HEADER.pack(5, Hello.TAG) + b"\xc1\xc1\xc1\xc1\xc1"
    with pytest.raises(FrameError):
        _read(bad, hello_limits())


def test_truncated_stream_is_a_disconnect():
    f = frame(Hello(PROTOCOL_VERSION, 1))
    with pytest.raises(asyncio.IncompleteReadError):
        _read(f[:-1], hello_limits())


@pytest.mark.parametrize("fields", [
    dict(version=1, client=-1), dict(version=256, client=0), dict(version=1, client="0"),
])
def test_hello_validation(fields):
    with pytest.raises(ValueError):
        Hello(**fields)


def test_welcome_validation():
    spec = NetSessionSpec(10, dim=4)
    w = spec.welcome(b"\x01" * 32, 1.0)
    assert codec.decode(codec.encode(w), limits=welcome_limits()) == w
    with pytest.raises(ValueError):
        Welcome(**{**{f: getattr(w, f) for f in w.__slots__}, "server_nonce": b"short"})
    with pytest.raises(ValueError):
        Welcome(**{**{f: getattr(w, f) for f in w.__slots__}, "graph": "ring"})


# ------------------------------------------------------------------ the client's policy
def test_client_refuses_a_weaker_session():
    mine = NetSessionSpec(40, dim=8)
    weaker = NetSessionSpec(40, dim=8, threat="semi-honest")
    with pytest.raises(SessionRejected) as e:
        mine.accept(weaker.welcome(b"\x02" * 32, 1.0))
    assert e.value.reason == "session_parameters_rejected"
    w = mine.welcome(b"\x02" * 32, 1.0)
    lowered = Welcome(**{**{f: getattr(w, f) for f in w.__slots__},
                         "threshold": w.threshold - 1})
    with pytest.raises(SessionRejected, match="threshold"):
        mine.accept(lowered)
    old = Welcome(**{**{f: getattr(w, f) for f in w.__slots__}, "version": 0})
    with pytest.raises(SessionRejected) as e:
        mine.accept(old)
    assert e.value.reason == "version_mismatch"
    assert mine.accept(w).server_nonce == b"\x02" * 32


def test_keys_files_and_pki(tmp_path):
    paths = tls.make_keys(tmp_path, 5)
    assert paths.key.stat().st_mode & 0o777 == 0o600
    assert paths.signing.stat().st_mode & 0o777 == 0o600
    verify, signing = tls.load_pki(tmp_path)
    assert len(verify) == len(signing) == 5
    with pytest.raises(FileExistsError):
        tls.make_keys(tmp_path, 5)
    paths.signing.write_bytes(b"\x93\xc4\x01a")  # three entries of the wrong size
    with pytest.raises(ValueError):
        tls.load_pki(tmp_path)


# ------------------------------------------------------------------ sessions over TLS
def _expected(spec: NetSessionSpec, clients) -> np.ndarray:
    return expected_sum(SEED, sorted(clients), spec.dim, spec.modulus)


async def _session(keys, spec, *, stage=5.0, join=5.0, clients=None, stall=(), stall_at=None,
                   extra=None, delay=0.0):
    verify, signing = tls.load_pki(keys)
    server = NetSecAggServer(spec, tls.server_context(keys),
                             verify_keys=verify[:spec.n] if spec.malicious else None,
                             stage_seconds=stage, join_seconds=join)
    await server.start()
    ctx, pin = tls.client_context(keys)
    report_task = asyncio.create_task(server.run_session())
    ids = list(range(spec.n)) if clients is None else clients

    async def later(job):
        await asyncio.sleep(delay)
        return await job

    jobs = [later(run_clients(ids, "127.0.0.1", server.port, spec, ctx, pin,
                        lambda c: demo_input(SEED, c, spec.dim, spec.modulus),
                        signing_keys=signing, verify_keys=verify[:spec.n],
                        wait_seconds=30, stall=stall, stall_at=stall_at))]
    if extra is not None:
        jobs.append(extra(server.port))
    outs = await asyncio.gather(*jobs)
    report = await asyncio.wait_for(report_task, 60)
    await server.close()
    return report, outs


@pytest.mark.parametrize("threat,graph", [("malicious", "harary"), ("semi-honest", "complete"),
                                          ("malicious", "complete")])
def test_session_over_tls_is_exact(keys, threat, graph):
    spec = NetSessionSpec(12, dim=16, threat=threat, graph=graph)
    report, (outs,) = asyncio.run(_session(keys, spec))
    assert report.status == "completed", report.reason
    assert {o.status for o in outs} == {"completed"}
    assert report.sets["U3"] == list(range(12))
    np.testing.assert_array_equal(report.result, _expected(spec, range(12)))
    assert [s.name for s in report.stages][:3] == ["advertise_keys", "share_keys",
                                                   "masked_input"]


def test_stalled_clients_become_dropouts_at_the_deadline(keys):
    spec = NetSessionSpec(12, dim=8)
    # k = 4, t = 3 at n = 12: one neighbour of each client may go
    report, (outs,) = asyncio.run(_session(keys, spec, stage=1.5, stall=[3], stall_at=2))
    assert report.status == "completed", report.reason
    assert report.sets["U3"] == [c for c in range(12) if c != 3]
    np.testing.assert_array_equal(report.result, _expected(spec, report.sets["U3"]))
    masked = [s for s in report.stages if s.name == "masked_input"][0]
    assert masked.expected == 12 and masked.received == 11 and masked.seconds >= 1.4
    assert [o.client for o in outs if o.status == "stalled"] == [3]


def test_too_many_stalled_clients_abort_with_a_reason(keys):
    spec = NetSessionSpec(12, dim=8)
    report, (outs,) = asyncio.run(_session(keys, spec, stage=1.0,
                                           stall=list(range(6)), stall_at=2))
    assert report.status == "aborted" and report.reason == "too_few_masked_inputs"
    assert report.result is None
    assert {o.status for o in outs} == {"stalled", "aborted"}


def test_absent_clients_are_round_zero_dropouts(keys):
    spec = NetSessionSpec(12, dim=8)
    report, _ = asyncio.run(_session(keys, spec, join=1.0, clients=list(range(11))))
    assert report.joined == 11 and report.status == "completed", report.reason
    np.testing.assert_array_equal(report.result, _expected(spec, range(11)))


async def _raw(port: int, keys, hello: int, payload: bytes, *, read: bool = True) -> bytes:
    ctx, pin = tls.client_context(keys)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                   server_hostname=tls.SERVER_NAME)
    writer.write(frame(Hello(PROTOCOL_VERSION, hello)))
    got = b""
    if read:
        got = await asyncio.wait_for(reader.read(HEADER.size), 5)
    writer.write(payload)
    await writer.drain()
    rest = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    writer.close()
    return got + rest


@pytest.mark.parametrize("payload", [
    HEADER.pack(0xFFFFFFF0, AdvertiseKeys.TAG),            # oversized: refused by its header
    HEADER.pack(40, AdvertiseKeys.TAG) + b"\xc1" * 40,      # garbage body
    HEADER.pack(3, 999) + b"abc",                            # a tag nobody accepts
])
def test_a_bad_frame_closes_only_that_connection(keys, payload):
    spec = NetSessionSpec(12, dim=8)

    async def intruder(port: int) -> bytes:
        return await _raw(port, keys, 11, payload)

    # join 1.5 s: the session waits that long for the refused 12th (5 s by default); the
    # 11 in-process clients join within about 0.3 s
    report, (outs, closed) = asyncio.run(
        _session(keys, spec, clients=list(range(11)), extra=intruder, join=1.5))
    assert report.status == "completed", report.reason
    assert 11 not in report.sets.get("U1", [])
    np.testing.assert_array_equal(report.result, _expected(spec, range(11)))
    assert any(c == 11 and "refused frame" in r for c, r in report.refused)


def test_a_taken_position_is_refused_and_impersonation_fails(keys):
    spec = NetSessionSpec(12, dim=8)

    async def twin(port: int) -> object:
        await asyncio.sleep(0.3)  # client 4 has joined; the session waits for 11
        ctx, pin = tls.client_context(keys)
        verify, signing = tls.load_pki(keys)
        return await run_client(4, "127.0.0.1", port, spec, ctx, pin,
                                demo_input(SEED, 4, 8, spec.modulus),
                                signing_key=signing[4], verify_keys=verify, wait_seconds=10)

    report, (outs, dup) = asyncio.run(_session(keys, spec, extra=twin, join=1.0,
                                               clients=list(range(11))))
    assert dup.status == "refused" and "taken" in dup.reason
    assert report.status == "completed"
    np.testing.assert_array_equal(report.result, _expected(spec, range(11)))


def test_a_message_out_of_turn_drops_the_sender(keys):
    spec = NetSessionSpec(12, dim=8)
    extra_frame = frame(Hello(PROTOCOL_VERSION, 11))  # not a session message: wrong tag

    async def chatty(port: int) -> bytes:
        return await _raw(port, keys, 11, extra_frame)

    report, _ = asyncio.run(_session(keys, spec, clients=list(range(11)), extra=chatty,
                                     join=1.5))
    assert report.status == "completed"
    assert any(c == 11 for c, _ in report.refused)


def test_the_pin_is_checked(keys, tmp_path):
    other = tmp_path / "other"
    tls.make_keys(other, 12)
    spec = NetSessionSpec(12, dim=8)

    async def main():
        verify, _ = tls.load_pki(keys)
        server = NetSecAggServer(spec, tls.server_context(other), verify_keys=verify,
                                 stage_seconds=2, join_seconds=1)
        await server.start()
        ctx, pin = tls.client_context(keys)  # pins the certificate of `keys`
        task = asyncio.create_task(server.run_session())
        out = await run_client(0, "127.0.0.1", server.port, spec, ctx, pin,
                               demo_input(SEED, 0, 8, spec.modulus), wait_seconds=5)
        report = await task
        await server.close()
        return out, report

    out, report = asyncio.run(main())
    assert out.status == "refused" and report.joined == 0


def test_a_plaintext_connection_gets_nothing(keys):
    spec = NetSessionSpec(12, dim=8)

    async def plain(port: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(Hello(PROTOCOL_VERSION, 11)))
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return data

    report, (_, data) = asyncio.run(_session(keys, spec, clients=list(range(11)), extra=plain,
                                             join=1.5))
    assert b"fedhh" not in data and report.joined == 11


def test_a_client_that_refuses_the_session_never_sends_keys(keys):
    server_spec = NetSessionSpec(12, dim=8, threat="semi-honest")
    client_spec = NetSessionSpec(12, dim=8)

    async def main():
        server = NetSecAggServer(server_spec, tls.server_context(keys), stage_seconds=1,
                                 join_seconds=1)
        await server.start()
        ctx, pin = tls.client_context(keys)
        verify, signing = tls.load_pki(keys)
        task = asyncio.create_task(server.run_session())
        outs = await run_clients(range(12), "127.0.0.1", server.port, client_spec, ctx, pin,
                                 lambda c: demo_input(SEED, c, 8, client_spec.modulus),
                                 signing_keys=signing, verify_keys=verify, wait_seconds=10)
        report = await task
        await server.close()
        return outs, report

    outs, report = asyncio.run(main())
    assert {o.status for o in outs} == {"refused"}
    assert all("session_parameters_rejected" in o.reason for o in outs)
    assert report.status == "aborted" and report.result is None


def test_reconnect_while_joining_replaces_the_connection(keys):
    spec = NetSessionSpec(12, dim=8)

    async def flaky(port: int) -> object:
        ctx, pin = tls.client_context(keys)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                       server_hostname=tls.SERVER_NAME)
        writer.write(frame(Hello(PROTOCOL_VERSION, 11)))
        await writer.drain()
        await reader.read(HEADER.size)  # the Welcome arrived; now vanish
        writer.close()
        await asyncio.sleep(0.2)
        verify, signing = tls.load_pki(keys)
        return await run_client(11, "127.0.0.1", port, spec, ctx, pin,
                                demo_input(SEED, 11, 8, spec.modulus), signing_key=signing[11],
                                verify_keys=verify, wait_seconds=10)

    # the others join 0.5 s later, so that the session is still joining when 11 returns
    report, (outs, again) = asyncio.run(_session(keys, spec, clients=list(range(11)),
                                                 extra=flaky, delay=0.5))
    assert again.status == "completed", again.reason
    assert report.status == "completed" and report.sets["U3"] == list(range(12))
    np.testing.assert_array_equal(report.result, _expected(spec, range(12)))


def test_a_new_session_is_a_fresh_attempt(keys):
    spec = NetSessionSpec(12, dim=8)
    a, _ = asyncio.run(_session(keys, spec))
    b, _ = asyncio.run(_session(keys, spec))
    np.testing.assert_array_equal(a.result, b.result)
    # server limits are those of the session (a 2^26-entry MaskedInput cannot be framed)
    config = spec.config(b"\x00" * 32)
    assert wire_secagg.server_limits(config).max_frame(3) < 4096
