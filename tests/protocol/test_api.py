"""The public API (:mod:`protocol.studies.api`): typed results, exports, refusals."""
from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from protocol.studies import api
from protocol.studies.errors import ChoiceWarning, StudyError

WORDS = ["hello"] * 900 + ["world"] * 700 + ["privacy"] * 300 + ["rare"] * 100


def test_triehh_plain_finds_the_frequent_words_with_its_guarantee() -> None:
    hh = api.triehh(WORDS, epsilon=4, seed=1)
    assert hh.mechanism == "triehh" and hh.transport == "plain" and hh.n == 2000
    assert {"hello", "world"} <= set(hh.items) and "rare" not in hh.items
    assert hh.guarantee is not None and hh.guarantee.epsilon <= 4 + 1e-9
    assert hh.guarantee.theorem.endswith("Theorem 1")
    assert all(h.count is None for h in hh.heavy_hitters)  # membership only
    assert [r.round for r in hh.rounds] == list(range(1, len(hh.rounds) + 1))
    assert all(r.contacted == hh.parameters["m"] for r in hh.rounds)
    assert len(hh.views) == len(hh.rounds)
    votes = hh.views[0].views["server"]["individual_votes"]
    assert len(votes) == hh.parameters["m"]  # the plaintext server sees every vote
    assert "hel" in hh.released_prefixes and not any("$" in p for p in hh.released_prefixes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hh.n = 3  # type: ignore[misc]


def test_secagg_releases_what_plain_releases_and_hides_the_votes() -> None:
    plain = api.triehh(WORDS, epsilon=4, seed=3)
    sec = api.triehh(WORDS, epsilon=4, seed=3, transport="secagg")
    assert sec.items == plain.items and sec.released_prefixes == plain.released_prefixes
    server = sec.views[0].views["server"]
    assert "individual_votes" not in server and "masked_input_digests" in server
    assert sec.costs.bytes_up > 0 and sec.costs.cpu_seconds["clients"] > 0


def test_exports_round_trip() -> None:
    hh = api.triehh(WORDS, epsilon=4, seed=1, release_counts=True)
    data = json.loads(hh.to_json(views=True))
    assert [h["item"] for h in data["heavy_hitters"]] == hh.items
    assert data["guarantee"]["epsilon"] == hh.guarantee.epsilon
    assert len(data["views"]) == len(hh.rounds)
    rows = list(csv.DictReader(io.StringIO(hh.to_table())))
    assert [r["item"] for r in rows] == hh.items
    assert all(int(r["count"]) >= hh.parameters["theta"] for r in rows)
    md = hh.to_table("markdown").splitlines()
    # TrieHH releases no estimate: the table has no column that is empty on every row
    assert md[0] == "| item | count |" and len(md) == 2 + len(rows)
    bare = api.triehh(WORDS, epsilon=4, seed=1).to_table().splitlines()
    assert bare[0] == "item"
    with pytest.raises(ValueError, match="unknown table format"):
        hh.to_table("xls")  # type: ignore[arg-type]


def test_several_words_per_user_is_corollary_2_only_when_asked() -> None:
    users = [["hello", "world"]] * 1000 + [["privacy"]] * 1000
    hh = api.triehh(users, epsilon=4, seed=1)
    assert "Corollary 2" in hh.guarantee.theorem
    assert "Theorem 1" in api.triehh(WORDS, epsilon=4, seed=1).guarantee.theorem


def test_an_unencodable_item_is_an_error_naming_user_and_item() -> None:
    words = ["tea"] * 1000 + ["café"] + ["tea"] * 999
    with pytest.raises(StudyError, match=r"user 1000: item 'café' has characters 'é'"):
        api.triehh(words, epsilon=4, seed=1)
    with pytest.raises(StudyError, match="1 users have no item left"):
        api.triehh(words, epsilon=4, seed=1, on_unencodable="drop")
    users = [["tea", "café"]] + [["tea"]] * 1999
    hh = api.triehh(users, epsilon=4, seed=1, on_unencodable="drop")
    assert hh.dropped == 1 and hh.items == ["tea"]
    hh = api.triehh(words, epsilon=4, seed=1, alphabet="acefté")
    assert hh.items == ["tea"] and hh.dropped == 0


@pytest.mark.parametrize("bad", [[], "hello", [1, 2], [["a"], 3], np.zeros((2, 2))])
def test_malformed_items_are_refused(bad: object) -> None:
    with pytest.raises(StudyError):
        api.triehh(bad, epsilon=4, seed=1)  # type: ignore[arg-type]


def test_integer_arrays_are_decimal_words() -> None:
    items = np.array([7] * 1200 + [42] * 800)
    assert sorted(api.triehh(items, epsilon=4, seed=1).items) == ["42", "7"]


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(StudyError, match="unknown transport"):
        api.triehh(WORDS, transport="carrier-pigeon")


def test_triehhpp_estimates_the_holders() -> None:
    rng = np.random.default_rng(0)
    words = list(rng.choice(["hello", "world", "privacy", "trie"], 20_000,
                            p=[.5, .3, .15, .05]))
    pp = api.triehhpp(words, epsilon=4, bound="eq3", seed=1)
    assert pp.items[:2] == ["hello", "world"]
    top = pp.heavy_hitters[0]
    assert top.count is not None and top.count >= pp.parameters["theta"]
    assert top.estimate is not None and abs(top.estimate - 10_000) < 2_000
    assert len(pp.views) == len(pp.rounds) and pp.rounds[0].candidates > 0
    with pytest.raises(StudyError, match="one item per user"):
        api.triehhpp([["a", "b"]] * 10, epsilon=1)
    with pytest.raises(StudyError, match="Lemma 3"):
        api.triehhpp(words, epsilon=4)  # bound="paper" caps the per-level epsilon


def test_the_api_module_passes_mypy_strict() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    path = pathlib.Path(api.__file__)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--no-incremental", "--cache-dir=/dev/null", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_frequencies_in_process_and_over_the_shuffler() -> None:
    values = np.random.default_rng(0).zipf(1.5, 20_000) % 100
    truth = np.bincount(values, minlength=100) / values.size
    local = api.frequencies(values, oracle="grr", epsilon=2, domain_size=100, seed=1)
    assert local.transport == "none" and local.n == 20_000 and len(local.estimates) == 100
    assert local.top(1)[0][0] == int(np.argmax(truth))
    z = (np.asarray(local.estimates) - truth) / np.asarray(local.std)
    assert np.mean(np.abs(z) < 4) > 0.95  # the stated std describes the error
    assert local.guarantee.epsilon == 2 and local.central is None and local.views == ()
    shuf = api.frequencies(values, oracle="grr", epsilon=2, domain_size=100, seed=1,
                           transport="shuffler")
    assert shuf.estimates == local.estimates  # the same reports, carried
    assert shuf.central is not None and shuf.central.epsilon < 2
    assert shuf.central.model == "central" and local.guarantee.model == "local"
    assert len(shuf.views) == 1 and shuf.costs.bytes_up > 0
    data = json.loads(shuf.to_json())
    assert data["central"]["epsilon"] == shuf.central.epsilon
    rows = list(csv.DictReader(io.StringIO(shuf.to_table(5))))
    assert [int(r["item"]) for r in rows] == [i for i, _ in shuf.top(5)]


@pytest.mark.parametrize("bad", [[], [1.5, 2.0], [-1, 3], [[1], [2]]])
def test_frequencies_refuse_values_outside_the_domain(bad: list[object]) -> None:
    with pytest.raises(StudyError):
        api.frequencies(bad, domain_size=10)  # type: ignore[arg-type]
    with pytest.raises(StudyError, match="outside the domain"):
        api.frequencies([1, 2, 12], domain_size=10)


def test_pem_finds_the_top_items_with_estimates() -> None:
    values = np.random.default_rng(0).zipf(1.5, 50_000) % 2**32
    top = api.pem(values, bits=32, k=5, epsilon=4, seed=1)
    assert top.mechanism == "pem" and top.items == [1, 2, 3, 4, 5]  # as they came in
    true = int((values == 1).sum())
    assert abs(top.heavy_hitters[0].estimate - true) < 0.1 * true  # type: ignore[operator]
    assert top.guarantee.epsilon == 4 and top.guarantee.delta == 0
    assert len(top.rounds) == len(top.views) == 16
    assert all(r.released <= r.candidates for r in top.rounds)
    assert sum(r.contacted for r in top.rounds) == 50_000  # disjoint groups
    with pytest.raises(StudyError, match="not a 8-bit unsigned integer"):
        api.pem([1, 2, 300], bits=8)


# ------------------------------------------------------------- SFP, federated, quantiles
def _fruit(n: int, seed: int = 0) -> list[str]:
    import numpy as np

    return list(np.random.default_rng(seed).choice(["apple", "banana", "cherry", "kiwi"], n,
                                                   p=[0.4, 0.3, 0.2, 0.1]))


def test_api_sfp_claims_amplification_only_for_shuffled_reports() -> None:
    words = _fruit(8000)
    shuffled = api.sfp(words, epsilon=6, k=128, m=128, seed=1)
    plain = api.sfp(words, epsilon=6, k=128, m=128, seed=1, transport="plain")
    assert shuffled.transport == "shuffler" and plain.transport == "plain"
    assert shuffled.items == plain.items and {"apple", "banana"} <= set(plain.items)
    from mechanisms.privacy import PrivacyGuarantee

    assert isinstance(shuffled.guarantee, PrivacyGuarantee)
    assert shuffled.guarantee.model == "local" and shuffled.guarantee.epsilon == 6
    assert isinstance(shuffled.central, PrivacyGuarantee)
    assert shuffled.central.epsilon < 6 and plain.central is None
    assert plain.guarantee_note == "reports not shuffled: local epsilon only"
    assert len(plain.rounds) == 1 and plain.rounds[0].contacted == 8000
    assert json.loads(plain.to_json())["mechanism"] == "sfp"
    with pytest.raises(StudyError, match="outside the public alphabet"):
        api.sfp(["Apple"] * 100, epsilon=6, seed=1)


def test_api_federated_same_release_on_plain_and_shuffler_and_refusals() -> None:
    parties = {"north": ["apple"] * 600 + ["kiwi"] * 300 + ["fig"] * 100,
               "south": ["apple"] * 300 + ["plum"] * 500 + ["fig"] * 200}
    a = api.federated(parties, k=3, epsilon=8, levels=8, seed=1)
    b = api.federated(parties, k=3, epsilon=8, levels=8, seed=1, transport="shuffler")
    assert a.items == b.items and set(a.items) == {"apple", "plum", "kiwi"}
    assert a.n == 2000 and a.parameters["max_reports_per_user"] == 1
    assert a.guarantee.epsilon == 8 and len(a.rounds) == len(a.views) > 0
    ints = api.federated({"p": [5] * 300 + [9] * 200 + [3] * 10}, k=2, epsilon=8, levels=8,
                         seed=2, mechanism="fedpem")
    assert ints.items == ["5", "9"]
    with pytest.raises(StudyError, match="longer than 6 bytes"):
        api.federated({"p": ["strawberry"] * 10})
    with pytest.raises(StudyError, match="48-bit unsigned"):
        api.federated({"p": [-1, 2]})
    with pytest.raises(StudyError, match="non-empty mapping"):
        api.federated({})


def test_api_quantiles_same_release_on_every_vote_transport_and_refusals() -> None:
    import numpy as np

    v = np.random.default_rng(1).uniform(0, 100, 200_000)
    a = api.quantiles(v, lo=0, hi=100, seed=1)
    b = api.quantiles(v, lo=0, hi=100, seed=1, transport="shuffler")
    assert a.quantiles == b.quantiles and a.transport == "plain"
    med = [q for q in a.quantiles if q.q == 0.5][0]
    # the released median is within the stated rank error bound of the truth
    assert abs(float((v <= med.value).mean()) - 0.5) <= a.error_bound
    assert abs(a.rank(50.0) - 0.5) < 0.05
    # one round per level the trie reached, with its candidates and released cells
    assert 1 <= len(a.rounds) == len(a.views) <= 10
    assert a.rounds[0].candidates == 4 and a.rounds[0].released == 4
    assert a.to_table().splitlines()[0] == "q,value,error_bound"
    assert json.loads(a.to_json())["range"] == [0.0, 100.0]
    with pytest.raises(StudyError, match="outside the public range"):
        api.quantiles([1.0, 200.0], lo=0, hi=100)
    with pytest.raises(StudyError, match="quantiles must be in"):
        api.quantiles(v, lo=0, hi=100, qs=[1.5])
    with pytest.raises(StudyError, match="lo < hi"):
        api.quantiles(v, lo=5, hi=5)


def test_every_mechanism_takes_words_and_gives_them_back() -> None:
    words = ["tea"] * 3000 + ["coffee"] * 2000 + ["milk"] * 500
    f = api.frequencies(words, oracle="grr", epsilon=4, seed=1,
                        domain=["coffee", "milk", "tea", "water"])
    assert [w for w, _ in f.top(2)] == ["tea", "coffee"] and len(f.estimates) == 4
    assert "tea" in f.to_table(k=1)
    with pytest.warns(ChoiceWarning, match="read off the data"):
        api.frequencies(words, oracle="olh", epsilon=4, seed=1)
    with pytest.raises(StudyError, match="not in the public domain"):
        api.frequencies(words, epsilon=4, seed=1, domain=["tea"])
    p = api.pem(words, bits=48, k=2, epsilon=6, seed=1, progress=False)
    assert p.items == ["tea", "coffee"]
    with pytest.raises(StudyError, match="longer than 2 bytes"):
        api.pem(words, bits=16, epsilon=6, seed=1)
    cut = api.pem(words, bits=16, k=2, epsilon=6, seed=1, truncate=True)
    assert cut.input["truncated"]["users"] == 5500 and set(cut.items) == {"te", "co"}


def test_results_print_short_and_report_what_was_changed() -> None:
    long_words = ["supercalifragilistic"] * 800 + ["hello"] * 1200
    hh = api.triehh(long_words, epsilon=4, seed=1, max_length=8, release_counts=True)
    text = str(hh)
    assert text.startswith("triehh over plain: 1 heavy hitters from 2,000 users")
    assert "Theorem 1" in text and len(text) < 400 and "views" not in text
    assert hh.input["too_long"] == {"max_characters": 8, "words": 1, "users": 800}
    for result in (api.frequencies([0, 1, 1, 2] * 50, epsilon=2, seed=1),
                   api.quantiles([0.2, 0.5, 0.7] * 400, lo=0, hi=1, epsilon=8, seed=1,
                                 bound="eq3")):
        assert 0 < len(str(result)) < 400 and "guarantee" in str(result)
    sfp = api.sfp(["abcdefghijklmn"] * 300 + ["tea"] * 300, epsilon=6, seed=1, k=64, m=64)
    assert sfp.input["truncated"]["users"] == 300


def test_a_domain_read_off_the_data_is_warned_and_recorded() -> None:
    import warnings

    values = [0, 1, 2, 2, 3] * 200
    with pytest.warns(ChoiceWarning, match=r"domain \[0, 4\) was read off the data") as rec:
        f = api.frequencies(values, oracle="grr", epsilon=2, seed=1)
    assert rec[0].filename == __file__  # the warning points at the caller's line
    assert f.input["domain_from_data"] and f.input["domain"] == 4
    assert f.as_dict()["input"]["domain_chosen"].startswith("[0, 4)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a public domain: no warning, nothing recorded
        g = api.frequencies(values, oracle="grr", epsilon=2, domain_size=4, seed=1)
    assert g.input == {}
    with pytest.warns(ChoiceWarning):
        w = api.frequencies(["tea", "milk"] * 100, epsilon=2, seed=1)
    assert w.input["domain_chosen"].startswith("the 2 distinct words")
    with pytest.raises(StudyError, match="domain_size= is the size of an integer domain"):
        api.frequencies(["tea", "milk"] * 100, epsilon=2, domain_size=5)


def test_quantiles_clip_is_counted_and_quantile_reads_any_q() -> None:
    import warnings

    v = np.random.default_rng(2).normal(50, 30, 20_000)
    with pytest.raises(StudyError, match=r"values are outside the public range.*clip=True"):
        api.quantiles(v, lo=0, hi=100, seed=1, progress=False)
    with pytest.warns(ChoiceWarning, match="clipped"):
        q = api.quantiles(v, lo=0, hi=100, qs=[0.5], epsilon=4, bound="eq3", seed=1,
                          progress=False, clip=True)
    below, above = int((v < 0).sum()), int((v > 100).sum())
    assert q.input["clipped"] == {"below": below, "above": above, "lo": 0.0, "hi": 100.0}
    assert q.quantile(0.5) == q.quantiles[0].value
    assert abs(q.quantile(0.5) - 50) < 10 and q.quantile(0.1) < q.quantile(0.9)
    with pytest.raises(StudyError, match=r"q must be in \[0, 1\]"):
        q.quantile(1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside = api.quantiles(np.clip(v, 0, 100), lo=0, hi=100, qs=[0.5], epsilon=4,
                               bound="eq3", seed=1, progress=False, clip=True)
    assert "clipped" not in inside.input


def test_too_few_users_names_what_is_left_and_the_minimum() -> None:
    with pytest.raises(StudyError) as exc:
        api.triehh([["tea", "café"]] * 5 + [["tea"]] * 5, on_unencodable="drop",
                   alphabet="aet", seed=1)
    text = str(exc.value)
    assert "10 users are left after dropping 5 words" in text
    assert text.endswith("needs at least 941 users") and "TrieHH at epsilon 4" in text
    with pytest.raises(StudyError, match=r"TrieHH\+\+ at epsilon 1 .* needs at least \d"):
        api.triehhpp(["tea"] * 10, seed=1)
    with pytest.raises(StudyError, match=r"the population has 10 users; TrieHH\+\+ quantiles"):
        api.quantiles([0.5] * 10, lo=0, hi=1)


def test_a_result_without_heavy_hitters_says_why() -> None:
    words = [chr(ord("a") + i % 26) * 3 for i in range(1000)]  # 26 words, none frequent
    hh = api.triehh(words, epsilon=4, seed=1, progress=False)
    assert hh.items == []
    text = str(hh)
    assert "heavy hitters: (none): a word is found only if each of its prefixes gets " \
        f"theta = {hh.parameters['theta']} votes" in text
    assert f"m = {hh.parameters['m']} users" in text and "raise the population" in text
