"""The layering of docs/architecture.md, checked by parsing every module's imports.

Layers, lowest first (a layer imports only from itself and the layers it names):

* ``secagg``, ``shuffler``: pure cryptographic cores -- the standard library without
  I/O, clock or global randomness, ``cryptography``, ``nacl``, ``numpy`` (``secagg``
  also ``cffi``, for libcrypto's AES keyed again per mask seed); ``shuffler``
  also takes the one ``RandomSource`` from ``secagg.randomness`` and nothing else of
  ``secagg``;
* ``mechanisms``: ``numpy``, ``scipy`` and, from ``protocol``, the contract module only;
* ``protocol.core``: the cores, ``msgpack``, ``Crypto`` (pycryptodome's TurboSHAKE128, for
  Poplar1), ``cffi`` (Poplar1's OpenSSL AES keyed per report), ``numba`` (Poplar1's compiled
  kernels) and its own modules -- never
  mechanisms,
  studies or the CLI;
* ``protocol.studies``: mechanisms, the core and the cores -- never the CLI;
* ``protocol.flower``: the adapter to the Flower framework (docs/flower.md), beside the
  CLI: the core, the studies, mechanisms and the cores, and the optional ``flwr``;
  nothing but the CLI imports it;
* ``protocol.cli``: everything below (the Flower adapter included); a command module
  never imports another command module (what two commands share lives in the studies
  or in a CLI helper module).

Imports inside functions count (``ast.walk`` sees every node).
"""
from __future__ import annotations

import ast
import functools
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
PACKAGES = ("secagg", "shuffler", "mechanisms", "protocol")

# layer -> top-level names (third-party or first-party packages) it may import
ALLOWED_TOP = {
    # cffi: libcrypto's AES-256-CTR keyed again per mask seed (secagg/_libcrypto.py)
    "secagg": {"secagg", "cryptography", "nacl", "numpy", "cffi"},
    "shuffler": {"shuffler", "secagg", "cryptography", "nacl", "numpy"},
    "mechanisms": {"mechanisms", "numpy", "scipy", "protocol"},
    "protocol.core": {"protocol", "secagg", "shuffler", "msgpack", "numpy", "cryptography",
                      "nacl", "distributed",
                      "dask",  # distributed's own configuration (cluster.py)
                      "Crypto",  # pycryptodome: TurboSHAKE128 for protocol.core.poplar1
                      "numba",  # compiled kernels of protocol.core.poplar1.jit
                      "cffi"},  # cffi: Poplar1's OpenSSL AES keyed per report (xof.py)
    "protocol.studies": {"protocol", "secagg", "shuffler", "mechanisms", "numpy", "scipy",
                         "cryptography", "nacl", "matplotlib", "wordfreq",
                         "flwr",  # flwr: only `fedhh bench flower`, an optional extra
                         "Crypto",  # `fedhh bench poplar1`: pycryptodome as the draft
                                    # reference's `Cryptodome`
                         "tqdm"},  # tqdm: the API's progress bar (studies/progress.py)
    # flwr: the optional extra; psutil: the CPU of the simulation engine's worker
    # processes, measured by `fedhh bench flower --app`
    "protocol.flower": {"protocol", "secagg", "mechanisms", "numpy", "msgpack",
                        "cryptography", "flwr", "psutil"},
    "protocol.cli": {"protocol", "secagg", "shuffler", "mechanisms", "numpy", "tqdm"},
}
# layer -> the parts of protocol/ it may import (prefixes of dotted module names)
ALLOWED_PROTOCOL = {
    "secagg": (),
    "shuffler": (),
    "mechanisms": ("protocol.core.contract",),
    "protocol.core": ("protocol.core",),
    "protocol.studies": ("protocol.core", "protocol.studies"),
    "protocol.flower": ("protocol.core", "protocol.studies", "protocol.flower"),
    "protocol.cli": ("protocol.core", "protocol.studies", "protocol.flower", "protocol.cli"),
}
# the pure cores must not reach the outside world even through the standard library
FORBIDDEN_STDLIB_IN_CORES = {"socket", "asyncio", "time", "random", "subprocess", "threading",
                             "multiprocessing", "urllib", "http", "select", "selectors"}
COMMANDS = "protocol.cli.commands"
# what shuffler may take from secagg: the one RandomSource / OsRandom (docs/architecture.md)
SHUFFLER_FROM_SECAGG = ("secagg.randomness",)


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    """Dotted module name of ``path`` under ``root`` (``pkg/__init__.py`` -> ``pkg``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer a module belongs to (``protocol/__init__.py`` counts as the core)."""
    for layer in ("protocol.core", "protocol.studies", "protocol.flower", "protocol.cli"):
        if module == layer or module.startswith(layer + "."):
            return layer
    top = module.split(".")[0]
    if top == "protocol":
        if module != "protocol":
            raise AssertionError(f"{module}: protocol/ holds only core/, studies/, flower/ "
                                 "and cli/")
        return "protocol.core"
    return top


def imports(path: pathlib.Path) -> list[tuple[str, int]]:
    """Every absolute import of ``path`` (module level and inside functions)."""
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


def violations(path: pathlib.Path, module: str) -> list[str]:
    """The imports of ``path`` (module ``module``) against the layering."""
    layer = layer_of(module)
    bad = []
    for name, line in imports(path):
        where = f"{module} (line {line}) imports {name}"
        top = name.split(".")[0]
        if top == "__future__":
            continue
        if top in STDLIB:
            if layer in ("secagg", "shuffler") and top in FORBIDDEN_STDLIB_IN_CORES:
                bad.append(f"{where}: no I/O, clock or global randomness in a pure core")
            continue
        if top not in ALLOWED_TOP[layer]:
            bad.append(f"{where}: {layer} may not import {top}")
            continue
        if layer == "shuffler" and top == "secagg" and name not in SHUFFLER_FROM_SECAGG:
            bad.append(f"{where}: shuffler may take only {SHUFFLER_FROM_SECAGG} from secagg")
        if top == "protocol" and not any(name == p or name.startswith(p + ".")
                                         for p in ALLOWED_PROTOCOL[layer]):
            bad.append(f"{where}: {layer} may take only {ALLOWED_PROTOCOL[layer]} from protocol")
        if (module.startswith(COMMANDS + ".") and name.startswith(COMMANDS + ".")
                and name != module):
            bad.append(f"{where}: a command module never imports another command module")
    return bad


def check_tree(root: pathlib.Path) -> list[str]:
    """Every violation in the packages under ``root``."""
    bad = []
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            bad.extend(violations(f, module_name(f, root)))
    return bad


@pytest.mark.parametrize("pkg", PACKAGES)
def test_import_direction(pkg: str) -> None:
    files = sorted((ROOT / pkg).rglob("*.py"))
    assert files, f"package {pkg} has no modules"
    bad = [v for f in files for v in violations(f, module_name(f, ROOT))]
    assert not bad, "imports against the architecture:\n" + "\n".join(bad)


def test_every_layer_of_protocol_exists() -> None:
    layers = {layer_of(module_name(f, ROOT)) for f in (ROOT / "protocol").rglob("*.py")}
    assert layers == {"protocol.core", "protocol.studies", "protocol.flower", "protocol.cli"}


def _plant(root: pathlib.Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(root).parents:
        if str(parent) != ".":
            (root / parent / "__init__.py").touch()
    path.write_text(text)


def test_the_rules_catch_planted_violations(tmp_path: pathlib.Path) -> None:
    """The real checker, on a fake tree with one violation of each rule and clean files."""
    lazy = "def f():\n    from {} import x\n    return x\n"
    _plant(tmp_path, "protocol/core/a.py", "import numpy\nfrom protocol.core import codec\n")
    _plant(tmp_path, "protocol/core/b.py", lazy.format("protocol.studies.runners"))
    _plant(tmp_path, "protocol/core/c.py", "import mechanisms.triehh\n")
    _plant(tmp_path, "protocol/core/d.py", "from protocol.cli import main\n")
    _plant(tmp_path, "protocol/studies/e.py", lazy.format("protocol.cli.output"))
    _plant(tmp_path, "protocol/studies/f.py", "from mechanisms import fo\nimport matplotlib\n")
    _plant(tmp_path, "protocol/cli/commands/g.py", lazy.format("protocol.cli.commands.h"))
    _plant(tmp_path, "protocol/cli/commands/h.py", "from protocol.cli.args import x\n")
    _plant(tmp_path, "protocol/studies/fl.py", lazy.format("protocol.flower.workflow"))
    _plant(tmp_path, "protocol/flower/ok.py", "import flwr\nfrom protocol.studies import x\n")
    _plant(tmp_path, "protocol/flower/w.py", "from protocol.cli import main\n")
    _plant(tmp_path, "mechanisms/m.py", "from protocol.core.codec import encode\n")
    _plant(tmp_path, "mechanisms/ok.py", "from protocol.core.contract import Transport\n")
    _plant(tmp_path, "mechanisms/n.py", lazy.format("secagg.state"))
    _plant(tmp_path, "secagg/s.py", "import socket\nimport msgpack\n")
    _plant(tmp_path, "shuffler/t.py", lazy.format("time"))
    _plant(tmp_path, "shuffler/u.py", "from secagg.randomness import OsRandom\n"
           "from secagg import crypto\n")
    found = check_tree(tmp_path)
    expected = {
        "protocol.core.b (line 2) imports protocol.studies.runners",
        "protocol.core.c (line 1) imports mechanisms.triehh",
        "protocol.core.d (line 1) imports protocol.cli",
        "protocol.studies.e (line 2) imports protocol.cli.output",
        "protocol.studies.fl (line 2) imports protocol.flower.workflow",
        "protocol.flower.w (line 1) imports protocol.cli",
        "protocol.cli.commands.g (line 2) imports protocol.cli.commands.h",
        "mechanisms.m (line 1) imports protocol.core.codec",
        "mechanisms.n (line 2) imports secagg.state",
        "secagg.s (line 1) imports socket",
        "secagg.s (line 2) imports msgpack",
        "shuffler.t (line 2) imports time",
        "shuffler.u (line 2) imports secagg",
    }
    assert {v.split(":")[0] for v in found} == expected, found
    assert len(found) == len(expected)


@functools.lru_cache(maxsize=1)
def _class_definitions() -> dict[str, list[str]]:
    """Every class name defined in the packages, and the files defining it (each file
    parsed once for all the names asked about)."""
    where: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            names = {node.name for node in ast.walk(ast.parse(f.read_text()))
                     if isinstance(node, ast.ClassDef)}
            for name in names:
                where.setdefault(name, []).append(f"{f.relative_to(ROOT)}")
    return where


@pytest.mark.parametrize("cls", ["RandomSource", "OsRandom", "PrivacyGuarantee"])
def test_one_definition_of_each(cls: str) -> None:
    where = _class_definitions().get(cls, [])
    assert len(where) == 1, f"{cls} defined in {where}"


def test_randomness_is_shared() -> None:
    import protocol.core.randomness as core
    import secagg.randomness as one
    import shuffler.keys as keys

    assert core.OsRandom is one.OsRandom is keys.OsRandom
    assert core.RandomSource is one.RandomSource is keys.RandomSource
    a, b = one.OsRandom().token_bytes(32), one.OsRandom().token_bytes(32)
    assert len(a) == 32 and a != b
