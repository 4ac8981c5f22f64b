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


def test_demo_learned_lines_come_from_the_views(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--users", "2000", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "into a thresholding committee" in out
    assert "transport threshold" in out
    for party in ("server:", "helper1:", "helper2:"):
        assert f"  {party}" in out
    assert "no view holds a count" in out


def test_view_recorder_reports_an_opened_count_below_theta() -> None:
    import numpy as np

    from protocol.core.contract import Kind, RoundSpec, Votes
    from protocol.core.transports.threshold import ThresholdTransport
    from protocol.studies.runners.demo import ViewRecorder, learned_lines

    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b", "c"), theta=3,
                     reveal_counts=True)
    rec = ViewRecorder(ThresholdTransport(simulate=True))
    rec.run_round(spec, Votes(np.repeat([0, 1, 2], [6, 2, 4])), np.random.default_rng(2))
    s = rec.parties["helper1"]
    assert (s["compared"], s["passed"], s["counts_opened"], s["smallest_count_opened"]) == \
        (3, 2, 2, 4)
    lines = learned_lines(rec.parties, rec.thetas)
    assert lines[-2] == "below theta (3): no view holds a count"
    # a view that held a count under theta is reported, not hidden
    rec.parties["server"]["smallest_count_opened"] = 2
    assert learned_lines(rec.parties, rec.thetas)[-2] == "below theta (3): a count was opened"
