"""Membership-only rounds over the shuffler: the analyzer learns which crowds passed,
no counts, and its receipt says nothing about sub-threshold crowds."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.contract import ABSTAIN, Kind, RoundSpec, Votes
from protocol.core.transports.shuffler_transport import ShufflerTransport
from shuffler import AnalyzerReceipt, HardThreshold, ShufflerError

CANDS = ("c0", "c1", "c2", "c3", "c4")


def _votes(counts: list[int], abstain: int = 0) -> Votes:
    return Votes(np.array([i for i, c in enumerate(counts) for _ in range(c)]
                          + [ABSTAIN] * abstain))


def _run(counts: list[int], reveal: bool, blinded: bool, abstain: int = 0):
    spec = RoundSpec("t", 0, Kind.VOTE, candidates=CANDS, theta=3, reveal_counts=reveal)
    tr = ShufflerTransport(simulate=True, blinded_crowds=blinded)
    return tr.run_round(spec, _votes(counts, abstain), np.random.default_rng(7))


@pytest.mark.parametrize("blinded", [False, True])
def test_membership_views_do_not_depend_on_sub_threshold_crowds(blinded: bool) -> None:
    # 19 participants in both (the participant count is public, as in secure
    # aggregation); one abstains in the first
    a = _run([10, 2, 1, 0, 5], reveal=False, blinded=blinded, abstain=1)
    b = _run([10, 0, 2, 2, 5], reveal=False, blinded=blinded)
    assert a.release.items == b.release.items == ("c0", "c4")
    assert a.release.counts is None
    va, vb = a.views["analyzer"], b.views["analyzer"]
    assert va == vb
    assert va["passed"] == ("c0", "c4") and "counts" not in va
    # one representative per passing crowd: the analyzer cannot count the crowds
    assert va["reports_seen"] == 2
    rec = va["receipt"]
    assert isinstance(rec, AnalyzerReceipt)
    assert (rec.accepted, rec.forwarded) == (19, 2)
    assert not hasattr(rec, "crowds") and not hasattr(rec, "dropped_by_threshold")
    # the operator receipt (shuffler that thresholds) keeps the totals, and differs
    op = "shuffler2" if blinded else "shuffler"
    ra, rb = a.views[op]["receipt"], b.views[op]["receipt"]
    assert (ra.crowds, rb.crowds) == (5, 4)  # the abstention is a crowd of one
    assert ra.dropped_by_threshold["below_threshold"] == 4
    assert rb.dropped_by_threshold["below_threshold"] == 4
    assert (ra.crowds_forwarded, rb.crowds_forwarded) == (2, 2)
    assert ra.dropped_by_threshold["membership_only"] == 13


@pytest.mark.parametrize("blinded", [False, True])
def test_counts_rounds_keep_passing_counts_only(blinded: bool) -> None:
    a = _run([10, 2, 1, 0, 5], reveal=True, blinded=blinded, abstain=1)
    b = _run([10, 0, 2, 2, 5], reveal=True, blinded=blinded)
    assert dict(a.release.counts) == {"c0": 10, "c4": 5}
    assert a.views["analyzer"]["counts"] == {"c0": 10, "c4": 5}
    assert a.views["analyzer"] == b.views["analyzer"]
    assert a.views["analyzer"]["receipt"].forwarded == 15


def test_two_crowds_three_reports_no_longer_reaches_the_analyzer() -> None:
    # the example: no abstentions, sub-threshold sizes {2, 1} vs {1, 1, 1}
    a = _run([4, 2, 1, 0, 0], reveal=False, blinded=False)
    b = _run([4, 1, 1, 1, 0], reveal=False, blinded=False)
    assert a.views["analyzer"] == b.views["analyzer"]
    assert a.views["shuffler"]["receipt"].crowds != b.views["shuffler"]["receipt"].crowds


def test_analyzer_receipt_and_rule_validate() -> None:
    with pytest.raises(ShufflerError):
        HardThreshold(3, membership_only=1)  # type: ignore[arg-type]
    ctx = _run([4, 0, 0, 0, 0], reveal=False, blinded=False).views["analyzer"]["receipt"].context
    with pytest.raises(ShufflerError):
        AnalyzerReceipt(ctx, 2, 3, "hard(T=3)")
    with pytest.raises(ShufflerError):
        AnalyzerReceipt(ctx, -1, 0, "hard(T=3)")
    with pytest.raises(ShufflerError):
        AnalyzerReceipt("ctx", 2, 1, "hard(T=3)")  # type: ignore[arg-type]
    assert HardThreshold(3, membership_only=True).describe() == "hard(T=3,membership)"


@pytest.mark.parametrize("blinded", [False, True])
def test_triehh_over_membership_shuffler_releases_the_plaintext_trie(blinded: bool) -> None:
    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehh import TrieHHConfig, encode_population, run_triehh
    from protocol.core.transports import get_transport

    alpha = UnitAlphabet("abc", 1)
    vocab = ["ab", "ba", "c", "abc"]
    items = np.repeat(np.arange(4), [120, 90, 60, 30])
    data = encode_population(vocab, np.arange(301), items, np.ones(300, np.int64), alpha, 5)
    cfg = TrieHHConfig(theta=6, gamma=4.0, max_levels=5)
    plain = run_triehh(data, alpha, cfg, get_transport("plain"), np.random.default_rng(9))
    res = run_triehh(data, alpha, cfg, ShufflerTransport(simulate=True, blinded_crowds=blinded),
                     np.random.default_rng(9))
    assert plain.heavy_hitters and res.heavy_hitters == plain.heavy_hitters
    assert res.prefixes == plain.prefixes
