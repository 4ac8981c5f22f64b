"""FedPEM (Zhang, Ye, Hu 2024, Algorithm 1) and the GTF baseline.

FedPEM: every party runs PEM (Wang, Li, Jha, TDSC 2019) on its own users -- ``g``
disjoint random groups, group ``h`` reports its ``l_h``-bit prefix over
``Lambda_h = C_{h-1} x {0,1}^(l_h - l_{h-1})`` and the top ``t = k`` prefixes are
extended -- and uploads its local top-k items with their estimated counts
``f_hat * |U^i|``. The server sums the counts per item and releases the top k.

GTF: the LDP variant of Shao, Han, He, Luo (2023) used as a baseline in Zhang, Ye, Hu 2024: the
authors' GRR-X (a random item X added to the domain from the user's own data, which
breaks LDP) is replaced by k-RR with a dummy item for out-of-domain prefixes. Zhang, Ye, Hu
say only that GTF is hierarchical (local heavy hitters, then global ones), costs
``O(b k |P|)`` communication like FedPEM (Table 1), filters noisy items, and "ignores the
impacts of different quantities across parties". We therefore model it as: each party
runs the same per-party trie, uploads its local top-k items with their estimated
*frequencies* (not counts), and the server ranks items by the number of parties that
report them and then by the sum of those frequencies, i.e. without weighting parties by
their population. This inference is documented in docs/federated.md.
"""
from __future__ import annotations

import numpy as np

from protocol.core.contract import Transport

from .common import (Communication, FederatedConfig, FederatedResult, PartyReport,
                     aggregate_counts, make_sessions, timer)
from mechanisms.prefix_tree.levels import PartySession, level_lengths, top_indices, walk_levels
from .parties import Population, split_sizes

__all__ = ["fedpem", "gtf", "fedpem_and_gtf", "local_pem"]


def local_pem(session: PartySession, bits: int,
              cfg: FederatedConfig) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """PEM inside one party with all its users.

    Returns:
        ``(top-k items, their frequency estimates, t per level)``.

    Raises:
        FederatedError: if the party has fewer users than levels.
    """
    lengths = level_lengths(bits, cfg.levels)
    sizes = split_sizes(session.size, np.ones(len(lengths)))
    t_fixed = cfg.fixed_t or cfg.k  # PEM: t = k unless a fixed t is asked for
    res, _, ts = walk_levels(session, lengths, list(sizes), None, 0, lambda r: t_fixed)
    top = top_indices(res.freqs, cfg.k)
    return res.domain[top], res.freqs[top], ts


def _local_pem_everywhere(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
                          transport: Transport | None
                          ) -> tuple[list[np.ndarray], list[np.ndarray], list[PartyReport]]:
    """Run PEM in every party: its top-k items, their estimated frequencies and its
    report (estimated counts = frequency x party size)."""
    items, freqs, reports = [], [], []
    for s in make_sessions(pop, cfg, rng, transport):
        hh, f, ts = local_pem(s, pop.bits, cfg)
        items.append(hh)
        freqs.append(f)
        reports.append(PartyReport(s.name, hh, f * s.size,
                                   Communication(uploaded_pairs=int(hh.size)),
                                   s.ledger.counts, ts))
    return items, freqs, reports


def _fedpem_release(pop: Population, cfg: FederatedConfig, items: list[np.ndarray],
                    freqs: list[np.ndarray], reports: list[PartyReport],
                    seconds: float) -> FederatedResult:
    # the paper's section 7.1 says counts, the text of its Algorithm 1 frequencies
    weights = [r.counts for r in reports] if cfg.fedpem_upload == "counts" else freqs
    top, score = aggregate_counts(items, weights, cfg.k)
    return FederatedResult("fedpem", top, score, reports, seconds, pop.bits)


def _gtf_release(pop: Population, cfg: FederatedConfig, items: list[np.ndarray],
                 freqs: list[np.ndarray], reports: list[PartyReport],
                 seconds: float) -> FederatedResult:
    allv = np.concatenate(items)
    uniq, inv = np.unique(allv, return_inverse=True)
    votes = np.bincount(inv, minlength=uniq.size)
    fsum = np.bincount(inv, weights=np.concatenate(freqs), minlength=uniq.size)
    order = np.lexsort((uniq, -fsum, -votes))[:cfg.k]
    score = votes[order] + np.clip(fsum[order], 0, None) / (1.0 + np.abs(fsum).max())
    return FederatedResult("gtf", uniq[order], score, reports, seconds, pop.bits)


def fedpem(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
        transport: Transport | None = None) -> FederatedResult:
    """Run FedPEM (Algorithm 1): PEM per party, the server sums local top-k counts
    (``cfg.fedpem_upload="frequencies"``: their estimated frequencies).

    Each party's oracle rounds travel over ``transport`` (default: plaintext; see
    :class:`~mechanisms.prefix_tree.levels.PartySession`).

    PEM extends a fixed ``t = k`` prefixes per level (``cfg.extension`` is used only when
    it is an integer; ``"adaptive"``, ``"floor"`` and ``"k"`` all mean ``t = k`` here).

    Raises:
        FederatedError: on invalid inputs.
    """
    t0 = timer()
    items, freqs, reports = _local_pem_everywhere(pop, cfg, rng, transport)
    return _fedpem_release(pop, cfg, items, freqs, reports, timer() - t0)


def gtf(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
        transport: Transport | None = None) -> FederatedResult:
    """Run the GTF baseline (see the module docstring for how it was inferred).

    Each party's oracle rounds travel over ``transport`` (default: plaintext; see
    :class:`~mechanisms.prefix_tree.levels.PartySession`).

    Raises:
        FederatedError: on invalid inputs.
    """
    t0 = timer()
    items, freqs, reports = _local_pem_everywhere(pop, cfg, rng, transport)
    return _gtf_release(pop, cfg, items, freqs, reports, timer() - t0)


def fedpem_and_gtf(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
                   transport: Transport | None = None
                   ) -> tuple[FederatedResult, FederatedResult]:
    """FedPEM and GTF from one pass of the per-party tries they share: the same
    releases as ``fedpem`` and ``gtf`` called with generators of the same seed (both
    run :func:`local_pem` in every party and differ only at the server), for half the
    cost. The two are alternatives a deployment chooses between, not one protocol:
    each user still sends one report, which both servers read. Both results carry the
    whole pass's time.

    Raises:
        FederatedError: on invalid inputs.
    """
    t0 = timer()
    items, freqs, reports = _local_pem_everywhere(pop, cfg, rng, transport)
    seconds = timer() - t0
    return (_fedpem_release(pop, cfg, items, freqs, reports, seconds),
            _gtf_release(pop, cfg, items, freqs, reports, seconds))
