"""The one privacy-guarantee type and every mechanism's use of it."""
from __future__ import annotations

import math

import pytest

from mechanisms.fo import GRR, OLH
from mechanisms.pem import pem_privacy
from mechanisms.privacy import (ANALYST, ANALYST_SHUFFLER_HONEST, ANY_PARTY, CENTRAL, LOCAL,
                                PrivacyGuarantee, PrivacyGuaranteeError, local_guarantee,
                                shuffled)
from mechanisms.sfp import SFP
from mechanisms.triehh_privacy import theorem1
from mechanisms.triehhpp_privacy import flat_privacy, triehhpp_privacy


def test_validation_and_immutability() -> None:
    g = PrivacyGuarantee("m", 1.0, 1e-9, "T", CENTRAL, ANALYST, {"a": 1})
    assert g.epsilon_delta() == (1.0, 1e-9) and g.effective_epsilon == 1.0
    with pytest.raises(AttributeError):
        g.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.parameters["a"] = 2  # type: ignore[index]
    for bad in ({"epsilon": -1.0}, {"epsilon": math.nan}, {"delta": 1.5}, {"delta": -0.1},
                {"model": "global"}, {"protects_against": "nobody"}):
        kw = dict(mechanism="m", epsilon=1.0, delta=0.0, theorem="T", model=LOCAL,
                  protects_against=ANY_PARTY)
        kw.update(bad)
        with pytest.raises(PrivacyGuaranteeError):
            PrivacyGuarantee(**kw)


def test_to_json_keeps_legacy_keys_first() -> None:
    g = local_guarantee("olh", 2.0, "Wang et al. 2017", {"effective_epsilon": 1.9})
    out = g.to_json({"source": "old", "epsilon": 2.0, "kind": "local"})
    assert list(out)[:3] == ["source", "epsilon", "kind"]
    assert out["theorem"] == "Wang et al. 2017" and out["model"] == "local"
    assert out["protects_against"] == "any party" and out["citation"]["year"] == 2017
    assert g.to_json()["parameters"] == {"effective_epsilon": 1.9}


def test_mechanisms_report_the_one_type() -> None:
    th = theorem1(12, 3.0, 10**6, 10)
    assert (th.mechanism, th.model, th.protects_against) == ("triehh", CENTRAL, ANALYST)
    assert th.citation is not None and th.citation.title.startswith("Federated Heavy Hitters")
    pp = triehhpp_privacy(10**6, 1000, 20, 10)
    assert (pp.mechanism, pp.model) == ("triehhpp", CENTRAL) and "Lemma 3" in pp.theorem
    assert flat_privacy(10**6, 1000, 20).parameters["flat"] is True
    for g in (GRR(2.0, 10).privacy(), OLH(2.0, 10).privacy(), SFP(3.0, k=16).privacy(),
              pem_privacy(2.0, "olh")):
        assert isinstance(g, PrivacyGuarantee)
        assert (g.model, g.protects_against, g.delta) == (LOCAL, ANY_PARTY, 0.0)
        assert g.effective_epsilon <= g.epsilon


def test_shuffled_wraps_an_amplification_number() -> None:
    from shuffler.amplification import BOUNDS, central_epsilon

    local = OLH(2.0, 10).privacy()
    eps = central_epsilon(10_000, 2.0, 1e-8, "fmt23_numerical")
    g = shuffled(local, 10_000, eps, 1e-8, "fmt23_numerical", BOUNDS["fmt23_numerical"].source)
    assert g.epsilon_delta() == (eps, 1e-8) and eps < 2.0
    assert (g.model, g.protects_against) == (CENTRAL, ANALYST_SHUFFLER_HONEST)
    assert g.parameters["local_epsilon"] == 2.0 and g.citation.year == 2023
    with pytest.raises(PrivacyGuaranteeError):
        shuffled(g, 10_000, eps, 1e-8, "fmt23_numerical", "x")
