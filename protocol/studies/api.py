"""The public Python API: heavy hitters from your own items in a few lines.

::

    from protocol.studies import api
    words = ["hello", "world", "hello", ...]          # one word per user
    hh = api.triehh(words, epsilon=4, transport="secagg", seed=1)
    print(hh.items, hh.guarantee.epsilon)
    print(hh.to_table())

:func:`frequencies` runs a local-DP frequency oracle on integer items the same way;
:func:`pem` runs PEM on integer items, :func:`sfp` Apple's SFP on words,
:func:`federated` TAPS, TAP, FedPEM or GTF on several parties' items, and
:func:`quantiles` TrieHH++'s quantile sketch on numbers.

Each heavy-hitters function takes the users' items (a list with one item per user, or a list of
lists with several items per user where the mechanism allows it), a privacy target and
a transport (``"plain"``, ``"secagg"``, ``"shuffler"`` or any
:class:`protocol.core.contract.Transport`), and returns a frozen :class:`HeavyHitters`:
what was released, the privacy guarantee the mechanism proved for the parameters it
ran with, one record per aggregation round, the costs and what each party of the
transport saw. ``to_json()`` and ``to_table()`` export it.

Inputs are never reinterpreted: an item with a character outside the public alphabet
is an error naming the user and the item (``on_unencodable="drop"`` drops and counts
such items instead, in ``dropped``), and a user left with no item is an error when the
mechanism's theorem is for one item per user.

The transports take their keys from the operating system; ``seed`` is the explicit
switch to a reproducible simulation (seeded sampling *and* seeded keys: never for
deployment).

The vote mechanisms (:func:`triehh`, :func:`triehhpp`, :func:`quantiles`) take
``corrupt=``: simulated corrupted clients (a
:class:`protocol.core.corruption.CorruptClients`, or a short dict such as
``{"clients": 1, "strategy": "theta-at-target"}``), and ``committee_input=`` /
``min_valid_fraction=`` for ``transport="threshold"``; the result's ``corrupted``
says what the corrupted clients achieved (:mod:`protocol.studies.corrupted`).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import inspect
import io
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence, Union

import numpy as np

from protocol.core.contract import (
    Contributions, Cost, RoundResult, RoundSpec, Sample, SamplesThroughInner, Transport,
)
from protocol.studies.errors import StudyError

__all__ = ["HeavyHitter", "Round", "Costs", "PartyViews", "HeavyHitters", "Frequencies",
           "Quantile", "Quantiles", "frequencies", "pem", "triehh", "triehhpp", "poplar1", "sfp",
           "federated", "quantiles", "DEFAULT_ALPHABET", "SFP_ALPHABET", "Items"]

#: The public alphabet used unless the caller names one: printable ASCII without
#: whitespace and the end-of-sequence symbol ``$``.
DEFAULT_ALPHABET = "".join(chr(c) for c in range(33, 127) if chr(c) != "$")
#: SFP's default public alphabet: ten characters of at most 6 bits each (with the
#: padding symbol) must fit in SFP's 64-bit word encoding.
SFP_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789'"

Items = Union[Sequence[str], Sequence[Sequence[str]], "np.ndarray[Any, Any]"]
Progress = Callable[[Iterable[Any]], Iterable[Any]]
#: ``True`` (default): a tqdm bar on stderr when it is a terminal (rounds, clients
#: inside a round, time left); ``False``: nothing; or a callable wrapping the rounds
ShowProgress = Union[bool, Progress, None]


def _validated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Check every numeric argument of an API function against the range of its name
    (:mod:`protocol.studies.validation`) before anything runs, and turn a call that
    does not fit the signature into :class:`StudyError`: the same refusals, in the
    same words, as the command line's."""
    from protocol.studies.validation import RULES, check

    sig = inspect.signature(fn)
    numeric = {name for name, p in sig.parameters.items()
               if p.kind is inspect.Parameter.KEYWORD_ONLY
               and "Sequence" not in str(p.annotation)
               and (name in RULES or (isinstance(p.default, (int, float))
                                      and not isinstance(p.default, bool)))}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise StudyError(f"{fn.__name__}(): {exc}") from None
        for name, value in bound.arguments.items():
            if name in numeric:
                check(name, value)
        return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def _showing(progress: ShowProgress, total: int | None, desc: str,
             transport: Transport | None) -> Iterator[Progress | None]:
    """The rounds wrapper for ``progress`` (see :data:`ShowProgress`); with ``True`` it
    also shows the clients a transport serves inside each round (its
    ``client_progress``, put back afterwards)."""
    if progress is None or progress is False:
        yield None
        return
    if progress is not True:
        yield progress  # the caller's own wrapper
        return
    from protocol.studies.progress import RunProgress

    inner: Any = getattr(transport, "inner", transport)
    run = RunProgress(total, desc, enabled=sys.stderr.isatty(),
                      label=getattr(inner, "progress_label", "secure aggregation"))
    installed = hasattr(inner, "client_progress") and inner.client_progress is None
    if installed:
        inner.client_progress = run.client
    try:
        yield run
    finally:
        run.close()
        if installed:
            inner.client_progress = None
OnUnencodable = Literal["error", "drop"]


def _warn_choice(text: str) -> None:
    """Warn the caller of a choice made from the data (a
    :class:`protocol.studies.errors.ChoiceWarning` pointing at the caller's line); the
    result records the same in its ``input``."""
    import warnings

    from protocol.studies.errors import ChoiceWarning

    frame: Any = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1  # up to the caller of the API
    warnings.warn(text, ChoiceWarning, stacklevel=level)


@dataclass(frozen=True)
class HeavyHitter:
    """One released heavy hitter.

    Attributes:
        item: the item, in the form it came in (a word, or an integer for integer
            items).
        count: the count the mechanism released for it, ``None`` when the mechanism
            releases membership only (TrieHH without ``release_counts``).
        estimate: an unbiased estimate of how many users hold it, when the mechanism
            gives one (TrieHH++), else ``None``.
    """

    item: str | int
    count: int | None = None
    estimate: float | None = None

    def __str__(self) -> str:
        extra = "" if self.count is None else f" count {self.count}"
        extra += "" if self.estimate is None else f" estimate {self.estimate:.1f}"
        return f"{self.item!r}{extra}"


@dataclass(frozen=True)
class Round:
    """One aggregation round as the analyst sees it, with its simulated cost.

    Attributes:
        round: the round (trie level) number, from 1.
        candidates: size of the public candidate set.
        contacted: clients asked to contribute.
        released: candidates released by the round.
        seconds: wall time of the round in the simulation.
        bytes_up: bytes sent by the clients; bytes_down: bytes sent to them.
    """

    round: int
    candidates: int
    contacted: int
    released: int
    seconds: float
    bytes_up: int
    bytes_down: int


@dataclass(frozen=True)
class Costs:
    """Totals over the rounds: wall seconds, CPU seconds per party, bytes."""

    seconds: float
    cpu_seconds: Mapping[str, float]
    bytes_up: int
    bytes_down: int


@dataclass(frozen=True)
class PartyViews:
    """What each party of the transport saw in one round (``views[party]``), as the
    transport recorded it: a plaintext server sees every vote, a secure-aggregation
    server masked-input digests and the sum, a shuffler opaque envelopes."""

    task: str
    round: int
    views: Mapping[str, Mapping[str, Any]]


def _costs_dict(c: Costs) -> dict[str, Any]:
    return {"seconds": c.seconds, "cpu_seconds": dict(c.cpu_seconds),
            "bytes_up": c.bytes_up, "bytes_down": c.bytes_down}


def _views_list(views: Sequence[PartyViews]) -> list[dict[str, Any]]:
    return [{"task": v.task, "round": v.round, "views": _plain(v.views)} for v in views]


class _Exported:
    """``to_json`` over the result's ``as_dict`` (one implementation for every result)."""

    def as_dict(self, views: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self, views: bool = False, indent: int | None = 2) -> str:
        """The result as JSON (see ``as_dict``; ``views`` includes every party's view)."""
        return json.dumps(self.as_dict(views), indent=indent)

    def _headline(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        """A few lines: what ran, the guarantee, the first results
        (``repr`` keeps every field; ``to_table``/``to_json`` export them)."""
        return self._headline()


def _guarantee_phrase(g: Any, note: str = "") -> str:
    if g is None:
        return f"no guarantee ({note})" if note else "no guarantee"
    eps, delta = getattr(g, "epsilon", None), getattr(g, "delta", None)
    model = getattr(g, "model", "")
    theorem = getattr(g, "theorem", "")
    return (f"({eps:.4g}, {delta:.3g})-DP {model}".rstrip() + (f", {theorem}" if theorem
                                                               else ""))


def _first(items: Sequence[Any], k: int = 5) -> str:
    shown = ", ".join(str(x) for x in items[:k])
    return shown + (f", ... ({len(items)} in all)" if len(items) > k else "")


@dataclass(frozen=True)
class HeavyHitters(_Exported):
    """The result of a heavy-hitters run.

    Attributes:
        mechanism: ``triehh``, ``triehhpp`` or ``poplar1``.
        transport: the transport's name.
        n: number of users.
        heavy_hitters: the released heavy hitters.
        released_prefixes: every other released trie node (frequent prefixes), with
            its released count when counts were released.
        guarantee: the privacy guarantee the mechanism proved for the parameters of
            this run (its own object, with ``epsilon``, ``delta``, ``theorem``), or
            ``None`` when the theorem's conditions fail (``guarantee_note`` says why).
        guarantee_note: why there is no guarantee, else ``""``.
        parameters: the mechanism's parameters (threshold, sample size, levels).
        rounds: one record per round.
        costs: totals.
        views: what each party saw, one entry per round.
        dropped: items dropped for characters outside the alphabet (only with
            ``on_unencodable="drop"``).
        corrupted: with corrupted clients (``corrupt=``), what they did and achieved
            (:func:`protocol.studies.corrupted.section`: strategy, who, target, per
            round the reports dropped by reason and whether the round released what
            the honest clients alone release, totals; for TrieHH also
            ``honest_heavy_hitters`` and ``release_equals_honest``, from plain TrieHH
            over the honest clients' votes on the same samples); else ``None``.
    """

    mechanism: str
    transport: str
    n: int
    heavy_hitters: tuple[HeavyHitter, ...]
    released_prefixes: Mapping[str, int | None]
    guarantee: Any
    guarantee_note: str
    parameters: Mapping[str, float | int]
    rounds: tuple[Round, ...]
    costs: Costs
    views: tuple[PartyViews, ...] = field(repr=False)
    dropped: int = 0
    central: Any = None
    input: Mapping[str, Any] = field(default_factory=dict, repr=False)
    corrupted: Mapping[str, Any] | None = field(default=None, repr=False)

    def _headline(self) -> str:
        lines = [f"{self.mechanism} over {self.transport}: {len(self.heavy_hitters)} heavy "
                 f"hitters from {self.n:,} users",
                 f"  guarantee: {_guarantee_phrase(self.guarantee, self.guarantee_note)}"]
        if self.central is not None:
            lines.append(f"  after shuffling: {_guarantee_phrase(self.central)}")
        if self.heavy_hitters:
            lines.append(f"  top: {_first([str(h) for h in self.heavy_hitters])}")
        elif self.mechanism in ("triehh", "triehhpp") and "theta" in self.parameters \
                and "m" in self.parameters:
            from protocol.studies.runners.triehh import why_none

            sample = "expected sample" if self.mechanism == "triehhpp" else "sample"
            lines.append("  heavy hitters: " + why_none(
                self.parameters["theta"], self.parameters["m"], self.n, sample,
                "raise the population or epsilon"))
        if self.corrupted:
            lines.append(f"  corrupted clients: {_corrupted_phrase(self.corrupted)}")
        return "\n".join(lines)

    @property
    def items(self) -> list[str | int]:
        """The heavy hitters' items, in release order."""
        return [h.item for h in self.heavy_hitters]

    def as_dict(self, views: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; ``views`` includes every party's view (large: a plaintext
        server's view holds every vote)."""
        g = self.guarantee
        out: dict[str, Any] = {
            "mechanism": self.mechanism, "transport": self.transport, "n": self.n,
            "heavy_hitters": [_plain(h.__dict__) for h in self.heavy_hitters],
            "released_prefixes": dict(self.released_prefixes),
            "guarantee": _guarantee_dict(g),
            "guarantee_note": self.guarantee_note,
            "parameters": dict(self.parameters),
            "rounds": [r.__dict__ for r in self.rounds],
            "costs": _costs_dict(self.costs),
            "dropped": self.dropped,
            "central": _guarantee_dict(self.central),
            "input": _plain(self.input),
            "corrupted": _plain(self.corrupted),
        }
        if views:
            out["views"] = _views_list(self.views)
        return out

    def to_table(self, fmt: Literal["csv", "markdown"] = "csv") -> str:
        """The heavy hitters as a table (``item``, then ``count`` and ``estimate`` when
        the mechanism released them: a column that would be empty on every row is left
        out), CSV or Markdown.

        Raises:
            ValueError: an unknown format.
        """
        header = ["item"]
        cols: list[Callable[[HeavyHitter], str]] = [lambda h: str(h.item)]
        if any(h.count is not None for h in self.heavy_hitters):
            header.append("count")
            cols.append(lambda h: "" if h.count is None else str(h.count))
        if any(h.estimate is not None for h in self.heavy_hitters):
            header.append("estimate")
            cols.append(lambda h: "" if h.estimate is None else f"{h.estimate:.1f}")
        rows = [[c(h) for c in cols] for h in self.heavy_hitters]
        return _table(header, rows, fmt, "|---|" + "---:|" * (len(header) - 1))



def _table(header: Sequence[str], rows: Sequence[Sequence[str]], fmt: str,
           rule: str) -> str:
    """``rows`` under ``header`` as CSV or a Markdown table (``rule``: its alignment row).

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return buf.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", rule]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown table format {fmt!r} (csv or markdown)")

def _corrupted_phrase(c: Mapping[str, Any]) -> str:
    """A result's ``corrupted`` section in one line."""
    t = c["totals"]
    text = (f"{c['strategy']}, {t['corrupted_reports']} corrupted reports, {t['counted']} "
            f"counted; target {c['target']!r} released: {c.get('target_released')}")
    if "release_equals_honest" in c:
        text += f"; release equals the honest clients' alone: {c['release_equals_honest']}"
    return text


def _guarantee_dict(g: Any) -> Any:
    """A guarantee object as JSON types, whichever of the guarantee types it is."""
    if g is None:
        return None
    for method in ("to_json", "as_dict"):
        if callable(getattr(g, method, None)):
            return _plain(getattr(g, method)())
    if dataclasses.is_dataclass(g) and not isinstance(g, type):
        return _plain({f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    return _plain(g)


def _plain(x: Any) -> Any:
    """``x`` with numpy values, tuples and mappings turned into JSON types."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


class _Recording(SamplesThroughInner, Transport):
    """Delegates to ``inner`` and keeps every round's views and costs."""

    name = "recording"  # replaced by the inner transport's name on each instance

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        # callers that dispatch on the transport's declarations see the inner ones
        for attr in ("name", "kinds", "anonymous_reports"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))
        self.views: list[PartyViews] = []
        self.costs: list[tuple[float, Cost]] = []
        self.samples: dict[tuple[str, int], Sample] = {}

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        t0 = time.perf_counter()
        result = self.inner.run_round(spec, contributions, rng)
        self.costs.append((time.perf_counter() - t0, result.cost))
        self.views.append(PartyViews(spec.task, spec.round, result.views))
        return result


def _transport(transport: str | Transport, seed: int | None,
               committee_input: str | None = None,
               min_valid_fraction: float | None = None) -> tuple[Transport, str]:
    committee = {k: v for k, v in (("committee_input", committee_input),
                                   ("min_valid_fraction", min_valid_fraction))
                 if v is not None}
    if isinstance(transport, Transport):
        if committee:
            raise StudyError(f"{next(iter(committee))} configures transport='threshold' by "
                             "name; a transport object is used as it was built "
                             "(ThresholdTransport(committee_input=...))")
        return transport, str(getattr(transport, "name", type(transport).__name__))
    from protocol.core.transports import get_transport

    if transport not in ("plain", "secagg", "shuffler", "threshold"):
        raise StudyError(f"unknown transport {transport!r} "
                         "(plain, secagg, shuffler or threshold)")
    if committee and transport != "threshold":
        raise StudyError(f"{next(iter(committee))} applies to transport='threshold', not "
                         f"{transport!r}")
    if committee_input is not None and committee_input not in ("reports", "secagg"):
        raise StudyError(f"committee_input must be 'reports' or 'secagg', got "
                         f"{committee_input!r}")
    if min_valid_fraction is not None and committee_input == "secagg":
        raise StudyError("min_valid_fraction applies to the committee's validated reports "
                         "(committee_input='reports')")
    opts: dict[str, object] = {} if transport == "plain" else {"simulate": seed is not None}
    try:
        return get_transport(transport, **opts, **committee), transport
    except ImportError as exc:
        raise StudyError(f"transport {transport!r} is not available: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise StudyError(f"transport {transport!r}: {exc}") from None


def _array(values: Any, what: str = "values", dtype: Any = None) -> "np.ndarray[Any, Any]":
    """``values`` as a numpy array, or :class:`StudyError` (bytes, a string, ragged or
    mixed lists are not data)."""
    if isinstance(values, (str, bytes)) or values is None:
        raise StudyError(f"{what} must be a sequence with one item per user, got "
                         f"{type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise StudyError(f"{what} must be one number per user: {exc}") from None
    if arr.dtype.kind == "O":
        raise StudyError(f"{what} must be one number (or word) per user, not a mix")
    return arr


def _user_lists(items: Items) -> tuple[list[list[str]], bool]:
    """One list of strings per user, and whether the input had several per user.

    Raises:
        StudyError: not a sequence of strings or of sequences of strings.
    """
    if isinstance(items, np.ndarray):
        if items.ndim != 1:
            raise StudyError("items must be a 1-d array (one item per user)")
        if items.dtype.kind in "iu":
            return [[str(int(v))] for v in items], False
        if items.dtype.kind not in "UO":
            raise StudyError(f"items of dtype {items.dtype} are not words")
        items = items.tolist()
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise StudyError("items must be a list with one item (or one list of items) per user")
    if not items:
        raise StudyError("no users: items is empty")
    if all(isinstance(x, str) for x in items):
        return [[x] for x in items], False  # type: ignore[list-item]
    lists: list[list[str]] = []
    for u, x in enumerate(items):
        if isinstance(x, str) or not isinstance(x, Sequence) \
                or not all(isinstance(w, str) for w in x):
            raise StudyError(f"user {u}: expected a string or a list of strings, got {x!r}")
        lists.append(list(x))
    return lists, True


def _population(items: Items, alphabet: str, on_unencodable: OnUnencodable,
                several_allowed: bool) -> tuple[Any, bool]:
    """The population of ``items``; refuses unencodable items unless told to drop them.

    Raises:
        StudyError: bad items, an unencodable item (``on_unencodable="error"``), or a
            user with no item left.
    """
    from protocol.studies.datasets import DatasetError, from_user_words

    if on_unencodable not in ("error", "drop"):
        raise StudyError("on_unencodable must be 'error' or 'drop'")
    lists, several = _user_lists(items)
    if several and not several_allowed:
        raise StudyError("this mechanism takes exactly one item per user")
    allowed = set(alphabet)
    if on_unencodable == "error":
        for u, ws in enumerate(lists):
            for w in ws:
                if not w or not set(w) <= allowed:
                    bad = sorted(set(w) - allowed)
                    raise StudyError(
                        f"user {u}: item {w!r} " + (f"has characters {''.join(bad)!r} outside "
                                                    "the public alphabet" if w else "is empty")
                        + "; pass alphabet=... with them, or on_unencodable='drop' to drop "
                        "and count such items")
    try:
        pop = from_user_words("items", lists, alphabet, f"{len(lists)} users from the caller")
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    empty = int((pop.occurrences_per_user() == 0).sum())
    if empty:
        raise StudyError(f"{empty} users have no item left after dropping {pop.dropped} "
                         "unencodable items; a user without an item would change the "
                         "theorem (give a larger alphabet)")
    return pop, several


def _rounds_and_costs(rounds: Sequence[Any], seconds: float) -> tuple[tuple[Round, ...], Costs]:
    total = Cost()
    out = []
    for r in rounds:
        total.add(r.cost)
        out.append(Round(int(r.round), int(r.candidates), int(r.sampled), int(r.released),
                         float(r.seconds), int(r.cost.bytes_up), int(r.cost.bytes_down)))
    return tuple(out), Costs(seconds, dict(total.cpu_seconds), total.bytes_up, total.bytes_down)


@_validated
def triehh(items: Items, *, epsilon: float = 4.0, delta: float | None = None,
           transport: str | Transport = "plain", seed: int | None = None,
           max_length: int = 10, alphabet: str = DEFAULT_ALPHABET, unit_size: int = 1,
           release_counts: bool = False, on_unencodable: OnUnencodable = "error",
           progress: ShowProgress = True,
           client_progress: Callable[[int, int, int], None] | None = None,
           corrupt: Any = None, committee_input: str | None = None,
           min_valid_fraction: float | None = None) -> HeavyHitters:
    """TrieHH (Zhu, Kairouz, McMahan, Sun, Li, "Federated Heavy Hitters Discovery with
    Differential Privacy", AISTATS 2020) on the caller's items.

    Args:
        items: one word per user (Theorem 1), or one list of words per user
            (Algorithm 3, Corollary 2).
        epsilon: target epsilon; Corollary 1 chooses theta and gamma.
        delta: target delta (default ``1/n^2``).
        transport: ``plain``, ``secagg``, ``shuffler`` or a transport object.
        seed: reproducible simulation (seeded sampling and transport keys).
        max_length: L, the number of trie levels (rounds).
        alphabet: the public alphabet (default printable ASCII without ``$``).
        unit_size: characters per trie level (1 to 4).
        release_counts: also release each prefix's count (Theorem 1 does not cover it).
        on_unencodable: ``error`` (default) or ``drop`` (counted in ``dropped``).
        progress: ``True`` (default): a tqdm bar on stderr when it is a terminal, with
            the clients served inside each round and the time left for the run;
            ``False``: none; a callable: wraps the iterable of rounds.
        client_progress: ``client_progress(step, done, total)`` inside each secure-
            aggregation session (e.g. ``protocol.cli.output.ClientProgress()``).
        corrupt: simulated corrupted clients: a
            :class:`protocol.core.corruption.CorruptClients` or a short dict
            (``{"clients": 1}`` per round, ``{"users": [3, 17]}``, ``{"share": 0.05}``;
            optional ``strategy``, default ``theta-at-target``, ``target``, default a
            word nobody holds, and ``seed``). The run is then compared with plain TrieHH
            over the honest clients' votes on the same samples: ``result.corrupted``.
        committee_input: ``transport="threshold"`` only: ``reports`` (the default under
            the malicious model: each device's vote secret-shared and validated) or
            ``secagg`` (a secure-aggregation sum: no client input is checked).
        min_valid_fraction: ``transport="threshold"`` with validated reports: a round
            aborts with fewer valid reports than this fraction of its sample (0.5).

    Raises:
        StudyError: bad items or parameters, a target outside Corollary 1, corrupted
            clients the transport cannot simulate, or a transport that aborts a round.
    """
    from protocol.studies.corrupted import corrupt_clients
    from protocol.studies.runners import triehh as runner

    c = corrupt_clients(corrupt)
    pop, several = _population(items, alphabet, on_unencodable, True)
    tr, name = _transport(transport, seed, committee_input, min_valid_fraction)
    from protocol.studies.corrupted import corrupt_from_transport

    c = corrupt_from_transport(tr, c)
    opts = runner.TrieHHOptions(epsilon=epsilon, delta=delta, max_length=max_length,
                                multi_word=several, unit_size=unit_size, seed=seed,
                                alphabet=alphabet, transport=name,
                                release_counts=release_counts)
    prep, rng = runner.prepare(opts, population=pop)
    rec = _Recording(tr)
    aimed = runner.aim(prep, c, tr)
    t0 = time.perf_counter()
    if client_progress is not None and hasattr(tr, "client_progress"):
        tr.client_progress = client_progress
    corrupted = None
    with _showing(progress, int(prep.config.max_levels), "TrieHH rounds", tr) as shown:
        if aimed is None:
            res = runner.run_once(prep, rec, rng, shown)
        else:
            res, corrupted = runner.run_corrupted(prep, rec, rng, aimed, shown)
    seconds = time.perf_counter() - t0
    rounds, costs = _rounds_and_costs(res.rounds, seconds)
    report = _input(pop, int(prep.config.max_levels) * unit_size)
    if aimed is not None:
        report["corrupt_target"] = aimed.input_note()
    return HeavyHitters(
        mechanism="triehh", transport=name, n=prep.n,
        heavy_hitters=tuple(HeavyHitter(w, c) for w, c in res.heavy_hitters.items()),
        released_prefixes=dict(res.prefixes), guarantee=res.guarantee,
        guarantee_note=res.guarantee_note,
        parameters={"theta": int(prep.config.theta), "gamma": float(prep.config.gamma),
                    "m": int(res.m), "L": int(prep.config.max_levels)},
        rounds=rounds, costs=costs, views=tuple(rec.views), dropped=int(pop.dropped),
        input=report, corrupted=corrupted)


@_validated
def poplar1(items: Sequence[str] | np.ndarray[Any, Any], *, k: int = 10,
            threshold: int | None = None, max_length: int = 10,
            alphabet: str = DEFAULT_ALPHABET, seed: int | None = None,
            on_unencodable: OnUnencodable = "error",
            progress: ShowProgress = True, mode: Literal["plain", "sampled"] = "plain",
            epsilon: float | None = None, delta: float | None = None) -> HeavyHitters:
    """Poplar1 heavy hitters (Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Lightweight
    Techniques for Private Heavy Hitters", IEEE S&P 2021; the Poplar1 VDAF of
    draft-irtf-cfrg-vdaf-20) on the caller's items: two aggregators, the level-by-level
    prefix search (:mod:`protocol.studies.runners.poplar1`).

    Args:
        items: one word per user.
        k: K, used only by the default threshold.
        threshold: clients a prefix needs to be extended (default
            ``max(2, ceil(n / (20 K)))``).
        max_length: characters of a word kept (words are cut, as TrieHH's ``L``).
        alphabet: the public alphabet (the encoding is TrieHH's: index + 1 per
            character, 0 pads).
        seed: reproducible simulation (the clients' randomness and the verify key from a
            seeded source); ``None``: from the OS.
        on_unencodable: ``error`` (default) or ``drop``.
        progress: ``True`` (default): a bar on a terminal (the levels); ``False``:
            nothing; or the caller's own wrapper of the iterable of levels (of the
            rounds in the sampled mode).
        mode: ``plain`` (default: the draft's search over every report at
            ``threshold``, no differential privacy) or ``sampled``: TrieHH's release
            computed by the two aggregators, each character round over a fresh uniform
            sample of ``m`` clients with TrieHH's threshold ``theta`` (Corollary 1 for
            ``epsilon``, ``delta``), so the released trie carries TrieHH's Theorem 1
            guarantee (docs/poplar1.md).
        epsilon: the sampled mode's central target epsilon (required there).
        delta: the sampled mode's target delta (default ``1/n^2``).

    Returns:
        The heavy hitters. Plain: with their counts; ``guarantee`` is ``None``
        (Poplar1 has no differential privacy by itself; ``guarantee_note`` says what it
        hides); one round per level, whose views are what each aggregator learnt
        (every candidate's count, the reports it rejected). Sampled: membership only
        (counts ``None``), the other released prefixes in ``released_prefixes``,
        ``guarantee`` TrieHH's Theorem 1 at ``theta``, ``m``, ``n``, ``L``; one round
        per character, whose views hold each aggregator's ``sampled_clients`` and, per
        bit level, every candidate's count over the sample.

    Raises:
        StudyError: bad items or parameters, too many candidates at a level; in the
            sampled mode a missing ``epsilon``, a ``threshold`` (theta is TrieHH's), a
            target outside Corollary 1, or too few users (the message gives the users
            and the smallest population the target needs).
    """
    from protocol.studies.runners import poplar1 as runner

    if k < 1:
        raise StudyError("k must be >= 1")
    if mode not in ("plain", "sampled"):
        raise StudyError(f"mode must be 'plain' or 'sampled', got {mode!r}")
    if mode == "plain" and (epsilon is not None or delta is not None):
        raise StudyError("epsilon and delta apply to mode='sampled' only (the plain mode "
                         "has no differential privacy; it takes threshold=)")
    if mode == "sampled":
        if epsilon is None:
            raise StudyError("mode='sampled' needs epsilon= (TrieHH's central target; "
                             "delta defaults to 1/n^2)")
        if threshold is not None:
            raise StudyError("threshold applies to mode='plain' only (the sampled mode "
                             "takes TrieHH's theta for epsilon and delta)")
        pop, _ = _population(items, alphabet, on_unencodable, False)
        return _poplar1_sampled(pop.compact(), epsilon, delta, max_length, seed, progress)
    pop, _ = _population(items, alphabet, on_unencodable, False)
    pop = pop.compact()
    t = runner.default_threshold(pop.n, k) if threshold is None else int(threshold)
    meas = runner.encode_words(pop.vocabulary, pop.alphabet, max_length)[pop.items]
    with _showing(progress, None, "Poplar1 levels", None) as shown:
        res = runner.heavy_hitters_bits(meas, t, seed=seed, progress=shown)
    p0, p1 = res.parties
    rounds = tuple(
        Round(int(lv["level"]) + 1, int(lv["candidates"]), pop.n, int(lv["passing"]),
              float(lv["seconds"]), pop.n * res.upload_bytes_per_client if i == 0 else 0, 0)
        for i, lv in enumerate(res.levels))
    views = tuple(PartyViews("poplar1", int(v0["level"]) + 1,
                             {"aggregator 0": v0, "aggregator 1": v1})
                  for v0, v1 in zip(p0.view, p1.view))
    hh = sorted(((runner.decode_bits(s, pop.alphabet), int(c)) for s, c in res.heavy.items()),
                key=lambda ic: (-ic[1], ic[0]))
    return HeavyHitters(
        mechanism="poplar1", transport="two aggregators", n=pop.n,
        heavy_hitters=tuple(HeavyHitter(w, c) for w, c in hh), released_prefixes={},
        guarantee=None, guarantee_note=runner.privacy_statement()["note"],
        parameters={"threshold": t, "bits": res.bits, "levels": len(res.levels),
                    "L": max_length},
        rounds=rounds,
        costs=Costs(res.seconds, {"clients": res.client_seconds, "aggregator 0": p0.cpu_seconds,
                                  "aggregator 1": p1.cpu_seconds},
                    pop.n * res.upload_bytes_per_client, 0),
        views=views, dropped=int(pop.dropped), input=_input(pop, max_length))


def _poplar1_sampled(pop: Any, epsilon: float, delta: float | None,
                     max_length: int, seed: int | None, progress: ShowProgress) -> HeavyHitters:
    """:func:`poplar1` in the sampled mode
    (:func:`protocol.studies.runners.poplar1.run_poplar1_sampled`)."""
    from protocol.studies.runners import poplar1 as runner

    with _showing(progress, int(max_length), "Poplar1 rounds", None) as shown:
        params, out = runner.sampled_run(pop, epsilon=epsilon, delta=delta,
                                         max_length=max_length, seed=seed, progress=shown)
    alpha = pop.alphabet
    p0, p1 = out.parties

    def text(codes: Sequence[int]) -> str:
        return "".join(alpha[c - 1] for c in codes if c)

    rounds = tuple(
        Round(int(r["round"]), int(sum(lv["candidates"] for lv in r["levels"])),
              int(r["sampled"]), int(r["released"]), float(r["seconds"]),
              int(r["new_uploads"]) * out.upload_bytes_per_client, 0)
        for r in out.rounds)
    views = tuple(
        PartyViews("poplar1", int(r["round"]), {
            f"aggregator {p.agg_id}": {
                "sampled_clients": out.samples[i],
                "levels": [v for v in p.view if v["round"] == r["round"]]}
            for p in (p0, p1)})
        for i, r in enumerate(out.rounds))
    # the released prefixes that are not words (TrieHH's ``prefixes``)
    prefixes = {text(c): None for i, rel in enumerate(out.released) for c in rel
                if c[-1] != 0 and i + 1 < out.max_length}
    return HeavyHitters(
        mechanism="poplar1", transport="two aggregators (sampled)", n=pop.n,
        heavy_hitters=tuple(HeavyHitter(text(w)) for w in out.words),
        released_prefixes=prefixes, guarantee=params.guarantee, guarantee_note="",
        parameters={"theta": int(params.theta), "gamma": float(params.gamma),
                    "m": int(params.m), "L": int(max_length), "bits": int(out.bits),
                    "levels": len(p0.view)},
        rounds=rounds,
        costs=Costs(out.seconds, {"clients": out.client_seconds,
                                  "aggregator 0": p0.cpu_seconds,
                                  "aggregator 1": p1.cpu_seconds,
                                  "collector": out.collector_seconds},
                    out.uploads * out.upload_bytes_per_client, 0),
        views=views, dropped=int(pop.dropped), input=_input(pop, max_length))


@_validated
def triehhpp(items: Items, *, epsilon: float = 1.0, delta: float | None = None,
             transport: str | Transport = "plain", seed: int | None = None,
             max_length: int = 10, alphabet: str = DEFAULT_ALPHABET,
             theta: int | None = None, bound: Literal["paper", "eq3"] = "paper",
             on_unencodable: OnUnencodable = "error",
             progress: ShowProgress = True, corrupt: Any = None,
             committee_input: str | None = None,
             min_valid_fraction: float | None = None) -> HeavyHitters:
    """TrieHH++ (Cormode, "Federated Heavy Hitters Revisited", 2021) on the caller's items: a Poisson sample of the users
    votes on each trie level, counts at or above theta are released with an unbiased
    estimate of the number of holders.

    Args:
        items: one word per user.
        epsilon: target epsilon (basic composition over the levels).
        delta: target delta (default ``1/n^2``).
        transport: ``plain``, ``secagg``, ``shuffler`` or a transport object.
        seed: reproducible simulation.
        max_length: L, the number of trie levels.
        alphabet: the public alphabet.
        theta: fix the threshold instead of the smallest one meeting delta.
        bound: the per-level epsilon: ``paper`` (Lemma 3 eq. (4), needs a per-level
            epsilon of at most ln(10/9)) or ``eq3`` (the tight ratio of eq. (3)).
        on_unencodable: ``error`` (default) or ``drop``.
        progress: ``True`` (default): a bar on a terminal (levels, clients inside a
            level, time left); ``False``: none; a callable: wraps the levels.
        corrupt, committee_input, min_valid_fraction: as for :func:`triehh`;
            ``result.corrupted`` holds per level and in all what the corrupted clients
            achieved and whether their target was released (TrieHH++'s levels name
            no sample: ``users`` and ``share`` index each level's contacted clients).

    Raises:
        StudyError: bad items, a failing condition of the theorem (the message names
            it; a small population often cannot reach a small epsilon), corrupted
            clients the transport cannot simulate, or a transport that aborts a round.
    """
    from mechanisms.prefix_tree import PrefixTreeError, UnitAlphabet
    from mechanisms.triehhpp import TrieHHPPParams, run_triehhpp, spawn_rngs
    from protocol.core.contract import AggregationAborted
    from protocol.studies.corrupted import (
        aim_word, armed, check_transport, corrupt_clients, corrupt_from_transport,
        records_since,
    )
    from protocol.studies.runners import triehhpp as runner

    who = corrupt_clients(corrupt)
    pop, _ = _population(items, alphabet, on_unencodable, False)
    tr, name = _transport(transport, seed, committee_input, min_valid_fraction)
    who = corrupt_from_transport(tr, who)
    check_transport(who, tr, name)
    target = runner.PrivacyTarget(epsilon=epsilon, delta=delta, max_length=max_length,
                                  theta=theta, bound=bound)
    from protocol.studies.datasets import users_left

    sol = runner.solve(target, pop.n, False, left=users_left(pop))
    params = TrieHHPPParams(pop.n, float(sol.m), sol.theta, max_length)
    sr, trng = spawn_rngs(seed)
    rec = _Recording(tr)
    t0 = time.perf_counter()
    aimed = None
    try:
        alpha = UnitAlphabet(pop.alphabet)
        um = alpha.encode(list(pop.vocabulary), max_length)[pop.items]
        if who is not None:
            aimed = aim_word(who, pop.vocabulary, alpha.symbols, max_length, alpha.eos,
                             pop.n)
        with armed(tr, None if aimed is None else aimed.clients) as start, \
                _showing(progress, max_length, "TrieHH++ levels", tr) as shown:
            res = run_triehhpp(um, alpha.num_units, alpha.labels, params, rec, sr, trng,
                               terminal=alpha.terminal, progress=shown)
            records = records_since(tr, start)
        hh = res.heavy_hitters(strip=alpha.eos)
    except (PrefixTreeError, ValueError) as exc:
        raise StudyError(str(exc)) from None
    except AggregationAborted as exc:
        raise StudyError(f"the {name} transport aborted a round: {exc}") from None
    seconds = time.perf_counter() - t0
    report = _input(pop, max_length - 1)
    corrupted = None
    if aimed is not None:
        report["corrupt_target"] = aimed.input_note()
        corrupted = runner.corrupted_section(aimed, records, [e.label for e in hh])
    if len(rec.costs) != len(res.levels):  # one transport round per level
        raise StudyError(f"{len(res.levels)} levels but {len(rec.costs)} transport rounds")
    total = Cost()
    for _, c in rec.costs:
        total.add(c)
    levels = tuple(Round(int(s.level), int(s.candidates), int(s.contacted), int(s.released),
                         float(sec), int(c.bytes_up), int(c.bytes_down))
                   for s, (sec, c) in zip(res.levels, rec.costs))
    prefixes: dict[str, int | None] = {e.label: int(e.count) for e in res.node_estimates()
                                       if not e.terminal}
    return HeavyHitters(
        mechanism="triehhpp", transport=name, n=pop.n,
        heavy_hitters=tuple(HeavyHitter(e.label, int(e.count), float(e.estimate)) for e in hh),
        released_prefixes=prefixes, guarantee=sol.guarantee, guarantee_note="",
        parameters={"theta": int(sol.theta), "m": float(sol.m), "L": max_length,
                    "rate": float(sol.rate)},
        rounds=levels, costs=Costs(seconds, dict(total.cpu_seconds), total.bytes_up,
                                  total.bytes_down), views=tuple(rec.views),
        dropped=int(pop.dropped), input=report, corrupted=corrupted)


@dataclass(frozen=True)
class Frequencies(_Exported):
    """The result of a local-DP frequency oracle.

    Attributes:
        oracle: ``grr``, ``oue``, ``olh`` or ``aon``.
        transport: ``none`` (estimated in process) or the transport's name.
        n: number of users (reports).
        estimates: the unbiased estimated frequency of every item of the domain, in
            the order of ``domain``.
        std: the oracle's exact standard deviation of each estimate, evaluated at the
            estimate clipped to ``[0, 1]`` (the true frequency is unknown).
        guarantee: the local guarantee of one report (the oracle's own object:
            ``epsilon``, ``delta``, ``effective_epsilon``, ``source``).
        central: the shuffler's amplified central guarantee (a
            :class:`mechanisms.privacy.PrivacyGuarantee`), else ``None``.
        costs: totals of the transport (zero in process).
        views: what each party of the transport saw, one entry per round.
        domain: the items, as they came in (``0..domain_size-1`` for integer items,
            the public list of words for words).
        input: what the call chose for the caller: with ``domain_size`` (integers) or
            ``domain`` (words) not given, ``domain_from_data`` is true and
            ``domain_chosen`` says how the domain was read off the items (a
            :class:`protocol.studies.errors.ChoiceWarning` said the same); else empty.
    """

    oracle: str
    transport: str
    n: int
    estimates: tuple[float, ...]
    std: tuple[float, ...]
    guarantee: Any
    central: Any
    costs: Costs
    views: tuple[PartyViews, ...] = field(repr=False)
    domain: tuple[Any, ...] = field(default=(), repr=False)
    input: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def _label(self, i: int) -> Any:
        return self.domain[i] if self.domain else int(i)

    def top(self, k: int = 10) -> list[tuple[Any, float]]:
        """The ``k`` items with the largest estimates, as ``(item, estimate)`` (the item
        in the form it came in)."""
        order = np.argsort(-np.asarray(self.estimates), kind="stable")[: max(0, k)]
        return [(self._label(int(i)), float(self.estimates[i])) for i in order]

    def _headline(self) -> str:
        lines = [f"{self.oracle} over {self.transport}: estimates for {len(self.estimates):,} "
                 f"items from {self.n:,} users",
                 f"  guarantee: {_guarantee_phrase(self.guarantee)}"]
        if self.central is not None:
            lines.append(f"  after shuffling: {_guarantee_phrase(self.central)}")
        lines.append("  top: " + _first([f"{i!r} {e:.4f}" for i, e in self.top(5)]))
        return "\n".join(lines)

    def as_dict(self, views: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; ``views`` includes every party's view."""
        out: dict[str, Any] = {
            "oracle": self.oracle, "transport": self.transport, "n": self.n,
            "estimates": list(self.estimates), "std": list(self.std),
            "guarantee": _guarantee_dict(self.guarantee),
            "central": _guarantee_dict(self.central),
            "costs": _costs_dict(self.costs),
            "domain": _plain(list(self.domain)) if self.domain else None,
            "input": _plain(self.input),
        }
        if views:
            out["views"] = _views_list(self.views)
        return out

    def to_table(self, k: int | None = None, fmt: Literal["csv", "markdown"] = "csv") -> str:
        """``item,estimate,std`` for the ``k`` largest estimates (all items by default),
        as CSV or Markdown.

        Raises:
            ValueError: an unknown format.
        """
        order = np.argsort(-np.asarray(self.estimates), kind="stable")
        order = order[: len(order) if k is None else max(0, k)]
        rows = [(str(self._label(int(i))), f"{self.estimates[i]:.6g}", f"{self.std[i]:.3g}")
                for i in order]
        header = ("item", "estimate", "std")
        return _table(header, rows, fmt, "|---:|---:|---:|")


@_validated
def frequencies(values: Sequence[int] | Sequence[str] | np.ndarray[Any, Any], *,
                oracle: str = "olh", epsilon: float = 2.0, domain_size: int | None = None,
                domain: Sequence[str] | None = None,
                transport: str | Transport | None = None, seed: int | None = None,
                delta: float | None = None, progress: ShowProgress = True) -> Frequencies:
    """A local-DP frequency oracle (GRR, OUE, OLH or All-or-Nothing; see
    ``docs/ldp.md`` for each one's source) on the caller's integer items.

    Args:
        values: one item per user: integers in ``[0, domain_size)``, or words of the
            public ``domain``.
        oracle: ``grr``, ``oue``, ``olh`` or ``aon``.
        epsilon: the local epsilon of each report.
        domain_size: the public domain size (default: the largest value + 1, read off
            the data: a :class:`protocol.studies.errors.ChoiceWarning` and
            ``result.input`` say so -- pass it explicitly, as a public domain should
            be).
        domain: for words, the public list of items (default: the distinct words
            given, sorted, with a warning: a domain read off the data depends on every
            user's data). A word outside it is an error.
        transport: ``None`` estimates in process; ``plain``, ``secagg``, ``shuffler``
            or a transport object carries the reports (the shuffler adds the
            amplified central guarantee in ``central``).
        seed: reproducible simulation (without it, the OS's randomness).
        delta: central delta for the shuffler's guarantee (default ``1/n^2``).
        progress: ``True`` (default): the clients a transport serves, on a terminal;
            ``False``: none.

    Raises:
        StudyError: values that are not integers in the domain, bad oracle
            parameters, or a transport failure.
    """
    from mechanisms.fo import OracleInputError, ReportError, make_oracle
    from protocol.core.contract import AggregationAborted
    from protocol.studies.ldp_runner import LDPTransportError, run_ldp

    v = _array(values)
    labels: tuple[Any, ...] = ()
    chosen: dict[str, Any] = {}
    if v.ndim == 1 and v.size and v.dtype.kind == "U":
        if domain_size is not None:
            raise StudyError("domain_size= is the size of an integer domain; word items "
                             "take the public words as domain=[...]")
        v, labels, chosen = _indexed(v, domain)
        domain_size = len(labels)
    elif domain is not None:
        raise StudyError("domain= names the public words of word items; integer items "
                         "take domain_size=")
    if v.ndim != 1 or v.size == 0 or not np.issubdtype(v.dtype, np.integer):
        raise StudyError("values must be a non-empty 1-d sequence of integers or words")
    if domain_size is None and v.min() >= 0:
        chosen = {"domain": int(v.max()) + 1, "domain_from_data": True,
                  "domain_chosen": f"[0, {int(v.max()) + 1}): the largest value given + 1 "
                                   "(no domain_size=)"}
        _warn_choice(f"the domain [0, {int(v.max()) + 1}) was read off the data (the "
                     "largest value + 1); it depends on every user's data: pass the "
                     "public domain_size=")
    d = int(v.max()) + 1 if domain_size is None else int(domain_size)
    if v.min() < 0 or v.max() >= d:
        bad = int(v[(v < 0) | (v >= d)][0])
        raise StudyError(f"value {bad} is outside the domain [0, {d})")
    rng = np.random.default_rng(seed)
    try:
        orc = make_oracle(oracle, epsilon, d)
    except (OracleInputError, ValueError) as exc:
        raise StudyError(str(exc)) from None
    t0 = time.perf_counter()
    reports = orc.randomize(v.astype(np.int64), rng)
    central: Mapping[str, Any] | None = None
    views: tuple[PartyViews, ...] = ()
    if transport is None:
        est = np.asarray(orc.estimate(reports), dtype=np.float64)
        name, cost = "none", Cost()
    else:
        tr, name = _transport(transport, seed)
        rec = _Recording(tr)
        try:
            with _showing(progress, None, f"{oracle.upper()} over {name}", tr):
                carried = run_ldp(orc, reports, rec, rng, delta=delta)
        except (LDPTransportError, AggregationAborted, ReportError) as exc:
            raise StudyError(str(exc)) from None
        est = np.asarray(carried.estimates, dtype=np.float64)
        central = _central(orc.privacy(), carried.central)
        views, cost = tuple(rec.views), carried.cost
    seconds = time.perf_counter() - t0
    std = np.sqrt(np.asarray(orc.variance(int(v.size), np.clip(est, 0.0, 1.0)),
                             dtype=np.float64))
    return Frequencies(
        oracle=oracle, transport=name, n=int(v.size),
        estimates=tuple(float(x) for x in est[:d]), std=tuple(float(x) for x in std[:d]),
        guarantee=orc.privacy(), central=central,
        costs=Costs(seconds, dict(cost.cpu_seconds), cost.bytes_up, cost.bytes_down),
        views=views, domain=labels, input=chosen)


def _central(local: Any, c: Mapping[str, Any] | None) -> Any:
    """The amplified central guarantee (a ``PrivacyGuarantee``) from the shuffler
    path's summary dict, or ``None``."""
    if not c:
        return None
    from mechanisms.privacy import shuffled

    return shuffled(local, int(c["n"]), float(c["epsilon"]), float(c["delta"]),
                    str(c["bound"]), str(c["source"]), c.get("note"))


def _indexed(words: "np.ndarray[Any, Any]", domain: Sequence[str] | None
             ) -> tuple["np.ndarray[Any, Any]", tuple[str, ...], dict[str, Any]]:
    """Word items as indices into the public ``domain`` (default: the distinct words,
    sorted, with a :class:`protocol.studies.errors.ChoiceWarning`), and the record of
    that choice (empty when ``domain`` was given).

    Raises:
        StudyError: a word outside ``domain``, or a domain with repeats.
    """
    chosen: dict[str, Any] = {}
    if domain is None:
        labels = tuple(sorted(set(words.tolist())))
        chosen = {"domain": len(labels), "domain_from_data": True,
                  "domain_chosen": f"the {len(labels)} distinct words given, sorted (no "
                                   "domain=)"}
        _warn_choice("the domain was read off the data (the distinct words given); it "
                     "depends on every user's data: pass the public domain=[...]")
    else:
        labels = tuple(str(w) for w in domain)
        if len(set(labels)) != len(labels):
            raise StudyError("domain lists a word twice")
    index = {w: i for i, w in enumerate(labels)}
    try:
        return np.array([index[w] for w in words.tolist()], dtype=np.int64), labels, chosen
    except KeyError as exc:
        raise StudyError(f"item {exc.args[0]!r} is not in the public domain") from None


@_validated
def pem(values: Sequence[int] | Sequence[str] | np.ndarray[Any, Any], *, bits: int = 32,
        k: int = 10, epsilon: float = 4.0, oracle: str = "grr",
        transport: str | Transport = "plain", seed: int | None = None,
        truncate: bool = False, progress: ShowProgress = True) -> HeavyHitters:
    """PEM (Wang, Li, Jha, "Locally Differentially Private Heavy Hitter Identification",
    IEEE TDSC 2019) on the caller's ``bits``-bit integer items: users split into groups,
    each group reports one longer prefix with an epsilon-LDP frequency oracle, the top
    prefixes are extended level by level; the top ``k`` items of the last level are
    released with their estimated counts (``estimate``; ``count`` is ``None``: PEM
    releases estimates, not counts).

    Args:
        values: one item per user: unsigned integers below ``2**bits``, or ASCII words
            (each one's ``bits / 8`` bytes, zero-padded, as the item; heavy hitters
            come back as words).
        bits: item length.
        k: number of heavy hitters.
        epsilon: the local epsilon of each user's one report.
        oracle: ``grr``, ``oue``, ``olh`` or ``aon``.
        transport: carries each level's reports (``plain``, ``shuffler``: reports;
            ``secagg``: support vectors) or a transport object.
        seed: reproducible simulation.
        truncate: accept words longer than ``bits / 8`` bytes by keeping their first
            ``bits / 8`` (counted in ``input["truncated"]``); else such a word is an
            error.

    Raises:
        StudyError: items that are not ``bits``-bit unsigned integers, bad parameters,
            reports the transport cannot carry, or an aborted level.
    """
    from mechanisms.pem import pem as run_pem
    from mechanisms.pem import pem_privacy
    from protocol.core.contract import AggregationAborted

    v = _array(values)
    words = v.ndim == 1 and v.size > 0 and v.dtype.kind == "U"
    report: dict[str, Any] = {}
    if words:
        v, report = _word_items(v, bits, truncate)
    if v.ndim != 1 or v.size == 0 or not np.issubdtype(v.dtype, np.integer):
        raise StudyError("values must be a non-empty 1-d sequence of integers or words")
    if v.min() < 0 or (bits < 64 and int(v.max()) >= 1 << bits):
        bad = int(v[(v < 0) | (v >= (1 << bits))][0]) if bits < 64 else int(v.min())
        raise StudyError(f"value {bad} is not a {bits}-bit unsigned integer")
    tr, name = _transport(transport, seed)
    rec = _Recording(tr)
    t0 = time.perf_counter()
    try:
        with _showing(progress, None, f"PEM over {name}", tr):
            res = run_pem(v.astype(np.uint64), bits, k, epsilon, oracle=oracle,
                          rng=np.random.default_rng(seed), transport=rec)
        guarantee = pem_privacy(epsilon, oracle)
    except AggregationAborted as exc:
        raise StudyError(f"the {name} transport aborted a level: {exc}") from None
    except ValueError as exc:  # FederatedError and the oracles' input errors
        raise StudyError(str(exc)) from None
    seconds = time.perf_counter() - t0
    total = Cost()
    rounds = []
    lengths, ext = list(res.lengths), list(res.extension)
    for h, (sec, c) in enumerate(rec.costs):
        total.add(c)
        cand = (1 << lengths[0]) if h == 0 else \
            (ext[h - 1] if h - 1 < len(ext) else k) << (lengths[h] - lengths[h - 1])
        kept = min(ext[h] if h < len(ext) else len(res.heavy_hitters), cand)
        rounds.append(Round(h + 1, int(cand), int(res.group_sizes[h]), int(kept), float(sec),
                            int(c.bytes_up), int(c.bytes_down)))
    def label(x: Any) -> str | int:
        if not words:
            return int(x)
        return int(x).to_bytes(bits // 8, "big").rstrip(b"\0").decode("ascii", "replace")

    return HeavyHitters(
        mechanism="pem", transport=name, n=int(v.size), input=report,
        heavy_hitters=tuple(HeavyHitter(label(i), None, float(c))
                            for i, c in zip(res.heavy_hitters, res.counts)),
        released_prefixes={}, guarantee=guarantee, guarantee_note="",
        parameters={"bits": bits, "k": k, "levels": len(lengths)},
        rounds=tuple(rounds), costs=Costs(seconds, dict(total.cpu_seconds), total.bytes_up,
                                          total.bytes_down),
        views=tuple(rec.views))


def _input(pop: Any, max_chars: int) -> dict[str, Any]:
    """What the run did to the caller's items (the alphabet, items dropped, words too
    long to be released whole): :func:`protocol.studies.datasets.input_report`."""
    from protocol.studies.datasets import input_report

    out = input_report(pop, max_chars)
    out["alphabet_chosen"] = "given (alphabet=)"
    return out


def _sfp_input(pop: Any, word_of_user: Any, length: int) -> dict[str, Any]:
    """How many users' words SFP cut to its ``length`` characters."""
    long = np.fromiter((len(w) > length for w in pop.vocabulary), dtype=bool,
                       count=len(pop.vocabulary))
    held = np.asarray(word_of_user)
    cut = int(long[held[held >= 0]].sum()) if long.any() else 0
    if not cut:
        return {}
    return {"truncated": {"users": cut, "max_characters": length,
                          "what": f"SFP sees only their first {length} characters"}}


def _word_items(words: "np.ndarray[Any, Any]", bits: int, truncate: bool
                ) -> tuple["np.ndarray[Any, Any]", dict[str, Any]]:
    """ASCII words as ``bits``-bit items (their first ``bits / 8`` bytes, zero-padded)
    and what was truncated.

    Raises:
        StudyError: ``bits`` not a multiple of 8, a non-ASCII or empty word, or a
            longer word without ``truncate``.
    """
    if bits % 8:
        raise StudyError(f"word items need bits as a multiple of 8, got {bits}")
    nbytes = bits // 8
    raw = []
    for w in words.tolist():
        try:
            b = w.encode("ascii")
        except UnicodeEncodeError:
            raise StudyError(f"item {w!r} is not ASCII (word items are bytes)") from None
        if not b or b"\0" in b:
            raise StudyError(f"item {w!r} is empty or holds a NUL byte")
        raw.append(b)
    long = [b for b in raw if len(b) > nbytes]
    if long and not truncate:
        raise StudyError(f"item {long[0].decode()!r} is longer than {nbytes} bytes "
                         f"(bits={bits}); pass truncate=True to keep the first {nbytes}, "
                         "or raise bits")
    report: dict[str, Any] = {}
    if long:
        report["truncated"] = {"users": len(long), "max_characters": nbytes,
                               "what": f"only their first {nbytes} bytes were used"}
    codes = np.array([int.from_bytes(b[:nbytes].ljust(nbytes, b"\0"), "big") for b in raw],
                     dtype=np.uint64)
    return codes, report


def _carried(rec: _Recording, seconds: float, n: int, candidates: Sequence[int],
             released: Sequence[int]) -> tuple[tuple[Round, ...], Costs]:
    """One :class:`Round` per transport round ``rec`` carried, with its cost."""
    total = Cost()
    rounds = []
    for h, (sec, c) in enumerate(rec.costs):
        total.add(c)
        rounds.append(Round(h + 1, int(candidates[h]) if h < len(candidates) else 0, n,
                            int(released[h]) if h < len(released) else 0, float(sec),
                            int(c.bytes_up), int(c.bytes_down)))
    return tuple(rounds), Costs(seconds, dict(total.cpu_seconds), total.bytes_up,
                                total.bytes_down)


@_validated
def sfp(items: Sequence[str] | np.ndarray[Any, Any], *, epsilon: float = 4.0,
        word_epsilon: float = 0.0, transport: str | Transport = "shuffler",
        seed: int | None = None, T: int = 20, k: int = 2048, m: int = 1024,
        alphabet: str = SFP_ALPHABET, hash_filter: bool = False,
        delta: float | None = None, progress: ShowProgress = True) -> HeavyHitters:
    """Apple's Sequence Fragment Puzzle (Apple Differential Privacy Team, "Learning with
    Privacy at Scale", 2017, Appendix C) on the caller's words: each user sends one
    Count-Mean-Sketch report of a random fragment of her word (and, with
    ``word_epsilon > 0``, one of the whole word); the server assembles words from the
    top ``T`` fragments per position. Heavy hitters carry the sketch's estimate
    (``estimate``; ``count`` is ``None``).

    Args:
        items: one word per user (at most 10 characters are kept, the paper's length;
            how many users' words were cut is in ``input["truncated"]``).
        epsilon: the local epsilon of the fragment report.
        word_epsilon: the local epsilon of the word report (0: none, the discovery-only
            setting of the TrieHH paper's comparison).
        transport: ``shuffler`` (default: the reports reach the server as an anonymous
            multiset, and ``central`` states the amplified
            central epsilon), ``plain``, or a transport object. ``secagg`` carries
            sketch vectors and is feasible only for tiny ``k x m``.
        seed: reproducible simulation.
        T: fragments kept per position; k, m: the sketch's hash functions and buckets.
        alphabet: the public alphabet (default :data:`SFP_ALPHABET`: lower-case
            letters, digits and the apostrophe); ``10 x bits per character`` must fit
            in 64 bits. It is public: never derive it from the users' words.
        hash_filter: drop assembled words whose own hash is not their bucket (not in
            Appendix C).
        delta: central delta of the amplified guarantee (default ``1/n^2``).

    Raises:
        StudyError: bad items or parameters, a character outside ``alphabet``, or a
            transport that cannot carry the reports.
    """
    from protocol.studies.ldp_runner import shuffled_guarantee
    from protocol.studies.runners.sfp import discover_words, users_words

    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, np.ndarray)):
        raise StudyError("items must be a list with one word per user")
    words = [w for w in (items.tolist() if isinstance(items, np.ndarray) else items)]
    if any(not isinstance(w, str) for w in words):
        bad = next(w for w in words if not isinstance(w, str))
        raise StudyError(f"items must be words (strings), got {bad!r}"[:120])
    if not words:
        raise StudyError("items must be a non-empty list with one word per user")
    pop, _ = _population(words, alphabet, "error", False)
    tr, name = _transport(transport, seed)
    rec = _Recording(tr)
    t0 = time.perf_counter()
    word_of_user = users_words(pop)
    with _showing(progress, None, f"SFP over {name}", tr):
        machine, res, _, _, anonymous = discover_words(
            pop, word_of_user, epsilon, np.random.default_rng(seed),
            word_epsilon=word_epsilon, T=T, k=k, m=m, transport=rec, hash_filter=hash_filter)
    seconds = time.perf_counter() - t0
    n = int(word_of_user.shape[0])
    rounds, costs = _carried(rec, seconds, n, [len(machine.positions)], [len(res.words)])
    return HeavyHitters(
        mechanism="sfp", transport=name, n=n,
        heavy_hitters=tuple(HeavyHitter(w, None, float(c))
                            for w, c in zip(res.words, res.counts)),
        released_prefixes={}, guarantee=machine.privacy(),
        central=_central(machine.privacy(), shuffled_guarantee(
            n, machine.privacy().epsilon, delta, "fmt23_numerical",
            local=machine.privacy())) if anonymous and n >= 2 else None,
        input=_sfp_input(pop, word_of_user, int(machine.length)),
        guarantee_note="" if anonymous else "reports not shuffled: local epsilon only",
        parameters={"T": T, "k": k, "m": m, "length": machine.length,
                    "epsilon_fragment": epsilon, "epsilon_word": word_epsilon},
        rounds=rounds, costs=costs, views=tuple(rec.views))


@_validated
def federated(parties: Mapping[str, Sequence[int] | Sequence[str] | np.ndarray[Any, Any]],
              *, mechanism: Literal["taps", "tap", "fedpem", "gtf"] = "taps",
              epsilon: float = 4.0, k: int = 10, oracle: str = "grr", levels: int = 24,
              transport: str | Transport = "plain", seed: int | None = None,
              truncate: bool = False, progress: ShowProgress = True) -> HeavyHitters:
    """Federated heavy hitters under local DP (Zhang, Ye, Hu, "Federated Heavy Hitter
    Analytics with Local Differential Privacy"): TAPS, TAP, or the FedPEM and GTF
    baselines, over parties that each hold their users' items.

    Args:
        parties: party name -> one item per user: 48-bit unsigned integers, or words
            (their first 6 UTF-8 bytes as a 48-bit item).
        mechanism: ``taps`` (default), ``tap``, ``fedpem`` or ``gtf``.
        epsilon: the per-report budget (each user reports once).
        k: heavy hitters released.
        oracle: ``grr``, ``oue`` or ``olh``.
        levels: the prefix tree's granularity g (``48 / g`` bits per level).
        transport: carries every party's oracle rounds (``plain``, ``shuffler``:
            reports; ``secagg``, ``threshold``: support vectors) or a transport object.
        seed: reproducible simulation.
        truncate: accept words longer than 6 bytes by keeping their first 6 (else an
            error names the first such word).

    Raises:
        StudyError: bad parties, items, parameters, or a transport that cannot carry
            the rounds.
    """
    from mechanisms.federated import FederatedConfig, Party, Population
    from mechanisms.federated import privacy as federated_privacy
    from mechanisms.federated import run as run_federated
    from protocol.studies.datasets_federated import decode_item, encode_words
    from protocol.studies.errors import mechanism_errors

    if not isinstance(parties, Mapping) or not parties:
        raise StudyError("parties must be a non-empty mapping: party name -> items")
    words_given = False
    built = []
    for pname, vals in parties.items():
        arr = _array(vals, f"party {pname!r}: items")
        if arr.ndim != 1 or arr.size == 0:
            raise StudyError(f"party {pname!r}: needs a non-empty 1-d list of items")
        if arr.dtype.kind in "UO":
            words_given = True
            long = [w for w in arr.tolist() if len(str(w).encode("utf-8")) > 6]
            if long and not truncate:
                raise StudyError(f"party {pname!r}: item {long[0]!r} is longer than 6 bytes "
                                 "(48-bit items); pass truncate=True to keep the first 6")
            items = encode_words(arr.tolist())
        elif arr.dtype.kind in "iu":
            if arr.min() < 0 or int(arr.max()) >= 1 << 48:
                raise StudyError(f"party {pname!r}: items must be 48-bit unsigned integers")
            items = arr.astype(np.uint64)
        else:
            raise StudyError(f"party {pname!r}: items of dtype {arr.dtype} are neither "
                             "integers nor words")
        built.append((str(pname), items))
    tr, name = _transport(transport, seed)
    rec = _Recording(tr)
    t0 = time.perf_counter()
    with mechanism_errors(mechanism, name), \
            _showing(progress, None, f"{mechanism.upper()} over {name}", tr):
        pop = Population(tuple(Party(p, it) for p, it in built), bits=48)
        cfg = FederatedConfig(epsilon=epsilon, k=k, levels=levels, oracle=oracle)
        res = run_federated(mechanism, pop, cfg, np.random.default_rng(seed), rec)
        guarantee = federated_privacy(mechanism, cfg)
    seconds = time.perf_counter() - t0
    n = sum(int(it.size) for _, it in built)
    rounds, costs = _carried(rec, seconds, 0, [], [])

    def label(x: Any) -> str:
        return str(decode_item(int(x))) if words_given else str(int(x))

    return HeavyHitters(
        mechanism=mechanism, transport=name, n=n,
        heavy_hitters=tuple(HeavyHitter(label(x), None, float(s))
                            for x, s in zip(res.heavy_hitters, res.scores)),
        released_prefixes={}, guarantee=guarantee, guarantee_note="",
        parameters={"k": k, "levels": levels, "parties": len(built),
                    "max_reports_per_user": int(res.max_reports_per_user())},
        rounds=rounds, costs=costs, views=tuple(rec.views))


@dataclass(frozen=True)
class Quantile:
    """One estimated quantile: ``value`` has rank ``q`` up to ``error_bound``."""

    q: float
    value: float
    error_bound: float


@dataclass(frozen=True)
class Quantiles(_Exported):
    """The result of TrieHH++'s quantile sketch (Cormode, "Federated Heavy Hitters
    Revisited", 2021, section 4).

    Attributes:
        transport: the transport's name.
        n: number of users (values).
        lo, hi: the public range; alpha: the digit base; levels: L.
        quantiles: the requested quantiles.
        error_bound: the rank error bound ``L (alpha - 1) theta / m`` of every answer.
        guarantee: TrieHH++'s guarantee for these parameters.
        parameters: theta, m and the sampling rate.
        rounds, costs, views: as in :class:`HeavyHitters`.
        input: what the run chose for the caller (the corrupted clients' target cell).
        corrupted: with corrupted clients (``corrupt=``), what they did and achieved,
            per level and in all; else ``None``.
    """

    transport: str
    n: int
    lo: float
    hi: float
    alpha: int
    levels: int
    quantiles: tuple[Quantile, ...]
    error_bound: float
    guarantee: Any
    parameters: Mapping[str, float | int]
    rounds: tuple[Round, ...]
    costs: Costs
    views: tuple[PartyViews, ...] = field(repr=False)
    sketch: Any = field(repr=False, compare=False, default=None)
    input: Mapping[str, Any] = field(default_factory=dict, repr=False)
    corrupted: Mapping[str, Any] | None = field(default=None, repr=False)

    def _headline(self) -> str:
        qs = ", ".join(f"q{q.q:g} = {q.value:.4g}" for q in self.quantiles[:5])
        return (f"quantiles over {self.transport} of {self.n:,} values in [{self.lo:g}, "
                f"{self.hi:g}]: {qs} (rank error <= {self.error_bound:.3g})\n"
                f"  guarantee: {_guarantee_phrase(self.guarantee)}")

    def rank(self, r: float) -> float:
        """The estimated fraction of users with a value in ``[lo, r]``."""
        return float(self.sketch.ranks(np.array([float(r)]))[0])

    def quantile(self, q: float) -> float:
        """The estimated ``q``-quantile (``q`` in ``[0, 1]``): the answer computed for
        ``q`` when it was in ``qs``, else read from the same released trie (no new
        release, no privacy cost). Its rank is ``q`` up to ``error_bound``.

        Raises:
            StudyError: ``q`` outside ``[0, 1]`` or not a number.
        """
        try:
            qf = float(q)
        except (TypeError, ValueError):
            raise StudyError(f"quantile(q): q must be a number in [0, 1], got {q!r}") from None
        if not 0.0 <= qf <= 1.0:
            raise StudyError(f"quantile(q): q must be in [0, 1], got {q!r}")
        for a in self.quantiles:
            if a.q == qf:
                return a.value
        if self.sketch is None:
            raise StudyError(f"quantile({qf:g}) was not computed and this result holds "
                             "no sketch; pass it in qs=")
        return float(self.sketch.quantiles([qf])[0].value)

    def as_dict(self, views: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; ``views`` includes every party's view."""
        out: dict[str, Any] = {
            "transport": self.transport, "n": self.n, "range": [self.lo, self.hi],
            "alpha": self.alpha, "levels": self.levels,
            "quantiles": [q.__dict__ for q in self.quantiles],
            "error_bound": self.error_bound, "guarantee": _guarantee_dict(self.guarantee),
            "parameters": dict(self.parameters), "rounds": [r.__dict__ for r in self.rounds],
            "costs": _costs_dict(self.costs), "input": _plain(self.input),
            "corrupted": _plain(self.corrupted),
        }
        if views:
            out["views"] = _views_list(self.views)
        return out

    def to_table(self, fmt: Literal["csv", "markdown"] = "csv") -> str:
        """``q,value,error_bound`` as CSV or Markdown.

        Raises:
            ValueError: an unknown format.
        """
        rows = [(f"{q.q:g}", f"{q.value:.6g}", f"{q.error_bound:.4g}") for q in self.quantiles]
        return _table(("q", "value", "error_bound"), rows, fmt, "|---:|---:|---:|")


@_validated
def quantiles(values: Sequence[float] | np.ndarray[Any, Any], *, lo: float, hi: float,
              qs: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9), epsilon: float = 1.0,
              delta: float | None = None, transport: str | Transport = "plain",
              seed: int | None = None, alpha: int = 4, levels: int = 10,
              theta: int | None = None,
              bound: Literal["paper", "eq3"] = "paper",
              clip: bool = False,
              progress: ShowProgress = True, corrupt: Any = None,
              committee_input: str | None = None,
              min_valid_fraction: float | None = None) -> Quantiles:
    """Quantiles of the caller's numbers from a TrieHH++ trie of their base-``alpha``
    digits in the public range ``[lo, hi]`` (Cormode 2021, section 4).

    Args:
        values: one number per user; values outside ``[lo, hi]`` are an error unless
            ``clip``.
        lo, hi: the public range.
        qs: the quantiles wanted, each in ``[0, 1]``.
        epsilon, delta: the TrieHH++ target (basic composition over the ``levels``;
            delta default ``1/n^2``).
        transport: ``plain``, ``secagg``, ``shuffler``, ``threshold`` or a transport
            object (any that takes votes; the release is the same on all).
        seed: reproducible simulation.
        alpha: digit base; levels: L, digits kept (resolution ``(hi - lo) / alpha^L``).
        theta: fix the threshold instead of the smallest one meeting delta.
        bound: the per-level epsilon: ``paper`` (Lemma 3 eq. (4), at most ln(10/9) per
            level) or ``eq3`` (the tight ratio of eq. (3)).
        clip: clip values outside ``[lo, hi]`` to the range instead of refusing them;
            how many were clipped (below, above) is in ``input["clipped"]`` and a
            :class:`protocol.studies.errors.ChoiceWarning` says so.
        corrupt, committee_input, min_valid_fraction: as for :func:`triehh`; the
            corrupted clients' target is a cell of ``levels`` digits (default the lowest
            cell no value falls in), ``result.corrupted`` what they achieved.

    Raises:
        StudyError: bad values, range or quantiles, a target the theorem cannot meet
            for this many users, corrupted clients the transport cannot simulate, or an
            aborted round.
    """
    from mechanisms.quantiles import AlphaAdicEncoder, QuantileError, QuantileSketch
    from mechanisms.triehhpp import TrieHHPPError, TrieHHPPParams, run_triehhpp, spawn_rngs
    from protocol.core.contract import AggregationAborted
    from protocol.studies.runners import triehhpp as runner

    v = _array(values, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise StudyError("values must be a non-empty 1-d sequence of finite numbers")
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise StudyError("the public range needs finite lo < hi")
    from protocol.studies.runners.quantiles import clip_to_range

    v, clipped = clip_to_range(v, lo, hi, bool(clip), "values", "clip=True")
    if clipped:
        from protocol.studies.datasets import input_warnings

        _warn_choice(input_warnings(clipped)[0])
    wanted = [float(q) for q in qs]
    if not wanted or any(not 0.0 <= q <= 1.0 for q in wanted):
        raise StudyError("quantiles must be in [0, 1]")
    target = runner.PrivacyTarget(epsilon=epsilon, delta=delta, max_length=levels,
                                  theta=theta, bound=bound)
    sol = runner.solve(target, int(v.size), False, what="TrieHH++ quantiles")
    from protocol.studies.corrupted import (
        armed, check_transport, corrupt_clients, corrupt_from_transport, records_since,
    )
    from protocol.studies.runners.quantiles import aim_cell

    who = corrupt_clients(corrupt)
    tr, name = _transport(transport, seed, committee_input, min_valid_fraction)
    who = corrupt_from_transport(tr, who)
    check_transport(who, tr, name)
    rec = _Recording(tr)
    t0 = time.perf_counter()
    aimed = None
    try:
        enc = AlphaAdicEncoder(float(lo), float(hi), alpha, levels)
        if who is not None:
            aimed = aim_cell(who, enc, v)
        params = TrieHHPPParams(int(v.size), float(sol.m), sol.theta, levels,
                                task="quantiles")
        sr, trng = spawn_rngs(seed)
        with armed(tr, None if aimed is None else aimed.clients) as start, \
                _showing(progress, levels, "TrieHH++ levels", tr) as shown:
            res = run_triehhpp(enc.unit_matrix(v), enc.alpha, enc.unit_labels, params, rec,
                               sr, trng, progress=shown)
            records = records_since(tr, start)
        sketch = QuantileSketch(res, enc)
        answers = sketch.quantiles(wanted)
    except (QuantileError, TrieHHPPError, ValueError) as exc:
        raise StudyError(str(exc)) from None
    except AggregationAborted as exc:
        raise StudyError(f"the {name} transport aborted a round: {exc}") from None
    seconds = time.perf_counter() - t0
    total = Cost()
    for _, c in rec.costs:
        total.add(c)
    rounds = tuple(Round(int(st.level), int(st.candidates), int(st.contacted),
                         int(st.released), float(sec), int(c.bytes_up), int(c.bytes_down))
                   for st, (sec, c) in zip(res.levels, rec.costs))
    costs = Costs(seconds, dict(total.cpu_seconds), total.bytes_up, total.bytes_down)
    return Quantiles(
        transport=name, n=int(v.size), lo=float(lo), hi=float(hi), alpha=alpha,
        levels=levels, quantiles=tuple(Quantile(a.q, float(a.value), float(a.error_bound))
                                       for a in answers),
        error_bound=float(sketch.error_bound), guarantee=sol.guarantee,
        parameters={"theta": int(sol.theta), "m": float(sol.m), "rate": float(sol.rate)},
        rounds=rounds, costs=costs, views=tuple(rec.views), sketch=sketch,
        input={**clipped, **({} if aimed is None
                             else {"corrupt_target": aimed.input_note()})},
        corrupted=None if aimed is None else runner.corrupted_section(
            aimed, records, [e.label for e in res.node_estimates()]))
