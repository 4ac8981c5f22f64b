"""Every catalogued attack ends in its expected outcome, through the library and the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from protocol.studies.attacks import ATTACKS, Outcome, UnknownAttack, load_catalogue, run_attack
from protocol.studies.attacks.secagg_attacks import closed_set_around
from protocol.studies.attacks.sybil import sybil_row, sybil_table, zipf_prior
from protocol.cli import main

load_catalogue()
NAMES = list(ATTACKS)


def test_catalogue_covers_the_issue():
    must = {"secagg.double_unmask", "secagg.split_views_malicious", "secagg.key_substitution",
            "secagg.too_few_survivors", "secagg.key_substitution_semi_honest", "secagg.forged_shares", "secagg.replayed_shares",
            "secagg.reordered", "secagg.truncated", "secagg.isolate_victim", "secagg.sybils",
            "shuffler.tampered", "shuffler.replayed", "shuffler.cross_task",
            "shuffler.crowd_of_one", "shuffler.small_batch", "shuffler.collusion",
            "triehh.mixed_tries", "triehh.targeted_sampling", "triehh.lowered_theta"}
    assert must <= set(NAMES)
    for info in ATTACKS.values():
        assert info.func.__doc__ and info.target and info.expected


@pytest.mark.parametrize("name", NAMES)
def test_attack_meets_its_expectation(name):
    out = run_attack(name, seed=0)
    assert isinstance(out, Outcome)
    assert out.passed, (out.observed, out.leakage)


def test_attacks_are_not_seed_specific():
    for name in ("secagg.double_unmask", "secagg.isolate_victim", "shuffler.collusion",
                 "triehh.mixed_tries"):
        assert run_attack(name, seed=5).passed, name


def test_unknown_attack():
    with pytest.raises(UnknownAttack):
        run_attack("no.such.attack")


def test_closed_set_every_member_has_t_inside():
    from protocol.core.secagg_engine import make_config
    cfg = make_config(30, 2, graph="harary", degree=8, threshold=4)
    neigh = cfg.all_neighbours(bytes(32))   # the graph of an attempt with this root
    c = closed_set_around(neigh, 0, 4)
    assert 0 in c and len(c) >= 5
    assert all(len(set(neigh[u]) & c) >= 4 for u in c)


def test_sybil_posterior_is_exact_at_99_and_near_zero_at_0():
    rows = sybil_table(samples=20_000, seed=1)
    assert rows[-1].sybils == 99 and rows[-1].fraction_recovered == 1.0
    assert rows[-1].information_fraction == 1.0
    assert abs(rows[0].fraction_recovered) < 0.01
    info = [r.information_fraction for r in rows]
    assert info == sorted(info)


def test_sybil_accuracy_matches_brute_force_posterior():
    """For h = 3 honest clients and 3 candidates, enumerate every vote triple."""
    import itertools
    p = zipf_prior(3, 1.0)
    acc = 0.0
    for votes in itertools.product(range(3), repeat=3):
        pr = np.prod(p[list(votes)])
        counts = np.bincount(votes, minlength=3)
        post = np.zeros(3)           # P[victim = j | counts] by brute force
        for other in itertools.product(range(3), repeat=3):
            if (np.bincount(other, minlength=3) == counts).all():
                post[other[0]] += np.prod(p[list(other)])
        acc += pr * (post[votes[0]] == post.max()) / max(1, (post == post.max()).sum())
        assert np.allclose(post / post.sum(), counts / 3)
    row = sybil_row(100, 97, p, 400_000, np.random.default_rng(0))
    # Monte Carlo vs exact: 5 standard errors (false alarm < 1e-6)
    assert abs(row.accuracy - acc) < 5 * row.accuracy_se + 1e-9


def test_cli_list_and_run_json(capsys):
    assert main(["attack", "list"]) == 0
    assert "secagg.double_unmask" in capsys.readouterr().out
    assert main(["attack", "run", "shuffler.tampered", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["passed"] == 1 and d["attacks"][0]["name"] == "shuffler.tampered"
    assert main(["attack", "run", "secagg.truncated"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["attack", "run", "nope"]) == 2


def test_sybil_exact_enumeration_matches_monte_carlo():
    import protocol.studies.attacks.sybil as sy
    p = zipf_prior(10)
    exact = sybil_row(100, 95, p, 10, np.random.default_rng(0))
    assert exact.accuracy_se == 0.0
    assert sy.compositions(5, 10).shape == (2002, 10)
    assert (sy.compositions(5, 10).sum(axis=1) == 5).all()
    saved = sy.EXACT_LIMIT
    try:
        sy.EXACT_LIMIT = 0
        mc = sybil_row(100, 95, p, 200_000, np.random.default_rng(1))
    finally:
        sy.EXACT_LIMIT = saved
    # 5 standard errors: false alarm < 1e-6
    assert abs(mc.accuracy - exact.accuracy) < 5 * mc.accuracy_se
    assert abs(mc.information_fraction - exact.information_fraction) < 0.01
