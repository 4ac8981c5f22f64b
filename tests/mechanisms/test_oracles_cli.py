"""Smoke tests of ``fedhh ldp``, ``fedhh bench fo`` and ``fedhh sfp`` (in-process)."""
from __future__ import annotations

import json
import pathlib

import pytest

from protocol.cli import main


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("mech", ["grr", "oue", "olh", "aon"])
def test_ldp_json(mech: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["ldp", "--mechanism", mech, "--users", "20000", "--domain", "50",
                         "--epsilon", "3", "--seed", "7", "--json"])
    assert out["mechanism"] == mech and out["users"] == 20000 and out["domain"] == 50
    assert out["effective_epsilon"] <= 3.0 and out["delta"] == 0.0
    assert len(out["top"]) == 10 and out["top"][0]["item"] == 0
    # 50 items, 7 sd: a correct implementation fails with probability < 1e-9
    assert out["max_abs_z"] < 7
    # MSE over 50 items vs mean analytical variance: ratio within a generous band
    assert 0.3 < out["mse"] / out["mean_analytical_variance"] < 3


def test_ldp_file_with_dummy(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "items.txt"
    p.write_text("\n".join(["apple"] * 500 + ["pear"] * 300 + ["fig"] * 150 + ["kiwi"] * 50))
    out = _json(capsys, ["ldp", "--mechanism", "grr", "--dataset", str(p), "--domain", "2",
                         "--epsilon", "4", "--seed", "1", "--json"])
    assert out["dummy"] is True and out["users"] == 1000
    assert [r["item"] for r in out["top"]] == ["apple", "pear"]
    assert out["top"][0]["true"] == 0.5


def test_ldp_table_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    assert main(["ldp", "--mechanism", "olh", "--users", "2000", "--domain", "20",
                 "--seed", "2", "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "OLH" in text and "MSE" in text
    assert main(["ldp", "--users", "0"]) == 2
    assert main(["ldp", "--epsilon", "-1", "--users", "10", "--domain", "5"]) == 2
    assert main(["ldp", "--dataset", str(tmp_path / "missing.txt")]) == 2


@pytest.mark.parametrize("mech", ["grr", "oue", "olh", "aon"])
def test_bench_fo(mech: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["bench", "fo", "--mechanism", mech, "--users", "5000",
                         "--domain", "100", "--seed", "3", "--json"])
    assert out["bench"] == "fo" and out["mechanism"] == mech
    assert out["seconds"] == pytest.approx(out["randomize_seconds"] + out["estimate_seconds"],
                                           abs=2e-4)
    assert out["peak_rss_mb"] > 0 and out["max_abs_z"] < 7


def test_sfp_command(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["sfp", "--dataset", "zipf", "--users", "30000", "--local-epsilon", "8",
                         "--word-epsilon", "4", "--k", "64", "--m", "256", "--top", "5",
                         "--seed", "4", "--json"])
    assert out["local_epsilon_total"] == 12.0 and out["conversion"] == "given"
    assert out["transport"] == "in process"  # a local epsilon claims no shuffling
    assert out["discovered"] >= 1 and out["precision"] > 0.5
    conv = _json(capsys, ["sfp", "--dataset", "zipf", "--users", "2000", "--epsilon", "4",
                          "--k", "16", "--m", "64", "--seed", "5", "--json"])
    assert conv["local_epsilon_fragment"] > 0 and conv["central_delta"] == pytest.approx(1 / 2000**2)
    # a central target holds only for shuffled reports: they went through the shuffler
    assert conv["transport"] == "shuffler"
