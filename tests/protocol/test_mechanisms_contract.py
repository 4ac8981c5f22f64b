"""The mechanisms' contract suite: every mechanism over every transport it supports.

For the same seed a mechanism must release the same thing (heavy hitters, estimates,
sketches) on the plaintext reference, the shuffler and secure aggregation; the
contribution kind must follow the kinds a transport declares (never its name); and
amplification by shuffling may be claimed only when reports went through a transport
that declares ``anonymous_reports``. Sizes are small (secure aggregation with tens of
clients) so the default suite stays fast.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from mechanisms.federated import MECHANISMS, FederatedConfig, Party, Population
from mechanisms.fo import make_oracle, run_oracle_round
from mechanisms.fo.cms import CountMeanSketch, HadamardCountMeanSketch, run_sketch_round
from mechanisms.pem import pem
from mechanisms.quantiles import AlphaAdicEncoder, QuantileSketch
from mechanisms.sfp import PAD, SFP
from mechanisms.triehhpp import TrieHHPPParams, spawn_rngs
from protocol.core.contract import (ContractError, Contributions, Kind, RoundResult, RoundSpec,
                                    Transport, pick_kind)
from protocol.core.transports import get_transport
from protocol.studies.ldp_runner import run_ldp, sfp_privacy

TRANSPORTS = ["plain", "shuffler", "secagg", "threshold"]


def _transport(name: str) -> Transport:
    return get_transport(name) if name == "plain" else get_transport(name, simulate=True)


class Declared(Transport):
    """The plaintext transport under another declaration of kinds (and name "plain"),
    to check that mechanisms follow ``kinds``, never the name."""

    name: ClassVar[str] = "plain"

    def __init__(self, kinds: frozenset[Kind]) -> None:
        self.inner = get_transport("plain")
        self.kinds = kinds  # type: ignore[misc]
        self.seen: list[Kind] = []

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        if spec.kind not in self.kinds:
            raise ContractError(f"{spec.kind} not declared")
        self.seen.append(spec.kind)
        return self.inner.run_round(spec, contributions, rng)


# ------------------------------------------------------------------------- oracles
@pytest.mark.parametrize("oracle", ["grr", "oue", "olh", "aon"])
def test_oracle_round_identical_on_every_transport(oracle: str) -> None:
    fo = make_oracle(oracle, epsilon=2.0, domain_size=12, dummy=True)
    values = np.random.default_rng(1).integers(0, 14, size=30)
    reports = fo.randomize(values, np.random.default_rng(2))
    ref = fo.estimate(reports)
    kinds = {}
    for name in TRANSPORTS:
        rnd = run_oracle_round(fo, reports, _transport(name), np.random.default_rng(5),
                               task="contract-fo")
        assert rnd.n == 30
        np.testing.assert_array_equal(rnd.estimates(fo), ref)
        kinds[name] = (rnd.kind, rnd.anonymous)
    assert kinds == {"plain": (Kind.REPORT, False), "shuffler": (Kind.REPORT, True),
                     "secagg": (Kind.VECTOR, False), "threshold": (Kind.VECTOR, False)}


@pytest.mark.parametrize("oracle", ["grr", "oue", "olh", "aon"])
def test_oracle_path_follows_declared_kinds(oracle: str) -> None:
    fo = make_oracle(oracle, epsilon=1.0, domain_size=6)
    reports = fo.randomize(np.arange(20) % 6, np.random.default_rng(0))
    for kinds, expect in [({Kind.REPORT, Kind.VECTOR}, Kind.REPORT),
                          ({Kind.VECTOR}, Kind.VECTOR), ({Kind.REPORT}, Kind.REPORT)]:
        t = Declared(frozenset(kinds))
        rnd = run_oracle_round(fo, reports, t, np.random.default_rng(0), task="k")
        assert t.seen == [expect] and rnd.kind is expect
        np.testing.assert_array_equal(rnd.estimates(fo), fo.estimate(reports))
    with pytest.raises(ContractError):
        run_oracle_round(fo, reports, Declared(frozenset({Kind.VOTE})),
                         np.random.default_rng(0), task="k")


def test_pick_kind_prefers_the_mechanisms_order() -> None:
    t = Declared(frozenset({Kind.VECTOR, Kind.REPORT}))
    assert pick_kind(t, (Kind.VECTOR, Kind.REPORT)) is Kind.VECTOR
    assert pick_kind(t, (Kind.REPORT, Kind.VECTOR)) is Kind.REPORT
    with pytest.raises(ContractError, match="takes"):
        pick_kind(t, (Kind.VOTE,))


def test_run_ldp_accounting_follows_the_path() -> None:
    fo = make_oracle("olh", epsilon=2.0, domain_size=10)
    reports = fo.randomize(np.arange(40) % 10, np.random.default_rng(0))
    runs = {name: run_ldp(fo, reports, _transport(name), np.random.default_rng(1))
            for name in TRANSPORTS}
    assert runs["shuffler"].central is not None
    assert runs["shuffler"].central["epsilon"] <= 2.0
    assert all(runs[t].central is None for t in TRANSPORTS if t != "shuffler")
    # the name does not decide: a "plain"-named transport declaring vectors sums vectors
    d = run_ldp(fo, reports, Declared(frozenset({Kind.VECTOR})), np.random.default_rng(1))
    assert d.encoding.startswith("support vectors") and d.central is None
    for r in runs.values():
        np.testing.assert_array_equal(r.estimates, runs["plain"].estimates)


@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_sketch_round_identical_on_every_transport(cls: Any) -> None:
    sk = cls(2.0, k=4, m=16)
    reports = sk.randomize(np.arange(30, dtype=np.uint64) % 5, np.random.default_rng(3))
    cand = np.arange(8, dtype=np.uint64)
    ref = sk.estimate_counts(reports, cand)
    for name in TRANSPORTS:
        rnd = run_sketch_round(sk, reports, _transport(name), np.random.default_rng(4),
                               task="contract-cms")
        assert rnd.n == 30 and rnd.anonymous == (name == "shuffler")
        assert rnd.kind is (Kind.VECTOR if name in ("secagg", "threshold") else Kind.REPORT)
        np.testing.assert_allclose(sk.estimate_counts(rnd.sketch, cand), ref, rtol=0,
                                   atol=1e-9)


@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_sketch_reports_roundtrip_and_reject_bad_fields(cls: Any) -> None:
    sk = cls(1.0, k=4, m=8)
    reports = sk.randomize(np.arange(10, dtype=np.uint64), np.random.default_rng(0))
    back = sk.decode_reports(sk.encode_reports(reports))
    np.testing.assert_array_equal(back.j, reports.j)
    bad = bytearray(sk.encode_reports(reports)[0])
    bad[2] = 200  # j = 200 >= k
    with pytest.raises(ValueError):
        sk.decode_reports([bytes(bad)])
    with pytest.raises(ValueError):
        sk.decode_reports([b"\x00"])


# ------------------------------------------------------------------------- PEM
@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_pem_identical_on_every_transport(oracle: str) -> None:
    items = np.random.default_rng(0).choice([5, 9, 9, 33, 33, 33, 60], size=72).astype(np.uint64)
    out = {}
    for name in TRANSPORTS:
        res = pem(items, 6, 2, 4.0, oracle=oracle, lengths=[2, 4, 6],
                  rng=np.random.default_rng(11), transport=_transport(name))
        out[name] = res
    ref = pem(items, 6, 2, 4.0, oracle=oracle, lengths=[2, 4, 6], rng=np.random.default_rng(11))
    for res in out.values():
        np.testing.assert_array_equal(res.heavy_hitters, ref.heavy_hitters)
        np.testing.assert_array_equal(res.frequencies, ref.frequencies)
        assert int(res.report_counts.max()) == 1


# ------------------------------------------------------------------------- federated
def _population() -> Population:
    rng = np.random.default_rng(4)
    pool = np.array([3, 3, 3, 17, 17, 40, 40, 63, 8, 3], dtype=np.uint64)
    # TAPS validation groups are a tenth of a level's group: enough users that each
    # has the 3 clients secure aggregation needs
    return Population((Party("a", rng.choice(pool, 240)), Party("b", rng.choice(pool, 200))),
                      bits=6)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("name", ["shuffler", "secagg", "threshold"])
def test_federated_identical_on_every_transport(mechanism: str, name: str) -> None:
    pop = _population()
    cfg = FederatedConfig(epsilon=4.0, k=2, levels=3, extension=2)
    fn = MECHANISMS[mechanism]
    ref = fn(pop, cfg, np.random.default_rng(9))
    got = fn(pop, cfg, np.random.default_rng(9), _transport(name))
    np.testing.assert_array_equal(got.heavy_hitters, ref.heavy_hitters)
    np.testing.assert_array_equal(got.scores, ref.scores)
    assert got.max_reports_per_user() == 1


# ------------------------------------------------------------------------- SFP
def _sfp() -> tuple[SFP, np.ndarray]:
    sfp = SFP(4.0, epsilon_word=2.0, threshold=4, k=8, m=16, word_buckets=4, length=4,
              alphabet=PAD + "abc")
    words = ["ab", "ab", "abc", "ca", "ab", "cab", "ab", "ca"] * 5
    return sfp, sfp.encode_words(words)


def test_sfp_identical_on_every_transport_and_accounting_follows_the_path() -> None:
    sfp, codes = _sfp()
    ref = sfp.discover(sfp.randomize(codes, np.random.default_rng(3)))
    assert ref.words
    for name in TRANSPORTS:
        run = sfp.run(codes, np.random.default_rng(3), _transport(name))
        assert run.result.words == ref.words
        np.testing.assert_allclose(run.result.counts, ref.counts, rtol=0, atol=1e-9)
        assert run.aggregate.anonymous == (name == "shuffler")
        priv = sfp_privacy(run.privacy, run.aggregate.n, run.aggregate.anonymous)
        if name == "shuffler":
            assert isinstance(priv["central_after_shuffling"]["fmt23_numerical"], (float, str))
        else:
            assert priv["central_after_shuffling"] is None
        assert priv["epsilon"] == pytest.approx(6.0)


def test_sfp_reports_roundtrip_and_reject_bad_position() -> None:
    sfp, codes = _sfp()
    reports = sfp.randomize(codes, np.random.default_rng(0))
    payloads = sfp.encode_reports(reports)
    back = sfp.decode_reports(payloads)
    np.testing.assert_array_equal(back.position, reports.position)
    np.testing.assert_array_equal(back.word.bits, reports.word.bits)
    bad = bytes([9]) + payloads[0][1:]
    with pytest.raises(ValueError, match="position"):
        sfp.decode_reports([bad])


# ------------------------------------------------------------------------- quantiles
def test_quantile_sketch_identical_on_every_transport() -> None:
    values = np.random.default_rng(2).uniform(0, 1, 40)
    enc = AlphaAdicEncoder(0.0, 1.0, alpha=2, max_levels=3)
    params = TrieHHPPParams(40, 40.0, 2, 3, task="contract-quantiles")
    answers = {}
    for name in TRANSPORTS:
        sr, tr = spawn_rngs(5)
        sk = QuantileSketch.collect(values, enc, params, sr, tr, _transport(name))
        answers[name] = [a.value for a in sk.quantiles([0.25, 0.5, 0.75])]
    assert all(a == answers["plain"] for a in answers.values())


@pytest.mark.slow
def test_pem_and_sfp_over_secagg_at_hundreds_of_clients() -> None:
    rng = np.random.default_rng(7)
    items = rng.choice(np.array([17, 17, 17, 200, 200, 91, 3], dtype=np.uint64), size=600)
    ref = pem(items, 8, 3, 4.0, oracle="olh", lengths=[4, 8], rng=np.random.default_rng(2))
    got = pem(items, 8, 3, 4.0, oracle="olh", lengths=[4, 8], rng=np.random.default_rng(2),
              transport=_transport("secagg"))
    np.testing.assert_array_equal(got.heavy_hitters, ref.heavy_hitters)
    np.testing.assert_array_equal(got.frequencies, ref.frequencies)
    assert set(ref.heavy_hitters.tolist()) == {17, 200, 91}
    sfp, _ = _sfp()
    codes = sfp.encode_words(["ab", "ca", "abc", "ab"] * 75)
    a = sfp.run(codes, np.random.default_rng(1), _transport("secagg"))
    b = sfp.run(codes, np.random.default_rng(1))
    assert a.result.words == b.result.words and a.aggregate.n == 300
