"""Parties, their users, and the one-report-per-user rule.

Theory of operation
-------------------
A federated population (Zhang, Ye, Hu, "Federated Heavy Hitter Analytics with Local
Differential Privacy", section 4.1) is a set of parties ``P_1 .. P_|P|``; party ``P_i``
holds a disjoint set of users ``U^i`` and user ``u_j`` holds one item ``x_j``, an
``m``-bit string stored as a ``uint64``. The prefix of ``x`` of length ``l`` is
``x >> (m - l)``.

Every mechanism in this package splits a party's users into *disjoint* groups, one per
(level, role) -- a level of the prefix tree, or the validation sets of TAPS -- and each
user sends exactly one frequency-oracle report. A user's only output is therefore one
epsilon-LDP report, which is what Theorems 5.1 and 6.1 of the paper rest on.

This is enforced structurally: :class:`UserPool` hands out consecutive slices of one
random permutation of the party's users and never hands a user out twice, and
:class:`ReportLedger` counts reports per user and raises :class:`PrivacyBudgetError` at
the first user that would report a second time (tests read the counts back).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "FederatedError", "PrivacyBudgetError", "Party", "Population", "UserPool",
    "ReportLedger", "prefixes", "split_sizes",
]


class FederatedError(ValueError):
    """Invalid input to a federated heavy-hitter mechanism (bad sizes, bad items...)."""


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
        FederatedError: if ``length`` is outside ``[0, bits]``.
    """
    if not 0 <= length <= bits:
        raise FederatedError(f"prefix length {length} outside [0, {bits}]")
    items = np.asarray(items, dtype=np.uint64)
    return items >> np.uint64(bits - length)


def split_sizes(n: int, weights: np.ndarray | list[float]) -> np.ndarray:
    """Split ``n`` users into groups proportional to ``weights`` (sizes sum to ``n``).

    Largest-remainder rounding, so sizes differ from ``n * w / sum(w)`` by less than one.

    Raises:
        FederatedError: on negative ``n`` or non-positive total weight.
    """
    w = np.asarray(weights, dtype=float)
    if n < 0 or w.size == 0 or np.any(w < 0) or w.sum() <= 0:
        raise FederatedError("split_sizes needs n >= 0 and non-negative weights with a positive sum")
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
            raise FederatedError(f"party {self.name!r} needs a non-empty 1-d item array")
        if arr.dtype.kind not in "ui":
            raise FederatedError(f"party {self.name!r}: items must be integers")
        if arr.dtype.kind == "i" and np.any(arr < 0):
            raise FederatedError(f"party {self.name!r}: negative item")
        object.__setattr__(self, "items", arr.astype(np.uint64, copy=False))

    @property
    def size(self) -> int:
        """Number of users."""
        return int(self.items.size)


@dataclass(frozen=True)
class Population:
    """A federated population: parties plus the item bit length.

    Attributes:
        parties: the parties (user sets are disjoint by construction: each party owns its
            own item array).
        bits: item length ``m`` in bits (default 48, as in the paper).
    """

    parties: tuple[Party, ...]
    bits: int = 48

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise FederatedError(f"bits must be in [1, 64], got {self.bits}")
        if not self.parties:
            raise FederatedError("a population needs at least one party")
        names = [p.name for p in self.parties]
        if len(set(names)) != len(names):
            raise FederatedError("party names must be distinct")
        if self.bits < 64:
            limit = np.uint64(1) << np.uint64(self.bits)
            for p in self.parties:
                if np.any(p.items >= limit):
                    raise FederatedError(f"party {p.name!r} has an item with more than {self.bits} bits")
        object.__setattr__(self, "parties", tuple(self.parties))

    @property
    def sizes(self) -> np.ndarray:
        """User count per party."""
        return np.array([p.size for p in self.parties], dtype=np.int64)

    @property
    def total_users(self) -> int:
        """Total number of users."""
        return int(self.sizes.sum())

    def all_items(self) -> np.ndarray:
        """All users' items, parties concatenated."""
        return np.concatenate([p.items for p in self.parties])

    def true_top_k(self, k: int) -> np.ndarray:
        """The global top-``k`` items ``R^k_T`` (ties broken by the smaller item id)."""
        return top_k_counts(self.all_items(), k)[0]

    def local_top_k(self, k: int) -> list[np.ndarray]:
        """Each party's own top-``k`` items."""
        return [top_k_counts(p.items, k)[0] for p in self.parties]


def top_k_counts(items: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` items of a multiset and their counts, most frequent first.

    Ties are broken by the smaller item id so the result is deterministic.
    """
    vals, counts = np.unique(np.asarray(items, dtype=np.uint64), return_counts=True)
    order = np.lexsort((vals, -counts))[:k]
    return vals[order], counts[order]


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
            raise FederatedError(f"party {self.party!r}: user index out of range")
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
            FederatedError: if fewer than ``size`` users remain or ``size`` is negative.
        """
        if size < 0 or size > self.remaining:
            raise FederatedError(f"cannot take {size} users, {self.remaining} remain")
        out = self._perm[self._next:self._next + size]
        self._next += size
        return out
