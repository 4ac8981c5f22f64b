"""TrieHH++ (Cormode 2021): released counts, estimates, the flat variant, and the
worked example of section 3."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from protocol.core.contract import Kind
from protocol.core.transports.plain import PlainTransport
from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.sampling import plan_poisson_sampling, sample_participant_counts
from mechanisms.triehhpp import (
    TrieHHPPError, TrieHHPPParams, miss_probability_bound, run_flat, run_triehhpp, spawn_rngs,
)

ALPHA = UnitAlphabet("abcdefgh")


def _population(words_counts: dict[str, int], rng: np.random.Generator,
                levels: int) -> tuple[list[str], np.ndarray]:
    words = [w for w, c in words_counts.items() for _ in range(c)]
    rng.shuffle(words)
    return words, ALPHA.encode(words, levels)


def _run(um: np.ndarray, n: int, m: float, theta: int, L: int, seed: int, **kw):
    sr, tr = spawn_rngs(seed)
    params = TrieHHPPParams(n, m, theta, L, **kw)
    return run_triehhpp(um, ALPHA.num_units, ALPHA.labels, params, PlainTransport(), sr, tr,
                        terminal=ALPHA.terminal)


def test_full_participation_releases_exact_prefix_counts() -> None:
    # m = n: every client is contacted and takes part, so the released trie is the
    # deterministic set of prefixes (with EOS) held by at least theta clients.
    counts = {"abc": 30, "abd": 12, "ab": 7, "bcd": 4, "h": 9, "abcdefgh": 5}
    words, um = _population(counts, np.random.default_rng(0), 6)
    n = len(words)
    res = _run(um, n, n, 5, 6, seed=1)
    truth: Counter[str] = Counter()
    for w in words:
        s = w + "$"
        for i in range(1, min(len(s), 6) + 1):
            truth[s[:i]] += 1
    expected = {k: v for k, v in truth.items() if v >= 5}
    got = {e.label: e.count for e in res.node_estimates()}
    assert got == expected
    hh = res.heavy_hitters(strip="$")
    assert [(e.label, e.count) for e in hh] == [("abc", 30), ("abd", 12), ("h", 9), ("ab", 7)]
    assert all(e.frequency == pytest.approx(e.count / n) for e in hh)
    assert all(e.estimate_se == 0 for e in hh)  # p = 1: no sampling error
    for rel in res.releases:
        assert rel.contributions == n and rel.spec.kind is Kind.VOTE and rel.spec.theta == 5
        assert all(c >= 5 for c in rel.counts.values())


def test_structure_of_a_sampled_run() -> None:
    rng = np.random.default_rng(2)
    words, um = _population({"abc": 4000, "bad": 2000, "cafe": 1000, "dig": 50}, rng, 5)
    n = len(words)
    res = _run(um, n, 700, 8, 5, seed=3)
    plan = plan_poisson_sampling(n, 700)
    par, dep = res.trie.parent, res.trie.depth
    for node in range(1, len(res.trie)):  # every node hangs off a released parent
        assert dep[par[node]] == dep[node] - 1
    for lev, rel in zip(res.levels, res.releases):
        assert rel.contributions == plan.contacted == lev.contacted
        # level i's candidates are exactly the released level-(i-1) nodes x units
        frontier = res.trie.frontier(lev.level - 1)
        assert lev.candidates == frontier.size * ALPHA.num_units == len(rel.spec.candidates)
    labels = {e.label for e in res.heavy_hitters(strip="$")}
    assert labels == {"abc", "bad", "cafe"}  # "dig" (w = 4.7 < theta) is not released


def test_released_counts_unbiased_for_nodes_well_above_threshold() -> None:
    # 200 independent runs; for each node with expected count W p >= 40 (theta = 5, so
    # P[count < theta] < 1e-12) the mean released count must be W p within 4.4
    # standard errors sqrt(W p (1 - p) / 200). Under the null each check fails with
    # probability 1.1e-5; 8 nodes -> failure probability < 1e-4.
    rng = np.random.default_rng(4)
    counts = {"abc": 6000, "abd": 3000, "bee": 2500, "cab": 1500}
    words, um = _population(counts, rng, 4)
    n = len(words)  # 13,000
    m, theta = 520.0, 5  # p = 0.04
    p = m / n
    nodes = {"a": 9000, "ab": 9000, "abc": 6000, "abd": 3000, "abc$": 6000, "b": 2500,
             "be": 2500, "c": 1500}
    sums = {k: 0.0 for k in nodes}
    runs = 200
    for seed in range(runs):
        got = {e.label: e.count for e in _run(um, n, m, theta, 4, seed=1000 + seed).node_estimates()}
        for k in nodes:
            assert k in got  # never missed
            sums[k] += got[k]
    for k, W in nodes.items():
        se = math.sqrt(W * p * (1 - p) / runs)
        assert abs(sums[k] / runs - W * p) < 4.4 * se, (k, sums[k] / runs, W * p)


def test_cormode_worked_example_single_item_count_path() -> None:
    # Section 3: n = 1e6, theta = 15, m = 12,000; an item at 1% (W = 10,000) has
    # w = 120 expected sampled votes and P[miss] <= exp(-(w - theta)^2 / (2w)) ~ 1e-20.
    # 1000 runs of the exact sampling + counting path (participants K' ~ truncated
    # Bin(n, m/n), the item's count ~ Hypergeometric(n, W, K') = Bin(W, m/n) exactly).
    n, m, theta, W = 10**6, 12_000, 15, 10_000
    w = W * m / n
    assert miss_probability_bound(w, theta) < 2e-20
    plan = plan_poisson_sampling(n, m)
    rng = np.random.default_rng(2021)
    k = sample_participant_counts(plan, rng, 1_000)
    x = rng.hypergeometric(W, n - W, k)
    assert (x >= theta).all()  # never missed
    # relative error: P[|X - w| > g w] <= 2 exp(-g^2 w / 3) (section 3) for each g;
    # the empirical frequency must not exceed the bound (plus 3 binomial SEs)
    rel = np.abs(x - w) / w
    for g in [0.1, 0.2, 0.3, 0.4]:
        bound = min(1.0, 2 * math.exp(-g * g * w / 3))
        freq = float((rel > g).mean())
        assert freq <= bound + 3 * math.sqrt(bound * (1 - bound) / 1_000) + 1e-9, (g, freq, bound)
    # unbiased with the binomial spread: mean within 4.4 SE, std within 10%
    sd = math.sqrt(w * (1 - m / n))
    assert abs(x.mean() - w) < 4.4 * sd / math.sqrt(1_000)
    assert 0.9 * sd < x.std() < 1.1 * sd


def _one_percent_population(rng: np.random.Generator, n: int) -> np.ndarray:
    """Unit matrix of n clients: 1% hold 'cafe', the rest random 6-letter words over
    a-h (almost all prefixes of length >= 4 far below the threshold). Built directly
    as unit ids (vectorised), using the engine's own encoding of letters and EOS."""
    letter_units = ALPHA.encode(list("abcdefgh"), 1)[:, 0]
    eos = ALPHA.encode([""], 1)[0, 0]
    um = np.full((n, 7), eos, dtype=np.int64)
    um[:, :6] = letter_units[rng.integers(0, 8, size=(n, 6))]
    k = n // 100
    um[:k] = ALPHA.encode(["cafe"], 7)[0]
    return um[rng.permutation(n)]


def test_cormode_worked_example_full_runs() -> None:
    # a few full trie runs at the worked example's scale: the 1% item is found at
    # every level with a count near w = 120 (miss probability < 1e-19 per run)
    n = 10**6
    um = _one_percent_population(np.random.default_rng(7), n)
    for seed in range(3):
        res = _run(um, n, 12_000, 15, 7, seed=seed)
        hh = {e.label: e for e in res.heavy_hitters(strip="$")}
        assert "cafe" in hh
        e = hh["cafe"]
        assert abs(e.count - 120) < 5 * math.sqrt(120)
        assert e.frequency == pytest.approx(e.count / 12_000)
        assert abs(e.frequency - 0.01) < 5 * e.frequency_se


@pytest.mark.slow
def test_cormode_worked_example_many_full_runs() -> None:
    # 300 full runs (about 30 s): the 1% item is never missed; its counts have mean
    # 120 within 4.4 SE (failure probability 1e-5)
    n = 10**6
    um = _one_percent_population(np.random.default_rng(8), n)
    got = []
    for seed in range(300):
        hh = {e.label: e.count for e in _run(um, n, 12_000, 15, 7, seed=10_000 + seed)
              .heavy_hitters(strip="$")}
        assert "cafe" in hh
        got.append(hh["cafe"])
    x = np.array(got, dtype=float)
    assert abs(x.mean() - 120) < 4.4 * math.sqrt(120 * 0.988 / x.size)


def test_flat_variant() -> None:
    rng = np.random.default_rng(9)
    cands = ("apple", "pear", "fig", "kiwi")
    n = 20_000
    items = rng.choice(np.arange(-1, 4), size=n, p=[0.1, 0.5, 0.3, 0.0995, 0.0005])
    sr, tr = spawn_rngs(10)
    res = run_flat(items, cands, TrieHHPPParams(n, 2_000, 10, 1), PlainTransport(), sr, tr)
    hh = res.heavy_hitters()
    assert [e.label for e in hh] == ["apple", "pear", "fig"]  # kiwi: w = 1 < theta
    for e in hh:
        truth = float((items == cands.index(e.label)).mean())
        assert abs(e.frequency - truth) < 5 * e.frequency_se
    assert res.release.contributions == res.stats.contacted
    with pytest.raises(TrieHHPPError):
        run_flat(items[:-1], cands, TrieHHPPParams(n, 2_000, 10, 1), PlainTransport(), sr, tr)
    with pytest.raises(TrieHHPPError):
        run_flat(np.full(n, 4), cands, TrieHHPPParams(n, 2_000, 10, 1), PlainTransport(), sr, tr)


def test_same_seed_same_release_and_bad_input() -> None:
    words, um = _population({"abc": 500, "bcd": 300}, np.random.default_rng(1), 4)
    a = _run(um, len(words), 200, 5, 4, seed=42)
    b = _run(um, len(words), 200, 5, 4, seed=42)
    assert len(a.releases) == len(b.releases)
    assert all(x.same_as(y) for x, y in zip(a.releases, b.releases))
    with pytest.raises(TrieHHPPError, match="rows"):
        _run(um[:-1], len(words), 200, 5, 4, seed=1)
    with pytest.raises(TrieHHPPError, match="theta"):
        TrieHHPPParams(10, 5, 0, 3)
    with pytest.raises(TrieHHPPError, match="0 < m <= n"):
        TrieHHPPParams(10, 50, 2, 3)
    with pytest.raises(TrieHHPPError, match="w > theta"):
        miss_probability_bound(5, 10)
