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


def test_demo_describes_the_validated_reports_and_their_drops(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--users", "2000", "--seed", "5", "--quiet",
                 "--corrupt-clients", "2"]) == 0
    import re

    out = capsys.readouterr().out
    assert "TrieHH over validated reports" in out
    # the committee's beacon draws the samples from the OS: how many rounds run varies
    m = re.search(r"clients: ([\d,]+) sampled over (\d+) rounds, ([\d,]+) valid reports "
                  r"counted, dropped: ([\d,]+) invalid_vote", out)
    assert m, out
    sampled, rounds, valid, dropped = (int(g.replace(",", "")) for g in m.groups())
    assert dropped == 2 * rounds and valid == sampled - dropped
    assert f"server: {sampled:,} reports received" in out
    assert f"{valid:,} valid, dropped: {dropped:,} invalid_vote" in out
    assert "masked inputs" not in out and "blinded sum" not in out
    assert "no view holds a count" in out
    assert "the honest clients' votes alone" in out and "releases the same trie" in out
    assert "input: corrupted clients' target 'zzzz'" in out


def test_demo_over_the_secagg_fed_committee_keeps_the_blinded_sums(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--users", "2000", "--seed", "5", "--quiet",
                 "--committee-input", "secagg"]) == 0
    out = capsys.readouterr().out
    assert "over SecAgg+ secure aggregation" in out and "blinded sum entries" in out
    assert "releases the same trie" in out
    assert main(["demo", "--users", "2000", "--threat", "semi-honest",
                 "--committee-input", "reports"]) == 2
    assert "--committee-input reports needs --threat malicious" in capsys.readouterr().err


def test_view_recorder_counts_reports_and_drops_by_reason() -> None:
    import numpy as np

    from protocol.core.contract import Kind, RoundSpec, Votes
    from protocol.core.corruption import CorruptClients
    from protocol.core.transports.threshold import ThresholdTransport
    from protocol.studies.runners.demo import ViewRecorder, learned_lines

    spec = RoundSpec("t", 0, Kind.VOTE, candidates=("a", "b", "c"), theta=3)
    rec = ViewRecorder(ThresholdTransport(simulate=True,
                                          corrupt=CorruptClients("two", users=(0,))))
    rec.run_round(spec, Votes(np.repeat([0, 1, 2], [6, 2, 4])), np.random.default_rng(2))
    s = rec.parties["server"]
    assert (s["input"], s["reports"], s["valid"], s["dropped"]) == \
        ("reports", 12, 11, {"invalid_vote": 1})
    assert rec.parties["clients"]["dropped"] == {"invalid_vote": 1}
    lines = learned_lines(rec.parties, rec.thetas)
    assert lines[0].startswith("server: 12 reports received")
    assert lines[-1] == "clients: 12 sampled over 1 rounds, 11 valid reports counted, " \
        "dropped: 1 invalid_vote"
