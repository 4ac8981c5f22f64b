"""TrieHH: trie-based heavy hitters with sampling and thresholding.

Zhu, Kairouz, McMahan, Sun, Li, "Federated Heavy Hitters Discovery with Differential
Privacy", AISTATS 2020 (Algorithms 1, 2 and 3; unit sizes from the arXiv version).

Algorithm
---------
Every sequence ends with the EOS symbol ``$`` and is split into units of ``U``
characters (:class:`mechanisms.prefix_tree.UnitAlphabet`). Round ``i = 1, 2, ...``:

1. the server samples exactly ``m = floor(gamma * sqrt(n))`` users uniformly without
   replacement (fresh in each round);
2. a sampled user with several sequences picks one with probability equal to its
   local frequency ``f_i(w) = c_i(w) / sum_v c_i(v)`` (Algorithm 3); with one
   sequence per user this is its sequence (Algorithm 1);
3. the user votes for the length-``i`` prefix ``p_i(w)`` if ``p_{i-1}(w)`` is in the
   trie and ``w`` has at least ``i`` units, and otherwise abstains (``ABSTAIN``, which
   every transport makes indistinguishable from a vote);
4. prefixes with at least ``theta`` votes are added to the trie (Algorithm 2).

The run stops when a round adds nothing or after ``L`` rounds. Heavy hitters are the
root-to-leaf paths ending in EOS; the other nodes are frequent prefixes.

End of word and ``L``: the paper assumes every sequence has at most ``L`` characters
(``L = 10`` with Table 1's guarantee) and ends each with EOS. A word of fewer than ``L``
units ends with its EOS step at level ``len + 1 <= L``. A word of exactly ``L`` units
cannot be followed by anything within the ``L`` rounds the guarantee counts, so level
``L`` is its end-of-word step: it votes for its last unit there and a level-``L``
node is a complete word (EOS implied). A word longer than ``L`` units abstains at
level ``L`` (it is not a sequence the run can complete; its first ``L - 1`` units
still appear as prefixes). So a word of ``L`` characters is found with ``L`` levels,
the run has at most ``L`` rounds, and Theorem 1 counts exactly those ``L`` rounds.
Telling a word of exactly ``L`` units from a longer one needs unit ``L + 1``: the unit
matrix holds ``L + 1`` columns (:func:`encode_population`); given only ``L``, words of
exactly ``L`` units abstain at level ``L`` like longer ones.

Each round is one vote round of the aggregation contract with the *public* candidate
set ``frontier x units`` (every extension of every extendable level-``(i-1)`` node by
every unit of the public alphabet), so the candidate set reveals nothing about the
data beyond the trie already released. The candidate set grows like
``|frontier| * |A|^U``; it is capped (``max_candidates``) with a clear error.

Privacy: :func:`mechanisms.triehh_privacy.theorem1` (Theorem 1; Corollary 2 for
Algorithm 3) with ``gamma = m / sqrt(n)`` and ``L`` the maximum number of rounds.

Simulation data layout: the distinct sequences are encoded once into a unit matrix
``(k, L)``; users are a CSR list of sequence ids with local counts. A per-sequence
pointer to its node at the current depth is advanced once per round (``O(k)``
vectorised), so a round costs ``O(m + k + |candidates|)``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from mechanisms.prefix_tree import (
    DEFAULT_MAX_CANDIDATES, NO_NODE, Candidates, PrefixTreeError, PrefixTrie, UnitAlphabet,
)
from mechanisms.triehh_privacy import (
    PrivacyGuarantee, TrieHHPrivacyError, batch_size, theorem1,
)
from protocol.core.contract import ABSTAIN, Cost, Kind, RoundSpec, Transport, Votes

__all__ = [
    "TrieHHError", "TrieHHConfig", "UserSequences", "RoundRecord", "TrieHHResult", "TrieHH",
    "select_sequences", "run_triehh", "encode_population",
]


class TrieHHError(ValueError):
    """Invalid TrieHH configuration or input data."""


@dataclass(frozen=True)
class TrieHHConfig:
    """TrieHH parameters.

    Attributes:
        theta: vote threshold (>= 1; Theorem 1 needs >= 4).
        gamma: batch-size factor; ``m = floor(gamma * sqrt(n))``.
        max_levels: ``L``, the maximum number of rounds (trie levels) and the longest
            word, in units, that can be discovered.
        task: task name bound into every round.
        max_candidates: cap on the candidate set of one round.
        min_participants: passed to every round specification.
        release_counts: ask the transport to release the vote count of each
            released prefix. Off by default: Theorem 1 covers *which* prefixes are
            released, not their counts, and with fixed-size sampling the counts leak
            (Cormode, section 2.1). Turn it on only for diagnostics.
    """

    theta: int
    gamma: float
    max_levels: int
    task: str = "triehh"
    max_candidates: int = DEFAULT_MAX_CANDIDATES
    min_participants: int = 1
    release_counts: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.theta, (int, np.integer)) or self.theta < 1:
            raise TrieHHError(f"theta must be an integer >= 1, got {self.theta!r}")
        if not (isinstance(self.gamma, (int, float)) and math.isfinite(self.gamma)
                and self.gamma > 0):
            raise TrieHHError(f"gamma must be a positive number, got {self.gamma!r}")
        if not isinstance(self.max_levels, (int, np.integer)) or self.max_levels < 1:
            raise TrieHHError(f"max_levels must be an integer >= 1, got {self.max_levels!r}")


@dataclass(frozen=True)
class UserSequences:
    """Users' sequences for the simulation.

    Attributes:
        units: ``(k, L + 1)`` unit matrix of the ``k`` distinct sequences (``(k, L)``
            is accepted; then a word of exactly ``L`` units cannot be completed).
        offsets: ``(n + 1,)`` CSR row pointers over users.
        items: sequence ids (rows of ``units``) of the user entries.
        counts: local counts of the entries (>= 1).

    Raises:
        TrieHHError: inconsistent arrays.
    """

    units: np.ndarray
    offsets: np.ndarray
    items: np.ndarray
    counts: np.ndarray
    _cum: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        u = np.asarray(self.units)
        off = np.asarray(self.offsets, dtype=np.int64)
        it = np.asarray(self.items, dtype=np.int64)
        ct = np.asarray(self.counts, dtype=np.int64)
        if u.ndim != 2 or not np.issubdtype(u.dtype, np.integer):
            raise TrieHHError("units must be a 2-d integer matrix")
        if off.ndim != 1 or off.size < 2 or off[0] != 0 or off[-1] != it.size \
                or np.any(np.diff(off) < 0):
            raise TrieHHError("offsets must be CSR row pointers over at least one user")
        if it.shape != ct.shape or (it.size and (it.min() < 0 or it.max() >= u.shape[0])):
            raise TrieHHError("items must index rows of units, one count per item")
        if ct.size and ct.min() < 1:
            raise TrieHHError("local counts must be >= 1")
        object.__setattr__(self, "offsets", off)
        object.__setattr__(self, "items", it)
        object.__setattr__(self, "counts", ct)
        object.__setattr__(self, "_cum", np.concatenate([[0], np.cumsum(ct)]))

    @property
    def n(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def one_per_user(self) -> bool:
        return bool(np.all(np.diff(self.offsets) == 1))


def select_sequences(data: UserSequences, users: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
    """Algorithm 3's local choice: for each user, one of its sequences with
    probability equal to its local frequency; ``-1`` for a user holding none.

    Exact: a uniform integer ``r`` in ``[0, c_i)`` (``c_i`` the user's total count)
    falls into the entry whose cumulative-count interval contains it.
    """
    users = np.asarray(users, dtype=np.int64)
    start = data.offsets[users]
    end = data.offsets[users + 1]
    out = np.full(users.shape, -1, dtype=np.int64)
    if data.one_per_user:
        return data.items[start]
    cum = data._cum
    total = cum[end] - cum[start]
    has = total > 0
    r = rng.integers(0, np.maximum(total[has], 1))
    target = cum[start[has]] + r
    entry = np.searchsorted(cum, target, side="right") - 1
    out[has] = data.items[entry]
    return out


@dataclass(frozen=True)
class RoundRecord:
    """What one round did (public information plus simulation cost).

    Attributes:
        round: the level ``i`` grown by this round (1-based).
        candidates: size of the public candidate set.
        sampled: users asked to contribute (``m``).
        released: prefixes added to the trie.
        seconds: wall time of the round in the simulation.
        cost: the transport's cost (CPU seconds per party, bytes).
    """

    round: int
    candidates: int
    sampled: int
    released: int
    seconds: float
    cost: Cost


@dataclass(frozen=True)
class TrieHHResult:
    """The output of a run.

    Attributes:
        heavy_hitters: discovered sequences (EOS stripped) with the count released
            for their EOS node, in discovery order; the count is ``None`` unless the
            run used ``release_counts`` (see :class:`TrieHHConfig`).
        prefixes: released prefixes that do not end in EOS, with their counts
            (``None`` likewise).
        trie: the final trie.
        rounds: per-round records.
        n: population size; m: batch size; config: the parameters.
        guarantee: Theorem 1 / Corollary 2 for these parameters, or ``None`` when
            the theorem's conditions fail (``guarantee_note`` says which).
    """

    heavy_hitters: dict[str, int | None]
    prefixes: dict[str, int | None]
    trie: PrefixTrie
    rounds: tuple[RoundRecord, ...]
    n: int
    m: int
    config: TrieHHConfig
    guarantee: PrivacyGuarantee | None
    guarantee_note: str = ""

    @property
    def total_cost(self) -> Cost:
        c = Cost()
        for r in self.rounds:
            c.add(r.cost)
        return c


class TrieHH:
    """One TrieHH run over a transport (iterate :meth:`rounds`, then :meth:`result`).

    Args:
        data: the users' sequences, encoded with ``alphabet``.
        alphabet: the public alphabet and unit size.
        config: theta, gamma, L.
        transport: any :class:`protocol.core.contract.Transport`.
        rng: explicit randomness; split into independent streams for sampling,
            local choices and the transport, so that the release does not depend on
            how much randomness a transport consumes.

    Raises:
        TrieHHError: data encoded for fewer levels than ``L`` or a batch larger
            than the population.
    """

    def __init__(self, data: UserSequences, alphabet: UnitAlphabet, config: TrieHHConfig,
                 transport: Transport, rng: np.random.Generator) -> None:
        if data.units.shape[1] < config.max_levels:
            raise TrieHHError(f"the unit matrix has {data.units.shape[1]} levels, "
                              f"fewer than L = {config.max_levels}")
        if int(data.units.max(initial=-1)) >= alphabet.num_units:
            raise TrieHHError("unit ids exceed the alphabet's units")
        self.data = data
        self.alphabet = alphabet
        self.config = config
        self.transport = transport
        self.n = data.n
        self.m = batch_size(config.gamma, self.n)
        self.multi_word = not data.one_per_user
        seeds = rng.spawn(3)
        self._sample_rng, self._choice_rng, self._transport_rng = seeds
        self.trie = PrefixTrie(alphabet.num_units, alphabet.terminal)
        self._labels = alphabet.labels
        self._node = np.zeros(data.units.shape[0], dtype=np.int64)  # node of p_{i-1}(w)
        # end-of-word step at level L: who may vote there (see the module docstring)
        L = int(config.max_levels)
        last = np.asarray(data.units[:, L - 1], dtype=np.int64)
        terminal = alphabet.terminal
        ends = (last >= 0) & terminal[np.maximum(last, 0)]
        if data.units.shape[1] > L:
            eos_unit = alphabet.labels.index(alphabet.eos)
            ends |= (last >= 0) & (np.asarray(data.units[:, L]) == eos_unit)
        self._last_unit = np.where(ends, last, -1)
        self._records: list[RoundRecord] = []
        self._done = False

    def sample(self) -> np.ndarray:
        """Exactly ``m`` distinct users, uniformly (fixed-size sampling)."""
        return self._sample_rng.choice(self.n, self.m, replace=False)

    def rounds(self) -> Iterator[RoundRecord]:
        """Run the rounds, yielding a record after each."""
        for level in range(1, self.config.max_levels + 1):
            if self._done or self.trie.frontier(level - 1).size == 0:
                self._done = True
                return
            rec = self._round(level)
            self._records.append(rec)
            yield rec
            if rec.released == 0:
                self._done = True
        self._done = True

    def _round(self, level: int) -> RoundRecord:
        t0 = time.perf_counter()
        frontier = self.trie.frontier(level - 1)
        try:
            cands = self.trie.extensions(frontier, max_candidates=self.config.max_candidates)
        except PrefixTreeError as exc:
            raise TrieHHError(str(exc)) from exc
        labels = cands.labels(self.trie, self._labels)
        spec = RoundSpec(self.config.task, level, Kind.VOTE, candidates=labels,
                         theta=int(self.config.theta),
                         reveal_counts=bool(self.config.release_counts),
                         min_participants=self.config.min_participants)
        users = self.sample()
        seq = select_sequences(self.data, users, self._choice_rng)
        has = seq >= 0
        nodes = np.full(seq.shape, NO_NODE, dtype=np.int64)
        units = np.full(seq.shape, -1, dtype=np.int64)
        nodes[has] = self._node[seq[has]]
        units[has] = (self._last_unit[seq[has]] if level == self.config.max_levels
                      else self.data.units[seq[has], level - 1])
        choice = cands.index_of(self.trie, nodes, units)
        choice[choice < 0] = ABSTAIN
        result = self.transport.run_round(spec, Votes(choice), self._transport_rng)
        rel = result.release
        # without revealed counts a released prefix is only known to have >= theta votes
        released = dict(rel.counts) if rel.counts is not None else \
            dict.fromkeys(rel.items or (), int(self.config.theta))
        if released:
            idx, cnt = self._released_indices(released, cands, level)
            self.trie.grow(cands, idx, cnt)
        # advance every sequence's pointer to its level-i node (or NO_NODE)
        alive = self._node >= 0
        nxt = np.full_like(self._node, NO_NODE)
        if alive.any():
            nxt[alive] = self.trie.child(self._node[alive],
                                         self.data.units[alive, level - 1].astype(np.int64))
        self._node = nxt
        return RoundRecord(level, len(cands), int(users.size), len(released),
                           time.perf_counter() - t0, result.cost)

    def _released_indices(self, released: dict[str, int], cands: Candidates,
                          level: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate indices and counts of a release, checked against the round.

        Raises:
            TrieHHError: a released label that is not a candidate, or a count below
                theta (the transport broke the release rule).
        """
        try:
            idx, cnt = cands.release_indices(self.trie, self._labels, released)
        except PrefixTreeError as exc:
            raise TrieHHError(f"the transport {exc} of round {level}") from None
        low = np.flatnonzero(cnt < self.config.theta)
        if low.size:
            lab = cands.labels(self.trie, self._labels)[int(idx[low[0]])]
            raise TrieHHError(f"the transport released {lab!r} with {int(cnt[low[0]])} votes, "
                              f"below theta = {self.config.theta}")
        return idx, cnt

    def result(self) -> TrieHHResult:
        """Run any remaining rounds and return the result."""
        for _ in self.rounds():
            pass
        trie = self.trie
        hh: dict[str, int | None] = {}
        pre: dict[str, int | None] = {}
        counts = trie.count if self.config.release_counts else [None] * len(trie)
        eos_end = trie.is_terminal(np.arange(len(trie)))
        # level-L nodes are complete words of exactly L units (their EOS is implied)
        complete = eos_end | (trie.depth == self.config.max_levels)
        eos = self.alphabet.eos
        for node in range(1, len(trie)):
            lab = trie.label(node, self._labels)
            c = None if counts[node] is None else int(counts[node])
            if complete[node]:
                hh[lab[:-len(eos)] if eos_end[node] else lab] = c
            if not eos_end[node]:
                pre[lab] = c
        guarantee, note = self.guarantee()
        return TrieHHResult(hh, pre, trie, tuple(self._records), self.n, self.m, self.config,
                            guarantee, note)

    def guarantee(self) -> tuple[PrivacyGuarantee | None, str]:
        """Theorem 1 (Corollary 2 for several words per user) for this run's parameters,
        which do not depend on the run's randomness: ``(guarantee, "")``, or
        ``(None, note)`` when the theorem's conditions fail."""
        try:
            return theorem1(int(self.config.theta), self.m / math.sqrt(self.n), self.n,
                            int(self.config.max_levels), multi_word=self.multi_word), ""
        except TrieHHPrivacyError as exc:
            return None, f"no DP guarantee: {exc}"


def encode_population(vocabulary: Sequence[str], offsets: np.ndarray, items: np.ndarray,
                      counts: np.ndarray, alphabet: UnitAlphabet,
                      max_levels: int) -> UserSequences:
    """Encode a vocabulary once (``L + 1`` unit columns, so that a word of exactly ``L``
    units can be told from a longer one) and wrap a CSR user list."""
    return UserSequences(alphabet.encode(vocabulary, max_levels + 1), offsets, items, counts)


def run_triehh(data: UserSequences, alphabet: UnitAlphabet, config: TrieHHConfig,
               transport: Transport, rng: np.random.Generator) -> TrieHHResult:
    """Run TrieHH to completion (see :class:`TrieHH`)."""
    return TrieHH(data, alphabet, config, transport, rng).result()
