from __future__ import annotations

import pytest

from protocol.cli import main


def test_demo_runs_and_matches_plaintext(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--users", "2000", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "TrieHH on en: n = 2,000 users" in out
    assert "releases the same trie" in out


def test_demo_rejects_tiny_population(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--users", "5"]) == 2
    assert "--users must be at least 100" in capsys.readouterr().err
