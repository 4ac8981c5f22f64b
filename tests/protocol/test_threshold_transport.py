"""The threshold transport: secure aggregation into the comparison committee."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from protocol.core.contract import ABSTAIN, AggregationAborted, Kind, RoundSpec, Votes
from protocol.core.transports import get_transport
from protocol.core.transports.threshold import ThresholdTransport

A = [10, 2, 1, 0, 5]
B = [10, 0, 2, 2, 5]


def _votes(counts: list[int], n: int = 20) -> Votes:
    choice = np.concatenate([np.full(c, i) for i, c in enumerate(counts)]
                            + [np.full(n - sum(counts), ABSTAIN)]).astype(np.int64)
    return Votes(np.random.default_rng(0).permutation(choice))


def _spec(reveal_counts: bool = True) -> RoundSpec:
    return RoundSpec("threshold-test", 1, Kind.VOTE, candidates=tuple("abcde"), theta=3,
                     reveal_counts=reveal_counts)


def _walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj


@pytest.mark.parametrize("reveal", [True, False])
def test_issue_vectors_release_and_view_shape(reveal: bool) -> None:
    t = ThresholdTransport(simulate=True)
    ra = t.run_round(_spec(reveal), _votes(A), np.random.default_rng(1))
    rb = t.run_round(_spec(reveal), _votes(B), np.random.default_rng(1))
    plain = get_transport("plain").run_round(_spec(reveal), _votes(A),
                                             np.random.default_rng(1))
    assert ra.release.same_as(plain.release) and rb.release.same_as(plain.release)
    assert ra.release.items == ("a", "e")
    assert set(ra.views) == {"server", "helper1", "helper2", "clients"}
    assert "sum" not in ra.views["server"]
    paths_a = [p for p, _ in _walk({k: ra.views[k] for k in ("server", "helper1", "helper2")})]
    paths_b = [p for p, _ in _walk({k: rb.views[k] for k in ("server", "helper1", "helper2")})]
    assert paths_a == paths_b  # the same fields, whatever the sub-threshold counts
    for res, counts in ((ra, A), (rb, B)):
        for party in ("server", "helper1", "helper2"):
            com = res.views["server" if party == "server" else party]["committee"]
            assert com["opened_bits"].tolist() == [1, 0, 0, 0, 1]
            if reveal:
                assert com["opened_counts"].tolist() == [10, 5]
            else:
                assert com["opened_counts"] is None
        # the only plaintext values are the opened ones; the sum the server unmasks
        # is blinded, and no vector field equals the counts or their sub-threshold part
        for party in ("server", "helper1", "helper2"):
            for path, value in _walk(res.views[party]):
                if isinstance(value, np.ndarray) and value.size == 5:
                    assert value.tolist() != counts, path
                    if "opened" not in path:
                        assert value[1:4].tolist() != counts[1:4], path


@pytest.mark.slow
@pytest.mark.parametrize("threat, committee_input", [("malicious", "reports"),
                                                     ("malicious", "secagg"),
                                                     ("semi-honest", "secagg")])
def test_server_and_helper_views_are_blinded_over_many_seeds(threat: str,
                                                             committee_input: str) -> None:
    """Over the whole transport, what each member holds of the counts is uniform modulo
    the field (``2^61 - 1`` by default, ``2^k`` semi-honest) for both vote vectors
    (two-sample chi-square per position, Bonferroni): the blinded sum and the helpers'
    shares of the committee fed by secure aggregation, each member's two summed
    components under validated reports."""
    from scipy.stats import chi2

    from protocol.core.committee import field as F

    t = ThresholdTransport(simulate=True, graph="complete", threat=threat,
                           committee_input=committee_input)
    modulus = F.P if threat == "malicious" else 256
    fields: dict[str, list[list[np.ndarray]]] = {}
    for which, counts in enumerate((A, B)):
        for seed in range(150):
            res = t.run_round(_spec(), _votes(counts), np.random.default_rng(seed))
            if committee_input == "reports":
                held = [(f"{m}-{k}", res.views[m]["intake"]["sums"][k])
                        for m in ("server", "helper1", "helper2") for k in (0, 1)]
            else:
                held = [("blinded", res.views["server"]["blinded_sum"]),
                        ("h1", res.views["helper1"]["share"]),
                        ("h2", res.views["helper2"]["share"])]
            for name, arr in held:
                fields.setdefault(name, [[], []])[which].append(arr)
    pvalues = []
    for name, (xa, xb) in fields.items():
        a, b = np.stack(xa), np.stack(xb)
        for j in range(5):
            # 150 samples: eight equal bins of the modulus keep expected counts up
            ca = np.bincount([int(v) * 8 // modulus for v in a[:, j]], minlength=8)
            cb = np.bincount([int(v) * 8 // modulus for v in b[:, j]], minlength=8)
            tot = ca + cb
            e = tot / 2
            stat = float((((ca - e) ** 2 + (cb - e) ** 2) / np.maximum(e, 1e-9))[tot > 0].sum())
            pvalues.append(float(chi2.sf(stat, int((tot > 0).sum()) - 1)))
    assert min(pvalues) * len(pvalues) > 1e-3


@pytest.mark.parametrize("threat, layer", [("malicious", "mult"), ("semi-honest", "and")])
def test_a_failing_helper_aborts_the_round(threat: str, layer: str) -> None:
    def lose(step: str, sender: int, recipient: int, payload: Any) -> Any:
        return None if sender == 1 and step.startswith(layer) else payload

    def lie(step: str, sender: int, recipient: int, payload: Any) -> Any:
        if sender == 2 and step == "open-counts":
            return payload + np.uint64(1)
        return payload

    for hook, reason in ((lose, "committee_missing_message"), (lie, "committee_open_mismatch")):
        t = ThresholdTransport(simulate=True, committee_hook=hook, threat=threat)
        with pytest.raises(AggregationAborted) as info:
            t.run_round(_spec(), _votes(A), np.random.default_rng(2))
        assert info.value.reason == reason


def test_dropouts_keep_secure_aggregation_behaviour() -> None:
    rng = np.random.default_rng(3)
    choice = rng.integers(-1, 5, 60).astype(np.int64)
    t = ThresholdTransport(simulate=True, dropout=0.1, committee_input="secagg")
    res = t.run_round(_spec(), Votes(choice), np.random.default_rng(4))
    survivors = res.views["server"]["U3"]
    assert 60 in survivors and 61 in survivors  # both helpers, never dropped
    clients = [u for u in survivors if u < 60]
    assert res.release.contributions == len(clients) < 60
    counts = np.bincount(choice[clients][choice[clients] >= 0], minlength=5)
    assert dict(res.release.counts) == {c: int(counts[i]) for i, c in enumerate("abcde")
                                        if counts[i] >= 3}


def test_dropouts_in_validated_rounds_leave_devices_missing() -> None:
    """Under the default a device that drops out sends no report: it is missing in
    every member's view, and the release counts the others."""
    rng = np.random.default_rng(3)
    choice = rng.integers(-1, 5, 60).astype(np.int64)
    t = ThresholdTransport(simulate=True, dropout=0.1)
    res = t.run_round(_spec(), Votes(choice), np.random.default_rng(4))
    missing = [sorted(u for u, r, _ in res.views[m]["intake"]["dropped"] if r == "missing")
               for m in ("server", "helper1", "helper2")]
    assert missing[0] == missing[1] == missing[2] and 0 < len(missing[0]) < 60
    kept = np.setdiff1d(np.arange(60), missing[0])
    assert res.release.contributions == kept.size
    counts = np.bincount(choice[kept][choice[kept] >= 0], minlength=5)
    assert dict(res.release.counts) == {c: int(counts[i]) for i, c in enumerate("abcde")
                                        if counts[i] >= 3}


def _server_share(res: Any) -> np.ndarray:
    """What the server holds of the counts: the blinded sum (secure-aggregation input)
    or its first summed component (validated reports)."""
    view = res.views["server"]
    return view["blinded_sum"] if "blinded_sum" in view else view["intake"]["sums"][0]


@pytest.mark.parametrize("committee_input", ["reports", "secagg"])
def test_os_randomness_by_default(committee_input: str) -> None:
    t = ThresholdTransport(committee_input=committee_input)
    r1 = t.run_round(_spec(), _votes(A), np.random.default_rng(5))
    r2 = t.run_round(_spec(), _votes(A), np.random.default_rng(5))
    assert r1.release.same_as(r2.release)
    assert not np.array_equal(_server_share(r1), _server_share(r2))
    s1 = ThresholdTransport(simulate=True, committee_input=committee_input).run_round(
        _spec(), _votes(A), np.random.default_rng(5))
    s2 = ThresholdTransport(simulate=True, committee_input=committee_input).run_round(
        _spec(), _votes(A), np.random.default_rng(5))
    assert np.array_equal(_server_share(s1), _server_share(s2))


def test_threshold_transport_defaults_to_the_malicious_threat_model() -> None:
    from protocol.core.transports.secagg_transport import SecAggTransport

    t = ThresholdTransport()
    assert t.threat == "malicious" and t.malicious
    assert ThresholdTransport(threat="semi-honest").malicious is False
    # the same option handling as the secagg transport, parameters included
    assert t.session_params(100) == SecAggTransport().session_params(100)
    with pytest.raises(ValueError):
        ThresholdTransport(threat="semi-honest", malicious=True)
