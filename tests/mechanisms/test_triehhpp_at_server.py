"""TrieHH++'s server-only path (clients that vote themselves): the same release as the
in-process run when the clients replay the participation from the seed, and the
keyed participation a deployment uses instead (hidden from the server)."""
from __future__ import annotations

import numpy as np
import pytest

from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.sampling import plan_poisson_sampling
from mechanisms.triehhpp import (
    ABSTAIN, ReplayedParticipation, TrieHHPPError, TrieHHPPParams, client_vote,
    keyed_participation, run_triehhpp, run_triehhpp_at_server, spawn_rngs,
)
from protocol.core.contract import AtClients, Votes
from protocol.core.transports.plain import PlainTransport

ALPHA = UnitAlphabet("abcdefgh")


class VotingClients(PlainTransport):
    """The plaintext transport with clients that vote themselves: each contacted
    client decides with ``takes_part(level, user)`` and votes with ``client_vote``."""

    contributions_at_clients = True

    def __init__(self, units: np.ndarray, takes_part) -> None:  # noqa: ANN001
        super().__init__()
        self.units, self.takes_part, self.seen = units, takes_part, []

    def run_round(self, spec, contributions, rng):  # noqa: ANN001, ANN201
        assert isinstance(contributions, AtClients)
        users = contributions.users
        self.seen.append(users.copy())
        choice = np.array([client_vote(self.units[u], spec.round, spec.candidates,
                                       ALPHA.labels) if self.takes_part(spec.round, int(u))
                           else ABSTAIN for u in users], dtype=np.int64)
        return super().run_round(spec, Votes(choice), rng)


def _population(seed: int, L: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    words = ["abc"] * 120 + ["abd"] * 60 + ["h"] * 50 + ["bcd"] * 25 + \
        ["".join(rng.choice(list("abcdefgh"), size=4)) for _ in range(245)]
    rng.shuffle(words)
    return ALPHA.encode(words, L)


@pytest.mark.parametrize("seed", [0, 3])
def test_server_only_path_releases_what_the_simulation_releases(seed) -> None:  # noqa: ANN001
    L = 5
    um = _population(seed, L)
    params = TrieHHPPParams(um.shape[0], 150.0, 8, L, c=3.0)
    sim = run_triehhpp(um, ALPHA.num_units, ALPHA.labels, params, PlainTransport(),
                       *spawn_rngs(seed), terminal=ALPHA.terminal)
    replay = ReplayedParticipation(params.plan(), spawn_rngs(seed)[0])
    clients = VotingClients(um, replay.takes_part)
    srv = run_triehhpp_at_server(ALPHA.num_units, ALPHA.labels, params, clients,
                                 *spawn_rngs(seed), terminal=ALPHA.terminal)
    assert [(e.label, e.count) for e in srv.node_estimates()] == \
        [(e.label, e.count) for e in sim.node_estimates()]
    assert len(sim.heavy_hitters()) >= 2
    assert [lv.contacted for lv in srv.levels] == [lv.contacted for lv in sim.levels]
    # the server learns neither who took part nor how many
    assert all(lv.participants == -1 and lv.voters == -1 for lv in srv.levels)
    assert all(np.all(np.diff(u) > 0) for u in clients.seen)  # ascending: order hides nothing


def test_server_only_path_refuses_a_transport_that_needs_the_votes() -> None:
    params = TrieHHPPParams(10, 5.0, 2, 3)
    with pytest.raises(TrieHHPPError, match="needs the votes"):
        run_triehhpp_at_server(ALPHA.num_units, ALPHA.labels, params, PlainTransport(),
                               *spawn_rngs(0))


def test_client_vote_matches_its_prefix() -> None:
    row = ALPHA.encode(["abc"], 5)[0]
    assert client_vote(row, 1, ["aa", "ab", "ba"], ALPHA.labels) == 1
    assert client_vote(row, 3, ["abc$", "abd$"], ALPHA.labels) == 0
    assert client_vote(row, 4, ["abc$a"], ALPHA.labels) == ABSTAIN  # past its end
    assert client_vote(row, 0, ["b"], ALPHA.labels) == ABSTAIN
    with pytest.raises(TrieHHPPError):
        client_vote(row, 5, ["a"], ALPHA.labels)


def test_keyed_participation_is_the_exact_scheme_and_needs_the_key() -> None:
    n, m = 10_000, 40.0
    plan = plan_poisson_sampling(n, m, 3.0)
    contacted = list(range(1000, 1000 + plan.contacted))
    key = bytes(range(32))
    ks = []
    for r in range(50):
        ctx = f"triehhpp:{r}".encode()
        part = [keyed_participation(key, plan, ctx, contacted, u) for u in contacted]
        ks.append(sum(part))
        # every contacted client computes the same K: exactly the first K by its tag
    ks = np.array(ks)
    # K ~ Bin(n, m/n) truncated at s: mean m, sd about sqrt(m)
    assert abs(ks.mean() - m) < 4 * np.sqrt(m) / np.sqrt(len(ks))
    assert 0.5 * m < ks.var() < 2.0 * m
    # another key (the server's guess) draws an unrelated set
    a = [keyed_participation(key, plan, b"triehhpp:0", contacted, u) for u in contacted]
    b = [keyed_participation(bytes(32), plan, b"triehhpp:0", contacted, u) for u in contacted]
    assert a != b
    with pytest.raises(TrieHHPPError, match="16 bytes"):
        keyed_participation(b"short", plan, b"x", contacted, contacted[0])
    with pytest.raises(TrieHHPPError, match="not contacted"):
        keyed_participation(key, plan, b"x", contacted, 5)
    with pytest.raises(TrieHHPPError, match="distinct"):
        keyed_participation(key, plan, b"x", contacted + contacted[:1], contacted[0])


def test_replayed_participation_refuses_a_user_the_seed_did_not_contact() -> None:
    plan = plan_poisson_sampling(1000, 20.0, 1.0)
    rep = ReplayedParticipation(plan, spawn_rngs(1)[0])
    sample_users = set(range(1000))
    hits = [u for u in sample_users if _contacted(rep, u)]
    assert len(hits) == plan.contacted
    outside = next(u for u in sample_users if u not in hits)
    with pytest.raises(TrieHHPPError, match="not contacted"):
        rep.takes_part(0, outside)


def _contacted(rep: ReplayedParticipation, u: int) -> bool:
    try:
        rep.takes_part(0, u)
    except TrieHHPPError:
        return False
    return True
