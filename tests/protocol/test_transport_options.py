"""The transport options shared by the TrieHH commands: mapping, refusals, and runs."""
from __future__ import annotations

import argparse
import json

import pytest

from protocol.cli import UsageError, main
from protocol.cli.transport_options import add_transport_args, transport_from_args, \
    transport_options


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=None)
    add_transport_args(p)
    return p.parse_args(argv)


def test_defaults_give_each_transport_its_own_defaults() -> None:
    assert transport_options(_args([])) == {}
    for name in ("plain", "secagg", "shuffler"):
        assert transport_from_args(_args(["--transport", name])).name == name


@pytest.mark.parametrize("name", ["secagg", "shuffler"])
def test_keys_come_from_the_os_unless_seeded(name: str) -> None:
    # seeded (reproducible, insecure) keys only behind the explicit --seed switch
    assert transport_options(_args(["--transport", name])) == {"simulate": False}
    assert transport_options(_args(["--transport", name, "--seed", "3"])) == \
        {"simulate": True}
    assert transport_options(_args(["--transport", name, "--seed", "3", "--os-keys"])) == \
        {"simulate": False}
    assert transport_from_args(_args(["--transport", name])).simulate is False


def test_secagg_options_reach_the_transport() -> None:
    t = transport_from_args(_args(["--transport", "secagg", "--secagg-graph", "complete",
                                   "--secagg-malicious", "--dropout", "0.2", "--os-keys",
                                   "--secagg-grinding-bits", "16"]))
    assert (t.graph, t.malicious, t.dropout, t.simulate, t.grinding_bits) == \
        ("complete", True, 0.2, False, 16)


def test_secagg_workers_reach_the_transport() -> None:
    t = transport_from_args(_args(["--transport", "secagg", "--workers", "2"]))
    assert (t.workers, t.cluster) == (2, None)
    t = transport_from_args(_args(["--transport", "threshold", "--cluster", "tcp://h:8786"]))
    assert (t.workers, t.cluster) == (None, "tcp://h:8786")


def test_shuffler_options_reach_the_transport() -> None:
    t = transport_from_args(_args(["--transport", "shuffler", "--min-batch", "50",
                                   "--workers", "2", "--seed", "1", "--blinded-crowds"]))
    assert (t.min_batch_size, t.workers, t.simulate, t.blinded_crowds) == (50, 2, True, True)


@pytest.mark.parametrize("argv, msg", [
    (["--dropout", "0.1"], "--dropout applies to --transport secagg or threshold, not plain"),
    (["--transport", "shuffler", "--secagg-malicious"], "--secagg-malicious applies"),
    (["--workers", "2"], "--workers applies to --transport shuffler or secagg or threshold"),
    (["--transport", "shuffler", "--cluster", "tcp://x:1"], "--cluster applies to"),
    (["--transport", "secagg", "--workers", "0"], "--workers must be >= 1"),
    (["--os-keys"], "--os-keys applies to --transport secagg or shuffler"),
    (["--transport", "secagg", "--dropout", "1.0"], "--dropout must be in"),
    (["--transport", "shuffler", "--min-batch", "0"], "--min-batch must be >= 1"),
    (["--transport", "secagg", "--secagg-grinding-bits", "-1"], "must be in \\[0, 128\\]"),
    (["--secagg-grinding-bits", "4"], "--secagg-grinding-bits applies"),
    (["--transport", "secagg", "--blinded-crowds"], "--blinded-crowds applies to"),
])
def test_refusals(argv: list[str], msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        transport_from_args(_args(argv))


def test_triehh_cli_refuses_an_option_of_another_transport(capsys) -> None:
    assert main(["triehh", "--dataset", "zipf", "--users", "2000", "--dropout", "0.1"]) == 2
    assert "--dropout applies to --transport secagg" in capsys.readouterr().err


def test_triehh_over_malicious_secagg_with_dropouts(capsys) -> None:
    base = ["triehh", "--dataset", "zipf", "--users", "3000", "--epsilon", "6", "--seed", "7",
            "--max-length", "4", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(base + ["--transport", "secagg", "--secagg-malicious",
                        "--dropout", "0.1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["transport"] == "secagg" and out["heavy_hitters"]
    # every released word occurs; a run with dropouts counts fewer votes, so it can
    # release less than the plaintext run with the same seed, never a word absent from it
    assert out["precision"] == 1.0
    assert {h["word"] for h in out["heavy_hitters"]} <= \
        {h["word"] for h in plain["heavy_hitters"]}


def test_triehh_over_blinded_crowds_matches_plaintext(capsys) -> None:
    base = ["triehh", "--dataset", "zipf", "--users", "5000", "--epsilon", "6", "--seed", "3",
            "--max-length", "4", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(base + ["--transport", "shuffler", "--blinded-crowds"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["heavy_hitters"] and out["precision"] == 1.0
    assert {h["word"] for h in out["heavy_hitters"]} == {h["word"] for h in plain["heavy_hitters"]}
    assert all("shuffler2" in r["cpu_seconds"] for r in out["rounds"])
