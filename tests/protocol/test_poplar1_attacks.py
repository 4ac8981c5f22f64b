"""The Poplar1 attacks of the catalogue: each meets its stated expectation, and the
client attacks are real (without the sketch the malicious report would have changed
the counts)."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.studies.attacks import ATTACKS, load_catalogue, run_attack

load_catalogue()
NAMES = sorted(n for n in ATTACKS if n.startswith("poplar1."))


def test_the_catalogue_has_the_poplar1_attacks() -> None:
    assert NAMES == ["poplar1.aggregator_shifts_aggregate", "poplar1.aggregator_shifts_sketch",
                     "poplar1.client_inconsistent_public_share", "poplar1.client_two_votes",
                     "poplar1.client_wrong_weight"]
    assert ATTACKS["poplar1.aggregator_shifts_aggregate"].kind == "measured"


@pytest.mark.parametrize("name", NAMES)
def test_attack_meets_its_expectation(name: str) -> None:
    out = run_attack(name, seed=3)
    assert out.passed, out.observed


@pytest.mark.parametrize("level,weight", [(1, 2), (3, 2)])
def test_an_unchecked_wrong_weight_would_change_the_count(level: int, weight: int) -> None:
    """The wrong-weight report, aggregated without looking at the sketch, adds its
    weight to its prefix (the attack does what it claims); the sketch rejects it."""
    from protocol.core.poplar1 import Aggregator, Poplar1, sketch_accepts, sketch_message
    from protocol.core.poplar1.field import P64, P255

    vdaf = Poplar1(4, b"t")
    rng = np.random.default_rng(0)
    meas = np.array([[True, False, True, True]])
    w = np.ones((1, 4), dtype=np.int64)
    w[0, level] = weight
    rep = vdaf.shard_batch(meas, rng.integers(0, 256, (1, 16), dtype=np.uint8),
                           rng.integers(0, 256, (1, vdaf.RAND_SIZE), dtype=np.uint8), weights=w)
    aggs = [Aggregator(vdaf, j, bytes(32), rep.nonces, rep.public, rep.shares[j]) for j in (0, 1)]
    prefix = tuple(bool(b) for b in meas[0, :level + 1])
    sibling = prefix[:-1] + (not prefix[-1],)
    ap = (level, tuple(sorted([prefix, sibling])))
    r1 = [a.verify_init(ap) for a in aggs]
    r2 = [a.verify_next(sketch_message(level, 4, *r1)) for a in aggs]
    assert sketch_accepts(level, 4, *r2).tolist() == [False]
    unchecked = [a.aggregate(np.array([True])) for a in aggs]
    mod = P64 if level < 3 else P255
    counts = dict(zip(ap[1], [(int(x) + int(y)) % mod for x, y in zip(*unchecked)]))
    assert counts[prefix] == weight and counts[sibling] == 0
