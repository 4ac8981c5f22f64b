"""The SecAgg+ neighbour graph is seeded by the round-0 transcript (``sid_1``), so the
server cannot fix it before the clients' fresh nonces are in: round 0 does not depend
on the graph, the graph changes with the clients' nonces, and a client refuses a key
list routed by any other graph (``key_from_non_neighbour``)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from protocol.core.randomness import insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, SecAggSimulation, make_config, run_secagg
from secagg import crypto, graph as graph_mod
from secagg.errors import ParameterError
from secagg.messages import KeyList
from secagg.client import SecAggClient
from secagg.server import SecAggServer
from secagg.state import AbortReason as R, ClientState, ServerState, SessionConfig

N, K, T, DIM = 16, 6, 3, 3
NONCE = bytes(range(32))


def _cfg(malicious: bool = False) -> SessionConfig:
    return make_config(N, DIM, graph="harary", degree=K, threshold=T + (1 if malicious else 0),
                       malicious=malicious, server_nonce=NONCE)


def _x() -> np.ndarray:
    return np.arange(N * DIM, dtype=np.uint64).reshape(N, DIM)


class FixedGraphServer(SecAggServer):
    """A server that routes round 1 by a graph it chose before round 0 (e.g. one it
    ground offline): it sends the honest root and paths but the key lists of its own
    graph."""

    def __init__(self, config: SessionConfig, fixed: list[tuple[int, ...]], **kw: Any) -> None:
        super().__init__(config, **kw)
        self.fixed = fixed

    def _close_keys(self, event: Any) -> Any:
        out = super()._close_keys(event)
        self.neighbours = self.fixed
        return [(u, replace(kl, entries=tuple(self._keys[v] for v in self.fixed[u]
                                              if self._in_u1[v])))
                for u, kl in out]


def test_round_0_does_not_depend_on_the_graph() -> None:
    cfg = _cfg()
    sim = SecAggSimulation(cfg, _x(), rand=insecure_deterministic_randomness(1))
    assert sim.server.neighbours == [] and all(c.neighbours == () for c in sim.clients)
    sim.start()   # every client advertised its keys: still no graph anywhere
    assert sim.server.neighbours == [] and all(c.neighbours == () for c in sim.clients)
    sim.step()    # round 0 closed: the root fixes the graph, clients check their part
    root_graph = cfg.all_neighbours(sim.server.transcript_root)
    assert sim.server.neighbours == root_graph
    assert all(c.neighbours == root_graph[i] for i, c in enumerate(sim.clients))
    # a rule naming neighbours cannot be evaluated before round 0 has closed
    with pytest.raises(ParameterError):
        Dropout({0: lambda g: g[0]}).before(0, root_graph)
    with pytest.raises(ParameterError):
        Dropout({2: lambda g: g[0]}).before(2, None)


def test_graph_follows_the_clients_nonces() -> None:
    """Same server nonce, different client randomness: different graphs (and each run's
    clients agree with its server); same client randomness: the same graph."""
    cfg = _cfg()
    runs = [run_secagg(cfg, _x(), rand=insecure_deterministic_randomness(s)) for s in (1, 2, 1)]
    assert all(r.completed for r in runs)
    graphs = [r.server.neighbours for r in runs]
    assert graphs[0] != graphs[1] and graphs[0] == graphs[2]
    for r in runs:
        assert all(c.neighbours == r.server.neighbours[i] for i, c in enumerate(r.clients))
        assert [int(v) for v in r.result] == [int(v) for v in _x().sum(axis=0)]
    # one client's fresh nonce alone moves the graph: replace client 5's randomness
    seen = []
    for seed in (3, 4):
        sim = SecAggSimulation(cfg, _x(), rand=insecure_deterministic_randomness(1))
        sim.clients[5]._rand = insecure_deterministic_randomness(seed)
        sim.start()
        sim.step()
        seen.append(sim.server.neighbours)
    assert seen[0] != seen[1]


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("fixed_by", ["base_session", "other_root"])
def test_a_graph_fixed_before_round_0_is_refused(malicious: bool, fixed_by: str) -> None:
    """The server fixes the graph before round 0: from the base session id (what the
    seed used to be, so it could be ground offline) or from any root other than the
    one it sends. Every client whose key list is not routed by the transcript's graph
    aborts with ``key_from_non_neighbour``; none reveals anything."""
    cfg = _cfg(malicious)
    seed = (crypto.hkdf(cfg.base_session, label=b"neighbour-graph", context=b"")
            if fixed_by == "base_session" else cfg.graph_seed(bytes(32)))
    fixed = [tuple(sorted(x)) for x in graph_mod.harary_graph(N, K, seed)]
    rand = insecure_deterministic_randomness(4)
    pairs = [crypto.ed25519_keypair(rand) for _ in range(N)]
    sks, vks = [sk for sk, _ in pairs], [pk for _, pk in pairs]
    server = FixedGraphServer(cfg, fixed, verify_keys=vks)
    run = run_secagg(cfg, _x(), rand=insecure_deterministic_randomness(5), server=server,
                     signing_keys=sks, verify_keys=vks)
    honest = cfg.all_neighbours(server.transcript_root)
    differ = [u for u in range(N) if fixed[u] != honest[u]]
    assert len(differ) == N      # n = 16, k = 6: no neighbourhood equal by chance here
    assert all(run.client_abort_reasons.get(u) is R.KEY_FROM_NON_NEIGHBOUR for u in differ)
    assert not run.completed and run.result is None
    assert run.server_state is ServerState.ABORTED
    assert not run.transcript.reveals


def _round_0(cfg: SessionConfig, seed: int) -> tuple[list[SecAggClient], dict[int, Any],
                                                     dict[int, KeyList]]:
    """Clients and an honest server through round 0: the clients, their AdvertiseKeys by
    position and the key lists the server would send."""
    rand = insecure_deterministic_randomness(seed)
    clients = [SecAggClient(cfg, i, _x()[i], rand.child(f"c{i}")) for i in range(N)]
    server = SecAggServer(cfg)
    adverts = {}
    for c in clients:
        (m,) = c.start()
        adverts[c.index] = m
        server.receive(m)
    return clients, adverts, dict(server.close_round())


@pytest.mark.parametrize("other", ["base_session", "other_root"])
def test_key_list_of_another_seed_is_refused_by_the_client(other: str) -> None:
    """One client, one key list with the right root and path but the entries of ``N(u)``
    under another seed: the client aborts; the honest key list is accepted."""
    cfg = _cfg()
    u = 0
    clients, adverts, lists = _round_0(cfg, 7)
    kl = lists[u]
    seed = (crypto.hkdf(cfg.base_session, label=b"neighbour-graph", context=b"")
            if other == "base_session" else cfg.graph_seed(bytes(32)))
    wrong = tuple(sorted(graph_mod.neighbours_of(u, N, K, seed)))
    assert wrong != cfg.neighbours(u, kl.transcript)
    bad = replace(kl, entries=tuple(adverts[v] for v in wrong))
    assert clients[u].receive(bad) == []
    assert clients[u].state is ClientState.ABORTED
    assert clients[u].abort_reason is R.KEY_FROM_NON_NEIGHBOUR
    # the honest key list of the same attempt is accepted by a client in the same state
    clients, adverts, lists = _round_0(cfg, 7)
    assert len(clients[u].receive(lists[u])) == 1
    assert clients[u].neighbours == cfg.neighbours(u, lists[u].transcript)
