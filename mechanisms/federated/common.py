"""Results, configuration and server-side aggregation shared by the federated mechanisms.

Communication is counted the way Table 1 of Zhang, Ye, Hu 2024 counts it: in (prefix, count)
pairs of ``b`` bits each exchanged between a party and the server (user-to-party
reports are not counted). We take ``b = m + 32``: an ``m``-bit prefix and a 32-bit
count.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from protocol.core.contract import Transport

from .adaptive import DRIFT_READINGS, extension_number
from mechanisms.prefix_tree.levels import LevelResult, PartySession

from .parties import FederatedError, Population

__all__ = ["EXTENSION_RULES", "FederatedConfig", "PartyReport", "FederatedResult",
           "aggregate_counts", "make_sessions", "Communication"]

COUNT_BITS = 32
#: the named extension-number rules (``FederatedConfig.extension``; an integer is a fixed t)
EXTENSION_RULES = ("adaptive", "floor", "k")


@dataclass(frozen=True)
class FederatedConfig:
    """Parameters shared by every mechanism (defaults are the paper's, section 7.1).

    Attributes:
        epsilon: per-report privacy budget (each user reports once).
        k: number of heavy hitters queried.
        levels: granularity ``g`` (levels of the prefix tree); step ``m / g`` bits.
        oracle: "grr" (default), "oue" or "olh".
        shared_fraction: share of each party's users spent on Phase I; ``None`` (the
            default) gives every level the same share ``1/g``, i.e. ``g_s / g`` for
            Phase I, as Algorithm 2 (line 5) and the proof of Theorem 5.1
            (``Pr[h] = 1/g``) state; section 7.1's "10% of users" is available as 0.1.
        shared_levels: ``g_s``; ``None`` means ``floor(0.25 g)``.
        extension: the extension number rule (:data:`EXTENSION_RULES`):
            ``"adaptive"`` (equations 2-3 as printed: ``t = k* + eta``, which can fall
            below ``k``), ``"floor"`` (``max(k, t)`` of the printed rule: never below
            ``k``), ``"k"`` (fixed ``t = k``), or a fixed integer ``t``. The default is
            ``"floor"``, the rule the regime map (docs/federated.md) supports best.
        prune_ratio: TAPS dividing ratio (``beta`` in Algorithm 4; 0.1).
        tau: TAPS contrast-score guard (1e-11).
        shared_trie: False runs TAP/TAPS without Phase I (Table 6 ablation).
        validation: TAPS's two validation sets per pruning level: ``"each"`` (default:
            each gets ``prune_ratio`` of the level's users) or ``"split"`` (the two share
            ``prune_ratio``, half each; the privacy proof speaks of one set of beta).
        prune_negative: prune the consensus set even when its score (equation 5/6) is
            not positive (default True, as printed); False prunes nothing then.
        fedpem_upload: what a FedPEM party uploads with its local top-k and the
            server sums: ``"counts"`` (default, ``f_hat * |U^i|``, as the paper's section
            7.1 says) or ``"frequencies"`` (``f_hat``, as the text of its Algorithm 1
            says; parties are then weighted equally whatever their size).
        drift: how equation 3's ``E[x]`` is read by the adaptive extension:
            ``"variance"`` (default: the oracle's variance for ``sigma``, as the paper's
            utility analysis of the extension calls it; the other readings let TAP and
            TAPS collapse at epsilon 1), ``"printed"`` (the standard deviation, as the
            text under equation 3 says), ``"normalised"`` or ``"counts"``
            (:data:`mechanisms.federated.adaptive.DRIFT_READINGS`, docs/federated.md).

    Raises:
        FederatedError: on out-of-range parameters.
    """

    epsilon: float = 4.0
    k: int = 10
    levels: int = 24
    oracle: str = "grr"
    shared_fraction: float | None = None
    shared_levels: int | None = None
    extension: str | int = "floor"
    prune_ratio: float = 0.1
    tau: float = 1e-11
    shared_trie: bool = True
    drift: str = "variance"
    validation: str = "each"
    prune_negative: bool = True
    fedpem_upload: str = "counts"

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and np.isfinite(self.epsilon)):
            raise FederatedError("epsilon must be a finite number > 0")
        if self.k < 1:
            raise FederatedError("k must be >= 1")
        if self.levels < 2:
            raise FederatedError("levels must be >= 2")
        if self.shared_fraction is not None and not 0 < self.shared_fraction < 1:
            raise FederatedError("shared_fraction must be in (0, 1)")
        if not 0 < self.prune_ratio < 0.5:
            raise FederatedError("prune_ratio must be in (0, 0.5)")
        if self.extension not in EXTENSION_RULES and not (
                isinstance(self.extension, int) and not isinstance(self.extension, bool)
                and self.extension >= 1):
            raise FederatedError(f"extension must be one of {EXTENSION_RULES} or an integer "
                                 f">= 1, got {self.extension!r}")
        if self.validation not in ("each", "split"):
            raise FederatedError(f"validation must be 'each' or 'split', got {self.validation!r}")
        if self.fedpem_upload not in ("counts", "frequencies"):
            raise FederatedError("fedpem_upload must be 'counts' or 'frequencies', got "
                                 f"{self.fedpem_upload!r}")
        if self.drift not in DRIFT_READINGS:
            raise FederatedError(f"drift must be one of {DRIFT_READINGS}, got {self.drift!r}")
        gs = self.g_s
        if not 1 <= gs < self.levels:
            raise FederatedError(f"shared levels g_s={gs} must be in [1, levels)")

    @property
    def phase_one_fraction(self) -> float:
        """Share of each party's users spent on Phase I."""
        if self.shared_fraction is not None:
            return float(self.shared_fraction)
        return self.g_s / self.levels

    @property
    def g_s(self) -> int:
        """Shared trie depth ``g_s = floor(0.25 g)`` unless given."""
        return self.shared_levels if self.shared_levels is not None else max(1, self.levels // 4)

    @property
    def fixed_t(self) -> int | None:
        """The fixed extension number (``"k"`` or an integer rule), else ``None``."""
        if self.extension == "k":
            return self.k
        return None if self.extension in ("adaptive", "floor") else int(self.extension)

    def t_for(self, level: LevelResult) -> int:
        """Extension number for a level under :attr:`extension` (at most the level's
        domain size, at least 1)."""
        fixed = self.fixed_t
        if fixed is not None:
            return fixed
        ranked = np.sort(level.freqs)[::-1]
        t = max(1, extension_number(ranked, self.k, level.sigma, self.drift,
                                    max(1, int(level.n_users))))
        if self.extension == "floor":
            t = min(int(level.freqs.size), max(t, self.k))
        return t


@dataclass
class Communication:
    """(prefix, count) pairs a party exchanged with the server."""

    uploaded_pairs: int = 0
    downloaded_pairs: int = 0

    def bits(self, item_bits: int) -> dict[str, int]:
        b = item_bits + COUNT_BITS
        return {"uploaded_pairs": self.uploaded_pairs, "downloaded_pairs": self.downloaded_pairs,
                "upload_bits": self.uploaded_pairs * b, "download_bits": self.downloaded_pairs * b}


@dataclass
class PartyReport:
    """What one party uploaded at the end and what it cost.

    Attributes:
        name: party name.
        heavy_hitters: local heavy hitters ``C_g^i`` (most frequent first).
        counts: their estimated counts in the party (``f_hat * |U^i|``).
        communication: pairs exchanged with the server.
        report_counts: reports per user (every entry 0 or 1).
        kept_per_level: number of prefixes extended at each level (``t``).
        pruned_per_level: TAPS: candidates removed from the domain, per level.
        pruned_prefixes: TAPS: the consensus pruning set ``hat Lambda_h`` per level
            (prefixes of the previous party's lists; not all need be in the domain).
    """

    name: str
    heavy_hitters: np.ndarray
    counts: np.ndarray
    communication: Communication
    report_counts: np.ndarray
    kept_per_level: list[int] = field(default_factory=list)
    pruned_per_level: dict[int, int] = field(default_factory=dict)
    pruned_prefixes: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class FederatedResult:
    """Outcome of one run.

    Attributes:
        mechanism: "tap", "taps", "fedpem", "gtf" or "pem".
        heavy_hitters: the released global top-k, most frequent first.
        scores: the server's aggregate score for each (estimated counts, or votes for GTF).
        parties: per-party reports.
        seconds: wall time of the run.
        shared_prefixes: TAP/TAPS Phase I broadcast ``C_{g_s}`` (empty otherwise).
    """

    mechanism: str
    heavy_hitters: np.ndarray
    scores: np.ndarray
    parties: list[PartyReport]
    seconds: float
    bits: int
    shared_prefixes: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))

    def communication(self) -> dict[str, dict[str, int]]:
        """Per-party communication in pairs and bits (Table 1)."""
        return {p.name: p.communication.bits(self.bits) for p in self.parties}

    def max_reports_per_user(self) -> int:
        """The largest number of reports any user sent (must be 1)."""
        return int(max(int(p.report_counts.max()) for p in self.parties))


def aggregate_counts(items: Sequence[np.ndarray], counts: Sequence[np.ndarray],
                     k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum counts of identical items over parties and return the top ``k``.

    Ties are broken by the smaller item id (deterministic).
    """
    if not items:
        return np.empty(0, dtype=np.uint64), np.empty(0)
    allv = np.concatenate([np.asarray(i, dtype=np.uint64) for i in items])
    allc = np.concatenate([np.asarray(c, dtype=float) for c in counts])
    if allv.size == 0:
        return allv, allc
    uniq, inv = np.unique(allv, return_inverse=True)
    tot = np.bincount(inv, weights=allc, minlength=uniq.size)
    order = np.lexsort((uniq, -tot))[:k]
    return uniq[order], tot[order]


def make_sessions(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
                  transport: Transport | None = None) -> list[PartySession]:
    """One :class:`PartySession` per party, each with its own child generator, all
    carrying their oracle rounds over ``transport`` (default: plaintext).

    Raises:
        FederatedError: never for a valid population (kept for the interface).
    """
    seeds = rng.spawn(len(pop.parties))
    return [PartySession(p, pop.bits, cfg.epsilon, cfg.oracle, r, transport)
            for p, r in zip(pop.parties, seeds)]


def timer() -> float:
    """Wall clock for the ``seconds`` of a result."""
    return time.perf_counter()
