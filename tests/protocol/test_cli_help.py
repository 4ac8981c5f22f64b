"""Every ``fedhh`` command and sub-command prints its help and exits 0."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from protocol.cli import build_parser, main


def _commands() -> list[list[str]]:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, sub in top.choices.items():
        groups = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        out.extend([name, leaf] for leaf in groups[0].choices) if groups else out.append([name])
    return out


COMMANDS = _commands()


def test_every_command_module_is_registered() -> None:
    import pkgutil

    from protocol.cli import commands

    modules = {m.name for m in pkgutil.iter_modules(commands.__path__)}
    names = {"_".join(c) for c in COMMANDS}
    # privacy shuffle lives in amplification.py, attack list/run in attack.py
    assert len(COMMANDS) >= len(modules) + 1, (sorted(modules), sorted(names))
    for c in (["triehh"], ["bench", "triehh"], ["eval", "compare"], ["privacy", "shuffle"]):
        assert c in COMMANDS


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_help_exits_zero(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fedhh " + " ".join(argv))


def test_entry_point_help() -> None:
    # what the console script ``fedhh`` runs (pyproject.toml: protocol.cli:main)
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from protocol.cli import main; sys.exit(main())",
                           "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for c in {c[0] for c in COMMANDS}:
        assert c in proc.stdout
