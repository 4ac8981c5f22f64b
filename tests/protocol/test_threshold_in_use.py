"""TrieHH++ over the threshold transport releases what the plaintext transport releases."""
from __future__ import annotations

import json

import pytest

from protocol.cli import main


def _run(capsys: pytest.CaptureFixture[str], transport: str) -> dict:
    assert main(["triehhpp", "--transport", transport, "--users", "100000", "--seed", "3",
                 "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_triehhpp_over_threshold_matches_plain(capsys: pytest.CaptureFixture[str]) -> None:
    thr, plain = _run(capsys, "threshold"), _run(capsys, "plain")
    assert thr["transport"] == "threshold"
    assert [lv["released"] for lv in thr["levels"]] == [lv["released"] for lv in plain["levels"]]
    assert sum(lv["released"] for lv in thr["levels"]) > 0
    assert thr["heavy_hitters"] == plain["heavy_hitters"]
