"""The runners are the library the commands print: same options, same results; bad
input is a StudyError, which the command line prints as a usage error (exit 2)."""
from __future__ import annotations

import json

import pytest

from protocol.cli import main
from protocol.studies.errors import StudyError
from protocol.studies.runners import default_transport
from protocol.studies.runners import triehh


def _without_timings(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items()
                if "seconds" not in k and k != "peak_rss_mb"}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def test_triehh_runner_gives_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triehh", "--dataset", "zipf", "--users", "3000", "--seed", "5",
                 "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    out = triehh.run(triehh.TrieHHOptions(dataset="zipf", users=3000, seed=5),
                     default_transport("plain"))
    assert out["heavy_hitters"], "the run should discover something"
    assert _without_timings(out) == _without_timings(printed)


def test_bad_input_is_a_study_error_and_a_usage_error_on_the_command_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(StudyError, match="--unit-size must be between 1 and 4"):
        triehh.prepare(triehh.TrieHHOptions(unit_size=5))
    assert main(["triehh", "--unit-size", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--unit-size: must be <= 4, got 5" in err


def test_unknown_transport_is_a_study_error() -> None:
    with pytest.raises(StudyError, match="unknown transport"):
        default_transport("carrier-pigeon")
