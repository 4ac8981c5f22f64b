"""The level-wise engine for fixed-length binary items (PEM, FedPEM, GTF, TAP, TAPS).

Theory of operation
-------------------
Items are ``m``-bit strings (``uint64``). The prefix tree has ``g`` levels; level ``h``
holds prefixes of ``l_h = ceil(h * m / g)`` bits (Zhang, Ye, Hu 2024, Algorithm 2 line 8). A
candidate domain ``Lambda_h`` is a sorted ``uint64`` array of ``l_h``-bit prefixes; it is
built from the kept prefixes of the previous level by ``Construct``:
``Lambda_h = C_{h-1} x {0,1}^(l_h - l_{h-1})`` (Algorithm 2, line 23).

``Estimate`` (Algorithm 2, lines 26-33): each user of the level's group maps the
``l_h``-bit prefix of her item to its index in ``Lambda_h`` -- or, when the prefix is not
a candidate, to the oracle's dummy item (Zhang, Ye, Hu 2024, section 7.1: "For k-RR, we assign a
dummy item to out-of-domain items") -- and sends ONE frequency-oracle report. The party
estimates every candidate's frequency (a fraction of the group) with the oracle's
unbiased estimator; ``sigma = sqrt(Var[f_hat])`` at ``f = 0`` is the oracle's standard
deviation used by the adaptive extension (equation 3).

When ``Lambda_h`` is the whole space ``{0,1}^(l_h)`` no value can be out of domain and
the oracle runs without the dummy item.

Which users report is decided by :class:`UserPool` (disjoint groups) and recorded in a
:class:`ReportLedger`, which refuses a second report from any user.

This drives the prefix-tree engine of :mod:`mechanisms.prefix_tree` for items that are
fixed-length bit strings: a level-``h`` node is its ``l_h``-bit prefix itself and its
children are ``prefix << s | unit`` for the ``2^s`` units of ``s = l_h - l_{h-1}`` bits.
:func:`construct` is the engine's ``frontier x units``
(:func:`mechanisms.prefix_tree.core.extend`) over the sorted kept prefixes, so a
candidate set is a sorted integer array, and a user's candidate index is her prefix's
rank in it (:func:`mechanisms.prefix_tree.core.subset_index`); no node table is needed
(:mod:`mechanisms.prefix_tree.trie` keeps one for variable-length unit strings).

Parties and users. A party (Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with Local
Differential Privacy", section 4.1) holds users ``u_j`` with one ``m``-bit item each
(PEM is one party). Its users are split into *disjoint* groups, one per (level,
role), and each user sends exactly one frequency-oracle report: :class:`UserPool` hands
out consecutive slices of one random permutation and never a user twice, and
:class:`ReportLedger` raises :class:`PrivacyBudgetError` at the first user that would
report a second time (tests read the counts back).

Transport. Each level's reports travel to the party through a
:class:`~protocol.core.contract.Transport` (:func:`mechanisms.fo.rounds.run_oracle_round`):
reports over the plaintext transport and the shuffler, support vectors over secure
aggregation; the estimates are identical on all three.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from mechanisms.fo import ORACLES as FO_ORACLES
from mechanisms.fo import OracleInputError
from mechanisms.fo import make_oracle as fo_make_oracle
from mechanisms.fo.rounds import run_oracle_round
from protocol.core.contract import ContractError, Transport, plaintext_transport

from .core import extend, subset_index
from .trie import PrefixTreeError

__all__ = [
    "LevelError", "PrivacyBudgetError", "Party", "ReportLedger", "UserPool", "prefixes",
    "split_sizes", "level_lengths", "construct", "LevelResult",
    "PartySession", "top_indices", "walk_levels", "make_oracle", "ORACLES",
]

ORACLES = tuple(sorted(FO_ORACLES))


class LevelError(PrefixTreeError):
    """Invalid input to the level-wise engine (bad sizes, items, lengths...);
    :class:`mechanisms.federated.LevelError` is this class."""


class PrivacyBudgetError(RuntimeError):
    """A user was asked for a second report, which would break epsilon-LDP."""


def prefixes(items: np.ndarray, bits: int, length: int) -> np.ndarray:
    """The ``length``-bit prefixes of ``bits``-bit items.

    Args:
        items: unsigned integer items, each below ``2**bits``.
        bits: item length ``m`` in bits (1..64).
        length: prefix length ``l`` (0..bits).

    Returns:
        ``items >> (bits - length)`` as ``uint64``.

    Raises:
        LevelError: if ``length`` is outside ``[0, bits]``.
    """
    if not 0 <= length <= bits:
        raise LevelError(f"prefix length {length} outside [0, {bits}]")
    items = np.asarray(items, dtype=np.uint64)
    return items >> np.uint64(bits - length)


def split_sizes(n: int, weights: np.ndarray | list[float]) -> np.ndarray:
    """Split ``n`` users into groups proportional to ``weights`` (sizes sum to ``n``).

    Largest-remainder rounding, so sizes differ from ``n * w / sum(w)`` by less than one.

    Raises:
        LevelError: on negative ``n`` or non-positive total weight.
    """
    w = np.asarray(weights, dtype=float)
    if n < 0 or w.size == 0 or np.any(w < 0) or w.sum() <= 0:
        raise LevelError("split_sizes needs n >= 0 and non-negative weights with a positive sum")
    exact = n * w / w.sum()
    sizes = np.floor(exact).astype(np.int64)
    rest = int(n - sizes.sum())
    if rest:
        order = np.argsort(-(exact - sizes), kind="stable")
        sizes[order[:rest]] += 1
    return sizes


@dataclass(frozen=True)
class Party:
    """One party: a name and the items of its users (one item per user).

    Attributes:
        name: party label.
        items: ``uint64`` array, ``items[u]`` is user ``u``'s item.
    """

    name: str
    items: np.ndarray

    def __post_init__(self) -> None:
        arr = np.asarray(self.items)
        if arr.ndim != 1 or arr.size == 0:
            raise LevelError(f"party {self.name!r} needs a non-empty 1-d item array")
        if arr.dtype.kind not in "ui":
            raise LevelError(f"party {self.name!r}: items must be integers")
        if arr.dtype.kind == "i" and np.any(arr < 0):
            raise LevelError(f"party {self.name!r}: negative item")
        object.__setattr__(self, "items", arr.astype(np.uint64, copy=False))

    @property
    def size(self) -> int:
        """Number of users."""
        return int(self.items.size)


@dataclass
class ReportLedger:
    """Counts oracle reports per user of one party; a second report raises.

    Attributes:
        party: party name (for messages).
        counts: ``counts[u]`` is the number of reports user ``u`` has sent (0 or 1).
    """

    party: str
    n_users: int
    counts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.counts = np.zeros(self.n_users, dtype=np.int64)

    def record(self, users: np.ndarray) -> None:
        """Record one report from each user in ``users``.

        Raises:
            PrivacyBudgetError: if a user appears twice in ``users`` or has reported
                before. The ledger is left unchanged in that case.
        """
        users = np.asarray(users, dtype=np.int64)
        if users.size == 0:
            return
        if users.min() < 0 or users.max() >= self.n_users:
            raise LevelError(f"party {self.party!r}: user index out of range")
        if np.unique(users).size != users.size or np.any(self.counts[users] > 0):
            raise PrivacyBudgetError(
                f"party {self.party!r}: a user would send a second report")
        self.counts[users] += 1


class UserPool:
    """Disjoint random groups of one party's users.

    A pool holds one random permutation of ``range(n_users)``; :meth:`take` returns the
    next ``size`` users and never returns a user twice.
    """

    def __init__(self, n_users: int, rng: np.random.Generator) -> None:
        self._perm = rng.permutation(n_users)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Users not yet handed out."""
        return int(self._perm.size - self._next)

    def take(self, size: int) -> np.ndarray:
        """Take ``size`` fresh users.

        Raises:
            LevelError: if fewer than ``size`` users remain or ``size`` is negative.
        """
        if size < 0 or size > self.remaining:
            raise LevelError(f"cannot take {size} users, {self.remaining} remain")
        out = self._perm[self._next:self._next + size]
        self._next += size
        return out


def make_oracle(name: str, epsilon: float, domain_size: int, dummy: bool = True) -> Any:
    """Instantiate the oracle ``name`` over ``domain_size`` items (plus a dummy item).

    Raises:
        LevelError: for an unknown oracle name or invalid parameters.
    """
    if name not in FO_ORACLES:
        raise LevelError(f"unknown frequency oracle {name!r}; choose from {list(ORACLES)}")
    try:
        return fo_make_oracle(name, epsilon=epsilon, domain_size=domain_size, dummy=dummy)
    except OracleInputError as exc:
        raise LevelError(str(exc)) from exc


MAX_DOMAIN = 1 << 22


def level_lengths(bits: int, levels: int) -> list[int]:
    """Prefix length of every level: ``l_h = ceil(h * m / g)`` for ``h = 1..g``.

    Raises:
        LevelError: if ``levels`` is not in ``[1, bits]``.
    """
    if not 1 <= levels <= bits:
        raise LevelError(f"need 1 <= levels <= bits, got levels={levels}, bits={bits}")
    return [math.ceil(h * bits / levels) for h in range(1, levels + 1)]


def construct(kept: np.ndarray, old_length: int, new_length: int) -> np.ndarray:
    """``Construct``: extend each kept ``old_length``-bit prefix by every bit pattern.

    Returns:
        The sorted, distinct ``new_length``-bit candidate prefixes.

    Raises:
        LevelError: if ``new_length < old_length`` or the domain is too large.
    """
    s = new_length - old_length
    if s < 0:
        raise LevelError("prefixes can only be extended")
    kept = np.unique(np.asarray(kept, dtype=np.uint64))  # the sorted frontier
    if kept.size << s > MAX_DOMAIN:
        raise LevelError(f"{kept.size} prefixes x 2^{s} exceeds the domain cap {MAX_DOMAIN}")
    # the engine's frontier x units; row-major over a sorted frontier is numeric order
    parents, units = extend(kept, 1 << s)
    return (parents << np.uint64(s)) | units.astype(np.uint64)


def top_indices(freqs: np.ndarray, t: int) -> np.ndarray:
    """Indices of the ``t`` largest values, largest first (stable for ties)."""
    order = np.argsort(-np.asarray(freqs, dtype=float), kind="stable")
    return order[:max(0, int(t))]


@dataclass
class LevelResult:
    """What one group estimated at one level.

    Attributes:
        length: prefix length ``l_h``.
        domain: the candidate prefixes (sorted ``uint64``).
        freqs: unbiased frequency estimates (fractions of the group), one per candidate.
        n_users: size of the reporting group.
        sigma: the oracle's standard deviation of one estimate at ``f = 0``.
    """

    length: int
    domain: np.ndarray
    freqs: np.ndarray
    n_users: int
    sigma: float

    def ranked(self) -> tuple[np.ndarray, np.ndarray]:
        """Candidates and estimates sorted by decreasing estimate."""
        order = top_indices(self.freqs, self.freqs.size)
        return self.domain[order], self.freqs[order]


@dataclass
class PartySession:
    """One party's users during one run: disjoint groups, oracle reports, a ledger.

    Args:
        party: the party.
        bits: item length ``m``.
        epsilon: the per-report privacy budget.
        oracle: frequency oracle name ("grr", "oue", "olh", "aon").
        rng: simulation randomness (user grouping and the users' own coins).
        transport: carries every level's reports from the group to the party
            (:func:`mechanisms.fo.rounds.run_oracle_round`); ``None`` is the plaintext
            transport. Its randomness is a child spawned from ``rng``, which leaves
            ``rng``'s own stream (grouping, coins) the same on every transport.
    """

    party: Party
    bits: int
    epsilon: float
    oracle: str
    rng: np.random.Generator
    transport: Transport | None = None
    pool: UserPool = field(init=False)
    ledger: ReportLedger = field(init=False)
    reports_sent: int = field(init=False, default=0)
    rounds: int = field(init=False, default=0)
    anonymous_rounds: int = field(init=False, default=0)
    _transport_rng: np.random.Generator | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.pool = UserPool(self.party.size, self.rng)
        self.ledger = ReportLedger(self.party.name, self.party.size)
        if self.transport is None:
            self.transport = plaintext_transport()

    @property
    def name(self) -> str:
        return self.party.name

    @property
    def size(self) -> int:
        return self.party.size

    def take(self, n: int) -> np.ndarray:
        """A fresh group of ``n`` users (disjoint from every earlier group)."""
        return self.pool.take(n)

    def estimate(self, users: np.ndarray, length: int, domain: np.ndarray) -> LevelResult:
        """Every user in ``users`` reports her ``length``-bit prefix once over ``domain``.

        Raises:
            LevelError: on an empty group or empty domain, or reports the
                transport cannot carry.
            PrivacyBudgetError: if a user has already reported.
            protocol.core.contract.AggregationAborted: the transport aborted.
        """
        domain = np.asarray(domain, dtype=np.uint64)
        if users.size == 0:
            raise LevelError(f"party {self.name!r}: empty user group at {length} bits")
        if domain.size == 0:
            raise LevelError(f"party {self.name!r}: empty candidate domain")
        self.ledger.record(users)
        self.reports_sent += int(users.size)
        values = prefixes(self.party.items[users], self.bits, length)
        # the engine's lookup: a prefix's candidate index is its rank in the sorted domain
        idx = subset_index(domain, values, assume_sorted=True)
        complete = domain.size == (1 << length)
        idx = np.where(idx >= 0, idx, domain.size)  # not a candidate: the dummy item
        fo = make_oracle(self.oracle, self.epsilon, int(domain.size), dummy=not complete)
        reports = fo.randomize(idx, self.rng)
        if self._transport_rng is None:
            self._transport_rng = self.rng.spawn(1)[0]  # no draw from rng's own stream
        assert self.transport is not None
        try:
            rnd = run_oracle_round(fo, reports, self.transport, self._transport_rng,
                                   task=f"fedhh-fo/{self.name}", round=self.rounds)
        except ContractError as exc:
            raise LevelError(f"party {self.name!r}: {fo.name} reports cannot travel "
                                 f"over {self.transport.name}: {exc}") from None
        self.rounds += 1
        self.anonymous_rounds += int(rnd.anonymous)
        freqs = np.asarray(rnd.estimates(fo), dtype=float)
        sigma = math.sqrt(fo.variance(rnd.n))
        return LevelResult(length, domain, freqs, rnd.n, sigma)


def walk_levels(session: PartySession, lengths: list[int], group_sizes: list[int],
                kept: np.ndarray | None, prev_length: int,
                choose_t: Callable[[LevelResult], int]) -> tuple[LevelResult, np.ndarray, list[int]]:
    """Run consecutive levels of one party's trie (Construct + Estimate + extend).

    Args:
        session: the party.
        lengths: prefix lengths of the levels to run.
        group_sizes: users per level (disjoint groups drawn from the session's pool).
        kept: prefixes kept at the previous level (``None``: start from the full
            domain of the first length).
        prev_length: prefix length of ``kept``.
        choose_t: ``LevelResult -> int``, the extension number.

    Returns:
        ``(last level result, prefixes kept at the last level, t per level)``.

    Raises:
        LevelError: if the lengths and group sizes disagree or a group is empty.
        PrivacyBudgetError: if a user would report twice.
    """
    if len(lengths) != len(group_sizes) or not lengths:
        raise LevelError("need one group size per level")
    ts = []
    res = None
    for length, n in zip(lengths, group_sizes):
        if kept is None:  # the root (the empty prefix) extended by every unit
            kept, prev_length = np.zeros(1, dtype=np.uint64), 0
        domain = construct(kept, prev_length, length)
        res = session.estimate(session.take(n), length, domain)
        t = choose_t(res)
        ts.append(int(t))
        kept = res.domain[top_indices(res.freqs, t)]
        prev_length = length
    assert res is not None
    return res, kept, ts
