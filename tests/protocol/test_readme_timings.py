"""``fedhh bench readme``: the README's timing table is generated from measurements."""
from __future__ import annotations

import pathlib

from protocol.studies.runners import readme_timings as rt

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_is_the_script_s_and_lists_every_command() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count(rt.BEGIN) == 1 and text.count(rt.END) == 1
    block = text[text.index(rt.BEGIN):text.index(rt.END)]
    for row in rt.ROWS:
        assert f"| `{row.command}` |" in block, row.command
    # rewriting without measurements keeps every row as it is
    assert rt.rewrite(text, []) == text
    # and it says how long the default test run takes (measured, not a placeholder)
    import re

    assert re.search(r"\*\*The default test suite\*\*[^*]*takes\s+\*\*\d+ min \d+ s\*\*", text)


def test_a_measured_row_replaces_only_its_own_cells() -> None:
    text = README.read_text(encoding="utf-8")
    result = {"command": rt.ROWS[0].command, "seconds": 12.3, "exit": 0,
              "peak_rss_mb": 321.0, "longest_silence_seconds": 4.2, "wall_time": "12 s"}
    new = rt.rewrite(text, [result])
    assert f"| `{rt.ROWS[0].command}` | 12 s | 321 MB | 4 s |" in new
    other = f"| `{rt.ROWS[1].command}` |"
    line = next(ln for ln in text.splitlines() if ln.startswith(other))
    assert line in new and f"1 of {len(rt.ROWS)} rows in that run" in new


def test_measure_runs_the_command_on_a_terminal() -> None:
    r = rt.measure(rt.Row(("privacy", "triehh", "--users", "1000", "--epsilon", "4")),
                   timeout=300)
    assert r["exit"] == 0 and r["seconds"] > 0 and r["peak_rss_mb"] > 10
    assert 0 < r["longest_silence_seconds"] <= r["seconds"] + 1
