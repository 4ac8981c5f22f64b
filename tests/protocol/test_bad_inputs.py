"""Every bad value for every option of every command gets one line naming it and exit
status 2, never a traceback; the Python API refuses the same values with
:class:`protocol.studies.errors.StudyError`.

The matrix is generated from the argparse tree itself: every option that takes a value
is fed the bad values of its kind (numbers: negative, zero, huge, NaN, not a number;
ports out of range; input files that are missing, empty, a directory, binary or not
UTF-8; output paths that cannot be written). A value the option's rule declares valid
(``--seed 0``, ``--show 0``: :data:`protocol.studies.validation.RULES`) is not bad
input and is left out. The default run takes one bad value per option (rotating
through the kinds) plus every file case of the commands that read files; ``-m slow``
runs the whole cross product.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import pathlib
import signal
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pytest

from protocol.cli import build_parser, main
from protocol.studies.validation import RULES, problem

#: values every numeric option is fed
NUMERIC_BAD = ("-1", "0", "1e99", "nan", "abc")
#: input files: how to make each kind
INPUT_KINDS = ("missing", "empty", "directory", "binary", "latin1")
#: output paths that cannot be written
OUTPUT_KINDS = ("unwritable", "a-file")
#: options that name an input file or directory, by dest
INPUT_PATHS = {"dataset", "values", "keys", "candidates"}
#: options that name an output file or directory, by dest
OUTPUT_PATHS = {"out", "server_view"}
#: options holding a comma-separated list or an expression (bad: text, NaN, negative,
#: empty)
LISTS = {"epsilons", "Ts", "quantiles", "ids", "stall", "extension", "bound", "fault",
         "kill_at", "corrupt_users"}
LIST_BAD = ("", "abc", "nan", "-1")
#: ``--alphabet`` is any set of characters; only the empty one is bad (and any one
#: with an embedded dataset, which has its own)
#: HOST:PORT options
ADDRESSES = {"connect", "link", "network"}
ADDRESS_BAD = ("127.0.0.1:70000", "nohostport", "127.0.0.1:-1")
#: per-command arguments the parser requires, filled with harmless valid values
#: (``{tmp}``: a fresh directory); ``{keys}``: a directory of keys made once.
REQUIRED: dict[str, list[str]] = {
    "privacy shuffle": ["--users", "1000", "--epsilon0", "1", "--delta", "1e-6"],
    "privacy triehh": ["--users", "1000"],
    "analyze": ["--keys", "{keys}", "--connect", "127.0.0.1:9", "--clients", "3"],
    "attack run": ["all"],
    "audit": ["grr"],
    "client": ["--keys", "{keys}/clients", "--connect", "127.0.0.1:9"],
    "eval compare": ["--out", "{tmp}/o"],
    "eval federated": ["--out", "{tmp}/o"],
    "eval triehh": ["--out", "{tmp}/o"],
    "helper": ["--index", "2", "--keys", "{keys}", "--connect", "127.0.0.1:9",
               "--link", "127.0.0.1:0"],
    "keys": ["--out", "{tmp}/k", "--clients", "3"],
    "serve": ["--keys", "{keys}/server"],
}
#: options that only act together with another one: what to add so the bad value is
#: the one the command meets
COMPANIONS: dict[tuple[str, str], list[str]] = {
    ("triehh", "keys"): ["--network", "127.0.0.1:0", "--transport", "secagg", "--seed", "1"],
    ("ldp", "keys"): ["--network", "127.0.0.1:0", "--transport", "secagg", "--seed", "1"],
    ("triehh", "server_view"): ["--network", "127.0.0.1:0", "--transport", "secagg", "--seed", "1",
                                                "--keys", "{keys}/server"],
    ("ldp", "server_view"): ["--network", "127.0.0.1:0", "--transport", "secagg", "--seed", "1",
                                             "--keys", "{keys}/server"],
}
#: seconds one case may take before it counts as "ran instead of refusing"
CASE_SECONDS = 30


@dataclass(frozen=True)
class Case:
    command: str
    flag: str
    dest: str
    kind: str
    value: str

    @property
    def id(self) -> str:
        return f"{self.command} {self.flag} {self.kind}"


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
            ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, path + (name,))


def _numeric(action: argparse.Action) -> bool:
    return bool(getattr(action.type, "checked", False))


def _parse(action: argparse.Action, text: str) -> Any:
    try:
        return action.type(text) if action.type else text  # type: ignore[misc]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return None


def all_cases() -> list[Case]:
    """The full cross product: every option taking a value, every bad value of its
    kind that its rule does not declare valid."""
    out: list[Case] = []
    for command, parser in _leaves(build_parser()):
        for a in parser._actions:
            if not a.option_strings or a.nargs == 0 or a.dest == "help":
                continue
            flag = a.option_strings[-1]
            if a.choices is not None:
                out.append(Case(command, flag, a.dest, "choice", "no-such-choice"))
            elif a.dest in LISTS or (a.dest == "delta" and a.type is None):
                out += [Case(command, flag, a.dest, f"list{v or '-empty'}", v)
                        for v in LIST_BAD if v or a.dest != "stall"]  # no --stall: ""
            elif a.dest == "alphabet":
                out.append(Case(command, flag, a.dest, "empty-alphabet", ""))
            elif _numeric(a):
                values = NUMERIC_BAD + (("70000",) if a.dest == "port" else ())
                for v in values:
                    try:  # a value the rule declares valid is not bad input
                        if _parse(a, v) is not None and problem(a.dest, _parse(a, v)) is None:
                            continue
                    except Exception:  # noqa: BLE001 - the parse itself is under test
                        pass
                    out.append(Case(command, flag, a.dest, v, v))
            elif a.dest in ADDRESSES:
                out += [Case(command, flag, a.dest, v, v) for v in ADDRESS_BAD]
            elif a.dest in INPUT_PATHS:
                out += [Case(command, flag, a.dest, k, k) for k in INPUT_KINDS]
            elif a.dest in OUTPUT_PATHS:  # a directory (--out) or a file (--server-view)
                kinds = OUTPUT_KINDS if a.dest == "out" else ("unwritable", "directory")
                out += [Case(command, flag, a.dest, k, k) for k in kinds]
    return out


def default_cases(cases: list[Case]) -> list[Case]:
    """One bad value per option (chosen by a stable hash, so every kind is met across
    options), and every file case of the commands that read word or item files."""
    by_option: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        by_option.setdefault((c.command, c.flag), []).append(c)
    picked = []
    for (command, flag), cs in by_option.items():
        if (command in ("triehh", "ldp", "quantiles", "serve", "eval compare")
                and cs[0].dest in INPUT_PATHS | OUTPUT_PATHS) or cs[0].dest == "port":
            picked += cs
        else:
            picked.append(cs[zlib.crc32(f"{command} {flag}".encode()) % len(cs)])
    return picked


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad")
    (root / "empty.txt").write_bytes(b"")
    (root / "dir").mkdir()
    (root / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (root / "latin1.txt").write_bytes("caf\xe9\nna\xefve\n".encode("latin-1") * 10)
    (root / "plain-file").write_text("x\n")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["keys", "--out", str(root / "keys"), "--clients", "3"]) == 0
    return {"missing": str(root / "no-such-file.txt"), "empty": str(root / "empty.txt"),
            "directory": str(root / "dir"), "binary": str(root / "binary.bin"),
            "latin1": str(root / "latin1.txt"),
            "unwritable": str(root / "plain-file" / "below-a-file"),
            "a-file": str(root / "plain-file"), "keys": str(root / "keys"),
            "root": str(root)}


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise _Timeout


def argv_of(case: Case, files: dict[str, str], tmp: pathlib.Path) -> list[str]:
    value = files.get(case.value, case.value) if case.dest in INPUT_PATHS | OUTPUT_PATHS \
        else case.value
    fill = {"{tmp}": str(tmp), "{keys}": files["keys"]}

    def sub(xs: list[str]) -> list[str]:
        out = []
        for x in xs:
            for k, v in fill.items():
                x = x.replace(k, v)
            out.append(x)
        return out

    required = [x for x in REQUIRED.get(case.command, [])]
    if case.flag in required:  # the bad value replaces the required one
        i = required.index(case.flag)
        del required[i:i + 2]
    extra = sub(COMPANIONS.get((case.command, case.dest), []))
    return case.command.split() + sub(required) + extra + [f"{case.flag}={value}"]


def run_case(argv: list[str]) -> tuple[int | None, str, str, float]:
    """``main(argv)`` in this process: exit status (``None``: still running after
    :data:`CASE_SECONDS`), stdout, stderr (with any traceback), seconds."""
    import time
    import traceback

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_SECONDS)
    t0 = time.perf_counter()
    code: int | None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except _Timeout:
        code = None
    except BaseException:  # noqa: BLE001 - what the matrix looks for
        err.write(traceback.format_exc())
        code = 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def verdict(case: Case, code: int | None, err: str) -> str | None:
    """``None`` when the case got exit 2 and one line naming the option or file."""
    if code is None:
        return f"ran for more than {CASE_SECONDS} s instead of refusing"
    if "Traceback" in err:
        return "traceback: " + err.strip().splitlines()[-1]
    if "Warning:" in err or "warnings.warn" in err:  # a library's warning reached the user
        return "a library warning: " + err.strip()[:200]
    if code != 2:
        return f"exit {code}: {err.strip()[-200:]!r}"
    lines = err.strip().splitlines()
    if len(lines) != 1 or "error:" not in lines[0]:
        return f"not one error line: {err!r}"
    return None


ALL = all_cases()
DEFAULT = default_cases(ALL)


def _check(case: Case, files: dict[str, str], tmp_path: pathlib.Path) -> None:
    argv = argv_of(case, files, tmp_path)
    code, _, err, _ = run_case(argv)
    bad = verdict(case, code, err)
    assert bad is None, (argv, bad)
    line = err.strip()
    named = {case.flag, case.flag.lstrip("-"), case.dest}
    if case.dest in INPUT_PATHS | OUTPUT_PATHS:
        named |= {files.get(case.value, case.value)}
    assert any(n in line for n in named), (argv, line)


@pytest.mark.parametrize("case", DEFAULT, ids=[c.id for c in DEFAULT])
def test_bad_value_is_one_line_and_exit_2(case: Case, files: dict[str, str],
                                         tmp_path: pathlib.Path) -> None:
    _check(case, files, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_bad_value_full_cross_product(case: Case, files: dict[str, str],
                                      tmp_path: pathlib.Path) -> None:
    _check(case, files, tmp_path)


def test_every_numeric_option_has_a_rule_checked_at_parse_time() -> None:
    """A numeric option parsed without the shared rules would take NaN or 1e99."""
    unchecked = []
    for command, parser in _leaves(build_parser()):
        for a in parser._actions:
            if a.option_strings and a.type in (int, float) and a.choices is None:
                unchecked.append(f"{command} {a.option_strings[-1]}")
    assert unchecked == []


def test_the_matrix_covers_every_command_and_kind() -> None:
    commands = {c for c, _ in _leaves(build_parser())}
    assert {c.command for c in ALL} >= commands - {"attack list"}
    kinds = {c.kind for c in DEFAULT}
    assert {"-1", "0", "1e99", "nan", "abc", "70000", "choice"} <= kinds
    assert set(INPUT_KINDS) | set(OUTPUT_KINDS) <= kinds
    assert len(ALL) > 3 * len(DEFAULT) > 300


def test_rules_are_consistent() -> None:
    for name, rule in RULES.items():
        assert rule.lo is None or rule.hi is None or rule.lo < rule.hi, name
        assert problem(name, math.nan) and problem(name, math.inf), name
    assert problem("epsilon", np.float32(1.0)) is None
    assert "got 1e+99" in (problem("epsilon", 1e99) or "")


# ---------------------------------------------------------------------------- the API

def _api_calls() -> dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    from protocol.studies import api

    words = ["hello", "world"] * 50
    return {
        "triehh": (api.triehh, (words,), {}),
        "triehhpp": (api.triehhpp, (words,), {}),
        "sfp": (api.sfp, (words,), {}),
        "frequencies": (api.frequencies, ([0, 1, 2] * 10,), {}),
        "pem": (api.pem, ([1, 2, 3] * 10,), {}),
        "federated": (api.federated, ({"a": [1, 2, 3] * 10},), {}),
        "quantiles": (api.quantiles, ([0.5] * 30,), {"lo": 0.0, "hi": 1.0}),
    }


API_BAD = (-1, 0, 1e99, math.nan, math.inf, "abc")


def _api_cases() -> list[tuple[str, str, Any]]:
    import inspect

    out = []
    for fname, (fn, _, _) in _api_calls().items():
        for pname, p in inspect.signature(fn).parameters.items():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            if not (pname in RULES or (isinstance(p.default, (int, float))
                                       and not isinstance(p.default, bool))):
                continue
            for v in API_BAD:
                if isinstance(v, str) or problem(pname, v) is not None:
                    out.append((fname, pname, v))
    return out


API_CASES = _api_cases()
API_DATA_BAD = ([], None, b"\xff\xfe", "a string", [["a"], 3], [object()])


@pytest.mark.parametrize(("fname", "pname", "value"), API_CASES,
                         ids=[f"{f} {p}={v!r}" for f, p, v in API_CASES])
def test_api_bad_parameter_is_a_study_error(fname: str, pname: str, value: Any) -> None:
    from protocol.studies.errors import StudyError

    fn, args, kwargs = _api_calls()[fname]
    with pytest.raises(StudyError, match=pname):
        fn(*args, **{**kwargs, pname: value, "progress": False})


@pytest.mark.parametrize("fname", ["triehh", "triehhpp", "sfp", "frequencies", "pem",
                                   "federated", "quantiles"])
@pytest.mark.parametrize("data", API_DATA_BAD, ids=[repr(d)[:12] for d in API_DATA_BAD])
def test_api_bad_data_is_a_study_error(fname: str, data: Any) -> None:
    from protocol.studies.errors import StudyError

    fn, _, kwargs = _api_calls()[fname]
    if fname == "federated":
        data = {"a": data}
    with pytest.raises(StudyError):
        fn(data, **{**kwargs, "progress": False})


def test_api_matrix_covers_every_entry_point() -> None:
    from protocol.studies import api

    assert {f for f, _, _ in API_CASES} == set(_api_calls())
    for fname in _api_calls():
        assert getattr(api, fname).__wrapped__  # validated by the shared rules
    with pytest.raises(Exception) as exc:
        api.triehh(["a"] * 10, epsilonn=1)  # a misspelt keyword
    assert type(exc.value).__name__ == "StudyError"


def test_the_documented_exit_statuses_are_the_code_s() -> None:
    from protocol.cli import EXIT_CODES

    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    table = {int(line.split("|")[1]) for line in doc.splitlines()
             if line.startswith("| ") and line.split("|")[1].strip().isdigit()}
    assert table == set(EXIT_CODES)


# ------------------------------------------------------- nothing changed silently

def test_blank_lines_bom_long_words_and_the_alphabet_are_reported(
        tmp_path: pathlib.Path) -> None:
    import json

    p = tmp_path / "words.txt"
    lines = ["\ufeffhello"] + ["hello", "", "world", "supercalifragilistic", "  "] * 1200
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err, _ = run_case(["triehh", "--dataset", str(p), "--seed", "1", "--epsilon", "8"])
    assert code == 0, err
    assert "input: alphabet auto: lower" in out
    assert "warning: 2400 blank lines skipped" in out
    assert "warning: a UTF-8 byte-order mark (U+FEFF) at the start of the file was removed" \
        in out
    assert "1 distinct words longer than 10 characters, held by 1200 users" in out
    code, out, err, _ = run_case(["triehh", "--dataset", str(p), "--seed", "1", "--json", "--epsilon", "8",
                                  "--alphabet", "data", "--max-length", "20"])
    assert code == 0, err
    report = json.loads(out)["input"]
    assert report["blank_lines"] == 2400 and report["byte_order_mark_removed"]
    assert report["alphabet_from_data"] and report["too_long"]["words"] == 0
    assert "\ufeff" not in report["alphabet"]
    assert "warning: the public alphabet was read off the users' words" in err
    code, out, _, _ = run_case(["triehhpp", "--dataset", str(p), "--seed", "1",
                                "--bound", "eq3"])
    assert code == 0 and "warning: 2400 blank lines skipped" in out


# ------------------------------------------------------------- one flag vocabulary

def _all_flags() -> set[str]:
    top = build_parser()
    flags: set[str] = {f for a in top._actions for f in a.option_strings}
    for _, parser in _leaves(top):
        for a in parser._actions:
            flags.update(a.option_strings)
    return flags


def test_every_flag_a_message_names_exists() -> None:
    """Every ``--flag`` written in a string of protocol/ (error messages, advice,
    help) is an option of some command."""
    import ast
    import re

    # the options of the project `fedhh flower new` writes (its own run.py) and of
    # Flower's `flwr run` it names, not fedhh's
    generated = {"--local", "--federation-config"}
    flags = _all_flags() | generated
    root = pathlib.Path(__file__).resolve().parents[2] / "protocol"
    unknown = set()
    for f in root.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                unknown |= {(m, f.name) for m in re.findall(r"(?<![\w-])--[a-zA-Z][\w-]*",
                                                            node.value) if m not in flags}
    assert unknown == set()


def test_the_population_is_users_everywhere_old_spellings_warn() -> None:
    population = {"users", "n"}
    for command, parser in _leaves(build_parser()):
        for a in parser._actions:
            if a.dest in population:
                assert "--users" in a.option_strings, command
    code, out, err, _ = run_case(["privacy", "shuffle", "--n", "1000", "--epsilon0", "1",
                                  "--delta", "1e-6"])
    assert code == 0 and "n = 1000" in out
    assert err.strip() == "fedhh: --n is deprecated, use --users"
    code, out, err, _ = run_case(["privacy", "shuffle", "--users", "1000", "--epsilon0", "1",
                                  "--delta", "1e-6"])
    assert code == 0 and err == ""
    import argparse as ap

    from protocol.cli.args import resolve_scale

    args = ap.Namespace(users=7_800, scale=None, dataset="syn")
    resolve_scale(args)
    assert args.scale == pytest.approx(0.01)


def test_messages_name_what_the_user_can_do(tmp_path: pathlib.Path) -> None:
    keys = tmp_path / "k"
    assert run_case(["keys", "--out", str(keys), "--clients", "3"])[0] == 0
    code, _, err, _ = run_case(["keys", "--out", str(keys), "--clients", "3"])
    assert code == 2 and "pass --force" in err and "overwrite" not in err
    code, _, err, _ = run_case(["triehh", "--users", "1"])
    assert code == 2 and "delta" not in err
    assert err.strip().endswith("the population has 1 user; TrieHH at epsilon 4 (L = 10) "
                                "needs at least 941 users")
    p = tmp_path / "joined.txt"
    p.write_bytes("hello\n".encode() * 3 + "\ufeffworld\n".encode())
    code, _, err, _ = run_case(["triehh", "--dataset", str(p)])
    assert code == 2 and "byte-order mark" in err and "--alphabet data" not in err
    code, _, err, _ = run_case(["triehh", "--show", "-3"])
    assert code == 2 and "--show" in err


def test_sfp_says_how_many_words_it_cut(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "long.txt"
    p.write_text("abcdefghijklmnop\n" * 1500 + "tea\n" * 1500, encoding="utf-8")
    code, out, err, _ = run_case(["sfp", "--dataset", str(p), "--seed", "1",
                                  "--local-epsilon", "6", "--k", "64", "--m", "64"])
    assert code == 0, err
    assert "warning: 1500 users' words are longer than 10 characters; SFP sees only " \
        "their first 10 characters" in out


# ------------------------------------------ small, odd and mostly dropped data: a battery

#: word files whose users are mostly dropped or that hold almost none: what each file
#: holds (CRLF line ends, a byte-order mark, blank lines, non-ASCII words)
def _battery_files(root: pathlib.Path) -> dict[str, str]:
    mostly = "\ufeff" + "\r\n".join(["café", "naïve", "", "  "] * 500 + ["hello", "tea"]) \
        + "\r\n"
    (root / "mostly.txt").write_bytes(mostly.encode("utf-8"))
    (root / "tiny.txt").write_text("hello\nworld\nhello\n", encoding="utf-8")
    (root / "fed-tiny.csv").write_text("party,user,item\nA,1,tea\nA,2,milk\n")
    (root / "fed-bad.csv").write_text("party,user\nA,1\n")
    (root / "fed-empty.csv").write_bytes(b"")
    (root / "bom-crlf.txt").write_bytes("\ufefftea\r\nmilk\r\ntea\r\n".encode("utf-8"))
    (root / "blank.txt").write_text("\n  \n\t\n\r\n", encoding="utf-8")
    (root / "empty.txt").write_bytes(b"")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (root / "ints.txt").write_text("\n".join(str(i % 7) for i in range(700)) + "\n")
    (root / "numbers.txt").write_text("\n".join(f"{i / 1000:.3f}" for i in range(1000))
                                      + "\n")
    (root / "numbers-out.txt").write_text("0.5\n0.7\n1.5\n-2\n" * 250)
    (root / "numbers-text.txt").write_text("0.5\nzero\n")
    (root / "numbers-nan.txt").write_text("0.5\nnan\n")
    return {p.stem: str(p) for p in root.iterdir()}


#: (argv with {file} names, what must happen): ``refused`` is exit 2 with one error
#: line, which holds each of the ``must`` strings; ``ran`` is exit 0 with each ``must``
#: string in stdout (a choice or a change printed, never silent)
BATTERY: list[tuple[str, str, tuple[str, ...]]] = [
    # too few users: the users left after what was dropped, and the minimum
    ("triehh --dataset {mostly} --drop-unencodable --seed 1", "refused",
     ("2 users are left after dropping 1,000 words", "skipping 1,000 blank lines and a "
      "byte-order mark and the carriage returns of 2,002 CRLF line ends",
      "TrieHH at epsilon 4", "needs at least 941 users")),
    ("triehh --dataset {bom-crlf} --seed 1", "refused",
     ("the population has 3 users (after skipping a byte-order mark and the carriage "
      "returns of 3 CRLF line ends)",)),
    ("triehh --dataset {bom-crlf} --seed 1 --theta 2 --gamma 1", "ran",
     ("warning: a UTF-8 byte-order mark (U+FEFF) at the start of the file was removed",
      "warning: 3 lines end in CRLF")),
    ("ldp --dataset {bom-crlf} --seed 1", "ran",
     ("input: domain 2 items", "warning: a UTF-8 byte-order mark", "warning: 3 lines end "
      "in CRLF")),
    ("sfp --users 1 --seed 1", "refused", ("the population has 1 user;",
                                           "needs at least 2 users")),
    ("triehh --dataset {tiny} --seed 1", "refused",
     ("the population has 3 users", "needs at least 941 users")),
    ("triehh --users 1", "refused", ("1 user;", "needs at least")),
    ("triehh --users 10 --seed 1", "refused", ("the population has 10 users",
                                               "needs at least 941 users")),
    ("triehh --users 2000 --epsilon 1 --seed 1", "refused",
     ("condition 1 <= gamma fails", "needs at least 16,015 users")),
    ("eval triehh --users 10 --runs 1 --out {tmp}/e", "refused", ("needs at least",)),
    ("hh --mechanism triehh --dataset {tiny} --seed 1", "refused", ("needs at least 941",)),
    ("hh --mechanism pem --dataset {tiny} --seed 1", "refused",
     ("3 users", "needs at least 6 users")),
    ("hh --mechanism aon --dataset {mostly} --drop-unencodable --seed 1", "refused",
     ("needs at least",)),
    ("triehhpp --dataset {tiny} --seed 1", "refused",
     ("the population has 3 users", "TrieHH++ at epsilon 1", "needs at least")),
    ("triehhpp --users 10 --seed 1", "refused", ("needs at least",)),
    ("quantiles --values {numbers} --users 5 --lo 0 --hi 1 --seed 1", "refused",
     ("the population has 5 users", "TrieHH++ quantiles", "needs at least")),
    ("quantiles --users 10 --seed 1", "refused", ("needs at least",)),
    ("federated --users 10 --seed 1", "refused", ("it needs at least",)),
    ("bench triehh --dataset {tiny} --seed 1", "refused", ("needs at least 941 users",)),
    ("privacy triehh --users 10 --epsilon 1", "refused",
     ("n = 10 users; TrieHH at epsilon 1 (L = 10) needs at least 16,015 users",)),
    ("privacy triehhpp --users 10", "refused", ("needs at least 170 users",)),
    ("eval compare --dataset {tiny} --users 3 --runs 1 --out {tmp}/c", "refused",
     ("the population has 3 users", "needs at least")),
    ("net run --job triehh --dataset {tiny} --transport threshold --seed 1", "refused",
     ("the population has 3 users", "needs at least 941 users")),
    ("triehh --dataset {tiny} --users 10", "refused",
     ("cannot take 10 users (--users)", "it holds 3 users")),
    ("eval federated --dataset {fed-tiny} --out {tmp}/f", "refused",
     ("party 'A' is too small", "it needs at least")),
    # empty, blank-only, binary and malformed files
    ("bench triehh --dataset {empty}", "refused", ("holds no users",)),
    ("net run --job triehh --dataset {blank}", "refused", ("holds no users",)),
    ("triehhpp --flat --candidates {empty}", "refused", ("lists no candidate",)),
    ("triehhpp --flat --candidates {blank}", "refused", ("lists no candidate",)),
    ("triehhpp --flat --candidates {binary}", "refused", ("not UTF-8",)),
    ("federated --dataset {fed-empty}", "refused", ("no rows",)),
    ("federated --dataset {fed-bad}", "refused", ("expected 3 columns",)),
    ("federated --dataset {binary}", "refused", ()),
    ("eval federated --dataset {fed-empty} --out {tmp}/f", "refused", ("no rows",)),
    ("triehh --dataset {empty}", "refused", ("holds no users",)),
    ("triehh --dataset {blank}", "refused", ("holds no users",)),
    ("triehh --dataset {binary}", "refused", ("not UTF-8",)),
    ("triehhpp --dataset {blank}", "refused", ("holds no users",)),
    ("sfp --dataset {empty}", "refused", ()),
    ("hh --dataset {blank} --mechanism pem", "refused", ()),
    ("ldp --dataset {empty}", "refused", ("no items",)),
    ("ldp --dataset {blank}", "refused", ("no items",)),
    ("ldp --dataset {binary}", "refused", ("not UTF-8",)),
    ("quantiles --values {empty} --lo 0 --hi 1", "refused", ("holds no values",)),
    ("quantiles --values {blank} --lo 0 --hi 1", "refused", ("holds no values",)),
    ("quantiles --values {binary} --lo 0 --hi 1", "refused", ("not UTF-8",)),
    ("quantiles --values {numbers-text} --lo 0 --hi 1", "refused",
     (":2: 'zero' is not a number",)),
    ("quantiles --values {numbers-nan} --lo 0 --hi 1", "refused", ("not a finite number",)),
    ("quantiles --values {numbers-out} --lo 0 --hi 1 --seed 1", "refused",
     ("500 of 1,000 values are outside the public range", "--clip")),
    ("quantiles --values {numbers} --lo 1 --hi 0", "refused", ("--lo < --hi",)),
    ("quantiles --values {numbers} --lo 0", "refused", ("--lo and --hi",)),
    ("quantiles --values {numbers} --lo 0 --hi 1 --users 5000", "refused",
     ("holds 1,000 values",)),
    # out-of-range numbers
    ("triehh --epsilon 0", "refused", ("--epsilon",)),
    ("triehh --delta 1", "refused", ("--delta",)),
    ("ldp --epsilon nan", "refused", ("--epsilon",)),
    ("quantiles --quantiles 0.5,1.5", "refused", ("--quantiles",)),
    # options that do not apply
    ("hh --mechanism poplar1 --epsilon 2 --dataset en", "refused", ("--epsilon",)),
    ("hh --mechanism sfp --oracle grr --dataset en", "refused", ("--oracle",)),
    ("hh --mechanism triehh --levels 3 --dataset en", "refused", ("--levels",)),
    ("hh --mechanism triehh --extension 3 --dataset en", "refused", ("--extension",)),
    ("hh --mechanism pem --T 5", "refused", ("--T",)),
    ("hh --mechanism pem --delta 1e-5", "refused", ("--delta",)),
    ("hh --mechanism pem --dataset en --support 50", "refused", ("--support",)),
    ("hh --mechanism pem --dataset en --zipf-s 2", "refused", ("--zipf-s",)),
    ("hh --mechanism pem --word-bytes 4", "refused", ("--word-bytes",)),
    ("hh --mechanism pem --drop-unencodable", "refused", ("--drop-unencodable",)),
    ("hh --mechanism poplar1 --transport plain --dataset en", "refused", ("--transport",)),
    ("ldp --mechanism grr --g 5", "refused", ("--g",)),
    ("ldp --mechanism olh --B 5", "refused", ("--B",)),
    ("ldp --dataset {ints} --zipf-s 2", "refused", ("--zipf-s",)),
    ("ldp --delta 1e-6", "refused", ("--delta",)),
    ("federated --mechanism fedpem --no-shared-trie", "refused", ("--no-shared-trie",)),
    ("federated --mechanism gtf --phase-one-fraction 0.3", "refused",
     ("--phase-one-fraction",)),
    ("federated --mechanism taps --fedpem-upload frequencies", "refused",
     ("--fedpem-upload",)),
    ("federated --mechanism fedpem --extension adaptive", "refused", ("--extension",)),
    ("federated --mechanism taps --extension k --drift printed", "refused", ("--drift",)),
    ("federated --dataset regime --beta 0.3", "refused", ("--beta",)),
    ("federated --dataset syn --own 0.1", "refused", ("--own",)),
    ("federated --dataset {fed-tiny} --data-seed 3", "refused", ("--data-seed",)),
    ("federated --dataset {fed-tiny} --users 100", "refused", ("--users",)),
    ("triehh --theta 10 --gamma 2 --epsilon 2", "refused", ("--epsilon",)),
    ("triehh --theta 10 --gamma 2 --delta 1e-6", "refused", ("--delta",)),
    ("eval triehh --theta 10 --gamma 2 --epsilon 2 --out {tmp}/e2", "refused",
     ("--epsilon",)),
    ("triehh --drop-unencodable", "refused", ("--drop-unencodable",)),
    ("triehh --show 5 --json", "refused", ("--show",)),
    ("sfp --epsilon 2 --local-epsilon 4", "refused", ("--epsilon",)),
    ("triehhpp --show 5 --json", "refused", ("--show",)),
    ("hh --show 5 --json", "refused", ("--show",)),
    ("sfp --drop-unencodable", "refused", ("--drop-unencodable",)),
    ("triehhpp --flat --composition advanced", "refused", ("--composition",)),
    ("triehhpp --candidates {tiny}", "refused", ("--candidates",)),
    ("quantiles --clip", "refused", ("--clip",)),
    ("triehh --dataset en --alphabet abc", "refused", ("--alphabet",)),
    ("triehh --transport plain --threat semi-honest", "refused", ("--threat",)),
    # what is chosen or changed for the user is printed
    ("ldp --dataset {ints} --seed 1", "ran",
     ("input: domain 7 items: the file's 7 distinct items",
      "warning: the domain's items were read off the users' items")),
    ("ldp --dataset {ints} --domain 3 --seed 1", "ran",
     ("input: domain 3 items: the 3 most frequent", "outside the top --domain")),
    ("quantiles --values {numbers-out} --lo 0 --hi 1 --clip --seed 1 --epsilon 4 --bound eq3",
     "ran", ("warning: 500 values outside the public range [0, 1] clipped to it (250 "
             "below, 250 above)",)),
    ("triehh --users 1000 --seed 1", "ran",
     ("0 heavy hitters discovered", "heavy hitters: (none): a word is found only if",
      "theta = 10", "m = 32", "the smallest count that could pass is 10 votes")),
    ("triehhpp --users 2000 --seed 1", "ran",
     ("heavy hitters: (none)", "expected sample")),
    ("hh --mechanism triehh --dataset en --users 1000 --seed 1", "ran",
     ("heavy hitters: (none)",)),
]


def _battery_argv(template: str, files: dict[str, str], tmp: pathlib.Path) -> list[str]:
    import shlex

    text = template.replace("{tmp}", str(tmp))
    for stem, path in files.items():
        text = text.replace("{" + stem + "}", path)
    return shlex.split(text)


def battery_verdict(kind: str, must: tuple[str, ...], code: int | None, out: str,
                    err: str) -> tuple[str | None, str | None]:
    """``(traceback, silent)``: what went wrong as a traceback (a raw error, a library's
    warning, more than one line, a wrong status) and as a silent choice (a run that
    should have said what it chose or changed and did not, or an error that does not
    say what the user can read off it), ``None`` each when fine."""
    if code is None:
        return f"ran for more than {CASE_SECONDS} s", None
    if "Traceback" in err:
        return "traceback: " + err.strip().splitlines()[-1], None
    if "Warning" in err or "warnings.warn" in err:
        return "a library warning reached the user: " + err.strip()[:200], None
    if kind == "refused":
        lines = err.strip().splitlines()
        if code != 2 or len(lines) != 1 or "error:" not in lines[0]:
            return f"exit {code}, stderr {err.strip()[-300:]!r}", None
        missing = [m for m in must if m not in lines[0]]
        return None, (f"the error does not say {missing}: {lines[0]}" if missing else None)
    if code != 0:
        return f"exit {code}: {err.strip()[-300:]!r}", None
    missing = [m for m in must if m not in out]
    return None, (f"not printed: {missing}" if missing else None)


def _takes_quiet(argv: list[str]) -> bool:
    """Whether the command ``argv`` names has ``--quiet`` (no progress on stderr)."""
    for command, parser in _leaves(build_parser()):
        if argv[:len(command.split())] == command.split():
            return "--quiet" in parser._option_string_actions
    return False


@pytest.fixture(scope="module")
def battery_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _battery_files(tmp_path_factory.mktemp("battery"))


@pytest.mark.parametrize(("template", "kind", "must"), BATTERY,
                         ids=[t for t, _, _ in BATTERY])
def test_battery_small_odd_and_mostly_dropped_input(
        template: str, kind: str, must: tuple[str, ...], battery_files: dict[str, str],
        tmp_path: pathlib.Path) -> None:
    import warnings

    argv = _battery_argv(template, battery_files, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = ["--quiet"] if "--quiet" not in argv and _takes_quiet(argv) else []
        code, out, err, _ = run_case(argv + quiet)
    library = [str(w.message)[:120] for w in caught
               if not issubclass(w.category, (DeprecationWarning, ResourceWarning))]
    traceback, silent = battery_verdict(kind, must, code, out, err)
    assert library == [], argv
    assert traceback is None, (argv, traceback)
    assert silent is None, (argv, silent)
