"""The prefix-tree engine for unit strings: units, a trie of released prefixes, candidates.

Theory of operation
-------------------
Trie-based heavy-hitter mechanisms (TrieHH, Zhu et al. AISTATS 2020; TrieHH++,
Cormode; and TrieHH++'s quantiles) discover frequent sequences one *level* at a time.
A sequence is split into *units*: single characters or groups of ``U`` characters
(the "unit size" experiment of Zhu et al., section 5.2.1). Level ``i`` of the trie holds prefixes of ``i`` units. In each round the
server publishes a *candidate set*, the extensions ``(node, unit)`` of the current
frontier, and clients contribute (a vote, a noisy report, ...) for the candidate that
is the length-``i`` prefix of their sequence, or abstain. Released candidates become
nodes of the next level.

PEM and TAP/TAPS work on fixed-length binary items, whose prefixes are their own
keys; :mod:`mechanisms.prefix_tree.levels` drives the same level step
(:mod:`mechanisms.prefix_tree.core`) with those keys, which needs no node table.

This module holds only the bookkeeping, as numpy arrays so that 10^6-client
simulations never loop in Python:

* :class:`UnitAlphabet` maps strings to integer *unit ids*. With a public alphabet
  ``A`` (single characters), end-of-sequence symbol ``EOS`` and unit size ``U``, the
  valid units are ``A^U`` (a full unit) and ``A^k EOS`` for ``0 <= k < U`` (the last
  unit of a sequence, shorter than ``U``). There are
  ``V = |A|^U + |A|^(U-1) + ... + 1`` of them; ids ``0 .. V-1``. A sequence of ``c``
  characters occupies ``ceil((c + 1) / U)`` units (its characters followed by EOS).
* a *unit matrix* of shape ``(k, L)`` holds the units of ``k`` distinct sequences;
  ``NO_UNIT`` (-1) marks positions after the end (the sequence is shorter) and the
  whole row of a sequence that cannot be encoded.
* :class:`PrefixTrie` stores nodes as parallel arrays ``parent``, ``unit``, ``depth``
  and ``count`` (the count released with the node). Node 0 is the root (the empty
  prefix). :meth:`PrefixTrie.frontier` gives the nodes that may be extended (deepest
  level, not ending in a terminal unit); :meth:`PrefixTrie.extensions` the public
  candidates ``frontier x units``; :meth:`PrefixTrie.advance` moves per-sequence
  node pointers one level down, vectorised.

Candidates are indexed densely: candidate ``j`` of a :class:`Candidates` set is
``(parents[j], units[j])``; for the full product ``frontier x all units`` the index
is ``position_of(parent) * V + unit`` so that a client's candidate index is a couple
of array look-ups.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .core import extend, position_in, product_index, subset_index

__all__ = [
    "NO_UNIT", "NO_NODE", "ROOT", "PrefixTreeError", "CandidateSetTooLarge", "UnitAlphabet",
    "Candidates", "PrefixTrie",
]

NO_UNIT = -1
NO_NODE = -1
ROOT = 0
DEFAULT_MAX_CANDIDATES = 1 << 21


class PrefixTreeError(ValueError):
    """Invalid input to the prefix-tree engine."""


class CandidateSetTooLarge(PrefixTreeError):
    """The public candidate set ``frontier x units`` exceeds the configured cap."""


@dataclass(frozen=True)
class UnitAlphabet:
    """A public alphabet of single characters grouped into units of ``unit_size``.

    Attributes:
        symbols: the public alphabet, distinct single characters (EOS excluded).
        unit_size: characters per unit (per trie level), ``U >= 1``.
        eos: the end-of-sequence symbol appended to every sequence.
        max_units: refuse alphabets whose number of units exceeds this.

    Raises:
        PrefixTreeError: empty or repeated symbols, a symbol that is not one
            character, EOS inside the alphabet, ``unit_size < 1``, or too many units.
    """

    symbols: str
    unit_size: int = 1
    eos: str = "$"
    max_units: int = 1 << 22
    labels: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _lookup: np.ndarray = field(init=False, repr=False, compare=False)
    _code_points: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.symbols, str) or not self.symbols:
            raise PrefixTreeError("the alphabet must be a non-empty string of symbols")
        if len(set(self.symbols)) != len(self.symbols):
            raise PrefixTreeError("alphabet symbols must be distinct")
        if not isinstance(self.eos, str) or len(self.eos) != 1:
            raise PrefixTreeError("eos must be a single character")
        if self.eos in self.symbols:
            raise PrefixTreeError(f"the EOS symbol {self.eos!r} must not be in the alphabet")
        if not isinstance(self.unit_size, int) or self.unit_size < 1:
            raise PrefixTreeError("unit_size must be an integer >= 1")
        a, u = len(self.symbols), self.unit_size
        count = sum(a ** k for k in range(u + 1))
        if count > self.max_units:
            raise PrefixTreeError(
                f"{a} symbols with unit size {u} give {count} units, more than "
                f"max_units={self.max_units}; use a smaller alphabet or unit size")
        # symbol ids: 0..a-1 letters, a = EOS, a+1 = padding after EOS.
        base = a + 2
        lookup = np.full(base ** u, NO_UNIT, dtype=np.int64)
        labels: list[str] = []
        for k in range(u, -1, -1):  # full units first, then shorter EOS-terminated ones
            for combo in itertools.product(range(a), repeat=k):
                ids = list(combo) + ([a] if k < u else []) + [a + 1] * (u - k - 1)
                raw = 0
                for s in ids:
                    raw = raw * base + s
                lookup[raw] = len(labels)
                labels.append("".join(self.symbols[s] for s in combo) + ("" if k == u else self.eos))
        object.__setattr__(self, "labels", tuple(labels))
        object.__setattr__(self, "_lookup", lookup)
        object.__setattr__(self, "_code_points", np.array(sorted(map(ord, self.symbols)),
                                                          dtype=np.int64))

    @property
    def num_units(self) -> int:
        """Number ``V`` of distinct units (unit ids are ``0 .. V-1``)."""
        return len(self.labels)

    @property
    def terminal(self) -> np.ndarray:
        """Boolean mask over unit ids: True for units ending in EOS."""
        return np.array([lab.endswith(self.eos) for lab in self.labels], dtype=bool)

    def units_needed(self, num_chars: int | np.ndarray) -> int | np.ndarray:
        """Units occupied by a sequence of ``num_chars`` characters plus EOS."""
        if isinstance(num_chars, np.ndarray):
            return (num_chars + self.unit_size) // self.unit_size
        return (int(num_chars) + self.unit_size) // self.unit_size

    def encode(self, words: Sequence[str], max_levels: int) -> np.ndarray:
        """Encode words into a unit matrix of shape ``(len(words), max_levels)``.

        A word longer than ``max_levels`` units keeps only its first ``max_levels``
        units (no EOS, so it can never be discovered as a whole word). A word with a
        symbol outside the alphabet gets a row of ``NO_UNIT`` (it never votes).

        Args:
            words: the sequences (strings).
            max_levels: ``L``, the number of trie levels.

        Raises:
            PrefixTreeError: ``max_levels < 1``.
        """
        if max_levels < 1:
            raise PrefixTreeError("max_levels must be >= 1")
        k = len(words)
        width = max_levels * self.unit_size
        out = np.full((k, max_levels), NO_UNIT, dtype=np.int32 if self.num_units < 2**31 else np.int64)
        if k == 0:
            return out
        a = len(self.symbols)
        arr = np.array([w[:width] for w in words], dtype=f"<U{max(width, 1)}")
        cp = arr.view(np.uint32).reshape(k, -1).astype(np.int64)
        if cp.shape[1] < width:  # numpy shrinks the dtype to the longest word
            cp = np.pad(cp, ((0, 0), (0, width - cp.shape[1])))
        lengths = np.array([len(w) for w in words], dtype=np.int64)
        present = cp != 0
        pos = np.searchsorted(self._code_points, cp)
        pos_c = np.minimum(pos, a - 1)
        known = self._code_points[pos_c] == cp
        bad = (present & ~known).any(axis=1)
        # symbol ids in code-point order -> ids in alphabet order
        order = np.array([self.symbols.index(chr(c)) for c in self._code_points], dtype=np.int64)
        sym = np.where(present, order[pos_c], a + 1)
        col = np.arange(width)
        sym[(col[None, :] == lengths[:, None])] = a  # EOS right after the last character
        base = a + 2
        raw = np.zeros((k, max_levels), dtype=np.int64)
        grouped = sym.reshape(k, max_levels, self.unit_size)
        for j in range(self.unit_size):
            raw = raw * base + grouped[:, :, j]
        units = self._lookup[raw]
        out[:] = units
        out[bad] = NO_UNIT
        return out

    def decode(self, unit_ids: Sequence[int]) -> str:
        """The string spelled by a path of unit ids (EOS included)."""
        return "".join(self.labels[int(u)] for u in unit_ids)


@dataclass(frozen=True)
class Candidates:
    """A public candidate set: candidate ``j`` extends node ``parents[j]`` by
    ``units[j]``. ``full_product`` is True when it is ``frontier x all units`` in
    row-major order (then the index is computed arithmetically)."""

    parents: np.ndarray
    units: np.ndarray
    num_units: int
    full_product: bool
    frontier: np.ndarray

    def __len__(self) -> int:
        return int(self.parents.size)

    def labels(self, trie: "PrefixTrie", unit_labels: Sequence[str]) -> tuple[str, ...]:
        """Candidate strings ``label(parent) + label(unit)`` (public, distinct)."""
        plab = np.array([trie.label(int(p), unit_labels) for p in self.frontier], dtype=object)
        ulab = np.asarray(unit_labels, dtype=object)
        if self.full_product:
            return tuple((plab[:, None] + ulab[None, :]).ravel().tolist())
        pos = trie.position_in(self.frontier, self.parents)
        return tuple((plab[pos] + ulab[self.units]).tolist())

    def index_of(self, trie: "PrefixTrie", nodes: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Candidate index of each ``(node, unit)`` pair, ``-1`` when it is not a
        candidate (node not in the frontier, no unit, or unit not offered).

        Vectorised; ``nodes`` and ``units`` are equally long integer arrays. The
        lookup is the engine's (:func:`mechanisms.prefix_tree.core.product_index`, or
        :func:`~mechanisms.prefix_tree.core.subset_index` when only some units are
        offered).
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        units = np.asarray(units, dtype=np.int64)
        full = product_index(self.frontier, self.num_units, nodes, units)
        if self.full_product:
            return full
        # key of a pair = its index in the full product; look it up among the offered
        cand_keys = product_index(self.frontier, self.num_units, self.parents, self.units)
        out = np.full(nodes.shape, -1, dtype=np.int64)
        ok = full >= 0
        out[ok] = subset_index(cand_keys, full[ok])
        return out

    def release_indices(self, trie: "PrefixTrie", unit_labels: Sequence[str],
                        released: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """Candidate indices (ascending) and counts of a release keyed by label.

        A label is split into a frontier node's label and a unit label (trying each
        distinct frontier label length), so no dictionary over all candidates is built:
        the cost is ``O(frontier + units + released)``.

        Raises:
            PrefixTreeError: a released label that is not a candidate of this set.
        """
        if not released:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        parent_pos: dict[str, int] = {}
        for k, nd in enumerate(self.frontier):
            parent_pos.setdefault(trie.label(int(nd), unit_labels), k)
        lengths = sorted({len(lab) for lab in parent_pos})
        unit_id = {lab: u for u, lab in enumerate(unit_labels)}
        names = list(released)
        nodes = np.full(len(names), NO_NODE, dtype=np.int64)
        units = np.full(len(names), NO_UNIT, dtype=np.int64)
        for i, name in enumerate(names):
            for cut in lengths:
                p, u = parent_pos.get(name[:cut]), unit_id.get(name[cut:])
                if p is not None and u is not None:
                    nodes[i], units[i] = self.frontier[p], u
                    break
        idx = self.index_of(trie, nodes, units)
        bad = np.flatnonzero(idx < 0)
        if bad.size:
            raise PrefixTreeError(f"released {names[int(bad[0])]!r}, which is not a candidate")
        cnt = np.fromiter((int(released[n]) for n in names), dtype=np.int64, count=len(names))
        order = np.argsort(idx, kind="stable")
        return idx[order], cnt[order]


class PrefixTrie:
    """A trie of released prefixes stored as parallel numpy arrays.

    Args:
        num_units: ``V``, the number of unit ids.
        terminal: optional boolean mask over unit ids; a node whose unit is
            terminal (EOS) is never extended.

    Raises:
        PrefixTreeError: ``num_units < 1`` or a mask of the wrong length.
    """

    def __init__(self, num_units: int, terminal: np.ndarray | None = None) -> None:
        if num_units < 1:
            raise PrefixTreeError("num_units must be >= 1")
        self.num_units = int(num_units)
        self.terminal = (np.zeros(num_units, dtype=bool) if terminal is None
                         else np.asarray(terminal, dtype=bool))
        if self.terminal.shape != (num_units,):
            raise PrefixTreeError("terminal mask must have one entry per unit")
        self._parent = np.array([NO_NODE], dtype=np.int64)
        self._unit = np.array([NO_UNIT], dtype=np.int64)
        self._depth = np.array([0], dtype=np.int64)
        self._count = np.array([0], dtype=np.int64)
        # child lookup: key parent * V + unit -> node (sorted arrays)
        self._child_keys = np.empty(0, dtype=np.int64)
        self._child_nodes = np.empty(0, dtype=np.int64)

    # --- read access -------------------------------------------------------
    def __len__(self) -> int:
        return int(self._parent.size)

    @property
    def parent(self) -> np.ndarray:
        return self._parent.copy()

    @property
    def unit(self) -> np.ndarray:
        return self._unit.copy()

    @property
    def depth(self) -> np.ndarray:
        return self._depth.copy()

    @property
    def count(self) -> np.ndarray:
        return self._count.copy()

    @property
    def max_depth(self) -> int:
        return int(self._depth.max())

    def nodes_at(self, depth: int) -> np.ndarray:
        """Node ids at ``depth`` in insertion order."""
        return np.flatnonzero(self._depth == depth)

    def frontier(self, depth: int | None = None) -> np.ndarray:
        """Extendable nodes at ``depth`` (default: the deepest level): those whose
        unit is not terminal."""
        d = self.max_depth if depth is None else depth
        nodes = self.nodes_at(d)
        if d == 0:
            return nodes
        return nodes[~self.terminal[self._unit[nodes]]]

    def is_terminal(self, nodes: np.ndarray) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.int64)
        u = self._unit[nodes]
        return (u >= 0) & self.terminal[np.maximum(u, 0)]

    def leaves(self) -> np.ndarray:
        """Nodes without children (the root excluded)."""
        has_child = np.zeros(len(self), dtype=bool)
        has_child[self._parent[1:]] = True
        idx = np.flatnonzero(~has_child)
        return idx[idx != ROOT]

    def path(self, node: int) -> list[int]:
        """Unit ids from the root down to ``node``."""
        out: list[int] = []
        while node > ROOT:
            out.append(int(self._unit[node]))
            node = int(self._parent[node])
        return out[::-1]

    def label(self, node: int, unit_labels: Sequence[str]) -> str:
        return "".join(unit_labels[u] for u in self.path(node))

    @staticmethod
    def position_in(nodes: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Position of each ``query`` node in the array ``nodes`` (-1 if absent);
        :func:`mechanisms.prefix_tree.core.position_in` on node ids."""
        return position_in(np.asarray(nodes, dtype=np.int64), np.asarray(query, dtype=np.int64))

    def child(self, nodes: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Child of each ``node`` along ``unit`` (``NO_NODE`` when absent or when the
        node or unit is missing). Vectorised."""
        nodes = np.asarray(nodes, dtype=np.int64)
        units = np.asarray(units, dtype=np.int64)
        out = np.full(np.broadcast(nodes, units).shape, NO_NODE, dtype=np.int64)
        ok = (nodes >= 0) & (units >= 0)
        if not ok.any() or self._child_keys.size == 0:
            return out
        keys = nodes[ok] * self.num_units + units[ok]
        j = np.minimum(np.searchsorted(self._child_keys, keys), self._child_keys.size - 1)
        found = self._child_keys[j] == keys
        res = np.where(found, self._child_nodes[j], NO_NODE)
        out[ok] = res
        return out

    def advance(self, nodes: np.ndarray, units: np.ndarray) -> np.ndarray:
        """Move sequence pointers one level down: the child along the next unit, or
        ``NO_NODE``. Same as :meth:`child`; named for its use in round loops."""
        return self.child(nodes, units)

    def locate(self, unit_matrix: np.ndarray) -> np.ndarray:
        """For each row of a unit matrix, the deepest trie node on its path
        (the root if even the first unit is missing)."""
        um = np.asarray(unit_matrix, dtype=np.int64)
        cur = np.zeros(um.shape[0], dtype=np.int64)
        for lev in range(um.shape[1]):
            nxt = self.child(cur, um[:, lev])
            moved = nxt >= 0
            if not moved.any():
                break
            cur = np.where(moved, nxt, cur)
        return cur

    def contains(self, unit_matrix: np.ndarray) -> np.ndarray:
        """True for rows whose whole path (up to the first ``NO_UNIT``) is in the trie."""
        um = np.asarray(unit_matrix, dtype=np.int64)
        cur = np.zeros(um.shape[0], dtype=np.int64)
        alive = np.ones(um.shape[0], dtype=bool)
        for lev in range(um.shape[1]):
            col = um[:, lev]
            step = alive & (col >= 0)
            if not step.any():
                break
            nxt = self.child(cur[step], col[step])
            cur[step] = nxt
            alive[step] = nxt >= 0
        return alive

    # --- candidates and growth ----------------------------------------------
    def extensions(self, frontier: np.ndarray | None = None, units: np.ndarray | None = None,
                   max_candidates: int = DEFAULT_MAX_CANDIDATES) -> Candidates:
        """The public candidates: every frontier node extended by every unit
        (``units=None``) or by the given subset of units.

        Raises:
            CandidateSetTooLarge: more than ``max_candidates`` candidates.
        """
        fr = self.frontier() if frontier is None else np.asarray(frontier, dtype=np.int64)
        if units is None:
            total = fr.size * self.num_units
            if total > max_candidates:
                raise CandidateSetTooLarge(
                    f"{fr.size} frontier nodes x {self.num_units} units = {total} candidates, "
                    f"more than max_candidates={max_candidates}; use a smaller unit size or "
                    "alphabet, or raise the cap")
            parents, us = extend(fr, self.num_units)
            return Candidates(parents, us, self.num_units, True, fr)
        us = np.unique(np.asarray(units, dtype=np.int64))
        if us.size and (us.min() < 0 or us.max() >= self.num_units):
            raise PrefixTreeError("unit ids out of range")
        total = fr.size * us.size
        if total > max_candidates:
            raise CandidateSetTooLarge(f"{total} candidates exceed max_candidates={max_candidates}")
        parents, j = extend(fr, us.size)
        return Candidates(parents, us[j], self.num_units, False, fr)

    def add(self, parents: np.ndarray, units: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Add children ``(parent, unit)`` with their released counts; returns their
        node ids. Adding an existing child updates nothing and returns its id.

        Raises:
            PrefixTreeError: unknown parent, unit out of range, or mismatched lengths.
        """
        parents = np.asarray(parents, dtype=np.int64)
        units = np.asarray(units, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        if not parents.shape == units.shape == counts.shape or parents.ndim != 1:
            raise PrefixTreeError("parents, units and counts must be equally long 1-d arrays")
        if parents.size == 0:
            return np.empty(0, dtype=np.int64)
        if parents.min() < 0 or parents.max() >= len(self):
            raise PrefixTreeError("unknown parent node")
        if units.min() < 0 or units.max() >= self.num_units:
            raise PrefixTreeError("unit ids out of range")
        if self.is_terminal(parents).any():
            raise PrefixTreeError("a terminal (EOS) node cannot have children")
        existing = self.child(parents, units)
        keys = parents * self.num_units + units
        new = existing < 0
        uniq_keys, first = np.unique(keys[new], return_index=True)
        idx_new = np.flatnonzero(new)[first]
        start = len(self)
        ids_new = np.arange(start, start + uniq_keys.size, dtype=np.int64)
        order = np.argsort(idx_new, kind="stable")  # keep insertion order of the input
        sel = idx_new[order]
        ids_sorted = np.empty_like(ids_new)
        ids_sorted[order] = ids_new
        self._parent = np.concatenate([self._parent, parents[sel]])
        self._unit = np.concatenate([self._unit, units[sel]])
        self._depth = np.concatenate([self._depth, self._depth[parents[sel]] + 1])
        self._count = np.concatenate([self._count, counts[sel]])
        ck = np.concatenate([self._child_keys, uniq_keys])
        cn = np.concatenate([self._child_nodes, ids_sorted])
        o = np.argsort(ck, kind="stable")
        self._child_keys, self._child_nodes = ck[o], cn[o]
        return self.child(parents, units)

    def grow(self, candidates: Candidates, released: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Add the released candidates (indices into ``candidates``) with their counts."""
        released = np.asarray(released, dtype=np.int64)
        return self.add(candidates.parents[released], candidates.units[released], counts)
