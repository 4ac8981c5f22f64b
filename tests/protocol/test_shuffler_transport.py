"""The shuffler transport fulfils the aggregation contract like the plaintext oracle."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.contract import (
    ABSTAIN, AggregationAborted, ContractError, Kind, Reports, RoundSpec, Vectors, Votes,
)
from protocol.core.transports import get_transport
from protocol.core.transports.plain import PlainTransport
from protocol.core.transports.shuffler_transport import ShufflerTransport


def _both(spec: RoundSpec, contrib: object, seed: int = 0, **kw: object):
    plain = PlainTransport().run_round(spec, contrib, np.random.default_rng(seed))
    shuf = ShufflerTransport(**kw).run_round(spec, contrib, np.random.default_rng(seed))
    return plain, shuf


CANDS = tuple(f"word{i}" for i in range(12))


@pytest.mark.parametrize("theta", [None, 1, 2, 5, 40])
def test_vote_release_equals_plain(theta: int | None) -> None:
    rng = np.random.default_rng(7)
    choice = rng.integers(ABSTAIN, len(CANDS), size=300)
    choice[:30] = 3  # one clear heavy hitter
    spec = RoundSpec("t", 2, Kind.VOTE, candidates=CANDS, theta=theta)
    plain, shuf = _both(spec, Votes(choice))
    assert shuf.release.same_as(plain.release)
    assert dict(shuf.release.counts) == dict(plain.release.counts)
    assert shuf.release.contributions == 300


def test_shuffler_view_holds_no_individual_vote() -> None:
    choice = np.array([0] * 6 + [1] * 2 + [2] + [ABSTAIN] * 3)
    spec = RoundSpec("task-x", 0, Kind.VOTE, candidates=("alpha", "beta", "gamma"), theta=3)
    res = ShufflerTransport().run_round(spec, Votes(choice), np.random.default_rng(1))
    view = res.views["shuffler"]
    assert set(view) == {"crowd_sizes", "receipt", "envelope_bytes", "bytes_forwarded"}
    # only opaque crowd ids (32 hex chars) and sizes; abstentions are crowds of one
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in view["crowd_sizes"])
    assert sorted(view["crowd_sizes"].values()) == [1, 1, 1, 1, 2, 6]
    text = repr(view).lower()
    for name in spec.candidates:
        assert name not in text
    # no per-report data at all: neither indices nor the vote array
    assert not any(isinstance(v, (np.ndarray, list, tuple)) for v in view.values())
    # the analyzer learns only the crowd that passed the threshold
    assert res.views["analyzer"]["counts"] == {"alpha": 6}
    assert dict(res.release.counts) == {"alpha": 6}


def test_same_seed_same_views_and_different_seed_different_ids() -> None:
    choice = np.array([0, 0, 1, ABSTAIN])
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=2)
    a = ShufflerTransport(simulate=True).run_round(spec, Votes(choice), np.random.default_rng(5))
    b = ShufflerTransport(simulate=True).run_round(spec, Votes(choice), np.random.default_rng(5))
    c = ShufflerTransport(simulate=True).run_round(spec, Votes(choice), np.random.default_rng(6))
    assert a.views["shuffler"]["crowd_sizes"] == b.views["shuffler"]["crowd_sizes"]
    assert set(a.views["shuffler"]["crowd_sizes"]) != set(c.views["shuffler"]["crowd_sizes"])


@pytest.mark.parametrize("modulus", [2, 7, 256, 2**16 + 1, 2**32, 2**61 - 1, 2**64])
def test_vector_release_equals_plain(modulus: int) -> None:
    rng = np.random.default_rng(modulus % 1000)
    values = rng.integers(0, min(modulus, 2**63), size=(25, 5), dtype=np.uint64)
    if modulus == 2**64:
        values[0, 0] = np.uint64(2**64 - 1)
    spec = RoundSpec("t", 0, Kind.VECTOR, dim=5, modulus=modulus)
    plain, shuf = _both(spec, Vectors(values))
    assert shuf.release.same_as(plain.release)
    # the analyzer sees individual vectors (unlike secure aggregation)
    seen = shuf.views["analyzer"]["individual_vectors"]
    assert sorted(map(tuple, seen.tolist())) == sorted(map(tuple, values.tolist()))


def test_report_release_equals_plain() -> None:
    payloads = tuple(bytes([i % 7]) * 9 for i in range(40))
    spec = RoundSpec("t", 0, Kind.REPORT, report_size=9)
    plain, shuf = _both(spec, Reports(payloads))
    assert shuf.release.same_as(plain.release)
    assert sorted(shuf.release.reports) == sorted(payloads)


def test_os_randomness_mode() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=2)
    choice = np.array([0, 0, 0, 1])
    res = ShufflerTransport(simulate=False).run_round(spec, Votes(choice),
                                                      np.random.default_rng(0))
    assert dict(res.release.counts) == {"a": 3}
    assert get_transport("shuffler").name == "shuffler"


def test_errors() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a",), theta=1, min_participants=3)
    with pytest.raises(AggregationAborted) as e:
        ShufflerTransport().run_round(spec, Votes(np.array([0, 0])), np.random.default_rng(0))
    assert e.value.reason == "too_few_participants"
    with pytest.raises(AggregationAborted):
        ShufflerTransport(min_batch_size=5).run_round(
            RoundSpec("t", 0, Kind.VOTE, candidates=("a",), theta=1),
            Votes(np.array([0, 0])), np.random.default_rng(0))
    with pytest.raises(ContractError):
        ShufflerTransport().run_round(spec, Vectors(np.zeros((3, 1), dtype=np.uint64)),
                                      np.random.default_rng(0))
    with pytest.raises(ContractError):
        ShufflerTransport().run_round(spec, Votes(np.array([0, 1, 0])), np.random.default_rng(0))
    with pytest.raises(ContractError):
        ShufflerTransport().run_round(RoundSpec("t", 0, Kind.VECTOR, dim=10000, modulus=2**64),
                                      Vectors(np.zeros((1, 10000), dtype=np.uint64)),
                                      np.random.default_rng(0))
    with pytest.raises(ValueError):
        ShufflerTransport(min_batch_size=0)


def test_cost_is_reported() -> None:
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b"), theta=1)
    res = ShufflerTransport().run_round(spec, Votes(np.array([0, 1, 1])), np.random.default_rng(0))
    assert set(res.cost.cpu_seconds) == {"clients", "shuffler", "analyzer"}
    assert res.cost.bytes_up == 3 * res.views["shuffler"]["envelope_bytes"]


@pytest.mark.slow
def test_vote_round_of_100k_matches_plain() -> None:
    rng = np.random.default_rng(5)
    cands = tuple(f"w{i}" for i in range(1000))
    choice = np.minimum(rng.zipf(1.3, 100_000) - 1, 999)
    choice[rng.random(100_000) < 0.1] = ABSTAIN
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=cands, theta=20)
    plain, shuf = _both(spec, Votes(choice))
    assert shuf.release.same_as(plain.release)


def test_workers_give_identical_results() -> None:
    rng = np.random.default_rng(3)
    choice = rng.integers(ABSTAIN, 4, size=1200)  # several client chunks
    spec = RoundSpec("t", 1, Kind.VOTE, candidates=("a", "b", "c", "d"), theta=235)
    one = ShufflerTransport(simulate=True, workers=1, client_chunk=300).run_round(spec, Votes(choice),
                                                                   np.random.default_rng(8))
    two = ShufflerTransport(simulate=True, workers=2, client_chunk=300).run_round(spec, Votes(choice),
                                                                   np.random.default_rng(8))
    plain = PlainTransport().run_round(spec, Votes(choice), np.random.default_rng(8))
    assert one.release.same_as(plain.release) and two.release.same_as(plain.release)
    assert one.views["shuffler"]["crowd_sizes"] == two.views["shuffler"]["crowd_sizes"]
    assert one.views["shuffler"]["receipt"] == two.views["shuffler"]["receipt"]
    assert two.cost.cpu_seconds["clients"] > 0 and two.cost.cpu_seconds["analyzer"] > 0
    assert 0 < len(plain.release.counts) < 4  # the threshold bites on this data
    with pytest.raises(ValueError):
        ShufflerTransport(workers=0)
    with pytest.raises(ValueError):
        ShufflerTransport(client_chunk=0)


def test_bench_command_prints_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from protocol.cli import main

    assert main(["bench", "shuffler", "--reports", "40", "--payload-bytes", "8", "--seed", "1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("encode_reports_per_s", "shuffle_reports_per_s", "analyze_reports_per_s",
                "bare_seals_per_s", "bare_opens_per_s", "overhead_ratio", "seconds",
                "peak_rss_mb"):
        assert out[key] > 0
    assert out["reports"] == 40 and out["envelope_bytes"] == 34 + 5 + 8 + 114
    assert out["acceptance_met"] == (out["overhead_ratio"] >= 0.75)
