"""The committee attacks: every deviation of a member under the default (malicious)
model ends in a named abort with nothing released; the semi-honest option's wrong share
and collusion end as measured."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.core.contract import AggregationAborted

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


def test_the_restart_attack_is_defended_by_the_ledgers_and_fails_without_them():
    """With the helpers' ledgers (the default) a server that restarts TrieHH's job until
    a chosen device is in round 1's sample gets it in about m/n of its campaigns, every
    restart past the budget refused; with helpers that forget (the defence off) the
    same attack reaches about 1 - 0.9^20 and the catalogue entry does not pass."""
    from protocol.studies.attacks.threshold_attacks import restart_outcome

    on = restart_outcome(0, keep_ledgers=True, campaigns=300)
    assert on.passed, on.observed
    assert on.leakage["inclusion_rate_defended"] <= 0.1 + 3 * (0.09 / 300) ** 0.5
    assert on.leakage["refused_restarts"] > 0
    assert on.leakage["beacons_defended"] == 300  # one beacon per campaign, no more
    off = restart_outcome(0, keep_ledgers=False, campaigns=300)
    assert not off.passed, off.observed
    assert abs(off.leakage["inclusion_rate_undefended"] - (1 - 0.9 ** 20)) < 0.06


def test_a_completed_job_may_run_again_an_abandoned_one_spends_the_budget():
    """Two complete TrieHH runs over one committee are two jobs (the second after the
    first completed); a run left after its round-1 beacon is counted, and the next job
    of the task is refused, unless the budget allows it."""
    from mechanisms.triehh import TrieHH, TrieHHConfig, run_triehh
    from protocol.core.transports.threshold import ThresholdTransport
    from protocol.studies.attacks.threshold_attacks import _restart_population

    data, a = _restart_population()
    cfg = TrieHHConfig(2, 1.415, 2, task="again")
    tr = ThresholdTransport(simulate=True)
    run_triehh(data, a, cfg, tr, np.random.default_rng(1))
    run_triehh(data, a, cfg, tr, np.random.default_rng(2))
    assert [j["status"] for j in tr.ledger.jobs("again")] == ["completed", "open"]

    class Leaves(TrieHH):
        def sample(self):
            super().sample()
            raise KeyboardInterrupt  # the server stops after seeing the sample

    for budget, refused in ((0, True), (1, False)):
        tr = ThresholdTransport(simulate=True, max_abandoned=budget)
        with pytest.raises(KeyboardInterrupt):
            next(Leaves(data, a, cfg, tr, np.random.default_rng(3)).rounds())
        if refused:
            with pytest.raises(AggregationAborted) as err:
                run_triehh(data, a, cfg, tr, np.random.default_rng(4))
            assert err.value.reason == "committee_abandon_budget_spent"
        else:  # the budget allows one; round 1 may not be drawn again in the epoch
            with pytest.raises(AggregationAborted) as err:
                run_triehh(data, a, cfg, tr, np.random.default_rng(4))
            assert err.value.reason == "committee_sample_redrawn"
        assert tr.ledger.abandoned("again") == 1


@pytest.mark.slow
def test_the_restart_table_in_the_docs_is_the_codes():
    import pathlib

    from protocol.studies.attacks.threshold_attacks import restart_table

    doc = (pathlib.Path(__file__).parents[2] / "docs" / "threshold.md").read_text()
    inside = doc.split("<!-- restarts:begin -->")[1].split("<!-- restarts:end -->")[0]
    assert inside.strip() == restart_table().strip()
