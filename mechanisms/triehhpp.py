"""TrieHH++: sample-and-threshold heavy hitters with released counts.

Source: G. Cormode, "Federated heavy hitters revisited" (2021), building on TrieHH
(Zhu, Kairouz, McMahan, Sun, Li, AISTATS 2020).

Algorithm
---------
Items are sequences of units (characters followed by an end-of-sequence unit, or the
base-``alpha`` digits of a number, see :mod:`mechanisms.quantiles`). The trie grows one
level per round, for at most ``L`` rounds. At level ``i``:

1. the public candidates are the extensions ``frontier x units`` of the released
   level-``(i-1)`` nodes (the shared engine :mod:`mechanisms.prefix_tree`);
2. a fresh Poisson sample of rate ``p = m / n`` is drawn by contacting
   ``s = m + c sqrt(m)`` clients (:mod:`mechanisms.sampling`); a participating client
   whose length-``(i-1)`` prefix is a frontier node votes for its length-``i`` prefix,
   every other contacted client abstains (``ABSTAIN``; the transport makes it
   indistinguishable from a vote);
3. one contract vote round (``RoundSpec`` of kind ``VOTE`` with ``theta``) releases each
   candidate whose sampled count is at least ``theta`` *with that count*; released
   candidates become level-``i`` nodes.

Estimates (section 3): a node's released count ``X ~ Bin(W, p)`` for a prefix held by
``W`` clients, so ``W_hat = X n / m`` (frequency ``X / m``) is unbiased for prefixes
well above the threshold (the release condition ``X >= theta`` biases it upwards near
``theta``). Its standard error is ``sqrt(W p (1 - p)) / p``, estimated by
``sqrt(X (1 - p)) n / m``. A prefix with ``w = W m / n > theta`` is missed at one level
with probability at most ``exp(-(w - theta)^2 / (2 w))`` (eq. 5).

The flat variant (Remark after Lemma 3) runs a single thresholded vote round over a
public candidate list of whole items: no trie, no factor ``L`` in the privacy cost.

Privacy: :mod:`mechanisms.triehhpp_privacy`. The released object is only the trie with
counts; the number of participants and the number of suppressed votes stay hidden
because the sample is Poisson and abstentions look like votes.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from protocol.core.contract import (
    ABSTAIN, AtClients, Kind, Release, RoundSpec, Transport, Votes,
)
from mechanisms.prefix_tree import NO_NODE, ROOT, Candidates, PrefixTreeError, PrefixTrie
from mechanisms.sampling import SamplingPlan, plan_poisson_sampling, sample_round

__all__ = [
    "TrieHHPPError", "TrieHHPPParams", "LevelStats", "NodeEstimate", "TrieHHPPResult",
    "FlatResult", "run_triehhpp", "run_flat", "miss_probability_bound", "spawn_rngs",
    "run_triehhpp_at_server", "client_vote", "ReplayedParticipation", "keyed_participation",
]


class TrieHHPPError(ValueError):
    """Invalid input to TrieHH++."""


@dataclass(frozen=True, slots=True)
class TrieHHPPParams:
    """Public parameters of one TrieHH++ run.

    Attributes:
        population: ``n``, the number of clients.
        m: the expected sample size per level (Poisson rate ``m / n``).
        theta: release threshold (a count must be at least ``theta``), integer >= 1.
        max_levels: ``L``.
        c: sampling slack in ``s = m + c sqrt(m)``.
        scheme: ``"exact"`` (Poisson up to truncation) or ``"cormode"``.
        task: task name bound into each round.
    """

    population: int
    m: float
    theta: int
    max_levels: int
    c: float = 10.0
    scheme: str = "exact"
    task: str = "triehhpp"

    def __post_init__(self) -> None:
        if not isinstance(self.theta, (int, np.integer)) or self.theta < 1:
            raise TrieHHPPError(f"theta must be an integer >= 1, got {self.theta!r}")
        if not isinstance(self.max_levels, (int, np.integer)) or self.max_levels < 1:
            raise TrieHHPPError(f"max_levels must be an integer >= 1, got {self.max_levels!r}")
        self.plan()  # validates population, m, c, scheme

    @property
    def rate(self) -> float:
        return self.m / self.population

    def plan(self) -> SamplingPlan:
        try:
            return plan_poisson_sampling(int(self.population), float(self.m), self.c, self.scheme)
        except ValueError as exc:
            raise TrieHHPPError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class LevelStats:
    """What happened at one level. ``candidates``, ``released``, ``contacted`` and
    ``arrived`` (contributions the transport aggregated: ``contacted`` minus clients
    that dropped out) are public; ``participants`` and ``voters`` are simulation-only
    ground truth (no party but the clients knows them)."""

    level: int
    candidates: int
    released: int
    contacted: int
    participants: int
    voters: int
    truncated: bool
    arrived: int

    @property
    def survival(self) -> float:
        """Fraction of contacted clients whose contribution was aggregated (1 without
        dropouts). A client that drops is one more client not sampled, so the level's
        effective sampling rate is ``p * survival``."""
        return self.arrived / self.contacted if self.contacted else 1.0


@dataclass(frozen=True, slots=True)
class NodeEstimate:
    """A released node with its frequency estimate.

    Attributes:
        label: the prefix (or item) as a string.
        depth: trie level.
        count: the released sampled count ``X``.
        frequency: ``X / m`` (estimated fraction of clients).
        frequency_se: ``sqrt(X (1 - p)) / m``.
        estimate: ``X n / m`` (estimated number of clients).
        estimate_se: ``sqrt(X (1 - p)) n / m``.
        (With dropouts, ``m`` and ``p`` are multiplied by the level's
        :attr:`LevelStats.survival`.)
        terminal: True for a complete item (ends with EOS).
    """

    label: str
    depth: int
    count: int
    frequency: float
    frequency_se: float
    estimate: float
    estimate_se: float
    terminal: bool


@dataclass
class TrieHHPPResult:
    """The released trie with counts, and per-level bookkeeping."""

    params: TrieHHPPParams
    trie: PrefixTrie
    unit_labels: tuple[str, ...]
    levels: list[LevelStats] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)

    def node_estimates(self, nodes: np.ndarray | None = None) -> list[NodeEstimate]:
        """Estimates for ``nodes`` (default: every released node, root excluded)."""
        ids = np.arange(1, len(self.trie)) if nodes is None else np.asarray(nodes, dtype=np.int64)
        counts = self.trie.count[ids]
        depth = self.trie.depth[ids]
        term = self.trie.is_terminal(ids) if ids.size else np.zeros(0, dtype=bool)
        surv = self.survival()
        f, fse, w, wse = _estimates(counts, self.params,
                                    surv[np.maximum(depth, 1) - 1] if ids.size else 1.0)
        return [NodeEstimate(self.trie.label(int(i), self.unit_labels), int(d), int(c),
                             float(a), float(b), float(x), float(y), bool(t))
                for i, d, c, a, b, x, y, t in zip(ids, depth, counts, f, fse, w, wse, term)]

    def survival(self) -> np.ndarray:
        """:attr:`LevelStats.survival` of every level, indexed by depth - 1 (levels
        never run count as 1)."""
        out = np.ones(max(self.params.max_levels, len(self.levels)), dtype=np.float64)
        for st in self.levels:
            out[st.level - 1] = st.survival
        return out

    def heavy_hitters(self, strip: str | None = None) -> list[NodeEstimate]:
        """Complete items (terminal nodes) by decreasing count; with ``strip`` the
        end-of-sequence symbol is removed from the labels."""
        ids = np.arange(1, len(self.trie))
        ids = ids[self.trie.is_terminal(ids)]
        out = self.node_estimates(ids)
        if strip:
            out = [NodeEstimate(e.label.removesuffix(strip), e.depth, e.count, e.frequency,
                                e.frequency_se, e.estimate, e.estimate_se, e.terminal)
                   for e in out]
        return sorted(out, key=lambda e: (-e.count, e.label))


@dataclass
class FlatResult:
    """The flat variant's release: items with counts at least ``theta``."""

    params: TrieHHPPParams
    release: Release
    stats: LevelStats

    def heavy_hitters(self) -> list[NodeEstimate]:
        items = sorted(self.release.counts.items(), key=lambda kv: (-kv[1], kv[0])) \
            if self.release.counts else []
        counts = np.array([c for _, c in items], dtype=np.int64)
        f, fse, w, wse = _estimates(counts, self.params, self.stats.survival)
        return [NodeEstimate(k, 1, int(c), float(a), float(b), float(x), float(y), True)
                for (k, c), a, b, x, y in zip(items, f, fse, w, wse)]


def spawn_rngs(seed: int | None) -> tuple[np.random.Generator, np.random.Generator]:
    """Two independent generators from one seed: one for sampling (the party that
    draws the Poisson sample), one for the transport. Keeping them apart makes the
    release identical across transports for the same seed."""
    a, b = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(a), np.random.default_rng(b)


def miss_probability_bound(w: float, theta: float) -> float:
    """Eq. (5): a prefix with expected sample count ``w > theta`` is missed at one
    level with probability at most ``exp(-(w - theta)^2 / (2 w))``.

    Raises:
        TrieHHPPError: ``w <= theta``.
    """
    if not w > theta:
        raise TrieHHPPError(f"the bound needs w > theta (w={w}, theta={theta})")
    return math.exp(-(w - theta) ** 2 / (2.0 * w))


def run_triehhpp(unit_matrix: np.ndarray, num_units: int, unit_labels: Sequence[str],
                 params: TrieHHPPParams, transport: Transport,
                 sampling_rng: np.random.Generator, transport_rng: np.random.Generator,
                 terminal: np.ndarray | None = None,
                 progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                 ) -> TrieHHPPResult:
    """Grow the TrieHH++ trie over ``params.max_levels`` contract vote rounds.

    Args:
        unit_matrix: ``(n, >= L)`` integer array, row ``j`` the unit ids of client
            ``j``'s item (``-1`` after its end or for an item that cannot be encoded).
        num_units: number of unit ids ``V``.
        unit_labels: string label of each unit id (candidate names are the
            concatenated labels).
        params: public parameters; ``params.population`` must equal the row count.
        transport: any :class:`~protocol.core.contract.Transport`.
        sampling_rng: draws the Poisson samples.
        transport_rng: handed to the transport each round.
        terminal: optional boolean mask of terminal (EOS) units, never extended.
        progress: optional wrapper around the level iterator (a progress bar).

    Raises:
        TrieHHPPError: shapes or parameters that do not fit.
        mechanisms.prefix_tree.CandidateSetTooLarge: a level's candidate set exceeds
            the engine's cap (a ``PrefixTreeError``, itself a ``ValueError``).
        protocol.core.contract.AggregationAborted: a round could not complete.
    """
    um = np.asarray(unit_matrix)
    if um.ndim != 2 or not np.issubdtype(um.dtype, np.integer):
        raise TrieHHPPError("unit_matrix must be a 2-d integer array")
    if um.shape[0] != params.population:
        raise TrieHHPPError(f"unit_matrix has {um.shape[0]} rows, population is "
                            f"{params.population}")
    if um.shape[1] < params.max_levels:
        raise TrieHHPPError(f"unit_matrix has {um.shape[1]} columns, fewer than "
                            f"max_levels={params.max_levels}")
    trie, result, plan, levels = _start(params, num_units, terminal, unit_labels, progress)
    for level, cands, labels in _candidates(trie, result, levels):
        sample = sample_round(plan, sampling_rng)
        rows = sample.contacted
        nodes = _prefix_nodes(trie, um, rows, level)
        index = cands.index_of(trie, nodes, um[rows, level].astype(np.int64))
        choice = np.where(sample.participates, index, ABSTAIN).astype(np.int64)
        spec = RoundSpec(params.task, level, Kind.VOTE, candidates=labels, theta=int(params.theta))
        release = transport.run_round(spec, Votes(choice), transport_rng).release
        released_idx = _grow(trie, cands, result, release, level)
        result.levels.append(LevelStats(level + 1, len(labels), int(released_idx.size),
                                        int(rows.size), int(sample.participates.sum()),
                                        int((choice >= 0).sum()), sample.truncated,
                                        int(release.contributions)))
        if released_idx.size == 0:
            break
    return result


def _start(params: TrieHHPPParams, num_units: int, terminal: np.ndarray | None,
           unit_labels: Sequence[str],
           progress: Callable[[Iterable[int]], Iterable[int]] | None
           ) -> tuple[PrefixTrie, TrieHHPPResult, SamplingPlan, Iterable[int]]:
    """A run's empty trie and result, its sampling plan and its levels (with progress).

    Raises:
        TrieHHPPError: not one label per unit.
    """
    if len(unit_labels) != num_units:
        raise TrieHHPPError("unit_labels must have one label per unit")
    trie = PrefixTrie(num_units, terminal)
    levels: Iterable[int] = range(params.max_levels)
    if progress is not None:
        levels = progress(levels)
    return trie, TrieHHPPResult(params, trie, tuple(unit_labels)), params.plan(), levels


def _candidates(trie: PrefixTrie, result: TrieHHPPResult, levels: Iterable[int]
                ) -> Iterator[tuple[int, Candidates, tuple[str, ...]]]:
    """Each level's candidate extensions of the trie's frontier and their labels, until
    the frontier is empty."""
    for level in levels:
        frontier = trie.frontier(level)
        if frontier.size == 0:
            return
        cands = trie.extensions(frontier)
        yield level, cands, cands.labels(trie, result.unit_labels)


def _grow(trie: PrefixTrie, cands: Candidates, result: TrieHHPPResult, release: Release,
          level: int) -> np.ndarray:
    """Grow the trie by a level's release (checked against the round's candidates);
    the released candidates' indices.

    Raises:
        TrieHHPPError: the release names something the round did not ask.
    """
    try:
        released_idx, counts = cands.release_indices(trie, result.unit_labels,
                                                     dict(release.counts or {}))
    except PrefixTreeError as exc:
        raise TrieHHPPError(f"the transport {exc} of level {level + 1}") from None
    trie.grow(cands, released_idx, counts)
    result.releases.append(release)
    return released_idx


def run_flat(items: np.ndarray, candidates: Sequence[str], params: TrieHHPPParams,
             transport: Transport, sampling_rng: np.random.Generator,
             transport_rng: np.random.Generator) -> FlatResult:
    """The flat variant: one thresholded vote round over public candidate items.

    Args:
        items: length-``n`` integer array, client ``j`` holds ``candidates[items[j]]``;
            ``-1`` for an item outside the public candidate list (it always abstains).
        candidates: the public, distinct candidate items.
        params: ``max_levels`` is ignored (one round).

    Raises:
        TrieHHPPError: shapes that do not fit.
    """
    items = np.asarray(items)
    if items.ndim != 1 or items.shape[0] != params.population or \
            not np.issubdtype(items.dtype, np.integer):
        raise TrieHHPPError("items must be a 1-d integer array with one entry per client")
    if items.size and (items.min() < -1 or items.max() >= len(candidates)):
        raise TrieHHPPError("an item index is outside the candidate list")
    sample = sample_round(params.plan(), sampling_rng)
    choice = np.where(sample.participates, items[sample.contacted], ABSTAIN).astype(np.int64)
    spec = RoundSpec(params.task + "-flat", 0, Kind.VOTE, candidates=tuple(candidates),
                     theta=int(params.theta))
    res = transport.run_round(spec, Votes(choice), transport_rng)
    stats = LevelStats(1, len(candidates), len(res.release.counts or {}),
                       int(sample.contacted.size), int(sample.participates.sum()),
                       int((choice >= 0).sum()), sample.truncated,
                       int(res.release.contributions))
    return FlatResult(params, res.release, stats)


# ------------------------------------------------- clients that vote themselves


def run_triehhpp_at_server(num_units: int, unit_labels: Sequence[str],
                           params: TrieHHPPParams, transport: Transport,
                           sampling_rng: np.random.Generator,
                           transport_rng: np.random.Generator,
                           terminal: np.ndarray | None = None,
                           progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                           ) -> TrieHHPPResult:
    """The server's side of :func:`run_triehhpp`, for a transport whose clients vote
    themselves (:attr:`~protocol.core.contract.Transport.contributions_at_clients`, as
    :meth:`mechanisms.triehh.TrieHH.at_server` is TrieHH's). It never holds an item: each
    level it contacts the ``s`` clients of :func:`~mechanisms.sampling.sample_round`
    (ascending, so their order says nothing), hands them to the transport as
    :class:`~protocol.core.contract.AtClients`, and grows the trie from the release.

    Which contacted clients take part is *not* decided here: the clients decide it
    (:func:`keyed_participation` from a secret they share and the server does not, or,
    in a simulation, :class:`ReplayedParticipation` from the run's seed), and a client
    that does not take part abstains indistinguishably from a vote. The participation
    :func:`~mechanisms.sampling.sample_round` also draws is discarded; it is drawn so that
    the generator advances as the simulation's does, so with the same ``sampling_rng``
    the contacted clients are those of :func:`run_triehhpp`, and with clients that
    replay the participation from the same seed and vote as :func:`client_vote` does,
    the release is the simulation's.

    ``participants``, ``voters`` and ``truncated`` of the levels are unknown here
    (``-1``, ``-1``, ``False``): only the clients know them.

    Raises:
        TrieHHPPError: a transport that needs the votes, or labels that do not fit.
        protocol.core.contract.AggregationAborted: a round could not complete.
    """
    if not getattr(transport, "contributions_at_clients", False):
        raise TrieHHPPError(f"transport {getattr(transport, 'name', transport)!r} needs the "
                            "votes; run_triehhpp_at_server is for transports whose clients "
                            "vote")
    trie, result, plan, levels = _start(params, num_units, terminal, unit_labels, progress)
    for level, cands, labels in _candidates(trie, result, levels):
        contacted = np.sort(sample_round(plan, sampling_rng).contacted)
        spec = RoundSpec(params.task, level, Kind.VOTE, candidates=labels,
                         theta=int(params.theta))
        release = transport.run_round(spec, AtClients(contacted), transport_rng).release
        released_idx = _grow(trie, cands, result, release, level)
        result.levels.append(LevelStats(level + 1, len(labels), int(released_idx.size),
                                        int(contacted.size), -1, -1, False,
                                        int(release.contributions)))
        if released_idx.size == 0:
            break
    return result


def client_vote(units: np.ndarray, level: int, candidates: Sequence[str],
                unit_labels: Sequence[str]) -> int:
    """A participating client's vote at ``level`` (0-based, as the rounds'
    :attr:`~protocol.core.contract.RoundSpec.round`): the index of the candidate equal to
    its length-``level + 1`` prefix, or ``ABSTAIN`` when there is none (its shorter
    prefix was not released, or its item ended). ``units`` is its row of the unit matrix.
    Candidates are distinct strings of unit labels, so this is the vote
    :func:`run_triehhpp` finds through the trie's node pointers.

    Raises:
        TrieHHPPError: a level outside the row.
    """
    row = np.asarray(units)
    if not 0 <= int(level) < row.shape[0]:
        raise TrieHHPPError(f"level must be in 0..{row.shape[0] - 1}")
    prefix = row[:int(level) + 1]
    if (prefix < 0).any() or (prefix >= len(unit_labels)).any():
        return ABSTAIN
    label = "".join(unit_labels[int(u)] for u in prefix.tolist())
    try:
        return list(candidates).index(label)
    except ValueError:
        return ABSTAIN


class ReplayedParticipation:
    """Simulation only: who takes part at each level, replayed from the sampling
    generator of :func:`spawn_rngs` (the run's seed), level after level, as
    :func:`run_triehhpp` draws it. Every party that holds the seed knows the whole
    sample, the server included: this is what makes a client-side run reproduce the
    in-process release, not a deployment's sampling (:func:`keyed_participation`).
    """

    def __init__(self, plan: SamplingPlan, sampling_rng: np.random.Generator) -> None:
        self.plan = plan
        self._rng = sampling_rng
        self._levels: list[tuple[dict[int, int], np.ndarray]] = []

    def takes_part(self, level: int, user: int) -> bool:
        """Whether ``user`` takes part at ``level`` (0-based).

        Raises:
            TrieHHPPError: ``user`` is not contacted at ``level`` under this seed.
        """
        if level < 0:
            raise TrieHHPPError("level must be >= 0")
        while len(self._levels) <= level:
            s = sample_round(self.plan, self._rng)
            self._levels.append(({int(u): i for i, u in enumerate(s.contacted.tolist())},
                                 s.participates))
        where, part = self._levels[level]
        i = where.get(int(user))
        if i is None:
            raise TrieHHPPError(f"user {user} is not contacted at level {level} under "
                                "this run's seed")
        return bool(part[i])


_PARTICIPATION_LABEL = b"fedhh triehh++ participation v1"


def keyed_participation(key: bytes, plan: SamplingPlan, context: bytes,
                        contacted: Sequence[int], me: int) -> bool:
    """Whether client ``me`` of the ``contacted`` ones takes part, drawn from ``key``, a
    secret the clients share and the server does not hold (section 2.1's deployment
    requirement: the number of participants ``K`` and who they are stay hidden from
    the aggregator).

    The exact scheme of :func:`~mechanisms.sampling.sample_round` with HMAC-SHA256 as
    its randomness: ``K ~ Bin(n, m/n)`` by inversion of the 256-bit word
    ``HMAC(key, label || context || contacted)``, and the ``min(K, s)`` contacted
    clients with the smallest ``HMAC(key, label || context || id)`` take part. Every
    contacted client computes the same ``K`` and order, so the participant set is a
    uniform ``min(K, s)``-subset of the contacted (HMAC as a pseudorandom function).
    ``context`` must be unique to the round (task, level, session); the contacted set
    is bound into ``K``'s word.

    Raises:
        TrieHHPPError: a key shorter than 16 bytes, ``me`` not contacted, or a
            contacted list with repeats.
    """
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise TrieHHPPError("the participation key must be at least 16 bytes")
    ids = [int(u) for u in contacted]
    if len(set(ids)) != len(ids):
        raise TrieHHPPError("the contacted clients must be distinct")
    if int(me) not in ids:
        raise TrieHHPPError(f"client {me} is not contacted")
    base = _PARTICIPATION_LABEL + len(context).to_bytes(4, "big") + bytes(context)
    packed = np.asarray(sorted(ids), dtype=">u8").tobytes()
    word = hmac.new(key, base + b"K" + hashlib.sha256(packed).digest(),
                    hashlib.sha256).digest()
    k = min(_binomial_by_inversion(word, plan.population, plan.rate), len(ids))
    if k <= 0:
        return False
    tags = {i: hmac.new(key, base + b"R" + i.to_bytes(8, "big"), hashlib.sha256).digest()
            for i in ids}
    mine = tags[int(me)]
    return sum(t < mine for t in tags.values()) < k


@functools.lru_cache(maxsize=1024)
def _binomial_by_inversion(word: bytes, n: int, p: float) -> int:
    """``Bin(n, p)`` by inversion of the uniform ``(word + 1/2) / 2^256`` (cached: every
    contacted client of a round inverts the same word)."""
    from scipy import stats

    u = (int.from_bytes(word, "big") + 0.5) / float(1 << 256)
    return int(stats.binom.ppf(u, n, p))


# ---------------------------------------------------------------- helpers


def _prefix_nodes(trie: PrefixTrie, um: np.ndarray, rows: np.ndarray, level: int) -> np.ndarray:
    """Trie node of each row's length-``level`` prefix (``NO_NODE`` when absent)."""
    cur = np.full(rows.size, ROOT, dtype=np.int64)
    for lev in range(level):
        cur = trie.child(cur, um[rows, lev].astype(np.int64))
    return np.where(cur >= 0, cur, NO_NODE)


def _estimates(counts: np.ndarray, params: TrieHHPPParams,
               survival: np.ndarray | float = 1.0) -> tuple[np.ndarray, ...]:
    """Frequency, its standard error, count and its standard error from sampled counts.

    ``survival`` (per count, or one value) scales the sampling rate to ``p * survival``
    when clients dropped out of the transport, which keeps the estimates unbiased.
    """
    counts = np.asarray(counts, dtype=np.float64)
    s = np.asarray(survival, dtype=np.float64)
    p = params.rate * s
    m = params.m * s
    f = counts / m
    fse = np.sqrt(counts * (1.0 - p)) / m
    return f, fse, f * params.population, fse * params.population
