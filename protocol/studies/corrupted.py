"""Corrupted clients in a study run: what the runners and the API do with a
:class:`protocol.core.corruption.CorruptClients`, and what they report about it.

Theory of operation
-------------------
A runner takes the corrupted clients (``corrupt=``, or the ones already set on the
transport), refuses what cannot run (a strategy that attacks the committee's
validated reports over a transport that takes no such reports, a user index outside
the population, a target with characters outside the public alphabet), aims them at
their target and sets them on the transport for the run (:func:`armed`). The
*target* is a word the corrupted clients try to forge or suppress; each round the
strategy aims at the candidate sharing the longest prefix with its label (the word
and the trie's end symbol, so that the last round aims at the whole word). Without
one the runner chooses a word nobody in the population holds (:func:`unheld_word`):
a forged heavy hitter is then exactly a word in the release that no honest client
could have put there. The choice is reported in the run's ``input`` (the command
line prints it as an ``input:`` line).

After the run, :func:`section` summarises the transport's
:class:`~protocol.core.corruption.CorruptionRecord` of every round the run made:
who was corrupted, the reports dropped by reason, whether each round released what
the honest clients' votes alone release, and the totals. TrieHH adds a whole-run
comparison (:func:`compare_release`): the heavy hitters of a second run over the
plaintext transport on the same samples, in which the same clients abstain (their
strategy replaced by ``"abstain"``): plain TrieHH over the honest clients' votes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
from typing import Any, Iterator, Mapping, Sequence

from protocol.core.corruption import (
    REPORT_STRATEGIES, STRATEGIES, CorruptClients, CorruptionRecord,
)
from protocol.studies.errors import StudyError

__all__ = ["DEFAULT_STRATEGY", "corrupt_clients", "who", "inner", "check_transport",
           "unheld_word", "Aim", "aim_word", "armed", "records_since", "section",
           "compare_release", "corrupt_from_transport"]

#: the strategy used when a caller names the corrupted clients but no strategy
DEFAULT_STRATEGY = "theta-at-target"
#: keys of the short dict form (:func:`corrupt_clients`) -> CorruptClients fields
_ALIASES = {"clients": "per_round", "per_round": "per_round", "users": "users",
            "share": "fraction", "fraction": "fraction", "strategy": "strategy",
            "target": "target", "seed": "seed"}


def corrupt_clients(value: Any) -> CorruptClients | None:
    """``value`` as a :class:`CorruptClients`: ``None``, a ``CorruptClients``, or a
    short dict such as ``{"clients": 1}`` (that many per round), ``{"users": [3, 17]}``
    or ``{"share": 0.05}`` (each population index with that probability), with
    optional ``strategy`` (default ``theta-at-target``), ``target`` and ``seed``
    (``per_round`` and ``fraction``, the field names, are accepted too).

    Raises:
        StudyError: another type, an unknown key, or values ``CorruptClients`` refuses.
    """
    if value is None or isinstance(value, CorruptClients):
        return value
    if not isinstance(value, Mapping):
        raise StudyError("corrupt must be a CorruptClients or a dict such as "
                         "{'clients': 1, 'strategy': 'theta-at-target'}, got "
                         f"{type(value).__name__}")
    fields: dict[str, Any] = {}
    for key, v in value.items():
        name = _ALIASES.get(str(key))
        if name is None:
            raise StudyError(f"corrupt: unknown key {key!r} (one of "
                             f"{', '.join(sorted(_ALIASES))})")
        if name in fields:
            raise StudyError(f"corrupt: {key!r} repeats another key")
        fields[name] = v
    fields.setdefault("strategy", DEFAULT_STRATEGY)
    if fields.get("users") is not None:
        users = fields["users"]
        if isinstance(users, (str, bytes)) or not isinstance(users, Sequence) and \
                not hasattr(users, "__iter__"):
            raise StudyError("corrupt: users must be a list of user indices")
        try:
            fields["users"] = tuple(_index(u) for u in users)
        except (TypeError, ValueError):
            raise StudyError("corrupt: users must be a list of non-negative user "
                             "indices") from None
    try:
        return CorruptClients(**fields)
    except (ValueError, TypeError) as exc:
        raise StudyError(f"corrupt: {exc}") from None


def _index(u: Any) -> int:
    if isinstance(u, bool) or not float(u).is_integer():
        raise ValueError(u)
    return int(u)


def who(c: CorruptClients) -> dict[str, Any]:
    """Who is corrupted, in the command line's words: ``{"per_round": K}``,
    ``{"users": [...]}`` or ``{"share": F}``."""
    if c.users is not None:
        return {"users": list(c.users)}
    if c.per_round is not None:
        return {"per_round": int(c.per_round)}
    return {"share": float(c.fraction)}  # type: ignore[arg-type]


def who_phrase(c: CorruptClients) -> str:
    """Who is corrupted, in a few words."""
    if c.users is not None:
        shown = ", ".join(str(u) for u in c.users[:8]) + (", ..." if len(c.users) > 8 else "")
        return f"users {shown} (whenever sampled)"
    if c.per_round is not None:
        return f"{c.per_round} of each round's clients"
    return f"each user with probability {c.fraction:g}"


def inner(transport: Any) -> Any:
    """The transport that runs the rounds (through recording wrappers)."""
    seen = 0
    while hasattr(transport, "inner") and seen < 16:
        transport, seen = transport.inner, seen + 1
    return transport


def corrupt_from_transport(transport: Any, corrupt: Any = None) -> CorruptClients | None:
    """The corrupted clients of a run: ``corrupt`` when given, else those already set
    on the transport (``transport.corrupt``).

    Raises:
        StudyError: as :func:`corrupt_clients`.
    """
    c = corrupt_clients(corrupt)
    if c is None:
        c = getattr(inner(transport), "corrupt", None)
    return c


def check_transport(c: CorruptClients | None, transport: Any, name: str) -> None:
    """Refuse corrupted clients the transport cannot simulate.

    Raises:
        StudyError: a report strategy without the committee's validated input, or a
            transport whose clients run elsewhere (the network).
    """
    if c is None:
        return
    t = inner(transport)
    if getattr(t, "contributions_at_clients", False):
        raise StudyError("corrupted clients are simulated: over the network the devices "
                         "compute their own votes")
    if c.strategy in REPORT_STRATEGIES and not getattr(t, "validates", False):
        raise StudyError(f"corrupted-client strategy {c.strategy!r} attacks the committee's "
                         "validated reports: it needs --transport threshold with its "
                         f"default input (--committee-input reports, --threat malicious), "
                         f"not {name}")


def unheld_word(vocabulary: Sequence[str], symbols: str, length: int) -> str:
    """A word of ``length`` characters of ``symbols`` that is not in ``vocabulary``
    (letters first, from the end of the alphabet: ``zzzz``, ``zzzy``, ...).

    Raises:
        StudyError: every such word is held (a tiny alphabet).
    """
    held = set(vocabulary)
    letters = [s for s in symbols if s.isalpha()] or list(symbols)
    order = letters[::-1] + [s for s in symbols[::-1] if s not in letters]
    for k in range(max(1, length), 0, -1):
        for combo in itertools.islice(itertools.product(order, repeat=k), 100_000):
            w = "".join(combo)
            if w not in held:
                return w
    raise StudyError("every short word of the alphabet is held by a user: give "
                     "--corrupt-target")


@dataclasses.dataclass(frozen=True)
class Aim:
    """The corrupted clients aimed at their target for one run.

    Attributes:
        clients: the ``CorruptClients`` the transport runs with (its ``target`` is the
            trie label of the word: the word and the end symbol).
        word: the target as the caller sees it (a word; a value cell for quantiles).
        chosen: the runner chose it (no target was given).
        how: how it was chosen (for the ``input`` report).
    """

    clients: CorruptClients
    word: str
    chosen: bool
    how: str

    def input_note(self) -> dict[str, Any]:
        """The ``input`` report's entry for the target."""
        return {"word": self.word, "chosen": self.chosen, "how": self.how}


def aim_word(c: CorruptClients, vocabulary: Sequence[str], symbols: str, max_chars: int,
             eos: str, n: int) -> Aim:
    """Aim ``c`` at its target word in a trie of at most ``max_chars`` characters (a
    word shorter than that ends with ``eos``). Without a target: a word nobody holds.

    Raises:
        StudyError: a corrupted user outside the population, or a target with
            characters outside the public alphabet.
    """
    check_users(c, n)
    if c.target is None:
        word = unheld_word(vocabulary, symbols, min(4, max(1, max_chars - 1)))
        chosen, how = True, "the default: a word no user holds"
    else:
        word, chosen, how = c.target, False, "given"
        bad = sorted(set(word) - set(symbols))
        if bad:
            raise StudyError(f"--corrupt-target {word!r} has characters {''.join(bad)!r} "
                             "outside the public alphabet")
    label = word + eos if len(word) < max_chars else word[:max_chars]
    return Aim(dataclasses.replace(c, target=label), word, chosen, how)


def check_users(c: CorruptClients, n: int) -> None:
    """Refuse corrupted user indices outside ``range(n)``.

    Raises:
        StudyError: an index ``>= n``.
    """
    if c.users is not None and max(c.users) >= n:
        raise StudyError(f"--corrupt-users {max(c.users)} is not a user: the population has "
                         f"{n:,} (indices 0 to {n - 1:,})")


@contextlib.contextmanager
def armed(transport: Any, c: CorruptClients | None) -> Iterator[int]:
    """``transport`` (its innermost) runs with ``c`` inside the block, its previous
    corrupted clients put back after; yields the length of its corruption log before
    the block (the run's records are those after it, :func:`records_since`)."""
    t = inner(transport)
    before = getattr(t, "corrupt", None)
    start = len(getattr(t, "corruption_log", None) or ())
    t.corrupt = c
    try:
        yield start
    finally:
        t.corrupt = before


def records_since(transport: Any, start: int) -> list[CorruptionRecord]:
    """The corruption records the transport logged after position ``start``."""
    return list((getattr(inner(transport), "corruption_log", None) or [])[start:])


def section(aim: Aim, records: Sequence[CorruptionRecord]) -> dict[str, Any]:
    """The ``corrupted`` section of a result: strategy, who, the target, per round what
    was dropped and whether the round released what the honest clients alone
    release, and the totals."""
    c = aim.clients
    rounds = []
    dropped: dict[str, int] = {}
    dropped_bad: dict[str, int] = {}
    for r in records:
        rounds.append({"round": r.round, "corrupted": len(r.users), "users": list(r.users),
                       "counted": r.counted, "dropped": dict(r.dropped),
                       "dropped_corrupted": dict(r.dropped_corrupted),
                       "validated": r.validated, "matches_honest": r.matches_honest})
        for k, v in r.dropped.items():
            dropped[k] = dropped.get(k, 0) + v
        for k, v in r.dropped_corrupted.items():
            dropped_bad[k] = dropped_bad.get(k, 0) + v
    return {
        "strategy": c.strategy, "description": STRATEGIES[c.strategy], "who": who(c),
        "seed": c.seed, "target": aim.word, "target_chosen": aim.chosen,
        "validated": any(r.validated for r in records),
        "rounds": rounds,
        "totals": {"rounds": len(records),
                   "corrupted_reports": sum(len(r.users) for r in records),
                   "counted": sum(r.counted for r in records),
                   "dropped": dropped, "dropped_corrupted": dropped_bad,
                   "rounds_matching_honest": sum(bool(r.matches_honest) for r in records)},
    }


def compare_release(out: dict[str, Any], target: str, released: Mapping[str, Any],
                    prefixes: Mapping[str, Any], honest: Mapping[str, Any],
                    honest_prefixes: Mapping[str, Any]) -> dict[str, Any]:
    """Add TrieHH's whole-run comparison to a ``corrupted`` section ``out``: the honest
    run's heavy hitters, whether the release equals it (heavy hitters and every other
    released prefix), what the corrupted clients added or removed, and whether the
    target was released."""
    out["honest_comparison"] = ("plain TrieHH over the honest clients' votes on the same "
                                "samples (the corrupted clients abstain)")
    out["honest_heavy_hitters"] = sorted(honest)
    out["honest_frequent_prefixes"] = len(honest_prefixes)
    out["release_equals_honest"] = (set(released) == set(honest)
                                    and set(prefixes) == set(honest_prefixes))
    out["added_heavy_hitters"] = sorted(set(released) - set(honest))
    out["removed_heavy_hitters"] = sorted(set(honest) - set(released))
    out["target_released"] = target in released
    out["target_released_honest"] = target in honest
    return out
