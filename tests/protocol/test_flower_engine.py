"""The FedAvg app in Flower's own simulation engine (``flwr.simulation.run_simulation``,
Ray backend): 3 rounds, 10 nodes, our secure aggregation against Flower's plaintext
FedAvg, with and without nodes failing mid-round (after the key exchange, before
their masked input). Slow: the engine starts Ray (tens of seconds on two cores) for
each run; the same apps run quickly on the in-process grid in
``test_flower_apps.py``."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

from protocol.flower.fedavg_app import AppConfig, run_app  # noqa: E402
from protocol.flower.session import Quantiser, write_pki  # noqa: E402

pytestmark = pytest.mark.slow


def test_fedavg_in_flowers_engine_equals_plaintext_fedavg(tmp_path) -> None:  # noqa: ANN001
    n, fail = 10, (2, 6)
    write_pki(tmp_path, n)
    common = dict(nodes=n, rounds=3, dim=4, pki=str(tmp_path), fail_from=2,
                  dropout_rate=0.2)
    q = Quantiser()
    runs = {}
    for name, mode, f in (("plain", "plain", ()), ("ours", "fedhh", ()),
                          ("plain_fail", "plain", fail), ("ours_fail", "fedhh", fail)):
        runs[name] = run_app(AppConfig(mode=mode, fail=f, **common))
        assert sorted(runs[name].params) == [1, 2, 3], name
    for plain, ours, dropped in (("plain", "ours", 0), ("plain_fail", "ours_fail", len(fail))):
        for rnd in (1, 2, 3):
            m = n - (dropped if rnd >= 2 else 0)
            share = m * 20 / q.max_weight
            tol = 3 * rnd * (m * 2 * q.clipping_range / q.quantization_range / share
                             + 2 * q.max_weight / (q.quantization_range * 20))
            for a, b in zip(runs[plain].params[rnd], runs[ours].params[rnd]):
                assert np.max(np.abs(a - b)) < tol, (plain, rnd)
    outs = runs["ours_fail"].outcomes
    assert [len(o.survivors) for o in outs] == [n, n - 2, n - 2]
    # the failures changed the model: the comparison is not between equal runs
    assert not np.allclose(runs["plain"].params[3][0], runs["plain_fail"].params[3][0])


def test_triehh_app_in_flowers_engine_releases_what_fedhh_triehh_releases() -> None:
    """TrieHH's ServerApp and ClientApp in the engine, one node per user (300), the
    malicious default: the heavy hitters of fedhh triehh with the same options and seed."""
    from protocol.flower.triehh_app import run_app
    from protocol.studies.runners import triehh

    kw = dict(dataset="en", users=300, theta=2, gamma=4.0, seed=5, max_length=3)
    out = run_app(triehh.TrieHHOptions(transport="secagg-flower", **kw), engine="ray",
                  threat="malicious", compare=True)
    assert out["same_heavy_hitters"] is True
    assert len(out["heavy_hitters"]) >= 3
    assert all(lv["in_sum"] == lv["sampled"] for lv in out["levels"])
