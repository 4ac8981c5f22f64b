"""``--transport`` on ``fedhh hh``, ``fedhh federated`` and ``fedhh sfp``: the same
release on every transport that fits the mechanism's contribution kinds, accounting
for the path the contributions actually took, and one-line refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.cli import main


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("mechanism", ["pem", "aon"])
def test_hh_pem_same_release_on_every_transport(mechanism: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = ["hh", "--mechanism", mechanism, "--users", "300", "--support", "50", "--seed", "3",
            "--k", "3", "--levels", "2"]
    ref = _json(capsys, base)
    assert ref["transport"] == "plain"
    for name in ("plain", "shuffler", "secagg", "threshold"):
        extra = ["--threat", "semi-honest"] if name in ("secagg", "threshold") else []
        out = _json(capsys, base + ["--transport", name] + extra)
        assert out["transport"] == name
        assert out["discovered"] == ref["discovered"], name
        assert out["privacy"] == ref["privacy"]


def test_hh_triehh_same_release_over_shuffler(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["hh", "--mechanism", "triehh", "--dataset", "en", "--users", "20000", "--seed", "1"]
    ref = _json(capsys, base)
    out = _json(capsys, base + ["--transport", "shuffler"])
    assert ref["discovered"] and out["discovered"] == ref["discovered"]
    assert out["transport"] == "shuffler"


@pytest.mark.slow
def test_hh_sfp_claims_amplification_only_over_the_shuffler(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ["hh", "--mechanism", "sfp", "--dataset", "en", "--users", "20000",
            "--epsilon", "8", "--seed", "1"]
    ref = _json(capsys, base)
    assert ref["transport"] == "in process"
    assert ref["privacy"]["central_after_shuffling"] is None
    plain = _json(capsys, base + ["--transport", "plain"])
    assert plain["privacy"]["central_after_shuffling"] is None
    shuf = _json(capsys, base + ["--transport", "shuffler"])
    central = shuf["privacy"]["central_after_shuffling"]
    assert central is not None and central["delta"] == pytest.approx(1 / 20000 ** 2)
    assert ref["discovered"] and plain["discovered"] == ref["discovered"]
    # the shuffler's randomness is spawned from the run's generator, as on plain: the
    # estimates, hence the discovered words, are the same
    assert [d["item"] for d in shuf["discovered"]] == [d["item"] for d in ref["discovered"]]


@pytest.mark.parametrize("argv, message", [
    (["hh", "--mechanism", "sfp", "--users", "2000", "--transport", "secagg", "--seed", "1"],
     "SFP over --transport secagg: 2000 SFP vectors"),
    (["hh", "--users", "500", "--threat", "malicious"],
     "--threat applies to --transport secagg or threshold, not auto"),
    (["sfp", "--users", "500", "--transport", "plain"],
     "the central target (--epsilon) holds only for shuffled reports"),
    (["sfp", "--users", "500", "--secagg-graph", "complete"],
     "--secagg-graph applies to --transport secagg or threshold, not auto"),
    (["federated", "--users", "7800", "--min-batch", "5"],
     "--min-batch applies to --transport shuffler"),
])
def test_refusals_are_one_line_exit_2(argv: list[str], message: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_federated_vectors_too_large_for_secagg_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["federated", "--mechanism", "taps", "--dataset", str(_csv(tmp_path)), "--k", "3",
            "--levels", "3", "--seed", "0", "--transport", "secagg"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "taps over --transport secagg: 350 support vectors of 196609 entries" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # 18 s: SFP over every transport (run with -m slow)
def test_sfp_command_transports(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["sfp", "--dataset", "en", "--users", "20000", "--seed", "1", "--k", "128",
            "--m", "256"]
    central = _json(capsys, base)
    assert (central["transport"], central["reports_anonymous"]) == ("shuffler", True)
    assert central["central_epsilon"] == 4.0
    local = base + ["--local-epsilon", "6"]
    ref = _json(capsys, local)
    assert (ref["transport"], ref["reports_anonymous"]) == ("in process", False)
    for name, anonymous in (("plain", False), ("shuffler", True)):
        out = _json(capsys, local + ["--transport", name])
        assert (out["transport"], out["reports_anonymous"]) == (name, anonymous)
        assert out["words"] == ref["words"] if name == "plain" else \
            [w for w, _ in out["words"]] == [w for w, _ in ref["words"]]


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "users.csv"
    words = ["apple"] * 900 + ["banana"] * 600 + ["cherry"] * 450 + [f"w{i}" for i in range(150)]
    path.write_text("party,user,item\n" + "".join(
        f"{'A' if i % 2 else 'B'},{i},{w}\n" for i, w in enumerate(words)))
    return path


@pytest.mark.parametrize("mechanism", ["taps", "fedpem"])
def test_federated_same_release_on_every_transport(mechanism: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base = ["federated", "--mechanism", mechanism, "--dataset", str(_csv(tmp_path)), "--k", "3",
            "--epsilon", "8", "--levels", "8", "--seed", "0"]
    ref = _json(capsys, base)
    assert ref["transport"] == "plain" and ref["heavy_hitter_words"]
    for name in ("shuffler", "secagg"):
        extra = ["--threat", "semi-honest"] if name == "secagg" else []
        out = _json(capsys, base + ["--transport", name] + extra)
        assert out["transport"] == name
        assert out["heavy_hitters"] == ref["heavy_hitters"], name
        assert (out["f1"], out["ncr"]) == (ref["f1"], ref["ncr"])
