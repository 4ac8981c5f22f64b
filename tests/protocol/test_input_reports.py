"""Nothing an item file or an encoding changes goes unsaid: ``fedhh ldp`` counts blank
lines, users outside the domain and users drawn with replacement; ``fedhh hh`` counts the
words PEM cuts to ``--word-bytes``."""
from __future__ import annotations

import json

from protocol.cli import main


def test_ldp_reports_what_reading_the_item_file_changed(tmp_path, capsys) -> None:  # noqa: ANN001
    p = tmp_path / "items.txt"
    p.write_text("a\n\nb\na\n\n\nc\n", encoding="utf-8")
    assert main(["ldp", "--dataset", str(p), "--seed", "1", "--domain", "2"]) == 0
    out = capsys.readouterr().out
    assert "warning: 3 blank lines skipped" in out
    assert "warning: 1 users hold an item outside the top --domain items" in out
    assert main(["ldp", "--dataset", str(p), "--seed", "1", "--users", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["input"]
    assert report == {"blank_lines": 3, "lines": 4, "outside_domain": 0, "users_drawn": 10,
                      "with_replacement": True, "byte_order_mark_removed": False,
                      "crlf_lines": 0, "domain": 3, "distinct_items": 3,
                      "domain_from_data": True,
                      "domain_chosen": "the file's 3 distinct items, most frequent first "
                                       "(no --domain)"}


def test_hh_pem_reports_the_words_it_cuts(tmp_path, capsys) -> None:  # noqa: ANN001
    p = tmp_path / "words.txt"
    p.write_text("\n".join(["abcdefghij"] * 30 + ["abc"] * 50 + ["abcdefgh"] * 20) + "\n",
                 encoding="utf-8")
    assert main(["hh", "--mechanism", "pem", "--dataset", str(p), "--seed", "1",
                 "--word-bytes", "6", "--json"]) == 0
    cut = json.loads(capsys.readouterr().out)["details"]["truncated"]
    assert cut == {"bytes": 6, "words": 2, "users": 50}
    assert main(["hh", "--mechanism", "pem", "--dataset", str(p), "--seed", "1"]) == 0
    assert "warning: 2 distinct words longer than 6 bytes, held by 50 users" in \
        capsys.readouterr().out
