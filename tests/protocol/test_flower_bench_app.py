"""``fedhh bench flower --app`` on the in-process grid (needs ``flwr``): the interleaved
rounds are recorded per kind, and two rounds (one of each) leave nothing out."""
from __future__ import annotations

import json

import pytest

flwr = pytest.importorskip("flwr")


@pytest.mark.parametrize("rounds", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_bench_app_records_both_kinds(rounds) -> None:  # noqa: ANN001
    from protocol.flower.bench import bench_app

    rows: list[dict] = []
    out = bench_app(6, 4, rounds=rounds, engine="local", progress=rows.append)
    assert out["rounds_completed"] == {"flower": rounds // 2, "fedhh": rounds // 2}
    # one progress row per fit round, as it ends, alternating ours first
    assert [r["round"] for r in rows] == list(range(1, rounds + 1))
    assert [r["mode"] for r in rows] == ["fedhh", "flower"] * (rounds // 2)
    for r in rows:
        # the parts add up to the round's CPU (in process: all of it is this process's)
        assert sum(r["cpu_split"].values()) == pytest.approx(r["cpu_seconds"], abs=0.05)
        assert r["cpu_split"]["clientapp_workers"] == 0.0
    assert set(out["fedhh_cpu_split_median"]) == set(out["flower_cpu_split_median"])
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


def test_cpu_parts_tells_the_engine_threads_apart() -> None:
    # a thread running a function of the engine's poller's name is counted as the
    # engine's polling, a pool thread as its dispatch, and nothing is counted twice
    import threading
    import time

    from protocol.flower.fedavg_app import CPU_PARTS, cpu_parts

    release = threading.Event()
    burnt = [threading.Event(), threading.Event()]

    def burn(i: int) -> None:
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass
        burnt[i].set()
        release.wait(30)  # alive, idle, until measured

    def add_messages_to_queue() -> None:
        burn(0)

    before = cpu_parts()
    threads = [threading.Thread(target=add_messages_to_queue),
               threading.Thread(target=burn, args=(1,), name="ThreadPoolExecutor-9_0")]
    for th in threads:
        th.start()
    try:
        assert all(b.wait(30) for b in burnt)
        during = cpu_parts()
    finally:
        release.set()
        for th in threads:
            th.join()
    assert set(during) == set(CPU_PARTS)
    assert during["engine_poll"] - before["engine_poll"] >= 0.15
    assert during["engine_dispatch"] - before["engine_dispatch"] >= 0.15
    after = cpu_parts()  # ended threads fall to the rest of the process
    assert after["engine_poll"] < during["engine_poll"]
    assert sum(after.values()) - sum(before.values()) >= 0.35


def test_bench_app_fedhh_only_with_a_window(capsys) -> None:  # noqa: ANN001
    from protocol.cli import main

    assert main(["bench", "flower", "--app", "--engine", "local", "--clients", "6",
                 "--dim", "4", "--rounds", "2", "--window", "0"]) == 2
    assert "--window must be at least 1" in capsys.readouterr().err
    assert main(["bench", "flower", "--app", "--engine", "local", "--clients", "6",
                 "--dim", "4", "--rounds", "2", "--fedhh-only", "--window", "2",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["window"] == 2 and d["modes"] == "fedhh"
    assert d["rounds_completed"] == {"fedhh": 2} and "cpu_ratio" not in d
    assert d["fedhh_sessions_complete"] and d["warmup_left_out"] is True
