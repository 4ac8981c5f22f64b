"""TrieHH (Zhu et al., "Federated Heavy Hitters Discovery with Differential Privacy",
AISTATS 2020): prepare a run (population, Corollary 1's parameters), run it over a
transport, summarise it against the ground truth; time it; and the parameter
calculator (Theorem 1, Corollaries 1-2, Proposition 1).

Used by ``fedhh triehh``, ``bench triehh``, ``privacy triehh``, ``eval triehh``
(:mod:`.triehh_eval`), ``eval compare``, ``hh`` and ``demo``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from protocol.core.contract import SamplesThroughInner, Transport
from protocol.studies.errors import StudyError

__all__ = ["KS", "why_none", "TrieHHOptions", "plain_options", "Prepared", "prepare", "run_once", "summarize", "run",
           "benchmark", "parameters", "aim", "run_corrupted", "SampleLog"]

KS = (10, 50, 100)
Progress = Callable[[Iterable[Any]], Iterable[Any]]
#: ``client_progress(step, done, total)``: clients served inside one secure-aggregation
#: session (transports without sessions never call it)
ClientProgress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class TrieHHOptions:
    """What one TrieHH run needs (``fedhh triehh`` options of the same names).

    ``dataset`` is ``en``, ``en-oov``, ``zipf`` or a file path
    (:func:`protocol.studies.datasets.load_dataset`); ``delta`` defaults to ``1/n^2``;
    ``theta``/``gamma`` override Corollary 1; ``transport`` is the transport's name as
    reported in the summary.
    """

    dataset: str = "en"
    users: int | None = None
    epsilon: float = 4.0
    delta: float | None = None
    max_length: int = 10
    multi_word: bool = False
    unit_size: int = 1
    seed: int | None = None
    theta: int | None = None
    gamma: float | None = None
    alphabet: str | None = None
    transport: str = "plain"
    release_counts: bool = False
    max_candidates: int = 1 << 21
    drop_unencodable: bool = False


def plain_options(dataset: str, users: int, epsilon: float, delta: float,
                  max_length: int) -> TrieHHOptions:
    """The options of a default TrieHH run over the plaintext transport (seed 0, the
    sampling comes from the caller's rng) -- as ``fedhh hh`` and ``eval compare`` run it."""
    return TrieHHOptions(dataset=dataset, users=users, epsilon=epsilon, delta=delta,
                         max_length=max_length, transport="plain", seed=0)


@dataclass
class Prepared:
    """A population encoded for TrieHH with the parameters of its target."""

    population: Any
    alphabet: Any
    data: Any
    config: Any
    n: int
    delta: float
    params: Any  # TrieHHParameters or None when overridden
    transport_name: str
    target_epsilon: float


def prepare(opts: TrieHHOptions, population=None):  # noqa: ANN001, ANN201
    """Load the population (or use ``population``, e.g. from ``fedhh hh``) and choose
    the parameters; returns ``(prepared, run_rng)``.

    Raises:
        StudyError: bad dataset, parameters or privacy target.
    """
    import numpy as np

    from mechanisms.prefix_tree import PrefixTreeError, UnitAlphabet
    from mechanisms.triehh import TrieHHConfig, TrieHHError, encode_population
    from mechanisms.triehh_privacy import TrieHHPrivacyError, corollary1
    from protocol.studies.datasets import DatasetError, load_dataset

    if not 1 <= opts.unit_size <= 4:
        raise StudyError("--unit-size must be between 1 and 4")
    if opts.max_length < 1:
        raise StudyError("--max-length must be >= 1")
    if opts.users is not None and opts.users < 1:
        raise StudyError("--users must be >= 1")
    root = np.random.default_rng(opts.seed)
    data_rng, run_rng = root.spawn(2)
    try:
        pop = (population if population is not None else
               load_dataset(opts.dataset, opts.users, data_rng, opts.multi_word,
                            opts.alphabet, opts.drop_unencodable)).compact()
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    n = pop.n
    if n < 2 and opts.delta is None:
        raise _too_few(opts, pop, "")
    delta = opts.delta if opts.delta is not None else 1.0 / float(n) ** 2
    params = None
    try:
        if opts.theta is None or opts.gamma is None:
            try:
                params = corollary1(opts.epsilon, delta, n, opts.max_length, opts.multi_word)
            except TrieHHPrivacyError as exc:
                if "theta" in str(exc) or "gamma" in str(exc):
                    raise _too_few(opts, pop, str(exc)) from None
                raise
        theta = opts.theta if opts.theta is not None else params.theta
        gamma = opts.gamma if opts.gamma is not None else params.gamma
        alphabet = UnitAlphabet(pop.alphabet, opts.unit_size)
        config = TrieHHConfig(theta, gamma, opts.max_length, max_candidates=opts.max_candidates,
                              release_counts=bool(opts.release_counts))
        data = encode_population(pop.vocabulary, pop.offsets, pop.items, pop.counts, alphabet,
                                 opts.max_length)
    except (TrieHHPrivacyError, TrieHHError, PrefixTreeError) as exc:
        raise StudyError(str(exc)) from None
    return Prepared(pop, alphabet, data, config, n, delta, params, opts.transport,
                    opts.epsilon), run_rng


def _too_few(opts: TrieHHOptions, pop, why: str) -> StudyError:  # noqa: ANN001
    """The error for a population below what Corollary 1 needs at the target: the
    users left after what loading dropped (:func:`protocol.studies.datasets.users_left`)
    and the smallest population that meets the conditions of Theorem 1 at the same
    epsilon, delta and ``L`` (:func:`too_few_for_target`)."""
    from protocol.studies.datasets import users_left

    # a caller that passed 1/n^2 for its own n (``fedhh hh``, ``eval compare``) means
    # the default rule, not that fixed value
    per_n = opts.delta is None or math.isclose(opts.delta, 1.0 / float(max(pop.n, 1)) ** 2)
    return too_few_for_target(opts.epsilon, None if per_n else opts.delta, pop.n,
                              opts.max_length, opts.multi_word, users_left(pop), why)


def too_few_for_target(epsilon: float, delta: float | None, n: int, max_length: int,
                       multi_word: bool, left: str, why: str,
                       who: str = "TrieHH") -> StudyError:
    """:func:`protocol.studies.errors.too_few_users` for TrieHH at ``epsilon`` (and
    ``delta``; ``None``: ``1/n^2`` for every ``n``): the smallest population that meets
    Corollary 1's conditions; the condition's own message ``why`` when no population is
    too small (a target that no ``n`` meets for another reason). ``who`` names the
    mechanism taking Corollary 1's parameters (Poplar1's sampled mode does too)."""
    from mechanisms.triehh_privacy import TrieHHPrivacyError, corollary1
    from protocol.studies.errors import smallest_population, too_few_users

    def ok(k: int) -> bool:
        d = 1.0 / float(k) ** 2 if delta is None else delta
        try:
            corollary1(epsilon, d, k, max_length, multi_word)
        except TrieHHPrivacyError:
            return False
        return True

    needed = smallest_population(ok)
    if needed is not None and needed <= n:  # not a population problem
        return StudyError(why)
    target = f"L = {max_length}" if delta is None else f"delta {delta:.3g}, L = {max_length}"
    return too_few_users(left, f"{who} at epsilon {epsilon:g} ({target})", needed, why)


def why_none(theta: int | float, m: int | float, n: int, sample: str = "sample",
             advice: str = "raise --users or --epsilon") -> str:
    """Why a run released no heavy hitter, in one sentence: the threshold, the users
    sampled per round and the smallest count that could pass (``theta`` votes of the
    ``m`` sampled users, so a word held by fewer than about ``theta n / m`` users of
    ``n`` is expected to fail every round). ``sample`` names the per-round sample
    (``"expected sample"`` for TrieHH++'s Poisson sampling)."""
    theta, m = int(theta), float(m)
    share = min(1.0, theta / m) if m > 0 else 1.0
    return (f"(none): a word is found only if each of its prefixes gets theta = {theta} "
            f"votes in its round's {sample} of m = {m:,.0f} users; the smallest count that "
            f"could pass is {theta} votes, so a word needs about {share:.1%} of the users "
            f"({math.ceil(share * n):,} of {n:,}): {advice}")


def run_once(prep: Prepared, transport: Transport, rng,  # noqa: ANN001, ANN201
             progress: Progress | None = None,
             client_progress: ClientProgress | None = None):
    """One TrieHH run; returns the mechanism's result. ``progress`` wraps the rounds;
    ``client_progress`` is installed on a transport that reports progress inside a
    round (secure aggregation: ``client_progress(step, done, total)``).

    Raises:
        StudyError: the candidate set exceeds the cap or the transport aborts.
    """
    from mechanisms.triehh import TrieHH, TrieHHError
    from protocol.core.contract import AggregationAborted

    if client_progress is not None and hasattr(transport, "client_progress"):
        transport.client_progress = client_progress
    if getattr(transport, "contributions_at_clients", False):
        # the clients hold the data and vote themselves (the network prototype); the
        # server's side never reads prep.data
        if not prep.data.one_per_user:
            raise StudyError("clients that vote themselves hold one word each: "
                             "--multi-word is not available over the network")
        mech = TrieHH.at_server(prep.n, prep.alphabet, prep.config, transport, rng)
    else:
        mech = TrieHH(prep.data, prep.alphabet, prep.config, transport, rng)
    try:
        rounds = mech.rounds()
        for _ in (progress(rounds) if progress is not None else rounds):
            pass
        return mech.result()
    except TrieHHError as exc:
        raise StudyError(str(exc)) from None
    except AggregationAborted as exc:
        raise StudyError(f"the {prep.transport_name} transport aborted a round: {exc}") from None


def summarize(prep: Prepared, result, ks=KS) -> dict[str, Any]:  # noqa: ANN001
    """Metrics and per-word details of one run as a JSON-ready dict."""
    from mechanisms.metrics import precision, rank_of, topk_metrics

    pop = prep.population
    ranking = pop.ranking()
    truth = [pop.vocabulary[i] for i in ranking]
    freq = pop.frequency()
    words_in_pop = set(truth)
    hh = result.heavy_hitters
    ranks = rank_of(list(hh), truth)
    index = {w: i for i, w in enumerate(pop.vocabulary)}
    discovered = [
        {"word": w, "released_count": c, "true_rank": ranks[w],
         "true_frequency": float(freq[index[w]]) if w in index else 0.0}
        # by released count when counts were released, else by true rank
        for w, c in sorted(hh.items(), key=lambda kv: (
            -kv[1] if kv[1] is not None else 0,
            ranks[kv[0]] if ranks[kv[0]] is not None else math.inf, kv[0]))
    ]
    g = result.guarantee
    total = result.total_cost
    from protocol.studies.datasets import input_report

    return {
        "dataset": pop.name,
        "description": pop.description,
        "dropped_words": int(pop.dropped),
        "input": input_report(pop, int(prep.config.max_levels) * prep.alphabet.unit_size),
        "n": prep.n,
        "multi_word": not prep.data.one_per_user,
        "unit_size": prep.alphabet.unit_size,
        "transport": prep.transport_name,
        "privacy": _with_guarantee(g, {
            "epsilon": g.epsilon if g else None, "delta": g.delta if g else None,
            "theorem": g.theorem if g else result.guarantee_note,
            "target_epsilon": prep.target_epsilon,
            "theta": int(prep.config.theta), "gamma": float(prep.config.gamma),
            "m": result.m, "L": int(prep.config.max_levels),
            "target_delta": prep.delta,
        }),
        "rounds": [
            {"round": r.round, "candidates": r.candidates, "sampled": r.sampled,
             "released": r.released, "seconds": round(r.seconds, 6),
             "cpu_seconds": {k: round(v, 6) for k, v in r.cost.cpu_seconds.items()},
             "bytes_up": r.cost.bytes_up, "bytes_down": r.cost.bytes_down,
             **({"bytes_members": r.cost.bytes_members} if r.cost.bytes_members else {}),
             **({"bytes_sent": dict(r.cost.bytes_sent)} if r.cost.bytes_sent else {})}
            for r in result.rounds
        ],
        "total_bytes_up": total.bytes_up,
        "total_bytes_down": total.bytes_down,
        **({"total_bytes_members": total.bytes_members} if total.bytes_members else {}),
        "heavy_hitters": discovered,
        "frequent_prefixes": len(result.prefixes),
        "precision": precision(hh, words_in_pop),
        "at_k": [topk_metrics(hh, truth, k).as_dict() for k in ks],
    }


def estimate_seconds(prep: Prepared, transport: Transport) -> float | None:
    """Predicted seconds of a run over secure aggregation, from a measured per-client
    cost (:meth:`~protocol.core.transports.secagg_transport.SecAggSessionOptions.predict_session_seconds`):
    ``L`` sessions of ``m`` clients at the first round's vector length. An upper
    estimate: a run may stop before ``L`` rounds, and later rounds are often shorter
    vectors. Secure aggregation and the thresholding committee are estimated alike (the
    committee's comparisons take milliseconds); ``None`` for other transports (their
    rounds take milliseconds).
    """
    from protocol.core.contract import AggregationAborted
    from protocol.core.transports.secagg_transport import SecAggSessionOptions

    inner = getattr(transport, "inner", transport)  # a recording wrapper
    if not isinstance(inner, SecAggSessionOptions):
        return None
    m = int(prep.params.m) if prep.params is not None else \
        int(math.floor(prep.config.gamma * math.sqrt(prep.n)))
    try:
        per_round = inner.predict_session_seconds(max(3, m), max(2, prep.alphabet.num_units))
    except AggregationAborted:
        return None
    return per_round * int(prep.config.max_levels)


def _with_guarantee(g, legacy: dict[str, Any]) -> dict[str, Any]:  # noqa: ANN001
    """The privacy block: the keys printed so far, then the guarantee's own fields."""
    return g.to_json(legacy) if g is not None else legacy


class SampleLog(SamplesThroughInner, Transport):
    """Delegates every round to ``inner`` and keeps each round's sample (drawn through
    the inner transport: over a committee, its beacon) in ``samples``."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        for attr in ("name", "kinds", "anonymous_reports"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))
        self.samples: dict[tuple[str, int], Any] = {}

    def run_round(self, spec, contributions, rng):  # noqa: ANN001, ANN201
        return self.inner.run_round(spec, contributions, rng)


def aim(prep: Prepared, corrupt: Any, transport: Transport):  # noqa: ANN201
    """The corrupted clients of a run aimed at their target word
    (:func:`protocol.studies.corrupted.aim_word`: without one, a word nobody in the
    population holds), or ``None`` without corrupted clients.

    Raises:
        StudyError: clients the transport cannot simulate, users outside the
            population, a target outside the alphabet.
    """
    from protocol.studies.corrupted import aim_word, check_transport

    if corrupt is None:
        return None
    check_transport(corrupt, transport, prep.transport_name)
    chars = int(prep.config.max_levels) * prep.alphabet.unit_size
    return aim_word(corrupt, prep.population.vocabulary, prep.alphabet.symbols, chars,
                    prep.alphabet.eos, prep.n)


def run_corrupted(prep: Prepared, transport: Transport, rng, aimed,  # noqa: ANN001, ANN201
                  progress: Progress | None = None,
                  client_progress: ClientProgress | None = None):
    """One TrieHH run with the corrupted clients ``aimed`` (:func:`aim`), then the same
    run over the plaintext transport on the same samples with the same clients
    abstaining (plain TrieHH over the honest clients' votes); returns ``(result,
    corrupted section)`` (:func:`protocol.studies.corrupted.section` with the
    whole-run comparison).

    Raises:
        StudyError: as :func:`run_once`.
    """
    import copy
    import dataclasses

    from protocol.core.transports.plain import PlainTransport
    from protocol.studies.corrupted import armed, compare_release, inner, records_since, section

    rng_honest = copy.deepcopy(rng)
    t = inner(transport)
    if client_progress is not None and hasattr(t, "client_progress"):
        t.client_progress = client_progress
    log = SampleLog(transport)
    with armed(transport, aimed.clients) as start:
        result = run_once(prep, log, rng, progress)
        records = records_since(transport, start)
    out = section(aimed, records)
    # a committee that drew its samples from the OS (no --seed): ask the same users;
    # seeded, every transport samples what plain samples
    samples = None if getattr(t, "simulate", True) else log.samples
    plain = PlainTransport(samples=samples)
    plain.corrupt = dataclasses.replace(aimed.clients, strategy="abstain")
    honest = run_once(prep, plain, rng_honest)
    compare_release(out, aimed.word, result.heavy_hitters, result.prefixes,
                    honest.heavy_hitters, honest.prefixes)
    return result, out


def run(opts: TrieHHOptions, transport: Transport,
        progress: Progress | None = None,
        client_progress: ClientProgress | None = None,
        say: Callable[[str], None] | None = None,
        prepared: tuple[Prepared, Any] | None = None,
        corrupt: Any = None) -> dict[str, Any]:
    """Prepare, run and summarise one TrieHH run, with ``seconds`` of load and run.
    ``say`` receives a one-line estimate before a run predicted (by
    :func:`estimate_seconds`) to take more than a minute. ``prepared``: the result of
    :func:`prepare` for ``opts``, when the caller needed it first. ``corrupt``: the
    corrupted clients (a :class:`~protocol.core.corruption.CorruptClients` or the short
    dict of :func:`protocol.studies.corrupted.corrupt_clients`; default: those set on
    the transport): the summary then has a ``corrupted`` section
    (:func:`run_corrupted`) and ``input["corrupt_target"]``.

    Raises:
        StudyError: as :func:`prepare` and :func:`run_once`, or corrupted clients the
            transport cannot simulate.
    """
    from protocol.studies.corrupted import corrupt_from_transport

    t0 = time.perf_counter()
    c = corrupt_from_transport(transport, corrupt)
    prep, rng = prepared if prepared is not None else prepare(opts)
    aimed = aim(prep, c, transport)
    if say is not None:
        predicted = estimate_seconds(prep, transport)
        if predicted is not None and predicted > 60:
            say(f"estimate: up to {cpu_phrase(predicted, transport, _m(prep))} over "
                f"{opts.transport} ({prep.config.max_levels} rounds of {_m(prep)} clients, "
                f"measured {predicted / (_m(prep) * prep.config.max_levels) * 1e3:.1f} ms of "
                "CPU per client per round)")
    t1 = time.perf_counter()
    if aimed is None:
        result = run_once(prep, transport, rng, progress, client_progress)
    else:
        result, corrupted = run_corrupted(prep, transport, rng, aimed, progress,
                                          client_progress)
    t2 = time.perf_counter()
    out = summarize(prep, result)
    if aimed is not None:
        out["input"]["corrupt_target"] = aimed.input_note()
        out["corrupted"] = corrupted
    out["seconds"] = {"load": round(t1 - t0, 3), "run": round(t2 - t1, 3),
                      "total": round(t2 - t0, 3)}
    return out


def _m(prep: Prepared) -> int:
    return int(prep.params.m) if prep.params is not None else \
        int(math.floor(prep.config.gamma * math.sqrt(prep.n)))


def cpu_phrase(seconds: float, transport: Transport, clients: int) -> str:
    """``seconds`` of predicted CPU said as such, with the wall time it comes to at best
    when the sessions' clients run on several worker processes."""
    inner = getattr(transport, "inner", transport)
    planned = getattr(inner, "planned_workers", None)
    workers = planned(clients) if planned is not None else 1
    text = f"{_duration(seconds)} of CPU"
    if workers > 1:
        text += f" (at best {_duration(seconds / workers)} of wall time on {workers} workers)"
    return text


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _canonical(items: list[Any]) -> list[str]:
    """A sortable form of a list of heavy hitters (dicts or strings)."""
    import json

    return sorted(json.dumps(i, sort_keys=True, default=str) for i in items)


def benchmark(opts: TrieHHOptions, transport: Transport, bare_sample: int = 2000,
              progress: Progress | None = None) -> dict[str, Any]:
    """Run TrieHH once as :func:`run` does and return wall and CPU time of loading and
    of the run, per-round sizes and times, the metrics at K and -- over secure
    aggregation -- the time inside each primitive family next to its bare cost
    (:mod:`protocol.core.secagg_profile`), with X25519 singled out.

    Over secure aggregation the run is the profiled run: every primitive call counted,
    every 16th timed (``profile_primitives(16)``). Two CPU figures, never mixed:
    ``cpu_seconds`` is the simulation's (each session's parties share pure work,
    :mod:`secagg.memo`), ``device_cpu_seconds`` adds the work the session memos saved
    (what devices of their own would spend); the primitive table, ``floor_ratio`` and
    ``primitive_floor_ratio`` are per device. A transport whose clients
    run on workers (``workers > 1`` or ``cluster``) first runs the same TrieHH on the
    workers; the in-process runs follow; ``distributed`` reports both wall times, the
    speedup and whether the heavy hitters are the same.

    Raises:
        StudyError: as :func:`prepare` and :func:`run_once`.
    """
    import copy

    wall0, cpu0 = time.perf_counter(), time.process_time()
    prep, rng = prepare(opts)
    wall1, cpu1 = time.perf_counter(), time.process_time()
    distributed = None
    if getattr(transport, "workers", None) not in (None, 1) or getattr(transport, "cluster", None):
        # the same run with the clients on the workers, then in this process
        dw, dc = time.perf_counter(), time.process_time()
        dres = run_once(prep, transport, copy.deepcopy(rng), progress)
        engine = transport._engine  # type: ignore[attr-defined]
        distributed = {"engine": getattr(engine, "name", None),
                       "workers": getattr(engine, "workers", None),
                       "seconds": round(time.perf_counter() - dw, 3),
                       "driver_cpu_seconds": round(time.process_time() - dc, 3),
                       "heavy_hitters": _canonical(summarize(prep, dres)["heavy_hitters"])}
        transport.close()  # type: ignore[attr-defined]
        transport = copy.copy(transport)
        transport.workers, transport.cluster = 1, None  # type: ignore[attr-defined]
        wall1, cpu1 = time.perf_counter(), time.process_time()
    profiling = opts.transport in ("secagg", "threshold")
    prof = None
    totals = getattr(transport, "memo_totals", None)
    charged0 = totals["charged_seconds"] if totals else 0.0
    hits0 = dict(totals["hits"]) if totals else {}
    if profiling:
        # one run, its primitives counted on every call and timed on every 16th
        from protocol.core.secagg_engine import profile_primitives

        with profile_primitives(16) as prof:
            result = run_once(prep, transport, rng, progress)
    else:
        result = run_once(prep, transport, rng, progress)
    wall2, cpu2 = time.perf_counter(), time.process_time()
    summary = summarize(prep, result)
    run_wall, run_cpu = wall2 - wall1, cpu2 - cpu1
    profiled_cpu = run_cpu
    memo = None
    if totals:
        memo = {"hits": {k: v - hits0.get(k, 0) for k, v in totals["hits"].items()},
                "charged_seconds": round(totals["charged_seconds"] - charged0, 3)}
    out: dict[str, Any] = {
        "dataset": summary["dataset"], "n": summary["n"], "transport": opts.transport,
        "multi_word": summary["multi_word"], "unit_size": summary["unit_size"],
        "seed": opts.seed, "privacy": summary["privacy"],
        "rounds": [{k: r[k] for k in ("round", "candidates", "sampled", "released",
                                      "seconds", "bytes_up")} for r in summary["rounds"]],
        "clients_per_round": result.m,
        "heavy_hitters": len(summary["heavy_hitters"]),
        "precision": summary["precision"], "at_k": summary["at_k"],
        "seconds": round(run_wall, 3),
        "cpu_seconds": round(run_cpu, 3),
        "device_cpu_seconds": round(run_cpu + (memo["charged_seconds"] if memo else 0.0), 3),
        "memo": memo,
        "load_seconds": round(wall1 - wall0, 3),
        "load_cpu_seconds": round(cpu1 - cpu0, 3),
        "primitives": None, "x25519": None,
        "floor_ratio": None, "primitive_floor_ratio": None,
        "distributed": None,
    }
    if distributed is not None:
        same = distributed.pop("heavy_hitters") == _canonical(summary["heavy_hitters"])
        distributed.update(one_worker_seconds=round(run_wall, 3),
                           speedup=round(run_wall / max(distributed["seconds"], 1e-9), 3),
                           same_heavy_hitters=same)
        out["distributed"] = distributed
    if prof is not None:
        from protocol.core.secagg_profile import device_profile, floor_ratios, primitive_table

        sim_calls = dict(prof.calls)
        prof = device_profile(prof, memo)
        table = primitive_table(prof, bare_sample)
        ka = table["key_agreement"]
        out["primitives"] = table
        out["simulation_calls"] = sim_calls
        out["profiled_cpu_seconds"] = round(profiled_cpu, 3)
        out.update(floor_ratios(out["device_cpu_seconds"], table))
        out["primitive_seconds_total"] = round(sum(v["seconds"] for v in table.values()), 3)
        out["x25519"] = {
            "operations": ka["calls"],
            "shared_secrets": prof.calls.get("x25519_shared", 0),
            "key_generations": prof.calls.get("x25519_keypair", 0)
            + prof.calls.get("x25519_public", 0),
            "seconds": ka["seconds"],
            "bare_seconds": ka["bare_seconds"],
            "overhead_ratio": ka["overhead_ratio"],
            # per device: against the run's CPU on devices of their own
            "share_of_run_cpu": round(ka["seconds"] / out["device_cpu_seconds"], 4)
            if out["device_cpu_seconds"] > 0 else None,
            # the bare operations: 1 / the floor ratio
            "bare_share_of_run_cpu": round(ka["bare_seconds"] / out["device_cpu_seconds"], 4)
            if out["device_cpu_seconds"] > 0 else None,
        }
    return out


def parameters(n: int, *, epsilon: float | None = None, delta: float | None = None,
               max_length: int = 10, theta: int | None = None, gamma: float | None = None,
               multi_word: bool = False, frequency: float | None = None) -> dict[str, Any]:
    """TrieHH's parameters and guarantee: Corollary 1 for a target ``(epsilon, delta)``
    (``delta`` defaults to ``1/n^2``), or Theorem 1 at given ``theta`` and ``gamma``;
    with ``frequency``, Proposition 1's worst-case discovery rate of a word held by
    that fraction of the users and Figure 2's minimum population for a rate of 0.9.

    Raises:
        StudyError: ``theta`` without ``gamma`` (or the reverse), no target, a
            frequency outside (0, 1], or parameters outside the theorems.
    """
    from mechanisms.triehh_privacy import (
        TrieHHPrivacyError, batch_size, corollary1, discovery_rate,
        min_population_for_discovery, theorem1,
    )

    if n < 1:
        raise StudyError("--users must be >= 1")
    given_delta = delta
    delta = delta if delta is not None else 1.0 / float(n) ** 2
    out: dict[str, Any] = {"n": n, "L": max_length}
    try:
        if theta is not None or gamma is not None:
            if theta is None or gamma is None:
                raise StudyError("--theta and --gamma go together")
            g = theorem1(theta, gamma, n, max_length, multi_word)
            m = batch_size(gamma, n)
            out.update({"mode": "theorem1", "theta": theta, "gamma": gamma, "m": m})
        else:
            if epsilon is None:
                raise StudyError("give --epsilon (Corollary 1) or --theta and --gamma "
                                 "(Theorem 1)")
            try:
                p = corollary1(epsilon, delta, n, max_length, multi_word)
            except TrieHHPrivacyError as exc:
                if "theta" not in str(exc) and "gamma" not in str(exc):
                    raise
                raise too_few_for_target(
                    epsilon, None if given_delta is None else delta, n, max_length,
                    multi_word, f"n = {n:,} users", str(exc)) from None
            g = p.guarantee
            theta, gamma, m = p.theta, p.gamma, p.m
            out.update({"mode": "corollary1", "target_epsilon": epsilon,
                        "target_delta": delta, "theta": theta, "gamma": gamma,
                        "gamma_2dp": math.floor(gamma * 100) / 100, "m": m})
        out.update({"epsilon": g.epsilon, "delta": g.delta, "theorem": g.theorem,
                    "conditions": {"theta_min": 4, "theta_max": math.sqrt(n), "gamma_min": 1,
                                   "gamma_max": math.sqrt(n) / (theta + 1)},
                    "guarantee": g.to_json()})
        if frequency is not None:
            if not 0 < frequency <= 1:
                raise StudyError("--frequency must be in (0, 1]")
            w = int(round(frequency * n))
            rate = discovery_rate(w, n, m, theta, max_length)
            eps = epsilon if epsilon is not None else g.epsilon
            out["proposition1"] = {
                "frequency": frequency, "holders": w, "worst_case_discovery_rate": rate,
                "min_population_rate_0.9": min_population_for_discovery(
                    frequency, eps, max_length),
            }
    except TrieHHPrivacyError as exc:
        raise StudyError(str(exc)) from None
    return out
