"""Level-wise prefix estimation shared by PEM, FedPEM, GTF, TAP and TAPS.

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

Which users report is decided by :class:`~mechanisms.federated.parties.UserPool`
(disjoint groups) and recorded in a :class:`~mechanisms.federated.parties.ReportLedger`,
which refuses a second report from any user.

The engine in ``mechanisms/prefix_tree.py`` models tries of unit ids with node
pointers; for fixed-length binary items the prefixes themselves are the natural keys
(``prefix << s | unit``), so this module keeps candidate sets as sorted integer arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .oracle import make_oracle
from .parties import FederatedError, Party, ReportLedger, UserPool, prefixes

__all__ = [
    "level_lengths", "construct", "full_domain", "LevelResult", "PartySession",
    "top_indices",
]

MAX_DOMAIN = 1 << 22


def level_lengths(bits: int, levels: int) -> list[int]:
    """Prefix length of every level: ``l_h = ceil(h * m / g)`` for ``h = 1..g``.

    Raises:
        FederatedError: if ``levels`` is not in ``[1, bits]``.
    """
    if not 1 <= levels <= bits:
        raise FederatedError(f"need 1 <= levels <= bits, got levels={levels}, bits={bits}")
    return [math.ceil(h * bits / levels) for h in range(1, levels + 1)]


def full_domain(length: int) -> np.ndarray:
    """All ``length``-bit prefixes (the first level's domain).

    Raises:
        FederatedError: if the domain would exceed ``2**22`` prefixes.
    """
    if length < 0 or (1 << length) > MAX_DOMAIN:
        raise FederatedError(f"a full domain of {length} bits is too large")
    return np.arange(1 << length, dtype=np.uint64)


def construct(kept: np.ndarray, old_length: int, new_length: int) -> np.ndarray:
    """``Construct``: extend each kept ``old_length``-bit prefix by every bit pattern.

    Returns:
        The sorted, distinct ``new_length``-bit candidate prefixes.

    Raises:
        FederatedError: if ``new_length < old_length`` or the domain is too large.
    """
    s = new_length - old_length
    if s < 0:
        raise FederatedError("prefixes can only be extended")
    kept = np.unique(np.asarray(kept, dtype=np.uint64))
    if kept.size << s > MAX_DOMAIN:
        raise FederatedError(f"{kept.size} prefixes x 2^{s} exceeds the domain cap {MAX_DOMAIN}")
    ext = (kept[:, None] << np.uint64(s)) | np.arange(1 << s, dtype=np.uint64)[None, :]
    return np.sort(ext.ravel())


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
        oracle: frequency oracle name ("grr", "oue", "olh").
        rng: simulation randomness (user grouping and the users' own coins).
    """

    party: Party
    bits: int
    epsilon: float
    oracle: str
    rng: np.random.Generator
    pool: UserPool = field(init=False)
    ledger: ReportLedger = field(init=False)
    reports_sent: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.pool = UserPool(self.party.size, self.rng)
        self.ledger = ReportLedger(self.party.name, self.party.size)

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
            FederatedError: on an empty group or empty domain.
            PrivacyBudgetError: if a user has already reported.
        """
        domain = np.asarray(domain, dtype=np.uint64)
        if users.size == 0:
            raise FederatedError(f"party {self.name!r}: empty user group at {length} bits")
        if domain.size == 0:
            raise FederatedError(f"party {self.name!r}: empty candidate domain")
        self.ledger.record(users)
        self.reports_sent += int(users.size)
        values = prefixes(self.party.items[users], self.bits, length)
        pos = np.searchsorted(domain, values)
        pos_c = np.minimum(pos, domain.size - 1)
        inside = domain[pos_c] == values
        complete = domain.size == (1 << length)
        idx = np.where(inside, pos_c, domain.size).astype(np.int64)
        fo = make_oracle(self.oracle, self.epsilon, int(domain.size), dummy=not complete)
        reports = fo.randomize(idx, self.rng)
        freqs = np.asarray(fo.estimate(reports), dtype=float)
        sigma = math.sqrt(fo.variance(int(users.size)))
        return LevelResult(length, domain, freqs, int(users.size), sigma)
