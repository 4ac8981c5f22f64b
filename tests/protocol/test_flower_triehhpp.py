"""TrieHH++ as a Flower app (needs ``flwr``), on the in-process grid: the same release
as ``fedhh triehhpp`` with the same seed, keyed participation, and the node's ledger."""
from __future__ import annotations

import logging

import pytest

flwr = pytest.importorskip("flwr")

from protocol.core.contract import plaintext_transport  # noqa: E402
from protocol.flower.triehhpp_app import run_app  # noqa: E402
from protocol.studies.runners import triehhpp  # noqa: E402

# 200 users: bound eq3 and a fixed theta, else Lemma 3 finds nothing this small
KW = dict(dataset="zipf", users=200, epsilon=1.0, theta=2, max_length=3, seed=2, slack=3.0,
          bound="eq3")


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("flwr").setLevel(logging.WARNING)


@pytest.mark.slow  # 4 to 8 s each on 2 busy cores: 200 nodes (the default suite's
# Flower set stays under 20 s; test_flower_apps.py covers the mod and workflow)
@pytest.mark.parametrize("threat", ["malicious", "semi-honest"])
def test_triehhpp_flower_app_releases_what_fedhh_triehhpp_releases(threat) -> None:  # noqa: ANN001
    out = run_app(triehhpp.TrieHHPPOptions(transport="secagg-flower", **KW), engine="local",
                  threat=threat, compare=False)
    ref = triehhpp.run(triehhpp.TrieHHPPOptions(**KW), plaintext_transport())
    assert out["heavy_hitters"] == [(h["item"], h["count"]) for h in ref["heavy_hitters"]]
    assert out["heavy_hitters"]  # something was found
    s = out["flower_summary"]
    assert [lv["contacted"] for lv in s["levels"]] == [lv["contacted"] for lv in ref["levels"]]
    assert [lv["released"] for lv in s["levels"]] == [lv["released"] for lv in ref["levels"]]
    assert all(lv["in_sum"] == lv["contacted"] for lv in out["levels"])
    # what only the nodes know stays unknown to the server
    assert all(lv["participants_sim_only"] == -1 for lv in s["levels"])


@pytest.mark.slow  # about 4 s on 2 busy cores
def test_keyed_participation_runs_and_hides_the_sample_from_the_server() -> None:
    """The deployment's participation (the nodes' shared key): the run completes with
    a release whose counts are at least theta; it is not the seed's release in general."""
    out = run_app(triehhpp.TrieHHPPOptions(transport="secagg-flower", **KW), engine="local",
                  threat="semi-honest", participation="key", compare=False)
    assert out["participation"] == "key"
    assert all(c >= KW["theta"] for _, c in out["heavy_hitters"])
    assert all(lv["in_sum"] == lv["contacted"] for lv in out["levels"])


def test_flat_and_unknown_options_are_refused() -> None:
    from protocol.flower.session import FlowerSecAggError
    from protocol.flower.triehhpp_app import make_client_app, options_from_config

    with pytest.raises(FlowerSecAggError, match="flat"):
        options_from_config(triehhpp.TrieHHPPOptions(flat=True))
    with pytest.raises(FlowerSecAggError, match="unknown"):
        options_from_config({"users": 10, "gamma": 2})
    with pytest.raises(FlowerSecAggError, match="participation"):
        make_client_app(triehhpp.TrieHHPPOptions(**KW), participation="server")


@pytest.mark.slow  # about 5 s: a subprocess that imports Flower and runs the project
def test_fedhh_flower_new_triehhpp_project_runs(tmp_path) -> None:  # noqa: ANN001
    import subprocess
    import sys

    from protocol.cli import main

    proj = tmp_path / "hh"
    assert main(["flower", "new", str(proj), "--app", "triehhpp", "--nodes", "300",
                 "--threat", "semi-honest"]) == 0
    assert (proj / "pki" / "participation.key").stat().st_size == 32
    r = subprocess.run([sys.executable, str(proj / "run.py"), "--local"], capture_output=True,
                       text=True, timeout=300,
                       env={"PYTHONPATH": ":".join(sys.path), "FLWR_TELEMETRY_ENABLED": "0",
                            "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "TrieHH++ heavy hitters:" in r.stderr, r.stderr[-2000:]
