"""The dependency direction of ../shared/ARCHITECTURE.md, checked by parsing imports."""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)

ALLOWED = {
    # pure cryptographic cores: no wire, no I/O, no clock, no global randomness
    "secagg": {"secagg", "cryptography", "nacl", "numpy"},
    "shuffler": {"shuffler", "cryptography", "nacl", "numpy"},
    "protocol": {"protocol", "secagg", "shuffler", "mechanisms", "msgpack", "numpy", "scipy",
                 "cryptography", "nacl", "tqdm", "matplotlib", "wordfreq"},
    "mechanisms": {"mechanisms", "numpy", "scipy", "protocol"},
}
# what mechanisms may take from protocol: the contract only
MECHANISMS_FROM_PROTOCOL = {"protocol.core.contract"}
# the pure cores must not reach the outside world even through the standard library
FORBIDDEN_STDLIB_IN_CORES = {"socket", "asyncio", "time", "random", "subprocess", "threading",
                             "multiprocessing", "urllib", "http", "select", "selectors"}


def _imports(path: pathlib.Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import stays inside the package
                continue
            out.append((node.module or "", node.lineno))
    return out


def _files(pkg: str) -> list[pathlib.Path]:
    return sorted((ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_import_direction(pkg: str) -> None:
    files = _files(pkg)
    assert files, f"package {pkg} has no modules"
    bad = []
    for f in files:
        for name, line in _imports(f):
            top = name.split(".")[0]
            if top in STDLIB and top != "__future__":
                if pkg in ("secagg", "shuffler") and top in FORBIDDEN_STDLIB_IN_CORES:
                    bad.append(f"{f.relative_to(ROOT)}:{line} imports {name}")
                continue
            if top == "__future__":
                continue
            if top not in ALLOWED[pkg]:
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {name}")
            if pkg == "mechanisms" and top == "protocol" and name not in MECHANISMS_FROM_PROTOCOL:
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {name} (only the contract)")
    assert not bad, "imports against the architecture:\n" + "\n".join(bad)


def test_checker_catches_a_violation(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("import socket\nfrom protocol.core.codec import encode\nimport msgpack\n")
    names = [n for n, _ in _imports(src)]
    assert names == ["socket", "protocol.core.codec", "msgpack"]
    assert "msgpack" not in ALLOWED["secagg"] and "socket" in FORBIDDEN_STDLIB_IN_CORES
