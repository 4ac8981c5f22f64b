"""LDP oracle reports over the plain, secure-aggregation and shuffler transports.

The transports only carry the reports, so for the same seed every transport must give
bit-identical estimates (and the same as the oracle's own in-process estimator).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.fo import ReportError, make_oracle
from protocol.studies.ldp_runner import (LDPTransportError, decode_reports, encode_reports,
                                 report_size, run_ldp, shuffled_guarantee, support_vectors)
from shuffler.amplification import central_epsilon

ORACLES = ("grr", "oue", "olh", "aon")


def _batch(name: str, n: int = 200, domain: int = 16, seed: int = 7):
    rng = np.random.default_rng(seed)
    oracle = make_oracle(name, 2.0, domain, dummy=True)
    values = rng.integers(-2, domain, n)  # some out-of-domain values -> dummy item
    return oracle, oracle.randomize(values, rng)


@pytest.mark.parametrize("name", ORACLES)
def test_all_transports_give_identical_estimates(name: str) -> None:
    # GRR and OUE with the brief's 200 users; OLH/AoN secagg on fewer users (speed).
    n = 200 if name in ("grr", "oue") else 60
    oracle, reports = _batch(name, n=n)
    reference = oracle.estimate(reports)
    runs = {t: run_ldp(oracle, reports, t, np.random.default_rng(11))
            for t in ("plain", "secagg", "shuffler")}
    for t, run in runs.items():
        assert run.n == n
        assert run.estimates.shape == (16,)
        assert np.array_equal(run.estimates, reference), t
        assert np.array_equal(run.counts, oracle.support_counts(reports))
    assert runs["shuffler"].central is not None and runs["plain"].central is None
    assert runs["secagg"].encoding.startswith("support vectors")


@pytest.mark.parametrize("name", ORACLES)
def test_support_vectors_sum_to_support_counts(name: str) -> None:
    oracle, reports = _batch(name, n=300, seed=3)
    vec = support_vectors(oracle, reports)
    assert set(np.unique(vec)) <= {0, 1}
    d = oracle.domain_size
    assert np.array_equal(vec.sum(axis=0)[:d].astype(np.int64), oracle.support_counts(reports))
    if name == "grr":
        assert vec.shape[1] == 17 and np.all(vec.sum(axis=1) == 1)  # one-hot incl. dummy
    if name == "oue":
        assert np.array_equal(vec, reports.unpacked())


@pytest.mark.parametrize("name", ORACLES)
def test_report_roundtrip_fixed_size(name: str) -> None:
    oracle, reports = _batch(name, n=500, seed=5)
    payloads = encode_reports(oracle, reports)
    size = report_size(oracle)
    assert len(payloads) == 500 and {len(p) for p in payloads} == {size}
    back = decode_reports(oracle, payloads)
    assert np.array_equal(oracle.support_counts(back), oracle.support_counts(reports))
    expected = {"grr": 1, "oue": 3, "olh": 28, "aon": 25}[name]
    assert size == expected


def test_aon_bottom_is_flag_zero_and_no_key() -> None:
    oracle, reports = _batch("aon", n=400, seed=9)
    assert (~reports.reported).any()  # at epsilon 2 many users send bottom
    payloads = encode_reports(oracle, reports)
    for p, r in zip(payloads, reports.reported):
        assert p[0] == int(r)
        if not r:
            assert p[1:] == bytes(24)


def test_malformed_reports_raise_report_error() -> None:
    grr, _ = _batch("grr")
    with pytest.raises(ReportError):
        decode_reports(grr, [bytes([17])])  # category 17 of 17 is out of range
    with pytest.raises(ReportError):
        decode_reports(grr, [b"\x00\x00"])  # wrong size
    oue, _ = _batch("oue")
    with pytest.raises(ReportError):
        decode_reports(oue, [b"\x00\x00\x01"])  # 17 bits used: the low 7 bits are padding
    olh, _ = _batch("olh")
    with pytest.raises(ReportError):
        decode_reports(olh, [bytes(24) + (olh.g).to_bytes(4, "big")])
    aon, _ = _batch("aon")
    with pytest.raises(ReportError):
        decode_reports(aon, [b"\x02" + bytes(24)])
    with pytest.raises(ReportError):
        decode_reports(aon, [b"\x00" + b"\x01" + bytes(23)])  # a bottom with a key


def test_shuffler_guarantee_is_fmt23_and_amplifies() -> None:
    g = shuffled_guarantee(100_000, 2.0)
    assert g["bound"] == "fmt23_numerical" and g["delta"] == pytest.approx(1e-10)
    assert g["epsilon"] == pytest.approx(central_epsilon(100_000, 2.0, 1e-10))
    assert g["epsilon"] < 0.5 < 2.0  # amplification: well below the local epsilon
    with pytest.raises(LDPTransportError):
        shuffled_guarantee(100, 2.0, bound="nope")


def test_oue_too_wide_for_one_shuffler_report() -> None:
    oracle = make_oracle("oue", 1.0, 600_000)
    reports = oracle.randomize(np.zeros(2, dtype=np.int64), np.random.default_rng(0))
    with pytest.raises(LDPTransportError):
        run_ldp(oracle, reports, "shuffler", np.random.default_rng(0))
    with pytest.raises(LDPTransportError):
        run_ldp(oracle, reports, "carrier-pigeon", np.random.default_rng(0))


def test_cli_transports_agree(capsys: pytest.CaptureFixture[str]) -> None:
    from protocol.cli import main

    out = {}
    for t in ("none", "plain", "secagg", "shuffler"):
        assert main(["ldp", "--mechanism", "grr", "--users", "120", "--domain", "8",
                     "--seed", "4", "--transport", t, "--json"]) == 0
        out[t] = json.loads(capsys.readouterr().out)
    est = {t: [r["estimate"] for r in o["top"]] for t, o in out.items()}
    assert est["none"] == est["plain"] == est["secagg"] == est["shuffler"]
    c = out["shuffler"]["central"]
    assert c["bound"] == "fmt23_numerical" and 0 < c["epsilon"] <= 2.0
    assert c["delta"] == pytest.approx(1 / 120 ** 2)


def test_secagg_dropouts_estimate_over_the_survivors() -> None:
    """GRR's estimates over the whole domain sum to exactly 1 when n is the number of
    reports summed; with dropouts that is the survivors, not the reports sent."""
    from protocol.core.transports import get_transport
    from protocol.studies.ldp_runner import run_ldp

    oracle = make_oracle("grr", 2.0, 6)
    # this seed's Bernoulli draw drops 89 of the 300, within the ceil(0.3 n) = 90 the
    # parameters are planned for (the seed used before drew 102, beyond the budget:
    # a rare graph then left some client without t neighbours to unmask it)
    rng = np.random.default_rng(4)
    reports = oracle.randomize(rng.integers(0, 6, 300), rng)
    run = run_ldp(oracle, reports, get_transport("secagg", dropout=0.3), rng)
    assert 300 - 90 <= run.n < 300 and int(run.counts.sum()) == run.n
    assert float(run.estimates.sum()) == pytest.approx(1.0, abs=1e-9)
