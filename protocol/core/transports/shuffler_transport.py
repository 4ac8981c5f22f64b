"""The ESA shuffler transport (Bittau et al., "Prochlo", SOSP 2017).

Theory of operation
-------------------
Every contribution becomes one report sealed in two layers (see :mod:`shuffler`):
clients encode, the shuffler strips the outer layer, thresholds crowds, shuffles and
forwards inner layers; the analyzer opens them. Every message crosses
:mod:`protocol.core.codec` (tags 100..105), so a simulation exercises the wire format.

* **Vote rounds.** A vote for candidate ``i`` is the 4-byte report ``i`` with crowd id
  ``PRF(crowd_key, task, round, candidates[i])`` (:class:`shuffler.CrowdKey`). The
  shuffler's hard threshold is ``T = spec.theta`` (1 when ``theta`` is None). When the
  round reveals counts (TrieHH++) it forwards exactly the crowds with at least
  ``theta`` votes, *whole*: the analyzer's histogram holds the full count of each
  released candidate. When the round releases membership only (``spec.reveal_counts``
  false, TrieHH) the rule is ``HardThreshold(T, membership_only=True)``: one
  representative report per passing crowd, so the analyzer learns which candidates
  passed and no count. Either way the release equals
  :class:`~protocol.core.transports.plain.PlainTransport`'s. An abstention is an empty
  report under a fresh uniformly random crowd id: without the crowd key it cannot be
  told from a vote for an item nobody else chose; it forms a crowd of one and is
  dropped (when ``T = 1`` it reaches the analyzer, which skips empty reports).
* **Blinded crowds** (``blinded_crowds=True``, :mod:`shuffler.blinded`): no crowd key.
  Each report's crowd field is its item's ElGamal ciphertext to a second shuffler
  (an abstention encrypts a random item); the first shuffler checks, blinds and
  shuffles, the second decrypts blinded ids, applies the threshold rule and shuffles
  again. Releases are the same as with keyed ids; the views are ``shuffler`` (first),
  ``shuffler2`` (crowd sizes under blinded ids) and ``analyzer``.
* **Report rounds.** Payloads are reports of ``spec.report_size`` bytes in one crowd,
  threshold 1; the release is the multiset in the shuffler's order.
* **Vector rounds.** Each vector is one report (entries packed big-endian in
  ``ceil(log2(modulus)/8)`` bytes); the release is the modular sum. Unlike secure
  aggregation, the analyzer sees every individual vector (unlinkable to its sender
  only).

**Receipts.** The shuffler's operator receipt (:class:`shuffler.ShuffleReceipt`: crowds,
below-threshold totals) stays in the view of the shuffler that thresholds; the analyzer
gets only :func:`shuffler.analyzer_receipt` (accepted, forwarded, rule), which says
nothing about sub-threshold crowds. The analyzer's view of a vote round is the
receipt, the candidates it saw and, in counts-revealing rounds, their counts.

By default (``simulate=False``) keys and randomness come from the operating system.
``simulate=True``, an explicit switch for reproducible simulations and tests, derives
them from ``rng`` through :func:`protocol.core.randomness.insecure_deterministic_randomness`
(reproducible, *not* secret).

``workers > 1`` spreads the public-key work over a process pool: clients encode in
fixed-size chunks (each chunk with its own randomness stream, so the envelopes do not
depend on the number of workers), and the shuffler and the analyzer hand their pure
decryption step (:func:`shuffler.shuffler.open_outer_chunk`,
:func:`shuffler.analyzer.open_inner_chunk`) to the pool through a ``map`` function;
all state checks stay sequential in the sans-I/O objects. CPU seconds of the workers
are measured in the workers and added to the party they work for.
"""
from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, Callable, Iterable

import numpy as np

from protocol.core import codec
from protocol.core import wire_shuffler  # registers tags 100..105; session limits
from protocol.core.contract import (
    AggregationAborted, ContractError, Contributions, Cost, Kind, Release, Reports,
    RoundResult, RoundSpec, Transport, Vectors, Votes, threshold_counts,
)
from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
from protocol.core.transports.plain import modular_sum, raise_kind
from shuffler import (
    Analyzer, AnalyzerReceipt, BatchTooSmall, Blinder, CrowdKey, DecryptorKey, Encoder, HardThreshold, KeyPair,
    ShuffledBatch, ShuffleReceipt, Shuffler, ShufflerEnvelope, decode_indices, encode_index,
    analyzer_receipt, encrypt_crowd, random_crowd_ids,
)
from shuffler.blinded import CrowdShuffler
from shuffler.messages import BlindedBatch
from shuffler.messages import MAX_PAYLOAD

__all__ = ["ShufflerTransport", "shuffled_release"]

CLIENT_CHUNK = 4096  # reports per client-encoding task (fixed: results do not depend on workers)


def _timed_call(pair: tuple[Callable[[Any], Any], Any]) -> tuple[Any, float]:
    fn, arg = pair
    t0 = time.process_time()
    out = fn(arg)
    return out, time.process_time() - t0


class _Map:
    """A ``map`` over an executor (or in-process) that sums the CPU seconds of the calls."""

    def __init__(self, executor: Executor | None,
                 on_done: Callable[[int], None] | None = None) -> None:
        self.executor = executor
        self.cpu = 0.0
        self.on_done = on_done

    def __call__(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        pairs = [(fn, a) for a in items]
        results = (self.executor.map(_timed_call, pairs) if self.executor is not None
                   else map(_timed_call, pairs))
        out = []
        for r, c in results:
            self.cpu += c
            out.append(r)
            if self.on_done is not None:
                self.on_done(len(out))
        return out


def _encode_chunk(args: tuple[bytes, bytes, str, int, int, bytes | None, list[bytes],
                              list[bytes], bool, bool]) -> list[bytes]:
    """Client-side encoding of one chunk (module level: runs in worker processes)."""
    s_pub, a_pub, task, epoch, psize, seed, reports, crowd_ids, wire, blinded = args
    from shuffler import PublicKey

    rand = (insecure_deterministic_randomness(seed, "shuffler-transport/client-chunk")
            if seed is not None else OsRandom())
    enc = Encoder(PublicKey(s_pub), PublicKey(a_pub), task, epoch, psize, rand, blinded)
    envs = enc.encode_batch(reports, crowd_ids)
    if wire:
        return [codec.encode(ShufflerEnvelope.from_bytes(e)) for e in envs]
    return envs


class ShufflerTransport(Transport):
    """Aggregation through an encode-shuffle-analyze pipeline.

    Args:
        simulate: derive keys and randomness from ``rng`` (reproducible, insecure);
            ``False`` (the default) uses OS randomness.
        min_batch_size: the shuffler's minimum batch (the effective minimum is
            ``max(min_batch_size, spec.min_participants)``).
        wire: pass every envelope through the codec (True for simulations; False
            measures the pipeline alone).
        workers: processes for the public-key work (1: everything in this process).
        client_chunk: reports per client-encoding task (the envelopes depend on it in
            simulation mode, never on ``workers``).
        blinded_crowds: Prochlo's blinded crowd ids: two shufflers, no key shared by
            the clients (:mod:`shuffler.blinded`); the first blinds and shuffles, the
            second decrypts the ids, thresholds and shuffles again.

    Raises:
        ValueError: for ``min_batch_size < 1``, ``workers < 1`` or ``client_chunk < 1``.
    """

    name = "shuffler"
    progress_label = "shuffler"
    kinds = frozenset({Kind.VOTE, Kind.VECTOR, Kind.REPORT})
    anonymous_reports = True

    def __init__(self, simulate: bool = False, min_batch_size: int = 1, wire: bool = True,
                 workers: int = 1, client_chunk: int = CLIENT_CHUNK,
                 blinded_crowds: bool = False) -> None:
        if type(min_batch_size) is not int or min_batch_size < 1:
            raise ValueError("min_batch_size must be an int >= 1")
        if type(workers) is not int or workers < 1:
            raise ValueError("workers must be an int >= 1")
        if type(client_chunk) is not int or client_chunk < 1:
            raise ValueError("client_chunk must be an int >= 1")
        self.client_chunk = client_chunk
        self.blinded_crowds = bool(blinded_crowds)
        self.simulate = simulate
        self.min_batch_size = min_batch_size
        self.wire = wire
        self.workers = workers
        #: ``client_progress(step, done, total)`` inside a round: step 0 the clients'
        #: encoding (per chunk of reports), 1 the shuffler, 2 the analyzer
        self.client_progress: Callable[[int, int, int], None] | None = None

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        """Run one round through encoder, shuffler and analyzer.

        Raises:
            ContractError: contributions that do not fit the spec.
            AggregationAborted: ``too_few_participants`` (the shuffler's batch is
                below its minimum and is discarded).
        """
        if self.workers == 1:
            return self._run(spec, contributions, rng, None)
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        with ProcessPoolExecutor(self.workers, mp_context=ctx) as pool:
            return self._run(spec, contributions, rng, pool)

    def _run(self, spec: RoundSpec, contributions: Contributions, rng: np.random.Generator,
             pool: Executor | None) -> RoundResult:
        if self.simulate:
            root = insecure_deterministic_randomness(rng.bytes(32), "shuffler-transport")
            r_keys, r_clients, r_shuffler = (root.child("keys"), root.child("clients"),
                                             root.child("shuffler"))
        else:
            r_keys = r_clients = r_shuffler = OsRandom()
        cpu: dict[str, float] = {}

        # ---- clients: build reports and crowd ids -----------------------------
        t0 = time.process_time()
        reports, items, psize, threshold = self._reports(spec, contributions)
        membership = spec.kind is Kind.VOTE and not spec.reveal_counts
        rule = HardThreshold(threshold, membership_only=membership)
        n = len(reports)
        if n < spec.min_participants:
            raise AggregationAborted("too_few_participants",
                                     f"{n} contributions, {spec.min_participants} required")
        crowd_key = None if self.blinded_crowds else \
            CrowdKey(r_keys.token_bytes(32), spec.task, spec.round)
        s_keys, a_keys = KeyPair.generate(r_keys), KeyPair.generate(r_keys)
        s2_key = DecryptorKey.generate(r_keys) if self.blinded_crowds else None
        # validates keys and context (and gives the shuffler its context)
        encoder = Encoder(s_keys.public_key, a_keys.public_key, spec.task, spec.round, psize,
                          r_clients, self.blinded_crowds)
        crowd_ids = _crowd_fields(items, crowd_key, s2_key, encoder.context.header, r_clients)
        step = self.client_chunk
        starts = range(0, n, step)
        seeds = [r_clients.token_bytes(32) if self.simulate else None for _ in starts]
        jobs = [(s_keys.public, a_keys.public, spec.task, spec.round, psize, seed,
                 reports[k:k + step], crowd_ids[k:k + step], self.wire, self.blinded_crowds)
                for k, seed in zip(starts, seeds)]
        report = self.client_progress or (lambda step, done, total: None)
        pmap = _Map(pool, lambda chunks: report(0, min(n, chunks * step), n))
        envelopes = [e for chunk in pmap(_encode_chunk, jobs) for e in chunk]
        bytes_up = sum(map(len, envelopes))
        cpu["clients"] = time.process_time() - t0 + (pmap.cpu if pool is not None else 0.0)

        # ---- shuffler ---------------------------------------------------------
        report(1, 0, n)
        t0 = time.process_time()
        shuffler = Shuffler(s_keys, r_shuffler, max(self.min_batch_size, spec.min_participants),
                            rule)
        context = encoder.context
        shuffler.open_batch(context)
        wire_limits = wire_shuffler.session_limits(context, n)
        if self.wire:
            received = [codec.decode(e, ShufflerEnvelope, wire_limits).to_bytes()
                        for e in envelopes]
        else:
            received = envelopes
        pmap = _Map(pool) if pool is not None else None
        shuffler.submit_many(received, map_fn=pmap)
        try:
            if self.blinded_crowds:
                first = shuffler.close_blinded_batch(context, Blinder(s2_key.public, r_shuffler))
            else:
                out = shuffler.close_batch(context)
        except BatchTooSmall as exc:  # the shuffler dropped the whole batch
            raise AggregationAborted("too_few_participants", str(exc)) from None
        cpu["shuffler"] = time.process_time() - t0 + (pmap.cpu if pmap is not None else 0.0)
        first_view: dict[str, Any] = {}
        if self.blinded_crowds:
            # ---- shuffler 2: decrypt crowd ids, threshold, shuffle again -----------
            t0 = time.process_time()
            wire1 = codec.encode(first.batch) if self.wire else b""
            blinded_batch = (codec.decode(wire1, BlindedBatch, wire_limits) if self.wire
                             else first.batch)
            out = CrowdShuffler(s2_key, r_shuffler, 1, rule).process(
                blinded_batch)
            first_view = {"receipt": first.receipt, "bytes_forwarded": len(wire1)}
            cpu["shuffler2"] = time.process_time() - t0
        t0 = time.process_time()
        batch_wire = codec.encode(out.batch) if self.wire else b""
        receipt = out.receipt
        if self.wire:
            receipt = codec.decode(codec.encode(receipt), ShuffleReceipt, wire_limits)
        cpu["shuffler2" if self.blinded_crowds else "shuffler"] += time.process_time() - t0

        # ---- analyzer ---------------------------------------------------------
        report(1, n, n)
        report(2, 0, n)
        t0 = time.process_time()
        batch = codec.decode(batch_wire, ShuffledBatch, wire_limits) if self.wire else out.batch
        pmap = _Map(pool) if pool is not None else None
        analyzed = Analyzer(a_keys).open_batch(batch, map_fn=pmap)
        seen_receipt = analyzer_receipt(receipt)  # the operator's totals stay behind
        release, analyzer_view = shuffled_release(spec, seen_receipt, analyzed.reports)
        analyzer_view["receipt"] = seen_receipt
        analyzer_view["rejected"] = {r.value: c for r, c in analyzed.rejected.items()}
        cpu["analyzer"] = time.process_time() - t0 + (pmap.cpu if pmap is not None else 0.0)

        counting = {
            "crowd_sizes": {cid.hex(): c for cid, c in out.crowd_sizes.items()},
            "receipt": receipt,
        }
        if self.wire:
            counting["bytes_forwarded"] = len(batch_wire)
        if self.blinded_crowds:
            # shuffler 1 saw senders and ciphertexts only; shuffler 2 counted crowds
            views = {"shuffler": {**first_view,
                                  "envelope_bytes": len(envelopes[0]) if envelopes else 0},
                     "shuffler2": counting, "analyzer": analyzer_view}
        else:
            views = {"shuffler": {**counting,
                                  "envelope_bytes": len(envelopes[0]) if envelopes else 0},
                     "analyzer": analyzer_view}
        cost = Cost(cpu, bytes_up=bytes_up, bytes_down=0)
        report(2, n, n)
        result = RoundResult(release, views, cost)
        if self.corrupt is not None and isinstance(contributions, Votes):
            from protocol.core.corruption import record_round
            from protocol.core.transports.secagg_transport import voters

            bad, sent = self._last_corrupt
            rec = record_round(self, spec, contributions.validate(spec),
                               voters(contributions), bad, release, validated=False,
                               counted=sent)
            views["corrupted"] = rec.as_dict()
        return result

    def _corrupted(self, spec: RoundSpec, votes: Votes, choice: np.ndarray) -> np.ndarray:
        """The choices with corrupted clients: the shuffler takes one envelope per
        device, so each can send one vote -- the first candidate its strategy gives a
        positive entry (none: an abstention)."""
        self._last_corrupt = (np.zeros(0, dtype=np.int64), 0)
        c = self.corrupt
        if c is None:
            return choice
        from protocol.core.corruption import corrupt_positions, corrupt_vector
        from protocol.core.transports.secagg_transport import voters

        if c.on_reports:
            raise ContractError(f"the corrupted-client strategy {c.strategy!r} attacks the "
                                "committee's validated reports; the shuffler carries votes "
                                "(use a vector strategy)")
        bad = corrupt_positions(c, spec.task, int(spec.round), voters(votes))
        vec = corrupt_vector(c, spec.candidates, spec.theta)
        pos = np.flatnonzero(vec > 0)
        out = choice.copy()
        out[bad] = int(pos[0]) if pos.size else -1
        self._last_corrupt = (bad, int(bad.size) if pos.size else 0)
        return out

    # ------------------------------------------------------------------ helpers
    def _reports(self, spec: RoundSpec, contributions: Contributions
                 ) -> tuple[list[bytes], list[bytes | None], int, int]:
        """Reports, the item whose crowd each joins (``None``: an abstention, which
        joins a fresh random crowd), the payload size and the crowd threshold."""
        if spec.kind is Kind.VOTE:
            if not isinstance(contributions, Votes):
                raise_kind(spec, contributions)
            choice = self._corrupted(spec, contributions, contributions.validate(spec))
            cand_reports = [encode_index(i) for i in range(spec.domain_size)]
            labels = [c.encode("utf-8") for c in spec.candidates]
            picks = choice.tolist()
            reports = [cand_reports[c] if c >= 0 else b"" for c in picks]
            items = [labels[c] if c >= 0 else None for c in picks]
            return reports, items, 4, spec.theta or 1
        if spec.kind is Kind.REPORT:
            if not isinstance(contributions, Reports):
                raise_kind(spec, contributions)
            payloads = contributions.validate(spec)
            if spec.report_size > MAX_PAYLOAD:
                raise ContractError(f"report_size above the shuffler's {MAX_PAYLOAD} bytes")
            return list(payloads), [b"report"] * len(payloads), spec.report_size, 1
        if not isinstance(contributions, Vectors):
            raise_kind(spec, contributions)
        values = contributions.validate(spec)
        width = _entry_width(spec.modulus)
        if spec.dim * width > MAX_PAYLOAD:
            raise ContractError(f"a vector of {spec.dim * width} bytes exceeds one shuffler report")
        packed = values.astype(">u8").view(np.uint8).reshape(values.shape[0], spec.dim, 8)
        rows = np.ascontiguousarray(packed[:, :, 8 - width:]).reshape(values.shape[0], -1)
        size = spec.dim * width
        blob = rows.tobytes()
        reports = [blob[i:i + size] for i in range(0, len(blob), size)]
        return reports, [b"vector"] * len(reports), size, 1


def shuffled_release(spec: RoundSpec, receipt: AnalyzerReceipt,
                     reports: list[bytes]) -> tuple[Release, dict[str, Any]]:
    """The release of a round from the analyzer's receipt and the reports it opened
    (a vote round: the thresholded histogram, or membership only; a report round: the
    multiset; a vector round: the modular sum of the well-formed vectors), and the
    analyzer's view."""
    contributions = receipt.accepted
    if spec.kind is Kind.VOTE:
        idx = decode_indices(reports)
        idx = idx[idx < spec.domain_size]
        if not spec.reveal_counts:
            # one representative per passing crowd: membership, no counts (the
            # count field is a placeholder at theta, which the release drops)
            passed = np.unique(idx)
            counts = {spec.candidates[i]: int(spec.theta or 1) for i in passed.tolist()}
            return (Release(spec, contributions, counts=counts),
                    {"passed": tuple(spec.candidates[i] for i in passed.tolist()),
                     "reports_seen": len(reports)})
        hist = np.bincount(idx, minlength=spec.domain_size)
        released = threshold_counts(spec, hist)
        return (Release(spec, contributions, counts=released),
                {"passed": tuple(sorted(released)), "counts": dict(released),
                 "reports_seen": len(reports)})
    if spec.kind is Kind.REPORT:
        return (Release(spec, contributions, reports=tuple(reports)),
                {"reports": tuple(reports)})
    width = _entry_width(spec.modulus)
    good = [r for r in reports if len(r) == spec.dim * width]
    raw = np.frombuffer(b"".join(good), dtype=np.uint8).reshape(len(good), spec.dim, width)
    full = np.zeros((len(good), spec.dim, 8), dtype=np.uint8)
    full[:, :, 8 - width:] = raw
    values = full.view(">u8").reshape(len(good), spec.dim).astype(np.uint64)
    if spec.modulus < 1 << 64:  # a malformed client's out-of-range entries: drop the row
        values = values[(values < np.uint64(spec.modulus)).all(axis=1)]
    total = modular_sum(values, spec.modulus)
    return (Release(spec, contributions, vector=total),
            {"individual_vectors": values, "sum": total})


def _crowd_fields(items: list[bytes | None], crowd_key: CrowdKey | None,
                  s2_key: DecryptorKey | None, header: bytes, rand: Any) -> list[bytes]:
    """Each report's crowd field: the keyed id of its item (a random id for an
    abstention) or, with blinded crowds, its item's ciphertext to shuffler 2 (a random
    item's for an abstention)."""
    if s2_key is not None:
        return [encrypt_crowd(x if x is not None else rand.token_bytes(16), header,
                              s2_key.public, rand) for x in items]
    assert crowd_key is not None
    ids = {x: crowd_key.crowd_id(x) for x in set(items) if x is not None}
    abstain = iter(random_crowd_ids(sum(x is None for x in items), rand))
    return [ids[x] if x is not None else next(abstain) for x in items]


def _entry_width(modulus: int) -> int:
    return max(1, ((modulus - 1).bit_length() + 7) // 8)
