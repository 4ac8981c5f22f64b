"""Catalogue of attacks on the honest state machines and transports.

Theory of operation
-------------------
Each attack is a function ``attack(seed: int) -> Outcome`` registered with
:func:`attack` under a unique name, together with what it targets (paper section or
protocol step) and the *expected* outcome, stated before it runs. An attack drives
the honest code (clients, shuffler, analyzer, TrieHH) and plays the adversary through
the hooks the code exposes (the secure-aggregation engine's envelope hook, envelope
bytes handed to the shuffler, a TrieHH subclass that replaces the server's sampling).
The :class:`Outcome` records what each honest party did (abort reasons, rejection
counts) and what the adversary measurably learned (``leakage``), and whether the
expectation was met (``passed``). Every secure-aggregation run is also checked with
:func:`protocol.core.invariants.check_secagg_transcript`.

Two kinds of expectation exist:

* **detected**: honest parties stop with a specific reason (an abort reason, a
  rejection reason) and nothing is released;
* **measured**: the attack is outside what the protocol can stop (a documented
  limitation, e.g. sybils or a colluding shuffler); the outcome is a number (bits of a
  vote, fraction of reports linked, an epsilon lower bound) checked against the value
  the analysis predicts.

Modules: :mod:`.secagg_attacks`, :mod:`.shuffler_attacks`, :mod:`.triehh_attacks`,
:mod:`.sybil`, :mod:`.decode_attacks`, :mod:`.threshold_attacks`, :mod:`.poplar1_attacks`,
:mod:`.client_attacks` (corrupted clients on the committee's validated input). Importing this package registers all of them.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

__all__ = ["Outcome", "AttackInfo", "attack", "ATTACKS", "run_attack", "run_all",
           "UnknownAttack", "load_catalogue"]


class UnknownAttack(KeyError):
    """No attack of that name is registered."""


@dataclass
class Outcome:
    """What one attack run showed.

    Attributes:
        name: the attack.
        expected: the expected outcome, in words.
        observed: what happened, in words.
        passed: whether the observation matches the expectation.
        parties: per honest party, what it did (abort reason, rejections, ...).
        leakage: measured quantities (what the adversary learned).
        seconds: wall time of the run.
    """

    name: str
    expected: str
    observed: str
    passed: bool
    parties: dict[str, Any] = field(default_factory=dict)
    leakage: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AttackInfo:
    name: str
    system: str
    target: str
    expected: str
    kind: str
    func: Callable[[int], Outcome]

    @property
    def summary(self) -> str:
        doc = (self.func.__doc__ or "").strip()
        # the first paragraph, unwrapped: a docstring's first line may end mid-sentence
        first = " ".join(ln.strip() for ln in doc.split("\n\n")[0].splitlines())
        return first or self.name


ATTACKS: dict[str, AttackInfo] = {}


def attack(name: str, *, system: str, target: str, expected: str,
           kind: str = "detected") -> Callable[[Callable[[int], Outcome]],
                                               Callable[[int], Outcome]]:
    """Register an attack function under ``name``.

    Raises:
        ValueError: a duplicate name or an unknown kind.
    """
    if kind not in ("detected", "measured"):
        raise ValueError("kind must be 'detected' or 'measured'")

    def deco(fn: Callable[[int], Outcome]) -> Callable[[int], Outcome]:
        if name in ATTACKS:
            raise ValueError(f"attack {name!r} registered twice")
        ATTACKS[name] = AttackInfo(name, system, target, expected, kind, fn)
        return fn
    return deco


def load_catalogue() -> None:
    """Import every attack module, so that :data:`ATTACKS` lists the whole catalogue."""
    import importlib
    for mod in ("secagg_attacks", "shuffler_attacks", "triehh_attacks", "sybil",
                "decode_attacks", "threshold_attacks", "poplar1_attacks", "client_attacks"):
        try:
            importlib.import_module(f"protocol.studies.attacks.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"protocol.studies.attacks.{mod}":
                raise


def run_attack(name: str, seed: int = 0) -> Outcome:
    """Run one registered attack.

    Raises:
        UnknownAttack: no attack of that name.
    """
    load_catalogue()
    info = ATTACKS.get(name)
    if info is None:
        raise UnknownAttack(f"unknown attack {name!r}; see 'fedhh attack list'")
    t0 = time.perf_counter()
    try:
        out = info.func(seed)
    except Exception as exc:  # an attack that crashes the honest code is a finding
        out = Outcome(name, info.expected, f"crashed: {type(exc).__name__}: {exc}", False,
                      leakage={"traceback": traceback.format_exc(limit=5)})
    out.seconds = time.perf_counter() - t0
    return out


def run_all(seed: int = 0) -> list[Outcome]:
    """Run every registered attack in registration order."""
    load_catalogue()
    return [run_attack(name, seed) for name in list(ATTACKS)]
