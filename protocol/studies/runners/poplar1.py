"""Heavy hitters with Poplar1 (``fedhh hh --mechanism poplar1``, ``api.poplar1``).

Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Lightweight Techniques for Private Heavy
Hitters" (IEEE S&P 2021), section 5.1's prefix search, over the Poplar1 VDAF of
draft-irtf-cfrg-vdaf-20 (:mod:`protocol.core.poplar1`):

1. every client encodes its word as a ``BITS``-bit string, shards it once (one report:
   a public share and one input share per aggregator, sent as bytes) and is gone;
2. level ``l = 0, 1, ...``: the candidate prefixes are the two children of every
   level-``(l - 1)`` prefix whose count reached the threshold (level 0: ``0`` and
   ``1``); both aggregators prepare every report at these candidates (two rounds of
   sketch shares; a report whose sketch fails is dropped at that level), sum the output
   shares, exchange aggregate shares and so learn every candidate's count;
3. the heavy hitters are the leaf-level (``BITS``-bit) strings whose count reached the
   threshold.

Encoding (the same alphabet as TrieHH): a word over the population's public alphabet
``A`` is cut to ``max_length`` characters; character ``i`` of ``A`` is the code ``i + 1``
and the end of the word is padded with code 0, each code on ``ceil(log2(|A| + 1))``
bits, most significant first. So a word of up to ``max_length`` characters is one
``max_length * ceil(log2(|A| + 1))``-bit string, and a decoded string drops the
padding. Longer words are found by their first ``max_length`` characters; the truth a
run is scored against is the population's ranking of words cut to ``max_length``.

The two aggregators are separate :class:`AggregatorParty` objects: each holds only its
own decoded input shares (and the public shares), runs its half of the preparation and
records its view (every candidate prefix it was asked about and every count it learnt,
the reports it rejected) and its costs (CPU seconds, bytes sent and received). What
Poplar1 hides: each client's string from either aggregator alone (the IDPF keys are
pseudorandom), beyond the counts of the candidate prefixes. What it does not: those
counts (of every candidate, including the ones below the threshold) are learnt by both
aggregators; there is no differential privacy unless noise is added; the two
aggregators must not collude; robustness holds against malicious clients, privacy
against one malicious aggregator (the draft's security considerations).

Threshold: ``threshold`` clients (default ``max(2, ceil(n / (20 K)))``, a public rule that
reads only ``n`` and ``K``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from protocol.studies.errors import StudyError

__all__ = ["Poplar1Options", "AggregatorParty", "SearchResult", "encode_words",
           "decode_bits", "default_threshold", "make_reports", "search", "search_processes",
           "PROCESS_REPORTS", "PARK_REPORTS", "run_poplar1", "POPLAR1_MODES", "SampledResult",
           "sampled_search", "sampled_parameters", "sampled_run", "run_poplar1_sampled", "encode_codes",
           "heavy_hitters_bits", "SideBySideOptions", "side_by_side", "load_reference",
           "bench_vs_reference", "bench_hh", "bench_state", "random_strings", "hh_table", "reference_table", "bench_table", "state_table"]

CTX = b"fedhh poplar1 heavy hitters"
CHUNK = 2048


@dataclass(frozen=True)
class Poplar1Options:
    """One Poplar1 heavy-hitters run: the threshold (a count of clients; ``None``: the
    default rule), ``max_length`` characters per word, the cap on candidates per level,
    and the simulation seed (``None``: the clients' randomness and the verify key come
    from the OS)."""

    threshold: int | None = None
    max_length: int = 10
    max_candidates: int = 1 << 14
    seed: int | None = None


def default_threshold(n: int, k: int) -> int:
    """``max(2, ceil(n / (20 K)))``."""
    return max(2, math.ceil(n / (20 * k)))


# ----------------------------------------------------------------------- encoding
def bits_per_char(alphabet: str) -> int:
    return max(1, math.ceil(math.log2(len(alphabet) + 1)))


def encode_words(vocabulary: Sequence[str], alphabet: str, max_length: int) -> np.ndarray:
    """``(V, max_length * b)`` bool: each word cut to ``max_length`` characters, codes
    ``index + 1`` on ``b = ceil(log2(|A| + 1))`` bits, padded with code 0.

    Raises:
        StudyError: a character outside the alphabet, or ``max_length < 1``.
    """
    if max_length < 1:
        raise StudyError("--max-length must be >= 1")
    b = bits_per_char(alphabet)
    index = {c: i + 1 for i, c in enumerate(alphabet)}
    codes = np.zeros((len(vocabulary), max_length), dtype=np.int64)
    for v, w in enumerate(vocabulary):
        for j, ch in enumerate(w[:max_length]):
            if ch not in index:
                raise StudyError(f"word {w!r} has a character outside the public alphabet")
            codes[v, j] = index[ch]
    shifts = np.arange(b - 1, -1, -1)
    return ((codes[:, :, None] >> shifts) & 1).astype(bool).reshape(len(vocabulary), -1)


def decode_bits(bits: Sequence[bool], alphabet: str) -> str:
    """Inverse of :func:`encode_words` on one full-length string (padding dropped; a code
    outside the alphabet, which no honest client sends, shows as ``?``)."""
    b = bits_per_char(alphabet)
    out = []
    for j in range(0, len(bits) - b + 1, b):
        code = 0
        for x in bits[j:j + b]:
            code = 2 * code + int(x)
        if code:
            out.append(alphabet[code - 1] if code <= len(alphabet) else "?")
    return "".join(out)


# ----------------------------------------------------------------------- parties
@dataclass
class AggregatorParty:
    """One of Poplar1's two aggregators: its own input shares, the public shares, the
    shared verify key; its view and its costs.

    ``view`` holds one entry per level: the candidates it prepared (the aggregation
    parameter), the count of every candidate it learnt, and the reports it rejected.
    """

    agg_id: int
    core: Any
    view: list[dict[str, Any]] = field(default_factory=list)
    cpu_seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    #: when the aggregator ran in its own process (:func:`search_processes`): its peak
    #: memory, its whole CPU time and the accept-decision bytes it sent
    process: dict[str, Any] | None = None

    def timed(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.cpu_seconds += time.process_time() - t


@dataclass
class SearchResult:
    """What a prefix search found: leaf strings (tuples of bools) with counts, and per
    level the candidates, the passing prefixes and the rejected reports."""

    heavy: dict[tuple[bool, ...], int]
    levels: list[dict[str, Any]]
    parties: tuple[AggregatorParty, AggregatorParty]
    client_seconds: float
    upload_bytes_per_client: int
    bits: int
    threshold: int
    seconds: float
    #: where it ran: the reports in files, the aggregators' state parked there, the
    #: aggregators in their own processes
    out_of_core: bool = False
    parked: bool = False
    processes: bool = False


def _randomness(seed: int | None, label: str):  # noqa: ANN202
    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness

    if seed is None:
        return OsRandom()
    return insecure_deterministic_randomness(seed, label)


#: populations from this many reports on are stored out of core by default (the
#: uploads, about 16.7 KB a report at 256 bits, in ``np.memmap`` files)
OUT_OF_CORE_REPORTS = 20_000

#: from this many reports on, each aggregator runs in its own process by default
#: (:func:`search_processes`; docs/poplar1.md has the measurement behind it)
PROCESS_REPORTS = 20_000

#: from this many reports on, the aggregators' per-report state between levels is
#: parked in the store's files by default (about 1.2 KB a report and aggregator
#: otherwise at 42 candidates a level; parking cost about 3% of the CPU at n = 10,000,
#: docs/poplar1.md)
PARK_REPORTS = 200_000


def make_reports(vdaf, measurements: np.ndarray, seed: int | None,  # noqa: ANN001
                 progress: Callable[[int, int], None] | None = None, *,
                 out_of_core: bool = False, tmpdir: str | None = None):  # noqa: ANN201
    """The clients: shard every measurement and encode the reports; the aggregators
    decode them (every decoder validates completely) and keep the validated uploads,
    once, in a :class:`~protocol.core.poplar1.store.ReportStore` (in memory, or
    ``out_of_core`` in ``np.memmap`` files under ``tmpdir``, default the system's
    temporary directory). Returns ``(store, client CPU seconds, upload bytes per
    client)``; the caller closes the store. Chunks of :data:`CHUNK` clients bound the
    memory of the sharding."""
    import tempfile

    from protocol.core.poplar1.store import ReportStore

    rnd = _randomness(seed, "poplar1 clients")
    n = measurements.shape[0]
    cpu = 0.0
    upload = vdaf.NONCE_SIZE + vdaf.public_share_size() + 2 * vdaf.input_share_size()
    where = (tmpdir or tempfile.gettempdir()) if out_of_core else None
    store = ReportStore(vdaf.bits, n, directory=where)
    try:
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            cpu += _shard_into(vdaf, store, lo, measurements[lo:hi], rnd)
            if progress is not None:
                progress(hi, n)
    except BaseException:
        store.close()
        raise
    return store, cpu, upload


def _shard_into(vdaf, store, lo: int, measurements: np.ndarray, rnd) -> float:  # noqa: ANN001
    """Clients ``lo ..`` of ``store`` shard ``measurements`` and send their reports as
    bytes; the aggregators decode them (every decoder validates completely) and keep
    them in rows ``lo ..``. Returns the clients' CPU seconds."""
    from protocol.core.poplar1.idpf import encode_public_share

    k = measurements.shape[0]
    t = time.process_time()
    raw = np.frombuffer(rnd.token_bytes(k * (16 + vdaf.RAND_SIZE)),
                        dtype=np.uint8).reshape(k, 16 + vdaf.RAND_SIZE)
    rep = vdaf.shard_batch(measurements, raw[:, :16], raw[:, 16:])
    pub_b = [encode_public_share(rep.public, r) for r in range(k)]
    in_b = [[vdaf.encode_input_share(rep.shares[j], r) for r in range(k)] for j in (0, 1)]
    cpu = time.process_time() - t
    del rep
    # receipt: each decoder validates completely; the validated shares are kept
    store.put(lo, raw[:, :16], vdaf.decode_public_shares(pub_b),
              [vdaf.decode_input_shares(in_b[j]) for j in (0, 1)])
    return cpu


#: ``tamper(stage, agg_id, level, values) -> values``: the adversary hook of
#: :func:`search` (the attack catalogue's malicious aggregator), called on what an
#: aggregator is about to send: ``sketch1`` and ``sketch2`` (its two rounds of sketch
#: shares, one row or value per report), ``agg_share`` (its aggregate share).
Tamper = Callable[[str, int, int, Any], Any]


def _exchange(sender: AggregatorParty, receiver: AggregatorParty, level: int, bits: int,
              values, count: int, stage: str = "",  # noqa: ANN001
              tamper: Tamper | None = None):  # noqa: ANN202
    """Send field elements as bytes, decoded (validated) by the receiver."""
    from protocol.core.poplar1.vdaf import decode_field_vec, encode_field_vec

    if tamper is not None:
        values = tamper(stage, sender.agg_id, level, values)

    if level < bits - 1:
        flat = np.asarray(values, dtype=np.uint64).reshape(-1)
    else:   # Field255: a list of ints, or of triples (the round-1 sketch shares)
        flat = [x for row in values for x in (row if isinstance(row, list) else [row])]
    blob = sender.timed(encode_field_vec, level, bits, flat)
    sender.bytes_sent += len(blob)
    receiver.bytes_received += len(blob)
    return receiver.timed(decode_field_vec, level, bits, blob, count)


#: reports one aggregator prepares in one batch: the search splits larger populations
#: into batches of this many (the IDPF nodes of a level are ``(reports, candidates, 16)``
#: bytes and their temporaries; a batch bounds that memory)
PREP_BATCH = 8192


class _Batches:
    """One aggregator's preparation over the population in batches of
    :data:`PREP_BATCH` reports: the same messages, concatenated in report order, and the
    aggregate share summed over the batches. ``load(lo, hi) -> (nonces, public shares,
    input shares)`` gives a batch's reports (from a :class:`ReportStore`, whose
    per-level fields are read when a level asks for them). With ``park_dir`` each
    batch's per-report state between levels is kept in a file there (:meth:`park`,
    :meth:`unpark`)."""

    def __init__(self, vdaf, agg_id: int, verify_key: bytes, n: int, load,  # noqa: ANN001
                 batch: int | None = None, park_dir: str | None = None) -> None:
        from protocol.core.poplar1 import Aggregator

        batch = PREP_BATCH if batch is None else batch
        self.agg_id, self.park_dir = agg_id, park_dir
        self.bounds = [(lo, min(n, lo + batch)) for lo in range(0, n, batch)]
        self.parts = []
        for lo, hi in self.bounds:
            nonces, pub, sh = load(lo, hi)
            self.parts.append(Aggregator(vdaf, agg_id, verify_key, np.array(nonces), pub, sh))

    def park(self, bi: int) -> None:
        """With ``park_dir``: batch ``bi``'s per-report state between levels (IDPF
        nodes, sponge states) to a file, its AES contexts dropped."""
        if self.park_dir is None:
            return
        arrays = self.parts[bi].park()
        np.savez(self._park_path(bi), **arrays)

    def unpark(self, bi: int) -> None:
        import os

        if self.park_dir is None or not os.path.exists(self._park_path(bi)):
            return
        with np.load(self._park_path(bi)) as f:
            self.parts[bi].unpark({k: f[k] for k in f.files})

    def _park_path(self, bi: int) -> str:
        import os

        return os.path.join(self.park_dir, f"agg{self.agg_id}_batch{bi}.npz")


def _add_shares(level: int, bits: int, a, b):  # noqa: ANN001, ANN202
    """The sum of two aggregate shares (Field64 arrays, or lists of Field255 ints)."""
    from protocol.core.poplar1.field import P255, add64

    if level < bits - 1:
        return add64(a, b)
    return [(x + y) % P255 for x, y in zip(a, b)]


def _loader(nonces: np.ndarray, public, share):  # noqa: ANN001, ANN202
    """``load(lo, hi)`` over decoded reports held in memory (slices, no copies)."""
    from protocol.core.poplar1.idpf import PublicShares
    from protocol.core.poplar1.vdaf import InputShares

    def load(lo: int, hi: int):  # noqa: ANN202
        return (nonces[lo:hi],
                PublicShares(public.seed_cw[lo:hi], public.ctrl_cw[lo:hi],
                             public.w_inner[lo:hi], public.w_leaf[lo:hi]),
                InputShares(share.key[lo:hi], share.corr_seed[lo:hi], share.corr_inner[lo:hi],
                            share.corr_leaf[lo:hi]))
    return load


def _store_loader(store, agg_id: int):  # noqa: ANN001, ANN202
    """``load(lo, hi)`` over a :class:`ReportStore` (a batch read, decoded)."""
    def load(lo: int, hi: int):  # noqa: ANN202
        return store.nonces(lo, hi), store.public(agg_id, lo, hi), store.inputs(agg_id, lo, hi)
    return load


def _candidates(passing: list[tuple[bool, ...]], level: int,
                max_candidates: int) -> list[tuple[bool, ...]]:
    """The prefixes of ``level``: every passing prefix extended by one bit, in order.

    Raises:
        StudyError: more than ``max_candidates`` of them.
    """
    cands = sorted(p + (b,) for p in passing for b in (False, True))
    if len(cands) > max_candidates:
        raise StudyError(f"Poplar1: {len(cands)} candidates at level {level}, more than "
                         f"the cap {max_candidates}; raise the threshold")
    return cands


class _LevelSearch:
    """The bookkeeping of a level-by-level prefix search, the same in process and
    across processes: each level's candidates (:meth:`levels`, from the prefixes that
    passed the level before; the search ends at the first level with none), then its
    counts (:meth:`passed`): the passing prefixes, the level's row, ``on_level``, and
    the heavy hitters at the leaf."""

    def __init__(self, bits: int, threshold: int, max_candidates: int,
                 progress: Callable[[Iterable[int]], Iterable[int]] | None,
                 on_level: Callable[[dict[str, Any]], None] | None) -> None:
        self.bits, self.threshold, self.max_candidates = bits, threshold, max_candidates
        self.progress, self.on_level = progress, on_level
        self.passing: list[tuple[bool, ...]] = [()]
        self.rows: list[dict[str, Any]] = []
        self.heavy: dict[tuple[bool, ...], int] = {}

    def levels(self) -> Iterator[tuple[int, list[tuple[bool, ...]]]]:
        it: Iterable[int] = range(self.bits)
        if self.progress is not None:
            it = self.progress(it)
        for level in it:
            cands = _candidates(self.passing, level, self.max_candidates)
            if not cands:
                return
            yield level, cands

    def passed(self, level: int, cands: list[tuple[bool, ...]], counts: Sequence[int],
               rejected: int, t0: float, **figures: Any) -> None:
        """Record a level's counts (``t0``: its ``perf_counter`` start; ``figures``:
        what ``on_level`` receives besides the row)."""
        threshold = self.threshold
        self.passing = [c for c, k in zip(cands, counts) if k >= threshold]
        self.rows.append({"level": level, "candidates": len(cands),
                          "passing": len(self.passing), "rejected": rejected,
                          "seconds": round(time.perf_counter() - t0, 4)})
        if self.on_level is not None:
            self.on_level({**self.rows[-1], **figures})
        if level == self.bits - 1:
            self.heavy = {c: k for c, k in zip(cands, counts) if k >= threshold}


def search(vdaf, nonces: np.ndarray | None, public, shares, threshold: int, *,  # noqa: ANN001
           verify_key: bytes, max_candidates: int = 1 << 14,
           progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
           parties: tuple[AggregatorParty, AggregatorParty] | None = None,
           tamper: Tamper | None = None, store=None,  # noqa: ANN001
           park_dir: str | None = None,
           on_level: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The level-by-level prefix search between two aggregator parties. ``public`` is
    the decoded public shares both aggregators received, or a pair (what each received,
    when a client sent them different ones); ``tamper`` plays a malicious aggregator.
    Or ``store`` (a :class:`~protocol.core.poplar1.store.ReportStore`; then ``nonces``,
    ``public`` and ``shares`` are ``None``): the aggregators read their reports from
    it batch by batch (one level's slab of a batch at a time). Both rounds of a level
    run one preparation batch after another (``tamper`` sees one batch's values at a
    time). With ``park_dir`` (a directory the caller owns) each aggregator keeps its
    per-report state between levels there (:meth:`Aggregator.park`), not in memory.

    Raises:
        StudyError: more candidates at a level than ``max_candidates``.
    """
    bits = vdaf.bits
    n = store.n if store is not None else nonces.shape[0]
    if parties is None:
        parties = tuple(AggregatorParty(j, None) for j in (0, 1))  # type: ignore[assignment]
        for p in parties:
            if store is not None:
                load = _store_loader(store, p.agg_id)
            else:
                pub = public[p.agg_id] if isinstance(public, tuple) else public
                load = _loader(nonces, pub, shares[p.agg_id])
            p.core = p.timed(_Batches, vdaf, p.agg_id, verify_key, n, load, None, park_dir)
    found = _LevelSearch(bits, threshold, max_candidates, progress, on_level)
    for level, cands in found.levels():
        t0 = time.perf_counter()
        counts, rejected = _level_in_process(parties, level, bits, cands, tamper)
        found.passed(level, cands, counts, len(rejected), t0,
                     aggregator_cpu_seconds=[p.cpu_seconds for p in parties])
    return {"heavy": found.heavy, "levels": found.rows, "parties": parties}


def _level_in_process(parties: tuple[AggregatorParty, AggregatorParty], level: int,
                      bits: int, cands: list[tuple[bool, ...]], tamper: Tamper | None = None,
                      keep: list[np.ndarray] | None = None) -> tuple[list[int], list[int]]:
    """One level of the prefix search between the two parties in this process (their
    ``core`` a :class:`_Batches` each): both rounds of the preparation batch by batch
    (the messages of a batch are those of its reports, so the bytes and views are the
    whole level's), the aggregate shares summed over the batches and exchanged once.
    ``keep`` (one bool array per batch, updated in place) aggregates only the reports
    still accepted at the earlier levels of a sampled round. Appends the level to each
    party's view and returns aggregator 0's counts and the rejected reports (indices
    into the parties' reports)."""
    from protocol.core.poplar1 import encode_agg_param, sketch_accepts
    from protocol.core.poplar1.field import add64

    agg_param = (level, tuple(cands))
    ap_bytes = len(encode_agg_param(agg_param))
    agg: list[Any] = [None, None]
    rejected: list[int] = []
    for bi, (lo, hi) in enumerate(parties[0].core.bounds):
        m = hi - lo
        parts = [p.core.parts[bi] for p in parties]
        for p in parties:
            p.timed(p.core.unpark, bi)
        r1 = [p.timed(a.verify_init, agg_param) for p, a in zip(parties, parts)]
        for p in parties:
            p.timed(p.core.park, bi)
        # each sends its sketch shares to the other; both form the round-1 message
        got = [_exchange(parties[j], parties[1 - j], level, bits, r1[j], 3 * m, "sketch1",
                         tamper) for j in (0, 1)]
        msg = []
        for j in (0, 1):
            mine = r1[j]
            other = got[1 - j]
            if level < bits - 1:
                msg.append(parties[j].timed(add64, np.asarray(mine), other.reshape(m, 3)))
            else:
                o = [other[3 * r:3 * r + 3] for r in range(m)]
                msg.append([[(x + y) % (2 ** 255 - 19) for x, y in zip(u, v)]
                            for u, v in zip(mine, o)])
        del r1, got
        r2 = [parties[j].timed(parts[j].verify_next, msg[j]) for j in (0, 1)]
        del msg
        got2 = [_exchange(parties[j], parties[1 - j], level, bits, r2[j], m, "sketch2",
                          tamper) for j in (0, 1)]
        ok = [parties[j].timed(sketch_accepts, level, bits, r2[j], got2[1 - j])
              for j in (0, 1)]
        del r2, got2
        # a report is aggregated only when both accept it (an aggregator that rejects
        # tells the other, as in DAP's ping-pong; an honest one decides from the
        # shares it received, so a lying peer cannot make it accept)
        accepted = ok[0] & ok[1]
        if keep is not None:
            keep[bi] &= accepted
            accepted = keep[bi]
        for j in (0, 1):
            part = parties[j].timed(parts[j].aggregate, accepted)
            agg[j] = part if agg[j] is None else parties[j].timed(
                _add_shares, level, bits, agg[j], part)
        rejected += (lo + np.flatnonzero(~accepted)).tolist()
    shares_seen = [_exchange(parties[j], parties[1 - j], level, bits, agg[j], len(cands),
                             "agg_share", tamper) for j in (0, 1)]
    mod = (1 << 64) - (1 << 32) + 1 if level < bits - 1 else 2 ** 255 - 19
    # each aggregator's counts: its own share plus the share it received; aggregator
    # 0 (the leader) drives the search with its counts
    seen = [[(int(x) + int(y)) % mod for x, y in zip(agg[j], shares_seen[1 - j])]
            for j in (0, 1)]
    for p in parties:
        p.bytes_received += ap_bytes
        p.view.append({"level": level, "candidates": [_bitstr(c) for c in cands],
                       "counts": seen[p.agg_id], "rejected_reports": rejected})
    return seen[0], rejected


# ------------------------------------------------- the two aggregators as processes
class _PeerLink:
    """One aggregator's end of the link to the other: encoded field vectors as bytes
    over a pipe, decoded (validated) on receipt. Aggregator 0 sends first and
    aggregator 1 receives first, so two large messages never wait on each other."""

    def __init__(self, party: AggregatorParty, conn) -> None:  # noqa: ANN001
        self.party, self.conn = party, conn
        self.control_bytes = 0

    def _swap(self, blob: bytes) -> bytes:
        if self.party.agg_id == 0:
            self.conn.send_bytes(blob)
            return self.conn.recv_bytes()
        got = self.conn.recv_bytes()
        self.conn.send_bytes(blob)
        return got

    def exchange(self, level: int, bits: int, values, count: int):  # noqa: ANN001, ANN201
        """Send this aggregator's field elements, receive and decode the other's
        ``count`` elements (:func:`~protocol.core.poplar1.vdaf.decode_field_vec`
        raises on a malformed message). On the leaf, ``values`` given as limbs
        ``(10, ...)`` are sent as their bytes and the other's come back as limbs ``(10,
        count)``; given as ints, as ints."""
        from protocol.core.poplar1.field import is_limbs
        from protocol.core.poplar1.vdaf import decode_field_vec, encode_field_vec

        limbs = level == bits - 1 and is_limbs(values)
        if level < bits - 1 or limbs:
            flat = values if limbs else np.asarray(values, dtype=np.uint64).reshape(-1)
        else:
            flat = [x for row in values for x in (row if isinstance(row, list) else [row])]
        blob = self.party.timed(encode_field_vec, level, bits, flat)
        got = self._swap(blob)
        self.party.bytes_sent += len(blob)
        self.party.bytes_received += len(got)
        if limbs:
            return self.party.timed(decode_field_vec, level, bits, got, count, leaf_limbs=True)
        return self.party.timed(decode_field_vec, level, bits, got, count)

    def decisions(self, ok: np.ndarray) -> np.ndarray:
        """Exchange the per-report accept decisions (packed bits; DAP's ping-pong tells
        the peer of a rejection): not counted in ``bytes_sent``, as in the in-process
        search where both decisions are read directly."""
        blob = np.packbits(ok).tobytes()
        got = self._swap(blob)
        self.control_bytes += len(blob)
        if len(got) != len(blob):
            raise StudyError("Poplar1: the other aggregator's decisions are malformed")
        return np.unpackbits(np.frombuffer(got, dtype=np.uint8), count=ok.size).astype(bool)


def _aggregator_level(party: AggregatorParty, link: _PeerLink, bits: int,
                      agg_param) -> tuple[list[int], list[int]]:  # noqa: ANN001
    """One level of the search at one aggregator in its own process: both rounds of
    every preparation batch with the other aggregator over ``link``, then the aggregate
    shares. Returns this aggregator's counts (its share plus the one it received) and
    the reports rejected at this level."""
    from protocol.core.poplar1 import sketch_accepts
    from protocol.core.poplar1.field import LIMBS, add64, add255

    level, cands = agg_param
    leaf = level == bits - 1
    core = party.core
    agg: Any = None
    rejected: list[int] = []
    for bi, (lo, hi) in enumerate(core.bounds):
        m = hi - lo
        part = core.parts[bi]
        party.timed(core.unpark, bi)
        # on the leaf the Field255 shares stay limbs from round 1 to the decisions:
        # exchanged as their bytes, decoded and validated as limbs, no Python integers
        mine = party.timed(part.verify_init, agg_param, leaf_limbs=True)
        party.timed(core.park, bi)
        other = link.exchange(level, bits, mine, 3 * m)
        if not leaf:
            msg = party.timed(add64, np.asarray(mine), other.reshape(m, 3))
        else:
            msg = party.timed(add255, mine, other.reshape(LIMBS, m, 3))
        del mine, other
        r2 = party.timed(part.verify_next, msg, leaf_limbs=True)
        del msg
        got2 = link.exchange(level, bits, r2, m)
        ok = party.timed(sketch_accepts, level, bits, r2, got2) if party.agg_id == 0 \
            else party.timed(sketch_accepts, level, bits, got2, r2)
        del r2, got2
        theirs = link.decisions(ok)
        accepted = ok & theirs
        share = party.timed(part.aggregate, accepted)
        agg = share if agg is None else party.timed(_add_shares, level, bits, agg, share)
        rejected += (lo + np.flatnonzero(~accepted)).tolist()
    received = link.exchange(level, bits, agg, len(cands))
    mod = (1 << 64) - (1 << 32) + 1 if level < bits - 1 else 2 ** 255 - 19
    counts = [(int(x) + int(y)) % mod for x, y in zip(agg, received)]
    return counts, rejected


def _aggregator_main(agg_id: int, bits: int, verify_key: bytes, store, park_dir,  # noqa: ANN001
                     control, peer) -> None:  # noqa: ANN001
    """An aggregator process: its reports read from its view of the store (its own
    input shares, the public shares, the nonces), then, per aggregation parameter
    received from the collector as the draft's encoding, one level with the other
    aggregator over ``peer``; the counts go back to the collector, and at the end its
    view and costs."""
    from protocol.core.poplar1 import Poplar1
    from protocol.studies.measure import peak_rss_mb

    try:
        vdaf = Poplar1(bits, CTX)
        party = AggregatorParty(agg_id, None)
        party.core = party.timed(_Batches, vdaf, agg_id, verify_key, store.n,
                                 _store_loader(store, agg_id), None, park_dir)
        link = _PeerLink(party, peer)
        while True:
            blob = control.recv_bytes()
            if not blob:
                break
            agg_param = party.timed(vdaf.decode_agg_param, blob)
            party.bytes_received += len(blob)
            counts, rejected = _aggregator_level(party, link, bits, agg_param)
            level, cands = agg_param
            party.view.append({"level": level, "candidates": [_bitstr(c) for c in cands],
                               "counts": counts, "rejected_reports": rejected})
            control.send(("level", counts, len(rejected), party.cpu_seconds, peak_rss_mb()))
        control.send(("done", party.view, party.cpu_seconds, party.bytes_sent,
                      party.bytes_received, link.control_bytes, peak_rss_mb(),
                      time.process_time()))
    except Exception as exc:   # the collector raises it as a StudyError
        try:
            control.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass


def _recv(conn, proc, who: str):  # noqa: ANN001, ANN202
    """The next message of an aggregator process, or a StudyError when it failed."""
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        raise StudyError(f"Poplar1: {who} stopped (exit code {proc.exitcode})") from None
    if msg[0] == "error":
        raise StudyError(f"Poplar1: {who} failed: {msg[1]}")
    return msg


def search_processes(vdaf, store, threshold: int, *, verify_key: bytes,  # noqa: ANN001
                     max_candidates: int = 1 << 14,
                     progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                     park_dir: str | None = None,
                     on_level: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The prefix search of :func:`search` with each aggregator in its own process
    (``fork``): each reads only its own input shares (and the public shares and nonces)
    from ``store``, keeps its own state, and exchanges with the other only the encoded
    verifier shares and aggregate shares (and its accept decisions) over a pipe. This
    process is the collector: it sends each level's aggregation parameter (encoded) to
    both and picks the next candidates from aggregator 0's counts. The same views,
    counts and bytes as :func:`search` (``test_processes_equal_the_in_process_search``).
    ``on_level`` receives each finished level's row with each aggregator's CPU seconds
    and peak memory so far.

    Raises:
        StudyError: too many candidates, or an aggregator process failed.
    """
    import multiprocessing as mp

    bits = vdaf.bits
    ctx = mp.get_context("fork")
    peer = ctx.Pipe()
    control = [ctx.Pipe() for _ in (0, 1)]
    procs = [ctx.Process(target=_aggregator_main, name=f"poplar1-aggregator-{j}",
                         args=(j, bits, verify_key, store, park_dir, control[j][1], peer[j]),
                         daemon=True) for j in (0, 1)]
    names = ("aggregator 0", "aggregator 1")
    found = _LevelSearch(bits, threshold, max_candidates, progress, on_level)
    try:
        for pr in procs:
            pr.start()
        for j in (0, 1):
            control[j][1].close()
            peer[j].close()
        for level, cands in found.levels():
            t0 = time.perf_counter()
            blob = vdaf.encode_agg_param((level, tuple(cands)))
            for j in (0, 1):
                control[j][0].send_bytes(blob)
            got = [_recv(control[j][0], procs[j], names[j]) for j in (0, 1)]
            found.passed(level, cands, got[0][1], got[0][2], t0,
                         aggregator_cpu_seconds=[g[3] for g in got],
                         aggregator_peak_rss_mb=[round(g[4], 1) for g in got])
        for j in (0, 1):
            control[j][0].send_bytes(b"")
        final = [_recv(control[j][0], procs[j], names[j]) for j in (0, 1)]
        for pr in procs:
            pr.join()
    finally:
        for pr in procs:
            if pr.is_alive():
                pr.terminate()
                pr.join()
        for j in (0, 1):
            control[j][0].close()
    parties = []
    for j, f in enumerate(final):
        party = AggregatorParty(j, None, view=f[1], cpu_seconds=f[2], bytes_sent=f[3],
                                bytes_received=f[4])
        party.process = {"control_bytes_sent": f[5], "peak_rss_mb": round(f[6], 1),
                         "process_cpu_seconds": round(f[7], 3)}
        parties.append(party)
    return {"heavy": found.heavy, "levels": found.rows, "parties": tuple(parties)}


def _bitstr(bits: Sequence[bool]) -> str:
    return "".join("1" if b else "0" for b in bits)


def heavy_hitters_bits(measurements: np.ndarray, threshold: int, *, seed: int | None = None,
                       max_candidates: int = 1 << 14,
                       progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                       client_progress: Callable[[int, int], None] | None = None,
                       out_of_core: bool | None = None,
                       tmpdir: str | None = None, park: bool | None = None,
                       processes: bool | None = None,
                       on_level: Callable[[dict[str, Any]], None] | None = None) -> SearchResult:
    """Poplar1 heavy hitters over ``(n, BITS)`` bool measurements. The uploads are
    kept out of core (``np.memmap`` files in a temporary directory under ``tmpdir``,
    removed at the end, also on error) when ``out_of_core``, or by default from
    :data:`OUT_OF_CORE_REPORTS` reports on. ``park`` (implies ``out_of_core``) also
    keeps the aggregators' per-report state between levels in that directory (the IDPF
    nodes and sponges written and read once a level): memory bounded by the preparation
    batch, by default from :data:`PARK_REPORTS` reports on. ``processes`` runs each
    aggregator in its own process (:func:`search_processes`), by default from
    :data:`PROCESS_REPORTS` reports on; else both in this one (:func:`search`).

    Raises:
        StudyError: a bad threshold or measurement shape, or too many candidates.
    """
    from protocol.core.poplar1 import Poplar1

    m = np.asarray(measurements, dtype=bool)
    if m.ndim != 2 or m.shape[0] < 1 or not 1 <= m.shape[1] < (1 << 16):
        raise StudyError("Poplar1 needs at least one client and strings of 1 to 65535 bits")
    if threshold < 1:
        raise StudyError("--threshold must be >= 1")
    vdaf = Poplar1(m.shape[1], CTX)
    t0 = time.perf_counter()
    if park is None:
        park = m.shape[0] >= PARK_REPORTS and out_of_core is not False
    if out_of_core is None:
        out_of_core = park or m.shape[0] >= OUT_OF_CORE_REPORTS
    if park and not out_of_core:
        raise StudyError("parking the aggregators' state needs the reports out of core")
    store, client_cpu, upload = make_reports(vdaf, m, seed, client_progress,
                                             out_of_core=out_of_core, tmpdir=tmpdir)
    if processes is None:
        processes = m.shape[0] >= PROCESS_REPORTS
    try:
        key = _randomness(seed, "poplar1 verify key").token_bytes(vdaf.VERIFY_KEY_SIZE)
        run = search_processes if processes else search
        kw = {} if processes else {"nonces": None, "public": None, "shares": None}
        out = run(vdaf, store=store, threshold=threshold, verify_key=key,
                  max_candidates=max_candidates, progress=progress,
                  park_dir=store.tmpdir if park else None, on_level=on_level, **kw)
    finally:
        store.close()
    return SearchResult(out["heavy"], out["levels"], out["parties"], client_cpu, upload,
                        vdaf.bits, threshold, time.perf_counter() - t0, out_of_core=out_of_core,
                        parked=park, processes=processes)


def privacy_statement() -> dict[str, Any]:
    """Poplar1's guarantee (no differential privacy by itself)."""
    return {"mechanism": "poplar1", "kind": "none", "epsilon": None, "delta": None,
            "source": "Poplar1, draft-irtf-cfrg-vdaf-20 (Boneh et al., IEEE S&P 2021)",
            "note": "no differential privacy: both aggregators learn the count of every "
                    "candidate prefix; each client's string is hidden from either "
                    "aggregator alone (two non-colluding aggregators)"}


def run_poplar1(pop, k: int, *, threshold: int | None = None, max_length: int = 10,  # noqa: ANN001
                seed: int | None = None, max_candidates: int = 1 << 14,
                progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                on_level: Callable[[dict[str, Any]], None] | None = None):  # noqa: ANN201
    """Poplar1 heavy hitters on a one-word population, as an
    :class:`protocol.studies.runners.hh.HHResult`.

    Raises:
        StudyError: bad parameters or too many candidates.
    """
    from protocol.studies.runners.hh import HHResult, truncated_truth

    t = default_threshold(pop.n, k) if threshold is None else int(threshold)
    vocab_bits = encode_words(pop.vocabulary, pop.alphabet, max_length)
    meas = vocab_bits[pop.items]
    res = heavy_hitters_bits(meas, t, seed=seed, max_candidates=max_candidates,
                             progress=progress, on_level=on_level)
    found = {decode_bits(s, pop.alphabet): float(c) for s, c in res.heavy.items()}
    return HHResult("poplar1", found, truncated_truth(pop, max_length), privacy_statement(),
                    details(res, pop.n, max_length, bits_per_char(pop.alphabet)))


def details(res: SearchResult, n: int, max_length: int | None, b: int | None) -> dict[str, Any]:
    """The run's parameters, costs and the parties' views, summarised (JSON-ready)."""
    parties = res.parties
    learnt = sum(len(v["counts"]) for v in parties[0].view)
    below = sum(sum(1 for c in v["counts"] if c < res.threshold) for v in parties[0].view)
    return {
        "bits": res.bits, "threshold": res.threshold,
        "encoding": (f"first {max_length} characters, {b} bits each (alphabet index + 1, "
                     "0 pads)") if max_length else f"{res.bits}-bit strings",
        "levels": len(res.levels),
        "aggregator_rounds": 2 * len(res.levels),
        "rejected_reports": sum(v["rejected"] for v in res.levels),
        "client_upload_bytes": res.upload_bytes_per_client,
        "client_cpu_seconds_per_report": round(res.client_seconds / max(n, 1), 6),
        "aggregator_cpu_seconds": [round(p.cpu_seconds, 3) for p in parties],
        "aggregator_bytes_sent": [p.bytes_sent for p in parties],
        "aggregator_bytes_received": [p.bytes_received for p in parties],
        "aggregators_learn": {"prefix_counts": learnt, "below_threshold": below},
        # each aggregator's own process (peak memory, whole CPU), or None: both in one
        "aggregator_processes": (None if parties[0].process is None
                                 else [p.process for p in parties]),
        "seconds": round(res.seconds, 3),
        "per_level": res.levels,
    }


# ------------------------------------------------------- sampled mode (TrieHH's release)
#: ``--poplar1-mode``: ``plain`` is the draft's prefix search over every report at every
#: bit level (no differential privacy); ``sampled`` is TrieHH's release computed by
#: Poplar1 (a fresh uniform sample of ``m`` clients per character, a prefix kept with at
#: least ``theta`` sampled reports; Zhu et al. 2020, Theorem 1; docs/poplar1.md)
POPLAR1_MODES = ("plain", "sampled")


@dataclass
class SampledResult:
    """What a sampled search released and what it cost.

    ``released[i]`` is the set of ``i + 1``-character prefixes (tuples of character
    codes, index + 1, 0 the end of the word) released at round ``i + 1``; ``words`` the
    complete words among them (ended by code 0, or of ``L`` characters), end code
    dropped. ``rounds`` has one row per round (character): its sample, the clients who
    uploaded for the first time, and per bit level the candidates and passing prefixes.
    """

    released: list[list[tuple[int, ...]]]
    words: list[tuple[int, ...]]
    rounds: list[dict[str, Any]]
    parties: tuple[AggregatorParty, AggregatorParty]
    client_seconds: float
    collector_seconds: float
    uploads: int
    upload_bytes_per_client: int
    bits: int
    theta: int
    m: int
    n: int
    max_length: int
    seconds: float
    #: each round's sampled clients (population indices, ascending): what both
    #: aggregators know, since they prepare exactly those reports
    samples: list[np.ndarray] = field(default_factory=list)
    #: the uploads were kept in files (:func:`sampled_search`'s ``out_of_core``)
    out_of_core: bool = False


def codes_to_bits(codes: np.ndarray, b: int) -> np.ndarray:
    """``(N, L)`` character codes -> ``(N, L b)`` bool, each code on ``b`` bits, most
    significant first (the encoding of :func:`encode_words`)."""
    shifts = np.arange(b - 1, -1, -1)
    c = np.asarray(codes, dtype=np.int64)
    return ((c[:, :, None] >> shifts) & 1).astype(bool).reshape(c.shape[0], -1)


def encode_codes(vocabulary: Sequence[str], alphabet: str, max_length: int) -> np.ndarray:
    """``(V, max_length)`` character codes of :func:`encode_words` (index + 1, 0 pads).

    Raises:
        StudyError: a character outside the alphabet, or ``max_length < 1``.
    """
    b = bits_per_char(alphabet)
    bits = encode_words(vocabulary, alphabet, max_length).reshape(len(vocabulary), max_length, b)
    return (bits.astype(np.int64) << np.arange(b - 1, -1, -1)).sum(axis=2)


def _bits_to_codes(prefix: tuple[bool, ...], b: int) -> tuple[int, ...]:
    out = []
    for j in range(0, len(prefix), b):
        c = 0
        for x in prefix[j:j + b]:
            c = 2 * c + int(x)
        out.append(c)
    return tuple(out)


def _unpack_ctrl(c: np.ndarray) -> np.ndarray:
    out = np.empty(c.shape + (2,), dtype=bool)
    out[..., 0] = (c & 1).astype(bool)
    out[..., 1] = (c >> 1).astype(bool)
    return out


#: rows per positioned read when a round's sample is gathered from a store out of core
GATHER_ROWS = 16_384


def _gather(store, name: str, idx: np.ndarray, level: int | None = None) -> np.ndarray:  # noqa: ANN001
    """Rows ``idx`` (store rows, any order) of table ``name`` (at ``level`` for a
    level-major one), in the order of ``idx``. In memory: the rows of the table's view.
    Out of core: positioned reads of at most :data:`GATHER_ROWS` rows, each over the
    span of the sampled rows in one window of the table, so the memory is bounded by
    the sample and one window, never by the table."""
    if not store.out_of_core:
        return store.read(name, 0, store.n, level)[idx]
    shape, dtype = store.tables[name]
    inner = shape[2:] if level is not None else shape[1:]
    out = np.empty((idx.size,) + tuple(inner), dtype=dtype)
    if idx.size == 0:
        return out
    order = np.argsort(idx, kind="stable")
    s = idx[order]
    i0 = 0
    while i0 < s.size:
        a = int(s[i0])
        i1 = int(np.searchsorted(s, a + GATHER_ROWS, side="left"))
        b = int(s[i1 - 1]) + 1
        out[order[i0:i1]] = store.read(name, a, b, level)[s[i0:i1] - a]
        i0 = i1
    return out


def _rows_loader(store, agg_id: int, rows: np.ndarray):  # noqa: ANN001, ANN202
    """``load(lo, hi)`` of the reports at store rows ``rows[lo:hi]`` (a round's sample,
    gathered from the aggregators' store by :func:`_gather`: only the sampled rows;
    per-level fields read when a level asks, as :meth:`ReportStore.public` does for a
    range)."""
    from protocol.core.poplar1.idpf import PublicShares
    from protocol.core.poplar1.store import Field255Rows, LevelColumns
    from protocol.core.poplar1.vdaf import InputShares

    def cols(name: str, idx: np.ndarray, ctrl: bool = False) -> LevelColumns:
        shape, dtype = store.tables[name]

        def get(level: int) -> np.ndarray:
            x = _gather(store, name, idx, level)
            return _unpack_ctrl(x) if ctrl else x

        return LevelColumns(get, (idx.size, shape[0]) + ((2,) if ctrl else shape[2:]),
                            bool if ctrl else dtype)

    def leaf(name: str, idx: np.ndarray) -> Field255Rows:
        return Field255Rows(lambda: _gather(store, name, idx), idx.size)

    def load(lo: int, hi: int):  # noqa: ANN202
        idx = np.asarray(rows[lo:hi], dtype=np.int64)
        pub = PublicShares(cols("seed_cw", idx), cols("ctrl_cw", idx, ctrl=True),
                           cols("w_inner", idx), leaf("w_leaf", idx))
        inp = InputShares(np.array(_gather(store, f"key{agg_id}", idx)),
                          np.array(_gather(store, f"corr_seed{agg_id}", idx)),
                          cols(f"corr_inner{agg_id}", idx), leaf(f"corr_leaf{agg_id}", idx))
        return np.array(_gather(store, "nonces", idx)), pub, inp
    return load


def sampled_search(codes: np.ndarray, b: int, symbols: int, theta: int, m: int, *,
                   sample_rng: np.random.Generator, seed: int | None = None,
                   task: str = "triehh", max_candidates: int = 1 << 14,
                   progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                   on_level: Callable[[dict[str, Any]], None] | None = None,
                   out_of_core: bool | None = None,
                   tmpdir: str | None = None) -> SampledResult:
    """TrieHH's release (Zhu et al. 2020, Algorithm 1, one character a round) computed by
    Poplar1's two aggregators.

    ``codes`` is ``(n, L)``: each client's word cut to ``L`` characters as codes
    ``1 .. symbols`` (0 ends the word and pads), ``b`` bits a code. Round ``i = 1 .. L``:

    1. the collector draws a fresh uniform sample of exactly ``m`` of the ``n`` clients
       with TrieHH's sampler (``Transport.draw_sample`` of the plaintext transport, the
       beacon of :mod:`protocol.core.sample_beacon`, fed from ``sample_rng``: with
       TrieHH's sampling stream it draws TrieHH's users);
    2. a sampled client that has not uploaded yet shards its word once (all ``L b``
       levels in one report, as the draft's clients do) and uploads;
    3. the two aggregators prepare the sampled reports, and only those, at the ``b`` bit
       levels of character ``i``: the first level's candidates are both children of
       every released, unfinished ``(i - 1)``-character prefix, each next level's the
       children of the prefixes with at least ``theta`` accepted sampled reports, and the
       last level's only the children that end in a character code (``0 .. symbols``).
       A report rejected at one of these levels counts at none of the later ones;
    4. the ``i``-character prefixes with at least ``theta`` sampled reports are released;
       those ending in code 0 (and at ``i = L`` all) are complete words and are not
       extended. The run stops when a round releases nothing or nothing is left to
       extend.

    Only which prefixes passed leaves the aggregators (the collector and the analyst
    see no counts); each aggregator's view holds every count it evaluated.

    The uploads are kept once in a :class:`~protocol.core.poplar1.store.ReportStore` of
    ``min(n, L m)`` rows: ``out_of_core`` (default: from :data:`OUT_OF_CORE_REPORTS`
    rows on) in files under ``tmpdir`` (default the system's temporary directory),
    removed when the search ends; each round reads only its sampled rows
    (:func:`_gather`). Where they are kept changes no result.

    Raises:
        StudyError: bad parameters or shapes, or more candidates at a level than
            ``max_candidates``.
    """
    from protocol.core.contract import plaintext_transport
    import tempfile

    from protocol.core.poplar1 import Poplar1
    from protocol.core.poplar1.store import ReportStore

    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[0] < 1 or codes.shape[1] < 1:
        raise StudyError("Poplar1 (sampled) needs at least one client and one character")
    n, L = codes.shape
    if b < 1 or not 1 <= symbols < (1 << b) or codes.min() < 0 or codes.max() > symbols:
        raise StudyError("character codes must be in 0 .. symbols < 2^b")
    if theta < 1:
        raise StudyError("theta must be >= 1")
    if not 1 <= m <= n:
        raise StudyError(f"the sample size m must be in 1 .. n = {n}, got {m}")
    bits = L * b
    if bits < 2:
        raise StudyError("Poplar1 needs strings of at least 2 bits")
    vdaf = Poplar1(bits, CTX)
    t_start = time.perf_counter()
    rnd = _randomness(seed, "poplar1 clients")
    key = _randomness(seed, "poplar1 verify key").token_bytes(vdaf.VERIFY_KEY_SIZE)
    upload = vdaf.NONCE_SIZE + vdaf.public_share_size() + 2 * vdaf.input_share_size()
    sampler = plaintext_transport()
    parties = (AggregatorParty(0, None), AggregatorParty(1, None))
    cap = min(n, L * m)
    if out_of_core is None:
        out_of_core = cap >= OUT_OF_CORE_REPORTS
    store = ReportStore(bits, cap, directory=(tmpdir or tempfile.gettempdir())
                        if out_of_core else None)
    row_of = np.full(n, -1, dtype=np.int64)
    filled = 0
    client_cpu = collector_cpu = 0.0
    frontier: list[tuple[bool, ...]] = [()]
    released: list[list[tuple[int, ...]]] = []
    words: list[tuple[int, ...]] = []
    rounds: list[dict[str, Any]] = []
    samples: list[np.ndarray] = []
    it: Iterable[int] = range(1, L + 1)
    if progress is not None:
        it = progress(it)
    try:
        for i in it:
            if not frontier:
                break
            t0 = time.perf_counter()
            c0 = time.process_time()
            users = sampler.draw_sample(task, i, n, m, sample_rng).users
            samples.append(users)
            new = users[row_of[users] < 0]
            collector_cpu += time.process_time() - c0
            for lo in range(0, new.size, CHUNK):
                chunk = new[lo:lo + CHUNK]
                client_cpu += _shard_into(vdaf, store, filled, codes_to_bits(codes[chunk], b),
                                          rnd)
                row_of[chunk] = np.arange(filled, filled + chunk.size)
                filled += chunk.size
            rows = row_of[users]
            for p in parties:
                p.core = p.timed(_Batches, vdaf, p.agg_id, key, rows.size,
                                 _rows_loader(store, p.agg_id, rows), None, None)
            keep = [np.ones(hi - lo, dtype=bool) for lo, hi in parties[0].core.bounds]
            surv = frontier
            sub: list[dict[str, Any]] = []
            for j in range(b):
                level = (i - 1) * b + j
                c0 = time.process_time()
                cands = sorted(p + (x,) for p in surv for x in (False, True))
                if j == b - 1:   # only character codes end a character
                    cands = [c for c in cands if _bits_to_codes(c[-b:], b)[0] <= symbols]
                collector_cpu += time.process_time() - c0
                if len(cands) > max_candidates:
                    raise StudyError(f"Poplar1: {len(cands)} candidates at level {level}, "
                                     f"more than the cap {max_candidates}")
                if not cands:
                    surv = []
                    break
                counts, rejected = _level_in_process(parties, level, bits, cands, None, keep)
                for p in parties:
                    p.view[-1]["round"] = i
                surv = [c for c, k in zip(cands, counts) if k >= theta]
                sub.append({"level": level, "candidates": len(cands), "passing": len(surv),
                            "rejected": len(rejected)})
                if not surv:
                    break
            for p in parties:
                p.core = None
            rel = [_bits_to_codes(c, b) for c in surv]
            released.append(rel)
            words += [c[:-1] if c[-1] == 0 else c for c in rel if c[-1] == 0 or i == L]
            frontier = [c for c in surv if _bits_to_codes(c[-b:], b)[0] != 0]
            rounds.append({"round": i, "sampled": int(users.size), "new_uploads": int(new.size),
                           "levels": sub, "released": len(rel),
                           "seconds": round(time.perf_counter() - t0, 4)})
            if on_level is not None:
                on_level({**rounds[-1], "aggregator_cpu_seconds":
                          [p.cpu_seconds for p in parties]})
            if not rel:
                break
    finally:
        store.close()
    return SampledResult(released, words, rounds, parties, client_cpu, collector_cpu, filled,
                         upload, bits, int(theta), int(m), n, L,
                         time.perf_counter() - t_start, samples, bool(out_of_core))


def sampled_parameters(n: int, epsilon: float, delta: float | None, max_length: int,  # noqa: ANN201
                       left: str | None = None):
    """TrieHH's parameters for the target (Corollary 1: theta, gamma, ``m = floor(gamma
    sqrt(n))``) and the guarantee of Theorem 1 at them, which the sampled mode carries.
    ``left`` says how many users there are (default ``"n = {n} users"``; a population's
    :func:`protocol.studies.datasets.users_left`).

    Raises:
        StudyError: the target is outside the theorem's conditions (the message names
            the failing one); a population too small for the target says so, with the
            users and the smallest population that meets the conditions.
    """
    from mechanisms.triehh_privacy import TrieHHPrivacyError, corollary1
    from protocol.studies.runners.triehh import too_few_for_target

    d = 1.0 / float(n) ** 2 if delta is None else float(delta)
    try:
        return corollary1(float(epsilon), d, int(n), int(max_length))
    except TrieHHPrivacyError as exc:
        why = f"Poplar1 (sampled) takes TrieHH's parameters: {exc}"
        if "theta" not in str(exc) and "gamma" not in str(exc):
            raise StudyError(why) from None
        # 1/n^2 for this n means the default rule, not that fixed value
        per_n = delta is None or math.isclose(d, 1.0 / float(max(n, 1)) ** 2)
        raise too_few_for_target(float(epsilon), None if per_n else d, int(n),
                                 int(max_length), False,
                                 left or f"n = {int(n):,} users", why,
                                 who="Poplar1 (sampled)") from None


def sampled_privacy_statement(params) -> dict[str, Any]:  # noqa: ANN001
    """The guarantee of the sampled mode: TrieHH's Theorem 1 at the same n, theta, m, L,
    for the released trie (docs/poplar1.md proves the reduction)."""
    g = params.guarantee
    return {"mechanism": "poplar1", "kind": "central", "epsilon": g.epsilon,
            "delta": g.delta,
            "theorem": "Zhu et al. 2020, Theorem 1 (TrieHH's release, computed by Poplar1)",
            "parameters": {"theta": params.theta, "m": params.m, "n": params.n,
                           "L": params.max_levels, "gamma": params.m / math.sqrt(params.n)},
            "protects_against": "analyst (the released trie); each aggregator sees every "
                                "count it evaluates over the sample",
            "guarantee": g.to_json() if hasattr(g, "to_json") else None}


def sampled_run(pop, *, epsilon: float, delta: float | None = None,  # noqa: ANN001, ANN201
                max_length: int = 10, seed: int | None = None,
                sample_rng: np.random.Generator | None = None,
                max_candidates: int = 1 << 14,
                progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                on_level: Callable[[dict[str, Any]], None] | None = None):
    """The sampled mode on a one-word population at TrieHH's parameters for the central
    target ``(epsilon, delta)`` (default ``delta = 1/n^2``): ``(parameters,``
    :class:`SampledResult` ``)``. ``sample_rng`` defaults to one seeded from ``seed``
    (``None``: from the OS).

    Raises:
        StudyError: bad parameters, a target outside Theorem 1's conditions (too few
            users: the users and the minimum), or too many candidates.
    """
    from protocol.studies.datasets import users_left

    params = sampled_parameters(pop.n, epsilon, delta, max_length, users_left(pop))
    codes = encode_codes(pop.vocabulary, pop.alphabet, max_length)[pop.items]
    rng = sample_rng if sample_rng is not None else np.random.default_rng(
        None if seed is None else [seed, 1])
    res = sampled_search(codes, bits_per_char(pop.alphabet), len(pop.alphabet), params.theta,
                         params.m, sample_rng=rng, seed=seed, max_candidates=max_candidates,
                         progress=progress, on_level=on_level)
    return params, res


def run_poplar1_sampled(pop, k: int, *, epsilon: float, delta: float | None = None,  # noqa: ANN001
                        max_length: int = 10, seed: int | None = None,
                        sample_rng: np.random.Generator | None = None,
                        max_candidates: int = 1 << 14,
                        progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                        on_level: Callable[[dict[str, Any]], None] | None = None):  # noqa: ANN201
    """:func:`sampled_run` as an :class:`protocol.studies.runners.hh.HHResult`
    (membership only: counts ``None``).

    Raises:
        StudyError: as :func:`sampled_run`.
    """
    from protocol.studies.runners.hh import HHResult, truncated_truth

    params, res = sampled_run(pop, epsilon=epsilon, delta=delta, max_length=max_length,
                              seed=seed, sample_rng=sample_rng, max_candidates=max_candidates,
                              progress=progress, on_level=on_level)
    alpha = pop.alphabet
    found = {"".join(alpha[c - 1] for c in w): None for w in res.words}
    return HHResult("poplar1", found, truncated_truth(pop, max_length),
                    sampled_privacy_statement(params), sampled_details(res, pop.n))


def sampled_details(res: SampledResult, n: int) -> dict[str, Any]:
    """The sampled run's parameters, costs and the parties' views, summarised."""
    parties = res.parties
    learnt = sum(len(v["counts"]) for v in parties[0].view)
    below = sum(sum(1 for c in v["counts"] if c < res.theta) for v in parties[0].view)
    return {
        "mode": "sampled", "bits": res.bits, "theta": res.theta, "m": res.m,
        "reports_in_files": res.out_of_core,
        "max_length": res.max_length,
        "levels": len(parties[0].view), "rounds": len(res.rounds),
        "aggregator_rounds": 2 * len(parties[0].view),
        "rejected_reports": sum(lv["rejected"] for r in res.rounds for lv in r["levels"]),
        "clients_uploaded": res.uploads,
        "clients_sampled": sum(r["sampled"] for r in res.rounds),
        "client_upload_bytes": res.upload_bytes_per_client,
        "client_cpu_seconds": round(res.client_seconds, 3),
        "client_cpu_seconds_per_report": round(res.client_seconds / max(res.uploads, 1), 6),
        "collector_cpu_seconds": round(res.collector_seconds, 3),
        "aggregator_cpu_seconds": [round(p.cpu_seconds, 3) for p in parties],
        "aggregator_bytes_sent": [p.bytes_sent for p in parties],
        "aggregator_bytes_received": [p.bytes_received for p in parties],
        "aggregators_learn": {"prefix_counts": learnt, "below_threshold": below,
                              "sampled_reports": sum(r["sampled"] for r in res.rounds)},
        "released_prefixes": sum(len(r) for r in res.released),
        "seconds": round(res.seconds, 3),
        "per_round": res.rounds,
    }


# ----------------------------------------------------------------------- side by side
@dataclass(frozen=True)
class SideBySideOptions:
    """TrieHH and Poplar1 on one population (``fedhh eval compare --mechanisms
    triehh,poplar1``): TrieHH at the central target ``epsilon`` (``delta = 1/n^2``,
    Corollary 1) over ``triehh_transport``; Poplar1 at ``threshold`` (default rule);
    both with ``max_length`` characters."""

    dataset: str = "en"
    users: int = 100_000
    k: int = 10
    epsilon: float = 4.0
    max_length: int = 10
    threshold: int | None = None
    triehh_transport: str = "plain"
    alphabet: str | None = None
    drop_unencodable: bool = False
    seed: int | None = None


_TRIEHH_LEARNS = {
    "plain": "the server sees every sampled client's vote, then the passing prefixes",
    "secagg": "the server sees each round's vote histogram over the candidates (the sum), "
              "then the passing prefixes",
    "threshold": "the committee opens only the prefixes at or above theta",
}


def side_by_side(opts: SideBySideOptions,
                 say: Callable[[str], None] = lambda _m: None) -> tuple[dict[str, Any], list[str]]:
    """Run both, score both at ``k`` against the truth each can reach, and return
    ``(summary, Markdown table lines)``.

    Raises:
        StudyError: bad options, dataset, target or transport.
    """
    from protocol.studies.runners import default_transport
    from protocol.studies.runners import triehh as triehh_runner
    from protocol.studies.measure import peak_rss_mb
    from protocol.studies.runners.hh import HHResult, load_population, score

    if opts.users < 2 or opts.k < 1:
        raise StudyError("--users must be >= 2 and --k >= 1")
    if opts.triehh_transport not in _TRIEHH_LEARNS:
        raise StudyError("the TrieHH transport must be plain, secagg or threshold")
    root = np.random.default_rng(opts.seed)
    data_rng, run_rng = root.spawn(2)
    pop = load_population(opts.dataset, opts.users, data_rng, alphabet=opts.alphabet,
                          drop_unencodable=opts.drop_unencodable)
    n = pop.n
    delta = 1.0 / float(n) ** 2
    rows = []
    # TrieHH
    say(f"TrieHH on {pop.name}, n = {n:,}, central epsilon {opts.epsilon:g}")
    t0 = time.perf_counter()
    prep, _ = triehh_runner.prepare(triehh_runner.plain_options(
        pop.name, n, opts.epsilon, delta, opts.max_length), population=pop)
    tr = default_transport(opts.triehh_transport)
    if opts.triehh_transport != "plain" and opts.seed is not None:
        from protocol.core.transports import get_transport
        tr = get_transport(opts.triehh_transport, simulate=True)
    result = triehh_runner.run_once(prep, tr, run_rng)
    t_sec = time.perf_counter() - t0
    cost = result.total_cost
    contacted = sum(r.sampled for r in result.rounds)
    server_cpu = {k: round(v, 3) for k, v in cost.cpu_seconds.items()}
    t_res = HHResult("triehh", dict(result.heavy_hitters), pop.top(len(pop.vocabulary)), {}, {})
    g = result.guarantee
    rows.append({
        "mechanism": "triehh", **_metrics(score(t_res, opts.k), opts.k),
        "client_upload_bytes": round(cost.bytes_up / contacted, 1) if contacted else 0,
        "clients_contacted": int(contacted),
        "rounds": len(result.rounds),
        "server_cpu_seconds": server_cpu,
        "server_bytes": int(cost.bytes_up + cost.bytes_down),
        "learns": _TRIEHH_LEARNS[opts.triehh_transport],
        "privacy": (f"central ({g.epsilon:.3g}, {g.delta:.2g})-DP (Zhu et al. 2020, Corollary 1)"
                    if g else f"none: {result.guarantee_note}"),
        "seconds": round(t_sec, 2),
    })
    # Poplar1
    t = default_threshold(n, opts.k) if opts.threshold is None else int(opts.threshold)
    say(f"Poplar1 on the same {n:,} clients, threshold {t}")
    cpu0 = time.process_time()

    def level_line(row: dict[str, Any]) -> None:
        peak = row.get("aggregator_peak_rss_mb")
        say(f"Poplar1 level {row['level']}: {row['candidates']} candidates, "
            f"{row['passing']} passing, {row['seconds']:.0f} s; CPU s: collector "
            f"{time.process_time() - cpu0:.0f}, aggregators "
            + ", ".join(f"{c:.0f}" for c in row["aggregator_cpu_seconds"])
            + ("" if peak is None else "; peak MB: collector "
               f"{peak_rss_mb():.0f}, aggregators " + ", ".join(f"{m:.0f}" for m in peak)))
    p_res = run_poplar1(pop, opts.k, threshold=t, max_length=opts.max_length, seed=opts.seed,
                        on_level=level_line)
    d = p_res.details
    rows.append({
        "mechanism": "poplar1", **_metrics(score(p_res, opts.k), opts.k),
        "client_upload_bytes": d["client_upload_bytes"],
        "clients_contacted": n,
        "rounds": d["aggregator_rounds"],
        "server_cpu_seconds": {f"aggregator {j}": c
                               for j, c in enumerate(d["aggregator_cpu_seconds"])},
        "server_bytes": int(sum(d["aggregator_bytes_sent"])),
        "learns": (f"both aggregators learn the count of every candidate prefix: "
                   f"{d['aggregators_learn']['prefix_counts']} counts, "
                   f"{d['aggregators_learn']['below_threshold']} of them below the threshold"),
        "privacy": "none by itself (no DP); a client's string is hidden from each "
                   "aggregator alone",
        "seconds": d["seconds"],
        "threshold": t, "bits": d["bits"], "levels": d["levels"],
        "client_cpu_seconds": round(d["client_cpu_seconds_per_report"] * n, 2),
        "aggregator_processes": d["aggregator_processes"],
    })
    k = opts.k
    lines = [f"{pop.name}, n = {n:,}, K = {k}, L = {opts.max_length} characters, seed "
             f"{opts.seed}; TrieHH at central epsilon {opts.epsilon:g}, delta 1/n^2, over "
             f"{opts.triehh_transport}; Poplar1 at threshold {t} ({rows[1]['bits']} bits).", "",
             f"| mechanism | recall@{k} | precision@{k} | precision | client upload (bytes) "
             "| clients contacted | rounds | server CPU (s) | server bytes | wall (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        cpu = ", ".join(f"{p} {v:.2f}" for p, v in r["server_cpu_seconds"].items())
        lines.append(f"| {r['mechanism']} | {r['recall_at_k']:.3f} | {r['precision_at_k']:.3f} "
                     f"| {r['precision']:.3f} | {r['client_upload_bytes']:,} | "
                     f"{r['clients_contacted']:,} | {r['rounds']} | {cpu} | "
                     f"{r['server_bytes']:,} | {r['seconds']:.1f} |")
    lines.append("")
    for r in rows:
        lines.append(f"- {r['mechanism']}: learns -- {r['learns']}; privacy -- {r['privacy']}")
    summary = {"dataset": pop.name, "n": n, "k": k, "seed": opts.seed,
               "max_length": opts.max_length, "rows": rows}
    return summary, lines


def _metrics(sc: dict[str, Any], k: int) -> dict[str, Any]:
    return {"recall_at_k": sc["recall_at_k"], "precision_at_k": sc["precision_at_k"],
            "f1_at_k": sc["f1_at_k"], "precision": sc["precision"],
            "discovered": len(sc["discovered"])}


# ----------------------------------------------------------------------- benchmarks
def load_reference(path: str):  # noqa: ANN201
    """The draft's own Python reference (``poc/`` of the cfrg/draft-irtf-cfrg-vdaf
    repository at the draft's tag), imported from ``path`` at run time -- never part of
    this project. It imports ``Cryptodome`` (pycryptodomex); when only pycryptodome is
    installed its ``Crypto`` package (the same code) is registered under that name.

    Raises:
        StudyError: no ``vdaf_poc`` under ``path``, or a Python older than 3.12 (the
            reference uses PEP 695 generics).
    """
    import importlib
    import pathlib
    import sys

    root = pathlib.Path(path)
    if (root / "poc" / "vdaf_poc").is_dir():
        root = root / "poc"
    if not (root / "vdaf_poc" / "vdaf_poplar1.py").is_file():
        raise StudyError(f"--reference {path}: no vdaf_poc/vdaf_poplar1.py there (give the "
                         "poc/ directory of cfrg/draft-irtf-cfrg-vdaf)")
    if sys.version_info < (3, 12):
        raise StudyError("the draft's reference needs Python >= 3.12")
    try:
        importlib.import_module("Cryptodome")
    except ModuleNotFoundError:
        import Crypto
        import Crypto.Cipher
        import Crypto.Hash

        sys.modules.update({"Cryptodome": Crypto, "Cryptodome.Cipher": Crypto.Cipher,
                            "Cryptodome.Hash": Crypto.Hash})
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        return importlib.import_module("vdaf_poc.vdaf_poplar1")
    except Exception as exc:  # noqa: BLE001 - any import failure of foreign code
        raise StudyError(f"--reference {path}: cannot import the reference: {exc}") from None


def _load() -> float | None:
    """The one-minute load average (``None`` where the OS gives none)."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _median(xs: list[float]) -> float:
    return float(np.median(np.asarray(xs)))


def bench_vs_reference(reference: str, *, bits: int = 32, reports: int = 1000,
                       ref_reports: int = 6, candidates: int = 16, repeats: int = 3,
                       seed: int = 0) -> dict[str, Any]:
    """Cost per report of client sharding and of one level's preparation (both
    aggregators, from the IDPF root as the reference does) at an inner level and at the
    leaf, ours (batched over ``reports``) against the draft's reference (one report at a
    time, ``ref_reports`` of them), interleaved ``repeats`` times; medians and ratios of
    this process's CPU time (``time.process_time``: the load of other processes on a
    shared machine does not enter).
    The outputs are checked equal on the reference's reports (public and input shares,
    every verifier share, the output shares).

    Raises:
        StudyError: bad sizes, or a reference that cannot be loaded or disagrees.
    """
    from protocol.core.poplar1 import Aggregator, Poplar1, jit, sketch_accepts, sketch_message
    from protocol.core.poplar1.idpf import encode_public_share
    from protocol.core.poplar1.vdaf import encode_field_vec
    from protocol.core.poplar1.xof import XofTurboShake128, turboshake_many

    if not 1 <= bits < (1 << 16) or reports < 1 or not 1 <= ref_reports <= reports \
            or candidates < 1 or repeats < 1:
        raise StudyError("--bits in [1, 65535], --reports >= --ref-reports >= 1, "
                         "--candidates >= 1, --repeats >= 1")
    ref_mod = load_reference(reference)
    ref = ref_mod.Poplar1(bits)
    ctx = CTX
    ours = Poplar1(bits, ctx)
    rng = np.random.default_rng(seed)
    meas = rng.integers(0, 2, size=(reports, bits)).astype(bool)
    nonces = rng.integers(0, 256, size=(reports, 16), dtype=np.uint8)
    rands = rng.integers(0, 256, size=(reports, ours.RAND_SIZE), dtype=np.uint8)
    key = rng.integers(0, 256, size=32, dtype=np.uint8).tobytes()

    def agg_param(level: int) -> tuple[int, tuple[tuple[bool, ...], ...]]:
        pref = {tuple(bool(b) for b in meas[i, :level + 1]) for i in range(min(reports, candidates // 2))}
        while len(pref) < min(candidates, 2 ** (level + 1)):
            pref.add(tuple(bool(b) for b in rng.integers(0, 2, size=level + 1)))
        return level, tuple(sorted(pref))

    levels = sorted({max(0, bits // 2 - 1), bits - 1})
    params = {lv: agg_param(lv) for lv in levels}
    res: dict[str, list[float]] = {k: [] for k in
                                   ["shard_ours", "shard_ref"] + [f"prep_{w}_{lv}" for lv in levels
                                                                  for w in ("ours", "ref")]}
    checked = {"reports": ref_reports, "shares_equal": True, "prep_equal": True}
    rep = None
    load0 = _load()
    # the XOF alone: one TurboSHAKE128 of a shard-sized input (a 32-byte seed, the
    # tag and the nonce) per report, pycryptodome one call each against the numpy sponge
    # over all of them
    xof_msgs = np.concatenate([rands[:, 96:128], nonces], axis=1)
    xof_dst = ours.dst(1)
    for _ in range(repeats):
        t = time.process_time()
        for row in xof_msgs:
            XofTurboShake128(row[:32].tobytes(), xof_dst, row[32:].tobytes()).next(32)
        res.setdefault("xof_one_call", []).append((time.process_time() - t) / reports)
        t = time.process_time()
        turboshake_many(xof_msgs[:, :32], xof_dst, xof_msgs[:, 32:], 32)
        res.setdefault("xof_batch", []).append((time.process_time() - t) / reports)
        t = time.process_time()
        rep = ours.shard_batch(meas, nonces, rands)
        res["shard_ours"].append((time.process_time() - t) / reports)
        t = time.process_time()
        ref_out = [ref.shard(ctx, tuple(bool(b) for b in meas[i]), nonces[i].tobytes(),
                             rands[i].tobytes()) for i in range(ref_reports)]
        res["shard_ref"].append((time.process_time() - t) / ref_reports)
        for i, (pub, ins) in enumerate(ref_out):
            if ref.encode_public_share(pub) != encode_public_share(rep.public, i) or \
                    [ref.encode_input_share(s) for s in ins] != \
                    [ours.encode_input_share(rep.shares[j], i) for j in (0, 1)]:
                checked["shares_equal"] = False
        for lv in levels:
            ap = params[lv]
            t = time.process_time()
            aggs = [Aggregator(ours, j, key, rep.nonces, rep.public, rep.shares[j])
                    for j in (0, 1)]
            r1 = [a.verify_init(ap) for a in aggs]
            r2 = [a.verify_next(sketch_message(lv, bits, *r1)) for a in aggs]
            ok = sketch_accepts(lv, bits, *r2)
            outs = [a.out_shares(ok) for a in aggs]
            res[f"prep_ours_{lv}"].append((time.process_time() - t) / reports)
            t = time.process_time()
            ref_outs = []
            for i, (pub, ins) in enumerate(ref_out):
                st, sh = zip(*[ref.verify_init(key, ctx, j, ap, nonces[i].tobytes(), pub, ins[j])
                               for j in (0, 1)])
                msg = ref.verifier_shares_to_message(ctx, ap, list(sh))
                st2, sh2 = zip(*[ref.verify_next(ctx, st[j], msg) for j in (0, 1)])
                msg2 = ref.verifier_shares_to_message(ctx, ap, list(sh2))
                ref_outs.append(([ref.verify_next(ctx, st2[j], msg2) for j in (0, 1)], sh, sh2))
            res[f"prep_ref_{lv}"].append((time.process_time() - t) / ref_reports)
            if not ok.all():
                checked["prep_equal"] = False
            for i, (o, sh, sh2) in enumerate(ref_outs):
                for j in (0, 1):
                    mine = [encode_field_vec(lv, bits, outs[j][i]),
                            encode_field_vec(lv, bits, r1[j][i]),
                            encode_field_vec(lv, bits, [r2[j][i]])]
                    theirs = [ref.encode_out_share(o[j]), ref.encode_verifier_share(sh[j]),
                              ref.encode_verifier_share(sh2[j])]
                    if mine != theirs:
                        checked["prep_equal"] = False
    if not (checked["shares_equal"] and checked["prep_equal"]):
        raise StudyError(f"the reference and this implementation disagree: {checked}")
    med = {k: _median(v) for k, v in res.items()}
    out: dict[str, Any] = {
        "draft": "draft-irtf-cfrg-vdaf-20", "clock": "process_time", "bits": bits,
        "kernels": jit.kernels(), "reports": reports,
        "ref_reports": ref_reports, "repeats": repeats, "candidates": candidates,
        "outputs_checked": checked,
        "load_average": [load0, _load()],
        "xof_us_per_message": {
            "pycryptodome_one_call": round(1e6 * med["xof_one_call"], 2),
            "numpy_sponge_batch": round(1e6 * med["xof_batch"], 2),
            "batch": reports},
        "shard": {"ours_us_per_report": round(1e6 * med["shard_ours"], 1),
                  "reference_us_per_report": round(1e6 * med["shard_ref"], 1),
                  "speedup": round(med["shard_ref"] / med["shard_ours"], 1)},
        "prep": {},
    }
    for lv in levels:
        o, r = med[f"prep_ours_{lv}"], med[f"prep_ref_{lv}"]
        out["prep"][f"level {lv}" + (" (leaf)" if lv == bits - 1 else "")] = {
            "candidates": len(params[lv][1]),
            "ours_us_per_report": round(1e6 * o, 1), "reference_us_per_report": round(1e6 * r, 1),
            "speedup": round(r / o, 1)}
    return out


def random_strings(support: int, chars: int, rng: np.random.Generator) -> list[str]:
    """``support`` distinct strings of ``chars`` printable ASCII characters (codes
    33-126)."""
    out: set[str] = set()
    while len(out) < support:
        codes = rng.integers(33, 127, size=(support - len(out), chars))
        out.update("".join(map(chr, row)) for row in codes)
    return sorted(out)


def bench_hh(users: Sequence[int], chars: Sequence[int], *, support: int = 10_000,
             zipf_s: float = 1.1, threshold: int | None = None, k: int = 10,
             seed: int = 0, out_of_core: bool | None = None,
             park: bool | None = None, processes: bool | None = None,
             trace: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Poplar1 heavy hitters on Zipf(``zipf_s``) populations of ``support`` random
    printable strings of ``chars`` characters (8 bits each: ``BITS = 8 * chars``), for
    every ``n`` in ``users`` and length in ``chars``: wall and CPU seconds (clients and
    each aggregator), levels, candidates, and whether the top-K was found. With the
    aggregators in their own processes (``processes``, default from
    :data:`PROCESS_REPORTS` reports on) the CPU seconds include theirs and a run's peak
    memory is the sum of the three processes' peaks (collector, two aggregators).

    Raises:
        StudyError: bad sizes.
    """
    import resource

    from protocol.core.poplar1.xof import aes_backend
    from protocol.studies.measure import peak_rss_mb

    if not users or not chars or min(users) < 2 or min(chars) < 1 or support < 1:
        raise StudyError("--users >= 2, --chars >= 1, --support >= 1")
    if support > 94 ** min(chars):   # else random_strings could never find them all
        raise StudyError(f"--support {support}: more than the 94^{min(chars)} printable "
                         f"strings of {min(chars)} characters")
    runs = []
    for c in chars:
        rng = np.random.default_rng(seed)
        vocab = random_strings(support, c, rng)
        p = 1.0 / np.arange(1, support + 1) ** zipf_s
        p /= p.sum()
        codes = np.array([[ord(ch) for ch in w] for w in vocab], dtype=np.uint8)
        vocab_bits = np.unpackbits(codes, axis=1).astype(bool)
        for n in users:
            items = rng.choice(support, size=n, p=p)
            t = default_threshold(n, k) if threshold is None else threshold
            cpu0 = time.process_time()
            ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            load0 = _load()
            res = heavy_hitters_bits(vocab_bits[items], t, seed=seed, out_of_core=out_of_core,
                                     park=park, processes=processes,
                                     on_level=_traced(trace, n, c, cpu0))
            wall = time.perf_counter() - t0
            ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = time.process_time() - cpu0 + (ch1.ru_utime - ch0.ru_utime) \
                + (ch1.ru_stime - ch0.ru_stime)
            counts = np.bincount(items, minlength=support)
            true_top = set(np.argsort(-counts, kind="stable")[:k].tolist())
            found = {vocab.index("".join(chr(int(x)) for x in np.packbits(np.array(s))))
                     for s in res.heavy}
            runs.append({
                "n": n, "chars": c, "bits": 8 * c, "threshold": t,
                "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                "client_cpu_seconds": round(res.client_seconds, 2),
                "aggregator_cpu_seconds": [round(pp.cpu_seconds, 2) for pp in res.parties],
                "levels": len(res.levels),
                "candidates_per_level_median": float(np.median([lv["candidates"]
                                                                for lv in res.levels])),
                "heavy_hitters": len(res.heavy),
                "true_top_k_found": len(true_top & found),
                "client_upload_bytes": res.upload_bytes_per_client,
                "reports_out_of_core": res.out_of_core,
                "aggregator_state_parked": res.parked,
                "aggregator_processes": res.processes, "aes_backend": aes_backend(),
                "load_average": [load0, _load()],
                "us_per_report_level_per_aggregator": round(
                    1e6 * float(np.mean([pp.cpu_seconds for pp in res.parties]))
                    / (n * max(1, len(res.levels))), 2),
            })
            if res.processes:
                per = {"collector": round(peak_rss_mb(), 1)}
                per.update({f"aggregator {pp.agg_id}": pp.process["peak_rss_mb"]
                            for pp in res.parties})
                runs[-1]["peak_rss_mb_per_process"] = per
                runs[-1]["peak_rss_mb"] = round(sum(per.values()), 1)
    peak = max([peak_rss_mb()] + [r["peak_rss_mb"] for r in runs if "peak_rss_mb" in r])
    return {"support": support, "zipf_s": zipf_s, "k": k, "seed": seed, "runs": runs,
            "peak_rss_mb": round(peak, 1)}


def _allocated_bytes() -> int | None:
    """Bytes allocated now: C heap in use (glibc's ``mallinfo2``: ``uordblks`` and
    ``hblkhd``, where OpenSSL and the Rust of ``cryptography`` allocate) plus what
    ``tracemalloc`` traces (Python's own allocator); ``None`` without glibc's
    ``mallinfo2`` or with ``tracemalloc`` off."""
    import ctypes
    import tracemalloc

    if not tracemalloc.is_tracing():
        return None
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd) + tracemalloc.get_traced_memory()[0]


def bench_state(n: int = 8192, bits: int = 256, candidates: int = 42, levels: int = 12,
                seed: int = 0, aes_blocks: int = 64, repeats: int = 3) -> dict[str, Any]:
    """What one aggregator keeps per report between levels of a search, by part: its
    AES keys or contexts (the resident memory they add, under each AES backend), its
    IDPF nodes of the last level and its correlated-randomness sponge (their arrays'
    bytes). The AES part is the bytes allocated (C heap and Python's) while it is
    derived and used once, the rest the arrays' sizes. And each backend's CPU time per
    report for one call over ``aes_blocks`` blocks a report (``n`` random keys; the
    contexts backend's contexts made before; ``repeats`` interleaved, the median). ``n`` random reports of ``bits`` bits, a walk of ``levels`` levels whose
    candidates are the children of the first ``candidates / 2`` of the previous level's.

    Raises:
        StudyError: bad sizes.
    """
    import gc
    import tracemalloc

    from protocol.core.poplar1 import Aggregator, Poplar1, sketch_accepts, sketch_message
    from protocol.core.poplar1.xof import (AES_BACKENDS, RowKeyedAes, aes_backend,
                                           set_aes_backend)

    if n < 16 or bits < levels + 1 or candidates < 2 or levels < 1:
        raise StudyError("--state needs n >= 16, candidates >= 2, 1 <= levels < bits")
    vdaf = Poplar1(bits, CTX)
    rng = np.random.default_rng(seed)
    rep = vdaf.shard_batch(rng.integers(0, 2, (n, bits)).astype(bool),
                           rng.integers(0, 256, (n, 16), dtype=np.uint8),
                           rng.integers(0, 256, (n, vdaf.RAND_SIZE), dtype=np.uint8))
    key = bytes(vdaf.VERIFY_KEY_SIZE)
    before = aes_backend()
    out: dict[str, Any] = {"n": n, "bits": bits, "levels": levels, "backends": {}}
    try:
        for backend in AES_BACKENDS:
            set_aes_backend(backend)
            aggs = [Aggregator(vdaf, j, key, rep.nonces, rep.public, rep.shares[j])
                    for j in (0, 1)]
            passing: list[tuple[bool, ...]] = [()]
            cpu = time.process_time()
            for level in range(levels):
                cands = sorted(p + (b,) for p in passing for b in (False, True))
                ap = (level, tuple(cands))
                r1 = [a.verify_init(ap) for a in aggs]
                msg = sketch_message(level, bits, r1[0], r1[1])
                r2 = [a.verify_next(msg) for a in aggs]
                ok = sketch_accepts(level, bits, r2[0], r2[1])
                for a in aggs:
                    a.aggregate(ok)
                passing = cands[:max(1, candidates // 2)]
            cpu = time.process_time() - cpu
            a = aggs[0]
            # the AES part: drop it, then the bytes allocated to derive it again and use
            # it once (the keys' TurboSHAKE128 temporaries are freed by then)
            a._ciphers = None
            gc.collect()
            tracemalloc.start()
            try:
                r0 = _allocated_bytes()
                c = a.ciphers
                c.extend.encrypt_rows(np.zeros((n, 16), dtype=np.uint8))
                c.convert.encrypt_rows(np.zeros((n, 16), dtype=np.uint8))
                gc.collect()
                r1 = _allocated_bytes()
            finally:
                tracemalloc.stop()
            aes = None if r0 is None or r1 is None else r1 - r0
            nodes = a._cache.seeds.nbytes + a._cache.ctrl.nbytes
            st = a._streams.snapshot()[0]
            out["backends"][backend] = {
                "aes_bytes_per_report": None if aes is None else round(aes / n, 1),
                "aes_key_bytes_per_report": (c.extend.keys.nbytes + c.convert.keys.nbytes) // n,
                "node_bytes_per_report": round(nodes / n, 1),
                "nodes_per_report": len(a._cache.prefixes),
                "sponge_bytes_per_report": round(st.nbytes / n, 1),
                "cpu_seconds_both_aggregators": round(cpu, 2),
            }
            del aggs, a, c
        rng2 = np.random.default_rng(seed + 1)
        keys = rng2.integers(0, 256, (n, 16), dtype=np.uint8)
        data = rng2.integers(0, 256, (n, 16 * aes_blocks), dtype=np.uint8)
        engines, times, outs = {}, {b: [] for b in AES_BACKENDS}, {}
        for backend in AES_BACKENDS:
            set_aes_backend(backend)
            engines[backend] = RowKeyedAes(keys)
            outs[backend] = engines[backend].encrypt_rows(data)    # contexts made here
        if any(not np.array_equal(outs["openssl"], o) for o in outs.values()):
            raise StudyError("the AES backends disagree")
        for _ in range(repeats):
            for backend in AES_BACKENDS:
                set_aes_backend(backend)
                t = time.process_time()
                engines[backend].encrypt_rows(data)
                times[backend].append(time.process_time() - t)
        for backend in AES_BACKENDS:
            out["backends"][backend]["aes_us_per_report"] = round(
                1e6 * float(np.median(times[backend])) / n, 2)
        out["aes_blocks_per_call"] = aes_blocks
    finally:
        set_aes_backend(before)
    return out


def _traced(trace: Callable[[dict[str, Any]], None] | None, n: int, chars: int,  # noqa: ANN202
            cpu0: float):
    """A search ``on_level`` that reports, as each level ends, this process's peak
    memory so far and its CPU seconds since ``cpu0``, with the level's row (candidates,
    passing, seconds, each aggregator's CPU seconds and, in processes, peak memory) to
    ``trace`` (``None``: no trace)."""
    if trace is None:
        return None
    from protocol.studies.measure import peak_rss_mb

    def on_level(row: dict[str, Any]) -> None:
        trace({"n": n, "chars": chars, **row, "peak_rss_mb": round(peak_rss_mb(), 1),
               "cpu_seconds": round(time.process_time() - cpu0, 1),
               "time": time.strftime("%H:%M:%S", time.gmtime())})
    return on_level


def hh_table(docs: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown table of ``fedhh bench poplar1 --hh`` outputs (their runs, sorted by
    bits then ``n``), with each document's peak memory: what docs/poplar1.md shows.

    Raises:
        StudyError: a document that is not a ``--hh`` output.
    """
    rows = []
    for d in docs:
        if not isinstance(d, dict) or not isinstance(d.get("runs"), list):
            raise StudyError("not the JSON of fedhh bench poplar1 --hh")
        rows += [(r, r.get("peak_rss_mb", d.get("peak_rss_mb"))) for r in d["runs"]]
    rows.sort(key=lambda x: (x[0]["bits"], x[0]["n"]))
    out = ["| n | characters (bits) | levels | median candidates per level | wall s | "
           "CPU s: clients | CPU s: each aggregator | CPU s total | us per report, level "
           "and aggregator | top-10 found | reports kept | peak RSS (MB) | load average |",
           "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: "
           "| --- |"]
    for r, peak in rows:
        load = r.get("load_average")
        out.append(
            f"| {r['n']:,} | {r['chars']} ({r['bits']}) | {r['levels']} | "
            f"{r['candidates_per_level_median']:g} | {r['wall_seconds']:,.0f} | "
            f"{r['client_cpu_seconds']:,.1f} | "
            f"{', '.join(f'{c:,.1f}' for c in r['aggregator_cpu_seconds'])} | "
            f"{r['cpu_seconds']:,.1f} | {r['us_per_report_level_per_aggregator']:g} | "
            f"{r['true_top_k_found']} | {_kept(r)} | {'' if peak is None else f'{peak:,.0f}'} | "
            f"{'' if not load else ' to '.join(f'{x:g}' for x in load if x is not None)} |")
    return out


def _kept(run: dict[str, Any]) -> str:
    """Where a ``--hh`` run kept the reports (runs from before the option: memory)."""
    if run.get("aggregator_state_parked"):
        where = "files, state parked"
    else:
        where = "files" if run.get("reports_out_of_core") else "memory"
    if run.get("aggregator_processes"):
        where += "; 2 aggregator processes"
    if run.get("aes_backend") == "contexts":
        where += "; AES contexts kept"
    return where


def reference_table(docs: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown table of ``fedhh bench poplar1 --reference`` outputs: per document,
    the sharding and preparation medians with their ratio, the XOF alone, and the load.

    Raises:
        StudyError: a document that is not a ``--reference`` output.
    """
    out = ["| bits | per report | ours (us) | reference (us) | ours faster by | load average |",
           "| --- | --- | ---: | ---: | ---: | --- |"]
    for d in docs:
        if not isinstance(d, dict) or "shard" not in d or "prep" not in d:
            raise StudyError("not the JSON of fedhh bench poplar1 --reference")
        load = " to ".join(f"{x:g}" for x in d.get("load_average") or [] if x is not None)
        rows = [("client sharding", d["shard"])]
        rows += [(f"preparation at {lv} (both aggregators, {v['candidates']} candidates)", v)
                 for lv, v in d["prep"].items()]
        for what, v in rows:
            out.append(f"| {d['bits']} | {what} | {v['ours_us_per_report']:,.0f} | "
                       f"{v['reference_us_per_report']:,.0f} | {v['speedup']:g}x | {load} |")
        x = d.get("xof_us_per_message")
        if x:
            sponge = "compiled" if str(d.get("kernels", "numpy")).startswith("numba") \
                else "numpy"
            out.append(f"| {d['bits']} | the XOF alone: one TurboSHAKE128 (pycryptodome, one "
                       f"call) against the batched sponge ({sponge}) over {x['batch']:,} "
                       f"messages | "
                       f"{x['numpy_sponge_batch']:g} | {x['pycryptodome_one_call']:g} "
                       f"(pycryptodome) | "
                       f"{x['pycryptodome_one_call'] / x['numpy_sponge_batch']:.1f}x | {load} |")
    return out


def bench_table(docs: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`hh_table` for ``--hh`` outputs, :func:`reference_table` for ``--reference``
    ones (all documents of one kind).

    Raises:
        StudyError: documents of neither kind, or of both.
    """
    kinds = {"hh" if isinstance(d, dict) and "runs" in d else
             "state" if isinstance(d, dict) and "backends" in d else "ref" for d in docs}
    if kinds == {"hh"}:
        return hh_table(docs)
    if kinds == {"state"}:
        return state_table(docs)
    if kinds == {"ref"}:
        return reference_table(docs)
    raise StudyError("--table takes outputs of one kind: all --hh, all --state or all "
                     "--reference")


def state_table(docs: Sequence[dict[str, Any]]) -> list[str]:
    """The Markdown table of ``fedhh bench poplar1 --state`` outputs: per AES backend,
    one aggregator's bytes per report between levels by part, and the AES's CPU."""
    out = ["| bits | reports | AES backend | AES (bytes a report) | IDPF nodes (bytes a "
           "report) | sponge (bytes a report) | total (bytes a report) | AES CPU (us a "
           "report, one call of 64 blocks) |",
           "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for d in docs:
        for name, b in d["backends"].items():
            aes = b["aes_bytes_per_report"]
            total = (aes or 0) + b["node_bytes_per_report"] + b["sponge_bytes_per_report"]
            out.append(f"| {d['bits']} | {d['n']:,} | {name} | "
                       f"{'' if aes is None else f'{aes:,.0f}'} | "
                       f"{b['node_bytes_per_report']:,.0f} ({b['nodes_per_report']} nodes) | "
                       f"{b['sponge_bytes_per_report']:,.0f} | {total:,.0f} | "
                       f"{b.get('aes_us_per_report', float('nan')):g} |")
    return out
