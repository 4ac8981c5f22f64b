"""The committee attacks: every deviation of a member under the default (malicious)
model ends in a named abort with nothing released; the semi-honest option's wrong share
and collusion end as measured."""
from __future__ import annotations

import pytest

from protocol.studies.attacks import ATTACKS, load_catalogue, run_attack

#: every detected committee attack and the abort it must end in
DEFAULT_MODEL = {
    "threshold.server_shifts_blinded_sum": {"committee_verification_failed",
                                            "committee_open_mismatch"},
    "threshold.helper_shifts_blinding": {"committee_verification_failed",
                                         "committee_open_mismatch"},
    "threshold.member_holds_other_share": {"committee_input_mismatch"},
    "threshold.server_equivocates_blinded_sum": {"committee_replica_failed"},
    "threshold.helper_enters_other_blinding": {"committee_helper_audit_failed"},
    "threshold.helper_hands_other_seed": {"committee_helper_audit_failed"},
    "threshold.server_multiplication_error": {"committee_verification_failed",
                                              "committee_open_mismatch"},
    "threshold.helper_multiplication_error": {"committee_verification_failed",
                                              "committee_open_mismatch"},
    "threshold.server_opens_wrong_value": {"committee_open_mismatch"},
    "threshold.helper_opens_wrong_count": {"committee_open_mismatch"},
    "threshold.replayed_committee_message": {"committee_replayed_message"},
    "threshold.helper_opens_sub_threshold": {"committee_open_mismatch"},
    "threshold.server_alters_helper_exchange": {"committee_helper_audit_failed"},
    "threshold.server_forces_device_into_sample": {"committee_sample_not_from_seed"},
    "threshold.server_redraws_sample": {"committee_sample_redrawn"},
    "threshold.server_reuses_sample": {"committee_sample_not_from_beacon"},
    "threshold.server_reveals_other_beacon_value": {"committee_sample_commitment_mismatch"},
    "threshold.helper_reveals_other_beacon_value": {"committee_sample_commitment_mismatch"},
}


@pytest.mark.slow   # the default run covers each through test_attack_catalogue.py
@pytest.mark.parametrize("name", sorted(DEFAULT_MODEL))
def test_every_member_deviation_aborts_with_its_reason(name: str) -> None:
    load_catalogue()
    assert ATTACKS[name].kind == "detected"
    out = run_attack(name, seed=5)
    assert out.passed, out.observed
    assert out.parties["server"] in DEFAULT_MODEL[name]
    assert "released" not in out.leakage


def test_every_member_deviation_is_registered_as_detected() -> None:
    load_catalogue()
    for name in DEFAULT_MODEL:
        assert ATTACKS[name].kind == "detected", name


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
