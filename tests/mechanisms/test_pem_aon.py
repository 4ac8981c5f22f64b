"""PEM with the All-or-Nothing oracle: AoN's heavy-hitter algorithm (the anonymous manuscript "A Distributed Algorithm For Differentially Private Heavy Hitters" plugs the
AoN oracle into a prefix search; here PEM's)."""
from __future__ import annotations

import numpy as np
import pytest

from mechanisms.fo import AoN
from mechanisms.pem import pem, pem_privacy


def _population(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """16-bit items: three heavy ones (30%, 20%, 15%) and a uniform tail."""
    heavy = np.array([0xBEEF, 0x1234, 0xBE00], dtype=np.uint64)
    u = rng.random(n)
    items = rng.integers(0, 1 << 16, n).astype(np.uint64)
    items[u < 0.30] = heavy[0]
    items[(u >= 0.30) & (u < 0.50)] = heavy[1]
    items[(u >= 0.50) & (u < 0.65)] = heavy[2]
    return items, heavy


def test_pem_with_aon_finds_the_heavy_hitters() -> None:
    # Fixed seed: deterministic. Per group of 30,000 users AoN's estimator has standard
    # deviation about sqrt(1.5/30000) = 0.007 at epsilon 4 (docs/ldp.md), so the 15% item
    # is about 20 sigma above every tail prefix (< 0.1% each): failure probability far
    # below 1e-9 for a fresh seed.
    rng = np.random.default_rng(2024)
    items, heavy = _population(60_000, rng)
    res = pem(items, 16, 3, 4.0, oracle="aon", levels=2, rng=rng)
    assert set(int(x) for x in res.heavy_hitters) == set(int(x) for x in heavy)
    assert int(res.heavy_hitters[0]) == 0xBEEF
    assert res.lengths == [8, 16]
    # one report per user, every user used exactly once
    assert np.all(res.report_counts == 1) and sum(res.group_sizes) == 60_000
    # the estimated frequencies are within 6 sigma of the truth (0.30, 0.20, 0.15 plus
    # the tail's share of each item, below 1e-4)
    sigma = np.sqrt(AoN(4.0, 2 * 256 + 1, dummy=True).variance(30_000, 0.3))
    truth = {0xBEEF: 0.30, 0x1234: 0.20, 0xBE00: 0.15}
    for item, f in zip(res.heavy_hitters, res.frequencies):
        assert abs(f - truth[int(item)]) < 6 * sigma


def test_pem_aon_matches_other_oracles_interface() -> None:
    rng = np.random.default_rng(5)
    items, _ = _population(20_000, rng)
    for oracle in ("grr", "olh", "aon"):
        res = pem(items, 16, 2, 4.0, oracle=oracle, levels=4, rng=np.random.default_rng(1))
        assert res.heavy_hitters.shape == (2,) and res.counts.shape == (2,)
        assert int(res.heavy_hitters[0]) == 0xBEEF, oracle


def test_pem_aon_privacy_and_bad_oracle() -> None:
    p = pem_privacy(2.0, "aon")
    assert p.parameters["oracle"] == "aon" and p.epsilon == 2.0 and p.delta == 0.0
    from mechanisms.federated.parties import FederatedError

    with pytest.raises(FederatedError):
        pem(np.zeros(10, dtype=np.uint64), 8, 1, 1.0, oracle="nope", levels=1,
            rng=np.random.default_rng(0))
