"""Apple's Count Mean Sketch (CMS) and Sequence Fragment Puzzle (SFP).

Sources: Apple Differential Privacy Team, "Learning with privacy at scale" (2017), as
described in appendix C of Zhu, Kairouz, McMahan, Sun, Li, "Federated heavy hitters
discovery with differential privacy" (AISTATS 2020), which compares
TrieHH with SFP at k = 2048, m = 1024, a 256-bucket word hash, fragments of 2 characters
at positions 1, 3, 5, 7, 9 and T = 20 or 80.

Sequence Fragment Puzzle
------------------------
Words are padded with ``$`` / truncated to ``L = 10`` characters over an alphabet of at
most 64 symbols (so a word is an injective 64-bit id). A public hash ``H`` maps words to
``[256]``. A client holding ``s``:

* picks a position ``l`` uniformly from ``{1, 3, 5, 7, 9}`` and sends ``l`` with a CMS
  report (``epsilon_fragment``) of the tuple ``(H(s), s[l:l+1])``;
* optionally (``epsilon_word > 0``) sends a CMS report of the whole word
  (``epsilon_word``), used to rank and count the reconstructed words.

The position is independent of the data; by basic (sequential) composition each user's
two reports are ``(epsilon_fragment + epsilon_word)``-LDP. The TrieHH paper compares
discovery only, i.e. ``epsilon_word = 0`` and the whole local budget on the fragment.

Server: for each position, estimate the count of every tuple ``(w, xy)`` for
``w in [256]`` and ``x, y`` in the alphabet; keep the ``T`` largest (``Q_l``); for each
``w``, the Cartesian product of the fragments with hash ``w`` over the five positions
gives candidate words, and the union over ``w`` is the release (Appendix C); trailing
padding is stripped, so a word of fewer than 10 characters is one whose last fragments
are padding. The release is ranked by the word-CMS estimate (or, without word reports,
by the smallest of a word's fragment estimates, the best over buckets).

Appendix C takes the fragments over the 26 lowercase letters only, which would make
every word shorter than 10 characters undiscoverable although words are padded with
``$``; here fragments range over the alphabet *with* the pad symbol, so an assembled
word may carry padding in its middle (``ab$$cd``): Appendix C's union keeps it (a
false positive), as does this class by default.

``hash_filter=True`` adds a step Appendix C does not have: an assembled word is kept
only if its own hash is the bucket ``w`` its fragments came from and its padding is a
suffix of a non-empty word. A true word assembled from its own bucket always passes;
the filter removes most cross-word assemblies (precision near 1 in our runs, against
the paper's 0.85). It is a named option, never the default.

What it does not protect against: see docs/ldp.md (LDP hides one report's input, not
the population's heavy hitters, and not a user who sends many reports).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np

from protocol.core.contract import (ContractError, Cost, Kind, Reports, RoundSpec, Transport,
                                    Vectors, pick_kind, plaintext_transport)

from . import hashing
from .privacy import PrivacyGuarantee, local_guarantee
from .fo.base import OracleInputError, ReportError, check_payloads, split_payloads
from .fo.cms import CMSReports, CMSSketch, CountMeanSketch

__all__ = ["SFP", "SFPReports", "SFPAggregate", "SFPResult", "SFPRun", "DEFAULT_ALPHABET",
           "PAD"]

PAD = "$"
DEFAULT_ALPHABET = PAD + "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class SFPReports:
    """Per user: the fragment position index (0..4 for 1,3,5,7,9), the fragment CMS
    report and, if enabled, the word CMS report."""

    position: np.ndarray
    fragment: CMSReports
    word: CMSReports | None

    def __post_init__(self) -> None:
        p = np.asarray(self.position)
        if p.ndim != 1 or p.shape[0] != self.fragment.n or (p.size and p.dtype.kind not in "iu"):
            raise ReportError("SFP positions must be one integer per fragment report")
        if self.word is not None and self.word.n != self.fragment.n:
            raise ReportError("SFP word and fragment reports must have the same length")
        object.__setattr__(self, "position", p)

    @property
    def n(self) -> int:
        return int(self.position.shape[0])


@dataclass
class SFPAggregate:
    """What the server holds after one round of SFP reports.

    Attributes:
        fragments: one fragment CMS state per position.
        word: the word CMS state (``None`` without word reports).
        n: contributions aggregated.
        kind: how they travelled (``None``: summed in-process, no transport).
        anonymous: the reports reached the analyst as an anonymous multiset (a report
            round over a transport declaring ``anonymous_reports``); only then does
            amplification by shuffling apply.
        cost: the transport's CPU seconds and bytes.
    """

    fragments: list[CMSSketch]
    word: CMSSketch | None
    n: int
    kind: Kind | None = None
    anonymous: bool = False
    cost: Cost = field(default_factory=Cost)


@dataclass(frozen=True, slots=True)
class SFPResult:
    """Discovered words, best first, with their estimated counts (word CMS if available,
    else the smallest fragment estimate), and the per-position top tuples ``Q_l`` as
    ``(word_hash, fragment)`` pairs."""

    words: list[str]
    counts: np.ndarray
    top_tuples: list[list[tuple[int, str]]] = field(default_factory=list)


@dataclass
class SFPRun:
    """One SFP run over a transport: the release, the server state and the local
    guarantee; ``aggregate.anonymous`` says whether amplification by shuffling may be
    claimed on top of it."""

    result: SFPResult
    aggregate: SFPAggregate
    privacy: PrivacyGuarantee


@dataclass(frozen=True)
class SFP:
    """Sequence Fragment Puzzle with Count Mean Sketch reports (local epsilons given).

    ``hash_filter`` (off by default, not part of Appendix C): drop every assembled
    word whose own hash ``H`` is not the bucket its fragments came from, and every
    word whose padding is not a suffix of a non-empty word.
    """

    epsilon_fragment: float
    epsilon_word: float = 0.0
    threshold: int = 20
    k: int = 2048
    m: int = 1024
    word_buckets: int = 256
    length: int = 10
    fragment_length: int = 2
    alphabet: str = DEFAULT_ALPHABET
    hash_seed: int = 0x5F9_C35
    hash_filter: bool = False

    name: ClassVar[str] = "sfp"

    def __post_init__(self) -> None:
        if not self.alphabet or self.alphabet[0] != PAD or len(set(self.alphabet)) != len(self.alphabet):
            raise OracleInputError(f"alphabet must start with {PAD!r} and have distinct symbols")
        if not all(ord(ch) < 128 for ch in self.alphabet):
            raise OracleInputError("alphabet must be ASCII")
        if self.length % self.fragment_length or self.fragment_length < 1:
            raise OracleInputError("length must be a multiple of fragment_length")
        if self.length * self.bits_per_symbol > 64:
            raise OracleInputError("length * bits per symbol must fit in 64 bits")
        if self.threshold < 1:
            raise OracleInputError("threshold T must be >= 1")
        if not 2 <= self.word_buckets <= (1 << 16):
            raise OracleInputError("word_buckets must be in [2, 2^16]")
        if not (math.isfinite(self.epsilon_word) and self.epsilon_word >= 0):
            raise OracleInputError("epsilon_word must be >= 0")
        _ = self.fragment_cms  # validates epsilon_fragment, k and m

    # -- parameters -------------------------------------------------------------------
    @property
    def bits_per_symbol(self) -> int:
        return max(1, (len(self.alphabet) - 1).bit_length())

    @property
    def positions(self) -> list[int]:
        """0-based fragment starts (the paper's 1, 3, 5, 7, 9 for L = 10)."""
        return list(range(0, self.length, self.fragment_length))

    @functools.cached_property
    def fragment_cms(self) -> CountMeanSketch:
        return CountMeanSketch(self.epsilon_fragment, self.k, self.m, self.hash_seed)

    @functools.cached_property
    def word_cms(self) -> CountMeanSketch | None:
        if self.epsilon_word == 0:
            return None
        return CountMeanSketch(self.epsilon_word, self.k, self.m, self.hash_seed + 1)

    @functools.cached_property
    def word_hash_key(self) -> np.ndarray:
        return hashing.keys_from_seed(self.hash_seed + 2, 1)

    def privacy(self) -> PrivacyGuarantee:
        """Per-user guarantee: sum of the two reports' epsilons (basic composition)."""
        eff = self.fragment_cms.privacy().effective_epsilon
        if self.word_cms is not None:
            eff += self.word_cms.privacy().effective_epsilon
        return local_guarantee(self.name, float(self.epsilon_fragment + self.epsilon_word),
                               "Apple SFP via CMS; basic composition of the fragment and word "
                               "reports", {"effective_epsilon": eff,
                                           "epsilon_fragment": float(self.epsilon_fragment),
                                           "epsilon_word": float(self.epsilon_word)})

    # -- encoding ---------------------------------------------------------------------
    def encode_words(self, words: Sequence[str]) -> np.ndarray:
        """Pad/truncate words to ``length`` and map symbols to codes: ``(n, L)`` uint8.

        Raises:
            OracleInputError: if a word contains a symbol outside the alphabet (the pad
                symbol inside a word also counts as invalid).
        """
        L = self.length
        table = np.full(256, 255, dtype=np.uint8)
        for i, ch in enumerate(self.alphabet):
            table[ord(ch)] = i
        fixed = []
        for w in words:
            if PAD in w:
                raise OracleInputError(f"word {w!r} contains the pad symbol {PAD!r}")
            fixed.append(w[:L].ljust(L, PAD))
        try:
            raw = "".join(fixed).encode("ascii")
        except UnicodeEncodeError:
            bad = next(w for w in words if not w.isascii())
            raise OracleInputError(f"word {bad!r} is not in the alphabet") from None
        codes = table[np.frombuffer(raw, dtype=np.uint8)].reshape(len(fixed), L)
        if (codes == 255).any():
            r = int(np.flatnonzero((codes == 255).any(axis=1))[0])
            raise OracleInputError(f"word {words[r]!r} has symbols outside {self.alphabet!r}")
        return codes

    def decode(self, codes: np.ndarray) -> str:
        return "".join(self.alphabet[int(c)] for c in codes).rstrip(PAD)

    def word_ids(self, codes: np.ndarray) -> np.ndarray:
        """Injective 64-bit ids of padded words (``bits_per_symbol`` bits per symbol)."""
        codes = np.asarray(codes)
        ids = np.zeros(codes.shape[0], dtype=np.uint64)
        b = np.uint64(self.bits_per_symbol)
        for i in range(self.length):
            ids = (ids << b) | codes[:, i].astype(np.uint64)
        return ids

    def word_hash(self, ids: np.ndarray) -> np.ndarray:
        """The public word hash ``H`` into ``[word_buckets]``."""
        keys = np.broadcast_to(self.word_hash_key, (ids.shape[0], hashing.KEY_WORDS))
        return hashing.hash_to_range(np.ascontiguousarray(keys), ids, self.word_buckets)

    def _tuple_ids(self, w: np.ndarray, frag_codes: np.ndarray) -> np.ndarray:
        A = len(self.alphabet)
        fid = np.zeros(w.shape[0], dtype=np.int64)
        for i in range(self.fragment_length):
            fid = fid * A + frag_codes[:, i].astype(np.int64)
        return w.astype(np.int64) * A ** self.fragment_length + fid

    # -- client -----------------------------------------------------------------------
    def randomize(self, codes: np.ndarray, rng: np.random.Generator) -> SFPReports:
        """Client algorithm for a batch of encoded words (see :meth:`encode_words`).

        Raises:
            OracleInputError: on codes of the wrong shape or outside the alphabet.
        """
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != self.length or codes.dtype != np.uint8:
            raise OracleInputError(f"codes must be (n, {self.length}) uint8")
        if codes.size and int(codes.max()) >= len(self.alphabet):
            raise OracleInputError("codes outside the alphabet")
        n = codes.shape[0]
        ids = self.word_ids(codes)
        w = self.word_hash(ids)
        pos = rng.integers(0, len(self.positions), size=n)
        starts = np.asarray(self.positions)[pos]
        frag = codes[np.arange(n)[:, None], starts[:, None] + np.arange(self.fragment_length)]
        fragment = self.fragment_cms.randomize(self._tuple_ids(w, frag), rng)
        word = self.word_cms.randomize(ids, rng) if self.word_cms is not None else None
        return SFPReports(pos, fragment, word)

    # -- contributions to an aggregation round -----------------------------------------
    #: a report round carries each user's reports as one payload; a vector round her
    #: share of every sketch (``k m`` entries per sketch: small sketches only)
    contribution_kinds: ClassVar[tuple[Kind, ...]] = (Kind.REPORT, Kind.VECTOR)

    @property
    def report_size(self) -> int:
        """The position (1 byte), the fragment CMS report and, with word reports, the
        word CMS report."""
        word = self.word_cms.report_size if self.word_cms is not None else 0
        return 1 + self.fragment_cms.report_size + word

    def encode_reports(self, reports: SFPReports) -> tuple[bytes, ...]:
        """One fixed-size payload per user.

        Raises:
            ReportError: reports of the wrong type.
        """
        if not isinstance(reports, SFPReports):
            raise ReportError("expected SFPReports")
        if (reports.word is None) != (self.word_cms is None):
            raise ReportError("word reports present/absent contrary to epsilon_word")
        f = self.fragment_cms.report_size
        rows = np.empty((reports.n, self.report_size), dtype=np.uint8)
        rows[:, 0] = reports.position
        rows[:, 1:1 + f] = _rows(self.fragment_cms.encode_reports(reports.fragment), f)
        if self.word_cms is not None and reports.word is not None:
            rows[:, 1 + f:] = _rows(self.word_cms.encode_reports(reports.word),
                                    self.word_cms.report_size)
        return split_payloads(rows.tobytes(), self.report_size)

    def decode_reports(self, payloads: Sequence[bytes]) -> SFPReports:
        """Parse payloads back into reports, validating every field.

        Raises:
            ReportError: a payload of the wrong size or a field out of range.
        """
        size = self.report_size
        check_payloads(payloads, size, "SFP")
        raw = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), size)
        position = raw[:, 0].astype(np.int64)
        if position.size and int(position.max()) >= len(self.positions):
            raise ReportError(f"SFP position outside [0, {len(self.positions)})")
        f = self.fragment_cms.report_size
        fragment = self.fragment_cms.decode_reports(split_payloads(raw[:, 1:1 + f].tobytes(), f))
        word = None
        if self.word_cms is not None:
            w = self.word_cms.report_size
            word = self.word_cms.decode_reports(split_payloads(raw[:, 1 + f:].tobytes(), w))
        return SFPReports(position, fragment, word)

    @property
    def vector_dim(self) -> int:
        """A fragment sketch share per position, then the word sketch share."""
        word = self.word_cms.vector_dim if self.word_cms is not None else 0
        return len(self.positions) * self.fragment_cms.vector_dim + word

    def sketch_vectors(self, reports: SFPReports, modulus: int) -> np.ndarray:
        """Each user's share of every sketch, ``(n, vector_dim)`` uint64 (her fragment
        share sits in her position's block; the others are zero).

        Raises:
            ReportError: malformed reports, or more than 2^26 entries.
        """
        self._check(reports)
        cms = self.fragment_cms
        d = cms.vector_dim
        if reports.n * self.vector_dim > (1 << 26):
            raise ReportError(f"{reports.n} SFP vectors of {self.vector_dim} entries are "
                              "too many")
        out = np.zeros((reports.n, self.vector_dim), dtype=np.uint64)
        share = cms.sketch_vectors(reports.fragment, modulus)
        cols = reports.position.astype(np.int64)[:, None] * d + np.arange(d)[None, :]
        out[np.arange(reports.n)[:, None], cols] = share
        if self.word_cms is not None and reports.word is not None:
            out[:, len(self.positions) * d:] = self.word_cms.sketch_vectors(reports.word, modulus)
        return out

    def collect(self, reports: SFPReports, transport: Transport, rng: np.random.Generator,
                *, task: str = "fedhh-sfp", round: int = 0) -> SFPAggregate:
        """Carry the users' reports over ``transport`` (the first of
        :attr:`contribution_kinds` it declares) and build the server state.

        Raises:
            ContractError: the transport takes none of SFP's kinds, or the
                contributions do not fit it.
            ReportError: malformed reports, or fewer reports released than sent.
            protocol.core.contract.AggregationAborted: the transport aborted.
        """
        self._check(reports)
        n = reports.n
        kind = pick_kind(transport, self.contribution_kinds)
        if kind is Kind.VECTOR:
            modulus = self.fragment_cms.vector_modulus(n)
            spec = RoundSpec(task, round, Kind.VECTOR, dim=self.vector_dim, modulus=modulus)
            res = transport.run_round(spec, Vectors(self.sketch_vectors(reports, modulus)), rng)
            if res.release.vector is None:
                raise ContractError("a vector round released no vector")
            total = np.asarray(res.release.vector)
            d = self.fragment_cms.vector_dim
            P = len(self.positions)
            frags = [self.fragment_cms.sketch_from_vector(total[l * d:(l + 1) * d], modulus)
                     for l in range(P)]
            word = (self.word_cms.sketch_from_vector(total[P * d:], modulus)
                    if self.word_cms is not None else None)
            return SFPAggregate(frags, word, int(res.release.contributions), kind, False,
                                res.cost)
        spec = RoundSpec(task, round, Kind.REPORT, report_size=self.report_size)
        res = transport.run_round(spec, Reports(self.encode_reports(reports)), rng)
        received = self.decode_reports(res.release.reports or ())
        if received.n != n:
            raise ReportError(f"{received.n} reports arrived, {n} sent")
        agg = self.aggregate(received)
        agg.kind, agg.anonymous, agg.cost = kind, bool(transport.anonymous_reports), res.cost
        return agg

    def aggregate(self, reports: SFPReports) -> SFPAggregate:
        """The server state summed in-process from reports the server holds.

        Raises:
            ReportError: on malformed reports.
        """
        self._check(reports)
        cms = self.fragment_cms
        frags = [cms.sketch(reports.fragment.take(reports.position == l))
                 for l in range(len(self.positions))]
        word = (self.word_cms.sketch(reports.word)
                if self.word_cms is not None and reports.word is not None else None)
        return SFPAggregate(frags, word, reports.n)

    def run(self, codes: np.ndarray, rng: np.random.Generator,
            transport: Transport | None = None, *, task: str = "fedhh-sfp",
            max_candidates: int = 100_000) -> SFPRun:
        """Randomise the users' words, carry the reports over ``transport`` (default:
        plaintext) and discover the heavy hitters.

        The transport's randomness is a child spawned from ``rng`` (no draw from
        ``rng``'s own stream), so the release is the same on every transport.

        Raises:
            OracleInputError: on invalid codes.
            ContractError: a transport that cannot carry SFP's contributions.
            ReportError: reports lost in transit.
            protocol.core.contract.AggregationAborted: the transport aborted.
        """
        reports = self.randomize(codes, rng)
        agg = self.collect(reports, transport if transport is not None
                           else plaintext_transport(), rng.spawn(1)[0], task=task)
        return SFPRun(self.discover(agg, max_candidates), agg, self.privacy())

    def _check(self, reports: SFPReports) -> None:
        """Raises ReportError unless ``reports`` fit this SFP."""
        if not isinstance(reports, SFPReports):
            raise ReportError("expected SFPReports")
        P = len(self.positions)
        if reports.n and (int(reports.position.min()) < 0 or int(reports.position.max()) >= P):
            raise ReportError(f"SFP position outside [0, {P})")
        if (reports.word is None) != (self.word_cms is None):
            raise ReportError("word reports present/absent contrary to epsilon_word")

    # -- server -----------------------------------------------------------------------
    def discover(self, reports: SFPReports | SFPAggregate,
                 max_candidates: int = 100_000) -> SFPResult:
        """Server algorithm: top-``T`` tuples per position, puzzle assembly, ranking.

        Args:
            reports: the users' reports (summed in-process) or the server state a
                transport delivered (:meth:`collect`).
            max_candidates: cap on assembled candidate words.

        Raises:
            ReportError: on malformed reports.
        """
        agg = reports if isinstance(reports, SFPAggregate) else self.aggregate(reports)
        P = len(self.positions)
        if len(agg.fragments) != P or (agg.word is None) != (self.word_cms is None):
            raise ReportError("server state does not fit this SFP")
        cms = self.fragment_cms
        sketches = agg.fragments
        A = len(self.alphabet)
        n_frag = A ** self.fragment_length
        all_tuples = np.arange(self.word_buckets * n_frag, dtype=np.int64)
        est = cms.estimate_counts_multi(sketches, all_tuples)  # (P, buckets * A^2)
        T = min(self.threshold, all_tuples.shape[0])
        top = np.argpartition(-est, T - 1, axis=1)[:, :T]
        frag_strings = ["".join(t) for t in itertools.product(self.alphabet,
                                                             repeat=self.fragment_length)]
        per_pos: list[dict[int, list[int]]] = []
        top_tuples = []
        for l in range(P):
            d: dict[int, list[int]] = {}
            ordered = top[l][np.argsort(-est[l, top[l]], kind="stable")]
            for t in ordered:
                d.setdefault(int(t) // n_frag, []).append(int(t) % n_frag)
            per_pos.append(d)
            top_tuples.append([(int(t) // n_frag, frag_strings[int(t) % n_frag]) for t in ordered])
        frag_codes = np.array(list(itertools.product(range(A), repeat=self.fragment_length)),
                              dtype=np.uint8).reshape(n_frag, self.fragment_length)
        cand_words: list[str] = []
        cand_codes: list[np.ndarray] = []
        cand_bucket: list[int] = []
        cand_score: list[float] = []
        common = set(per_pos[0]).intersection(*per_pos[1:])
        for w in sorted(common):
            for combo in itertools.product(*(per_pos[l][w] for l in range(P))):
                if len(cand_words) >= max_candidates:
                    break
                word = "".join(frag_strings[f] for f in combo).rstrip(PAD)
                if self.hash_filter and (not word or PAD in word):
                    continue  # filter: padding must be a non-empty word's suffix
                cand_words.append(word)
                cand_codes.append(frag_codes[list(combo)].reshape(-1))
                cand_bucket.append(w)
                cand_score.append(min(float(est[l, w * n_frag + f]) for l, f in enumerate(combo)))
        if cand_words:
            all_ids = self.word_ids(np.stack(cand_codes))
            keep = np.arange(len(cand_words))
            if self.hash_filter:
                # the pieces came from bucket w: keep the word only if it hashes to w
                keep = np.flatnonzero(self.word_hash(all_ids) == np.array(cand_bucket))
        else:
            all_ids, keep = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        # the union over buckets: one entry per word, with its best fragment score
        best: dict[str, int] = {}
        for i in keep.tolist():
            j = best.get(cand_words[i])
            if j is None or cand_score[i] > cand_score[j]:
                best[cand_words[i]] = i
        ok = np.array(sorted(best.values()), dtype=np.int64)
        ids = all_ids[ok] if ok.size else np.zeros(0, dtype=np.uint64)
        words = [cand_words[i] for i in ok]
        if not words:
            return SFPResult([], np.zeros(0), top_tuples)
        if self.word_cms is not None:
            counts = self.word_cms.estimate_counts(agg.word, ids)  # type: ignore[arg-type]
        else:
            counts = np.array(cand_score)[ok] * P  # a fragment is sent by ~1/P of the holders
        order = np.argsort(-counts, kind="stable")
        return SFPResult([words[i] for i in order], counts[order], top_tuples)


def _rows(payloads: tuple[bytes, ...], size: int) -> np.ndarray:
    """Payloads of ``size`` bytes as an ``(n, size)`` uint8 matrix."""
    return np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), size)
