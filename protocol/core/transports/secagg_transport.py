"""Secure-aggregation transport: the aggregation contract over Bonawitz et al.'s protocol.

Theory of operation
-------------------
Each :meth:`SecAggTransport.run_round` runs one full secure-aggregation session
(:func:`protocol.core.secagg_engine.run_secagg`, every message through the codec):

* **vote rounds**: client ``i`` contributes the one-hot vector ``e_{choice_i}`` over
  ``spec.candidates`` (an abstention contributes the zero vector; after masking it is
  indistinguishable from a vote). The modulus is the smallest power of two larger than
  the number of contributions (at least ``2**8``), so counts never wrap. The server
  learns only the count vector; :func:`protocol.core.contract.threshold_counts` applies
  the release rule.
* **vector rounds**: the modular sum of the clients' vectors, modulus ``spec.modulus``.
* **report rounds**: not supported (secure aggregation sums; it cannot carry opaque
  reports) -- :class:`~protocol.core.contract.ContractError`.

Binding: the session context is ``SHA-256`` of a canonical encoding of the whole
:class:`~protocol.core.contract.RoundSpec` (task, round, kind, candidate list, theta,
dim, modulus, ...), so masked inputs produced for one candidate set, task or round can
never be unmasked together with inputs for another: every key, ciphertext and
signature depends on it.

Randomness: by default (``simulate=False``) keys come from the operating system
(``OsRandom``) and ``rng`` only drives the simulated dropouts. With ``simulate=True``
(an explicit switch for reproducible simulations and tests) all client and server
randomness is derived from the ``rng`` passed to
``run_round`` via ``insecure_deterministic_randomness(rng.integers(...))``, so a run is
reproducible from its seed -- and every key is known to whoever knows the seed. The
release never depends on the keys, only on the contributions.

Threat model (``threat=``): ``"malicious"`` (the default) runs the malicious-server
variant -- Ed25519-signed key advertisements and the consistency round -- with the
threshold and Harary degree :func:`secagg.params.find_params` derives for a server that
may equivocate, choose which clients drop and collude with ``ceil(gamma n)`` clients;
``"semi-honest"`` is Bonawitz et al.'s variant without signatures or consistency round,
with the smaller parameters that only hold while the server follows the protocol and
dropouts are random. The server view reports the threat model and
``min_honest`` (``alpha n``: the fewest honest clients in any sum the server can learn).

Dropouts (``dropout > 0``) follow :meth:`protocol.core.secagg_engine.Dropout.random`; the
release then covers exactly the clients whose masked input arrived (``U3``).
"""
from __future__ import annotations

import hashlib
import struct
from typing import Any, Callable

import numpy as np

from protocol.core.contract import (
    AggregationAborted, ContractError, Contributions, Cost, Kind, Release, RoundResult,
    RoundSpec, Transport, Vectors, Votes, threshold_counts,
)
from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
from protocol.core.secagg_engine import Dropout, SecAggRun, run_secagg
from secagg.crypto import FRESH_NONCE_BYTES
from secagg.errors import ParameterError
from secagg.params import (
    DEFAULT_CORRUPT_FRACTION, DEFAULT_DROPOUT_RATE, DEFAULT_THREAT, SecAggParams,
    default_grinding_bits, find_params, threat_of,
)
from secagg.state import SessionConfig

__all__ = ["SecAggTransport", "SecAggSessionOptions", "spec_context", "vote_modulus",
           "sum_release",
           "VoteRows", "MatrixRows"]


def spec_context(spec: RoundSpec) -> bytes:
    """SHA-256 of a canonical, length-delimited encoding of the round specification."""
    h = hashlib.sha256(b"fedhh/secagg-transport/round-spec/v1\x00")

    def put(b: bytes) -> None:
        h.update(struct.pack(">Q", len(b)) + b)

    put(spec.task.encode())
    put(struct.pack(">Q", spec.round))
    put(spec.kind.value.encode())
    put(struct.pack(">Q", len(spec.candidates)))
    for c in spec.candidates:
        put(c.encode())
    put(b"none" if spec.theta is None else struct.pack(">Q", spec.theta))
    put(struct.pack(">QQ", spec.dim, spec.report_size))
    put((spec.modulus - 1).to_bytes(8, "big"))
    put(struct.pack(">Q", spec.min_participants))
    return h.digest()


def vote_modulus(contributions: int) -> int:
    """Smallest power of two greater than ``contributions``, at least ``2**8``."""
    return max(1 << 8, 1 << int(contributions).bit_length())


class VoteRows:
    """Client ``i``'s input in a vote round: the one-hot vector of its choice (zero for
    an abstention). Picklable, and :meth:`shard` keeps only a range of clients, so a
    shard on another process receives the choices of its own clients only."""

    def __init__(self, choice: np.ndarray, dim: int, offset: int = 0) -> None:
        self.choice, self.dim, self.offset = choice, int(dim), int(offset)

    def __call__(self, i: int) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.uint64)
        c = self.choice[i - self.offset]
        if c >= 0:
            v[c] = 1
        return v

    def shard(self, lo: int, hi: int) -> "VoteRows":
        return VoteRows(self.choice[lo - self.offset:hi - self.offset], self.dim, lo)


class MatrixRows:
    """Client ``i``'s input in a vector round: row ``i`` (see :class:`VoteRows`)."""

    def __init__(self, values: np.ndarray, offset: int = 0) -> None:
        self.values, self.offset = values, int(offset)

    def __call__(self, i: int) -> np.ndarray:
        return self.values[i - self.offset]

    def shard(self, lo: int, hi: int) -> "MatrixRows":
        return MatrixRows(self.values[lo - self.offset:hi - self.offset], lo)


class SecAggSessionOptions:
    """The secure-aggregation session options every transport built on
    :func:`protocol.core.secagg_engine.run_secagg` takes (secagg and threshold), and
    what follows from them: the parameters, the randomness and the dropout schedule.

    Args:
        graph: ``"harary"`` (SecAgg+, Bell et al.) or ``"complete"`` (Bonawitz et al.).
        threat: ``"malicious"`` (default; Ed25519 PKI, consistency round, parameters
            for a malicious server) or ``"semi-honest"``.
        malicious: boolean alias of ``threat`` (kept for older callers); giving both
            with different meanings is an error.
        dropout: per-client dropout probability (simulated, before a random round).
        simulate: derive every key from the ``rng`` of ``run_round`` (reproducible,
            insecure); ``False`` (the default) uses OS randomness.
        corrupt_fraction, sigma, eta, grinding_bits: threat model handed to
            :func:`secagg.params.find_params` (``grinding_bits``: how many bits of
            graph-seed choice the server is granted; ``None``, the default:
            :func:`secagg.params.default_grinding_bits`, i.e. 0 unless Harary under a
            malicious server). ``gamma`` defaults to
            :data:`secagg.params.DEFAULT_CORRUPT_FRACTION`; ``delta`` is
            ``max(DEFAULT_DROPOUT_RATE, dropout)``.
        workers, cluster: where each session's clients run (:meth:`engine_for`).

    Raises:
        ValueError: bad option values.
    """

    def __init__(self, graph: str = "harary", malicious: bool | None = None,
                 dropout: float = 0.0, simulate: bool = False,
                 corrupt_fraction: float = DEFAULT_CORRUPT_FRACTION, sigma: int = 40,
                 eta: int = 20, grinding_bits: int | None = None,
                 threat: str | None = None, workers: int | None = None,
                 cluster: str | None = None) -> None:
        if graph not in ("harary", "complete"):
            raise ValueError("graph must be 'harary' or 'complete'")
        if not 0.0 <= dropout < 1.0:
            raise ValueError("dropout must be in [0, 1)")
        try:
            self.threat = threat_of(threat if threat is not None or malicious is not None
                                    else DEFAULT_THREAT, malicious)
        except ParameterError as exc:
            raise ValueError(str(exc)) from None
        self.graph = graph
        self.malicious = self.threat == "malicious"
        self.dropout = float(dropout)
        self.simulate = bool(simulate)
        self.corrupt_fraction = corrupt_fraction
        self.sigma = sigma
        self.eta = eta
        self.grinding_bits = grinding_bits
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ValueError("workers must be an int >= 1")
        self.workers = workers
        self.cluster = cluster
        if (cluster is not None or (workers or 1) > 1):
            from protocol.core.cluster import dask_available

            if not dask_available():
                raise ValueError("running clients on several workers needs Dask "
                                 "distributed: pip install 'fedhh[cluster]'")
        self._engine: Any = None
        #: ``progress(step, done, total)`` inside each session (see ``run_secagg``)
        self.client_progress: Callable[[int, int, int], None] | None = None
        #: ``say(line)``: one line before a session predicted (by
        #: :meth:`predict_session_seconds`) to take more than ``estimate_after`` seconds
        self.estimate_say: Callable[[str], None] | None = None
        self.estimate_after: float = 60.0
        self._cost_model: tuple[float, float, int] | None = None
        #: CPU seconds measured and predicted (by the probes' model) over the sessions
        #: run since the model was made: later predictions are scaled by their ratio
        self._calibration = [0.0, 0.0]
        #: the session memos' statistics (:meth:`secagg.memo.SessionMemo.stats`) summed
        #: over every session this transport ran: each session has its own memo, these
        #: are only its counts (benchmarks turn them into per-device figures)
        self.memo_totals: dict[str, Any] = {"hits": {}, "misses": {}, "seconds": {},
                                            "charged_seconds": 0.0, "sessions": 0}

    #: sessions smaller than this (clients, and clients x vector length) are never
    #: probed: on this kind of machine they take seconds, not minutes
    PROBE_MIN_CLIENTS, PROBE_MIN_ENTRIES = 300, 50_000_000
    PROBE_CLIENTS, PROBE_DIMS = 24, (16, 2048)

    def predict_session_seconds(self, n: int, dim: int) -> float:
        """Predicted CPU seconds of one session of ``n`` clients with vectors of ``dim``
        entries (all processes together: on ``w`` workers the wall time is at best a
        ``w``-th of it), from a measured per-client cost ``a0 + a1 k + b dim``, where
        ``k`` is the degree the parameters choose for ``n``: three probe sessions of
        :attr:`PROBE_CLIENTS` clients (simulated keys, this threat model) on a sparse
        and on the complete graph and at two vector lengths separate the cost per
        client, per neighbour and per entry. Measured once per transport, after a
        warm-up session.

        Raises:
            AggregationAborted: ``no_secagg_parameters`` for ``n``.
        """
        if self._cost_model is None:
            self._cost_model = self._probe()
        measured, predicted = self._calibration
        scale = measured / predicted if predicted > 0 and measured > 0 else 1.0
        return self._model_seconds(n, dim) * scale

    def _model_seconds(self, n: int, dim: int) -> float:
        """The probes' prediction for a session, before calibration."""
        assert self._cost_model is not None
        a0, a1, b = self._cost_model
        return n * (a0 + a1 * self.session_params(n).degree + b * dim)

    def _calibrate(self, run: SecAggRun) -> None:
        """Add a finished session's CPU (clients, server and codec, as measured) and the
        model's prediction for it to :attr:`_calibration`: the probes are 24-client
        sessions, and their extrapolation to thousands of clients was seen off by up
        to 3x between runs on one machine. Only sessions the model was made for."""
        if self._cost_model is None or run.config.n < self.PROBE_MIN_CLIENTS:
            return
        try:
            predicted = self._model_seconds(run.config.n, run.config.dim)
        except Exception:  # noqa: BLE001 - the estimate never stops a run
            return
        measured = (float(np.sum(run.client_seconds)) + float(run.server_seconds)
                    + float(run.codec_seconds))
        if predicted > 0 and measured > 0:
            self._calibration[0] += measured
            self._calibration[1] += predicted

    @property
    def calibrated_sessions(self) -> bool:
        """Has a finished session calibrated the estimate?"""
        return self._calibration[1] > 0

    def _probe(self) -> tuple[float, float, float]:
        """``(a0, a1, b)``: CPU seconds per client, per client and neighbour, and per
        client and vector entry (each at least 0)."""
        import time

        k = self.PROBE_CLIENTS
        sparse = self.session_params(k)
        try:
            dense = find_params(k, graph="complete", dropout_rate=sparse.dropout_rate,
                                corrupt_fraction=self.corrupt_fraction, sigma=self.sigma,
                                eta=self.eta, threat=self.threat, grinding_bits=0)
        except ParameterError:  # no complete-graph parameters: per-neighbour cost only
            dense = None

        def per_client(params: SecAggParams, dim: int) -> float:
            rand = insecure_deterministic_randomness(dim, "secagg-estimate")
            config = SessionConfig(params, tuple(range(k)), b"fedhh estimate", dim,
                                   1 << 32, malicious=self.malicious,
                                   server_nonce=rand.token_bytes(FRESH_NONCE_BYTES))
            zero = np.zeros(dim, dtype=np.uint64)
            t0 = time.process_time()
            run_secagg(config, lambda _i: zero, rand=rand)
            return (time.process_time() - t0) / k

        lo, hi = self.PROBE_DIMS
        per_client(sparse, lo)  # warm-up: first calls build caches and plans
        c_lo, c_hi = per_client(sparse, lo), per_client(sparse, hi)
        b = max(0.0, (c_hi - c_lo) / (hi - lo))
        if dense is not None and dense.degree > sparse.degree:
            a1 = max(0.0, (per_client(dense, lo) - c_lo) / (dense.degree - sparse.degree))
            a0 = max(0.0, c_lo - a1 * sparse.degree - b * lo)
        else:
            a0, a1 = 0.0, max(0.0, c_lo - b * lo) / max(1, sparse.degree)
        return a0, a1, b

    def planned_workers(self, n: int) -> int:
        """How many worker processes an ``n``-client session would run on (1: this
        process; on a cluster given by address, the workers it has are not known
        before connecting and 1 is returned)."""
        from protocol.core import cluster

        if self._engine is not None:
            return int(self._engine.workers)
        if self.cluster is not None:
            return 1
        if self.workers is None:
            cores = cluster.default_workers()
            if n < self.AUTO_SHARD_CLIENTS or cores < 2 or not cluster.dask_available():
                return 1
            return cores
        return int(self.workers)

    def announce(self, n: int, dim: int, what: str = "secure-aggregation session") -> None:
        """Say a one-line estimate before a session predicted to take more than
        ``estimate_after`` seconds (only when ``estimate_say`` is set; small sessions
        are not probed). Never raises: an estimate must not stop a run."""
        if self.estimate_say is None or (n < self.PROBE_MIN_CLIENTS
                                         and n * dim < self.PROBE_MIN_ENTRIES):
            return
        try:
            predicted = self.predict_session_seconds(n, dim)
        except Exception:  # noqa: BLE001 - the estimate never stops a run
            return
        if predicted > self.estimate_after:
            basis = ("a measured per-client cost, calibrated on the sessions run so far"
                     if self.calibrated_sessions else "a measured per-client cost")
            self.estimate_say(f"estimate: this {what} of {n:,} clients, vectors of {dim:,} "
                              f"entries, takes about {predicted:.0f} s of CPU (from "
                              f"{basis})")

    def session_params(self, n: int) -> SecAggParams:
        """Parameters of an ``n``-participant session under this threat model.

        Raises:
            AggregationAborted: ``no_secagg_parameters`` when the model cannot be met.
        """
        delta = max(DEFAULT_DROPOUT_RATE, self.dropout)
        try:
            return find_params(n, graph=self.graph, dropout_rate=delta,
                               corrupt_fraction=self.corrupt_fraction, sigma=self.sigma,
                               eta=self.eta, threat=self.threat,
                               grinding_bits=self.grinding_bits
                               if self.grinding_bits is not None else default_grinding_bits(
                                   n, delta, graph=self.graph, malicious=self.malicious))
        except ParameterError as exc:
            raise AggregationAborted("no_secagg_parameters", str(exc)) from None

    @staticmethod
    def session_aborted(run: SecAggRun, params: SecAggParams, dropout: Dropout | None
                        ) -> AggregationAborted:
        """The error for a session that did not complete: ``secagg_<server's reason>``,
        the survivors, and, when the simulated schedule dropped more clients than the
        parameters' ``ceil(delta n)`` (beyond which completion is not guaranteed), that
        too."""
        reason = run.server_abort_reason.value if run.server_abort_reason else "aborted"
        detail = f"survivors {len(run.survivors)} of {params.n}"
        dropped = dropout.named() if dropout is not None else 0
        if dropped is not None and dropped > params.max_dropouts:
            detail += (f"; {dropped} clients dropped, more than the {params.max_dropouts} "
                       f"(ceil(delta n), delta = {params.dropout_rate:g}) the parameters "
                       "were chosen for, beyond which completion is not guaranteed")
        return AggregationAborted(f"secagg_{reason}", detail)

    #: with ``workers=None`` (auto), sessions of at least this many clients go to a
    #: local Dask cluster of all cores when the ``cluster`` extra is installed
    AUTO_SHARD_CLIENTS = 5000

    def engine_for(self, n: int) -> Any:
        """Where the clients of an ``n``-client session run: ``None`` (this process,
        :func:`~protocol.core.secagg_engine.run_secagg`) or a
        :class:`protocol.core.cluster.Engine`, made once and kept for later sessions.

        ``workers=1`` without ``cluster``: this process. ``workers=N`` or ``cluster``:
        Dask (:class:`~protocol.core.cluster.ClusterUnavailable` if it is not
        installed). ``workers=None``: a local cluster of all cores for sessions of at
        least :attr:`AUTO_SHARD_CLIENTS` clients when Dask is installed and there is
        more than one core, else this process.
        """
        from protocol.core import cluster

        if self._engine is not None:
            return self._engine
        workers = self.planned_workers(n) if self.cluster is None else self.workers
        if self.cluster is None and workers == 1:
            return None
        self._engine = cluster.make_engine(workers, self.cluster)
        return self._engine

    def close(self) -> None:
        """Stop a cluster this transport started (also done at interpreter exit)."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def run_session(self, config: SessionConfig, input_of: Callable[[int], np.ndarray],
                    **kwargs: Any) -> SecAggRun:
        """One session, in this process or on the engine (:meth:`engine_for`); the
        release is the same either way."""
        engine = self.engine_for(config.n)
        if engine is None:
            run = run_secagg(config, input_of, **kwargs)
        else:
            from protocol.core.secagg_shards import run_secagg_sharded

            run = run_secagg_sharded(config, input_of, engine=engine, **kwargs)
        self._note_memo(run.memo_stats)
        self._calibrate(run)
        return run

    def _note_memo(self, stats: dict[str, Any] | None) -> None:
        if not stats:
            return
        tot = self.memo_totals
        for part in ("hits", "misses", "seconds"):
            for k, v in stats[part].items():
                tot[part][k] = tot[part].get(k, 0) + v
        tot["charged_seconds"] += stats["charged_seconds"]
        tot["sessions"] += 1

    def dropout_schedule(self, n: int, rng: np.random.Generator) -> Dropout | None:
        """Simulated dropouts of the ``n`` clients (none when ``dropout`` is 0)."""
        if self.dropout <= 0:
            return None
        return Dropout.random(n, self.dropout, rng,
                              rounds=(0, 1, 2, 3, 4) if self.malicious else (0, 1, 2, 4))


    @staticmethod
    def client_inputs(spec: RoundSpec, contributions: Contributions,
                      vote_modulus_of: Callable[[int], int]
                      ) -> tuple[int, int, int, Callable[[int], np.ndarray]]:
        """The clients' secure-aggregation inputs for a vote or vector round:
        ``(n, dim, modulus, input_of)``; a vote is a one-hot vector (an abstention the
        zero vector) modulo ``vote_modulus_of(n)``.

        Raises:
            ContractError: contributions of the wrong kind, or a report round.
            AggregationAborted: ``too_few_participants`` (secure aggregation needs 3).
        """
        if spec.kind is Kind.VOTE:
            if not isinstance(contributions, Votes):
                raise ContractError(f"a vote round cannot take {type(contributions).__name__}")
            choice = contributions.validate(spec)
            n, dim = int(choice.size), spec.domain_size
            modulus = vote_modulus_of(n)

            input_of: Callable[[int], np.ndarray] = VoteRows(choice, dim)
        elif spec.kind is Kind.VECTOR:
            if not isinstance(contributions, Vectors):
                raise ContractError(
                    f"a vector round cannot take {type(contributions).__name__}")
            values = contributions.validate(spec)
            n, dim, modulus = int(values.shape[0]), spec.dim, spec.modulus

            input_of = MatrixRows(values)
        else:
            raise ContractError("secure aggregation sums vectors; it cannot carry "
                                "opaque reports (use the shuffler transport)")
        if n < max(spec.min_participants, 3):
            raise AggregationAborted("too_few_participants",
                                     f"{n} contributions, secure aggregation needs "
                                     f"{max(spec.min_participants, 3)}")
        return n, dim, modulus, input_of


class CorruptRows:
    """Client inputs with corrupted clients: position ``i`` in ``bad`` enters ``vector``
    (already reduced modulo the session's modulus) instead of its own row."""

    def __init__(self, inner: Any, bad: np.ndarray, vector: np.ndarray) -> None:
        self.inner, self.bad, self.vector = inner, np.asarray(bad, dtype=np.int64), vector
        self._bad = frozenset(int(i) for i in self.bad)

    def __call__(self, i: int) -> np.ndarray:
        return self.vector.copy() if i in self._bad else self.inner(i)

    def shard(self, lo: int, hi: int) -> "CorruptRows":
        inner = self.inner.shard(lo, hi) if hasattr(self.inner, "shard") else self.inner
        return CorruptRows(inner, self.bad, self.vector)


def corrupt_inputs(transport: Any, spec: RoundSpec, contributions: Contributions,
                   input_of: Callable[[int], np.ndarray], modulus: int
                   ) -> tuple[Callable[[int], np.ndarray], np.ndarray]:
    """A secure-aggregation round's inputs with the transport's corrupted clients
    (:mod:`protocol.core.corruption`), and their positions: each enters its strategy's
    vector modulo ``modulus`` (nothing checks it).

    Raises:
        ContractError: a strategy that attacks validated reports.
    """
    from protocol.core.corruption import corrupt_positions, corrupt_vector

    c = transport.corrupt
    if c is None or spec.kind is not Kind.VOTE or not isinstance(contributions, Votes):
        return input_of, np.zeros(0, dtype=np.int64)
    if c.on_reports:
        raise ContractError(f"the corrupted-client strategy {c.strategy!r} attacks the "
                            "committee's validated reports; secure aggregation has no such "
                            "format (use a vector strategy)")
    users = voters(contributions)
    bad = corrupt_positions(c, spec.task, int(spec.round), users)
    if bad.size == 0:
        return input_of, bad
    vec = corrupt_vector(c, spec.candidates, spec.theta)
    return CorruptRows(input_of, bad, (vec % modulus).astype(np.uint64)), bad


def voters(votes: Votes) -> np.ndarray:
    """The population indices of a vote round's contributors (positions when the
    round names no sample)."""
    if votes.sample is not None:
        return np.asarray(votes.sample.users, dtype=np.int64)
    return np.arange(np.asarray(votes.choice).size, dtype=np.int64)


def note_corruption(transport: Any, spec: RoundSpec, contributions: Contributions,
                    bad: np.ndarray, result: RoundResult, *, validated: bool) -> None:
    """Log what a round's corrupted clients achieved (``views["corrupted"]``)."""
    from protocol.core.corruption import record_round

    if transport.corrupt is None or not isinstance(contributions, Votes):
        return
    rec = record_round(transport, spec, np.asarray(contributions.choice, dtype=np.int64),
                       voters(contributions), bad, result.release, validated=validated)
    result.views["corrupted"] = rec.as_dict()


class SecAggTransport(SecAggSessionOptions, Transport):
    """Secure aggregation (SecAgg, or SecAgg+ on a Harary graph) as a transport.

    Takes the options of :class:`SecAggSessionOptions`.
    """

    name = "secagg"
    kinds = frozenset({Kind.VOTE, Kind.VECTOR})

    def run_round(self, spec: RoundSpec, contributions: Contributions,
                  rng: np.random.Generator) -> RoundResult:
        n, dim, modulus, input_of = self.client_inputs(spec, contributions, vote_modulus)
        input_of, bad = corrupt_inputs(self, spec, contributions, input_of, modulus)
        self.announce(n, dim)
        params = self.session_params(n)
        if self.simulate:
            rand: Any = insecure_deterministic_randomness(
                int(rng.integers(0, 1 << 63)), "secagg-transport")
        else:
            rand = OsRandom()
        # every attempt draws a fresh server nonce (see docs/secagg-primitives.md)
        config = SessionConfig(params, tuple(range(n)), spec_context(spec), dim, modulus,
                               malicious=self.malicious,
                               server_nonce=rand.token_bytes(FRESH_NONCE_BYTES))
        drop = self.dropout_schedule(n, rng)
        run = self.run_session(config, input_of, rand=rand, dropout=drop,
                               progress=self.client_progress)
        if not run.completed or run.result is None:
            raise self.session_aborted(run, params, drop)
        release = sum_release(spec, run.result, len(run.survivors))
        result = RoundResult(release, _views(run), _cost(run))
        note_corruption(self, spec, contributions, bad, result, validated=False)
        return result


def sum_release(spec: RoundSpec, total: np.ndarray, contributed: int) -> Release:
    """The release of a secure-aggregation round from its sum over ``contributed``
    clients: the thresholded counts of a vote round, the vector of a vector round.

    Raises:
        AggregationAborted: ``too_few_participants`` (fewer survived than the round
            requires).
    """
    if contributed < spec.min_participants:
        raise AggregationAborted("too_few_participants",
                                 f"{contributed} contributions survived, "
                                 f"{spec.min_participants} required")
    if spec.kind is Kind.VOTE:
        counts = total.astype(np.int64)
        return Release(spec, contributed, counts=threshold_counts(spec, counts))
    return Release(spec, contributed, vector=total.copy())


def _views(run: SecAggRun) -> dict[str, dict[str, Any]]:
    sets = {k: sorted(v) for k, v in run.sets.items()}
    server = {
        "session": run.config.session.hex(),
        "masked_input_digests": {u: d.hex() for u, d in sorted(run.input_digests.items())},
        "sum": None if run.result is None else run.result.copy(),
        **sets,
        "message_sizes": [(e.sender, e.recipient, e.round, e.kind, e.size)
                          for e in run.transcript.envelopes],
    }
    clients = {
        "aborted": {i: r.value for i, r in run.client_abort_reasons.items()},
        "revealed_b_shares_of": {c: sorted(b) for c, (b, _) in run.transcript.reveals.items()},
        "revealed_s_shares_of": {c: sorted(s) for c, (_, s) in run.transcript.reveals.items()},
        "degree": run.config.degree,
        "threshold": run.config.threshold,
        "threat": run.config.params.threat,
        "min_honest": run.config.params.min_honest,
    }
    return {"server": server, "clients": clients}


def _cost(run: SecAggRun) -> Cost:
    return Cost({"server": run.server_seconds, "clients": float(run.client_seconds.sum()),
                 "codec": run.codec_seconds},
                bytes_up=int(run.bytes_up.sum()), bytes_down=int(run.bytes_down.sum()))
