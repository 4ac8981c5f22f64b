"""Corrupted clients and the committee's input on the command line and in the API:
``--committee-input``, ``--min-valid-fraction``, ``--corrupt-*`` (parsed, refused, run)
and ``api.triehh(corrupt=..., committee_input=...)``.

The deterministic pair: at ``--users 2000 --seed 1`` TrieHH's honest release is empty
(theta 11, 59 clients a round) and one corrupted client per round enters theta votes
for a word nobody holds (``zzzz``). The committee's validated reports drop it every
round (``invalid_vote``), so the release is the honest one; over secure aggregation
nothing checks it, and ``zzzz`` is released.
"""
from __future__ import annotations

import argparse
import json

import pytest

from protocol.cli import UsageError, main
from protocol.cli.transport_options import (
    add_committee_args, add_corrupt_args, add_transport_args, corrupt_from_args,
    transport_from_args,
)
from protocol.core.corruption import CorruptClients
from protocol.studies import api
from protocol.studies.errors import StudyError

WORDS = ["hello"] * 900 + ["world"] * 700 + ["privacy"] * 300 + ["rare"] * 100
PAIR = ["triehh", "--users", "2000", "--seed", "1", "--corrupt-clients", "1",
        "--corrupt-strategy", "theta-at-target", "--json", "--quiet"]


def _args(argv: list[str]) -> argparse.Namespace:
    from protocol.cli import _Parser

    p = _Parser(prog="t")
    p.add_argument("--seed", type=int, default=None)
    add_transport_args(p)
    add_committee_args(p)
    add_corrupt_args(p)
    from protocol.cli import _harden

    _harden(p)
    return p.parse_args(argv)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ parsing

def test_each_option_reaches_the_corrupted_clients_or_the_transport() -> None:
    t = transport_from_args(_args(["--transport", "threshold", "--seed", "1",
                                   "--committee-input", "secagg"]))
    assert (t.committee_input, t.validates, t.corrupt) == ("secagg", False, None)
    t = transport_from_args(_args(["--transport", "threshold", "--min-valid-fraction", "0.8"]))
    assert (t.committee_input, t.min_valid_fraction, t.validates) == ("reports", 0.8, True)
    t = transport_from_args(_args(["--transport", "secagg", "--corrupt-clients", "2",
                                   "--corrupt-target", "zq", "--corrupt-seed", "7"]))
    assert t.corrupt == CorruptClients("theta-at-target", per_round=2, target="zq", seed=7)
    c = corrupt_from_args(_args(["--corrupt-users", "3,17,40", "--corrupt-strategy", "two"]))
    assert (c.users, c.strategy, c.per_round) == ((3, 17, 40), "two", None)
    c = corrupt_from_args(_args(["--corrupt-share", "0.25"]))
    assert (c.fraction, c.strategy, c.seed) == (0.25, "theta-at-target", 0)
    c = corrupt_from_args(_args(["--transport", "threshold", "--corrupt-clients", "1",
                                 "--corrupt-strategy", "replay-round"]))
    assert c.on_reports
    assert corrupt_from_args(_args([])) is None
    assert transport_from_args(_args(["--transport", "plain"])).corrupt is None


@pytest.mark.parametrize("argv, msg", [
    (["--corrupt-clients", "1", "--corrupt-users", "3"], "one way: --corrupt-clients or "
                                                         "--corrupt-users, not both"),
    (["--corrupt-share", "0.1", "--corrupt-users", "3"], "one way"),
    (["--corrupt-strategy", "two"], "--corrupt-strategy needs who is corrupted"),
    (["--corrupt-target", "zz"], "--corrupt-target needs who is corrupted"),
    (["--corrupt-seed", "3"], "--corrupt-seed needs who is corrupted"),
    (["--transport", "secagg", "--corrupt-clients", "1", "--corrupt-strategy", "unsigned"],
     "attacks the committee's validated reports.*not --transport secagg"),
    (["--corrupt-clients", "1", "--corrupt-strategy", "duplicate"], "not --transport plain"),
    (["--transport", "shuffler", "--corrupt-clients", "1", "--corrupt-strategy",
      "replay-job"], "not --transport shuffler"),
    (["--transport", "threshold", "--committee-input", "secagg", "--corrupt-clients", "1",
      "--corrupt-strategy", "wrong-helper"], "not --transport threshold --committee-input secagg"),
    (["--transport", "threshold", "--threat", "semi-honest", "--corrupt-clients", "1",
      "--corrupt-strategy", "inconsistent"], "not --transport threshold --threat semi-honest"),
    (["--committee-input", "secagg"], "--committee-input applies to --transport threshold, "
                                      "not plain"),
    (["--transport", "secagg", "--min-valid-fraction", "0.5"],
     "--min-valid-fraction applies to --transport threshold"),
    (["--transport", "threshold", "--committee-input", "secagg", "--min-valid-fraction", "0.5"],
     "--min-valid-fraction applies to the committee's validated reports"),
    (["--transport", "threshold", "--threat", "semi-honest", "--min-valid-fraction", "0.5"],
     "--min-valid-fraction applies to the committee's validated reports"),
    (["--transport", "threshold", "--threat", "semi-honest", "--committee-input", "reports"],
     "--committee-input reports needs --threat malicious"),
])
def test_bad_combinations_are_refused(argv: list[str], msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        transport_from_args(_args(argv))


@pytest.mark.parametrize("argv, msg", [
    (["--corrupt-clients", "0"], "argument --corrupt-clients: must be >= 1, got 0"),
    (["--corrupt-clients", "-2"], "argument --corrupt-clients: must be >= 1"),
    (["--corrupt-share", "0"], "argument --corrupt-share: must be in (0, 1], got 0"),
    (["--corrupt-share", "1.5"], "argument --corrupt-share: must be in (0, 1]"),
    (["--corrupt-users", "3,x"], "not a user index: 'x'"),
    (["--corrupt-users", "3,3"], "a user is named twice"),
    (["--corrupt-users", "-1"], "user indices are >= 0"),
    (["--corrupt-users", ""], "expected comma-separated user indices"),
    (["--corrupt-seed", "-1"], "argument --corrupt-seed: must be >= 0"),
    (["--corrupt-strategy", "nope"], "invalid choice: 'nope'"),
    (["--committee-input", "both"], "invalid choice: 'both'"),
    (["--min-valid-fraction", "1.5"], "argument --min-valid-fraction: must be <= 1"),
    (["--min-valid-fraction", "nan"], "argument --min-valid-fraction"),
])
def test_bad_values_are_one_line_and_exit_2(argv: list[str], msg: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triehh", "--users", "200", "--transport", "threshold"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0] and msg in err[0], err


@pytest.mark.parametrize("argv, msg", [
    (["--corrupt-users", "5000"], "--corrupt-users 5000 is not a user: the population has "
                                  "2,000"),
    (["--corrupt-clients", "1", "--corrupt-target", "café"],
     "--corrupt-target 'café' has characters 'é' outside the public alphabet"),
    (["--network", "127.0.0.1:0", "--transport", "secagg", "--corrupt-clients", "1"],
     "--corrupt-clients simulates corrupted clients; over --network"),
    (["--network", "127.0.0.1:0", "--transport", "threshold", "--min-valid-fraction", "0.5"],
     "--min-valid-fraction applies to a simulated committee"),
])
def test_refusals_that_need_the_data_or_the_command(argv: list[str], msg: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triehh", "--users", "2000", "--seed", "1", "--quiet"] + argv) == 2
    err = [x for x in capsys.readouterr().err.strip().splitlines()
           if not x.startswith("warning:")]
    assert len(err) == 1 and msg in err[0], err


@pytest.mark.parametrize("command", [["triehhpp"], ["quantiles"], ["eval", "triehh"],
                                     ["demo"]])
def test_every_vote_command_takes_the_options(command: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(command + ["--help"])
    text = capsys.readouterr().out
    for flag in ("--committee-input", "--min-valid-fraction", "--corrupt-clients",
                 "--corrupt-users", "--corrupt-share", "--corrupt-strategy",
                 "--corrupt-target", "--corrupt-seed"):
        assert flag in text, (command, flag)
    assert "--corrupt-fraction" not in text


# ------------------------------------------------------- the deterministic pair

def test_the_committee_drops_a_forged_heavy_hitter(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, PAIR + ["--transport", "threshold"])
    c = out["corrupted"]
    assert out["input"]["corrupt_target"] == {"word": "zzzz", "chosen": True,
                                              "how": "the default: a word no user holds"}
    assert (c["strategy"], c["who"], c["target"]) == ("theta-at-target", {"per_round": 1},
                                                      "zzzz")
    assert c["release_equals_honest"] is True and c["target_released"] is False
    assert "zzzz" not in [h["word"] for h in out["heavy_hitters"]]
    assert c["honest_heavy_hitters"] == [h["word"] for h in out["heavy_hitters"]]
    assert all(r["corrupted"] == 1 and r["counted"] == 0 and r["matches_honest"]
               and r["dropped_corrupted"] == {"invalid_vote": 1} for r in c["rounds"])
    assert c["totals"]["dropped_corrupted"] == {"invalid_vote": len(c["rounds"])}


def test_secure_aggregation_releases_the_forged_word(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, PAIR + ["--transport", "secagg"])
    c = out["corrupted"]
    assert c["release_equals_honest"] is False and c["target_released"] is True
    assert c["added_heavy_hitters"] == ["zzzz"] and c["honest_heavy_hitters"] == []
    assert [h["word"] for h in out["heavy_hitters"]] == ["zzzz"]
    assert c["totals"]["counted"] == c["totals"]["corrupted_reports"] == len(c["rounds"]) == 5
    assert not any(r["matches_honest"] for r in c["rounds"])


def test_the_secagg_fed_committee_releases_it_too_and_the_table_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a for a in PAIR if a != "--json"]
    assert main(argv + ["--transport", "threshold", "--committee-input", "secagg"]) == 0
    text = capsys.readouterr().out
    assert "input: corrupted clients' target 'zzzz' (the default: a word no user holds)" in text
    assert "corrupted clients: theta-at-target" in text
    assert "release DIFFERS FROM it" in text and "target 'zzzz' released: YES" in text


def test_a_report_strategy_runs_over_the_validated_reports(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["triehh", "--users", "2000", "--seed", "1", "--transport",
                         "threshold", "--corrupt-users", "300,675", "--corrupt-strategy",
                         "replay-round", "--corrupt-target", "hello", "--json", "--quiet"])
    c = out["corrupted"]
    assert c["who"] == {"users": [300, 675]} and c["target"] == "hello"
    assert out["input"]["corrupt_target"]["chosen"] is False
    assert c["totals"]["dropped_corrupted"] == {"replayed_report": 2}
    assert c["release_equals_honest"] is True


def test_triehhpp_and_quantiles_report_their_levels(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["triehhpp", "--users", "100000", "--seed", "1", "--epsilon", "4",
                         "--bound", "eq3", "--corrupt-clients", "2", "--json", "--quiet"])
    c = out["corrupted"]
    assert [r["level"] for r in c["rounds"]] == [s["level"] for s in out["levels"]]
    assert c["target_released"] is False and c["totals"]["counted"] == 0  # plain drops them
    assert out["input"]["corrupt_target"]["chosen"] is True
    out = _json(capsys, ["quantiles", "--users", "50000", "--seed", "1", "--corrupt-clients",
                         "1", "--corrupt-strategy", "one-vote", "--json", "--quiet"])
    assert out["transport"] == "plain" and out["input"]["corrupt_target"]["word"] == "0" * 10
    assert out["corrupted"]["totals"]["counted"] == len(out["levels"])


def test_eval_triehh_compares_every_run(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, ["eval", "triehh", "--users", "2000", "--seed", "1", "--runs", "2",
                         "--corrupt-clients", "1", "--corrupt-strategy", "one-vote",
                         "--out", str(tmp_path / "o"), "--json", "--quiet"])
    c = out["corrupted"]
    assert c["totals"]["runs"] == 2 and len(c["runs"]) == 2
    assert out["input"]["corrupt_target"]["word"] == "zzzz"


# ------------------------------------------------------------------------ the API

def test_api_corrupt_and_committee_input() -> None:
    kept = api.triehh(WORDS, epsilon=4, transport="threshold", seed=1, progress=False,
                      corrupt={"clients": 1})
    c = kept.corrupted
    assert c["release_equals_honest"] and not c["target_released"] and c["target"] == "zzzz"
    assert kept.items == c["honest_heavy_hitters"] or set(kept.items) == set(
        c["honest_heavy_hitters"])
    assert kept.input["corrupt_target"]["word"] == "zzzz"
    assert kept.as_dict()["corrupted"]["totals"] == c["totals"]
    assert "corrupted clients: theta-at-target" in str(kept)
    forged = api.triehh(WORDS, epsilon=4, transport="threshold", seed=1, progress=False,
                        committee_input="secagg",
                        corrupt=CorruptClients("theta-at-target", per_round=1))
    assert "zzzz" in forged.items and forged.corrupted["release_equals_honest"] is False
    assert api.triehh(WORDS, epsilon=4, seed=1, progress=False).corrupted is None


def test_api_corrupt_on_a_transport_object_is_put_back() -> None:
    from protocol.core.transports import get_transport

    tr = get_transport("secagg", simulate=True)
    hh = api.triehh(WORDS, epsilon=4, transport=tr, seed=1, progress=False,
                    corrupt={"clients": 1, "target": "hello"})
    assert hh.corrupted["target"] == "hello" and tr.corrupt is None
    tr.corrupt = CorruptClients("one-vote", users=(0, 1))
    hh = api.triehh(WORDS, epsilon=4, transport=tr, seed=1, progress=False)
    assert hh.corrupted["strategy"] == "one-vote"
    assert tr.corrupt == CorruptClients("one-vote", users=(0, 1))  # untouched


@pytest.mark.parametrize("kwargs, msg", [
    ({"corrupt": {"clients": 1, "users": [3]}}, "corrupt: name the corrupted clients one way"),
    ({"corrupt": {"clientz": 1}}, "corrupt: unknown key 'clientz'"),
    ({"corrupt": {"clients": 0}}, "per_round must be an int >= 1"),
    ({"corrupt": "one"}, "corrupt must be a CorruptClients or a dict"),
    ({"corrupt": {"users": [5000]}}, "is not a user: the population has 2,000"),
    ({"corrupt": {"clients": 1, "strategy": "unsigned"}, "transport": "secagg"},
     "attacks the committee's validated reports"),
    ({"committee_input": "secagg"}, "committee_input applies to transport='threshold'"),
    ({"committee_input": "both", "transport": "threshold"}, "committee_input must be"),
    ({"min_valid_fraction": 0.5, "committee_input": "secagg", "transport": "threshold"},
     "min_valid_fraction applies to the committee's validated reports"),
    ({"min_valid_fraction": 2.0, "transport": "threshold"}, "min_valid_fraction must be <= 1"),
])
def test_api_refusals(kwargs: dict, msg: str) -> None:
    with pytest.raises(StudyError, match=msg):
        api.triehh(WORDS, epsilon=4, seed=1, progress=False, **kwargs)


def test_api_triehhpp_and_quantiles_take_corrupt() -> None:
    import numpy as np

    pp = api.triehhpp(WORDS * 10, epsilon=4, bound="eq3", seed=1, transport="threshold",
                      corrupt={"clients": 2, "strategy": "unsigned"}, progress=False)
    assert pp.corrupted["totals"]["dropped_corrupted"] == {
        "bad_signature": pp.corrupted["totals"]["corrupted_reports"]}
    assert pp.corrupted["target_released"] is False
    q = api.quantiles(np.random.default_rng(1).uniform(0, 1, 20_000), lo=0, hi=1, epsilon=1,
                      seed=1, progress=False, corrupt={"clients": 1})
    assert q.corrupted["totals"]["rounds"] == len(q.rounds)
    assert q.as_dict()["input"]["corrupt_target"]["chosen"] is True
