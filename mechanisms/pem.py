"""PEM: the prefix extending method for heavy hitters under local differential privacy.

Wang, Li, Jha, "Locally differentially private heavy hitter identification", IEEE TDSC
2019 (and Zhang, Ye, Hu 2024, section 3.3, which uses it inside every party as FedPEM).

Theory of operation
-------------------
Items are ``m``-bit strings. The users are split uniformly at random into ``g``
disjoint groups; group ``h`` is responsible for prefixes of ``l_h`` bits
(``l_h = ceil(h m / g)`` by default, or an explicit increasing list of lengths). The
first group's candidate domain is every ``l_1``-bit string; afterwards

    Lambda_h = C_{h-1} x {0,1}^(l_h - l_{h-1})

where ``C_{h-1}`` are the ``t`` candidates with the largest estimated frequency at level
``h - 1`` (``t = k`` in PEM). Each user of group ``h`` sends one frequency-oracle report
(GRR, OUE, OLH or AoN from :mod:`mechanisms.fo`) of her ``l_h``-bit prefix, mapped to a
dummy item when it is not a candidate; the server estimates every candidate's
frequency with the oracle's unbiased estimator. The top ``k`` of the last level are the
heavy hitters.

Privacy: a user reports exactly once, with an epsilon-LDP oracle, over a domain that
depends only on earlier groups' sanitised reports, so PEM is epsilon-LDP (post-processing;
the group of a user is chosen independently of her item). The one-report rule is
enforced by a ledger (:class:`mechanisms.prefix_tree.levels.ReportLedger`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from protocol.core.contract import Transport

from .federated.parties import FederatedError
from .prefix_tree.levels import (LevelResult, Party, PartySession, level_lengths, split_sizes,
                                 top_indices, walk_levels)
from .privacy import PrivacyGuarantee, local_guarantee

__all__ = ["PEMResult", "pem", "pem_privacy"]


@dataclass
class PEMResult:
    """Outcome of one PEM run.

    Attributes:
        heavy_hitters: the top-k items, most frequent first.
        frequencies: their estimated frequencies (fractions of the last group).
        counts: estimated counts in the whole population (``f_hat * n``).
        lengths: prefix length of every level.
        group_sizes: users per level.
        report_counts: reports per user (every entry must be 1).
        last_level: the last level's full estimate.
    """

    heavy_hitters: np.ndarray
    frequencies: np.ndarray
    counts: np.ndarray
    lengths: list[int]
    group_sizes: list[int]
    report_counts: np.ndarray
    last_level: LevelResult
    extension: list[int] = field(default_factory=list)


def pem(items: np.ndarray, bits: int, k: int, epsilon: float, *, oracle: str = "grr",
        levels: int | None = None, lengths: Sequence[int] | None = None,
        extension: int | None = None, rng: np.random.Generator,
        transport: Transport | None = None) -> PEMResult:
    """Run PEM on one population of ``bits``-bit items.

    Args:
        items: one unsigned item per user (below ``2**bits``).
        bits: item length ``m``.
        k: number of heavy hitters.
        epsilon: per-report privacy budget.
        oracle: "grr", "oue", "olh" or "aon" (any name known to
            :func:`mechanisms.prefix_tree.levels.make_oracle`).
        levels: number of groups ``g`` (default ``m / 2``: 2-bit steps).
        lengths: explicit increasing prefix lengths ending at ``bits`` (overrides
            ``levels``), e.g. start at ``ceil(log2 k)`` bits as in Wang et al.
        extension: prefixes kept per level (default ``k``).
        rng: randomness for grouping and for the users' coins.
        transport: carries each level's reports to the server (default: plaintext);
            any transport whose kinds fit the oracle (reports: plaintext, shuffler;
            support vectors: secure aggregation). The release is the same on every
            transport for the same ``rng`` (the transport's randomness is spawned
            from ``rng`` without drawing from it).

    Raises:
        FederatedError: on invalid parameters, or reports the transport cannot carry.
        protocol.core.contract.AggregationAborted: the transport aborted a level.
    """
    if k < 1:
        raise FederatedError("k must be >= 1")
    if lengths is None:
        lengths = level_lengths(bits, levels if levels is not None else max(1, bits // 2))
    lengths = [int(x) for x in lengths]
    if any(b <= a for a, b in zip(lengths, lengths[1:])) or lengths[-1] != bits or lengths[0] < 1:
        raise FederatedError("lengths must increase strictly from >= 1 and end at bits")
    if lengths[0] > 22:
        raise FederatedError("the first level may have at most 22 bits")
    party = Party("pem", np.asarray(items))
    if party.size < len(lengths):
        raise FederatedError(f"{party.size} users cannot fill PEM's {len(lengths)} groups "
                             f"(one per level); PEM with {len(lengths)} levels needs at "
                             f"least {len(lengths)} users")
    if bits < 64 and np.any(party.items >= np.uint64(1) << np.uint64(bits)):
        raise FederatedError(f"an item has more than {bits} bits")
    session = PartySession(party, bits, epsilon, oracle, rng, transport)
    sizes = [int(s) for s in split_sizes(party.size, np.ones(len(lengths)))]
    t = k if extension is None else int(extension)
    if t < 1:
        raise FederatedError("extension must be >= 1")
    res, _, ts = walk_levels(session, lengths, sizes, None, 0, lambda r: t)
    top = top_indices(res.freqs, k)
    return PEMResult(res.domain[top], res.freqs[top], res.freqs[top] * party.size, lengths,
                     sizes, session.ledger.counts, res, ts)


def pem_privacy(epsilon: float, oracle: str = "grr") -> PrivacyGuarantee:
    """PEM's guarantee: pure epsilon-LDP per user (one report each, disjoint groups).

    Raises:
        FederatedError: if epsilon is not positive.
    """
    if not epsilon > 0:
        raise FederatedError("epsilon must be > 0")
    return local_guarantee("pem", float(epsilon), "Wang, Li, Jha, TDSC 2019: one epsilon-LDP "
                           "report per user, disjoint groups", {"oracle": oracle})
