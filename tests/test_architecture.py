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
    "shuffler": {"shuffler", "secagg", "cryptography", "nacl", "numpy"},
    "protocol": {"protocol", "secagg", "shuffler", "mechanisms", "msgpack", "numpy", "scipy",
                 "cryptography", "nacl", "tqdm", "matplotlib", "wordfreq"},
    "mechanisms": {"mechanisms", "numpy", "scipy", "protocol"},
}
# what mechanisms may take from protocol: the contract only
MECHANISMS_FROM_PROTOCOL = {"protocol.core.contract"}
# what shuffler may take from secagg: the one RandomSource / OsRandom (docs/architecture.md)
SHUFFLER_FROM_SECAGG = {"secagg.randomness"}
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


def _violations(pkg: str, f: pathlib.Path) -> list[str]:
    """Every import of ``f`` (a module of ``pkg``) against the rules above."""
    bad = []
    for name, line in _imports(f):
        top = name.split(".")[0]
        if top in STDLIB and top != "__future__":
            if pkg in ("secagg", "shuffler") and top in FORBIDDEN_STDLIB_IN_CORES:
                bad.append(f"{f.name}:{line} imports {name}")
            continue
        if top == "__future__":
            continue
        if top not in ALLOWED[pkg]:
            bad.append(f"{f.name}:{line} imports {name}")
        if pkg == "mechanisms" and top == "protocol" and name not in MECHANISMS_FROM_PROTOCOL:
            bad.append(f"{f.name}:{line} imports {name} (only the contract)")
        if pkg == "shuffler" and top == "secagg" and name not in SHUFFLER_FROM_SECAGG:
            bad.append(f"{f.name}:{line} imports {name} (only secagg.randomness)")
    return bad


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_import_direction(pkg: str) -> None:
    files = _files(pkg)
    assert files, f"package {pkg} has no modules"
    bad = [f"{f.relative_to(ROOT).parent}/{v}" for f in files for v in _violations(pkg, f)]
    assert not bad, "imports against the architecture:\n" + "\n".join(bad)


def test_checker_catches_a_violation(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("import socket\nfrom protocol.core.codec import encode\nimport msgpack\n")
    names = [n for n, _ in _imports(src)]
    assert names == ["socket", "protocol.core.codec", "msgpack"]
    assert len(_violations("secagg", src)) == 3
    # shuffler may take secagg.randomness and nothing else from secagg
    src.write_text("from secagg.randomness import OsRandom\nfrom secagg import crypto\n"
                   "import secagg.shamir\n")
    assert [v.split()[-3] for v in _violations("shuffler", src)] == ["secagg", "secagg.shamir"]
    assert _violations("secagg", src) == []
    # mechanisms take only the contract from protocol
    src.write_text("from protocol.core.contract import Kind\nfrom protocol.core import codec\n")
    assert len(_violations("mechanisms", src)) == 1


@pytest.mark.parametrize("cls", ["RandomSource", "OsRandom", "PrivacyGuarantee"])
def test_one_definition_of_each(cls: str) -> None:
    where = [f"{f.relative_to(ROOT)}" for pkg in sorted(ALLOWED) for f in _files(pkg)
             if any(isinstance(node, ast.ClassDef) and node.name == cls
                    for node in ast.walk(ast.parse(f.read_text())))]
    assert len(where) == 1, f"{cls} defined in {where}"


def test_randomness_is_shared() -> None:
    import protocol.core.randomness as core
    import secagg.randomness as one
    import shuffler.keys as keys

    assert core.OsRandom is one.OsRandom is keys.OsRandom
    assert core.RandomSource is one.RandomSource is keys.RandomSource
    a, b = one.OsRandom().token_bytes(32), one.OsRandom().token_bytes(32)
    assert len(a) == 32 and a != b
