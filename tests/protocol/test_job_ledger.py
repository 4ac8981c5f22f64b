"""The helpers' and devices' ledgers (protocol.core.job_ledger): what they refuse, that
they survive a restart (a new object reading the same file), that writes are atomic,
and that a corrupt or unreadable ledger is a named error, never a silent reset."""
from __future__ import annotations

import json
import os

import pytest

from protocol.core.job_ledger import (
    ABANDONED_EVENT, DeviceLedger, HelperLedger, LedgerError, LedgerRefusal,
    atomic_write_json,
)

I1, I2, I3 = bytes([1]) * 16, bytes([2]) * 16, bytes([3]) * 16


def _refused(reason, fn, *args):
    with pytest.raises(LedgerRefusal) as err:
        fn(*args)
    assert err.value.reason == reason, err.value
    return err.value


def test_one_beacon_per_task_and_round_until_a_job_completes(tmp_path):
    p = tmp_path / "h.json"
    led = HelperLedger(p)
    led.open_job("t", I1)
    led.begin_beacon("t", 1)
    _refused("sample_redrawn", led.begin_beacon, "t", 1)
    led.revealed("t", 1)
    led.round_completed("t", 1)
    led.begin_beacon("t", 2)
    led.revealed("t", 2)
    led.round_completed("t", 2)
    assert led.close_job("t", "completed", "", "Bye finished") is None
    again = HelperLedger(p)  # a restarted helper
    assert [j["status"] for j in again.jobs("t")] == ["completed"]
    again.open_job("t", I2)  # after a completed job, a new epoch
    again.begin_beacon("t", 1)
    again.close_job("t", "aborted", "x", "the server left")  # started, never revealed
    third = HelperLedger(p)
    assert third.abandoned("t") == 0  # no sample was shown
    _refused("job_reused", third.open_job, "t", I1)
    third.open_job("t", I3)
    _refused("sample_redrawn", third.begin_beacon, "t", 1)  # job 2 did not complete


def test_a_job_left_after_a_reveal_is_named_counted_and_spends_the_budget(tmp_path):
    p = tmp_path / "h.json"
    led = HelperLedger(p)
    led.open_job("t", I1)
    led.begin_beacon("t", 1)
    led.revealed("t", 1)
    event = led.close_job("t", "completed", "", "the server's Bye finished")
    assert event["event"] == ABANDONED_EVENT and event["round"] == 1
    assert led.events == [event]
    back = HelperLedger(p)
    assert back.abandoned("t") == 1 and back.jobs("t")[0]["status"] == "abandoned"
    assert ABANDONED_EVENT in back.jobs("t")[0]["reason"]
    _refused("abandon_budget_spent", back.open_job, "t", I2)
    other = HelperLedger(p)
    other.open_job("other-task", I2)  # the count is per task
    other.close_job("other-task", "completed", "", "Bye finished")
    roomy = HelperLedger(p, max_abandoned=1)
    roomy.open_job("t", I3)
    _refused("sample_redrawn", roomy.begin_beacon, "t", 1)
    roomy.begin_beacon("t", 2)


def test_a_helper_that_stopped_mid_job_closes_it_as_interrupted(tmp_path):
    p = tmp_path / "h.json"
    led = HelperLedger(p)
    led.open_job("t", I1)
    led.begin_beacon("t", 1)
    led.revealed("t", 1)
    led._unlock()  # the process died: its lock goes with it, the job stays open
    again = HelperLedger(p)
    _refused("abandon_budget_spent", again.open_job, "t", I2)
    back = HelperLedger(p)
    assert back.jobs("t")[0]["status"] == "abandoned" and back.abandoned("t") == 1


def test_two_helper_processes_cannot_share_a_ledger(tmp_path):
    p = tmp_path / "h.json"
    first = HelperLedger(p)
    first.open_job("t", I1)
    second = HelperLedger(p)
    _refused("job_still_open", second.open_job, "t", I2)
    first.close_job("t", "completed", "", "Bye finished")
    second.open_job("t", I2)


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[]",
                                     b'{"format": "other"}',
                                     b'{"format": "fedhh-helper-ledger/v1", "tasks": {"t": '
                                     b'{"abandoned_after_beacon": -1, "jobs": []}}}',
                                     b'{"format": "fedhh-helper-ledger/v1", "tasks": {"t": '
                                     b'{"abandoned_after_beacon": 0, "jobs": [{"instance": '
                                     b'"zz", "status": "open", "beacons": {}}]}}}'])
def test_a_corrupt_helper_ledger_is_a_named_error(tmp_path, content):
    p = tmp_path / "h.json"
    p.write_bytes(content)
    with pytest.raises(LedgerError) as err:
        HelperLedger(p)
    assert err.value.reason == "ledger_corrupt"
    assert p.read_bytes() == content  # never reset


def test_an_unreadable_ledger_is_a_named_error(tmp_path):
    p = tmp_path / "h.json"
    p.mkdir()  # a directory where the file should be
    with pytest.raises(LedgerError) as err:
        HelperLedger(p)
    assert err.value.reason == "ledger_unreadable"


def test_atomic_write_leaves_no_temporary_and_replaces_whole(tmp_path):
    p = tmp_path / "x.json"
    atomic_write_json(p, {"a": 1})
    atomic_write_json(p, {"b": [1, 2]})
    assert json.loads(p.read_text()) == {"b": [1, 2]}
    assert sorted(os.listdir(tmp_path)) == ["x.json"]
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(LedgerError) as err:
            atomic_write_json(ro / "y.json", {})
        assert err.value.reason == "ledger_write_failed"
    finally:
        os.chmod(ro, 0o700)


def test_the_device_ledger_keeps_budget_and_rounds_across_restarts(tmp_path):
    led = DeviceLedger(tmp_path)
    led.check_vote(7, "t", I1, 1, 2)
    led.record_vote(7, "t", I1, 1)
    _refused("already_voted", led.check_vote, 7, "t", I1, 1, 2)
    back = DeviceLedger(tmp_path)  # a restarted device process
    assert back.votes(7, "t") == 1 and back.known_instance(7, "t", I1)
    assert not back.known_instance(7, "t", I2)
    back.check_vote(7, "t", I2, 1, 2)  # a new job: round 1 again, within the budget
    back.record_vote(7, "t", I2, 1)
    _refused("budget_spent", DeviceLedger(tmp_path).check_vote, 7, "t", I3, 2, 2)
    assert DeviceLedger(tmp_path).votes(8, "t") == 0  # nobody else's file


def test_a_corrupt_device_ledger_is_a_named_error(tmp_path):
    (tmp_path / "device-3.json").write_text('{"format": "fedhh-device-ledger/v1", '
                                            '"device": 4, "tasks": {}}')
    with pytest.raises(LedgerError) as err:
        DeviceLedger(tmp_path).votes(3, "t")
    assert err.value.reason == "ledger_corrupt"
