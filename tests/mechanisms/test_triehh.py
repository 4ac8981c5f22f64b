"""Tests of the TrieHH mechanism (mechanisms/triehh.py) over the plaintext transport."""
from __future__ import annotations

import math
import string

import numpy as np
import pytest
from scipy import stats
from scipy.stats import hypergeom

from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.triehh import (
    TrieHH, TrieHHConfig, TrieHHError, UserSequences, encode_population, run_triehh,
    select_sequences,
)
from mechanisms.triehh_privacy import discovery_rate
from protocol.core.contract import ContractError, ABSTAIN, Kind, RoundResult, RoundSpec, Transport, Votes
from protocol.core.transports.plain import PlainTransport


class RecordingTransport(Transport):
    """Plaintext transport that keeps every spec and vote batch it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.inner = PlainTransport()
        self.calls: list[tuple[RoundSpec, np.ndarray]] = []

    def run_round(self, spec: RoundSpec, contributions: Votes,  # type: ignore[override]
                  rng: np.random.Generator) -> RoundResult:
        self.calls.append((spec, np.asarray(contributions.choice).copy()))
        return self.inner.run_round(spec, contributions, rng)


def single_word_population(words: list[str], holders: list[int], alphabet: UnitAlphabet,
                           L: int, empty_users: int = 0) -> UserSequences:
    """Users holding ``words[j]`` ``holders[j]`` times, plus users with no word."""
    items = np.repeat(np.arange(len(words)), holders)
    n_word = items.size
    offsets = np.concatenate([np.arange(n_word + 1), np.full(empty_users, n_word)])
    return encode_population(words, offsets, items, np.ones(n_word, dtype=np.int64),
                             alphabet, L)


def test_all_users_same_word_is_found_exactly() -> None:
    a = UnitAlphabet("abc", 1)
    data = single_word_population(["abc", "b"], [40, 3], a, 6)
    cfg = TrieHHConfig(theta=5, gamma=math.sqrt(43), max_levels=6,  # m = n: everyone votes
                       release_counts=True)
    tr = RecordingTransport()
    res = run_triehh(data, a, cfg, tr, np.random.default_rng(0))
    assert res.m == 43
    assert res.heavy_hitters == {"abc": 40}
    assert res.prefixes == {"a": 40, "ab": 40, "abc": 40}
    # 4 rounds: a, ab, abc, abc$; then the frontier is empty
    assert [r.round for r in res.rounds] == [1, 2, 3, 4]
    for spec, votes in tr.calls:
        assert spec.kind is Kind.VOTE and spec.theta == 5 and spec.task == "triehh"
        assert votes.size == 43  # abstentions are contributions like any other
    # round 2: the 3 holders of "b" vote for nothing ('b' was not released) -> abstain
    spec2, votes2 = tr.calls[1]
    assert (votes2 == ABSTAIN).sum() == 3
    assert spec2.candidates == ("aa", "ab", "ac", "a$")
    assert res.guarantee is None and "gamma <= sqrt(n)/(theta+1)" in res.guarantee_note


def test_counts_are_not_released_by_default() -> None:
    # Theorem 1 covers which prefixes are released, not their counts: by default the
    # round asks for membership only and the result carries no counts.
    a = UnitAlphabet("abc", 1)
    data = single_word_population(["abc", "b"], [40, 3], a, 6)
    cfg = TrieHHConfig(theta=5, gamma=math.sqrt(43), max_levels=6)
    tr = RecordingTransport()
    res = run_triehh(data, a, cfg, tr, np.random.default_rng(0))
    assert res.heavy_hitters == {"abc": None}
    assert res.prefixes == {"a": None, "ab": None, "abc": None}
    assert tr.calls and all(not spec.reveal_counts for spec, _ in tr.calls)


def test_sampling_is_fixed_size_without_replacement() -> None:
    a = UnitAlphabet("ab", 1)
    data = single_word_population(["ab"], [500], a, 3, empty_users=500)
    mech = TrieHH(data, a, TrieHHConfig(4, 7.5, 3), PlainTransport(), np.random.default_rng(1))
    assert mech.m == math.floor(7.5 * math.sqrt(1000))
    for _ in range(20):
        s = mech.sample()
        assert s.size == mech.m and np.unique(s).size == mech.m
        assert s.min() >= 0 and s.max() < 1000


def test_released_words_occur_in_population_and_counts_pass_threshold() -> None:
    rng = np.random.default_rng(3)
    a = UnitAlphabet(string.ascii_lowercase, 1)
    vocab = ["".join(rng.choice(list("abcde"), rng.integers(1, 7))) for _ in range(300)]
    vocab = list(dict.fromkeys(vocab))
    p = 1.0 / np.arange(1, len(vocab) + 1)
    items = rng.choice(len(vocab), 20000, p=p / p.sum())
    data = encode_population(vocab, np.arange(20001), items, np.ones(20000, np.int64), a, 10)
    res = run_triehh(data, a, TrieHHConfig(8, 6.0, 10, release_counts=True), PlainTransport(), rng)
    held = {vocab[i] for i in np.unique(items)}
    assert res.heavy_hitters, "a Zipf population of 20000 users must give heavy hitters"
    assert set(res.heavy_hitters) <= held
    assert min(res.heavy_hitters.values()) >= 8 and min(res.prefixes.values()) >= 8
    # every prefix of a heavy hitter is a released prefix (trie property)
    for w in res.heavy_hitters:
        for k in range(1, len(w) + 1):
            assert w[:k] in res.prefixes


def test_unit_size_two() -> None:
    a = UnitAlphabet("abcd", 2)
    data = single_word_population(["abc", "abcd", "da"], [50, 50, 50], a, 4)
    res = run_triehh(data, a, TrieHHConfig(5, math.sqrt(150), 4, release_counts=True),
                     PlainTransport(),
                     np.random.default_rng(0))
    assert res.heavy_hitters == {"abc": 50, "abcd": 50, "da": 50}
    assert len(res.rounds) == 3  # "ab|cd|$" needs 3 levels
    assert res.rounds[0].candidates == a.num_units


def test_words_longer_than_L_are_never_whole_words() -> None:
    a = UnitAlphabet("ab", 1)
    data = single_word_population(["abababab"], [30], a, 4)
    res = run_triehh(data, a, TrieHHConfig(5, math.sqrt(30), 4), PlainTransport(),
                     np.random.default_rng(0))
    assert res.heavy_hitters == {}
    # level L is the end-of-word step: a longer word abstains there (its L - 1 units
    # remain a prefix), so no level-L node is ever a truncated word
    assert "aba" in res.prefixes and "abab" not in res.prefixes and len(res.rounds) == 4


def test_word_of_L_characters_is_found_with_L_levels() -> None:
    """A 10-letter word held by 60% of users is found at L = 10 (the tenth round is its
    end-of-word step); an 11-letter word held by the other 40% is not a whole word at
    L = 10, and the run never exceeds L rounds."""
    a = UnitAlphabet(string.ascii_lowercase, 1)
    words = ["abcdefghij", "zyxwvutsrqp"]
    data = single_word_population(words, [600, 400], a, 10)
    cfg = TrieHHConfig(theta=10, gamma=math.sqrt(1000) / 2, max_levels=10)
    for seed in range(3):
        res = run_triehh(data, a, cfg, PlainTransport(), np.random.default_rng(seed))
        assert set(res.heavy_hitters) == {"abcdefghij"}
        assert len(res.rounds) == 10
        assert "zyxwvutsr" in res.prefixes and "zyxwvutsrq" not in res.prefixes
    # with L = 11 the 11-letter word is found too, after its 11th (end-of-word) step
    data11 = single_word_population(words, [600, 400], a, 11)
    res = run_triehh(data11, a, TrieHHConfig(10, math.sqrt(1000) / 2, 11), PlainTransport(),
                     np.random.default_rng(0))
    assert set(res.heavy_hitters) == set(words)
    assert len(res.rounds) == 11


def test_candidate_cap_raises() -> None:
    a = UnitAlphabet(string.ascii_lowercase, 2)
    data = single_word_population(["ab", "cd"], [20, 20], a, 3)
    cfg = TrieHHConfig(5, math.sqrt(40), 3, max_candidates=500)
    with pytest.raises(TrieHHError, match="max_candidates"):
        run_triehh(data, a, cfg, PlainTransport(), np.random.default_rng(0))


def test_same_seed_same_result() -> None:
    a = UnitAlphabet("abc", 1)
    data = single_word_population(["ab", "ba", "c"], [300, 200, 100], a, 5)
    cfg = TrieHHConfig(10, 8.0, 5)
    r1 = run_triehh(data, a, cfg, PlainTransport(), np.random.default_rng(11))
    r2 = run_triehh(data, a, cfg, PlainTransport(), np.random.default_rng(11))
    assert r1.heavy_hitters == r2.heavy_hitters and r1.prefixes == r2.prefixes


def test_local_frequency_selection() -> None:
    """Algorithm 3: user i picks word w with probability c_i(w) / sum_v c_i(v).

    Chi-square goodness of fit on 60000 draws per user shape; with a fixed seed the
    test is deterministic, and for a fresh seed it would fail with probability 1e-6
    per user (the critical value used).
    """
    units = np.zeros((6, 2), dtype=np.int64)
    # user 0: words 0,1,2 with counts 1,2,7; user 1: nothing; user 2: word 3 x4, word 5 x4
    offsets = np.array([0, 3, 3, 5])
    items = np.array([0, 1, 2, 3, 5])
    counts = np.array([1, 2, 7, 4, 4])
    data = UserSequences(units, offsets, items, counts)
    rng = np.random.default_rng(123)
    draws = 60000
    users = np.repeat(np.array([0, 1, 2]), draws)
    got = select_sequences(data, users, rng).reshape(3, draws)
    assert (got[1] == -1).all()
    for row, ids, cnt in ((got[0], [0, 1, 2], [1, 2, 7]), (got[2], [3, 5], [4, 4])):
        assert set(np.unique(row)) <= set(ids)
        observed = np.array([(row == i).sum() for i in ids])
        expected = draws * np.array(cnt) / sum(cnt)
        chi2 = ((observed - expected) ** 2 / expected).sum()
        assert chi2 < stats.chi2.isf(1e-6, len(ids) - 1)


def test_multi_word_run_reports_corollary2() -> None:
    rng = np.random.default_rng(5)
    a = UnitAlphabet("abcd", 1)
    vocab = ["ab", "cd", "abc", "d"]
    n = 10000
    per = rng.integers(1, 4, n)
    items = np.concatenate([rng.choice(4, k, replace=False) for k in per])
    offsets = np.concatenate([[0], np.cumsum(per)])
    data = encode_population(vocab, offsets, items, rng.integers(1, 5, items.size), a, 6)
    res = run_triehh(data, a, TrieHHConfig(10, 5.0, 6), PlainTransport(), rng)
    assert set(res.heavy_hitters) == set(vocab)
    assert res.guarantee is not None and "Corollary 2" in res.guarantee.theorem


def _no_shared_prefix_rates(runs: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Discovery frequency of words that share no prefix with any other word."""
    symbols = string.ascii_letters
    a = UnitAlphabet(symbols, 1)
    holders = [250, 280, 300, 330, 360, 400, 450]
    words = [symbols[j] + "xy" for j in range(len(holders))]  # distinct first unit
    n, L, theta, gamma = 10000, 10, 10, 3.0
    data = single_word_population(words, holders, a, L, empty_users=n - sum(holders))
    cfg = TrieHHConfig(theta, gamma, L)
    root = np.random.default_rng(seed)
    found = np.zeros(len(words))
    tr = PlainTransport()
    for rng in root.spawn(runs):
        res = TrieHH(data, a, cfg, tr, rng).result()
        found += [w in res.heavy_hitters for w in words]
    m = math.floor(gamma * math.sqrt(n))
    tail = hypergeom.sf(theta - 1, n, np.array(holders), m)
    exact = tail ** 4  # 3 letters + EOS: 4 independent rounds
    bound = np.asarray(discovery_rate(np.array(holders), n, m, theta, L))
    return found / runs, exact, bound


def _check_rates(rate: np.ndarray, exact: np.ndarray, bound: np.ndarray, runs: int) -> None:
    sigma = np.sqrt(exact * (1 - exact) / runs) + 1e-12
    # at or above Proposition 1's worst case (exponent L) and close to the exact
    # no-shared-prefix rate (exponent = the word's 4 units): 4.5 sigma per word,
    # 7 words -> failure probability below 1e-4 for a fresh seed.
    assert np.all(rate >= bound - 4.5 * sigma)
    assert np.all(np.abs(rate - exact) <= 4.5 * sigma + 1.0 / runs)
    assert np.all(bound <= exact + 1e-12)


def test_discovery_rate_matches_proposition1_small() -> None:
    rate, exact, bound = _no_shared_prefix_rates(300, seed=2024)
    _check_rates(rate, exact, bound, 300)
    assert exact.min() < 0.5 < exact.max()  # the words span the transition


@pytest.mark.slow
def test_discovery_rate_matches_proposition1_large() -> None:
    rate, exact, bound = _no_shared_prefix_rates(3000, seed=7)
    _check_rates(rate, exact, bound, 3000)


class LyingTransport(Transport):
    """Releases a label that was never a candidate, or a count below theta."""

    name = "lying"

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def run_round(self, spec: RoundSpec, contributions: Votes,  # type: ignore[override]
                  rng: np.random.Generator) -> RoundResult:
        res = PlainTransport().run_round(spec, contributions, rng)
        counts = {"zzz": 99} if self.mode == "label" else {spec.candidates[0]: 1}
        rel = type(res.release)(spec, res.release.contributions, counts=counts)
        return RoundResult(rel, res.views, res.cost)


@pytest.mark.parametrize("mode, msg", [("label", "not a candidate"), ("count", "below theta")])
def test_release_rule_violations_raise(mode: str, msg: str) -> None:
    a = UnitAlphabet("ab", 1)
    data = single_word_population(["ab"], [30], a, 3)
    # the contract's Release refuses to carry such a release (ContractError); TrieHH
    # checks again in case a transport builds one around the constructor (TrieHHError)
    with pytest.raises((TrieHHError, ContractError), match=msg):
        run_triehh(data, a, TrieHHConfig(5, math.sqrt(30), 3), LyingTransport(mode),
                   np.random.default_rng(0))
