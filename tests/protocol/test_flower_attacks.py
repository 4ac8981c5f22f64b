"""The Flower adapter's entries of the attack catalogue (protocol/flower/attacks.py):
each meets its stated expectation, on the in-process grid without Flower."""
from __future__ import annotations

import json

import pytest

import protocol.flower.attacks  # noqa: F401  (registers the flower.* attacks)
from protocol.cli import main
from protocol.studies.attacks import ATTACKS, run_attack

FLOWER = [n for n, info in ATTACKS.items() if info.system == "flower"]


def test_the_adapters_deviations_are_in_the_catalogue() -> None:
    assert set(FLOWER) == {"flower.changed_offer", "flower.weaker_parameters",
                           "flower.plaintext_request", "flower.altered_frames",
                           "flower.node_votes_twice", "flower.refused_offer"}
    for name in FLOWER:
        info = ATTACKS[name]
        assert info.func.__doc__ and info.target and info.expected and info.kind == "detected"


@pytest.mark.parametrize("name", FLOWER)
@pytest.mark.parametrize("seed", [0, 4])
def test_flower_attack_meets_its_expectation(name, seed) -> None:  # noqa: ANN001
    out = run_attack(name, seed=seed)
    assert out.passed, (out.observed, out.leakage)


def test_fedhh_attack_lists_and_runs_them(capsys) -> None:  # noqa: ANN001
    assert main(["attack", "list"]) == 0
    assert "flower.changed_offer" in capsys.readouterr().out
    assert main(["attack", "run", "flower.weaker_parameters", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["passed"] == 1 and d["attacks"][0]["system"] == "flower"
