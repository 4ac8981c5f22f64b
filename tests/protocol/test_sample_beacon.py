"""The sample beacon: commit-then-reveal among the committee, the sample every device
recomputes, and TrieHH's rounds over it (protocol.core.sample_beacon)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.triehh import TrieHH, TrieHHConfig, encode_population, run_triehh
from protocol.core.contract import AggregationAborted
from protocol.core.sample_beacon import (
    MEMBERS, BeaconTranscript, Sample, SampleRejected, beacon_context, check_sample,
    commitment, run_beacon, sample_users,
)
from protocol.core.transports.plain import PlainTransport
from protocol.core.transports.threshold import Deviation, ThresholdTransport
from protocol.studies.attacks import load_catalogue, run_attack


def _values(rng: np.random.Generator) -> dict[str, bytes]:
    return {m: rng.bytes(32) for m in MEMBERS}


def test_sample_is_a_sorted_distinct_subset_of_the_right_size() -> None:
    seed = bytes(range(32))
    for n, m in ((1, 1), (10, 10), (1000, 1), (1000, 37), (100_000, 632)):
        u = sample_users(seed, n, m)
        assert u.dtype == np.int64 and u.shape == (m,)
        assert np.all(np.diff(u) > 0) and u.min() >= 0 and u.max() < n
        assert np.array_equal(u, sample_users(seed, n, m))  # every device gets the same


def test_sample_inclusion_is_uniform() -> None:
    """Over 4,000 seeds each of 50 users is sampled about 4,000 * 10 / 50 times: a
    chi-square test of uniform inclusion, and the pair counts of two users (which a
    uniform m-subset makes m(m-1)/(n(n-1)))."""
    n, m, runs = 50, 10, 4000
    rng = np.random.default_rng(7)
    hits = np.zeros(n)
    pair = 0
    for _ in range(runs):
        u = sample_users(rng.bytes(32), n, m)
        hits[u] += 1
        pair += int(0 in u and 1 in u)
    assert stats.chisquare(hits).pvalue > 1e-3
    expected_pair = runs * m * (m - 1) / (n * (n - 1))
    assert abs(pair - expected_pair) < 5 * np.sqrt(expected_pair)


def test_bad_sizes_are_refused() -> None:
    for n, m in ((10, 0), (10, 11), (0, 0)):
        with pytest.raises(ValueError):
            sample_users(bytes(32), n, m)
        with pytest.raises(ValueError):
            beacon_context("t", 1, n, m)
    with pytest.raises(ValueError):
        sample_users(bytes(31), 10, 3)


def test_a_revealed_value_must_open_its_commitment() -> None:
    ctx = beacon_context("triehh", 3, 1000, 40)
    values = _values(np.random.default_rng(1))
    t = run_beacon(ctx, values)
    assert t.commitments == tuple(commitment(ctx, m, values[m]) for m in MEMBERS)
    for who in MEMBERS:
        with pytest.raises(SampleRejected) as e:
            run_beacon(ctx, values, lambda m, v, who=who: bytes(32) if m == who else v)
        assert e.value.reason == "sample_commitment_mismatch" and who in str(e.value)
    with pytest.raises(SampleRejected) as e:
        run_beacon(ctx, values, lambda m, v: v[:31])
    assert e.value.reason == "sample_malformed"


def test_a_device_refuses_another_rounds_beacon_or_another_sample() -> None:
    ctx = beacon_context("triehh", 3, 1000, 40)
    t = run_beacon(ctx, _values(np.random.default_rng(2)))
    good = Sample(sample_users(t.seed, 1000, 40), t, 1000, committee=True)
    check_sample(good, "triehh", 3, 40)
    cases = {
        "sample_wrong_round": (good, "triehh", 4),
        "sample_not_from_seed": (dataclasses.replace(good, users=np.roll(good.users, 1)),
                                 "triehh", 3),
    }
    forged = good.users.copy()
    forged[0] = np.setdiff1d(np.arange(1000), forged)[0]
    cases["sample_not_from_seed "] = (dataclasses.replace(good, users=np.sort(forged)),
                                      "triehh", 3)
    other_seed = BeaconTranscript(t.context, t.commitments, t.values, bytes(32))
    cases["sample_not_from_seed  "] = (dataclasses.replace(good, beacon=other_seed),
                                       "triehh", 3)
    for reason, (sample, task, rnd) in cases.items():
        with pytest.raises(SampleRejected) as e:
            check_sample(sample, task, rnd, 40)
        assert e.value.reason == reason.strip()


def _population() -> tuple[object, UnitAlphabet]:
    a = UnitAlphabet("abc", 1)
    vocab = ["ab", "abc", "ba", "c"]
    items = np.repeat(np.arange(4), [200, 120, 60, 20])
    return encode_population(vocab, np.arange(401), items, np.ones(400, np.int64), a, 4), a


def test_triehh_over_the_committee_releases_plains_trie_and_records_the_beacon() -> None:
    data, a = _population()
    cfg = TrieHHConfig(4, 2.0, 4)
    plain = run_triehh(data, a, cfg, PlainTransport(), np.random.default_rng(5))
    tr = ThresholdTransport(simulate=True)
    views: list[dict] = []
    original = tr.run_round

    def keep(spec, contributions, rng):  # noqa: ANN001, ANN202
        res = original(spec, contributions, rng)
        views.append(res.views)
        return res

    tr.run_round = keep  # type: ignore[method-assign]
    committee = run_triehh(data, a, cfg, tr, np.random.default_rng(5))
    assert committee.heavy_hitters == plain.heavy_hitters and committee.prefixes == plain.prefixes
    assert views and all(v["helper1"]["sample_beacon"]["seed"] ==
                         v["server"]["sample_beacon"]["seed"] for v in views)


def test_with_os_randomness_the_server_cannot_predict_the_sample() -> None:
    """Two committee draws with the same mechanism seed differ (each member's value is
    its own OS draw); the server-drawn sample of the plain transport repeats."""
    draws = [ThresholdTransport().draw_sample("t", 1, 10_000, 200, np.random.default_rng(0))
             for _ in range(2)]
    assert not np.array_equal(draws[0].users, draws[1].users)
    plain = [PlainTransport().draw_sample("t", 1, 10_000, 200, np.random.default_rng(0))
             for _ in range(2)]
    assert np.array_equal(plain[0].users, plain[1].users) and not plain[0].committee


@pytest.mark.parametrize("who", MEMBERS)
def test_any_member_changing_its_value_aborts_before_any_vote(who: str) -> None:
    data, a = _population()
    tr = ThresholdTransport(simulate=True, deviation=Deviation(
        beacon_reveal=lambda m, v: bytes(32) if m == who else v))
    mech = TrieHH(data, a, TrieHHConfig(4, 2.0, 4), tr, np.random.default_rng(1))
    with pytest.raises(AggregationAborted) as e:
        list(mech.rounds())
    assert e.value.reason == "committee_sample_commitment_mismatch"
    assert who in e.value.detail and not mech._records


@pytest.mark.parametrize("name", ["threshold.server_forces_device_into_sample",
                                  "threshold.server_redraws_sample",
                                  "threshold.server_reuses_sample",
                                  "threshold.server_reveals_other_beacon_value",
                                  "threshold.helper_reveals_other_beacon_value",
                                  "threshold.server_alters_helper_exchange"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampling_and_exchange_attacks_are_caught(name: str, seed: int) -> None:
    load_catalogue()
    out = run_attack(name, seed)
    assert out.passed, out.observed


def test_the_forced_device_is_a_real_deviation_over_plain() -> None:
    """The same forcing server over the plaintext transport runs (nobody checks): the
    committee's abort is the check's doing, not a broken mechanism."""
    from protocol.studies.attacks.threshold_attacks import _forcing_class

    data, a = _population()
    mech = _forcing_class()(data, a, TrieHHConfig(4, 2.0, 4), PlainTransport(),
                            np.random.default_rng(0))
    assert list(mech.rounds())


def test_two_runs_over_one_committee_are_two_jobs() -> None:
    """A second TrieHH run over the same transport (``fedhh eval`` reuses it) starts a
    new job: its rounds count from 1 again, and the restart is in every member's view."""
    data, a = _population()
    cfg = TrieHHConfig(4, 2.0, 4)
    tr = ThresholdTransport(simulate=True)
    first = run_triehh(data, a, cfg, tr, np.random.default_rng(3))
    second = run_triehh(data, a, cfg, tr, np.random.default_rng(3))
    assert first.heavy_hitters == second.heavy_hitters and tr.jobs_started == {"triehh": 2}
