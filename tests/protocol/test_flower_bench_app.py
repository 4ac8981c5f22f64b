"""``fedhh bench flower --app`` on the in-process grid (needs ``flwr``): the interleaved
rounds are recorded per kind, and two rounds (one of each) leave nothing out."""
from __future__ import annotations

import json

import pytest

flwr = pytest.importorskip("flwr")


@pytest.mark.parametrize("rounds", [2, 4])
def test_bench_app_records_both_kinds(rounds) -> None:  # noqa: ANN001
    from protocol.flower.bench import bench_app

    out = bench_app(6, 4, rounds=rounds, engine="local")
    assert out["rounds_completed"] == {"flower": rounds // 2, "fedhh": rounds // 2}
    assert out["warmup_left_out"] is (rounds >= 4)
    assert out["fedhh_sessions_complete"]
    assert out["fedhh_cpu_median"] > 0 and out["flower_cpu_median"] > 0
    assert out["fedhh_bytes_per_node"] > 0 and out["flower_bytes_per_node"] > 0


def test_bench_app_command_refuses_odd_rounds(capsys) -> None:  # noqa: ANN001
    from protocol.cli import main

    assert main(["bench", "flower", "--app", "--engine", "local", "--clients", "6",
                 "--dim", "4", "--rounds", "3"]) == 2
    assert "--rounds must be even" in capsys.readouterr().err
    assert main(["bench", "flower", "--app", "--engine", "local", "--clients", "6",
                 "--dim", "4", "--rounds", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["warmup_left_out"] is False and d["rounds"] == 2
