"""mechanisms.metrics against hand-computed values (the one metrics module)."""
from __future__ import annotations

import pytest

from mechanisms.metrics import (MetricError, f1_at_k, f1_score, local_recall, ncr, precision,
                                rank_of, recall_at_k, topk_metrics)


def test_f1_score_by_hand() -> None:
    assert f1_score(0.5, 1.0) == pytest.approx(2 / 3)
    assert f1_score(0.0, 0.0) == 0.0
    assert f1_score(1.0, 0.0) == 0.0


def test_set_scores_by_hand() -> None:
    # truth {1,2,3,4}, estimate {1,2,7}: p = 2/3, r = 1/2, F1 = 2 (1/3) / (7/6) = 4/7
    assert f1_at_k([1, 2, 3, 4], [1, 2, 7]) == pytest.approx(4 / 7)
    # qualities 4,3,2,1 for 10,20,30,40; estimate {20, 40, 99}: (3 + 1) / 10
    assert ncr([10, 20, 30, 40], [20, 40, 99]) == pytest.approx(0.4)
    assert local_recall([1, 2], [[1], [1, 2], [3]]) == pytest.approx((0.5 + 1 + 0) / 3)
    with pytest.raises(MetricError):
        f1_at_k([], [1])


def test_ranked_scores_by_hand() -> None:
    truth = ["a", "b", "c", "d", "e"]
    # counts released: D_3 = a (10), x (7), c (5); T_3 = {a, b, c}
    m = topk_metrics({"a": 10.0, "c": 5.0, "x": 7.0, "d": 1.0}, truth, 3)
    assert (m.k, m.precision, m.recall, m.f1) == (3, pytest.approx(2 / 3), pytest.approx(2 / 3),
                                                  pytest.approx(2 / 3))
    # no counts: precision over the whole discovered set
    m = topk_metrics({"a": None, "x": None}, truth, 2)
    assert (m.precision, m.recall, m.f1) == (0.5, 0.5, 0.5)
    m = topk_metrics({}, truth, 10)
    assert (m.precision, m.recall, m.f1) == (1.0, 0.0, 0.0)
    assert m.as_dict() == {"k": 10, "precision": 1.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(MetricError):
        topk_metrics({}, truth, 0)
    assert recall_at_k({"a", "q"}, ["a", "b", "c", "d"]) == 0.25
    assert recall_at_k({"a"}, []) == 0.0
    assert precision(["a", "q", "b"], {"a", "b"}) == pytest.approx(2 / 3)
    assert precision([], {"a"}) == 1.0 and precision([], {"a"}, empty=0.0) == 0.0
    assert rank_of(["b", "z"], truth) == {"b": 2, "z": None}


def test_same_numbers_as_the_recorded_triehh_run() -> None:
    # the at_k rows fedhh triehh printed before the move (1 word found of the top 10/50/100)
    for k, f1 in ((10, 0.18181818181818182), (50, 0.0392156862745098),
                  (100, 0.019801980198019802)):
        m = topk_metrics({"the": None}, ["the"] + [f"w{i}" for i in range(200)], k)
        assert (m.precision, m.recall, m.f1) == (1.0, 1 / k, f1)
