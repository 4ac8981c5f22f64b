"""Helper 2's in-process replica of the server: it checks every client message as the
server does, but keeps no round-1 ciphertexts (it routes nothing) and shares the
server's copy of the graph; its sum is the server's."""
from __future__ import annotations

import numpy as np

from protocol.core.committee.binding import MirroredServer, replay_journal
from protocol.core.net.session import NetSessionSpec
from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Envelope, run_secagg
from protocol.core.secagg_shards import SeededRows
from protocol.core import codec
from secagg import crypto
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.messages import ShareKeys
from secagg.server import SecAggServer


def _session(n: int = 40, dim: int = 6, seed: int = 5):
    spec = NetSessionSpec(n, dim=dim)   # the malicious default
    rand = insecure_deterministic_randomness(seed)
    config = spec.config(rand.token_bytes(FRESH_NONCE_BYTES))
    pairs = [crypto.ed25519_keypair(rand) for _ in range(n)]
    return config, rand, [sk for sk, _ in pairs], [pk for _, pk in pairs]


def test_the_replica_keeps_no_ciphertexts_and_sums_as_the_server():
    config, rand, sks, vks = _session()
    server = MirroredServer(config, verify_keys=vks, watched=())
    closed = []
    original = server.replica.close_round

    def close_round():  # noqa: ANN202 - what the replica's round 1 hands out
        out = original()
        closed.append((server.replica.round, out, server.replica._cts.size))
        return out

    server.replica.close_round = close_round
    run = run_secagg(config, SeededRows(2, 6, config.modulus), rand=rand,
                     signing_keys=sks, verify_keys=vks, server=server)
    assert run.completed and server.replica.routes is False and server.routes is True
    np.testing.assert_array_equal(server.replica.result, server.result)
    # the replica's round 1 closed with nothing to send, and it never held a buffer
    (after_keys, _, held_keys), (after_shares, routed, held_shares) = closed[:2]
    assert after_keys == 1 and after_shares == 2 and list(routed) == []
    assert held_keys == 0 and held_shares == 0
    # one graph, computed once, for the server and its replica
    assert server.replica.neighbours is server.neighbours


def test_the_replica_refuses_what_the_server_refuses_in_round_1():
    """A ciphertext cut short, and a message addressed to a non-neighbour: refused by
    both, so neither counts the sender in U2."""
    config, rand, sks, vks = _session(seed=6)
    server = MirroredServer(config, verify_keys=vks, watched=())
    bad = {}

    def hook(round_no, direction, envs):  # noqa: ANN001, ANN202
        if round_no != 1 or direction != "up":
            return envs
        out = []
        for e in envs:
            msg = codec.decode(e.data)
            if isinstance(msg, ShareKeys) and msg.sender in (3, 4) and not bad.get(msg.sender):
                bad[msg.sender] = True
                if msg.sender == 3:
                    cts = (msg.ciphertexts[0][:-1],) + msg.ciphertexts[1:]
                    msg = ShareKeys(3, msg.recipients, cts)
                else:
                    far = next(v for v in range(config.n)
                               if v != 4 and v not in server.neighbours[4])
                    msg = ShareKeys(4, (far,) + msg.recipients[1:], msg.ciphertexts)
                e = Envelope(e.sender, e.recipient, e.round, codec.encode(msg))
            out.append(e)
        return out

    run = run_secagg(config, SeededRows(3, 6, config.modulus), rand=rand,
                     signing_keys=sks, verify_keys=vks, server=server, adversary=hook)
    assert bad == {3: True, 4: True}
    for u in (3, 4):
        assert not server._in_u2[u] and not server.replica._in_u2[u]
    assert server._in_u2.sum() == server.replica._in_u2.sum() == config.n - 2
    if run.completed:
        np.testing.assert_array_equal(server.replica.result, server.result)


def test_a_replica_of_a_journal_routes_nothing_and_gives_the_sum():
    config, rand, sks, vks = _session(seed=7)
    server = MirroredServer(config, verify_keys=vks, watched=(), replica=False)
    run = run_secagg(config, SeededRows(4, 6, config.modulus), rand=rand,
                     signing_keys=sks, verify_keys=vks, server=server)
    assert run.completed
    np.testing.assert_array_equal(replay_journal(config, vks, server.journal), server.result)


def test_a_routing_server_holds_the_round_1_buffer():
    """The default server routes: the control for the replica's empty buffer above."""
    config, rand, sks, vks = _session(seed=8)
    server = SecAggServer(config, verify_keys=vks)
    held = []
    original = server.close_round

    def close_round():  # noqa: ANN202
        out = original()
        held.append(server._cts.size)
        return out

    server.close_round = close_round
    run = run_secagg(config, SeededRows(5, 6, config.modulus), rand=rand,
                     signing_keys=sks, verify_keys=vks, server=server)
    assert run.completed and held[0] > 0
