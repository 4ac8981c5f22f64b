from __future__ import annotations

import numpy as np
import pytest

from protocol.core.contract import (
    ABSTAIN, AggregationAborted, ContractError, Kind, Reports, RoundSpec, Vectors, Votes,
)
from protocol.core.transports.plain import PlainTransport, modular_sum


def test_vote_round_releases_only_threshold_passing_candidates() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b", "c"), theta=3)
    votes = Votes(np.array([0, 0, 0, 1, 1, 2, ABSTAIN, 0]))
    res = PlainTransport().run_round(spec, votes, np.random.default_rng(0))
    assert dict(res.release.counts) == {"a": 4}
    assert res.release.contributions == 8


def test_bad_votes_are_rejected() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a",), theta=1)
    with pytest.raises(ContractError):
        PlainTransport().run_round(spec, Votes(np.array([1])), np.random.default_rng(0))
    with pytest.raises(ContractError):
        PlainTransport().run_round(spec, Vectors(np.zeros((1, 1), dtype=np.uint64)),
                                   np.random.default_rng(0))


def test_min_participants() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a",), theta=1, min_participants=3)
    with pytest.raises(AggregationAborted) as e:
        PlainTransport().run_round(spec, Votes(np.array([0, 0])), np.random.default_rng(0))
    assert e.value.reason == "too_few_participants"


@pytest.mark.parametrize("modulus", [2, 7, 2**16, 2**32, 2**61 - 1, 2**63 + 5, 2**64])
def test_modular_sum_exact(modulus: int) -> None:
    rng = np.random.default_rng(1)
    hi = min(modulus, 2**63)
    vals = rng.integers(0, hi, size=(50, 4), dtype=np.uint64)
    expect = [sum(int(x) for x in vals[:, j]) % modulus for j in range(4)]
    assert [int(x) for x in modular_sum(vals, modulus)] == expect


def test_reports_are_a_permutation() -> None:
    spec = RoundSpec("t", 0, Kind.REPORT, report_size=2)
    payloads = tuple(bytes([i, i]) for i in range(20))
    res = PlainTransport().run_round(spec, Reports(payloads), np.random.default_rng(0))
    assert sorted(res.release.reports) == sorted(payloads)


def test_release_enforces_the_rule_and_hides_counts_on_request() -> None:
    from protocol.core.contract import Release

    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=3, reveal_counts=False)
    res = PlainTransport().run_round(spec, Votes(np.array([0, 0, 0, 1])), np.random.default_rng(0))
    assert res.release.counts is None and res.release.items == ("a",)
    with pytest.raises(ContractError, match="below theta"):
        Release(spec, 4, counts={"b": 1})
    with pytest.raises(ContractError, match="not a candidate"):
        Release(spec, 4, counts={"z": 9})
