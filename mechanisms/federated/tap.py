"""TAP and TAPS: target-aligning prefix trees (Zhang, Ye, Hu 2024, sections 5-6).

TAP (Algorithm 3)
-----------------
Phase I, shared shallow trie (Algorithm 2): in every party the first
``g_s = floor(0.25 g)`` of ``g`` equal disjoint user groups (or, optionally, a share
``shared_fraction`` of the users split into ``g_s`` groups) estimate the first
``g_s`` levels with adaptive extension. Each party sends the level-``g_s`` candidates with
positive estimated counts (``f_hat * |U^i|``) to the server, which sums them and
broadcasts the global top-k prefixes ``C_{g_s}``.

Phase II: the remaining users of each party, split into ``g - g_s`` groups, extend
``C_{g_s}`` level by level (``Construct``/``Estimate`` with adaptive extension) up to the
full ``m`` bits. Each party uploads its level-``g`` candidates ``C_g^i`` (the top ``t``)
with estimated counts; the server sums them and releases the top k.

TAPS (Algorithm 4)
------------------
Phase I as in TAP. Phase II runs party after party in decreasing population order.
At the pruning levels (the first and the last ``g_s`` levels of Phase II) party
``P_{i-1}`` hands the server, through ``D_{i-1}[h]`` (equation 4), its ``2k`` least
frequent candidates ``Delta_{h,0}`` (ascending) and its ``2k`` most frequent candidates with
their frequencies ``Delta_{h,1}``. Party ``P_i`` (``i > 1``) takes two validation sets of
``beta |U_h^i|`` users each (``beta = 0.1``), which estimate the frequencies of
``Delta_{h,0}`` and ``Delta_{h,1}`` (giving ``hat Delta_{h,0}``, ``hat Delta_{h,1}``
sorted ascending), and prunes from its domain

* ``hat Lambda_{h,0} = Delta_{h,0}[:k'] ∩ hat Delta_{h,0}[:k']`` (equation 6), ``k'`` in
  ``1..k`` maximising (equation 5)
  ``|hat Lambda| / (k' (1 + epsilon)^k') - gamma alpha^2`` with
  ``gamma = (1 - |U^{i-1}| / sum_j |U^j|)^2`` and ``alpha = (k' - |hat Lambda| + 1)/(k' + 1)``;
* ``hat Lambda_{h,1} = hat Delta_{h,c}[:k'] ∩ hat Delta_{h,1}[:k']`` (equation 8) with
  ``hat Delta_{h,c}`` the prefixes of ``Delta_{h,1}`` sorted by decreasing contrast score
  ``phi = f_{i-1} / (f_i + tau)`` (equation 7), ``k'`` again from equation 5.

The remaining ``(1 - 2 beta)`` of the level's users estimate the pruned domain.
Validation users report once, over the candidate list they validate (plus the dummy
item), so every user still sends exactly one epsilon-LDP report (Theorem 6.1).
"""
from __future__ import annotations

import math

import numpy as np

from protocol.core.contract import Transport

from .common import (Communication, FederatedConfig, FederatedResult, PartyReport,
                     aggregate_counts, make_sessions, timer)
from mechanisms.prefix_tree.core import subset_index
from mechanisms.prefix_tree.levels import (PartySession, construct, level_lengths, prefixes,
                                           top_indices, walk_levels)
from .parties import FederatedError, Population, split_sizes

__all__ = ["tap", "taps", "shared_shallow_trie", "consensus_set", "pruning_levels",
           "pruning_stats"]


def shared_shallow_trie(sessions: list[PartySession], bits: int, cfg: FederatedConfig,
                        comms: list[Communication]) -> tuple[np.ndarray, list[list[int]]]:
    """Phase I (Algorithm 2): the global top-k prefixes ``C_{g_s}``.

    Returns:
        ``(C_{g_s} sorted by decreasing aggregated count, t per level for each party)``.

    Raises:
        FederatedError: if a party has fewer Phase I users than shared levels.
    """
    lengths = level_lengths(bits, cfg.levels)[:cfg.g_s]
    items, counts, ts_all = [], [], []
    for s, comm in zip(sessions, comms):
        n1 = int(round(cfg.phase_one_fraction * s.size))
        if n1 < len(lengths):
            need = math.ceil(len(lengths) / cfg.phase_one_fraction)
            while need > 1 and round(cfg.phase_one_fraction * (need - 1)) >= len(lengths):
                need -= 1
            raise FederatedError(f"party {s.name!r} is too small for {len(lengths)} shared "
                                 f"levels: it has {s.size:,} users, {n1:,} of them in Phase I; "
                                 f"it needs at least {need:,} users")
        sizes = split_sizes(n1, np.ones(len(lengths)))
        res, _, ts = walk_levels(s, lengths, list(sizes), None, 0, cfg.t_for)
        pos = res.freqs > 0
        items.append(res.domain[pos])
        counts.append(res.freqs[pos] * s.size)
        comm.uploaded_pairs += int(pos.sum())
        ts_all.append(ts)
    top, _ = aggregate_counts(items, counts, cfg.k)
    for comm in comms:
        comm.downloaded_pairs += int(top.size)
    return top, ts_all


def _phase_two_sizes(remaining: int, n_levels: int) -> list[int]:
    return list(split_sizes(remaining, np.ones(n_levels)))


def tap(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
        transport: Transport | None = None) -> FederatedResult:
    """Run TAP (Algorithm 3).

    Each party's oracle rounds travel over ``transport`` (default: plaintext; see
    :class:`~mechanisms.prefix_tree.levels.PartySession`).

    With ``cfg.shared_trie = False`` Phase I is skipped and every party runs all ``g``
    levels on all its users (the "w/o shared trie" ablation).

    Raises:
        FederatedError: on invalid inputs.
    """
    t0 = timer()
    sessions = make_sessions(pop, cfg, rng, transport)
    comms = [Communication() for _ in sessions]
    lengths = level_lengths(pop.bits, cfg.levels)
    if cfg.shared_trie:
        c_gs, ts1 = shared_shallow_trie(sessions, pop.bits, cfg, comms)
        start, kept0, prev = cfg.g_s, c_gs, lengths[cfg.g_s - 1]
    else:
        c_gs, ts1 = np.empty(0, dtype=np.uint64), [[] for _ in sessions]
        start, kept0, prev = 0, None, 0
    items, counts, reports = [], [], []
    for s, comm, t1 in zip(sessions, comms, ts1):
        sizes = _phase_two_sizes(s.pool.remaining, len(lengths) - start)
        res, kept, ts = walk_levels(s, lengths[start:], sizes, kept0, prev, cfg.t_for)
        top = top_indices(res.freqs, kept.size)
        hh, c = res.domain[top], res.freqs[top] * s.size
        comm.uploaded_pairs += int(hh.size)
        items.append(hh)
        counts.append(c)
        reports.append(PartyReport(s.name, hh, c, comm, s.ledger.counts, t1 + ts))
    top, score = aggregate_counts(items, counts, cfg.k)
    return FederatedResult("tap", top, score, reports, timer() - t0, pop.bits, c_gs)


def pruning_levels(cfg: FederatedConfig) -> set[int]:
    """1-based levels where TAPS prunes: the first and the last ``g_s`` levels of Phase II.

    Algorithm 4 (line 10) writes ``g - g_s <= h <= g or g_s + 1 <= h <= 2 g_s``; the proof
    of Theorem 6.1 says "the first and last g_s levels". We take ``g_s`` levels at each
    end (``g - g_s + 1 .. g``); see docs/federated.md.
    """
    g, gs = cfg.levels, cfg.g_s
    first = set(range(gs + 1, min(2 * gs, g) + 1))
    last = set(range(max(g - gs + 1, gs + 1), g + 1))
    return first | last


def consensus_set(a: np.ndarray, b: np.ndarray, k: int, epsilon: float,
                  gamma: float, prune_negative: bool = True) -> tuple[np.ndarray, int]:
    """Equations 5/6 (and 8): the consensus pruning set of two ranked prefix lists.

    Args:
        a, b: ranked prefix lists (most prunable first).
        k: the query size (``k'`` ranges over ``1..k``).
        epsilon: the privacy budget in ``(1 + epsilon)^k'``.
        gamma: the population-confidence factor.
        prune_negative: return the best set even when its score is not positive (as
            printed); False returns the empty set then (``k' = 0``).

    Returns:
        ``(a[:k'] ∩ b[:k'] in the order of a, k')`` for the maximising ``k'`` (the smallest
        on ties).
    """
    best, best_kp, best_set = -np.inf, 0, np.empty(0, dtype=np.uint64)
    limit = min(k, len(a), len(b))
    for kp in range(1, limit + 1):
        sb = set(int(x) for x in b[:kp])
        inter = [x for x in a[:kp] if int(x) in sb]
        n = len(inter)
        alpha = (kp - n + 1) / (kp + 1)
        score = n / (kp * (1.0 + epsilon) ** kp) - gamma * alpha ** 2
        if score > best:
            best, best_kp, best_set = score, kp, np.asarray(inter, dtype=np.uint64)
    if not prune_negative and best <= 0:
        return np.empty(0, dtype=np.uint64), 0
    return best_set, best_kp


def taps(pop: Population, cfg: FederatedConfig, rng: np.random.Generator,
        transport: Transport | None = None) -> FederatedResult:
    """Run TAPS (Algorithm 4): TAP with sequential Phase II and consensus-based pruning.

    Each party's oracle rounds travel over ``transport`` (default: plaintext; see
    :class:`~mechanisms.prefix_tree.levels.PartySession`).

    Raises:
        FederatedError: on invalid inputs.
    """
    t0 = timer()
    order = np.argsort(-pop.sizes, kind="stable")
    sessions_all = make_sessions(pop, cfg, rng, transport)
    sessions = [sessions_all[i] for i in order]
    comms = [Communication() for _ in sessions]
    lengths = level_lengths(pop.bits, cfg.levels)
    g = cfg.levels
    total = float(pop.total_users)
    if cfg.shared_trie:
        c_gs, ts1 = shared_shallow_trie(sessions, pop.bits, cfg, comms)
        start = cfg.g_s
    else:
        c_gs, ts1 = np.empty(0, dtype=np.uint64), [[] for _ in sessions]
        start = 0
    prune_at = pruning_levels(cfg)
    prev_dict: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    prev_size = 0
    items, counts, reports = [], [], []
    two_k = 2 * cfg.k
    for i, (s, comm, t1) in enumerate(zip(sessions, comms, ts1)):
        sizes = _phase_two_sizes(s.pool.remaining, g - start)
        kept = c_gs if cfg.shared_trie else None
        prev_len = lengths[start - 1] if cfg.shared_trie else 0
        gamma = (1.0 - prev_size / total) ** 2
        cur_dict: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        ts, pruned_log, pruned_sets = [], {}, {}
        res = None
        for h, n_h in zip(range(start + 1, g + 1), sizes):
            length = lengths[h - 1]
            # the root (the empty prefix) extended by every unit at the first level
            domain = (construct(np.zeros(1, dtype=np.uint64), 0, length) if kept is None
                      else construct(kept, prev_len, length))
            n_main = n_h
            if h in prune_at and i > 0 and h in prev_dict:
                low, high, high_f = prev_dict[h]
                share = cfg.prune_ratio if cfg.validation == "each" else cfg.prune_ratio / 2
                n_val = int(round(share * n_h))
                if n_val >= 1 and n_h - 2 * n_val >= 1:
                    comm.downloaded_pairs += int(low.size + high.size)
                    v0 = s.estimate(s.take(n_val), length, np.sort(low))
                    v1 = s.estimate(s.take(n_val), length, np.sort(high))
                    f0 = v0.freqs[subset_index(v0.domain, low, assume_sorted=True)]
                    f1 = v1.freqs[subset_index(v1.domain, high, assume_sorted=True)]
                    hat0 = low[np.argsort(f0, kind="stable")]  # ascending in P_i
                    hat1 = high[np.argsort(f1, kind="stable")]
                    lam0, _ = consensus_set(low, hat0, cfg.k, cfg.epsilon, gamma,
                                            cfg.prune_negative)
                    phi = high_f / (np.clip(f1, 0.0, None) + cfg.tau)
                    hat_c = high[np.argsort(-phi, kind="stable")]
                    lam1, _ = consensus_set(hat_c, hat1, cfg.k, cfg.epsilon, gamma,
                                            cfg.prune_negative)
                    pruned = np.union1d(lam0, lam1)
                    pruned_sets[h] = pruned
                    keep_mask = ~np.isin(domain, pruned)
                    if keep_mask.any():
                        pruned_log[h] = int((~keep_mask).sum())
                        domain = domain[keep_mask]
                    n_main = n_h - 2 * n_val
            res = s.estimate(s.take(n_main), length, domain)
            t = cfg.t_for(res)
            ts.append(int(t))
            ranked = top_indices(res.freqs, res.freqs.size)
            kept = res.domain[ranked[:t]]
            prev_len = length
            if h in prune_at and i < len(sessions) - 1:
                asc = ranked[::-1][:two_k]
                desc = ranked[:two_k]
                cur_dict[h] = (res.domain[asc], res.domain[desc], res.freqs[desc])
                comm.uploaded_pairs += int(asc.size + desc.size)
        assert res is not None
        top = top_indices(res.freqs, kept.size)
        hh, c = res.domain[top], res.freqs[top] * s.size
        comm.uploaded_pairs += int(hh.size)
        items.append(hh)
        counts.append(c)
        reports.append(PartyReport(s.name, hh, c, comm, s.ledger.counts, t1 + ts, pruned_log,
                                   pruned_sets))
        prev_dict, prev_size = cur_dict, s.size
    # report parties in the population's order
    back = np.argsort(order)
    reports = [reports[j] for j in back]
    top, score = aggregate_counts(items, counts, cfg.k)
    return FederatedResult("taps", top, score, reports, timer() - t0, pop.bits, c_gs)


def pruning_stats(res: FederatedResult, truth: np.ndarray, levels: int) -> dict[str, float]:
    """What TAPS's pruning did in one run, against the true global top-k ``truth``.

    Over every (party, level) where a party pruned: ``levels`` (how many), the mean
    number of candidates removed from the domain (``removed_per_level``), and the mean
    number of prefixes of a true global top-k item in the consensus pruning set
    (``true_prefixes_per_level``; the set may hold prefixes outside the domain, so this
    can exceed what was removed). ``levels`` is the run's granularity ``g``.
    """
    lengths = level_lengths(res.bits, levels)
    n, removed, true_hits = 0, 0, 0
    for party in res.parties:
        for h, count in party.pruned_per_level.items():
            true_prefixes = np.unique(prefixes(np.asarray(truth, dtype=np.uint64), res.bits,
                                               lengths[h - 1]))
            pruned = party.pruned_prefixes.get(h, np.empty(0, dtype=np.uint64))
            n += 1
            removed += count
            true_hits += int(np.isin(pruned, true_prefixes).sum())
    return {"levels": n, "removed_per_level": round(removed / n, 3) if n else 0.0,
            "true_prefixes_per_level": round(true_hits / n, 3) if n else 0.0}
