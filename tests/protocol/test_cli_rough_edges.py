"""Bad input to ``fedhh`` gets one line naming the problem and exit status 2 (never a
traceback), and input is never dropped or reinterpreted behind the user's back."""
from __future__ import annotations

import json
import pathlib

import pytest

from protocol.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusals and --version
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "error:" in last
    for n in needles:
        assert n in last, (n, last)


@pytest.fixture()
def accented(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "words.txt"
    p.write_text("hello\n" * 1600 + "café\n" + "naïve\n" * 1200 + "world\n" * 1199,
                 encoding="utf-8")
    return p


def test_an_unencodable_word_names_file_line_and_word(
        accented: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["triehh", "--dataset", str(accented), "--seed", "1"], capsys)
    _one_line_error(code, err, f"{accented}:1601:", "'café'", "'é'", "--drop-unencodable")


def test_dropping_is_explicit_counted_and_keeps_the_theorem(
        accented: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehh", "--dataset", str(accented), "--seed", "1",
                         "--drop-unencodable", "--json"], capsys)
    assert code == 0
    res = json.loads(out)
    assert res["dropped_words"] == 1201 and res["n"] == 2799
    assert res["multi_word"] is False and res["privacy"]["theorem"].endswith("Theorem 1")
    code, out, _ = _run(["triehh", "--dataset", str(accented), "--seed", "1",
                         "--drop-unencodable"], capsys)
    assert "warning: 1201 words with characters outside the alphabet dropped, 1201 users" in out


def test_a_wider_alphabet_keeps_every_word(accented: pathlib.Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehh", "--dataset", str(accented), "--seed", "1", "--json",
                         "--alphabet", "abcdefghijklmnopqrstuvwxyzéï"], capsys)
    assert code == 0
    res = json.loads(out)
    assert res["n"] == 4000 and res["dropped_words"] == 0


def test_a_csv_names_its_line_too(tmp_path: pathlib.Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "items.csv"
    p.write_text("user,item\nu1,tea\nu2,thé\n", encoding="utf-8")
    code, _, err = _run(["triehh", "--dataset", str(p)], capsys)
    _one_line_error(code, err, f"{p}:3:", "'thé'")


@pytest.mark.parametrize(("argv", "needles"), [
    (["triehh", "--seed", "-1"], ("--seed", ">= 0")),
    (["triehh", "--users", "2.5e3x"], ("--users", "not a whole number")),
    (["triehh", "--users", "1.5"], ("--users", "not a whole number")),
    (["bench", "secagg", "--dim", "100000000000"], ("--dim 100000000000", "GiB")),
    (["privacy", "triehh", "--users", "0"], ("--users", "must be >= 1")),
    (["privacy", "shuffle", "--n", "100", "--epsilon0", "1", "--delta", "1e-6",
      "--bound", "nope"], ("unknown --bound", "choose from")),
    (["attack", "run", "no.such.attack"], ("unknown attack", "all")),
])
def test_rough_edges_are_one_line_errors(argv: list[str], needles: tuple[str, ...],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    _one_line_error(code, err, *needles)


def test_a_binary_file_is_named(tmp_path: pathlib.Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "blob.bin"
    p.write_bytes(bytes(range(128, 256)) * 4)
    for argv in (["ldp", "--dataset", str(p)], ["triehh", "--dataset", str(p)]):
        code, _, err = _run(argv, capsys)
        _one_line_error(code, err, str(p), "not UTF-8")


def test_users_accept_the_form_the_help_prints(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehh", "--users", "2e3", "--seed", "1", "--json"], capsys)
    assert code == 0 and json.loads(out)["n"] == 2000
    code, out, _ = _run(["eval", "compare", "--help"], capsys)
    assert code == 0 and "2e5" in out


def test_privacy_shuffle_help_names_no_missing_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["privacy", "shuffle", "--help"], capsys)
    assert code == 0 and "--list" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.strip() == f"fedhh {version('fedhh')}"


def test_attack_descriptions_are_whole_sentences(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["attack", "list"], capsys)
    assert code == 0
    summaries = [ln.split("] ", 1)[1] for ln in out.splitlines() if "] " in ln
                 and not ln.lstrip().startswith(("targets:", "expected:"))]
    assert summaries and all(s.rstrip().endswith((".", ")", "!", "?")) for s in summaries), \
        [s for s in summaries if not s.rstrip().endswith((".", ")", "!", "?"))]


def test_the_readme_attack_forms_parse(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`fedhh attack run NAME` (or `run all`)" in readme
    code, _, _ = _run(["attack", "run", "--help"], capsys)
    assert code == 0


@pytest.mark.slow
def test_triehhpp_at_its_defaults_finds_words(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehhpp", "--seed", "1", "--json"], capsys)
    res = json.loads(out)
    assert code == 0 and res["n"] == 1_000_000 and len(res["heavy_hitters"]) >= 5


def test_an_empty_triehhpp_result_says_what_to_raise(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehhpp", "--seed", "1", "--users", "1e5"], capsys)
    assert code == 0 and "0 heavy hitters" in out
    assert "raise --users, or --epsilon with --bound eq3" in out
    assert "precision@K = found words among the true top K" in out


def test_a_vacuous_quantile_bound_is_called_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["quantiles", "--users", "100000", "--seed", "1"], capsys)
    assert code == 0 and "rank error bound L(alpha-1)theta/m = 1.145" in out
    assert "vacuous" in out and "raise --users or --epsilon" in out


def test_the_triehh_report_explains_its_precisions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["triehh", "--dataset", "zipf", "--users", "5000", "--seed", "1"],
                        capsys)
    assert code == 0
    assert "vote counts are not released" in out and " votes " not in out
    assert "precision@K = discovered words among the true top K" in out
    code, out, _ = _run(["triehh", "--dataset", "zipf", "--users", "5000", "--seed", "1",
                         "--release-counts"], capsys)
    assert code == 0 and " votes " in out and "vote counts are not released" not in out


def test_net_run_says_why_it_found_no_heavy_hitters(capsys: pytest.CaptureFixture[str]) -> None:
    """``fedhh net run --job triehh`` used to end its line in ``heavy hitters: `` and
    nothing after it; the printing now says ``(none)`` and why, as ``fedhh triehh``."""
    from protocol.cli.commands.net_run import _print_job

    result = {"network": {"joined": 2000, "rounds": [], "server_peak_rss_mb": 300.0},
              "heavy_hitters": [], "privacy": {"theta": 11, "m": 59}, "n": 2000}
    _print_job({"result": result, "n": 2000, "options": {"processes": 4},
                "committee_input": "reports", "rounds_exact": [], "wall_seconds": 15.0,
                "killed_processes": [], "wrong_results": 0, "left_behind": 0})
    out = capsys.readouterr().out
    assert "heavy hitters: (none): a word is found only if each of its prefixes gets " \
        "theta = 11 votes in its round's sample of m = 59 users; the smallest count that " \
        "could pass is 11 votes, so a word needs about 18.6% of the users (373 of 2,000)" \
        in out


def test_quantiles_clip_counts_and_refuses_without_it(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "v.txt"
    p.write_text("\n".join(str(x / 100) for x in range(-50, 250)) + "\n")
    code, _, err = _run(["quantiles", "--values", str(p), "--lo", "0", "--hi", "1",
                         "--quiet"], capsys)
    _one_line_error(code, err, "199 of 300 values are outside the public range [0, 1] "
                    "(50 below, 149 above; the first is -0.5)", "pass --clip")
    code, out, err = _run(["quantiles", "--values", str(p), "--lo", "0", "--hi", "1",
                           "--clip", "--epsilon", "4", "--bound", "eq3", "--theta", "4",
                           "--json", "--quiet"], capsys)
    assert code == 0, err
    assert json.loads(out)["input"]["clipped"] == {"below": 50, "above": 149, "lo": 0.0,
                                                   "hi": 1.0}
    assert "warning: 199 values outside the public range [0, 1] clipped" in err
