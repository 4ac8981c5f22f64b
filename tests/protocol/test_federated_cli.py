"""``fedhh federated`` and ``fedhh eval federated`` on small populations."""
from __future__ import annotations

import csv
import json

import pytest

from protocol.cli import main


def test_federated_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["federated", "--mechanism", "taps", "--scale", "0.05", "--seed", "1", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mechanism"] == "taps" and out["parties"] == 8 and out["users"] == 39_000
    assert 0.0 <= out["f1"] <= 1.0 and 0.0 <= out["ncr"] <= 1.0
    assert out["max_reports_per_user"] == 1
    assert set(out["communication"]) == {f"SYN{i}" for i in range(8)}


@pytest.mark.parametrize("mech", ["tap", "fedpem", "gtf"])
def test_federated_text(mech: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["federated", "--mechanism", mech, "--scale", "0.03", "--seed", "2",
                 "--oracle", "oue"]) == 0
    text = capsys.readouterr().out
    assert "F1=" in text and "NCR=" in text and "SYN7" in text


def test_federated_csv_words(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    path = tmp_path / "users.csv"
    rows = ["party,user,item"]
    words = ["apple"] * 3000 + ["banana"] * 2000 + ["cherry"] * 1500 + [f"w{i}" for i in range(500)]
    for i, w in enumerate(words):
        rows.append(f"{'A' if i % 2 else 'B'},{i},{w}")
    path.write_text("\n".join(rows) + "\n")
    assert main(["federated", "--mechanism", "fedpem", "--dataset", str(path), "--k", "3",
                 "--epsilon", "8", "--levels", "6", "--seed", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["users"] == len(words) and out["parties"] == 2
    # 7,000 users, 6 levels of 8 bits, epsilon 8: each level group (about 580 users) sees
    # the three words far above the GRR noise (fixed seed).
    assert set(out["heavy_hitter_words"]) == {"apple", "banana", "cherry"}


def test_federated_bad_input(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    assert main(["federated", "--dataset", str(tmp_path / "missing.csv")]) == 2
    assert main(["federated", "--epsilon", "-1", "--scale", "0.01"]) == 2
    assert main(["federated", "--extension", "many", "--scale", "0.01"]) == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("A,1\n")
    assert main(["federated", "--dataset", str(bad)]) == 2
    dup = tmp_path / "dup.csv"
    dup.write_text("A,1,5\nA,1,6\n")
    assert main(["federated", "--dataset", str(dup)]) == 2
    assert "error" in capsys.readouterr().err


def test_eval_federated_writes_csv_and_png(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "ev"
    assert main(["eval", "federated", "--runs", "1", "--epsilons", "2,4", "--scale", "0.03",
                 "--out", str(out)]) == 0
    with (out / "federated_summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["mechanism"], float(r["epsilon"])) for r in rows} == {
        (m, e) for m in ("taps", "tap", "fedpem", "gtf") for e in (2.0, 4.0)}
    for name in ("federated_f1.png", "federated_ncr.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_federated_extension_table(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "ext"
    assert main(["eval", "federated", "--experiment", "extension", "--runs", "1",
                 "--scale", "0.03", "--out", str(out)]) == 0
    with (out / "federated_extension.csv").open() as fh:
        labels = [r["extension"] for r in csv.DictReader(fh)]
    assert labels == ["k/2", "k", "2k", "3k", "adaptive"]
    assert main(["eval", "federated", "--runs", "0", "--out", str(out)]) == 2


def test_eval_commands_refuse_an_output_dir_they_cannot_create(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for argv in (["eval", "federated", "--runs", "1"], ["eval", "triehh", "--runs", "1"]):
        assert main(argv + ["--out", str(blocker / "out")]) == 2
        assert "cannot create" in capsys.readouterr().err


@pytest.mark.parametrize("data_seed, beta", [(0, 0.5), (1, 0.5), (3, 0.2), (2, 0.8)])
def test_syn_has_table_2_statistics(data_seed: int, beta: float) -> None:
    from protocol.studies.datasets_federated import (SYN_COMMON, SYN_PARTIES, describe,
                                                     syn_population)

    stats = describe(syn_population(seed=data_seed, beta=beta))
    for row, spec in zip(stats["parties"], SYN_PARTIES):
        assert row["users"] == spec.users
        assert abs(row["distinct"] / spec.distinct - 1) <= 0.10, row
    assert abs(stats["common"] / SYN_COMMON - 1) <= 0.10 and stats["users"] == 780_000


def test_federated_describe_prints_ours_next_to_the_paper(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["federated", "--describe", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["common"] == out["paper_common"] == 276
    assert [r["distinct"] for r in out["parties"]] == [r["paper_distinct"] for r in out["parties"]]
    assert out["parties"][7]["law"] == "zipf(1.7)" and out["generator"]["beta"] == 0.5
    assert main(["federated", "--describe"]) == 0
    text = capsys.readouterr().out
    assert "276 common to every party (paper 276)" in text and "SYN3" in text
