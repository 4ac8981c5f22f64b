"""``fedhh bench poplar1``: the heavy-hitters benchmark on a tiny population, and the
reference comparison's refusals (the draft's reference itself is not in the repository;
docs/poplar1.md gives the command that measured it)."""
from __future__ import annotations

import json

import pytest

from protocol.cli import main


def test_bench_hh_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "poplar1", "--hh", "--users", "120", "--chars", "2",
                 "--support", "20", "--threshold", "10"]) == 0
    out = json.loads(capsys.readouterr().out)
    (run,) = out["runs"]
    assert run["bits"] == 16 and run["n"] == 120 and run["levels"] >= 1
    assert run["cpu_seconds"] > 0 and "peak_rss_mb" in out
    assert run["true_top_k_found"] >= 1


def test_bench_reference_refusals(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    assert main(["bench", "poplar1"]) == 2                       # neither --reference nor --hh
    assert main(["bench", "poplar1", "--reference", str(tmp_path)]) == 2   # no vdaf_poc there
    assert "vdaf_poc" in capsys.readouterr().err
    assert main(["bench", "poplar1", "--hh", "--users", "x"]) == 2
