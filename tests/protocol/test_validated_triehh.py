"""A whole TrieHH over the default committee (validated reports) with corrupted clients in
every round's sample: the release is that of plain TrieHH over the honest clients' votes
on the same samples; over the committee fed by secure aggregation (nothing validates)
the same clients release a word nobody holds."""
from __future__ import annotations

import numpy as np
import pytest

from mechanisms.prefix_tree import UnitAlphabet
from mechanisms.triehh import TrieHH, TrieHHConfig, encode_population
from protocol.core.corruption import CorruptClients
from protocol.core.transports.plain import PlainTransport
from protocol.core.transports.threshold import ThresholdTransport

VOCAB = ["ab", "abc", "ba", "bad", "cab", "dab", "ac", "ca", "db", "cd"]
FORGED = "dcba"  # nobody holds it
N = 6000


def _population():  # type: ignore[no-untyped-def]
    a = UnitAlphabet("abcd", 1)
    weights = 1.0 / np.arange(1, len(VOCAB) + 1)
    counts = np.floor(N * weights / weights.sum()).astype(np.int64)
    counts[0] += N - counts.sum()
    items = np.repeat(np.arange(len(VOCAB)), counts)
    return encode_population(VOCAB, np.arange(N + 1), items, np.ones(N, np.int64), a, 4), a


def _heavy_hitters(transport, seed: int = 3) -> list[str]:  # type: ignore[no-untyped-def]
    data, a = _population()
    mech = TrieHH(data, a, TrieHHConfig(6, 4.0, 4), transport, np.random.default_rng(seed))
    list(mech.rounds())
    return sorted(mech.result().heavy_hitters)


@pytest.mark.parametrize("k", [1, 5, 50])
def test_corrupted_clients_in_every_round_count_for_nothing(k: int) -> None:
    corrupt = CorruptClients("theta-at-target", per_round=k, target=FORGED, seed=k)
    validated = ThresholdTransport(simulate=True, corrupt=corrupt)
    got = _heavy_hitters(validated)
    # the reference: plain TrieHH on the same samples, the corrupted clients abstaining
    reference = PlainTransport()
    reference.corrupt = CorruptClients("abstain", per_round=k, target=FORGED, seed=k)
    assert got == _heavy_hitters(reference) and len(got) >= 5
    assert FORGED not in got
    log = validated.corruption_log
    assert log and all(r.matches_honest for r in log)
    assert all(r.dropped_corrupted == {"invalid_vote": k} for r in log)


def test_without_validation_the_same_clients_forge_a_word() -> None:
    corrupt = CorruptClients("theta-at-target", per_round=6, target=FORGED, seed=6)
    fed = ThresholdTransport(simulate=True, committee_input="secagg", threat="semi-honest",
                             corrupt=corrupt)
    assert FORGED in _heavy_hitters(fed)
