"""The aggregation contract suite: the same cases against every transport.

Every transport must (a) release exactly what the plaintext reference releases for the
same inputs and seed, (b) reject contributions that do not fit the spec with
ContractError, (c) abort below min_participants, and (d) for the private transports,
never put an individual contribution into the aggregating party's view.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from protocol.core.contract import (
    ABSTAIN, AggregationAborted, ContractError, Kind, Reports, RoundSpec, Transport, Vectors,
    Votes,
)
from protocol.core.transports import get_transport

TRANSPORTS = ["plain", "secagg", "shuffler", "shuffler-blinded", "threshold"]
# the parties that must not see an individual vote, per transport name
PRIVATE_PARTIES = {"secagg": ("server",), "shuffler": ("shuffler", "shuffler2"),
                   "threshold": ("server", "helper1", "helper2")}


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    if request.param == "shuffler-blinded":  # Prochlo's two shufflers, blinded crowd ids
        return get_transport("shuffler", blinded_crowds=True)
    return get_transport(request.param)


def _run(t: Transport, spec: RoundSpec, contrib: Any, seed: int = 7):
    return t.run_round(spec, contrib, np.random.default_rng(seed))


def _vote_case(n: int = 40, k: int = 5, seed: int = 3) -> tuple[RoundSpec, Votes]:
    rng = np.random.default_rng(seed)
    spec = RoundSpec("contract", 1, Kind.VOTE, candidates=tuple(f"c{i}" for i in range(k)),
                     theta=6, min_participants=3)
    choice = rng.choice(np.arange(-1, k), size=n, p=[0.1, 0.4, 0.3, 0.1, 0.05, 0.05])
    return spec, Votes(choice.astype(np.int64))


def test_vote_release_matches_plain(transport: Transport) -> None:
    spec, votes = _vote_case()
    ref = _run(get_transport("plain"), spec, votes).release
    got = _run(transport, spec, votes).release
    assert got.same_as(ref), (dict(got.counts or {}), dict(ref.counts or {}))
    assert ref.counts and all(c >= 6 for c in ref.counts.values())


def test_vote_release_without_threshold(transport: Transport) -> None:
    spec, votes = _vote_case()
    spec = RoundSpec(spec.task, spec.round, Kind.VOTE, candidates=spec.candidates, theta=None)
    ref = _run(get_transport("plain"), spec, votes).release
    got = _run(transport, spec, votes).release
    assert got.same_as(ref)
    assert sum(ref.counts.values()) == int((votes.choice >= 0).sum())


def test_all_abstain(transport: Transport) -> None:
    spec, _ = _vote_case()
    votes = Votes(np.full(10, ABSTAIN, dtype=np.int64))
    got = _run(transport, spec, votes).release
    assert dict(got.counts or {}) == {} and got.contributions == 10


def test_vector_sum(transport: Transport) -> None:
    rng = np.random.default_rng(5)
    spec = RoundSpec("contract", 2, Kind.VECTOR, dim=16, modulus=1 << 16)
    vals = Vectors(rng.integers(0, 1 << 16, size=(12, 16), dtype=np.uint64))
    ref = _run(get_transport("plain"), spec, vals).release
    got = _run(transport, spec, vals).release
    assert got.same_as(ref)


def test_reports(transport: Transport) -> None:
    spec = RoundSpec("contract", 3, Kind.REPORT, report_size=8)
    payloads = Reports(tuple(bytes([i % 7]) * 8 for i in range(30)))
    if transport.name in ("secagg", "threshold"):
        with pytest.raises(ContractError):
            _run(transport, spec, payloads)
        return
    got = _run(transport, spec, payloads).release
    assert sorted(got.reports) == sorted(payloads.payloads)


def test_bad_contributions_rejected(transport: Transport) -> None:
    spec, _ = _vote_case()
    with pytest.raises(ContractError):
        _run(transport, spec, Votes(np.array([0, 9], dtype=np.int64)))
    with pytest.raises(ContractError):
        _run(transport, spec, Vectors(np.zeros((3, 2), dtype=np.uint64)))
    vspec = RoundSpec("contract", 2, Kind.VECTOR, dim=4, modulus=16)
    with pytest.raises(ContractError):
        _run(transport, vspec, Vectors(np.full((3, 4), 16, dtype=np.uint64)))


def test_min_participants(transport: Transport) -> None:
    spec, _ = _vote_case()
    with pytest.raises(AggregationAborted):
        _run(transport, spec, Votes(np.array([0, 1], dtype=np.int64)))


def _arrays(obj: Any) -> Iterator[np.ndarray]:
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)


def test_private_views_hold_no_individual_vote(transport: Transport) -> None:
    if transport.name not in PRIVATE_PARTIES:
        pytest.skip("the plaintext reference sees every vote by design")
    spec, votes = _vote_case()
    res = _run(transport, spec, votes)
    views = [res.views[p] for p in PRIVATE_PARTIES[transport.name] if p in res.views]
    assert views
    onehot = np.zeros((votes.choice.size, spec.domain_size), dtype=np.uint64)
    rows = np.flatnonzero(votes.choice >= 0)
    onehot[rows, votes.choice[rows]] = 1
    for arr in _arrays(views):
        assert not (arr.shape == votes.choice.shape and np.array_equal(arr, votes.choice))
        assert not (arr.shape == onehot.shape and np.array_equal(arr, onehot))
        for row in np.atleast_2d(arr) if arr.ndim == 2 and arr.shape[1] == spec.domain_size else []:
            assert not (row.sum() == 1 and row.max() == 1), "an unmasked one-hot vote is visible"
    text = repr(views).encode()
    for cand in spec.candidates:
        assert f"'{cand}'".encode() not in text, f"candidate {cand} appears in the {transport.name} view"


def test_cost_reported(transport: Transport) -> None:
    spec, votes = _vote_case()
    cost = _run(transport, spec, votes).cost
    assert cost.bytes_up > 0 and cost.cpu_seconds and all(v >= 0 for v in cost.cpu_seconds.values())
