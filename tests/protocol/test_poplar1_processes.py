"""The two Poplar1 aggregators in separate processes (``search_processes``): the same
views, counts and bytes as the in-process search, and a failing aggregator process
surfaces as the study's error."""
from __future__ import annotations

import numpy as np
import pytest

from protocol.studies.errors import StudyError
from protocol.studies.runners import poplar1 as runner


def _population(n: int, bits: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    heavy = rng.integers(0, 2, (4, bits)).astype(bool)
    rows = heavy[rng.choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])]
    noise = rng.integers(0, 2, (n // 5, bits)).astype(bool)
    rows[: n // 5] = noise
    return rows


def _summary(res: runner.SearchResult) -> dict:
    return {"heavy": res.heavy,
            "levels": [{k: v for k, v in lv.items() if k != "seconds"} for lv in res.levels],
            "views": [p.view for p in res.parties],
            "bytes": [(p.bytes_sent, p.bytes_received) for p in res.parties]}


@pytest.mark.parametrize("where", ["memory", "files, parked"])
def test_processes_equal_the_in_process_search(where: str, monkeypatch) -> None:  # noqa: ANN001
    """In batches of 64 reports (several per level), in memory and out of core with the
    state parked: every level's candidates, counts, rejected reports, the heavy hitters
    and each aggregator's bytes are those of the in-process run."""
    monkeypatch.setattr(runner, "PREP_BATCH", 64)
    meas = _population(150, 10, 3)
    kw = {"out_of_core": True, "park": True} if where != "memory" else {"out_of_core": False}
    rows: list[list[dict]] = [[], []]
    one = runner.heavy_hitters_bits(meas, 20, seed=7, processes=False,
                                    on_level=rows[0].append, **kw)
    two = runner.heavy_hitters_bits(meas, 20, seed=7, processes=True,
                                    on_level=rows[1].append, **kw)
    assert one.heavy and _summary(two) == _summary(one)
    # one progress row a level, with each aggregator's CPU (and, in processes, memory)
    assert [r["level"] for r in rows[0]] == [r["level"] for r in rows[1]] == list(range(10))
    assert all(len(r["aggregator_peak_rss_mb"]) == 2 for r in rows[1])
    assert rows[1][-1]["aggregator_cpu_seconds"] == [p.cpu_seconds for p in two.parties]
    for p in two.parties:
        assert p.process is not None and p.process["peak_rss_mb"] > 0
        assert p.cpu_seconds > 0 and p.process["control_bytes_sent"] > 0
    assert all(p.process is None for p in one.parties)


def test_processes_at_the_leaf_of_a_longer_string() -> None:
    """Field255 at the leaf goes over the pipe the same way (64 bits, one batch)."""
    meas = _population(40, 64, 5)
    one = runner.heavy_hitters_bits(meas, 6, seed=2, processes=False)
    two = runner.heavy_hitters_bits(meas, 6, seed=2, processes=True)
    assert one.heavy and _summary(two) == _summary(one)


def test_a_failing_aggregator_process_is_a_study_error(monkeypatch) -> None:  # noqa: ANN001
    """An aggregator whose level fails (here: a decoder that refuses every message)
    stops the search with StudyError naming it; no process is left running."""
    import multiprocessing as mp

    from protocol.core.poplar1.errors import Poplar1DecodeError

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise Poplar1DecodeError("refused")

    monkeypatch.setattr("protocol.core.poplar1.vdaf.decode_field_vec", refuse)
    with pytest.raises(StudyError, match="aggregator [01] failed: Poplar1DecodeError"):
        runner.heavy_hitters_bits(_population(30, 6, 1), 5, seed=1, processes=True)
    assert not [c for c in mp.active_children() if c.name.startswith("poplar1-aggregator")]


def test_defaults_at_scale(monkeypatch) -> None:  # noqa: ANN001
    """From PARK_REPORTS reports on the state is parked in files by default, from
    PROCESS_REPORTS on the aggregators run in processes; the result is the same, and a
    run forced in memory is not parked."""
    monkeypatch.setattr(runner, "PARK_REPORTS", 50)
    monkeypatch.setattr(runner, "PROCESS_REPORTS", 50)
    meas = _population(60, 6, 2)
    auto = runner.heavy_hitters_bits(meas, 8, seed=3)
    assert auto.parked and auto.out_of_core and auto.processes
    plain = runner.heavy_hitters_bits(meas, 8, seed=3, out_of_core=False, processes=False)
    assert not plain.parked and not plain.out_of_core and not plain.processes
    assert auto.heavy and _summary(auto) == _summary(plain)
