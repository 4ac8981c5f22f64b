"""Exact privacy checks of the LDP frequency oracles.

For small domains every output's probability is computed for every input from the
oracle's *implemented* constants (the same thresholds ``randomize`` uses), and the
largest ratio over all pairs of inputs must be at most ``e^epsilon``. A chi-square test
then checks that ``randomize`` really produces those probabilities.

Statistical failure probability: every chi-square / binomial check rejects at
p < 1e-6 (fixed seeds, so a run either always passes or always fails; the stated
probability is that of a correct implementation failing for a fresh seed). There are
fewer than 60 such checks, so the suite's false-alarm probability is below 6e-5.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import hashing
from mechanisms.fo import GRR, OLH, OUE, AoN

ALPHA = 1e-6
REL = 1e-12  # floating-point slack on ratios computed in double precision
EPSILONS = [0.5, 1.0, 2.0, 4.0]


def _max_ratio(P: np.ndarray) -> float:
    """P[v, o] = probability of output o on input v; max over v, v', o of P[v,o]/P[v',o]."""
    assert np.all(P >= 0)
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-12)
    hi = P.max(axis=0)
    lo = P.min(axis=0)
    assert np.all(lo > 0), "an output possible for one input is impossible for another"
    return float(np.max(hi / lo))


def _chisq(observed: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * observed.sum()
    keep = expected > 0
    assert observed[~keep].sum() == 0
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


# -- GRR -------------------------------------------------------------------------------
def _grr_matrix(o: GRR) -> np.ndarray:
    d = o.n_categories
    P = np.full((d, d), o.q_other)
    np.fill_diagonal(P, o.p_keep)
    return P


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("d,dummy", [(2, False), (3, False), (5, False), (3, True)])
def test_grr_exact_ratio(eps: float, d: int, dummy: bool) -> None:
    o = GRR(eps, d, dummy=dummy)
    ratio = _max_ratio(_grr_matrix(o))
    assert ratio <= math.exp(eps) * (1 + REL)
    assert ratio >= math.exp(eps) * (1 - 1e-8)  # tight: rounding costs < 1e-8 relative
    assert math.isclose(math.log(ratio), o.privacy().effective_epsilon, rel_tol=1e-12)


@pytest.mark.parametrize("dummy", [False, True])
def test_grr_randomize_matches_exact_distribution(dummy: bool) -> None:
    o = GRR(1.0, 4, dummy=dummy)
    P = _grr_matrix(o)
    rng = np.random.default_rng(11)
    for v in range(o.n_categories):
        inputs = np.full(60_000, v if v < 4 else 17)  # 17 is out of domain -> dummy
        y = o.randomize(inputs, rng).values
        assert _chisq(np.bincount(y, minlength=o.n_categories), P[v]) > ALPHA


# -- OUE -------------------------------------------------------------------------------
def _oue_matrix(o: OUE) -> tuple[np.ndarray, np.ndarray]:
    d = o.n_categories
    p, q = o.support_probabilities
    outs = np.array(list(itertools.product([0, 1], repeat=d)))  # row = bit vector
    P = np.empty((d, outs.shape[0]))
    for v in range(d):
        pr = np.full(d, q)
        pr[v] = p
        P[v] = np.prod(np.where(outs == 1, pr, 1 - pr), axis=1)
    return P, outs


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("d,dummy", [(2, False), (3, False), (4, False), (3, True)])
def test_oue_exact_ratio_whole_vector_and_per_bit(eps: float, d: int, dummy: bool) -> None:
    o = OUE(eps, d, dummy=dummy)
    P, _ = _oue_matrix(o)
    ratio = _max_ratio(P)
    assert ratio <= math.exp(eps) * (1 + REL)
    assert ratio >= math.exp(eps) * (1 - 1e-8)
    assert math.isclose(math.log(ratio), o.privacy().effective_epsilon, rel_tol=1e-12)
    p, q = o.support_probabilities
    per_bit = max(p / q, (1 - q) / (1 - p))  # one bit, the two values it can take
    assert per_bit <= math.exp(eps) * (1 + REL)


def test_oue_randomize_matches_exact_distribution() -> None:
    o = OUE(1.0, 3, dummy=True)
    P, outs = _oue_matrix(o)
    weights = 1 << np.arange(o.n_categories)[::-1]
    rng = np.random.default_rng(12)
    for v in range(o.n_categories):
        inputs = np.full(80_000, v if v < 3 else -5)  # -5 -> dummy
        bits = o.randomize(inputs, rng).unpacked()
        code = bits @ weights
        assert _chisq(np.bincount(code, minlength=len(outs)), P[v]) > ALPHA


# -- OLH -------------------------------------------------------------------------------
def _olh_matrix(o: OLH, key: np.ndarray) -> np.ndarray:
    """Exact P[y | v] for one hash key, using the same hash and constants as randomize."""
    d = o.n_categories
    x = hashing.hash_to_range(np.repeat(key[None, :], d, axis=0), np.arange(d), o.g)
    P = np.full((d, o.g), o.q_other)
    P[np.arange(d), x] = o.p_keep
    return P


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("g", [0, 2, 3, 5])
def test_olh_exact_ratio_per_key(eps: float, g: int) -> None:
    o = OLH(eps, 6, dummy=True, g=g)
    keys = hashing.draw_keys(np.random.default_rng(13), 200)
    # the key is drawn independently of the value, so P[(key, y) | v] = P[key] P[y | v, key]
    # and P[key] cancels in every ratio: the worst case over keys is the worst case.
    worst = max(_max_ratio(_olh_matrix(o, k)) for k in keys)
    assert worst <= math.exp(eps) * (1 + REL)
    assert math.isclose(math.log(worst), o.privacy().effective_epsilon, rel_tol=1e-12)


def test_olh_randomize_matches_exact_distribution() -> None:
    o = OLH(1.5, 5, g=4)
    rng = np.random.default_rng(14)
    key = hashing.draw_keys(rng, 1)[0]
    P = _olh_matrix(o, key)
    keys = np.repeat(key[None, :], 50_000, axis=0)
    for v in range(5):
        y = o.perturb(np.full(50_000, v), keys, rng).y
        assert _chisq(np.bincount(y, minlength=o.g), P[v]) > ALPHA
    # the full randomize (fresh keys): P[y | v] = p c_y/2^32 + q (1 - c_y/2^32)
    c = hashing.bucket_sizes(o.g) / 2.0 ** 32
    marg = o.p_keep * c + o.q_other * (1 - c)
    y = o.randomize(np.full(100_000, 3), rng).y
    assert _chisq(np.bincount(y, minlength=o.g), marg) > ALPHA


# -- AoN -------------------------------------------------------------------------------
def _aon_matrix(o: AoN, keys: np.ndarray, pi: float) -> np.ndarray:
    """Outputs: 'report key j' for each listed key (given that key was drawn) and bottom.

    Column j < K: P[report | v, key j] (the factor P[key j] is common to all v and
    cancels). Last column: P[bottom | v] over the *whole* family = (1 - pi)(1 - r), with
    pi = P[h(v) = 0] = c_0 / 2^32 for every v (the family is exactly uniform on one point).
    """
    d = o.n_categories
    K = keys.shape[0]
    P = np.empty((d, K + 1))
    for v in range(d):
        hit = hashing.hash_to_range(keys, np.full(K, v), o.B) == 0
        P[v, :K] = np.where(hit, 1.0, o.r)
    P[:, K] = (1 - pi) * (1 - o.r)
    return P


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("B", [0, 2, 7])
def test_aon_exact_ratio(eps: float, B: int) -> None:
    o = AoN(eps, 6, dummy=True, B=B)
    keys = hashing.draw_keys(np.random.default_rng(15), 300)
    P = _aon_matrix(o, keys, o.pi)
    # the columns for reports are not probability vectors over one input; check ratios directly
    ratio = float(np.max(P.max(axis=0) / P.min(axis=0)))
    assert ratio <= math.exp(eps) * (1 + REL)
    assert math.isclose(math.log(ratio), o.privacy().effective_epsilon, rel_tol=1e-12)


def _scaled_family(key_bits: int = 6, comp_bits: int = 3, out_bits: int = 3):
    """Every key of a scaled-down copy of the hash construction (``w_bar = 6``,
    3-bit id components, 3-bit output; ``w_bar >= w + l - 1``): the exact analogue of
    mechanisms.hashing at a size where the family can be enumerated."""
    M = 1 << key_bits
    a_lo, a_hi, b = np.meshgrid(np.arange(M), np.arange(M), np.arange(M), indexing="ij")

    def h(x: int, g: int) -> np.ndarray:
        lo, hi = x & ((1 << comp_bits) - 1), x >> comp_bits
        z = ((a_lo * lo + a_hi * hi + b) % M) >> (key_bits - out_bits)
        return ((z * g) >> out_bits).ravel()

    return h


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_aon_exact_over_an_enumerated_family_including_bottom(eps: float) -> None:
    """AoN on a family small enough to enumerate every key: P[output | v] for every key
    and for bottom, every pair of inputs (ids chosen to use both components)."""
    o = AoN(eps, 64, B=0)
    assert o.B <= 8
    h = _scaled_family()
    ids = [0, 1, 5, 8, 13, 63]
    hits = np.stack([h(x, o.B) == 0 for x in ids])  # (inputs, keys)
    n_keys = hits.shape[1]
    report = np.where(hits, 1.0, o.r) / n_keys            # P[report key j | v]
    bottom = ((~hits).sum(axis=1) * (1 - o.r)) / n_keys   # P[bottom | v]
    P = np.concatenate([report, bottom[:, None]], axis=1)
    assert np.allclose(P.sum(axis=1), 1.0)
    assert np.allclose(bottom, bottom[0], rtol=0, atol=1e-15)  # uniform on one point
    ratio = float(np.max(P.max(axis=0) / P.min(axis=0)))
    assert ratio <= math.exp(eps) * (1 + REL)


def test_aon_bottom_needs_single_point_uniformity() -> None:
    """Counter-example showing why the family must be uniform on every point: with a
    family where h(v) = 0 more often for one v, bottom's ratio exceeds e^eps."""
    o = AoN(1.0, 2, B=2)
    hits = np.array([[True, True, True, False], [False, False, True, False]])  # 4 keys
    bottom = ((~hits).sum(axis=1) * (1 - o.r)) / 4
    assert bottom[1] / bottom[0] > math.exp(1.0)


def test_aon_randomize_matches_exact_distribution() -> None:
    o = AoN(1.0, 5, B=3)
    rng = np.random.default_rng(16)
    key = hashing.draw_keys(rng, 1)[0]
    keys = np.repeat(key[None, :], 60_000, axis=0)
    for v in range(5):
        hit = hashing.hash_to_range(key[None, :], np.array([v]), o.B)[0] == 0
        rep = o.respond(np.full(60_000, v), keys, rng)
        p_rep = 1.0 if hit else o.r
        obs = np.array([rep.reported.sum(), (~rep.reported).sum()])
        if p_rep == 1.0:
            assert obs[1] == 0
        else:
            assert _chisq(obs, np.array([p_rep, 1 - p_rep])) > ALPHA
        assert not rep.keys[~rep.reported].any(), "a bottom must carry no key"
    # fresh keys: P[bottom | v] = (1 - pi)(1 - r) for every v
    for v in (0, 4):
        rep = o.randomize(np.full(100_000, v), rng)
        pb = (1 - o.pi) * (1 - o.r)
        obs = np.array([(~rep.reported).sum(), rep.reported.sum()])
        assert _chisq(obs, np.array([pb, 1 - pb])) > ALPHA
