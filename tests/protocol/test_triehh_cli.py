"""Smoke tests of ``fedhh triehh``, ``fedhh privacy triehh`` and ``fedhh eval triehh``."""
from __future__ import annotations

import csv
import json
import math

import pytest

from protocol.cli import main
# Table 1 of Zhu et al. (2020), epsilon = 2, L = 10: (n, delta rule, delta, theta, gamma)
_T1 = [(10**4, 10, 1.81, 12, 1.51), (10**5, 11, 5.21, 14, 4.09),
       (10**6, 12, 15.10, 15, 12.08), (10**7, 13, 44.09, 17, 33.71)]
CELLS = [(n, "1/(300n)", 1 / (300 * n), t1, g1) for n, t1, g1, _, _ in _T1] + \
        [(n, "1/n^2", 1 / n**2, t2, g2) for n, _, _, t2, g2 in _T1]


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out)


def test_triehh_json_zipf(capsys) -> None:
    out = _json(capsys, ["triehh", "--dataset", "zipf", "--users", "20000", "--epsilon", "4",
                         "--seed", "1", "--json"])
    assert out["n"] == 20000 and out["transport"] == "plain"
    pv = out["privacy"]
    assert pv["epsilon"] <= 4 and pv["delta"] <= 1 / 20000**2
    assert pv["m"] == math.floor(pv["gamma"] * math.sqrt(20000))
    assert out["heavy_hitters"] and out["precision"] == 1.0
    assert [m["k"] for m in out["at_k"]] == [10, 50, 100]
    assert all(r["sampled"] == pv["m"] for r in out["rounds"])
    ranks = [h["true_rank"] for h in out["heavy_hitters"]]
    assert all(r is not None for r in ranks)


def test_triehh_human_output_and_file(tmp_path, capsys) -> None:
    f = tmp_path / "words.txt"
    f.write_text("\n".join(["cat"] * 3000 + ["dog"] * 2000 + ["bird"] * 5000) + "\n")
    assert main(["triehh", "--dataset", str(f), "--epsilon", "8", "--seed", "3",
                 "--unit-size", "2"]) == 0
    text = capsys.readouterr().out
    assert "heavy hitters discovered" in text and "cat" in text and "bird" in text
    assert "precision@K" in text


def test_triehh_multi_word(capsys) -> None:
    out = _json(capsys, ["triehh", "--dataset", "zipf", "--users", "20000", "--multi-word",
                         "--seed", "2", "--json"])
    assert out["multi_word"] and "Corollary 2" in out["privacy"]["theorem"]


def test_triehh_errors(capsys, monkeypatch) -> None:
    assert main(["triehh", "--dataset", "zipf", "--users", "300", "--epsilon", "1"]) == 2
    assert "condition" in capsys.readouterr().err
    assert main(["triehh", "--dataset", "/no/such/file.txt"]) == 2
    assert "unknown dataset" in capsys.readouterr().err
    assert main(["triehh", "--dataset", "zipf", "--users", "2000", "--unit-size", "5"]) == 2
    assert "--unit-size" in capsys.readouterr().err

    import protocol.core.transports as transports

    def missing(name: str, **kw: object) -> None:
        raise ModuleNotFoundError(f"No module named 'protocol.core.transports.{name}_transport'")

    monkeypatch.setattr(transports, "get_transport", missing)
    assert main(["triehh", "--dataset", "zipf", "--users", "20000", "--transport",
                 "secagg"]) == 2
    err = capsys.readouterr().err
    assert "transport 'secagg' is not available" in err
    assert main(["triehh", "--transport", "carrier-pigeon"]) == 2


@pytest.mark.parametrize("n, label, delta, theta, gamma", CELLS)
def test_privacy_table1_via_cli(capsys, n: int, label: str, delta: float, theta: int,
                                gamma: float) -> None:
    out = _json(capsys, ["privacy", "triehh", "--users", str(n), "--epsilon", "2",
                         "--delta", repr(delta), "--max-length", "10", "--json"])
    assert out["theta"] == theta and out["gamma_2dp"] == pytest.approx(gamma)
    assert out["epsilon"] <= 2 and out["delta"] <= delta


def test_privacy_default_delta_and_theorem_mode(capsys) -> None:
    out = _json(capsys, ["privacy", "triehh", "--users", "1000000", "--epsilon", "2",
                         "--json", "--frequency", "0.01"])
    assert out["target_delta"] == pytest.approx(1e-12) and out["theta"] == 15
    assert 0.9 <= out["proposition1"]["worst_case_discovery_rate"] <= 1
    assert out["proposition1"]["min_population_rate_0.9"] <= 1_000_000
    out = _json(capsys, ["privacy", "triehh", "--users", "10000", "--theta", "10",
                         "--gamma", "2", "--json"])
    assert out["mode"] == "theorem1" and out["m"] == 200
    assert main(["privacy", "triehh", "--users", "10000", "--theta", "3", "--gamma", "2"]) == 2
    assert "4 <= theta" in capsys.readouterr().err


def test_eval_triehh(tmp_path, capsys) -> None:
    out_dir = tmp_path / "ev"
    summary = _json(capsys, ["eval", "triehh", "--dataset", "zipf", "--users", "20000",
                             "--seed", "5", "--runs", "3", "--out", str(out_dir),
                             "--csv-top", "50", "--kmax", "60", "--json"])
    assert summary["all_released_in_population"] is True
    assert summary["runs"] == 3 and len(summary["at_k"]) == 2
    for name in ("discovery.png", "recall.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out_dir / "discovery.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["run"] for r in rows} == {"0", "1", "2"}
    assert {"word", "true_frequency", "discovered", "prop1_bound"} <= set(rows[0])
    with open(out_dir / "metrics.csv") as fh:
        assert sum(1 for _ in fh) == 1 + 3 * 60
    assert json.loads((out_dir / "summary.json").read_text())["n"] == 20000


@pytest.mark.parametrize("name", ["secagg", "shuffler", "threshold"])
def test_same_release_over_transports(name: str) -> None:
    """A TrieHH run with one seed releases the same trie over every transport."""
    import numpy as np

    from mechanisms.prefix_tree import UnitAlphabet
    from mechanisms.triehh import TrieHHConfig, encode_population, run_triehh
    from protocol.core.transports import get_transport

    # the committee draws each sample with its beacon: with OS randomness nobody, the
    # server included, can predict it, so "the same seed" needs the explicit switch
    opts = {"simulate": True} if name == "threshold" else {}
    try:
        other = get_transport(name, **opts)
    except ImportError as exc:  # another helper's module not there yet
        pytest.skip(f"{name} transport not importable: {exc}")
    alpha = UnitAlphabet("abc", 1)
    vocab = ["ab", "ba", "c", "abc"]
    items = np.repeat(np.arange(4), [120, 90, 60, 30])
    data = encode_population(vocab, np.arange(301), items, np.ones(300, np.int64), alpha, 5)
    cfg = TrieHHConfig(theta=6, gamma=4.0, max_levels=5)
    plain = run_triehh(data, alpha, cfg, get_transport("plain"), np.random.default_rng(9))
    res = run_triehh(data, alpha, cfg, other, np.random.default_rng(9))
    assert plain.heavy_hitters and res.heavy_hitters == plain.heavy_hitters
    assert res.prefixes == plain.prefixes
    assert [r.released for r in res.rounds] == [r.released for r in plain.rounds]


def test_bench_triehh_secagg_profile(capsys) -> None:
    out = _json(capsys, ["bench", "triehh", "--transport", "secagg", "--dataset", "zipf",
                         "--users", "3000", "--epsilon", "6", "--seed", "4",
                         "--bare-sample", "50", "--json"])
    assert out["transport"] == "secagg" and out["n"] == 3000
    assert out["rounds"] and out["seconds"] > 0 and out["cpu_seconds"] > 0
    assert out["peak_rss_mb"] > 0
    x, table = out["x25519"], out["primitives"]
    sampled = sum(r["sampled"] for r in out["rounds"])
    # every sampled client makes two key pairs per round (c and s); no dropouts here
    assert x["key_generations"] == 2 * sampled
    # and derives one c-secret and one s-secret per neighbour, so shared ones come in pairs
    assert x["shared_secrets"] > 0 and x["shared_secrets"] % 2 == 0
    assert x["operations"] == table["key_agreement"]["calls"] == \
        x["key_generations"] + x["shared_secrets"]
    assert 0 < x["bare_seconds"] and 0 < x["share_of_run_cpu"] < 1
    # on the per-device figure (the simulation's memo hits added back)
    assert out["device_cpu_seconds"] >= out["cpu_seconds"] * 0.95
    assert x["bare_share_of_run_cpu"] == pytest.approx(
        x["bare_seconds"] / out["device_cpu_seconds"], rel=0.05, abs=1e-3)
    assert table["prg"]["calls"] > 0 and table["shamir"]["calls"] > 0
    assert out["primitive_seconds_total"] <= out["device_cpu_seconds"]


def test_bench_triehh_plain_human(capsys) -> None:
    assert main(["bench", "triehh", "--dataset", "zipf", "--users", "20000",
                 "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "transport plain" in text and "candidates" in text and "X25519" not in text
