"""The committee attacks end as measured: opening caught, wrong share and collusion not."""
from __future__ import annotations

from protocol.studies.attacks import ATTACKS, load_catalogue, run_attack


def test_committee_attacks_registered_and_measured() -> None:
    load_catalogue()
    assert ATTACKS["threshold.helper_opens_sub_threshold"].kind == "detected"
    assert ATTACKS["threshold.helper_wrong_share"].kind == "measured"
    assert ATTACKS["threshold.collusion"].kind == "measured"
    opened = run_attack("threshold.helper_opens_sub_threshold", seed=3)
    assert opened.passed and opened.parties["server"] == "committee_open_mismatch"
    wrong = run_attack("threshold.helper_wrong_share", seed=3)
    assert wrong.passed and wrong.leakage == {"release_changed": True,
                                              "sub_threshold_count_learned": 2}
    pair = run_attack("threshold.collusion", seed=3)
    assert pair.passed
    assert set(map(tuple, pair.leakage["pairs"].values())) == {(10, 2, 1, 0, 5)}
