"""The fedhh triehhpp, privacy triehhpp and quantiles commands (small, fast runs)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from protocol.cli import main


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_privacy_triehhpp_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["privacy", "triehhpp", "--users", "1000000", "--epsilon", "1",
                         "--delta", "1e-6", "--max-length", "10", "--json"])
    assert out["theta"] == 19 and out["m"] == 4981
    assert out["epsilon"] <= 1 and out["delta"] <= 1e-6 and "Lemma 3" in out["theorem"]
    flat = _json(capsys, ["privacy", "triehhpp", "--users", "1000000", "--epsilon", "2",
                          "--delta", "1e-6", "--max-length", "10", "--flat", "--json"])
    assert flat["L"] == 1 and "Remark" in flat["theorem"]
    adv = _json(capsys, ["privacy", "triehhpp", "--users", "1000000", "--epsilon", "0.5",
                         "--delta", "1e-6", "--max-length", "10", "--composition", "advanced",
                         "--json"])
    assert "advanced" in adv["theorem"] and adv["delta"] <= 1e-6


def test_privacy_triehhpp_names_failing_condition(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["privacy", "triehhpp", "--users", "1000000", "--epsilon", "2",
                 "--delta", "1e-6", "--max-length", "10"]) == 2
    assert "m <= n/(10 theta)" in capsys.readouterr().err
    assert main(["privacy", "triehhpp", "--users", "1000000", "--epsilon", "2",
                 "--delta", "1e-6", "--max-length", "10", "--bound", "eq3"]) == 0
    assert "eq. (3)" in capsys.readouterr().out


def test_triehhpp_zipf_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["triehhpp", "--dataset", "zipf", "--users", "200000", "--epsilon", "2",
                         "--delta", "1e-6", "--bound", "eq3", "--seed", "3", "--json"])
    hh = out["heavy_hitters"]
    assert len(hh) >= 3 and out["at_k"][0]["k"] == 10
    assert all(r["count"] >= out["parameters"]["theta"] for r in hh)
    # estimates near the truth for the top items (well above threshold)
    assert all(abs(r["z"]) < 5 for r in hh[:3])
    assert out["levels"][0]["contacted"] == out["parameters"]["contacted"]


def test_triehhpp_human_and_flat(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triehhpp", "--dataset", "zipf", "--users", "50000", "--epsilon", "2",
                 "--delta", "1e-6", "--flat", "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "TrieHH++ (flat)" in text and "Remark" in text and "precision@K" in text


def test_triehhpp_file_dataset_flat_needs_candidates(tmp_path: pathlib.Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "words.txt"
    f.write_text("\n".join(["apple"] * 600 + ["pear"] * 300 + ["fig"] * 100))
    assert main(["triehhpp", "--dataset", str(f), "--epsilon", "1", "--delta", "1e-3",
                 "--bound", "eq3", "--flat"]) == 2
    assert "--candidates" in capsys.readouterr().err
    c = tmp_path / "cands.txt"
    c.write_text("apple\npear\nfig\nkiwi\n")
    out = _json(capsys, ["triehhpp", "--dataset", str(f), "--epsilon", "3", "--delta", "1e-3",
                         "--bound", "eq3", "--flat", "--candidates", str(c), "--seed", "2",
                         "--json"])
    assert [r["item"] for r in out["heavy_hitters"]][:1] == ["apple"]


def test_quantiles_command(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    out = _json(capsys, ["quantiles", "--users", "200000", "--epsilon", "2", "--bound", "eq3",
                         "--theta", "10", "--quantiles", "0.1,0.5,0.9", "--seed", "4",
                         "--json"])
    assert [r["q"] for r in out["quantiles"]] == [0.1, 0.5, 0.9]
    assert out["error_bound"] == pytest.approx(10 * 3 * 10 / out["m"])
    assert all(abs(r["rank_error"]) < out["error_bound"] for r in out["quantiles"])
    assert out["range_query_rank_error"]["p95"] < out["error_bound"]
    v = tmp_path / "v.txt"
    np.savetxt(v, np.random.default_rng(0).random(20_000))
    assert main(["quantiles", "--values", str(v)]) == 2
    assert "--lo and --hi" in capsys.readouterr().err
    assert main(["quantiles", "--values", str(v), "--lo", "0", "--hi", "1", "--epsilon", "3",
                 "--bound", "eq3", "--theta", "5", "--max-length", "5"]) == 0
    assert "rank error bound" in capsys.readouterr().out
