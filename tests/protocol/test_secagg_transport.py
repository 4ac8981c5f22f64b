"""The secure-aggregation transport fulfils the aggregation contract: same release as
the plaintext reference for the same seed, a server view without individual votes,
and a session bound to the whole round specification."""
from __future__ import annotations

import hashlib
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from protocol.core.contract import (
    ABSTAIN, AggregationAborted, ContractError, Kind, Reports, RoundSpec, Vectors, Votes,
)
from protocol.core.transports import get_transport
from protocol.core.transports.plain import PlainTransport
from protocol.core.transports.secagg_transport import SecAggTransport, spec_context, vote_modulus
from secagg import prg

CANDS = tuple(f"item{i}" for i in range(9))


@pytest.mark.parametrize("graph", ["complete", "harary"])
@pytest.mark.parametrize("malicious", [False, True])
def test_vote_release_equals_plain(graph: str, malicious: bool) -> None:
    spec = RoundSpec("task", 3, Kind.VOTE, candidates=CANDS, theta=3)
    votes = Votes(np.random.default_rng(5).integers(ABSTAIN, len(CANDS), 40))
    res = SecAggTransport(graph=graph, malicious=malicious).run_round(
        spec, votes, np.random.default_rng(11))
    plain = PlainTransport().run_round(spec, votes, np.random.default_rng(11))
    assert res.release.same_as(plain.release)
    assert res.release.contributions == 40


def test_vote_release_without_threshold_and_all_abstain() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=None)
    votes = Votes(np.full(12, ABSTAIN))
    res = SecAggTransport().run_round(spec, votes, np.random.default_rng(0))
    assert dict(res.release.counts) == {c: 0 for c in CANDS}


@pytest.mark.parametrize("modulus", [2, 1000, 1 << 32, 1 << 64])
def test_vector_release_equals_plain(modulus: int) -> None:
    spec = RoundSpec("vec", 1, Kind.VECTOR, dim=7, modulus=modulus)
    hi = min(modulus, 1 << 63)
    vals = Vectors(np.random.default_rng(2).integers(0, hi, (20, 7), dtype=np.uint64))
    res = SecAggTransport(graph="complete").run_round(spec, vals, np.random.default_rng(3))
    plain = PlainTransport().run_round(spec, vals, np.random.default_rng(3))
    assert res.release.same_as(plain.release)


def test_same_seed_same_views_and_fresh_keys_without_simulate() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=2)
    votes = Votes(np.random.default_rng(1).integers(0, len(CANDS), 15))
    a = SecAggTransport(simulate=True).run_round(spec, votes, np.random.default_rng(4))
    b = SecAggTransport(simulate=True).run_round(spec, votes, np.random.default_rng(4))
    c = SecAggTransport().run_round(spec, votes, np.random.default_rng(4))  # OS keys
    digests = lambda r: r.views["server"]["masked_input_digests"]  # noqa: E731
    assert digests(a) == digests(b) and digests(a) != digests(c)
    assert a.release.same_as(c.release)


def test_server_view_holds_no_individual_vote() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=1)
    choice = np.random.default_rng(8).integers(ABSTAIN, len(CANDS), 25)
    res = SecAggTransport().run_round(spec, Votes(choice), np.random.default_rng(9))
    server = res.views["server"]
    modulus = vote_modulus(25)
    # what a plaintext one-hot vector (or an abstention) would look like on the wire
    plain_digests = set()
    for c in range(-1, len(CANDS)):
        v = np.zeros(len(CANDS), np.uint64)
        if c >= 0:
            v[c] = 1
        plain_digests.add(hashlib.sha256(prg.pack_uints(v, modulus)).hexdigest())
    assert len(server["masked_input_digests"]) == 25
    assert not set(server["masked_input_digests"].values()) & plain_digests
    # nothing in the view is an individual vote vector; the only vector is the sum
    counts = np.bincount(choice[choice >= 0], minlength=len(CANDS))
    assert np.array_equal(server["sum"].astype(np.int64), counts)
    for key, value in server.items():
        if isinstance(value, np.ndarray) and key != "sum":
            pytest.fail(f"unexpected array {key} in the server view")
    assert "individual_votes" not in server
    assert server["U3"] == list(range(25))


def test_context_binds_candidates_task_and_round() -> None:
    base = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=2)
    others = [RoundSpec("t", 0, Kind.VOTE, candidates=("a", "c"), theta=2),
              RoundSpec("t", 0, Kind.VOTE, candidates=("b", "a"), theta=2),
              RoundSpec("u", 0, Kind.VOTE, candidates=("a", "b"), theta=2),
              RoundSpec("t", 1, Kind.VOTE, candidates=("a", "b"), theta=2),
              RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=3),
              RoundSpec("t", 0, Kind.VOTE, candidates=("ab",), theta=2)]
    contexts = {spec_context(base)} | {spec_context(s) for s in others}
    assert len(contexts) == 1 + len(others)
    spec2 = others[0]
    votes = Votes(np.zeros(10, dtype=np.int64))
    a = SecAggTransport().run_round(base, votes, np.random.default_rng(1))
    b = SecAggTransport().run_round(spec2, votes, np.random.default_rng(1))
    assert a.views["server"]["session"] != b.views["server"]["session"]


def test_reports_are_refused_and_kinds_checked() -> None:
    with pytest.raises(ContractError):
        SecAggTransport().run_round(RoundSpec("t", 0, Kind.REPORT, report_size=4),
                                    Reports((b"abcd",) * 5), np.random.default_rng(0))
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS)
    with pytest.raises(ContractError):
        SecAggTransport().run_round(spec, Vectors(np.zeros((5, 1), np.uint64)),
                                    np.random.default_rng(0))
    with pytest.raises(ContractError):
        SecAggTransport().run_round(spec, Votes(np.array([len(CANDS)] * 5)),
                                    np.random.default_rng(0))


def test_too_few_participants() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, min_participants=10)
    with pytest.raises(AggregationAborted) as e:
        SecAggTransport().run_round(spec, Votes(np.zeros(6, np.int64)),
                                    np.random.default_rng(0))
    assert e.value.reason == "too_few_participants"


def test_dropouts_release_the_survivors_sum() -> None:
    spec = RoundSpec("t", 0, Kind.VECTOR, dim=3, modulus=1 << 16)
    vals = np.random.default_rng(0).integers(0, 1 << 16, (60, 3), dtype=np.uint64)
    transport = SecAggTransport(graph="harary", dropout=0.1)
    # the parameters are planned for at most ceil(delta n) = 6 dropouts; this seed's
    # Bernoulli draw drops exactly 6, spread over rounds 0, 2, 3 and 4 (run_round's
    # first draw from its rng is the schedule). A draw of 7, as the seed used before
    # drew, leaves a client with fewer than t neighbours to unmask it when the graph
    # (from OS randomness) puts all 7 among its 16 neighbours: about 1 run in 300.
    schedule = transport.dropout_schedule(60, np.random.default_rng(15))
    assert schedule is not None
    assert sum(len(c) for c in schedule.schedule.values()) == math.ceil(0.1 * 60)
    res = transport.run_round(spec, Vectors(vals), np.random.default_rng(15))
    u3 = res.views["server"]["U3"]
    assert res.release.contributions == len(u3) < 60 and len(u3) >= 60 - 6
    assert np.array_equal(res.release.vector, vals[u3].sum(axis=0) % (1 << 16))


def _aborted_run() -> Any:
    """What the transports read of a session that aborted at the unmasking."""
    from secagg.state import AbortReason

    return SimpleNamespace(completed=False, result=None, survivors=frozenset(range(53)),
                           server_abort_reason=AbortReason.TOO_FEW_UNMASK_RESPONSES,
                           client_abort_reasons={})


@pytest.mark.parametrize("name", ["secagg", "threshold"])
def test_an_abort_beyond_the_dropout_budget_says_so(name: str, monkeypatch) -> None:
    """A session that aborts after more dropouts than the parameters' ceil(delta n)
    names both figures; within the budget, or with a schedule known only with the
    graph, the error is the server's reason and the survivors alone."""
    from protocol.core.secagg_engine import Dropout

    extra = {"committee_input": "secagg"} if name == "threshold" else {}
    transport = get_transport(name, graph="harary", dropout=0.1, **extra)
    monkeypatch.setattr(transport, "run_session", lambda *a, **k: _aborted_run())
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=1)
    votes = Votes(np.zeros(58 if name == "threshold" else 60, np.int64))
    budget = transport.session_params(60).max_dropouts
    assert budget == 6
    cases = [(Dropout({1: {1, 2, 3}, 2: {4, 5, 6, 7}}), True),
             (Dropout({0: range(6), 4: {0, 1}}), False),   # 6 distinct clients
             (Dropout({1: {1, 2, 3}, 2: lambda graph: graph[0][:4]}), False),
             (None, False)]
    for schedule, beyond in cases:
        monkeypatch.setattr(transport, "dropout_schedule", lambda n, rng, s=schedule: s)
        with pytest.raises(AggregationAborted) as e:
            transport.run_round(spec, votes, np.random.default_rng(0))
        assert e.value.reason == "secagg_too_few_unmask_responses"
        assert "survivors 53 of 60" in str(e.value)
        assert ("7 clients dropped, more than the 6 (ceil(delta n), delta = 0.1)"
                in str(e.value)) is beyond


def test_registry_and_cost() -> None:
    t = get_transport("secagg", graph="complete")
    assert isinstance(t, SecAggTransport) and t.name == "secagg"
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS)
    res = t.run_round(spec, Votes(np.zeros(8, np.int64)), np.random.default_rng(0))
    assert res.cost.bytes_up > 0 and res.cost.bytes_down > 0
    assert res.cost.cpu_seconds["server"] > 0 and res.cost.cpu_seconds["clients"] > 0
    with pytest.raises(ValueError):
        SecAggTransport(graph="ring")
    with pytest.raises(ValueError):
        SecAggTransport(dropout=1.0)


def test_vote_modulus() -> None:
    assert vote_modulus(1) == 256 and vote_modulus(255) == 256
    assert vote_modulus(256) == 512 and vote_modulus(1000) == 1024


def test_grinding_bits_raise_the_degree_the_transport_uses() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=2)
    votes = Votes(np.random.default_rng(2).integers(0, len(CANDS), 300))
    # semi-honest: at n = 300 the malicious bound is already exact at the chosen degree
    base = SecAggTransport(threat="semi-honest").run_round(spec, votes,
                                                           np.random.default_rng(1))
    ground = SecAggTransport(threat="semi-honest", grinding_bits=20).run_round(
        spec, votes, np.random.default_rng(1))
    assert ground.views["clients"]["degree"] > base.views["clients"]["degree"]
    assert ground.release.same_as(base.release)


def test_threat_model_is_malicious_by_default_and_named_in_the_view() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=2)
    votes = Votes(np.random.default_rng(2).integers(0, len(CANDS), 100))
    t = SecAggTransport()
    assert (t.threat, t.malicious) == ("malicious", True)
    res = t.run_round(spec, votes, np.random.default_rng(1))
    view = res.views["clients"]
    # n = 100 Harary: no longer k = 12, t = 6 (the semi-honest parameters)
    assert (view["threat"], view["degree"], view["threshold"]) == ("malicious", 16, 11)
    assert view["min_honest"] == 43
    semi = SecAggTransport(threat="semi-honest").run_round(spec, votes,
                                                           np.random.default_rng(1))
    assert (semi.views["clients"]["threat"], semi.views["clients"]["degree"],
            semi.views["clients"]["threshold"]) == ("semi-honest", 12, 6)
    assert SecAggTransport(malicious=False).threat == "semi-honest"
    with pytest.raises(ValueError, match="contradicts"):
        SecAggTransport(threat="semi-honest", malicious=True)
    with pytest.raises(ValueError, match="threat must be one of"):
        SecAggTransport(threat="honest")


def test_malicious_default_refuses_a_dropout_rate_it_cannot_survive() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=2)
    votes = Votes(np.random.default_rng(2).integers(0, len(CANDS), 60))
    with pytest.raises(AggregationAborted, match="no_secagg_parameters") as exc:
        SecAggTransport(dropout=0.6).run_round(spec, votes, np.random.default_rng(1))
    assert "2t > (n - 1) + ceil(gamma n)" in str(exc.value)
