"""What a simulated client keeps between rounds stays small: per-neighbour state lives in
fixed-size records (one byte of status, 70 bytes of held shares per neighbour), not in
dicts of small objects, which cost about three times as much (docs/scaling.md,
"Overhead and memory")."""
from __future__ import annotations

import gc
import tracemalloc

import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import SecAggSimulation
from protocol.core.secagg_shards import SeededRows
from secagg.client import ClientState, SecAggClient
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.params import find_params
from secagg.state import SessionConfig


@pytest.mark.parametrize("threat", ["semi-honest", "malicious"])
def test_a_client_holds_about_its_shares_and_little_more(threat: str) -> None:
    n, dim = 120, 16
    params = find_params(n, graph="harary", dropout_rate=0.05, threat=threat)
    rand = insecure_deterministic_randomness(1)
    cfg = SessionConfig(params, tuple(range(n)), b"memory", dim, 1 << 32,
                        malicious=threat == "malicious",
                        server_nonce=rand.token_bytes(FRESH_NONCE_BYTES))
    tracemalloc.start()
    try:
        sim = SecAggSimulation(cfg, SeededRows(1, dim, 1 << 32), rand=rand)
        sim.start()
        sim.step()
        sim.step()  # rounds 0 to 2: every client holds a share pair of each peer
        assert all(c.state in (ClientState.AWAIT_UNMASK, ClientState.AWAIT_CONSISTENCY)
                   for c in sim.clients)
        k = cfg.degree
        held = 2 * 35  # one b-share and one s-share, 35 bytes each, per neighbour
        assert all(len(c._held_b) == len(c.neighbours) == k for c in sim.clients)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for c in sim.clients:  # free what each client keeps, and count it
            for name in type(c).__slots__:
                if name != "__weakref__" and hasattr(c, name):
                    delattr(c, name)
        gc.collect()
        per_client = (before - tracemalloc.get_traced_memory()[0]) / n
    finally:
        tracemalloc.stop()
    # the shares themselves, plus a fixed allowance and 30 bytes per neighbour for
    # everything else (status, neighbour tuple); dicts of bytes objects for the shares,
    # keys and statuses took about 8.4 KB at k = 22 and 11 KB at k = 38
    assert per_client < held * k + 30 * k + 1200, (k, per_client)
    assert not hasattr(sim.clients[0], "__dict__") and type(sim.clients[0]) is SecAggClient
