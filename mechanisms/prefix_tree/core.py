"""The prefix-tree engine's core: candidate sets and where a user's prefix falls in one.

Every trie-based mechanism of the project (TrieHH, TrieHH++ and its quantiles over unit
strings; PEM, FedPEM, GTF, TAP and TAPS over fixed-length bit strings) runs the same
level step: the server extends a *frontier* of kept prefixes by every *unit* of the
next level, publishes that candidate set, and each user maps the prefix of her item at
that level to a candidate index (or to none). This module holds that step once:

* :func:`extend` -- the candidate set ``frontier x units`` in row-major order: candidate
  ``j = i * U + u`` extends frontier entry ``i`` by unit ``u``.
* :func:`position_in` -- where each query key sits in an array of keys (``-1`` if
  absent), by one sort and one binary search (no per-key Python loop).
* :func:`product_index` -- a user's candidate index in a full product
  ``frontier x units``: ``position_in(frontier, parent) * U + unit``, or ``-1``.
* :func:`subset_index` -- the index of each key in an arbitrary candidate key array
  (a product some candidates were removed from, or a union), or ``-1``.

The two item shapes differ only in what a frontier key is:

* unit strings (:mod:`mechanisms.prefix_tree.trie`): a key is a node id of
  :class:`~mechanisms.prefix_tree.trie.PrefixTrie`, the units are the alphabet's unit
  ids (``V`` of them at every level);
* bit strings (:mod:`mechanisms.prefix_tree.levels`): a key is the prefix itself, an
  ``l_{h-1}``-bit integer, and the units of level ``h`` are the ``2^s`` patterns of its
  ``s = l_h - l_{h-1}`` new bits. Because the frontier is kept sorted, the product's
  row-major order is the numeric order of the extended prefixes
  ``(parent << s) | unit``, so a bit-string candidate set is a sorted ``uint64`` array
  of prefixes and the candidate index of a prefix is its rank in it.

Keys may be any integer dtype (``int64`` node ids, ``uint64`` prefixes up to 64 bits);
nothing here casts one into the other.
"""
from __future__ import annotations

import numpy as np

__all__ = ["extend", "position_in", "product_index", "subset_index"]


def extend(frontier: np.ndarray, num_units: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidate set ``frontier x range(num_units)`` in row-major order.

    Returns:
        ``(parents, units)``: ``parents[j] = frontier[j // U]`` (same dtype as
        ``frontier``) and ``units[j] = j % U`` (``int64``).
    """
    frontier = np.asarray(frontier)
    parents = np.repeat(frontier, num_units)
    units = np.tile(np.arange(num_units, dtype=np.int64), frontier.size)
    return parents, units


def position_in(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Position of each ``query`` key in the array ``keys`` (any order), ``-1`` if absent.

    ``keys`` should hold distinct values; for a repeated key one of its positions is
    returned.
    """
    keys = np.asarray(keys)
    query = np.asarray(query)
    if keys.size == 0:
        return np.full(query.shape, -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    j = np.minimum(np.searchsorted(sk, query), sk.size - 1)
    return np.where(sk[j] == query, order[j], -1).astype(np.int64, copy=False)


def product_index(frontier: np.ndarray, num_units: int, parents: np.ndarray,
                  units: np.ndarray) -> np.ndarray:
    """Candidate index of each ``(parent, unit)`` pair in the full product
    ``frontier x range(num_units)`` (:func:`extend`), ``-1`` when the parent is not in
    the frontier or the unit is negative (``NO_UNIT``) or out of range.

    ``parents`` and ``units`` are equally shaped; ``units`` are integers.
    """
    units = np.asarray(units, dtype=np.int64)
    pos = position_in(frontier, parents)
    ok = (pos >= 0) & (units >= 0) & (units < num_units)
    return np.where(ok, pos * num_units + units, -1).astype(np.int64, copy=False)


def subset_index(candidate_keys: np.ndarray, keys: np.ndarray, *,
                 assume_sorted: bool = False) -> np.ndarray:
    """Index of each key in ``candidate_keys`` (distinct values), ``-1`` if absent.

    ``assume_sorted=True`` skips the sort when ``candidate_keys`` is ascending (a
    bit-string candidate set always is), so the lookup is one binary search.
    """
    if not assume_sorted:
        return position_in(candidate_keys, keys)
    cand = np.asarray(candidate_keys)
    keys = np.asarray(keys)
    if cand.size == 0:
        return np.full(keys.shape, -1, dtype=np.int64)
    j = np.minimum(np.searchsorted(cand, keys), cand.size - 1)
    return np.where(cand[j] == keys, j, -1).astype(np.int64, copy=False)
