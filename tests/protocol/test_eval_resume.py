"""Long evaluations survive: ``fedhh eval triehh`` and ``fedhh eval federated`` write
each repetition as it finishes, draw their files from what exists when interrupted,
and ``--resume`` continues without recomputing a finished repetition."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from protocol.cli import main
from protocol.studies.errors import StudyError
from protocol.studies.evaluation import Journal


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, module: object, name: str,
                  at: int) -> list[int]:
    """Make ``module.name`` raise KeyboardInterrupt on its ``at``-th call; returns the
    call log (one entry per call that ran)."""
    real, calls = getattr(module, name), []

    def flaky(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if len(calls) + 1 == at:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls


def test_journal_keeps_cuts_and_refuses_other_options(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    with Journal(path, {"a": 1}) as j:
        j.record([1.0, 0], {"x": [1, 2]})
        j.record([1.0, 1], {"x": [3]})
    with open(path, "a") as fh:
        fh.write('{"key": [1.0, 2], "val')  # cut by a kill
    with Journal(path, {"a": 1}, resume=True) as j:
        assert len(j) == 2 and j.get([1.0, 1]) == {"x": [3]} and j.get([1.0, 2]) is None
    assert len(path.read_text().splitlines()) == 3  # the cut line is gone
    with Journal(path, {"a": 1}) as j:  # without resume: afresh
        assert len(j) == 0
    with pytest.raises(StudyError, match="written with other options"):
        Journal(path, {"a": 2}, resume=True)
    path.write_text('{"config": {"a": 1}}\nnot json\n{"key": [0], "value": 1}\n')
    with pytest.raises(StudyError, match="not a JSON line"):
        Journal(path, {"a": 1}, resume=True)


TRIEHH = ["eval", "triehh", "--dataset", "zipf", "--users", "20000", "--seed", "5",
          "--runs", "3", "--csv-top", "30", "--kmax", "20", "--quiet"]


def test_eval_triehh_interrupted_then_resumed_equals_a_straight_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from protocol.studies.runners import triehh_eval

    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(TRIEHH + ["--out", str(whole)]) == 0
    calls = _interrupt_at(monkeypatch, triehh_eval, "run_once", 3)
    assert main(TRIEHH + ["--out", str(part)]) == 130
    assert len(calls) == 2
    # the files are drawn from the two finished runs
    summary = json.loads((part / "summary.json").read_text())
    assert (summary["runs"], summary["runs_requested"]) == (2, 3)
    assert (part / "recall.png").stat().st_size > 0
    assert len((part / "runs.jsonl").read_text().splitlines()) == 3
    capsys.readouterr()
    monkeypatch.undo()
    calls = _interrupt_at(monkeypatch, triehh_eval, "run_once", 99)
    assert main(TRIEHH[:-1] + ["--out", str(part), "--resume"]) == 0  # not --quiet
    assert len(calls) == 1  # only the missing run ran
    assert "resuming: 2 finished repetitions" in capsys.readouterr().err

    def rows(d: Path, name: str) -> list[dict[str, str]]:
        with open(d / name) as fh:
            return list(csv.DictReader(fh))

    for name in ("discovery.csv", "metrics.csv"):
        assert rows(part, name) == rows(whole, name)
    a, b = (json.loads((d / "summary.json").read_text()) for d in (part, whole))
    for s in (a, b):
        s.pop("seconds_per_run_mean")
        s.pop("out")
    assert a == b
    assert main(TRIEHH[:-1] + ["--out", str(part), "--resume", "--runs", "4"]) == 2
    assert "written with other options" in capsys.readouterr().err


FEDERATED = ["eval", "federated", "--scale", "0.03", "--runs", "2", "--epsilons", "2,4",
             "--quiet"]


def test_eval_federated_interrupted_then_resumed_equals_a_straight_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mechanisms.federated as fed

    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(FEDERATED + ["--out", str(whole)]) == 0
    # 4 mechanisms x 2 runs per epsilon: interrupt in the second epsilon
    calls = _interrupt_at(monkeypatch, fed, "run", 11)
    assert main(FEDERATED + ["--out", str(part)]) == 130
    assert len(calls) == 10
    with open(part / "federated_summary.csv") as fh:
        done = list(csv.DictReader(fh))
    # every finished cell is in the summary: epsilon 2 whole, TAPS at epsilon 4
    assert [(r["mechanism"], r["epsilon"]) for r in done][3:] == [("gtf", "2.0"), ("taps", "4.0")]
    assert (part / "federated_f1.png").stat().st_size > 0
    monkeypatch.undo()
    calls = _interrupt_at(monkeypatch, fed, "run", 99)
    assert main(FEDERATED + ["--out", str(part), "--resume"]) == 0
    assert len(calls) == 6  # only the runs the journal did not hold

    def rows(d: Path, name: str) -> list[dict[str, str]]:
        with open(d / name) as fh:
            return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(fh)]

    assert rows(part, "federated_runs.csv") == rows(whole, "federated_runs.csv")
    assert rows(part, "federated_summary.csv") == rows(whole, "federated_summary.csv")


def test_eval_federated_one_run_prints_no_interval(tmp_path: Path) -> None:
    assert main(["eval", "federated", "--scale", "0.03", "--runs", "1", "--epsilons", "4",
                 "--quiet", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "federated_summary.csv") as fh:
        assert {r["f1_ci95"] for r in csv.DictReader(fh)} == {"n/a"}


def test_eval_federated_refuses_a_journal_of_other_defaults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a journal written before the drift default changed (no "drift" in its options, as
    # then) must not be resumed: its runs used the "printed" reading
    assert main(FEDERATED + ["--out", str(tmp_path)]) == 0
    journal = tmp_path / "runs.jsonl"
    lines = journal.read_text().splitlines()
    head = json.loads(lines[0])
    assert head["config"]["drift"] == "variance"
    del head["config"]["drift"], head["config"]["fedpem_upload"]
    journal.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    assert main(FEDERATED + ["--out", str(tmp_path), "--resume"]) == 2
    assert "written with other options" in capsys.readouterr().err
