"""Tests of the shared prefix-tree engine (mechanisms/prefix_tree.py)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms.prefix_tree import (
    NO_NODE, NO_UNIT, CandidateSetTooLarge, PrefixTreeError, PrefixTrie,
    UnitAlphabet,
)


def test_unit_alphabet_counts_and_labels() -> None:
    a1 = UnitAlphabet("abc", 1)
    assert a1.labels == ("a", "b", "c", "$")
    assert a1.num_units == 4
    assert a1.terminal.tolist() == [False, False, False, True]
    a2 = UnitAlphabet("ab", 2)
    # full units, then one letter + EOS, then EOS alone
    assert a2.labels == ("aa", "ab", "ba", "bb", "a$", "b$", "$")
    assert a2.num_units == 4 + 2 + 1
    a3 = UnitAlphabet("abcde", 3)
    assert a3.num_units == 125 + 25 + 5 + 1
    assert len(set(a3.labels)) == a3.num_units


@pytest.mark.parametrize("u", [1, 2, 3, 4])
def test_encode_decode_round_trip(u: int) -> None:
    alpha = UnitAlphabet("abcxyz'", u)
    words = ["", "a", "ab", "abc", "abcx", "zyx'a", "xyzxyzx"]
    L = 8
    um = alpha.encode(words, L)
    assert um.shape == (len(words), L)
    for w, row in zip(words, um):
        units = [int(x) for x in row if x != NO_UNIT]
        assert len(units) == (len(w) + u) // u == alpha.units_needed(len(w))
        assert alpha.decode(units) == w + "$"
        # positions after the end are NO_UNIT, never a unit
        assert all(x == NO_UNIT for x in row[len(units):])


def test_encode_specific_units() -> None:
    a = UnitAlphabet("abc", 2)
    um = a.encode(["abc", "ab", "a"], 3)
    lab = a.labels
    assert [lab[x] for x in um[0][:2]] == ["ab", "c$"]
    assert [lab[x] for x in um[1][:2]] == ["ab", "$"]
    assert [lab[x] for x in um[2][:1]] == ["a$"]
    assert um[0][2] == NO_UNIT and um[1][2] == NO_UNIT and um[2][1] == NO_UNIT


def test_encode_truncates_long_words_and_rejects_foreign_symbols() -> None:
    a = UnitAlphabet("ab", 1)
    um = a.encode(["abababab", "abz", "b"], 3)
    assert a.decode(um[0]) == "aba"  # truncated, no EOS: never a whole word
    assert (um[1] == NO_UNIT).all()  # 'z' is outside the alphabet
    assert a.decode([x for x in um[2] if x >= 0]) == "b$"


@pytest.mark.parametrize("kwargs, msg", [
    ({"symbols": ""}, "non-empty"),
    ({"symbols": "aba"}, "distinct"),
    ({"symbols": "ab$"}, "EOS"),
    ({"symbols": "ab", "unit_size": 0}, "unit_size"),
    ({"symbols": "ab", "eos": "##"}, "single character"),
    ({"symbols": "abcdefghij", "unit_size": 4, "max_units": 1000}, "max_units"),
])
def test_unit_alphabet_errors(kwargs: dict, msg: str) -> None:
    with pytest.raises(PrefixTreeError, match=msg):
        UnitAlphabet(**kwargs)


def _trie_with(words: list[str], alpha: UnitAlphabet, L: int) -> PrefixTrie:
    t = PrefixTrie(alpha.num_units, alpha.terminal)
    um = alpha.encode(words, L).astype(np.int64)
    for lev in range(L):
        nodes = t.locate(um[:, :lev]) if lev else np.zeros(len(words), dtype=np.int64)
        depth_ok = t.depth[nodes] == lev
        col = um[:, lev]
        ok = depth_ok & (col >= 0)
        if ok.any():
            t.add(nodes[ok], col[ok], np.ones(ok.sum(), dtype=np.int64))
    return t


def test_trie_add_child_frontier_and_labels() -> None:
    a = UnitAlphabet("abc", 1)
    t = _trie_with(["ab", "ac", "b"], a, 4)
    labels = sorted(t.label(i, a.labels) for i in range(1, len(t)))
    assert labels == ["a", "ab", "ab$", "ac", "ac$", "b", "b$"]
    # frontier at depth 2: 'ab', 'ac' (not terminal); depth 3 only terminal nodes
    assert sorted(t.label(i, a.labels) for i in t.frontier(2)) == ["ab", "ac"]
    assert t.frontier(3).size == 0
    assert sorted(t.label(i, a.labels) for i in t.frontier(1)) == ["a", "b"]
    # 'b$' is a depth-2 node but terminal, so it is not in the frontier
    leaves = sorted(t.label(i, a.labels) for i in t.leaves())
    assert leaves == ["ab$", "ac$", "b$"]
    um = a.encode(["ab", "ac", "b", "c", "abc"], 4)
    assert t.contains(um).tolist() == [True, True, True, False, False]
    # adding an existing child is idempotent
    n0 = len(t)
    again = t.add(np.array([0]), um[:1, 0].astype(np.int64), np.array([5]))
    assert len(t) == n0 and again[0] == t.child(np.array([0]), um[:1, 0])[0]


def test_trie_add_errors() -> None:
    a = UnitAlphabet("ab", 1)
    t = PrefixTrie(a.num_units, a.terminal)
    with pytest.raises(PrefixTreeError, match="unknown parent"):
        t.add(np.array([5]), np.array([0]), np.array([1]))
    with pytest.raises(PrefixTreeError, match="out of range"):
        t.add(np.array([0]), np.array([3]), np.array([1]))
    eos = a.labels.index("$")
    (node,) = t.add(np.array([0]), np.array([eos]), np.array([1]))
    with pytest.raises(PrefixTreeError, match="terminal"):
        t.add(np.array([node]), np.array([0]), np.array([1]))
    with pytest.raises(PrefixTreeError, match="equally long"):
        t.add(np.array([0, 0]), np.array([0]), np.array([1]))


def test_candidates_index_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    a = UnitAlphabet("abcd", 2)
    words = ["".join(rng.choice(list("abcd"), rng.integers(1, 6))) for _ in range(60)]
    t = _trie_with(words[:30], a, 2)
    cands = t.extensions(t.frontier(2))
    labels = cands.labels(t, a.labels)
    assert len(labels) == len(set(labels)) == t.frontier(2).size * a.num_units
    # brute force: the length-3 prefix of each word, if its length-2 prefix is a frontier node
    um = a.encode(words, 4).astype(np.int64)
    nodes = np.array([t.child(t.child(np.array([0]), um[i:i + 1, 0]), um[i:i + 1, 1])[0]
                      for i in range(len(words))])
    idx = cands.index_of(t, nodes, um[:, 2])
    for i, w in enumerate(words):
        if idx[i] >= 0:
            assert labels[idx[i]] == a.decode(um[i, :3][um[i, :3] >= 0])
        else:
            assert nodes[i] < 0 or um[i, 2] < 0 or t.is_terminal(np.array([nodes[i]]))[0]
    assert (idx >= 0).sum() > 0


def test_subset_candidates() -> None:
    a = UnitAlphabet("abc", 1)
    t = PrefixTrie(a.num_units, a.terminal)
    t.add(np.array([0, 0]), np.array([0, 1]), np.array([3, 4]))
    c = t.extensions(t.frontier(1), units=np.array([2, 0]))
    assert len(c) == 4 and not c.full_product
    labs = c.labels(t, a.labels)
    assert sorted(labs) == ["aa", "ac", "ba", "bc"]
    idx = c.index_of(t, np.array([1, 2, 1, NO_NODE]), np.array([2, 0, 1, 0]))
    assert labs[idx[0]] == "ac" and labs[idx[1]] == "ba"
    assert idx[2] == -1 and idx[3] == -1


def test_candidate_cap() -> None:
    a = UnitAlphabet("abcdefghij", 2)
    t = PrefixTrie(a.num_units, a.terminal)
    t.add(np.zeros(5, dtype=np.int64), np.arange(5), np.ones(5, dtype=np.int64))
    with pytest.raises(CandidateSetTooLarge, match="max_candidates"):
        t.extensions(t.frontier(1), max_candidates=100)
    assert len(t.extensions(t.frontier(1), max_candidates=5 * a.num_units)) == 5 * a.num_units


def test_position_in_and_child_vectorised() -> None:
    nodes = np.array([9, 3, 5])
    assert PrefixTrie.position_in(nodes, np.array([5, 9, 4, 3])).tolist() == [2, 0, -1, 1]
    a = UnitAlphabet("ab", 1)
    t = PrefixTrie(a.num_units, a.terminal)
    ids = t.add(np.array([0, 0]), np.array([0, 1]), np.array([1, 1]))
    got = t.child(np.array([0, 0, 0, -1, ids[0]]), np.array([0, 1, 2, 0, 0]))
    assert got.tolist() == [ids[0], ids[1], NO_NODE, NO_NODE, NO_NODE]
    # product of all (node, unit) pairs agrees with the path labels
    for node, unit in itertools.product(range(len(t)), range(a.num_units)):
        c = t.child(np.array([node]), np.array([unit]))[0]
        if c >= 0:
            assert t.label(c, a.labels) == t.label(node, a.labels) + a.labels[unit]


@pytest.mark.parametrize("subset", [False, True])
def test_release_indices_maps_labels_back_to_candidates(subset: bool) -> None:
    a = UnitAlphabet("abc", 2)  # unit labels of lengths 2 ("ab"), 2 ("a$") and 1 ("$")
    t = PrefixTrie(a.num_units, a.terminal)
    lab = a.labels
    t.add(np.zeros(2, dtype=np.int64), np.array([lab.index("ab"), lab.index("ca")]),
          np.array([5, 7]))
    units = np.array([lab.index("c$"), lab.index("$"), lab.index("aa")]) if subset else None
    cands = t.extensions(t.frontier(1), units=units)
    labels = cands.labels(t, lab)
    picked = {labels[j]: 10 + j for j in (len(labels) - 1, 0, 2)}
    idx, cnt = cands.release_indices(t, lab, picked)
    assert idx.tolist() == sorted(idx.tolist()) == [0, 2, len(labels) - 1]
    assert [labels[j] for j in idx] == [labels[0], labels[2], labels[-1]]
    assert cnt.tolist() == [10, 12, 10 + len(labels) - 1]
    e_idx, e_cnt = cands.release_indices(t, lab, {})
    assert e_idx.size == 0 and e_cnt.size == 0
    # a label of an earlier level, an unknown unit and a unit outside the offered subset
    bad = ["ab", "abzz"] + (["abbb"] if subset else [])
    for name in bad:
        with pytest.raises(PrefixTreeError, match="not a candidate"):
            cands.release_indices(t, lab, {name: 20})


# ------------------------------------------------------------------ the engine's core
def test_core_extend_product_index_and_subset_index_by_hand() -> None:
    from mechanisms.prefix_tree.core import extend, position_in, product_index, subset_index

    parents, units = extend(np.array([7, 3]), 3)
    assert parents.tolist() == [7, 7, 7, 3, 3, 3] and units.tolist() == [0, 1, 2, 0, 1, 2]
    # frontier [7, 3] x 3 units: (3, 2) is candidate 1 * 3 + 2 = 5; 9 is not a parent,
    # -1 is NO_UNIT and 3 is out of range
    got = product_index(np.array([7, 3]), 3, np.array([3, 7, 9, 3, 7]),
                        np.array([2, 0, 1, -1, 3]))
    assert got.tolist() == [5, 0, -1, -1, -1]
    assert position_in(np.array([5, 1, 9]), np.array([9, 5, 4])).tolist() == [2, 0, -1]
    assert position_in(np.array([], dtype=np.int64), np.array([1])).tolist() == [-1]
    # sorted and unsorted candidate keys give the same answer
    cand = np.array([2, 4, 8, 16], dtype=np.uint64)
    keys = np.array([16, 3, 2, 17], dtype=np.uint64)
    assert subset_index(cand, keys, assume_sorted=True).tolist() == [3, -1, 0, -1]
    assert subset_index(cand[::-1], keys).tolist() == [0, -1, 3, -1]


def test_bit_string_levels_are_the_engines_product() -> None:
    from mechanisms.prefix_tree import construct
    from mechanisms.prefix_tree.core import product_index, subset_index

    rng = np.random.default_rng(4)
    kept = np.unique(rng.integers(0, 1 << 10, 40).astype(np.uint64))
    dom = construct(kept, 10, 13)
    assert np.array_equal(dom, np.sort(dom)) and dom.size == kept.size * 8
    # a 13-bit prefix's rank in the domain is its product index over (parent, low 3 bits)
    values = rng.integers(0, 1 << 13, 500).astype(np.uint64)
    by_rank = subset_index(dom, values, assume_sorted=True)
    by_product = product_index(kept, 8, values >> np.uint64(3),
                               (values & np.uint64(7)).astype(np.int64))
    assert np.array_equal(by_rank, by_product) and (by_rank >= 0).any() and (by_rank < 0).any()
    # the first level is the root (prefix 0 of length 0) extended by every unit
    assert np.array_equal(construct(np.zeros(1, dtype=np.uint64), 0, 5),
                          np.arange(32, dtype=np.uint64))


def test_trie_subset_candidates_use_the_same_index() -> None:
    trie = PrefixTrie(4)
    a, b = trie.add(np.array([0, 0]), np.array([1, 3]), np.array([5, 6]))
    full = trie.extensions(np.array([a, b]))
    part = trie.extensions(np.array([a, b]), units=np.array([2, 0]))
    assert part.units.tolist() == [0, 2, 0, 2] and not part.full_product
    nodes, units = np.array([b, a, a, 0]), np.array([2, 0, 1, 0])
    assert full.index_of(trie, nodes, units).tolist() == [6, 0, 1, -1]
    assert part.index_of(trie, nodes, units).tolist() == [3, 0, -1, -1]
