"""TrieHH: trie-based heavy hitters with sampling and thresholding.

Zhu, Kairouz, McMahan, Sun, Li, "Federated Heavy Hitters Discovery with Differential
Privacy", AISTATS 2020 (Algorithms 1, 2 and 3; unit sizes from the arXiv version).

Algorithm
---------
Every sequence ends with the EOS symbol ``$`` and is split into units of ``U``
characters (:class:`mechanisms.prefix_tree.UnitAlphabet`). Round ``i = 1, 2, ...``:

1. exactly ``m = floor(gamma * sqrt(n))`` users are sampled uniformly without
   replacement (fresh in each round); the sample comes from the transport's
   commit-then-reveal beacon (:mod:`protocol.core.sample_beacon`), so over the
   threshold committee (malicious model) the server cannot choose it, and elsewhere it
   is the server's draw;
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

import dataclasses
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
from protocol.core.contract import (
    ABSTAIN, AtClients, Cost, Kind, RoundSpec, Sample, Transport, Votes,
)

__all__ = [
    "TrieHHError", "TrieHHConfig", "UserSequences", "RoundRecord", "TrieHHResult", "TrieHH",
    "select_sequences", "run_triehh", "encode_population", "ClientVoter",
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


def _last_units(units: np.ndarray, alphabet: UnitAlphabet, max_levels: int) -> np.ndarray:
    """The unit each sequence votes for at level ``L`` (its end-of-word step; see the
    module docstring), ``-1`` for a sequence that cannot end there."""
    L = int(max_levels)
    last = np.asarray(units[:, L - 1], dtype=np.int64)
    ends = (last >= 0) & alphabet.terminal[np.maximum(last, 0)]
    if units.shape[1] > L:
        eos_unit = alphabet.labels.index(alphabet.eos)
        ends |= (last >= 0) & (np.asarray(units[:, L]) == eos_unit)
    return np.where(ends, last, -1)


class ClientVoter:
    """Step 3 of a round as the devices run it, for transports whose clients vote
    themselves (:meth:`TrieHH.at_server`).

    A device knows its own sequence and the round's public candidate strings: it votes
    for the candidate equal to its length-``i`` prefix (at level ``L``, its end-of-word
    step), and abstains when there is none (its ``p_{i-1}`` is not in the trie, or its
    sequence is shorter). Candidates are distinct strings made of the prefix's unit
    labels, so this is the same vote the simulation finds through its node pointers
    (tested against it).

    Args:
        data: the population's encoding (one sequence per user).
        held: the users whose sequences this party holds (population indices); it
            answers for those only.
        alphabet, max_levels: as the run's.

    Raises:
        TrieHHError: several sequences per user (Algorithm 3's local choice is not
            implemented on the clients' side), or a held index outside the population.
    """

    def __init__(self, data: UserSequences, held: Sequence[int] | np.ndarray,
                 alphabet: UnitAlphabet, max_levels: int) -> None:
        if not data.one_per_user:
            raise TrieHHError("clients that vote themselves hold one sequence each")
        held = np.asarray(held, dtype=np.int64)
        if held.ndim != 1 or (held.size and (held.min() < 0 or held.max() >= data.n)):
            raise TrieHHError(f"held users must be indices into the population of {data.n}")
        seqs = np.asarray(data.items)[np.asarray(data.offsets)[held]]
        self.max_levels = int(max_levels)
        self._units = np.asarray(data.units, dtype=np.int64)[seqs, :self.max_levels]
        self._last = _last_units(data.units, alphabet, self.max_levels)[seqs]
        self._labels = alphabet.labels
        self._row = {int(u): i for i, u in enumerate(held.tolist())}

    def votes(self, users: Sequence[int] | np.ndarray, level: int,
              candidates: Sequence[str]) -> np.ndarray:
        """The choice (index into ``candidates`` or ``ABSTAIN``) of each of ``users``.

        Raises:
            TrieHHError: a user this party does not hold, or a level outside ``1..L``.
        """
        if not 1 <= int(level) <= self.max_levels:
            raise TrieHHError(f"level must be in 1..{self.max_levels}")
        index = {c: i for i, c in enumerate(candidates)}
        labels = self._labels
        out = np.full(len(users), ABSTAIN, dtype=np.int64)
        for k, user in enumerate(users):
            r = self._row.get(int(user))
            if r is None:
                raise TrieHHError(f"user {int(user)} is not held here")
            row = self._units[r]
            unit = int(self._last[r]) if level == self.max_levels else int(row[level - 1])
            prefix = row[:level - 1]
            if unit < 0 or (prefix < 0).any():
                continue
            out[k] = index.get("".join(labels[u] for u in prefix.tolist()) + labels[unit],
                               ABSTAIN)
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
        self._setup(data.n, alphabet, config, transport, rng)
        self.data: UserSequences | None = data
        self.multi_word = not data.one_per_user
        self._node = np.zeros(data.units.shape[0], dtype=np.int64)  # node of p_{i-1}(w)
        self._last_unit = _last_units(data.units, alphabet, int(config.max_levels))

    @classmethod
    def at_server(cls, population: int, alphabet: UnitAlphabet, config: TrieHHConfig,
                  transport: Transport, rng: np.random.Generator) -> "TrieHH":
        """The server's side only, for a transport whose clients vote themselves
        (:attr:`~protocol.core.contract.Transport.contributions_at_clients`, the network
        prototype's): it samples, builds each round's candidates from the released
        trie and grows the trie, and never holds a user's data. With the same ``rng``
        it samples exactly the users the in-process run samples, so with clients that
        vote as :class:`ClientVoter` does its release is the in-process run's.

        Raises:
            TrieHHError: the transport does not take client votes, or a population
                smaller than 1.
        """
        if not getattr(transport, "contributions_at_clients", False):
            raise TrieHHError(f"transport {getattr(transport, 'name', transport)!r} needs the "
                              "votes; TrieHH.at_server is for transports whose clients vote")
        if type(population) is not int or population < 1:
            raise TrieHHError("the population must be a positive int")
        self = cls.__new__(cls)
        self._setup(population, alphabet, config, transport, rng)
        self.data = None
        self.multi_word = False
        return self

    def _setup(self, n: int, alphabet: UnitAlphabet, config: TrieHHConfig,
               transport: Transport, rng: np.random.Generator) -> None:
        self.alphabet = alphabet
        self.config = config
        self.transport = transport
        self.n = n
        self.m = batch_size(config.gamma, self.n)
        seeds = rng.spawn(3)
        self._sample_rng, self._choice_rng, self._transport_rng = seeds
        self.trie = PrefixTrie(alphabet.num_units, alphabet.terminal)
        self._labels = alphabet.labels
        self._records: list[RoundRecord] = []
        self._done = False
        self._level = 0
        self._drawn: Sample | None = None

    def sample(self) -> np.ndarray:
        """Exactly ``m`` distinct users, uniformly (fixed-size sampling), ascending:
        drawn through the transport (:meth:`~protocol.core.contract.Transport.
        draw_sample`), so that over a committee the server cannot choose them."""
        self._drawn = self.transport.draw_sample(self.config.task, self._level, self.n,
                                                 self.m, self._sample_rng)
        return self._drawn.users.copy()

    def rounds(self) -> Iterator[RoundRecord]:
        """Run the rounds, yielding a record after each (the run is one job of the
        transport: :meth:`~protocol.core.contract.Transport.start_job`)."""
        if not self._records and not self._done:
            self.transport.start_job(self.config.task)
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
        self._level = level
        users = self.sample()
        if self.data is None:  # the clients vote themselves (at_server)
            result = self.transport.run_round(spec, AtClients(users), self._transport_rng)
        else:
            seq = select_sequences(self.data, users, self._choice_rng)
            has = seq >= 0
            nodes = np.full(seq.shape, NO_NODE, dtype=np.int64)
            units = np.full(seq.shape, -1, dtype=np.int64)
            nodes[has] = self._node[seq[has]]
            units[has] = (self._last_unit[seq[has]] if level == self.config.max_levels
                          else self.data.units[seq[has], level - 1])
            choice = cands.index_of(self.trie, nodes, units)
            choice[choice < 0] = ABSTAIN
            # the round names the users it asks (a deviating server may have
            # changed them: a committee checks them against the beacon)
            drawn = self._drawn
            sample = None if drawn is None else dataclasses.replace(drawn, users=users)
            result = self.transport.run_round(spec, Votes(choice, sample),
                                              self._transport_rng)
        rel = result.release
        # without revealed counts a released prefix is only known to have >= theta votes
        released = dict(rel.counts) if rel.counts is not None else \
            dict.fromkeys(rel.items or (), int(self.config.theta))
        if released:
            idx, cnt = self._released_indices(released, cands, level)
            self.trie.grow(cands, idx, cnt)
        if self.data is not None:
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
