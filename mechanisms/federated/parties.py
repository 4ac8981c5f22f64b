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

This is enforced structurally by the level engine (:mod:`mechanisms.prefix_tree.levels`):
:class:`UserPool` hands out consecutive slices of one random permutation of the party's
users and never hands a user out twice, and :class:`ReportLedger` counts reports per
user and raises :class:`PrivacyBudgetError` at the first user that would report a
second time (tests read the counts back).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.prefix_tree.levels import (LevelError, Party, PrivacyBudgetError, ReportLedger,
                                           UserPool, prefixes, split_sizes)

__all__ = [
    "FederatedError", "PrivacyBudgetError", "Party", "Population", "UserPool",
    "ReportLedger", "prefixes", "split_sizes", "top_k_counts",
]

#: invalid input to a federated heavy-hitter mechanism (bad sizes, bad items...): the
#: level engine's error, so that one ``except`` covers the engine and the mechanisms
FederatedError = LevelError


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

def top_k_counts(items: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` items of a multiset and their counts, most frequent first.

    Ties are broken by the smaller item id so the result is deterministic.
    """
    vals, counts = np.unique(np.asarray(items, dtype=np.uint64), return_counts=True)
    order = np.lexsort((vals, -counts))[:k]
    return vals[order], counts[order]
