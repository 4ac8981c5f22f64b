"""The one prefix-tree engine of TrieHH, TrieHH++ (and its quantiles), PEM and TAP/TAPS.

Every trie-based heavy-hitter mechanism here discovers frequent prefixes one level at a
time: the server publishes the candidates (the kept prefixes of the previous level,
each extended by every unit), a fresh group of clients contributes for the candidate
that is its own prefix (a vote, an LDP report) through an aggregation transport, and
the released candidates become the next frontier. That step -- the candidate set
``frontier x units`` and the mapping of a user's prefix to its candidate index -- is
written once, in :mod:`mechanisms.prefix_tree.core`; the two modules below key the
frontier differently and drive it:

* :mod:`mechanisms.prefix_tree.trie`: variable-length strings split into units of a
  public alphabet (TrieHH, Zhu et al. AISTATS 2020; TrieHH++, Cormode 2021; the
  quantile sketch), nodes kept as parallel arrays with node pointers
  (:class:`PrefixTrie`, :class:`UnitAlphabet`, :class:`Candidates`);
* :mod:`mechanisms.prefix_tree.levels`: fixed-length bit strings (PEM, Wang, Li, Jha,
  TDSC 2019; FedPEM, GTF, TAP and TAPS, Zhang, Ye, Hu), where a node *is* its prefix
  and a child is ``prefix << s | unit``, so candidate sets are sorted integer arrays
  (:func:`construct`), with the one-report-per-user bookkeeping
  (:class:`PartySession`, :class:`UserPool`, :class:`ReportLedger`) and the level walk
  (:func:`walk_levels`).
"""
from __future__ import annotations

from .core import extend, position_in, product_index, subset_index
from .levels import (ORACLES, LevelError, LevelResult, Party, PartySession, PrivacyBudgetError,
                     ReportLedger, UserPool, construct, level_lengths, make_oracle,
                     prefixes, split_sizes, top_indices, walk_levels)
from .trie import (DEFAULT_MAX_CANDIDATES, NO_NODE, NO_UNIT, ROOT, Candidates, CandidateSetTooLarge, PrefixTreeError,
                   PrefixTrie, UnitAlphabet)

__all__ = [
    "DEFAULT_MAX_CANDIDATES", "NO_UNIT", "NO_NODE", "ROOT", "PrefixTreeError", "CandidateSetTooLarge", "UnitAlphabet",
    "Candidates", "PrefixTrie",
    "ORACLES", "LevelError", "LevelResult", "Party", "PartySession", "PrivacyBudgetError",
    "ReportLedger", "UserPool", "construct", "level_lengths", "make_oracle",
    "prefixes", "split_sizes", "top_indices", "walk_levels",
    "extend", "position_in", "product_index", "subset_index",
]
