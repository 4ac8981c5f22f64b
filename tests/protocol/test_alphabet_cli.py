"""``--alphabet`` on every command that reads a word file: the smallest named public
preset that encodes the file by default, one place that resolves it, and errors that
name file, line and word -- so a TrieHH command line reruns with SFP, PEM and AoN."""
from __future__ import annotations

import json
import pathlib

import pytest

from protocol.cli import main
from protocol.studies.datasets import (ALPHABET_PRESETS, DatasetError, load_file,
                                       resolve_alphabet)


def test_resolve_alphabet_presets_data_and_errors() -> None:
    lw = [(1, "hello"), (2, "don't")]
    assert resolve_alphabet(None, lw)[0] == ALPHABET_PRESETS["lower"]
    assert resolve_alphabet("auto", lw + [(3, "u.s")])[0] == ALPHABET_PRESETS["lower-digits"]
    assert resolve_alphabet(None, lw + [(3, "Hi!")])[0] == ALPHABET_PRESETS["printable"]
    assert resolve_alphabet("data", lw)[0] == "'dehlnot"
    assert resolve_alphabet("printable", lw)[0] == ALPHABET_PRESETS["printable"]
    assert resolve_alphabet("xyz", lw) == ("xyz", "given (3 characters)")
    with pytest.raises(DatasetError, match=r"f\.txt:7: word 'café' has characters 'é'"):
        resolve_alphabet(None, lw + [(7, "café")], "f.txt")
    assert resolve_alphabet(None, [(7, "café")], widest=True)[0] == \
        ALPHABET_PRESETS["printable"]
    for bad in ("aa", "ab$"):
        with pytest.raises(DatasetError, match="distinct characters without"):
            resolve_alphabet(bad, lw)


@pytest.fixture()
def words(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "words.txt"
    p.write_text("the\n" * 900 + "and\n" * 700 + "of\n" * 500 + "to\n" * 400
                 + "".join(f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}\n" for i in range(1500)))
    return p


def test_the_file_states_the_alphabet_it_chose(words: pathlib.Path) -> None:
    pop = load_file(words)
    assert pop.alphabet == ALPHABET_PRESETS["lower"]
    assert "alphabet auto: lower (27 characters)" in pop.description


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(argv + ["--json", "--quiet"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_triehh_file_reruns_with_sfp_pem_and_aon(words: pathlib.Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--dataset", str(words), "--seed", "1"]
    tri = _json(["triehh"] + base, capsys)
    assert {"the", "and"} <= {h["word"] for h in tri["heavy_hitters"]}
    sfp = _json(["sfp"] + base + ["--local-epsilon", "8", "--k", "128", "--m", "128"], capsys)
    assert [w for w, _ in sfp["words"][:2]] == ["the", "and"]
    for mech in ("pem", "aon", "sfp"):
        out = _json(["hh", "--mechanism", mech, "--epsilon", "8"] + base, capsys)
        assert out["discovered"], mech
    # an explicit alphabet gives the same population here
    again = _json(["triehh"] + base + ["--alphabet", "lower"], capsys)
    assert again["heavy_hitters"] == tri["heavy_hitters"]


def _word_commands(tmp_path: pathlib.Path) -> tuple[list[str], ...]:
    return (["triehh"], ["sfp"], ["hh", "--mechanism", "pem"], ["hh", "--mechanism", "sfp"],
            ["eval", "compare", "--out", str(tmp_path / "o"), "--users", "4000", "--runs", "1",
             "--epsilons", "4", "--Ts", "20"])


def _unencodable_file(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "w.txt"
    p.write_text("the\n" * 2500 + "naïve\n" + "and\n" * 2499)
    return p


def test_unencodable_words_name_file_line_word_on_every_word_command(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _unencodable_file(tmp_path)
    for argv in _word_commands(tmp_path):
        assert main(argv + ["--dataset", str(p), "--seed", "1", "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{p}:2501: word 'naïve' has characters 'ï'" in err, argv
        assert len(err.splitlines()) == 1 and "Traceback" not in err
    # dropping the word lets the run go on (every command: the slow test below)
    assert main(["triehh", "--dataset", str(p), "--seed", "1", "--quiet", "--alphabet",
                 "lower", "--drop-unencodable"]) == 0


@pytest.mark.slow
def test_every_word_command_runs_once_the_unencodable_word_is_dropped(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _unencodable_file(tmp_path)
    for argv in _word_commands(tmp_path):
        code = main(argv + ["--dataset", str(p), "--seed", "1", "--quiet",
                            "--alphabet", "lower", "--drop-unencodable"])
        capsys.readouterr()
        assert code == 0, argv


def test_sfp_says_what_to_do_when_the_alphabet_is_too_large(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "w.txt"
    p.write_text("The!\n" * 300 + "and\n" * 300)
    assert main(["sfp", "--dataset", str(p), "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "at most 63 characters" in err and "--alphabet" in err
    assert main(["sfp", "--dataset", str(p), "--seed", "1", "--local-epsilon", "8",
                 "--alphabet", "Tthe!and", "--k", "64", "--m", "64", "--quiet"]) == 0
