"""Benchmarks: one secure-aggregation round, the shuffler pipeline, blinded crowd ids
and a frequency oracle. Each returns one JSON-ready dictionary with at least
``seconds``; the CLI (``fedhh bench ...``) adds the peak memory when it prints.

* :func:`bench_secagg` -- one full round on random inputs: whether the unmasked result
  equals the plaintext sum over the clients whose masked input arrived (``correct``),
  wall and process CPU time, CPU time per party, bytes per client, and for each
  primitive family the CPU time inside it next to the bare cost of the same operations
  (:mod:`protocol.core.secagg_profile`), timed on up to ``bare_sample`` operations of
  each kind and scaled (``0`` replays every operation). The round runs once: its
  primitives are counted on every call and timed on every ``profile_every``-th.
  Two figures, never mixed: the simulation's CPU (``cpu_seconds``: this process, which
  shares pure work between the parties it plays, :class:`secagg.memo.SessionMemo`)
  and the CPU devices of their own would spend (``device_cpu_seconds``: the same plus
  the work the memo saved, charged at its measured mean cost); the primitive table,
  ``floor_ratio``, ``primitive_floor_ratio`` and ``device_over_bare`` are computed on
  the per-device figure, ``simulation_primitives`` is what this process executed.
* :func:`bench_shuffler` -- the three ESA stages (encode: two seals per report;
  shuffle: open the outer layer, check, dedupe, threshold, shuffle, forward; analyze:
  open the inner layer, strip padding, dedupe, build the multiset) against the *bare*
  primitives: the same number of seal and open operations on plaintexts of the same
  sizes, with no framing, parsing, padding, deduplication, thresholding or shuffling.
  Each stage runs between the two halves of its bare counterpart, so drift of a shared
  machine affects both alike. ``overhead_ratio = bare_seconds / pipeline_seconds``;
  the acceptance bar is 0.75 (``overhead_ratio_cpu`` is the same over process CPU time).
* :func:`bench_blinded` -- clients encrypt their item's crowd point to shuffler 2,
  shuffler 1 blinds and shuffles, shuffler 2 decrypts to crowd ids and thresholds
  (:mod:`shuffler.blinded`); CPU seconds per party and whether the forwarded crowd
  sizes equal the plaintext counts at or above the threshold.
* :func:`bench_fo` -- a frequency oracle's randomisation and estimation.
"""
from __future__ import annotations

from typing import Any

from protocol.studies.errors import StudyError

__all__ = ["bench_secagg", "bench_threat_price", "bench_shuffler", "bench_blinded", "bench_fo"]


def bench_secagg(clients: int, dim: int, *, graph: str = "harary", dropout: float = 0.0,
                 threat: str = "malicious", seed: int | None = None, modulus: int = 1 << 32,
                 bare_sample: int = 2000, grinding_bits: int | None = None,
                 malicious: bool | None = None, degree: int | None = None,
                 threshold: int | None = None, workers: int = 1,
                 cluster: str | None = None, profile_every: int = 16,
                 share_work: bool = True, regroup: bool | None = None,
                 repeats: int = 1) -> dict[str, Any]:
    """Run one round and return the figures (see the module docstring).

    ``regroup``: on workers, move the clients by the neighbour graph's ring once round
    0 closes (``None``: when the shards are on more than one worker;
    :meth:`protocol.core.secagg_shards.ShardedSecAggSimulation._regroup`).

    ``profile_every``: time every ``N``-th call of each primitive (``1``: every call;
    the timers' own cost then shows in the round's CPU). ``share_work=False`` runs
    without the session memo (the simulation then pays what the devices pay).

    ``repeats > 1`` with workers: the speedup is also measured on ``repeats`` pairs of
    runs of the same round, one in this process (not profiled) then one on the
    workers, alternating (``distributed["pairs"]``, ``distributed["speedup_median"]``):
    on a shared machine one pair's ratio moves with the load of its few seconds.

    ``steps`` (and ``distributed["steps"]``): each step of the round with its wall and
    CPU seconds (:func:`_run_by_steps`); on workers the CPU is the driver's, so a step
    whose wall is close to its CPU is one where the workers wait for the driver.

    ``workers > 1`` or ``cluster``: the clients run in shards on Dask workers
    (:mod:`protocol.core.secagg_shards`); the same round (same seed, or the same drawn
    data seed) then also runs with one worker, in this process, and the result adds
    ``distributed``: wall and CPU of both, the speedup, and whether the releases are
    equal. CPU of a distributed round is this process's plus the clients' CPU measured
    on the workers; the main figures (primitive table, memory per client) are the
    one-process run's, which runs first (the profile sees only this process).

    ``degree`` and ``threshold`` (both or neither) replace the parameters
    :func:`secagg.params.find_params` would choose: the session then runs with that
    ``(k, t)`` under ``threat`` (used by :func:`bench_threat_price` to price the
    malicious protocol at equal parameters); ``log2`` bounds are then ``None``.

    ``threat`` names the threat model (``"malicious"``, the default, or
    ``"semi-honest"``; ``malicious`` is its boolean alias); the result reports it with
    ``k``, ``t``, ``min_honest`` (``alpha n``), ``alpha`` and the ``log2`` failure bounds.
    ``grinding_bits=None`` takes :func:`secagg.params.default_grinding_bits` (0 unless
    Harary under a malicious server).

    Raises:
        StudyError: no parameters satisfy the threat model for this ``n``, or
            ``threat`` and ``malicious`` disagree.
    """
    import secrets
    import time

    import numpy as np

    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from protocol.core.secagg_engine import (
        Dropout, SecAggSimulation, category_seconds, make_config, profile_primitives,
        run_secagg,
    )
    from protocol.core.secagg_profile import device_profile, floor_ratios, primitive_table
    from protocol.core.secagg_shards import SeededRows
    from secagg.errors import ParameterError
    from secagg.crypto import FRESH_NONCE_BYTES
    from secagg.params import (
        DEFAULT_DROPOUT_RATE, SecAggParams, default_grinding_bits, find_params,
        min_honest_clients, threat_of,
    )
    from secagg.state import SessionConfig

    try:
        threat = threat_of(threat, malicious)
        malicious = threat == "malicious"
        if grinding_bits is None:
            grinding_bits = default_grinding_bits(
                clients, max(DEFAULT_DROPOUT_RATE, dropout), graph=graph, malicious=malicious)
        params = find_params(clients, graph=graph,
                             dropout_rate=max(DEFAULT_DROPOUT_RATE, dropout),
                             threat=threat, grinding_bits=grinding_bits)
        if (degree is None) != (threshold is None):
            raise StudyError("give both degree and threshold, or neither")
        if degree is not None and threshold is not None:
            params = SecAggParams(
                n=clients, degree=degree, threshold=threshold, graph=graph,
                corrupt_fraction=params.corrupt_fraction, dropout_rate=params.dropout_rate,
                malicious=malicious, grinding_bits=grinding_bits,
                min_honest=min_honest_clients(
                    clients, degree, threshold, corrupt_fraction=params.corrupt_fraction,
                    dropout_rate=params.dropout_rate, threat=threat))
    except ParameterError as exc:
        raise StudyError(f"no SecAgg parameters for this setting: {exc}") from None
    data_seed = seed if seed is not None else secrets.randbits(64)

    def session() -> tuple[SessionConfig, Any]:
        # every run of this round draws its keys the same way (same seed: same keys)
        rand = insecure_deterministic_randomness(seed) if seed is not None else OsRandom()
        return SessionConfig(params, tuple(range(clients)), b"fedhh bench secagg", dim,
                             modulus, malicious=malicious,
                             server_nonce=rand.token_bytes(FRESH_NONCE_BYTES)), rand

    input_of = SeededRows(data_seed, dim, modulus)  # picklable: the workers make their rows

    rounds = (0, 1, 2, 3, 4) if malicious else (0, 1, 2, 4)
    drop = Dropout.random(clients, dropout, np.random.default_rng([data_seed, 1 << 40]),
                          rounds=rounds)
    # a warm-up round of 12 clients first, on the same code paths: the pages of code
    # and the modules a first round touches (about 3 MB) are no simulated client's
    warm = make_config(12, dim, graph=graph, degree=6 if graph == "harary" else None,
                       threshold=4, modulus=modulus, malicious=malicious)
    run_secagg(warm, SeededRows(data_seed, dim, modulus), share_work=share_work)
    config, rand = session()
    rss0 = _peak_rss_bytes()
    cpu0 = time.process_time()
    # one run: every primitive call counted, every profile_every-th timed
    with profile_primitives(profile_every) as prof:
        sim = SecAggSimulation(config, input_of, rand=rand, dropout=drop,
                               share_work=share_work)
        steps = _run_by_steps(sim)
        res = sim.result()
        del sim
    cpu_round = time.process_time() - cpu0
    rss_growth = max(0, _peak_rss_bytes() - rss0)
    # then the same round on the workers (after the memory figure, which is this run's)
    distributed: dict[str, Any] | None = None
    if workers > 1 or cluster is not None:
        from protocol.core.cluster import ClusterUnavailable, make_engine
        from protocol.core.secagg_shards import ShardedSecAggSimulation

        try:
            engine = make_engine(workers, cluster)
        except (ClusterUnavailable, ValueError) as exc:
            raise StudyError(str(exc)) from None
        try:
            # the same warm-up on the workers: a fresh worker process imports the
            # protocol's modules and touches their code on its first shard, which the
            # one-process run above did before its clock started
            ShardedSecAggSimulation(warm, SeededRows(data_seed, dim, modulus), engine=engine,
                                    share_work=share_work, regroup=regroup).run()
            dconfig, drand = session()
            w0, c0 = time.perf_counter(), time.process_time()
            dsim, dres, dsteps = _round_on_workers(dconfig, drand, input_of, drop, engine,
                                                   share_work, regroup)
            distributed = {
                "engine": engine.name, "workers": engine.workers, "cluster": cluster,
                "seconds": round(time.perf_counter() - w0, 3),
                "cpu_seconds": round(time.process_time() - c0
                                     + float(dres.client_seconds.sum()), 3),
                "driver_cpu_seconds": round(time.process_time() - c0, 3),
                "completed": dres.completed,
                "result": dres.result,
                "regrouped_clients": dsim.regrouped,
                "pair_derivations": (dres.memo_stats or {}).get("misses", {}).get(
                    "pairwise_keys"),
                "steps": dsteps,
            }
            if repeats > 1:
                distributed.update(_speedup_pairs(
                    repeats, session, input_of, drop, engine, share_work, regroup))
        finally:
            engine.close()
    if distributed is not None:
        dist_result = distributed.pop("result")
        distributed["release_equal"] = bool(
            dist_result is not None and res.result is not None
            and np.array_equal(dist_result, res.result))
        distributed["one_worker_seconds"] = round(res.wall_seconds, 3)
        distributed["speedup"] = round(res.wall_seconds / max(distributed["seconds"], 1e-9), 3)
    correct = False
    if res.completed and res.result is not None:
        correct = bool(np.array_equal(input_of.total(sorted(res.survivors)), res.result))
    took_part = res.bytes_up > 0
    memo_stats = res.memo_stats
    saved = float(memo_stats["charged_seconds"]) if memo_stats else 0.0
    cpu_device = cpu_round + saved
    dprof = device_profile(prof, memo_stats)
    cats = category_seconds(dprof)
    primitives = primitive_table(dprof, bare_sample)
    sim_primitives = primitive_table(prof, bare_sample) if memo_stats else primitives
    bare_total = sum(v["bare_seconds"] for v in primitives.values())
    device_clients = (res.device_client_seconds if res.device_client_seconds is not None
                      else res.client_seconds)
    bits = (modulus - 1).bit_length()
    plain_bytes = dim * bits / 8
    up_mean = float(res.bytes_up[took_part].mean()) if took_part.any() else 0.0
    return {
        "clients": clients, "dim": dim, "graph": graph, "degree": config.degree,
        "threshold": config.threshold, "modulus": modulus, "dropout": dropout,
        "threat": threat, "malicious": malicious, "grinding_bits": grinding_bits,
        "seed": seed, "correct": correct,
        "corrupt_fraction": params.corrupt_fraction, "dropout_budget": params.dropout_rate,
        "min_honest": params.min_honest, "alpha": round(float(params.alpha or 0.0), 4),
        "log2_security_failure": params.log2_security_failure,
        "log2_correctness_failure": params.log2_correctness_failure,
        "aborted": not res.completed,
        "abort_reason": res.server_abort_reason.value if res.server_abort_reason else None,
        "survivors": len(res.survivors),
        "dropped": clients - len(res.survivors),
        "seconds": round(res.wall_seconds, 3),
        # the simulation's CPU (this process, pure work shared between its parties)
        "cpu_seconds": round(cpu_round, 3),
        # the CPU devices of their own would spend: nothing shared between parties
        "device_cpu_seconds": round(cpu_device, 3),
        "share_work": share_work, "memo": memo_stats,
        "profile_every": profile_every,
        "client_seconds_mean": round(float(res.client_seconds[took_part].mean()), 5),
        "device_client_seconds_mean": round(float(device_clients[took_part].mean()), 5),
        "client_seconds_max": round(float(res.client_seconds.max()), 5),
        "server_seconds": round(res.server_seconds, 3),
        "codec_seconds": round(res.codec_seconds, 3),
        "bytes_up_per_client": round(up_mean, 1),
        "bytes_down_per_client": round(float(res.bytes_down[took_part].mean()), 1),
        "expansion_up": round(up_mean / plain_bytes, 3),
        # per device: the operations devices of their own execute (the memo's hits
        # added back); simulation_primitives: what this process executed
        "primitives": primitives,
        "simulation_primitives": sim_primitives,
        "primitive_seconds_total": round(sum(cats.values()), 3),
        # the per-device round CPU over the bare cost of its X25519 operations, and
        # what that ratio would be if only the bare primitives cost CPU
        **floor_ratios(cpu_device, primitives),
        # the per-device round CPU over the bare cost of all its primitives
        "device_over_bare": round(cpu_device / bare_total, 3) if bare_total else None,
        # growth of the process's peak resident memory during the round, per client
        # (0 when the round fits in memory the process had already touched)
        "memory_per_client_kb": round(rss_growth / clients / 1024, 2),
        # wall and CPU of each step of the one-process run (distributed["steps"]: the
        # same on the workers, CPU then being this driver process's)
        "steps": steps,
        "distributed": distributed,
    }


def _run_by_steps(sim: Any) -> list[dict[str, Any]]:
    """Run a simulation (``start``, then ``step`` until it is finished, as ``run``
    does), timing each: the step (``"start"``: the clients' round 0; ``"close N"``: the
    server closes round ``N`` and the clients answer its messages), its wall seconds
    and this process's CPU seconds (on workers, the driver's share of the step)."""
    import time

    def timed(name: str, do: Any) -> dict[str, Any]:
        w0, c0 = time.perf_counter(), time.process_time()
        do()
        return {"step": name, "seconds": round(time.perf_counter() - w0, 4),
                "cpu_seconds": round(time.process_time() - c0, 4)}

    steps = [timed("start", sim.start)]
    while not sim.finished:
        steps.append(timed(f"close {sim.server.round}", sim.step))
    return steps


def _round_on_workers(config: Any, rand: Any, input_of: Any, drop: Any, engine: Any,
                      share_work: bool, regroup: bool | None
                      ) -> tuple[Any, Any, list[dict[str, Any]]]:
    """One round of ``config`` with its clients in shards on ``engine``'s workers: the
    simulation (what it regrouped), its :class:`SecAggRun` and its steps' times
    (:func:`_run_by_steps`)."""
    from protocol.core.secagg_shards import ShardedSecAggSimulation

    sim = ShardedSecAggSimulation(config, input_of, rand=rand, dropout=drop, engine=engine,
                                  share_work=share_work, regroup=regroup)
    steps = _run_by_steps(sim)
    return sim, sim.result(), steps


def _speedup_pairs(repeats: int, session: Any, input_of: Any, drop: Any, engine: Any,
                   share_work: bool, regroup: bool | None) -> dict[str, Any]:
    """``repeats`` pairs of the same round: in this process (wall), then on ``engine``'s
    workers (wall), each pair's ratio, their median, and whether every release was the
    one-process release."""
    import statistics
    import time

    import numpy as np

    from protocol.core.secagg_engine import run_secagg

    pairs, same = [], True
    for _ in range(repeats):
        config, rand = session()
        w0 = time.perf_counter()
        one = run_secagg(config, input_of, rand=rand, dropout=drop, share_work=share_work)
        one_wall = time.perf_counter() - w0
        config, rand = session()
        w0 = time.perf_counter()
        _, many, _ = _round_on_workers(config, rand, input_of, drop, engine, share_work,
                                       regroup)
        many_wall = time.perf_counter() - w0
        same = same and one.result is not None and many.result is not None and bool(
            np.array_equal(one.result, many.result))
        pairs.append({"one_worker_seconds": round(one_wall, 3),
                      "seconds": round(many_wall, 3),
                      "speedup": round(one_wall / max(many_wall, 1e-9), 3)})
    return {"repeats": repeats, "pairs": pairs,
            "speedup_median": round(statistics.median(p["speedup"] for p in pairs), 3),
            "pairs_release_equal": same}


def _peak_rss_bytes() -> int:
    """The process's peak resident set size so far (:mod:`protocol.core.memory`)."""
    from protocol.core.memory import peak_rss_bytes

    return peak_rss_bytes()


def bench_threat_price(clients: int, dim: int, *, graph: str = "harary",
                       dropout: float = 0.0, seed: int | None = None,
                       modulus: int = 1 << 32, repeats: int = 1, bare_sample: int = 2000,
                       grinding_bits: int | None = None,
                       progress: Any = None) -> dict[str, Any]:
    """The price of the malicious default, as ratios measured in one run.

    Three sessions on the same inputs, interleaved ``repeats`` times (medians of process
    CPU seconds: the simulation's; each session also reports the per-device medians,
    ``device_cpu_seconds_median`` and ``device_over_bare_median``): ``semi-honest`` and ``malicious`` each with the parameters
    :func:`secagg.params.find_params` gives its threat model, and
    ``semi-honest-at-malicious-parameters``, the semi-honest protocol run with the
    malicious model's ``(k, t)``. The three ratios split the price:
    ``malicious / semi-honest`` (the whole), ``parameters`` (semi-honest at the malicious
    ``(k, t)`` / semi-honest: what the larger graph and threshold cost) and ``protocol``
    (malicious / semi-honest at the same ``(k, t)``: signatures and the consistency
    round). ``grinding_bits`` applies to the malicious parameters (``None``: the default).

    Raises:
        StudyError: bad arguments or no parameters for a threat model.
    """
    import statistics

    if not isinstance(repeats, int) or repeats < 1:
        raise StudyError(f"repeats must be an int >= 1, got {repeats!r}")
    common = dict(graph=graph, dropout=dropout, seed=seed, modulus=modulus,
                  bare_sample=bare_sample)
    runs: dict[str, list[dict[str, Any]]] = {"semi-honest": [], "malicious": [],
                                             "semi-honest-at-malicious-parameters": []}
    for _ in range(repeats):
        mal = bench_secagg(clients, dim, threat="malicious", grinding_bits=grinding_bits,
                           **common)
        runs["malicious"].append(mal)
        if progress is not None:
            progress("malicious", mal)
        semi = bench_secagg(clients, dim, threat="semi-honest", **common)
        runs["semi-honest"].append(semi)
        if progress is not None:
            progress("semi-honest", semi)
        same = bench_secagg(clients, dim, threat="semi-honest", degree=mal["degree"],
                            threshold=mal["threshold"], **common)
        runs["semi-honest-at-malicious-parameters"].append(same)
        if progress is not None:
            progress("semi-honest-at-malicious-parameters", same)

    def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
        first = rows[0]
        sig = [r["primitives"]["signature"]["seconds"] for r in rows]
        return {
            "threat": first["threat"], "degree": first["degree"],
            "threshold": first["threshold"], "min_honest": first["min_honest"],
            "grinding_bits": first["grinding_bits"],
            "correct": all(r["correct"] for r in rows),
            "cpu_seconds": [r["cpu_seconds"] for r in rows],
            "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in rows),
            "device_cpu_seconds_median": statistics.median(r["device_cpu_seconds"]
                                                           for r in rows),
            "device_over_bare_median": statistics.median(r["device_over_bare"] or 0.0
                                                         for r in rows),
            "signature_seconds_median": statistics.median(sig),
            "bytes_up_per_client": first["bytes_up_per_client"],
            "bytes_down_per_client": first["bytes_down_per_client"],
        }

    out = {name: summary(rows) for name, rows in runs.items()}
    med = {name: v["cpu_seconds_median"] for name, v in out.items()}

    def ratio(a: str, b: str) -> float | None:
        return round(med[a] / med[b], 3) if med[b] > 0 else None

    return {
        "clients": clients, "dim": dim, "graph": graph, "dropout": dropout, "seed": seed,
        "modulus": modulus, "repeats": repeats, "sessions": out,
        "ratios": {
            "malicious_over_semi_honest": ratio("malicious", "semi-honest"),
            "parameters": ratio("semi-honest-at-malicious-parameters", "semi-honest"),
            "protocol": ratio("malicious", "semi-honest-at-malicious-parameters"),
        },
        "goal": 2.0,  # malicious over semi-honest simulation CPU at n = 1000, d = 1000
    }


def bench_shuffler(reports_count: int, payload_bytes: int = 32, crowds: int = 100,
                   seed: int | None = None) -> dict[str, Any]:
    """Time encode, shuffle and analyze on ``reports_count`` reports against the bare
    seal and open primitives (see the module docstring).

    Raises:
        StudyError: a bad count, payload size or crowd count.
    """
    import time

    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from shuffler import (
        Analyzer, CrowdKey, Encoder, HardThreshold, KeyPair, Shuffler,
    )
    from shuffler.keys import KEY_BYTES, open_sealed, seal
    from shuffler.messages import CROWD_ID_BYTES, LABEL_INNER, LABEL_OUTER, MAX_PAYLOAD

    n, psize = reports_count, payload_bytes
    if n < 1:
        raise StudyError("--reports must be >= 1")
    if not 0 <= psize <= MAX_PAYLOAD:
        raise StudyError(f"--payload-bytes must be in [0, {MAX_PAYLOAD}]")
    if crowds < 1:
        raise StudyError("--crowds must be >= 1")
    rand = (insecure_deterministic_randomness(seed, "bench-shuffler")
            if seed is not None else OsRandom())

    s_keys, a_keys = KeyPair.generate(rand), KeyPair.generate(rand)
    blob = rand.token_bytes(n * psize)
    reports = [blob[i * psize:(i + 1) * psize] for i in range(n)]
    ck = CrowdKey(rand.token_bytes(32), "bench", 0)
    crowd_of = [ck.crowd_id(i.to_bytes(4, "big")) for i in range(crowds)]
    crowd_ids = [crowd_of[i % crowds] for i in range(n)]

    # ---- bare primitives: same count and sizes, no framing -------------------------
    inner_pt = bytes(psize + 2)
    outer_pt = bytes(CROWD_ID_BYTES + KEY_BYTES + psize + 2 + 16)
    ad_i, ad_o = b"a" * 40, b"b" * 40  # associated data of header-like size
    bare_t = {"seal": 0.0, "open_outer": 0.0, "open_inner": 0.0}
    cpu = {"bare": 0.0, "pipeline": 0.0}
    sealed: list[tuple[bytes, bytes, bytes, bytes]] = []

    def bare_seal(count: int) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        secrets = rand.token_bytes(2 * KEY_BYTES * count)
        for j in range(count):
            o = 2 * KEY_BYTES * j
            ei, ci = seal(a_keys.public_key, secrets[o:o + KEY_BYTES], LABEL_INNER, inner_pt, ad_i)
            eo, co = seal(s_keys.public_key, secrets[o + KEY_BYTES:o + 2 * KEY_BYTES],
                          LABEL_OUTER, outer_pt, ad_o)
            sealed.append((ei, ci, eo, co))
        bare_t["seal"] += time.perf_counter() - t0
        cpu["bare"] += time.process_time() - c0

    def bare_open(part: slice, outer: bool) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        if outer:
            for _, _, eo, co in sealed[part]:
                open_sealed(s_keys, LABEL_OUTER, eo, co, ad_o)
        else:
            for ei, ci, _, _ in sealed[part]:
                open_sealed(a_keys, LABEL_INNER, ei, ci, ad_i)
        bare_t["open_outer" if outer else "open_inner"] += time.perf_counter() - t0
        cpu["bare"] += time.process_time() - c0

    def stage(fn):  # noqa: ANN001, ANN202
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu["pipeline"] += time.process_time() - c0
        return out, time.perf_counter() - t0

    first = n // 2
    lo, hi = slice(0, first), slice(first, n)
    # each pipeline stage runs between the two halves of its bare counterpart
    encoder = Encoder(s_keys.public_key, a_keys.public_key, "bench", 0, psize, rand)
    bare_seal(first)
    envelopes, enc_s = stage(lambda: encoder.encode_batch(reports, crowd_ids))
    bare_seal(n - first)

    shuffler = Shuffler(s_keys, rand, min_batch_size=1, threshold=HardThreshold(1))
    shuffler.open_batch(encoder.context)
    bare_open(lo, outer=True)
    (accepted, out), shuf_s = stage(
        lambda: (shuffler.submit_many(envelopes), shuffler.close_batch(encoder.context)))
    bare_open(hi, outer=True)

    analyzer = Analyzer(a_keys)
    bare_open(lo, outer=False)
    multiset, an_s = stage(lambda: analyzer.open_batch(out.batch).multiset())
    bare_open(hi, outer=False)

    if accepted != n or out.receipt.forwarded != n or sum(multiset.values()) != n:
        raise RuntimeError("benchmark pipeline lost reports")  # pragma: no cover

    pipe_s = enc_s + shuf_s + an_s
    bare_seal_s = bare_t["seal"]
    bare_open_s = bare_t["open_outer"] + bare_t["open_inner"]
    bare_s = bare_seal_s + bare_open_s
    ratio = bare_s / pipe_s
    result = {
        "benchmark": "shuffler",
        "reports": n,
        "payload_bytes": psize,
        "envelope_bytes": len(envelopes[0]),
        "crowds": crowds,
        "seed": seed,
        "encode_seconds": round(enc_s, 4),
        "shuffle_seconds": round(shuf_s, 4),
        "analyze_seconds": round(an_s, 4),
        "pipeline_seconds": round(pipe_s, 4),
        "bare_seal_seconds": round(bare_seal_s, 4),
        "bare_open_outer_seconds": round(bare_t["open_outer"], 4),
        "bare_open_inner_seconds": round(bare_t["open_inner"], 4),
        "bare_open_seconds": round(bare_open_s, 4),
        "bare_seconds": round(bare_s, 4),
        "encode_reports_per_s": round(n / enc_s, 1),
        "shuffle_reports_per_s": round(n / shuf_s, 1),
        "analyze_reports_per_s": round(n / an_s, 1),
        "pipeline_reports_per_s": round(n / pipe_s, 1),
        "bare_seals_per_s": round(2 * n / bare_seal_s, 1),
        "bare_opens_per_s": round(2 * n / bare_open_s, 1),
        "bare_reports_per_s": round(n / bare_s, 1),
        "overhead_ratio": round(ratio, 4),
        "overhead_ratio_definition": "bare (2 seals + 2 opens per report) seconds / "
                                     "pipeline (encode + shuffle + analyze) seconds",
        "pipeline_cpu_seconds": round(cpu["pipeline"], 4),
        "bare_cpu_seconds": round(cpu["bare"], 4),
        "overhead_ratio_cpu": round(cpu["bare"] / cpu["pipeline"], 4),
        "acceptance_min_ratio": 0.75,
        "acceptance_met": ratio >= 0.75,
        "seconds": round(pipe_s + bare_s, 4),
    }
    return result


def bench_blinded(clients: int, items: int, threshold: int, seed: int | None
                  ) -> dict[str, Any]:
    """Run the blinded crowd-id pipeline once (see the module docstring)."""
    import collections
    import time

    import numpy as np

    from protocol.core.randomness import OsRandom, insecure_deterministic_randomness
    from shuffler.blinded import Blinder, DecryptorKey, encrypt_crowd

    rand = insecure_deterministic_randomness(seed) if seed is not None else OsRandom()
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, items + 1) ** 1.1
    draws = rng.choice(items, size=clients, p=p / p.sum())
    values = [int(v).to_bytes(4, "big") for v in draws]
    ctx = b"fedhh bench blinded"
    cpu: dict[str, float] = {}
    t = time.process_time()
    key = DecryptorKey.generate(rand)
    blinder = Blinder(key.public, rand)
    cts = [encrypt_crowd(v, ctx, key.public, rand) for v in values]
    cpu["clients"] = time.process_time() - t
    t = time.process_time()
    blinded, dropped = blinder.blind_and_shuffle(cts, ctx)
    cpu["shuffler1"] = time.process_time() - t
    t = time.process_time()
    sizes = collections.Counter(key.crowd_id(c) for c in blinded)
    kept = sorted(k for k in sizes.values() if k >= threshold)
    cpu["shuffler2"] = time.process_time() - t
    plain = collections.Counter(values)
    expected = sorted(k for k in plain.values() if k >= threshold)
    return {
        "clients": clients, "items": items, "threshold": threshold, "seed": seed,
        "crowds": len(sizes), "forwarded_crowds": len(kept), "dropped": dropped,
        "correct": kept == expected and len(sizes) == len(plain),
        "cpu_seconds": {k: round(v, 3) for k, v in cpu.items()},
        "cpu_seconds_per_client": {k: v / clients for k, v in cpu.items()},
        # one process plays every party, so the run's time is their CPU time summed
        "seconds": round(sum(cpu.values()), 3),
    }


def bench_fo(mechanism: str = "olh", users: int = 100_000, domain: int = 1000,
             epsilon: float = 2.0, seed: int | None = None) -> dict[str, Any]:
    """Time a frequency oracle's randomisation and its estimation over the whole domain
    on a synthetic Zipf(1.1) population; ``max_abs_z`` checks the estimates.

    Raises:
        StudyError: bad oracle parameters or sizes.
    """
    import numpy as np

    from mechanisms.fo import OracleInputError, make_oracle
    from protocol.studies.datasets_items import zipf_population
    from protocol.studies.measure import Timer

    try:
        oracle = make_oracle(mechanism, epsilon, domain)
        rng = np.random.default_rng(seed)
        values = zipf_population(users, domain, 1.1, rng)
    except (OracleInputError, ValueError) as exc:
        raise StudyError(str(exc)) from None
    timer = Timer()
    with timer.phase("randomize"):
        reports = oracle.randomize(values, rng)
    with timer.phase("estimate"):
        est = oracle.estimate(reports)
    truth = np.bincount(values, minlength=domain) / users
    z = (est - truth) / np.sqrt(oracle.variance(users, truth))
    out = {
        "bench": "fo", "mechanism": oracle.name, "users": users, "domain": domain,
        "epsilon": epsilon,
        "params": {k: getattr(oracle, k) for k in ("g", "B") if hasattr(oracle, k)},
        "randomize_seconds": round(timer.seconds["randomize"], 4),
        "estimate_seconds": round(timer.seconds["estimate"], 4),
        "seconds": round(sum(timer.seconds.values()), 4),
        "max_abs_z": round(float(np.max(np.abs(z))), 3),
    }
    return out


def bench_committee(candidates: int, theta: int, runs: int, seed: int | None,
                    clients: int = 10_000) -> dict[str, Any]:
    """The committee's comparison of ``candidates`` counts with ``theta``: the verified
    committee (the malicious default) and the semi-honest one, run alternately ``runs``
    times each on the same counts; medians of CPU per candidate and member (the three
    members run in one process, so a run's CPU is divided by three) and the bytes each
    member sends per candidate. Both results are checked against the plaintext rule.
    The semi-honest ring is the one the transport uses for a round of ``clients``."""
    import os
    import statistics
    import time

    import numpy as np

    from protocol.core.committee import field as F
    from protocol.core.committee import ring_bits, run_committee
    from protocol.core.committee.verified import (
        STATISTICAL_SECURITY_BITS, run_verified_committee,
    )
    from protocol.core.randomness import insecure_deterministic_randomness

    if candidates < 1 or theta < 1 or runs < 1:
        raise StudyError("candidates, theta and runs must be >= 1")
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3 * theta, candidates).astype(np.uint64)
    want = x >= theta
    k = ring_bits(max(int(x.max()), int(clients)), theta)
    mask = np.uint64((1 << k) - 1)

    def rands(i: int) -> Any:
        if seed is None:
            return None
        base = insecure_deterministic_randomness(seed * 1000 + i, "bench-committee")
        return [base.child(f"p{j}") for j in range(3)]

    cpu: dict[str, list[float]] = {"verified": [], "semi_honest": []}
    sent: dict[str, int] = {}
    correct = True
    for i in range(runs):
        c0 = rng.integers(0, F.P, candidates, dtype=np.uint64)
        c1 = rng.integers(0, F.P, candidates, dtype=np.uint64)
        comps = [c0, c1, F.sub(F.sub(x, c0), c1)]
        pairs = [(comps[j], comps[(j + 1) % 3]) for j in range(3)]
        t = time.process_time()
        out = run_verified_committee(pairs, theta, context=os.urandom(32),
                                     reveal_counts=False, rands=rands(i))
        cpu["verified"].append(time.process_time() - t)
        sent["verified"] = max(out.bytes_sent)
        correct &= bool(np.array_equal(out.passed, want))
        r1 = rng.integers(0, 1 << 63, candidates, dtype=np.uint64) & mask
        r2 = rng.integers(0, 1 << 63, candidates, dtype=np.uint64) & mask
        shares = [(x + r1 + r2) & mask, (np.uint64(0) - r1) & mask, (np.uint64(0) - r2) & mask]
        t = time.process_time()
        semi = run_committee(shares, k, theta, reveal_counts=False, rands=rands(i + runs))
        cpu["semi_honest"].append(time.process_time() - t)
        sent["semi_honest"] = max(semi.bytes_sent)
        correct &= bool(np.array_equal(semi.passed, want))
    med = {name: statistics.median(v) for name, v in cpu.items()}
    per = {name: {"cpu_us_per_candidate_and_member": round(1e6 * med[name] / 3 / candidates, 2),
                  "bytes_per_candidate_and_member": round(sent[name] / candidates, 1),
                  "seconds_median": round(med[name], 4)} for name in cpu}
    return {
        "candidates": candidates, "theta": theta, "runs": runs, "seed": seed,
        "clients": clients,
        "semi_honest_ring_bits": k, "field": "F_p, p = 2^61 - 1",
        "statistical_security_bits": STATISTICAL_SECURITY_BITS, "correct": correct,
        **per,
        "verified_over_semi_honest": {
            "cpu": round(med["verified"] / med["semi_honest"], 2),
            "bytes": round(sent["verified"] / sent["semi_honest"], 2)},
        "seconds": round(sum(sum(v) for v in cpu.values()), 3),
        "peak_rss_mb": round(_peak_rss_bytes() / 2**20, 1),
    }
