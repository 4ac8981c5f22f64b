"""One place that says which values a parameter may take, for the command line and the
Python API alike.

A parameter is known by its name (the API's keyword and the command line's ``dest``
are the same word: ``epsilon``, ``max_length``, ``users``); :data:`RULES` gives the
range of each. :func:`check` refuses a value outside it with
:class:`protocol.studies.errors.StudyError` whose message names the parameter as the
caller wrote it (``--max-length`` on the command line, ``max_length`` in Python), so
every entry point refuses the same values with the same sentence.

Why the upper bounds: every value here ends up as an array length, an exponent or a
loop count. ``epsilon`` stops at :data:`MAX_EPSILON` because the mechanisms compute
``e^epsilon`` (a hash range, a keep probability): beyond 50 the other outcomes of a
randomiser have probability below ``2e-22`` and the guarantee no longer says anything,
while ``e^epsilon`` leaves the integer ranges the hashing works in. Populations stop at
:data:`MAX_USERS` because a simulation holds one array entry per user.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from protocol.studies.errors import StudyError

__all__ = ["Rule", "RULES", "MAX_EPSILON", "MAX_USERS", "check", "check_all", "problem",
           "rule_for"]

#: the largest epsilon any mechanism here accepts (see the module docstring)
MAX_EPSILON = 50.0
#: the largest population a simulation accepts (one array entry per user)
MAX_USERS = 10**9
#: the largest count (rounds, runs, items, ...) that is not a population
_MAX_COUNT = 10**9
#: longest wait any deadline may name, in seconds (one week)
_MAX_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Rule:
    """The values one parameter may take.

    ``lo``/``hi`` bound it (``lo_open``/``hi_open``: the bound itself is excluded);
    ``integer``: a whole number; ``why``: appended to a refusal of a value above
    ``hi`` (``why_low``: below ``lo``) when it helps the reader choose a better value.
    Every rule refuses NaN and infinities.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    why: str = ""
    why_low: str = ""

    def describe(self) -> str:
        """``in (0, 50]``, ``>= 1``, ``<= 65535``: the range in words."""
        if self.lo is not None and self.hi is not None:
            return (f"in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}"
                    f"{')' if self.hi_open else ']'}")
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {_num(self.hi)}"
        return "a finite number"

    def accepts(self, value: float) -> bool:
        """Whether ``value`` is in range (and whole, for an integer rule)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        if self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi):
            return False
        return True


def _num(x: float) -> str:
    if float(x).is_integer() and abs(x) >= 10**6:
        k = int(abs(x))
        if str(k).rstrip("0") == "1":  # a power of ten: 1e9
            return f"{'-' if x < 0 else ''}1e{len(str(k)) - 1}"
        if k & (k - 1) == 0:  # a power of two: 2^31
            return f"{'-' if x < 0 else ''}2^{k.bit_length() - 1}"
        return f"{int(x):,}"
    return f"{x:g}"


def _count(lo: int = 1, hi: float = _MAX_COUNT, why: str = "", why_low: str = "") -> Rule:
    return Rule(lo=lo, hi=hi, integer=True, why=why, why_low=why_low)


_EPSILON = Rule(lo=0.0, hi=MAX_EPSILON, lo_open=True,
                why="beyond 50 e^epsilon leaves the ranges the mechanisms compute in and "
                    "the guarantee says nothing")
_PROBABILITY_OPEN = Rule(lo=0.0, hi=1.0, lo_open=True, hi_open=True)
_SECONDS = Rule(lo=0.0, hi=_MAX_SECONDS, lo_open=True)
_POPULATION = _count(1, MAX_USERS, "a simulation holds one array entry per user")

#: parameter name -> the values it may take. A name that is missing falls back on
#: :data:`DEFAULT_INTEGER` or :data:`DEFAULT_REAL` (by the parsed value's type).
RULES: dict[str, Rule] = {
    # privacy targets
    "epsilon": _EPSILON, "central_epsilon": _EPSILON,
    "epsilon0": Rule(lo=0.0, hi=MAX_EPSILON, why=_EPSILON.why),
    "local_epsilon": _EPSILON,
    "word_epsilon": Rule(lo=0.0, hi=MAX_EPSILON, why_low="0 sends no word report"),
    "delta": _PROBABILITY_OPEN,
    "confidence": _PROBABILITY_OPEN,
    "frequency": Rule(lo=0.0, hi=1.0, lo_open=True),
    # populations and sizes
    "users": _POPULATION, "n": _POPULATION, "clients": _POPULATION,
    "reports": _POPULATION, "samples": _count(1),
    "domain": _count(1, 2**32), "domain_size": _count(1, 2**32),
    "items": _count(1, MAX_USERS), "bits": _count(1, 64),
    "dim": _count(1, 2**40), "candidates": _count(1, 2**31),
    "modulus": _count(2, 2**62), "max_candidates": _count(1, 2**31),
    "payload_bytes": _count(1, 2**20), "crowds": _count(1, MAX_USERS),
    # mechanism parameters
    "max_length": _count(1, 64), "levels": _count(1, 64), "unit_size": _count(1, 4),
    "theta": _count(1, MAX_USERS), "gamma": Rule(lo=0.0, hi=1e9, lo_open=True),
    "k": _count(1, 10**6), "kmax": _count(1, 10**6), "T": _count(1, 10**6),
    "m": _count(1, 2**24), "g": _count(0, 2**31, why_low="0 chooses round(e^epsilon) + 1"),
    "B": _count(0, 2**31, why_low="0 chooses ceil(e^(epsilon/2) + 1)"),
    "extension": _count(1, 2**20), "word_bytes": _count(1, 8), "support": _count(1),
    "alpha": _count(2, 2**16), "grid": _count(1, 10**6),
    "slack": Rule(lo=0.0, hi=1e6), "zipf_s": Rule(lo=0.0, hi=100.0, lo_open=True),
    "beta": Rule(lo=0.0, hi=1e6, lo_open=True),
    "phase_one_fraction": _PROBABILITY_OPEN,
    "scale": Rule(lo=0.0, hi=1e4, lo_open=True),
    "lo": Rule(lo=-1e300, hi=1e300), "hi": Rule(lo=-1e300, hi=1e300),
    # runs and output
    "runs": _count(1, 10**6), "repeats": _count(1, 10**6), "sessions": _count(1, 10**6),
    "show": _count(0), "top": _count(0), "csv_top": _count(0),
    "bare_sample": _count(1), "days": _count(1, 36500),
    "seed": _count(0, 2**128), "data_seed": _count(0, 2**128),
    # transports and networks
    "dropout": Rule(lo=0.0, hi=1.0, hi_open=True),
    "dropout_rate": Rule(lo=0.0, hi=1.0, hi_open=True),
    "min_batch": _count(1, MAX_USERS), "workers": _count(1, 4096),
    "processes": _count(1, 4096), "threshold": _count(1, MAX_USERS),
    "shuffle_threshold": _count(1, MAX_USERS), "degree": _count(1, MAX_USERS),
    "grinding_bits": _count(0, 128), "secagg_grinding_bits": _count(0, 128),
    "port": _count(0, 65535, why_low="0 takes any free port"),
    "wait_seconds": _SECONDS, "stage_seconds": _SECONDS, "join_seconds": _SECONDS,
    "batch_seconds": _SECONDS, "timeout": _SECONDS,
    "round": _count(0, 2**31), "shuffle_round": _count(0, 2**31),
    "kill": _count(0, 4096), "kill_round": _count(1, 64), "stall": _count(0, MAX_USERS),
    "min_valid_fraction": Rule(lo=0.0, hi=1.0),
    # corrupted clients of a simulation (protocol.core.corruption)
    "corrupt_clients": _count(1, MAX_USERS),
    "corrupt_share": Rule(lo=0.0, hi=1.0, lo_open=True),
    "corrupt_seed": _count(0, 2**62),
}

#: an integer parameter without a rule of its own
DEFAULT_INTEGER = _count(0, 2**62)
#: a real parameter without a rule of its own
DEFAULT_REAL = Rule(lo=-1e300, hi=1e300)


def rule_for(name: str, value: Any = 0) -> Rule:
    """The rule of parameter ``name`` (the default for ``value``'s type if none)."""
    rule = RULES.get(name)
    if rule is not None:
        return rule
    return DEFAULT_INTEGER if isinstance(value, int) else DEFAULT_REAL


def problem(name: str, value: Any, rule: Rule | None = None) -> str | None:
    """What is wrong with ``value`` for parameter ``name`` (``"must be in (0, 50],
    got 1e+99 (...)"``), or ``None`` when it may take it (``None`` always may: a
    parameter left to its default)."""
    if value is None:
        return None
    try:
        import numpy as np

        if isinstance(value, np.generic) and not isinstance(value, np.bool_):
            value = value.item()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        return f"must be a number, got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    rule = rule or rule_for(name, value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if rule.integer and not float(value).is_integer():
        return f"must be a whole number, got {value}"
    if rule.accepts(value):
        return None
    shown = f"{float(value):g}" if isinstance(value, float) or abs(value) >= 10**15 \
        else str(value)
    low = rule.lo is not None and (value <= rule.lo if rule.lo_open else value < rule.lo)
    if low:
        side, why = f"{'>' if rule.lo_open else '>='} {_num(rule.lo)}", rule.why_low
    else:
        side, why = f"{'<' if rule.hi_open else '<='} {_num(rule.hi)}", rule.why
    if rule.lo is not None and rule.hi is not None and (rule.lo_open or rule.hi_open) \
            and rule.hi - rule.lo <= 1:
        side = rule.describe()  # a probability: the whole interval reads best
    return f"must be {side}, got {shown}" + (f" ({why})" if why else "")


def check(name: str, value: Any, label: str | None = None, rule: Rule | None = None) -> Any:
    """``value`` if parameter ``name`` may take it, else :class:`StudyError` naming
    ``label`` (how the caller wrote the parameter: ``--max-length``; default ``name``).
    ``None`` passes (a parameter left to its default).

    Raises:
        StudyError: not a number, NaN or infinite, not whole where a count is
            expected, or outside the rule's range.
    """
    what = problem(name, value, rule)
    if what is not None:
        raise StudyError(f"{label or name} {what}")
    return value


def check_all(values: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> None:
    """:func:`check` every ``name: value`` of ``values``.

    Raises:
        StudyError: the first value out of range.
    """
    for name, value in values.items():
        check(name, value, (labels or {}).get(name))
