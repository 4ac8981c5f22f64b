"""``fedhh eval compare``: TrieHH vs SFP table, CSVs and plot (small run)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy import stats

from protocol.cli import UsageError, main
from protocol.cli.commands.eval_compare import _floats
from protocol.studies.runners.compare import mean_ci


def test_mean_ci_is_student_t() -> None:
    v = [0.1, 0.2, 0.3, 0.4]
    m, h = mean_ci(v)
    assert m == pytest.approx(0.25)
    assert h == pytest.approx(stats.t.ppf(0.975, 3) * np.std(v, ddof=1) / 2)
    assert mean_ci([0.5]) == (0.5, None)  # printed as n/a, never as +- 0


def test_floats_rejects_garbage() -> None:
    assert _floats("1, 4", "--epsilons") == [1.0, 4.0]
    for bad in ("", "a", "1,-2", "nan"):
        with pytest.raises(UsageError):
            _floats(bad, "--epsilons")


def test_small_comparison_writes_table_csv_and_png(tmp_path) -> None:
    out = tmp_path / "cmp"
    assert main(["eval", "compare", "--dataset", "zipf32", "--users", "5000", "--runs", "2",
                 "--epsilons", "4", "--Ts", "20", "--kmax", "10", "--k", "5", "--seed", "1",
                 "--hash-filter", "--out", str(out)]) == 0
    for name in ("runs.csv", "f1_at_k.csv", "table.md", "summary.json", "f1_at_k.png"):
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader(open(out / "runs.csv")))
    assert {r["mechanism"] for r in rows} == {"triehh", "sfp_T20", "sfp_T20_filter"}
    assert len(rows) == 6
    # the filter decodes the same reports: it only drops words (no true one here)
    for run in ("0", "1"):
        plain, filt = (next(r for r in rows if r["run"] == run and r["mechanism"] == m)
                       for m in ("sfp_T20", "sfp_T20_filter"))
        assert int(filt["discovered"]) <= int(plain["discovered"])
        assert filt["recall_at_5"] == plain["recall_at_5"]
    f1 = list(csv.DictReader(open(out / "f1_at_k.csv")))
    assert len(f1) == 3 * 2 * 10
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 5000 and summary["delta"] == pytest.approx(1 / 5000 ** 2)
    pv = summary["privacy"]["4"]
    assert pv["sfp_local_epsilon"] >= 4.0 - 1e-9  # amplification never lowers epsilon0
    tri = next(t for t in summary["table"] if t["mechanism"] == "triehh")
    assert tri["precision"] == 1.0  # TrieHH releases only words that occur
    assert 0.0 <= tri["recall"] <= 1.0
    table = (out / "table.md").read_text()
    assert "| 4 | triehh |" in table and "| 4 | sfp_T20 |" in table
    assert (out / "f1_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_one_run_prints_its_ci_as_n_a(tmp_path) -> None:
    out = tmp_path / "one"
    assert main(["eval", "compare", "--dataset", "zipf32", "--users", "3000", "--runs", "1",
                 "--epsilons", "4", "--Ts", "20", "--kmax", "10", "--k", "5", "--seed", "1",
                 "--out", str(out)]) == 0
    table = (out / "table.md").read_text()
    assert "+- n/a" in table and "+- 0.000" not in table
    summary = json.loads((out / "summary.json").read_text())
    assert all(t["recall_ci95"] is None for t in summary["table"])


SMALL = ["eval", "compare", "--dataset", "zipf32", "--users", "2000", "--runs", "2",
         "--epsilons", "4", "--Ts", "20", "--kmax", "5", "--k", "5", "--seed", "3"]


@pytest.mark.slow
def test_an_interrupted_comparison_keeps_its_runs_and_resumes(tmp_path, monkeypatch,
                                                              capsys) -> None:
    whole = tmp_path / "whole"
    assert main(SMALL + ["--out", str(whole)]) == 0
    # kill after the first run: the tables are drawn from it, the journal holds it
    from protocol.studies.runners import triehh

    real, calls = triehh.run_once, []

    def flaky(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    part = tmp_path / "part"
    monkeypatch.setattr(triehh, "run_once", flaky)
    assert main(SMALL + ["--out", str(part)]) == 130
    monkeypatch.setattr(triehh, "run_once", real)
    lines = (part / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["key"] == [4.0, 0]
    assert "+- n/a" in (part / "table.md").read_text()  # one run: no CI
    assert (part / "f1_at_k.png").stat().st_size > 0
    with open(part / "runs.jsonl", "a") as fh:
        fh.write('{"key": [4.0, 1], "value": [[')  # a line cut by a kill
    capsys.readouterr()
    assert main(SMALL + ["--out", str(part), "--resume"]) == 0
    assert "resuming: 1 finished repetitions" in capsys.readouterr().err
    strip = lambda p: [{k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
                       for r in csv.DictReader(open(p / "runs.csv"))]
    assert strip(part) == strip(whole)  # the resumed evaluation equals the whole one
    assert len((part / "runs.jsonl").read_text().splitlines()) == 3  # cut line dropped
    capsys.readouterr()
    assert main(SMALL + ["--out", str(part), "--resume", "--quiet"]) == 0  # nothing to run
    assert capsys.readouterr().err == ""
    assert main(SMALL[:-2] + ["--seed", "4", "--out", str(part), "--resume"]) == 2
    assert main(SMALL[:-2] + ["--out", str(part), "--resume"]) == 2  # no seed


def test_a_long_comparison_is_estimated_before_it_runs(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from protocol.studies.runners import compare as cmp

    probes: list[tuple[float, float]] = []

    def probe(opts, pop, word_of_user, n, delta, eps, T, per_run):  # noqa: ANN001, ANN202
        probes.append((eps, T))
        assert per_run == 2  # two T values, no hash filter
        return 30.0

    def stop(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(cmp, "_probe_run_seconds", probe)
    monkeypatch.setattr(cmp, "_loop", stop)
    said: list[str] = []
    opts = cmp.CompareOptions(out=str(tmp_path), dataset="zipf", users=2000, epsilons=(4.0,),
                              runs=3, Ts=(20, 80), seed=1)
    with pytest.raises(KeyboardInterrupt):
        cmp.compare(opts, said.append, estimate=True)
    assert probes == [(4.0, 20)]
    assert said[0] == ("estimate: about 2 min for 3 runs (2 SFP discoveries and one TrieHH "
                       "run each, timed on one probe run)")
    said.clear()
    with pytest.raises(KeyboardInterrupt):  # without estimate, or too little work: no probe
        cmp.compare(opts, said.append, estimate=False)
    with pytest.raises(KeyboardInterrupt):
        cmp.compare(cmp.CompareOptions(out=str(tmp_path / "b"), dataset="zipf", users=2000,
                                       epsilons=(4.0,), runs=2, Ts=(20,), seed=1),
                    said.append, estimate=True)
    assert probes == [(4.0, 20)] and not any(m.startswith("estimate") for m in said)


def test_equal_privacy_comparison_writes_table_json_and_png(tmp_path, capsys) -> None:  # noqa: ANN001
    """``--mechanisms triehh,poplar1`` (sampled mode by default): both at the same
    Corollary 1 parameters, so the same Theorem 1 guarantee, per n and epsilon; a
    target outside the theorem's conditions is listed, not run."""
    import json

    from protocol.cli import main
    from protocol.studies.runners.compare import equal_privacy_table

    rc = main(["eval", "compare", "--mechanisms", "triehh,poplar1", "--dataset", "en",
               "--users", "3000,6000", "--epsilons", "1,8", "--k", "5", "--out", str(tmp_path),
               "--seed", "1", "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert {r["mechanism"] for r in rows} == {"triehh", "poplar1 (sampled)"}
    assert {(s["n"], s["epsilon"]) for s in out["skipped"]} == {(3000, 1.0), (6000, 1.0)}
    for n in (3000, 6000):
        t, p = (next(r for r in rows if r["n"] == n and r["mechanism"] == m)
                for m in ("triehh", "poplar1 (sampled)"))
        assert (t["guarantee_epsilon"], t["guarantee_delta"], t["theta"], t["m"]) == \
            (p["guarantee_epsilon"], p["guarantee_delta"], p["theta"], p["m"])
        assert p["bytes_per_contacted_client"] > t["bytes_per_contacted_client"]
        assert set(p["cpu_seconds"]) == {"clients (all)", "aggregator 0", "aggregator 1",
                                         "collector"}
        assert "below theta" in p["learns"]["server"] and "vote" in t["learns"]["server"]
    # what one corrupted client achieves: the catalogue's client attacks, run and matched
    attacks = {a["attack"]: a for a in out["corrupted_client"]}
    assert set(attacks) == {"client.on_every_transport", "client.sybils_count_once",
                            "poplar1.client_two_votes", "poplar1.client_wrong_weight"}
    assert all(a["passed"] for a in attacks.values())
    assert "secagg yes" in attacks["client.on_every_transport"]["observed"]
    table = (tmp_path / "table.md").read_text()
    assert "| Poplar1 | poplar1.client_wrong_weight |" in table
    assert table.strip() == "\n".join(equal_privacy_table(out)).strip()
    assert table.count("| poplar1 (sampled) |") == 2 and "neither runs" in table
    assert (tmp_path / "tradeoff.png").stat().st_size > 10_000
    assert main(["eval", "compare", "--mechanisms", "triehh,poplar1", "--threshold", "5",
                 "--users", "3000", "--out", str(tmp_path), "--quiet"]) == 2
    assert main(["eval", "compare", "--users", "3000,4000", "--out", str(tmp_path),
                 "--quiet"]) == 2
    assert main(["eval", "compare", "--mechanisms", "triehh,poplar1", "--poplar1-mode",
                 "plain", "--users", "3000,4000", "--out", str(tmp_path), "--quiet"]) == 2


def test_docs_equal_privacy_table_is_the_committed_result() -> None:
    """docs/poplar1.md's equal-privacy tables are what ``eval compare --markdown`` renders
    from the committed summary.json files."""
    import json
    import pathlib

    from protocol.studies.runners.compare import equal_privacy_table

    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "poplar1.md").read_text(encoding="utf-8")
    for name in ("equal_privacy",):
        res = root / "docs" / "results" / "poplar1" / name
        summary = json.loads((res / "summary.json").read_text(encoding="utf-8"))
        table = "\n".join(equal_privacy_table(summary))
        assert table in page
        assert (res / "table.md").read_text(encoding="utf-8").strip() == table.strip()
        assert (res / "tradeoff.png").is_file()


def test_equal_privacy_names_an_attack_that_did_not_go_as_expected(monkeypatch) -> None:  # noqa: ANN001
    """A client attack whose observation does not match its expectation (a regression)
    is marked NO in the table, not hidden."""
    from protocol.studies import attacks
    from protocol.studies.runners import compare

    def broken(name: str, seed: int = 0) -> attacks.Outcome:
        return attacks.Outcome(name, "dropped", "released", name != "poplar1.client_two_votes")

    monkeypatch.setattr(attacks, "run_attack", broken)
    got = compare._client_attacks(0)
    assert [a["passed"] for a in got] == [True, True, False, True]
    lines = compare.equal_privacy_table({"k": 10, "max_length": 10, "runs": 1, "seed": 0,
                                         "rows": [], "corrupted_client": got})
    assert "| Poplar1 | poplar1.client_two_votes | dropped | released | NO |" in lines
