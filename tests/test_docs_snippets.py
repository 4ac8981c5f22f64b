"""Every fenced ``python`` block in ``docs/*.md`` runs as written.

A block preceded by ``<!-- docs-test: skip (reason) -->`` is a fragment and is not run
(the reason is required); ``<!-- docs-test: slow (reason) -->`` runs only with
``-m slow``. Each block runs in a fresh namespace, in a temporary working directory.
"""
from __future__ import annotations

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"(?:<!--\s*docs-test:\s*(?P<mark>\w+)\s*(?P<why>\([^)]*\))?\s*-->\s*\n)?"
                   r"```python\n(?P<code>.*?)```", re.S)


def snippets() -> list:
    out = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for i, m in enumerate(BLOCK.finditer(text)):
            line = text.count("\n", 0, m.start("code")) + 1
            mark, why = m.group("mark"), m.group("why")
            marks = []
            if mark is not None:
                assert mark in ("skip", "slow") and why, \
                    f"{page.name}:{line}: docs-test marks are skip/slow with a (reason)"
                marks = [pytest.mark.skip(reason=f"fragment {why}")] if mark == "skip" \
                    else [pytest.mark.slow]
            out.append(pytest.param(page.name, line, m.group("code"),
                                    id=f"{page.name}:{line}", marks=marks))
    return out


def test_the_pages_have_snippets() -> None:
    names = {p.values[0] for p in snippets()}
    assert {"api.md", "ldp.md", "pem.md"} <= names


@pytest.mark.parametrize(("page", "line", "code"), snippets())
def test_snippet_runs(page: str, line: int, code: str, tmp_path: pathlib.Path,
                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs/{page}:{line}", "exec"), {"__name__": "__docs__"})  # noqa: S102


def test_five_lines_from_install_to_triehh_over_secagg() -> None:
    """The measure of the public API: the first example of docs/api.md runs TrieHH on
    the reader's own word list over secure aggregation in at most five lines."""
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    code = BLOCK.search(text).group("code")  # type: ignore[union-attr]
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) <= 5, lines
    assert 'transport="secagg"' in code and "api.triehh(" in code


def test_every_page_has_a_limits_section() -> None:
    missing = [p.name for p in sorted(DOCS.glob("*.md"))
               if not re.search(r"^#+ Limits", p.read_text(encoding="utf-8"), re.M)]
    assert not missing, missing


def test_sources_are_cited_by_paper_not_by_outside_file_or_number() -> None:
    root = DOCS.parent
    bad = re.compile(r"seeds?/|\bseed 0\d\d\b|\bissue #?\d+|shared/|SEED-NOTES", re.I)
    hits = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".md") or ".venv" in path.parts \
                or path.name == "test_docs_snippets.py" or not path.is_file():
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if bad.search(line):
                hits.append(f"{path.relative_to(root)}:{no}: {line.strip()}")
    assert not hits, hits
