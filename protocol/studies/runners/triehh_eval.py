"""Repeated TrieHH runs (Zhu et al. 2020) with CSV results and plots (``fedhh eval triehh``).

Writes into the output directory:

* ``discovery.csv``: one row per run and per word (the ``csv_top`` most frequent
  words plus every discovered word): true rank, holders, true frequency, whether it
  was discovered, its released count, and the Proposition 1 worst-case bound;
* ``metrics.csv``: precision, recall and F1 at K for every run and K = 1..``kmax``;
* ``summary.json``: parameters, guarantee, mean metrics at K = 10, 50, 100 and the
  checks (every released word occurs; words with a worst-case rate >= 0.9 found);
* ``discovery.png`` (Figure 3 style) and ``recall.png`` (Figure 4 style);
* ``runs.jsonl``: each run's release as it finishes
  (:class:`protocol.studies.evaluation.Journal`); with ``resume`` the runs found there
  are kept and only the others run. On an interrupt the files above are written from
  the finished runs before the ``KeyboardInterrupt`` propagates.

The population is drawn once (from the seed); the runs use independent streams.
"""
from __future__ import annotations

import csv
import json
import math
import pathlib
import time
from typing import Any, Callable, Iterable

from protocol.core.contract import Transport
from protocol.studies.errors import StudyError
from protocol.studies.runners.triehh import TrieHHOptions, prepare, run_once

__all__ = ["evaluate"]


def evaluate(opts: TrieHHOptions, transport: Transport, out: str | pathlib.Path, *,
             runs: int = 10, csv_top: int = 2000, kmax: int = 200,
             progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
             resume: bool = False, say: Callable[[str], None] = lambda _msg: None,
             corrupt: Any = None) -> dict[str, Any]:
    """Run TrieHH ``runs`` times on one population, write the files above into ``out``
    (created if missing) and return the summary. ``progress`` wraps the runs; ``say``
    receives a line when runs are resumed or the evaluation is interrupted.
    ``corrupt``: corrupted clients in every run (as
    :func:`protocol.studies.runners.triehh.run`; default: those set on the transport):
    each run is compared with plain TrieHH over its honest clients' votes on the same
    samples, and the summary has a ``corrupted`` section (per run and in all) and
    ``input["corrupt_target"]``.

    Raises:
        StudyError: bad counts, an output directory that cannot be created, ``resume``
            without a seed, a journal written with other options, corrupted clients the
            transport cannot simulate, or as
            :func:`protocol.studies.runners.triehh.prepare` and ``run_once``.
    """
    from protocol.studies.corrupted import corrupt_from_transport
    from protocol.studies.runners.triehh import aim, run_corrupted

    c = corrupt_from_transport(transport, corrupt)
    import numpy as np

    from mechanisms.triehh_privacy import discovery_rate
    from mechanisms.metrics import precision, topk_metrics
    from protocol.studies.evaluation import output_dir, plot_discovery_rate, plot_recall_at_k

    if runs < 1:
        raise StudyError("--runs must be >= 1")
    if kmax < 1 or csv_top < 1:
        raise StudyError("--kmax and --csv-top must be >= 1")
    out_dir = output_dir(out)
    prep, run_rng = prepare(opts)
    aimed = aim(prep, c, transport)
    pop = prep.population
    n, theta, L = prep.n, int(prep.config.theta), int(prep.config.max_levels)
    ranking = pop.ranking()
    truth = [pop.vocabulary[i] for i in ranking]
    words_in_pop = set(truth)
    freq = pop.frequency()
    holders = pop.holders()
    single = prep.data.one_per_user
    U = prep.alphabet.unit_size

    if resume and opts.seed is None:
        raise StudyError("--resume needs --seed: the remaining runs must continue the "
                         "same population and random streams")
    from dataclasses import asdict

    from mechanisms.triehh import TrieHH
    from protocol.studies.evaluation import JOURNAL, Journal

    config = {"evaluation": "triehh", "options": asdict(opts), "runs": runs,
              "csv_top": csv_top, "kmax": kmax,
              "transport": {k: getattr(transport, k) for k in
                            ("name", "threat", "graph", "dropout", "grinding_bits")
                            if isinstance(getattr(transport, k, None), (str, int, float))}}
    if aimed is not None:
        config["corrupt"] = {**aimed.clients.as_dict(), "target": aimed.word}
        if getattr(transport, "committee_input", None) is not None:
            config["transport"]["committee_input"] = transport.committee_input
    from protocol.studies.runners.triehh import _duration, _m, cpu_phrase, estimate_seconds

    predicted = estimate_seconds(prep, transport)
    if predicted is not None and predicted * runs > 60:
        say(f"estimate: up to {cpu_phrase(predicted * runs, transport, _m(prep))} for "
            f"{runs} runs over "
            f"{opts.transport} ({_duration(predicted)} per run, from a measured per-client "
            "cost)")
    results: list[_Run] = []
    seconds: list[float] = []
    corrupted_runs: list[dict[str, Any]] = []
    interrupted = False
    rngs = run_rng.spawn(runs)
    with Journal(out_dir / JOURNAL, config, resume=resume, say=say) as journal:
        try:
            for r, rng in enumerate(progress(rngs) if progress is not None else rngs):
                kept = journal.get([r])
                if kept is None:
                    t0 = time.perf_counter()
                    if aimed is None:
                        res = run_once(prep, transport, rng)
                    else:
                        res, sec = run_corrupted(prep, transport, rng, aimed)
                    kept = {"heavy_hitters": [[w, n] for w, n in res.heavy_hitters.items()],
                            "seconds": time.perf_counter() - t0}
                    if aimed is not None:
                        kept["corrupted"] = _run_corruption(sec)
                    journal.record([r], kept)
                results.append(_Run({w: n for w, n in kept["heavy_hitters"]}))
                seconds.append(float(kept["seconds"]))
                if aimed is not None:
                    corrupted_runs.append(kept.get("corrupted") or {})
        except KeyboardInterrupt:
            say(f"interrupted: {len(journal)} finished runs are in {journal.path} (the files "
                "are drawn from them); continue with --resume and the same options")
            if not results:
                raise
            interrupted = True
    runs = len(results)  # fewer than asked only after an interrupt
    # the parameters (batch size, guarantee) do not depend on a run's randomness
    mech = TrieHH(prep.data, prep.alphabet, prep.config, transport, run_rng.spawn(1)[0])
    m = mech.m
    guarantee, guarantee_note = mech.guarantee()

    def bound_for(word_ids: np.ndarray) -> np.ndarray:
        if not single:
            return np.full(word_ids.size, np.nan)
        lengths = np.array([len(pop.vocabulary[i]) for i in word_ids])
        fits = (lengths + U) // U <= L
        b = np.asarray(discovery_rate(holders[word_ids], n, m, theta, L), dtype=float)
        return np.where(fits, b, 0.0)

    index = {w: i for i, w in enumerate(pop.vocabulary)}
    top_ids = ranking[:csv_top]
    rank_pos = {int(w): r + 1 for r, w in enumerate(ranking)}
    extra = sorted({w for r in results for w in r.heavy_hitters if w in index}
                   - {pop.vocabulary[i] for i in top_ids})
    ids = np.concatenate([top_ids, np.array([index[w] for w in extra], dtype=np.int64)])
    bounds = bound_for(ids)
    found = np.array([[pop.vocabulary[i] in r.heavy_hitters for i in ids] for r in results])
    with open(out_dir / "discovery.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["run", "word", "true_rank", "holders", "true_frequency", "discovered",
                     "released_count", "prop1_bound"])
        for r_i, res in enumerate(results):
            for j, wid in enumerate(ids):
                word = pop.vocabulary[wid]
                wr.writerow([r_i, word, rank_pos.get(int(wid), ""), int(holders[wid]),
                             f"{freq[wid]:.6g}", int(found[r_i, j]),
                             _count(res.heavy_hitters.get(word)),
                             "" if math.isnan(bounds[j]) else f"{bounds[j]:.6g}"])
            for word in res.heavy_hitters:  # released words absent from the population
                if word not in index:
                    wr.writerow([r_i, word, "", 0, 0, 1, _count(res.heavy_hitters[word]), ""])

    ks = np.arange(1, kmax + 1)
    rec = np.zeros((len(results), ks.size))
    f1 = np.zeros_like(rec)
    prec = np.zeros_like(rec)
    with open(out_dir / "metrics.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["run", "k", "precision", "recall", "f1"])
        for r_i, res in enumerate(results):
            for j, k in enumerate(ks):
                mt = topk_metrics(res.heavy_hitters, truth, int(k))
                prec[r_i, j], rec[r_i, j], f1[r_i, j] = mt.precision, mt.recall, mt.f1
                wr.writerow([r_i, int(k), f"{mt.precision:.6g}", f"{mt.recall:.6g}",
                             f"{mt.f1:.6g}"])

    rate = found.mean(axis=0)
    g = guarantee
    title = (f"TrieHH on {pop.name}, n={n:,}, eps={g.epsilon:.2f}, theta={theta}, m={m}, "
             f"L={L}, U={U}, {runs} runs" if g else f"TrieHH on {pop.name}, n={n:,}")
    top_mask = np.arange(ids.size) < top_ids.size
    fr = freq[ids][top_mask]
    if single and fr.size:
        grid = np.logspace(math.log10(max(fr.min(), 1.0 / n)), math.log10(fr.max()), 200)
        curve = np.asarray(discovery_rate(np.round(grid * n).astype(np.int64), n, m, theta, L))
    else:
        grid, curve = None, None
    plot_discovery_rate(out_dir / "discovery.png", fr, rate[top_mask], grid, curve, title)
    plot_recall_at_k(out_dir / "recall.png", ks, rec, f1, title)

    def at(k: int) -> dict[str, float]:
        j = min(k, kmax) - 1
        return {"k": k, "precision": float(prec[:, j].mean()), "recall": float(rec[:, j].mean()),
                "f1": float(f1[:, j].mean()), "recall_min": float(rec[:, j].min())}

    all_real = all(w in words_in_pop for r in results for w in r.heavy_hitters)
    summary: dict[str, object] = {
        "dataset": pop.name, "n": n, "runs": runs, "unit_size": U,
        "multi_word": not single, "transport": opts.transport,
        "privacy": g.as_dict() if g else guarantee_note,
        "theta": theta, "gamma": float(prep.config.gamma), "m": m, "L": L,
        "seconds_per_run_mean": float(np.mean(seconds)),
        "discovered_per_run_mean": float(np.mean([len(r.heavy_hitters) for r in results])),
        "precision_mean": float(np.mean([precision(r.heavy_hitters, words_in_pop)
                                         for r in results])),
        "all_released_in_population": all_real,
        "at_k": [at(k) for k in (10, 50, 100) if k <= kmax],
        "out": str(out_dir),
    }
    if single:
        sure = np.flatnonzero(top_mask & (bounds >= 0.9))
        summary["prop1_bound_ge_0.9"] = {
            "words": int(sure.size),
            "min_discovery_rate": float(rate[sure].min()) if sure.size else None,
            "words_below_0.85": [pop.vocabulary[ids[j]] for j in sure if rate[j] < 0.85],
        }
    if aimed is not None:
        summary["input"] = {"corrupt_target": aimed.input_note()}
        summary["corrupted"] = _corruption_summary(aimed, corrupted_runs)
    summary["runs_requested"] = len(rngs)
    with open(out_dir / "summary.json", "w") as fh:
        json.dump(summary, fh, indent=2)
    if interrupted:
        raise KeyboardInterrupt
    return summary


class _Run:
    """One run's release as the evaluation uses it (from the run or the journal)."""

    __slots__ = ("heavy_hitters",)

    def __init__(self, heavy_hitters: dict[str, int | None]) -> None:
        self.heavy_hitters = heavy_hitters


def _count(c: int | None) -> str | int:
    """A released count for the CSV: empty when counts were not released."""
    return "" if c is None else c


def _run_corruption(sec: dict[str, Any]) -> dict[str, Any]:
    """What one run's corrupted clients achieved, as the journal keeps it."""
    t = sec["totals"]
    return {"release_equals_honest": sec["release_equals_honest"],
            "target_released": sec["target_released"],
            "added_heavy_hitters": sec["added_heavy_hitters"],
            "removed_heavy_hitters": sec["removed_heavy_hitters"],
            "rounds": t["rounds"], "rounds_matching_honest": t["rounds_matching_honest"],
            "corrupted_reports": t["corrupted_reports"], "counted": t["counted"],
            "dropped_corrupted": t["dropped_corrupted"]}


def _corruption_summary(aimed: Any, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The evaluation's ``corrupted`` section: who, what, and per run and in all what
    the corrupted clients achieved."""
    from protocol.core.corruption import STRATEGIES
    from protocol.studies.corrupted import who

    c = aimed.clients
    dropped: dict[str, int] = {}
    for r in runs:
        for k, v in (r.get("dropped_corrupted") or {}).items():
            dropped[k] = dropped.get(k, 0) + v
    return {
        "strategy": c.strategy, "description": STRATEGIES[c.strategy], "who": who(c),
        "seed": c.seed, "target": aimed.word, "target_chosen": aimed.chosen,
        "honest_comparison": "plain TrieHH over the honest clients' votes on the same "
                             "samples (the corrupted clients abstain), per run",
        "runs": runs,
        "totals": {"runs": len(runs),
                   "runs_release_equals_honest": sum(bool(r.get("release_equals_honest"))
                                                     for r in runs),
                   "runs_target_released": sum(bool(r.get("target_released")) for r in runs),
                   "corrupted_reports": sum(int(r.get("corrupted_reports", 0)) for r in runs),
                   "counted": sum(int(r.get("counted", 0)) for r in runs),
                   "dropped_corrupted": dropped},
    }
