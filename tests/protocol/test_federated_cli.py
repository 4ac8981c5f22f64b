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
    assert labels == ["k/2", "k", "2k", "3k", "adaptive", "floor"]
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


def test_describe_reports_local_recall_beside_table_7(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["federated", "--describe", "--dataset", "regime", "--own", "0.5",
                 "--scale", "0.05", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    loc = out["local"]
    assert loc["k"] == 10 and 0 <= loc["local_recall"] <= 1 and len(loc["per_party"]) == 20
    assert loc["paper_table7"]["fedpem"] == 0.162 and loc["paper_table7"]["taps"] == 0.179
    assert out["generator"]["own"] == 0.5 and out["generator"]["parties"] == 20
    assert main(["federated", "--describe", "--dataset", "regime", "--own", "0",
                 "--scale", "0.05", "--k", "5"]) == 0
    text = capsys.readouterr().out
    assert "local recall of the global top-5" in text and "Table 7" in text
    assert "FedPEM 0.162" in text and "own 0.0" in text
    # SYN: the figure the issue quotes against the paper's 0.162
    assert main(["federated", "--describe", "--json"]) == 0
    syn = json.loads(capsys.readouterr().out)["local"]
    assert syn["local_recall"] > 0.4 and syn["sum_of_local_top_k_f1"] == 1.0
    assert main(["federated", "--describe", "--dataset", "regime", "--own", "1.2"]) == 2


@pytest.mark.parametrize("rule", ["floor", "k", "adaptive", "7"])
def test_federated_extension_rules_on_the_command_line(
        rule: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["federated", "--mechanism", "tap", "--scale", "0.02", "--seed", "1",
                 "--extension", rule, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_reports_per_user"] == 1


def test_eval_regime_map_files_and_jobs(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    args = ["eval", "federated", "--experiment", "regime", "--runs", "1", "--owns", "0,0.5",
            "--ks", "5", "--epsilons", "4", "--rules", "floor,k", "--tap-rules", "floor",
            "--scale", "0.02", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    table = capsys.readouterr().out
    assert "| own | local recall | TAPS floor | TAPS t=k | TAP floor | FedPEM | GTF |" in table
    a = tmp_path / "a"
    with (a / "federated_regime.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["own"], r["mechanism"], r["rule"]) for r in rows} == {
        (o, m, r) for o in ("0.0", "0.5")
        for m, r in [("taps", "floor"), ("taps", "k"), ("tap", "floor"), ("fedpem", "k"),
                     ("gtf", "k")]}
    doc = json.loads((a / "federated_regime.json").read_text())
    assert [e["own"] for e in doc["knob"]] == [0.0, 0.5]
    assert set(doc["orderings"][0]["rules"]) == {"floor"}
    assert all(c["f1_ci95"] is None for c in doc["cells"])  # one run: no interval
    assert (a / "federated_regime_k5.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # two worker processes give the same map (every run's seed is fixed)
    assert main(args + ["--jobs", "2", "--out", str(tmp_path / "b")]) == 0
    b = json.loads((tmp_path / "b" / "federated_regime.json").read_text())
    strip = [{k: v for k, v in c.items() if k != "seconds"} for c in doc["cells"]]
    assert strip == [{k: v for k, v in c.items() if k != "seconds"} for c in b["cells"]]
    capsys.readouterr()
    # bad input: one line, exit 2
    for bad in (["--rules", "sometimes"], ["--dataset", "words"], ["--jobs", "0"],
                ["--ks", "x"]):
        assert main(args[:-1] + bad + ["--out", str(tmp_path / "c")]) == 2
    assert "error" in capsys.readouterr().err


def test_eval_federated_extension_option(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    out = tmp_path / "ext"
    assert main(["eval", "federated", "--runs", "1", "--epsilons", "4", "--scale", "0.02",
                 "--extension", "adaptive", "--quiet", "--out", str(out)]) == 0
    head = json.loads((out / "runs.jsonl").read_text().splitlines()[0])
    assert head["config"]["extension"] == "adaptive"
    assert main(["eval", "federated", "--runs", "1", "--extension", "often",
                 "--out", str(out)]) == 2
    assert "--extension must be one of" in capsys.readouterr().err


#: cells of the regime map docs/federated.md quotes (k = 10, epsilon 4, GRR, data seed
#: 0, runs with seeds 0..9): (own, mechanism, rule) -> mean F1
REGIME_FIGURES = {
    (0.0, "taps", "adaptive"): 0.50, (0.0, "taps", "floor"): 0.67,
    (0.0, "tap", "adaptive"): 0.39, (0.0, "tap", "floor"): 0.68,
    (0.0, "fedpem", "k"): 0.60, (0.0, "gtf", "k"): 0.52,
    (0.25, "taps", "adaptive"): 0.37, (0.25, "taps", "floor"): 0.50,
    (0.25, "tap", "adaptive"): 0.32, (0.25, "tap", "floor"): 0.53,
    (0.25, "fedpem", "k"): 0.45, (0.25, "gtf", "k"): 0.38,
    (0.5, "taps", "adaptive"): 0.13, (0.5, "taps", "floor"): 0.12,
    (0.5, "tap", "adaptive"): 0.13, (0.5, "tap", "floor"): 0.12,
    (0.5, "fedpem", "k"): 0.10, (0.5, "gtf", "k"): 0.10,
}


@pytest.mark.slow
def test_documented_regime_map_figures() -> None:
    """The regime-map cells docs/federated.md quotes, recomputed run by run with the
    map's own task function (deterministic given the seeds), so they cannot drift."""
    from protocol.studies.runners.federated import _regime_task

    got = {}
    for own in sorted({o for o, _, _ in REGIME_FIGURES}):
        for unit, rule in (("taps", "adaptive"), ("taps", "floor"), ("tap", "adaptive"),
                           ("tap", "floor"), ("fedpem+gtf", "k")):
            f1: dict[tuple, list[float]] = {}
            for r in range(10):
                for key, row in _regime_task((own, 0, 1.0, 10, 4.0, "grr", unit, rule, 0, r)):
                    f1.setdefault((own, key[4], rule), []).append(row["f1"])
            got.update({c: round(sum(v) / len(v), 2) for c, v in f1.items()})
    assert {c: got[c] for c in REGIME_FIGURES} == REGIME_FIGURES
